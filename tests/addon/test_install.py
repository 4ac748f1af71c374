"""Install the built zip into a fresh Blender the way a user does, enable it, use it."""

import zipfile

import pytest

from tools.blender_session import EXTENSION_MODULE, call_in_blender, run_in_blender

pytestmark = pytest.mark.blender


def test_zip_holds_only_what_blender_needs(extension_zip):
    names = zipfile.ZipFile(extension_zip).namelist()
    assert {"blender_manifest.toml", "__init__.py", "itasc_addon/__init__.py"} <= set(names)
    top = {name.split("/")[0] for name in names}
    assert top <= {"blender_manifest.toml", "__init__.py", "solver", "itasc_addon"}
    assert not [n for n in names if "__pycache__" in n or "/." in n or n.startswith(".")]


INSTALLED = f"""
import importlib
import addon_utils, bpy

module = "{EXTENSION_MODULE}"
solver = importlib.import_module(module + ".solver")
result = {{
    "blender": bpy.app.version_string,
    "loaded": addon_utils.check(module),
    "in_preferences": module in bpy.context.preferences.addons,
    "solver_dir": list(solver.__path__)[0],
    "user_extensions": bpy.utils.user_resource("EXTENSIONS"),
}}
bpy.ops.preferences.addon_disable(module=module)
result["loaded_after_disable"] = addon_utils.check(module)
"""


def test_install_enable_and_import_solver_inside_blender(extension_zip):
    result = run_in_blender(INSTALLED, extension_zip=extension_zip)
    assert result["loaded"] == [True, True]
    assert result["in_preferences"]
    assert result["solver_dir"].startswith(result["user_extensions"])
    assert result["loaded_after_disable"] == [False, False]


def test_call_in_blender_runs_a_named_body_with_arguments(extension_zip):
    result = call_in_blender("smoke:versions", extension_zip=extension_zip, scale=3.0)
    assert result["api"] and result["scale"] == 6.0 and len(result["blender"]) == 3
    assert call_in_blender("smoke:repository_importable", extension_zip=extension_zip) is False

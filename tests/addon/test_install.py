"""Install the built zip into a fresh Blender the way a user does, enable it, use it."""

import zipfile

import pytest

from tools import build_extension
from tools.blender_session import EXTENSION_MODULE, call_in_blender

pytestmark = pytest.mark.blender


def test_zip_holds_only_what_blender_needs(extension_zip):
    names = zipfile.ZipFile(extension_zip).namelist()
    assert {"blender_manifest.toml", "__init__.py", "itasc_addon/__init__.py"} <= set(names)
    top = {name.split("/")[0] for name in names}
    assert top <= {"blender_manifest.toml", "__init__.py", "solver", "itasc_addon", "wheels"}
    wheels = [n for n in names if n.startswith("wheels/")]
    assert wheels == [w.removeprefix("./") for w in build_extension.manifest()["wheels"]]
    assert not [n for n in names if "__pycache__" in n or "/." in n or n.startswith(".")]


def test_install_enable_and_import_solver_inside_blender(extension_zip):
    result = call_in_blender("install:installed_and_disabled", extension_zip=extension_zip,
                             module=EXTENSION_MODULE)
    assert result["loaded"] == [True, True]
    assert result["in_preferences"]
    assert result["solver_dir"].startswith(result["user_extensions"])
    assert result["loaded_after_disable"] == [False, False]


def test_call_in_blender_runs_a_named_body_with_arguments(extension_zip):
    result = call_in_blender("smoke:versions", extension_zip=extension_zip, scale=3.0)
    assert result["api"] and result["scale"] == 6.0 and len(result["blender"]) == 3
    assert call_in_blender("smoke:repository_importable", extension_zip=extension_zip) is False

"""Add-on tests: build the extension zip once per session, validated by Blender's own validator.

The Blender side of every session is `tools.blender_session.blender_python()`: this interpreter,
or ``$ITASC_TEST_PYTHON`` when set. `make test` runs this folder twice: on bpy 5.0.1 (.venv) and
with ``ITASC_TEST_PYTHON=.venv-blender-4.2/bin/python`` on Blender 4.2 LTS, the oldest line the
manifest admits; the zip must then pass both Blenders' validators.
"""

import os
import subprocess
import sys

import pytest

from tools import build_extension
from tools.blender_session import ROOT, blender_python


def _validate_with(python, zip_path):
    """Blender's extension validator as the bpy installed for `python` ships it."""
    code = "import sys; from tools import build_extension; print(build_extension.validate(sys.argv[1]))"
    proc = subprocess.run([python, "-c", code, str(zip_path)], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise build_extension.BuildError(f"validator of {python} failed:\n{proc.stdout}{proc.stderr}")


@pytest.fixture(scope="session")
def extension_zip(tmp_path_factory):
    path = build_extension.write_zip(tmp_path_factory.mktemp("dist"))
    build_extension.validate(path)
    if os.path.abspath(sys.executable) != blender_python():
        _validate_with(blender_python(), path)
    return path


def pytest_report_header(config):
    python = blender_python()
    proc = subprocess.run([python, "-c", "import bpy; print(bpy.app.version_string)"],
                          capture_output=True, text=True)
    version = proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else "no bpy"
    return f"Blender side of the add-on tests: {version} ({python})"

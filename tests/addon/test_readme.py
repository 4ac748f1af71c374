"""The README's "Using it from Python" snippet runs as written in a fresh Blender."""

import re
import shutil

import pytest

from tools.blender_session import EXTENSION_MODULE, ROOT, run_in_blender

pytestmark = pytest.mark.blender


def readme_snippet():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it from Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_snippet_installs_and_enables_the_extension(extension_zip, tmp_path):
    (tmp_path / "dist").mkdir()
    shutil.copy(extension_zip, tmp_path / "dist")
    check = f"\nresult = addon_utils.check({EXTENSION_MODULE!r})\n"
    assert run_in_blender(readme_snippet() + check, cwd=tmp_path) == [True, True]

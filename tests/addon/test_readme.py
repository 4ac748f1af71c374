"""The README's "Using it from Python" snippet runs as written in a fresh Blender."""

import re
import shutil

import pytest

from tools.blender_session import EXTENSION_MODULE, ROOT, call_in_blender

pytestmark = pytest.mark.blender


def readme_snippet():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it from Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_snippet_installs_enables_and_bakes(extension_zip, tmp_path):
    (tmp_path / "dist").mkdir()
    shutil.copy(extension_zip, tmp_path / "dist")
    out = call_in_blender("readme:run_snippet", snippet=readme_snippet(), folder=str(tmp_path),
                          module=EXTENSION_MODULE)
    assert out["enabled"] == [True, True]
    # Within the precision (1e-6 m) beyond what Blender's float32 evaluation resolves there.
    assert out["frames"] == list(range(1, 25)) and out["converged"] and out["past_floor"] <= 1e-6
    assert out["error"] <= 2e-6

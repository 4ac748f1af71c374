"""Add-on tests: build the extension zip once per session, validated by Blender's own validator."""

import pytest

from tools import build_extension


@pytest.fixture(scope="session")
def extension_zip(tmp_path_factory):
    path = build_extension.write_zip(tmp_path_factory.mktemp("dist"))
    build_extension.validate(path)
    return path

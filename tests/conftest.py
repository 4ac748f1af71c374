"""Shared pytest setup: the repository root is importable, and Blender tests are marked.

Tests marked ``blender`` start real Blender (the ``bpy`` wheel) in subprocesses. Without bpy
installed they are skipped, except under CI (``CI=true``), where a missing bpy is a failure.
"""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HAVE_BPY = importlib.util.find_spec("bpy") is not None


def pytest_configure(config):
    config.addinivalue_line("markers", "blender: runs real Blender (bpy as a module) in a subprocess")


def pytest_collection_modifyitems(config, items):
    if HAVE_BPY or os.environ.get("CI"):
        return
    skip = pytest.mark.skip(reason="bpy not installed (pip install -r requirements-blender.txt)")
    for item in items:
        if "blender" in item.keywords:
            item.add_marker(skip)

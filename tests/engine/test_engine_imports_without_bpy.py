"""The engine must import with numpy alone: no bpy, no mathutils, anywhere under solver/."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLENDER_MODULES = {"bpy", "mathutils", "bmesh", "bl_math", "addon_utils"}

# Block Blender's modules, then import solver and every submodule (except __main__).
IMPORT_ALL = """
import importlib, pkgutil, sys
for name in ("bpy", "mathutils"):
    sys.modules[name] = None
import solver
for info in pkgutil.walk_packages(solver.__path__, "solver."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
"""


def test_solver_imports_in_fresh_python_without_blender():
    proc = subprocess.run([sys.executable, "-c", IMPORT_ALL], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_no_solver_source_mentions_a_blender_import():
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "solver").rglob("*.py"))
        for name in _imported_modules(path)
        if name in BLENDER_MODULES
    ]
    assert not offenders

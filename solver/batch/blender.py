"""Blender for the batch kinds that need it ('retarget'): which Python runs it, and one run of the
add-on's batch worker (itasc_addon/retarget/batch_worker.py) in a process of its own.

The solver never imports `bpy`: each clip runs in a fresh process of the Python that has it, so
a clip that crashes Blender takes only its own process down. That process starts with Blender's
factory preferences (its user resources in a temporary folder): the user's own add-ons and
extensions, this one among them, are not loaded beside the worker's copy.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER = Path(__file__).resolve().parents[2] / "itasc_addon" / "retarget" / "batch_worker.py"
_USER_PATH_VARS = ("BLENDER_USER_CONFIG", "BLENDER_USER_SCRIPTS", "BLENDER_USER_DATAFILES", "BLENDER_USER_EXTENSIONS")


class BlenderError(Exception):
    """A run of the worker failed: its message, or how Blender ended."""


def has_bpy(python) -> bool:
    """Whether the interpreter `python` can import bpy (found, not imported: that starts Blender)."""
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        return importlib.util.find_spec("bpy") is not None
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('bpy') is None)"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def blender_python(path=None) -> str:
    """The Python that runs Blender: `path` if given, else this one; ValueError where it has no bpy."""
    if not WORKER.is_file():
        raise ValueError(f"the add-on's batch worker is missing ({WORKER}): the retarget kind runs from the "
                         "extension's folder (solver/ beside itasc_addon/)")
    python = os.path.abspath(path) if path else sys.executable
    if path and not os.path.isfile(python):
        raise ValueError(f"--blender-python {path}: no such file")
    if not has_bpy(python):
        if path:
            raise ValueError(f"--blender-python {path} cannot import bpy (pip install bpy in that environment)")
        raise ValueError(f"this Python ({python}) cannot import bpy: pass --blender-python PATH, a Python with "
                         "Blender as a module (pip install bpy)")
    return python


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def run_worker(python: str, arguments: list, folder: Path, report: Path) -> dict:
    """Run the worker with `arguments` (the report at `report`) in `folder`; its figures, or
    BlenderError with its message (or, for a crash, the signal and the end of its output)."""
    env = {k: v for k, v in os.environ.items() if k not in _USER_PATH_VARS}
    env.update(BLENDER_USER_RESOURCES=str(folder / "resources"), HOME=str(folder))
    (folder / "resources").mkdir(exist_ok=True)
    with open(folder / "output.txt", "wb") as output:
        proc = subprocess.Popen([python, str(WORKER), *arguments, "--report", str(report)], cwd=folder, env=env,
                                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None:            # a loop in Python, so that a trial's time limit lands here
                time.sleep(0.02)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    try:
        figures = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        figures = None
    if isinstance(figures, dict) and "error" in figures:
        raise BlenderError(figures["error"])
    if proc.returncode != 0 or figures is None:
        if proc.returncode < 0:
            try:
                how = f"Blender crashed ({signal.Signals(-proc.returncode).name})"
            except ValueError:
                how = f"Blender crashed (signal {-proc.returncode})"
        else:
            how = f"Blender ended with exit status {proc.returncode} and no report"
        tail = _tail(folder / "output.txt")
        raise BlenderError(how + (f"; its output ended:\n{tail}" if tail else ""))
    return figures


def retarget_clip(python: str, rig_file, clip, options: dict) -> tuple:
    """(the .blend's bytes, the figures) of one clip retargeted onto the rig in `rig_file`."""
    with tempfile.TemporaryDirectory(prefix="itasc-retarget-") as tmp:
        tmp = Path(tmp)
        blend = tmp / "out.blend"
        arguments = ["--rig-file", str(rig_file), "--clip", str(clip), "--blend", str(blend),
                     "--scale", repr(float(options.get("scale", 1.0)))]
        for option in ("rig", "calibration_frame", "bone_map"):
            if options.get(option) is not None:
                arguments += ["--" + option.replace("_", "-"), str(options[option])]
        figures = run_worker(python, arguments, tmp, tmp / "report.json")
        return blend.read_bytes(), figures

"""Blender for the batch kinds that need it ('retarget'): which Python runs it, and the Blender
process that runs the add-on's batch worker (itasc_addon/retarget/batch_worker.py).

The solver never imports `bpy`: each Dask worker (a process, or a thread of a threads cluster)
keeps one Blender process of the Python that has it, started on its first clip, and hands it
one clip after another (the rig file opened anew for each). A clip that raises is answered with
its message and the next goes on; a clip that crashes Blender, or runs over its time limit (the
process is killed), fails alone and the next clip starts a new Blender. That process runs its
BLAS on one thread (each worker has a core) and starts with Blender's factory preferences (its
user resources in a temporary folder): the user's own add-ons and extensions, this one among
them, are not loaded beside the worker's copy. It ends when its stdin closes (its Dask worker
process gone), at `close_all` or at this process's exit.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ..runtime import ONE_THREAD_ENV

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


class BlenderProcess:
    """A Blender process running the worker (module docstring): `retarget` sends it one clip and
    waits for its answer. After a crash or a stop (the time limit) it is gone: `alive` is false."""

    def __init__(self, python: str):
        self.folder = Path(tempfile.mkdtemp(prefix="itasc-blender-"))
        (self.folder / "resources").mkdir()
        env = {k: v for k, v in os.environ.items() if k not in _USER_PATH_VARS}
        env.update(BLENDER_USER_RESOURCES=str(self.folder / "resources"), HOME=str(self.folder), **ONE_THREAD_ENV)
        self.log = open(self.folder / "output.txt", "wb")
        self.replies, reply_end = os.pipe()
        try:
            self.proc = subprocess.Popen([os.path.abspath(python), str(WORKER), str(reply_end)], cwd=self.folder,
                                         env=env, stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
                                         pass_fds=(reply_end,))
        except OSError as exc:
            os.close(self.replies)
            self.log.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            raise BlenderError(f"could not start Blender's Python {python}: {exc}") from None
        finally:
            os.close(reply_end)
        self.pending = b""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def retarget(self, request: dict) -> dict:
        """The worker's figures for `request` (batch_worker.serve), or BlenderError with its message
        (or, for a crash, how Blender ended and the end of its output)."""
        log_start = self.log.tell()
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            while b"\n" not in self.pending:
                ready, _, _ = select.select([self.replies], [], [], 0.02)     # short waits: a time limit lands here
                if ready:
                    chunk = os.read(self.replies, 1 << 16)
                    if not chunk:
                        break
                    self.pending += chunk
        except BrokenPipeError:                       # it is gone: said below
            pass
        except BaseException:
            self.close()
            raise
        if b"\n" not in self.pending:
            message = self._ended(log_start)
            self.close()
            raise BlenderError(message)
        line, self.pending = self.pending.split(b"\n", 1)
        reply = json.loads(line)
        if "error" in reply:
            raise BlenderError(reply["error"])
        return reply["figures"]

    def _ended(self, log_start: int) -> str:
        code = self.proc.wait()
        if code < 0:
            try:
                how = f"Blender crashed ({signal.Signals(-code).name})"
            except ValueError:
                how = f"Blender crashed (signal {-code})"
        else:
            how = f"Blender ended with exit status {code} before answering"
        self.log.flush()
        with open(self.folder / "output.txt", "rb") as fh:
            fh.seek(log_start)
            tail = "\n".join(fh.read().decode(errors="replace").strip().splitlines()[-6:])
        return how + (f"; its output ended:\n{tail}" if tail else "")

    def close(self) -> None:
        """End the process (it ends by itself at the end of its stdin) and remove its folder."""
        if self.log.closed:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        os.close(self.replies)
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_processes: dict = {}


def _process(python: str) -> BlenderProcess:
    """This thread's Blender for `python`, started anew where the last one is gone."""
    key = (python, threading.get_ident())
    process = _processes.get(key)
    if process is None or not process.alive:
        if process is not None:
            process.close()
        process = _processes[key] = BlenderProcess(python)
    return process


@atexit.register
def close_all() -> None:
    """End every Blender process this process's threads started."""
    for process in list(_processes.values()):
        process.close()
    _processes.clear()


def retarget_clip(python: str, rig_file, clip, options: dict) -> tuple:
    """(the .blend's bytes, the figures) of one clip retargeted onto the rig in `rig_file`, by this
    thread's Blender (started on first use, and again after a crash or a time limit)."""
    with tempfile.TemporaryDirectory(prefix="itasc-retarget-") as tmp:
        blend = Path(tmp) / "out.blend"
        figures = _process(python).retarget(
            {"rig_file": str(rig_file), "clip": str(clip), "blend_out": str(blend),
             "scale": float(options.get("scale", 1.0)), "rig_name": options.get("rig"),
             "calibration_frame": options.get("calibration_frame"), "bone_map": options.get("bone_map")})
        return blend.read_bytes(), figures

"""Run a Python snippet inside a fresh Blender (``bpy`` as a module) and get its result back.

Host side: ``run_in_blender(snippet, extension_zip=...)`` starts a new Python process, so every
call is a clean Blender session. Blender's user resources (preferences, the ``user_default``
extension repository at ``<resources>/extensions/user_default``) live in a temporary directory
through ``BLENDER_USER_RESOURCES``, so nothing touches the real home.

Blender side (this file run as a script): optionally install the zip the way a user does,
``bpy.ops.extensions.package_install_files(repo="user_default", enable_on_install=True)``,
then exec the snippet. Whatever the snippet assigns to ``result`` comes back, through JSON.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSION_MODULE = "bl_ext.user_default.itasc_ik"

# Variables that would send Blender's user data somewhere other than our temporary directory.
_USER_PATH_VARS = ("BLENDER_USER_CONFIG", "BLENDER_USER_SCRIPTS", "BLENDER_USER_DATAFILES",
                   "BLENDER_USER_EXTENSIONS")


class BlenderSessionError(RuntimeError):
    """The Blender subprocess failed; the message carries the end of its output."""


def blender_python():
    """The interpreter that runs Blender for these sessions: ``$ITASC_TEST_PYTHON`` when set (how
    `make test` runs the add-on tests a second time on Blender 4.2, ``.venv-blender-4.2``), else
    the current one. Relative paths are taken from the current directory; symlinks are kept (a
    venv's python is one)."""
    return os.path.abspath(os.environ.get("ITASC_TEST_PYTHON") or sys.executable)


def run_in_blender(snippet, *, extension_zip=None, python=None, sys_path=(), cwd=None, timeout=1800,
                   exit_at_once=False):
    """Exec ``snippet`` in a fresh bpy process and return the JSON-decoded value of its ``result``.

    extension_zip: install and enable this extension zip first.
    python: interpreter with bpy installed (default: `blender_python()`, i.e. $ITASC_TEST_PYTHON
    or the current one).
    sys_path: directories put in front of ``sys.path`` inside Blender (e.g. the repository root
    so that ``tools.blender_ik`` imports); by default nothing is, so the extension is only
    reachable as ``bl_ext.user_default.itasc_ik``.
    exit_at_once: once the result is written, end the process with ``os._exit(0)``, skipping
    Blender's exit handlers. Blender 4.2's bpy module crashes in them (SIGSEGV: it frees Python
    UI classes after Python is gone) in any session that has enabled the bundled Rigify add-on,
    even after disabling it again; nothing of ours is involved. Only for sessions that need Rigify.
    """
    with tempfile.TemporaryDirectory(prefix="itasc_blender_") as tmp:
        tmp = Path(tmp)
        (tmp / "resources").mkdir()
        (tmp / "snippet.py").write_text(textwrap.dedent(snippet))
        env = {k: v for k, v in os.environ.items() if k not in _USER_PATH_VARS}
        env.update(BLENDER_USER_RESOURCES=str(tmp / "resources"), HOME=str(tmp))
        python = os.path.abspath(python) if python else blender_python()
        cmd = [python, str(Path(__file__).resolve()),
               "--snippet", str(tmp / "snippet.py"), "--result", str(tmp / "result.json")]
        if extension_zip:
            cmd += ["--install", str(Path(extension_zip).resolve())]
        if exit_at_once:
            cmd += ["--exit-at-once"]
        for path in sys_path:
            cmd += ["--sys-path", str(path)]
        proc = subprocess.run(cmd, cwd=cwd or tmp, env=env, capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode != 0:
            tail = lambda s: "\n".join(s.strip().splitlines()[-40:])  # noqa: E731
            raise BlenderSessionError(
                f"Blender session exited with {proc.returncode}\n"
                f"--- stdout ---\n{tail(proc.stdout)}\n--- stderr ---\n{tail(proc.stderr)}")
        return json.loads((tmp / "result.json").read_text())


IN_BLENDER = ROOT / "tests" / "addon"    # holds the package `in_blender`: test bodies that run in Blender


def call_in_blender(target, *, extension_zip=None, python=None, sys_path=(), timeout=1800, exit_at_once=False,
                    **kwargs):
    """Call ``module:function`` of the package ``in_blender`` (tests/addon/in_blender) in a fresh
    bpy process with keyword arguments ``kwargs`` (JSON values) and return the JSON-decoded value
    it returns. Only tests/addon and ``sys_path`` are put on ``sys.path`` inside Blender, so the
    extension is reached as the user reaches it, ``bl_ext.user_default.itasc_ik``; the other
    parameters are those of `run_in_blender`."""
    module, function = target.split(":")
    snippet = (f"import importlib, json\n"
               f"result = getattr(importlib.import_module('in_blender.{module}'), {function!r})"
               f"(**json.loads({json.dumps(json.dumps(kwargs))}))\n")
    return run_in_blender(snippet, extension_zip=extension_zip, python=python, timeout=timeout,
                          sys_path=[IN_BLENDER, *sys_path], exit_at_once=exit_at_once)


def run_demo_scene(module, args, out_dir, extension_zip=None, python=None):
    """(out_dir resolved and made, what ``tools.<module>.run_in_scene(*args)`` returns in a fresh
    Blender with the extension installed): the zip built into dist/ where none is given; the
    session ends at once (Blender 4.2 crashes on exit after Rigify was enabled, see
    `run_in_blender`). `args`: values whose repr reads back, ``OUT`` for the output folder."""
    from tools import build_extension

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if extension_zip is None:                  # the sources as they are now, where `make build` puts them
        extension_zip = build_extension.write_zip(ROOT / "dist")
    args = [str(out_dir) if a is OUT else a for a in args]
    snippet = f"from tools.{module} import run_in_scene\nresult = run_in_scene(*{args!r})\n"
    return out_dir, run_in_blender(snippet, extension_zip=extension_zip, python=python, sys_path=[ROOT],
                                   exit_at_once=True)


OUT = object()          # stands for the output folder in `run_demo_scene`'s args


def install_extension(zip_path):
    """Inside Blender: install and enable an extension zip into the ``user_default`` repository."""
    import bpy

    done = bpy.ops.extensions.package_install_files(
        filepath=str(zip_path), repo="user_default", enable_on_install=True)
    if done != {"FINISHED"}:
        raise RuntimeError(f"package_install_files returned {done}")


def _blender_main(argv):
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--snippet", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--install")
    parser.add_argument("--sys-path", action="append", default=[])
    parser.add_argument("--exit-at-once", action="store_true")
    args = parser.parse_args(argv)

    # Only the requested paths, not this script's own folder, so the snippet sees no repo code.
    sys.path[:] = args.sys_path + [p for p in sys.path[1:]]
    import bpy  # noqa: F401  (start Blender before the snippet runs)

    if args.install:
        install_extension(args.install)
    namespace = {"__name__": "__blender_snippet__"}
    code = Path(args.snippet).read_text()
    exec(compile(code, args.snippet, "exec"), namespace)
    Path(args.result).write_text(json.dumps(namespace.get("result")))
    if args.exit_at_once:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    _blender_main(sys.argv[1:])

"""One clip of `python -m solver batch retarget`, in a Python that has `bpy`: open the rig's
.blend, import the BVH clip with Blender's own importer, retarget it onto the rig
(`api.retarget`), save the .blend and write the report's figures as JSON.

Run as a script (`python .../itasc_addon/retarget/batch_worker.py REPLY_FD`): it loads the
extension from the folder holding this package (the extension's root: its `__init__.py`,
`solver/` and `itasc_addon/`) as the package `itasc_ik`, registers it once, then `serve`s one
clip after another, each read from stdin and answered on the file descriptor REPLY_FD (Blender
prints to stdout). A bad clip or rig is answered with {"error": message} and the next clip goes
on; the solver side (solver/batch/blender.py) reports a crash from the process's end and output.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

PACKAGE = "itasc_ik"


def _armatures(names=None):
    import bpy
    return [o for o in bpy.data.objects if o.type == "ARMATURE" and (names is None or o not in names)]


def pick_rig(name):
    """The rig: the armature object `name`, or the file's only armature."""
    import bpy
    if name:
        obj = bpy.data.objects.get(name)
        if obj is None or obj.type != "ARMATURE":
            found = ", ".join(o.name for o in _armatures()) or "none"
            raise ValueError(f"the rig file has no armature object {name!r} (armatures: {found})")
        return obj
    rigs = _armatures()
    if len(rigs) != 1:
        found = ", ".join(sorted(o.name for o in rigs)) or "none"
        raise ValueError(f"the rig file has {len(rigs)} armature objects ({found}): name one with --rig")
    return rigs[0]


def import_clip(path, scale):
    """The armature Blender's BVH importer makes of `path` (the scene set to its rate and length)."""
    import bpy
    before = set(_armatures())
    try:
        bpy.ops.import_anim.bvh(filepath=str(path), global_scale=scale, update_scene_fps=True,
                                update_scene_duration=True)
    except Exception as exc:                          # the importer's own error, e.g. a malformed file
        lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.startswith("Location:")]
        raise ValueError(f"Blender's BVH importer could not read {Path(path).name}: "
                         f"{lines[-1] if lines else type(exc).__name__}") from None
    new = [o for o in _armatures() if o not in before]
    if not new:
        raise ValueError(f"Blender's BVH importer made no armature from {Path(path).name}")
    return new[0]


def _floats(values):
    import numpy as np
    return [float(v) if np.isfinite(v) else None for v in np.ravel(values)]


def figures(result, seconds) -> dict:
    """The JSON report's figures from an `api.retarget` result."""
    import bpy
    import numpy as np
    spans = result.spans()
    slides = [s for *_, s in spans]
    pins = [float(d) for p in result.contact_names for d in result.pin_distance.get(p, ())]
    below = result.floor_penetration
    return {
        "frames": len(result.frames), "frame_start": int(result.frames[0]), "frame_end": int(result.frames[-1]),
        "converged": int(np.count_nonzero(result.converged)), "frames_not_converged": result.not_converged,
        "contacts": {p: [[int(a), int(b)] for a, b in v] for p, v in result.contacts.items()},
        "spans": len(spans),
        "foot_slide": {p: _floats(v) for p, v in result.foot_slide.items()},
        "foot_slide_max": max(slides, default=0.0), "pin_distance_max": max(pins, default=0.0),
        "floor": float(result.floor), "floor_slope": float(result.floor_slope),
        "source_floor": float(result.source_floor),
        "floor_penetration_max": float(np.max(below, initial=0.0)) if below is not None else None,
        "bone_map": {r: list(p) for r, p in result.bone_map.items()},
        "scale": float(result.scale), "keys_written": int(result.keys_written), "warnings": list(result.warnings),
        "blender": bpy.app.version_string, "retarget_seconds": round(float(result.seconds), 6), "blender_seconds": round(seconds, 6),
    }


def run(rig_file, clip, blend_out, scale=1.0, rig_name=None, calibration_frame=None, bone_map=None) -> dict:
    """Open `rig_file`, retarget `clip` onto its rig, save the result to `blend_out` (the scene's
    frame range the clip's); the figures."""
    import bpy
    from ..api import retarget
    from . import bone_maps
    started = time.perf_counter()
    bpy.ops.wm.open_mainfile(filepath=str(rig_file), load_ui=False)
    rig = pick_rig(rig_name)
    source = import_clip(clip, scale)
    source.name = Path(clip).stem
    pairs = bone_maps.from_json(Path(bone_map).read_text(encoding="utf-8")) if bone_map else None
    result = retarget(rig, source, calibration_frame=calibration_frame, bone_map=pairs)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = int(result.frames[0]), int(result.frames[-1])
    scene.frame_set(scene.frame_start)
    bpy.ops.wm.save_as_mainfile(filepath=str(blend_out), copy=True, compress=False)
    return figures(result, time.perf_counter() - started)


def load_extension(root: Path):
    """The extension at `root` as the package PACKAGE, registered."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(PACKAGE, root / "__init__.py", submodule_search_locations=[str(root)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    package.register()
    return package


def serve(replies) -> int:
    """Retarget clips one after another: a request per line on stdin ({"rig_file", "clip",
    "blend_out", "scale", "rig_name", "calibration_frame", "bone_map"}), a reply per line on the
    file `replies` ({"figures": ...} or {"error": message}); ends at the end of stdin."""
    import importlib
    try:
        import bpy  # noqa: F401  (Blender starts here)
    except ImportError as exc:
        replies.write(json.dumps({"error": f"{sys.executable} cannot import bpy ({exc})"}) + "\n")
        return 1
    load_extension(Path(__file__).resolve().parents[2])
    worker = importlib.import_module(f"{PACKAGE}.itasc_addon.retarget.batch_worker")
    for line in sys.stdin:
        try:
            reply = {"figures": worker.run(**json.loads(line))}
        except ValueError as exc:                     # bad input (RigError is one): its message says what
            reply = {"error": str(exc) or type(exc).__name__}
        except Exception as exc:                      # anything else fails this clip alone, named, traced in the log
            traceback.print_exc()
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.flush()
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


if __name__ == "__main__":
    sys.path[:] = sys.path[1:]                        # not this file's folder: its modules are the package's
    with open(int(sys.argv[1]), "w", encoding="utf-8") as replies:
        status = serve(replies)
    sys.stdout.flush()
    sys.stderr.flush()
    import os
    os._exit(status)                                  # Blender's exit handlers are not needed, and cost time

"""Reading an armature's motion (the source: what Blender's BVH or FBX importer makes, or any
armature) into arrays, by Blender's own evaluation.

Per frame the scene is set to it and every pose bone's matrix is read at once (``foreach_get``),
then the object's world matrix put in front: `Motion.world` (F, B, 4, 4) is each bone's world
matrix as Blender shows it (rotation, and the head position in its last column), `Motion.rest`
(B, 4, 4) the bones' rest matrices in world space (the object's world matrix at the first frame
read times ``bone.matrix_local``). Rows follow the bone names given.

Bad input is refused with a `RigError` naming what is wrong: a bone the map names that the
armature lacks, mapped bones whose rotation has no F-curve (a clip with missing channels), keys
that are not finite numbers, no frames.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import bpy
import numpy as np

from .. import guard
from ..rig import RigError


@dataclass
class Motion:
    """An armature's bones as Blender evaluates them at `frames`: `world` (F, B, 4, 4), `rest`
    (B, 4, 4), both in world space, rows in the order of `bones`; `lengths` (B,) the bones'
    lengths times the object's scale."""

    frames: np.ndarray
    bones: list
    world: np.ndarray
    rest: np.ndarray
    lengths: np.ndarray


def action_range(obj):
    """(first, last) whole frames of the object's active action's keys; RigError without any."""
    anim = obj.animation_data
    if anim is None or anim.action is None:
        raise RigError(f"source '{obj.name}' has no animation (no action): nothing to retarget")
    first, last = anim.action.frame_range
    if not (np.isfinite(first) and np.isfinite(last)):
        raise RigError(f"source '{obj.name}': its action's frame range is not finite")
    return int(np.floor(first)), int(np.ceil(last))


def check_channels(obj, bones, located=()):
    """Refuse a source whose mapped bones lack rotation F-curves (or location ones for the bones
    in `located`), or whose F-curves on them hold non-finite keys."""
    from ..keys import Channels, read_keys
    by_bone = {}
    for fc in Channels(obj).all():
        path = fc.data_path
        if path.startswith('pose.bones["'):
            name = path[len('pose.bones["'):].split('"]', 1)[0].replace('\\"', '"').replace("\\\\", "\\")
            by_bone.setdefault(name, []).append(fc)
    missing, bad = [], []
    for name in bones:
        curves = by_bone.get(name, [])
        props = {fc.data_path.rsplit(".", 1)[-1] for fc in curves}
        if not props & {"rotation_quaternion", "rotation_euler", "rotation_axis_angle"}:
            missing.append(f"{name} (rotation)")
        if name in located and "location" not in props:
            missing.append(f"{name} (location)")
        for fc in curves:
            co = read_keys(fc)["co"]
            if not np.all(np.isfinite(co)):
                bad.append(f"{fc.data_path}[{fc.array_index}]")
    if missing:
        raise RigError(f"source '{obj.name}' has no keys for mapped bone channel(s): {', '.join(missing)}; "
                       "map those roles to animated bones or leave them out of the map; nothing was written")
    if bad:
        raise RigError(f"source '{obj.name}' has non-finite keys on {', '.join(bad[:6])}"
                       f"{' ...' if len(bad) > 6 else ''}; nothing was written")


@contextmanager
def evaluating_only(obj):
    """While `obj` is read frame by frame: every other shown object of the view layer hidden in
    the viewport, shown again after. Blender still evaluates a hidden object where a shown one
    depends on it, so a frame change evaluates `obj` and what it depends on, not the rest of the
    scene (the target rig while the source is read, the rig's meshes while the rig is read).
    Hiding deselects, so each object's selection is given back with it."""
    hidden = []
    try:
        evaluated = {o.original for o in bpy.context.evaluated_depsgraph_get().objects}
        for other in bpy.context.view_layer.objects:
            if other == obj or other.hide_viewport or other not in evaluated:
                continue
            selected = other.select_get()
            try:
                other.hide_viewport = True
            except (AttributeError, RuntimeError, TypeError):      # linked data cannot be changed
                continue
            hidden.append((other, selected))
        yield
    finally:
        for other, selected in hidden:
            other.hide_viewport = False
            if selected:
                other.select_set(True)


def read_motion(obj, bones, frames, isolate=True) -> Motion:
    """Blender's evaluation of `bones` of armature `obj` at `frames` (module docstring). The scene
    ends at the frame it was on. `isolate`: read within `evaluating_only(obj)` (False: the caller
    has it so, e.g. across the chunks of one reading)."""
    frames = np.asarray(frames, dtype=float)
    if frames.size == 0:
        raise RigError(f"no frames to read from '{obj.name}'")
    missing = [b for b in bones if b not in obj.pose.bones]
    if missing:
        raise RigError(f"armature '{obj.name}' has no bone(s) {', '.join(missing)}")
    scene = bpy.context.scene
    keep = (scene.frame_current, scene.frame_subframe)
    index = {pb.name: i for i, pb in enumerate(obj.pose.bones)}
    rows = np.array([index[b] for b in bones], dtype=int)
    buf = np.zeros((len(obj.pose.bones), 16), dtype=np.float32)
    pose = np.empty((len(frames), len(bones), 4, 4))
    world = np.empty((len(frames), 4, 4))
    try:
        with guard.suspended(), (evaluating_only(obj) if isolate else nullcontext()):
            for i, f in enumerate(frames):
                scene.frame_set(int(np.floor(f)), subframe=float(f - np.floor(f)))
                ob = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
                ob.pose.bones.foreach_get("matrix", buf.ravel())
                pose[i] = np.swapaxes(buf[rows].reshape(-1, 4, 4), -1, -2)
                world[i] = np.array(ob.matrix_world)
    finally:
        with guard.suspended():
            scene.frame_set(keep[0], subframe=keep[1])
    out = world[:, None] @ pose
    if not np.all(np.isfinite(out)):
        bad = sorted({bones[b] for b in np.nonzero(~np.isfinite(out).all(axis=(0, 2, 3)))[0]})
        raise RigError(f"'{obj.name}' evaluates to non-finite matrices on {', '.join(bad)}; nothing was written")
    rest_local = np.array([np.array(obj.data.bones[b].matrix_local) for b in bones]).reshape(-1, 4, 4)
    rest = world[0][None] @ rest_local
    scale = np.cbrt(abs(np.linalg.det(world[0, :3, :3])))
    lengths = np.array([obj.data.bones[b].length for b in bones]) * scale
    return Motion(frames=frames.copy(), bones=list(bones), world=out, rest=rest, lengths=lengths)

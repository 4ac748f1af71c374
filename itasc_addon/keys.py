"""Keyframes in bulk, on Blender 4.2's actions (``Action.fcurves``) and on the slotted actions of
4.4 and later (``action.layers[0].strips[0].channelbag(slot)``).

A channel is (data_path, array_index). Writing a channel replaces its keys in a closed frame range
[first, last] by the given keys and leaves every other key exactly as it was: the F-curve is rebuilt
with ``keyframe_points.add`` + ``foreach_set`` from the kept keys' own attributes (position,
handles, handle types, interpolation, easing, key type, selection) and the new keys. Blender then
recomputes automatic handles; the kept keys get their previous handles back, so the curve outside
the range is the same to the last bit.
"""

from __future__ import annotations

import bpy
import numpy as np

from ..solver.rotations import quaternion_from_matrix
from . import kept_values
from .rig import RigError

# Every stored attribute of a Keyframe: (name, components, dtype).
_ATTRIBUTES = (
    ("co", 2, np.float32),
    ("handle_left", 2, np.float32),
    ("handle_right", 2, np.float32),
    ("handle_left_type", 1, np.int32),
    ("handle_right_type", 1, np.int32),
    ("interpolation", 1, np.int32),
    ("type", 1, np.int32),
    ("easing", 1, np.int32),
    ("back", 1, np.float32),
    ("amplitude", 1, np.float32),
    ("period", 1, np.float32),
    ("select_control_point", 1, bool),
    ("select_left_handle", 1, bool),
    ("select_right_handle", 1, bool),
)

SLOTTED = bpy.app.version >= (4, 4, 0)


def _slot(obj, create):
    anim = obj.animation_data
    action = anim.action
    slot = anim.action_slot
    if slot is None:
        slot = next((s for s in action.slots if s.target_id_type in ("UNSPECIFIED", obj.id_type)), None)
        if slot is None:
            if not create:
                return None
            slot = action.slots.new(id_type=obj.id_type, name=obj.name)
        anim.action_slot = slot
    return slot


class Channels:
    """The F-curves of an object's active action, whichever way this Blender stores them."""

    def __init__(self, obj, create=False):
        self.obj = obj
        anim = obj.animation_data
        if anim is None or anim.action is None:
            if not create:
                self.fcurves = None
                return
            anim = anim or obj.animation_data_create()
            anim.action = bpy.data.actions.new(f"{obj.name}Action")
        action = anim.action
        self.action = action
        if SLOTTED:
            slot = _slot(obj, create)
            self.fcurves = None
            if slot is None:
                return
            if not action.layers:
                if not create:
                    return
                action.layers.new("Layer")
            layer = action.layers[0]
            if not layer.strips:
                if not create:
                    return
                layer.strips.new(type="KEYFRAME")
            bag = layer.strips[0].channelbag(slot, ensure=create)
            self.fcurves = bag.fcurves if bag is not None else None
        else:
            self.fcurves = action.fcurves

    def find(self, data_path, index):
        if self.fcurves is None:
            return None
        return self.fcurves.find(data_path, index=index)

    def ensure(self, data_path, index, group):
        fc = self.find(data_path, index)
        if fc is not None:
            return fc
        if SLOTTED:
            return self.fcurves.new(data_path, index=index, group_name=group)
        return self.fcurves.new(data_path, index=index, action_group=group)

    def remove(self, fc):
        self.fcurves.remove(fc)

    def all(self):
        return [] if self.fcurves is None else list(self.fcurves)


def read_keys(fc):
    """All of an F-curve's keyframe attributes as arrays (K,) or (K, 2)."""
    kp = fc.keyframe_points
    n = len(kp)
    out = {}
    for name, width, dtype in _ATTRIBUTES:
        buf = np.empty(n * width, dtype=dtype)
        kp.foreach_get(name, buf)
        out[name] = buf.reshape(n, width) if width > 1 else buf
    return out


def _write_all(fc, keys):
    kp = fc.keyframe_points
    n = len(keys["co"])
    kp.clear()
    kp.add(n)
    for name, width, dtype in _ATTRIBUTES:
        kp.foreach_set(name, np.ascontiguousarray(keys[name], dtype=dtype).ravel())


# What ``keyframe_points.add`` leaves in a new key already equals what a new key of ours gets
# (Bezier, auto-clamped handles, type and easing); these attributes it does not set that way.
_SET_ON_ADDED = ("co", "back", "amplitude", "period", "select_control_point", "select_left_handle",
                 "select_right_handle")


def replace_keys(fc, frames, values, first, last):
    """Keys of `fc` in [first, last] replaced by keys at `frames` with `values` (new keys take
    Blender's defaults: Bezier with auto-clamped handles); every other key stays as it was."""
    frames = np.asarray(frames, dtype=np.float32)
    values = np.asarray(values, dtype=np.float32)
    if not len(fc.keyframe_points):                  # a new curve: nothing to keep
        new = _new_keys(frames, values)
        fc.keyframe_points.add(len(frames))
        for name in _SET_ON_ADDED:
            fc.keyframe_points.foreach_set(name, new[name].ravel())
        _recalculate_handles(fc)
        return
    old = read_keys(fc)
    keep = (old["co"][:, 0] < np.float32(first)) | (old["co"][:, 0] > np.float32(last))
    kept = {name: array[keep] for name, array in old.items()}
    new = _new_keys(frames, values)
    merged = {name: np.concatenate([kept[name], new[name]]) for name in old}
    order = np.argsort(merged["co"][:, 0], kind="stable")
    merged = {name: array[order] for name, array in merged.items()}
    is_old = np.concatenate([np.ones(keep.sum(), bool), np.zeros(len(frames), bool)])[order]
    _write_all(fc, merged)
    _recalculate_handles(fc)
    if is_old.any():
        # Automatic handles of kept keys were recomputed from their new neighbours: put them back.
        now = read_keys(fc)
        for name in ("handle_left", "handle_right"):
            now[name][is_old] = merged[name][is_old]
            fc.keyframe_points.foreach_set(name, now[name].ravel())


def _new_keys(frames, values):
    """Every attribute of new keys at `frames` with `values`, as Blender keys them by default."""
    new = {}
    for name, width, dtype in _ATTRIBUTES:
        new[name] = np.zeros((len(frames), width) if width > 1 else len(frames), dtype=dtype)
    co = np.stack([frames, values], axis=-1)
    new["co"] = co
    new["handle_left"] = co - np.float32([1.0 / 3.0, 0.0])
    new["handle_right"] = co + np.float32([1.0 / 3.0, 0.0])
    new["handle_left_type"][:] = new["handle_right_type"][:] = _enum("handle_left_type", "AUTO_CLAMPED")
    new["interpolation"][:] = _enum("interpolation", "BEZIER")
    new["type"][:] = _enum("type", "KEYFRAME")
    new["easing"][:] = _enum("easing", "AUTO")
    new["back"][:], new["amplitude"][:], new["period"][:] = 1.70158, 0.8, 4.1
    return new


def _recalculate_handles(fc):
    if hasattr(fc.keyframe_points, "handles_recalc"):
        fc.keyframe_points.handles_recalc()
    else:
        fc.update()


def remove_keys(fc, first, last):
    """Delete the keys of `fc` in [first, last]; the others stay as they were. Returns how many
    keys are left."""
    old = read_keys(fc)
    keep = (old["co"][:, 0] < np.float32(first)) | (old["co"][:, 0] > np.float32(last))
    if keep.all():
        return len(keep)
    kept = {name: array[keep] for name, array in old.items()}
    _write_all(fc, kept)
    return int(keep.sum())


def write_channels(obj, frames, plan, record=True):
    """Key each channel of `plan` ((data_path, index, values (F,), group)) so that it plays
    `values` at the scene's `frames`: at those frames' action times (`action_frames`), where its
    keys between the first and the last are replaced and all others stay. Non-finite values (or
    frames the action cannot play, see `action_frames`) refuse the whole plan before anything is
    written. With `record`, each channel and its range of action time is recorded in
    ``obj.itasc.baked`` (what `clear_bake` removes). Returns the number of keys written."""
    for data_path, index, values, group in plan:
        if not np.all(np.isfinite(values)):
            raise RigError(f"non-finite key values for {data_path}[{index}]; nothing was written")
    times = action_frames(obj, frames)
    order = np.argsort(times, kind="stable")           # a reversed strip plays its action backwards
    times = times[order]
    channels = Channels(obj, create=True)
    first, last = float(times[0]), float(times[-1])
    baked = obj.itasc.baked
    written = 0
    for data_path, index, values, group in plan:
        values = np.asarray(values)[order]
        fc = channels.ensure(data_path, index, group)
        replace_keys(fc, times, values, first, last)
        written += len(values)
        if record and not any(c.data_path == data_path and c.index == index and c.frame_start == first
                              and c.frame_end == last for c in baked):
            item = baked.add()
            item.data_path, item.index, item.frame_start, item.frame_end = data_path, index, first, last
    return written


# --- action time under the NLA's tweak mode -----------------------------------------------------

_TOLERANCE = 1e-4      # frames


def action_frames(obj, frames):
    """The times (F,) in the object's action at which keys play at the scene's `frames`.

    Outside the NLA's tweak mode the action plays at scene time. In tweak mode the action is the
    tweaked strip's and plays through the strip's timing (start, scale, reversal), which
    ``AnimData.nla_tweak_strip_time_to_scene`` inverts as Blender's own key editing does. A scene
    frame the strip does not play its action at is refused (RigError, nothing written): before
    the strip's start or after its end (the strip holds or shows nothing there), or past its
    first cycle when it repeats (all cycles play the same keys, so only the first is baked)."""
    frames = np.asarray(frames, dtype=float)
    anim = obj.animation_data
    if anim is None or not anim.use_tweak_mode or anim.action is None:
        return frames.copy()
    to_action = anim.nla_tweak_strip_time_to_scene
    times = np.array([to_action(float(f), invert=True) for f in frames], dtype=float)
    strip = tweaked_strip(anim)
    if strip is None:               # no strip timing applies (Blender maps no time here): scene time
        return times
    length = max(strip.action_frame_end - strip.action_frame_start, 1.0)      # Blender's minimum
    cycle = length * abs(strip.scale)
    last = min(strip.frame_end, strip.frame_start + cycle)
    inside = (frames >= strip.frame_start - _TOLERANCE) & (frames <= last + _TOLERANCE)
    if strip.repeat > 1.0 + 1e-6:                                  # a cycle's end starts the next
        inside &= frames < strip.frame_start + cycle - _TOLERANCE
    if not inside.all():
        bad = frames[~inside]
        repeats = f", repeated {strip.repeat:g} times" if strip.repeat > 1.0 + 1e-6 else ""
        raise RigError(f"armature '{obj.name}' is in NLA tweak mode on strip '{strip.name}' (frames "
                       f"{strip.frame_start:g}-{strip.frame_end:g}{repeats}): frame(s) {bad.min():g}-{bad.max():g} lie "
                       f"outside the frames {strip.frame_start:g}-{last:g} where it plays its action once, so keys "
                       "there would not play there; bake within those frames, or leave tweak mode (Tab in the "
                       "NLA editor) to bake into the active action; nothing was written")
    return times


def tweaked_strip(anim):
    """The NLA strip in tweak mode: a strip of the tweaked action whose start (its end, reversed)
    the tweak mode's time mapping puts at the action's first frame; None when none is (Blender
    then plays the action at scene time)."""
    for track in anim.nla_tracks:
        for strip in track.strips:
            if strip.action != anim.action:
                continue
            at = anim.nla_tweak_strip_time_to_scene(float(strip.action_frame_start))
            if abs(at - (strip.frame_end if strip.use_reverse else strip.frame_start)) <= _TOLERANCE:
                return strip
    return None


def new_layer(obj, name):
    """Put a new empty action over the object's animation, as Blender's Push Down does: its
    active action (if any) goes onto a new NLA track above the others, where it plays as before,
    and an action `name` becomes the active action, evaluated over the NLA stack; the channels it
    keys replace those below, the others play on. Returns the new action."""
    anim = obj.animation_data or obj.animation_data_create()
    if anim.use_tweak_mode:
        raise RigError("the NLA is in tweak mode: leave it (Tab in the NLA editor) to add a layer")
    below = anim.action
    if below is not None:
        slot = anim.action_slot if SLOTTED else None
        track = anim.nla_tracks.new()
        track.name = below.name
        strip = track.strips.new(below.name, int(np.floor(below.frame_range[0])), below)
        if slot is not None and strip.action_slot != slot:
            strip.action_slot = slot
        anim.action = None
    anim.action = bpy.data.actions.new(name)
    return anim.action


def clear_bake(obj):
    """Remove the keys that bakes wrote (their channels, in their frame ranges); F-curves left
    without keys are removed; values a retarget set outside its channels are put back
    (kept_values). Returns how many channels were cleared."""
    settings = obj.itasc
    channels = Channels(obj)
    cleared = 0
    for item in settings.baked:
        fc = channels.find(item.data_path, item.index)
        if fc is None:
            continue
        left = remove_keys(fc, item.frame_start, item.frame_end)
        if left == 0:
            channels.remove(fc)
        cleared += 1
    settings.baked.clear()
    settings.has_result = False
    kept_values.restore(obj)
    return cleared


def _enum(prop, identifier):
    return bpy.types.Keyframe.bl_rna.properties[prop].enum_items[identifier].value


def snapshot(obj):
    """Every key of every F-curve of the object's action: {(data_path, index): attributes}, for
    tests and for checking that nothing else changed."""
    return {(fc.data_path, fc.array_index): read_keys(fc) for fc in Channels(obj).all()}


# --- rotation channels ------------------------------------------------------------------------

def quaternions(R, start=None):
    """Unit quaternions (F, 4) (w, x, y, z) of rotation matrices (F, 3, 3), each on the same side as
    the one before it (the first on the side of `start`), so keys interpolate the short way."""
    q = quaternion_from_matrix(R)
    ref = np.asarray(start, float) if start is not None else q[:1]
    flips = np.ones(len(q))
    flips[0] = -1.0 if np.dot(q[0], np.ravel(ref)[:4]) < 0 else 1.0
    if len(q) > 1:
        flips[1:] = np.where(np.sum(q[1:] * q[:-1], axis=-1) < 0, -1.0, 1.0)
    return q * np.cumprod(flips)[:, None]


def rotation_values(R, mode, start):
    """(data_path property, values (F, k)) of rotations (F, 3, 3) in a bone's rotation mode,
    continuous across frames and starting next to `start` (the channel's current value)."""
    if mode == "QUATERNION":
        return "rotation_quaternion", quaternions(R, start)
    if mode == "AXIS_ANGLE":
        angle0, *axis0 = start
        from mathutils import Quaternion
        q0 = Quaternion(axis0, angle0) if np.linalg.norm(axis0) > 0 else Quaternion()
        q = quaternions(R, tuple(q0))
        half = np.arccos(np.clip(q[:, 0], -1.0, 1.0))
        s = np.sin(half)
        axis = np.where(s[:, None] > 1e-12, q[:, 1:] / np.maximum(s, 1e-300)[:, None], [0.0, 1.0, 0.0])
        return "rotation_axis_angle", np.concatenate([(2.0 * half)[:, None], axis], axis=-1)
    from mathutils import Euler, Matrix
    previous = Euler(start, mode)
    out = np.empty((len(R), 3))
    for f, rot in enumerate(R):
        previous = Matrix(rot.tolist()).to_euler(mode, previous)
        out[f] = previous
    return "rotation_euler", out

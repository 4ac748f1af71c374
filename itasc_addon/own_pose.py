"""The user's own pose of the bones live preview poses.

Before live preview first poses a bone, the bone's own rotation and scale channels are kept on the
object (``itasc.kept_pose``, saved with the file); when live preview is switched off they are put
back, a channel an F-curve animates at the action's value in the current frame. The same channels
are the animated pose that a constraint's influence below 1 blends with, as a bake blends it
(`solving.blend_targets`), and that a bone's IK rotation / linear control holds it to (the
control tasks of `rig.with_joint_control`, their values given per frame); live preview's own last
pose is never taken for it.
"""

from __future__ import annotations

import contextlib

import bpy
import numpy as np

from . import keys, pose_channels

KEPT_CHANNELS = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle", "scale")


def keep(obj, bones):
    """Keep the channels live preview writes of those `bones` not kept yet (module docstring)."""
    kept = obj.itasc.kept_pose
    done = {item.bone for item in kept}
    for name in bones:
        pb = obj.pose.bones.get(name)
        if pb is None or name in done:
            continue
        item = kept.add()
        item.bone = name
        for channel in KEPT_CHANNELS:
            setattr(item, channel, getattr(pb, channel))


@contextlib.contextmanager
def restored(obj):
    """Inside this block the bones live preview has posed carry the user's own channels (the kept
    ones; F-curves still animate theirs), so that a bake samples the user's pose, not live
    preview's last output; live preview's pose is back on them afterwards."""
    posed = [(pb, item) for item in obj.itasc.kept_pose if (pb := obj.pose.bones.get(item.bone)) is not None]
    shown = [{channel: tuple(getattr(pb, channel)) for channel in KEPT_CHANNELS} for pb, _ in posed]
    for pb, item in posed:
        for channel in KEPT_CHANNELS:
            setattr(pb, channel, getattr(item, channel))
    try:
        yield
    finally:
        for (pb, _), channels in zip(posed, shown):
            for channel, value in channels.items():
                setattr(pb, channel, value)


def _own_channels(pb, kept, curves, frame):
    """{channel: values} of a bone as the user has it at `frame`: its kept channels (its current
    ones when it has none kept), those an F-curve animates at the curve's value."""
    path = f'pose.bones["{bpy.utils.escape_identifier(pb.name)}"].'
    out = {}
    for channel in KEPT_CHANNELS:
        value = list(getattr(pb if kept is None else kept, channel))
        for i in range(len(value)):
            fc = curves.find(path + channel, i)
            if fc is not None and not fc.mute:
                value[i] = fc.evaluate(frame)
        out[channel] = value
    return out


def give_back(obj):
    """Put the kept channels back on the bones still there (module docstring) and forget them."""
    kept = obj.itasc.kept_pose
    if not len(kept):
        return
    scene = bpy.context.scene
    frame = scene.frame_current + scene.frame_subframe
    curves = keys.Channels(obj)
    for item in kept:
        pb = obj.pose.bones.get(item.bone)
        if pb is None:
            continue
        for channel, value in _own_channels(pb, item, curves, frame).items():
            setattr(pb, channel, value)
    kept.clear()
    obj.update_tag(refresh={"OBJECT"})


def animated_channels(obj, bones, frame):
    """The rotation modes (S,) and channel rows (S, pose_channels.WIDTH) of `bones` in the user's
    own pose at `frame` (module docstring): locations as they are (live preview never writes
    them), rotations and scales from `_own_channels`."""
    kept = {item.bone: item for item in obj.itasc.kept_pose}
    curves = keys.Channels(obj)
    numbers = pose_channels.MODE_NUMBERS
    modes, rows = [], []
    for name in bones:
        pb = obj.pose.bones[name]
        own = _own_channels(pb, kept.get(name), curves, frame)
        own["location"] = pb.location[:]
        modes.append(numbers[pb.rotation_mode])
        rows.append([x for channel, _ in pose_channels.CHANNELS for x in own[channel]])
    return (np.array(modes, np.int32).reshape(len(bones)),
            np.array(rows, np.float32).reshape(len(bones), pose_channels.WIDTH))

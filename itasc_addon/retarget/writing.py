"""Keys from bases: a retarget's bone bases written the way a bake writes keys (`keys`): each
bone's rotation in its own rotation mode, continuous from its current value, the location of
the bones whose head moves, at the action time that plays at each frame (NLA tweak mode), keys
of those channels in the range replaced and every other key kept; recorded as baked channels
(what Clear Bake removes)."""

from __future__ import annotations

import bpy
import numpy as np

from .. import keys


def _start(pb):
    return {"QUATERNION": tuple(pb.rotation_quaternion), "AXIS_ANGLE": tuple(pb.rotation_axis_angle)
            }.get(pb.rotation_mode, tuple(pb.rotation_euler))


def plan(obj, bases: dict, located=(), extra=()):
    """The key plan ((data_path, index, values (F,), group), ...) of `bases` {bone: (F, 4, 4)}:
    rotations of every bone, locations of the bones in `located`; `extra` plans appended."""
    out = []
    for name, basis in bases.items():
        pb = obj.pose.bones[name]
        prop, values = keys.rotation_values(basis[:, :3, :3], pb.rotation_mode, _start(pb))
        path = f'pose.bones["{bpy.utils.escape_identifier(name)}"].'
        out += [(path + prop, i, values[:, i], name) for i in range(values.shape[1])]
        if name in located:
            out += [(path + "location", i, basis[:, i, 3], name) for i in range(3)]
    return out + list(extra)


def check(key_plan):
    """Refuse a plan with a non-finite value (nothing written)."""
    for _, _, values, _ in key_plan:
        if not np.all(np.isfinite(values)):
            raise keys.RigError("the retarget produced non-finite values; nothing was written")


def write(obj, frames, key_plan, record=True) -> int:
    """Write the plan at `frames` (`keys.write_channels`: all or nothing); the number of keys."""
    check(key_plan)
    written = keys.write_channels(obj, np.asarray(frames, float), key_plan, record=record)
    obj.update_tag()
    return written

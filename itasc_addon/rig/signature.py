"""Telling whether a rig changed: everything the reader reads that is not the pose, as one value."""

from __future__ import annotations

import operator

import numpy as np

from .. import chain_bones
from .base import ik_constraints

_CONSTRAINT_FIELDS = operator.attrgetter(
    "influence", "ik_type", "use_tail", "chain_count", "use_stretch", "use_location", "use_rotation",
    "lock_location_x", "lock_location_y", "lock_location_z", "lock_rotation_x", "lock_rotation_y", "lock_rotation_z",
    "reference_axis", "weight", "orient_weight", "distance", "limit_mode", "subtarget", "pole_subtarget", "pole_angle")
# How a bone follows its parent: the sampler's remembered bases rely on it staying the same.
_INHERITANCE = operator.attrgetter("use_connect", "use_inherit_rotation", "inherit_scale", "use_local_location")
_BONE_FIELDS = operator.attrgetter(
    "lock_ik_x", "lock_ik_y", "lock_ik_z", "use_ik_limit_x", "use_ik_limit_y", "use_ik_limit_z", "ik_min_x",
    "ik_max_x", "ik_min_y", "ik_max_y", "ik_min_z", "ik_max_z", "ik_stiffness_x", "ik_stiffness_y", "ik_stiffness_z",
    "ik_stretch", "use_ik_rotation_control", "ik_rotation_weight", "use_ik_linear_control", "ik_linear_weight")


def _name(ob):
    return None if ob is None else ob.name


def _target_signature(obj, target, subtargets=()):
    """What `_target` and `_cycle` read of a target: the object, its parents and their constraints,
    whether the bones `subtargets` (names) are in it; and whether it hangs from the armature (then
    the cycle test reads the armature's bone hierarchy)."""
    items, seen, hangs = [], set(), False
    ob = target
    while ob is not None and (name := ob.name) not in seen:
        seen.add(name)
        parent = ob.parent
        cons = [(c.type, getattr(c, "target", None), getattr(c, "subtarget", ""), c.mute) for c in ob.constraints]
        items.append((name, ob.type, _name(parent), ob.parent_type, ob.parent_bone,
                      tuple((kind, _name(on), sub, mute) for kind, on, sub, mute in cons)))
        hangs = hangs or parent == obj or any(on == obj for _, on, _, _ in cons)
        ob = parent
    if target is not None and target.type == "ARMATURE" and target.pose is not None:
        bones = target.pose.bones
        items.append(tuple(sub in bones for sub in subtargets if sub))       # whether the named bones exist
    return tuple(items), hangs


def rig_signature(obj, drives=None):
    """Everything `read_rig(obj, drives)` reads from Blender that is not the pose (the IK
    constraints, which of them are driven, their targets' hierarchy, the chain bones' rest, IK
    settings, inheritance and other constraints), as one comparable value: while it stays equal,
    so does the rig read (and what live preview's sampler remembers of it). The pose bones'
    rotations and the targets' matrices, which change every frame, are not part of it."""
    drives = drives or (lambda pb, con: not con.mute)
    bones = obj.data.bones
    rest = np.empty(len(bones) * 16, np.float32)
    bones.foreach_get("matrix_local", rest)
    length = np.empty(len(bones), np.float32)
    bones.foreach_get("length", length)
    items = [obj.name, rest.tobytes(), length.tobytes()]
    in_chains, hanging = {}, False
    for pb, con in ik_constraints(obj):
        target, hangs = _target_signature(obj, con.target, (con.subtarget, con.pole_subtarget
                                                            if con.pole_target == con.target else ""))
        hanging = hanging or hangs
        items.append((pb.name, con.name, bool(drives(pb, con)), _name(con.pole_target), _CONSTRAINT_FIELDS(con),
                      target))
        # The chain (from the bone or its parent, chain_count long) and the bone it hangs from.
        bone, count = pb, con.chain_count + 1 if con.chain_count > 0 else 1 << 30
        while bone is not None and count >= 0:
            name, parent = bone.name, bone.parent
            if name not in in_chains:
                in_chains[name] = (_name(parent), _INHERITANCE(bone.bone), _BONE_FIELDS(bone),
                                   chain_bones.signature(bone))
            bone, count = parent, count - 1
    items.append(tuple(in_chains.items()))
    if hanging:
        items.append(tuple((b.name, _name(b.parent)) for b in obj.data.bones))
    return tuple(items)

"""What acts on a chain bone besides the pose we write, and how a stretch passes down the chain.

Blender evaluates the keys we write through everything else the rig puts on a chain bone. The
reader (`rig.read_rig`) models what it can and leaves out, with a message naming the bone, the
constraint or driver and what to change, every IK constraint whose chain holds a bone it cannot
model (`problems`):

* other constraints on a chain bone (before or after IK in the stack: with Blender's IK muted they
  all act on the written pose), unless muted or at influence 0. A Copy Scale is modelled where
  it changes nothing: in World or Pose Space, its target unscaled (a bone of the armature: its
  pose matrix; another object or armature: scaled as the armature), as read when the rig is
  read; the bone then keeps its unit scale, which the solver holds by not stretching it
  (`holds_scale`), and Copy Scale of a unit scale onto a unit scale is the unit scale, whatever
  its power, offset, addition or influence (a target scaled at another frame shows in Blender's
  evaluation of the bake, which the result reports). A Limit Rotation is modelled where
  it is exact (`limit_rotation`): in Local Space, on a bone that turns about one axis only (its
  other IK axes locked) and is not the first of its chain; its limits on that axis become the
  joint's limits (with the bone's IK limits, the narrower of both), and its other axes must allow
  0. On such a bone the rotation is a pure turn about that axis, which Blender's Limit Rotation
  clamps to exactly those limits in every Euler order; the solved pose stays inside them, so the
  constraint leaves it as it is;
* drivers on a chain bone's rotation or scale channels, or on the location of a bone that is not
  the first of its chain (the solver keeps those at their rest offset), unless muted;
* a bone that stretches (IK Stretch) with a child in the model that does not start at its tail
  (see below).

Stretch as Blender shows it. Blender's IK stretches a bone by scaling it uniformly; a child that
inherits scale (every `inherit_scale` but NONE and NONE_LEGACY) takes its parent's scale on, and
every child's head sits where its parent's full matrix puts its rest offset. We write the same:
a bone's total uniform scale is its stretch factor s = (L + d) / L (1 without stretch), and the
scale written into its channels is s divided by the total scale of the parent it inherits from
(`written_scales`). A child whose head is at its stretching parent's tail then sits at the
parent's stretched tail, which is where the engine's stretch (a translation d along the parent's
Y after its rotation) puts it; a child elsewhere would move by s times its offset, which the
engine does not model.
"""

from __future__ import annotations

import numpy as np

from .dependencies import bone_of_path

NOT_INHERITING = ("NONE", "NONE_LEGACY")
AT_TAIL = 1e-6          # a child's head this close to its parent's tail (relative to the parent's length)


def scale_parents(obj, names):
    """Per bone of `names` (the model's order, parents first), the index in `names` of the parent
    whose scale it inherits, or -1 (no parent in the model, or it does not inherit scale)."""
    index = {name: s for s, name in enumerate(names)}
    out = np.full(len(names), -1, dtype=int)
    for s, name in enumerate(names):
        bone = obj.data.bones[name]
        if bone.parent is not None and bone.parent.name in index and bone.inherit_scale not in NOT_INHERITING:
            out[s] = index[bone.parent.name]
    return out


def written_scales(total, parents):
    """The uniform scales (F, S) to write so that Blender's evaluation shows the bones' total
    scales `total` (F, S): each divided by the total of the parent it inherits from (`scale_parents`)."""
    inherits = parents >= 0
    out = np.array(total, float)
    out[:, inherits] /= total[:, parents[inherits]]
    return out


def total_scales(own, parents):
    """The bones' total scales (F, S, ...) from their own (channel) scales `own`, parents first."""
    out = np.array(own, float)
    for s in np.flatnonzero(parents >= 0):
        out[:, s] *= out[:, parents[s]]
    return out


def _free_axis(pb):
    """The one IK axis (0, 1, 2) a bone turns about, or None when it turns about none or several."""
    free = [i for i, a in enumerate("xyz") if not getattr(pb, f"lock_ik_{a}")]
    return free[0] if len(free) == 1 else None


def _limit_rotation_reason(pb, con, root):
    """'' when a Limit Rotation constraint is modelled exactly (module docstring), else why not."""
    axis = _free_axis(pb)
    why = ""
    if con.owner_space != "LOCAL":
        why = "it is not in Local Space"
    elif root:
        why = "the bone is the first of its chain"
    elif axis is None:
        why = "the bone turns about more than one axis: lock its other IK axes"
    else:
        for i, a in enumerate("xyz"):
            lo, hi = float(getattr(con, f"min_{a}")), float(getattr(con, f"max_{a}"))
            if getattr(con, f"use_limit_{a}") and (lo > hi or (i != axis and not lo <= 0.0 <= hi)):
                why = f"its {a.upper()} limits do not hold 0" if i != axis else f"its {a.upper()} limits are empty"
                break
    if not why:
        return ""
    return (f"bone '{pb.name}' has a Limit Rotation constraint '{con.name}' that the solver cannot follow exactly "
            f"({why}); use the bone's IK limits instead (Bone > Inverse Kinematics), or mute it")


UNIT_SCALE = 1e-5      # a target's axis scales this close to 1 count as unscaled


def _copy_scale_reason(pb, con):
    """'' when a Copy Scale constraint leaves the solved pose as it is (module docstring), else why not."""
    target, why = con.target, ""
    owner = pb.id_data
    if target is None:
        return ""                    # no target: Blender does nothing with it
    if con.owner_space not in ("WORLD", "POSE") or con.target_space not in ("WORLD", "POSE"):
        why = "it is not in World or Pose Space"
    elif target.type == "ARMATURE" and con.subtarget:
        bone = target.pose.bones.get(con.subtarget) if target.pose is not None else None
        scale = column_scales(bone.matrix) if bone is not None else None
        if target != owner and scale is not None:
            scale = scale * column_scales(target.matrix_world) / column_scales(owner.matrix_world)
        if scale is None or np.abs(scale - 1.0).max() > UNIT_SCALE:
            why = f"its target bone '{con.subtarget}' is scaled"
    elif np.abs(column_scales(target.matrix_world) / column_scales(owner.matrix_world) - 1.0).max() > UNIT_SCALE:
        why = f"its target '{target.name}' is scaled unlike the armature"
    if not why:
        return ""
    return (f"bone '{pb.name}' has a Copy Scale constraint '{con.name}' that the solver cannot follow exactly "
            f"({why}); mute it while the solver drives the rig, or take the bone out of the chain (Chain Length)")


def column_scales(matrix):
    """The lengths of a matrix's first three columns (its axis scales), as an array of 3."""
    M = np.array(matrix, float)[:3, :3]
    return np.sqrt((M * M).sum(axis=0))


def holds_scale(pb):
    """Whether a modelled Copy Scale holds the bone at its unit scale: the solver does not stretch it."""
    return any(c.type == "COPY_SCALE" and not c.mute and c.influence > 0.0 and c.target is not None
               for c in pb.constraints)


def limit_rotation(pb):
    """Per axis, the (min, max) that the bone's modelled Limit Rotation constraints put on its
    rotation (the narrowest of them), or None. Call it for bones `problems` has no reason for."""
    out = [None, None, None]
    for con in pb.constraints:
        if con.type != "LIMIT_ROTATION" or con.mute or con.influence <= 0.0:
            continue
        axis = _free_axis(pb)
        if axis is None:
            continue
        a = "xyz"[axis]
        if getattr(con, f"use_limit_{a}"):
            lo, hi = float(getattr(con, f"min_{a}")), float(getattr(con, f"max_{a}"))
            if out[axis] is not None:
                lo, hi = max(lo, out[axis][0]), min(hi, out[axis][1])
            out[axis] = (lo, hi)
    return tuple(out)


def signature(pb):
    """What `problems` and `limit_rotation` read of a bone's constraints, as one comparable value
    (IK constraints are the hand-over's: their mute changes while ours drives)."""
    return tuple((c.type, c.name, c.mute, c.influence > 0.0, getattr(c, "owner_space", ""),
                  getattr(c, "target_space", ""), getattr(c, "subtarget", ""))
                 + (tuple(getattr(c, f"{k}_{a}") for k in ("use_limit", "min", "max") for a in "xyz")
                    if c.type == "LIMIT_ROTATION" else ()) for c in pb.constraints if c.type != "IK")


def problems(obj, in_model, stretchy, roots, walker):
    """{bone name: why the solver cannot model it} for the bones `in_model` (module docstring).
    `stretchy`: the bones that stretch; `roots`: those whose parent is outside the model (their
    location is read per frame); `walker`: a dependencies.Walker (the drivers, sorted by bone)."""
    out = {}
    drivers = walker.drivers(obj)
    for name in in_model:
        pb = obj.pose.bones[name]
        reason = _constraint_reason(pb, name in roots) or _driver_reason(name, drivers.get(name, ()), name in roots)
        if not reason and pb.parent is not None and pb.parent.name in stretchy:
            reason = _gap_reason(obj, pb.parent.name, name)
        if reason:
            out[name] = reason
    return out


def _constraint_reason(pb, root):
    for con in pb.constraints:
        if con.type == "IK" or con.mute or con.influence <= 0.0:
            continue
        if con.type == "LIMIT_ROTATION":
            reason = _limit_rotation_reason(pb, con, root)
            if reason:
                return reason
            continue
        if con.type == "COPY_SCALE":
            reason = _copy_scale_reason(pb, con)
            if reason:
                return reason
            continue
        return (f"bone '{pb.name}' has a {con.type.replace('_', ' ').title()} constraint '{con.name}', which "
                "would move it after the solve; mute it (or set its influence to 0) while the solver drives the "
                "rig, or take the bone out of the chain (Chain Length)")
    return ""


def _driver_reason(name, curves, root):
    for fc in curves:
        _, rest = bone_of_path(fc.data_path)
        channel = rest.lstrip(".")
        if channel.startswith(("rotation_", "scale")) or (channel.startswith("location") and not root):
            return (f"bone '{name}' has a driver on {channel}[{fc.array_index}], which would override the "
                    "solved pose; mute or remove the driver, or take the bone out of the chain (Chain Length)")
    return ""


def _gap_reason(obj, parent, name):
    bones = obj.data.bones
    gap = float(np.linalg.norm(np.subtract(bones[name].head_local, bones[parent].tail_local)))
    if gap <= AT_TAIL * bones[parent].length:
        return ""
    return (f"bone '{parent}' stretches (IK Stretch) and its child '{name}' does not start at its tail "
            f"({gap:.3g} away): Blender moves the child with the stretch in a way the solver does not model; "
            f"move the head of '{name}' to the tail of '{parent}', or set IK Stretch of '{parent}' to 0")

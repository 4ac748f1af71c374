"""Models from bones, the way Blender's iTaSC turns a bone's IK settings into joints.

A bone's free IK axes (those not locked) pick its rotation joint, in the bone's rest frame:

    X, Y or Z   one revolute joint          XY   RotX then RotY       YZ   RotZ then RotY
    XZ          swing (phi_x, phi_z)        XYZ  sphere, or swing then RotY when any axis is limited

and a bone with IK stretch gets a translation along its own Y axis after the rotation. Joint
weights are 1 - stiffness per axis; the stretch's is `stretch` unless `stretch_weight` is given
(the add-on gives iTaSC's, `itasc_stretch_weight`). A limited swing uses the elliptic limit when
both its axes are limited. Bone Y runs along the bone; the tail is (0, L, 0).

`coordinates_from_basis` goes the other way: from the bones' pose (Blender's matrix_basis) to the
coordinates of those joints.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .limits import project, wrap_spheres
from .joints import REVOLUTE as REVOLUTE_KIND
from .joints import SWING as SWING_KIND
from .model import PRISMATIC, REVOLUTE, SWING, Model, Segment, prismatic, revolute, sphere, swing
from .rotations import axis_angle_matrix


@dataclass(frozen=True)
class Bone:
    """Rest data and IK settings of one bone. `matrix` is the 4x4 rest matrix in armature space
    (Blender's Bone.matrix_local); `limits` per axis is None or (min, max) in radians."""

    name: str
    matrix: np.ndarray
    length: float
    parent: str | None = None
    lock: tuple = (False, False, False)
    limits: tuple = (None, None, None)
    stiffness: tuple = (0.0, 0.0, 0.0)
    stretch: float = 0.0
    stretch_weight: float | None = None     # the stretch joint's weight (None: `stretch` itself)


def rest_matrix(head, tail, roll: float = 0.0) -> np.ndarray:
    """A bone's rest matrix from head, tail and roll: the shortest rotation taking +Y onto the
    bone's direction, after a turn of `roll` about +Y (straight down, -Y, turns about Z)."""
    head, tail = np.asarray(head, float), np.asarray(tail, float)
    direction = tail - head
    length = np.linalg.norm(direction)
    if not np.isfinite(length) or length < 1e-12:
        raise ValueError(f"bone from {head} to {tail} has no length")
    n = direction / length
    axis = np.cross([0.0, 1.0, 0.0], n)
    s = np.linalg.norm(axis)
    if s < 1e-12:
        arc = np.eye(3) if n[1] > 0 else np.diag([-1.0, -1.0, 1.0])
    else:
        arc = axis_angle_matrix(axis / s, np.arctan2(s, n[1]))
    M = np.eye(4)
    M[:3, :3] = arc @ axis_angle_matrix(np.array([0.0, 1.0, 0.0]), roll)
    M[:3, 3] = head
    return M


def bone_joints(bone: Bone):
    """The joints Blender's iTaSC gives a bone with these IK settings."""
    free = [not locked for locked in bone.lock]
    lim = [(-np.inf, np.inf) if pair is None else (float(pair[0]), float(pair[1])) for pair in bone.limits]
    w = [1.0 - float(s) for s in bone.stiffness]
    limited = [pair is not None for pair in bone.limits]

    def rot(i):
        return revolute("XYZ"[i], lower=(lim[i][0],), upper=(lim[i][1],), weight=(w[i],), name=f"{bone.name}.rot{'xyz'[i]}")

    def swing_joint():
        both = limited[0] and limited[2]
        return swing(lower=(lim[0][0], lim[2][0]), upper=(lim[0][1], lim[2][1]), weight=(w[0], w[2]),
                     elliptic=both, name=f"{bone.name}.swing")

    key = "".join("XYZ"[i] for i in range(3) if free[i])
    if key == "":
        joints = []
    elif len(key) == 1:
        joints = [rot("XYZ".index(key))]
    elif key == "XY":
        joints = [rot(0), rot(1)]
    elif key == "YZ":
        joints = [rot(2), rot(1)]
    elif key == "XZ":
        joints = [swing_joint()]
    elif any(limited):
        joints = [swing_joint(), rot(1)]
    else:
        joints = [sphere(weight=tuple(w), name=f"{bone.name}.sphere")]
    if bone.stretch > 0:
        L = bone.length
        weight = min(1.0, bone.stretch) if bone.stretch_weight is None else bone.stretch_weight
        joints.append(prismatic("Y", lower=(-0.9 * L,), upper=(9.0 * L,), weight=(weight,),
                                name=f"{bone.name}.stretch"))
    return tuple(joints)


def itasc_stretch_weight(ik_stretch: float) -> float:
    """The joint weight Blender's iTaSC gives a bone's stretch: ik_stretch^2, at least 0.01, so that
    rotations reach first (the add-on's rig reader sets it as Bone.stretch_weight)."""
    return max(min(1.0, float(ik_stretch)) ** 2, 0.01)


def model_from_bones(bones: Sequence[Bone], armature: int = 0, name: str = "armature") -> Model:
    """A model from bones (parents may come in any order). Use `combine` for several armatures."""
    return Model(segments_from_bones(bones, armature), armature_names=[name])


def segments_from_bones(bones: Sequence[Bone], armature: int = 0, first_index: int = 0):
    by_name = {b.name: b for b in bones}
    order, seen = [], set()

    def visit(b: Bone, path=()):
        if b.name in seen:
            return
        if b.name in path:
            raise ValueError(f"bone '{b.name}' is its own ancestor")
        if b.parent is not None:
            if b.parent not in by_name:
                raise ValueError(f"bone '{b.name}': parent '{b.parent}' is not among the bones")
            visit(by_name[b.parent], path + (b.name,))
        seen.add(b.name)
        order.append(b)

    for b in bones:
        visit(b)
    index = {b.name: first_index + i for i, b in enumerate(order)}
    segments = []
    for b in order:
        matrix = np.asarray(b.matrix, float)
        if not (np.isfinite(b.length) and b.length > 0):
            raise ValueError(f"bone '{b.name}' has length {b.length}; bones need a positive length")
        if b.parent is None:
            rest, parent = matrix, -1
        else:
            rest, parent = np.linalg.inv(np.asarray(by_name[b.parent].matrix, float)) @ matrix, index[b.parent]
        segments.append(Segment(b.name, parent, rest, bone_joints(b), float(b.length), armature=armature))
    return segments


def combine(armatures: Sequence[Sequence[Bone]], names: Sequence[str] | None = None) -> Model:
    """One model holding several armatures; each gets its own base frame (object transform)."""
    segments = []
    for a, bones in enumerate(armatures):
        segments += segments_from_bones(bones, armature=a, first_index=len(segments))
    return Model(segments, armature_names=names)


def coordinates_from_basis(model: Model, basis) -> np.ndarray:
    """Joint coordinates (F, n) of a model made of bones (bone_joints) closest to the bones' pose
    basis matrices (F, S, 4, 4) (Blender's matrix_basis: each bone's motion from its rest), the
    inverse of forward kinematics' segment motions. Per bone, its rotation R (the basis with its
    column scales divided out) is split the way its joints compose:

        one joint               the kind's from_rotation (revolute: twist about the axis;
                                swing: the swing turning +Y onto R's Y axis; sphere: log R)
        swing then RotY         the swing as above, then the twist of Swing^T R about Y
        RotX then RotY          R = Rx(a) Ry(b): a from R's Y column (Ry keeps Y),
                                b from R's X row (Rx keeps X)
        RotZ then RotY          R = Rz(a) Ry(b): a from R's Y column, b from R's Z row

    and a stretch from the bone's Y scale s: (s - 1) L. Components the joints cannot make (locked
    axes) are dropped; the result is moved onto the limits (limits.project, unlimited spheres the
    short way round)."""
    basis = np.asarray(basis, float)
    q = np.zeros((basis.shape[0], model.n_coordinates))
    M = basis[..., :3, :3]
    scale = np.linalg.norm(M, axis=-2)
    R = M / np.where(scale > 1e-12, scale, 1.0)[..., None, :]
    for split, segments, columns, joint in _splits(model):
        split(R[:, segments], joint, q, columns)
    for segments, columns, lengths in _stretches(model):
        q[:, columns] = (scale[:, segments, 1] - 1.0) * lengths
    return wrap_spheres(model, project(model, q))


_Y = (0.0, 1.0, 0.0)
_EULER_Y = {  # RotA then RotY: (A's angle, Y's angle) from R
    (1.0, 0.0, 0.0): lambda R: (np.arctan2(R[..., 2, 1], R[..., 1, 1]), np.arctan2(R[..., 0, 2], R[..., 0, 0])),
    (0.0, 0.0, 1.0): lambda R: (np.arctan2(-R[..., 0, 1], R[..., 1, 1]), np.arctan2(-R[..., 2, 0], R[..., 2, 2])),
}
# Per model, the bones grouped by how their rotation splits (`_splits`) and their stretches: worked
# out once (live preview asks every frame).
_PLANS = weakref.WeakKeyDictionary()


def _one_joint(R, joint, q, columns):
    """q[:, columns] (F, k, d) = the coordinates of one joint (the bones' `joint`, alike) nearest
    R (F, k, 3, 3)."""
    q[:, columns] = joint.type.from_rotation(R, joint.axis)


def _swing_twist(R, _, q, columns):
    """Swing then RotY: the swing turning +Y onto R's Y axis, then the twist of Swing^T R about Y."""
    swing_q = SWING_KIND.from_rotation(R)
    q[:, columns[:, :2]] = swing_q
    twist = np.swapaxes(SWING_KIND.rotation(swing_q), -1, -2) @ R
    q[:, columns[:, 2]] = REVOLUTE_KIND.from_rotation(twist, _Y)[..., 0]


def _euler_y(R, axis, q, columns):
    """RotX or RotZ (`axis`) then RotY (`_EULER_Y`)."""
    q[:, columns[:, 0]], q[:, columns[:, 1]] = _EULER_Y[axis](R)


def _splits(model: Model):
    return _plan(model)[0]


def _stretches(model: Model):
    return _plan(model)[1]


def _plan(model: Model):
    """([(split, segments (k,), columns (k, d), what split takes besides)], [(segments, columns,
    lengths)]): the bones whose rotation splits alike (the same joint kinds on the same axes)
    together, as coordinates_from_basis describes; the stretching bones with their coordinates
    and lengths."""
    plan = _PLANS.get(model)
    if plan is not None:
        return plan
    groups, stretches = {}, []
    for s in range(len(model.segments)):
        on_segment = np.flatnonzero(model.joint_segment == s)
        turning = [int(k) for k in on_segment if model.joints[k].kind != PRISMATIC]
        for k in on_segment:
            if model.joints[k].kind == PRISMATIC:
                stretches.append((s, int(model.joint_first[k])))
        if not turning:
            continue
        joints = [model.joints[k] for k in turning]
        columns = [c for k, j in zip(turning, joints)
                   for c in range(model.joint_first[k], model.joint_first[k] + j.type.n_coordinates)]
        kinds = [j.type.name for j in joints]
        axes = [tuple(np.round(j.axis, 6)) for j in joints]
        if len(joints) == 1:
            key = (_one_joint, kinds[0], tuple(np.asarray(joints[0].axis, float).tolist()))
            given = joints[0]
        elif kinds == [SWING, REVOLUTE] and axes[1] == _Y:
            key, given = (_swing_twist,), None
        elif kinds == [REVOLUTE, REVOLUTE] and axes[1] == _Y and axes[0] in _EULER_Y:
            key, given = (_euler_y, axes[0]), axes[0]
        else:
            names = [f"{k} {a}" for k, a in zip(kinds, axes)]
            raise ValueError(f"segment '{model.names[s]}': joints {names} are not a bone's (bone_joints)")
        group = groups.setdefault(key, (given, [], []))
        group[1].append(s)
        group[2].append(columns)
    splits = [(key[0], np.array(segments, dtype=int), np.array(columns, dtype=int), given)
              for key, (given, segments, columns) in groups.items()]
    stretch = ([] if not stretches else
               [(np.array([s for s, _ in stretches], dtype=int), np.array([c for _, c in stretches], dtype=int),
                 np.asarray(model.length, float)[[s for s, _ in stretches]])])
    plan = _PLANS[model] = (splits, stretch)
    return plan

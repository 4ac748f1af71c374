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

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .limits import project, wrap_spheres
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
    lim = [(-np.inf, np.inf) if l is None else (float(l[0]), float(l[1])) for l in bone.limits]
    w = [1.0 - float(s) for s in bone.stiffness]
    limited = [l is not None for l in bone.limits]

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
    F = basis.shape[0]
    q = np.zeros((F, model.n_coordinates))
    M = basis[..., :3, :3]
    scale = np.linalg.norm(M, axis=-2)
    R = M / np.where(scale > 1e-12, scale, 1.0)[..., None, :]
    for s in range(len(model.segments)):
        on_segment = np.flatnonzero(model.joint_segment == s)
        turning = [k for k in on_segment if model.joints[k].kind != PRISMATIC]
        if turning:
            _split_rotation(model, turning, R[:, s], q)
        for k in on_segment:
            if model.joints[k].kind == PRISMATIC:
                q[:, model.joint_first[k]] = (scale[:, s, 1] - 1.0) * model.length[s]
    return wrap_spheres(model, project(model, q))


_Y = (0.0, 1.0, 0.0)
_EULER_Y = {  # RotA then RotY: (A's angle, Y's angle) from R
    (1.0, 0.0, 0.0): lambda R: (np.arctan2(R[:, 2, 1], R[:, 1, 1]), np.arctan2(R[:, 0, 2], R[:, 0, 0])),
    (0.0, 0.0, 1.0): lambda R: (np.arctan2(-R[:, 0, 1], R[:, 1, 1]), np.arctan2(-R[:, 2, 0], R[:, 2, 2])),
}


def _split_rotation(model: Model, joints, R, q) -> None:
    """Write into q the coordinates of `joints` (one bone's rotation joints, in order) for its
    rotations R (F, 3, 3), as coordinates_from_basis describes."""
    first = [model.joint_first[k] for k in joints]
    kinds = [model.joints[k].type for k in joints]
    axes = [tuple(np.round(model.joints[k].axis, 6)) for k in joints]
    if len(joints) == 1:
        q[:, first[0]:first[0] + kinds[0].n_coordinates] = kinds[0].from_rotation(R, model.joints[joints[0]].axis)
    elif [k.name for k in kinds] == [SWING, REVOLUTE] and axes[1] == _Y:
        swing_q = kinds[0].from_rotation(R)
        q[:, first[0]:first[0] + 2] = swing_q
        q[:, first[1]] = kinds[1].from_rotation(np.swapaxes(kinds[0].rotation(swing_q), -1, -2) @ R, _Y)[:, 0]
    elif [k.name for k in kinds] == [REVOLUTE, REVOLUTE] and axes[1] == _Y and axes[0] in _EULER_Y:
        q[:, first[0]], q[:, first[1]] = _EULER_Y[axes[0]](R)
    else:
        names = [f"{k.name} {a}" for k, a in zip(kinds, axes)]
        raise ValueError(f"segment '{model.names[model.joint_segment[joints[0]]]}': joints {names} are not a bone's "
                         "(bone_joints)")

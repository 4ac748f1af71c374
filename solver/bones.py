"""Models from bones, the way Blender's iTaSC turns a bone's IK settings into joints.

A bone's free IK axes (those not locked) pick its rotation joint, in the bone's rest frame:

    X, Y or Z   one revolute joint          XY   RotX then RotY       YZ   RotZ then RotY
    XZ          swing (phi_x, phi_z)        XYZ  sphere, or swing then RotY when any axis is limited

and a bone with IK stretch gets a translation along its own Y axis after the rotation. Joint
weights are 1 - stiffness per axis (the stretch weight is ik_stretch). A limited swing uses the
elliptic limit when both its axes are limited. Bone Y runs along the bone; the tail is (0, L, 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .model import Model, Segment, prismatic, revolute, sphere, swing
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
        joints.append(prismatic("Y", lower=(-0.9 * L,), upper=(9.0 * L,), weight=(min(1.0, bone.stretch),),
                                name=f"{bone.name}.stretch"))
    return tuple(joints)


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

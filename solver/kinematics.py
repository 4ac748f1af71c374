"""Batched forward kinematics and geometric Jacobians.

Coordinates q have shape (F, n): a leading frame axis F. Forward kinematics returns, per frame,
the world frame of every segment and, per coordinate, the world direction it moves along:

    a rotation coordinate   turns the subtree with angular velocity  w_c  about the point  o_c
    a translation coordinate moves the subtree with velocity  u_c

so the geometric Jacobian of a point p on segment s has, for every coordinate c that moves s,
the column  [w_c x (p - o_c); w_c]  (rotation)  or  [u_c; 0]  (translation): linear velocity of
the point, then angular velocity of its frame, both in world coordinates.

For a rotation-vector joint (swing, sphere) with value phi applied in the frame B before it,
w_c is column c of  R_B J(phi)  (see rotations.rotvec_jacobian).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Model
from .rotations import skew

_IDENTITY4 = np.eye(4)
_IDENTITY3 = np.eye(3)


@dataclass
class Pose:
    """The state forward kinematics computes for one set of coordinates (F frames)."""

    frames: np.ndarray        # (F, S, 4, 4) world frame of each segment
    local: np.ndarray         # (F, S, 4, 4) motion of each segment's joints (rest-relative)
    direction: np.ndarray     # (F, n, 3) w_c or u_c per coordinate
    pivot: np.ndarray         # (F, n, 3) o_c per coordinate (unused for translations)


def joint_transforms(model: Model, q: np.ndarray):
    """Per joint: its 4x4 transform (F, G, 4, 4) and its velocity columns in its own
    pre-joint frame (F, n, 3), one column per coordinate; each kind's group in one call
    (joints.py)."""
    F = q.shape[0]
    T = np.zeros((F, len(model.joints), 4, 4))
    T[..., 3, 3] = 1.0
    # Revolute and prismatic columns are fixed axes; only swing and sphere columns vary with q.
    columns = np.repeat(model.fixed_columns[None], F, axis=0)
    for group in model.joint_groups:
        values = q[group.take]                   # (F, G, d)
        if group.reshape:
            values = values.reshape(F, -1, group.kind.n_coordinates)
        R, t, varying = group.kind.motion(values, group.prepared)
        T[:, group.joints, :3, :3] = _IDENTITY3 if R is None else R
        if t is not None:
            translation = T[..., :3, 3]         # a view: one advanced index only below
            translation[:, group.joints] = t
        if varying is not None:
            columns[:, group.coordinates] = varying.reshape(F, -1, 3)
    return T, columns


def forward_kinematics(model: Model, q: np.ndarray, bases: np.ndarray | None = None) -> Pose:
    """World frames of all segments for coordinates q (F, n); `bases` (F, A, 4, 4) places each
    armature in the world (identity when None)."""
    q = np.asarray(q, dtype=float)
    F = q.shape[0]
    S = len(model.segments)
    T, columns = joint_transforms(model, q)
    local, before = _compose(model, T)

    # Built segment-major in level order, (S, F, 4, 4): a level is then one contiguous run of all
    # its segments' frames, which its products write into directly (`out`); a level of one segment
    # takes its constant in one 2-D matrix product over all frames.
    layout = model.layout
    frames = np.empty((S, F, 4, 4))
    pre = np.empty((S, F, 4, 4))
    local_by_segment = local.swapaxes(0, 1)
    for level, run, parent in zip(layout.level_index, layout.level_run, layout.level_parent_position):
        if parent is None:  # the roots
            pre[run] = (model.rest[level][:, None] if bases is None
                        else (bases[:, model.armature[level]] @ model.rest[level]).swapaxes(0, 1))
        else:
            _times_constant(frames[parent], model.rest[level], out=pre[run])
        np.matmul(pre[run], local_by_segment[level], out=frames[run])
        if model.has_post:
            _times_constant(frames[run], model.post[level], out=frames[run])
    if layout.segment_position is not None:
        frames = frames[layout.segment_position]       # back to segment order
    frames = frames.swapaxes(0, 1)

    # World frame before each joint (a segment's first joint acts right after the segment's rest
    # frame), then rotation axis and pivot per coordinate.
    joint_frame = pre[layout.joint_position].swapaxes(0, 1)
    for slot, motion in before.items():
        joints = layout.slots[slot]
        joint_frame[:, joints] = joint_frame[:, joints] @ motion
    joint_R = np.ascontiguousarray(joint_frame[..., :3, :3])                   # (F, G, 3, 3)
    direction = np.einsum("fnij,fnj->fni", _per_coordinate(model, joint_R), columns)
    pivot = _per_coordinate(model, joint_frame[..., :3, 3])
    return Pose(frames=frames, local=local, direction=direction, pivot=pivot)


def _per_coordinate(model: Model, per_joint: np.ndarray) -> np.ndarray:
    """per_joint (F, G, ...) for each coordinate's joint (F, n, ...): a view where those run
    contiguously, else np.take, whose result is laid out frame-major (an index array on axis 1
    puts that axis first in memory, which makes the einsum above several times slower)."""
    index = model.layout.coordinate_joint_index
    return per_joint[:, index] if isinstance(index, slice) else per_joint.take(index, axis=1)


def segment_motions(model: Model, q: np.ndarray) -> np.ndarray:
    """Each segment's own joint motion (F, S, 4, 4), rest-relative: Pose.local without the rest."""
    return _compose(model, joint_transforms(model, np.asarray(q, dtype=float))[0])[0]


def _compose(model: Model, T: np.ndarray):
    """Each segment's joints (transforms T (F, G, 4, 4)) composed slot by slot: the segments'
    motions (F, S, 4, 4) and, per later slot, the motion before its joints."""
    layout = model.layout
    if layout.one_joint_per_segment:
        return T, {}
    local = np.empty((T.shape[0], len(model.segments), 4, 4))
    local[:, layout.jointless_index] = _IDENTITY4
    before = {}
    local[:, layout.first_slot_segments] = T[:, layout.first_slot_index]
    for slot, joints in enumerate(layout.slots[1:], start=1):
        seg = model.joint_segment[joints]
        before[slot] = local[:, seg]                     # a copy: the index is an array
        local[:, seg] = before[slot] @ T[:, joints]
    return local, before


def _times_constant(M: np.ndarray, C: np.ndarray, out: np.ndarray) -> None:
    """out = M (L, F, 4, 4) @ C (L, 4, 4), segment-major, into a contiguous `out`. With L = 1 this
    is one matrix product over all frames at once, which numpy runs several times faster than a
    stack of 4x4 products."""
    if C.shape[0] == 1:
        np.matmul(M.reshape(-1, 4), C[0], out=out.reshape(-1, 4))    # reshapes of contiguous blocks: views
    else:
        np.matmul(M, C[:, None], out=out)


_NEXT, _AFTER = [1, 2, 0], [2, 0, 1]     # (a x b)_i = a_next b_after - a_after b_next
_MINUS_SKEW = -skew(np.eye(3)).reshape(3, 9)   # -[p]x flattened = p @ _MINUS_SKEW
_TO_POINT = np.zeros((6, 6))             # [[-[p]x, I], [I, 0]] without its -[p]x
_TO_POINT[:3, 3:] = _TO_POINT[3:, :3] = np.eye(3)


def point_jacobian(model: Model, pose: Pose, segments: np.ndarray, points: np.ndarray,
                   linear: bool = False) -> np.ndarray:
    """Geometric Jacobians (F, E, 6, n) of world points (F, E, 3) fixed to `segments` (E,):
    rows 0-2 the point's linear velocity, rows 3-5 the segment's angular velocity; `linear`: rows
    0-2 alone (F, E, 3, n)."""
    J = moved_point_jacobian(model, pose, points, linear)
    mask = model.moving_mask(segments)
    if mask is not None:
        J *= mask
    return J


def moved_point_jacobian(model: Model, pose: Pose, points: np.ndarray, linear: bool = False) -> np.ndarray:
    """point_jacobian before its mask: the Jacobians of points (F, E, 3) as if every coordinate
    moved every point; times Model.moving_mask(segments) they are point_jacobian's. With V the
    coordinates' twists (coordinate_twists), J = [[-[p]x, I], [I, 0]] V, one product per point
    (with `linear`, its first three rows)."""
    F, E = points.shape[0], points.shape[1]
    V = coordinate_twists(model, pose)
    to_point = np.empty((F, E, 3 if linear else 6, 6))
    to_point[:] = _TO_POINT[:3] if linear else _TO_POINT
    to_point[..., :3, :3] = (points @ _MINUS_SKEW).reshape(F, E, 3, 3)
    return to_point @ V[:, None]


def coordinate_twists(model: Model, pose: Pose) -> np.ndarray:
    """Each coordinate's twist V (F, 6, n): per coordinate c, the linear rows of a point p's
    Jacobian are w_c x (p - o_c) = -[p]x w_c + o_c x w_c (rotations) or u_c (translations), the
    angular rows w_c or 0, so with V = (w; o x w + u) every point's Jacobian is
    [[-[p]x, I], [I, 0]] V."""
    F, n = pose.direction.shape[0], model.n_coordinates
    w, o = pose.direction, pose.pivot
    V = np.empty((F, 6, n))
    V[:, :3] = w.swapaxes(-1, -2)
    other = np.empty((F, n))
    for i, (j, k) in enumerate(zip(_NEXT, _AFTER)):                  # o x w, one component at a time
        np.multiply(o[..., j], w[..., k], out=V[:, 3 + i])
        np.multiply(o[..., k], w[..., j], out=other)
        V[:, 3 + i] -= other
    translation = model.translational
    if translation.size:
        V[:, 3:, translation] = V[:, :3, translation]
        V[:, :3, translation] = 0.0
    return V


def point_jacobian_transpose_times(model: Model, pose: Pose, segments: np.ndarray, points: np.ndarray,
                                   forces: np.ndarray) -> np.ndarray:
    """sum_e J_e^T f_e (F, n) over points (F, E, 3) fixed to `segments` (E,), J_e the linear rows
    of point_jacobian, without forming J: J_e = [-[p_e]x, I] V masked to the coordinates that move
    e, so J_e^T f_e = V^T (p_e x f_e; f_e) there, and the sum over points of each coordinate's
    (p x f; f) comes first, one product by the (n, E) mask of what moves what."""
    moves = model.moves[:, segments].astype(float)                                # (n, E)
    V = coordinate_twists(model, pose)
    return (np.einsum("fkc,fck->fc", V[:, :3], moves @ np.cross(points, forces))
            + np.einsum("fkc,fck->fc", V[:, 3:], moves @ forces))

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
from .rotations import axis_angle_matrix, exp_map_with_jacobian


@dataclass
class Pose:
    """The state forward kinematics computes for one set of coordinates (F frames)."""

    frames: np.ndarray        # (F, S, 4, 4) world frame of each segment
    local: np.ndarray         # (F, S, 4, 4) motion of each segment's joints (rest-relative)
    direction: np.ndarray     # (F, n, 3) w_c or u_c per coordinate
    pivot: np.ndarray         # (F, n, 3) o_c per coordinate (unused for translations)


def joint_transforms(model: Model, q: np.ndarray):
    """Per joint: its 4x4 transform (F, G, 4, 4) and its velocity columns in its own
    pre-joint frame (F, n, 3), one column per coordinate."""
    F = q.shape[0]
    G = len(model.joints)
    T = np.broadcast_to(np.eye(4), (F, G, 4, 4)).copy()
    columns = np.zeros((F, model.n_coordinates, 3))
    first = model.joint_first

    r = model.revolute_joints
    if r.size:
        T[:, r, :3, :3] = axis_angle_matrix(model.joint_axis[r], q[:, first[r]])
        columns[:, first[r]] = model.joint_axis[r]
    p = model.prismatic_joints
    if p.size:
        translation = T[..., :3, 3]  # a view: one advanced index only below
        translation[:, p] = model.joint_axis[p] * q[:, first[p], None]
        columns[:, first[p]] = model.joint_axis[p]
    s = model.swing_joints
    if s.size:
        phi = np.zeros((F, s.size, 3))
        phi[..., 0] = q[:, first[s]]
        phi[..., 2] = q[:, first[s] + 1]
        T[:, s, :3, :3], J = exp_map_with_jacobian(phi)
        columns[:, first[s]] = J[..., 0]
        columns[:, first[s] + 1] = J[..., 2]
    b = model.sphere_joints
    if b.size:
        coords = first[b][:, None] + np.arange(3)                 # (k, 3)
        T[:, b, :3, :3], J = exp_map_with_jacobian(q[:, coords])
        columns[:, coords] = np.swapaxes(J, -1, -2)              # row c of J^T is column c of J
    return T, columns


def forward_kinematics(model: Model, q: np.ndarray, bases: np.ndarray | None = None) -> Pose:
    """World frames of all segments for coordinates q (F, n); `bases` (F, A, 4, 4) places each
    armature in the world (identity when None)."""
    q = np.asarray(q, dtype=float)
    F = q.shape[0]
    S = len(model.segments)
    T, columns = joint_transforms(model, q)

    # Compose each segment's joints slot by slot, remembering the frame before each joint.
    local = np.broadcast_to(np.eye(4), (F, S, 4, 4)).copy()
    before = np.broadcast_to(np.eye(4), T.shape).copy()
    for slot, joints in enumerate(model.slots):
        seg = model.joint_segment[joints]
        if slot == 0:
            local[:, seg] = T[:, joints]
        else:
            before[:, joints] = local[:, seg]
            local[:, seg] = local[:, seg] @ T[:, joints]

    frames = np.empty((F, S, 4, 4))
    pre = np.empty((F, S, 4, 4))
    for level in model.levels:
        parent = model.parent[level]
        if parent[0] < 0:  # level 0 holds exactly the roots
            parent_frames = np.eye(4) if bases is None else bases[:, model.armature[level]]
        else:
            parent_frames = frames[:, parent]
        pre[:, level] = parent_frames @ model.rest[level]
        frames[:, level] = pre[:, level] @ local[:, level]
        if model.has_post:
            frames[:, level] = frames[:, level] @ model.post[level]

    # World rotation and origin of the frame before each joint, then per coordinate.
    pre_R = pre[:, model.joint_segment, :3, :3]
    joint_R = pre_R @ before[..., :3, :3]                                   # (F, G, 3, 3)
    joint_o = np.einsum("fgij,fgj->fgi", pre_R, before[..., :3, 3]) + pre[:, model.joint_segment][..., :3, 3]
    direction = np.einsum("fnij,fnj->fni", joint_R[:, model.coordinate_joint], columns)
    pivot = joint_o[:, model.coordinate_joint]
    return Pose(frames=frames, local=local, direction=direction, pivot=pivot)


def point_jacobian(model: Model, pose: Pose, segments: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Geometric Jacobians (F, E, 6, n) of world points (F, E, 3) fixed to `segments` (E,):
    rows 0-2 the point's linear velocity, rows 3-5 the segment's angular velocity."""
    rot = model.rotational
    w = pose.direction[:, None]                                  # (F, 1, n, 3)
    lever = points[:, :, None, :] - pose.pivot[:, None]          # (F, E, n, 3)
    linear = np.where(rot[:, None], np.cross(w, lever), w)
    angular = np.where(rot[:, None], w, 0.0)
    mask = model.moves[:, segments].T[None, :, :, None]          # (1, E, n, 1)
    J = np.concatenate([linear, np.broadcast_to(angular, linear.shape)], axis=-1) * mask
    return np.swapaxes(J, -1, -2)

"""The rotation-copy baseline, for contrast with the fit: what the usual tools do with keypoints
(BlendArMocap and the like). Each bone is aimed along its two keypoints; nothing holds the
keypoints themselves, the rig's joint limits or the motion's smoothness.

Per bone of role r, in parent-first order, starting from its pose rigid with its posed parent:

    its Y axis turned onto d_r(f) by the smallest rotation (about y x d_r, by atan2(|y x d|, y.d)),

with d_r from the keypoint at r's head to the first present of: a child role's head keypoint,
r's own tail keypoint, a child role's tail keypoint (thigh: hip to knee; neck: neck to the head
keypoint at the head bone's tail; foot: ankle to big toe). The spine roles aim from the hips'
keypoints' midpoint to the neck's. The hips turn as the frame of (left hip -> right hip, the
hips' midpoint -> neck) turns from the rest keypoints' to the data's; then the whole rig moves
so that the calibrated keypoints' mean lands on the data's mean (the least-squares translation).
A bone whose keypoints are missing in a frame keeps its rest turn relative to its parent there.
"""

from __future__ import annotations

import numpy as np

from ..retarget.roles import ROLE_PARENT
from ..rotations import exp_map

SPINE = ("spine", "chest", "upper_chest")


def _unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _turn(a, b):
    """Smallest rotations (F, 3, 3) taking unit vectors a onto b (F, 3); identity where b is NaN."""
    axis = np.cross(a, b)
    s = np.linalg.norm(axis, axis=-1, keepdims=True)
    c = np.sum(a * b, axis=-1, keepdims=True)
    v = axis / np.maximum(s, 1e-12) * np.arctan2(s, c)
    return exp_map(np.where(np.isfinite(v), v, 0.0))


def _places(kp_set, names):
    """{(role, place on the bone): index into `names` of its first keypoint there}."""
    return {(kp_set.roles[kp_set.index(n)], kp_set.at[kp_set.index(n)]): i
            for i, n in reversed(list(enumerate(names))) if n in kp_set.names}


def _aims(where):
    """{role: (head keypoint, tail keypoint)} (indices) the module docstring gives."""
    out = {}
    for role in ROLE_PARENT:
        children = [c for c, p in ROLE_PARENT.items() if p == role]
        head = where.get((role, "head"))
        tail = next((where[k] for k in [(c, "head") for c in children] + [(role, "tail")]
                     + [(c, "tail") for c in children] if k in where), None)
        if head is not None and tail is not None:
            out[role] = (head, tail)
    return out


def aimed_poses(y, kp_set, names, bone_names, parents, rest, role_of, rest_points, points_of):
    """Pose matrices (F, B, 4, 4) of `bone_names` (parents first; `rest` (B, 4, 4) armature
    space) aimed at keypoints `y` (F, K, 3, rig units, NaN where missing; rows `names` of set
    `kp_set`). `role_of` {bone: role}; `rest_points` (K, 3) the calibrated keypoints on the rest
    pose; `points_of(poses)` the calibrated keypoints (F, K, 3) on poses (F, B, 4, 4)."""
    F, B = y.shape[0], len(bone_names)
    at = _places(kp_set, names)
    aims = _aims(at)
    hip_l, hip_r, neck = at.get(("thigh.L", "head")), at.get(("thigh.R", "head")), at.get(("neck", "head"))
    for role in SPINE:
        if hip_l is not None and hip_r is not None and neck is not None:
            aims[role] = ((hip_l, hip_r), neck)

    def point(rows, data):
        return data[..., list(rows) if isinstance(rows, tuple) else [rows], :].mean(axis=-2)

    poses = np.empty((F, B, 4, 4))
    index = {n: i for i, n in enumerate(bone_names)}
    for b, name in enumerate(bone_names):
        parent = parents.get(name)
        if b == 0 or parent not in index:
            pose = np.broadcast_to(rest[b], (F, 4, 4)).copy()
            if hip_l is not None and hip_r is not None and neck is not None:
                frames = []
                for data in (rest_points, y):
                    across = _unit(data[..., hip_r, :] - data[..., hip_l, :])
                    up = data[..., neck, :] - (data[..., hip_l, :] + data[..., hip_r, :]) / 2
                    up = _unit(up - np.sum(up * across, axis=-1, keepdims=True) * across)
                    frames.append(np.stack([across, up, np.cross(across, up)], axis=-1))
                turn = frames[1] @ np.swapaxes(frames[0], -1, -2)
                turn = np.where(np.isfinite(turn).all(axis=(-2, -1), keepdims=True), turn, np.eye(3))
                pose[:, :3, :3] = turn @ rest[b, :3, :3]
        else:
            p = index[parent]
            pose = poses[:, p] @ (np.linalg.inv(rest[p]) @ rest[b])
        role = role_of.get(name)
        if role in aims and b != 0:
            head, tail = aims[role]
            d = _unit(point(tail, y) - point(head, y))
            R = pose[:, :3, :3]
            pose[:, :3, :3] = _turn(_unit(R[:, :, 1]), d) @ R
        poses[:, b] = pose
    shift = np.nanmean(y - points_of(poses), axis=1)
    poses[:, :, :3, 3] += np.nan_to_num(shift)[:, None]
    return poses

"""The retarget the usual tools do, for contrast: every mapped bone copies its source bone's
rotation (relative to a calibration pose) and the hips copy the source's root path scaled by the
leg-length ratio. No contacts, no floor: a target of other proportions slides its feet.

With the source's world rotation S_r(f) of role r, its rotation at the calibration frame S_r(c)
and the target bone's rest rotation T_r in world space, the target bone's world rotation is

    W_r(f) = S_r(f) S_r(c)^T T_r,

i.e. the target turns from its rest pose as the source turns from the calibration pose (rest
poses may differ: a T-pose source drives an A-pose target). The hips' head follows

    h_t(f) = h_t(rest) + k (h_s(f) - h_s(c)),    k = (thigh + shin of the target) / (of the source),

both legs' lengths averaged, so the root moves by the source's motion scaled to the target's legs.
"""

from __future__ import annotations

import numpy as np


def leg_length(lengths_by_role: dict) -> float:
    """Mean over the sides of thigh + shin length."""
    return float(np.mean([lengths_by_role[f"thigh.{s}"] + lengths_by_role[f"shin.{s}"] for s in "LR"]))


def copied_world(motion, roles, skeleton, target_map, calibration: int):
    """({target bone: world matrix (F, 4, 4)}, hips bone): the copy-rotation retarget of `motion` (rows:
    `roles`) onto `skeleton` through `target_map` {role: target bone}, calibrated at row
    `calibration` of the motion."""
    S = motion.world
    row = {r: i for i, r in enumerate(roles)}
    s_len = {r: motion.lengths[row[r]] for r in roles}
    t_len = {r: skeleton.lengths[skeleton.index(target_map[r])] for r in roles}
    k = leg_length(t_len) / leg_length(s_len)
    wanted = {}
    for r in roles:
        i = row[r]
        rot_s = S[:, i, :3, :3] / np.linalg.norm(S[:, i, :3, :3], axis=-2, keepdims=True)
        calib = rot_s[calibration]
        rest = skeleton.rest_world(target_map[r])
        rest_rot = rest[:3, :3] / np.linalg.norm(rest[:3, :3], axis=-2, keepdims=True)
        W = np.broadcast_to(np.eye(4), S.shape[:1] + (4, 4)).copy()
        W[:, :3, :3] = rot_s @ calib.T @ rest_rot
        W[:, :3, 3] = rest[:3, 3]
        wanted[target_map[r]] = W
    hips = target_map["hips"]
    h_s = S[:, row["hips"], :3, 3]
    wanted[hips][:, :3, 3] = skeleton.rest_world(hips)[:3, 3] + k * (h_s - h_s[calibration])
    return wanted, hips, k

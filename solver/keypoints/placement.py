"""Keypoints on a model: each keypoint rides on one segment at a point fixed in that segment's
frame (its offset), so that for coordinates q its world position and Jacobian are

    x_k(q) = R_s(q) o_k + t_s(q),     dx_k/dq = rows 0-2 of the point Jacobian (kinematics.py),
    dx_k/do_k = R_s(q).

`place_keypoints` puts a keypoint set onto a retarget TargetModel (solver.retarget: the rig's
bones by role, the hips a free root) by role: a keypoint rides on the bone of its role, or where
the rig does not map that role, at the tail of the nearest mapped ancestor role's bone (a big toe
on a foot without a toe bone sits at the foot's tip). Its starting offset is its table's place on
that bone: the head (0, 0, 0), the tail (0, L, 0) or mid-way (0, L/2, 0).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..geometry import points_on
from ..kinematics import forward_kinematics, point_jacobian
from ..model import Model
from ..retarget.roles import mapped_parent
from .keypoint_sets import KeypointSet

ALONG = {"head": 0.0, "mid": 0.5, "tail": 1.0}


@dataclass(frozen=True)
class Placement:
    """Keypoints `names` (K,) on `segments` (K,) of `model` at `offsets` (K, 3) in the segments'
    frames. `root` is the free root segment: three translations, then a sphere."""

    model: Model
    names: tuple
    segments: np.ndarray
    offsets: np.ndarray
    root: int

    def with_offsets(self, offsets: np.ndarray) -> "Placement":
        return replace(self, offsets=np.asarray(offsets, float).reshape(-1, 3))

    def evaluate(self, q: np.ndarray, jacobian: bool = True):
        """Positions x (F, K, 3); with `jacobian` also dx/dq (F, K, 3, n) and the segments'
        rotations R (F, K, 3, 3) (= dx/do)."""
        pose = forward_kinematics(self.model, np.atleast_2d(q))
        T = pose.frames[:, self.segments]
        R = T[..., :3, :3]
        x = points_on(T, self.offsets)
        if not jacobian:
            return x
        J = point_jacobian(self.model, pose, self.segments, x)[:, :, :3]
        return x, J, R


def place_keypoints(target_model, keypoint_set: KeypointSet, names, roles=None):
    """The Placement of keypoints `names` (those of a trial) on a retarget TargetModel by their
    roles in `keypoint_set` (`roles`: name -> role, to override or to place names the set lacks).
    Returns (placement, {name: why} for keypoints left out)."""
    roles = dict(roles or {})
    model, role_segment = target_model.model, target_model.role_segment
    kept, segments, offsets, left_out = [], [], [], {}
    for name in names:
        if name in roles:
            role, at = roles[name], "head"
        elif keypoint_set is not None and name in keypoint_set.names:
            i = keypoint_set.index(name)
            role, at = keypoint_set.roles[i], keypoint_set.at[i]
        else:
            left_out[name] = "not in the keypoint set and given no role"
            continue
        if role not in role_segment:
            role, at = mapped_parent(role, role_segment), "tail"
            if role is None:
                left_out[name] = "no bone of the rig plays its role or an ancestor role"
                continue
        s = role_segment[role]
        kept.append(name)
        segments.append(s)
        offsets.append((0.0, ALONG[at] * model.length[s], 0.0))
    if not kept:
        raise ValueError("no keypoint could be placed on the rig: " + "; ".join(f"{n}: {w}" for n, w in left_out.items()))
    placement = Placement(model, tuple(kept), np.array(segments, int), np.array(offsets, float).reshape(-1, 3),
                          int(target_model.root))
    return placement, left_out

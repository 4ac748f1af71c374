"""Calibration: what makes a source of one rest pose drive a target of another.

At the calibration frame c, per mapped role r, the target bone is turned by the smallest rotation
that takes its rest direction (its Y axis, world rest rotation T_r) onto the source bone's
direction d_r(c):

    A_r = Rmin(T_r e_y -> d_r(c)) T_r          (the target bone aligned with the source at c)

and from then on it follows the source bone's own turning relative to frame c:

    D_r(t) = R_r(t) R_r(c)^T A_r = R_r(t) O_r,     O_r = R_r(c)^T A_r  (a constant offset)

So a T-pose source drives an A-pose target (and the reverse): at frame c the target's bones point
where the source's do, keeping their own twist about the bone, whatever either rest pose is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..rotations import axis_angle_matrix
from .skeletons import Source, Target


def minimal_rotation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation (3, 3) taking unit vector a onto unit vector b (about a x b; for
    opposite vectors, a half turn about an axis perpendicular to a)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    axis = np.cross(a, b)
    s, c = np.linalg.norm(axis), float(a @ b)
    if s < 1e-12:
        if c > 0:
            return np.eye(3)
        other = np.eye(3)[np.argmin(np.abs(a))]
        axis = np.cross(a, other)
        return axis_angle_matrix(axis / np.linalg.norm(axis), np.pi)
    return axis_angle_matrix(axis / s, np.arctan2(s, c))


@dataclass(frozen=True)
class Calibration:
    """The offsets O_r (3, 3) per role of the module docstring, at source frame `frame`."""

    frame: int
    offsets: dict

    def desired_rotations(self, source: Source) -> dict:
        """D_r(t) = R_r(t) O_r (F, 3, 3) per calibrated role."""
        return {role: np.asarray(source.rotations[role], float) @ O for role, O in self.offsets.items()}


def calibrate(source: Source, target: Target, frame: int = 0) -> Calibration:
    """The calibration at source frame `frame` for every role both map (module docstring)."""
    F = source.n_frames
    if int(frame) != frame or not (-F <= frame < F):
        raise ValueError(f"calibration frame {frame} is not a frame of the source (0..{F - 1})")
    frame = int(frame) % F
    offsets = {}
    for role in target.roles:
        if role not in source.rotations:
            continue
        T = np.asarray(target.bone(role).matrix, float)[:3, :3]
        d = source.direction(role)[frame]
        aligned = minimal_rotation(T[:, 1], d / np.linalg.norm(d)) @ T
        offsets[role] = np.asarray(source.rotations[role], float)[frame].T @ aligned
    return Calibration(frame, offsets)

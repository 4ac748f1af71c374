"""Calibration: what makes a source of one rest pose drive a target of another.

At the calibration frame c, per mapped role r, the target bone is turned by the smallest rotation
that takes its rest direction (its Y axis, world rest rotation T_r) onto the source bone's
direction d_r(c):

    A_r = Rmin(T_r e_y -> d_r(c)) T_r          (the target bone aligned with the source at c)

and from then on it follows the source bone's own turning relative to frame c:

    D_r(t) = R_r(t) R_r(c)^T A_r = R_r(t) O_r,     O_r = R_r(c)^T A_r  (a constant offset)

So a T-pose source drives an A-pose target (and the reverse): at frame c the target's bones point
where the source's do, keeping their own twist about the bone, whatever either rest pose is.

Shortest arcs keep the target's heading: a source facing away from the target's rest facing
(a clip turned to +Y onto a rig facing -Y) would turn the hips not at all and the feet by half
turns about arbitrary axes. So where the two facings (each the mean of the feet's directions
across `up`: the target's rest foot bones, the source's feet at c) differ by more than
TURN_BEYOND, the target's rest frames are first turned about `up` by that angle Y:

    A_r = Rmin(Y T_r e_y -> d_r(c)) Y T_r

(`Calibration.turn` is that angle; 0 where the facings are closer, as small differences, such as
feet turned out mid-stride, are the pose's own.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..rotations import axis_angle_matrix
from .skeletons import Source, Target

TURN_BEYOND = np.radians(45.0)


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
    turn: float = 0.0

    def desired_rotations(self, source: Source) -> dict:
        """D_r(t) = R_r(t) O_r (F, 3, 3) per calibrated role."""
        return {role: np.asarray(source.rotations[role], float) @ offset for role, offset in self.offsets.items()}


def facing_turn(source: Source, target: Target, frame: int, up=(0.0, 0.0, 1.0)) -> float:
    """The angle (radians, about `up`) from the target's rest facing to the source's facing at
    `frame`, each the mean of the feet's directions across `up`; 0 where either is undefined."""
    up = np.asarray(up, float) / np.linalg.norm(up)
    facings = []
    for directions in ([np.asarray(target.bone(f"foot.{s}").matrix, float)[:3, 1] for s in "LR"],
                       [source.direction(f"foot.{s}")[frame] for s in "LR"]):
        f = sum(d / np.linalg.norm(d) for d in directions)
        f = f - (f @ up) * up
        if np.linalg.norm(f) < 1e-6:
            return 0.0
        facings.append(f / np.linalg.norm(f))
    a, b = facings
    return float(np.arctan2(np.cross(a, b) @ up, a @ b))


def calibrate(source: Source, target: Target, frame: int = 0, up=(0.0, 0.0, 1.0)) -> Calibration:
    """The calibration at source frame `frame` for every role both map (module docstring)."""
    F = source.n_frames
    if int(frame) != frame or not (-F <= frame < F):
        raise ValueError(f"calibration frame {frame} is not a frame of the source (0..{F - 1})")
    frame = int(frame) % F
    up = np.asarray(up, float) / np.linalg.norm(up)
    turn = facing_turn(source, target, frame, up)
    turn = turn if abs(turn) > TURN_BEYOND else 0.0
    Y = axis_angle_matrix(up, turn)
    offsets = {}
    for role in target.roles:
        if role not in source.rotations:
            continue
        T = Y @ np.asarray(target.bone(role).matrix, float)[:3, :3]
        d = source.direction(role)[frame]
        aligned = minimal_rotation(T[:, 1], d / np.linalg.norm(d)) @ T
        offsets[role] = np.asarray(source.rotations[role], float)[frame].T @ aligned
    return Calibration(frame, offsets, turn)

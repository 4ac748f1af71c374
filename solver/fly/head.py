"""Head and antenna angles of the fly from vectors between keypoints (the seed's definitions),
in the body frame of solver.fly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..rotations import axis_rotation


def _plane_angle(u: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray:
    """Signed angle from u to v (..., 3) after projecting both onto the plane normal to body axis
    `axis`, positive for a right-handed turn about that axis: atan2(n . (u x v), u . v)."""
    keep = [k for k in range(3) if k != axis]
    a, b = u[..., keep], v[..., keep]
    sign = 1.0 if axis != 1 else -1.0            # (z, x) is the right-handed order about y
    cross = sign * (a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0])
    return np.arctan2(cross, np.sum(a * b, axis=-1))


_X, _Y = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])


@dataclass
class HeadAngles:
    """Head roll, pitch, yaw (F,) in radians, and the head rotation R = Rz(yaw) Rx(roll) Ry(pitch)."""

    roll: np.ndarray
    pitch: np.ndarray
    yaw: np.ndarray
    rotation: np.ndarray


def head_rotation(roll, pitch, yaw) -> np.ndarray:
    """R_head = Rz(yaw) Rx(roll) Ry(pitch): intrinsic yaw about z, then roll about the head's x,
    then pitch about the head's y."""
    return axis_rotation(2, yaw) @ axis_rotation(0, roll) @ axis_rotation(1, pitch)


def head_angles(left_base, right_base, neck, rest_pitch: float = 0.0) -> HeadAngles:
    """Head angles from the antenna bases and the neck (each (F, 3)), after the seed:

    w = left_base - right_base (the head's mediolateral axis), u = mid-antennae - neck.
      yaw   = the angle of w from the global mediolateral axis (y) in the dorsal plane (xy), turning
              about z. (The seed measures w against the anteroposterior axis: that angle minus 90 deg.)
      roll  = the angle of w from y in the transverse plane (yz), turning about x, measured after
              de-rotating w by the yaw: w1 = Rz(-yaw) w.
      pitch = the angle of u from the global anteroposterior axis (x) in the sagittal plane (xz),
              turning about y, measured after de-rotating u by yaw and roll:
              u2 = Rx(-roll) Rz(-yaw) u; minus `rest_pitch`, the resting head pitch.

    The seed measures each angle in its global plane; that is exact when only that angle is
    non-zero. Measuring each in the plane left by the angles already found makes the three exact
    for any head rotation R = Rz(yaw) Rx(roll) Ry(pitch) (see head_rotation): w = R (0, |w|, 0)
    gives yaw and roll, and u = R Ry(rest_pitch) (|u|, 0, 0) gives pitch.
    """
    left_base, right_base, neck = (np.atleast_2d(np.asarray(a, float)) for a in (left_base, right_base, neck))
    w = left_base - right_base
    u = 0.5 * (left_base + right_base) - neck
    yaw = _plane_angle(_Y, w, 2)
    w1 = np.einsum("fji,fj->fi", axis_rotation(2, yaw), w)                  # Rz(-yaw) w  (R^T w)
    roll = _plane_angle(_Y, w1, 0)
    Rzx = axis_rotation(2, yaw) @ axis_rotation(0, roll)
    u2 = np.einsum("fji,fj->fi", Rzx, u)                           # Rx(-roll) Rz(-yaw) u
    pitch = _plane_angle(_X, u2, 1) - rest_pitch
    return HeadAngles(roll=roll, pitch=pitch, yaw=yaw, rotation=head_rotation(roll, pitch, yaw))


@dataclass
class AntennaAngles:
    pitch: np.ndarray
    yaw: np.ndarray


def derotate(points, neck, head: HeadAngles) -> np.ndarray:
    """Points (F, ..., 3) in the head frame: R_head^T (p - neck)."""
    points = np.asarray(points, float)
    rel = points - np.asarray(neck, float).reshape(points.shape[0], *([1] * (points.ndim - 2)), 3)
    return np.einsum("fji,f...j->f...i", head.rotation, rel)


def antenna_angles(base, tip, left_base, right_base, neck, head: HeadAngles | None = None,
                   rest_pitch: float = 0.0) -> AntennaAngles:
    """Pitch and yaw of one antenna (base and tip (F, 3)), after the seed, in the head frame:
    all keypoints are first de-rotated by the head rotation (head_angles), R_head^T (p - neck), so
    the angles do not swap roles when the head turns. With a = base - neck, d = tip - base and
    w = left_base - right_base (all de-rotated):

      pitch = the angle from a to d in the sagittal plane (xz), turning about y;
      yaw   = the angle from w to d in the transverse plane (yz), turning about x, measured after
              de-rotating d by its own sagittal direction (d1 = Ry(-beta) d, beta the angle of d from
              -z about y), i.e. in the plane that contains d and the mediolateral axis.

    Both are exact for an antenna direction d = |d| Ry(beta) Rx(gamma) (0, 0, -1) in the head frame:
    pitch = beta - (angle of a from -z about y) and yaw = gamma - 90 deg (the seed's angle from the
    right-to-left axis, so an antenna hanging straight down has yaw -90 deg).
    """
    head = head_angles(left_base, right_base, neck, rest_pitch) if head is None else head
    pts = derotate(np.stack([np.atleast_2d(base), np.atleast_2d(tip), np.atleast_2d(left_base),
                             np.atleast_2d(right_base)], axis=1), neck, head)
    a, d, w = pts[:, 0], pts[:, 1] - pts[:, 0], pts[:, 2] - pts[:, 3]
    pitch = _plane_angle(a, d, 1)
    down = np.array([0.0, 0.0, -1.0])
    beta = _plane_angle(np.broadcast_to(down, d.shape), d, 1)
    d1 = np.einsum("fji,fj->fi", axis_rotation(1, beta), d)                 # Ry(-beta) d: in the yz plane
    yaw = _plane_angle(w, d1, 0)
    return AntennaAngles(pitch=pitch, yaw=yaw)

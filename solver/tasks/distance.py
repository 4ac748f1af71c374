"""Distance: keep the effector inside, outside or on a sphere around the target."""

from __future__ import annotations

import numpy as np

from ..rotations import axis_angle_matrix
from .base import Endpoint, LoopTask, check_weight, relative_pose


class Distance(LoopTask):
    """Keep the effector at a distance from the target: inside, outside, or on the surface of a
    sphere of `radius` around it. The virtual armature is RotZ, RotX, TransY, RotZ, RotY, RotX
    from the effector, so Xf[2] is the distance d itself; y = d, Cf = [0 0 1 0 0 0].

    The armature starts from a reference rotation R0 chosen afresh at each evaluation so that the
    first two angles are zero (R0's Y axis points at the target) and the middle angle of the last
    three is zero (a spin of R0 about that Y axis), far from both gimbal singularities; Jf is then
    invertible whenever d > 0. For 'inside' / 'outside' the task is active only while violated.
    """

    MODES = ("inside", "outside", "surface")

    def __init__(self, effector: Endpoint, target: Endpoint, radius: float, mode: str = "surface",
                 weight: float = 1.0, name: str = "distance"):
        if mode not in self.MODES:
            raise ValueError(f"constraint '{name}': mode must be one of {self.MODES}")
        if not (np.isfinite(radius) and radius >= 0):
            raise ValueError(f"constraint '{name}': radius {radius} must be finite and >= 0")
        check_weight(name, "weight", weight)
        self.name = name
        self.effector, self.target = effector, target
        self.base, self.tip = effector, target
        self.radius, self.mode, self.weight = float(radius), mode, float(weight)
        self.Cf = np.eye(6)[[2]]
        self.has_position, self.has_rotation = True, False

    n_outputs = 1

    def features(self, base: np.ndarray, tip: np.ndarray) -> np.ndarray:
        return self._armature(base, tip)[0]

    def feature_jacobian(self, base: np.ndarray, tip: np.ndarray) -> np.ndarray:
        return self._jacobian(*self._armature(base, tip))

    def loop(self, base: np.ndarray, tip: np.ndarray):
        Xf, R0 = self._armature(base, tip)
        return Xf, np.linalg.inv(self._jacobian(Xf, R0))

    @staticmethod
    def _armature(base: np.ndarray, tip: np.ndarray):
        """Xf and the reference rotation R0 the virtual armature starts from."""
        p, R = relative_pose(base, tip)
        d = np.linalg.norm(p, axis=-1)
        # R0: Y axis along p (the base's own Y axis when d vanishes), then spun to zero the middle angle.
        y_axis = np.where(d[..., None] > 1e-12, p / np.maximum(d, 1e-300)[..., None], [0.0, 1.0, 0.0])
        helper = np.where(np.abs(y_axis[..., :1]) < 0.9, [1.0, 0.0, 0.0], [0.0, 0.0, 1.0])
        z_axis = np.cross(helper, y_axis)
        z_axis /= np.linalg.norm(z_axis, axis=-1, keepdims=True)
        R0 = np.stack([np.cross(y_axis, z_axis), y_axis, z_axis], axis=-1)
        M = np.swapaxes(R0, -1, -2) @ R
        spin = np.arctan2(-M[..., 2, 0], M[..., 0, 0])
        Rspin = axis_angle_matrix(np.array([0.0, 1.0, 0.0]), spin)
        R0 = R0 @ Rspin
        M = np.swapaxes(Rspin, -1, -2) @ M
        c = np.arctan2(M[..., 1, 0], M[..., 0, 0])
        f = np.arctan2(M[..., 2, 1], M[..., 2, 2])
        zero = np.zeros_like(d)
        return np.stack([zero, zero, d, c, zero, f], axis=-1), R0

    @staticmethod
    def _jacobian(Xf: np.ndarray, R0: np.ndarray) -> np.ndarray:
        """Twists of the six virtual joints in the base frame, taken at the tip point."""
        d = np.maximum(Xf[..., 2], 1e-9)
        x0, y0, z0 = R0[..., :, 0], R0[..., :, 1], R0[..., :, 2]
        tip = y0 * d[..., None]
        Rc = R0 @ axis_angle_matrix(np.array([0.0, 0.0, 1.0]), Xf[..., 3])
        zero = np.zeros_like(x0)
        columns = [
            np.concatenate([np.cross(z0, tip), z0], axis=-1),   # RotZ at the base
            np.concatenate([np.cross(x0, tip), x0], axis=-1),   # RotX at the base
            np.concatenate([y0, zero], axis=-1),                # TransY: the distance
            np.concatenate([zero, z0], axis=-1),                # RotZ at the tip
            np.concatenate([zero, Rc[..., :, 1]], axis=-1),     # RotY at the tip
            np.concatenate([zero, Rc[..., :, 0]], axis=-1),     # RotX at the tip (middle angle 0)
        ]
        return np.stack(columns, axis=-1)

    def outputs(self, Xf: np.ndarray):
        d = Xf[..., 2:3]
        if self.mode == "inside":
            active = d > self.radius
        elif self.mode == "outside":
            active = d < self.radius
        else:
            active = np.ones_like(d, dtype=bool)
        yd = np.full_like(d, self.radius)
        weight = np.where(active, self.weight, 0.0)
        position_error = np.where(active[..., 0], np.abs(d - yd)[..., 0], 0.0)
        return d, yd, weight, position_error, np.full(d.shape[:-1], np.nan)

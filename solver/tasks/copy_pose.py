"""CopyPose: bring the effector onto the target, in any of six axes."""

from __future__ import annotations

import numpy as np

from ..model import as_slice
from ..rotations import log_map, rotvec_jacobian, rotvec_jacobian_inverse
from .base import Endpoint, LoopTask, Stack, TaskInputs, check_weight, length, relative_pose

_IDENTITY3 = np.eye(3)


class CopyPose(LoopTask):
    """Bring the effector onto the target: Xf = (p, phi), the tip's position and rotation vector
    in the base frame, through three translations and a spherical rotation:

        Jf = diag(I, J(phi)),   Jf^-1 = diag(I, J(phi)^-1).

    `position` / `rotation` pick the controlled axes (X, Y, Z each), `reference` the frame they
    are measured in: 'effector' (B = effector, T = target) or 'target' (B = target, T = effector).
    Desired output yd = 0. Task weights: `weight` on position rows, `orient_weight` on rotation rows.

    A task on all three position axes and no rotation only relates two points: its frames are
    taken world-aligned at those points (twists without angular part), so that neither end's
    turning enters the Jacobian; y is then the world vector from one point to the other, and a
    scene evaluates all such tasks together (`batch`).

    `clamp` m (Blender's iTaSC: half the chain's mean bone length) bounds how hard a far target
    pulls: the position error e (the selected position features) becomes the output

        y = s(|e|) e,   s(r) = 1 for r <= m,   s(r) = sqrt(m (2 r - m)) / r beyond,

    so that w |y|^2 = w (2 m |e| - m^2) grows linearly past m (Huber's loss, twice over). Its
    gradient w J^T min(1, m / |e|) e is iTaSC's feedback clamped at m: between targets that
    conflict, the pose settles where Blender's iTaSC settles. Errors stay |e|.
    """

    def __init__(self, effector: Endpoint, target: Endpoint, position=(True, True, True),
                 rotation=(False, False, False), reference: str = "effector", weight: float = 1.0,
                 orient_weight: float = 1.0, name: str = "copy_pose", clamp: float | None = None):
        if reference not in ("effector", "target"):
            raise ValueError(f"constraint '{name}': reference must be 'effector' or 'target'")
        check_weight(name, "weight", weight)
        check_weight(name, "orient_weight", orient_weight)
        if clamp is not None and not (np.isfinite(clamp) and clamp > 0):
            raise ValueError(f"constraint '{name}': clamp {clamp} must be a positive number")
        self.clamp = None if clamp is None else float(clamp)
        self.name = name
        self.effector, self.target = effector, target
        self.selected = np.flatnonzero(np.concatenate([np.asarray(position, bool), np.asarray(rotation, bool)]))
        self.points_only = list(self.selected) == [0, 1, 2]
        self.reference = reference
        self.base, self.tip = (effector, target) if reference == "effector" else (target, effector)
        if self.selected.size == 0:
            raise ValueError(f"constraint '{name}': no axis is controlled")
        self.Cf = np.eye(6)[self.selected]
        self.task_weight = np.where(self.selected < 3, weight, orient_weight)
        # As slices where contiguous (all of them, as usual): views instead of copies.
        self._selected_index = as_slice(self.selected)
        self._position_outputs = as_slice(np.flatnonzero(self.selected < 3))
        self._rotation_outputs = as_slice(np.flatnonzero(self.selected >= 3))
        self.has_position = bool(np.any(self.selected < 3))
        self.has_rotation = bool(np.any(self.selected >= 3))
        if not self.has_position:
            self.clamp = None

    @property
    def n_outputs(self) -> int:
        return self.selected.size

    def features(self, base: np.ndarray, tip: np.ndarray) -> np.ndarray:
        if self.points_only:  # world-aligned frames at the two points: no relative rotation
            return np.concatenate([tip[..., :3, 3] - base[..., :3, 3], np.zeros(base.shape[:-2] + (3,))], axis=-1)
        p, R = relative_pose(base, tip)
        return np.concatenate([p, log_map(R)], axis=-1)

    def feature_jacobian(self, base: np.ndarray, tip: np.ndarray) -> np.ndarray:
        phi = self.features(base, tip)[..., 3:]
        Jf = np.zeros(phi.shape[:-1] + (6, 6))
        Jf[..., :3, :3] = np.eye(3)
        Jf[..., 3:, 3:] = rotvec_jacobian(phi)
        return Jf

    def loop(self, base: np.ndarray, tip: np.ndarray):
        Xf = self.features(base, tip)
        Jinv = np.zeros(Xf.shape[:-1] + (6, 6))
        Jinv[..., :3, :3] = _IDENTITY3
        Jinv[..., 3:, 3:] = rotvec_jacobian_inverse(Xf[..., 3:])
        return Xf, Jinv

    def outputs(self, Xf: np.ndarray):
        y = Xf[..., self._selected_index]
        position_error = length(y[..., self._position_outputs]) if self.has_position else np.full(y.shape[:-1], np.nan)
        rotation_error = length(y[..., self._rotation_outputs]) if self.has_rotation else np.full(y.shape[:-1], np.nan)
        if self.clamp is not None:
            y = y.copy()
            y[..., self._position_outputs] *= _clamp_scale(position_error, self.clamp)[0][..., None]
        return y, 0.0, self.task_weight, position_error, rotation_error     # yd and weight broadcast

    def output_jacobian(self, Xf: np.ndarray):
        """With `clamp`: on the position rows d(s e)/de = s I + s'(r) e e^T / r (r = |e|)."""
        if self.clamp is None:
            return None
        e = Xf[..., self._selected_index][..., self._position_outputs]
        r = length(e)
        s, ds = _clamp_scale(r, self.clamp)
        D = np.zeros(Xf.shape[:-1] + (self.n_outputs, self.n_outputs))
        D[..., range(self.n_outputs), range(self.n_outputs)] = 1.0
        position = self._position_outputs
        D[..., position, position] = s[..., None, None] * np.eye(e.shape[-1]) \
            + (ds / np.maximum(r, 1e-300))[..., None, None] * e[..., :, None] * e[..., None, :]
        return D

    def batch_key(self):
        return "points" if self.points_only else self

    @classmethod
    def batch(cls, tasks, places):
        if tasks[0].batch_key() == "points":
            return _PointBatch(tasks, places)
        return super().batch(tasks, places)


def _clamp_scale(r: np.ndarray, m):
    """s(r) and s'(r) of the clamped output (CopyPose's docstring): 1 and 0 up to m, then
    s = g / r and s' = m / (g r) - g / r^2 with g = sqrt(m (2 r - m)). m may be inf (no clamp)."""
    beyond = r > m
    m = np.where(beyond, m, 1.0)
    rr = np.where(beyond, r, 2.0 * m)
    g = np.sqrt(m * (2.0 * rr - m))
    return np.where(beyond, g / rr, 1.0), np.where(beyond, m / (g * rr) - g / rr**2, 0.0)


class _PointBatch:
    """All point-to-point tasks of a scene at once: y = p_T - p_B in world axes (scaled by s where
    clamped), A = J_T - J_B (linear rows; D (J_T - J_B) where clamped), B = -(those in Xu)."""

    def __init__(self, tasks, places):
        ends = np.array([p.first_endpoint for p in places], dtype=int)
        self.base, self.tip = ends, ends + 1
        rows = np.array([p.rows.start for p in places], dtype=int)[:, None] + np.arange(3)
        # The tasks' rows (P, 3), or one run of them (3 P) where they follow one another.
        run = as_slice(rows.ravel())
        self.rows = run if isinstance(run, slice) else rows
        self.columns = as_slice(np.array([p.index for p in places], dtype=int))
        weight = np.array([t.task_weight[0] for t in tasks])
        self.weight = np.repeat(weight, 3) if isinstance(run, slice) else weight[:, None]
        clamps = np.array([np.inf if t.clamp is None else t.clamp for t in tasks])
        self.clamps = clamps if np.isfinite(clamps).any() else None

    def _rows(self, x: np.ndarray) -> np.ndarray:
        """Per-task rows (F, P, 3, ...) as `self.rows` indexes them."""
        return x.reshape((x.shape[0], x.shape[1] * x.shape[2]) + x.shape[3:]) if isinstance(self.rows, slice) else x

    def __call__(self, inputs: TaskInputs, out: Stack) -> None:
        positions = inputs.frames[..., :3, 3]
        d = positions.take(self.tip, axis=1) - positions.take(self.base, axis=1)     # (F, P, 3)
        r = np.sqrt(np.add.reduce(d * d, axis=-1))           # ndarray.sum without its Python wrapper
        out.position_error[:, self.columns] = r
        out.task_weight[:, self.rows] = self.weight
        if self.clamps is None:
            out.y[:, self.rows] = self._rows(d)
        else:
            s, ds = _clamp_scale(r, self.clamps)
            out.y[:, self.rows] = self._rows(s[..., None] * d)
        if out.A is not None:
            n = inputs.n
            linear = inputs.jacobians[:, :, :3]
            J = linear.take(self.tip, axis=1) - linear.take(self.base, axis=1)          # (F, P, 3, n + n_u)
            if self.clamps is not None:
                D = s[..., None, None] * np.eye(3) + (ds / np.maximum(r, 1e-300))[..., None, None] \
                    * d[..., :, None] * d[..., None, :]
                J = D @ J
            out.A[:, self.rows] = self._rows(J[..., :n])
            if out.B is not None:
                out.B[:, self.rows] = -self._rows(J[..., n:])

"""The keypoint term of a fit, per frame: weighted least squares of keypoint error,

    E_f(q) = sum_k w_fk |x_k(q) - y_fk|^2,

with its Gauss-Newton normal equations H_f = sum_k w_fk J_k^T J_k and g_f = -sum_k w_fk J_k^T e_k
(e = x - y; g is the descent side: H dq = g). The weights are (F, K), or (F, K, 3) one per axis
(a floor weighs only the height: contacts.py); and the bounds a step keeps: a coordinate on its
limit whose descent direction points out of the range is locked (left out of the step), as
update.weighted_step locks it; limits.project puts a step's end back inside. And a weak pull to rest, rho |q|^2 (rest_weights).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .placement import Placement

REST_WEIGHT = 1e-4          # rho, relative to the mean data stiffness


@dataclass
class DataTerm:
    """At one Q: keypoint positions x (F, K, 3), errors e = x - y, Jacobians J (F, K, 3, n),
    segment rotations R (F, K, 3, 3), cost per frame (F,), H (F, n, n), g (F, n)."""

    x: np.ndarray
    e: np.ndarray
    J: np.ndarray
    R: np.ndarray
    cost: np.ndarray
    H: np.ndarray
    g: np.ndarray


def targets_and_weights(positions: np.ndarray, weights: np.ndarray, scale: float = 1.0, count: int | None = None):
    """y = scale * positions with missing keypoints (weight 0 or NaN) at 0 and weight 0; ValueError
    for shapes that disagree (`count` keypoints expected), infinite positions, weights that are
    not finite numbers >= 0 or a scale that is not positive."""
    positions, weights = np.asarray(positions, float), np.asarray(weights, float)
    if positions.ndim != 3 or positions.shape[-1] != 3 or weights.shape != positions.shape[:2] or \
            (count is not None and positions.shape[1] != count):
        raise ValueError(f"keypoints {positions.shape} and weights {weights.shape}: expected (F, {count or 'K'}, 3) "
                         "and (F, K)")
    if np.isinf(positions).any():
        raise ValueError("keypoint positions must be finite (NaN where missing)")
    if not (np.isfinite(weights).all() and (weights >= 0).all()):
        raise ValueError("keypoint weights must be finite numbers >= 0")
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"the scale {scale} must be a positive number")
    present = np.isfinite(positions).all(axis=-1) & (weights > 0)
    w = np.where(present, weights, 0.0)
    return np.where(present[..., None], scale * np.nan_to_num(positions), 0.0), w


def per_axis(w: np.ndarray) -> np.ndarray:
    """Weights (F, K) or (F, K, 3) as (F, K, 1) or (F, K, 3): one per axis, broadcast."""
    return w[..., None] if w.ndim == 2 else w


def data_cost(placement: Placement, Q, y, w) -> np.ndarray:
    """E_f (F,) alone."""
    e = placement.evaluate(Q, jacobian=False) - y
    return np.sum(per_axis(w) * e * e, axis=(1, 2))


def data_term(placement: Placement, Q, y, w) -> DataTerm:
    """The term and its normal equations at Q (module docstring)."""
    x, J, R = placement.evaluate(Q)
    e = x - y
    w = per_axis(w)
    cost = np.sum(w * e * e, axis=(1, 2))
    Jw = J * w[..., None]
    F, K, _, n = J.shape
    H = np.swapaxes(Jw.reshape(F, 3 * K, n), 1, 2) @ J.reshape(F, 3 * K, n)
    g = -np.einsum("fkai,fka->fi", Jw, e)
    return DataTerm(x, e, J, R, cost, H, g)


def rest_weights(placement: Placement, stiffness: np.ndarray) -> np.ndarray:
    """rho (n,): REST_WEIGHT times the mean data stiffness `stiffness` (diagonals of H over the
    frames with keypoints, (F, n)) on every coordinate but the root's, 0 on the root's. It pulls
    what no keypoint sees (a hand's turn about a lone wrist keypoint) to rest, and decides long,
    nearly flat valleys (two bones turning about nearly one axis) the same way."""
    rho = np.full(placement.model.n_coordinates, REST_WEIGHT * max(float(np.mean(stiffness)) if stiffness.size else 0.0,
                                                                    1e-300))
    rho[placement.model.coordinates_of(placement.root)] = 0.0
    return rho


def free_coordinates(model, Q, g, tolerance: float = 1e-12) -> np.ndarray:
    """(F, n) bool: False where a coordinate sits on a limit and the descent side g pushes it out."""
    at_lower = Q <= model.lower + tolerance
    at_upper = Q >= model.upper - tolerance
    return ~((at_lower & (g < 0)) | (at_upper & (g > 0)))

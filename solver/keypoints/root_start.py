"""Where a fit starts: the model at rest, carried onto each frame's keypoints by the rigid motion
(and, for the scale, the similarity) that fits them best in the weighted least-squares sense.

Per frame, for model points a_k (the keypoints at rest) and data points b_k with weights w_k,
Umeyama's solution of min sum_k w_k |c R b_k + t - a_k|^2 takes the centred covariance
C = sum_k w_k (a_k - a_bar)(b_k - b_bar)^T = U S V^T and R = U E V^T, E = diag(1, 1, det(U V^T)),
c = tr(S E) / sum_k w_k |b_k - b_bar|^2. The rigid fit of the rest model onto targets y_k is the
same with the roles swapped and c = 1. Frames with fewer than three keypoints (or all on a line)
take the nearest frame that has them.

The root's joints (three translations along its rest axes, then a sphere) put the rest model
under a world motion G when their local motion is W0^-1 G W0, W0 the root's world frame at rest.
"""

from __future__ import annotations

import numpy as np

from ..geometry import kabsch
from ..kinematics import forward_kinematics
from ..rotations import log_map
from .placement import Placement


def _weighted_frames(a, b, w):
    """Centroids and the centred covariance sum_k w (a - a_bar)(b - b_bar)^T per frame, and which
    frames have three or more keypoints spread beyond a line."""
    total = w.sum(axis=1, keepdims=True)
    safe = np.where(total > 0, total, 1.0)
    a_bar = (w[..., None] * a).sum(axis=1) / safe
    b_bar = (w[..., None] * b).sum(axis=1) / safe
    da, db = a - a_bar[:, None], b - b_bar[:, None]
    C = np.einsum("fk,fki,fkj->fij", w, da, db)
    spread = np.linalg.svd(np.einsum("fk,fki,fkj->fij", w, db, db), compute_uv=False)
    usable = ((w > 0).sum(axis=1) >= 3) & (spread[:, 1] > 1e-12 * np.maximum(spread[:, 0], 1e-300))
    return a_bar, b_bar, C, usable


def data_scale(model_points, data_points, weights) -> float:
    """The median over usable frames of Umeyama's scale c taking the data (F, K, 3) onto the model
    points (K, 3)."""
    data = np.nan_to_num(data_points)
    a = np.broadcast_to(model_points, data.shape)
    _, b_bar, C, usable = _weighted_frames(a, data, weights)
    if not usable.any():
        raise ValueError("no frame has three keypoints off one line: the scale cannot be estimated")
    _, S, E = kabsch(C[usable])
    db = data[usable] - b_bar[usable, None]
    variance = np.einsum("fk,fki,fki->f", weights[usable], db, db)
    return float(np.median((S * E).sum(axis=1) / variance))


def nearest_usable(usable: np.ndarray) -> np.ndarray:
    """For each frame the index of the nearest usable frame (the earlier one on a tie)."""
    frames = np.arange(usable.size)
    good = np.flatnonzero(usable)
    after = np.clip(np.searchsorted(good, frames), 0, good.size - 1)
    before = np.clip(after - 1, 0, good.size - 1)
    pick = np.where(np.abs(good[before] - frames) <= np.abs(good[after] - frames), good[before], good[after])
    return pick


def start_pose(placement: Placement, targets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Coordinates (F, n): the model at rest, its root moved so the keypoints best fit `targets`
    (F, K, 3) with `weights` (F, K) (module docstring)."""
    model = placement.model
    F = targets.shape[0]
    q0 = model.neutral(1)
    rest = placement.evaluate(q0, jacobian=False)[0]                           # (K, 3)
    y = np.nan_to_num(targets)
    a_bar, b_bar, C, usable = _weighted_frames(y, np.broadcast_to(rest, y.shape), weights)
    if not usable.any():
        raise ValueError("no frame has three keypoints off one line: the rig cannot be placed on them")
    R, _, _ = kabsch(C)
    t = a_bar - np.einsum("fij,fj->fi", R, b_bar)
    pick = nearest_usable(usable)
    G = np.tile(np.eye(4), (F, 1, 1))
    G[:, :3, :3], G[:, :3, 3] = R[pick], t[pick]
    W0 = forward_kinematics(model, q0).frames[0, placement.root]
    local = np.linalg.inv(W0) @ G @ W0
    q = model.neutral(F)
    c = model.coordinates_of(placement.root)
    q[:, c[:3]] = local[:, :3, 3]
    q[:, c[3:6]] = log_map(local[:, :3, :3])
    return q

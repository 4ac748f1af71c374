"""Calibration: each keypoint's place on its bone and one uniform scale, on a window of frames
(a static trial, or the whole trial), with the rig's bone lengths left as they are.

Over the window's frames f, the poses q_f, the keypoints' offsets o_k (in their segments'
frames) and the data's scale s (data metres to rig units) minimise, in the least-squares sense,

    sum_f sum_k w_fk |x_k(q_f, o_k) - s p_fk|^2 + beta sum_k |o_k - o0_k|^2 + rho sum_f |q_f|^2,

o0 the table's place (placement.py). Where the window's motion determines an offset it is fitted;
where it does not (a static window cannot tell a keypoint's offset from a small turn of its bone)
the prior keeps it near the table's place. The prior is needed for the scale too: with offsets
free and no prior, s -> 0 with every keypoint drawn to one point fits any data exactly. Its weight
beta = `offset_prior` times the mean weight a keypoint has in one frame: the table's place counts
as `offset_prior` frames of evidence (so over a 12-frame window an offset takes about 12/13 of
what the poses leave unexplained, over a long trial nearly all). rho (data_term.rest_weights) keeps
coordinates no keypoint sees at rest.

Gauss-Newton on all unknowns at once: the normal equations are an arrowhead, one block per frame
(H_qq,f: n x n) plus the shared unknowns theta = (o, s) (3K + 1), so the frames are eliminated
batched by their Schur complement,

    S = H_tt - sum_f H_qt,f^T H_qq,f^-1 H_qt,f,    S dtheta = g_t - sum_f H_qt,f^T H_qq,f^-1 g_q,f,
    dq_f = H_qq,f^-1 (g_q,f - H_qt,f dtheta),

with dx/do_k = R_s and d(s p)/ds = p. Damping (Levenberg-Marquardt) and limits as in the fit
(fit.py, data_term.free_coordinates, limits.project).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..limits import project
from ..runtime.blas_threads import one_blas_thread
from .data_term import data_cost, data_term, free_coordinates, rest_weights, targets_and_weights
from .placement import Placement
from .root_start import data_scale, start_pose

_MU_START = 1e-3            # Levenberg-Marquardt damping, relative to the mean stiffness (as in fit.py)
_MU_GIVE_UP = 1e12
FLAT = 1e-8                # relative: a step lowering the cost less than this has converged


@dataclass
class Calibration:
    """The fitted placement (offsets) and scale, the window's poses `q` (Fw, n), and per keypoint:
    `prior` offsets o0 (K, 3), `shift` |o - o0| (K,), `residual` RMS of |x - s p| over the window's
    frames where present (K,, rig units; NaN where never present), `frames_present` (K,)."""

    placement: Placement
    scale: float
    q: np.ndarray
    prior: np.ndarray
    shift: np.ndarray
    residual: np.ndarray
    frames_present: np.ndarray
    iterations: int
    converged: bool

    def report(self) -> str:
        """One line per keypoint: name, bone segment, offset shift from the table's place, RMS residual."""
        names = self.placement.model.names
        lines = [f"scale {self.scale:.6g} (data to rig units)", "keypoint  segment  shift  residual  frames"]
        for k, name in enumerate(self.placement.names):
            lines.append(f"{name}  {names[self.placement.segments[k]]}  {self.shift[k]:.4g}  {self.residual[k]:.4g}  "
                         f"{self.frames_present[k]}")
        return "\n".join(lines)


def _shared_blocks(R, J, w, p, e, offsets, prior, beta):
    """H_qt (F, n, 3K+1), H_tt (3K+1, 3K+1), g_t (3K+1,) of the module docstring."""
    F, K, _, n = J.shape
    P = 3 * K + 1
    H_qt = np.empty((F, n, P))
    H_qt[..., :3 * K] = np.einsum("fkai,fk,fkaj->fikj", J, w, R).reshape(F, n, 3 * K)
    H_qt[..., 3 * K] = -np.einsum("fkai,fk,fka->fi", J, w, p)
    H_tt = np.zeros((P, P))
    wk = w.sum(axis=0)
    H_tt[np.arange(3 * K), np.arange(3 * K)] = np.repeat(wk + beta, 3)
    os = -np.einsum("fkaj,fk,fka->kj", R, w, p).reshape(3 * K)
    H_tt[:3 * K, 3 * K] = H_tt[3 * K, :3 * K] = os
    H_tt[3 * K, 3 * K] = np.einsum("fk,fka,fka->", w, p, p)
    g_t = np.empty(P)
    g_t[:3 * K] = (-np.einsum("fkaj,fk,fka->kj", R, w, e) - beta * (offsets - prior)).reshape(3 * K)
    g_t[3 * K] = np.einsum("fk,fka,fka->", w, p, e)
    return H_qt, H_tt, g_t


@one_blas_thread()
def calibrate(placement: Placement, positions: np.ndarray, weights: np.ndarray, *, offset_prior: float = 1.0,
              scale: float | None = None, max_iterations: int = 200, tolerance: float = 1e-7) -> Calibration:
    """Offsets and scale (module docstring) from keypoints `positions` (Fw, K, 3) in the
    placement's order, data units, NaN where missing, and `weights` (Fw, K). `offset_prior`
    (frames of evidence) weighs the table's places; `scale` fixes s instead of fitting it."""
    model = placement.model
    p, w = targets_and_weights(positions, weights, count=len(placement.names))
    if not np.isfinite(offset_prior) or offset_prior < 0:
        raise ValueError(f"offset_prior {offset_prior} must be a number >= 0")
    prior = placement.offsets.copy()
    beta = offset_prior * float(w.sum()) / max(w.shape[0] * w.shape[1], 1)
    rest = placement.evaluate(model.neutral(1), jacobian=False)[0]
    s = data_scale(rest, np.where(w[..., None] > 0, p, np.nan), w) if scale is None else float(scale)
    fit_scale = scale is None
    Q = start_pose(placement, s * p, w)
    offsets = prior.copy()
    K, n = len(placement.names), model.n_coordinates
    first = data_term(placement, Q, s * p, w)
    rho = rest_weights(placement, np.diagonal(first.H, axis1=1, axis2=2))

    def total(Q, offsets, s):
        term = data_cost(placement.with_offsets(offsets), Q, s * p, w).sum()
        return term + beta * np.sum((offsets - prior) ** 2) + np.sum(rho * Q * Q)

    cost, mu = total(Q, offsets, s), _MU_START
    converged, iteration = False, 0
    for iteration in range(1, max_iterations + 1):
        current = placement.with_offsets(offsets)
        term = data_term(current, Q, s * p, w)
        H_qt, H_tt, g_t = _shared_blocks(term.R, term.J, w, p, term.e, offsets, prior, beta)
        if not fit_scale:
            H_tt[-1, :], H_tt[:, -1], H_qt[..., -1], g_t[-1] = 0.0, 0.0, 0.0, 0.0
            H_tt[-1, -1] = 1.0
        g = term.g - rho * Q
        free = free_coordinates(model, Q, g)
        H = term.H + np.diag(rho)
        frame_scale = np.mean(np.diagonal(H, axis1=1, axis2=2), axis=1) + 1e-300
        shared_scale = np.mean(np.diagonal(H_tt)) + 1e-300
        H_qt = H_qt * free[..., None]
        g = g * free
        while True:
            damped = H + (mu * frame_scale)[:, None, None] * np.eye(n)
            damped = np.where(free[:, :, None] & free[:, None, :], damped, 0.0) + np.eye(n) * (~free)[:, None, :]
            X = np.linalg.solve(damped, np.concatenate([H_qt, g[..., None]], axis=2))
            S = H_tt + mu * shared_scale * np.eye(H_tt.shape[0]) - np.einsum("fip,fir->pr", H_qt, X[..., :-1])
            d_theta = np.linalg.solve(S, g_t - np.einsum("fip,fi->p", H_qt, X[..., -1]))
            dQ = X[..., -1] - X[..., :-1] @ d_theta
            d_offsets, d_s = d_theta[:3 * K].reshape(K, 3), d_theta[3 * K]
            trial_Q, trial_offsets, trial_s = project(model, Q + dQ), offsets + d_offsets, s + d_s
            trial_cost = total(trial_Q, trial_offsets, trial_s) if trial_s > 0 else np.inf
            if trial_cost <= cost or mu > _MU_GIVE_UP:
                break
            mu *= 4.0
        if trial_cost > cost:
            converged = True            # no step lowers the cost: at the minimum to rounding
            break
        step = max(np.max(np.abs(trial_Q - Q), initial=0.0), np.max(np.abs(d_offsets), initial=0.0), abs(d_s) / s)
        flat = cost - trial_cost <= FLAT * cost
        Q, offsets, s, cost, mu = trial_Q, trial_offsets, trial_s, trial_cost, mu / 3.0
        if step < tolerance or flat:
            converged = True
            break
    placed = placement.with_offsets(offsets)
    e = placed.evaluate(Q, jacobian=False) - s * p
    present = w > 0
    count = present.sum(axis=0)
    squared = np.where(present, np.sum(e * e, axis=-1), 0.0).sum(axis=0)
    residual = np.where(count > 0, np.sqrt(squared / np.maximum(count, 1)), np.nan)
    return Calibration(placed, float(s), Q, prior, np.linalg.norm(offsets - prior, axis=1), residual, count,
                       iteration, converged)

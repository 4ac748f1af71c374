"""Gradient descent IK as the lecture teaches it (solver.gradient).

A point r fixed to segment s of a model moves with the coordinates q (F frames, n coordinates):

    p(q) = W_s(q) [r; 1]            (world position; W_s from forward kinematics)
    C(q) = p(q) - p_bar             (3 residuals: the lecture's constraint)
    f(q) = ||C(q)||^2               (the objective; its minimum is 0 when p_bar is reachable)
    grad f = 2 J^T C,               J = dp/dq (3 x n), rows 0-2 of the geometric Jacobian

The gradient comes either from the analytic Jacobian (kinematics.point_jacobian) or, as in the
lecture's lab, from central finite differences of f itself (finite_differences.numerical_jacobian).

Each iteration moves q <- P(q - alpha d), d = grad f, P the projection onto the joint limits
(identity when there are none). The step size alpha is not a constant: it starts at the Cauchy
step of the linearised residual,

    f(q - alpha d) ~ ||C - alpha J d||^2   is smallest at   alpha_0 = C^T J d / ||J d||^2 = ||d||^2 / (2 ||J d||^2)

(J d from the analytic Jacobian, or from a central difference of p along d when the gradient is
numerical), and is halved until the Armijo condition holds:

    f(q_new) <= f(q) + c d^T (q_new - q),    c = 1e-4     (= f(q) - c alpha ||d||^2 without limits)

The iteration stops, per frame, when f <= tolerance^2 (converged), when no halving of alpha
satisfies Armijo or d vanishes (a stationary point: not converged unless f is small enough), or
after max_iterations. All frames iterate together; finished frames drop out of the batch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..finite_differences import numerical_jacobian
from ..kinematics import forward_kinematics, point_jacobian
from ..limits import project
from ..model import Model

ARMIJO_C = 1e-4          # sufficient-decrease constant of the Armijo condition
MAX_HALVINGS = 60        # 2^-60 alpha_0: below that no step in double precision changes f


@dataclass
class GradientResult:
    """Per frame: solved q (F, n), position_error |p(q) - p_bar| (F,), iterations (F,), converged (F,)."""

    q: np.ndarray
    position_error: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    seconds: float


def point_positions(model: Model, q: np.ndarray, segment: int, point, bases=None) -> np.ndarray:
    """World positions (F, 3) of the local `point` (3,) of `segment` at coordinates q (F, n)."""
    frames = forward_kinematics(model, q, bases).frames[:, segment]
    return frames[:, :3, :3] @ np.asarray(point, float) + frames[:, :3, 3]


def objective(model: Model, q: np.ndarray, segment: int, point, target: np.ndarray, bases=None) -> np.ndarray:
    """f(q) = ||p(q) - p_bar||^2 per frame (F,)."""
    C = point_positions(model, q, segment, point, bases) - target
    return np.sum(C * C, axis=-1)


def gradient_descent(model: Model, segment: int, point, target, q0, gradient: str = "analytic",
                     tolerance: float = 1e-6, max_iterations: int = 20000, bases=None,
                     fd_step: float = 1e-6) -> GradientResult:
    """Minimise ||p(q) - p_bar||^2 by gradient descent with Armijo backtracking (module docstring).

    `target` (F, 3) or (3,), `q0` (F, n) or (n,); `gradient` is 'analytic' (2 J^T C) or 'finite'
    (central differences of f with step `fd_step`); `tolerance` is on the distance |C|.
    """
    if gradient not in ("analytic", "finite"):
        raise ValueError(f"gradient must be 'analytic' or 'finite', not {gradient!r}")
    start = time.perf_counter()
    q = project(model, np.atleast_2d(np.asarray(q0, dtype=float)).copy())
    target = np.asarray(target, dtype=float)
    F = max(q.shape[0], target.shape[0] if target.ndim == 2 else 1)
    q = np.broadcast_to(q, (F, model.n_coordinates)).copy()
    target = np.broadcast_to(target, (F, 3))
    bases = None if bases is None else np.broadcast_to(np.asarray(bases, float), (F, model.n_armatures, 4, 4))
    point = np.asarray(point, dtype=float)
    seg = np.array([segment])

    def sub(array, idx):
        return None if array is None else array[idx]

    def residual(x, idx):
        return point_positions(model, x, segment, point, sub(bases, idx)) - target[idx]

    def f_of(x, idx):
        C = residual(x, idx)
        return np.sum(C * C, axis=-1)

    iterations = np.zeros(F, dtype=int)
    converged = np.zeros(F, dtype=bool)
    active = np.arange(F)
    f = f_of(q, active)
    goal = tolerance * tolerance
    while active.size:
        done = f[active] <= goal
        converged[active[done]] = True
        active = active[~done & (iterations[active] < max_iterations)]
        if not active.size:
            break
        x = q[active]
        if gradient == "analytic":
            pose = forward_kinematics(model, x, sub(bases, active))
            frames = pose.frames[:, segment]
            p = frames[:, :3, :3] @ point + frames[:, :3, 3]
            J = point_jacobian(model, pose, seg, p[:, None])[:, 0, :3]     # (A, 3, n)
            C = p - target[active]
            d = 2.0 * np.einsum("fkn,fk->fn", J, C)
            Jd = np.einsum("fkn,fn->fk", J, d)
        else:
            d = numerical_jacobian(lambda y: f_of(y, active), x, fd_step)
            norm = np.linalg.norm(d, axis=-1, keepdims=True)
            unit = d / np.maximum(norm, 1e-300)
            h = fd_step
            Jd = (residual(x + h * unit, active) - residual(x - h * unit, active)) / (2.0 * h) * norm
        dd = np.sum(d * d, axis=-1)
        JdJd = np.sum(Jd * Jd, axis=-1)
        stationary = (dd == 0.0) | (JdJd == 0.0)
        alpha = np.where(stationary, 0.0, 0.5 * dd / np.where(JdJd > 0, JdJd, 1.0))
        iterations[active] += 1

        # Armijo backtracking, all pending frames together.
        accepted = np.zeros(active.size, dtype=bool)
        pending = np.flatnonzero(~stationary)
        for _ in range(MAX_HALVINGS):
            if not pending.size:
                break
            idx = active[pending]
            trial = project(model, x[pending] - alpha[pending, None] * d[pending])
            f_trial = f_of(trial, idx)
            decrease = np.sum(d[pending] * (trial - x[pending]), axis=-1)     # d^T (q_new - q) <= 0
            ok = (f_trial <= f[idx] + ARMIJO_C * decrease) & np.any(trial != x[pending], axis=-1)
            q[idx[ok]] = trial[ok]
            f[idx[ok]] = f_trial[ok]
            accepted[pending[ok]] = True
            pending = pending[~ok]
            alpha[pending] *= 0.5
        # Frames where no step satisfied Armijo sit at a stationary point (to machine precision).
        active = active[accepted]
    position_error = np.sqrt(f)
    converged = position_error <= tolerance
    return GradientResult(q=q, position_error=position_error, iterations=iterations, converged=converged,
                          seconds=time.perf_counter() - start)

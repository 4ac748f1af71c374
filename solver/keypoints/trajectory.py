"""Levenberg-Marquardt on a whole trajectory with the acceleration penalty (smoothness.py): the
loop the keypoint fit (fit.py) and marker IK's smoothing (opensim/smoothing.py) share.

Over all F frames at once the coordinates Q (F, n) minimise a cost whose per-frame part has
Gauss-Newton normal equations H_f dq_f = g_f (g the descent side, half the gradient), plus
S(Q) = sum_c Lambda_c |D q_c|^2. The trajectory's normal matrix is sum_f H_f (block diagonal) plus
D^T D (x) Lambda, banded with each frame tied to the two before and after it; pairs of frames as
blocks of 2n make it block tridiagonal, solved exactly by cyclic reduction (block_tridiagonal.py).
The damping adds mu times the frame's mean data stiffness to the diagonal; a step that lowers the
cost is taken and mu divided by 3, else mu multiplied by 4 until one does. Coordinates the
problem holds (on a limit the step would push out, or not free at all) are left out of the step.
Once a step gains less than NEWTON_FROM of the cost, the problem's curvature term (refreshed every
NEWTON_EVERY steps) is added: Newton's steps instead of Gauss-Newton's.

The problem gives (`Trajectory`): `total(Q)` the whole cost (S included), `normal(Q)` the frames'
(H, g, scale, context) without S (scale (F,) the frames' mean data stiffness), `curvature(Q,
context)` the term Newton's Hessian adds to H, `free(Q, g)` the coordinates a step may move
(F, n) bool, and `place(Q)` a step's end put back where the problem lives (limits, constraints).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from . import smoothness
from .block_tridiagonal import solve_block_tridiagonal

MU_START = 1e-6             # the damping, relative to the mean data stiffness, from frames already solved
MU_GIVE_UP = 1e12
FLAT = 1e-8                 # relative: a step lowering the cost less than this has converged
NEWTON_FROM = 1e-3          # relative gain of a step below which Newton's steps are taken
NEWTON_EVERY = 3            # steps between two evaluations of the curvature


class Trajectory(Protocol):
    def total(self, Q) -> float: ...

    def normal(self, Q): ...

    def curvature(self, Q, context) -> np.ndarray: ...

    def free(self, Q, g) -> np.ndarray: ...

    def place(self, Q) -> np.ndarray: ...


def paired_system(H, g, Lambda, free):
    """The trajectory's normal equations as a block-tridiagonal system over pairs of frames:
    diagonal blocks (N, 2n, 2n), blocks below (N - 1, 2n, 2n), right side (N, 2n)."""
    F, n = g.shape
    F2 = F + F % 2
    if F2 != F:                                            # a frame past the end, tied to nothing
        H = np.concatenate([H, np.eye(n)[None]])
        g = np.concatenate([g, np.zeros((1, n))])
        free = np.concatenate([free, np.ones((1, n), bool)])
    d0, d1, d2 = (np.concatenate([d, np.zeros(F2 - F)]) for d in smoothness.normal_bands(F))
    d1, d2 = np.append(d1, 0.0), np.append(d2, [0.0, 0.0])      # F2 entries each (past the end: 0)
    N = F2 // 2
    Lam = np.diag(Lambda)
    A = H + d0[:, None, None] * Lam                          # frame blocks on the diagonal
    D = np.zeros((N, 2 * n, 2 * n))
    D[:, :n, :n], D[:, n:, n:] = A[0::2], A[1::2]
    D[:, n:, :n] = D[:, :n, n:] = d1[0::2, None, None] * Lam
    L = np.zeros((max(N - 1, 0), 2 * n, 2 * n))
    L[:, :n, :n] = d2[0:F2 - 2:2, None, None] * Lam          # frame 2i+2 to 2i
    L[:, :n, n:] = d1[1:F2 - 2:2, None, None] * Lam          # frame 2i+2 to 2i+1
    L[:, n:, n:] = d2[1:F2 - 2:2, None, None] * Lam          # frame 2i+3 to 2i+1
    f = free.reshape(N, 2 * n)
    D = np.where(f[:, :, None] & f[:, None, :], D, 0.0) + np.eye(2 * n) * (~f)[:, None, :]
    L = np.where(f[1:, :, None] & f[:-1, None, :], L, 0.0)
    return D, L, (g * free).reshape(N, 2 * n), F2


def minimise(problem: Trajectory, Q, Lambda, max_iterations: int, tolerance: float, mu: float = MU_START):
    """The loop of the module docstring from Q (F, n) with smoothness weights Lambda (n,), until a
    step moves no coordinate by `tolerance` or gains less than FLAT of the cost, or no step lowers
    it. Returns Q, iterations, converged."""
    F, n = Q.shape
    cost = problem.total(Q)
    newton, curvature, since = False, 0.0, NEWTON_EVERY
    for iteration in range(1, max_iterations + 1):
        H, g, scale, context = problem.normal(Q)
        g = g - smoothness.second_difference_normal(Q) * Lambda
        free = problem.free(Q, g)
        if newton and since >= NEWTON_EVERY:
            curvature = problem.curvature(Q, context)
            since = 0
        since += 1
        H = H + curvature
        while True:
            D, L, b, F2 = paired_system(H + (mu * scale)[:, None, None] * np.eye(n), g, Lambda, free)
            trial = problem.place(Q + solve_block_tridiagonal(D, L, b).reshape(F2, n)[:F])
            trial_cost = problem.total(trial)
            if trial_cost <= cost or mu > MU_GIVE_UP:
                break
            mu *= 4.0
        if trial_cost > cost:
            return Q, iteration, True            # no step lowers the cost: at the minimum to rounding
        step = np.max(np.abs(trial - Q), initial=0.0)
        gain = (cost - trial_cost) / cost if cost > 0 else 0.0
        Q, cost, mu = trial, trial_cost, mu / 3.0
        if step < tolerance or gain <= FLAT:
            return Q, iteration, True
        newton = newton or gain < NEWTON_FROM
    return Q, max_iterations, False

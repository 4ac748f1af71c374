"""The iTaSC update law, for both modes.

With the stacked system of a scene (scene.py), y the outputs, yd their desired values, Xu the
coordinates of whatever moves on its own (targets, armature bases), one update is

    y'  = yd' + K (yd - y)                                    (output_velocity)
    q'  = Wq (Wy^1/2 A Wq)# Wy^1/2 (y' + B Xu')               (weighted_step, over a time h)

Wq = diag(1 - stiffness) scales the coordinates (the scene's `joint_weight`; 0 freezes one), Wy
holds the task weights (the evaluation's `task_weight`) and A# is one of the pseudo-inverses of
`pseudoinverse` (or, in animation mode's damped steps, the damped secant solve of `curvature`).
Simulation mode integrates this over sub-steps of length h with the feedback K; animation mode
takes K h = 1 and no feed-forward, A dq = yd - y, and repeats to convergence. Every task's yd
holds still within a step (yd' = 0). Joint limits hold exactly: when a step would leave a
coordinate's allowed set, that coordinate is moved onto its limit and locked, its motion is
taken out of the right-hand side, and the rest is solved again, until no new coordinate hits a
limit.
"""

from __future__ import annotations

import numpy as np

from . import pseudoinverse
from .scene import Evaluation, Scene
from .settings import Settings


def output_velocity(ev: Evaluation, feedback: float, Xu_dot=None) -> np.ndarray:
    """y' + B Xu' = K (yd - y) + B Xu' (F, M), with yd' = 0; Xu_dot (F, n_u) or None (no
    feed-forward: animation mode, where K h = 1 makes this the residual yd - y)."""
    y_dot = ev.yd - ev.y
    if feedback != 1.0:        # K h = 1 (animation mode): the product would be a copy
        y_dot = feedback * y_dot
    if Xu_dot is not None:
        y_dot = y_dot + np.einsum("fmu,fu->fm", ev.B, Xu_dot)
    return y_dot


def weighted_step(scene: Scene, q, A, rhs, task_weight, max_step, solve):
    """q' h = A# rhs: one weighted update dq (F, n) with A dq ~ rhs that keeps every limit exactly,
    and the smallest singular value (F,) the solver saw; for one frame (animation mode's, as live
    preview solves it) every array without its frame axis: q (n,), A (M, n), max_step a 0-d
    array. `solve(A, rhs, weight, cols, locked_step, frames)` returns the free step x (scaled by
    cols) and s_min for those of the frames (`frames`, limited_step's `rows`) it is given
    (locked_step None: nothing locked yet); `max_step` (F,) bounds the free part of dq. After the
    first solve only the frames where a coordinate newly hit a limit are solved again."""
    s_min = np.empty(q.shape[:-1])

    def solve_free(rows, cols, locked_step):
        x, s_min[rows] = solve(A[rows], rhs[rows], task_weight[rows], cols, locked_step, rows)
        return x

    return limited_step(scene, q, max_step, solve_free), s_min


def limited_step(scene: Scene, q, max_step, solve_free) -> np.ndarray:
    """The joint limits of every update, held exactly, for q (F, n) or one frame's (n,):
    `solve_free(rows, cols, locked_step)` gives the step x of the frames `rows` (`...`: every
    frame) in the free columns cols (1 free, 0 locked), the motion locked_step of locked
    coordinates taken out of its right-hand side (None: none locked yet). The free step cols x
    is scaled to at most max_step (F,); a coordinate it takes past a limit is put on the limit
    and locked, and those frames are solved again, until no coordinate newly hits a limit.
    Returns dq, shaped as q."""
    free = np.greater(scene.joint_weight, 0.0, out=np.empty(q.shape, dtype=bool))
    locked_step = inside = None          # both shaped as q once there
    rows = ...                           # frames still to solve: all, then those that hit a limit
    for _ in range(scene.n_coordinates + 1):
        cols = scene.joint_weight * free[rows]
        free_step = cols * solve_free(rows, cols, None if locked_step is None else locked_step[rows])
        largest, bound = np.maximum.reduce(np.abs(free_step), axis=-1, initial=0.0), max_step[rows]
        # (np.count_nonzero as `any`: one C call on a stack or on one frame's scalar, cheaper than .any())
        if np.count_nonzero(largest > bound):      # scaled by bound / largest there, by 1 elsewhere
            free_step *= (bound / np.maximum(np.maximum(largest, bound), 1e-300))[..., None]
        moved = q[rows] + free_step
        if locked_step is not None:
            moved += locked_step[rows]
        limited = scene.limit(moved)
        hit = free[rows] & (limited != moved)
        if inside is None:
            inside = limited
        else:
            inside[rows] = limited
        if not np.count_nonzero(hit):
            break
        again = np.logical_or.reduce(hit, axis=-1)
        if not again.all():              # some frames are done (a stack: drop them)
            rows, hit = np.flatnonzero(again) if rows is ... else rows[again], hit[again]
        if locked_step is None:
            locked_step = np.zeros(q.shape)
        locked_step[rows] = np.where(hit, scene.wrap(inside[rows]) - q[rows], locked_step[rows])
        free[rows] &= ~hit
    return scene.wrap(inside) - q


# SDLS's bound on one update's coordinate change per mode, where Settings.gamma_max is None.
# Simulation takes Buss and Kim's pi/4. Animation mode halves a step until the error falls and
# bounds it by max_step anyway, so there the bound only shortens steps that would have been
# taken: a half turn, which lets a frame starting near a singular pose (a straight limb) leave it
# in a few updates instead of creeping away.
SDLS_BOUND = {"simulation": np.pi / 4, "animation": np.pi}


def sdls_bound(settings: Settings, mode: str) -> float:
    """The SDLS bound gamma_max a solve in `mode` ('animation' or 'simulation') takes."""
    return SDLS_BOUND[mode] if settings.gamma_max is None else settings.gamma_max


def pseudoinverse_solver(scene: Scene, settings: Settings, mode: str):
    """x = (Wy^1/2 A C)# Wy^1/2 b for the free columns C: the update law's A# (in `mode`, for
    SDLS's bound; SDLS by the scene's independent blocks), and s_min."""
    gamma_max, blocks = sdls_bound(settings, mode), scene.blocks
    # s_min, the last singular value the rows of nonzero weight and the free columns can have
    # (`rank`): DLS damps on it and simulation mode reports it; SDLS by blocks takes each block's
    # own, and animation mode's other methods do not read it.
    counts_rank = settings.method == "dls" or (mode == "simulation" and not (settings.method == "sdls" and blocks is not None))

    def solve(A, b, task_weight, cols, locked_step, frames=None):
        rows = np.sqrt(task_weight)
        Aw = rows[..., None] * A * cols[..., None, :]
        bw = rows * (b if locked_step is None or not locked_step.any() else b - (A @ locked_step[..., None])[..., 0])
        rank = np.minimum(np.add.reduce(task_weight > 0.0, axis=-1), np.add.reduce(cols > 0.0, axis=-1)) \
            if counts_rank else None
        return pseudoinverse.solve(Aw, bw, settings.method, damping_max=settings.damping_max,
                                   epsilon=settings.damping_epsilon, gamma_max=gamma_max, rank=rank, blocks=blocks,
                                   weight=cols)
    return solve


def cost(ev: Evaluation) -> np.ndarray:
    """The weighted squared output error per frame, sum_i w_i (yd_i - y_i)^2."""
    return (ev.task_weight * (ev.yd - ev.y) ** 2).sum(axis=-1)


def reached(scene: Scene, ev: Evaluation, precision: float) -> np.ndarray:
    """Frames where every pose and distance constraint is within precision (joint-value tasks are
    soft, and constraints of zero weight ask nothing: neither counts)."""
    hard = scene.hard_task_index
    if not scene.hard_tasks.size:
        return np.ones(ev.y.shape[0], dtype=bool)
    ignored = np.maximum.reduceat(ev.task_weight, scene.rows[:-1], axis=1)[:, hard] == 0   # every constraint has rows
    position, rotation = ev.position_error[:, hard], ev.rotation_error[:, hard]
    missed = (position > precision) | (rotation > precision)      # NaN (no such part) is never missed
    return (ignored | ~missed).all(axis=1)

"""The iTaSC update: settings, the limit-respecting weighted step, and what a solve returns.

One update solves A q' = y' + B Xu' with y' = yd' + K (yd - y), weighted:

    q' = Wq (Wy^1/2 A Wq)# Wy^1/2 (y' + B Xu')

Wq = diag(1 - stiffness) scales the coordinates (0 freezes one), Wy holds the task weights and A#
is one of the pseudo-inverses of `pseudoinverse`. Joint limits hold exactly: when a step would
leave a coordinate's allowed set, that coordinate is moved onto its limit and locked, its motion
is taken out of the right-hand side, and the rest is solved again, until no new coordinate hits
a limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import pseudoinverse
from .scene import Evaluation, Scene


STEPS = ("update-law", "damped")


@dataclass(frozen=True)
class Settings:
    method: str = "dls"              # A#: 'pinv', 'dls', 'sdls' or the 'gradient' baseline
    precision: float = 1e-6          # position (scene units) and rotation (radians) error to stop at
    max_iterations: int = 300        # animation mode, per frame
    max_step: float = 0.5            # largest coordinate change of one update (radians or units)
    damping_max: float = 0.5         # DLS
    damping_epsilon: float = 0.1     # DLS
    gamma_max: float = np.pi / 4     # SDLS: the largest coordinate change one update may cause
    feedback: float = 20.0           # K, per second (simulation)
    max_velocity: float = 50.0       # largest coordinate speed (simulation)
    substeps: int = 0                # simulation: 0 chooses them from the joint speed
    substep_angle: float = 0.05      # automatic sub-steps keep each under this coordinate change
    max_substeps: int = 64
    fps: float = 24.0
    feedforward: bool = True         # simulation: use B Xu'
    converge_first_frame: bool = True  # simulation: solve the first frame in animation mode
    steps: str = "update-law"        # animation: 'update-law' steps, damped ones where they stall; or
    #                                  'damped' (Levenberg-Marquardt) steps from the first iteration
    curvature: bool = True           # animation: damped steps also try the curvature estimate (for
    #                                  targets out of reach; without it they are plain Levenberg-Marquardt)
    fit: bool = False                # a least-squares fit (marker IK): frames converge when their
    #                                  steps fall below precision, not when targets are met

    def __post_init__(self):
        if self.method not in pseudoinverse.METHODS:
            raise ValueError(f"unknown solver {self.method!r}; choose one of {pseudoinverse.METHODS}")
        if self.steps not in STEPS:
            raise ValueError(f"unknown steps {self.steps!r}; choose one of {STEPS}")
        for name in ("precision", "max_step", "feedback", "max_velocity", "fps", "substep_angle",
                     "damping_max", "damping_epsilon", "gamma_max"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"setting {name} = {value} must be a positive number")
        if self.max_iterations < 1 or self.substeps < 0 or self.max_substeps < 1:
            raise ValueError("max_iterations and max_substeps must be >= 1, substeps >= 0")


@dataclass
class Result:
    """Solved coordinates and per-frame diagnostics; errors are (frames, constraints), NaN where
    a constraint has no position (rotation) part or a frame could not be solved."""

    q: np.ndarray
    position_error: np.ndarray
    rotation_error: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    sigma_min: np.ndarray
    seconds: float
    frames: np.ndarray = field(default=None)
    names: list = field(default_factory=list)     # the constraints' names, in column order
    evaluation: object = None    # simulation: the last frame's Evaluation, a next call's `start`

    def __post_init__(self):
        if self.frames is None:
            self.frames = np.arange(self.q.shape[0])


def cost(ev: Evaluation) -> np.ndarray:
    """The weighted squared output error per frame, sum_i w_i (yd_i - y_i)^2."""
    return (ev.weight * (ev.yd - ev.y) ** 2).sum(axis=-1)


def reached(scene: Scene, ev: Evaluation, precision: float) -> np.ndarray:
    """Frames where every pose and distance constraint is within precision (joint-value tasks are
    soft, and constraints of zero weight ask nothing: neither counts)."""
    hard = scene.hard_task_index
    if not scene.hard_tasks.size:
        return np.ones(ev.y.shape[0], dtype=bool)
    ignored = np.maximum.reduceat(ev.weight, scene.rows[:-1], axis=1)[:, hard] == 0   # every constraint has rows
    position, rotation = ev.position_error[:, hard], ev.rotation_error[:, hard]
    missed = (position > precision) | (rotation > precision)      # NaN (no such part) is never missed
    return (ignored | ~missed).all(axis=1)


def pseudoinverse_solver(settings: Settings):
    """x = (Wy^1/2 A C)# Wy^1/2 b for the free columns C: the update law's A#."""
    def solve(A, b, weight, cols, locked_step, frames=None):
        rows = np.sqrt(weight)
        Aw = rows[..., None] * A * cols[:, None, :]
        bw = rows * (b if locked_step is None or not locked_step.any() else b - np.einsum("fmn,fn->fm", A, locked_step))
        rank = np.minimum((weight > 0).sum(axis=-1), (cols > 0).sum(axis=-1))
        return pseudoinverse.solve(Aw, bw, settings.method, damping_max=settings.damping_max,
                                   epsilon=settings.damping_epsilon, gamma_max=settings.gamma_max, rank=rank)
    return solve


def constrained_step(scene: Scene, q, A, rhs, weight, max_step, solve):
    """One weighted update dq (F, n) with A dq ~ rhs that keeps every limit exactly, and the
    smallest singular value the solver saw. `solve(A, rhs, weight, cols, locked_step, frames)`
    returns the free step x (scaled by cols) and s_min for those of the F frames (indices `frames`)
    it is given (locked_step None: nothing locked yet); `max_step` (F,) bounds the free part of dq.
    After the first solve only the frames where a coordinate newly hit a limit are solved again."""
    free = np.empty(q.shape, dtype=bool)
    free[:] = scene.weight > 0
    locked_step = np.zeros(q.shape)
    inside = np.empty(q.shape)
    s_min = np.empty(q.shape[0])
    rows = slice(None)                   # frames still to solve: all, then those that hit a limit
    for _ in range(scene.n_coordinates + 1):
        cols = scene.weight * free[rows]
        x, s_min[rows] = solve(A[rows], rhs[rows], weight[rows], cols,
                               None if isinstance(rows, slice) else locked_step[rows], rows)
        free_step = cols * x
        largest = np.abs(free_step).max(axis=-1, initial=0.0)
        too_long = largest > max_step[rows]
        if too_long.any():
            free_step *= np.where(too_long, max_step[rows] / np.maximum(largest, 1e-300), 1.0)[:, None]
        moved = q[rows] + free_step + locked_step[rows]
        inside[rows] = scene.limit(moved)
        hit = free[rows] & (inside[rows] != moved)
        again = hit.any(axis=1)
        if not again.any():
            break
        rows, hit = np.arange(q.shape[0])[rows][again], hit[again]
        locked_step[rows] = np.where(hit, scene.wrap(inside[rows]) - q[rows], locked_step[rows])
        free[rows] &= ~hit
    return scene.wrap(inside) - q, s_min


def check_inputs(scene: Scene, q, objects, bases, values=None):
    """Validated float arrays: q (F, n), objects (F, K, 4, 4), bases (F, A, 4, 4) and values
    (F, number of joint-value tasks), the last three None when not given."""
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[1] != scene.n_coordinates:
        raise ValueError(f"coordinates must have shape (frames, {scene.n_coordinates}), got {q.shape}")
    bad = ~np.all(np.isfinite(q), axis=1)
    if bad.any():
        raise ValueError(f"starting coordinates are not finite in frame(s) {np.flatnonzero(bad)[:10].tolist()}")
    F = q.shape[0]
    if scene.n_objects:
        if objects is None:
            raise ValueError(f"the scene needs poses for {scene.n_objects} object(s)")
        objects = np.broadcast_to(np.asarray(objects, float), (F, scene.n_objects, 4, 4))
    else:
        objects = None
    if bases is not None:
        bases = np.broadcast_to(np.asarray(bases, float), (F, scene.model.n_armatures, 4, 4))
    if values is not None:
        values = np.broadcast_to(np.asarray(values, float), (F, len(scene.joint_tasks)))
    return q, objects, bases, values


def finite_frames(objects, bases, F: int) -> np.ndarray:
    """Frames that can be solved: armature bases finite. (Objects without a finite pose only
    leave their own constraints out of a frame; see Scene.evaluate.)"""
    ok = np.ones(F, dtype=bool)
    if bases is not None:
        ok &= np.all(np.isfinite(bases), axis=(1, 2, 3))
    return ok


def frames_with_a_target(objects, F: int) -> np.ndarray:
    """Frames where at least one object has a finite pose: a fit there has something to fit."""
    if objects is None:
        return np.ones(F, dtype=bool)
    return np.any(np.all(np.isfinite(objects), axis=(-2, -1)), axis=-1)


def complete_frames(objects, F: int) -> np.ndarray:
    """Frames where every object has a finite pose: only these can count as converged."""
    if objects is None:
        return np.ones(F, dtype=bool)
    return np.all(np.isfinite(objects), axis=(1, 2, 3))

"""Simulation mode: one time step (1 / fps) per frame from the previous frame's solution.

Within a frame the update law (update.py) q' = A# (y' + B Xu') with y' = K (yd - y) is integrated in
sub-steps, while every object and armature base moves at the constant twist that carries it from
its pose at the previous frame to its pose at this one; that twist is Xu', so B Xu' moves the
joints along with a moving target instead of lagging behind it. Sub-steps are fixed, or chosen
so that no coordinate changes by more than `substep_angle` in one and the feedback stays stable
(K h <= 1); joint speed is bounded by `max_velocity`. This is what live preview runs.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .animation import solve_animation
from .runtime.blas_threads import one_blas_thread
from .rotations import exp_map, log_map
from .scene import Scene
from .inputs import check_inputs, complete_frames, finite_frames
from .result import Result
from .settings import Settings
from .update import output_velocity, pseudoinverse_solver, reached, weighted_step


def twist_between(T0: np.ndarray, T1: np.ndarray, dt: float) -> np.ndarray:
    """World twist (..., 6) that carries pose T0 to T1 in time dt at constant velocity:
    linear velocity of the origin, then angular velocity log(R1 R0^T) / dt."""
    if T0.shape == T1.shape and (T0 == T1).all():   # standing still (a chain's base, mostly): no log map needed
        return np.zeros(T0.shape[:-2] + (6,))
    v = (T1[..., :3, 3] - T0[..., :3, 3]) / dt
    w = log_map(T1[..., :3, :3] @ np.swapaxes(T0[..., :3, :3], -1, -2)) / dt
    return np.concatenate([v, w], axis=-1)


def advance(T0: np.ndarray, twist: np.ndarray, h: float) -> np.ndarray:
    """Pose T0 moved for time h by a constant world twist."""
    T = T0.copy()
    T[..., :3, 3] += twist[..., :3] * h
    T[..., :3, :3] = exp_map(twist[..., 3:] * h) @ T0[..., :3, :3]
    return T


@one_blas_thread()
def solve_simulation(scene: Scene, q_start, objects=None, bases=None, settings: Settings = Settings(),
                     values=None, start=None) -> Result:
    """Advance one time step (1 / fps) per frame from the previous frame's solution. q_start (n,)
    or (1, n); objects (F, K, 4, 4), bases (F, A, 4, 4) and values (F, joint-value tasks) give
    the scene at every frame. A call that goes on where another ended (q_start its last q, its
    last frame's poses this call's first) may pass that call's `Result.evaluation` as `start`:
    the first frame is then not evaluated again."""
    started = time.perf_counter()
    q0 = np.atleast_2d(np.asarray(q_start, dtype=float))
    given = [a for a in (objects, bases, values) if a is not None]
    F = np.shape(given[0])[0] if given else 1
    _, objects, bases, values = check_inputs(scene, np.repeat(q0, F, axis=0), objects, bases, values)
    C = len(scene.constraints)
    out_q = np.zeros((F, scene.n_coordinates))
    position_error, rotation_error = np.full((F, C), np.nan), np.full((F, C), np.nan)
    iterations, sigma_min = np.zeros(F, dtype=int), np.full(F, np.nan)
    converged = np.zeros(F, dtype=bool)
    finite, complete = finite_frames(objects, bases, F), complete_frames(objects, F)
    q = scene.project(q0)

    def at(array, f):
        return None if array is None else array[f:f + 1]

    ahead = None   # this frame's final evaluation, when the next step starts from it
    last = None
    for f in range(F):
        if not finite[f]:
            out_q[f] = q[0]
            continue
        if f == 0 or not finite[f - 1]:
            if settings.converge_first_frame:
                first = solve_animation(scene, q, at(objects, f), at(bases, f), settings, at(values, f))
                q, iterations[f] = first.q, first.iterations[0]
        else:
            q, iterations[f], sigma_min[f] = _simulation_step(scene, q, objects, bases, at(values, f), f, settings,
                                                              ahead)
        # The next step starts from this q in this frame's scene (its objects at elapsed time 0).
        # When no object is missing at either frame and no joint values are given per frame, this
        # evaluation, with Jacobians, is also that step's first.
        # The last frame is evaluated the same way, for a next call to start from (`start`).
        next_step = (f + 1 == F or finite[f + 1] and complete[f + 1]) and complete[f] and values is None
        jacobians = (True if settings.feedforward else "A") if next_step else False
        if f == 0 and next_step and _continues(start, settings):
            ev = start
        else:
            ev = scene.evaluate(q, at(objects, f), at(bases, f), jacobians=jacobians, values=at(values, f))
        ahead = ev if next_step else None
        last = ahead
        out_q[f] = q[0]
        position_error[f], rotation_error[f] = ev.position_error[0], ev.rotation_error[0]
        converged[f] = reached(scene, ev, settings.precision)[0] and (settings.fit or complete[f])
    return Result(q=out_q, position_error=position_error, rotation_error=rotation_error, iterations=iterations,
                  converged=converged, sigma_min=sigma_min, seconds=time.perf_counter() - started,
                  names=list(scene.names), evaluation=last)


@one_blas_thread()
def simulate_frame(scene: Scene, q, objects, bases, settings: Settings, start=None, values=None):
    """One frame of `solve_simulation` for a caller that has checked its inputs (live preview):
    q (1, n) the last frame's solution, objects (2, K, 4, 4) and bases (2, A, 4, 4) the scene at
    the last frame and at this one, every pose finite; `start` the last frame's final evaluation
    when the caller kept it; `values` (1, joint-value tasks) this frame's joint-value targets.
    Returns this frame's q (1, n) and its final evaluation, the `start` of the next frame: what
    `solve_simulation` over the two frames returns as its last q and its `Result.evaluation`,
    without the per-frame errors and flags."""
    first = start if _has_jacobians(start, settings) else None
    q, _, _ = _simulation_step(scene, q, objects, bases, values, 1, settings, first)
    jacobians = True if settings.feedforward else "A"
    return q, scene.evaluate(q, objects[1:], bases[1:], jacobians=jacobians, values=values)


def _continues(start, settings: Settings) -> bool:
    """Whether a `start` evaluation can stand for the first frame's: given, with the Jacobians the
    step needs, and the first frame not to be solved to convergence first."""
    return not settings.converge_first_frame and _has_jacobians(start, settings)


def _has_jacobians(start, settings: Settings) -> bool:
    return start is not None and start.A is not None and (start.B is not None or not settings.feedforward)


def _simulation_step(scene: Scene, q, objects, bases, values, f: int, settings: Settings, start=None):
    """Integrate q from frame f-1 to frame f; objects and bases move at constant velocity between
    their poses at the two frames. `start`, when given, is the evaluation (with Jacobians) at q in
    frame f-1's scene. Returns q, the number of sub-steps and the last s_min."""
    dt = 1.0 / settings.fps
    twist_obj, previous, gone = None, None, None
    if objects is not None:
        previous = objects[f - 1:f]
        if np.isfinite(objects[f - 1:f + 1]).all():
            twist_obj = twist_between(previous, objects[f:f + 1], dt)
        else:
            # An object that reappears at f holds still at its new pose; one missing at f stays missing.
            was_gone = ~np.all(np.isfinite(previous), axis=(-2, -1))
            previous = np.where(was_gone[..., None, None], objects[f:f + 1], previous)
            with np.errstate(invalid="ignore"):
                twist_obj = twist_between(previous, objects[f:f + 1], dt)
            twist_obj = np.where(np.isfinite(twist_obj), twist_obj, 0.0)   # a missing pose moves nothing
            gone = ~np.all(np.isfinite(objects[f]), axis=(-2, -1))
    twist_base = twist_between(bases[f - 1:f], bases[f:f + 1], dt) if bases is not None else None
    Xu_dot = np.zeros((1, scene.n_u))
    if twist_obj is not None:
        Xu_dot[:, :6 * scene.n_objects] = twist_obj.reshape(1, -1)
    if twist_base is not None:
        Xu_dot[:, 6 * scene.n_objects:] = twist_base.reshape(1, -1)

    def evaluate(elapsed):
        obj = None
        if objects is not None and gone is None:        # every object present at both frames
            obj = advance(previous, twist_obj, elapsed)
        elif objects is not None:
            with np.errstate(invalid="ignore"):
                obj = advance(previous, twist_obj, elapsed)
            obj[:, gone] = np.nan
        base = None if bases is None else advance(bases[f - 1:f], twist_base, elapsed)
        return scene.evaluate(q, obj, base, values=values, jacobians=True if settings.feedforward else "A")

    def step(ev, h):
        y_dot = output_velocity(ev, settings.feedback, Xu_dot if settings.feedforward else None)
        return weighted_step(scene, q, ev.A, h * y_dot, ev.task_weight, np.array([settings.max_velocity * h]),
                             pseudoinverse_solver(settings))

    ev = evaluate(0.0) if start is None else start
    n_sub, probe = settings.substeps, None
    if n_sub == 0:  # automatic: keep each sub-step's largest coordinate change under substep_angle
        probe = step(ev, dt)
        dq = probe[0]
        # ... and the feedback stable: K h <= 1 per sub-step.
        wanted = max(np.abs(dq).max(initial=0.0) / settings.substep_angle, settings.feedback * dt, 1.0)
        n_sub = math.ceil(min(wanted, settings.max_substeps))
    h = dt / n_sub
    for k in range(n_sub):
        if k:
            ev = evaluate(k * h)
        dq, s_min = probe if (k == 0 and n_sub == 1 and probe is not None) else step(ev, h)
        q = scene.project(q + dq)
    return q, n_sub, s_min[0]

"""Simulation mode: one time step (1 / fps) per frame from the previous frame's solution.

Within a frame the update law (update.py) q' = A# (y' + B Xu') with y' = K (yd - y) is integrated in
sub-steps, while every object and armature base moves at the constant twist that carries it from
its pose at the previous frame to its pose at this one; that twist is Xu', so B Xu' moves the
joints along with a moving target instead of lagging behind it. Each sub-step of length h is the
explicit midpoint rule,

    q_mid = q + (h/2) q'(q, t),     q_new = q + h q'(q_mid, t + h/2),

the objects and bases advanced to the time of each evaluation. Its error per frame is O(h^3)
where a plain Euler step's is O(h^2): with the target's velocity fed forward, what is left to lag
is the chain's curvature over a step (the Jacobian taken at the start of it), which makes a
steady tracking error O(h) with Euler steps and O(h^2) with midpoint ones. The feedback's own
decay over a step, exp(-K h), is followed within 3 % at K h = 1/2 (1 - K h + (K h)^2 / 2).
Sub-steps are fixed, or chosen so that no coordinate changes by more than `substep_angle` in one
and K h <= FEEDBACK_STEP; joint speed is bounded by `max_velocity`. This is what live preview runs
in simulation mode.
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

FEEDBACK_STEP = 0.5     # automatic sub-steps keep K h at or below this


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
                  constraint_names=list(scene.names), evaluation=last)


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


def _continued(scene: Scene, q, near):
    """q with each unlimited sphere joint's rotation vector given the whole turns about its own
    axis (phi (1 + 2 pi k / |phi|), k = -1, 0, 1: the same rotation) that bring it nearest to
    `near`'s: the inverse of wrapping (limits.wrap_spheres) for a step that crossed a half turn."""
    c = scene.model.unlimited_sphere_coordinates
    if scene.coupling is not None or not c.size:
        return q
    phi, ref = q[:, c], near[:, c]
    t = np.sqrt((phi * phi).sum(axis=-1, keepdims=True))
    unit = phi / np.maximum(t, 1e-300)
    candidates = np.stack([phi + 2.0 * np.pi * k * unit for k in (-1.0, 0.0, 1.0)])        # (3, F, k, 3)
    best = np.argmin(((candidates - ref) ** 2).sum(axis=-1), axis=0)                       # (F, k)
    out = q.copy()
    out[:, c] = np.take_along_axis(candidates, best[None, ..., None], axis=0)[0]
    return out


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

    def evaluate(at, elapsed):
        obj = None
        if objects is not None and gone is None:        # every object present at both frames
            obj = advance(previous, twist_obj, elapsed)
        elif objects is not None:
            with np.errstate(invalid="ignore"):
                obj = advance(previous, twist_obj, elapsed)
            obj[:, gone] = np.nan
        base = None if bases is None else advance(bases[f - 1:f], twist_base, elapsed)
        return scene.evaluate(at, obj, base, values=values, jacobians=True if settings.feedforward else "A")

    def step(at, ev, h):
        """The update law's step from `at` over h with the slope of evaluation ev."""
        y_dot = output_velocity(ev, settings.feedback, Xu_dot if settings.feedforward else None)
        return weighted_step(scene, at, ev.A, h * y_dot, ev.task_weight, np.array([settings.max_velocity * h]),
                             pseudoinverse_solver(scene, settings, "simulation"))

    ev = evaluate(q, 0.0) if start is None else start
    n_sub, probe = settings.substeps, None
    if n_sub == 0:  # automatic: keep each sub-step's largest coordinate change under substep_angle
        probe = step(q, ev, dt)
        dq = probe[0]
        # ... and no longer than half the feedback's time constant 1 / K.
        wanted = max(np.abs(dq).max(initial=0.0) / settings.substep_angle, settings.feedback * dt / FEEDBACK_STEP,
                     1.0)
        n_sub = math.ceil(min(wanted, settings.max_substeps))
    h = dt / n_sub
    for k in range(n_sub):
        if k:
            ev = evaluate(q, k * h)
        first, _ = probe if (k == 0 and n_sub == 1 and probe is not None) else step(q, ev, h)
        # Explicit midpoint: the slope where the first half of this step leads, at half the time.
        # The step may have turned a sphere joint the short way round: half of it is taken in q's
        # own coordinates, where the midpoint's slope is applied too.
        middle = scene.limit(q + 0.5 * (_continued(scene, q + first, q) - q))
        dq, s_min = step(q, evaluate(middle, (k + 0.5) * h), h)
        q = scene.project(q + dq)
    return q, n_sub, s_min[0]

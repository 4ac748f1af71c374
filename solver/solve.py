"""The iTaSC update and the two ways of running it over frames.

One update solves A q' = y' + B Xu' with y' = yd' + K (yd - y), weighted:

    q' = Wq (Wy^1/2 A Wq)# Wy^1/2 (y' + B Xu')

Wq = diag(1 - stiffness) scales the coordinates (0 freezes one), Wy the task weights. Joint
limits hold exactly: when a step would leave a coordinate's allowed set, that coordinate is moved
onto the limit and locked, its motion is taken out of the right-hand side, and the rest is
solved again (repeated until no new coordinate hits a limit).

Animation mode iterates every frame to convergence from its own starting pose, all frames of the
batch together: each iteration is a full step (K h = 1, so y' h = yd - y) with backtracking on the
weighted squared output error, so the error never grows. Simulation mode advances one time step
per frame from the previous frame's solution, with feedback K, a velocity bound, target velocity
fed forward through B, and fixed or automatic sub-steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from . import pseudoinverse
from .limits import project, wrap_spheres
from .rotations import exp_map, log_map
from .scene import Evaluation, Scene


@dataclass(frozen=True)
class Settings:
    method: str = "dls"              # 'pinv', 'dls' or 'sdls'
    precision: float = 1e-6          # position (scene units) and rotation (radians) error to stop at
    max_iterations: int = 200        # animation mode, per frame
    max_step: float = 0.5            # largest coordinate change of one update (radians or units)
    damping_max: float = 0.5         # DLS
    damping_epsilon: float = 0.1     # DLS
    feedback: float = 20.0           # K, per second (simulation)
    max_velocity: float = 50.0       # largest coordinate speed (simulation)
    substeps: int = 0                # simulation: 0 chooses them from the joint speed
    substep_angle: float = 0.05      # automatic sub-steps keep each under this coordinate change
    max_substeps: int = 64
    fps: float = 24.0
    feedforward: bool = True         # simulation: use B Xu'
    converge_first_frame: bool = True  # simulation: solve the first frame in animation mode

    def __post_init__(self):
        if self.method not in pseudoinverse.METHODS:
            raise ValueError(f"unknown solver {self.method!r}; choose one of {pseudoinverse.METHODS}")
        for name in ("precision", "max_step", "feedback", "max_velocity", "fps", "substep_angle"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"setting {name} = {value} must be a positive number")
        if self.max_iterations < 1 or self.substeps < 0 or self.max_substeps < 1:
            raise ValueError("max_iterations and max_substeps must be >= 1, substeps >= 0")


@dataclass
class Result:
    """Solved coordinates and per-frame diagnostics. Errors are (frames, constraints)."""

    q: np.ndarray
    position_error: np.ndarray
    rotation_error: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    sigma_min: np.ndarray
    seconds: float
    frames: np.ndarray = field(default=None)

    def __post_init__(self):
        if self.frames is None:
            self.frames = np.arange(self.q.shape[0])


def _frames_of(array, F):
    return None if array is None else np.broadcast_to(array, (F,) + np.shape(array)[-3:])


def _cost(ev: Evaluation) -> np.ndarray:
    return np.sum(ev.weight * (ev.yd - ev.y) ** 2, axis=-1)


def _reached(scene: Scene, ev: Evaluation, precision: float) -> np.ndarray:
    """Frames where every position and rotation part is within precision (joint-value tasks are
    soft and do not count)."""
    ok = np.ones(ev.y.shape[0], dtype=bool)
    for k, c in enumerate(scene.constraints):
        if not hasattr(c, "Cf"):
            continue
        for err in (ev.position_error[:, k], ev.rotation_error[:, k]):
            ok &= np.isnan(err) | (err <= precision)
    return ok


def constrained_step(scene: Scene, q, A, rhs, weight, settings: Settings, max_step):
    """One weighted update dq (F, n) that respects the limits exactly, and the smallest singular
    value of the weighted A. `rhs` (F, M) is what A dq should equal; `max_step` (F,) bounds
    the largest entry of the free part of dq."""
    model = scene.model
    rows = np.sqrt(weight)[..., None]
    free = np.broadcast_to(model.weight > 0, q.shape).copy()
    locked_step = np.zeros_like(q)
    for _ in range(model.n_coordinates + 1):
        cols = model.weight * free
        Aw = rows * A * cols[:, None, :]
        b = rows[..., 0] * (rhs - np.einsum("fmn,fn->fm", A, locked_step))
        x, s_min = pseudoinverse.solve(Aw, b, settings.method, damping_max=settings.damping_max,
                                       epsilon=settings.damping_epsilon, gamma_max=settings.max_step)
        free_step = cols * x
        largest = np.max(np.abs(free_step), axis=-1)
        free_step *= np.where(largest > max_step, max_step / np.maximum(largest, 1e-300), 1.0)[:, None]
        dq = free_step + locked_step
        allowed = project(model, q + dq)
        hit = free & (np.abs(allowed - (q + dq)) > 0.0)
        if not hit.any():
            return dq, s_min
        locked_step[hit] = (allowed - q)[hit]
        free &= ~hit
    return project(model, q + dq) - q, s_min


def _check_inputs(scene: Scene, q, objects, bases):
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[1] != scene.model.n_coordinates:
        raise ValueError(f"coordinates must have shape (frames, {scene.model.n_coordinates}), got {q.shape}")
    bad = ~np.all(np.isfinite(q), axis=1)
    if bad.any():
        raise ValueError(f"starting coordinates are not finite in frame(s) {np.flatnonzero(bad)[:10].tolist()}")
    F = q.shape[0]
    if scene.n_objects:
        if objects is None:
            raise ValueError(f"the scene needs poses for {scene.n_objects} object(s)")
        objects = np.broadcast_to(np.asarray(objects, float), (F, scene.n_objects, 4, 4))
    bases = None if bases is None else np.broadcast_to(np.asarray(bases, float), (F, scene.model.n_armatures, 4, 4))
    return q, objects, bases


def _finite_frames(objects, bases, F):
    """Frames whose object and base poses are all finite: the others are reported, not solved."""
    ok = np.ones(F, dtype=bool)
    for poses in (objects, bases):
        if poses is not None:
            ok &= np.all(np.isfinite(poses), axis=(1, 2, 3))
    return ok


def solve_animation(scene: Scene, q0, objects=None, bases=None, settings: Settings = Settings()) -> Result:
    """Iterate every frame to convergence from its own start q0 (F, n); objects (F, K, 4, 4)."""
    start = time.perf_counter()
    q, objects, bases = _check_inputs(scene, q0, objects, bases)
    F, model = q.shape[0], scene.model
    q = wrap_spheres(model, project(model, q))
    C = len(scene.constraints)
    position_error, rotation_error = np.full((F, C), np.nan), np.full((F, C), np.nan)
    iterations, sigma_min = np.zeros(F, dtype=int), np.full(F, np.nan)
    converged = np.zeros(F, dtype=bool)

    def pick(array, idx):
        return None if array is None else array[idx]

    active = np.flatnonzero(_finite_frames(objects, bases, F))
    ev = scene.evaluate(q[active], pick(objects, active), pick(bases, active))
    cost = _cost(ev)
    while active.size:
        position_error[active], rotation_error[active] = ev.position_error, ev.rotation_error
        done = _reached(scene, ev, settings.precision)
        converged[active[done]] = True
        keep = np.flatnonzero(~done & (iterations[active] < settings.max_iterations))
        active, cost, ev = active[keep], cost[keep], _select(ev, keep)
        if not active.size:
            break
        dq, s_min = constrained_step(scene, q[active], ev.A, ev.yd - ev.y, ev.weight, settings,
                                     np.full(active.size, settings.max_step))
        sigma_min[active] = s_min
        iterations[active] += 1

        # Backtracking: halve the step until the weighted error falls. Frames where no step
        # lowers it have stopped at a local optimum; their last errors stand.
        accepted = np.zeros(active.size, dtype=bool)
        new_ev = None
        alpha = 1.0
        pending = np.arange(active.size)
        for _ in range(30):
            idx = active[pending]
            trial = wrap_spheres(model, project(model, q[idx] + alpha * dq[pending]))
            trial_ev = scene.evaluate(trial, pick(objects, idx), pick(bases, idx))
            trial_cost = _cost(trial_ev)
            better = trial_cost < cost[pending]
            q[idx[better]] = trial[better]
            cost[pending[better]] = trial_cost[better]
            new_ev = _scatter(new_ev, trial_ev, better, pending[better], active.size)
            accepted[pending[better]] = True
            pending = pending[~better]
            alpha *= 0.5
            if not pending.size:
                break
        keep = np.flatnonzero(accepted)
        active, cost, ev = active[keep], cost[keep], _select(new_ev, keep) if keep.size else None
    return Result(q=q, position_error=position_error, rotation_error=rotation_error, iterations=iterations,
                  converged=converged, sigma_min=sigma_min, seconds=time.perf_counter() - start)


_FIELDS = ("y", "yd", "weight", "position_error", "rotation_error", "A", "B")


def _scatter(into: Evaluation | None, part: Evaluation, rows: np.ndarray, where: np.ndarray, n: int) -> Evaluation:
    """Copy the `rows` (mask) of a partial evaluation to positions `where` of a batch of n frames."""
    if into is None:
        into = Evaluation(**{f: np.zeros((n,) + getattr(part, f).shape[1:]) for f in _FIELDS}, pose=None)
    for f in _FIELDS:
        getattr(into, f)[where] = getattr(part, f)[rows]
    return into


def _select(ev: Evaluation, idx: np.ndarray) -> Evaluation:
    return Evaluation(**{f: getattr(ev, f)[idx] for f in _FIELDS}, pose=None)


def twist_between(T0: np.ndarray, T1: np.ndarray, dt: float) -> np.ndarray:
    """World twist (..., 6) that carries pose T0 to T1 in time dt at constant velocity:
    linear velocity of the origin, then angular velocity log(R1 R0^T) / dt."""
    v = (T1[..., :3, 3] - T0[..., :3, 3]) / dt
    w = log_map(T1[..., :3, :3] @ np.swapaxes(T0[..., :3, :3], -1, -2)) / dt
    return np.concatenate([v, w], axis=-1)


def advance(T0: np.ndarray, twist: np.ndarray, h: float) -> np.ndarray:
    """Pose T0 moved for time h by a constant world twist."""
    T = T0.copy()
    T[..., :3, 3] += twist[..., :3] * h
    T[..., :3, :3] = exp_map(twist[..., 3:] * h) @ T0[..., :3, :3]
    return T


def solve_simulation(scene: Scene, q_start, objects=None, bases=None, settings: Settings = Settings()) -> Result:
    """Advance one time step (1 / fps) per frame from the previous frame's solution. q_start (n,)
    or (1, n); objects (F, K, 4, 4), bases (F, A, 4, 4) give the scene at every frame."""
    start = time.perf_counter()
    q0 = np.atleast_2d(np.asarray(q_start, dtype=float))
    F = 1 if objects is None and bases is None else (objects if objects is not None else bases).shape[0]
    _, objects, bases = _check_inputs(scene, np.repeat(q0, F, axis=0), objects, bases)
    model = scene.model
    C = len(scene.constraints)
    out_q = np.zeros((F, model.n_coordinates))
    position_error, rotation_error = np.full((F, C), np.nan), np.full((F, C), np.nan)
    iterations, sigma_min = np.zeros(F, dtype=int), np.full(F, np.nan)
    converged = np.zeros(F, dtype=bool)
    finite = _finite_frames(objects, bases, F)
    q = wrap_spheres(model, project(model, q0))

    def at(array, f):
        return None if array is None else array[f:f + 1]

    for f in range(F):
        if not finite[f]:
            out_q[f] = q[0]
            continue
        if f == 0 or not finite[f - 1]:
            if settings.converge_first_frame:
                first = solve_animation(scene, q, at(objects, f), at(bases, f), settings)
                q, iterations[f] = first.q, first.iterations[0]
        else:
            q, iterations[f], sigma_min[f] = _simulation_step(scene, q, objects, bases, f, settings)
        ev = scene.evaluate(q, at(objects, f), at(bases, f), jacobians=False)
        out_q[f] = q[0]
        position_error[f], rotation_error[f] = ev.position_error[0], ev.rotation_error[0]
        converged[f] = _reached(scene, ev, settings.precision)[0]
    return Result(q=out_q, position_error=position_error, rotation_error=rotation_error, iterations=iterations,
                  converged=converged, sigma_min=sigma_min, seconds=time.perf_counter() - start)


def _simulation_step(scene: Scene, q, objects, bases, f: int, settings: Settings):
    """Integrate q from frame f-1 to frame f; objects and bases move at constant velocity between
    their poses at the two frames. Returns q, the number of sub-steps and the last s_min."""
    dt = 1.0 / settings.fps
    twist_obj = twist_between(objects[f - 1:f], objects[f:f + 1], dt) if objects is not None else None
    twist_base = twist_between(bases[f - 1:f], bases[f:f + 1], dt) if bases is not None else None
    Xu_dot = np.zeros((1, scene.n_u))
    if twist_obj is not None:
        Xu_dot[:, :6 * scene.n_objects] = twist_obj.reshape(1, -1)
    if twist_base is not None:
        Xu_dot[:, 6 * scene.n_objects:] = twist_base.reshape(1, -1)

    def evaluate(elapsed):
        obj = None if objects is None else advance(objects[f - 1:f], twist_obj, elapsed)
        base = None if bases is None else advance(bases[f - 1:f], twist_base, elapsed)
        return scene.evaluate(q, obj, base)

    def step(ev, h):
        y_dot = settings.feedback * (ev.yd - ev.y)
        if settings.feedforward:
            y_dot = y_dot + np.einsum("fmu,fu->fm", ev.B, Xu_dot)
        return constrained_step(scene, q, ev.A, h * y_dot, ev.weight, settings,
                                np.array([settings.max_velocity * h]))

    ev = evaluate(0.0)
    n_sub = settings.substeps
    if n_sub == 0:  # automatic: keep each sub-step's largest coordinate change under substep_angle
        dq, _ = step(ev, dt)
        n_sub = int(np.clip(np.ceil(np.max(np.abs(dq)) / settings.substep_angle), 1, settings.max_substeps))
    h = dt / n_sub
    for k in range(n_sub):
        if k:
            ev = evaluate(k * h)
        dq, s_min = step(ev, h)
        q = wrap_spheres(scene.model, q + dq)
    return q, n_sub, s_min[0]

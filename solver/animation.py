"""Animation mode: every frame iterated to convergence from its own start, all frames together.

A frame first takes the update law's steps (update.py) with K h = 1, A dq = yd - y, halved
until they lower the weighted error sum_i w_i (yd_i - y_i)^2. When three steps in a row fail to
halve that error, the linear model has stopped describing the frame: its error is large where
the Jacobian barely moves it (an unreachable target seen from a nearly straight chain). (SDLS
bounds its steps by design: an SDLS step that delivered at least half of the fall the linear
model promised for it, a promise of at least a tenth of the error, does not count as failing.)
From then on the frame takes damped Gauss-Newton steps on the same system with the curvature the
linear model misses,

    (C (A^T W A + S) C + lambda I) x = C A^T W (yd - y),    dq = C x   (C: free, weighted columns)

S estimates sum_i w_i r_i Hess(y_i) from the change of A along each accepted step, by the
structured secant update of Dennis, Gay and Welsch (S s = (A_new - A_old)^T W r_new, sized down
first as in NL2SOL), kept as a low-rank product (curvature.py). Each iteration tries the step
with S and without it (plain Levenberg-Marquardt) and keeps the better; lambda (relative to the
largest diagonal of C A^T W A) shrinks by 3 after a success and grows by 4 after a failure. This
turns the linear crawl of Gauss-Newton toward an unreachable target's optimum into fast
convergence; a frame stops when its error energy no longer falls measurably (relative 1e-13).
Where every target is reachable, S vanishes at the solution and trying it only doubles the cost
of an iteration: Settings(curvature=False) takes the plain step alone, and Settings(steps=
"damped") takes damped steps from the first iteration (one solve and one evaluation each, where
an update-law step may halve itself several times).

A frame whose steps all vanish without reaching its targets sits on a stationary point, which
may be a saddle (a straight chain aimed directly away from its target): it is nudged off once and
iterates on; the second time it stops there, reported not converged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .runtime.blas_threads import one_blas_thread
from .animation_frame import solve_frame
from .animation_rules import LAMBDA_FIRST, LAMBDA_GIVE_UP, LAMBDA_START, NUDGE, SETTLED, SLOW_RUN, nudge_direction, \
    sigma_min, slow_step
from .curvature import LowRank, Store, dgw_update, secant_solver
from .inputs import check_inputs, complete_frames, finite_frames, frames_with_a_target
from .result import Result
from .scene import Evaluation, Scene
from .settings import Settings
from .update import cost, output_velocity, pseudoinverse_solver, reached, weighted_step

BLOCK_ENTRIES = 40_000   # frames x coordinates solved together (see solve_animation)
_FIELDS = ("y", "yd", "task_weight", "position_error", "rotation_error", "A")   # B: animation has no Xu'


@one_blas_thread()
def solve_animation(scene: Scene, q0, objects=None, bases=None, settings: Settings = Settings(),
                    values=None, deadline: float | None = None, groups=None) -> Result:
    """Solve every frame of q0 (F, n) to convergence; objects (F, K, 4, 4), bases (F, A, 4, 4),
    values (F, joint-value tasks) as in Scene.evaluate. Frames are independent; they are solved
    in blocks of up to BLOCK_ENTRIES / (number of coordinates) frames, beyond which a batch's
    arrays outgrow the caches (1000-frame blocks of a 6-bone chain, 440 of a 30-bone one).
    `deadline` (a time.perf_counter() value): no iteration starts that the last one's duration
    says would end past it; frames still open then are returned as they are, not converged.
    `groups` (F,) labels frames that race for the same answer (several starts of one query): once
    one of a group converges, the others of its block stop where they are, not converged.
    One frame (F = 1, as live preview solves each frame) takes the same iteration without the
    batch's bookkeeping (animation_frame.py): its answer is this loop's to rounding.
    Each frame starts from q0 as the scene's tasks turn it (Scene.turn_start: a pole turns its
    chain toward it first, as Blender's Standard IK does before it iterates)."""
    start = time.perf_counter()
    q, objects, bases, values = check_inputs(scene, q0, objects, bases, values)
    q = scene.turn_start(q, objects, bases)
    F, block = q.shape[0], max(1, BLOCK_ENTRIES // max(scene.n_coordinates, 1))
    groups = None if groups is None else np.asarray(groups)
    if F == 1:     # one frame, as live preview solves it: the same iteration without the batch's bookkeeping
        return solve_frame(scene, q, objects, bases, values, settings, start, deadline)
    if F <= block:
        return _solve_block(scene, q, objects, bases, values, settings, start, deadline, groups)
    part = lambda a, array: None if array is None else array[a:a + block]  # noqa: E731
    blocks = [_solve_block(scene, q[a:a + block], part(a, objects), part(a, bases), part(a, values), settings, start,
                           deadline, part(a, groups))
              for a in range(0, F, block)]
    joined = {k: np.concatenate([getattr(b, k) for b in blocks]) for k in
              ("q", "position_error", "rotation_error", "iterations", "converged", "sigma_min")}
    return Result(**joined, seconds=time.perf_counter() - start, names=list(scene.names))


def _solve_block(scene: Scene, q, objects, bases, values, settings: Settings, start: float,
                 deadline: float | None = None, groups=None) -> Result:
    batch = _Batch(scene, settings, scene.project(q), objects, bases, values)
    F, C = q.shape[0], len(scene.constraints)
    position_error, rotation_error = np.full((F, C), np.nan), np.full((F, C), np.nan)
    iterations, converged = np.zeros(F, dtype=int), np.zeros(F, dtype=bool)
    s_min = np.full(F, np.nan)

    active = np.flatnonzero(finite_frames(objects, bases, F))
    ev = batch.evaluate(batch.q[active], active)
    current = cost(ev)
    last_iteration = 0.0
    while active.size:
        began = time.perf_counter()
        position_error[active], rotation_error[active] = ev.position_error, ev.rotation_error
        hard_ok = np.ones(active.size, bool) if settings.fit else reached(scene, ev, settings.precision)
        done = hard_ok & (batch.last_step[active] <= settings.precision)
        converged[active[done]] = True
        going_on = ~done & (iterations[active] < settings.max_iterations) & (batch.lam[active] < LAMBDA_GIVE_UP)
        if groups is not None and done.any():
            going_on &= ~np.isin(groups[active], groups[active[done]])
        if not going_on.all():
            s_min[active[~going_on]] = sigma_min(scene, _select(ev, ~going_on))
            keep = np.flatnonzero(going_on)
            active, current, ev, hard_ok = active[keep], current[keep], _select(ev, keep), hard_ok[keep]
        if not active.size or (deadline is not None and time.perf_counter() + last_iteration > deadline):
            break
        iterations[active] += 1
        step = _Iteration(batch.q[active], current.copy(), ev, np.zeros(active.size))   # ev's arrays, shared
        secant = batch.lam[active] > 0
        batch.update_law_steps(active, np.flatnonzero(~secant), ev, current, step)
        batch.secant_steps(active, np.flatnonzero(secant), ev, current, step)
        if batch.watch_steps:
            batch.last_step[active] = step.proposed
        batch.q[active], current, ev = step.q, step.cost, step.ev
        batch.stationary(active, step.proposed < 1e-14, hard_ok, ev, current)
        last_iteration = time.perf_counter() - began

    if settings.fit:
        converged &= frames_with_a_target(objects, F)  # a fit converges on the targets it has, if any
    else:
        converged &= complete_frames(objects, F)      # a missing target: the frame is not done
    return Result(q=batch.q, position_error=position_error, rotation_error=rotation_error,
                  iterations=iterations, converged=converged, sigma_min=s_min,
                  seconds=time.perf_counter() - start, names=list(scene.names))


@dataclass
class _Iteration:
    """What one iteration makes of the active frames: coordinates, error, evaluation, and the
    largest entry of each frame's full (unhalved) step."""

    q: np.ndarray
    cost: np.ndarray
    ev: Evaluation
    proposed: np.ndarray

    def take(self, rows, better, q, cost, ev: Evaluation) -> None:
        """Rows rows[better] take these coordinates, errors and evaluation (of the frames of `rows`)."""
        if rows.size == self.cost.size and better.all():    # every frame: take the arrays themselves
            self.q, self.cost, self.ev = q, cost, ev
            return
        self.q[rows[better]], self.cost[rows[better]] = q[better], cost[better]
        _put(self.ev, ev, better, rows[better])


class _Batch:
    """The per-frame state of an animation solve (a workspace, as Pinocchio keeps Data apart
    from Model): coordinates, damping, curvature estimates and the counters that pick each
    frame's kind of step."""

    def __init__(self, scene: Scene, settings: Settings, q, objects, bases, values):
        self.scene, self.settings, self.q = scene, settings, q
        self.objects, self.bases, self.values = objects, bases, values
        F = q.shape[0]
        # 0: update-law steps; > 0: damped (secant) steps
        self.lam = np.full(F, LAMBDA_FIRST if settings.steps == "damped" else 0.0)
        self.curvature = Store(F, scene.n_coordinates)   # S = Z K Z^T per frame, on secant steps
        self.nudged = np.zeros(F, dtype=bool)
        self.slow_run = np.zeros(F, dtype=int)   # consecutive update-law steps that were slow
        # Soft tasks (joint values) have no error to reach, and a fit's targets are not meant to
        # be met: such solves (also) wait for the steps to settle below the precision.
        self.watch_steps = settings.fit or any(c.soft for c in scene.constraints)
        self.last_step = np.full(F, np.inf if self.watch_steps else 0.0)
        self.max_step = np.full(F, settings.max_step)               # weighted_step's bound, per frame
        self.pseudoinverse = pseudoinverse_solver(scene, settings, "animation")

    def evaluate(self, coords, frames):
        pick = lambda poses: None if poses is None else poses[frames]  # noqa: E731
        return self.scene.evaluate(coords, pick(self.objects), pick(self.bases), values=pick(self.values),
                                   jacobians="A")

    def _to_secant(self, frames):
        self.lam[frames] = LAMBDA_START
        self.curvature.reset(frames)

    def update_law_steps(self, active, rows, ev, current, out: _Iteration):
        """Update-law steps for the frames active[rows], halved until the error falls."""
        if not rows.size:
            return
        frames = active[rows]
        # Every active frame steps here (one frame alone, as live preview solves it): the system is
        # read in place. Otherwise it is read before stepping, as a step's evaluation may be
        # written into ev's arrays (`_put`); so is it when the first full step does not help all.
        every = rows.size == out.cost.size
        residual = output_velocity(ev, 1.0)
        if not every:
            residual = residual[rows]
        weight, A = (ev.task_weight, ev.A) if every else (ev.task_weight[rows], ev.A[rows])
        dq, _ = weighted_step(self.scene, self.q[frames], A, residual, weight, self.max_step[:rows.size],
                              self.pseudoinverse)
        out.proposed[rows] = np.abs(dq).max(axis=1, initial=0.0)
        pending, alpha = np.arange(rows.size), 1.0
        taken = np.zeros(rows.size)
        for _ in range(30):
            trial = self.scene.project(self.q[frames[pending]] + alpha * dq[pending])
            trial_ev = self.evaluate(trial, frames[pending])
            trial_cost = cost(trial_ev)
            better = trial_cost < current[rows[pending]]
            if every and pending.size == rows.size and better.all():    # every frame takes its full step
                out.q, out.cost, out.ev = trial, trial_cost, trial_ev
                taken[:] = alpha
                break
            if every and weight is ev.task_weight:
                weight, A = weight.copy(), A.copy()
            done = rows[pending[better]]
            out.q[done], out.cost[done] = trial[better], trial_cost[better]
            _put(out.ev, trial_ev, better, done)
            taken[pending[better]] = alpha
            pending = pending[~better]
            alpha *= 0.5
            if not pending.size:
                break
        # Frames where the linear model falls short (no step helps, or the error energy does not
        # even halve, several times in a row) continue on secant steps. SDLS bounds every step
        # on purpose: its step is slow but sound when it promised a real fall and delivered at
        # least half of it (a crawl toward an unreachable target's optimum promises next to nothing).
        def promised():      # the fall of the error energy the linear model promised for the step taken
            after = residual - taken[:, None] * np.einsum("fmn,fn->fm", A, dq)
            return current[rows] - (weight * after**2).sum(axis=-1)

        slow = slow_step(self.settings.method, current[rows], out.cost[rows], promised)
        self.slow_run[frames] = np.where(slow, self.slow_run[frames] + 1, 0)
        if slow.any():
            self._to_secant(frames[self.slow_run[frames] >= SLOW_RUN])

    def secant_steps(self, active, rows, ev, current, out: _Iteration):
        """Damped steps with and without the curvature estimate S; the better one counts (without
        `settings.curvature`, only the one without: plain Levenberg-Marquardt)."""
        if not rows.size:
            return
        frames = active[rows]
        plain = self._secant_trial(frames, rows, ev, LowRank.zero(rows.size, self.scene.n_coordinates))
        if self.settings.curvature:
            S = self.curvature.get(frames)
            dq, trial, trial_ev, trial_cost = self._secant_trial(frames, rows, ev, S)
            use_plain = plain[3] < trial_cost
            dq, trial = np.where(use_plain[:, None], plain[0], dq), np.where(use_plain[:, None], plain[1], trial)
            trial_cost = np.where(use_plain, plain[3], trial_cost)
            _put(trial_ev, plain[2], use_plain, np.flatnonzero(use_plain))
        else:
            dq, trial, trial_ev, trial_cost = plain
        out.proposed[rows] = np.abs(dq).max(axis=1, initial=0.0)

        now = current[rows]
        better = trial_cost < now
        if self.settings.curvature and better.any():
            old, new = _select(ev, rows[better]), _select(trial_ev, better)
            learned = dgw_update(LowRank(S.Z[better], S.K[better]), trial[better] - self.q[frames[better]],
                                 old.A, old.y - old.yd, new.A, new.y - new.yd, old.task_weight, new.task_weight)
            self.curvature.put(frames[better], learned)
        lam = self.lam[frames]
        self.lam[frames] = np.where(better, np.maximum(lam / 3.0, 1e-12), lam * 4.0)
        # The error no longer falls measurably: this is the optimum the frame can reach, where a
        # fit has converged and an IK solve stops short of its targets. The error is flat there,
        # so an IK solve also waits for its step to fall below the precision, which places the
        # optimum itself (a stalled frame stops anyway once its damping has grown to give up).
        settled = better & (now - trial_cost <= SETTLED * now)
        if self.settings.fit:
            out.proposed[rows[settled]] = 0.0
        else:
            settled &= out.proposed[rows] <= self.settings.precision
            self.lam[frames[settled]] = LAMBDA_GIVE_UP
        out.take(rows, better, trial, trial_cost, trial_ev)

    def _secant_trial(self, frames, rows, ev, S: LowRank):
        """The damped step with curvature S for frames active[rows]: dq, the new q, its evaluation, its cost."""
        dq, _ = weighted_step(self.scene, self.q[frames], ev.A[rows], output_velocity(ev, 1.0)[rows],
                              ev.task_weight[rows],
                              np.full(rows.size, self.settings.max_step), secant_solver(S, self.lam[frames]))
        trial = self.scene.project(self.q[frames] + dq)
        trial_ev = self.evaluate(trial, frames)
        return dq, trial, trial_ev, cost(trial_ev)

    def stationary(self, active, stuck, hard_ok, ev, current):
        """Frames whose full step vanished: done where the targets are reached; elsewhere they may
        sit on a saddle, so they are nudged off once, and stop the second time."""
        if not stuck.any():
            return
        self.last_step[active[stuck & hard_ok]] = 0.0
        frames = active[stuck & ~hard_ok]
        self.lam[frames[self.nudged[frames]]] = LAMBDA_GIVE_UP
        first = frames[~self.nudged[frames]]
        if not first.size:
            return
        self.nudged[first] = True
        n = self.scene.n_coordinates
        self.q[first] = self.scene.project(self.q[first] + NUDGE * self.scene.joint_weight * nudge_direction(n))
        rows = np.flatnonzero(np.isin(active, first))
        nudged_ev = self.evaluate(self.q[active[rows]], active[rows])
        _put(ev, nudged_ev, np.ones(rows.size, bool), rows)
        current[rows] = cost(nudged_ev)
        self._to_secant(first)


def _select(ev: Evaluation, idx) -> Evaluation:
    return Evaluation(**{f: getattr(ev, f)[idx] for f in _FIELDS}, pose=None)


def _put(into: Evaluation, part: Evaluation, rows_of_part, rows: np.ndarray) -> None:
    """Copy the selected rows of a partial evaluation into rows `rows` of a batch evaluation."""
    for f in _FIELDS:
        getattr(into, f)[rows] = getattr(part, f)[rows_of_part]

"""Animation mode for one frame (F = 1), as live preview solves it, frame by frame.

The iteration of animation.py's batched loop (its docstring explains the method), decision for
decision: update-law steps halved until the weighted error falls; after SLOW_RUN slow steps in a
row, damped steps with and without the curvature estimate; a frame done when its targets are
reached (and, with soft tasks or a fit, its step is below the precision), given up when its
damping has grown past LAMBDA_GIVE_UP or max_iterations is spent; a stationary point off its
targets nudged once, then given up; no iteration started that the last one says would end past
the deadline. With a single frame every one of these choices is a Python `if` where the batch
needs masks, index arrays and scatters over frames: numpy's cost per call, not the arithmetic,
is what one frame pays. The update law's step is the batch's own (update.weighted_step, with
pseudoinverse.solve or curvature's damped solve), on the frame's arrays. The constants and the
slow-step rule are animation_rules.py's, the damped system and the curvature updates
curvature.py's, for both loops. The answers are the batched loop's to rounding:
tests/engine/test_animation_frame.py solves random frames both ways and compares iterations,
flags and coordinates.
"""

from __future__ import annotations

import time

import numpy as np

from .animation_rules import (LAMBDA_FIRST, LAMBDA_GIVE_UP, LAMBDA_START, NUDGE, SETTLED, SLOW_RUN, nudge_direction,
                              sigma_min, slow_step)
from .curvature import LowRank, Store, dgw_update, secant_solver
from .inputs import complete_frames, finite_frames, frames_with_a_target
from .result import Result
from .scene import Evaluation, Scene
from .settings import Settings
from .update import pseudoinverse_solver, weighted_step

_ALL = np.array([0])     # the one frame of a curvature Store (taken as the batch takes its frames)


def solve_frame(scene: Scene, q, objects, bases, values, settings: Settings, start: float,
                deadline: float | None = None) -> Result:
    """solve_animation for one frame: q (1, n) and the other inputs checked by check_inputs;
    `start` the perf_counter() value the solve began at."""
    frame = _Frame(scene, settings, scene.project(q), objects, bases, values)
    position_error = rotation_error = np.full((1, len(scene.constraints)), np.nan)
    iterations, converged, s_min = 0, False, np.nan
    if finite_frames(objects, bases, 1)[0]:
        ev = frame.evaluate(frame.q)
        current = _cost(ev)
        last_iteration = 0.0
        while True:
            began = time.perf_counter()
            position_error, rotation_error = ev.position_error, ev.rotation_error
            hard_ok = settings.fit or _reached(scene, ev, settings.precision)
            converged = hard_ok and frame.last_step <= settings.precision
            if converged or iterations >= settings.max_iterations or frame.lam >= LAMBDA_GIVE_UP:
                s_min = sigma_min(scene, ev)[0]
                break
            if deadline is not None and time.perf_counter() + last_iteration > deadline:
                break
            iterations += 1
            step = frame.secant_step if frame.lam > 0 else frame.update_law_step
            proposed, frame.q, current, ev = step(ev, current)
            if frame.watch_steps:
                frame.last_step = proposed
            if proposed < 1e-14:
                ev, current = frame.stationary(hard_ok, ev, current)
            last_iteration = time.perf_counter() - began

    if settings.fit:
        converged &= frames_with_a_target(objects, 1)[0]   # a fit converges on the targets it has, if any
    else:
        converged &= complete_frames(objects, 1)[0]       # a missing target: the frame is not done
    return Result(q=frame.q, position_error=position_error, rotation_error=rotation_error,
                  iterations=np.array([iterations]), converged=np.array([bool(converged)]),
                  sigma_min=np.array([s_min]), seconds=time.perf_counter() - start, names=list(scene.names))


class _Frame:
    """The state of one frame's solve: coordinates, damping (0 while it takes update-law steps),
    curvature estimate and the counters that pick its kind of step (animation._Batch, for one)."""

    def __init__(self, scene: Scene, settings: Settings, q, objects, bases, values):
        self.scene, self.settings, self.q = scene, settings, q
        self.objects, self.bases, self.values = objects, bases, values
        self.lam = LAMBDA_FIRST if settings.steps == "damped" else 0.0
        self.curvature = Store(1, scene.n_coordinates)
        self.nudged, self.slow_run = False, 0
        # Soft tasks and fits also wait for the step to settle below the precision (animation._Batch).
        self.watch_steps = settings.fit or any(c.soft for c in scene.constraints)
        self.last_step = np.inf if self.watch_steps else 0.0
        self.max_step = np.array(settings.max_step)        # weighted_step's bound, without a frame axis
        self.pseudoinverse = pseudoinverse_solver(scene, settings, "animation")

    def evaluate(self, q) -> Evaluation:
        return self.scene.evaluate(q, self.objects, self.bases, values=self.values, jacobians="A", one_frame=True)

    def _to_secant(self) -> None:
        self.lam = LAMBDA_START
        self.curvature.reset(_ALL)

    def update_law_step(self, ev: Evaluation, current):
        """The update law's step, halved until the error falls: (largest entry of the full step,
        q, error, evaluation) after it."""
        residual, A, weight = ev.yd[0] - ev.y[0], ev.A[0], ev.task_weight[0]
        dq, _ = weighted_step(self.scene, self.q[0], A, residual, weight, self.max_step, self.pseudoinverse)
        proposed = float(np.maximum.reduce(np.abs(dq), initial=0.0))
        out, taken, alpha = (self.q, current, ev), 0.0, 1.0
        for _ in range(30):
            trial = self.scene.project(self.q + alpha * dq)
            trial_ev = self.evaluate(trial)
            trial_cost = _cost(trial_ev)
            if trial_cost < current:
                out, taken = (trial, trial_cost, trial_ev), alpha
                break
            alpha *= 0.5
        def promised():      # the fall of the error energy the linear model promised for the step taken
            after = residual - taken * (A @ dq)
            return current - float(np.add.reduce(weight * (after * after)))

        if slow_step(self.settings.method, current, out[1], promised):
            self.slow_run += 1
            if self.slow_run >= SLOW_RUN:
                self._to_secant()
        else:
            self.slow_run = 0
        return (proposed,) + out

    def secant_step(self, ev: Evaluation, current):
        """The damped step with and without the curvature estimate, the better one taken if it
        lowers the error: (largest entry of the step, q, error, evaluation) after it."""
        curvature = self.settings.curvature
        plain = self._secant_trial(ev, LowRank.zero(1, self.scene.n_coordinates))
        if curvature:
            S = self.curvature.get(_ALL)
            dq, trial, trial_ev, trial_cost = self._secant_trial(ev, S)
            if plain[3] < trial_cost:
                dq, trial, trial_ev, trial_cost = plain
        else:
            dq, trial, trial_ev, trial_cost = plain
        proposed = float(np.maximum.reduce(np.abs(dq[0]), initial=0.0))
        better = trial_cost < current
        if curvature and better:
            self.curvature.put(_ALL, dgw_update(S, trial - self.q, ev.A, ev.y - ev.yd, trial_ev.A,
                                                trial_ev.y - trial_ev.yd, ev.task_weight, trial_ev.task_weight))
        self.lam = max(self.lam / 3.0, 1e-12) if better else self.lam * 4.0
        # Settled: the error no longer falls measurably (animation._Batch.secant_steps).
        if better and current - trial_cost <= SETTLED * current:
            if self.settings.fit:
                proposed = 0.0
            elif proposed <= self.settings.precision:
                self.lam = LAMBDA_GIVE_UP
        return (proposed, trial, trial_cost, trial_ev) if better else (proposed, self.q, current, ev)

    def _secant_trial(self, ev: Evaluation, S: LowRank):
        """The damped step with curvature S: dq (1, n), the new q, its evaluation, its error."""
        dq, _ = weighted_step(self.scene, self.q, ev.A, ev.yd - ev.y, ev.task_weight, self.max_step[None],
                              secant_solver(S, np.array([self.lam])))
        trial = self.scene.project(self.q + dq)
        trial_ev = self.evaluate(trial)
        return dq, trial, trial_ev, _cost(trial_ev)

    def stationary(self, hard_ok: bool, ev: Evaluation, current):
        """The full step vanished: done where the targets are reached; elsewhere the frame may sit
        on a saddle, so it is nudged off once (and turns to secant steps), and stops the second
        time. Returns the evaluation and error it goes on from."""
        if hard_ok:
            self.last_step = 0.0
        elif self.nudged:
            self.lam = LAMBDA_GIVE_UP
        else:
            self.nudged = True
            n = self.scene.n_coordinates
            self.q = self.scene.project(self.q + NUDGE * self.scene.joint_weight * nudge_direction(n))
            ev = self.evaluate(self.q)
            current = _cost(ev)
            self._to_secant()
        return ev, current


def _cost(ev: Evaluation) -> float:
    """update.cost of the one frame: sum_i w_i (yd_i - y_i)^2."""
    r = ev.yd[0] - ev.y[0]
    return float(np.add.reduce(ev.task_weight[0] * (r * r)))


def _reached(scene: Scene, ev: Evaluation, precision: float) -> bool:
    """update.reached for the one frame: every hard constraint of nonzero weight within precision."""
    if not scene.hard_tasks.size:
        return True
    hard = scene.hard_task_index
    worst = np.fmax(ev.position_error[0, hard], ev.rotation_error[0, hard])   # NaN: no such part
    if not np.fmax.reduce(worst) > precision:
        return True
    ignored = np.maximum.reduceat(ev.task_weight[0], scene.rows[:-1])[hard] == 0
    return bool((ignored | ~(worst > precision)).all())

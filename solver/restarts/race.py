"""One query, many starts racing in one batch from the first iteration (solver.restarts).

`solve_with_restarts` solves a start and restarts a query only when it fails; one query at a
time, that leaves a hard pose no budget for a second start. Here R starts of the same query move
together, one iteration of all of them per pass (an iteration of R starts costs far less than R
iterations of one: most of its cost is numpy's calls, not arithmetic):

    slot 0 starts at q0 (the middle of the limits when None), the other slots at uniform random
    coordinates within the limits (as starts.random_coordinates draws them; frozen coordinates
    as q0);
    every slot takes the animation mode's plain Levenberg-Marquardt steps (Settings(steps=
    "damped", curvature=False): damping lambda from 0.1 (0.01 for a random start), relative to
    the largest diagonal of A^T W A, divided by 3 on success and multiplied by 4 on failure;
    joint limits locked as update.weighted_step locks them, for a random start one round of
    locking and then clamped; a step at most settings.max_step per coordinate), up to
    settings.max_iterations for slot 0's first start and `restart_iterations` for every other;
    a slot whose start has run its iterations, or whose damping gave up, starts again from a new
    random draw in the same pass (at most `max_starts` starts in all);
    the first pass in which a slot reaches the targets (position and rotation error within
    settings.precision) ends the race: that slot's answer wins (the smallest squared error
    among several that reach them in the same pass); the others stop.

Without a winner by the deadline (the call's start + `budget` seconds; no pass begins that the
previous one's duration, with a margin, says would end past it) the best answer seen is returned,
not converged.
Everything a call does counts toward its time: `charged` is the call's wall time. Python's cyclic
garbage collector is held off during a call (`_collector_held`): its collections run between calls.

Slot 0's first start takes the iterations solve_animation takes from q0 with the same settings
(the same step, acceptance and damping rules; sums rounded in another order, so to within
rounding, which now and then tips a step's acceptance the other way). For the scenes PoseChain evaluates (one pose
task on a serial revolute chain, its target a rigid transform) all slots are evaluated together
in one PoseChain call with preallocated arrays; other scenes race through solve_with_restarts
(rounds of solve_animation with racing groups).
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from dataclasses import replace

import numpy as np

from ..inputs import check_inputs
from ..runtime.blas_threads import one_blas_thread
from ..scene import Scene
from ..settings import Settings
from .chain import PoseChain, pose_chain, rigid
from .solve import RestartResult, solve_with_restarts
from .starts import middle_of_limits

_LAMBDA_FIRST = 0.1        # damping of the first start's first step (as solve_animation's damped steps)
# ... and of a random start's: a random start far from the target converges, when it does, in fewer
# iterations with less damping at first (chosen on 2,000 random Panda poses other than the benchmark's:
# 48 starts reach 99.2 % of them within 8 passes where 0.1 reaches 91 %; BENCHMARKS.md).
_LAMBDA_RANDOM = 0.01
_LAMBDA_GIVE_UP = 1e12
_SETTLED = 1e-13
_NUDGE = 1e-3
# Racing starts and iterations per random start, chosen on 10,000 random Panda poses other than
# the benchmark's (BENCHMARKS.md, "What the numbers say"): more starts solve more poses per pass
# but make each pass dearer.
STARTS, RESTART_ITERATIONS = 48, 32
# A random start's step that hits a limit is solved again once with the coordinates that hit
# locked on it; where that step hits another, it is clamped onto the limits (_Race._step; weighted_step
# would lock and solve again until none hits: a dearer pass for the same solve rate per pass,
# BENCHMARKS.md; no second solve at all, only the clamp, solves fewer).
# No pass begins unless _PASS_MARGIN times a pass's duration, and _FINISH seconds to build the
# result, still fit before the deadline (a pass varies a little with the slots that hit limits).
# A pass's duration is the shorter of the last two: a pause outside the race (the garbage
# collector, the system) that lands in one pass would otherwise end the race long before the
# deadline.
_PASS_MARGIN, _FINISH = 1.2, 5e-5


# The default settings: the Panda benchmark's (1e-5 m and rad; steps up to 1 rad, which reach a
# reachable target in fewer iterations than 0.5; the first start capped at 50 iterations).
RACE_SETTINGS = Settings(precision=1e-5, max_step=1.0, max_iterations=50, steps="damped", curvature=False)


class _collector_held(contextlib.ContextDecorator):
    """Python's cyclic garbage collector held off inside the block or the decorated call (nested
    and from several threads alike), then as it was. A collection that the process's other
    objects trigger while a query runs (an older generation's, over every object of every library
    loaded) would otherwise land in the query's budget; it runs at the next allocation after the
    call instead."""

    _lock = threading.Lock()
    _holds = 0
    _was_enabled = False

    def __enter__(self):
        cls = type(self)
        with cls._lock:
            if cls._holds == 0:
                cls._was_enabled = gc.isenabled()
                gc.disable()
            cls._holds += 1
        return self

    def __exit__(self, *exc):
        cls = type(self)
        with cls._lock:
            cls._holds -= 1
            if cls._holds == 0 and cls._was_enabled:
                gc.enable()
        return False


@one_blas_thread()
@_collector_held()
def solve_racing(scene: Scene, objects, settings: Settings = RACE_SETTINGS,
                 rng=None, budget: float = 0.005, starts: int = STARTS, q0=None,
                 restart_iterations: int = RESTART_ITERATIONS, max_starts: int | None = None,
                 max_passes: int | None = None) -> RestartResult:
    """Race `starts` starts of one query (objects (1, K, 4, 4) or (K, 4, 4)) as above, within
    `budget` seconds (inf: no time limit, then `max_starts` or `max_passes` must bound the work;
    `max_passes` caps the passes, a budget counted in iterations that does not depend on the
    clock). `settings` are taken with steps="damped", curvature=False whatever they say. rng: a
    seed or numpy Generator for the random starts; with the same seed, a query that converges
    within its budget always gets the same answer. Returns a RestartResult of one frame:
    `iterations` summed over all starts, `passes`, `restarts` the random starts drawn,
    `first_converged` whether the winner is slot 0's first start, `charged` the call's wall
    time (also `seconds`); sigma_min is not computed (NaN)."""
    t0 = time.perf_counter()
    if not (budget >= 0):
        raise ValueError(f"budget {budget} must be a number of seconds >= 0")
    if starts < 1 or restart_iterations < 1 or (max_starts is not None and max_starts < 1):
        raise ValueError("starts, restart_iterations and max_starts must be >= 1")
    if not np.isfinite(budget) and max_starts is None and max_passes is None:
        raise ValueError("an unlimited budget needs max_starts or max_passes")
    given_start = q0 is not None       # the middle of the limits is finite: only a given start needs checking
    objects = np.asarray(objects, dtype=float)
    if objects.ndim == 3:
        objects = objects[None]
    if objects.ndim != 4 or objects.shape[0] != 1:
        raise ValueError(f"solve_racing solves one query: objects (1, K, 4, 4), got {objects.shape}; "
                         "solve_with_restarts solves many at once")
    q0 = middle_of_limits(scene)[None] if q0 is None else q0
    if given_start or not (scene.n_objects and objects.shape[1:] == (scene.n_objects, 4, 4)):
        q0, objects, _, _ = check_inputs(scene, np.reshape(q0, (1, -1)), objects, None)
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    chain = pose_chain(scene)
    complete = bool(np.isfinite(objects).all())            # inputs.complete_frames of the one query
    target = chain.target(objects[0]) if chain is not None and complete else None
    if target is None or not rigid(target):
        limit = max_starts - 1 if max_starts is not None else max_passes   # passes: bounds the starts there
        return solve_with_restarts(scene, objects, _damped(settings), rng, budget, q0=q0, min_batch=starts,
                                   restart_iterations=restart_iterations, max_restarts=limit)
    race = _race(chain, starts)
    try:
        race.reset(target, q0[0], _damped(settings), rng, restart_iterations,
                   np.inf if max_starts is None else max_starts)
        return race.run(t0, t0 + budget, np.inf if max_passes is None else max_passes)
    finally:
        race.lock.release()


def _race(chain: PoseChain, R: int) -> "_Race":
    """A race of R slots on this chain, its lock held: the one kept for the chain, or a new one
    while that is in use (by another thread)."""
    race = chain.races.get(R)
    if race is None:
        race = chain.races[R] = _Race(chain, R)
    if not race.lock.acquire(blocking=False):
        race = _Race(chain, R)
        race.lock.acquire()
    return race


def _damped(settings: Settings) -> Settings:
    if settings.steps == "damped" and not settings.curvature:
        return settings
    return replace(settings, steps="damped", curvature=False)


class _Race:
    """The state of one race: per slot its current start's coordinates, evaluation, damping and
    iterations, and the trial point the next evaluation measures. Made once per chain and
    number of slots (`_race`) and reset for each query."""

    def __init__(self, chain: PoseChain, R: int):
        n = chain.n
        self.chain, self.R, self.n = chain, R, n
        self.lock = threading.Lock()              # held while a query uses these arrays
        self.ws, self.step_ws = chain.workspace(R), _StepWorkspace(R, n)
        self.q = np.empty((R, n), order="F")      # each slot's accepted coordinates (_slots_last)
        self.trial = np.empty((R, n), order="F")  # what the next evaluation measures
        self.y = np.zeros((R, 6))
        # A, or with unit task weights W^1/2 A itself: the step's [W^1/2 A, W^1/2 (yd - y)] block
        self.unit_task_weights = bool(np.all(chain.weight == 1.0))
        self.A = self.step_ws.Awb[:, :, :n] if self.unit_task_weights else np.zeros((R, 6, n))
        self.cost = np.empty(R)                   # inf: the slot's trial is a new start, taken as it is
        self.errors = np.empty((R, 2))            # position and rotation error
        self.lam = np.empty(R)
        self.iterations = np.empty(R, dtype=int)  # of each slot's current start
        self.cap = np.empty(R, dtype=int)
        self.nudged = np.empty(R, dtype=bool)
        self.forced = np.empty(R, dtype=bool)     # the trial is taken whatever its cost (a new start, a nudge)
        self.first = np.empty(R, dtype=bool)      # the slot still runs slot 0's first start
        self.active = np.empty(R, dtype=bool)     # slots with a start (max_starts may leave some idle)
        self.step_stuck = np.empty(R, dtype=bool)
        self.proposed = np.empty(R)
        direction = np.sin(np.arange(1, n + 1) * 2.399963)     # as solve_animation nudges
        self.nudge_direction = direction / max(np.linalg.norm(direction), 1e-300)
        self.movable = chain.joint_weight > 0
        self.all_free = bool(np.all(self.movable))
        self.finite_limits = bool(np.all(np.isfinite(chain.lower)) and np.all(np.isfinite(chain.upper)))
        if self.finite_limits:                    # where random starts are drawn, lower + width u
            self.draw_lower, self.draw_width = chain.lower, chain.upper - chain.lower
        self.unit_weights = bool(np.all(chain.joint_weight == 1.0))

    def reset(self, target, q0, settings: Settings, rng, restart_iterations: int, max_starts) -> "_Race":
        chain, R = self.chain, self.R
        q0 = np.minimum(np.maximum(q0, chain.lower), chain.upper)      # projected, as solve_animation starts
        chain.aim(target, self.ws)
        self.q0, self.settings, self.rng = q0, settings, rng
        self.restart_iterations, self.max_starts = restart_iterations, max_starts
        if not self.finite_limits:
            self.draw_lower = np.where(np.isfinite(chain.lower), chain.lower, q0 - np.pi)
            self.draw_width = np.where(np.isfinite(chain.upper), chain.upper, q0 + np.pi) - self.draw_lower
        self.cost.fill(np.inf)
        self.errors.fill(np.inf)
        self.lam.fill(_LAMBDA_RANDOM)
        self.lam[0] = _LAMBDA_FIRST
        self.iterations.fill(0)
        self.cap.fill(restart_iterations)
        self.cap[0] = settings.max_iterations
        self.nudged.fill(False)
        self.forced.fill(True)
        self.first.fill(False)
        self.first[0] = True
        self.step_stuck.fill(False)
        self.proposed.fill(0.0)
        self.total_iterations = self.passes = 0
        self.best_q, self.best_score, self.best_errors = q0.copy(), np.inf, (np.nan, np.nan)
        used = int(min(R, max_starts))
        self.started = used - 1                   # starts drawn at random
        self.active.fill(False)
        self.active[:used] = True
        self.trial[:] = q0
        if used > 1:
            self.trial[1:used] = self._draws(used - 1)
        return self

    def _draws(self, m: int) -> np.ndarray:
        """m uniform random coordinate vectors within the limits (frozen coordinates as q0): the
        numbers Generator.uniform(lower, upper) draws, lower + (upper - lower) u."""
        q = self.rng.random((m, self.n))
        q *= self.draw_width
        q += self.draw_lower
        return q if self.all_free else np.where(self.chain.joint_weight > 0, q, self.q0)

    def run(self, t0: float, deadline: float, max_passes) -> RestartResult:
        chain, ws, precision = self.chain, self.ws, self.settings.precision
        winner, last_pass, pass_before = -1, 0.0, np.inf
        while True:
            began = time.perf_counter()
            chain.evaluate(self.trial, ws)
            self._accept()
            worst = np.maximum(self.errors[:, 0], self.errors[:, 1])   # inf on idle slots
            if worst.min() <= precision:
                reached = worst <= precision
                winner = int(np.argmin(np.where(reached, (self.errors * self.errors).sum(axis=1), np.inf)))
                break
            ended = (self.iterations >= self.cap) | (self.lam >= _LAMBDA_GIVE_UP)
            ended &= self.active
            if ended.any() and not self._restart(ended):
                break
            expected = _PASS_MARGIN * min(last_pass, pass_before) + _FINISH
            if self.passes >= max_passes or time.perf_counter() + expected > deadline:
                break
            self.passes += 1
            self._step(self.active & ~self.forced)
            last_pass, pass_before = time.perf_counter() - began, last_pass
        return self._result(winner, t0)

    def _accept(self) -> None:
        """Each slot takes its trial where the error fell (or the trial is forced), and its damping
        moves as solve_animation's damped steps move it."""
        ws, lam = self.ws, self.lam
        stepped = self.active & ~self.forced
        better = ws.cost < self.cost
        np.copyto(lam, np.maximum(np.where(better, lam / 3.0, lam * 4.0), 1e-12), where=stepped)
        close = self.proposed <= self.settings.precision
        if close.any():
            settled = close & stepped & better & (self.cost - ws.cost <= _SETTLED * self.cost)
            lam[settled] = _LAMBDA_GIVE_UP
        take = better | self.forced
        take &= self.active
        column = take[:, None]
        np.copyto(self.q, self.trial, where=column)
        np.copyto(self.y, ws.y, where=column)
        np.copyto(self.A, ws.A, where=column[:, :, None])
        np.copyto(self.cost, ws.cost, where=take)
        np.copyto(self.errors, ws.errors, where=column)
        self.forced.fill(False)
        # A full step that vanished short of the targets: nudge the start off once (its next
        # evaluation is taken as it is, and it continues with lambda 1e-3), give it up the second time.
        stuck = stepped & self.step_stuck
        if stuck.any():
            lam[stuck & self.nudged] = _LAMBDA_GIVE_UP
            first = stuck & ~self.nudged
            if first.any():
                self.nudged[first] = True
                self.trial[first] = np.clip(self.q[first] + _NUDGE * self.chain.joint_weight * self.nudge_direction,
                                            self.chain.lower, self.chain.upper)
                lam[first] = 1e-3
                self.forced[first] = True

    def _remember(self, slots: np.ndarray) -> None:
        """The best answer so far: the smallest squared error among these slots' and the last best."""
        score = np.where(slots, (self.errors * self.errors).sum(axis=1), np.inf)
        k = int(np.argmin(score))
        if score[k] < self.best_score:
            self.best_q, self.best_score = self.q[k].copy(), score[k]
            self.best_errors = tuple(self.errors[k])

    def _restart(self, ended: np.ndarray) -> bool:
        """Slots `ended` keep their answer if it is the best so far and start again at random, as
        far as max_starts allows; False when no slot has a start left."""
        self._remember(ended & self.active)
        slots = np.flatnonzero(ended & self.active)
        room = self.max_starts - (self.started + 1)
        if room < slots.size:
            self.active[slots[max(int(room), 0):]] = False
            slots = slots[:max(int(room), 0)]
        if slots.size:
            self.trial[slots] = self._draws(slots.size)
            self.started += slots.size
            self.cost[slots] = np.inf
            self.lam[slots] = _LAMBDA_RANDOM
            self.iterations[slots] = 0
            self.cap[slots] = self.restart_iterations
            self.nudged[slots] = False
            self.first[slots] = False
            self.forced[slots] = True
        return bool(self.active.any())

    def _step(self, stepping: np.ndarray) -> None:
        """The damped step (update.weighted_step with curvature.solve_damped's system, no
        curvature) of every slot, from H = A^T W A and g = A^T W (yd - y) once per step: with C
        the weighted free columns, (C H C + lambda s I) x = C (g - H dl), s the largest diagonal
        of C H C, dl the step of the coordinates locked on a limit so far; trial points for the
        slots `stepping`. Each coordinate whose step hit a limit is locked on it (its dl) and the
        others solved again, all slots at once (a slot with no hit solves its first system again
        and gets its first step); a random start stops there, its step clamped onto the limits
        where it hits another, while slot 0's first start goes on locking until none hits, as
        weighted_step does."""
        chain, ws, n = self.chain, self.step_ws, self.n
        if not self.unit_task_weights:
            np.multiply(self.A, chain.sqrt_weight[:, None], out=ws.Awb[:, :, :n])     # W^1/2 A
        np.multiply(self.y, chain.minus_sqrt_weight, out=ws.Awb[:, :, n])       # W^1/2 (yd - y)
        np.matmul(ws.Awb[:, :, :n].swapaxes(-1, -2), ws.Awb, out=ws.Hg)           # [A^T W A, A^T W (yd - y)]
        np.copyto(ws.H0, ws.Hg[:, :, :n])
        free = ws.free
        np.logical_and(self.movable, stepping[:, None], out=free)     # only stepping slots lock
        everything = slice(None)
        moved, inside = self._trial(everything, None if self.unit_weights else chain.joint_weight, None)
        hit = inside != moved
        hit &= free
        if hit.any():
            locked_step = np.where(hit, inside - self.q, 0.0)
            free &= ~hit
            moved, inside = self._trial(everything, chain.joint_weight * free, locked_step)
            if self.first[0]:
                inside[:1] = self._locked_rounds(free[:1], locked_step[:1], moved[:1], inside[:1])
        proposed = np.abs(inside - self.q, out=moved)
        proposed.max(axis=1, out=self.proposed)
        np.less(self.proposed, 1e-14, out=self.step_stuck)
        np.copyto(self.trial, inside, where=stepping[:, None])
        self.iterations += stepping
        self.total_iterations += int(np.count_nonzero(stepping))

    def _trial(self, rows: slice, cols, locked_step):
        """For the slots `rows`: moved = q + dl + x, x the damped step of `_step` with C = diag(cols)
        (None: C = I, no coordinate locked) shortened to settings.max_step, and inside = moved
        clamped onto the limits. Returns (moved, inside), new arrays (m, n)."""
        ws, chain = self.step_ws, self.chain
        H0, g, H, diagonal = ws.H0[rows], ws.g[rows], ws.H[rows], ws.diagonal[rows]
        if cols is None:
            np.copyto(H, H0)
            rhs = g
        else:
            columns = ws.columns[rows]
            np.multiply(cols[:, :, None], cols[:, None, :], out=columns)
            np.multiply(H0, columns, out=H)
            if locked_step is None:
                rhs = g * cols[:, :, None]
            else:
                rhs = g - np.matmul(ws.Hg[rows, :, :self.n], locked_step[:, :, None])
                rhs *= cols[:, :, None]
        scale = diagonal.max(axis=1)              # of C H C
        scale[scale <= 0] = 1.0
        scale *= self.lam[rows]
        diagonal += scale[:, None]
        step = np.linalg.solve(H, rhs)[:, :, 0]
        moved = np.empty_like(self.q[rows])
        if cols is None:
            np.copyto(moved, step)
        else:
            np.multiply(step, cols, out=moved)
        _shorter(moved, self.settings.max_step)
        moved += self.q[rows]
        if locked_step is not None:
            moved += locked_step
        inside = np.minimum(np.maximum(moved, chain.lower), chain.upper)
        return moved, inside

    def _locked_rounds(self, free, locked_step, moved, inside) -> np.ndarray:
        """Slot 0's first start after its first locking round (free, locked_step, moved, inside of
        that round, (1, n)), as update.weighted_step goes on: each coordinate that hit a limit is
        locked on it (its step dl), the others solved again, until no new coordinate hits one.
        Returns its new `inside`."""
        q, joint_weight = self.q[:1], self.chain.joint_weight
        for _ in range(self.n):
            hit = inside != moved
            hit &= free
            if not hit.any():
                break
            np.copyto(locked_step, inside - q, where=hit)
            free &= ~hit
            moved, inside = self._trial(slice(0, 1), joint_weight * free, locked_step)
        return inside

    def _result(self, winner: int, t0: float) -> RestartResult:
        if winner >= 0:
            q, errors, converged = self.q[winner], tuple(self.errors[winner]), True
            first = bool(self.first[winner])
        else:
            self._remember(self.active & np.isfinite(self.cost))   # the slots' current answers join the best
            q, errors, converged, first = self.best_q, self.best_errors, False, False
        charged = time.perf_counter() - t0
        return RestartResult(q=q[None].copy(), position_error=np.array([[errors[0]]]),
                             rotation_error=np.array([[errors[1]]]),
                             iterations=np.array([self.total_iterations]), converged=np.array([converged]),
                             sigma_min=np.array([np.nan]), seconds=charged, constraint_names=list(self.chain.names),
                             restarts=np.array([self.started]), charged=np.array([charged]),
                             first_converged=np.array([first]), passes=np.array([self.passes]))


def _shorter(step: np.ndarray, max_step: float) -> np.ndarray:
    """Steps (R, n) scaled down, in place, where their largest entry passes max_step
    (update.weighted_step): by max_step / max(largest, max_step), which is 1 where none passes."""
    if np.isfinite(max_step):
        largest = np.abs(step).max(axis=-1)
        step *= (max_step / np.maximum(largest, max_step))[:, None]
    return step


class _StepWorkspace:
    """Arrays of one damped step of R slots of n coordinates: [W^1/2 A, W^1/2 (yd - y)], the
    products [A^T W A, A^T W (yd - y)] and views of them, and H0 = A^T W A, the damped system H
    and C's outer product laid out with the slots last (`_slots_last`)."""

    def __init__(self, R: int, n: int):
        self.Awb = np.zeros((R, 6, n + 1))
        self.Hg = np.empty((R, n, n + 1))
        self.g = self.Hg[:, :, n:]
        self.H0, _ = _slots_last(R, n)
        self.H, self.diagonal = _slots_last(R, n)
        self.columns, _ = _slots_last(R, n)
        self.free = np.empty((R, n), dtype=bool, order="F")


def _slots_last(R: int, n: int):
    """An array (R, n, n) laid out as (n, n, R), and a view (R, n) of its diagonals: products with
    other such arrays, and the largest diagonal per slot, then run over contiguous rows of R
    slots instead of rows of n coordinates (the vectors (R, n) of a step are Fortran-ordered for
    the same reason). np.linalg.solve copies each matrix whatever its layout."""
    base = np.empty((n * n, R))
    return base.reshape(n, n, R).transpose(2, 0, 1), base[::n + 1].T

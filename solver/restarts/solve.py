"""Random restarts (solver.restarts): frames that one solve leaves unconverged are solved again
from random coordinates within the limits, until they converge or their time budget is spent.

A pose-reaching solve started from one fixed pose often ends in a local minimum of the error on
a joint limit (a joint the target needs beyond its limit from that side). Starting elsewhere is
the usual cure. Each round gathers every frame still open into one batched solve:

    1. for each open frame, draw `candidates` random coordinate vectors (uniform within finite
       limits, within pi of the first start where a limit is infinite, frozen coordinates kept)
       and start from the one whose error energy sum_i w_i (yd_i - y_i)^2 is lowest;
    2. when few frames are open, give each several such starts in the same batch (up to
       `min_batch` starts per round, as many as the least remaining budget among them pays for
       at the previous round's cost per start), so that late rounds are not batches of one; a
       frame's starts race: once one converges, the others stop (solve_animation's `groups`);
    3. keep, per frame, the best answer so far: a converged one over one that is not, and among
       unconverged ones the smaller sum of squared position and rotation errors.

Restarted solves take plain Levenberg-Marquardt steps from their first iteration
(Settings(steps="damped", curvature=False)): a start is there to reach the targets, where the
error and the curvature estimate vanish. They stop after 16 iterations: a random start that has
not converged by then rarely does, so a short start and a new one find more answers per
iteration than a long one (BENCHMARKS.md, "What the numbers say", 7-DOF).

Time is charged per frame: each batched solve's wall time (with its start selection) is divided
equally among the starts in it, and a frame is charged for all of its starts. A frame takes part
in a new round only while its charge is below `budget` seconds, and every solve, the first one
too, is given the deadline at which the frame with the least budget left would be charged all of
it (see solve_animation's `deadline`): only the work outside the iterations, and an iteration
that takes longer than the one before it, can carry a frame past its budget.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, replace

import numpy as np

from ..animation import solve_animation
from ..scene import Scene
from ..inputs import check_inputs, complete_frames
from ..result import Result
from ..settings import Settings
from .starts import best_of_random, middle_of_limits


@dataclass
class RestartResult(Result):
    """A Result (the best answer per frame, iterations summed over its starts) and, per frame:
    random starts tried, seconds charged, whether the first solve already converged and (from
    solve_racing) the passes, iterations of all its racing starts at once, it took."""

    restarts: np.ndarray = None
    charged: np.ndarray = None
    first_converged: np.ndarray = None
    passes: np.ndarray = None


def solve_with_restarts(scene: Scene, objects, settings: Settings = Settings(), rng=None, budget: float = 0.005,
                        q0=None, bases=None, candidates: int = 8, min_batch: int = 1024,
                        restart_iterations: int | None = 16, max_restarts: int | None = None) -> RestartResult:
    """Solve every frame of objects (F, K, 4, 4) from q0 (F, n; the middle of the limits when
    None), then restart unconverged frames as above. `budget` is seconds per frame (inf: no time
    limit), `max_restarts` the most random starts per frame (None: no limit); `restart_iterations`
    caps the iterations of a restarted solve (None: settings.max_iterations)."""
    if not (budget >= 0):
        raise ValueError(f"budget {budget} must be a number of seconds >= 0")
    if candidates < 1 or min_batch < 1 or (max_restarts is not None and max_restarts < 0):
        raise ValueError("candidates and min_batch must be >= 1, max_restarts >= 0")
    limit = np.inf if max_restarts is None else max_restarts
    objects = np.asarray(objects, dtype=float)
    F = objects.shape[0]
    if q0 is None:
        q0 = np.tile(middle_of_limits(scene), (F, 1))
    q0, objects, bases, _ = check_inputs(scene, q0, objects, bases)
    start = time.perf_counter()
    first = solve_animation(scene, q0, objects, bases, settings, deadline=start + budget * F)
    copied = ("q", "position_error", "rotation_error", "iterations", "converged", "sigma_min", "seconds", "frames",
              "constraint_names")
    best = RestartResult(**{k: getattr(first, k) for k in copied},
                         restarts=np.zeros(F, dtype=int), charged=np.full(F, first.seconds / max(F, 1)),
                         first_converged=first.converged.copy())
    best.q, best.iterations = best.q.copy(), best.iterations.copy()
    retry = complete_frames(objects, F)        # a frame with a missing target cannot converge
    if bases is not None:
        retry &= np.all(np.isfinite(bases), axis=(1, 2, 3))

    per_start = first.seconds / max(F, 1)
    while True:
        open_ = np.flatnonzero(retry & ~best.converged & (best.charged < budget) & (best.restarts < limit))
        if not open_.size:
            break
        if not isinstance(rng, np.random.Generator):     # made only when a restart is due (F=1: 40 us)
            rng = np.random.default_rng(rng)
        # ceil(min_batch / open frames) starts each, but no more than the least remaining budget
        # pays for at the last round's cost per start.
        affordable = np.floor(np.min(budget - best.charged[open_]) / max(per_start, 1e-12))
        per_frame = int(max(1, min(-(-min_batch // open_.size), affordable, np.min(limit - best.restarts[open_]))))
        frames = np.repeat(open_, per_frame)
        round_start = time.perf_counter()
        pick = lambda poses: None if poses is None else poses[frames]  # noqa: E731
        seeds = best_of_random(scene, q0[frames], pick(objects), pick(bases), candidates, rng)
        # Each open frame is charged the round's time / open frames: stop before the frame with
        # the least budget left is charged more than that.
        deadline = round_start + np.min(budget - best.charged[open_]) * open_.size
        attempt = solve_animation(scene, seeds, pick(objects), pick(bases), _restart_settings(settings, restart_iterations),
                                  deadline=deadline, groups=frames)
        per_start = (time.perf_counter() - round_start) / frames.size
        best.charged[open_] += per_frame * per_start
        best.restarts[open_] += per_frame
        best.iterations[open_] += attempt.iterations.reshape(-1, per_frame).sum(axis=1)
        _keep_better(best, attempt, open_, per_frame)
    best.seconds = time.perf_counter() - start
    return best


@functools.lru_cache(maxsize=16)
def _restart_settings(settings: Settings, iterations: int | None) -> Settings:
    """Plain Levenberg-Marquardt steps, capped at `iterations` (None: settings.max_iterations)."""
    restart = replace(settings, steps="damped", curvature=False)
    return restart if iterations is None else replace(restart, max_iterations=iterations)


def _error_score(position_error, rotation_error) -> np.ndarray:
    return np.nansum(position_error**2, axis=-1) + np.nansum(rotation_error**2, axis=-1)


def _keep_better(best: RestartResult, attempt: Result, frames: np.ndarray, per_frame: int) -> None:
    """Frames `frames` of best take the best of their `per_frame` consecutive attempts if it beats them."""
    score = _error_score(attempt.position_error, attempt.rotation_error).reshape(-1, per_frame)
    converged = attempt.converged.reshape(-1, per_frame)
    # Converged attempts first, then the smallest error.
    choice = np.argmin(np.where(converged, -np.inf, score), axis=1)
    row = np.arange(frames.size) * per_frame + choice
    new_ok, new_score = attempt.converged[row], score[np.arange(frames.size), choice]
    old_score = _error_score(best.position_error[frames], best.rotation_error[frames])
    better = (new_ok & ~best.converged[frames]) | (~best.converged[frames] & ~new_ok & (new_score < old_score))
    take, row = frames[better], row[better]
    for name in ("q", "position_error", "rotation_error", "converged", "sigma_min"):
        getattr(best, name)[take] = getattr(attempt, name)[row]

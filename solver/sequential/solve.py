"""Solving the stages of sequential IK (solver.sequential) over all frames, warm-started.

Warm start (the seed solves frame f from the solution of frame f-1). That recurrence

    x_0 = solve_k(start = q0),   x_f = solve_k(start = x_{f-1})

is sequential in f. warm_start='sequential' runs it literally, one engine call per frame.
warm_start='previous' reaches the same x by batched passes: pass 1 solves frame 0 from q0 and then
every other frame from x_0 in one call (a common warm start that usually lands on frame 0's
solution branch); pass p solves frame f from pass p-1's x_{f-1}, re-solving only the frames whose
start moved by more than `start_tolerance`. A fixed point of the passes satisfies the recurrence
in every frame, and after p passes frames 0..p-1 are final, so at most F + 1 passes are needed.

Which is faster depends on the stage. Where a stage's optimum is isolated (at most 3 coordinates
against the 3 coordinates of one keypoint, as in every stage of the fly leg), a start near the
answer lands on the same answer to solver precision, the passes stop after 2 or 3, and the
batched passes are several times faster than the loop. Where the stage is redundant (more than 3
coordinates, e.g. the whole leg against the claw), the answer moves continuously with the start,
each pass settles one more frame, F passes are needed and the loop is faster (BENCHMARKS.md,
"Measurements behind design choices").
warm_start='auto' (the default) therefore uses 'previous' unless the stage is redundant: more free
coordinates than its keypoint pins down (the generic rank of the keypoint's Jacobian in the stage
columns, its largest rank over the frames at frame 0's solution, is below their number), and
'sequential' then. 'none' solves every frame from q0 (no warm start; the branch may flip
between frames), and `max_passes` stops the passes early (2 is "every frame from the previous
frame's first-pass solution").
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import Model, Settings, solve_animation
from ..geometry import translations
from .stages import StageProblem, stage_problem

WARM_STARTS = ("auto", "previous", "sequential", "none")


@dataclass
class SequentialResult:
    """q (F, n) (or (B, F, n) for B sequences): all coordinates after the last stage. Per stage k
    (last axis): `position_error` (F, S) the distance between its keypoint and the measurement
    after the stage, solver iterations summed over passes (F, S), the engine's converged flag
    (F, S; False wherever the keypoint cannot be matched exactly, the usual case for measured
    data); per stage (S,):
    passes and frame solves, and the warm start used ('previous', 'sequential' or 'none')."""

    q: np.ndarray
    position_error: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    passes: np.ndarray
    frame_solves: np.ndarray
    warm_starts: list
    seconds: float


def solve_stage(problem: StageProblem, q: np.ndarray, measured: np.ndarray, bases=None,
                settings: Settings = Settings(), warm_start: str = "auto", max_passes: int | None = None,
                start_tolerance: float = 1e-6, n_sequences: int = 1):
    """Solve one stage for all frames of `n_sequences` independent sequences stored one after the
    other: rows b*F .. b*F + F - 1 of q (B F, n) and measured (B F, 3) are frames 0 .. F-1 of
    sequence b. q holds every row's current coordinates (earlier stages solved; the stage's own
    columns are frame 0's starting values). Returns the new q, per-row distance, iterations and
    converged flag, the number of passes and of frame solves, and the warm start actually used."""
    if warm_start not in WARM_STARTS:
        raise ValueError(f"warm_start must be one of {WARM_STARTS}, not {warm_start!r}")
    R = q.shape[0]
    F = R // n_sequences
    frame = np.tile(np.arange(F), n_sequences)
    first = np.flatnonzero(frame == 0)
    later = np.flatnonzero(frame > 0)
    cols = problem.columns
    own = np.flatnonzero(np.isin(cols, problem.solved))       # stage columns inside the sub-model
    objects = translations(measured[:, None, :])       # object poses (F, 1, 4, 4)
    arm_bases = None if bases is None else bases[:, [problem.armature]]
    iterations = np.zeros(R, dtype=int)
    error = np.full(R, np.nan)
    converged = np.zeros(R, dtype=bool)
    x = q[:, cols].copy()

    def run(rows, start):
        r = solve_animation(problem.scene, start, objects[rows],
                            None if arm_bases is None else arm_bases[rows], settings)
        x[rows] = r.q
        iterations[rows] += r.iterations
        error[rows] = r.position_error[:, 0]
        converged[rows] = r.converged

    def done(passes, solves, used):
        out = q.copy()
        out[:, cols[own]] = x[:, own]
        return out, error, iterations, converged, passes, solves, used

    if warm_start == "none":
        run(np.arange(R), x.copy())
        return done(1, R, "none")
    run(first, x[first].copy())                               # frame 0 from q0, in every mode
    start = x.copy()
    start[np.ix_(later, own)] = x[np.ix_(later - frame[later], own)]   # each frame from its frame 0
    if warm_start == "auto":
        warm_start = "sequential" if _redundant(problem, start, objects, arm_bases, own) else "previous"
    if warm_start == "sequential":
        for f in range(1, F):
            rows = first + f
            step = x[rows].copy()
            step[:, own] = x[np.ix_(rows - 1, own)]
            run(rows, step)
        return done(F, R, "sequential")
    run(later, start[later])
    passes, solves = 1, R
    limit = F + 1 if max_passes is None else max_passes
    while passes < limit:
        new_start = start.copy()
        new_start[np.ix_(later, own)] = x[np.ix_(later - 1, own)]
        changed = np.flatnonzero(np.any(np.abs(new_start - start) > start_tolerance, axis=1))
        if not changed.size:
            break
        start = new_start
        run(changed, start[changed])
        passes += 1
        solves += changed.size
    return done(passes, solves, "previous")


def _redundant(problem: StageProblem, configurations, objects, bases, own) -> bool:
    """Whether the stage's free coordinates outnumber what its keypoint can pin down: the generic
    rank of the keypoint's Jacobian in those columns (its largest rank over the given
    configurations, one per frame) is below their number. Then the answer moves continuously with
    the start (a null space), and warm-starting is a genuinely sequential recurrence."""
    free = own[problem.scene.joint_weight[own] > 0]
    if free.size > problem.scene.constraints[0].n_outputs:
        return True
    A = problem.scene.evaluate(configurations, objects, bases).A[:, :, free]
    A = A[np.all(np.isfinite(A), axis=(1, 2))]          # frames without a usable base tell nothing
    if not A.shape[0]:
        return False
    s = np.linalg.svd(A, compute_uv=False)
    rank = np.sum(s > 1e-9 * np.maximum(s[:, :1], 1e-300), axis=-1)
    return bool(rank.max() < free.size)


def sequential_ik(model: Model, stages, keypoints, q0=None, bases=None, settings: Settings = Settings(),
                  warm_start: str = "auto", max_passes: int | None = None,
                  start_tolerance: float = 1e-6) -> SequentialResult:
    """Run the stages in order over all frames of `keypoints`: (F, K, 3) for one sequence or
    (B, F, K, 3) for B independent sequences solved together (each warm-started within itself).
    `q0` broadcasts to (F, n) or (B, F, n) (the model's neutral pose when None): frame 0 of each
    stage starts from it, later frames from the previous frame's solution (`warm_start`, see the
    module docstring), and coordinates no stage solves keep their q0 value in every frame.
    `bases` ((F, A, 4, 4) or (B, F, A, 4, 4)) place the armatures in the world. Result arrays have
    the leading shape of the keypoints, (F,) or (B, F)."""
    start = time.perf_counter()
    keypoints = np.asarray(keypoints, dtype=float)
    lead = keypoints.shape[:-2]
    if len(lead) not in (1, 2):
        raise ValueError(f"keypoints must have shape (F, K, 3) or (B, F, K, 3), got {keypoints.shape}")
    B, F = (1,) + lead if len(lead) == 1 else lead
    n = model.n_coordinates
    q = np.broadcast_to(model.neutral(1)[0] if q0 is None else np.asarray(q0, float), lead + (n,))
    q = q.reshape(B * F, n).copy()
    flat_keypoints = keypoints.reshape((B * F,) + keypoints.shape[-2:])
    if bases is not None:
        bases = np.broadcast_to(np.asarray(bases, float), lead + (model.n_armatures, 4, 4))
        bases = bases.reshape(B * F, model.n_armatures, 4, 4)
    S = len(stages)
    error, iterations = np.full((B * F, S), np.nan), np.zeros((B * F, S), dtype=int)
    converged = np.zeros((B * F, S), dtype=bool)
    passes, solves, used = np.zeros(S, dtype=int), np.zeros(S, dtype=int), []
    for k, stage in enumerate(stages):
        problem = stage_problem(model, stage)
        q, error[:, k], iterations[:, k], converged[:, k], passes[k], solves[k], how = solve_stage(
            problem, q, flat_keypoints[:, stage.keypoint], bases, settings, warm_start, max_passes,
            start_tolerance, n_sequences=B)
        used.append(how)
    return SequentialResult(q=q.reshape(lead + (n,)), position_error=error.reshape(lead + (S,)),
                            iterations=iterations.reshape(lead + (S,)), converged=converged.reshape(lead + (S,)),
                            passes=passes, frame_solves=solves, warm_starts=used,
                            seconds=time.perf_counter() - start)

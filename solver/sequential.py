"""Sequential (staged) inverse kinematics: grow the chain proximal to distal, one stage at a time.

Each stage k names the coordinates Q_k it solves and one keypoint: a point r_k fixed to segment
s_k, to be brought onto its measured world position m_k(f) in every frame f. Stage k solves

    min over q[Q_k]   || W_{s_k}(q) [r_k; 1] - m_k(f) ||^2      (per frame f)

with every coordinate outside Q_k held where it is: the earlier stages' values stay as solved,
later stages' coordinates keep their starting values (in the fly preset they do not move the
stage's keypoint at all). So the proximal keypoints are matched first and the distal joints
cannot trade their error away, unlike one solve of the whole chain against the last keypoint.

How a stage is solved. The stage's problem is posed to the engine as it stands: a Scene whose
model is the chain from the root to s_k (the ancestors of s_k: the chain grows stage by stage,
exactly as in the seed) with weight 0 on every coordinate outside Q_k, one CopyPose position task
from r_k to an object placed at m_k(f), and solve_animation over all frames at once. Weight 0 is
the engine's own way to freeze a coordinate (Wq = 0 removes its column from the update), so the
earlier stages' values pass through untouched and no reduced Jacobian is needed.

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
batched passes are several times faster than the loop (measured on the fly data: 2 passes per
stage, about 5x). Where the stage is redundant (more than 3 coordinates, e.g. the whole leg
against the claw), the answer moves continuously with the start, each pass settles one more frame,
F passes are needed and the loop is faster (measured: 99 passes, 2.5x slower than the loop).
warm_start='auto' (the default) therefore uses 'previous' unless the stage is redundant: more free
coordinates than its keypoint pins down (the generic rank of the keypoint's Jacobian in the stage
columns, its largest rank over the frames at frame 0's solution, is below their number), and
'sequential' then. 'none' solves every frame from q0 (no warm start; the branch may flip
between frames), and `max_passes` stops the passes early (2 is "every frame from the previous
frame's first-pass solution").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from . import Model, Scene, Segment, Settings, solve_animation
from .tasks import CopyPose, on_object, on_segment

WARM_STARTS = ("auto", "previous", "sequential", "none")


@dataclass(frozen=True)
class Stage:
    """One stage: solve `coordinates` (indices or names from Model.coordinate_names) so that the
    `point` fixed to `segment` (index or name; point in the segment's frame) follows measured
    keypoint number `keypoint` (a column of the keypoints array, shape (F, K, 3))."""

    coordinates: tuple
    segment: int | str
    keypoint: int
    point: tuple = (0.0, 0.0, 0.0)
    name: str = ""


@dataclass
class StageProblem:
    """A stage posed to the engine: the chain up to the keypoint's segment (`columns`: which of
    the full model's coordinates it holds, in order) with everything but the stage frozen."""

    stage: Stage
    scene: Scene
    columns: np.ndarray          # sub-model coordinate i is full coordinate columns[i]
    solved: np.ndarray           # full indices of the stage's coordinates
    armature: int                # the full model's armature the chain belongs to


@dataclass
class SequentialResult:
    """q (F, n) (or (B, F, n) for B sequences): all coordinates after the last stage. Per stage k
    (last axis): the distance between its keypoint and the measurement after the stage (F, S),
    solver iterations summed over passes (F, S), the engine's converged flag (F, S; False wherever
    the keypoint cannot be matched exactly, the usual case for measured data); per stage (S,):
    passes and frame solves, and the warm start used ('previous', 'sequential' or 'none')."""

    q: np.ndarray
    keypoint_error: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    passes: np.ndarray
    frame_solves: np.ndarray
    warm_starts: list
    seconds: float


def _coordinate_index(model: Model, c) -> int:
    if isinstance(c, str):
        try:
            return model.coordinate_names.index(c)
        except ValueError:
            raise KeyError(f"no coordinate called '{c}'") from None
    c = int(c)
    if not 0 <= c < model.n_coordinates:
        raise IndexError(f"coordinate {c} is not in the model ({model.n_coordinates} coordinates)")
    return c


def stage_problem(model: Model, stage: Stage) -> StageProblem:
    """Build the engine scene of one stage (see the module docstring)."""
    seg = model.index(stage.segment) if isinstance(stage.segment, str) else int(stage.segment)
    solved = np.array(sorted({_coordinate_index(model, c) for c in stage.coordinates}), dtype=int)
    if solved.size == 0:
        raise ValueError(f"stage '{stage.name}' solves no coordinate")
    keep = np.flatnonzero(model.segment_ancestors[seg])                 # root .. seg, in tree order
    moving = model.moves[solved, seg]
    if not np.all(moving):
        names = [model.coordinate_names[c] for c in solved[~moving]]
        raise ValueError(f"stage '{stage.name}': coordinates {names} do not move segment "
                         f"'{model.names[seg]}', so this stage cannot solve them")
    new_index = {int(old): new for new, old in enumerate(keep)}
    segments, columns = [], []
    for old in keep:
        s = model.segments[old]
        joints = []
        for joint, first in zip(s.joints, model.joint_first[model.joint_segment == old]):
            cols = first + np.arange(joint.n_coordinates)
            columns.extend(cols.tolist())
            weight = tuple(float(w) if c in solved else 0.0 for c, w in zip(cols, joint.weight))
            joints.append(replace(joint, weight=weight))
        parent = new_index[s.parent] if s.parent >= 0 else -1
        segments.append(Segment(s.name, parent, s.rest, tuple(joints), s.length, s.post, armature=0))
    sub = Model(segments)
    task = CopyPose(on_segment(new_index[seg], stage.point), on_object(0), name=stage.name or "keypoint")
    return StageProblem(stage=stage, scene=Scene(sub, [task], n_objects=1), columns=np.array(columns, int),
                        solved=solved, armature=int(model.armature[seg]))


def _targets(points: np.ndarray) -> np.ndarray:
    """Object poses (F, 1, 4, 4) at the measured points (F, 3)."""
    T = np.broadcast_to(np.eye(4), (points.shape[0], 1, 4, 4)).copy()
    T[:, 0, :3, 3] = points
    return T


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
    objects = _targets(measured)
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
    return SequentialResult(q=q.reshape(lead + (n,)), keypoint_error=error.reshape(lead + (S,)),
                            iterations=iterations.reshape(lead + (S,)), converged=converged.reshape(lead + (S,)),
                            passes=passes, frame_solves=solves, warm_starts=used,
                            seconds=time.perf_counter() - start)

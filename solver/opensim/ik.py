"""Marker IK as OpenSim's InverseKinematicsTool defines it, solved by the engine.

Per frame f, over the unprescribed coordinates q (metres and radians),

    min_q  sum_i w_i |x_i^exp(f) - x_i(q)|^2 / sum_i w_i  +  sum_j w_j (q_j^exp(f) - q_j)^2

(the first sum runs over the markers present in the frame) with the prescribed coordinates held
at their values (OpenSim's "locked" coordinates: at their default value, as OpenSim 4.6 does even
when a coordinate file gives them other values) and clamped coordinates kept inside their range.
The marker weights w_i come from the IKMarkerTasks, the coordinate weights w_j and targets
q_j^exp from the IKCoordinateTasks: the model's default value, a manual value, or the coordinate
file's column interpolated linearly at the frame's time, in radians (OpenSim fits a spline
through the file instead; with a task of weight 1000 the two follow the file to 1e-4 degrees).

Dividing the marker term by the sum of the marker weights is what OpenSim 4.6 minimises, though
its documentation writes the objective without it. It changes nothing without coordinate tasks;
with them it sets how much the markers weigh against the coordinates. Measured with opensim 4.6:
at OpenSim's solutions the gradient of the marker term balances the coordinate tasks' gradient
scaled by exactly that sum (31.0 for 31 markers of weight 1, 62.0 with weights 2, 61.0 for
gait2354_IK_Tasks.xml, 30 and 29 in frames with one and two markers missing).
`normalize=False` solves the documented formula instead.

Markers in use, as OpenSim picks them: the markers of the marker file, in its order, that have an
applied marker task (any weight, 0 included) and exist in the model. A task set that applies no
marker task (empty, or every one apply=false) tracks every model marker of the file at weight 1,
as opensim 4.6 does; `MarkerIK.notes` says so and an OpenSimFileWarning is raised. A marker
missing in a frame (NaN) has weight 0 in that frame.

On the engine. The problem is a Scene over the OpenSim coordinates (`coupling`): one CopyPose
position task per marker, from the model marker (`on_segment`) to the measured marker
(`on_object`), weight w_i, whose output y is the world vector between the two points, so the
engine's cost sum_rows w (yd - y)^2 is the marker term; one JointValue task per coordinate task,
its target per frame in solve_animation's `values`. `MarkerScene.evaluate` computes that same
system for all markers at once with `marker_kinematics` (equal to the generic `Scene.evaluate` to
rounding, which a test checks) and scales each frame's marker weights: 0 for a missing marker
(its object pose is NaN, as in any scene), and the division above. `solve` itself runs the fit through
`gauss_newton` (the engine's fit-mode 'pinv' step for exactly this system, its normal equations
built from the marker Jacobian without the scene's generic rows; Newton's second-order term
once a frame is close): a frame has converged when its full step is below the accuracy, in
radians or metres (OpenSim's default accuracy 1e-5 and 1000 iterations; a setup's accuracy
wins). A frame that stops improving before that goes on in the engine's `solve_animation`.
That is not what OpenSim's `accuracy` means: there it is the Simbody assembler's stopping
tolerance, and at the same value it stops earlier where the objective is flat (forearm pronation
with few arm markers ends degrees away from the minimum; OpenSim's own solver at accuracy 1e-7
started at our answer stays there, tests/apps/test_opensim_constraints.py). Ours converges
further by design.

PointConstraints (the thoracoscapular model's AC joint) are held as OpenSim holds them: exactly
with constraint_weight Infinity (every pose projected onto them, steps along them), else as a
penalty of that weight on |x_1 - x_2|^2 (gauss_newton.py; in the scene, point-to-point CopyPose
tasks of that weight). Held exactly, Gauss-Newton solves every frame alone: a frame it leaves
unconverged is not handed on to the engine's solve_animation, whose scene does not hold them.

Warm start. OpenSim solves frame 0 from the default pose and frame f from frame f-1's solution.
warm_start='previous' (the default) reaches that recurrence's result with batched passes: pass 1
solves frame 0 and every third frame (WARM_STRIDE) from the start pose; each further pass solves,
from the last solution of frame f-1, every frame f whose predecessor has a solution and that has
none yet or whose start moved by more than the accuracy, until no start moves (a fixed point of
the recurrence) or `max_passes` (which never leaves a frame unsolved, nor a seed turned as below
unsolved again). Where starts still move after BATCHED_PASSES passes (a change that each pass
carries one frame further down the trial), one sweep settles the rest frame by frame, each frame
from its predecessor's final solution, so no frame is solved more than BATCHED_PASSES + 1 times.
The frames of pass 1 are seeds: the passes after it fill the frames between them from their
predecessors, then solve the seeds again from theirs. Seeding every third frame takes fewer
iterations than solving every frame from frame 0's solution first (BENCHMARKS.md, "Measurements
behind design choices"). A seed solved from the start pose may land whole turns away from where the recurrence takes that coordinate (the same
pose: forearm pronation on OpenSim's constraint test trial, 2 pi apart); every pass would then
carry that turn one frame further. So before the passes the seeds' free rotational coordinates
without limits are unwrapped in time (each within half a turn of the seed before, afresh where a
frame restarts), and a seed so turned is solved again from its predecessor like the others.
warm_start='sweep' is the recurrence itself, one frame at a time in OpenSim's order (no batching:
slower; a reference for the passes). warm_start='none' solves every frame from the start pose in
one call.

Limits in the start pose. Without q0, a free clamped coordinate whose start pose (the model's
default) sits on a limit, or within 1 % of its range from one, starts at the middle of its range
(limit_start.py): started on a limit at a singular pose of its chain (a straight elbow), the step
would hold it there and the frame settle in a worse minimum. q0 is taken as given. A frame
warm-started from a neighbour that ended on such a limit can stay there too: see below.

Root seeds. With warm_start 'previous', every frame's start pose (what frame 0, the seeds of pass
1 and a frame after undetermined ones are solved from) has the root body (the pelvis) placed on
its own markers where at least three are present (root_seed.py: a rigid fit, the root joint's
coordinates in both Euler branches, the branch of lower objective; at a tie, as a flip costs the
markers nothing, the one nearer the default pose), where that scores below the default pose.
OpenSim turns the whole model from its default pose instead; near the root's gimbal lock that
turn can go the wrong way round and the legs follow into another minimum.

A worse local minimum. A frame can settle in a local minimum where its neighbours found a lower
one (the root's Euler angles flipped, a limb folded the other way; the seeds solved from the
start pose are where that happens, and frames near the root's gimbal lock) or with a limb held
on a limit (a straight elbow, limit_start.py). After the passes, each frame the markers
determine that holds a free clamped coordinate on a limit is solved again from the start pose
and from each neighbour's solution; then each frame is scored (on its own markers) at its
predecessor's solution, its successor's and their mean; where one scores below the frame's own
objective, the frame is solved again from the lowest. A new solution is kept where it lowers the
frame's objective by more than NEIGHBOUR_MARGIN of it (and accuracy^2, the objective's
resolution): its objective was above what a neighbour's solution (or the start) leads to. The
neighbours of each frame so lowered are then solved from its new solution, round after round
(each batched) while some frame is lowered: a stretch in the worse minimum is taken back a frame
from each end per round.
The result marks those frames (`above_neighbour`) and the run's summary names them. Scoring
misses a frame alone in a worse minimum only slightly above the better one where the markers'
noise between frames exceeds that gap; `neighbours='solve'` solves every frame once more from
its successor's solution and from its predecessor's instead (after the passes the latter ends
at once), at about half the solve's time again.

Frames the markers do not determine. OpenSim stops at the first frame without markers; here a
frame whose markers present (and coordinate tasks) fix fewer free coordinates than all the trial's
markers would (the rank of their Jacobian at the start pose, `MarkerIK.determined`) is solved
with a weak coordinate task (weight STAY_WEIGHT) on every free coordinate towards its start, the
previous frame's solution: what the markers fix they fix, the rest stays where the previous frame
left it, and the frame costs a few iterations. The result says so per frame (`determined`,
`determined_coordinates`), and a frame without any marker reports NaN errors, not 0. A frame the
markers determine after one they do not starts afresh from the start pose, as frame 0 does.

Error reports follow OpenSim's marker-error storage: total_squared_error = sum_i |e_i|^2 over the
markers present in the frame (not weighted), marker_error_RMS = sqrt(total / M) with M the number
of markers in use (missing ones included, as OpenSim counts them), marker_error_max the largest
|e_i|; plus the worst marker's name. Outputs: the .mot (rotational coordinates in degrees,
inDegrees=yes), `<tool name>_ik_marker_errors.sto` and `<tool name>_ik_model_marker_locations.sto`
(model markers in ground, `<marker>_tx/_ty/_tz`, metres) in the results directory.
"""

from __future__ import annotations

import time as _time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..animation import solve_animation
from ..runtime.blas_threads import one_blas_thread
from ..tasks import CoordinateCoupler, CopyPose, JointValue, on_object, on_segment
from ..tasks.base import Place, Stack, TaskInputs
from ..scene import Evaluation, Scene
from ..settings import Settings
from .errors import OpenSimFileError, OpenSimFileWarning
from .gauss_newton import GaussNewton
from .limit_start import off_limits
from .coupling import coupler_tangent, fill_dependents
from .marker_file import read_trial
from .marker_kinematics import MarkerKinematics
from .smoothing import check_options, frame_rate, refine
from .osim import OpenSimModel, load_osim
from .root_seed import MIN_MARKERS as MIN_ROOT_MARKERS, RootSeed
from .setup import IKSetup, IKTaskSet, read_ik_setup
from .storage import Storage, read_storage, write_storage
from .trc import MarkerData

DEFAULT_ACCURACY = 1e-5
DEFAULT_MAX_ITERATIONS = 1000
WARM_STARTS = ("previous", "sweep", "none")
WARM_STRIDE = 3
BATCHED_PASSES = 8
STAY_WEIGHT = 1e-6
NEIGHBOUR_MARGIN = 1e-6           # relative: a solution from a neighbour's this much lower is better


# ------------------------------------------------------------------------------------- scene

class MarkerScene(Scene):
    """The marker IK system of one model: CopyPose tasks from model markers to measured markers
    (objects 0 .. M-1) and JointValue tasks on coordinates (targets per frame in `values`, NaN
    leaving a task out of a frame, as in Scene.evaluate; 0 when no values are given).

    Marker k's object pose (`objects(...)` packs them) is the identity moved to the measured
    position, or NaN where the marker is missing (as for any scene): weight 0 in that frame. With `normalize`
    the marker weights of a frame are divided by their sum over the markers present (OpenSim's
    objective). Coordinates in `frozen` (and locked ones) have weight 0 and no limits: they keep
    the values they start with. Couplers (coupling.py) with `coupler_weight` Infinity are held
    exactly (`held`: their dependents frozen, filled from the independents at every evaluation,
    A taken to the coordinates left); with a finite weight they are CoordinateCoupler rows.
    PointConstraints (`om.points`) with a finite `point_weight` are point-to-point CopyPose
    tasks from the first point to the second (y = x_2 - x_1, weight point_weight); held exactly
    (Infinity) they are gauss_newton.py's, not the scene's.

    `evaluate` returns y = x_exp - x_model per marker (3 rows) and q_c per coordinate task,
    yd = 0 and the targets, A = dy/dq through the coupling, per-row weights, and per task the
    position error |e| (NaN where missing) or |q_c - target|. B has no columns: animation mode
    never uses it (the measured markers are data, not moving objects to feed forward)."""

    def __init__(self, om: OpenSimModel, marker_names, marker_weights, coordinate_tasks=(), frozen=(),
                 normalize: bool = True, couplers=(), coupler_weight: float = 0.0, point_weight: float = 0.0):
        self.om = om
        self.point_weight = float(point_weight) if om.point_names and 0 < point_weight < np.inf else 0.0
        couplers = list(couplers)
        self.held = couplers if np.isinf(coupler_weight) else []
        self.couplers = couplers if 0 < coupler_weight < np.inf else []
        self.coupler_weight = float(coupler_weight) if self.couplers else 0.0
        self.normalize = bool(normalize)
        c = om.coupling
        self.marker_names = list(marker_names)
        weights = np.asarray(marker_weights, dtype=float).reshape(-1)
        if weights.size != len(self.marker_names):
            raise ValueError(f"{len(self.marker_names)} markers but {weights.size} weights")
        index = om.markers.index(self.marker_names)
        self.segments = om.markers.segments[index]
        self.locations = om.markers.locations[index]
        self.marker_weights = weights
        self.task_names = [name for name, _ in coordinate_tasks]
        self.task_coordinates = np.array([int(c.index(name)) for name in self.task_names], dtype=int)
        self.task_weights = np.array([float(w) for _, w in coordinate_tasks], dtype=float)
        M = len(self.marker_names)
        constraints = [CopyPose(on_segment(int(s), loc), on_object(k), weight=float(w), name=name)
                       for k, (s, loc, w, name) in enumerate(zip(self.segments, self.locations, weights,
                                                                  self.marker_names))]
        constraints += [JointValue(int(i), 0.0, float(w), rotational=bool(c.rotational[i]), name=name)
                        for name, i, w in zip(self.task_names, self.task_coordinates, self.task_weights)]
        constraints += [CoordinateCoupler(k.dependent, k.independent, k.function, self.coupler_weight,
                                          rotational=bool(c.rotational[k.dependent]), name=k.name)
                        for k in self.couplers]
        P = len(om.point_names) if self.point_weight else 0
        points = om.points
        constraints += [CopyPose(on_segment(int(points.segments[k]), points.locations[k]),
                                 on_segment(int(points.segments[P + k]), points.locations[P + k]),
                                 weight=self.point_weight, name=om.point_names[k]) for k in range(P)]
        self.n_points = P
        self.point_kinematics = MarkerKinematics(om.model, c, points.segments, points.locations) if P else None
        super().__init__(om.model, constraints, n_objects=M, coupling=c)
        frozen_mask = np.asarray(c.locked, bool).copy()
        frozen_mask[np.asarray(c.index(list(frozen)), dtype=int).reshape(-1)] = True
        frozen_mask[[k.dependent for k in self.held]] = True
        self.frozen = frozen_mask
        self.joint_weight = np.where(frozen_mask, 0.0, 1.0)
        self.lower = np.where(frozen_mask, -np.inf, self.lower)
        self.upper = np.where(frozen_mask, np.inf, self.upper)
        self._row_weights = np.concatenate([np.repeat(weights, 3), self.task_weights])
        self._coupler_tasks = constraints[M + len(self.task_names):len(constraints) - P]
        self._task_rotational = np.asarray(c.rotational, bool)[self.task_coordinates]
        self.kinematics = MarkerKinematics(om.model, c, self.segments, self.locations)

    @property
    def n_markers(self) -> int:
        return len(self.marker_names)

    def marker_scale(self, present) -> np.ndarray:
        """Per frame and marker (F, M), the factor on the marker weight: 0 where the marker is
        missing, and with `normalize` 1 / (sum of the weights of the markers present)."""
        present = np.asarray(present, bool)
        if not self.normalize:
            return present.astype(float)
        total = present @ self.marker_weights
        return present * np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)[:, None]

    def objects(self, positions) -> np.ndarray:
        """Object poses (F, M, 4, 4) for measured marker positions (F, M, 3), NaN where missing."""
        positions = np.asarray(positions, dtype=float)
        F, M = positions.shape[0], self.n_markers
        if positions.shape != (F, M, 3):
            raise ValueError(f"marker positions must have shape (frames, {M}, 3), got {positions.shape}")
        out = np.broadcast_to(np.eye(4), (F, M, 4, 4)).copy()
        out[..., :3, 3] = positions
        out[~np.all(np.isfinite(positions), axis=-1)] = np.nan
        return out

    def fill(self, q) -> np.ndarray:
        """q with the dependents of the couplers held exactly set from their independent ones."""
        return fill_dependents(q, self.held) if self.held else np.asarray(q, dtype=float)

    def evaluate(self, q, objects=None, bases=None, jacobians: bool = True, values=None,
                 one_frame: bool = False) -> Evaluation:
        """Scene.evaluate's outputs for the markers and coordinate tasks (`one_frame` is accepted
        and changes nothing: this evaluation has no per-frame bookkeeping to save)."""
        q = self.fill(q)
        F, M, T = q.shape[0], self.n_markers, len(self.task_names)
        if bases is not None:
            raise ValueError("a MarkerScene's model stands in the world: no armature bases")
        if jacobians:
            x, J = self.kinematics.positions_and_jacobian(q)
        else:
            x = self.kinematics.positions(q)
        measured = objects[:, :M, :3, 3]
        present = np.isfinite(objects[:, :M, 3, 3])
        e = np.where(present[..., None], measured - x, 0.0)
        q_tasks = q[:, self.task_coordinates]
        targets = np.zeros((F, T)) if values is None else np.broadcast_to(np.asarray(values, float), (F, T))
        given = np.isfinite(targets)
        targets = np.where(given, targets, q_tasks)
        y = np.concatenate([e.reshape(F, 3 * M), q_tasks], axis=1)
        yd = np.concatenate([np.zeros((F, 3 * M)), targets], axis=1)
        weight = np.broadcast_to(self._row_weights, y.shape).copy()
        weight[:, :3 * M] *= np.repeat(self.marker_scale(present), 3, axis=1)
        weight[:, 3 * M:] *= given
        position_error = np.full((F, M + T), np.nan)
        rotation_error = np.full((F, M + T), np.nan)
        position_error[:, :M] = np.where(present, np.linalg.norm(e, axis=-1), np.nan)
        task_error = np.where(given, np.abs(q_tasks - targets), np.nan)
        rotation_error[:, M:] = np.where(self._task_rotational, task_error, np.nan)
        position_error[:, M:] = np.where(self._task_rotational, np.nan, task_error)
        A = None
        if jacobians:
            A = np.zeros((F, 3 * M + T, self.n_coordinates))
            A[:, :3 * M] = -J * np.repeat(present, 3, axis=1)[..., None]
            A[:, 3 * M + np.arange(T), self.task_coordinates] = 1.0
        K = len(self._coupler_tasks)
        if K:                            # the couplers' rows, on the OpenSim coordinates themselves
            out = Stack(np.zeros((F, K)), np.zeros((F, K)), np.zeros((F, K)), np.full((F, K), np.nan),
                        np.full((F, K), np.nan), None if A is None else np.zeros((F, K, self.n_coordinates)), None)
            for k, task in enumerate(self._coupler_tasks):
                task.evaluate(Place(k, slice(k, k + 1)), TaskInputs(q, None, None, None, self.n_coordinates), out)
            y, yd, weight = (np.concatenate([a, b], axis=1)
                             for a, b in ((y, out.y), (yd, out.yd), (weight, out.task_weight)))
            position_error = np.concatenate([position_error, out.position_error], axis=1)
            rotation_error = np.concatenate([rotation_error, out.rotation_error], axis=1)
            if A is not None:
                A = np.concatenate([A, out.A], axis=1)
        if self.n_points:                # the PointConstraints' rows: x_2 - x_1, towards 0
            P = self.n_points
            if jacobians:
                xp, Jp = self.point_kinematics.positions_and_jacobian(q)
            else:
                xp = self.point_kinematics.positions(q)
            gap = (xp[:, P:] - xp[:, :P]).reshape(F, 3 * P)
            y, yd = np.concatenate([y, gap], axis=1), np.concatenate([yd, np.zeros((F, 3 * P))], axis=1)
            weight = np.concatenate([weight, np.full((F, 3 * P), self.point_weight)], axis=1)
            position_error = np.concatenate([position_error, np.linalg.norm(gap.reshape(F, P, 3), axis=-1)], axis=1)
            rotation_error = np.concatenate([rotation_error, np.full((F, P), np.nan)], axis=1)
            if A is not None:
                A = np.concatenate([A, Jp[:, 3 * P:] - Jp[:, :3 * P]], axis=1)
        if A is not None and self.held:
            A = A @ coupler_tangent(q, self.held)
        B = np.zeros((F, y.shape[1], 0)) if jacobians else None
        return Evaluation(y, yd, weight, position_error, rotation_error, None, A, B)


# ----------------------------------------------------------------------------------- results

@dataclass
class IKResult:
    """A solved trial. Coordinates `q` (F, n) in metres and radians, model order; per frame the
    OpenSim error report (see the module docstring) and the worst marker; per marker and frame
    `marker_errors` (F, M) in metres, NaN where the marker is missing; per coordinate task the
    signed error q - target (F, T); per coordinate coupler (`constraint_names`) the residual
    q_dep - s f(q_ind) (F, K), radians or metres, then per PointConstraint the distance
    |x_1 - x_2| between its two points, metres. `objective` is the minimised cost, sum_i w_i |e_i|^2 +
    sum_j w_j (q_j - target_j)^2 (+ w sum_k c_k^2 for constraints held as a penalty of weight w).
    `determined` (F,) is False in frames whose markers (and coordinate tasks) fix fewer free
    coordinates than all the trial's markers would, `determined_coordinates` how many they fix;
    in a frame without any marker the error report is NaN (nothing was measured). `passes` counts
    warm-start passes, `iterations` sums the engine's iterations per frame over them.
    `above_neighbour` (F,) marks the frames whose objective was above a neighbour's solution (a
    worse local minimum) and were solved again from it (MarkerIK.solve). Refined across frames
    (smoothing.py): the `cutoff` (Hz), the smoothness weight per coordinate `smoothing`, the
    refinement's `trajectory_iterations`; with contacts the spans per contact marker `contacts`
    ({name: [Span]}), the `floor` (metres along +Y), per frame and contact marker (`contact_names`)
    `pin_error` |x - pin| (NaN where no span holds it) and `floor_penetration` (0 above it)."""

    time: np.ndarray
    q: np.ndarray
    coordinate_names: list
    rotational: np.ndarray
    marker_names: list
    marker_weights: np.ndarray
    measured: np.ndarray
    model_markers: np.ndarray
    marker_errors: np.ndarray
    total_squared_error: np.ndarray
    marker_error_rms: np.ndarray
    marker_error_max: np.ndarray
    worst_marker: list
    weighted_squared_error: np.ndarray
    task_names: list = field(default_factory=list)
    coordinate_errors: np.ndarray | None = None
    objective: np.ndarray | None = None
    iterations: np.ndarray | None = None
    converged: np.ndarray | None = None
    passes: int = 1
    seconds: float = 0.0
    constraint_names: list = field(default_factory=list)
    constraint_errors: np.ndarray | None = None
    determined: np.ndarray | None = None
    determined_coordinates: np.ndarray | None = None
    accuracy: float | None = None
    above_neighbour: np.ndarray | None = None
    cutoff: float | None = None
    smoothing: np.ndarray | None = None
    trajectory_iterations: int = 0
    contacts: dict = field(default_factory=dict)
    floor: float | None = None
    contact_names: tuple = ()
    pin_error: np.ndarray | None = None
    floor_penetration: np.ndarray | None = None

    @property
    def n_frames(self) -> int:
        return self.q.shape[0]

    def coordinates(self, degrees: bool = True) -> np.ndarray:
        """q with rotational coordinates in degrees (as a .mot stores them) when `degrees`."""
        out = self.q.copy()
        if degrees:
            out[:, self.rotational] *= 180.0 / np.pi
        return out

    def coordinate(self, name: str, degrees: bool = True) -> np.ndarray:
        return self.coordinates(degrees)[:, self.coordinate_names.index(name)]


# ----------------------------------------------------------------------------------- problem

def frame_range(time, start: float = -np.inf, end: float = np.inf) -> np.ndarray:
    """Indices of the frames OpenSim's IK tool solves for time_range (start, end): from the frame
    nearest to start to the frame nearest to end (a tie goes to the later frame), as opensim 4.6
    picks them."""
    time = np.asarray(time, dtype=float)
    if not time.size:
        return np.arange(0)

    def nearest(t):
        if not np.isfinite(t):
            return 0 if t < 0 else time.size - 1
        j = int(np.searchsorted(time, t, side="left"))
        if j == 0:
            return 0
        if j == time.size:
            return time.size - 1
        return j - 1 if t - time[j - 1] < time[j] - t else j

    first, last = nearest(start), nearest(end)
    return np.arange(first, last + 1)


class MarkerIK:
    """One marker IK problem: a model, the measured markers of the frames to solve, the marker
    and coordinate tasks, and the prescribed coordinates.

    `markers` is a MarkerData (metres), `tasks` an IKTaskSet, `coordinate_data` the Storage of the
    coordinate file (needed by from_file tasks; rotational columns in degrees when the file says
    so). `prescribed` maps coordinate names to values (a number or one per frame, radians or
    metres) to hold them at; locked coordinates not named there are held at their default value.
    Coordinate tasks on prescribed coordinates are dropped (OpenSim excludes them too)."""

    def __init__(self, om: OpenSimModel, markers: MarkerData, tasks: IKTaskSet, coordinate_data: Storage | None = None,
                 time_range=(-np.inf, np.inf), prescribed: dict | None = None, normalize: bool = True,
                 constraint_weight: float = np.inf):
        self.source_model = om
        self.constraint_weight = float(constraint_weight)
        if not self.constraint_weight >= 0:
            raise ValueError(f"constraint_weight must be >= 0, got {constraint_weight}")
        self.enforced = bool(om.couplers) and np.isinf(self.constraint_weight)
        self.om = om
        c = om.coupling
        frames = frame_range(markers.time, *time_range)
        if not frames.size:
            raise ValueError(f"{markers.path or 'the marker data'} has no frames")
        self.frames = frames
        self.time = markers.time[frames]
        F = frames.size

        applied = {t.name: t.weight for t in tasks.marker_tasks if t.apply}
        model_markers = set(om.markers.names)
        self.notes = []
        if not applied:
            applied = {n: 1.0 for n in markers.names if n in model_markers}
            self.notes.append(f"the IKTaskSet applies no marker task: tracking all {len(applied)} model markers "
                              "of the marker file at weight 1, as OpenSim does")
            warnings.warn(self.notes[-1], OpenSimFileWarning, stacklevel=2)
        self.marker_names = [n for n in markers.names if n in applied and n in model_markers]
        self.ignored_markers = sorted(n for n in applied if n not in self.marker_names)
        if not self.marker_names:
            raise ValueError(f"no marker of {markers.path or 'the marker data'} is a model marker with an applied "
                             "IKMarkerTask: nothing to track (OpenSim stops here too: 'Marker data does not "
                             "correspond to any model markers')")
        self.marker_weights = np.array([applied[n] for n in self.marker_names], dtype=float)
        self.measured = markers.select(self.marker_names)[frames] if self.marker_names else np.zeros((F, 0, 3))

        prescribed = dict(prescribed or {})
        for name in prescribed:
            c.index(name)                                  # KeyError for an unknown coordinate
        held = set(prescribed) | {n for n, locked in zip(c.names, c.locked) if locked}
        self.q_start = c.default_coordinates(F)
        for name, value in prescribed.items():
            self.q_start[:, int(c.index(name))] = np.broadcast_to(np.asarray(value, dtype=float), (F,))
        self.prescribed = sorted(held, key=c.names.index)
        dependents = {c.names[k.dependent] for k in om.couplers} if self.enforced else set()
        self.q_start = om.fill_dependents(self.q_start)

        task_list, targets = [], []
        for t in tasks.coordinate_tasks:
            if not t.apply:
                continue
            if t.name not in c.names:
                raise KeyError(f"IKCoordinateTask {t.name!r}: the model has no coordinate of that name")
            if t.name in held:
                continue
            if t.name in dependents:
                self.notes.append(f"IKCoordinateTask {t.name!r} left out: a CoordinateCouplerConstraint sets that "
                                  "coordinate from another")
                continue
            i = int(c.index(t.name))
            if t.value_type == "manual_value":
                target = np.full(F, t.value)
            elif t.value_type == "from_file":
                target = self._from_file(coordinate_data, t.name, bool(c.rotational[i]))
            else:
                target = np.full(F, c.default[i])
            task_list.append((t.name, t.weight))
            targets.append(target)
        self.coordinate_targets = np.stack(targets, axis=1) if targets else np.zeros((F, 0))
        self.scene = MarkerScene(om, self.marker_names, self.marker_weights, task_list,
                                 frozen=sorted(prescribed), normalize=normalize,
                                 couplers=om.couplers, coupler_weight=self.constraint_weight,
                                 point_weight=self.constraint_weight)
        self.q_start = self.scene.project(self.q_start)
        self.object_poses = self.scene.objects(self.measured)
        present = np.all(np.isfinite(self.measured), axis=-1)
        self.frame_weights = self.scene.marker_scale(present) * self.marker_weights     # (F, M)
        scene = self.scene
        self.rank, self.full_rank = self._ranks()
        self.determined = self.rank >= self.full_rank
        # Weak coordinate tasks on every free coordinate, given (towards the frame's start: the
        # previous frame's solution) only in frames the markers do not determine.
        free = np.flatnonzero(~scene.frozen)
        self._stay = free
        points = (MarkerKinematics(om.model, c, om.points.segments, om.points.locations)
                  if om.point_names and self.constraint_weight > 0 else None)
        self.gauss_newton = GaussNewton(scene.kinematics, ~scene.frozen, scene.lower, scene.upper,
                                        np.concatenate([scene.task_coordinates, free]),
                                        np.concatenate([scene.task_weights, np.full(free.size, STAY_WEIGHT)]),
                                        couplers=scene.couplers, coupler_weight=scene.coupler_weight,
                                        held=scene.held, points=points, point_weight=self.constraint_weight)
        if points is not None:
            self.q_start = self.gauss_newton.place(self.q_start)

    def _ranks(self, chunk: int = 256):
        """Per frame, how many free coordinates the markers present (weight > 0) and the given
        coordinate tasks determine: the rank of their stacked Jacobian at the start pose (through
        the held couplers); and that rank with every marker present (the trial's best case)."""
        scene = self.scene
        free = ~scene.frozen
        F, M = self.time.size, self.n_markers
        weighted = np.repeat(self.marker_weights > 0, 3)
        task_rows = np.zeros((len(scene.task_names), scene.n_coordinates))
        task_rows[np.arange(len(scene.task_names)), scene.task_coordinates] = 1.0
        task_rows *= (scene.task_weights > 0)[:, None]

        def rank(q, present, given):
            _, J = scene.kinematics.positions_and_jacobian(q) if M else (None, np.zeros((q.shape[0], 0, q.shape[1])))
            J = J * (np.repeat(present, 3, axis=1) & weighted)[..., None]
            A = np.concatenate([J, task_rows * given[..., None]], axis=1)
            if scene.held:
                A = A @ coupler_tangent(q, scene.held)
            A = A[..., free]
            if not A.size:
                return np.zeros(q.shape[0], dtype=int)
            return np.linalg.matrix_rank(A, tol=1e-9 * max(1.0, float(np.abs(A).max())))

        present = np.all(np.isfinite(self.measured), axis=-1)
        given = np.isfinite(self.coordinate_targets)
        ranks = np.concatenate([rank(self.q_start[i:i + chunk], present[i:i + chunk], given[i:i + chunk])
                                for i in range(0, F, chunk)]) if F else np.zeros(0, dtype=int)
        full = int(rank(self.q_start[:1], np.ones((1, M), bool), np.ones((1, given.shape[1]), bool))[0])
        return ranks, full

    @property
    def n_markers(self) -> int:
        return len(self.marker_names)

    def _from_file(self, data: Storage | None, name: str, rotational: bool) -> np.ndarray:
        if data is None:
            raise ValueError(f"IKCoordinateTask {name!r} takes its values from_file, but no coordinate_file is given")
        if name not in data:
            raise KeyError(f"IKCoordinateTask {name!r}: the coordinate file {data.path or ''} has no column {name!r}")
        values = data.column(name) * (np.pi / 180.0 if rotational and data.degrees else 1.0)
        return np.interp(self.time, data.time, values)

    @classmethod
    def from_setup(cls, setup: IKSetup, om: OpenSimModel | None = None, prescribed: dict | None = None,
                   normalize: bool = True) -> "MarkerIK":
        """The problem an InverseKinematicsTool setup describes (its model unless `om` is given)."""
        if om is None:
            if setup.model_file is None:
                raise OpenSimFileError(setup.path, None, "the setup names no model_file")
            om = load_osim(setup.model_file)
        if setup.marker_file is None:
            raise OpenSimFileError(setup.path, None, "the setup names no marker_file")
        coordinate_data = read_storage(setup.coordinate_file) if setup.coordinate_file is not None else None
        return cls(om, read_trial(setup.marker_file), setup.tasks, coordinate_data, setup.time_range, prescribed,
                   normalize, setup.constraint_weight)

    # --------------------------------------------------------------------------------- solve

    def settings(self, accuracy: float = DEFAULT_ACCURACY, max_iterations: int = DEFAULT_MAX_ITERATIONS,
                 method: str = "pinv") -> Settings:
        return Settings(method=method, precision=accuracy, max_iterations=max_iterations, fit=True)

    @one_blas_thread()
    def solve(self, accuracy: float = DEFAULT_ACCURACY, max_iterations: int = DEFAULT_MAX_ITERATIONS,
              warm_start: str = "previous", max_passes: int | None = None, method: str = "pinv",
              q0=None, neighbours: bool | str | None = None, seed_root: bool | None = None,
              cutoff: float | None = None, contacts: str | None = None, floor: float | None = None,
              contact_markers=None) -> IKResult:
        """Solve every frame (module docstring). q0 (n,) or (F, n) replaces the start pose (the
        model's default pose with the prescribed values); prescribed coordinates keep theirs.
        `method` is the engine's, for frames handed on to it. `neighbours` (default: with
        warm_start 'previous') solves again from a neighbour's solution the frames whose
        objective is above what that leads to (`_above_neighbours`): the frames a neighbour's
        solution scores lower, or with 'solve' every frame. `seed_root` (default: with
        warm_start 'previous' and no q0) starts frames with the root on its markers (`_seeded`).
        `cutoff` (Hz) then refines all frames together with the keypoint fit's acceleration
        penalty, `contacts` 'auto' holds the feet where they stand still and above the floor
        (`floor` metres along +Y instead of the estimate, `contact_markers` instead of the markers
        on the feet): smoothing.py. Without them (the default) the frames are OpenSim's, alone."""
        if warm_start not in WARM_STARTS:
            raise ValueError(f"warm_start must be one of {WARM_STARTS}, not {warm_start!r}")
        refined = cutoff is not None or contacts is not None
        if refined or floor is not None or contact_markers is not None:
            check_options(cutoff, contacts, floor, frame_rate(self.time))
            if contact_markers is not None and contacts is None:
                raise ValueError("contact_markers name the markers contacts='auto' holds: give contacts='auto'")
        started = _time.perf_counter()
        settings = self.settings(accuracy, max_iterations, method)
        F = self.time.size
        start = self.q_start.copy()
        if q0 is not None:
            q0 = np.broadcast_to(np.asarray(q0, dtype=float), start.shape)
            free = ~self.scene.frozen
            start[:, free] = q0[:, free]
            start = self.scene.project(start)
        else:
            start = self.scene.project(off_limits(start, self.scene.lower, self.scene.upper, ~self.scene.frozen))
        if seed_root or (seed_root is None and warm_start == "previous" and q0 is None):
            start = self._seeded(start)
        q = start.copy()
        iterations = np.zeros(F, dtype=int)
        converged = np.zeros(F, dtype=bool)

        def run(rows, begin):
            stay = np.where(self.determined[rows, None], np.nan, begin[:, self._stay])
            targets = np.concatenate([self.coordinate_targets[rows], stay], axis=1)
            q[rows], its, ok = self.gauss_newton.solve(begin, self.measured[rows], self.frame_weights[rows],
                                                       targets, accuracy, max_iterations)
            iterations[rows] += its
            converged[rows] = ok
            rest = rows[~ok & (its < max_iterations) & self.determined[rows]]      # stopped improving:
                                                                                   # the engine goes on
            if rest.size and not self.gauss_newton.points_held:   # (its scene has no held PointConstraints)
                r = solve_animation(self.scene, q[rest], self.object_poses[rest], settings=settings,
                                    values=self.coordinate_targets[rest])
                q[rest] = r.q
                iterations[rest] += r.iterations
                converged[rest] = r.converged

        # A frame the markers determine after one they do not starts afresh, as frame 0 does.
        restart = self.determined & ~np.concatenate([[True], self.determined[:-1]])
        if warm_start == "none" or F == 1:
            run(np.arange(F), start)
            passes = 1
        elif warm_start == "sweep":                      # OpenSim's order, one frame at a time
            for f in range(F):
                fresh = f == 0 or restart[f]
                run(np.array([f]), start[f:f + 1] if fresh else self._carry(start[f:f + 1], q[f - 1:f]))
            passes = 1
        else:
            heads = np.union1d(np.arange(0, F, WARM_STRIDE), np.flatnonzero(restart))
            run(heads, start[heads])
            begin = start.copy()                         # the start each frame was last solved from
            solved = np.zeros(F, dtype=bool)
            solved[heads] = True
            stale = np.zeros(F, dtype=bool)              # turned by whole turns: to be solved again
            turned = self._unwrap(q[heads], restart[heads])
            stale[heads] = np.any(turned != q[heads], axis=1)
            q[heads] = turned
            passes = 1
            limit = np.inf if max_passes is None else max_passes
            while passes < limit or not solved.all() or stale.any():
                new_begin = self._carry(start, np.vstack([q[:1], q[:-1]]))
                new_begin[restart] = start[restart]
                ready = np.concatenate([[False], solved[:-1]])       # frame 0 keeps the start pose
                moved = np.max(np.abs(new_begin - begin), axis=1) > accuracy
                rows = np.flatnonzero(ready & (moved | ~solved | stale))
                if not rows.size:
                    break
                if passes >= BATCHED_PASSES and max_passes is None:
                    # still moving: settle the rest in one sweep, frame f from frame f-1's solution
                    for f in range(int(rows[0]), F):
                        carried = start[f] if restart[f] else self._carry(start[f:f + 1], q[f - 1:f])[0]
                        if solved[f] and not stale[f] and np.max(np.abs(carried - begin[f])) <= accuracy:
                            continue
                        begin[f] = carried
                        run(np.array([f]), begin[f:f + 1])
                        solved[f], stale[f] = True, False
                    passes += 1
                    break
                begin[rows] = new_begin[rows]
                run(rows, begin[rows])
                solved[rows], stale[rows] = True, False
                passes += 1
        above = np.zeros(F, dtype=bool)
        if neighbours not in (None, True, False, "solve"):
            raise ValueError(f"neighbours must be True, False, None or 'solve', not {neighbours!r}")
        if neighbours or (neighbours is None and warm_start == "previous"):
            above = self._above_neighbours(q, start, run, accuracy, every=neighbours == "solve")
        q = self.scene.fill(q)
        if refined:
            smoothed = refine(self, q, cutoff=cutoff, contacts=contacts, floor=floor, contact_names=contact_markers,
                              accuracy=accuracy, max_iterations=max_iterations)
            q, converged = smoothed.q, converged & smoothed.converged
        result = self.report(q)
        if refined:
            result.cutoff, result.smoothing, result.trajectory_iterations = cutoff, smoothed.smoothing, smoothed.iterations
            held = smoothed.contacts
            if held is not None:
                result.contacts, result.floor, result.contact_names = held.spans, held.floor, held.names
                result.pin_error, result.floor_penetration = smoothed.pin_error, smoothed.floor_penetration
        result.iterations, result.converged, result.passes = iterations, converged, passes
        result.above_neighbour = above
        result.determined, result.determined_coordinates = self.determined.copy(), self.rank.copy()
        result.accuracy = float(accuracy)
        result.seconds = _time.perf_counter() - started
        return result

    def _seeded(self, start):
        """`start` with the root placed on its markers (root_seed.py) in the frames the markers
        determine where that lowers the objective: of the two Euler branches the lower, and at
        equal objective (a flip costs the markers nothing) the one nearer the start."""
        seed = RootSeed.of(self.om.model, self.om.coupling, self.scene.frozen)
        on_root = np.asarray(self.scene.segments) == (seed.segment if seed is not None else -1)
        if seed is None or on_root.sum() < MIN_ROOT_MARKERS:
            return start
        candidates, ok = seed.seeds(self.scene.locations[on_root], self.measured[:, on_root],
                                    self.frame_weights[:, on_root], start)
        if not (ok & self.determined).any():
            return start
        candidates = np.stack([self.scene.project(self.scene.fill(c)) for c in candidates])
        scores = self.objectives(np.concatenate([candidates, start[None]]))                 # (3, F)
        own, scores = scores[2], scores[:2]
        near = np.abs(candidates[:, :, seed.turn_coordinates] - start[None, :, seed.turn_coordinates]).sum(axis=2)
        tie = np.abs(scores[0] - scores[1]) <= 1e-12 * np.abs(scores).max(axis=0)
        pick = np.where(tie, near[1] < near[0], scores[1] < scores[0]).astype(int)
        chosen = np.take_along_axis(candidates, pick[None, :, None], axis=0)[0]
        best = np.take_along_axis(scores, pick[None], axis=0)[0]
        use = ok & self.determined & (best < own)
        out = start.copy()
        out[use] = chosen[use]
        return out

    def _suspects(self, q, start, own) -> tuple:
        """(frames, starts): the frames the markers determine where the previous frame's
        solution, the next one's or the mean of the two (each with the frame's own prescribed
        values) scores below the frame's own objective on its markers; each starts from the
        lowest of those."""
        ok = self.determined
        before, after = np.vstack([q[:1], q[:-1]]), np.vstack([q[1:], q[-1:]])
        has_before, has_after = np.append(False, ok[:-1]), np.append(ok[1:], False)
        options = [(before, has_before), (after, has_after), ((before + after) / 2, has_before & has_after)]
        guesses = np.stack([self._carry(start, guess) for guess, _ in options])
        scores = self.objectives(guesses)
        best, begin = own.copy(), q.copy()
        for (_, valid), guess, scored in zip(options, guesses, scores):
            lower = ok & valid & (scored < best)
            best[lower], begin[lower] = scored[lower], guess[lower]
        rows = np.flatnonzero(best < own)
        return rows, begin[rows]

    def _above_neighbours(self, q, start, run, accuracy: float, every: bool = False) -> np.ndarray:
        """Frames whose objective is above what solving them from their neighbours' solutions
        gives (module docstring, "A worse local minimum"), solved so; q is updated in place and
        the frames so lowered are returned. Round one solves each frame that holds a free clamped
        coordinate on a limit (limit_start.py) from the start pose, then from its successor's
        solution and from its predecessor's (with `every`: each frame from both), then the
        suspects (`_suspects`); each further round solves the neighbours of the frames the last
        round lowered from their new solutions, until a round lowers none. A new solution is
        kept where it lowers the frame's objective by more than NEIGHBOUR_MARGIN of it and by
        more than accuracy^2 (the objective's resolution at that accuracy, m^2)."""
        F = q.shape[0]
        above = np.zeros(F, dtype=bool)
        if F < 2:
            return above
        own = self.objectives(q[None])[0]

        def attempt(rows, begin):
            """Solve `rows` from `begin`; keep what is lower; the frames lowered."""
            before = q[rows].copy()
            run(rows, begin)
            now = self.objectives(q[None])[0]
            drop = own[rows] - now[rows]
            lower = (drop > NEIGHBOUR_MARGIN * np.abs(own[rows])) & (drop > accuracy ** 2)
            q[rows[~lower]] = before[~lower]
            own[rows[lower]] = now[rows[lower]]
            above[rows[lower]] = True
            return rows[lower]

        ok, scene = self.determined, self.scene
        held = ok & np.any(off_limits(q, scene.lower, scene.upper, ~scene.frozen) != q, axis=1)
        changed = [attempt(np.flatnonzero(held), start[held])] if held.any() else []
        for shift in (-1, 1):                              # from the successor, then the predecessor
            valid = np.roll(ok, shift) & ok & (held | every)
            valid[0 if shift == 1 else F - 1] = False
            rows = np.flatnonzero(valid)
            if rows.size:
                changed.append(attempt(rows, self._carry(start[rows], q[rows - shift])))
        if not every:
            rows, begin = self._suspects(q, start, own)
            if rows.size:
                changed.append(attempt(rows, begin))
        changed = np.unique(np.concatenate(changed)) if changed else np.zeros(0, dtype=int)
        for _ in range(F):
            nxt = {}                                          # neighbour -> the changed frame it starts from
            for f in changed:
                for g in (f - 1, f + 1):
                    if 0 <= g < F and ok[g] and g not in nxt:
                        nxt[g] = f
            if not nxt:
                break
            rows = np.array(sorted(nxt), dtype=int)
            changed = attempt(rows, self._carry(start[rows], q[[nxt[g] for g in rows]]))
        return above

    def _unwrap(self, q, restart):
        """q (K, n) of frames in time order with the free rotational coordinates that have no limits
        moved by whole turns so that each frame's is within half a turn of the frame's before (as
        numpy's unwrap), starting afresh at each frame where `restart`."""
        scene = self.scene
        rotational = np.flatnonzero(self.om.coupling.rotational & ~scene.frozen
                                    & np.isinf(scene.lower) & np.isinf(scene.upper))
        if q.shape[0] < 2 or not rotational.size:
            return q
        x = q[:, rotational]
        jumps = -2 * np.pi * np.round(np.diff(x, axis=0) / (2 * np.pi))
        jumps[restart[1:]] = 0.0
        total = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(jumps, axis=0)])
        last = np.maximum.accumulate(np.where(restart, np.arange(q.shape[0]), 0))
        out = q.copy()
        out[:, rotational] = x + total - total[last]
        return out

    def _carry(self, start, previous):
        """Starts from the previous frames' solutions, with each frame's own prescribed values."""
        begin = previous.copy()
        begin[:, self.scene.frozen] = start[:, self.scene.frozen]
        return self.scene.project(begin)

    # -------------------------------------------------------------------------------- report

    def objectives(self, qs) -> np.ndarray:
        """The objective (as `report` gives it) of K pose sets at once: qs (K, F, n), each a pose
        per frame, couplers held exactly filled in; (K, F). One batched evaluation of the
        markers for all K, for choosing between candidate starts."""
        qs = np.asarray(qs, dtype=float)
        K, F, n = qs.shape
        q = self.scene.fill(qs.reshape(K * F, n))
        M = len(self.marker_names)
        measured = np.broadcast_to(self.measured, (K,) + self.measured.shape).reshape(K * F, M, 3)
        x = self.scene.kinematics.positions(q) if M else np.zeros((K * F, 0, 3))
        squared = np.sum((measured - x) ** 2, axis=-1)
        present = np.isfinite(squared)
        squared = np.where(present, squared, 0.0)
        objective = np.sum(squared * self.scene.marker_scale(present) * self.marker_weights, axis=1)
        targets = np.broadcast_to(self.coordinate_targets, (K,) + self.coordinate_targets.shape)
        errors = q[:, self.scene.task_coordinates] - targets.reshape(K * F, -1)
        objective = objective + errors ** 2 @ self.scene.task_weights
        if self.scene.coupler_weight:
            objective = objective + self.scene.coupler_weight * np.sum(self.om.constraint_residuals(q) ** 2, axis=1)
        if self.gauss_newton.points is not None and not self.gauss_newton.points_held:
            objective = objective + self.constraint_weight * np.sum(self.om.point_residuals(q) ** 2, axis=(1, 2))
        return objective.reshape(K, F)

    def report(self, q) -> IKResult:
        """The error report (IKResult without solver counters) for coordinates q (F, n), e.g. to
        score another tool's solution of the same problem."""
        q = np.asarray(q, dtype=float)
        F, M = q.shape[0], len(self.marker_names)
        if q.shape != self.q_start.shape:
            raise ValueError(f"q must have shape {self.q_start.shape}, got {q.shape}")
        model_markers = self.scene.kinematics.positions(q) if M else np.zeros((F, 0, 3))
        errors = np.linalg.norm(self.measured - model_markers, axis=-1)         # NaN where missing
        squared = np.where(np.isnan(errors), 0.0, errors ** 2)
        any_present = np.any(~np.isnan(errors), axis=1)
        total = np.where(any_present, squared.sum(axis=1), np.nan)          # no marker: nothing measured
        rms = np.sqrt(total / M) if M else np.full(F, np.nan)
        worst = np.argmax(squared, axis=1) if M else np.zeros(F, dtype=int)
        largest = np.where(any_present, np.sqrt(squared.max(axis=1, initial=0.0)), np.nan)
        worst_names = [self.marker_names[k] if ok else "" for k, ok in zip(worst, any_present)]
        weighted = squared @ self.marker_weights
        cols = self.scene.task_coordinates
        coordinate_errors = q[:, cols] - self.coordinate_targets
        marker_term = np.sum(squared * self.scene.marker_scale(~np.isnan(errors)) * self.marker_weights, axis=1)
        objective = marker_term + (coordinate_errors ** 2) @ self.scene.task_weights
        residuals = self.om.constraint_residuals(q)
        objective = objective + self.scene.coupler_weight * np.sum(residuals ** 2, axis=1)
        distances = np.linalg.norm(self.om.point_residuals(q), axis=-1)                     # (F, P)
        if self.gauss_newton.points is not None and not self.gauss_newton.points_held:
            objective = objective + self.constraint_weight * np.sum(distances ** 2, axis=1)
        residuals = np.concatenate([residuals, distances], axis=1)
        c = self.om.coupling
        return IKResult(time=self.time.copy(), q=q.copy(), coordinate_names=list(c.names),
                        rotational=np.asarray(c.rotational, bool).copy(), marker_names=list(self.marker_names),
                        marker_weights=self.marker_weights.copy(), measured=self.measured.copy(),
                        model_markers=model_markers, marker_errors=errors, total_squared_error=total,
                        marker_error_rms=rms, marker_error_max=largest, worst_marker=worst_names,
                        weighted_squared_error=weighted, task_names=list(self.scene.task_names),
                        coordinate_errors=coordinate_errors, objective=objective,
                        constraint_names=[k.name for k in self.om.couplers] + self.om.point_names,
                        constraint_errors=residuals)


def solve_marker_ik(om: OpenSimModel, markers: MarkerData, tasks: IKTaskSet, coordinate_data: Storage | None = None,
                    time_range=(-np.inf, np.inf), prescribed: dict | None = None, **solve_options) -> IKResult:
    """MarkerIK(om, markers, tasks, coordinate_data, time_range, prescribed).solve(**solve_options)."""
    return MarkerIK(om, markers, tasks, coordinate_data, time_range, prescribed).solve(**solve_options)


# ------------------------------------------------------------------------------------- files

def write_motion(path, result: IKResult, name: str = "Coordinates") -> None:
    """The coordinates as OpenSim's IK tool writes them: a .mot with rotational coordinates in
    degrees (inDegrees=yes), translations in metres, columns in model order after time."""
    data = np.column_stack([result.time, result.coordinates(degrees=True)])
    write_storage(path, ["time"] + result.coordinate_names, data, name=name, in_degrees=True)


def write_marker_errors(path, result: IKResult, name: str = "Model Marker Errors from IK") -> None:
    """time, total_squared_error, marker_error_RMS, marker_error_max (metres, squared metres)."""
    data = np.column_stack([result.time, result.total_squared_error, result.marker_error_rms, result.marker_error_max])
    write_storage(path, ["time", "total_squared_error", "marker_error_RMS", "marker_error_max"], data,
                  name=name, in_degrees=False)


def write_marker_locations(path, result: IKResult, name: str = "Model Marker Locations from IK") -> None:
    """The model markers in ground (metres): <marker>_tx, _ty, _tz per marker in use."""
    labels = ["time"] + [f"{m}_{axis}" for m in result.marker_names for axis in ("tx", "ty", "tz")]
    data = np.column_stack([result.time, result.model_markers.reshape(result.n_frames, -1)])
    write_storage(path, labels, data, name=name, in_degrees=False)


@dataclass
class IKRun:
    """What `run_ik_setup` did: the setup, the solved result, the files written by kind
    ('motion', 'marker_errors', 'marker_locations') and the applied marker tasks left out because
    the model or the marker file lacks their marker (OpenSim leaves them out silently)."""

    setup: IKSetup
    result: IKResult
    files: dict
    ignored_markers: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def output_paths(setup: IKSetup, output_dir=None) -> dict:
    """Where OpenSim's tool writes a setup's outputs: output_motion_file as named (relative to the
    setup file's folder; none when empty), the reports `<tool name>_ik_marker_errors.sto` and
    `<tool name>_ik_model_marker_locations.sto` in results_directory when asked for.
    `output_dir` puts them all there instead (the .mot keeps its file name)."""
    paths = {}
    results = Path(output_dir) if output_dir is not None else Path(setup.results_directory or setup.path.parent)
    if setup.output_motion_file is not None:
        paths["motion"] = setup.output_motion_file if output_dir is None else results / setup.output_motion_file.name
    if setup.report_errors:
        paths["marker_errors"] = results / f"{setup.name}_ik_marker_errors.sto"
    if setup.report_marker_locations:
        paths["marker_locations"] = results / f"{setup.name}_ik_model_marker_locations.sto"
    return paths


@one_blas_thread()
def run_ik_setup(path, output_dir=None, om: OpenSimModel | None = None, **solve_options) -> IKRun:
    """Run an InverseKinematicsTool setup file as `opensim-cmd run-tool` does: solve its trial and
    write the .mot it names and the reports it asks for (see `output_paths`). `solve_options` go
    to MarkerIK.solve; the setup's accuracy is used unless they give one. BLAS runs on one thread
    throughout (setting the problem up included: its rank tests are small SVDs)."""
    setup = read_ik_setup(path)
    problem = MarkerIK.from_setup(setup, om)
    solve_options.setdefault("accuracy", setup.accuracy)
    result = problem.solve(**solve_options)
    files = output_paths(setup, output_dir)
    writers = {"motion": write_motion, "marker_errors": write_marker_errors, "marker_locations": write_marker_locations}
    for kind, target in files.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        writers[kind](target, result)
    return IKRun(setup, result, files, list(problem.ignored_markers), list(problem.notes))


# --------------------------------------------------------------------------------- command line

def frame_lines(result: IKResult) -> list:
    """One line per frame, as OpenSim's IK tool logs them."""
    determined = np.ones(result.n_frames, bool) if result.determined is None else result.determined
    return [f"Frame {f} (t = {result.time[f]:g}): total squared error = {result.total_squared_error[f]:.6g}, "
            f"marker error: RMS = {result.marker_error_rms[f]:.6g}, max = {result.marker_error_max[f]:.6g} "
            f"({result.worst_marker[f] or '-'})"
            + ("" if determined[f] else f" [not determined: the markers fix {result.determined_coordinates[f]} "
                                        "coordinates; kept near the previous frame]")
            for f in range(result.n_frames)]


def _spans(time, mask) -> str:
    """'t = a-b s, c s, ...' for the runs of True in mask."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))
    return ", ".join(f"{time[a]:g}-{time[b - 1]:g} s" if b - a > 1 else f"{time[a]:g} s"
                     for a, b in zip(edges[::2], edges[1::2]))


def summary_lines(run: IKRun) -> list:
    """What `python -m solver ik` prints after a run."""
    r, setup = run.result, run.setup
    F = r.n_frames
    worst = int(np.nanargmax(r.marker_error_max)) if F and not np.all(np.isnan(r.marker_error_max)) else 0
    lines = [f"{setup.name or setup.path.name}: {F} frames ({r.time[0]:g} to {r.time[-1]:g} s), "
             f"{len(r.marker_names)} markers, {len(r.task_names)} coordinate tasks, "
             f"{len(r.coordinate_names)} coordinates",
             f"solved in {r.seconds:.3f} s ({1e3 * r.seconds / max(F, 1):.2f} ms/frame), "
             f"{r.passes} warm-start pass(es), converged {int(np.sum(r.converged))}/{F}",
             f"marker error RMS: mean {np.nanmean(r.marker_error_rms):.3g} m, "
             f"largest {np.nanmax(r.marker_error_rms):.3g} m; "
             f"largest marker error {r.marker_error_max[worst]:.3g} m "
             f"({r.worst_marker[worst] or '-'} at t = {r.time[worst]:g} s)"]
    if r.accuracy is not None:
        lines.append(f"accuracy {r.accuracy:g}: a frame has converged when its last full step moved no coordinate by "
                     f"more than {r.accuracy:g} rad or m (OpenSim's accuracy is its assembler's stopping tolerance: "
                     "at the same value it stops earlier, where the objective is flat)")
    if r.constraint_names:
        worst = float(np.max(np.abs(r.constraint_errors))) if r.constraint_errors.size else 0.0
        weight = run.setup.constraint_weight
        held = "held exactly" if np.isinf(weight) else f"constraint_weight {weight:g}"
        lines.append(f"{len(r.constraint_names)} constraints (coordinate couplers, point constraints), largest "
                     f"residual {worst:.3g} ({held})")
    if r.determined is not None and not r.determined.all():
        lines.append(f"{int(np.sum(~r.determined))} frames the markers do not determine (kept near the previous "
                     f"frame, errors NaN where no marker is present): {_spans(r.time, ~r.determined)}")
    if r.above_neighbour is not None and r.above_neighbour.any():
        lines.append(f"{int(np.sum(r.above_neighbour))} frames sat in a worse local minimum than a neighbour's "
                     f"solution and were solved again from it: {_spans(r.time, r.above_neighbour)}")
    if r.smoothing is not None:
        missing = np.isnan(r.marker_errors).any(axis=1)
        lines.append(f"refined across frames (cutoff {r.cutoff if r.cutoff is not None else '-'} Hz): "
                     f"{r.trajectory_iterations} iterations"
                     + (f"; {int(missing.sum())} frames with markers missing, bridged by the smoothing: "
                        f"{_spans(r.time, missing)}" if missing.any() and r.cutoff is not None else ""))
    if r.contact_names:
        spans = sum(len(v) for v in r.contacts.values())
        lines.append(f"contacts: {spans} spans on {', '.join(r.contact_names)}; floor {r.floor:.4g} m (+Y); "
                     f"largest distance from a pin {np.nanmax(r.pin_error, initial=0.0) * 1000:.3g} mm, "
                     f"below the floor {np.max(r.floor_penetration, initial=0.0) * 1000:.3g} mm")
    if run.ignored_markers:
        lines.append("ignored marker tasks (marker not in the model or the marker file): "
                     + ", ".join(run.ignored_markers))
    lines += [f"note: {note}" for note in run.notes]
    lines += [f"wrote {path}" for path in run.files.values()]
    return lines


def cli(setup_path, output_dir=None, warm_start: str = "previous", verbose: bool = False, out=None, *,
        cutoff: float | None = None, contacts: str | None = None, floor: float | None = None) -> int:
    """`python -m solver ik SETUP.xml [--output-dir DIR] [--cutoff HZ] [--contacts auto] [--floor M]`:
    run the setup, print a summary (and one line per frame with `verbose`). Returns the exit
    status: 1 when the inputs or options are unusable."""
    import sys
    out = out or sys.stdout
    refine = {k: v for k, v in dict(cutoff=cutoff, contacts=contacts, floor=floor).items() if v is not None}
    try:
        run = run_ik_setup(setup_path, output_dir, warm_start=warm_start, **refine)
    except (OpenSimFileError, KeyError, ValueError, OSError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {message}", file=sys.stderr)
        return 1
    lines = (frame_lines(run.result) if verbose else []) + summary_lines(run)
    print("\n".join(lines), file=out)
    return 0

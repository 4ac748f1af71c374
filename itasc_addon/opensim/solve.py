"""Marker IK of an imported OpenSim model on an imported trial, in Blender: bind by marker name,
read the measured markers, solve every sample with the engine's `MarkerIK` (batched, in chunks
of frames so that the operator can show progress), bake the bones, keep the solution for the
panel and the files.

Binding. The model's markers (from its .osim) and the trial's measured markers (the MARKER
empties under the trial root, by their `itasc_opensim.marker` name) pair up by name; the markers
in use are the trial's, in the file's order, that the model has (as OpenSim picks them). Weights
and coordinate tasks come from the model's task set file when one is set, else every bound
marker has weight 1.

Measured positions. At each sample frame of the trial, a marker is present when it is not hidden
there (its ``hide_viewport``, keyed or not) and each of its location F-curves has a key there
(within 1e-3 frame; an axis without F-curve takes its current value). The .trc import leaves a
missing sample unkeyed and hidden, so deleting a key or hiding the marker takes a sample out,
and keying it back in (and showing it) puts it in. Positions go from the marker's parent space
to the world (the parent's world matrix and the marker's parent inverse, as they are at the
current frame), into the armature's space, then to metres (/ units_per_metre): OpenSim's ground.

Bake. With W_b(q) the body frames of the solution (``OpenSimModel.body_frames``) and C_b =
U(W_b(q_default))^-1 @ matrix_local_b (`importing`), each bone's target pose matrix is
M_b = U(W_b(q)) @ C_b and its keyed basis

    B_b = matrix_local_b^-1 @ matrix_local_parent @ M_parent^-1 @ M_b     (root: matrix_local_b^-1 @ M_b),

the inverse of how Blender composes a pose, so the evaluated pose bone matrix is M_b. Rotations
are keyed in each bone's rotation mode; locations where the joint translates (prismatic axes, an
offset child frame), where the result has a translation above 1e-6 m (float32 rest matrices
alone give about 1e-7), or where the bone's location is already animated or not zero. Keys of
those channels in the trial's frame range are replaced (`keys.replace_keys`); every other key
stays. The written channels are recorded as iTaSC bakes record theirs (``object.itasc.baked``),
so Clear Bake removes them.
"""

from __future__ import annotations

import time as _time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import bpy
import numpy as np

from ...solver.opensim import (IKMarkerTask, IKResult, IKTaskSet, MarkerData, MarkerIK, load_osim, read_ik_task_set,
                              write_marker_errors, write_motion)
from ...solver.runtime.blas_threads import one_blas_thread
from .. import keys
from .importing import scaled
from ..rig import RigError

FRAME_TOLERANCE = 1e-3
CHUNK = 250                 # frames per solve step (progress and Esc between steps)
LOCATION_TOLERANCE = 1e-6   # metres: below this a bone's location is rounding of the float32 rest matrices
_models = {}        # absolute .osim path -> (modification time, OpenSimModel)


# ----------------------------------------------------------------------------------- objects

def _kind(obj):
    return obj.itasc_opensim.kind if obj is not None and hasattr(obj, "itasc_opensim") else "NONE"


def model_object(obj):
    """The OpenSim model armature `obj` belongs to: itself, the armature a model marker hangs
    from, or the model bound to the trial `obj` is (or is a marker of). None otherwise."""
    kind = _kind(obj)
    if kind == "MODEL" and obj.type == "ARMATURE":
        return obj
    if kind == "MODEL_MARKER":
        return model_object(obj.parent) if _kind(obj.parent) == "MODEL" else None
    trial = obj if kind == "TRIAL" else obj.parent if kind == "MARKER" else None
    if trial is None:
        return None
    bound = [o for o in bpy.data.objects if _kind(o) == "MODEL" and o.itasc_opensim.trial == trial]
    in_scene = [o for o in bound if bpy.context.scene.objects.get(o.name) is not None]
    return (in_scene or bound or [None])[0]


def load_model(obj):
    """The OpenSimModel of a model armature, from its .osim (cached until the file changes)."""
    source = obj.itasc_opensim.source
    if not source:
        raise RigError(f"'{obj.name}' records no .osim file")
    path = Path(bpy.path.abspath(source))
    if not path.is_file():
        raise RigError(f"the model file {path} of '{obj.name}' is missing")
    stamp = path.stat().st_mtime_ns
    cached = _models.get(str(path))
    if cached is None or cached[0] != stamp:
        cached = (stamp, load_osim(path))
        _models[str(path)] = cached
    return cached[1]


def bone_map(obj):
    """[(body, bone)] of a model armature; RigError naming a bone that is gone."""
    pairs = [(item.body, item.bone) for item in obj.itasc_opensim.bodies]
    for body, bone in pairs:
        if obj.data.bones.get(bone) is None:
            raise RigError(f"bone '{bone}' of body '{body}' is missing from '{obj.name}' (renamed or deleted?)")
    return pairs


@dataclass
class Binding:
    """Measured markers paired with model markers by name: `names` (in use, the trial file's
    order), their `empties`, the model markers without a measured one and the measured markers
    the model lacks."""

    trial: object
    names: list
    empties: list
    model_only: list = field(default_factory=list)
    measured_only: list = field(default_factory=list)


def binding(obj, om=None) -> Binding:
    trial = obj.itasc_opensim.trial
    if trial is None:
        raise RigError(f"'{obj.name}' has no trial: import a .trc with the model selected, or pick one in the panel")
    om = om or load_model(obj)
    measured = {}
    for child in trial.children:
        if _kind(child) == "MARKER" and child.itasc_opensim.marker not in measured:
            measured[child.itasc_opensim.marker] = child
    order = [n for n in trial.itasc_opensim.get("markers", []) if n in measured]
    order += sorted(n for n in measured if n not in order)
    model_names = set(om.markers.names)
    names = [n for n in order if n in model_names]
    return Binding(trial, names, [measured[n] for n in names],
                   model_only=[n for n in om.markers.names if n not in measured],
                   measured_only=[n for n in order if n not in model_names])


def stored(settings, key, dtype=float) -> np.ndarray:
    """An array kept as an ID property (numpy does not read IDPropertyArray directly)."""
    value = settings[key]
    return np.array(value.to_list() if hasattr(value, "to_list") else list(value), dtype=dtype)


def trial_samples(trial):
    """(frames, time) of a trial's samples."""
    s = trial.itasc_opensim
    if "frames" not in s or "time" not in s:
        raise RigError(f"'{trial.name}' records no samples (import the .trc again)")
    return stored(s, "frames"), stored(s, "time")


def _keyed_location(obj, frames):
    """Location (F, 3) of a marker at `frames` from its location keys: NaN where an animated
    axis has no key within FRAME_TOLERANCE or where the marker is hidden, the current value for
    an axis without F-curve."""
    out = np.tile(np.array(obj.location, dtype=float), (len(frames), 1))
    channels = keys.Channels(obj)
    hide = channels.find("hide_viewport", 0)
    hidden = (np.array([hide.evaluate(f) for f in frames]) > 0.5 if hide is not None
              else np.full(len(frames), bool(obj.hide_viewport)))
    for axis in range(3):
        fc = channels.find("location", axis)
        if fc is None:
            continue
        n = len(fc.keyframe_points)
        co = np.empty(2 * n, dtype=np.float32)
        fc.keyframe_points.foreach_get("co", co)
        if not n:
            out[:, axis] = np.nan
            continue
        co = co.reshape(n, 2).astype(float)
        co = co[np.argsort(co[:, 0], kind="stable")]
        j = np.clip(np.searchsorted(co[:, 0], frames), 1, max(n - 1, 1))
        left = np.clip(j - 1, 0, n - 1)
        right = np.clip(j, 0, n - 1)
        pick = np.where(np.abs(co[right, 0] - frames) < np.abs(co[left, 0] - frames), right, left)
        hit = np.abs(co[pick, 0] - frames) <= FRAME_TOLERANCE
        out[:, axis] = np.where(hit, co[pick, 1], np.nan)
    out[hidden | np.any(np.isnan(out), axis=1)] = np.nan
    return out


def read_measured(obj, bound: Binding):
    """(frames, time, positions (F, M, 3)): the bound markers in OpenSim's ground, metres, NaN
    where missing (module docstring)."""
    frames, time = trial_samples(bound.trial)
    u = float(obj.itasc_opensim.get("units_per_metre", 1.0))
    to_armature = np.linalg.inv(np.array(obj.matrix_world, dtype=float))
    positions = np.full((len(frames), len(bound.names), 3), np.nan)
    for m, empty in enumerate(bound.empties):
        local = _keyed_location(empty, frames)
        parent = np.eye(4)
        if empty.parent is not None:
            parent = np.array(empty.parent.matrix_world, dtype=float) @ np.array(empty.matrix_parent_inverse, float)
        X = to_armature @ parent
        positions[:, m] = (local @ X[:3, :3].T + X[:3, 3]) / u
    return frames, time, positions


def task_set(obj, names):
    """(IKTaskSet, messages): the model's task set file, or weight 1 for every bound marker."""
    path = obj.itasc_opensim.task_file
    if not path:
        return IKTaskSet(name="uniform", marker_tasks=[IKMarkerTask(n, True, 1.0) for n in names]), []
    path = Path(bpy.path.abspath(path))
    if not path.is_file():
        raise RigError(f"the task set file {path} is missing")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tasks = read_ik_task_set(path)
    for t in tasks.coordinate_tasks:
        if t.apply and t.value_type == "from_file":
            raise RigError(f"coordinate task '{t.name}' takes its values from a coordinate file, which the add-on "
                           "does not read; use default_value or manual_value")
    return tasks, [str(w.message) for w in caught]


# ------------------------------------------------------------------------------------- solve

@dataclass
class Report:
    """What solve_and_bake did: the engine's IK result (`engine`), the sample frames, keys written,
    messages; `seconds` from the start of `prepare`."""

    engine: IKResult
    frames: np.ndarray
    keys_written: int = 0
    messages: list = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        r = self.engine
        measured = np.isfinite(r.marker_error_max)                  # NaN: a frame without any marker
        worst = int(np.argmax(np.where(measured, r.marker_error_max, -np.inf))) if r.n_frames else 0
        converged = int(np.sum(r.converged)) if r.converged is not None else r.n_frames
        mean_rms = 1e3 * float(np.mean(r.marker_error_rms[measured])) if measured.any() else np.nan
        largest = 1e3 * float(r.marker_error_max[worst])
        return (f"{r.n_frames} frames, {len(r.marker_names)} markers: marker error RMS mean {mean_rms:.3g} mm, "
                f"max {largest:.3g} mm ({r.worst_marker[worst] or '-'} at frame {self.frames[worst]:g}); "
                f"converged {converged}/{r.n_frames}; "
                f"{self.keys_written} keys, {self.seconds:.2f} s")


def prepare(obj, chunk: int = CHUNK) -> SolveJob:
    """Everything a solve of `obj`'s bound trial needs, read and checked: the model (its .osim),
    the markers bound by name, their measured positions, the task set, the engine's problem. Bad
    input raises RigError here, with nothing changed. The samples are solved in chunks of
    `chunk` frames (`SolveJob`)."""
    started = _time.perf_counter()
    om = load_model(obj)
    bound = binding(obj, om)
    if not bound.names:
        raise RigError(f"no measured marker of '{bound.trial.name}' has a model marker of the same name")
    frames, time, positions = read_measured(obj, bound)
    if not np.all(np.isfinite(positions), axis=-1).any():
        raise RigError(f"no bound marker of '{bound.trial.name}' has a key at the trial's frames")
    settings = obj.itasc_opensim
    tasks, messages = task_set(obj, bound.names)
    rate = bound.trial.itasc_opensim.data_rate or 1.0
    source = Path(bpy.path.abspath(bound.trial.itasc_opensim.source or bound.trial.name))
    data = MarkerData(names=list(bound.names), time=time, positions=positions,
                      frame_numbers=np.arange(1, len(frames) + 1), data_rate=rate, camera_rate=rate, units="m",
                      path=source)
    problem = MarkerIK(om, data, tasks)
    if not problem.marker_names:
        raise RigError("the task set applies to none of the bound markers")
    F = len(frames)
    return SolveJob(obj=obj, om=om, trial=bound.trial, frames=frames, data=data, tasks=tasks, messages=messages,
                    problem=problem, accuracy=settings.accuracy, max_iterations=settings.max_iterations,
                    chunks=[(a, min(a + chunk, F)) for a in range(0, F, chunk)], started=started)


class SolveJob:
    """A prepared solve of the bound trial and its bake (`prepare`), in steps (`steps()`, a
    generator yielding `done` after each) so that a modal operator can show progress and stop on
    Esc between them; `run()` does it all.

    Nothing is written before the last step. The samples are solved in chunks (`chunks`), each
    one MarkerIK call on the engine (batched); a chunk's first frame starts from the previous
    chunk's last solution, which is OpenSim's recurrence (frame f from frame f-1) that MarkerIK's
    warm start follows inside a chunk, so chunks change nothing but the progress shown."""

    def __init__(self, *, obj, om, trial, frames, data, tasks, messages, problem, accuracy, max_iterations, chunks,
                 started):
        self.obj, self.om, self.trial, self.frames, self.data = obj, om, trial, frames, data
        self.tasks, self.messages, self.problem = tasks, messages, problem
        self.accuracy, self.max_iterations, self.chunks, self.started = accuracy, max_iterations, chunks, started
        F = len(frames)
        self.q = np.empty_like(problem.q_start)
        self.iterations = np.zeros(F, dtype=int)
        self.converged = np.zeros(F, dtype=bool)
        self.passes = 0
        self.solved = 0                  # chunks solved
        self.done = 0                    # progress, of `total`
        self.written = False             # the keys are written
        self.result = None               # IKResult once every chunk is solved
        self.report = None               # Report once baked

    @property
    def total(self) -> int:
        """Progress units: each chunk's solve, the bake."""
        return len(self.chunks) + 1

    def _solve_chunk(self):
        a, b = self.chunks[self.solved]
        d = self.data
        part = MarkerData(names=list(d.names), time=d.time[a:b], positions=d.positions[a:b],
                          frame_numbers=d.frame_numbers[a:b], data_rate=d.data_rate, camera_rate=d.camera_rate,
                          units="m", path=d.path)
        q0 = self.q[a - 1] if a > 0 else None
        r = MarkerIK(self.om, part, self.tasks).solve(accuracy=self.accuracy, max_iterations=self.max_iterations,
                                                     q0=q0)
        if not np.all(np.isfinite(r.q)):
            raise RigError("the solver returned non-finite coordinates; nothing was written")
        self.q[a:b], self.iterations[a:b], self.converged[a:b] = r.q, r.iterations, r.converged
        self.passes = max(self.passes, r.passes)
        self.solved += 1
        if self.solved == len(self.chunks):
            result = self.problem.report(self.q)
            result.iterations, result.converged, result.passes = self.iterations, self.converged, self.passes
            result.seconds = _time.perf_counter() - self.started
            self.result = result

    def steps(self):
        """Solve chunk by chunk, then key the bones and store the result."""
        while self.solved < len(self.chunks):
            self._solve_chunk()
            self.done += 1
            yield self.done
        written, more = bake(self.obj, self.om, self.result.q, self.frames)
        self.written = True
        self.report = Report(self.result, self.frames, written, self.messages + more,
                             _time.perf_counter() - self.started)
        store_result(self.obj, self.result, self.frames, self.trial, self.report)
        self.done += 1
        yield self.done

    def cancel(self):
        """Stop (Esc). Before the bake nothing was written: None. Once baked the keys and the
        stored solution stay."""
        if not self.written:
            return None
        return "Cancelled after the bake: the keys are written and the solution is stored"

    @one_blas_thread()
    def solve_all(self) -> IKResult:
        """Solve every chunk (no keys, nothing stored) and return the IKResult."""
        while self.solved < len(self.chunks):
            self._solve_chunk()
        return self.result

    @one_blas_thread()
    def run(self) -> Report:
        for _ in self.steps():
            pass
        return self.report


def solve(obj):
    """(IKResult, frames, messages): MarkerIK on the bound trial; nothing is written."""
    job = prepare(obj)
    return job.solve_all(), job.frames, job.messages


def target_poses(obj, om, q):
    """{bone: (F, 4, 4)} target pose matrices M_b = U(W_b(q)) @ C_b in armature space."""
    u = float(obj.itasc_opensim.get("units_per_metre", 1.0))
    W = om.body_frames(q)
    W0 = om.body_frames(om.coupling.default_coordinates(1))[0]
    out = {}
    for body, bone in bone_map(obj):
        s = om.segment(body)
        rest = np.array(obj.data.bones[bone].matrix_local, dtype=float)
        C = np.linalg.inv(scaled(W0[s], u)) @ rest
        out[bone] = scaled(W[:, s], u) @ C
    return out


def bases(obj, poses):
    """{bone: (F, 4, 4)} pose bases that make Blender's pose matrices equal `poses`."""
    out = {}
    for name, M in poses.items():
        bone = obj.data.bones[name]
        rest_inv = np.linalg.inv(np.array(bone.matrix_local, dtype=float))
        if bone.parent is None:
            out[name] = rest_inv @ M
            continue
        if bone.parent.name not in poses:
            raise RigError(f"bone '{name}' hangs from '{bone.parent.name}', which shows no OpenSim body")
        parent_rest = np.array(bone.parent.matrix_local, dtype=float)
        out[name] = rest_inv @ parent_rest @ np.linalg.inv(poses[bone.parent.name]) @ M
    return out


def _start_value(pb):
    return {"QUATERNION": tuple(pb.rotation_quaternion), "AXIS_ANGLE": tuple(pb.rotation_axis_angle)
            }.get(pb.rotation_mode, tuple(pb.rotation_euler))


def _translates(om, body):
    s = om.segment(body)
    moves = any(j.kind == "prismatic" for j in om.model.segments[s].joints)
    return moves or not np.allclose(om.body_transform[s], np.eye(4))


def bake(obj, om, q, frames):
    """Key the bones so that their posed frames are the bodies' at q (module docstring);
    returns (keys written, messages)."""
    u = float(obj.itasc_opensim.get("units_per_metre", 1.0))
    poses = target_poses(obj, om, q)
    basis = bases(obj, poses)
    channels_now = keys.Channels(obj)
    plan, messages = [], []
    for body, name in bone_map(obj):
        B = basis[name]
        pb = obj.pose.bones[name]
        path = f'pose.bones["{bpy.utils.escape_identifier(name)}"].'
        prop, values = keys.rotation_values(B[:, :3, :3], pb.rotation_mode, _start_value(pb))
        plan += [(path + prop, i, values[:, i], name) for i in range(values.shape[1])]
        location = B[:, :3, 3]
        animated = any(channels_now.find(path + "location", i) is not None for i in range(3))
        if (_translates(om, body) or np.max(np.abs(location), initial=0.0) > LOCATION_TOLERANCE * u or animated
                or any(pb.location)):
            plan += [(path + "location", i, location[:, i], name) for i in range(3)]
        if any(abs(v - 1.0) > 1e-6 for v in pb.scale):
            messages.append(f"bone '{name}' is scaled; its pose includes that scale")
    written = keys.write_channels(obj, frames, plan)
    obj.update_tag()
    return written, messages


def solve_and_bake(obj, progress=None) -> Report:
    """Solve the bound trial and bake it; the solution is stored on `obj` for the panel and the
    files. `progress(done, total)` is called after each step."""
    job = prepare(obj)
    for done in job.steps():
        if progress is not None:
            progress(done, job.total)
    return job.report


# ------------------------------------------------------------------------------ stored result

def store_result(obj, result: IKResult, frames, trial, report=None):
    """Keep the solution on the armature (ID properties: saved with the file)."""
    s = obj.itasc_opensim
    F = result.n_frames
    names = list(result.marker_names)
    s["solution_time"] = np.asarray(result.time, float)
    s["solution_frames"] = np.asarray(frames, float)
    s["solution_q"] = np.asarray(result.q, float).ravel()
    s["solution_coordinates"] = list(result.coordinate_names)
    s["solution_rotational"] = [int(v) for v in result.rotational]
    s["solution_total"] = np.asarray(result.total_squared_error, float)
    s["solution_rms"] = np.asarray(result.marker_error_rms, float)
    s["solution_max"] = np.asarray(result.marker_error_max, float)
    s["solution_markers"] = names
    s["solution_worst"] = [names.index(w) if w else -1 for w in result.worst_marker]
    converged = result.converged if result.converged is not None else np.ones(F, bool)
    s.has_result = True
    s.result_frames = F
    s.result_converged = int(np.sum(converged))
    s.result_seconds = float(report.seconds if report is not None else result.seconds)
    s.result_trial = trial.name if trial is not None else ""
    s.result_message = "; ".join(report.messages)[:1000] if report is not None else ""


def stored_result(obj) -> IKResult:
    """The kept solution as an IKResult (coordinates and the per-frame error report; the
    per-marker arrays are not kept)."""
    s = obj.itasc_opensim
    if not s.has_result or "solution_q" not in s:
        raise RigError(f"'{obj.name}' has no solution: solve first")
    time = stored(s, "solution_time", float)
    names = list(s["solution_coordinates"])
    F, n = time.size, len(names)
    markers = list(s["solution_markers"])
    worst = [markers[k] if k >= 0 else "" for k in stored(s, "solution_worst", int)]
    empty = np.zeros((F, 0, 3))
    return IKResult(time=time, q=stored(s, "solution_q", float).reshape(F, n), coordinate_names=names,
                    rotational=stored(s, "solution_rotational", bool), marker_names=markers,
                    marker_weights=np.zeros(0), measured=empty, model_markers=empty, marker_errors=np.zeros((F, 0)),
                    total_squared_error=stored(s, "solution_total", float),
                    marker_error_rms=stored(s, "solution_rms", float),
                    marker_error_max=stored(s, "solution_max", float), worst_marker=worst,
                    weighted_squared_error=np.full(F, np.nan))


def frame_report(obj, frame):
    """The kept error report at the sample nearest to `frame` (within half a sample spacing):
    dict(index, frame, time, rms, max, worst) in metres, or None."""
    s = obj.itasc_opensim
    if not s.has_result or "solution_frames" not in s:
        return None
    frames = stored(s, "solution_frames", float)
    if not frames.size:
        return None
    i = int(np.argmin(np.abs(frames - frame)))
    spacing = float(np.min(np.diff(frames))) if frames.size > 1 else 1.0
    if abs(frames[i] - frame) > max(0.5 * spacing, 0.5) + 1e-9:
        return None
    markers = list(s["solution_markers"])
    k = int(stored(s, "solution_worst", int)[i])
    return {"index": i, "frame": float(frames[i]), "time": float(s["solution_time"][i]),
            "rms": float(s["solution_rms"][i]), "max": float(s["solution_max"][i]),
            "worst": markers[k] if k >= 0 else ""}


def trial_summary(obj):
    """(mean RMS, largest max, frame of the largest max) of the kept solution, metres."""
    s = obj.itasc_opensim
    rms, largest = stored(s, "solution_rms"), stored(s, "solution_max")
    if not rms.size:
        return 0.0, 0.0, 0.0
    worst = int(np.argmax(largest))
    return float(np.mean(rms)), float(largest[worst]), float(s["solution_frames"][worst])


def write_motion_file(obj, path):
    """The kept solution as an OpenSim .mot (write_motion: degrees, model order)."""
    path = Path(bpy.path.abspath(str(path)))
    write_motion(path, stored_result(obj))
    return path


def write_error_report(obj, path):
    """The kept per-frame marker errors as OpenSim's _ik_marker_errors.sto."""
    path = Path(bpy.path.abspath(str(path)))
    write_marker_errors(path, stored_result(obj))
    return path

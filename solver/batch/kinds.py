"""What one trial of each batch kind is, and how a worker solves it.

A TrialSpec names the kind, the trial's output name, its input file, every file its outputs
depend on (for resuming) and the kind's options. `solve_trial(spec)` runs it and returns an
Outcome: the output files as bytes, the JSON report as a dict, and the status. It never raises
for a bad trial: any error, and the per-trial time limit, make a 'failed' outcome with the
message. `solve_and_write(spec, out_dir)` is what a batch's worker runs for each trial (in
`solve_group`, a task of several trials, groups.py): solve_trial, then `write_outputs` (each file
written whole under a temporary name and renamed into place, the JSON report last), returning
the report alone, so that nothing a worker holds in memory is needed once it has finished.

Kinds:

* 'ik', marker IK: `options['setup_xml']` is the trial's own InverseKinematicsTool setup (the
  template's model, tasks and accuracy, this trial's marker file, absolute paths; written
  beside the outputs as `<name>_setup.xml`). The worker runs it exactly as `python -m solver ik SETUP.xml` does
  (solver.opensim.run_ik_setup), so each output is byte for byte the one that command writes.
  Outputs: `<name>_setup.xml`, `<name>.mot`, `<name>_ik_marker_errors.sto`, `<name>.json`. The model is loaded once
  per worker process (cached by path, size and modification time).
* 'scale', OpenSim's Scale tool on one subject: `spec.input` is the subject's ScaleTool setup,
  run as `python -m solver scale SETUP.xml` runs it (solver.opensim.run_scale_setup), its outputs
  under names of the batch's rather than the setup's (subjects' setups often share file names):
  `<name>_scaled.osim` (the model after the model scaler, scaled or not), `<name>_scale_set.xml`
  when the model scaler applies, `<name>_placed.osim`, `<name>_static.mot` and
  `<name>_marker_set.xml` when the marker placer applies (`options['outputs']` lists them, from
  the setup, when the batch is planned), each byte for byte what that command writes, and
  `<name>.json` (the static pose's marker errors, anatomical and tracking markers apart, the
  markers only in the model or only in the trial, the scale factors, the notes).
* 'fly', the fly's leg pipeline (solver.fly.solve_legs) on one keypoint pickle: `<name>_angles.mot`
  (time at `options['rate']` Hz, `<leg>_<angle>` in degrees) and `<name>.json`.
* 'retarget', a BVH clip retargeted onto one rig in Blender: `options['rig_file']` the rig's
  .blend (`rig` the armature object's name, None for the file's only one), `python` the Python
  with `bpy`, `scale` the BVH importer's scale, `calibration_frame`, `bone_map` (a bone map JSON
  file, None for the automatic map). Each worker process hands its clips to one Blender process
  of its own (blender.py), started anew after a crash;
  outputs: `<name>.blend` (the rig's file with the clip imported and retargeted) and `<name>.json`
  (frames, converged, contact spans, foot slide, floor, warnings; docs/retarget-contacts.md).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..runtime import one_blas_thread
from .time_limit import TrialTimeLimit, time_limit

KINDS = ("ik", "scale", "fly", "retarget")
SCALE_OUTPUTS = {"scaled_model": "_scaled.osim", "scale_set": "_scale_set.xml", "placed_model": "_placed.osim",
                 "static_motion": "_static.mot", "marker_set": "_marker_set.xml"}


@dataclass
class TrialSpec:
    kind: str
    name: str                       # output name: a relative path in posix form, without suffix
    input: str                      # the trial's file (absolute)
    depends: tuple = ()             # every input file the outputs depend on (absolute)
    options: dict = field(default_factory=dict)

    @property
    def base(self) -> str:
        return self.name.rsplit("/", 1)[-1]


@dataclass
class Outcome:
    name: str
    status: str                     # 'done' or 'failed'
    files: dict                     # {output file name relative to the output folder: bytes}
    report: dict
    message: str = ""


def output_names(spec: TrialSpec) -> list:
    """The files a trial writes, relative to the output folder; the JSON report last."""
    if spec.kind == "ik":
        names = [f"{spec.name}_setup.xml", f"{spec.name}.mot", f"{spec.name}_ik_marker_errors.sto"]
    elif spec.kind == "scale":
        names = [f"{spec.name}{SCALE_OUTPUTS[role]}" for role in spec.options["outputs"]]
    elif spec.kind == "fly":
        names = [f"{spec.name}_angles.mot"]
    elif spec.kind == "retarget":
        names = [f"{spec.name}.blend"]
    else:
        raise ValueError(f"unknown batch kind {spec.kind!r} (expected one of {KINDS})")
    return names + [f"{spec.name}.json"]


def report_bytes(report: dict) -> bytes:
    return (json.dumps(report, indent=1, allow_nan=False) + "\n").encode()


def _finite(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def solve_trial(spec: TrialSpec, seconds_limit: float | None = None) -> Outcome:
    """Solve one trial (module docstring): outputs and report, or a failed outcome."""
    started = time.perf_counter()
    report = {"trial": spec.name, "kind": spec.kind, "input": spec.input}
    try:
        try:
            with time_limit(seconds_limit):
                files, details = SOLVERS[spec.kind](spec)
        except TrialTimeLimit:
            raise TrialTimeLimit(f"stopped at the time limit of {seconds_limit:g} s") from None
    except Exception as exc:                                  # any failure of this trial, reported, never raised
        message = str(exc) if str(exc) else type(exc).__name__
        if isinstance(exc, KeyError) and exc.args:
            message = str(exc.args[0])
        report.update(status="failed", message=message, seconds=round(time.perf_counter() - started, 6))
        return Outcome(spec.name, "failed", {f"{spec.name}.json": report_bytes(report)}, report, message)
    report.update(status="done", message="", **details, seconds=round(time.perf_counter() - started, 6))
    files[f"{spec.name}.json"] = report_bytes(report)
    return Outcome(spec.name, "done", files, report)


def write_outputs(out_dir, outcome: Outcome, spec: TrialSpec) -> None:
    """The trial's files in `out_dir`, each written whole under a name of its own and renamed into
    place (two runs of one trial, as after a lost worker, never mix their bytes); the JSON last.
    A failed trial's other outputs from earlier runs are removed: no stale result beside a failure."""
    out_dir = Path(out_dir)
    if outcome.status != "done":
        for name in output_names(spec):
            if name not in outcome.files:
                (out_dir / name).unlink(missing_ok=True)
    for name, data in outcome.files.items():
        target = out_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f"{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part")
        part.write_bytes(data)
        os.replace(part, target)


def solve_and_write(spec: TrialSpec, out_dir, seconds_limit: float | None = None) -> dict:
    """Solve the trial, write its files, return its report."""
    outcome = solve_trial(spec, seconds_limit)
    write_outputs(out_dir, outcome, spec)
    return outcome.report


def solve_group(specs, out_dir, seconds_limit: float | None = None) -> list:
    """A batch worker's task: `solve_and_write` on each trial of a group (groups.py) in turn, BLAS
    on one thread throughout; the reports, in order."""
    with one_blas_thread():
        return [solve_and_write(spec, out_dir, seconds_limit) for spec in specs]


# ------------------------------------------------------------------------------------ marker IK

@lru_cache(maxsize=8)
def _model(path: str, size: int, mtime_ns: int):
    from ..opensim import load_osim
    return load_osim(path)


def cached_model(path):
    """The OpenSim model at `path`, loaded once per process while the file is unchanged."""
    stat = os.stat(path)
    return _model(str(path), stat.st_size, stat.st_mtime_ns)


def _marker_ik(spec: TrialSpec):
    from ..opensim import read_ik_setup, run_ik_setup
    with tempfile.TemporaryDirectory(prefix="itasc-batch-") as tmp:
        setup_path = Path(tmp) / f"{spec.base}_setup.xml"
        setup_path.write_text(spec.options["setup_xml"], encoding="utf-8")
        setup = read_ik_setup(setup_path)
        if setup.model_file is None:
            raise ValueError(f"{spec.name}: the setup names no model_file")
        run = run_ik_setup(setup_path, tmp, om=cached_model(setup.model_file),
                           warm_start=spec.options.get("warm_start", "previous"))
        files = {f"{spec.name}_setup.xml": spec.options["setup_xml"].encode("utf-8"),
                 f"{spec.name}.mot": Path(run.files["motion"]).read_bytes(),
                 f"{spec.name}_ik_marker_errors.sto": Path(run.files["marker_errors"]).read_bytes()}
    r = run.result
    F = r.n_frames
    worst = int(np.argmax(r.marker_error_max)) if F else 0
    late = ~np.asarray(r.converged, bool)
    details = {"frames": F, "time_start": _finite(r.time[0]) if F else None,
               "time_end": _finite(r.time[-1]) if F else None, "markers": len(r.marker_names),
               "marker_error_rms_mean": _finite(np.mean(r.marker_error_rms)) if F else None,
               "marker_error_rms_max": _finite(np.max(r.marker_error_rms)) if F else None,
               "marker_error_max": _finite(r.marker_error_max[worst]) if F else None,
               "worst_marker": r.worst_marker[worst] if F else "",
               "worst_time": _finite(r.time[worst]) if F else None,
               "frames_not_converged": int(late.sum()),
               "times_not_converged": [float(t) for t in r.time[late]],
               "ignored_markers": list(run.ignored_markers), "passes": int(r.passes),
               "iterations": int(np.sum(r.iterations)), "solve_seconds": round(float(r.seconds), 6)}
    return files, details


# ---------------------------------------------------------------------------------------- scale

def _rms(values) -> float | None:
    values = list(values)
    return _finite(np.sqrt(np.mean(np.square(values)))) if values else None


def _worst(errors: dict) -> tuple:
    if not errors:
        return None, ""
    name = max(errors, key=errors.get)
    return _finite(errors[name]), name


def _scale(spec: TrialSpec):
    from ..opensim import run_scale_setup
    from ..opensim.ik import write_motion
    from ..opensim.scaling import write_scale_set
    run = run_scale_setup(spec.input, write=False)
    outputs = {"scaled_model": lambda path: run.scaled.write(path)}
    if run.factors is not None:
        outputs["scale_set"] = lambda path: write_scale_set(path, run.factors)
    if run.placement is not None:
        outputs["placed_model"] = lambda path: run.placed.write(path)
        outputs["static_motion"] = lambda path: write_motion(path, run.placement.ik, name="static pose")
        outputs["marker_set"] = lambda path: run.placed.write_marker_set(path)
    if list(outputs) != list(spec.options["outputs"]):
        raise ValueError(f"{spec.input} changed since the batch was planned: it now makes {list(outputs)}")
    files = {}
    with tempfile.TemporaryDirectory(prefix="itasc-batch-") as tmp:
        for role, write in outputs.items():
            target = Path(tmp) / f"{spec.base}{SCALE_OUTPUTS[role]}"
            write(target)
            files[f"{spec.name}{SCALE_OUTPUTS[role]}"] = target.read_bytes()
    details = {"subject": run.setup.name, "mass": run.setup.mass,
               "model_only_markers": run.model_only_markers, "trial_only_markers": run.trial_only_markers,
               "notes": run.notes}
    if run.factors is not None:
        details["scale_factors"] = {body: [float(v) for v in f] for body, f in run.factors.as_dict().items()}
    p = run.placement
    if p is not None:
        r = p.ik
        details.update(frames=1, static_time=_finite(p.time), markers=len(r.marker_names),
                       marker_error_rms=_finite(r.marker_error_rms[0]), marker_error_max=_finite(r.marker_error_max[0]),
                       worst_marker=r.worst_marker[0], frames_not_converged=int(not r.converged[0]))
        fixed_max, fixed_worst = _worst(p.fixed_errors)
        moved_max, moved_worst = _worst(p.moved_errors)
        details.update(fixed_markers=len(p.fixed_errors), fixed_error_rms=_rms(p.fixed_errors.values()),
                       fixed_error_max=fixed_max, worst_fixed_marker=fixed_worst,
                       moved_markers=len(p.moved_errors), moved_by_rms=_rms(p.moved_errors.values()),
                       moved_by_max=moved_max, most_moved_marker=moved_worst,
                       fixed_marker_errors={n: _finite(e) for n, e in p.fixed_errors.items()},
                       moved_marker_distances={n: _finite(e) for n, e in p.moved_errors.items()},
                       not_moved_markers=list(p.not_moved), deleted_markers=list(p.deleted_markers))
    return files, details


# ------------------------------------------------------------------------------------------ fly

def _fly(spec: TrialSpec):
    from ..fly import ANGLES, KEYPOINTS, load_legs, solve_legs
    from ..opensim import write_storage
    legs = load_legs(spec.input)
    frames = {len(v) for v in legs.values()}
    if len(frames) != 1:
        raise ValueError(f"{spec.input}: the legs have different frame counts {sorted(frames)}")
    solutions = solve_legs(legs, method=spec.options.get("method", "sequential"))
    F = frames.pop()
    rate = float(spec.options.get("rate", 100.0))
    labels = ["time"] + [f"{leg}_{angle}" for leg in solutions for angle in ANGLES]
    data = np.column_stack([np.arange(F) / rate] + [np.degrees(s.angles) for s in solutions.values()])
    with tempfile.TemporaryDirectory(prefix="itasc-batch-") as tmp:
        target = Path(tmp) / "angles.mot"
        write_storage(target, labels, data, name=f"{spec.base} leg angles", in_degrees=True)
        files = {f"{spec.name}_angles.mot": target.read_bytes()}
    errors = np.stack([s.position_error for s in solutions.values()])                  # (legs, F, 5)
    leg, _, keypoint = np.unravel_index(int(np.nanargmax(errors)), errors.shape)
    report = next(iter(solutions.values())).report                           # one report for all legs
    stages = np.asarray(report.converged, bool)                              # (legs, F, stages)
    converged = stages.reshape(-1, F, stages.shape[-1]).all(axis=(0, 2))
    details = {"frames": F, "legs": list(solutions), "rate": rate,
               "keypoint_error_mean": _finite(np.nanmean(errors)), "keypoint_error_max": _finite(np.nanmax(errors)),
               "worst_leg": list(solutions)[leg], "worst_keypoint": KEYPOINTS[keypoint],
               "frames_not_converged": int(np.sum(~converged))}
    return files, details


# ------------------------------------------------------------------------------------- retarget

def _retarget(spec: TrialSpec):
    from .blender import retarget_clip
    o = spec.options
    blend, figures = retarget_clip(o["python"], o["rig_file"], spec.input, o)
    return {f"{spec.name}.blend": blend}, {"rig_file": o["rig_file"], **figures}


SOLVERS = {"ik": _marker_ik, "scale": _scale, "fly": _fly, "retarget": _retarget}

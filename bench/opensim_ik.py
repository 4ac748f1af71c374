"""Marker IK: OpenSim's InverseKinematicsTool (the `opensim` package) and ours on the same setups,
in the same run.

Cases, all on OpenSim's gait2354 regression trial (subject01, 73 frames at 60 Hz, 31 markers):
'uniform' is the upstream setup (every marker weight 1), 'weighted' uses gait2354_IK_Tasks.xml
(marker weights 0.5 to 10 and four coordinate tasks), 'noisy' is the uniform setup on the markers
plus 1 cm Gaussian noise (seed 7) with 2 percent of the marker samples missing. 'couplers' is
OpenSim's constraint test (../shared/data/opensim_constraints: 58 coordinates, 8 knee/patella
CoordinateCouplerConstraints, 101 frames at 200 Hz, 42 markers) with its setup as written
(constraint_weight 10, accuracy 1e-3); 'pose2sim' is Pose2Sim's IK setup as written
(../shared/data/markerless_pose2sim: the Butterworth-filtered balancing trial, 100 frames at
60 Hz, 21 keypoints, 62 coordinates, 20 couplers held exactly) on the model our Scale tool makes
from Pose2Sim's scaling setup. Fewer repeats on those two.

Timed per frame, best of the repeats (interleaved: OpenSim, then ours, each repeat):

    opensim tool     InverseKinematicsTool(setup).run(): model, markers, solve, .mot and reports
    opensim solve    its InverseKinematicsSolver alone: assemble the first frame, track the others
    ours tool        solver.opensim.run_ik_setup: the same files in and out
    ours solve       MarkerIK.solve, warm_start='previous' (OpenSim's frame recurrence, by passes)
    ours 'none'      MarkerIK.solve, every frame from the default pose in one engine call

and compared: the RMS difference of every coordinate between our .mot and OpenSim's (worst
rotational in degrees, worst translational in mm), and the objective both minimise, evaluated by
our kinematics at both solutions (OpenSim's normalised marker term plus coordinate tasks): the
mean and largest ratio ours / OpenSim's over the frames, below 1 where ours is smaller.

    python -m bench.opensim_ik [--quick]
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from solver.opensim import (MarkerData, MarkerIK, OpenSimFileWarning, read_ik_setup, read_storage, read_trc,
                            run_ik_setup, run_scale_setup, write_trc)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "opensim_gait2354"
FILES = ("subject01_simbody.osim", "subject01_synthetic_marker_data.trc", "gait2354_IK_Tasks.xml",
         "gait2354_IK_Tasks_uniform.xml", "subject01_Setup_InverseKinematics.xml")
CONSTRAINTS = DATA.parent / "opensim_constraints"
CONSTRAINT_FILES = ("constraintTest_ikOnly.osim", "constraintTest.trc", "constraintTest_setup_ik.xml")
P2S = DATA.parent / "markerless_pose2sim"
P2S_TRIAL = "balancing_0-100_filt_butterworth.trc"
CASES = ("uniform", "weighted", "noisy", "couplers", "pose2sim")
REPEATS = {"couplers": 2, "pose2sim": 2}
COLUMNS = [("case", "case", "{}"), ("frames", "frames", "{}"),
           ("opensim_tool_ms", "OpenSim tool ms/frame", "{:.2f}"), ("ours_tool_ms", "ours tool ms/frame", "{:.2f}"),
           ("tool_ratio", "tool: OpenSim / ours", "{:.2f}"),
           ("opensim_solve_ms", "OpenSim solve ms/frame", "{:.2f}"), ("ours_solve_ms", "ours solve ms/frame", "{:.2f}"),
           ("solve_ratio", "solve: OpenSim / ours", "{:.2f}"), ("ours_none_ms", "ours 'none' ms/frame", "{:.2f}"),
           ("rms_deg", "worst RMS diff deg", "{:.4f}"), ("rms_mm", "worst RMS diff mm", "{:.4f}"),
           ("objective_mean", "objective ours/OpenSim mean", "{:.3f}"),
           ("objective_max", "objective ours/OpenSim max", "{:.6f}"),
           ("marker_rms_ours_mm", "marker RMS ours mm", "{:.3f}"),
           ("marker_rms_opensim_mm", "marker RMS OpenSim mm", "{:.3f}")]


@contextlib.contextmanager
def _quiet_stdout():
    """OpenSim prints the model summary to the process's stdout (not through its Logger)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


@contextlib.contextmanager
def _cwd(folder: Path):
    """OpenSim's tool reads the model relative to the working directory: run it from the setup's."""
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _opensim():
    try:
        import opensim
    except ImportError:
        raise ImportError("bench.opensim_ik needs the opensim package: "
                          "pip install --no-deps -r requirements-opensim.txt (make venv does)") from None

    opensim.Logger.removeFileSink()
    opensim.Logger.setLevelString("error")
    return opensim


def prepare(folder: Path) -> dict:
    """Copy the trial into `folder` and write one setup per case: {case: setup path}."""
    for name in FILES:
        shutil.copy(DATA / name, folder / name)
        (folder / name).chmod(0o644)
    markers = read_trc(folder / "subject01_synthetic_marker_data.trc")
    rng = np.random.default_rng(7)
    noisy = markers.positions + rng.normal(0.0, 0.01, markers.positions.shape)
    noisy[rng.random(noisy.shape[:2]) < 0.02] = np.nan
    write_trc(folder / "noisy.trc", MarkerData(markers.names, markers.time, noisy, markers.frame_numbers,
                                               markers.data_rate, markers.camera_rate), units="mm")
    template = (folder / "subject01_Setup_InverseKinematics.xml").read_text()
    setups = {}
    for name in CONSTRAINT_FILES:
        shutil.copy(CONSTRAINTS / name, folder / name)
        (folder / name).chmod(0o644)
    setups["couplers"] = folder / "constraintTest_setup_ik.xml"
    setups["pose2sim"] = _pose2sim(folder)
    for case in CASES[:3]:
        text = template.replace('name="subject01"', f'name="{case}"')
        text = text.replace("subject01_walk1_ik_test.mot", f"{case}_ik.mot")
        text = text.replace("<report_errors> false", "<report_errors> true")
        if case == "weighted":
            text = text.replace("gait2354_IK_Tasks_uniform.xml", "gait2354_IK_Tasks.xml")
        if case == "noisy":
            text = text.replace("subject01_synthetic_marker_data.trc", "noisy.trc")
        setups[case] = folder / f"{case}_setup.xml"
        setups[case].write_text(text)
    return setups


def _pose2sim(folder: Path) -> Path:
    """Pose2Sim's scaling setup run by our Scale tool, and its IK setup with its paths put on
    that model and the trial: the IK setup's path."""
    return pose2sim_ik_setup(folder, P2S / P2S_TRIAL)


def pose2sim_ik_setup(folder: Path, trial: Path, time_range=None, marker_locations: bool = False) -> Path:
    """Pose2Sim's model scaled by its scaling setup (our Scale tool: the factors and model
    OpenSim's model scaler gives, tests/apps/test_opensim_scale.py) into `folder`, and its IK
    setup on that model and `trial` (copied there), optionally over `time_range` (s, s) and
    reporting the model's marker locations: the IK setup's path."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scaled = run_scale_setup(P2S / "Scaling_Setup_Pose2Sim_Halpe26.xml", write=False,
                                 model_file=P2S / "Model_Pose2Sim_Halpe26.osim", marker_file=P2S / "static_0-12.trc")
    scaled.scaled.write(folder / "pose2sim_scaled.osim")
    shutil.copy(trial, folder / trial.name)
    (folder / trial.name).chmod(0o644)
    text = (P2S / "IK_Setup_Pose2Sim_Halpe26.xml").read_text()
    tags = [("model_file", "pose2sim_scaled.osim"), ("marker_file", trial.name),
            ("output_motion_file", "pose2sim_ik.mot"), ("results_directory", ".")]
    if time_range is not None:
        tags.append(("time_range", f"{float(time_range[0])!r} {float(time_range[1])!r}"))
    if marker_locations:
        tags.append(("report_marker_locations", "true"))
    for tag, value in tags:
        text = re.sub(rf"<{tag}>[^<]*</{tag}>", f"<{tag}>{value}</{tag}>", text)
    path = folder / "pose2sim_setup.xml"
    path.write_text(text)
    return path


def _solver_loop(osim, setup_path: Path):
    """OpenSim's InverseKinematicsSolver on a setup's trial, without files out: (seconds, frames).
    Built as the tool builds it: marker weights of the applied marker tasks, coordinate references
    of the applied coordinate tasks (default or manual values; these setups have no from_file)."""
    setup = read_ik_setup(setup_path)
    model = osim.Model(str(setup.model_file))
    state = model.initSystem()
    weights = osim.SetMarkerWeights()
    coordinates = osim.SimTKArrayCoordinateReference()
    for task in setup.tasks.marker_tasks:
        if task.apply:
            weights.cloneAndAppend(osim.MarkerWeight(task.name, task.weight))
    for task in setup.tasks.coordinate_tasks:
        if task.apply:
            value = (task.value if task.value_type == "manual_value"
                     else model.getCoordinateSet().get(task.name).getDefaultValue())
            reference = osim.CoordinateReference(task.name, osim.Constant(value))
            reference.setWeight(task.weight)
            coordinates.push_back(reference)
    markers = osim.MarkersReference()
    markers.initializeFromMarkersFile(str(setup.marker_file), weights)
    solver = osim.InverseKinematicsSolver(model, markers, coordinates, setup.constraint_weight)
    solver.setAccuracy(setup.accuracy)
    times = [t for t in markers.getMarkerTable().getIndependentColumn()
             if setup.time_range[0] - 1e-9 <= t <= setup.time_range[1] + 1e-9]
    start = time.perf_counter()
    state.setTime(times[0])
    solver.assemble(state)
    for t in times[1:]:
        state.setTime(t)
        solver.track(state)
    return time.perf_counter() - start, len(times)


def run_case(osim, setup: Path, repeats: int, case: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpenSimFileWarning)
        described = read_ik_setup(setup)
        problem = MarkerIK.from_setup(described)
        F = problem.time.size
        times = {k: [] for k in ("opensim_tool", "opensim_solve", "ours_tool", "ours_solve", "ours_none")}
        for _ in range(repeats):
            with _cwd(setup.parent), _quiet_stdout():
                start = time.perf_counter()
                ok = osim.InverseKinematicsTool(str(setup)).run()
                times["opensim_tool"].append(time.perf_counter() - start)
                seconds, frames = _solver_loop(osim, setup)
                times["opensim_solve"].append(seconds)
            if not ok or frames != F:
                raise RuntimeError(f"OpenSim's tool failed on {setup} ({frames} frames, expected {F})")
            start = time.perf_counter()
            ours_run = run_ik_setup(setup, setup.parent / "ours")
            times["ours_tool"].append(time.perf_counter() - start)
            times["ours_solve"].append(problem.solve(accuracy=described.accuracy).seconds)
            times["ours_none"].append(problem.solve(accuracy=described.accuracy, warm_start="none").seconds)
    ours = ours_run.result
    theirs = problem.report(problem.om.coordinates_from(read_storage(described.output_motion_file), missing="error"))
    d = (ours.q - theirs.q) * np.where(ours.rotational, 180.0 / np.pi, 1e3)
    rms = np.sqrt(np.mean(d ** 2, axis=0))
    ratio = ours.objective / theirs.objective
    best = {k: 1e3 * min(v) / F for k, v in times.items()}
    return {"case": case, "frames": F,
            "opensim_tool_ms": best["opensim_tool"], "ours_tool_ms": best["ours_tool"],
            "tool_ratio": best["opensim_tool"] / best["ours_tool"],
            "opensim_solve_ms": best["opensim_solve"], "ours_solve_ms": best["ours_solve"],
            "solve_ratio": best["opensim_solve"] / best["ours_solve"], "ours_none_ms": best["ours_none"],
            "rms_deg": float(rms[ours.rotational].max()), "rms_mm": float(rms[~ours.rotational].max()),
            "worst_coordinate": ours.coordinate_names[int(np.argmax(np.where(ours.rotational, rms, 0.0)))],
            "objective_mean": float(np.mean(ratio)), "objective_max": float(np.max(ratio)),
            "marker_rms_ours_mm": 1e3 * float(np.nanmean(ours.marker_error_rms)),
            "marker_rms_opensim_mm": 1e3 * float(np.nanmean(theirs.marker_error_rms)),
            "passes": ours.passes, "converged": int(np.sum(ours.converged))}


def markdown(rows) -> str:
    lines = ["| " + " | ".join(h for _, h, _ in COLUMNS) + " |", "|" + "|".join("---:" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(fmt.format(row[key]) for key, _, fmt in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


def run(quick: bool = False, verbose: bool = True) -> dict:
    """Both tools on every case; prints the table (with `verbose`) and returns
    {"rows": [...], "repeats": n, "opensim": version} (times in ms per frame)."""
    osim = _opensim()
    repeats = 2 if quick else 7
    with tempfile.TemporaryDirectory(prefix="bench_opensim_ik_") as tmp:
        setups = prepare(Path(tmp))
        rows = [run_case(osim, setups[case], min(repeats, REPEATS.get(case, repeats)), case) for case in CASES]
    result = {"rows": rows, "repeats": repeats, "opensim": osim.GetVersion()}
    if verbose:
        print("Marker IK, OpenSim's InverseKinematicsTool vs ours (gait2354 trial, 73 frames, OpenSim's "
              f"coupler model, Pose2Sim's balancing trial; best of {repeats}; ratios above 1: ours faster)\n")
        print(markdown(rows))
    return result


def table(quick: bool = False):
    """The same as a bench.common Table, for `python -m bench`."""
    from .common import Column, Table

    result = run(quick, verbose=False)
    columns = [Column(key, header, fmt, text=(key == "case")) for key, header, fmt in COLUMNS]
    return Table("opensim_ik", "Marker IK: OpenSim's InverseKinematicsTool vs ours",
                 __doc__.split("\n\n")[1].replace("\n", " ") + f" Best of {result['repeats']} runs, ms per frame; "
                 "ratios above 1: ours faster.", columns, result["rows"])


def draw(table, path: Path) -> None:
    from .common import plot

    series = {}
    for row in table.rows:
        series[f"{row['case']}: OpenSim solve"] = row["opensim_solve_ms"]
        series[f"{row['case']}: ours solve"] = row["ours_solve_ms"]
    plot(path, table.title, "ms per frame", series, log=False)


if __name__ == "__main__":
    run(quick="--quick" in sys.argv[1:])

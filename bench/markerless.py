"""Markerless keypoints onto a rig: Pose2Sim's balancing trial (100 frames at 60 Hz, 21 HALPE_26
keypoints, raw and Butterworth-filtered) onto the humanoid target of the retarget tests (2 units
tall, an A-pose, knees limited), calibrated on Pose2Sim's static trial; beside it OpenSim 4.6's
own IK on Pose2Sim's model and the rotation copy the usual tools do (each bone aimed along its
two keypoints: solver.keypoints.copy_keypoints, on our calibration), OpenSim's scaled with Pose2Sim's scaling setup (our Scale tool, whose model is
OpenSim's model scaler's: tests/apps/test_opensim_scale.py; the setup's marker placer is off),
with Pose2Sim's IK setup (its keypoint weights, accuracy 1e-5).

Per row: the mean keypoint error (|x - p| over frames and keypoints, mm of the data) and the mean
over frames of the per-frame RMS (OpenSim's marker RMS: its own report); joint jitter (JSON only: RMS joint
acceleration over the rotational coordinates, rad/s^2: our rig's rotation vectors, OpenSim's
joint angles, so only like against like); keypoint jitter (RMS acceleration of the fitted
keypoints or OpenSim's model markers, m/s^2; the file's own in the caption); in the JSON only,
their mean distance to the Butterworth-filtered file's keypoints (mm); the stance
foot's drift (the left heel's and toes' largest distance from their mean over frames
STANCE, where the left foot stands: mm; the file's own in the caption); the seconds of the fit
(ours: calibration and fit; OpenSim: its IK tool on the trial).

    python -m bench --only markerless --markdown BENCHMARKS.md      (or python -m bench.markerless)
"""

from __future__ import annotations

import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from solver.geometry import points_on
from solver.keypoints import copy_keypoints, fit_keypoints, read_keypoints
from solver.opensim import read_ik_setup, read_storage
from solver.retarget import target_model

from .common import Column, Table, plot

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "markerless_pose2sim"
TRIALS = {"raw": "balancing_0-100.trc", "filtered": "balancing_0-100_filt_butterworth.trc"}
STANCE = slice(5, 66)
STANCE_FOOT = ("LHeel", "LBigToe", "LSmallToe")
CASES = (("ours, 6 Hz", 6.0, None), ("ours, 6 Hz + feet", 6.0, "auto"))
COLUMNS = [Column("trial", "trial", text=True), Column("method", "method", text=True),
           Column("error_mm", "error (mm)", "{:.1f}"), Column("rms_mm", "RMS (mm)", "{:.1f}"),
           Column("keypoint_jitter", "jitter (m/s²)", "{:.1f}"), Column("stance_drift_mm", "stance drift (mm)", "{:.1f}"),
           Column("seconds", "s", "{:.1f}")]


def keypoint_jitter(positions: np.ndarray, rate: float) -> float:
    """RMS second difference of keypoint positions (F, K, 3), per second squared."""
    a = np.diff(positions, 2, axis=0) * rate ** 2
    return float(np.sqrt(np.nanmean(np.sum(a * a, axis=-1))))


def stance_drift(positions: np.ndarray, names) -> float:
    """The stance foot keypoints' largest distance from their mean over STANCE (data units)."""
    foot = positions[STANCE][:, [list(names).index(n) for n in STANCE_FOOT]]
    return float(np.nanmax(np.linalg.norm(foot - np.nanmean(foot, axis=0), axis=-1)))


def ours(trial, static, filtered, rig, cutoff, contacts) -> dict:
    """One row of ours: the fit's figures in the data's units."""
    rotational = rig.model.rotational.copy()
    rotational[rig.model.coordinates_of(rig.root)] = False
    began = time.perf_counter()
    result = fit_keypoints(trial, rig, static=static, cutoff=cutoff, contacts=contacts, max_iterations=400)
    seconds = time.perf_counter() - began
    fit, s = result.fit, result.calibration.scale
    joint = np.diff(fit.q[:, rotational], 2, axis=0) * trial.rate ** 2
    fitted = result.calibration.placement.evaluate(fit.q, jacobian=False) / s
    return dict(error_mm=1000 * np.nanmean(fit.position_error) / s, rms_mm=1000 * np.nanmean(fit.rms) / s,
                joint_jitter=float(np.sqrt(np.mean(joint ** 2))), keypoint_jitter=keypoint_jitter(fitted, trial.rate),
                to_filtered_mm=1000 * np.nanmean(np.linalg.norm(fitted - filtered, axis=-1)),
                stance_drift_mm=1000 * stance_drift(fitted, fit.keypoint_names), seconds=seconds,
                iterations=fit.iterations, converged=bool(fit.converged))


def copied(trial, static, filtered, target, rig) -> dict:
    """The rotation copy's row, measured as ours is (the calibrated keypoints on its poses);
    `rig` is target's TargetModel."""
    began = time.perf_counter()
    poses, calibration, _ = copy_keypoints(trial, target, rig, static=static)
    seconds = time.perf_counter() - began
    placed, s = calibration.placement, calibration.scale
    names = [b.name for b in target.bones]
    fitted = points_on(poses[:, [names.index(rig.model.names[k]) for k in placed.segments]], placed.offsets) / s
    data = trial.positions[:, [trial.index(n) for n in placed.names]]
    error = np.linalg.norm(fitted - data, axis=-1)
    return dict(error_mm=1000 * np.nanmean(error), rms_mm=1000 * np.nanmean(np.sqrt(np.nanmean(error ** 2, axis=1))),
                keypoint_jitter=keypoint_jitter(fitted, trial.rate),
                to_filtered_mm=1000 * np.nanmean(np.linalg.norm(fitted - filtered, axis=-1)),
                stance_drift_mm=1000 * stance_drift(fitted, placed.names), seconds=seconds)


def opensim_ik(trial_path: Path, folder: Path, time_range=None):
    """OpenSim's InverseKinematicsTool with Pose2Sim's IK setup on its scaled model (module
    docstring), run in `folder`: (seconds, its .mot, its model marker locations (F, M, 3) and
    their names, its reported marker RMS (F,), the setup), or None without the opensim package."""
    try:
        import opensim as osim
    except ImportError:
        return None
    from .opensim_ik import _cwd, pose2sim_ik_setup

    osim.Logger.removeFileSink()
    osim.Logger.setLevelString("error")
    setup = pose2sim_ik_setup(folder, trial_path, time_range, marker_locations=True)
    with _cwd(folder):
        began = time.perf_counter()
        ok = osim.InverseKinematicsTool(str(setup)).run()
        seconds = time.perf_counter() - began
    if not ok:
        raise RuntimeError(f"OpenSim's InverseKinematicsTool failed on {setup}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        locations = read_storage(folder / "_ik_model_marker_locations.sto")
        errors = read_storage(folder / "_ik_marker_errors.sto")
        described = read_ik_setup(setup)
    names = [label[:-3] for label in locations.labels if label.endswith("_tx")]
    xyz = np.stack([locations.data[:, [locations.index(f"{n}_t{a}") for a in "xyz"]] for n in names], axis=1)
    return (seconds, read_storage(folder / "pose2sim_ik.mot"), xyz, names,
            errors.data[:, errors.index("marker_error_RMS")], described)


def marker_errors(locations: np.ndarray, names, trial, setup) -> np.ndarray:
    """|model marker - keypoint| (F, M) over the markers OpenSim's IK uses (an applied task of
    positive weight, in the trial), NaN where the keypoint is missing; `trial` as read (Y up)."""
    used = [t.name for t in setup.tasks.marker_tasks if t.apply and t.weight > 0 and t.name in trial.names]
    model = locations[:, [list(names).index(n) for n in used]]
    return np.linalg.norm(model - trial.positions[:, [trial.index(n) for n in used]], axis=-1)


def opensim_row(trial_path: Path, filtered) -> dict | None:
    """OpenSim's row (None without the opensim package); `filtered` the filtered file as read."""
    trial = read_keypoints(trial_path)
    with tempfile.TemporaryDirectory(prefix="itasc_markerless_") as folder:
        run = opensim_ik(trial_path, Path(folder))
    if run is None:
        return None
    seconds, motion, locations, names, reported, setup = run
    error = marker_errors(locations, names, trial, setup)
    rotational = [i for i, label in enumerate(motion.labels) if label != "time" and not label.endswith(("_tx", "_ty", "_tz"))]
    angles = motion.data[:, rotational] * (np.pi / 180 if motion.in_degrees else 1.0)
    joint = np.diff(angles, 2, axis=0) * trial.rate ** 2
    index = [list(names).index(n) for n in trial.names]
    return dict(error_mm=1000 * np.nanmean(error), rms_mm=1000 * float(np.mean(reported)),
                joint_jitter=float(np.sqrt(np.mean(joint ** 2))),
                keypoint_jitter=keypoint_jitter(locations[:, index], trial.rate),
                to_filtered_mm=1000 * np.nanmean(np.linalg.norm(locations[:, index] - filtered, axis=-1)),
                stance_drift_mm=1000 * stance_drift(locations[:, index], trial.names), seconds=seconds)


def run(quick: bool = False) -> Table:
    from tests.apps.retarget_walk import walk_target

    target = walk_target()
    rig = target_model(target)
    static = read_keypoints(DATA / "static_0-12.trc").z_up()
    filtered = read_keypoints(DATA / TRIALS["filtered"])
    rows, files = [], []
    for label, name in TRIALS.items():
        trial = read_keypoints(DATA / name).z_up()
        files.append(f"{label} {keypoint_jitter(trial.positions, trial.rate):.1f} m/s², stance drift "
                     f"{1000 * stance_drift(trial.positions, trial.names):.1f} mm")
        for method, cutoff, contacts in CASES:
            rows.append(dict(trial=label, method=method,
                             **ours(trial, static, filtered.z_up().positions, rig, cutoff, contacts)))
        rows.append(dict(trial=label, method="rotation copy", **copied(trial, static, filtered.z_up().positions, target, rig)))
        theirs = opensim_row(DATA / name, filtered.positions)
        if theirs is not None:
            rows.append(dict(trial=label, method="OpenSim", **theirs))
    caption = ("Pose2Sim's balancing trial; columns: bench/markerless.py. The files': " + "; ".join(files) + ".")
    return Table("markerless", "Markerless keypoints: ours, a rotation copy, OpenSim's IK on Pose2Sim's model", caption,
                 COLUMNS, rows)


def draw(table: Table, path) -> None:
    plot(path, "Pose2Sim's balancing trial: mean keypoint error, mm", "mm",
         {f"{r['trial']}: {r['method']}": r["error_mm"] for r in table.rows}, log=False)


def main():
    print(run().markdown())


if __name__ == "__main__":
    main()

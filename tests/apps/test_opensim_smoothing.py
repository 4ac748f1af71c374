"""Marker IK refined across frames (solver/opensim/smoothing.py) on Pose2Sim's own OpenSim
pipeline (../shared/data/markerless_pose2sim: its model scaled by our Scale tool with its scaling
setup, its IK setup; tests/apps/test_opensim_pose2sim.py holds our per-frame IK to OpenSim's on it).

The references are the per-frame IK itself (OpenSim's problem, which that test checks against
OpenSim 4.6) on the raw trial and on the trial Pose2Sim filtered (Butterworth, 6 Hz), and the
data's own stance foot. Measured (raw trial, 100 frames): joint jitter (RMS angular acceleration
over the rotational coordinates) 1220 rad/s^2 per frame on the raw trial, 310 on the filtered one,
45 refined at 6 Hz; mean marker RMS against the raw markers 38.97 mm per frame, 40.66 mm for the
filtered trial's per-frame solution and 41.53 mm refined (smoothing costs the raw markers about as
much as filtering them does); with contacts 42.24 mm, the left foot's markers held within 3.2 mm
of their pins where the data's own drift by 40-60 mm over the same spans.
"""

import warnings
from pathlib import Path

import numpy as np
import pytest

from bench.opensim_ik import pose2sim_ik_setup
from solver.keypoints.contacts import FootContacts
from solver.opensim import MarkerIK, load_osim, marker_positions, read_ik_setup
from solver.opensim.ik import IKRun, cli, summary_lines
from solver.opensim.smoothing import MarkerTrajectory, _ContactRows, frame_rate, smoothing_weights
from solver.opensim.trc import MarkerData
from solver.opensim.setup import IKMarkerTask, IKTaskSet

P2S = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "markerless_pose2sim"
TRIALS = {"raw": "balancing_0-100.trc", "filtered": "balancing_0-100_filt_butterworth.trc"}
pytestmark = pytest.mark.skipif(not P2S.is_dir(), reason="shared/data/markerless_pose2sim is not beside the repository")
STANCE_FOOT = ("LHeel", "LBigToe", "LSmallToe")


@pytest.fixture(scope="module")
def setups(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pose2sim_smoothing")
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, trial in TRIALS.items():
            (folder / name).mkdir()
            out[name] = read_ik_setup(pose2sim_ik_setup(folder / name, P2S / trial))
    return out


@pytest.fixture(scope="module")
def problem(setups):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MarkerIK.from_setup(setups["raw"])


@pytest.fixture(scope="module")
def solved(setups, problem):
    """Per frame on the raw and the filtered trial, refined at 6 Hz, refined with the feet held."""
    accuracy = setups["raw"].accuracy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        filtered = MarkerIK.from_setup(setups["filtered"]).solve(accuracy=accuracy)
    return dict(raw=problem.solve(accuracy=accuracy), filtered=filtered,
                smooth=problem.solve(accuracy=accuracy, cutoff=6.0),
                feet=problem.solve(accuracy=accuracy, cutoff=6.0, contacts="auto"))


def jitter(result) -> float:
    """RMS angular acceleration over the rotational coordinates, rad/s^2."""
    a = np.diff(result.q[:, result.rotational], 2, axis=0) * frame_rate(result.time) ** 2
    return float(np.sqrt(np.mean(a * a)))


def drift(path) -> float:
    """The largest distance of a path (F, 3) from its mean."""
    return float(np.max(np.linalg.norm(path - path.mean(axis=0), axis=-1)))


def test_smoothing_takes_the_jitter_out_at_a_small_cost_in_marker_error(problem, solved):
    raw, filtered, smooth = solved["raw"], solved["filtered"], solved["smooth"]
    assert smooth.converged.all() and smooth.trajectory_iterations > 0
    assert np.abs(smooth.constraint_errors).max() < 1e-12                 # the couplers held exactly
    lower, upper = problem.scene.lower, problem.scene.upper
    assert np.all((smooth.q >= lower - 1e-12) & (smooth.q <= upper + 1e-12))
    # jitter: far below per-frame IK on the raw trial, below it on Pose2Sim's filtered trial
    assert jitter(smooth) < 0.1 * jitter(raw) and jitter(smooth) < jitter(filtered)
    # marker RMS against the raw markers: the filtered trial's solution pays for its smoothness too
    cost = np.mean(smooth.marker_error_rms) - np.mean(raw.marker_error_rms)
    filtering = np.mean(problem.report(filtered.q).marker_error_rms) - np.mean(raw.marker_error_rms)
    assert 0 < filtering < cost < 2 * filtering
    assert np.mean(smooth.marker_error_rms) <= 1.08 * np.mean(raw.marker_error_rms)
    # the refinement minimised what it says: each frame's objective rose, their sum plus the
    # acceleration penalty fell
    assert smooth.objective.sum() > raw.objective.sum()

    def smoothness(q):
        return np.sum(smooth.smoothing * np.diff(q, 2, axis=0) ** 2)

    assert smooth.objective.sum() + smoothness(smooth.q) < raw.objective.sum() + smoothness(raw.q)


def test_the_stance_foot_is_held_where_the_data_drifts(solved):
    """The left foot stands through the trial while the right one lifts (frames ~15-75): each
    left foot marker gets a span over most of the trial, in which it stays within 5 mm of its pin
    (the keypoint fit's bar) while the data's marker and the smoothed solution's drift by more."""
    feet, smooth = solved["feet"], solved["smooth"]
    assert feet.converged.all()
    assert set(feet.contact_names) == {f"{s}{p}" for s in "LR" for p in ("Heel", "BigToe", "SmallToe")}
    names = feet.marker_names
    for name in STANCE_FOOT:
        span = max(feet.contacts[name], key=len)
        assert len(span) >= 0.35 * feet.n_frames
        k = names.index(name)
        ours, data = drift(feet.model_markers[span.frames, k]), drift(feet.measured[span.frames, k])
        free = drift(smooth.model_markers[span.frames, k])
        assert ours < 0.005 and data > 4 * ours and free > 2 * ours, (name, ours, data, free)
    assert np.nanmax(feet.pin_error) < 0.005
    assert np.max(feet.floor_penetration) < 1e-4                         # metres: 0.1 mm
    assert not any(span.start < 70 < span.end for p in ("Heel", "BigToe", "SmallToe")
                   for span in feet.contacts[f"R{p}"])                    # the right foot is up then
    assert np.mean(feet.marker_error_rms) <= 1.03 * np.mean(smooth.marker_error_rms)
    assert jitter(feet) < 1.1 * jitter(smooth)


def test_gradient_of_the_trajectory_objective_matches_finite_differences(problem, solved):
    """The objective over 7 frames (markers, the coordinate task, the acceleration penalty, pins
    and the floor, couplers held) against central differences in each independent coordinate."""
    F = 7
    rows = np.arange(20, 20 + F)
    rng = np.random.default_rng(34)
    gn = problem.gauss_newton
    q = solved["raw"].q[rows]
    q = gn.fill(np.where(gn.free, q + rng.normal(0, 0.02, q.shape), q))
    weights, measured = problem.frame_weights[rows].copy(), problem.measured[rows]
    weights[2, :5] = 0.0                                                  # some markers missing
    targets = np.concatenate([problem.coordinate_targets[rows], np.full((F, problem._stay.size), np.nan)], axis=1)
    Lambda, movable = smoothing_weights(gn, q, measured, weights, targets, 6.0, 60.0, gn.free.copy())
    names = ("LHeel", "RBigToe")
    index = np.array([problem.marker_names.index(n) for n in names])
    x = marker_positions(problem.om, q, names)
    pins = np.where(np.arange(F)[:, None, None] < 4, x + 0.01, np.nan)   # pinned in frames 0-3
    floor = float(np.median(x[..., 1]))                                  # half the points below it
    held = FootContacts(names, index, {}, pins, floor, 5.0, (0.0, 1.0, 0.0))
    trajectory = MarkerTrajectory(gn, measured, weights, targets, Lambda, movable,
                                  _ContactRows(problem.om, problem.marker_names, held))
    gradient = -2 * trajectory.gradient(q)
    h = 1e-6
    numeric = np.zeros_like(q)
    for f in range(F):
        for c in np.flatnonzero(movable):
            step = np.zeros_like(q)
            step[f, c] = h
            numeric[f, c] = (trajectory.total(gn.fill(q + step)) - trajectory.total(gn.fill(q - step))) / (2 * h)
    scale = np.abs(numeric).max()
    assert scale > 0 and np.abs(gradient - numeric).max() < 1e-6 * scale
    assert np.all(gradient[:, ~movable] == 0)


def test_gaps_are_bridged_and_reported(problem, setups, solved, capsys):
    """10 % of the markers removed at random, a 0.2 s gap in the right wrist and two frames
    without any marker, on the first 48 frames: every frame solved and finite, the errors NaN
    exactly where a marker is missing, the wrist carried through its gap near where its marker
    was, the error on the markers left within 10 % of the complete trial's; the summary says so."""
    F = 48
    rng = np.random.default_rng(34)
    measured = problem.measured[:F].copy()
    removed = rng.uniform(size=measured.shape[:2]) < 0.10
    wrist = problem.marker_names.index("RWrist")
    gap = np.arange(15, 27)
    removed[gap, wrist] = True
    removed[[35, 36]] = True
    measured[removed] = np.nan
    markers = MarkerData(problem.marker_names, problem.time[:F].copy(), measured, np.arange(1, F + 1), 60.0, 60.0)
    tasks = IKTaskSet(marker_tasks=[IKMarkerTask(n, True, w) for n, w in zip(problem.marker_names,
                                                                             problem.marker_weights)],
                      coordinate_tasks=setups["raw"].tasks.coordinate_tasks)
    gappy = MarkerIK(problem.om, markers, tasks)
    result = gappy.solve(accuracy=1e-5, cutoff=6.0)
    assert result.converged.all() and np.all(np.isfinite(result.q))
    assert np.array_equal(np.isnan(result.marker_errors), removed)
    assert np.all(np.isnan(result.marker_error_rms[[35, 36]]))
    # the wrist travels about 0.35 m in its gap; the bridge ends up to 62 mm from the removed
    # marker (the complete trial's solution: up to 26 mm), within a fifth of that travel
    path = problem.measured[gap[0] - 1:gap[-1] + 2, wrist]
    travel = np.sum(np.linalg.norm(np.diff(path, axis=0), axis=-1))
    bridged = result.model_markers[gap, wrist]
    assert np.max(np.linalg.norm(bridged - problem.measured[gap, wrist], axis=-1)) < 0.2 * travel
    kept = ~removed
    assert np.mean(result.marker_errors[kept]) <= 1.10 * np.nanmean(solved["smooth"].marker_errors[:F][kept])
    lines = summary_lines(IKRun(setups["raw"], result, {}))
    assert any(f"{int(removed.any(axis=1).sum())} frames with markers missing, bridged" in line for line in lines)


def test_nonsense_options_are_refused(problem, setups, capsys):
    for options, words in ((dict(contacts="yes"), "contacts must be"), (dict(cutoff=40.0), "cutoff"),
                           (dict(cutoff=-1.0), "cutoff"), (dict(floor=0.0), "floor"),
                           (dict(contact_markers=["LHeel"]), "contact_markers"),
                           (dict(contacts="auto", contact_markers=["Nowhere"]), "not markers in use")):
        with pytest.raises(ValueError, match=words):
            problem.solve(max_iterations=1, **options)
    assert cli(setups["raw"].path, cutoff=40.0) == 1
    assert "cutoff 40.0 Hz must lie between" in capsys.readouterr().err


def test_held_point_constraints_are_refused_by_name():
    model = P2S.parent / "opensim_constraints" / "ThoracoscapularShoulderModel.osim"
    if not model.is_file():
        pytest.skip("shared/data/opensim_constraints is not beside the repository")
    om = load_osim(model)
    q = np.repeat(om.fill_dependents(om.coupling.default_coordinates(1)), 4, axis=0)
    x = marker_positions(om, q)
    markers = MarkerData(list(om.markers.names), np.arange(4) / 50.0, x, np.arange(1, 5), 50.0, 50.0)
    problem = MarkerIK(om, markers, IKTaskSet(marker_tasks=[IKMarkerTask(n, True, 1.0) for n in om.markers.names]))
    with pytest.raises(ValueError, match="PointConstraints held exactly"):
        problem.solve(cutoff=6.0)

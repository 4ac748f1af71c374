"""Frames the markers do not determine, on a trial built in the test from the gait2354 trial: a
blank stretch (no marker at all) and a sparse one (three pelvis markers for 23 coordinates). They
are reported per frame, kept at the previous frame's pose where the markers say nothing, cost no
more than 10x the trial's median frame, and leave the frames before them as the full trial has
them."""

import warnings

import numpy as np
import pytest

from solver.opensim import MarkerData, MarkerIK, OpenSimFileWarning, load_osim, read_ik_task_set, read_trc
from solver.opensim.ik import IKRun, frame_lines, summary_lines
from tests.opensim_reference import DATA, GAIT, needs_data

BLANK, SPARSE = slice(20, 41), slice(50, 63)
PELVIS = ("R.ASIS", "L.ASIS", "V.Sacral")


@pytest.fixture(scope="module")
def trials():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpenSimFileWarning)
        tasks = read_ik_task_set(DATA / "gait2354_IK_Tasks_uniform.xml")
    full = read_trc(DATA / "subject01_synthetic_marker_data.trc")
    positions = full.positions.copy()
    positions[BLANK] = np.nan
    gone = [k for k, n in enumerate(full.names) if n not in PELVIS]
    positions[SPARSE, gone] = np.nan
    gappy = MarkerData(full.names, full.time, positions, full.frame_numbers, full.data_rate, full.camera_rate)
    om = load_osim(GAIT)
    problem = MarkerIK(om, gappy, tasks)
    return problem, problem.solve(), MarkerIK(om, full, tasks).solve()


@needs_data
def test_frames_are_reported_as_determined_or_not(trials):
    problem, r, _ = trials
    expected = np.ones(r.n_frames, bool)
    expected[BLANK] = expected[SPARSE] = False
    np.testing.assert_array_equal(r.determined, expected)
    assert np.all(r.determined_coordinates[BLANK] == 0)
    assert np.all(r.determined_coordinates[SPARSE] == 6)                  # three markers fix the pelvis
    moving = problem.scene.kinematics.moves.any(axis=0) & ~problem.scene.frozen
    assert problem.full_rank == moving.sum()            # all markers fix every free coordinate that moves one
    assert np.all(r.determined_coordinates[expected] == problem.full_rank)
    assert np.all(np.isnan(r.marker_error_rms[BLANK])) and np.all(np.isnan(r.total_squared_error[BLANK]))
    assert np.all(np.isfinite(r.marker_error_rms[~np.isnan(r.marker_error_rms)]))
    assert np.isfinite(r.marker_error_rms[SPARSE]).all() and np.isfinite(r.q).all()
    lines = frame_lines(r)
    assert "not determined: the markers fix 0 coordinates" in lines[25] and "not determined" not in lines[10]
    summary = summary_lines(IKRun(setup=_Setup(), result=r, files={}))
    assert any(line.startswith("34 frames the markers do not determine") and "0.733-1.067 s" in line
               for line in summary), summary


class _Setup:
    name, path = "gappy", None


@needs_data
def test_undetermined_frames_stay_near_their_neighbours(trials):
    problem, r, full = trials
    # no marker: every coordinate where the frame before the stretch left it
    np.testing.assert_allclose(r.q[BLANK], np.broadcast_to(r.q[BLANK.start - 1], r.q[BLANK].shape), atol=1e-9)
    # three pelvis markers: the pelvis follows them, every other coordinate stays at frame 49's value
    pelvis = [i for i, n in enumerate(r.coordinate_names) if n.startswith("pelvis_")]
    others = np.setdiff1d(np.arange(len(r.coordinate_names)), pelvis)
    np.testing.assert_allclose(r.q[SPARSE][:, others], np.broadcast_to(r.q[SPARSE.start - 1, others],
                                                                       (SPARSE.stop - SPARSE.start, others.size)),
                               atol=1e-6)
    assert np.nanmax(r.marker_error_rms[SPARSE]) < 1e-4                    # the pelvis markers are met
    assert np.ptp(r.q[SPARSE][:, pelvis], axis=0).max() > 1e-3              # and the pelvis moves with them
    # frames before the gaps are the full trial's, frames after them close to it
    np.testing.assert_allclose(r.q[:BLANK.start], full.q[:BLANK.start], atol=1e-7)
    after = np.r_[BLANK.stop:SPARSE.start, SPARSE.stop:r.n_frames]
    d = np.abs(r.q[after] - full.q[after]) * np.where(r.rotational, 180 / np.pi, 1e3)
    assert d.max() < 0.1


@needs_data
def test_no_frame_costs_more_than_ten_medians(trials):
    _, r, _ = trials
    assert r.converged.all()
    assert r.iterations.max() <= 10 * np.median(r.iterations), r.iterations
    assert r.iterations[BLANK].max() <= 3

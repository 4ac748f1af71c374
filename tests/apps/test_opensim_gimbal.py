"""A pelvis near its Euler angles' gimbal lock (issue 31): the gait2354 trial with 20 mm of noise,
its first 22 frames blank and every marker turned so that pelvis_tilt sits near +90 degrees.

Reference: the objective is invariant under turning the whole trial (the pelvis's free joint
takes the turn), so each frame's best objective is the one the same trial has unturned, where the
pelvis is upright and far from the lock. Solved from the default pose the turned trial's first
frames used to land in another minimum (hip flexion tens of degrees away, marker RMS 38 mm
against 30 mm); the root placed on its markers (root_seed.py) and the check of every frame
against its neighbours' solutions find the better one. The seed itself is checked on markers
our forward kinematics places, the Euler decomposition on rotations it composes.
"""

import warnings

import numpy as np
import pytest

from solver.opensim import MarkerData, MarkerIK, load_osim, read_ik_task_set, read_trc
from solver.opensim.ik import IKRun, summary_lines
from solver.opensim.root_seed import RootSeed, rigid_fit, tait_bryan
from solver.rotations import rodrigues, skew
from tests.opensim_reference import DATA, GAIT, needs_data

pytestmark = needs_data
BLANK = 22


def _about(axis, angle):
    """Rotation(s) by `angle` (radians, any shape) about coordinate axis `axis`."""
    k = skew(np.eye(3)[axis])
    return rodrigues(k, k @ k, angle)


def _turn(degrees_z, degrees_y):
    return _about(2, np.radians(degrees_z)) @ _about(1, np.radians(degrees_y))


@pytest.fixture(scope="module")
def setting():
    om = load_osim(GAIT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks = read_ik_task_set(DATA / "gait2354_IK_Tasks_uniform.xml")
    full = read_trc(DATA / "subject01_synthetic_marker_data.trc")
    positions = full.positions + np.random.default_rng(1).normal(0.0, 0.02, full.positions.shape)
    positions[:BLANK] = np.nan

    def trial(R):
        return MarkerData(full.names, full.time, positions @ R.T, full.frame_numbers, full.data_rate, full.camera_rate)

    upright = MarkerIK(om, trial(np.eye(3)), tasks).solve(seed_root=False, neighbours=False)
    return om, tasks, trial, upright


def _worse(result, reference, relative=1e-6):
    return np.flatnonzero(result.objective[BLANK:] > reference.objective[BLANK:] * (1 + relative)) + BLANK


@pytest.mark.parametrize("tilt", [88.0, -88.0])
def test_a_pelvis_near_gimbal_lock_finds_the_better_minimum(setting, tilt):
    """pelvis_tilt near +90 or -90 degrees (the trial's own tilt is about 4.6 degrees)."""
    om, tasks, trial, upright = setting
    problem = MarkerIK(om, trial(_turn(tilt - 4.6, 210.0)), tasks)
    tilt, hip = om.coupling.index("pelvis_tilt"), om.coupling.index("hip_flexion_r")
    old = problem.solve(seed_root=False, neighbours=False)                 # from the default pose, as before
    assert _worse(old, upright).size >= 10
    assert np.nanmean(old.marker_error_rms[BLANK:]) > 1.2 * np.nanmean(upright.marker_error_rms[BLANK:])
    assert np.degrees(np.abs(old.q[BLANK:, hip] - upright.q[BLANK:, hip])).max() > 20
    ours = problem.solve()
    both = problem.objectives(np.stack([ours.q, old.q]))          # the batched objective is the report's
    np.testing.assert_allclose(both[0][BLANK:], ours.objective[BLANK:], rtol=1e-13)
    np.testing.assert_allclose(both[1][BLANK:], old.objective[BLANK:], rtol=1e-13)
    assert _worse(ours, upright).size == 0
    np.testing.assert_allclose(ours.objective[BLANK:], upright.objective[BLANK:], rtol=1e-6)
    assert np.all(np.abs(np.abs(np.degrees(ours.q[BLANK:, tilt])) - 90) < 25)          # near the lock
    assert np.degrees(np.abs(ours.q[BLANK:, hip] - upright.q[BLANK:, hip])).max() < 0.05
    assert not ours.determined[:BLANK].any() and ours.determined[BLANK:].all()


def test_every_frame_against_its_neighbours_solutions(setting):
    """Frames solved from a start with the pelvis upside down land in a minimum far worse than the
    trial's; solved again from their neighbours' solutions they come back, and the result says
    which. On markers this noisy, frames have more than one minimum of about the same objective
    (they interleave from frame to frame), so what holds is what the check promises: no frame is
    then lowered by solving it from either neighbour's solution."""
    om, tasks, trial, upright = setting
    problem = MarkerIK(om, trial(np.eye(3)), tasks)
    good = problem.solve()
    q0 = np.tile(problem.q_start[0], (problem.time.size, 1))
    q0[40:50, om.coupling.index("pelvis_tilt")] = np.pi
    stuck = problem.solve(warm_start="none", q0=q0, neighbours=False)
    bad = set(np.flatnonzero(stuck.objective > 2 * good.objective).tolist())
    assert bad <= set(range(40, 50)) and len(bad) >= 6
    scored = problem.solve(warm_start="none", q0=q0, neighbours=True)      # frames a neighbour scores lower
    assert np.all(scored.objective[BLANK:] <= stuck.objective[BLANK:])
    assert set(np.flatnonzero(scored.above_neighbour).tolist()) <= set(range(40, 50))
    checked = problem.solve(warm_start="none", q0=q0, neighbours="solve")   # every frame from both neighbours
    above = set(np.flatnonzero(checked.above_neighbour).tolist())
    assert bad <= above <= set(range(40, 50))
    assert np.all(checked.objective[BLANK:] < 1.05 * good.objective[BLANK:])
    for shift in (1, -1):
        again = problem.solve(warm_start="none", q0=np.roll(checked.q, shift, axis=0), neighbours=False)
        inside = np.arange(BLANK + 1, problem.time.size - 1)
        assert np.all(again.objective[inside] > checked.objective[inside] * (1 - 1e-6) - 1e-10)
    run = IKRun(setup=type("S", (), {"name": "turned", "path": None, "constraint_weight": np.inf})(),
                result=checked, files={}, ignored_markers=[], notes=[])
    assert any(f"{len(above)} frames sat in a worse local minimum" in line for line in summary_lines(run))


def test_solving_every_frame_from_its_successor(setting):
    """Turned another way, one frame alone (near the lock of pelvis_list) settles 2.6 % above the
    upright trial's objective, with its neighbours in the better minimum: neighbours='solve'
    finds it (scoring the neighbours' solutions does not: the markers' noise between frames is
    larger than that gap)."""
    om, tasks, trial, upright = setting
    ours = MarkerIK(om, trial(_turn(83.4, 90.0)), tasks).solve(neighbours="solve")
    assert _worse(ours, upright, 1e-3).size == 0


# --------------------------------------------------------------------------------- the seed

def test_tait_bryan_angles_recompose_every_order_and_both_branches():
    rng = np.random.default_rng(3)
    orders = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
    for order in orders:
        angles = rng.uniform(-np.pi, np.pi, (50, 3))
        angles[:5, 1] = np.pi / 2 - rng.uniform(0, 1e-9, 5)                      # at the lock
        R = _about(order[0], angles[:, 0]) @ _about(order[1], angles[:, 1]) @ _about(order[2], angles[:, 2])
        M = np.broadcast_to(np.eye(4), (50, 4, 4)).copy()
        M[:, :3, :3] = R
        for branch in tait_bryan(M, order):
            back = _about(order[0], branch[:, 0]) @ _about(order[1], branch[:, 1]) @ _about(order[2], branch[:, 2])
            assert np.abs(back - R).max() < 1e-7, order


def test_the_root_seed_puts_the_pelvis_on_its_markers_in_either_branch(setting):
    om, tasks, trial, upright = setting
    problem = MarkerIK(om, trial(np.eye(3)), tasks)
    scene = problem.scene
    seed = RootSeed.of(om.model, om.coupling, scene.frozen)
    assert seed is not None and [om.coordinate_names[c] for c in seed.turn_coordinates] == \
        ["pelvis_tilt", "pelvis_list", "pelvis_rotation"]
    rng = np.random.default_rng(4)
    F = 40
    q = np.tile(problem.q_start[0], (F, 1))
    q[:, seed.turn_coordinates] = rng.uniform(-np.pi, np.pi, (F, 3))
    q[:10, seed.turn_coordinates[0]] = np.pi / 2 + rng.normal(0, 0.01, 10)            # tilt at +-90
    q[10:20, seed.turn_coordinates[1]] = -np.pi / 2 + rng.normal(0, 1e-6, 10)          # list at the lock
    q[:, seed.slide_coordinates] = rng.normal(0, 1, (F, 3))
    x = scene.kinematics.positions(q)
    on_root = np.asarray(scene.segments) == seed.segment
    assert on_root.sum() == 3
    candidates, ok = seed.seeds(scene.locations[on_root], x[:, on_root], np.ones((F, 3)),
                                np.tile(problem.q_start[0], (F, 1)))
    assert ok.all()
    for c in candidates:                                 # a flip costs the markers nothing
        assert np.abs(scene.kinematics.positions(c)[:, on_root] - x[:, on_root]).max() < 1e-9
    R, t, ok = rigid_fit(scene.locations[on_root], x[:, on_root], np.ones((F, 3)))
    frames = om.body_frames(q)[:, seed.segment]
    assert np.abs(R - frames[:, :3, :3]).max() < 1e-9 and np.abs(t - frames[:, :3, 3]).max() < 1e-9
    # two markers, or three on a line: no seed
    assert not rigid_fit(scene.locations[on_root][:2], x[:, on_root][:, :2], np.ones((F, 2)))[2].any()
    line = np.outer([0.0, 1.0, 2.0], [1.0, 0.5, 0.0])
    assert not rigid_fit(line, np.broadcast_to(line, (F, 3, 3)), np.ones((F, 3)))[2].any()

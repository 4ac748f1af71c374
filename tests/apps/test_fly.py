"""The fly-leg preset (solver.fly): safe loading, the leg model, sequential vs whole-chain IK on
the real DeepFly3D keypoints, and vector-based head / antenna angles.

References: forward kinematics written out here (scipy's intrinsic Euler rotations for the ThC
joint, explicit matrices after it), the closed-form optimum of each two-angle stage (the nearest
point of a sphere), a dense grid for the one-angle stage, and keypoints synthesised from known
angles. Units of the real data are mm (NeuroMechFly template scale).
"""

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

# scipy's Euler angles are the independent forward kinematics these tests check against.
Rotation = pytest.importorskip("scipy.spatial.transform", reason="scipy is the reference here").Rotation

from solver import fly  # noqa: E402 (after the reference is known present)
from solver.fly import (  # noqa: E402
    ANGLES,
    KEYPOINTS,
    LEGS,
    antenna_angles,
    head_angles,
    head_rotation,
    leg_keypoints,
    load_legs,
    load_pickle,
    segment_lengths,
    solve_leg,
    solve_legs,
)

# The shared fly pose files, beside the repository (or beside the folder that holds a worktree of it).
DATA = next((folder / "shared" / "data" / "fly_pose" for folder in Path(__file__).resolve().parents[1:]
             if (folder / "shared" / "data" / "fly_pose").is_dir()),
            Path(__file__).resolve().parents[2].parent / "shared" / "data" / "fly_pose")
SMALL = DATA / "pose3d_aligned.pkl"
LARGE = DATA / "pose_result__210902_PR_Fly1_aligned.pkl"
have_data = pytest.mark.skipif(not (SMALL.exists() and LARGE.exists()), reason="shared fly data not found")


# ------------------------------------------------------------------ references


def _elementary(axis, t):
    t = np.asarray(t, float)
    return Rotation.from_euler(axis, t.reshape(-1, 1)).as_matrix().reshape(t.shape + (3, 3))


def rx(t):
    return _elementary("x", t)


def ry(t):
    return _elementary("y", t)


def rz(t):
    return _elementary("z", t)


def reference_rotations(angles):
    """Segment rotations (F, 3, 3) of the coxa, femur, tibia, tarsus: R_coxa = intrinsic XYZ Euler
    (yaw, pitch, roll), then R_femur = R_coxa Ry Rz, R_tibia = R_femur Ry, R_tarsus = R_tibia Ry."""
    a = np.asarray(angles, float)
    R_coxa = Rotation.from_euler("XYZ", a[:, :3]).as_matrix()          # upper case: intrinsic
    R_femur = R_coxa @ ry(a[:, 3]) @ rz(a[:, 4])
    R_tibia = R_femur @ ry(a[:, 5])
    return R_coxa, R_femur, R_tibia, R_tibia @ ry(a[:, 6])


def reference_leg(angles, lengths, origin):
    """Keypoints (F, 5, 3): ThC = origin; each tip = joint + R_segment (0, 0, -L)."""
    down = [np.array([0.0, 0.0, -L]) for L in lengths]
    R_coxa, R_femur, R_tibia, R_tarsus = reference_rotations(angles)
    femur = origin + R_coxa @ down[0]
    tibia = femur + R_femur @ down[1]
    tarsus = tibia + R_tibia @ down[2]
    claw = tarsus + R_tarsus @ down[3]
    return np.stack([np.broadcast_to(origin, femur.shape), femur, tibia, tarsus, claw], axis=1)


def smooth_angles(rng, F, center, amplitude):
    t = np.linspace(0, 1, F)[:, None]
    w = rng.uniform(0.5, 2.0, size=(2, 7))
    phase = rng.uniform(0, 2 * np.pi, size=(2, 7))
    wave = 0.6 * np.sin(2 * np.pi * w[0] * t + phase[0]) + 0.4 * np.sin(2 * np.pi * w[1] * t + phase[1])
    return center + amplitude * wave


WALKING_CENTER = np.array([0.2, 0.3, -0.3, -1.8, 0.2, 1.5, -0.8])     # a bent leg, away from straight


# ------------------------------------------------------------------ loading


@have_data
def test_safe_loader_reads_both_files_like_pickle_does():
    legs = load_legs(SMALL)
    assert list(legs) == list(LEGS)
    with open(SMALL, "rb") as fh:
        plain = pickle.load(fh)               # the trusted reference for the content
    for leg in LEGS:
        assert legs[leg].shape == (100, 5, 3) and np.all(np.isfinite(legs[leg]))
        np.testing.assert_array_equal(legs[leg], plain[leg])
    big = load_legs(LARGE)
    with open(LARGE, "rb") as fh:
        plain = pickle.load(fh)
    for leg in LEGS:
        assert big[leg].shape == (1000, 5, 3)
        for i, name in enumerate(KEYPOINTS):
            np.testing.assert_array_equal(big[leg][:, i], plain[leg][name]["raw_pos_aligned"])
    # The nested file's scalars come through numpy's 'scalar' reconstructor.
    assert float(load_pickle(LARGE)["RF_leg"]["Femur"]["mean_length"]) == pytest.approx(
        float(plain["RF_leg"]["Femur"]["mean_length"]))


class _Payload:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_safe_loader_refuses_other_globals(tmp_path):
    marker = tmp_path / "pwned"
    evil = pickle.dumps({"RF_leg": _Payload(marker)})
    with pytest.raises(pickle.UnpicklingError, match="not allowed"):
        load_pickle(evil)
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError):
        load_pickle(pickle.dumps(np.random.default_rng(0)))       # a numpy class, but not an array


def test_safe_loader_accepts_both_numpy_module_names():
    """numpy 1.x writes numpy.core.multiarray, numpy 2.x numpy._core.multiarray: both load."""
    arrays = {"a": np.arange(6.0).reshape(2, 3), "s": np.float64(0.25)}
    raw = pickle.dumps(arrays, protocol=3)                      # GLOBAL opcodes: module names as text
    for module in (b"numpy.core.multiarray", b"numpy._core.multiarray"):
        data = raw.replace(b"numpy._core.multiarray", module).replace(b"numpy.core.multiarray", module)
        assert module in data
        back = load_pickle(data)
        np.testing.assert_array_equal(back["a"], arrays["a"])
        assert back["s"] == 0.25


@have_data
def test_segment_lengths_are_mean_keypoint_distances():
    legs = load_legs(SMALL)
    k = legs["RF_leg"]
    expected = [np.mean([np.linalg.norm(k[f, i + 1] - k[f, i]) for f in range(len(k))]) for i in range(4)]
    np.testing.assert_allclose(segment_lengths(k), expected, rtol=1e-13)
    # SOURCES.md: "the RF coxa is ~0.43 long and the femur ~0.71".
    assert abs(segment_lengths(k)[0] - 0.43) < 0.01 and abs(segment_lengths(k)[1] - 0.71) < 0.01


# ------------------------------------------------------------------ the leg model


def test_leg_model_is_the_intrinsic_euler_chain():
    rng = np.random.default_rng(0)
    angles = rng.uniform(-np.pi, np.pi, size=(50, 7))
    lengths = rng.uniform(0.3, 0.8, size=4)
    origin = rng.normal(size=(50, 3))
    np.testing.assert_allclose(leg_keypoints(angles, lengths, origin), reference_leg(angles, lengths, origin),
                               atol=1e-14)


def test_each_roll_leaves_its_segments_tip_in_place():
    """ThC roll does not move the coxa tip, TrF roll not the femur tip: no stage needs a later
    stage's angles."""
    rng = np.random.default_rng(1)
    a = rng.uniform(-2, 2, size=(20, 7))
    b = a.copy()
    b[:, ANGLES.index("ThC_roll")] += 1.0
    b[:, ANGLES.index("TrF_roll")] += 1.0
    lengths = np.array([0.4, 0.7, 0.5, 0.75])
    pa, pb = leg_keypoints(a, lengths), leg_keypoints(b, lengths)
    np.testing.assert_allclose(pb[:, 1], pa[:, 1], atol=1e-15)
    assert np.min(np.linalg.norm(pb[:, 2] - pa[:, 2], axis=-1)) > 1e-3       # the roll does act beyond
    c = a.copy()
    c[:, ANGLES.index("TrF_roll")] += 1.0
    np.testing.assert_allclose(leg_keypoints(c, lengths)[:, :3], pa[:, :3], atol=1e-15)


@pytest.mark.parametrize("method", ["sequential", "sequential-iterative"])
@pytest.mark.parametrize("batched", [False, True])
def test_synthetic_leg_motion_is_recovered(batched, method):
    """Keypoints made by the reference FK from a smooth motion of known angles: the four stages
    (warm-started from the true frame 0), in closed form and iterated, recover the angles and
    every keypoint."""
    rng = np.random.default_rng(2)
    lengths = np.array([0.43, 0.71, 0.5, 0.75])
    motions = [smooth_angles(rng, 60, WALKING_CENTER, 0.35) for _ in range(3)]
    keypoints = [reference_leg(m, lengths, np.array([0.35, -0.27, 0.4])) for m in motions]
    if batched:
        sol = solve_leg(np.stack(keypoints), method, lengths=np.tile(lengths, (3, 1)),
                        q0=np.stack([m[0] for m in motions]))
        angles, errors = sol.angles, sol.position_error
    else:
        sols = [solve_leg(k, method, lengths=lengths, q0=m[0]) for k, m in zip(keypoints, motions)]
        angles, errors = np.stack([s.angles for s in sols]), np.stack([s.position_error for s in sols])
    assert np.max(errors) < 1e-8
    np.testing.assert_allclose(angles, np.stack(motions), atol=1e-7)


# ------------------------------------------------------------------ real data


@pytest.fixture(scope="module", params=["small", "large"])
def real(request):
    """Sequential and whole-chain solutions of all six legs of one file."""
    legs = load_legs(SMALL if request.param == "small" else LARGE)
    return request.param, legs, solve_legs(legs, "sequential"), solve_legs(legs, "whole_chain")


@have_data
def test_errors_are_distances_to_the_fk_of_the_solved_angles(real):
    _, legs, seq, whole = real
    for solutions in (seq, whole):
        for leg, k in legs.items():
            s = solutions[leg]
            fk = reference_leg(s.angles, s.lengths, k[:, 0])
            np.testing.assert_allclose(s.position_error, np.linalg.norm(fk - k, axis=-1), atol=1e-12)
            assert np.all(s.position_error[:, 0] < 1e-12)            # the ThC joint follows the Coxa keypoint


@have_data
def test_sequential_keeps_proximal_keypoints_closer_than_the_whole_chain(real):
    """Per leg, the Femur, Tibia and Tarsus keypoints (the coxa, femur and tibia tips): mean and
    maximum error over frames, sequential < whole chain. Measured (mm, mean over legs and frames),
    100 frames: sequential 0.0099 / 0.0221 / 0.0254, whole chain 0.266 / 0.916 / 0.733;
    1000 frames: sequential 0.0135 / 0.0231 / 0.0268, whole chain 0.313 / 0.896 / 0.646."""
    _, legs, seq, whole = real
    for leg in legs:
        for i in (1, 2, 3):
            assert seq[leg].position_error[:, i].mean() < whole[leg].position_error[:, i].mean(), (leg, KEYPOINTS[i])
            assert seq[leg].position_error[:, i].max() < whole[leg].position_error[:, i].max(), (leg, KEYPOINTS[i])
        # ... by a wide margin: measured ratios of the means 0.016-0.092.
        assert seq[leg].position_error[:, 1:4].mean() < 0.2 * whole[leg].position_error[:, 1:4].mean()


# Claw error of sequential IK (mm), all legs and frames, with the measured value next to each bound.
CLAW_BOUNDS = {
    "small": {"mean": 0.16, "max": 0.55},      # measured: mean 0.1402, max 0.4794 (RH_leg)
    "large": {"mean": 0.16, "max": 1.05},      # measured: mean 0.1393, max 0.9543 (LF_leg)
}


@have_data
def test_claw_error_of_sequential_ik_stays_below_the_measured_bound(real):
    name, legs, seq, whole = real
    claw = np.stack([seq[leg].position_error[:, 4] for leg in legs])
    assert claw.mean() < CLAW_BOUNDS[name]["mean"]
    assert claw.max() < CLAW_BOUNDS[name]["max"]
    # The whole chain puts the claw on its keypoint (all claws are within reach: measured
    # |Claw - Coxa| at most 0.965 of the leg's length).
    for leg, k in legs.items():
        reach = np.linalg.norm(k[:, 4] - k[:, 0], axis=-1)
        assert np.all(reach < whole[leg].lengths.sum())
        assert np.all(whole[leg].position_error[:, 4] < 1e-8)


@have_data
def test_each_stage_reaches_its_least_squares_optimum_on_real_data(real):
    """Stages 1-3 can point their segment anywhere, so their best error is the distance from the
    measured keypoint to the sphere of radius L around the (fitted) joint: | |m - j| - L |.
    Stage 4 (one angle) against a dense grid over TiTa pitch, on every 10th frame."""
    name, legs, seq, _ = real
    grid = np.linspace(-np.pi, np.pi, 4001)
    for leg, k in legs.items():
        s = seq[leg]
        for i in (1, 2, 3):
            sphere = np.abs(np.linalg.norm(k[:, i] - s.fitted[:, i - 1], axis=-1) - s.lengths[i - 1])
            np.testing.assert_allclose(s.position_error[:, i], sphere, atol=1e-8)
        for f in range(0, len(k), 10 if name == "small" else 100):
            trial = np.repeat(s.angles[f:f + 1], grid.size, axis=0)
            trial[:, 6] = grid
            best = np.min(np.linalg.norm(reference_leg(trial, s.lengths, k[f, 0])[:, 4] - k[f, 4], axis=-1))
            assert best - s.lengths[3] * (grid[1] - grid[0]) / 2 <= s.position_error[f, 4] <= best + 1e-12


@have_data
def test_warm_started_stages_equal_the_frame_by_frame_recurrence():
    """The batched passes land on the seed's frame loop (frame f from frame f-1's solution)."""
    legs = load_legs(SMALL)
    k = np.stack([legs["RM_leg"], legs["LF_leg"]])
    passes = solve_leg(k, method="sequential-iterative")
    loop = solve_leg(k, method="sequential-iterative", warm_start="sequential")
    np.testing.assert_allclose(passes.angles, loop.angles, atol=1e-6)
    assert passes.report.warm_starts == ["previous"] * 4
    assert np.all(passes.report.passes <= 3)             # measured: 2 per stage
    # Without warm starts, frames of these legs flip to the other (roll + pi) branch.
    cold = solve_leg(k, method="sequential-iterative", warm_start="none")
    np.testing.assert_allclose(cold.position_error, loop.position_error, atol=1e-6)
    assert np.max(np.abs(cold.angles - loop.angles)) > 1.0


# ------------------------------------------------------------------ the closed-form stages

STAGE_COLUMNS = [(0, 1), (2, 3), (4, 5), (6,)]


@pytest.fixture(scope="module")
def iterative(real):
    """The engine's iterated stages on the same legs as `real`."""
    return solve_legs(real[1], "sequential-iterative")


@have_data
def test_closed_form_stages_equal_the_iterated_stages_on_real_data(real, iterative):
    """The default 'sequential' (closed form) against 'sequential-iterative' (the engine, fit mode,
    precision 1e-9): the same angles, not only modulo 2 pi, on every frame where the iteration
    converged, and the same keypoint errors everywhere. Measured on both files: every frame
    converged, angles within 1.8e-8 rad, errors within 2e-8 mm."""
    _, legs, seq, _ = real
    ours, theirs = seq[LEGS[0]].report, iterative[LEGS[0]].report        # each leg shares its batch's report
    done = np.all(theirs.converged & (theirs.iterations < fly.FLY_SETTINGS.max_iterations), axis=-1)
    assert done.mean() > 0.99
    angles = np.stack([seq[leg].angles for leg in legs])
    np.testing.assert_allclose(angles[done], np.stack([iterative[leg].angles for leg in legs])[done], atol=1e-7, rtol=0)
    np.testing.assert_allclose(np.stack([seq[leg].position_error for leg in legs]),
                               np.stack([iterative[leg].position_error for leg in legs]), atol=1e-7, rtol=0)
    np.testing.assert_allclose(ours.position_error, theirs.position_error, atol=1e-7, rtol=0)
    assert ours.warm_starts == ["sequential"] * 4 and np.all(ours.converged)


@have_data
def test_closed_form_without_warm_start_equals_the_iterated_stages():
    """warm_start='none' (every frame from the hanging rest pose) in both: the same angles (measured
    within 1.1e-8 rad), although frames flip branch against the warm-started answer."""
    legs = load_legs(SMALL)
    k = np.stack([legs[leg] for leg in LEGS])
    ours, theirs = solve_leg(k, warm_start="none"), solve_leg(k, "sequential-iterative", warm_start="none")
    np.testing.assert_allclose(ours.angles, theirs.angles, atol=1e-7, rtol=0)
    np.testing.assert_allclose(ours.position_error, theirs.position_error, atol=1e-7, rtol=0)
    assert np.max(np.abs(ours.angles - solve_leg(k).angles)) > 1.0


def stage_gradient(angles, lengths, keypoints, stage, h=1e-6):
    """Central differences (F, n) of stage k's objective |tip_k - m_k|^2 in the stage's own
    angles, with the reference forward kinematics."""
    columns = []
    for c in STAGE_COLUMNS[stage]:
        values = []
        for step in (h, -h):
            a = angles.copy()
            a[:, c] += step
            tip = reference_leg(a, lengths, keypoints[:, 0])[:, stage + 1]
            values.append(np.sum((tip - keypoints[:, stage + 1]) ** 2, axis=-1))
        columns.append((values[0] - values[1]) / (2 * h))
    return np.stack(columns, axis=-1)


@have_data
def test_each_closed_form_stage_is_a_stationary_point_of_its_least_squares_objective(real):
    """Finite-difference gradient of every stage's objective in its own angles, every leg and frame:
    below 1e-9 (measured 1.4e-10 on the 1000-frame file, rounding of the differences). The same
    angles moved by 1e-4 rad give gradients of order 1e-5: the check can tell."""
    _, legs, seq, _ = real
    for leg, k in legs.items():
        s = seq[leg]
        for stage, columns in enumerate(STAGE_COLUMNS):
            assert np.max(np.abs(stage_gradient(s.angles, s.lengths, k, stage))) < 1e-9, (leg, stage)
            moved = s.angles.copy()
            moved[:, list(columns)] += 1e-4
            assert np.median(np.abs(stage_gradient(moved, s.lengths, k, stage))) > 1e-6, (leg, stage)


@pytest.mark.parametrize("warm_start", ["auto", "none"])
def test_random_legs_are_matched_exactly_up_to_a_half_turn_of_each_segment(warm_start):
    """Keypoints from uniformly random angles (every branch, any frame-to-frame jump), random
    lengths and roots, from a random start: every keypoint is matched, and every segment's
    rotation is the true one or the true one turned by pi about the segment (the other branch of
    a stage turns its segment and everything after it by half a turn, keypoints unchanged)."""
    rng = np.random.default_rng(7)
    B, F = 6, 300
    truth = rng.uniform(-np.pi, np.pi, size=(B, F, 7))
    lengths = rng.uniform(0.2, 1.0, size=(B, 4))
    origin = rng.normal(size=(B, F, 3))
    keypoints = np.stack([reference_leg(truth[b], lengths[b], origin[b]) for b in range(B)])
    sol = solve_leg(keypoints, lengths=lengths, q0=rng.uniform(-3, 3, size=(B, 7)), warm_start=warm_start)
    assert np.max(sol.position_error) < 1e-12
    half_turn = rz(np.pi)
    for b in range(B):
        for ours, true in zip(reference_rotations(sol.angles[b]), reference_rotations(truth[b])):
            same = np.max(np.abs(ours - true), axis=(-2, -1))
            turned = np.max(np.abs(ours - true @ half_turn), axis=(-2, -1))
            assert np.max(np.minimum(same, turned)) < 1e-9
    flipped = [np.mean(np.abs(np.angle(np.exp(1j * (sol.angles[..., c] - truth[..., c])))) > 1e-6) for c in range(7)]
    assert min(flipped[2:6]) > 0.1            # both branches do occur


def _wrap(x):
    return np.angle(np.exp(1j * x))


def reference_branch_choice(branches, free, start):
    """The warm-started recurrence written frame by frame (solver.fly.closed_form's rule): free angles
    keep the previous answer; a branch on the previous answer's sheet (sign of sin of the second
    angle) unless that is zero, the nearest in squared wrapped differences; the representative
    nearest the previous answer."""
    x, out = start.copy(), []
    for f in range(branches.shape[0]):
        candidates = np.where(free[f], x, branches[f])
        distance = np.sum(_wrap(candidates - x) ** 2, axis=-1)
        side = np.sin(x[1]) if abs(np.sin(x[1])) > 1e-12 else 0.0
        distance[np.sin(candidates[:, 1]) * side < 0] = np.inf
        x = x + _wrap(candidates[np.argmin(distance)] - x)
        out.append(x)
    return np.array(out)


def test_batched_branch_choice_equals_the_frame_by_frame_recurrence():
    """resolve_branches (all frames at once, the choice by composing branch maps) against the
    recurrence written as a loop, on random two-branch sequences (c, e) / (c + pi, -e) with large
    jumps, frames on the axis (e = 0 in some sequences, pi in the others, c free; not both in one
    sequence, where a step of exactly pi would make the nearest representative a tie) and frames
    with nothing known (both free)."""
    from solver.fly.closed_form import resolve_branches

    rng = np.random.default_rng(8)
    B, F = 6, 400
    c, e = rng.uniform(-np.pi, np.pi, size=(2, B, F))
    kind = rng.choice(3, size=(B, F), p=[0.8, 0.14, 0.06])           # regular, on the axis, unknown
    e = np.where(kind == 1, np.pi * (np.arange(B)[:, None] % 2), e)
    branches = np.stack([np.stack([c, e], -1), np.stack([c + np.pi, -e], -1)], axis=-2)
    free = np.stack([kind > 0, kind == 2], axis=-1)
    start = rng.uniform(-3, 3, size=(B, 2))
    start[0, 1] = 0.0                                                  # one start on the axis
    got = resolve_branches(branches, free, start, lambda x: np.sin(x[..., 1]))
    for b in range(B):
        np.testing.assert_allclose(got[b], reference_branch_choice(branches[b], free[b], start[b]), atol=1e-9)
    assert np.max(np.abs(got)) > 2 * np.pi               # answers leave (-pi, pi] the way the solver does


def _degenerate_cases(k, clean):
    """Frame 5 of k made degenerate for one stage: {name: (keypoints, stage)}."""
    o, tip1, tip2, tip3 = clean.fitted[5, :4]
    R_tibia = reference_rotations(clean.angles[5:6])[2][0]
    cases = {"Tibia on the coxa axis beyond its tip": (2, tip1 + 0.8 * (tip1 - o), 1),
             "Tibia on the coxa axis before its tip": (2, tip1 - 0.2 * (tip1 - o), 1),
             "Tibia at the coxa tip": (2, tip1, 1),
             "Tarsus on the femur axis": (3, tip2 + 0.5 * (tip2 - tip1), 2),
             "Claw on the tibia's y axis": (4, tip3 + 0.3 * R_tibia[:, 1], 3),
             "Tibia missing": (2, np.nan, 1),
             "Claw missing": (4, np.nan, 3)}
    out = {}
    for name, (keypoint, point, stage) in cases.items():
        kk = k.copy()
        kk[5, keypoint] = point
        out[name] = (kk, stage)
    return out


@have_data
def test_keypoints_on_an_axis_or_missing_leave_angles_where_the_iteration_leaves_them():
    """A keypoint on the axis of one of its stage's angles (or at the joint, or missing) leaves that
    angle free: it keeps the previous frame's value, as in the iterated stages, which agree on
    every angle up to that stage and on every keypoint error (the later stages may take the
    other branch: both fit equally)."""
    legs = load_legs(SMALL)
    k = legs["RF_leg"][:10]
    lengths = segment_lengths(legs["RF_leg"])
    clean = solve_leg(k, lengths=lengths)
    for name, (kk, stage) in _degenerate_cases(k, clean).items():
        ours = solve_leg(kk, lengths=lengths)
        theirs = solve_leg(kk, "sequential-iterative", lengths=lengths)
        upto = STAGE_COLUMNS[stage][-1] + 1
        np.testing.assert_allclose(ours.angles[:, :upto], theirs.angles[:, :upto], atol=1e-7, err_msg=name)
        np.testing.assert_allclose(ours.position_error, theirs.position_error, atol=1e-7, err_msg=name)
        assert np.array_equal(np.isnan(ours.position_error), np.isnan(theirs.position_error)), name
        held = STAGE_COLUMNS[stage][:1] if "axis" in name else STAGE_COLUMNS[stage]
        np.testing.assert_array_equal(ours.angles[5, list(held)], ours.angles[4, list(held)], err_msg=name)
        np.testing.assert_allclose(ours.angles[6:, :STAGE_COLUMNS[stage][0]], clean.angles[6:, :STAGE_COLUMNS[stage][0]])
    # Frame 0 missing its Femur keypoint: stage 1 stays at the start, as iterated.
    kk = k.copy()
    kk[0, 1] = np.nan
    start = np.array([0.1, 0.1, 0, 0, 0, 0, 0])
    ours = solve_leg(kk, lengths=lengths, q0=start)
    theirs = solve_leg(kk, "sequential-iterative", lengths=lengths, q0=start)
    np.testing.assert_array_equal(ours.angles[0, :2], [0.1, 0.1])
    np.testing.assert_allclose(ours.angles, theirs.angles, atol=1e-7)


@have_data
def test_a_missing_coxa_keypoint_holds_the_whole_leg_for_that_frame():
    """Without the root the frame fixes nothing: every angle keeps the previous frame's value, every
    error of that frame is NaN, and the other frames are those of the complete data. (The iterated
    stages cannot run this: the engine's rank test fails on the NaN base.)"""
    legs = load_legs(SMALL)
    k = legs["LM_leg"][:20].copy()
    lengths = segment_lengths(k)
    clean = solve_leg(k, lengths=lengths)
    k[7, 0] = np.nan
    ours = solve_leg(k, lengths=lengths)
    np.testing.assert_array_equal(ours.angles[7], ours.angles[6])
    assert np.all(np.isnan(ours.position_error[7])) and np.all(np.isnan(ours.report.position_error[7]))
    assert not np.any(ours.report.converged[7]) and np.all(ours.report.converged[np.arange(20) != 7])
    others = np.arange(20) != 7
    np.testing.assert_allclose(ours.angles[others], clean.angles[others], atol=1e-12)
    np.testing.assert_allclose(ours.position_error[others], clean.position_error[others], atol=1e-12)


def test_bad_leg_input_is_refused_with_a_message():
    k = reference_leg(np.zeros((4, 7)), [0.4, 0.7, 0.5, 0.7], np.zeros(3))
    with pytest.raises(ValueError, match="method"):
        solve_leg(k, "closed")
    with pytest.raises(ValueError, match="max_passes"):
        solve_leg(k, max_passes=2)
    with pytest.raises(ValueError, match="warm_start"):
        solve_leg(k, warm_start="sideways")
    with pytest.raises(ValueError, match="lengths"):
        solve_leg(k, lengths=[0.4, 0.0, 0.5, 0.7])
    with pytest.raises(ValueError, match="lengths"):
        solve_leg(k, lengths=[0.4, np.nan, 0.5, 0.7])
    with pytest.raises(ValueError, match="q0"):
        solve_leg(k, q0=np.zeros(6))
    with pytest.raises(ValueError, match="q0"):
        solve_leg(k, q0=np.full(7, np.nan))
    with pytest.raises(ValueError, match="shape"):
        solve_leg(k[:, :4])
    missing = k.copy()
    missing[:, 2] = np.nan
    with pytest.raises(ValueError, match="no frame"):
        segment_lengths(missing)


def test_segment_lengths_skip_frames_with_a_missing_keypoint():
    rng = np.random.default_rng(9)
    k = rng.normal(size=(30, 5, 3))
    k[3, 2] = np.nan                       # the femur and tibia lengths of frame 3 are unknown
    expected = [np.mean([np.linalg.norm(k[f, i + 1] - k[f, i]) for f in range(30) if not (f == 3 and i in (1, 2))])
                for i in range(4)]
    np.testing.assert_allclose(segment_lengths(k), expected, rtol=1e-13)


# ------------------------------------------------------------------ head and antennae


def synthetic_head(rng, F, yaw=None, roll=None, pitch=None):
    """A rigid head with known angles: neck, antenna bases at (bx, +-by, bz) from it at rest,
    antennae of length 0.4 with known pitch / yaw (in the head frame, d = Ry(beta) Rx(gamma) (0,0,-1)),
    turned by R = Rz(yaw) Rx(roll) Ry(pitch) written with explicit matrices here."""
    yaw = rng.uniform(-1.4, 1.4, F) if yaw is None else np.full(F, yaw)
    roll = rng.uniform(-1.4, 1.4, F) if roll is None else np.full(F, roll)
    pitch = rng.uniform(-1.2, 1.2, F) if pitch is None else np.full(F, pitch)
    R = rz(yaw) @ rx(roll) @ ry(pitch)
    neck = rng.normal(size=(F, 3))
    bx, by, bz = 0.3, 0.12, 0.15
    rest = {"left": np.array([bx, by, bz]), "right": np.array([bx, -by, bz])}
    antenna = {}
    for side in ("left", "right"):
        a_pitch, gamma = rng.uniform(-0.8, 0.8, F), rng.uniform(-1.2, 1.2, F)
        beta = a_pitch + np.arctan2(-bx, -bz)          # direction of (base - neck) from -z, about y
        d = 0.4 * (ry(beta) @ rx(gamma) @ np.array([0.0, 0.0, -1.0]))
        antenna[side] = {"pitch": a_pitch, "yaw": gamma - np.pi / 2,
                         "base": neck + R @ rest[side], "tip": neck + np.einsum("fij,fj->fi", R, rest[side] + d)}
    return dict(yaw=yaw, roll=roll, pitch=pitch, R=R, neck=neck, antenna=antenna,
                rest_pitch=np.arctan2(-bz, bx))


def test_head_angles_are_recovered_from_synthetic_keypoints():
    rng = np.random.default_rng(3)
    h = synthetic_head(rng, 500)
    L, Rb = h["antenna"]["left"]["base"], h["antenna"]["right"]["base"]
    got = head_angles(L, Rb, h["neck"], rest_pitch=h["rest_pitch"])
    np.testing.assert_allclose(got.yaw, h["yaw"], atol=1e-9)
    np.testing.assert_allclose(got.roll, h["roll"], atol=1e-9)
    np.testing.assert_allclose(got.pitch, h["pitch"], atol=1e-9)
    np.testing.assert_allclose(got.rotation, h["R"], atol=1e-9)
    np.testing.assert_allclose(head_rotation(h["roll"], h["pitch"], h["yaw"]), h["R"], atol=1e-15)


@pytest.mark.parametrize("turn", [{"yaw": np.pi / 2}, {"yaw": -np.pi / 2}, {"roll": 1.45}, {"pitch": np.pi / 2},
                                  {"yaw": np.pi / 2, "roll": 1.2}])
def test_antenna_angles_are_recovered_even_when_the_head_turns_90_degrees(turn):
    rng = np.random.default_rng(4)
    h = synthetic_head(rng, 200, **turn)
    L, Rb = h["antenna"]["left"]["base"], h["antenna"]["right"]["base"]
    head = head_angles(L, Rb, h["neck"], rest_pitch=h["rest_pitch"])
    for side in ("left", "right"):
        a = h["antenna"][side]
        got = antenna_angles(a["base"], a["tip"], L, Rb, h["neck"], head=head)
        np.testing.assert_allclose(got.pitch, a["pitch"], atol=1e-9)
        np.testing.assert_allclose(got.yaw, a["yaw"], atol=1e-9)
        # Computing them without head de-rotation gets the wrong answer (the seed's warning).
        naive = antenna_angles(a["base"], a["tip"], L, Rb, h["neck"],
                               head=head_angles(*(np.zeros((200, 3)) + v for v in ([0, 1, 0], [0, -1, 0], [-1, 0, 0]))))
        assert np.max(np.abs(naive.pitch - a["pitch"]) + np.abs(naive.yaw - a["yaw"])) > 0.1


def test_single_axis_head_turns_match_the_seeds_global_plane_angles():
    """With only one head angle non-zero, each angle is exactly the seed's: the angle between
    two vectors projected on a global plane, computed here with arccos and a sign."""
    rng = np.random.default_rng(5)

    def plane_angle(u, v, drop, normal_sign):
        u, v = u.copy(), v.copy()
        u[:, drop] = v[:, drop] = 0
        cos = np.sum(u * v, -1) / np.linalg.norm(u, axis=-1) / np.linalg.norm(v, axis=-1)
        return normal_sign * np.arccos(np.clip(cos, -1, 1))

    for which, drop in (("roll", 0), ("yaw", 2), ("pitch", 1)):
        value = 0.7
        h = synthetic_head(rng, 10, **{k: (value if k == which else 0.0) for k in ("yaw", "roll", "pitch")})
        L, Rb = h["antenna"]["left"]["base"], h["antenna"]["right"]["base"]
        got = head_angles(L, Rb, h["neck"], rest_pitch=h["rest_pitch"])
        if which == "pitch":
            u = 0.5 * (L + Rb) - h["neck"]
            seed = plane_angle(np.tile([1.0, 0, 0], (10, 1)), u, drop, np.sign(-u[:, 2])) - h["rest_pitch"]
        else:
            axis = np.tile([0.0, 1.0, 0.0], (10, 1))
            w = L - Rb
            seed = plane_angle(axis, w, drop, np.sign(w[:, 2] if which == "roll" else -w[:, 0]))
        np.testing.assert_allclose(getattr(got, which), seed, atol=1e-9)
        np.testing.assert_allclose(getattr(got, which), value, atol=1e-9)


def test_a_missing_coxa_keypoint_leaves_the_frame_where_it_was_in_both_methods():
    """The Coxa keypoint places the leg's base: without it (NaN) a frame has no base. Both the
    closed form and the iterated stages keep the previous frame's angles there, report NaN
    errors for it, and solve the other frames as before (the iterated path used to raise
    LinAlgError in its redundancy check)."""
    legs = load_legs(SMALL)
    k = legs["RF_leg"][:10].copy()
    lengths = segment_lengths(legs["RF_leg"])
    clean = solve_leg(k, lengths=lengths)
    k[3, 0] = np.nan
    for method in ("sequential", "sequential-iterative"):
        r = solve_leg(k, method, lengths=lengths)
        assert np.all(np.isfinite(r.angles)), method
        assert np.all(np.isnan(r.position_error[3])), method
        np.testing.assert_allclose(r.angles[3], r.angles[2], rtol=0, atol=1e-8, err_msg=method)
        others = np.r_[0:3, 4:10]
        np.testing.assert_allclose(r.position_error[others], clean.position_error[others], atol=1e-7, err_msg=method)


def test_a_stage_without_its_keypoint_is_not_reported_converged_by_either_method():
    """A stage whose keypoint is missing in a frame has fitted nothing there: converged False and
    a NaN error, in the closed form and in the iterated stages (which used to say converged)."""
    legs = load_legs(SMALL)
    k = legs["RF_leg"][:6].copy()
    k[2, 2] = np.nan                                          # the Tibia keypoint: stage 1
    lengths = segment_lengths(legs["RF_leg"])
    for method in ("sequential", "sequential-iterative"):
        report = solve_leg(k, method, lengths=lengths).report
        assert np.isnan(report.position_error[2, 1]) and not report.converged[2, 1], method
        assert report.converged[2, [0, 2, 3]].all() and report.converged[[0, 1, 3, 4, 5]].all(), method

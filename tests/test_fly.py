"""The fly-leg preset (solver/fly.py): safe loading, the leg model, sequential vs whole-chain IK on
the real DeepFly3D keypoints, and vector-based head / antenna angles.

References: forward kinematics written out here (scipy's intrinsic Euler rotations for the ThC
joint, explicit matrices after it), the closed-form optimum of each two-angle stage (the nearest
point of a sphere), a dense grid for the one-angle stage, and keypoints synthesised from known
angles. Units of the real data are mm (NeuroMechFly template scale).
"""

import os
import pickle

import numpy as np
import pytest

# scipy's Euler angles are the independent forward kinematics these tests check against.
Rotation = pytest.importorskip("scipy.spatial.transform", reason="scipy is the reference here").Rotation

from solver import fly
from solver.fly import (
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

SMALL = fly.data_path("pose3d_aligned.pkl")
LARGE = fly.data_path("pose_result__210902_PR_Fly1_aligned.pkl")
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


def reference_leg(angles, lengths, origin):
    """Keypoints (F, 5, 3): ThC = origin; R_coxa = intrinsic XYZ Euler (yaw, pitch, roll); each
    tip = joint + R_segment (0, 0, -L)."""
    a = np.asarray(angles, float)
    down = [np.array([0.0, 0.0, -L]) for L in lengths]
    R_coxa = Rotation.from_euler("XYZ", a[:, :3]).as_matrix()          # upper case: intrinsic
    R_femur = R_coxa @ ry(a[:, 3]) @ rz(a[:, 4])
    R_tibia = R_femur @ ry(a[:, 5])
    R_tarsus = R_tibia @ ry(a[:, 6])
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


@pytest.mark.parametrize("batched", [False, True])
def test_synthetic_leg_motion_is_recovered(batched):
    """Keypoints made by the reference FK from a smooth motion of known angles: the four stages
    (warm-started from the true frame 0) recover the angles and every keypoint."""
    rng = np.random.default_rng(2)
    lengths = np.array([0.43, 0.71, 0.5, 0.75])
    motions = [smooth_angles(rng, 60, WALKING_CENTER, 0.35) for _ in range(3)]
    keypoints = [reference_leg(m, lengths, np.array([0.35, -0.27, 0.4])) for m in motions]
    if batched:
        sol = solve_leg(np.stack(keypoints), lengths=np.tile(lengths, (3, 1)), q0=np.stack([m[0] for m in motions]))
        angles, errors = sol.angles, sol.error
    else:
        sols = [solve_leg(k, lengths=lengths, q0=m[0]) for k, m in zip(keypoints, motions)]
        angles, errors = np.stack([s.angles for s in sols]), np.stack([s.error for s in sols])
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
            np.testing.assert_allclose(s.error, np.linalg.norm(fk - k, axis=-1), atol=1e-12)
            assert np.all(s.error[:, 0] < 1e-12)            # the ThC joint follows the Coxa keypoint


@have_data
def test_sequential_keeps_proximal_keypoints_closer_than_the_whole_chain(real):
    """Per leg, the Femur, Tibia and Tarsus keypoints (the coxa, femur and tibia tips): mean and
    maximum error over frames, sequential < whole chain. Measured (mm, mean over legs and frames),
    100 frames: sequential 0.0099 / 0.0221 / 0.0254, whole chain 0.266 / 0.916 / 0.733;
    1000 frames: sequential 0.0135 / 0.0231 / 0.0268, whole chain 0.313 / 0.896 / 0.646."""
    _, legs, seq, whole = real
    for leg in legs:
        for i in (1, 2, 3):
            assert seq[leg].error[:, i].mean() < whole[leg].error[:, i].mean(), (leg, KEYPOINTS[i])
            assert seq[leg].error[:, i].max() < whole[leg].error[:, i].max(), (leg, KEYPOINTS[i])
        # ... by a wide margin: measured ratios of the means 0.016-0.092.
        assert seq[leg].error[:, 1:4].mean() < 0.2 * whole[leg].error[:, 1:4].mean()


# Claw error of sequential IK (mm), all legs and frames, with the measured value next to each bound.
CLAW_BOUNDS = {
    "small": {"mean": 0.16, "max": 0.55},      # measured: mean 0.1402, max 0.4794 (RH_leg)
    "large": {"mean": 0.16, "max": 1.05},      # measured: mean 0.1393, max 0.9543 (LF_leg)
}


@have_data
def test_claw_error_of_sequential_ik_stays_below_the_measured_bound(real):
    name, legs, seq, whole = real
    claw = np.stack([seq[leg].error[:, 4] for leg in legs])
    assert claw.mean() < CLAW_BOUNDS[name]["mean"]
    assert claw.max() < CLAW_BOUNDS[name]["max"]
    # The whole chain puts the claw on its keypoint (all claws are within reach: measured
    # |Claw - Coxa| at most 0.965 of the leg's length).
    for leg, k in legs.items():
        reach = np.linalg.norm(k[:, 4] - k[:, 0], axis=-1)
        assert np.all(reach < whole[leg].lengths.sum())
        assert np.all(whole[leg].error[:, 4] < 1e-8)


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
            np.testing.assert_allclose(s.error[:, i], sphere, atol=1e-8)
        for f in range(0, len(k), 10 if name == "small" else 100):
            trial = np.repeat(s.angles[f:f + 1], grid.size, axis=0)
            trial[:, 6] = grid
            best = np.min(np.linalg.norm(reference_leg(trial, s.lengths, k[f, 0])[:, 4] - k[f, 4], axis=-1))
            assert best - s.lengths[3] * (grid[1] - grid[0]) / 2 <= s.error[f, 4] <= best + 1e-12


@have_data
def test_warm_started_stages_equal_the_frame_by_frame_recurrence():
    """The batched passes land on the seed's frame loop (frame f from frame f-1's solution)."""
    legs = load_legs(SMALL)
    k = np.stack([legs["RM_leg"], legs["LF_leg"]])
    passes = solve_leg(k)
    loop = solve_leg(k, warm_start="sequential")
    np.testing.assert_allclose(passes.angles, loop.angles, atol=1e-6)
    assert passes.report.warm_starts == ["previous"] * 4
    assert np.all(passes.report.passes <= 3)             # measured: 2 per stage
    # Without warm starts, frames of these legs flip to the other (roll + pi) branch.
    cold = solve_leg(k, warm_start="none")
    np.testing.assert_allclose(cold.error, loop.error, atol=1e-6)
    assert np.max(np.abs(cold.angles - loop.angles)) > 1.0


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

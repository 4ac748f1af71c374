"""Sequential (staged) IK (solver.sequential) on a small arm that is not the fly leg.

References: forward kinematics written out here with Rodrigues' formula, the closed-form optimum
of a two-angle "aim" joint (the nearest point of a sphere), a dense 1-D grid for a one-angle stage,
and the frame-by-frame recurrence itself for the batched warm start.
"""

import numpy as np
import pytest

from solver import Model, Segment, Settings, revolute, swing
from solver.rotations import exp_map
from solver.sequential import Stage, sequential_ik, stage_problem

L0, L1, L2 = 1.0, 0.8, 0.5
SETTINGS = Settings(method="sdls", precision=1e-10, max_iterations=200)


def arm() -> Model:
    """Three bones along +Y: an aim joint (RotX then RotZ), a swing plus a twist (RotY) that no
    stage solves, and a one-angle hinge (RotX)."""
    up0, up1 = np.eye(4), np.eye(4)
    up0[1, 3], up1[1, 3] = L0, L1
    return Model([
        Segment("upper", -1, np.eye(4), (revolute("X"), revolute("Z")), L0),
        Segment("fore", 0, up0, (swing(), revolute("Y")), L1),
        Segment("hand", 1, up1, (revolute("X"),), L2),
    ])


STAGES = [
    Stage((0, 1), "upper", 1, (0.0, L0, 0.0), "upper tail"),
    Stage(("fore.swing_x", "fore.swing_z"), "fore", 2, (0.0, L1, 0.0), "fore tail"),
    Stage((5,), "hand", 3, (0.0, L2, 0.0), "hand tail"),
]


# ----------------------------------------------------------------- reference kinematics


def rodrigues(axis, angle):
    axis = np.asarray(axis, float)
    axis = axis / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    a = np.asarray(angle, float)[..., None, None]
    return np.eye(3) + np.sin(a) * K + (1 - np.cos(a)) * (K @ K)


def rotvec(phi):
    """exp of a rotation vector phi (F, 3) by Rodrigues, angle by angle."""
    t = np.linalg.norm(phi, axis=-1)
    out = np.empty(phi.shape[:-1] + (3, 3))
    for i, (p, a) in enumerate(zip(phi, t)):
        out[i] = np.eye(3) if a < 1e-15 else rodrigues(p / a, a)
    return out


def reference_keypoints(q):
    """Root, upper tail, fore tail, hand tail (F, 4, 3), written out joint by joint."""
    F = q.shape[0]
    R0 = rodrigues([1, 0, 0], q[:, 0]) @ rodrigues([0, 0, 1], q[:, 1])
    p1 = R0 @ [0, L0, 0]
    phi = np.stack([q[:, 2], np.zeros(F), q[:, 3]], axis=-1)
    R1 = R0 @ rotvec(phi) @ rodrigues([0, 1, 0], q[:, 4])
    p2 = p1 + R1 @ [0, L1, 0]
    R2 = R1 @ rodrigues([1, 0, 0], q[:, 5])
    p3 = p2 + R2 @ [0, L2, 0]
    return np.stack([np.zeros((F, 3)), p1, p2, p3], axis=1)


def smooth_trajectory(rng, F, center, amplitude):
    """Coordinates moving smoothly: sums of two sinusoids per coordinate."""
    t = np.linspace(0, 1, F)[:, None]
    w = rng.uniform(0.5, 2.0, size=(2, center.size))
    phase = rng.uniform(0, 2 * np.pi, size=(2, center.size))
    wave = 0.6 * np.sin(2 * np.pi * w[0] * t + phase[0]) + 0.4 * np.sin(2 * np.pi * w[1] * t + phase[1])
    return center + amplitude * wave


def true_motion(F=60, seed=0):
    rng = np.random.default_rng(seed)
    center = np.array([0.4, -0.3, 0.5, 0.2, 0.3, 0.9])
    return smooth_trajectory(rng, F, center, np.array([0.5, 0.5, 0.6, 0.6, 0.0, 0.6]))


def noisy(keypoints, seed=1, scale=0.05):
    """Measured keypoints: the true ones plus noise, so segment lengths no longer match."""
    rng = np.random.default_rng(seed)
    out = keypoints + rng.normal(scale=scale, size=keypoints.shape)
    out[:, 0] = keypoints[:, 0]
    return out


# ----------------------------------------------------------------- tests


@pytest.mark.parametrize("warm_start", ["previous", "sequential", "auto"])
def test_exact_keypoints_recover_the_motion(warm_start):
    """Keypoints made by the reference FK from a smooth motion; starting frame 0 at the true pose,
    the warm-started stages follow the true solution branch in every frame."""
    q_true = true_motion()
    keypoints = reference_keypoints(q_true)
    result = sequential_ik(arm(), STAGES, keypoints, q0=q_true[0], settings=SETTINGS, warm_start=warm_start)
    fitted = reference_keypoints(result.q)
    assert np.max(np.linalg.norm(fitted - keypoints, axis=-1)) < 1e-8
    np.testing.assert_allclose(result.q, q_true, atol=1e-7)
    np.testing.assert_allclose(result.position_error, np.linalg.norm(fitted - keypoints, axis=-1)[:, 1:], atol=1e-12)


def test_without_warm_start_the_branch_flips_but_keypoints_still_match():
    """A motion on the far branch of the aim joint (RotX near 2.7 rad; (a + pi, pi - b) points the
    bone the same way). Every frame solved from the rest pose matches the keypoints but lands on
    the other branch in some frames; warm-started from the true frame 0, the stages follow the
    true branch throughout. (The twist, which no stage solves, starts at its true value.)"""
    rng = np.random.default_rng(0)
    q_true = smooth_trajectory(rng, 40, np.array([2.7, -0.3, 0.5, 0.2, 0.3, 0.9]),
                               np.array([0.5, 0.5, 0.6, 0.6, 0.0, 0.6]))
    keypoints = reference_keypoints(q_true)
    q0 = np.zeros(6)
    q0[4] = q_true[0, 4]
    cold = sequential_ik(arm(), STAGES, keypoints, q0=q0, settings=SETTINGS, warm_start="none")
    warm = sequential_ik(arm(), STAGES, keypoints, q0=q_true[0], settings=SETTINGS)
    for result in (cold, warm):
        assert np.max(np.linalg.norm(reference_keypoints(result.q) - keypoints, axis=-1)) < 1e-8
    assert cold.passes.tolist() == [1, 1, 1] and cold.warm_starts == ["none"] * 3
    assert np.max(np.abs(cold.q[:, 0] - q_true[:, 0])) > 1.0
    np.testing.assert_allclose(warm.q, q_true, atol=1e-7)


def test_batched_passes_equal_the_frame_by_frame_recurrence_on_noisy_data():
    """On noisy keypoints every stage is a least-squares problem; the batched passes must land on
    the recurrence x_f = solve(start = x_{f-1}) computed one frame at a time."""
    q_true = true_motion(F=80, seed=3)
    keypoints = noisy(reference_keypoints(q_true))
    loop = sequential_ik(arm(), STAGES, keypoints, q0=q_true[0], settings=SETTINGS, warm_start="sequential")
    passes = sequential_ik(arm(), STAGES, keypoints, q0=q_true[0], settings=SETTINGS, warm_start="previous")
    np.testing.assert_allclose(passes.q, loop.q, atol=1e-7)
    assert loop.passes.tolist() == [80] * 3
    assert np.all(passes.passes <= 4)                     # measured: 2 per stage
    assert np.all(passes.frame_solves < 2.5 * 80)


def test_each_stage_reaches_its_least_squares_optimum():
    """Stage 1 (aim joint: the bone can point anywhere) and stage 2 (swing: likewise) are best at
    the nearest point of a sphere, | |m - joint| - L |; stage 3 (one hinge) is checked against a
    dense grid over the hinge angle."""
    q_true = true_motion(F=20, seed=4)
    keypoints = noisy(reference_keypoints(q_true), seed=5, scale=0.08)
    result = sequential_ik(arm(), STAGES, keypoints, q0=q_true[0], settings=SETTINGS)
    fitted = reference_keypoints(result.q)
    sphere1 = np.abs(np.linalg.norm(keypoints[:, 1] - fitted[:, 0], axis=-1) - L0)
    sphere2 = np.abs(np.linalg.norm(keypoints[:, 2] - fitted[:, 1], axis=-1) - L1)
    np.testing.assert_allclose(result.position_error[:, 0], sphere1, atol=1e-9)
    np.testing.assert_allclose(result.position_error[:, 1], sphere2, atol=1e-9)

    grid = np.linspace(-np.pi, np.pi, 8001)
    best = np.empty(len(keypoints))
    for f in range(len(keypoints)):
        trial = np.repeat(result.q[f:f + 1], grid.size, axis=0)
        trial[:, 5] = grid
        best[f] = np.min(np.linalg.norm(reference_keypoints(trial)[:, 3] - keypoints[f, 3], axis=-1))
    assert np.all(result.position_error[:, 2] <= best + 1e-12)
    assert np.all(result.position_error[:, 2] >= best - L2 * (grid[1] - grid[0]) / 2)   # |d distance / d angle| <= L2


def test_earlier_stages_pass_through_and_unstaged_coordinates_keep_their_start():
    q_true = true_motion(F=30, seed=6)
    keypoints = noisy(reference_keypoints(q_true), seed=7)
    q0 = q_true[0].copy()
    one = sequential_ik(arm(), STAGES[:1], keypoints, q0=q0, settings=SETTINGS)
    two = sequential_ik(arm(), STAGES[:2], keypoints, q0=q0, settings=SETTINGS)
    three = sequential_ik(arm(), STAGES, keypoints, q0=q0, settings=SETTINGS)
    np.testing.assert_array_equal(two.q[:, :2], one.q[:, :2])
    np.testing.assert_array_equal(three.q[:, :4], two.q[:, :4])
    assert np.all(three.q[:, 4] == q0[4])                # the twist belongs to no stage
    np.testing.assert_array_equal(one.q[:, 2:], np.broadcast_to(q0[2:], (30, 4)))


def test_stage_problem_is_the_chain_up_to_the_keypoint_with_other_coordinates_frozen():
    model = arm()
    problem = stage_problem(model, STAGES[1])
    sub = problem.scene.model
    assert sub.names == ["upper", "fore"]
    np.testing.assert_array_equal(problem.columns, [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(problem.scene.joint_weight, [0, 0, 1, 1, 0])
    np.testing.assert_array_equal(problem.solved, [2, 3])
    with pytest.raises(ValueError, match="do not move"):
        stage_problem(model, Stage((5,), "fore", 2, (0, L1, 0)))
    with pytest.raises(KeyError):
        stage_problem(model, Stage(("nope",), "fore", 2))


def test_redundant_stage_runs_the_recurrence_and_the_passes_agree_with_it():
    """All six angles against the hand only: redundant, so 'auto' picks the frame loop; forcing
    the batched passes gives the same answer (their fixed point is the recurrence) in more passes."""
    q_true = true_motion(F=12, seed=8)
    keypoints = reference_keypoints(q_true)
    whole = [Stage(tuple(range(6)), "hand", 3, (0.0, L2, 0.0), "whole arm")]
    auto = sequential_ik(arm(), whole, keypoints, q0=q_true[0], settings=SETTINGS)
    forced = sequential_ik(arm(), whole, keypoints, q0=q_true[0], settings=SETTINGS, warm_start="previous")
    assert auto.warm_starts == ["sequential"]
    np.testing.assert_allclose(forced.q, auto.q, atol=1e-7)
    assert np.max(np.linalg.norm(reference_keypoints(auto.q)[:, 3] - keypoints[:, 3], axis=-1)) < 1e-9


def test_rank_deficient_stage_counts_as_redundant():
    """The swing plus the twist against the fore tail: three coordinates, but the twist (about the
    bone) never moves the tail, so the generic rank is 2 and 'auto' must run the loop."""
    q_true = true_motion(F=10, seed=9)
    keypoints = noisy(reference_keypoints(q_true), seed=10)
    stages = [STAGES[0], Stage((2, 3, 4), "fore", 2, (0.0, L1, 0.0))]
    result = sequential_ik(arm(), stages, keypoints, q0=q_true[0], settings=SETTINGS)
    assert result.warm_starts == ["previous", "sequential"]


def test_moving_bases_carry_the_solution():
    """Moving the arm's base by a rigid motion per frame and the keypoints with it leaves the
    angles unchanged."""
    q_true = true_motion(F=25, seed=11)
    keypoints = noisy(reference_keypoints(q_true), seed=12)
    rng = np.random.default_rng(13)
    bases = np.broadcast_to(np.eye(4), (25, 1, 4, 4)).copy()
    bases[:, 0, :3, :3] = exp_map(rng.normal(scale=0.5, size=(25, 3)))
    bases[:, 0, :3, 3] = rng.normal(size=(25, 3))
    moved = np.einsum("fij,fkj->fki", bases[:, 0, :3, :3], keypoints) + bases[:, 0, None, :3, 3]
    still = sequential_ik(arm(), STAGES, keypoints, q0=q_true[0], settings=SETTINGS)
    carried = sequential_ik(arm(), STAGES, moved, q0=q_true[0], bases=bases, settings=SETTINGS)
    np.testing.assert_allclose(carried.q, still.q, atol=1e-7)
    np.testing.assert_allclose(carried.position_error, still.position_error, atol=1e-9)


@pytest.mark.parametrize("warm_start", ["previous", "sequential"])
def test_independent_sequences_solve_together_as_they_do_alone(warm_start):
    """Keypoints (B, F, K, 3): each sequence warm-starts within itself only, so solving three
    sequences in one call equals solving each alone (frame 0 of each from its own q0)."""
    keypoints = np.stack([noisy(reference_keypoints(true_motion(F=15, seed=s)), seed=20 + s) for s in range(3)])
    q0 = np.stack([true_motion(F=15, seed=s)[0] for s in range(3)])[:, None]          # (B, 1, n)
    together = sequential_ik(arm(), STAGES, keypoints, q0=q0, settings=SETTINGS, warm_start=warm_start)
    assert together.q.shape == (3, 15, 6) and together.position_error.shape == (3, 15, 3)
    for b in range(3):
        alone = sequential_ik(arm(), STAGES, keypoints[b], q0=q0[b, 0], settings=SETTINGS, warm_start=warm_start)
        np.testing.assert_allclose(together.q[b], alone.q, atol=1e-7)
        np.testing.assert_allclose(together.position_error[b], alone.position_error, atol=1e-9)

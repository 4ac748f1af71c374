"""The Franka Panda model against its DH table, and 6-D pose IK with random restarts (solver.restarts).

Tolerance 1e-5 means: position error <= 1e-5 m and rotation error (angle of the relative
rotation) <= 1e-5 rad, both at once, checked here by our own forward kinematics.
"""

import numpy as np
import pytest

from solver import Settings, forward_kinematics, solve_animation
from solver.examples import PANDA_DH, PANDA_FLANGE, PANDA_LOWER, PANDA_UPPER, panda_arm, pose_scene
from solver.restarts import middle_of_limits, solve_with_restarts

TOLERANCE = 1e-5


def dh_product(q):
    """Flange pose by the modified-DH product, each link Rx(alpha) Tx(a) Rz(theta) Tz(d) written out."""
    def link(a, d, alpha, theta):
        ca, sa, ct, st = np.cos(alpha), np.sin(alpha), np.cos(theta), np.sin(theta)
        return np.array([[ct, -st, 0.0, a],
                         [st * ca, ct * ca, -sa, -d * sa],
                         [st * sa, ct * sa, ca, d * ca],
                         [0.0, 0.0, 0.0, 1.0]])
    T = np.eye(4)
    for (a, d, alpha), theta in zip(PANDA_DH + (PANDA_FLANGE,), list(q) + [0.0]):
        T = T @ link(a, d, alpha, theta)
    return T


def rotation_angle(R):
    """The angle of rotations R (F, 3, 3), from both its sine and cosine (exact near zero)."""
    sin = 0.5 * np.linalg.norm(np.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]],
                                        axis=-1), axis=-1)
    return np.arctan2(sin, 0.5 * (np.trace(R, axis1=-2, axis2=-1) - 1.0))


def pose_errors(model, q, targets):
    """Position (m) and rotation (rad) distance from the flange at q to each target (F, 4, 4)."""
    T = forward_kinematics(model, q).frames[:, -1]
    position = np.linalg.norm(T[:, :3, 3] - targets[:, :3, 3], axis=-1)
    rotation = rotation_angle(np.swapaxes(targets[:, :3, :3], -1, -2) @ T[:, :3, :3])
    return position, rotation


def random_targets(model, n, seed):
    q = np.random.default_rng(seed).uniform(model.lower, model.upper, (n, model.n_coordinates))
    return q, forward_kinematics(model, q).frames[:, -1]


def test_panda_forward_kinematics_is_the_dh_product():
    model = panda_arm()
    assert model.n_coordinates == 7
    np.testing.assert_array_equal(model.lower, PANDA_LOWER)
    np.testing.assert_array_equal(model.upper, PANDA_UPPER)
    q, ours = random_targets(model, 200, seed=0)
    theirs = np.stack([dh_product(row) for row in q])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    # Franka's zero pose: the flange 0.088 m forward, 0.926 m up, pointing down (Rx(pi)).
    np.testing.assert_allclose(dh_product(np.zeros(7))[:3, 3], [0.088, 0.0, 0.926], atol=1e-12)
    np.testing.assert_allclose(dh_product(np.zeros(7))[:3, :3], np.diag([1.0, -1.0, -1.0]), atol=1e-12)


def test_random_reachable_poses_are_solved_to_tolerance():
    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 300, seed=1)
    result = solve_with_restarts(scene, targets[:, None], Settings(precision=TOLERANCE), rng=2, budget=np.inf,
                                 max_restarts=200)
    assert result.converged.all()
    assert not result.first_converged.all()          # some poses did need restarts
    assert np.all(result.q >= model.lower) and np.all(result.q <= model.upper)
    position, rotation = pose_errors(model, result.q, targets)
    assert position.max() <= TOLERANCE and rotation.max() <= TOLERANCE
    np.testing.assert_allclose(result.position_error[:, 0], position, atol=1e-12)
    np.testing.assert_allclose(result.rotation_error[:, 0], rotation, atol=1e-9)
    assert np.all(result.restarts[result.first_converged] == 0) and np.all(result.restarts[~result.first_converged] > 0)


def test_restarts_never_return_a_worse_answer_than_the_first_attempt():
    """Against the plain solve from the middle of the limits: converged frames are the same answer,
    the others are no further off (an unreachable half of the targets keeps them unconverged)."""
    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 60, seed=3)
    p = targets[::2, :3, 3]                          # 1.5 m from the base: beyond the arm's reach
    targets[::2, :3, 3] = 1.5 * p / np.linalg.norm(p, axis=-1, keepdims=True)
    settings = Settings(precision=TOLERANCE)
    first = solve_animation(scene, np.tile(middle_of_limits(scene), (60, 1)), targets[:, None], settings=settings)
    result = solve_with_restarts(scene, targets[:, None], settings, rng=4, budget=np.inf, max_restarts=20)
    np.testing.assert_array_equal(result.first_converged, first.converged)
    np.testing.assert_array_equal(result.q[first.converged], first.q[first.converged])
    assert np.all(result.converged >= first.converged)
    score = lambda r: r.position_error[:, 0] ** 2 + r.rotation_error[:, 0] ** 2  # noqa: E731
    stayed = ~result.converged
    assert stayed.sum() >= 30 and np.all(result.restarts[stayed] > 0)
    assert np.all(score(result)[stayed] <= score(first)[stayed])
    position, rotation = pose_errors(model, result.q, targets)
    np.testing.assert_allclose(result.position_error[:, 0], position, atol=1e-12)


def test_an_unreachable_pose_is_reported_not_solved_without_nan():
    model = panda_arm()
    scene = pose_scene(model)
    target = np.eye(4)
    target[:3, 3] = [2.0, 0.0, 0.5]                  # 2 m away: the arm reaches under 1 m
    result = solve_with_restarts(scene, target[None, None], Settings(precision=TOLERANCE), rng=5, budget=np.inf,
                                 max_restarts=40)
    assert not result.converged[0] and result.restarts[0] == 40
    assert np.isfinite(result.q).all() and np.isfinite(result.position_error).all()
    assert np.isfinite(result.rotation_error).all()
    assert np.all(result.q >= model.lower) and np.all(result.q <= model.upper)
    position, _ = pose_errors(model, result.q, target[None])
    assert position[0] > 1.0 and abs(result.position_error[0, 0] - position[0]) < 1e-12


def test_a_missing_target_is_not_retried_and_bad_budgets_are_refused():
    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 2, seed=6)
    targets[1, 0, 3] = np.nan
    result = solve_with_restarts(scene, targets[:, None], Settings(precision=TOLERANCE), rng=7, budget=np.inf,
                                 max_restarts=200)
    assert result.converged[0] and not result.converged[1] and result.restarts[1] == 0
    assert np.isfinite(result.q).all()
    for budget in (-1.0, np.nan):
        with pytest.raises(ValueError, match="budget"):
            solve_with_restarts(scene, targets[:1, None], budget=budget)
    with pytest.raises(ValueError, match="max_restarts"):
        solve_with_restarts(scene, targets[:1, None], max_restarts=-1)


def test_a_spent_budget_stops_the_first_solve_and_starts_no_restart():
    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 3, seed=8)
    result = solve_with_restarts(scene, targets[:, None], Settings(precision=TOLERANCE), rng=9, budget=0.0)
    assert (result.iterations == 0).all() and (result.restarts == 0).all() and not result.converged.any()
    np.testing.assert_array_equal(result.q, np.tile(middle_of_limits(scene), (3, 1)))


def test_starts_of_one_group_race_and_other_groups_are_untouched():
    """solve_animation's `groups`: a start already at its target ends its group's race at once;
    a group of its own solves exactly as it would alone."""
    model = panda_arm()
    scene = pose_scene(model)
    q, targets = random_targets(model, 2, seed=10)
    settings = Settings(precision=TOLERANCE, steps="damped", curvature=False)
    middle = middle_of_limits(scene)
    starts = np.stack([q[0], middle, middle])
    objects = targets[[0, 0, 1], None]
    alone = solve_animation(scene, middle[None], targets[1:, None], settings=settings)
    free = solve_animation(scene, starts, objects, settings=settings)
    raced = solve_animation(scene, starts, objects, settings=settings, groups=[0, 0, 1])
    assert free.iterations[1] > 0 and free.converged[1]                 # without the race it solves
    assert raced.converged[0] and not raced.converged[1] and raced.iterations[1] == 0
    np.testing.assert_array_equal(raced.q[1], middle)
    assert alone.converged[0] and raced.iterations[2] == alone.iterations[0]
    np.testing.assert_array_equal(raced.q[2], alone.q[0])

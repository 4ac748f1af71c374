"""Gradient descent IK and the Jacobian checker (solver.gradient).

References: the lecture's transform product F01 Rz F12 Rz F23 Rz p0 written out here with 4x4
matrices, central finite differences, and brute-force grids over the joint space.
"""

import numpy as np
import pytest

from solver import Model, Segment, Settings, solve_animation
from solver import forward_kinematics, point_jacobian, prismatic, revolute, sphere, swing
from solver.finite_differences import numerical_jacobian
from solver.examples import TOE, default_torso, quadruped_leg, quadruped_offsets, quadruped_scene
from solver.gradient import check_jacobians, gradient_descent, objective, point_positions
from tests.random_models import random_transform, random_tree


# ------------------------------------------------------------------ references


def rz(t):
    """The lecture's homogeneous R_z(t), batched."""
    c, s = np.cos(t), np.sin(t)
    R = np.zeros(np.shape(t) + (4, 4))
    R[..., 0, 0], R[..., 0, 1], R[..., 1, 0], R[..., 1, 1] = c, -s, s, c
    R[..., 2, 2] = R[..., 3, 3] = 1.0
    return R


def lecture_toe(q, torso=None):
    """Proj(T_world_torso F01 Rz(t1) F12 Rz(t2) F23 Rz(t3) [p0; 1]) for q (F, 3)."""
    torso = default_torso() if torso is None else torso
    F01, F12, F23 = quadruped_offsets()
    A = torso @ F01 @ rz(q[:, 0]) @ F12 @ rz(q[:, 1]) @ F23 @ rz(q[:, 2])
    return (A @ np.append(TOE, 1.0))[:, :3]


def well_conditioned_poses(rng, n, low=-1.0, high=1.0, ratio=0.05):
    """Random leg poses whose toe Jacobian (by finite differences of the lecture's product) has
    sigma_min / sigma_max above `ratio`: targets away from the workspace boundary, where plain
    gradient descent converges in a bounded number of steps."""
    q = rng.uniform(low, high, size=(8 * n, 3))
    s = np.linalg.svd(numerical_jacobian(lecture_toe, q), compute_uv=False)
    return q[s[:, 2] / s[:, 0] > ratio][:n]


# ------------------------------------------------------------------ Jacobian checker


def every_joint_kind_model(with_post=True):
    """A branching tree holding every joint kind: revolute about X, Y, Z and a skew axis,
    prismatic, swing and sphere, some segments with post transforms and none with identity rest."""
    rng = np.random.default_rng(42)
    T = [random_transform(rng) for _ in range(6)]
    post = random_transform(rng, 0.3) if with_post else None
    return Model([
        Segment("a", -1, T[0], (revolute("X"), revolute("Y")), 0.7),
        Segment("b", 0, T[1], (revolute("Z"), prismatic((0.3, -1.0, 0.5))), 1.1, post=post),
        Segment("c", 1, T[2], (swing(),), 0.9),
        Segment("d", 0, T[3], (sphere(),), 0.6),
        Segment("e", 3, T[4], (revolute((1.0, 2.0, -0.5)), swing(), prismatic("Y")), 0.8, post=post),
        Segment("f", 4, T[5], (sphere(), revolute("Y")), 0.5),
    ])


def test_check_jacobians_passes_for_every_joint_kind():
    model = every_joint_kind_model()
    kinds = {j.kind for j in model.joints}
    assert kinds == {"revolute", "prismatic", "swing", "sphere"}
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.2, 1.2, size=(4, model.n_coordinates))
    q[0] = 0.0                           # rotation vectors at zero: the series branch
    q[1, model.coordinates_of("d")] = [2.9, -0.8, 0.4]   # sphere near pi
    report = check_jacobians(model, q)
    assert report.linear.shape == report.angular.shape == (len(model.segments),)
    assert report.worst < 1e-6, (report.linear, report.angular)


@pytest.mark.parametrize("seed", range(6))
def test_check_jacobians_on_random_trees_with_bases(seed):
    rng = np.random.default_rng(100 + seed)
    model = random_tree(rng, n_segments=int(rng.integers(2, 10)), n_armatures=2)
    q = rng.uniform(-1.5, 1.5, size=(3, model.n_coordinates))
    bases = np.stack([np.stack([random_transform(rng) for _ in range(2)]) for _ in range(3)])
    points = rng.normal(size=(len(model.segments), 3))
    assert check_jacobians(model, q, points=points, bases=bases).worst < 1e-6


def test_check_jacobians_flags_a_wrong_jacobian():
    """The checker is only useful if it fails: flip the sign of one angular column of the swing
    joint and of one linear column of the prismatic joint, and it must report them (and only the
    segments they move)."""
    model = every_joint_kind_model()
    rng = np.random.default_rng(1)
    q = rng.uniform(-1, 1, size=(2, model.n_coordinates))

    def broken(m, pose, segments, points):
        J = point_jacobian(m, pose, segments, points).copy()
        J[..., 3:, m.coordinates_of("c")[1]] *= -1.0      # swing_z of segment c: angular rows
        return J

    report = check_jacobians(model, q, jacobian=broken)
    moved = model.moves[model.coordinates_of("c")[1]]
    assert np.all(report.angular[moved] > 1e-2)
    assert np.all(report.angular[~moved] < 1e-6) and np.all(report.linear < 1e-6)


# ------------------------------------------------------------------ the lecture's leg


def test_quadruped_model_is_the_lecture_product():
    model, foot, toe = quadruped_leg()
    rng = np.random.default_rng(2)
    q = rng.uniform(-np.pi, np.pi, size=(50, 3))
    np.testing.assert_allclose(point_positions(model, q, foot, toe), lecture_toe(q), atol=1e-15)
    # Every joint of the lecture's leg is an R_z: the engine's joint axes are the frames' z axes.
    assert all(j.kind == "revolute" and j.axis == (0.0, 0.0, 1.0) for j in model.joints)
    np.testing.assert_allclose(toe, [0.062, -0.062, 0.018])


def test_objective_gradient_matches_finite_differences():
    """grad f = 2 J^T C (analytic) against central differences of f itself."""
    model, foot, toe = quadruped_leg()
    rng = np.random.default_rng(3)
    q = rng.uniform(-2, 2, size=(20, 3))
    target = lecture_toe(rng.uniform(-1, 1, size=(20, 3)))
    pose = forward_kinematics(model, q)
    p = lecture_toe(q)
    J = point_jacobian(model, pose, np.array([foot]), p[:, None])[:, 0, :3]
    analytic = 2 * np.einsum("fkn,fk->fn", J, p - target)
    numeric = numerical_jacobian(lambda x: np.sum((lecture_toe(x) - target) ** 2, axis=-1), q)
    np.testing.assert_allclose(analytic, numeric, atol=1e-9)


@pytest.mark.parametrize("gradient", ["analytic", "finite"])
def test_gradient_descent_reaches_world_targets(gradient):
    """Targets given in the world frame (the torso is moved and turned in it), made by the
    lecture's product from random poses; the solution's toe, by the same product, is within the
    tolerance of the target in every frame."""
    model, foot, toe = quadruped_leg()
    rng = np.random.default_rng(4)
    q_true = well_conditioned_poses(rng, 40)
    target = lecture_toe(q_true)
    q0 = q_true + rng.uniform(-0.4, 0.4, size=q_true.shape)
    result = gradient_descent(model, foot, toe, target, q0, gradient=gradient, tolerance=1e-6)
    distance = np.linalg.norm(lecture_toe(result.q) - target, axis=-1)
    assert result.converged.all()
    assert np.all(distance <= 1e-6)
    np.testing.assert_allclose(result.position_error, distance, rtol=1e-9, atol=1e-15)
    assert np.all(result.iterations >= 1)
    # The start really was off target, by far more than the tolerance.
    assert np.min(np.linalg.norm(lecture_toe(q0) - target, axis=-1)) > 1e-3


def test_both_gradients_take_the_same_path():
    """Finite differences of f and 2 J^T C agree to ~1e-9, so the two runs take (nearly) the same
    Armijo steps and end at the same isolated solution, apart by about the stopping tolerance
    over the smallest singular value."""
    model, foot, toe = quadruped_leg()
    rng = np.random.default_rng(5)
    q_true = well_conditioned_poses(rng, 10)
    q0 = q_true + rng.uniform(-0.3, 0.3, size=q_true.shape)
    a = gradient_descent(model, foot, toe, lecture_toe(q_true), q0, gradient="analytic", tolerance=1e-9)
    f = gradient_descent(model, foot, toe, lecture_toe(q_true), q0, gradient="finite", tolerance=1e-9)
    assert a.converged.all() and f.converged.all()
    np.testing.assert_allclose(a.q, f.q, atol=1e-6)
    # Near-ties in the Armijo test can cost a few steps more or less (13 of 217 seen on numpy 1.24).
    assert np.all(np.abs(a.iterations - f.iterations) <= 0.1 * a.iterations)


def test_gradient_descent_finds_the_nearest_point_of_an_unreachable_target():
    """A target beyond the leg's reach: the best achievable distance, from a brute-force grid over
    the whole joint torus (refined around its best cell), bounds what descent can reach; descent
    from the grid's best pose must get at least as close and end at a stationary point."""
    model, foot, toe = quadruped_leg()
    target = lecture_toe(np.array([[0.3, -0.2, 0.1]]))[0] + np.array([0.0, 0.0, -0.4])
    grid = np.linspace(-np.pi, np.pi, 73)
    Q = np.stack(np.meshgrid(grid, grid, grid, indexing="ij"), axis=-1).reshape(-1, 3)
    d = np.linalg.norm(lecture_toe(Q) - target, axis=-1)
    best = Q[np.argmin(d)]
    step = grid[1] - grid[0]
    fine = np.linspace(-step, step, 41)
    Qf = best + np.stack(np.meshgrid(fine, fine, fine, indexing="ij"), axis=-1).reshape(-1, 3)
    grid_best = np.min(np.linalg.norm(lecture_toe(Qf) - target, axis=-1))

    result = gradient_descent(model, foot, toe, target, best, tolerance=1e-9)
    reached = np.linalg.norm(lecture_toe(result.q) - target, axis=-1)[0]
    assert not result.converged[0]
    assert reached <= grid_best + 1e-12
    assert reached >= grid_best - 1e-6          # a fine grid is within ~1e-6 of the optimum
    # Stationary: the analytic gradient vanishes relative to |C| |J|.
    pose = forward_kinematics(model, result.q)
    J = point_jacobian(model, pose, np.array([foot]), lecture_toe(result.q)[:, None])[0, 0, :3]
    grad = 2 * J.T @ (lecture_toe(result.q)[0] - target)
    assert np.linalg.norm(grad) < 1e-7 * reached * np.linalg.norm(J)


def test_gradient_descent_respects_joint_limits():
    """With limits, each step is projected (projected gradient with Armijo): the result stays
    inside and is no worse than the best grid pose inside the box."""
    F01, F12, F23 = quadruped_offsets()
    lo, hi = (-0.3, -0.2, 0.0), (0.3, 0.4, 0.5)
    model = Model([
        Segment("hip", -1, default_torso() @ F01, (revolute("Z", lower=lo[0], upper=hi[0]),)),
        Segment("thigh", 0, F12, (revolute("Z", lower=lo[1], upper=hi[1]),)),
        Segment("foot", 1, F23, (revolute("Z", lower=lo[2], upper=hi[2]),)),
    ])
    target = lecture_toe(np.array([[0.8, -1.0, 1.2]]))[0]      # reachable only outside the box
    axes = [np.linspace(a, b, 61) for a, b in zip(lo, hi)]
    Q = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    grid_best = np.min(np.linalg.norm(lecture_toe(Q) - target, axis=-1))
    result = gradient_descent(model, 2, TOE, target, np.zeros(3), tolerance=1e-9)
    assert np.all(result.q >= np.array(lo)) and np.all(result.q <= np.array(hi))
    assert np.linalg.norm(lecture_toe(result.q)[0] - target) <= grid_best + 1e-9


def test_gradient_descent_batches_frames_independently():
    """Solving frames together or one at a time gives the same answer."""
    model, foot, toe = quadruped_leg()
    rng = np.random.default_rng(6)
    q_true = well_conditioned_poses(rng, 6)
    q0 = q_true + rng.uniform(-0.3, 0.3, size=q_true.shape)
    target = lecture_toe(q_true)
    together = gradient_descent(model, foot, toe, target, q0)
    for f in range(6):
        alone = gradient_descent(model, foot, toe, target[f], q0[f])
        np.testing.assert_allclose(alone.q[0], together.q[f], atol=1e-12)
        assert alone.iterations[0] == together.iterations[f]


@pytest.mark.parametrize("method", ["dls", "pinv", "sdls"])
def test_solve_animation_reaches_the_same_world_targets(method):
    scene = quadruped_scene()
    rng = np.random.default_rng(4)
    q_true = well_conditioned_poses(rng, 40)
    target = lecture_toe(q_true)
    objects = np.broadcast_to(np.eye(4), (len(target), 1, 4, 4)).copy()
    objects[:, 0, :3, 3] = target
    result = solve_animation(scene, np.zeros_like(q_true), objects, settings=Settings(method=method, precision=1e-7))
    assert result.converged.all()
    assert np.all(np.linalg.norm(lecture_toe(result.q) - target, axis=-1) <= 1e-7)


def test_quadruped_scene_uses_the_toe_point():
    scene = quadruped_scene()
    model, foot, toe = quadruped_leg()
    q = np.array([[0.2, -0.4, 0.9]])
    objects = np.eye(4)[None, None].copy()
    objects[0, 0, :3, 3] = lecture_toe(q)[0]
    ev = scene.evaluate(q, objects, jacobians=False)
    assert ev.position_error[0, 0] < 1e-14
    assert objective(model, q, foot, toe, lecture_toe(q))[0] < 1e-28

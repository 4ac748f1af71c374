"""Forward kinematics and Jacobians of random trees against finite differences."""

import numpy as np
import pytest

from solver.finite_differences import numerical_jacobian, relative_difference
from solver.kinematics import forward_kinematics, point_jacobian, point_jacobian_transpose_times
from solver.rotations import exp_map, log_map
from tests.random_models import random_transform, random_tree


def world_points(model, q, bases, segments, local_points):
    frames = forward_kinematics(model, q, bases).frames[:, segments]
    return np.einsum("feij,ej->fei", frames[..., :3, :3], local_points) + frames[..., :3, 3]


@pytest.mark.parametrize("seed", range(12))
def test_point_jacobian_matches_finite_differences(seed):
    rng = np.random.default_rng(seed)
    model = random_tree(rng, n_segments=int(rng.integers(1, 12)), n_armatures=int(rng.integers(1, 3)))
    F = 3
    q = rng.uniform(-1.5, 1.5, size=(F, model.n_coordinates))
    bases = np.stack([np.stack([random_transform(rng) for _ in range(model.n_armatures)]) for _ in range(F)])
    segments = np.arange(len(model.segments))
    local = rng.normal(size=(segments.size, 3))
    pose = forward_kinematics(model, q, bases)
    points = world_points(model, q, bases, segments, local)
    J = point_jacobian(model, pose, segments, points)

    linear = numerical_jacobian(lambda x: world_points(model, x, bases, segments, local), q)
    assert relative_difference(J[:, :, :3], linear) < 1e-6
    np.testing.assert_allclose(point_jacobian(model, pose, segments, points, linear=True), J[:, :, :3],
                               rtol=0, atol=1e-14)

    # Angular velocity: omega_c = vee(dR/dq_c R^T), from rotations at q +- h.
    def rotations(x):
        return forward_kinematics(model, x, bases).frames[:, :, :3, :3]

    h = 1e-6
    R0 = rotations(q)
    omega = np.zeros_like(J[:, :, 3:])
    for c in range(model.n_coordinates):
        dq = np.zeros_like(q)
        dq[:, c] = h
        dR = (rotations(q + dq) - rotations(q - dq)) / (2 * h)
        W = dR @ np.swapaxes(R0, -1, -2)
        omega[..., c] = np.stack([W[..., 2, 1], W[..., 0, 2], W[..., 1, 0]], axis=-1)
    assert relative_difference(J[:, :, 3:], omega) < 1e-6



@pytest.mark.parametrize("seed", range(8))
def test_jacobian_transpose_times_forces_is_the_derivative_of_their_work(seed):
    """sum_e J_e^T f_e without forming J, several points per segment: the derivative of the work
    sum_e f_e . x_e(q) at fixed forces (central differences), and point_jacobian's transpose times f."""
    rng = np.random.default_rng(100 + seed)
    model = random_tree(rng, n_segments=int(rng.integers(1, 12)), n_armatures=int(rng.integers(1, 3)))
    F = 3
    q = rng.uniform(-1.5, 1.5, size=(F, model.n_coordinates))
    bases = np.stack([np.stack([random_transform(rng) for _ in range(model.n_armatures)]) for _ in range(F)])
    segments = rng.integers(0, len(model.segments), size=2 * len(model.segments) + 1)
    local = rng.normal(size=(segments.size, 3))
    forces = rng.normal(size=(F, segments.size, 3))
    pose = forward_kinematics(model, q, bases)
    points = world_points(model, q, bases, segments, local)
    product = point_jacobian_transpose_times(model, pose, segments, points, forces)

    J = point_jacobian(model, pose, segments, points, linear=True)               # (F, E, 3, n)
    np.testing.assert_allclose(product, np.einsum("feai,fea->fi", J, forces), rtol=0,
                               atol=1e-12 * max(1.0, np.abs(product).max()))
    h = 1e-6
    work = np.empty_like(product)
    for c in range(model.n_coordinates):
        dq = np.zeros_like(q)
        dq[:, c] = h
        ahead, behind = (np.einsum("fea,fea->f", world_points(model, x, bases, segments, local), forces)
                         for x in (q + dq, q - dq))
        work[:, c] = (ahead - behind) / (2 * h)
    assert relative_difference(product, work) < 1e-6


def test_forward_kinematics_of_a_known_two_link_arm():
    """Two revolute-Z links of lengths 1 and 0.5 in the XY plane: tail = closed form."""
    from solver.model import Model, Segment, revolute
    offset = np.eye(4)
    offset[0, 3] = 1.0
    model = Model([Segment("a", -1, np.eye(4), (revolute("Z"),)), Segment("b", 0, offset, (revolute("Z"),))])
    q = np.array([[0.3, -0.7], [1.2, 0.4]])
    pose = forward_kinematics(model, q)
    tip = pose.frames[:, 1] @ np.array([0.5, 0, 0, 1])
    expected = np.stack([np.cos(q[:, 0]) + 0.5 * np.cos(q.sum(1)), np.sin(q[:, 0]) + 0.5 * np.sin(q.sum(1))], 1)
    np.testing.assert_allclose(tip[:, :2], expected, atol=1e-15)
    np.testing.assert_allclose(log_map(pose.frames[:, 1, :3, :3])[:, 2], q.sum(1), atol=1e-15)


def test_post_transform_and_bases_compose_in_order():
    rng = np.random.default_rng(5)
    model = random_tree(rng, 4)
    q = rng.normal(size=(2, model.n_coordinates))
    base = np.stack([random_transform(rng)[None] for _ in range(2)])
    moved = forward_kinematics(model, q, base).frames
    still = forward_kinematics(model, q).frames
    np.testing.assert_allclose(moved, base[:, :, None][:, 0, None] @ still if False else base[:, 0, None] @ still,
                               atol=1e-12)
    assert np.allclose(exp_map(np.zeros(3)), np.eye(3))


def test_children_hang_from_the_frame_after_their_parents_post_transform():
    """W_s = W_parent @ rest_s @ J(q) @ post_s, the parent's post included."""
    from solver.model import Model, Segment, revolute
    rng = np.random.default_rng(9)
    rest0, post0, rest1, post1 = (random_transform(rng) for _ in range(4))
    model = Model([Segment("a", -1, rest0, (revolute("Z"),), post=post0),
                   Segment("b", 0, rest1, (revolute("X"),), post=post1)])
    q = np.array([[0.4, -1.1]])
    frames = forward_kinematics(model, q).frames[0]

    def turn(axis, angle):
        T = np.eye(4)
        T[:3, :3] = exp_map(np.asarray(axis, float) * angle)
        return T
    W0 = rest0 @ turn([0, 0, 1], 0.4) @ post0
    np.testing.assert_allclose(frames[0], W0, atol=1e-14)
    np.testing.assert_allclose(frames[1], W0 @ rest1 @ turn([1, 0, 0], -1.1) @ post1, atol=1e-14)

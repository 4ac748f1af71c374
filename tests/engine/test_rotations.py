import math

import numpy as np
import pytest

from solver.finite_differences import numerical_jacobian, relative_difference
from solver.rotations import (axis_angle_matrix, exp_map, in_place, log_map, quaternion_from_matrix, quaternion_from_rotvec,
                              rotvec_from_quaternion, rotvec_jacobian, rotvec_jacobian_inverse, skew)

rng = np.random.default_rng(1)


def random_rotvecs(n, max_angle=np.pi):
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    return axis * rng.uniform(0, max_angle, size=(n, 1))


def test_exp_map_matches_rodrigues_and_is_a_rotation():
    phi = random_rotvecs(500, 3.0)
    angle = np.linalg.norm(phi, axis=1)
    R = exp_map(phi)
    np.testing.assert_allclose(R, axis_angle_matrix(phi / angle[:, None], angle), atol=1e-14)
    np.testing.assert_allclose(R @ np.swapaxes(R, 1, 2), np.broadcast_to(np.eye(3), R.shape), atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-14)


@pytest.mark.parametrize("max_angle", [1e-9, 1e-5, 1.0, np.pi - 1e-3, np.pi - 1e-9])
def test_log_inverts_exp(max_angle):
    phi = random_rotvecs(300, max_angle)
    if max_angle > 3:
        phi *= max_angle / np.linalg.norm(phi, axis=1, keepdims=True)
    back = log_map(exp_map(phi))
    np.testing.assert_allclose(exp_map(back), exp_map(phi), atol=1e-12)
    np.testing.assert_allclose(back, phi, atol=2e-8 if max_angle > 3 else 1e-12)


def test_log_of_identity_and_half_turns():
    assert np.allclose(log_map(np.eye(3)), 0.0)
    for axis in np.eye(3):
        phi = log_map(axis_angle_matrix(axis, np.pi))
        assert np.isclose(np.linalg.norm(phi), np.pi)
        assert np.allclose(np.abs(phi) / np.pi, axis)


@pytest.mark.parametrize("scale", [1e-7, 1e-3, 1.0, 2.5])
def test_rotvec_jacobian_gives_angular_velocity(scale):
    """omega = J(phi) phi': compare with the finite-difference angular velocity of exp(phi)."""
    phi = random_rotvecs(50, 1.0) * scale / 1.0
    for k in range(3):
        def rotation(p):
            return exp_map(p)
        h = 1e-6
        d = np.zeros(3)
        d[k] = h
        dR = (rotation(phi + d) - rotation(phi - d)) / (2 * h)
        W = dR @ np.swapaxes(exp_map(phi), 1, 2)
        omega = np.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], axis=1)
        assert relative_difference(rotvec_jacobian(phi)[:, :, k], omega) < 1e-8


def test_rotvec_jacobian_inverse():
    phi = random_rotvecs(200, 6.0)
    prod = rotvec_jacobian(phi) @ rotvec_jacobian_inverse(phi)
    np.testing.assert_allclose(prod, np.broadcast_to(np.eye(3), prod.shape), atol=1e-9)


def test_quaternion_round_trip_and_skew():
    phi = random_rotvecs(200, np.pi - 1e-6)
    np.testing.assert_allclose(rotvec_from_quaternion(quaternion_from_rotvec(phi)), phi, atol=1e-12)
    a, b = rng.normal(size=(2, 10, 3))
    np.testing.assert_allclose(skew(a) @ b[..., None], np.cross(a, b)[..., None], atol=1e-15)


@pytest.mark.parametrize("max_angle", [1e-9, 1e-3, 1.0, np.pi - 1e-3, np.pi])
def test_quaternion_from_matrix_is_the_rotation_vectors_quaternion(max_angle):
    phi = random_rotvecs(300, max_angle)
    phi[:3] = [[max_angle, 0.0, 0.0], [0.0, -max_angle, 0.0], [0.0, 0.0, max_angle]]   # components exactly 0
    want = quaternion_from_rotvec(phi)
    want *= np.where(want[:, :1] < 0, -1.0, 1.0)
    got = quaternion_from_matrix(exp_map(phi))
    # At a half turn w = 0 and q, -q are the same rotation: compare up to sign there.
    got *= np.where(np.sum(got * want, axis=-1, keepdims=True) < 0, -1.0, 1.0)
    np.testing.assert_allclose(got, want, atol=3e-8)
    np.testing.assert_allclose(np.linalg.norm(got, axis=-1), 1.0, atol=1e-15)


def test_numerical_jacobian_of_a_known_function():
    x = rng.normal(size=(4, 3))
    J = numerical_jacobian(lambda v: np.sin(v), x)
    np.testing.assert_allclose(J, np.eye(3) * np.cos(x)[:, :, None], atol=1e-9)


def test_quaternion_from_matrix_near_a_half_turn_of_rounded_matrices():
    """Matrices rounded to float32 (as Blender stores them) near a half turn about oblique axes:
    each component's sign must come from the largest one, not from a skew part that rounding
    dominates; the quaternion's rotation is the matrix's to float32 rounding."""
    rng = np.random.default_rng(5)
    axes = rng.normal(size=(500, 3))
    axes /= np.linalg.norm(axes, axis=-1, keepdims=True)
    R = exp_map(axes * (np.pi - rng.uniform(0.0, 1e-6, (500, 1)))).astype(np.float32).astype(float)
    q = quaternion_from_matrix(R)
    back = exp_map(rotvec_from_quaternion(q))
    np.testing.assert_allclose(back, R, atol=1e-6)


def test_sin_and_cos_in_place_give_the_same_bits_whatever_lies_around_them():
    """numpy 1.24 on AVX-512 takes libm's sin and cos instead of SVML's where its overlap check
    finds output and input touching, as a column of (n, 3) does angles stored right after it;
    computed in place (rotations.in_place) into that column, or from those angles, they give the
    bits they give alone, and those are libm's sin and cos (math.sin, math.cos) to a few
    roundings (SVML's are not correctly rounded)."""
    n = 999
    x = rng.uniform(-3.0, 3.0, n)
    memory = np.zeros(4 * n + 1)
    column = memory[:3 * n].reshape(n, 3)[:, 1]            # its last stride ends where `angles` starts
    angles = memory[3 * n + 1:]
    for function, reference in ((np.sin, math.sin), (np.cos, math.cos)):
        angles[...] = x
        alone = in_place(function, np.empty(n), x)
        assert np.array_equal(in_place(function, column, angles), alone)
        assert np.array_equal(in_place(function, angles, x), alone)
        assert np.max(np.abs(alone - [reference(a) for a in x])) <= 4.5e-16

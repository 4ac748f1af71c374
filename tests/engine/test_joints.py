"""The conformance test every joint kind in joints.KINDS runs through: its velocity columns
against finite differences of its own transform and of forward kinematics through a model, and
its inverse (from_transform) against its transform."""

import numpy as np
import pytest

from solver.finite_differences import numerical_jacobian, relative_difference
from solver.joints import KINDS, group_joints
from solver.kinematics import forward_kinematics, point_jacobian
from solver.model import Joint, Model, Segment
from tests.random_models import random_transform

ALL = sorted(KINDS)


def random_coordinates(rng, kind, shape):
    """Coordinates inside the range the kind inverts: rotation vectors and angles shorter than pi."""
    q = rng.uniform(-1.0, 1.0, shape + (kind.n_coordinates,))
    if kind.rotational:
        q *= 2.5 / max(1.0, np.sqrt(kind.n_coordinates))
    return q


def random_axes(rng, G):
    axes = rng.normal(size=(G, 3))
    return axes / np.linalg.norm(axes, axis=-1, keepdims=True)


def vee(W):
    return np.stack([W[..., 2, 1], W[..., 0, 2], W[..., 1, 0]], axis=-1)


@pytest.mark.parametrize("name", ALL)
def test_the_kind_states_its_shape(name):
    kind = KINDS[name]
    assert kind.name == name and kind.n_coordinates >= 1
    assert len(kind.labels("x")) == kind.n_coordinates
    rng = np.random.default_rng(0)
    q, axes = random_coordinates(rng, kind, (5, 4)), random_axes(rng, 4)
    M = kind.transform(q, axes)
    assert M.shape == (5, 4, 4, 4)
    np.testing.assert_array_equal(M[..., 3, :], np.broadcast_to([0.0, 0.0, 0.0, 1.0], (5, 4, 4)))
    np.testing.assert_allclose(M[..., :3, :3] @ np.swapaxes(M[..., :3, :3], -1, -2), np.broadcast_to(np.eye(3), (5, 4, 3, 3)),
                               atol=1e-12)
    assert kind.columns(q, axes).shape == (5, 4, kind.n_coordinates, 3)
    if kind.rotational:                   # rotations about the joint frame's origin (the pivot)
        np.testing.assert_array_equal(M[..., :3, 3], 0.0)
    else:                                 # translations only
        np.testing.assert_array_equal(M[..., :3, :3], np.broadcast_to(np.eye(3), (5, 4, 3, 3)))


@pytest.mark.parametrize("name", ALL)
def test_the_columns_are_the_derivatives_of_the_transform(name):
    """Column c is vee(dR/dq_c R^T) for a rotation kind, dt/dq_c for a translation kind."""
    kind = KINDS[name]
    rng = np.random.default_rng(1)
    F, G, d = 3, 4, kind.n_coordinates
    q, axes = random_coordinates(rng, kind, (F, G)), random_axes(rng, G)
    columns = kind.columns(q, axes)                                          # (F, G, d, 3)
    flat = q.reshape(F, G * d)
    dM = numerical_jacobian(lambda x: kind.transform(x.reshape(F, G, d), axes), flat)    # (F, G, 4, 4, G d)
    dM = dM.reshape(F, G, 4, 4, G, d)[:, np.arange(G), ..., np.arange(G), :]              # (G, F, 4, 4, d)
    dM = np.moveaxis(dM, 0, 1)                                                          # (F, G, 4, 4, d)
    R = kind.transform(q, axes)[..., :3, :3]
    if kind.rotational:
        expected = vee(np.einsum("fgijc,fgkj->fgcik", dM[..., :3, :3, :], R))
        assert np.abs(dM[..., :3, 3, :]).max() < 1e-9                           # it moves nothing
    else:
        expected = np.moveaxis(dM[..., :3, 3, :], -1, -2)
        assert np.abs(dM[..., :3, :3, :]).max() < 1e-9                          # it turns nothing
    assert relative_difference(columns, expected) < 1e-7


@pytest.mark.parametrize("name", ALL)
def test_forward_kinematics_with_the_kind_matches_finite_differences(name):
    """A tree of this kind's joints (two on a segment, one on its children, branching) through
    forward_kinematics and point_jacobian: linear rows by finite differences of points, angular
    rows by vee(dR/dq R^T)."""
    kind = KINDS[name]
    rng = np.random.default_rng(2)

    def joint(k):
        axis = tuple(random_axes(rng, 1)[0]) if kind.has_axis else (0.0, 0.0, 0.0)
        return Joint(name, axis, name=f"j{k}")

    segments = [Segment("a", -1, random_transform(rng), (joint(0), joint(1)), 1.0),
                Segment("b", 0, random_transform(rng), (joint(2),), 1.0, post=random_transform(rng, 0.3)),
                Segment("c", 0, random_transform(rng), (joint(3),), 1.0),
                Segment("d", 1, random_transform(rng), (), 1.0)]
    model = Model(segments)
    F = 3
    q = random_coordinates(rng, kind, (F, 4)).reshape(F, -1)
    segs = np.arange(4)
    local = rng.normal(size=(4, 3))

    def points(x):
        frames = forward_kinematics(model, x).frames
        return np.einsum("fsij,sj->fsi", frames[..., :3, :3], local) + frames[..., :3, 3]

    def rotations(x):
        return forward_kinematics(model, x).frames[..., :3, :3]

    J = point_jacobian(model, forward_kinematics(model, q), segs, points(q))
    assert relative_difference(J[:, :, :3], numerical_jacobian(points, q)) < 1e-6
    omega = vee(np.einsum("fsijc,fskj->fscik", numerical_jacobian(rotations, q), rotations(q)))
    assert relative_difference(J[:, :, 3:], np.swapaxes(omega, -1, -2)) < 1e-6


@pytest.mark.parametrize("name", ALL)
def test_from_transform_inverts_the_transform(name):
    kind = KINDS[name]
    rng = np.random.default_rng(3)
    q, axes = random_coordinates(rng, kind, (50, 1)), random_axes(rng, 1)
    M = kind.transform(q, axes)[:, 0]
    np.testing.assert_allclose(kind.from_transform(M, axes[0]), q[:, 0], rtol=0, atol=1e-9)
    if kind.rotational:
        np.testing.assert_allclose(kind.from_rotation(M[:, :3, :3], axes[0]), q[:, 0], rtol=0, atol=1e-9)


def test_the_revolute_fold_is_the_transform_between_fixed_ones():
    """Revolute.fold's constants times `coefficients` against before M(q) after, M(q) built as a
    turn of the axis onto z, a rotation about z by its cosine and sine, and the turn back."""
    kind, rng, G = KINDS["revolute"], np.random.default_rng(7), 6
    axes, q = random_axes(rng, G), rng.uniform(-3.0, 3.0, G)
    before = np.stack([random_transform(rng) for _ in range(G)])
    after = np.stack([random_transform(rng) for _ in range(G)])
    got = np.einsum("gc,gck->gk", kind.coefficients(q, np.ones((G, 3))), kind.fold(axes, before, after))
    for g in range(G):
        x = np.cross(axes[g], [1.0, 0.0, 0.0] if abs(axes[g, 0]) < 0.9 else [0.0, 1.0, 0.0])
        x /= np.linalg.norm(x)
        turn = np.column_stack([x, np.cross(axes[g], x), axes[g]])
        c, s = np.cos(q[g]), np.sin(q[g])
        M = np.eye(4)
        M[:3, :3] = turn @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ turn.T
        np.testing.assert_allclose(got[g].reshape(4, 4), before[g] @ M @ after[g], rtol=0, atol=1e-12)


def test_group_joints_sorts_by_kind_once():
    kinds = ["sphere", "revolute", "revolute", "swing", "prismatic", "revolute"]
    first = np.cumsum([0] + [KINDS[k].n_coordinates for k in kinds])[:-1]
    axes = np.tile([0.0, 0.0, 1.0], (len(kinds), 1))
    groups, fixed = group_joints(kinds, axes, first)
    assert [g.kind.name for g in groups] == [k for k in KINDS if k in kinds]
    by_kind = {g.kind.name: g for g in groups}
    np.testing.assert_array_equal(by_kind["revolute"].joints, [1, 2, 5])
    assert by_kind["sphere"].joints == slice(0, 1) and by_kind["sphere"].coordinates == slice(0, 3)
    assert by_kind["swing"].coordinates == slice(5, 7)
    assert fixed.shape == (first[-1] + 1, 3)
    np.testing.assert_array_equal(fixed[[3, 4, 7, 8]], np.tile([0.0, 0.0, 1.0], (4, 1)))
    np.testing.assert_array_equal(fixed[[0, 1, 2, 5, 6]], 0.0)

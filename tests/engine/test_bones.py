"""Bones to joints, as Blender's iTaSC maps free IK axes, and pose bases back to their
coordinates; rest matrices from head, tail and roll."""

import itertools

import numpy as np
import pytest

from solver import Bone, Model, Segment, model_from_bones, rest_matrix, revolute, solve_animation
from solver.bones import coordinates_from_basis
from solver.examples import reach_scene, straight_chain
from solver.kinematics import segment_motions
from solver.limits import violation
from solver.rotations import axis_angle_matrix, exp_map

LIMITS = ((-0.5, 0.8), (-0.3, 0.3), (-0.4, 0.6))


@pytest.mark.parametrize("lock, limited, kinds", [
    ((True, True, True), False, []),
    ((False, True, True), False, ["revolute:X"]),
    ((True, False, True), False, ["revolute:Y"]),
    ((True, True, False), False, ["revolute:Z"]),
    ((False, False, True), False, ["revolute:X", "revolute:Y"]),
    ((True, False, False), False, ["revolute:Z", "revolute:Y"]),
    ((False, True, False), False, ["swing"]),
    ((False, True, False), True, ["swing"]),
    ((False, False, False), False, ["sphere"]),
    ((False, False, False), True, ["swing", "revolute:Y"]),
])
def test_free_axes_pick_blenders_joints(lock, limited, kinds):
    bone = Bone("b", np.eye(4), 1.0, lock=lock, limits=LIMITS if limited else (None,) * 3,
                stiffness=(0.1, 0.2, 0.3))
    model = model_from_bones([bone])
    names = []
    for j in model.joints:
        axis = {(1.0, 0.0, 0.0): "X", (0.0, 1.0, 0.0): "Y", (0.0, 0.0, 1.0): "Z"}.get(tuple(j.axis))
        names.append(f"{j.kind}:{axis}" if j.kind == "revolute" else j.kind)
    assert names == kinds
    # weights are 1 - stiffness of the matching axes; limits carried per axis
    for j, name in zip(model.joints, names):
        if j.kind == "revolute":
            i = "XYZ".index(name[-1])
            assert j.weight == (1.0 - (0.1, 0.2, 0.3)[i],)
            assert (j.lower[0], j.upper[0]) == (LIMITS[i] if limited else (-np.inf, np.inf))
        if j.kind == "swing":
            assert j.weight == pytest.approx((0.9, 0.7))
            assert j.elliptic == limited


def test_stretch_adds_a_translation_that_reaches_further():
    scene = reach_scene(straight_chain(3, stretch=0.5))
    assert [j.kind for j in scene.model.joints] == ["sphere", "prismatic"] * 3
    targets = np.broadcast_to(np.eye(4), (2, 1, 4, 4)).copy()
    targets[:, 0, :3, 3] = [[2.0, 0.0, 3.0], [0.0, 40.0, 0.0]]     # just beyond reach; far beyond
    result = solve_animation(scene, scene.model.neutral(2), targets)
    assert list(result.converged) == [True, False]
    stretch = result.q[:, [3, 7, 11]]
    assert stretch[0].sum() > np.linalg.norm([2.0, 0.0, 3.0]) - 3.0 - 1e-9   # stretched to reach it
    np.testing.assert_allclose(stretch[1], 9.0)                           # upper stretch limit 9 L
    np.testing.assert_allclose(result.position_error[1, 0], 40.0 - 30.0, atol=1e-9)


def test_rest_matrix_points_y_along_the_bone_and_rolls_about_it():
    rng = np.random.default_rng(0)
    for _ in range(100):
        head, tail = rng.normal(size=3), rng.normal(size=3)
        roll = rng.uniform(-np.pi, np.pi)
        M = rest_matrix(head, tail, roll)
        R = M[:3, :3]
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
        assert np.isclose(np.linalg.det(R), 1.0)
        np.testing.assert_allclose(R[:, 1], (tail - head) / np.linalg.norm(tail - head), atol=1e-12)
        np.testing.assert_allclose(M[:3, 3], head)
        # roll turns the X axis about Y: compare with the roll-free matrix
        R0 = rest_matrix(head, tail, 0.0)[:3, :3]
        np.testing.assert_allclose(R, R0 @ axis_angle_matrix(np.array([0.0, 1.0, 0.0]), roll), atol=1e-12)
    # Blender's conventions: a bone along +Z has X = world X; straight down turns about Z.
    np.testing.assert_allclose(rest_matrix([0, 0, 0], [0, 0, 1])[:3, :3], [[1, 0, 0], [0, 0, -1], [0, 1, 0]], atol=1e-15)
    np.testing.assert_allclose(rest_matrix([0, 0, 0], [0, -1, 0])[:3, :3], np.diag([-1.0, -1.0, 1.0]))


def test_bad_bones_are_rejected_with_their_names():
    with pytest.raises(ValueError, match="no length"):
        rest_matrix([0, 0, 0], [0, 0, 0])
    with pytest.raises(ValueError, match="'short'"):
        model_from_bones([Bone("short", np.eye(4), 0.0)])
    with pytest.raises(ValueError, match="'orphan'"):
        model_from_bones([Bone("orphan", np.eye(4), 1.0, parent="missing")])
    with pytest.raises(ValueError, match="limits"):
        model_from_bones([Bone("b", np.eye(4), 1.0, lock=(False, True, True), limits=((0.5, -0.5), None, None))])


LOCKS = list(itertools.product([False, True], repeat=3))


def chain_of(lock, limited, stretch, rng):
    """Three bones with these IK settings (random rests), a model of them."""
    bones = [Bone(f"b{i}", rest_matrix(rng.normal(size=3), rng.normal(size=3), rng.uniform(-1, 1)), 1.3,
                  parent=None if i == 0 else f"b{i - 1}", lock=lock, limits=LIMITS if limited else (None,) * 3,
                  stretch=stretch) for i in range(3)]
    return model_from_bones(bones)


def inside(model, rng, F):
    """Coordinates inside the limits (and the elliptic ones) and inside the range the bones'
    splits invert (angles and rotation vectors shorter than pi)."""
    u = rng.uniform(-1.0, 1.0, (F, model.n_coordinates))
    reach = np.where(u > 0, model.upper, -model.lower)
    q = np.where(np.isfinite(reach), 0.5 * np.abs(u) * np.where(np.isfinite(reach), reach, 0.0) * np.sign(u), 1.5 * u)
    stretch = ~model.rotational
    q[:, stretch] = rng.uniform(-0.5, 2.0, (F, stretch.sum())) * model.length[model.coordinate_segment[stretch]]
    return q


def basis_of(model, q):
    """Blender's matrix_basis of each bone at q: its joints' rotation, the stretch as a Y scale."""
    motions = segment_motions(model, q)
    basis = motions.copy()
    basis[..., :3, 3] = 0.0
    for c in np.flatnonzero(~model.rotational):
        s = model.coordinate_segment[c]
        basis[:, s, :3, 1] *= ((model.length[s] + q[:, c]) / model.length[s])[:, None]
    return basis


@pytest.mark.parametrize("stretch", [0.0, 0.5])
@pytest.mark.parametrize("limited", [False, True])
@pytest.mark.parametrize("lock", LOCKS)
def test_coordinates_from_basis_inverts_the_bones_joints(lock, limited, stretch):
    """bone_joints -> forward kinematics -> pose basis -> coordinates_from_basis gives the
    coordinates back, for every lock combination (every joint layout Blender maps), with and
    without limits and stretch."""
    rng = np.random.default_rng(sum(lock) + 4 * limited)
    model = chain_of(lock, limited, stretch, rng)
    q = inside(model, rng, 40)
    back = coordinates_from_basis(model, basis_of(model, q))
    np.testing.assert_allclose(back, q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(segment_motions(model, back)[..., :3, :3], segment_motions(model, q)[..., :3, :3],
                               rtol=0, atol=1e-9)


def test_coordinates_from_basis_of_a_chain_of_every_joint_layout():
    """Bones of every lock combination, limited or not, stretching or not, interleaved in one chain
    (bones of one layout apart from each other): the coordinates come back through forward
    kinematics and the pose basis as for each layout alone."""
    rng = np.random.default_rng(12)
    layouts = [(lock, limited, stretch) for stretch in (0.0, 0.5) for limited in (False, True) for lock in LOCKS]
    bones = [Bone(f"b{i}", rest_matrix(rng.normal(size=3), rng.normal(size=3), rng.uniform(-1, 1)),
                  rng.uniform(0.5, 2.0), parent=None if i == 0 else f"b{i - 1}", lock=lock,
                  limits=LIMITS if limited else (None,) * 3, stretch=stretch)
             for i, (lock, limited, stretch) in enumerate(layouts + layouts[::-1])]
    model = model_from_bones(bones)
    q = inside(model, rng, 25)
    np.testing.assert_allclose(coordinates_from_basis(model, basis_of(model, q)), q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(coordinates_from_basis(model, basis_of(model, q[:1])), q[:1], rtol=0, atol=1e-9)


@pytest.mark.parametrize("lock", LOCKS)
def test_coordinates_from_basis_of_any_pose_lie_inside_the_limits(lock):
    """A pose basis the joints cannot make (locked axes turned, limits passed) still gives finite
    coordinates inside the limits; a pose they can make (the locked part undone) gives the same."""
    rng = np.random.default_rng(7)
    model = chain_of(lock, True, 0.0, rng)
    basis = np.zeros((20, 3, 4, 4))
    basis[..., :3, :3], basis[..., 3, 3] = exp_map(rng.normal(0.0, 1.0, (20, 3, 3))), 1.0
    q = coordinates_from_basis(model, basis)
    assert np.all(np.isfinite(q)) and np.all(violation(model, q) <= 1e-12)
    np.testing.assert_allclose(coordinates_from_basis(model, basis_of(model, q)), q, rtol=0, atol=1e-9)


def test_coordinates_from_basis_of_a_free_bone_is_its_rotation_vector():
    model = model_from_bones([Bone("b", np.eye(4), 1.0)])
    phi = np.array([[0.3, -1.2, 0.8], [0.0, 0.0, 0.0]])
    basis = np.broadcast_to(np.eye(4), (2, 1, 4, 4)).copy()
    basis[:, 0, :3, :3] = exp_map(phi)
    np.testing.assert_allclose(coordinates_from_basis(model, basis), phi, atol=1e-12)


def test_coordinates_from_basis_refuses_joints_no_bone_has():
    model = Model([Segment("s", joints=(revolute("Z"), revolute("X")))])
    with pytest.raises(ValueError, match="'s'.*bone_joints"):
        coordinates_from_basis(model, np.broadcast_to(np.eye(4), (1, 1, 4, 4)))


def test_a_given_stretch_weight_is_the_stretch_joints_weight():
    """Blender's iTaSC weighs a stretch by 1 - min(1 - ik_stretch^2, 0.99) (intern itasc_plugin); the
    add-on passes that as Bone.stretch_weight, the engine's own default is ik_stretch itself."""
    from solver.bones import bone_joints, itasc_stretch_weight
    bone = straight_chain(1, stretch=0.1)[0]
    assert bone_joints(bone)[-1].weight == (0.1,)
    for s in (0.05, 0.1, 0.5, 1.0):
        assert itasc_stretch_weight(s) == pytest.approx(1.0 - min(1.0 - s * s, 0.99))
        weighted = Bone(bone.name, bone.matrix, bone.length, stretch=s, stretch_weight=itasc_stretch_weight(s))
        assert bone_joints(weighted)[-1].weight == (pytest.approx(max(s * s, 0.01)),)

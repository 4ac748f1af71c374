import numpy as np

from solver import model_from_bones
from solver.examples import straight_chain
from solver.limits import project, violation, wrap_spheres
from solver.model import Model, Segment, revolute, sphere, swing
from solver.rotations import exp_map


def test_wrapping_spheres_keeps_the_rotation_and_shortens_it():
    model = model_from_bones(straight_chain(3))
    q = np.random.default_rng(0).normal(size=(50, 9)) * 3.0
    wrapped = wrap_spheres(model, q)
    for j in range(3):
        c = slice(3 * j, 3 * j + 3)
        np.testing.assert_allclose(exp_map(wrapped[:, c]), exp_map(q[:, c]), atol=1e-12)
        assert (np.linalg.norm(wrapped[:, c], axis=1) <= np.pi + 1e-12).all()


def test_projection_lands_exactly_on_the_limits_and_is_idempotent():
    model = Model([Segment("a", -1, np.eye(4), (
        revolute("X", lower=(-0.5,), upper=(0.8,)),
        swing(lower=(-0.4, -0.0), upper=(0.6, 0.3), elliptic=True),
        sphere(lower=(-0.6, -0.3, -0.6), upper=(0.6, 0.3, 0.2), elliptic=True)), 1.0)])
    q = np.random.default_rng(1).normal(size=(2000, 6)) * 2.0
    p = project(model, q)
    assert violation(model, p).max() <= 1e-15
    np.testing.assert_array_equal(project(model, p), p)
    outside = violation(model, q) > 0
    assert outside.mean() > 0.5
    # Elliptic projection is radial: the projected vector keeps its direction.
    for c in (slice(1, 3), slice(3, 6)):
        a, b = q[:, c], p[:, c]
        cos = np.sum(a * b, axis=1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-300)
        keep = np.linalg.norm(b, axis=1) > 0
        if c.start == 1:
            keep &= q[:, 2] >= 0      # the zero lower swing-z limit clamps negative z to 0 first
        assert np.all(cos[keep] > 1 - 1e-12)


def test_frozen_coordinates_of_an_elliptic_joint_keep_their_value():
    model = Model([Segment("a", -1, np.eye(4), (
        swing(lower=(-0.4, -0.5), upper=(0.6, 0.3), weight=(1.0, 0.0), elliptic=True),), 1.0)])
    rng = np.random.default_rng(2)
    q = np.stack([rng.normal(size=500) * 2.0, rng.uniform(-0.45, 0.28, 500)], axis=1)   # frozen z fits
    p = project(model, q)
    np.testing.assert_array_equal(p[:, 1], q[:, 1])
    assert violation(model, p).max() <= 1e-15
    far = np.array([[0.1, 2.0]])                     # the frozen part alone is outside: limits win
    assert violation(model, project(model, far)).max() <= 1e-15

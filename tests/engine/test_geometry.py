"""solver.geometry: angle wrapping, unit vectors and translation frames, against their definitions."""

import numpy as np

from solver.geometry import dot, normalize, perpendicular_unit, translations, unit, wrap_angle, wrap_angle_nearest


def test_both_wraps_keep_the_angle_modulo_two_pi_and_differ_only_in_the_tie():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-30.0, 30.0, 1000), np.arange(-5, 6) * np.pi])
    for wrap in (wrap_angle, wrap_angle_nearest):
        w = wrap(x)
        assert np.allclose(np.cos(w), np.cos(x), atol=1e-12) and np.allclose(np.sin(w), np.sin(x), atol=1e-12)
    assert np.all((wrap_angle(x) >= -np.pi) & (wrap_angle(x) < np.pi))
    assert np.all(np.abs(wrap_angle_nearest(x)) <= np.pi)
    assert wrap_angle(np.pi) == -np.pi and wrap_angle_nearest(np.pi) == np.pi
    assert wrap_angle_nearest(3 * np.pi) == -np.pi


def test_unit_and_normalize_divide_by_the_norm_and_handle_zero_rows():
    v = np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]])
    u, n = unit(v)
    assert np.array_equal(n, [5.0, 0.0]) and np.allclose(u, [[0.6, 0.8, 0.0], [0.0, 0.0, 0.0]])
    fallback = np.array([0.0, 1.0, 0.0])
    assert np.allclose(normalize(v, fallback), [[0.6, 0.8, 0.0], [0.0, 1.0, 0.0]])
    assert np.allclose(dot(v, [1.0, 1.0, 1.0]), [7.0, 0.0])


def test_perpendicular_unit_is_a_unit_vector_across_u_from_the_least_aligned_axis():
    rng = np.random.default_rng(1)
    u = rng.normal(size=(500, 3))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    u[:3] = np.eye(3)
    w = perpendicular_unit(u)
    assert np.allclose(np.linalg.norm(w, axis=-1), 1.0) and np.allclose(np.sum(w * u, axis=-1), 0.0, atol=1e-15)
    k = np.argmin(np.abs(u), axis=-1)
    assert np.all(w[np.arange(len(u)), k] > 0)                  # the chosen axis' own component
    assert np.array_equal(perpendicular_unit(np.array([1.0, 0.0, 0.0])), [0.0, 1.0, 0.0])


def test_translations_carry_the_origin_to_the_points():
    p = np.arange(12.0).reshape(2, 2, 3)
    T = translations(p)
    assert T.shape == (2, 2, 4, 4)
    assert np.array_equal(T[..., :3, :3], np.broadcast_to(np.eye(3), (2, 2, 3, 3)))
    assert np.array_equal(T[..., :3, 3], p) and np.array_equal(T[..., 3, :], np.broadcast_to([0, 0, 0, 1.0], (2, 2, 4)))

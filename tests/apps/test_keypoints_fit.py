"""The keypoint fit (solver/keypoints) against independent references: dense linear algebra for the
block-tridiagonal solve and the trajectory's normal matrix, finite differences for every gradient
the fit and the calibration build, the Whittaker smoother's closed form for the smoothness term,
and synthetic keypoints from a known pose sequence for the solves (joint angles, offsets, scale)."""

from __future__ import annotations

import numpy as np
import pytest

from solver.keypoints import keypoint_set
from solver.keypoints import data_term as data_term_module
from solver.keypoints import second_order, smoothness
from solver.keypoints.block_tridiagonal import solve_block_tridiagonal
from solver.keypoints.calibration import _shared_blocks, calibrate
from solver.keypoints.data_term import data_cost, data_term
from solver.keypoints.contacts import FootContacts
from solver.keypoints.fit import _Terms, fit_trajectory
from solver.keypoints.trajectory import paired_system as _paired_system
from solver.keypoints.placement import Placement, place_keypoints
from solver.limits import project, violation
from solver.model import Model, Segment, prismatic, sphere
from solver.retarget import target_model
from tests.apps.retarget_walk import walk_target


def spd(rng, m):
    B = rng.normal(size=(m, m))
    return B @ B.T + m * np.eye(m)


@pytest.mark.parametrize("N", [1, 2, 3, 8, 13, 33])
def test_block_tridiagonal_solve_matches_a_dense_solve(N):
    rng = np.random.default_rng(N)
    m = 5
    D = np.stack([spd(rng, m) * 3 for _ in range(N)])
    L = rng.normal(size=(N - 1, m, m))
    A = np.zeros((N * m, N * m))
    for i in range(N):
        A[i * m:(i + 1) * m, i * m:(i + 1) * m] = D[i]
    for i in range(N - 1):
        A[(i + 1) * m:(i + 2) * m, i * m:(i + 1) * m] = L[i]
        A[i * m:(i + 1) * m, (i + 1) * m:(i + 2) * m] = L[i].T
    b = rng.normal(size=(N, m))
    x = solve_block_tridiagonal(D, L, b)
    np.testing.assert_allclose(x.ravel(), np.linalg.solve(A, b.ravel()), rtol=0, atol=1e-12)


@pytest.mark.parametrize("F", [3, 4, 7, 10])
def test_paired_system_is_the_trajectory_normal_matrix(F):
    """blockdiag(H_f) + D^T D (x) Lambda with locked coordinates' rows and columns left out, built
    densely from the explicit second-difference matrix, equals the paired blocks."""
    rng = np.random.default_rng(F)
    n = 3
    H = np.stack([spd(rng, n) for _ in range(F)])
    g = rng.normal(size=(F, n))
    Lambda = rng.uniform(0.5, 2.0, n)
    free = rng.uniform(size=(F, n)) > 0.2
    Dop = np.diff(np.eye(F), 2, axis=0)                                   # (F - 2, F) rows 1 -2 1
    dense = np.kron(Dop.T @ Dop, np.diag(Lambda))
    for f in range(F):
        dense[f * n:(f + 1) * n, f * n:(f + 1) * n] += H[f]
    keep = free.ravel()
    dense = np.where(keep[:, None] & keep[None, :], dense, 0.0) + np.diag(~keep)
    D, L, b, F2 = _paired_system(H, g, Lambda, free)
    assembled = np.zeros((F2 * n, F2 * n))
    m = 2 * n
    for i in range(F2 // 2):
        assembled[i * m:(i + 1) * m, i * m:(i + 1) * m] = D[i]
    for i in range(F2 // 2 - 1):
        assembled[(i + 1) * m:(i + 2) * m, i * m:(i + 1) * m] = L[i]
        assembled[i * m:(i + 1) * m, (i + 1) * m:(i + 2) * m] = L[i].T
    np.testing.assert_array_equal(assembled[:F * n, :F * n], dense)
    np.testing.assert_array_equal(assembled[F * n:, :F * n], 0.0)
    np.testing.assert_array_equal(b.ravel()[:F * n], (g * free).ravel())


def fd_gradient(fun, x, h=1e-6):
    x = np.array(x, float)
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (fun(x + e) - fun(x - e)) / (2 * h)
    return out


def test_smoothness_gradient_is_the_cost_derivative():
    rng = np.random.default_rng(1)
    Q, Lambda = rng.normal(size=(9, 4)), rng.uniform(0.1, 3.0, 4)
    np.testing.assert_allclose(2 * smoothness.second_difference_normal(Q) * Lambda,
                               fd_gradient(lambda q: smoothness.cost(q, Lambda), Q), rtol=1e-7, atol=1e-7)


@pytest.fixture(scope="module")
def rig():
    return target_model(walk_target())


def dense_placement(tm) -> Placement:
    """Three keypoints off one line on every moving bone: every coordinate is seen."""
    m = tm.model
    segments, offsets = [], []
    for s in sorted(set(tm.role_segment.values())):
        L = m.length[s]
        for o in ((0.04, 0.3 * L, 0.0), (0.0, L, 0.0), (0.0, 0.6 * L, 0.05)):
            segments.append(s)
            offsets.append(o)
    return Placement(m, tuple(f"k{i}" for i in range(len(segments))), np.array(segments), np.array(offsets), tm.root)


def motion(model, root, F=40, amplitude=0.35, seed=2, rate=60.0):
    """A smooth pose sequence within the limits: a sine per coordinate, the root moved away."""
    rng = np.random.default_rng(seed)
    n = model.n_coordinates
    t = np.arange(F)[:, None] / rate
    Q = rng.uniform(0.1, amplitude, n) * np.sin(2 * np.pi * rng.uniform(0.2, 1.0, n) * t + rng.uniform(0, 6, n))
    Q[:, model.coordinates_of(root)[:3]] += [0.3, -0.2, 0.05]
    return project(model, Q)


def test_data_term_gradient_and_hessian_against_finite_differences(rig):
    placement = dense_placement(rig)
    rng = np.random.default_rng(4)
    Q = motion(placement.model, placement.root, F=2)
    y = placement.evaluate(Q, jacobian=False) + rng.normal(0, 0.02, (2, len(placement.names), 3))
    w = rng.uniform(0.2, 1.0, y.shape[:2])
    term = data_term(placement, Q, y, w)
    for f in range(2):
        fd = fd_gradient(lambda q: data_cost(placement, q[None], y[f:f + 1], w[f:f + 1])[0], Q[f])
        np.testing.assert_allclose(-2 * term.g[f], fd, rtol=1e-6, atol=1e-8)
        J = fd_gradient(lambda q: 0.0, Q[f])                    # shape only
        Jx = np.stack([fd_gradient(lambda q, k=k, a=a: placement.evaluate(q[None], jacobian=False)[0, k, a], Q[f])
                       for k in range(len(placement.names)) for a in range(3)])
        del J
        W = np.repeat(w[f], 3)
        np.testing.assert_allclose(term.H[f], Jx.T @ (W[:, None] * Jx), rtol=1e-6, atol=1e-8)


def test_full_hessian_is_the_derivative_of_the_gradient(rig):
    """second_order's Hessian (one gradient per group of coordinates moving no keypoint in
    common, from forward kinematics alone) against central differences of data_term's gradient
    coordinate by coordinate, with per-axis weights and residuals large enough that the
    curvature Gauss-Newton leaves out is far above the tolerance."""
    placement = dense_placement(rig)
    rng = np.random.default_rng(7)
    Q = motion(placement.model, placement.root, F=2)
    y = placement.evaluate(Q, jacobian=False) + rng.normal(0, 0.1, (2, len(placement.names), 3))
    w = rng.uniform(0.2, 1.0, y.shape)
    term = data_term(placement, Q, y, w)
    np.testing.assert_allclose(second_order.gradient(placement, Q, y, w), term.g, rtol=0, atol=1e-12)
    groups = second_order.grouping(placement)
    assert groups.steps.shape[0] < placement.model.n_coordinates / 2
    H = second_order.full_hessian(placement, Q, y, w, term.g, groups)
    n, h = placement.model.n_coordinates, 1e-6
    reference = np.zeros_like(H)
    for c in range(n):
        step = np.zeros(n)
        step[c] = h
        reference[:, :, c] = (data_term(placement, Q - step, y, w).g - data_term(placement, Q + step, y, w).g) / (2 * h)
    reference = 0.5 * (reference + np.swapaxes(reference, 1, 2))
    tolerance = 1e-5 * np.abs(reference).max()
    np.testing.assert_allclose(H, reference, rtol=0, atol=tolerance)
    assert np.abs(reference - term.H).max() > 100 * tolerance


def test_contact_rows_cost_and_gradient(rig):
    """A fit's contact rows: each contact point drawn to its pin in the frames a span holds it and
    up to the floor (on the height alone) where it lies below it. The cost is that sum written
    out here, and the gradient the fit steps on is its derivative (central differences, away
    from the floor's kink)."""
    placement = dense_placement(rig)
    rng = np.random.default_rng(11)
    Q = motion(placement.model, placement.root, F=3)
    x = placement.evaluate(Q, jacobian=False)
    y = x + rng.normal(0, 0.03, x.shape)
    w = rng.uniform(0.5, 1.0, x.shape[:2])
    index = np.array([0, 4, 9])
    pins = np.full((3, 3, 3), np.nan)
    pins[:2, 0] = x[0, 0] + 0.02
    pins[1:, 2] = x[1, 9] - 0.01
    heights = x[:, index, 2]
    floor = float(np.mean(np.sort(heights, axis=None)[5:7]))
    assert np.min(np.abs(heights - floor)) > 1e-3 and (heights < floor).any()
    weight = 50.0
    contacts = FootContacts(tuple(placement.names[i] for i in index), index, {}, pins, floor, weight)
    terms = _Terms(placement, y, w, contacts)
    held = np.isfinite(pins[..., 0])
    expected = (np.sum(w[..., None] * (x - y) ** 2, axis=(1, 2))
                + weight * np.sum(np.where(held, np.sum((x[:, index] - np.nan_to_num(pins)) ** 2, axis=-1), 0.0), axis=1)
                + weight * np.sum(np.maximum(floor - heights, 0.0) ** 2, axis=1))
    np.testing.assert_allclose(terms.cost(Q), expected, rtol=1e-12)
    term, _ = terms.term(Q)
    for f in range(3):
        fd = fd_gradient(lambda q: terms.frames([f]).cost(q[None])[0], Q[f])
        np.testing.assert_allclose(-2 * term.g[f], fd, rtol=1e-6, atol=1e-8)


def test_calibration_gradient_against_finite_differences(rig):
    """g_t of the shared unknowns (offsets, scale) is minus half the derivative of the objective."""
    placement = dense_placement(rig)
    rng = np.random.default_rng(5)
    Q = motion(placement.model, placement.root, F=3)
    K = len(placement.names)
    p = rng.normal(0.0, 0.5, (3, K, 3))
    w = rng.uniform(0.2, 1.0, (3, K))
    prior = placement.offsets
    offsets = prior + rng.normal(0, 0.01, prior.shape)
    s, beta = 1.1, 0.7

    def objective(theta):
        o, scale = theta[:3 * K].reshape(K, 3), theta[3 * K]
        return data_cost(placement.with_offsets(o), Q, scale * p, w).sum() + beta * np.sum((o - prior) ** 2)

    term = data_term(placement.with_offsets(offsets), Q, s * p, w)
    _, _, g_t = _shared_blocks(term.R, term.J, w, p, term.e, offsets, prior, beta)
    theta = np.concatenate([offsets.ravel(), [s]])
    np.testing.assert_allclose(-2 * g_t, fd_gradient(objective, theta), rtol=1e-6, atol=1e-7)


def test_keypoints_from_a_known_motion_give_its_joint_angles(rig, monkeypatch):
    placement = dense_placement(rig)
    model = placement.model
    Q = motion(model, placement.root)
    positions = placement.evaluate(Q, jacobian=False) / 1.2                  # data 1/1.2 of the rig's size
    weights = np.ones(positions.shape[:2])
    fit = fit_trajectory(placement, positions, weights, scale=1.2, cutoff=None)
    assert fit.converged and not fit.bridged.any() and np.all(np.isfinite(fit.q))
    assert np.max(violation(model, fit.q)) == 0.0
    # the pull to rest biases each coordinate by about REST_WEIGHT of its value; without it the
    # angles come back exactly
    assert np.nanmax(fit.position_error) < 30 * data_term_module.REST_WEIGHT
    monkeypatch.setattr(data_term_module, "REST_WEIGHT", 1e-12)
    exact = fit_trajectory(placement, positions, weights, scale=1.2, cutoff=None)
    assert exact.converged and np.nanmax(exact.position_error) < 1e-9
    assert np.max(np.abs(exact.q - Q)) < 1e-7                    # radians and metres


def test_limits_hold_where_the_keypoints_ask_for_more(rig):
    placement = dense_placement(rig)
    model = placement.model
    Q = motion(model, placement.root, F=6)
    knees = [i for i, name in enumerate(model.coordinate_names) if name.startswith("shin.") and np.isfinite(model.upper[i])]
    assert knees
    beyond = Q.copy()
    beyond[:, knees] = model.upper[knees] + 0.3                         # bent past the limit
    positions = placement.evaluate(beyond, jacobian=False)
    fit = fit_trajectory(placement, positions, np.ones(positions.shape[:2]), cutoff=None)
    np.testing.assert_allclose(fit.q[:, knees], np.broadcast_to(model.upper[knees], (6, len(knees))), atol=1e-9)
    assert np.max(violation(model, fit.q)) <= 1e-12


def point_model():
    """One free segment and six keypoints symmetric about its origin: its translation is seen
    directly (no coupling to its rotation at rest), weight 6 per axis."""
    model = Model([Segment("body", -1, np.eye(4), (prismatic("X"), prismatic("Y"), prismatic("Z"), sphere()))])
    offsets = np.array([[0.1, 0, 0], [-0.1, 0, 0], [0, 0.1, 0], [0, -0.1, 0], [0, 0, 0.1], [0, 0, -0.1]])
    return Placement(model, tuple("abcdef"), np.zeros(6, int), offsets, 0)


def test_smoothing_is_the_whittaker_smoother_with_half_gain_at_the_cutoff():
    placement = point_model()
    rng = np.random.default_rng(7)
    F, rate, cutoff = 240, 60.0, 4.0
    t = np.arange(F) / rate
    path = np.stack([np.sin(2 * np.pi * 1.0 * t), 0.3 * t, np.zeros(F)], axis=1) + rng.normal(0, 0.01, (F, 3))
    positions = placement.offsets[None] + path[:, None]
    fit = fit_trajectory(placement, positions, np.ones((F, 6)), rate=rate, cutoff=cutoff)
    lam = smoothness.cutoff_weight(cutoff, rate)
    Dop = np.diff(np.eye(F), 2, axis=0)
    expected = np.linalg.solve(np.eye(F) + lam * Dop.T @ Dop, path)         # Whittaker-Henderson
    np.testing.assert_allclose(fit.q[:, :3], expected, atol=1e-7)
    np.testing.assert_allclose(fit.q[:, 3:], 0.0, atol=1e-7)
    # the filter's gain: 1/2 at the cutoff, about 1 well below it
    wave = np.sin(2 * np.pi * cutoff * np.arange(1200) / rate)
    kept = np.linalg.solve(np.eye(1200) + lam * np.diff(np.eye(1200), 2, axis=0).T @ np.diff(np.eye(1200), 2, axis=0),
                           wave)
    assert abs(np.max(np.abs(kept[400:800])) - 0.5) < 0.01
    assert fit.converged


def test_calibration_recovers_the_scale_and_keeps_the_table_places(rig, monkeypatch):
    """Keypoints at their table places on a rig 1.15 times the data's size, the window moving:
    the fitted scale is 1.15 and the offsets stay where they are (to the pull to rest's bias,
    and closer without it)."""
    placement, left_out = place_keypoints(rig, keypoint_set("HALPE_26"), keypoint_set("HALPE_26").names)
    assert not left_out
    Q = motion(placement.model, placement.root, F=12, amplitude=0.25)
    positions = placement.evaluate(Q, jacobian=False) / 1.15
    cal = calibrate(placement, positions, np.ones(positions.shape[:2]))
    assert cal.converged and cal.scale == pytest.approx(1.15, rel=3e-3)
    assert np.max(cal.shift) < 1e-2 and np.max(cal.residual) < 1e-2      # on a rig 2 units tall
    monkeypatch.setattr(data_term_module, "REST_WEIGHT", 1e-12)
    exact = calibrate(placement, positions, np.ones(positions.shape[:2]))
    # to the resolution of the directions the keypoints barely see (a lone wrist keypoint and the
    # hand's turn about it trade against the wrist's offset)
    assert exact.converged and exact.scale == pytest.approx(1.15, rel=1e-4)
    assert np.max(exact.shift) < 1e-3 and np.max(exact.residual) < 1e-4


def test_bad_arrays_are_named():
    placement = point_model()
    good = placement.offsets[None].repeat(4, axis=0)
    ones = np.ones((4, 6))
    cases = [(good[:, :5], ones[:, :5], {}, "expected"), (good, ones[:, :5], {}, "expected"),
             (np.where(np.arange(6)[:, None] == 2, np.inf, good), ones, {}, "finite"),
             (good, -ones, {}, "weights"), (good, ones, {"scale": 0.0}, "scale"),
             (good, ones, {"rate": np.nan}, "frame rate"), (good, ones, {"cutoff": 30.0}, "cutoff")]
    for positions, weights, options, words in cases:
        with pytest.raises(ValueError, match=words):
            fit_trajectory(placement, positions, weights, **options)
    with pytest.raises(ValueError, match="expected"):
        calibrate(placement, good[:, :4], ones[:, :4])

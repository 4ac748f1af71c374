"""Tests for solver.analytic.

Every check compares against an independent reference: forward kinematics written out
here (or chained homogeneous transforms), closed-form distances, dense 1-D sampling of
the solution family with sign-change root counting, and brute-force sampling of
configurations.  No expected numbers are hard-coded.
"""

from __future__ import annotations

import numpy as np
import pytest

from solver import analytic as an

FK_TOL = 1e-12
A_SEED = (0.2, 0.2, 0.25, 0.1415)


# ----------------------------------------------------------------- references


def unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def fk_two_link_ref(l1, l2, t1, t2):
    """x = l1 cos t1 + l2 cos(t1 + t2), y = l1 sin t1 + l2 sin(t1 + t2)."""
    return np.stack([l1 * np.cos(t1) + l2 * np.cos(t1 + t2),
                     l1 * np.sin(t1) + l2 * np.sin(t1 + t2)], axis=-1)


def fk_planar3_homogeneous(q, a):
    """Seed arm as a product of 3x3 homogeneous transforms (an independent FK)."""
    a1, a2, a3, a4 = a

    def rot(t):
        c, s = np.cos(t), np.sin(t)
        m = np.zeros(t.shape + (3, 3))
        m[..., 0, 0], m[..., 0, 1], m[..., 1, 0], m[..., 1, 1] = c, -s, s, c
        m[..., 2, 2] = 1.0
        return m

    def trans(dx, shape):
        m = np.broadcast_to(np.eye(3), shape + (3, 3)).copy()
        m[..., 0, 2] = dx
        return m

    sh = q.shape[:-1]
    T = (trans(a4, sh) @ rot(q[..., 0]) @ trans(a1, sh) @ rot(-q[..., 1])
         @ trans(a2, sh) @ rot(q[..., 2]) @ trans(a3, sh))
    return T[..., :2, 2]


def count_sign_changes(g):
    """Roots of a periodic sampled function (last axis is the full period)."""
    s = np.signbit(g)
    return np.sum(s != np.roll(s, -1, axis=-1), axis=-1)


def ambiguous(g, step):
    """True where a near-tangency could hide/fake a pair of roots on this grid.

    Near an extremum g ~ g_ext + k t^2 with k ~ the amplitude, two roots closer than
    a grid step exist only if |g_ext| < k step^2; such samples are not counted.
    """
    gmax, gmin = g.max(axis=-1), g.min(axis=-1)
    amp = 0.5 * (gmax - gmin)
    near = amp * step ** 2 * 4.0
    return (np.abs(gmin) < near) | (np.abs(gmax) < near)


def ang_diff(a, b):
    """Smallest signed difference a - b modulo 2 pi (in [-pi, pi))."""
    return np.mod(a - b + np.pi, 2 * np.pi) - np.pi


def random_dirs(rng, n):
    return unit(rng.normal(size=(n, 3)))


# ==================================================================== two-bone 3-D


def make_reachable_case(rng, n):
    root = rng.normal(size=(n, 3))
    l1 = rng.uniform(0.2, 2.0, n)
    l2 = rng.uniform(0.2, 2.0, n)
    lo, hi = np.abs(l1 - l2), l1 + l2
    dist = lo + (hi - lo) * rng.uniform(0.001, 0.999, n)
    target = root + dist[:, None] * random_dirs(rng, n)
    pole = rng.normal(scale=3.0, size=(n, 3))
    return root, l1, l2, target, pole


def test_two_bone_reachable_batch_hits_target():
    rng = np.random.default_rng(1)
    n = 5000
    root, l1, l2, target, pole = make_reachable_case(rng, n)
    r = an.two_bone_ik(root, l1, l2, target, pole)
    assert r.elbow.shape == (n, 3) and r.reachable.shape == (n,)
    assert r.reachable.all()
    # FK of the returned chain: root + l1 dir1 + l2 dir2
    fk_end = root + l1[:, None] * r.dir1 + l2[:, None] * r.dir2
    assert np.abs(fk_end - target).max() < FK_TOL
    assert np.abs(r.end - target).max() < FK_TOL
    # bone lengths from the returned points
    np.testing.assert_allclose(np.linalg.norm(r.elbow - root, axis=-1), l1, rtol=0, atol=FK_TOL)
    np.testing.assert_allclose(np.linalg.norm(target - r.elbow, axis=-1), l2, rtol=0, atol=FK_TOL)
    np.testing.assert_allclose(np.linalg.norm(r.dir1, axis=-1), 1.0, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(r.dir2, axis=-1), 1.0, atol=1e-14)
    # elbow lies in the plane (root, target, pole) on the pole side
    d = target - root
    p = pole - root
    normal = unit(np.cross(d, p))
    assert np.abs(np.sum((r.elbow - root) * normal, axis=-1)).max() < 1e-12
    p_perp = p - np.sum(p * unit(d), -1, keepdims=True) * unit(d)
    assert (np.sum((r.elbow - root) * p_perp, axis=-1) >= -1e-12).all()


def test_two_bone_elbow_maximises_pole_side_brute_force():
    """All elbow positions that solve the chain form a circle; the pole picks its max."""
    rng = np.random.default_rng(2)
    n = 300
    root, l1, l2, target, pole = make_reachable_case(rng, n)
    r = an.two_bone_ik(root, l1, l2, target, pole)
    d = target - root
    D = np.linalg.norm(d, axis=-1)
    u = d / D[:, None]
    # independent circle: arccos law of cosines, an arbitrary orthonormal basis (e1, e2)
    alpha = np.arccos((l1 ** 2 + D ** 2 - l2 ** 2) / (2 * l1 * D))
    e1 = unit(np.cross(u, rng.normal(size=(n, 3))))
    e2 = np.cross(u, e1)
    t = np.linspace(0, 2 * np.pi, 7200, endpoint=False)
    circle = (root[:, None] + (l1 * np.cos(alpha))[:, None, None] * u[:, None]
              + (l1 * np.sin(alpha))[:, None, None]
              * (np.cos(t)[None, :, None] * e1[:, None] + np.sin(t)[None, :, None] * e2[:, None]))
    # every sampled elbow really solves the chain (sanity of the reference)
    assert np.abs(np.linalg.norm(target[:, None] - circle, axis=-1) - l2[:, None]).max() < 1e-12
    p = pole - root
    best = np.max(np.sum((circle - root[:, None]) * p[:, None], axis=-1), axis=-1)
    got = np.sum((r.elbow - root) * p, axis=-1)
    scale = l1 * np.linalg.norm(p, axis=-1)
    assert (got >= best - 1e-12 * scale).all()
    # and the returned elbow is on that circle
    off = r.elbow - root
    np.testing.assert_allclose(np.sum(off * u, -1), l1 * np.cos(alpha), atol=1e-10)


def test_two_bone_pole_direction_equals_pole_point():
    rng = np.random.default_rng(3)
    root, l1, l2, target, pole = make_reachable_case(rng, 1000)
    a = an.two_bone_ik(root, l1, l2, target, pole, pole_is_point=True)
    b = an.two_bone_ik(root, l1, l2, target, pole - root, pole_is_point=False)
    np.testing.assert_allclose(a.elbow, b.elbow, atol=1e-12)
    np.testing.assert_allclose(a.dir2, b.dir2, atol=1e-12)


def test_two_bone_rotations_are_bone_frames():
    rng = np.random.default_rng(4)
    root, l1, l2, target, pole = make_reachable_case(rng, 2000)
    r = an.two_bone_ik(root, l1, l2, target, pole)
    eye = np.broadcast_to(np.eye(3), r.rot1.shape)
    for R, L, start, stop in ((r.rot1, l1, root, r.elbow), (r.rot2, l2, r.elbow, r.end)):
        np.testing.assert_allclose(np.swapaxes(R, -1, -2) @ R, eye, atol=1e-12)
        np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-12)
        # bone Y axis: the tail (0, L, 0) maps onto the bone
        tail = R @ np.stack([np.zeros_like(L), L, np.zeros_like(L)], -1)[..., None]
        np.testing.assert_allclose(start + tail[..., 0], stop, atol=1e-12)
    # X is the common bend axis, perpendicular to both bones
    np.testing.assert_allclose(r.rot1[..., :, 0], r.rot2[..., :, 0], atol=0)
    assert np.abs(np.sum(r.rot1[..., :, 0] * r.dir1, -1)).max() < 1e-12
    assert np.abs(np.sum(r.rot1[..., :, 0] * r.dir2, -1)).max() < 1e-12


def test_two_bone_unreachable_is_closest_approach():
    rng = np.random.default_rng(5)
    n = 4000
    root = rng.normal(size=(n, 3))
    l1 = rng.uniform(0.2, 2.0, n)
    l2 = rng.uniform(0.2, 2.0, n)
    far = rng.uniform(size=n) < 0.5
    lo, hi = np.abs(l1 - l2), l1 + l2
    dist = np.where(far, hi * rng.uniform(1.001, 3.0, n), lo * rng.uniform(0.001, 0.999, n))
    u = random_dirs(rng, n)
    target = root + dist[:, None] * u
    pole = rng.normal(size=(n, 3))
    r = an.two_bone_ik(root, l1, l2, target, pole)
    assert not r.reachable.any()
    for arr in r[:-1]:
        assert np.isfinite(arr).all()
    expected = np.where(far, dist - hi, lo - dist)
    got = np.linalg.norm(r.end - target, axis=-1)
    np.testing.assert_allclose(got, expected, atol=1e-12)
    # lengths preserved, chain along the root->target line
    np.testing.assert_allclose(np.linalg.norm(r.elbow - root, axis=-1), l1, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(r.end - r.elbow, axis=-1), l2, atol=1e-12)
    assert np.abs(np.abs(np.sum(r.dir1 * u, -1)) - 1).max() < 1e-12
    assert np.abs(np.abs(np.sum(r.dir2 * u, -1)) - 1).max() < 1e-12
    # brute force: no random chain gets closer than the returned one
    m = 400
    k = 4000
    idx = rng.choice(n, m, replace=False)
    d1 = unit(rng.normal(size=(m, k, 3)))
    d2 = unit(rng.normal(size=(m, k, 3)))
    ends = root[idx, None] + l1[idx, None, None] * d1 + l2[idx, None, None] * d2
    best = np.linalg.norm(ends - target[idx, None], axis=-1).min(axis=-1)
    assert (best >= got[idx] - 1e-12).all()


def test_two_bone_workspace_boundary_is_reachable():
    rng = np.random.default_rng(6)
    n = 500
    root = rng.normal(size=(n, 3))
    l1 = rng.uniform(0.2, 2.0, n)
    l2 = rng.uniform(0.2, 2.0, n)
    u = random_dirs(rng, n)
    for dist in (l1 + l2, np.abs(l1 - l2)):
        target = root + dist[:, None] * u
        r = an.two_bone_ik(root, l1, l2, target, rng.normal(size=(n, 3)))
        assert r.reachable.all()
        assert np.abs(r.end - target).max() < FK_TOL


def test_two_bone_collinear_pole_uses_documented_perpendicular():
    rng = np.random.default_rng(7)
    n = 1000
    root, l1, l2, target, _ = make_reachable_case(rng, n)
    d = target - root
    u = unit(d)
    # documented fallback: world axis with the smallest |u_k|, u-component removed
    k = np.argmin(np.abs(u), axis=-1)
    e = np.eye(3)[k]
    w_expected = unit(e - np.sum(e * u, -1, keepdims=True) * u)
    poles = {
        "point beyond target": (root + 2.5 * d, True),
        "point behind root": (root - 0.5 * d, True),
        "direction along d": (d, False),
        "direction against d": (-d, False),
        "zero direction": (np.zeros_like(d), False),
        "point at root": (root, True),
    }
    first = None
    for name, (pole, is_point) in poles.items():
        r = an.two_bone_ik(root, l1, l2, target, pole, pole_is_point=is_point)
        assert r.reachable.all(), name
        assert np.abs(r.end - target).max() < FK_TOL, name
        off = r.elbow - root
        perp = off - np.sum(off * u, -1, keepdims=True) * u
        # elbow bends toward +w_expected (perp component is a non-negative multiple)
        assert np.abs(np.cross(perp, w_expected)).max() < 1e-12, name
        assert (np.sum(perp * w_expected, -1) >= 0).all(), name
        if first is None:
            first = r.elbow
        np.testing.assert_allclose(r.elbow, first, atol=1e-12, err_msg=name)


def test_two_bone_degenerate_inputs_no_nan():
    root = np.array([[0.0, 0.0, 0.0]] * 6) + np.array([0.3, -1.0, 2.0])
    pole = np.array([[0.0, 0.0, 1.0]] * 6)
    target = root.copy()
    target[2:] += np.array([0.5, 0.5, 0.0])
    l1 = np.array([1.0, 0.0, 0.0, 1.0, 0.0, 0.7])
    l2 = np.array([1.0, 1.0, 0.7, 0.0, 0.0, 0.7])
    # rows: target at root with l1 = l2; target at root with l1 = 0; l1 = 0; l2 = 0;
    # both zero; last row is a proper reachable control
    r = an.two_bone_ik(root, l1, l2, target, pole)
    for arr in r[:-1]:
        assert np.isfinite(arr).all()
    np.testing.assert_array_equal(r.reachable, [False, False, False, False, False, True])
    np.testing.assert_allclose(np.linalg.norm(r.elbow - root, axis=-1), l1, atol=1e-15)
    # target at root with zero pole too: still finite
    r0 = an.two_bone_ik(np.zeros(3), 1.0, 1.0, np.zeros(3), np.zeros(3))
    assert np.isfinite(r0.elbow).all() and not r0.reachable


def test_two_bone_broadcasting_shapes():
    rng = np.random.default_rng(8)
    root = np.zeros(3)
    target = rng.normal(size=(4, 5, 3))
    pole = np.array([0.0, 0.0, 1.0])
    r = an.two_bone_ik(root, 1.0, np.full((5,), 0.8), target, pole)
    assert r.elbow.shape == (4, 5, 3) and r.rot2.shape == (4, 5, 3, 3)
    assert r.reachable.shape == (4, 5)
    flat = an.two_bone_ik(np.zeros((20, 3)), np.ones(20), np.full(20, 0.8),
                          target.reshape(20, 3), np.tile(pole, (20, 1)))
    np.testing.assert_allclose(r.elbow.reshape(20, 3), flat.elbow, atol=0)


# ================================================================ planar two-link


def test_two_link_planar_random_batch():
    rng = np.random.default_rng(10)
    n = 6000
    l1 = rng.uniform(0.1, 1.5, n)
    l2 = rng.uniform(0.1, 1.5, n)
    R = 1.3 * (l1 + l2)
    x, y = rng.uniform(-1, 1, (2, n)) * R
    ang, reach = an.two_link_planar(l1, l2, x, y)
    assert ang.shape == (n, 2, 2) and reach.shape == (n,)
    assert np.isfinite(ang).all()
    assert (ang >= -np.pi).all() and (ang < np.pi).all()
    D = np.hypot(x, y)
    ref_reach = (D <= l1 + l2) & (D >= np.abs(l1 - l2))
    np.testing.assert_array_equal(reach, ref_reach)
    assert 0.2 < reach.mean() < 0.8  # both kinds really present
    fk = fk_two_link_ref(l1[:, None], l2[:, None], ang[..., 0], ang[..., 1])
    err = np.linalg.norm(fk - np.stack([x, y], -1)[:, None], axis=-1)
    assert err[reach].max() < FK_TOL
    # branches bend opposite ways
    assert (ang[reach, 0, 1] >= 0).all() and (ang[reach, 1, 1] <= 0).all()
    # unreachable: both branches are the closest approach
    closest = np.maximum(D - (l1 + l2), np.abs(l1 - l2) - D)
    np.testing.assert_allclose(err[~reach], np.repeat(closest[~reach, None], 2, 1), atol=1e-12)


def test_two_link_planar_branch_count_matches_dense_sampling():
    """Count t1 roots of |p - l1 e(t1)|^2 - l2^2 on a dense grid; each root is a branch."""
    rng = np.random.default_rng(11)
    n = 3000
    l1 = rng.uniform(0.1, 1.5, n)
    l2 = rng.uniform(0.1, 1.5, n)
    R = 1.2 * (l1 + l2)
    x, y = rng.uniform(-1, 1, (2, n)) * R
    ang, reach = an.two_link_planar(l1, l2, x, y)
    m = 4096
    t = np.linspace(0, 2 * np.pi, m, endpoint=False)
    g = ((x[:, None] - l1[:, None] * np.cos(t)) ** 2
         + (y[:, None] - l1[:, None] * np.sin(t)) ** 2 - l2[:, None] ** 2)
    keep = ~ambiguous(g, 2 * np.pi / m)
    assert keep.mean() > 0.99
    ref = count_sign_changes(g)
    distinct = np.abs(ang[:, 0, 1] - ang[:, 1, 1]) > 0
    got = np.where(reach, np.where(distinct, 2, 1), 0)
    np.testing.assert_array_equal(got[keep], ref[keep])
    # each returned t1 lies within one grid step of a sign change of g
    s = np.signbit(g)
    change_at = (s != np.roll(s, -1, axis=-1))
    for b in range(2):
        idx = np.nonzero(reach & keep)[0]
        pos = np.mod(ang[idx, b, 0], 2 * np.pi) / (2 * np.pi / m)
        lo = np.floor(pos).astype(int) % m
        near = change_at[idx, lo] | change_at[idx, (lo - 1) % m] | change_at[idx, (lo + 1) % m]
        assert near.all()


def test_two_link_planar_degenerate_no_nan():
    l1 = np.array([1.0, 0.0, 1.0, 0.0, 0.5, 1.0])
    l2 = np.array([1.0, 1.0, 0.0, 0.0, 0.5, 0.5])
    x = np.array([0.0, 1.0, 1.0, 0.0, 0.0, 1.2])
    y = np.zeros(6)
    ang, reach = an.two_link_planar(l1, l2, x, y)
    assert np.isfinite(ang).all()
    np.testing.assert_array_equal(reach, [False, False, False, False, False, True])


def test_two_link_planar_boundary_branches_coincide():
    rng = np.random.default_rng(12)
    l1 = np.array([0.5, 0.75, 0.25])
    l2 = np.array([0.25, 0.5, 0.75])
    th = rng.uniform(-np.pi, np.pi, 3)
    for D in (l1 + l2, np.abs(l1 - l2)):
        x, y = D * np.cos(th), D * np.sin(th)
        ang, reach = an.two_link_planar(l1, l2, x, y)
        assert reach.all()
        fk = fk_two_link_ref(l1[:, None], l2[:, None], ang[..., 0], ang[..., 1])
        assert np.abs(fk - np.stack([x, y], -1)[:, None]).max() < FK_TOL
        np.testing.assert_allclose(ang[:, 0], ang[:, 1], atol=1e-7)


# =================================================================== 3-link planar


def test_fk_planar3_matches_homogeneous_transforms_and_seed_formula():
    rng = np.random.default_rng(20)
    q = rng.uniform(-4, 4, (5000, 3))
    got = an.fk_planar3(q)
    ref = fk_planar3_homogeneous(q, A_SEED)
    np.testing.assert_allclose(got, ref, atol=1e-14)
    q1, q2, q3 = q.T
    seed_x = 0.2 * np.cos(q1) + 0.2 * np.cos(q1 - q2) + 0.25 * np.cos(q1 - q2 + q3) + 0.1415
    seed_y = 0.2 * np.sin(q1) + 0.2 * np.sin(q1 - q2) + 0.25 * np.sin(q1 - q2 + q3)
    np.testing.assert_allclose(got, np.stack([seed_x, seed_y], -1), atol=1e-15)
    a = (0.7, 0.3, 0.45, -0.2)
    np.testing.assert_allclose(an.fk_planar3(q, a), fk_planar3_homogeneous(q, a), atol=1e-14)
    assert an.fk_planar3(q.reshape(50, 100, 3)).shape == (50, 100, 2)


def random_targets(rng, n, a, margin=1.25):
    """Targets in a disc around the base that covers the workspace and beyond."""
    reach = a[0] + a[1] + a[2]
    rad = margin * reach * np.sqrt(rng.uniform(size=n))
    ang = rng.uniform(-np.pi, np.pi, n)
    return a[3] + rad * np.cos(ang), rad * np.sin(ang)


@pytest.mark.parametrize("a", [A_SEED, (0.3, 0.15, 0.2, -0.05)])
def test_planar3_given_phi_random_batch(a):
    rng = np.random.default_rng(21)
    n = 6000
    x, y = random_targets(rng, n, a)
    phi = rng.uniform(-np.pi, np.pi, n)
    q, valid = an.planar3_ik_given_phi(x, y, phi, a)
    assert q.shape == (n, 2, 3) and valid.shape == (n, 2)
    assert np.isfinite(q).all()
    assert (q >= -np.pi).all() and (q < np.pi).all()
    assert 0.1 < valid[:, 0].mean() < 0.9
    fk = fk_planar3_homogeneous(q, a)
    err = np.linalg.norm(fk - np.stack([x, y], -1)[:, None], axis=-1)
    assert err[valid].max() < FK_TOL
    # orientation reproduced: q1 - q2 + q3 = phi (mod 2 pi)
    got_phi = q[..., 0] - q[..., 1] + q[..., 2]
    assert np.abs(ang_diff(got_phi, phi[:, None])).max() < 1e-12
    # invalid rows: closest approach for this phi, distance from the wrist annulus
    wx = x - a[3] - a[2] * np.cos(phi)
    wy = y - a[2] * np.sin(phi)
    W = np.hypot(wx, wy)
    closest = np.maximum(W - (a[0] + a[1]), np.abs(a[0] - a[1]) - W)
    bad = ~valid[:, 0]
    np.testing.assert_allclose(err[bad, 0], closest[bad], atol=1e-12)


@pytest.mark.parametrize("a", [A_SEED, (0.3, 0.15, 0.2, -0.05)])
def test_planar3_given_phi_branch_count_dense_sampling(a):
    """For fixed phi sample q1 densely; joint 3 must be a2 away from joint 2.

    Joint positions come from the homogeneous-transform FK of partial chains.
    """
    rng = np.random.default_rng(22)
    n = 2000
    x, y = random_targets(rng, n, a)
    phi = rng.uniform(-np.pi, np.pi, n)
    q, valid = an.planar3_ik_given_phi(x, y, phi, a)
    m = 4096
    t = np.linspace(0, 2 * np.pi, m, endpoint=False)
    # joint 2 at (a4 + a1 cos q1, a1 sin q1): FK with a2 = a3 = 0
    j2 = fk_planar3_homogeneous(np.stack([t, 0 * t, 0 * t], -1), (a[0], 0.0, 0.0, a[3]))
    # joint 3 (wrist) = target - a3 e(phi)
    j3 = np.stack([x - a[2] * np.cos(phi), y - a[2] * np.sin(phi)], -1)
    g = np.sum((j3[:, None] - j2[None]) ** 2, axis=-1) - a[1] ** 2
    keep = ~ambiguous(g, 2 * np.pi / m)
    assert keep.mean() > 0.99
    ref = count_sign_changes(g)
    got = valid.sum(axis=-1)
    np.testing.assert_array_equal(got[keep], ref[keep])
    assert set(np.unique(ref[keep])) == {0, 2}


@pytest.mark.parametrize("a", [A_SEED, (0.3, 0.15, 0.2, -0.05)])
def test_planar3_given_q2_random_batch(a):
    rng = np.random.default_rng(23)
    n = 6000
    x, y = random_targets(rng, n, a)
    q2 = rng.uniform(-np.pi, np.pi, n)
    q, valid = an.planar3_ik_given_q2(x, y, q2, a)
    assert q.shape == (n, 2, 3) and valid.shape == (n, 2)
    assert np.isfinite(q).all()
    assert (q >= -np.pi).all() and (q < np.pi).all()
    assert 0.1 < valid[:, 0].mean() < 0.9
    fk = fk_planar3_homogeneous(q, a)
    err = np.linalg.norm(fk - np.stack([x, y], -1)[:, None], axis=-1)
    assert err[valid].max() < FK_TOL
    assert np.abs(ang_diff(q[..., 1], q2[:, None])).max() < 1e-15
    # the seed's squared-distance equation holds for every valid solution
    a1, a2, a3, a4 = a
    q2_, q3_ = q[..., 1], q[..., 2]
    rhs = (a1 ** 2 + a2 ** 2 + a3 ** 2 + 2 * a1 * a2 * np.cos(q2_) + 2 * a2 * a3 * np.cos(q3_)
           + 2 * a1 * a3 * np.cos(q2_ - q3_))
    lhs = np.broadcast_to(((x - a4) ** 2 + y ** 2)[:, None], rhs.shape)
    assert np.abs(lhs - rhs)[valid].max() < 1e-12
    # invalid rows: closest approach for this q2 (virtual link r, link a3)
    r = np.sqrt(a1 ** 2 + a2 ** 2 + 2 * a1 * a2 * np.cos(q2))
    D = np.hypot(x - a4, y)
    closest = np.maximum(D - (r + a3), np.abs(r - a3) - D)
    bad = ~valid[:, 0]
    np.testing.assert_allclose(err[bad, 0], closest[bad], atol=1e-12)


@pytest.mark.parametrize("a", [A_SEED, (0.3, 0.15, 0.2, -0.05)])
def test_planar3_given_q2_branch_count_dense_sampling(a):
    """For fixed q2 the distance base->end depends on q3 only (q1 rotates rigidly).

    Sample q3 densely, evaluate |FK(0, q2, q3) - base|^2 - |target - base|^2 with the
    homogeneous-transform FK and count sign changes; compare to the valid branches and
    check every returned q3 sits at a sampled sign change.
    """
    rng = np.random.default_rng(24)
    n = 1200
    x, y = random_targets(rng, n, a)
    q2 = rng.uniform(-np.pi, np.pi, n)
    q, valid = an.planar3_ik_given_q2(x, y, q2, a)
    m = 2048
    t = np.linspace(0, 2 * np.pi, m, endpoint=False)
    qq = np.stack(np.broadcast_arrays(0.0, q2[:, None], t[None]), axis=-1)
    p = fk_planar3_homogeneous(qq, a) - np.array([a[3], 0.0])
    g = np.sum(p ** 2, axis=-1) - ((x - a[3]) ** 2 + y ** 2)[:, None]
    keep = ~ambiguous(g, 2 * np.pi / m)
    assert keep.mean() > 0.99
    ref = count_sign_changes(g)
    got = valid.sum(axis=-1)
    np.testing.assert_array_equal(got[keep], ref[keep])
    assert set(np.unique(ref[keep])) == {0, 2}
    s = np.signbit(g)
    change_at = s != np.roll(s, -1, axis=-1)
    for b in range(2):
        idx = np.nonzero(valid[:, b] & keep)[0]
        pos = np.mod(q[idx, b, 2], 2 * np.pi) / (2 * np.pi / m)
        lo = np.floor(pos).astype(int) % m
        near = change_at[idx, lo] | change_at[idx, (lo - 1) % m] | change_at[idx, (lo + 1) % m]
        assert near.all()


def test_planar3_family_brute_force_grid_and_parametrisations_agree():
    """Brute force over the 1-parameter family of one target.

    Sweep q2 over a dense grid: every valid solution hits the target; each
    q2-solution appears among the solutions of the phi-parametrisation at its own phi;
    and for sampled q2 the branches equal the solutions found by brute force (2-D grid
    over (q1, q3) refined by finite-difference Gauss-Newton), in both directions.
    """
    rng = np.random.default_rng(25)
    a = A_SEED
    n_bad_checked = 0
    for _ in range(4):
        # a target well inside the workspace
        q_true = rng.uniform(-np.pi, np.pi, 3)
        x, y = an.fk_planar3(q_true)
        q2_grid = np.linspace(-np.pi, np.pi, 2001, endpoint=False)
        q, valid = an.planar3_ik_given_q2(x, y, q2_grid, a)
        fk = an.fk_planar3(q, a)
        assert np.abs(fk - np.array([x, y]))[valid].max() < FK_TOL
        # the generating configuration is on the family: its q2 row contains it
        qt, vt = an.planar3_ik_given_q2(x, y, q_true[1], a)
        d = np.abs(ang_diff(qt, q_true)).max(axis=-1)
        assert (d[vt].min() < 1e-9)
        # cross-check with the phi parametrisation
        sol = q[valid]
        phi = sol[:, 0] - sol[:, 1] + sol[:, 2]
        qp, vp = an.planar3_ik_given_phi(x, y, phi, a)
        match = np.abs(ang_diff(qp, sol[:, None])).max(axis=-1) < 1e-9
        assert (match & vp).any(axis=-1).all()
        # brute force for a few q2 values: 2-D grid over (q1, q3), then Gauss-Newton
        # with a finite-difference Jacobian from every low-error grid point
        r = np.hypot(a[0] + a[1] * np.cos(q2_grid), a[1] * np.sin(q2_grid))
        usable = np.nonzero(r > 0.05)[0]  # r ~ 0 is the degenerate (continuum) case
        good = np.intersect1d(usable, np.nonzero(valid[:, 0])[0])
        bad = np.intersect1d(usable, np.nonzero(~valid[:, 0])[0])
        picks = np.concatenate([rng.choice(good, 3), rng.choice(bad, min(2, len(bad)))])
        n_bad_checked += min(2, len(bad))
        for k in picks:
            found = brute_force_q1_q3(x, y, q2_grid[k], a)
            cand = q[k][valid[k]]
            if len(cand) == 0:
                assert len(found) == 0
                continue
            # every converged brute-force solution is an analytic branch, and vice versa
            d = np.abs(ang_diff(found[:, None, :], cand[None, :, [0, 2]])).max(-1)
            assert (d.min(axis=1) < 1e-6).all()
            assert (d.min(axis=0) < 1e-6).all()
    assert n_bad_checked > 0  # the no-solution direction was exercised too


def brute_force_q1_q3(x, y, q2, a, m=361, iters=40):
    """Solutions (q1, q3) for fixed q2 found without the analytic formulas.

    Grid search of |FK - target| (homogeneous-transform FK), then Gauss-Newton with a
    central finite-difference Jacobian from every grid point whose error is below the
    Lipschitz bound of the grid; returns the points that converged (error < 1e-12).
    """
    g = np.linspace(-np.pi, np.pi, m, endpoint=False)
    Q1, Q3 = np.meshgrid(g, g, indexing="ij")
    target = np.array([x, y])

    def fk(v):
        return fk_planar3_homogeneous(
            np.stack([v[..., 0], np.full(v.shape[:-1], q2), v[..., 1]], -1), a)

    v = np.stack([Q1.ravel(), Q3.ravel()], -1)
    err = np.linalg.norm(fk(v) - target, axis=-1)
    v = v[err < (a[0] + a[1] + a[2]) * (2 * np.pi / m)]
    h = 1e-6
    for _ in range(iters):
        e = fk(v) - target
        J = np.stack([(fk(v + h * np.eye(2)[j]) - fk(v - h * np.eye(2)[j])) / (2 * h)
                      for j in range(2)], axis=-1)
        step = (np.linalg.pinv(J, rcond=1e-10) @ e[..., None])[..., 0]
        v = v - np.clip(step, -0.3, 0.3)
    ok = np.linalg.norm(fk(v) - target, axis=-1) < 1e-12
    return v[ok]


def test_planar3_unreachable_targets_have_no_valid_branch():
    rng = np.random.default_rng(26)
    a = A_SEED
    n = 3000
    reach = a[0] + a[1] + a[2]
    rad = reach * rng.uniform(1.0001, 3.0, n)
    ang = rng.uniform(-np.pi, np.pi, n)
    x, y = a[3] + rad * np.cos(ang), rad * np.sin(ang)
    q2 = rng.uniform(-np.pi, np.pi, n)
    phi = rng.uniform(-np.pi, np.pi, n)
    for q, valid in (an.planar3_ik_given_q2(x, y, q2, a), an.planar3_ik_given_phi(x, y, phi, a)):
        assert not valid.any()
        assert np.isfinite(q).all()
        # fill = closest approach: the arm is stretched out toward the target
        err = np.linalg.norm(an.fk_planar3(q, a) - np.stack([x, y], -1)[:, None], axis=-1)
        assert (err >= rad[:, None] - reach - 1e-12).all()


def test_planar3_degenerate_inputs():
    a = A_SEED  # a1 = a2, so q2 = pi folds links 1-2 onto the base
    phis = np.array([0.3, -2.0])
    # virtual link of zero length: target at distance a3 from the base, q2 = pi
    x = a[3] + a[2] * np.cos(phis)
    y = a[2] * np.sin(phis)
    q, valid = an.planar3_ik_given_q2(x, y, np.pi, a)
    assert np.isfinite(q).all() and not valid.any()
    # phi given and wrist exactly on the base (continuum of q1 since a1 = a2)
    q, valid = an.planar3_ik_given_phi(x, y, phis, a)
    assert np.isfinite(q).all() and not valid.any()
    # zero link lengths: a continuum (reported invalid) exactly when the remaining
    # two-link problem has a zero link; otherwise finitely many exact solutions
    tx, ty = np.array([0.1, 0.3]), np.array([0.05, -0.1])
    cases = [  # (links, function, free value, continuum?)
        ((0.0, 0.2, 0.25, 0.0), an.planar3_ik_given_phi, 0.4, True),    # q1 free
        ((0.2, 0.0, 0.25, 0.0), an.planar3_ik_given_phi, 0.4, True),    # q2 free
        ((0.2, 0.25, 0.0, 0.0), an.planar3_ik_given_q2, 0.4, True),     # q3 free
        ((0.2, 0.25, 0.0, 0.0), an.planar3_ik_given_phi, 0.4, False),
        ((0.0, 0.2, 0.25, 0.0), an.planar3_ik_given_q2, 0.4, False),
        ((0.2, 0.0, 0.25, 0.0), an.planar3_ik_given_q2, 0.4, False),
    ]
    for links, f, arg, continuum in cases:
        q, valid = f(tx, ty, arg, links)
        assert np.isfinite(q).all()
        if continuum:
            assert not valid.any()
        else:
            assert valid.any()
            err = np.linalg.norm(fk_planar3_homogeneous(q, links) - np.stack([tx, ty], -1)[:, None], axis=-1)
            assert err[valid].max() < FK_TOL


def test_planar3_double_root_reported_once():
    # exactly representable links so the wrist lands exactly on the boundary
    a = (0.5, 0.25, 0.125, 0.0625)
    x = np.array([a[3] + a[2] + a[0] + a[1], a[3] + a[2] + (a[0] - a[1])])
    y = np.zeros(2)
    q, valid = an.planar3_ik_given_phi(x, y, 0.0, a)
    np.testing.assert_array_equal(valid, [[True, False], [True, False]])
    assert np.abs(an.fk_planar3(q[:, 0], a) - np.stack([x, y], -1)).max() < FK_TOL


def test_planar3_broadcasting():
    rng = np.random.default_rng(27)
    x, y = random_targets(rng, 12, A_SEED)
    x, y = x.reshape(3, 4), y.reshape(3, 4)
    q, valid = an.planar3_ik_given_q2(x, y, 0.7)
    assert q.shape == (3, 4, 2, 3) and valid.shape == (3, 4, 2)
    q_phi, v_phi = an.planar3_ik_given_phi(x, y, np.linspace(-1, 1, 4))
    assert q_phi.shape == (3, 4, 2, 3) and v_phi.shape == (3, 4, 2)
    qf, vf = an.planar3_ik_given_q2(x.ravel(), y.ravel(), np.full(12, 0.7))
    np.testing.assert_array_equal(q.reshape(12, 2, 3), qf)
    np.testing.assert_array_equal(valid.reshape(12, 2), vf)


def test_wrap_angle():
    rng = np.random.default_rng(28)
    t = rng.uniform(-50, 50, 10000)
    w = an.wrap_angle(t)
    assert (w >= -np.pi).all() and (w < np.pi).all()
    np.testing.assert_allclose(np.cos(w), np.cos(t), atol=1e-13)
    np.testing.assert_allclose(np.sin(w), np.sin(t), atol=1e-13)

"""The low-rank secant curvature against dense matrices built in the test."""

import numpy as np
import pytest

from solver.curvature import LowRank, Store, dgw_update, shifted_solve, solve_damped


def dense(S: LowRank) -> np.ndarray:
    return S.Z @ S.K @ np.swapaxes(S.Z, -1, -2)


def random_low_rank(rng, F, n, r):
    Z = rng.normal(size=(F, n, r))
    K = rng.normal(size=(F, r, r))
    return LowRank(Z, K + np.swapaxes(K, -1, -2))


@pytest.mark.parametrize("n, k", [(12, 3), (12, 11), (5, 9), (30, 0)])
def test_shifted_solve_matches_the_dense_system(n, k):
    rng = np.random.default_rng(n + k)
    F = 4
    U, G = rng.normal(size=(F, n, k)), rng.normal(size=(F, k, k))
    d = rng.uniform(0.5, 2.0, F)
    rhs = rng.normal(size=(F, n))
    H = U @ G @ np.swapaxes(U, -1, -2) + d[:, None, None] * np.eye(n)
    expected = np.linalg.solve(H, rhs[..., None])[..., 0]
    np.testing.assert_allclose(shifted_solve(d, U, G, rhs), expected, rtol=1e-9, atol=1e-12)


def test_shifted_solve_stays_accurate_with_nearly_dependent_columns_and_a_large_core():
    # What long secant runs produce: update directions that repeat, 1 / (y.s) large, little damping.
    rng = np.random.default_rng(5)
    F, n, k = 50, 30, 13                              # k < n / 2: the QR path
    base = rng.normal(size=(F, n, 4))
    U = base @ rng.normal(size=(F, 4, k)) + 1e-9 * rng.normal(size=(F, n, k))
    G = rng.normal(size=(F, k, k)) * 1e7
    G = G + np.swapaxes(G, -1, -2)
    d = np.full(F, 3e-5)
    rhs = rng.normal(size=(F, n))
    H = U @ G @ np.swapaxes(U, -1, -2) + d[:, None, None] * np.eye(n)
    x = shifted_solve(d, U, G, rhs)
    expected = np.linalg.solve(H, rhs[..., None])[..., 0]
    residual = np.linalg.norm(np.einsum("fij,fj->fi", H, x) - rhs, axis=-1)
    reference = np.linalg.norm(np.einsum("fij,fj->fi", H, expected) - rhs, axis=-1)
    assert np.all(np.isfinite(x))
    assert np.all(residual <= 100 * reference + 1e-9 * np.linalg.norm(rhs, axis=-1))


@pytest.mark.parametrize("n, M, r", [(18, 3, 4), (40, 6, 10), (6, 3, 8)])
def test_damped_secant_system_matches_the_dense_one(n, M, r):
    rng = np.random.default_rng(n)
    F = 5
    A, b = rng.normal(size=(F, M, n)), rng.normal(size=(F, M))
    weight = rng.uniform(0.0, 2.0, (F, M))
    weight[0, 0] = 0.0
    cols = rng.uniform(0.0, 1.0, (F, n))
    cols[:, 0] = 0.0                                   # a frozen coordinate
    locked = np.where(rng.random((F, n)) < 0.2, rng.normal(size=(F, n)), 0.0)
    lam = rng.uniform(1e-6, 1.0, F)
    S = random_low_rank(rng, F, n, r)
    Sd = dense(S)
    AtW = np.swapaxes(A, -1, -2) * weight[:, None, :]
    H = cols[:, :, None] * (AtW @ A + Sd) * cols[:, None, :]
    scale = np.max(np.diagonal(H, axis1=-2, axis2=-1), axis=-1)
    H = H + (lam * scale)[:, None, None] * np.eye(n)
    rhs = cols * (np.einsum("fnm,fm->fn", AtW, b - np.einsum("fmn,fn->fm", A, locked)) - np.einsum("fnk,fk->fn", Sd, locked))
    expected = np.linalg.solve(H, rhs[..., None])[..., 0]
    np.testing.assert_allclose(solve_damped(A, b, weight, cols, S, lam, locked), expected, rtol=1e-8, atol=1e-10)


def test_dgw_update_matches_the_dense_formula_and_keeps_each_frames_own_terms():
    rng = np.random.default_rng(3)
    F, M, n = 6, 3, 10
    store = Store(F, n)
    for f, r in enumerate((0, 2, 4, 2, 0, 6)):
        store.put([f], LowRank(rng.normal(size=(1, n, r)), np.diag(rng.normal(size=r))[None]))
    S = store.get(np.arange(F))
    assert S.Z.shape[-1] == 6                          # the others padded to the widest frame
    s = rng.normal(size=(F, n))
    A_old, A_new = rng.normal(size=(F, M, n)), rng.normal(size=(F, M, n))
    r_old, r_new = rng.normal(size=(F, M)), rng.normal(size=(F, M))
    w_old, w_new = rng.uniform(0.1, 1.0, (F, M)), rng.uniform(0.1, 1.0, (F, M))
    s[1] *= 0.0                                        # a vanishing step leaves only the sizing
    updated = dgw_update(S, s, A_old, r_old, A_new, r_new, w_old, w_new)

    # The update written out densely (Dennis-Gay-Welsch with NL2SOL's sizing).
    Sd = dense(S)
    y = np.einsum("fmn,fm->fn", A_new, w_new * r_new) - np.einsum("fmn,fm->fn", A_old, w_old * r_old)
    y_sharp = np.einsum("fmn,fm->fn", A_new - A_old, w_new * r_new)
    for f in range(F):
        Ss = Sd[f] @ s[f]
        sSs = s[f] @ Ss
        tau = min(1.0, abs(s[f] @ y_sharp[f]) / abs(sSs)) if abs(sSs) > 1e-300 else 1.0
        expected = tau * Sd[f]
        ys = y[f] @ s[f]
        if ys > 1e-300:
            v = y_sharp[f] - tau * Ss
            expected = expected + (np.outer(v, y[f]) + np.outer(y[f], v)) / ys - (v @ s[f]) / ys**2 * np.outer(y[f], y[f])
        np.testing.assert_allclose(dense(updated)[f], expected, rtol=1e-9, atol=1e-9)
    # Stored and read back one frame at a time: the same S without the padding, in at most the
    # frame's own rank + 2 columns.
    store.put(np.arange(F), updated)
    for f, rank in enumerate((0, 2, 4, 2, 0, 6)):
        own = store.get([f])
        assert own.Z.shape[-1] <= rank + 2
        np.testing.assert_allclose(dense(own)[0], dense(updated)[f], rtol=1e-12, atol=1e-12)


def test_dgw_update_keeps_s_itself_once_the_terms_outnumber_the_coordinates():
    rng = np.random.default_rng(4)
    F, M, n = 3, 2, 5
    S = LowRank.zero(F, n)
    expected = np.zeros((F, n, n))
    for _ in range(6):                                 # 12 terms for 5 coordinates
        s = rng.normal(size=(F, n))
        A_old, A_new = rng.normal(size=(F, M, n)), rng.normal(size=(F, M, n))
        r_old, r_new, w = rng.normal(size=(F, M)), rng.normal(size=(F, M)), np.ones((F, M))
        S = dgw_update(S, s, A_old, r_old, A_new, r_new, w, w)
        expected = dense(dgw_update(LowRank(np.broadcast_to(np.eye(n), (F, n, n)).copy(), expected), s,
                                    A_old, r_old, A_new, r_new, w, w))
        assert S.Z.shape[-1] <= n + 2
    np.testing.assert_allclose(dense(S), expected, rtol=1e-10, atol=1e-10)


def test_shifted_solve_of_a_singular_system_is_its_least_squares_answer():
    """A secant term with a negative block can make d I + U G U^T exactly singular in a frame (a
    knee keyed straight made one in a one-frame solve): the stack gets the pseudo-inverse's
    answer, which is the exact one where the system is regular, and nothing raises."""
    rng = np.random.default_rng(3)
    for n in (3, 8):                           # the full system, and the one on the span of U
        U = np.zeros((2, n, 2))
        U[:, 0, 0] = U[:, 1, 1] = 1.0
        G = np.stack([np.eye(2), -np.eye(2)])  # frame 1: U G U^T = -diag(1, 1, 0, ...), H singular
        d = np.ones(2)
        rhs = rng.normal(size=(2, n))
        x = shifted_solve(d, U, G, rhs)
        H = d[:, None, None] * np.eye(n) + U @ G @ U.swapaxes(-1, -2)
        assert np.linalg.matrix_rank(H[1]) == n - 2
        np.testing.assert_allclose(x[0], np.linalg.solve(H[0], rhs[0]), rtol=1e-12)
        np.testing.assert_allclose(x[1], np.linalg.lstsq(H[1], rhs[1], rcond=None)[0], atol=1e-12)

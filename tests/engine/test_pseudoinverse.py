"""The damped pseudo-inverses (from the Gram matrix's eigenvectors) against the same formulas
written out one matrix at a time on numpy's full SVD."""

import numpy as np
import pytest

from solver import pseudoinverse
from solver.pseudoinverse import svd_by_gram


def matrices(rng, F, M, n, rank=None):
    """Random A (F, M, n), of the given rank when asked, with singular values 1e-3 to 10."""
    k = min(M, n) if rank is None else rank
    U = np.linalg.qr(rng.normal(size=(F, M, M)))[0][..., :k]
    V = np.linalg.qr(rng.normal(size=(F, n, n)))[0][..., :k]
    s = 10.0 ** rng.uniform(-3, 1, (F, k))
    return (U * s[:, None, :]) @ np.swapaxes(V, -1, -2)


def dls_reference(A, b, damping_max=0.5, epsilon=0.1):
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    k = np.linalg.matrix_rank(A)                       # the directions A has
    U, s, Vt = U[:, :k], s[:k], Vt[:k]
    lam2 = (1.0 - (s[-1] / epsilon) ** 2) * damping_max**2 if s[-1] < epsilon else 0.0
    return Vt.T @ (s / (s**2 + lam2) * (U.T @ b))


def sdls_reference(A, b, gamma_max=np.pi / 4, weight=None):
    """Buss and Kim's selectively damped step, direction by direction. With joint weights w in A's
    columns (the joints move by w * x), the bounds are on the joints' motion, as Blender's
    weighted SDLS (intern/itasc WSDLSSolver) takes them."""
    w = np.ones(A.shape[1]) if weight is None else weight
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    step = np.zeros(A.shape[1])
    for i in range(np.linalg.matrix_rank(A)):
        u, v = U[:, i], Vt[i]
        N = np.sum(np.abs(u))
        M = np.sum(np.abs(v) * np.sum(np.abs(A), axis=0)) / s[i]
        gamma = min(1.0, N / M) * gamma_max
        phi = (u @ b) / s[i] * v
        step += phi * min(1.0, gamma / np.max(np.abs(w * phi)))
    return step * min(1.0, gamma_max / np.max(np.abs(w * step)))


@pytest.mark.parametrize("M, n, rank", [(3, 18, None), (3, 18, 2), (6, 7, None), (6, 7, 5), (9, 4, None), (9, 4, 3)])
def test_svd_by_gram_rebuilds_a_and_matches_numpys_singular_values(M, n, rank):
    A = matrices(np.random.default_rng(M * n), 50, M, n, rank)
    U, s, Vt = svd_by_gram(A)
    np.testing.assert_allclose((U * s[:, None, :]) @ Vt, A, atol=1e-12)
    kept = min(M, n) if rank is None else rank
    # accurate to machine epsilon * s_max^2 / s: the price of the Gram matrix
    np.testing.assert_allclose(s[:, :kept], np.linalg.svd(A, compute_uv=False)[:, :kept], rtol=1e-6, atol=1e-10)
    assert np.all(U[:, :, kept:] == 0.0) and np.all(Vt[:, kept:] == 0.0)   # undetermined directions dropped


@pytest.mark.parametrize("method, reference", [("dls", dls_reference), ("sdls", sdls_reference)])
@pytest.mark.parametrize("M, n, rank", [(3, 18, None), (3, 18, 2), (6, 7, None), (6, 7, 5), (9, 4, 3)])
def test_damped_steps_match_the_formulas_on_a_full_svd(method, reference, M, n, rank):
    rng = np.random.default_rng(7 * M + n)
    A = matrices(rng, 40, M, n, rank)
    b = rng.normal(size=(40, M))
    x, _ = pseudoinverse.solve(A, b, method, rank=np.linalg.matrix_rank(A))
    expected = np.stack([reference(A[f], b[f]) for f in range(40)])
    np.testing.assert_allclose(x, expected, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("M, n, rank", [(3, 18, None), (6, 7, None), (6, 7, 5), (9, 4, 3)])
def test_weighted_sdls_bounds_the_joints_motion(M, n, rank):
    """Columns weighted down (an IK stretch's 0.01): each direction and the whole step are bounded
    on the joints' motion w * x, batched and one frame at a time alike, and a joint of small weight
    moves as far as its bound allows (it would move 1 / w less bounded on x)."""
    rng = np.random.default_rng(13 * M + n)
    weight = np.where(rng.uniform(size=(30, n)) < 0.3, 0.01, 1.0)
    A = matrices(rng, 30, M, n, rank) * weight[:, None, :]
    b = rng.normal(size=(30, M)) * 10.0 ** rng.uniform(-1, 2, (30, 1))
    x, _ = pseudoinverse.solve(A, b, "sdls", gamma_max=np.pi, weight=weight)
    expected = np.stack([sdls_reference(A[f], b[f], np.pi, weight[f]) for f in range(30)])
    # singular values down to 1e-5 of s_max 10 here: the Gram route's accuracy (eps s_max^2 / s)
    np.testing.assert_allclose(x, expected, rtol=1e-7, atol=1e-6 * np.abs(expected).max())
    assert np.abs(weight * x).max() <= np.pi * (1 + 1e-12)
    for f in range(30):
        x_one, _ = pseudoinverse.solve(A[f], b[f], "sdls", gamma_max=np.pi, weight=weight[f])
        np.testing.assert_allclose(x_one, x[f], rtol=1e-10, atol=1e-12 * np.abs(x[f]).max(initial=1.0))
    # A straight limb 5 cm short of its target: only the stretch (weight 0.01) reaches along it.
    # Bounded on the joints, it stretches the 5 cm in one step; bounded on x, by pi / 100 only.
    A, b, w = np.array([[0.0, 0.01]]), np.array([0.05]), np.array([1.0, 0.01])
    x_one, _ = pseudoinverse.solve(A, b, "sdls", gamma_max=np.pi, weight=w)
    np.testing.assert_allclose(w * x_one, [0.0, 0.05], atol=1e-15)
    np.testing.assert_allclose(w * sdls_reference(A, b, np.pi), [0.0, np.pi / 100], atol=1e-15)


@pytest.mark.parametrize("method", pseudoinverse.METHODS)
@pytest.mark.parametrize("M, n, rank", [(3, 18, None), (3, 18, 2), (6, 7, None), (6, 7, 5), (9, 4, None), (9, 4, 3)])
def test_one_frames_solve_is_the_batched_solve_of_that_frame(method, M, n, rank):
    """solve of one frame (2-D arrays, as animation mode's one frame solves it) against solve on a
    stack of frames, with the DLS damping turned on by small singular values and SDLS's clamps
    reached by large right-hand sides."""
    rng = np.random.default_rng(11 * M + n)
    A = matrices(rng, 30, M, n, rank)
    b = rng.normal(size=(30, M)) * 10.0 ** rng.uniform(-3, 2, (30, 1))
    ranks = np.full(30, min(M, n) if rank is None else rank)
    x, s_min = pseudoinverse.solve(A, b, method, epsilon=0.5, rank=ranks)
    for f in range(30):
        x_one, s_min_one = pseudoinverse.solve(A[f], b[f], method, epsilon=0.5, rank=ranks[f])
        assert x_one.shape == (n,) and np.shape(s_min_one) == ()
        np.testing.assert_allclose(x_one, x[f], rtol=1e-10, atol=1e-12 * np.abs(x[f]).max(initial=1.0))
        np.testing.assert_allclose(s_min_one, s_min[f], rtol=1e-12, equal_nan=True)

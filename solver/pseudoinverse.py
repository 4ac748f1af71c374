"""Ways to apply A# to a right-hand side, for a stack of frames or one frame alone: three from
one SVD A = U S V^T, and the gradient baseline.

The damped two take the SVD from the eigen-decomposition of the smaller Gram matrix (A A^T = U S^2
U^T, then V^T = S^-1 U^T A; or from A^T A the other way round), several times faster than an SVD
of many small matrices. Its singular values are accurate to about sqrt(machine epsilon) * s_max,
so directions below GRAM_RCOND * s_max are dropped there: they could move the outputs by no more
than that, and both damped methods shrink such directions to next to nothing anyway. The plain
pseudo-inverse, which inverts small singular values undamped, keeps the full SVD.

    pseudo-inverse   A# = V S^-1 U^T, directions with s_i <= rcond * s_max dropped
    damped (DLS)     A# = V diag(s_i / (s_i^2 + l^2)) U^T, where the damping l^2 grows from 0 to
                     damping_max^2 as the smallest singular value falls below epsilon:
                     l^2 = (1 - (s_min / epsilon)^2) damping_max^2   (0 when s_min >= epsilon)
    selective (SDLS) each singular direction i gets its own bound on the joint motion it may cause,
                     gamma_i = min(1, N_i / M_i) gamma_max, where N_i sums |u_i| over the output
                     rows and M_i = (1 / s_i) sum_j |v_ij| sum_rows |A_rj| estimates how far the
                     outputs would move; each direction's step is clamped to gamma_i, the sum to
                     gamma_max (Buss and Kim, 2005); each independent block of the system
                     (blocks.py) on its own. Where A's columns carry joint weights W (A = A' W,
                     the joints move by W x), the bounds are on the joints' motion W v_i c_i, as
                     Blender's weighted SDLS bounds them: a joint of small weight (IK stretch)
                     is not held to steps smaller by its weight.
    gradient         x = alpha A^T b, the steepest descent of |A x - b|^2 / 2 with the step that
                     minimises it along that direction, alpha = |A^T b|^2 / |A A^T b|^2 (the
                     lecture's gradient descent with the analytic Jacobian; the animation mode's
                     backtracking then only halves it). A baseline: no pseudo-inverse at all.

Each returns the step (F, n) and the smallest singular value (F,) for diagnostics (one frame
alone: (n,) and a scalar). The same lines serve both: a frame alone (live preview's) pays numpy's
cost per call, so they make no index array or mask that a single frame does not need.
"""

from __future__ import annotations

import numpy as np

METHODS = ("pinv", "dls", "sdls", "gradient")
GRAM_RCOND = 1e-7


def _clamp_max_abs(x: np.ndarray, bound, weight=None) -> np.ndarray:
    """Scale vectors (..., n) so that the largest absolute entry of weight * x is at most `bound`."""
    largest = np.abs(x if weight is None else weight * x).max(axis=-1)
    scale = np.where(largest > bound, bound / np.maximum(largest, 1e-300), 1.0)
    return x * scale[..., None]


def solve(A: np.ndarray, b: np.ndarray, method: str = "dls", rcond: float = 1e-10,
          damping_max: float = 0.5, epsilon: float = 0.1, gamma_max: float = np.pi / 4, rank=None,
          blocks=None, weight=None):
    """x ~ A# b for A (F, M, n) and b (F, M), or one frame's A (M, n) and b (M,) (animation mode's
    one frame, as live preview solves it). `rank` (F,) bounds how many singular values can be
    nonzero (rows of zero weight and frozen columns do not count): the smallest of those is the
    s_min that DLS damps on, so that a row left out is not taken for a singularity. `blocks`
    (blocks.Blocks, or None): SDLS solves each independent block on its own. `weight` (F, n), or
    (n,) for one frame: the joint weights A's columns carry (the joints move by weight * x),
    which SDLS bounds."""
    if method not in METHODS:
        raise ValueError(f"unknown solver {method!r}; choose one of {METHODS}")
    if 0 in A.shape[-2:]:  # nothing to move or nothing asked
        return np.zeros(A.shape[:-2] + A.shape[-1:]), np.zeros(A.shape[:-2])
    if method == "sdls" and blocks is not None:
        A_blocks, b_blocks = blocks.gather(A, b)
        x, s = _sdls(A_blocks, b_blocks, rcond, gamma_max, None if weight is None else blocks.columns_of(weight))
        return blocks.scatter(x), blocks.smallest(s)
    if method == "sdls":
        x, s = _sdls(A, b, rcond, gamma_max, weight)
        return x, _smallest(s, rank)
    if method == "gradient":
        g = _row_times(b, A)                                      # A^T b
        Ag = (A @ g[..., None])[..., 0]
        alpha = np.sum(g * g, axis=-1) / np.maximum(np.sum(Ag * Ag, axis=-1), 1e-300)
        return alpha[..., None] * g, np.full(A.shape[:-2], np.nan)
    if method == "pinv":
        U, s, Vt = np.linalg.svd(A, full_matrices=False)
    else:
        U, s, Vt = svd_by_gram(A)       # directions below GRAM_RCOND come as zero vectors: they add nothing
    s_min = _smallest(s, rank)
    if method == "pinv":
        inv = 1.0 / np.maximum(s, 1e-300)
    elif method == "dls":
        lam2 = (s_min < epsilon) * ((1.0 - (s_min / epsilon) ** 2) * damping_max**2)    # 0 (or -0) from epsilon on
        inv = s / np.maximum(s**2 + lam2[..., None], 1e-300)
    else:
        raise AssertionError(method)
    if method == "pinv" or rcond > GRAM_RCOND:
        keep = s > rcond * s[..., :1]
        if np.count_nonzero(keep) < keep.size:      # directions to drop (rare)
            inv = np.where(keep, inv, 0.0)
    return _row_times(inv * _row_times(b, U), Vt), s_min          # V S# U^T b, through b's singular basis


def _row_times(v: np.ndarray, M: np.ndarray) -> np.ndarray:
    """v^T M for every frame: v (F, m), M (F, m, n) -> (F, n) (or without F)."""
    return v @ M if v.ndim == 1 else (v[..., None, :] @ M)[..., 0, :]


def _smallest(s: np.ndarray, rank) -> np.ndarray:
    """s_min (F,) of singular values s (F, k) (or one frame's (k,)): the last, or the rank-th where
    `rank` (F,) is given."""
    if rank is None:
        return s[..., -1]
    if s.ndim == 1:
        return s[min(max(int(rank) - 1, 0), s.size - 1)]
    return s[np.arange(s.shape[0]), np.minimum(np.maximum(np.asarray(rank) - 1, 0), s.shape[-1] - 1)]


def _sdls(A: np.ndarray, b: np.ndarray, rcond: float, gamma_max: float, weight=None):
    """SDLS's step (..., n) of each system A (..., M, n), b (..., M), and its singular values
    (..., k); `weight` (..., n): the joint weights of A's columns, whose motion weight * x is
    bounded."""
    U, s, Vt = svd_by_gram(A)
    rcond = max(rcond, GRAM_RCOND)
    alpha = _row_times(b, U)                                      # b in the singular basis (F, k)
    # Direction i's step is c_i v_i, c_i = alpha_i / s_i; its largest entry is |c_i| max |v_i|.
    abs_Vt = np.abs(Vt)                                           # (F, k, n)
    column_size = np.add.reduce(np.abs(A), axis=-2)               # (F, n): sum_rows |A_rj|
    N = np.add.reduce(np.abs(U), axis=-2)                         # (F, k)
    keep = s > rcond * s[..., :1]
    s_safe = np.where(keep, s, 1.0)
    M = (abs_Vt @ column_size[..., None])[..., 0] / s_safe
    gamma = np.minimum(1.0, N / np.maximum(M, 1e-300)) * gamma_max
    c = np.where(keep, alpha / s_safe, 0.0)
    moved = abs_Vt if weight is None else abs_Vt * weight[..., None, :]   # the joints' motion per unit c_i
    largest = np.abs(c) * np.maximum.reduce(moved, axis=-1)      # (F, k): each direction clamped to gamma_i
    c *= np.minimum(1.0, gamma / np.maximum(largest, 1e-300))    # = 1 exactly where largest <= gamma
    return _clamp_max_abs(_row_times(c, Vt), gamma_max, weight), s


def svd_by_gram(A: np.ndarray):
    """U (F, M, k), s (F, k) descending and V^T (F, k, n) of A (F, M, n), k = min(M, n), from the
    eigenvectors of the smaller Gram matrix; the singular vectors of directions with s below
    GRAM_RCOND * s_max are returned as zeros (they are not determined to any accuracy)."""
    wide = A.shape[-2] <= A.shape[-1]
    B = A if wide else A.swapaxes(-1, -2)
    w, X = np.linalg.eigh(B @ B.swapaxes(-1, -2))
    s = np.sqrt(np.maximum(w[..., ::-1], 0.0))
    X = X[..., ::-1]
    kept = s > GRAM_RCOND * s[..., :1]
    if np.count_nonzero(kept) == kept.size:    # nothing to drop (the usual case): the masks would change nothing
        Y = X.swapaxes(-1, -2) @ B * (1.0 / s)[..., None]
    else:
        Y = X.swapaxes(-1, -2) @ B * np.where(kept, 1.0 / np.where(kept, s, 1.0), 0.0)[..., None]
        X = X * kept[..., None, :]
    return (X, s, Y) if wide else (Y.swapaxes(-1, -2), s, X.swapaxes(-1, -2))

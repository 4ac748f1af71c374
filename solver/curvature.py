"""The curvature estimate S of animation mode's secant steps, kept as a low-rank product.

Every structured secant update (Dennis, Gay and Welsch) adds a symmetric rank-2 term to S, so a
frame that has taken k secant steps has

    S = Z K Z^T,   Z (n, 2k),   K (2k, 2k) block diagonal with 2x2 blocks

until 2k would exceed n, when S itself is kept (Z = I, K = S) and the updates go on from there.
The damped system of a secant step, (C (A^T W A + S) C + d I) x = rhs with C the diagonal
column weights, is d I + U G U^T with U = C [A^T W^1/2, Z] (n, M + 2k) and G = diag(I, K). While
M + 2k < n / 2 it is solved on the span of U, an (M + 2k)-square system (see `shifted_solve`),
and otherwise densely: long chains (n = 300 coordinates) no longer pay for n x n solves, and
short ones (a 7-joint arm) do not pay for the QR factorisation where it saves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class LowRank:
    """S = Z K Z^T for a batch of frames: Z (F, n, r), K (F, r, r)."""

    Z: np.ndarray
    K: np.ndarray

    @staticmethod
    def zero(F: int, n: int) -> "LowRank":
        return LowRank(np.zeros((F, n, 0)), np.zeros((F, 0, 0)))

    def times(self, x: np.ndarray) -> np.ndarray:
        """S x for x (F, n)."""
        return np.einsum("fnr,fr->fn", self.Z, np.einsum("frs,fs->fr", self.K, np.einsum("fnr,fn->fr", self.Z, x)))


class Store:
    """The curvature estimate of every frame of a solve, one batch padded to a common number of
    columns (a frame with fewer terms has zero columns: they add nothing to Z K Z^T)."""

    def __init__(self, F: int, n: int):
        self.Z, self.K = np.zeros((F, n, 0)), np.zeros((F, 0, 0))

    def reset(self, frames) -> None:
        """S = 0 for these frames."""
        self.Z[frames], self.K[frames] = 0.0, 0.0

    def get(self, frames) -> LowRank:
        """The frames' S, without the columns that are zero in all of them."""
        Z, K = self.Z[frames], self.K[frames]
        used = np.any(Z != 0.0, axis=(0, 1))
        if used.all():
            return LowRank(Z, K)
        return LowRank(Z[..., used], K[:, used][..., used])

    def put(self, frames, S: LowRank) -> None:
        """Store S for these frames, padding it or the others in front to a common width."""
        width, r = self.Z.shape[-1], S.Z.shape[-1]
        if r > width:
            self.Z, self.K = _pad_front(self.Z, self.K, r)
        self.Z[frames], self.K[frames] = _pad_front(S.Z, S.K, max(r, width))


def _pad_front(Z, K, width: int):
    """Z (F, n, r) and K (F, r, r) with width - r zero columns (and rows of K) in front."""
    r = Z.shape[-1]
    if r == width:
        return Z, K
    Zp, Kp = np.zeros(Z.shape[:-1] + (width,)), np.zeros(K.shape[:-2] + (width, width))
    Zp[..., width - r:], Kp[..., width - r:, width - r:] = Z, K
    return Zp, Kp


def solve_damped(A, b, weight, cols, S: LowRank, lam, locked_step):
    """x with (C (A^T W A + S) C + lam s I) x = C (A^T W (b - A dl) - S dl) for every frame, s the
    largest diagonal entry of C (A^T W A + S) C (1 where that is 0) and dl the step of the
    coordinates already locked on a limit (None: none are)."""
    F, M, n = A.shape
    r = S.Z.shape[-1]
    sqrt_w = np.sqrt(weight)
    AtW = (A * sqrt_w[..., None]).swapaxes(-1, -2)
    if locked_step is not None:
        b = b - np.einsum("fmn,fn->fm", A, locked_step)
    gradient = np.einsum("fmn,fm->fn", A, weight * b)
    if r == 0:       # no curvature (plain Levenberg-Marquardt): G = I, and products with it are exact
        U, G, rhs = cols[:, :, None] * AtW, None, cols * gradient
    else:
        U = cols[:, :, None] * np.concatenate([AtW, S.Z], axis=-1)
        G = np.zeros((F, M + r, M + r))
        G[:, :M, :M] = np.eye(M)
        G[:, M:, M:] = S.K
        rhs = cols * (gradient if locked_step is None else gradient - S.times(locked_step))
    scale = (((U if G is None else U @ G) * U).sum(axis=-1)).max(axis=-1, initial=0.0)   # the largest diagonal
    d = lam * np.where(scale > 0, scale, 1.0)
    return shifted_solve(d, U, G, rhs)


def secant_solver(S: LowRank, lam):
    """The damped secant system as a pseudo-inverse solver for update.weighted_step, with S (F, ...)
    and lam (F,) of the frames it steps."""
    def solve(A, b, weight, cols, locked_step, frames):
        S_part = LowRank(S.Z[frames], S.K[frames])
        return solve_damped(A, b, weight, cols, S_part, lam[frames], locked_step), np.nan    # no s_min here
    return solve


def shifted_solve(d, U, G, rhs):
    """x with (d I + U G U^T) x = rhs, for d (F,), U (F, n, k), G (F, k, k) symmetric (None: I),
    rhs (F, n). With U = Q R (Q orthonormal columns) the system is d I + Q M Q^T, M = R G R^T, solved as
    x = (rhs - Q c) / d + Q (d I + M)^-1 c with c = Q^T rhs: the k-square system has the
    eigenvalues of the full one on the span of U, so it is no worse conditioned than it."""
    n, k = U.shape[-2:]
    if 2 * k >= n:         # no smaller system to gain: solve the full one
        H = (U if G is None else U @ G) @ U.swapaxes(-1, -2)
        H.reshape(len(H), n * n)[:, ::n + 1] += d[:, None]       # the diagonals, as a view of H
        return _solve(H, rhs)
    Q, R = np.linalg.qr(U)
    M = (R if G is None else R @ G) @ np.swapaxes(R, -1, -2)
    c = np.einsum("fnk,fn->fk", Q, rhs)
    t = _solve(d[:, None, None] * np.eye(k) + M, c)
    return (rhs - np.einsum("fnk,fk->fn", Q, c)) / d[:, None] + np.einsum("fnk,fk->fn", Q, t)


def _solve(H, b):
    """x with H x = b for stacks H (F, n, n), b (F, n); where a secant term G with negative entries
    makes some H singular, the minimum-norm least-squares x (pseudo-inverse) for the stack."""
    try:
        return np.linalg.solve(H, b[..., None])[..., 0]
    except np.linalg.LinAlgError:
        return (np.linalg.pinv(H) @ b[..., None])[..., 0]


def dgw_update(S: LowRank, s, A_old, r_old, A_new, r_new, weight_old, weight_new) -> LowRank:
    """S after the Dennis-Gay-Welsch update along steps s (F, n), sized down first as in NL2SOL:
    S+ = tau S + (v y^T + y v^T) / (y.s) - (v.s / (y.s)^2) y y^T with y the change of the
    gradient A^T W r, y# = (A_new - A_old)^T W r_new and v = y# - tau S s. The new rank-2 term is
    appended as two columns [v, y] of Z with the 2x2 block [[0, 1/ys], [1/ys, -v.s / ys^2]]."""
    g_old = np.einsum("fmn,fm->fn", A_old, weight_old * r_old)
    g_new = np.einsum("fmn,fm->fn", A_new, weight_new * r_new)
    y = g_new - g_old
    y_sharp = np.einsum("fmn,fm->fn", A_new - A_old, weight_new * r_new)
    ys = np.sum(y * s, axis=-1)
    Ss = S.times(s)
    sSs = np.sum(s * Ss, axis=-1)
    tau = np.where(np.abs(sSs) > 1e-300,
                   np.minimum(1.0, np.abs(np.sum(s * y_sharp, axis=-1)) / np.maximum(np.abs(sSs), 1e-300)), 1.0)
    v = y_sharp - tau[:, None] * Ss
    ok = ys > 1e-300
    ys = np.where(ok, ys, 1.0)
    block = np.zeros((len(ys), 2, 2))
    block[:, 0, 1] = block[:, 1, 0] = np.where(ok, 1.0 / ys, 0.0)
    block[:, 1, 1] = np.where(ok, -np.sum(v * s, axis=-1) / ys**2, 0.0)
    F, r = S.K.shape[:2]
    K = np.zeros((F, r + 2, r + 2))
    K[:, :r, :r] = tau[:, None, None] * S.K
    K[:, r:, r:] = block
    Z = np.concatenate([S.Z, v[..., None], y[..., None]], axis=-1)
    n = Z.shape[1]
    if r + 2 > n:            # more terms than coordinates: S itself (Z = I) is the smaller form
        return LowRank(np.broadcast_to(np.eye(n), (F, n, n)).copy(), Z @ K @ np.swapaxes(Z, -1, -2))
    return LowRank(Z, K)

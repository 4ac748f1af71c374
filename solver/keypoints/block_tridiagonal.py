"""Solve a symmetric positive definite block-tridiagonal system by block cyclic reduction.

The system has N diagonal blocks D_i (m x m) and below them L_i = A[i+1, i] (above: L_i^T):

    L_{i-1} x_{i-1} + D_i x_i + L_i^T x_{i+1} = b_i.

Cyclic reduction eliminates the odd blocks, x_o = D_o^-1 (b_o - L_{o-1} x_{o-1} - L_o^T x_{o+1}),
which leaves a block-tridiagonal system of the same kind on the even blocks,

    D'_e = D_e - L_{e-1} D_{e-1}^-1 L_{e-1}^T - L_e^T D_{e+1}^-1 L_e,
    L'_e = -L_{e+1} D_{e+1}^-1 L_e                  (between blocks e and e + 2),
    b'_e = b_e - L_{e-1} D_{e-1}^-1 b_{e-1} - L_e^T D_{e+1}^-1 b_{e+1},

half the size; after ceil(log2 N) levels one block is left. Every level is one batched solve over
its odd blocks, so the work is O(N m^3) in O(log N) numpy calls, with no loop over blocks. It is
Gaussian elimination in odd-even order on an SPD matrix, so it needs no pivoting.
"""

from __future__ import annotations

import numpy as np


def solve_block_tridiagonal(D: np.ndarray, L: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x (N, m) solving the system above for D (N, m, m), L (N - 1, m, m), b (N, m)."""
    N = D.shape[0]
    if N == 1:
        return np.linalg.solve(D[0], b[0])[None]
    odd = np.arange(1, N, 2)
    has_right = odd + 1 < N                                   # odd blocks with an even block after them
    Lt = np.swapaxes(L, 1, 2)
    # D_o^-1 times [L_{o-1} | L_o^T | b_o] in one batched solve (L_o^T is 0 past the end)
    right = np.zeros((odd.size,) + L.shape[1:])
    right[has_right] = Lt[odd[has_right]]
    stacked = np.concatenate([L[odd - 1], right, b[odd][..., None]], axis=2)
    solved = np.linalg.solve(D[odd], stacked)
    m = D.shape[1]
    inv_left, inv_right, inv_b = solved[..., :m], solved[..., m:2 * m], solved[..., 2 * m]

    even = np.arange(0, N, 2)
    D_even, b_even = D[even].copy(), b[even].copy()
    # the odd block before each even one (o = e - 1): - L_o D_o^-1 L_o^T, - L_o D_o^-1 b_o
    before = even[1:] // 2 - 1                               # index into odd of o = e - 1
    D_even[1:] -= L[odd[before]] @ inv_right[before]
    b_even[1:] -= (L[odd[before]] @ inv_b[before][..., None])[..., 0]
    # the odd block after each even one (o = e + 1): - L_{o-1}^T D_o^-1 L_{o-1}, - L_{o-1}^T D_o^-1 b_o
    after = np.arange(odd.size)                               # o = e + 1 for e = even[:odd.size]
    D_even[:odd.size] -= Lt[odd - 1] @ inv_left[after]
    b_even[:odd.size] -= (Lt[odd - 1] @ inv_b[after][..., None])[..., 0]
    # new coupling between e and e + 2 through o = e + 1 (where e + 2 exists)
    L_even = -(L[odd[has_right]] @ inv_left[has_right])

    x = np.empty_like(b)
    x[even] = solve_block_tridiagonal(D_even, L_even, b_even)
    x_right = np.zeros((odd.size, m))
    x_right[has_right] = x[odd[has_right] + 1]
    x[odd] = inv_b - (inv_left @ x[odd - 1][..., None])[..., 0] - (inv_right @ x_right[..., None])[..., 0]
    return x

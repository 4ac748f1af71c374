"""The smoothness term across frames: a penalty on each coordinate's acceleration,

    S(Q) = sum_c Lambda_c sum_f (q_{f-1,c} - 2 q_{f,c} + q_{f+1,c})^2 = sum_c Lambda_c |D q_c|^2,

D the (F - 2) x F second-difference operator. Its gradient is 2 (D^T D Q) Lambda and its Hessian
2 D^T D (x) Lambda: banded, each frame tied to the two before and the two after it, with
diagonals d0, d1, d2 of D^T D (rows 1 -4 6 -4 1 inside, fewer terms at the ends).

The weight. On one coordinate seen directly with data weight h per frame, minimising
h |q - y|^2 + Lambda |D q|^2 is a linear filter with gain 1 / (1 + (Lambda / h) (2 - 2 cos w)^2)
at w radians per frame (Whittaker-Henderson smoothing): half at the cutoff w_c = 2 pi f_c / rate
when Lambda / h = lam = 1 / (2 - 2 cos w_c)^2. So with Lambda_c = lam h_c, h_c the coordinate's
typical data stiffness (the median over frames of the diagonal of sum_k w_k J_k^T J_k), every
coordinate is smoothed to about the same cutoff in hertz, at any frame rate, in any units.
"""

from __future__ import annotations

import numpy as np

_D = np.array([1.0, -2.0, 1.0])


def cutoff_weight(cutoff: float, rate: float) -> float:
    """lam of the module docstring: the filter's gain is 1/2 at `cutoff` Hz for frames at `rate`."""
    if not (np.isfinite(cutoff) and 0 < cutoff < rate / 2):
        raise ValueError(f"the smoothing cutoff {cutoff} Hz must lie between 0 and half the frame rate ({rate / 2} Hz)")
    w = 2.0 * np.pi * cutoff / rate
    return 1.0 / (2.0 - 2.0 * np.cos(w)) ** 2


def second_difference(Q: np.ndarray) -> np.ndarray:
    """D Q (F - 2, n) for Q (F, n)."""
    return Q[:-2] - 2.0 * Q[1:-1] + Q[2:]


def second_difference_normal(Q: np.ndarray) -> np.ndarray:
    """D^T D Q (F, n)."""
    a = second_difference(Q)
    out = np.zeros_like(Q)
    for shift, c in enumerate(_D):
        out[shift:shift + a.shape[0]] += c * a
    return out


def normal_bands(F: int):
    """The diagonals of D^T D: d0 (F,), d1 (F - 1,) (entry f: between f and f + 1), d2 (F - 2,)."""
    d0, d1, d2 = np.zeros(F), np.zeros(max(F - 1, 0)), np.zeros(max(F - 2, 0))
    rows = np.arange(max(F - 2, 0))
    for a in range(3):
        d0[rows + a] += _D[a] ** 2
    for a in range(2):
        d1[rows + a] += _D[a] * _D[a + 1]
    d2[rows] += _D[0] * _D[2]
    return d0, d1, d2


def cost(Q: np.ndarray, Lambda: np.ndarray) -> float:
    """S(Q) for per-coordinate weights Lambda (n,)."""
    a = second_difference(Q)
    return float(np.sum(Lambda * a * a))

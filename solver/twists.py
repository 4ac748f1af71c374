"""Twists: a frame's velocity as (linear velocity of its origin; angular velocity), world axes.

Moving a twist's reference point by r (the velocity of a point rigidly attached at offset r) is

    S(r) = [[I, -[r]x], [0, I]],     S(r) [v; w] = [v + w x r; w].
"""

from __future__ import annotations

import numpy as np

from .rotations import skew


def shift_matrix(r: np.ndarray) -> np.ndarray:
    """S(r) (..., 6, 6) for offsets r (..., 3)."""
    S = np.zeros(r.shape[:-1] + (6, 6))
    _diagonal6(S)[...] = 1.0
    S[..., :3, 3:] = -skew(r)
    return S


def _diagonal6(M: np.ndarray) -> np.ndarray:
    """The diagonals (..., 6) of contiguous matrices M (..., 6, 6), as a writable view."""
    return M.reshape(M.shape[:-2] + (36,))[..., ::7]


def shift_twist(r: np.ndarray, J: np.ndarray) -> np.ndarray:
    """S(r) J for twist Jacobians J (..., 6, k), without forming S."""
    lever = skew(r) @ J[..., 3:, :]
    out = J.copy() if J.shape[:-2] == lever.shape[:-2] else np.broadcast_to(J, lever.shape[:-2] + J.shape[-2:]).copy()
    out[..., :3, :] -= lever
    return out

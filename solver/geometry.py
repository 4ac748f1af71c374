"""Small batched geometry helpers shared by the engine's applications: angle wrapping, unit
vectors, translation frames, and the rotation of a weighted rigid fit. Every function works on any leading shape; vectors lie along the
last axis.
"""

from __future__ import annotations

import numpy as np


def wrap_angle(angle):
    """Angles wrapped to ``[-pi, pi)``: ``angle - 2 pi floor((angle + pi) / (2 pi))``."""
    angle = np.asarray(angle, dtype=float)
    return np.mod(angle + np.pi, 2.0 * np.pi) - np.pi


def wrap_angle_nearest(angle):
    """Angles minus their nearest multiple of 2 pi: ``angle - 2 pi round(angle / (2 pi))``, in
    ``[-pi, pi]``.  As a map it differs from :func:`wrap_angle` only at odd multiples of pi, where
    numpy's round goes to the even multiple (pi stays pi, 3 pi becomes -pi); in floating point the
    two also round differently in the last bits.  Choosing between two equally near angles (the
    fly's closed form) relies on this one.
    """
    angle = np.asarray(angle, dtype=float)
    return angle - 2.0 * np.pi * np.round(angle / (2.0 * np.pi))


def dot(a, b):
    """``a . b`` along the last axis."""
    return np.sum(a * b, axis=-1)


def unit(v):
    """``(v / |v|, |v|)`` along the last axis; rows with ``|v| = 0`` stay zero."""
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0.0, n, 1.0), n[..., 0]


def normalize(v, fallback):
    """``v / |v|`` along the last axis; rows with ``|v| = 0`` take ``fallback``."""
    u, n = unit(v)
    return np.where((n > 0.0)[..., None], u, fallback)


def perpendicular_unit(u):
    """A unit vector perpendicular to unit ``u``, chosen deterministically.

    Take the world axis ``e_k`` with the smallest ``|u_k|`` (ties go to the lowest index,
    order x, y, z) and return the normalised ``e_k - (e_k . u) u``.  Because
    ``|u_k| <= 1/sqrt(3)``, its norm is at least ``sqrt(2/3)``: never degenerate.
    """
    k = np.argmin(np.abs(u), axis=-1)
    e = np.zeros_like(u)
    np.put_along_axis(e, k[..., None], 1.0, axis=-1)
    w = e - np.sum(e * u, axis=-1, keepdims=True) * u
    return w / np.linalg.norm(w, axis=-1, keepdims=True)


def translations(points) -> np.ndarray:
    """Rigid transforms (..., 4, 4) without rotation that carry the origin to `points` (..., 3)."""
    points = np.asarray(points, dtype=float)
    T = np.broadcast_to(np.eye(4), points.shape[:-1] + (4, 4)).copy()
    T[..., :3, 3] = points
    return T


def points_on(frames, local) -> np.ndarray:
    """Points (..., k, 3) at `local` (k, 3) in frames (..., k, 4, 4): R p + t per frame."""
    return np.einsum("...kij,kj->...ki", frames[..., :3, :3], local) + frames[..., :3, 3]


def kabsch(C):
    """The rotation R (F, 3, 3) maximising tr(R^T C) for 3 x 3 covariances C (F, 3, 3): with
    C = U S V^T, R = U E V^T, E = diag(1, 1, det(U V^T)) (never a reflection; a det of 0 counts
    as 1). For points a_k, b_k with weights w_k and C = sum_k w_k (a_k - a_bar)(b_k - b_bar)^T,
    R b + t fits b onto a best (Kabsch); also S (F, 3) and E's diagonal (F, 3), for Umeyama's
    scale tr(S E) / sum_k w_k |b_k - b_bar|^2."""
    U, S, Vt = np.linalg.svd(C)
    E = np.ones(S.shape)
    E[:, 2] = np.sign(np.linalg.det(U @ Vt))
    E[:, 2] = np.where(E[:, 2] == 0, 1.0, E[:, 2])
    return (U * E[:, None, :]) @ Vt, S, E

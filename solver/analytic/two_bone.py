"""Exact two-bone IK in 3-D with a pole that chooses the bend plane and side."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..geometry import normalize, perpendicular_unit
from .triangle import REACH_RTOL, four_area, reach_mask


class TwoBoneIK(NamedTuple):
    """Result of :func:`two_bone_ik` (leading shape ``S`` = broadcast of the inputs).

    elbow      (S, 3)    joint between the bones
    end        (S, 3)    where the second bone ends (= target when reachable)
    dir1, dir2 (S, 3)    unit directions of bone 1 (root->elbow) and bone 2 (elbow->end)
    rot1, rot2 (S, 3, 3) world rotation of each bone, Blender convention: the columns are
                         the bone's X, Y, Z axes, Y along the bone, X the bend axis
                         ``n`` (the same for both bones), Z = X x Y (lies in the bend plane)
    bend_axis  (S, 3)    unit normal ``n = u x w`` of the bend plane
    reachable  (S,)      bool, see :func:`two_bone_ik`
    """

    elbow: np.ndarray
    end: np.ndarray
    dir1: np.ndarray
    dir2: np.ndarray
    rot1: np.ndarray
    rot2: np.ndarray
    bend_axis: np.ndarray
    reachable: np.ndarray


def two_bone_ik(root, l1, l2, target, pole, *, pole_is_point=True, pole_eps=1e-9,
                rtol=REACH_RTOL):
    """Exact two-bone IK in 3-D with a pole that chooses the bend plane and side.

    Parameters
    ----------
    root, target : (..., 3)   chain root and desired end position.
    l1, l2 : (...)            bone lengths (scalars or arrays broadcasting to ``...``).
    pole : (..., 3)           pole *point* (``pole_is_point=True``, Blender's pole target)
                              or pole *direction* (``pole_is_point=False``).
    pole_eps : float          relative collinearity threshold, see below.
    rtol : float              boundary slack, see :data:`REACH_RTOL`.

    Math
    ----
    With ``d = target - root``, ``D = |d|`` and ``u = d / D``, the pole vector
    ``p = pole - root`` (point) or ``p = pole`` (direction) is made perpendicular to the
    root->target line, ``w = (p - (p.u) u) / |p - (p.u) u|``.  The elbow lies in the
    plane spanned by ``u, w`` on the pole side (``(elbow - root).w >= 0``):

        elbow = root + l1 (cos(alpha) u + sin(alpha) w),
        alpha = atan2(4A, l1^2 + D^2 - l2^2)          (law of cosines, solver.analytic)

    and the second bone runs from the elbow to the target: ``dir2 = (target - elbow) / l2``
    in exact arithmetic; it is computed as the in-plane unit vector
    ``(D - l1 cos(alpha)) u - l1 sin(alpha) w`` normalised, so ``end = elbow + l2 dir2``.
    Among all elbow positions (a circle around the line ``u``) this one maximises
    ``(elbow - root) . p``.

    Collinear pole: when ``|p - (p.u) u| <= pole_eps |p|`` (pole on the root->target
    line, or a zero pole) the bend side is undefined; ``w`` is then taken
    deterministically as the world axis least aligned with ``u`` (smallest ``|u_k|``,
    ties to x before y before z), with its ``u`` component removed and normalised.

    Unreachable targets (``reachable`` False) get the closest-approach chain along the
    root->target line: fully extended toward the target when ``D > l1 + l2``; folded
    when ``D < |l1 - l2|`` (bone 1 toward the target and bone 2 back toward it if
    ``l1 > l2``, bone 1 away from it and bone 2 back through it if ``l2 > l1``).  The
    distance ``|end - target|`` is then ``D - (l1 + l2)`` or ``|l1 - l2| - D``.
    Degenerate inputs are unreachable too: ``l1 <= 0``, ``l2 <= 0`` or the target at the
    root (``D <= rtol (l1 + l2)``; when the target is exactly at the root ``u`` is taken
    from the pole, or is +Y when the pole is zero too).  No output is ever NaN for finite
    inputs.

    Returns
    -------
    TwoBoneIK (named tuple; see its docstring for shapes).
    """
    root = np.asarray(root, dtype=float)
    target = np.asarray(target, dtype=float)
    pole = np.asarray(pole, dtype=float)
    l1 = np.asarray(l1, dtype=float)
    l2 = np.asarray(l2, dtype=float)
    lead = np.broadcast_shapes(root.shape[:-1], target.shape[:-1], pole.shape[:-1],
                               l1.shape, l2.shape)
    root = np.broadcast_to(root, lead + (3,))
    target = np.broadcast_to(target, lead + (3,))
    pole = np.broadcast_to(pole, lead + (3,))
    l1 = np.broadcast_to(l1, lead)
    l2 = np.broadcast_to(l2, lead)

    d = target - root
    dist = np.linalg.norm(d, axis=-1)
    p = pole - root if pole_is_point else pole

    # Direction to the target; at the root fall back to the pole, then to +Y.
    plus_y = np.broadcast_to(np.array([0.0, 1.0, 0.0]), lead + (3,))
    u = normalize(d, normalize(p, plus_y))

    # Bend side: pole component perpendicular to u, or the deterministic fallback.
    w_raw = p - np.sum(p * u, axis=-1, keepdims=True) * u
    w_norm = np.linalg.norm(w_raw, axis=-1)
    p_norm = np.linalg.norm(p, axis=-1)
    use_pole = (p_norm > 0.0) & (w_norm > pole_eps * p_norm)
    w = np.where(use_pole[..., None],
                 w_raw / np.where(use_pole, w_norm, 1.0)[..., None],
                 perpendicular_unit(u))
    # Re-orthogonalise once (w came from a difference; keeps |u.w| at rounding level).
    w = w - np.sum(w * u, axis=-1, keepdims=True) * u
    w = w / np.linalg.norm(w, axis=-1, keepdims=True)
    n = np.cross(u, w)

    four_a = four_area(l1, l2, dist)
    alpha = np.arctan2(four_a, l1 * l1 + dist * dist - l2 * l2)
    ca, sa = np.cos(alpha), np.sin(alpha)
    dir1 = ca[..., None] * u + sa[..., None] * w
    elbow = root + l1[..., None] * dir1

    # Bone 2 in-plane components (u, w): (D - l1 cos a, -l1 sin a), normalised.
    b_u = dist - l1 * ca
    b_w = -l1 * sa
    b_n = np.hypot(b_u, b_w)
    ok = b_n > 0.0
    b_u = np.where(ok, b_u / np.where(ok, b_n, 1.0), 1.0)
    b_w = np.where(ok, b_w / np.where(ok, b_n, 1.0), 0.0)
    dir2 = b_u[..., None] * u + b_w[..., None] * w
    end = elbow + l2[..., None] * dir2

    def frame(y):
        return np.stack([n, y, np.cross(n, y)], axis=-1)

    reachable = reach_mask(l1, l2, dist, rtol)
    return TwoBoneIK(elbow, end, dir1, dir2, frame(dir1), frame(dir2), n, reachable)

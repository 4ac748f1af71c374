"""Closed-form inverse kinematics: two-bone chains and the 3-link planar arm.

Everything here is batched: positions carry a leading frame axis ``(..., 3)`` or
``(..., 2)`` (any number of leading axes, broadcast against each other), scalars such
as bone lengths broadcast against that leading shape.  There are no Python loops over
frames.  Only numpy is used.

Conventions
-----------
* Angles are radians.  Joint angles that this module returns are wrapped to
  ``[-pi, pi)``.
* "Reachable" means the exact equations have a solution that is isolated (finitely
  many solutions).  For an unreachable target no output is ever NaN: the functions
  return the *closest-approach* configuration (the one that minimises the distance from
  the chain's end to the target) and flag it in ``reachable`` / ``valid``.
* Degenerate inputs (a zero bone length, the target exactly at the root of a chain
  with equal bones, a virtual link of zero length) have either no solution or a
  continuum of them; they are reported as unreachable, with finite outputs.

The triangle at the heart of every two-link problem
----------------------------------------------------
A chain of two links of lengths ``l1``, ``l2`` whose end must sit at distance ``D``
from its root forms a triangle with sides ``l1, l2, D``.  Writing ``4A`` for four times
its area (Heron), the angle ``alpha`` at the root between the root->target line and
the first link, and the relative angle ``psi`` between the two links, satisfy

    2 l1 D  cos(alpha) = l1^2 + D^2 - l2^2,      2 l1 D  sin(alpha) = 4A
    2 l1 l2 cos(psi)   = D^2 - l1^2 - l2^2,      2 l1 l2 sin(psi)   = 4A

so ``alpha = atan2(4A, l1^2 + D^2 - l2^2)`` and ``psi = atan2(4A, D^2 - l1^2 - l2^2)``
without any division.  ``4A`` is evaluated with Kahan's ordering of Heron's formula,
``4A = sqrt((a+(b+c)) (c-(a-b)) (c+(a-b)) (a+(b-c)))`` for ``a >= b >= c``, which stays
accurate for needle-like triangles (target near the edge of the workspace).  When the
triangle inequality fails the product is negative; it is clamped to zero, which turns
the same formulas into the closest-approach configuration: fully extended when
``D > l1 + l2`` and folded when ``D < |l1 - l2|``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "PLANAR3_DEFAULT_LINKS",
    "TwoBoneIK",
    "wrap_angle",
    "two_bone_ik",
    "two_link_planar",
    "fk_planar3",
    "planar3_ik_given_phi",
    "planar3_ik_given_q2",
]

#: Link parameters ``(a1, a2, a3, a4)`` of the 3-link planar arm in seed 003.
PLANAR3_DEFAULT_LINKS = (0.2, 0.2, 0.25, 0.1415)

#: Relative slack on the workspace boundary: a target whose distance exceeds the reach
#: ``l1 + l2`` (or falls short of ``|l1 - l2|``) by at most ``REACH_RTOL * (l1 + l2)`` is
#: still called reachable; the chain then ends within that distance of the target.
REACH_RTOL = 1e-12


# --------------------------------------------------------------------------- helpers


def wrap_angle(angle):
    """Wrap angles to ``[-pi, pi)``: ``angle - 2 pi floor((angle + pi) / (2 pi))``."""
    angle = np.asarray(angle, dtype=float)
    return np.mod(angle + np.pi, 2.0 * np.pi) - np.pi


def _four_area(a, b, c):
    """Four times the area of the triangle with sides ``a, b, c`` (Kahan's Heron).

    Sides are sorted so that ``a >= b >= c`` and the product
    ``(a+(b+c)) (c-(a-b)) (c+(a-b)) (a+(b-c))`` is formed with Kahan's parenthesisation;
    a negative product (no triangle exists) is clamped to zero.
    """
    a, b, c = np.broadcast_arrays(
        np.asarray(a, dtype=float), np.asarray(b, dtype=float), np.asarray(c, dtype=float)
    )
    s = np.sort(np.stack([a, b, c], axis=-1), axis=-1)
    c, b, a = s[..., 0], s[..., 1], s[..., 2]
    prod = (a + (b + c)) * (c - (a - b)) * (c + (a - b)) * (a + (b - c))
    return np.sqrt(np.maximum(prod, 0.0))


def _reach_mask(l1, l2, dist, rtol):
    """``True`` where the two-link triangle ``(l1, l2, dist)`` exists and is isolated.

    Requires ``l1 > 0``, ``l2 > 0``, ``dist > rtol (l1 + l2)`` (a target at the root has a
    continuum of solutions when ``l1 = l2``) and
    ``|l1 - l2| - rtol (l1 + l2) <= dist <= (l1 + l2)(1 + rtol)``.
    """
    reach = l1 + l2
    slack = rtol * reach
    return (
        (l1 > 0.0)
        & (l2 > 0.0)
        & (dist > slack)
        & (dist <= reach + slack)
        & (dist >= np.abs(l1 - l2) - slack)
    )


def _normalize(v, fallback):
    """``v / |v|`` along the last axis; rows with ``|v| = 0`` take ``fallback``."""
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    ok = n > 0.0
    return np.where(ok, v / np.where(ok, n, 1.0), fallback)


def _least_aligned_axis_perp(u):
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


# ------------------------------------------------------------------ two-bone (3-D)


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
        alpha = atan2(4A, l1^2 + D^2 - l2^2)          (law of cosines, module docstring)

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
    u = _normalize(d, _normalize(p, plus_y))

    # Bend side: pole component perpendicular to u, or the deterministic fallback.
    w_raw = p - np.sum(p * u, axis=-1, keepdims=True) * u
    w_norm = np.linalg.norm(w_raw, axis=-1)
    p_norm = np.linalg.norm(p, axis=-1)
    use_pole = (p_norm > 0.0) & (w_norm > pole_eps * p_norm)
    w = np.where(use_pole[..., None],
                 w_raw / np.where(use_pole, w_norm, 1.0)[..., None],
                 _least_aligned_axis_perp(u))
    # Re-orthogonalise once (w came from a difference; keeps |u.w| at rounding level).
    w = w - np.sum(w * u, axis=-1, keepdims=True) * u
    w = w / np.linalg.norm(w, axis=-1, keepdims=True)
    n = np.cross(u, w)

    four_a = _four_area(l1, l2, dist)
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

    reachable = _reach_mask(l1, l2, dist, rtol)
    return TwoBoneIK(elbow, end, dir1, dir2, frame(dir1), frame(dir2), n, reachable)


# --------------------------------------------------------------- two-link (planar)


def _two_link_core(l1, l2, x, y):
    """Both branches of the planar two-link problem, no wrapping.

    Returns ``t1, t2`` of shape ``(..., 2)`` (branch axis last) and ``psi`` ``(...)``.
    Branch 0 bends with ``t2 = +psi``, branch 1 with ``t2 = -psi``;
    ``t1 = atan2(y, x) -/+ alpha``.
    """
    l1 = np.asarray(l1, dtype=float)
    l2 = np.asarray(l2, dtype=float)
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    dist = np.hypot(x, y)
    four_a = _four_area(l1, l2, dist)
    theta = np.arctan2(y, x)
    alpha = np.arctan2(four_a, l1 * l1 + dist * dist - l2 * l2)
    psi = np.arctan2(four_a, dist * dist - l1 * l1 - l2 * l2)
    t1 = np.stack(np.broadcast_arrays(theta - alpha, theta + alpha), axis=-1)
    t2 = np.stack(np.broadcast_arrays(psi, -psi), axis=-1)
    return t1, t2, psi, dist


def two_link_planar(l1, l2, x, y, *, rtol=REACH_RTOL):
    """Both branches of planar two-link IK as joint angles.

    Forward kinematics: ``x = l1 cos(t1) + l2 cos(t1 + t2)``,
    ``y = l1 sin(t1) + l2 sin(t1 + t2)`` (``t1`` absolute angle of link 1, ``t2`` the
    angle of link 2 relative to link 1).

    With ``D = hypot(x, y)`` and ``4A`` four times the area of the triangle
    ``(l1, l2, D)``:

        psi   = atan2(4A, D^2 - l1^2 - l2^2)        in [0, pi]
        alpha = atan2(4A, l1^2 + D^2 - l2^2)        angle at the root
        branch 0 ("elbow down", t2 >= 0):  t1 = atan2(y, x) - alpha,  t2 = +psi
        branch 1 ("elbow up",   t2 <= 0):  t1 = atan2(y, x) + alpha,  t2 = -psi

    On the workspace boundary (``D = l1 + l2`` or ``D = |l1 - l2|``) the branches
    coincide.  For an unreachable target (including zero lengths or a target at the
    root) both branches hold the closest-approach configuration (extended or folded
    toward ``atan2(y, x)``, which is 0 at the origin) and ``reachable`` is False.

    Parameters broadcast together to a leading shape ``S``.

    Returns
    -------
    angles : (S, 2, 2)   ``angles[..., b, :] = (t1, t2)`` of branch ``b``, wrapped to
                         ``[-pi, pi)``
    reachable : (S,)     bool
    """
    t1, t2, _, dist = _two_link_core(l1, l2, x, y)
    angles = wrap_angle(np.stack([t1, t2], axis=-1))
    l1b, l2b, distb = np.broadcast_arrays(np.asarray(l1, float), np.asarray(l2, float), dist)
    return angles, _reach_mask(l1b, l2b, distb, rtol)


# ------------------------------------------------------------- 3-link planar arm


def _links(a):
    a1, a2, a3, a4 = (np.asarray(v, dtype=float) for v in a)
    return a1, a2, a3, a4


def fk_planar3(q, a=PLANAR3_DEFAULT_LINKS):
    """Forward kinematics of the 3-link planar arm of seed 003.

        x = a1 cos(q1) + a2 cos(q1 - q2) + a3 cos(q1 - q2 + q3) + a4
        y = a1 sin(q1) + a2 sin(q1 - q2) + a3 sin(q1 - q2 + q3)

    (note the sign convention: joint 2 turns clockwise, joints 1 and 3 counter-clockwise;
    ``a4`` shifts the base along x).

    Parameters
    ----------
    q : (..., 3)          joint angles ``(q1, q2, q3)``
    a : 4 values          ``(a1, a2, a3, a4)``, each a scalar or broadcasting to ``...``

    Returns
    -------
    (..., 2) end-effector position ``(x, y)``.
    """
    q = np.asarray(q, dtype=float)
    a1, a2, a3, a4 = _links(a)
    th1 = q[..., 0]
    th2 = th1 - q[..., 1]
    th3 = th2 + q[..., 2]
    x = a1 * np.cos(th1) + a2 * np.cos(th2) + a3 * np.cos(th3) + a4
    y = a1 * np.sin(th1) + a2 * np.sin(th2) + a3 * np.sin(th3)
    return np.stack(np.broadcast_arrays(x, y), axis=-1)


def planar3_ik_given_phi(x, y, phi, a=PLANAR3_DEFAULT_LINKS, *, rtol=REACH_RTOL):
    """All solutions of the 3-link planar arm for a target and end orientation ``phi``.

    Why a parameter is needed: position-only IK of a 3-link planar arm has 3 unknowns
    and 2 equations, so its solutions form a 1-parameter family (curves in joint space).
    Fixing one more scalar turns it into a two-link problem with at most 2 isolated
    solutions modulo 2 pi.  Fixing the end-effector orientation
    ``phi = q1 - q2 + q3`` (the absolute angle of link 3) is the natural choice when the
    tool's heading matters: the wrist (joint 3) must then sit at

        w = (x - a4 - a3 cos(phi),  y - a3 sin(phi))

    which links 1 and 2 reach as a planar two-link chain with lengths ``a1, a2``,
    absolute link angles ``t1 = q1`` and ``t1 + t2 = q1 - q2``.  With
    :func:`two_link_planar`'s ``(t1, t2)`` for each branch:

        q1 = t1,   q2 = -t2,   q3 = phi - t1 - t2.

    Returns
    -------
    q : (S, 2, 3)    ``q[..., b, :] = (q1, q2, q3)`` for branch ``b`` (0: ``q2 <= 0``,
                     1: ``q2 >= 0``), wrapped to ``[-pi, pi)``
    valid : (S, 2)   bool.  Both False when the wrist is out of the two-link workspace
                     (or a degenerate input); then ``q`` holds the closest-approach
                     configuration for this ``phi``, never NaN.  Branch 1 is also
                     marked invalid when it coincides exactly with branch 0 (``q2`` is
                     0 or pi: the wrist on the workspace boundary, a double root).
    """
    a1, a2, a3, a4 = _links(a)
    phi = np.asarray(phi, dtype=float)
    wx = np.asarray(x, dtype=float) - a4 - a3 * np.cos(phi)
    wy = np.asarray(y, dtype=float) - a3 * np.sin(phi)
    t1, t2, psi, dist = _two_link_core(a1, a2, wx, wy)
    phi_b = phi[..., None]
    q = np.stack(np.broadcast_arrays(t1, -t2, phi_b - t1 - t2), axis=-1)
    q = wrap_angle(q)
    a1b, a2b, distb, psib = np.broadcast_arrays(a1, a2, dist, psi)
    reach = _reach_mask(a1b, a2b, distb, rtol)
    distinct = (psib > 0.0) & (psib < np.pi)
    valid = np.stack([reach, reach & distinct], axis=-1)
    return q, valid


def planar3_ik_given_q2(x, y, q2, a=PLANAR3_DEFAULT_LINKS, *, rtol=REACH_RTOL):
    """All solutions of the 3-link planar arm for a target and a given ``q2`` (seed 003).

    Fixing ``q2`` freezes the triangle base-joint 2-joint 3, so links 1 and 2 act as one
    rigid *virtual link*.  In complex notation (``e(t) = exp(i t)``) the end effector,
    relative to the base ``(a4, 0)``, is

        p = e(q1) (a1 + a2 e(-q2)) + a3 e(q1 - q2 + q3)
          = r e(q1 + delta) + a3 e(q1 - q2 + q3),

        r     = |a1 + a2 e(-q2)| = sqrt(a1^2 + a2^2 + 2 a1 a2 cos q2),
        delta = atan2(-a2 sin q2, a1 + a2 cos q2),

    a two-link chain with lengths ``r, a3``.  Its absolute angle
    ``t1 = q1 + delta`` and relative angle ``t2 = q3 - q2 - delta`` come from
    :func:`two_link_planar`, so for each branch

        q1 = t1 - delta,   q3 = t2 + q2 + delta.

    Squaring ``|p|`` gives the seed's equation
    ``(x-a4)^2 + y^2 = a1^2 + a2^2 + a3^2 + 2a1a2 cos q2 + 2a2a3 cos q3 + 2a1a3 cos(q2 - q3)``;
    its ``q3`` roots are the two branches.  The seed's four values
    ``phi - theta, pi - phi - theta, 2 pi + phi - theta, 3 pi - phi - theta`` are these two
    repeated modulo 2 pi, and ``q1`` is unique per ``q3`` (a rigid rotation), so there
    are at most 2 solutions.

    Degenerate case: ``r = 0`` (``a1 = a2`` and ``q2 = pi``) puts joint 3 on the base
    for every ``q1``; any solution is then one of a continuum, so it is reported invalid
    whenever ``r <= rtol (a1 + a2)`` (in floating point ``cos(pi)`` is exact but
    ``sin(pi)`` is not zero, so ``r`` comes out ~1e-17 rather than 0).

    Returns
    -------
    q : (S, 2, 3)    ``q[..., b, :] = (q1, q2, q3)``; ``q2`` is the given value (wrapped);
                     all angles wrapped to ``[-pi, pi)``
    valid : (S, 2)   bool, as in :func:`planar3_ik_given_phi` (both False when
                     ``(x - a4, y)`` lies outside the annulus ``|r - a3| <= D <= r + a3``;
                     branch 1 False when it coincides exactly with branch 0).
    """
    a1, a2, a3, a4 = _links(a)
    q2 = np.asarray(q2, dtype=float)
    vx = a1 + a2 * np.cos(q2)
    vy = -a2 * np.sin(q2)
    r = np.hypot(vx, vy)
    delta = np.arctan2(vy, vx)
    px = np.asarray(x, dtype=float) - a4
    py = np.asarray(y, dtype=float)
    t1, t2, psi, dist = _two_link_core(r, a3, px, py)
    q2_b = q2[..., None]
    delta_b = delta[..., None]
    q = np.stack(np.broadcast_arrays(t1 - delta_b, q2_b, t2 + q2_b + delta_b), axis=-1)
    q = wrap_angle(q)
    rb, a3b, distb, psib = np.broadcast_arrays(r, a3, dist, psi)
    reach = _reach_mask(rb, a3b, distb, rtol) & (rb > rtol * np.abs(a1 + a2))
    distinct = (psib > 0.0) & (psib < np.pi)
    valid = np.stack([reach, reach & distinct], axis=-1)
    return q, valid

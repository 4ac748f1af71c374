"""Planar chains: both branches of two-link IK, and the 3-link planar arm of seed 003."""

from __future__ import annotations

import numpy as np

from ..geometry import wrap_angle
from .triangle import REACH_RTOL, four_area, reach_mask

#: Link parameters ``(a1, a2, a3, a4)`` of the 3-link planar arm in seed 003.
PLANAR3_DEFAULT_LINKS = (0.2, 0.2, 0.25, 0.1415)


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
    four_a = four_area(l1, l2, dist)
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
    return angles, reach_mask(l1b, l2b, distb, rtol)


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
    reach = reach_mask(a1b, a2b, distb, rtol)
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
    reach = reach_mask(rb, a3b, distb, rtol) & (rb > rtol * np.abs(a1 + a2))
    distinct = (psib > 0.0) & (psib < np.pi)
    valid = np.stack([reach, reach & distinct], axis=-1)
    return q, valid

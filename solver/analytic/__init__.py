"""Closed-form inverse kinematics: two-bone chains and the 3-link planar arm.

Everything here is batched: positions carry a leading frame axis ``(..., 3)`` or
``(..., 2)`` (any number of leading axes, broadcast against each other), scalars such
as bone lengths broadcast against that leading shape.  There are no Python loops over
frames.  Only numpy is used.

    triangle.py   the two-link triangle below: four times its area, whether it exists
    two_bone.py   two-bone chains in 3-D with a pole (two_bone_ik)
    planar.py     planar two-link chains and the 3-link planar arm of seed 003

Conventions
-----------
* Angles are radians.  Joint angles that this package returns are wrapped to
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

from ..geometry import wrap_angle
from .planar import PLANAR3_DEFAULT_LINKS, fk_planar3, planar3_ik_given_phi, planar3_ik_given_q2, two_link_planar
from .triangle import REACH_RTOL
from .two_bone import TwoBoneIK, two_bone_ik

__all__ = [
    "PLANAR3_DEFAULT_LINKS",
    "REACH_RTOL",
    "TwoBoneIK",
    "wrap_angle",
    "two_bone_ik",
    "two_link_planar",
    "fk_planar3",
    "planar3_ik_given_phi",
    "planar3_ik_given_q2",
]

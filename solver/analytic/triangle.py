"""The triangle of a two-link chain (see the package docstring): four times its area, and
whether it exists.
"""

from __future__ import annotations

import numpy as np

#: Relative slack on the workspace boundary: a target whose distance exceeds the reach
#: ``l1 + l2`` (or falls short of ``|l1 - l2|``) by at most ``REACH_RTOL * (l1 + l2)`` is
#: still called reachable; the chain then ends within that distance of the target.
REACH_RTOL = 1e-12


def four_area(a, b, c):
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


def reach_mask(l1, l2, dist, rtol):
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

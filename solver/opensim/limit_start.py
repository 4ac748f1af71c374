"""Start poses off the limits: a free clamped coordinate that starts on one of its limits, or
within LIMIT_BAND of its range from one, starts at the middle of its range instead.

The Gauss-Newton step (gauss_newton.py) puts a coordinate that a step would carry past its limit
on the limit and solves the others without it. Started on a limit that the markers push it
against, a coordinate stays there from the first step on. Where that limit is a singular pose of
the chain (a straight elbow, elbow_flex = 0), a coordinate whose motion only it makes effective
(the upper arm's long-axis rotation moves the wrist only once the elbow bends: d x_wrist /
d arm_rot = 0 at elbow_flex = 0) gets no direction from the markers, and the frame settles with
the limb on its limit in a worse local minimum, a KKT point that first-order steps do not leave.
OpenSim's assembler gives clamped ranges to Simbody's optimizer as bounds; with constraints held
exactly that is an interior-point method, which moves a start that close to a bound into the
interior first and reaches a bound only as its barrier fades, while the other coordinates
settle. The middle of the range is the start farthest from both limits; a coordinate away from
its limits keeps its start.
"""

from __future__ import annotations

import numpy as np

LIMIT_BAND = 0.01               # of the coordinate's range: a start this close to a limit is on it


def off_limits(q, lower, upper, free) -> np.ndarray:
    """q (F, n) with each free coordinate of finite range [lower, upper] (n,) that sits within
    LIMIT_BAND of its range from a limit moved to the middle of the range."""
    q = np.asarray(q, dtype=float)
    bounded = np.asarray(free, bool) & np.isfinite(lower) & np.isfinite(upper) & (upper > lower)
    low, high = np.where(bounded, lower, 0.0), np.where(bounded, upper, 0.0)
    band = LIMIT_BAND * (high - low)
    on_limit = bounded & ((q - low <= band) | (high - q <= band))
    return np.where(on_limit, (low + high) / 2, q)

"""Model markers in the world and their Jacobian with respect to OpenSim coordinates, for the
inner loop of marker IK: the engine's forward kinematics and point Jacobian (kinematics.py)
through the coupling's chain rule, arranged per coordinate rather than per marker and axis.

Each engine joint value theta_k has a twist V_k = (w_k; o_k x w_k + u_k)
(kinematics.coordinate_twists), and a marker at x on a segment that k moves has
dx/dtheta_k = [-[x]x  I] V_k. Through the coupling theta = theta(q) (coupling.py) a coordinate c
has the twist

    V_c = sum_k V_k d theta_k / d q_c,      dx/dq_c = [-[x]x  I] V_c,

one (6, n_dof) by (n_dof, n_q) product per frame. All the axes c drives sit on one segment (its
joint's child), so they move the same markers, and V_c is the same for every marker c moves: a
frame's Jacobian is one (3M, 6) by (6, n_q) product (kinematics.twists_at_points), masked to the
coordinates that move each marker (the segment of the coordinate is the marker's or an
ancestor).
"""

from __future__ import annotations

import numpy as np

from ..kinematics import coordinate_twists, forward_kinematics, twists_at_points
from ..model import Model
from ..rotations import skew

# -[x]x = sum_l x_l CROSS[l]: row l of this (3, 9) matrix spreads x_l into the flattened 3x3
CROSS = -skew(np.eye(3)).reshape(3, 9)


class MarkerKinematics:
    """Positions (F, M, 3) and Jacobian (F, 3M, n_q) of markers at `locations` (M, 3) on engine
    `segments` (M,) of `model`, driven through `coupling` (OpenSim coordinates q (F, n_q))."""

    def __init__(self, model: Model, coupling, segments, locations):
        self.model, self.coupling = model, coupling
        self.segments = np.asarray(segments, dtype=int).reshape(-1)
        self.locations = np.asarray(locations, dtype=float).reshape(-1, 3)
        K = len(model.joints)
        n_q = coupling.n_coordinates
        self.n_coordinates = n_q
        driver = np.asarray(coupling.dof_coordinate, dtype=int)
        if driver.size != K:
            raise ValueError(f"the coupling drives {driver.size} joint values, the model has {K}")
        second = np.asarray(getattr(coupling, "dof_second", np.full(K, -1)), dtype=int)
        # The one segment each coordinate drives, and the marker mask.
        coordinate_segment = np.full(n_q, -1)
        for k, c in [(k, driver[k]) for k in np.flatnonzero(driver >= 0)] + \
                    [(k, second[k]) for k in np.flatnonzero(second >= 0)]:
            s = model.joint_segment[k]
            if coordinate_segment[c] not in (-1, s):
                raise ValueError(f"coordinate {coupling.names[c]!r} drives axes of two segments")
            coordinate_segment[c] = s
        moved = np.zeros((self.segments.size, n_q), dtype=bool)
        has = coordinate_segment >= 0
        moved[:, has] = model.segment_ancestors[self.segments][:, coordinate_segment[has]]
        self.moves = moved                                         # (M, n_q): c moves marker m
        # before[a, b]: coordinate a's axes come before b's on the way from the world to b
        # (a's segment is a proper ancestor of b's, or the same with a's axes first)
        first_axis = np.full(n_q, K)
        for k in range(K - 1, -1, -1):
            if driver[k] >= 0:
                first_axis[driver[k]] = k
        seg = np.where(has, coordinate_segment, 0)
        same = seg[:, None] == seg[None, :]
        above = model.segment_ancestors[seg[None, :], seg[:, None]] & ~same
        self.before = (above | same & (first_axis[:, None] <= first_axis[None, :])) & has[:, None] & has[None, :]
        self._mask = np.repeat(moved, 3, axis=0).astype(float)     # (3M, n_q)
        self._homogeneous = np.concatenate([self.locations, np.ones((self.locations.shape[0], 1))], axis=1)

    def positions(self, q) -> np.ndarray:
        """Marker positions (F, M, 3) for coordinates q (F, n_q)."""
        return self._markers(forward_kinematics(self.model, self.coupling.dofs(np.asarray(q, dtype=float))))

    def _markers(self, pose):
        """R l + t as one product with (l, 1): on the markers' [R t] rows, gathered contiguous,
        several times faster than on the strided rows of their 4x4 frames (geometry.points_on)."""
        return np.einsum("fmij,mj->fmi", pose.frames[:, self.segments, :3], self._homogeneous)

    def positions_and_jacobian(self, q, out=None, twists: bool = False):
        """(x (F, M, 3), dx/dq (F, 3M, n_q)), rows 3m .. 3m+2 for marker m, and with `twists` the
        coordinates' twists (F, 6, n_q) (angular rows first). The Jacobian is written into `out`
        when given (a C-contiguous array of that shape, reused across calls by the solver:
        allocating a megabyte per call costs more than the work on this model)."""
        theta, chain = self.coupling.dofs_and_jacobian(np.asarray(q, dtype=float))
        pose = forward_kinematics(self.model, theta)
        x = self._markers(pose)
        coordinate = coordinate_twists(self.model, pose) @ chain                         # (F, 6, n_q)
        F, M = x.shape[:2]
        if out is None:
            out = np.empty((F, 3 * M, self.n_coordinates))
        twists_at_points(coordinate, x, linear=True, out=out.reshape(F, M, 3, self.n_coordinates))
        out *= self._mask
        return (x, out, coordinate) if twists else (x, out)

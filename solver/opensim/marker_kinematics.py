"""Model markers in the world and their Jacobian with respect to OpenSim coordinates, for the
inner loop of marker IK: the engine's forward kinematics and point Jacobian (kinematics.py) cut
down to what markers need, with 3x3 rotations and translations instead of 4x4 frames, and the
Jacobian assembled per coordinate rather than per marker and axis.

Each engine joint k (one revolute or prismatic axis per OpenSim transform axis) sits on a segment
and has in the world a direction w_k and a pivot o_k (the segment's frame before its joints,
moved by the joints before k on that segment). A marker at x on a segment that k moves has

    dx/dtheta_k = w_k x (x - o_k) = w_k x x + o_k x w_k   (rotation),   w_k   (translation).

Through the coupling theta_k = f_k(q_c(k)) (coupling.py) all the axes a coordinate c drives sit
on one segment (its joint's child), so they move the same markers and their columns add up to
one twist (Omega_c, V_c), the same for every marker c moves (a translation that also depends on
a second coordinate e, the ScapulothoracicJoint's, adds d theta_k/d q_e w_k to V_e):

    dx/dq_c = Omega_c x x + V_c = [-[x]x  I] [Omega_c; V_c],
    Omega_c = sum_k f_k' w_k  (rotations),   V_c = sum_k f_k' (o_k x w_k  or  w_k  for translations).

So a frame's Jacobian is one (3M, 6) by (6, n_q) product, masked to the coordinates that move
each marker (the segment of the coordinate is the marker's or an ancestor).

This is a second composition of forward kinematics, kept for speed (the engine's
forward_kinematics, point_jacobian and the coupling's chain rule cost several times as much at
marker IK's sizes): its axes turn by the revolute kind's `motion` (joints.KINDS), composed in
another order, so it equals kinematics.forward_kinematics and point_jacobian through the
coupling to rounding, not bit for bit (tests/apps/test_opensim_model.py checks that on every joint
type OpenSim has).

Layout. Every segment of an OpenSim model has up to three translations followed by up to three
rotations, four for a ScapulothoracicJoint (osim.py builds them so); here each segment gets
exactly three translations and as many rotations as the model's most (three or four), the missing
ones of value 0 (identity), so that one batched product per rotation slot makes every segment's
local transform. The world frames then follow by pointer jumping: each segment's transform is composed
with its current ancestor's and the ancestor pointer doubled, ceil(log2(depth)) rounds instead of
one round per tree level. Few, larger numpy calls: at the sizes of marker IK (tens of frames,
ten-odd segments) the count of calls, not the arithmetic, is what costs.
"""

from __future__ import annotations

import numpy as np

from ..joints import KINDS
from ..model import PRISMATIC, REVOLUTE, Model
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
        S, K = len(model.segments), len(model.joints)
        self.n_segments, self.n_joints = S, K
        # Per segment three translation and three rotation slots: joint index (K: none, value 0).
        n_turn = max([3] + [sum(j.kind == REVOLUTE for j in segment.joints) for segment in model.segments])
        self.n_turn = n_turn
        sliding, turning = np.full((S, 3), K), np.full((S, n_turn), K)
        for s, segment in enumerate(model.segments):
            kinds = [j.kind for j in segment.joints]
            n_slide = kinds.count(PRISMATIC)
            if (set(kinds) - {REVOLUTE, PRISMATIC} or kinds != [PRISMATIC] * n_slide + [REVOLUTE] * (len(kinds) - n_slide)
                    or n_slide > 3 or len(kinds) - n_slide > 4):
                raise ValueError(f"segment {segment.name!r}: marker kinematics takes up to three translations "
                                 f"followed by up to four rotations, not {kinds}")
            first = model.joint_first[model.joint_segment == s]
            sliding[s, :n_slide], turning[s, :len(kinds) - n_slide] = first[:n_slide], first[n_slide:]
        self._sliding, self._turning = sliding, turning
        axis = np.vstack([model.joint_axis, [1.0, 0.0, 0.0]])                  # the padding's: any
        self._slide_axis = np.where((sliding < K)[..., None], axis[sliding], 0.0)             # (S, 3, 3)
        self._turn_axis = axis[turning]
        self._turn_constants = KINDS[REVOLUTE].prepare(self._turn_axis)         # the revolute kind's
        # rest and post folded into the local transform: rest [R p] post, as (S, 3, 4) blocks
        self._rest, self._post = model.rest[:, :3], model.post
        self.has_post = model.has_post
        # Pointer jumping: parent S is the world (a marker model stands in the world, no bases).
        parent = np.append(np.where(model.parent < 0, S, model.parent), S)
        self._parent = parent
        depth = max(len(level) and d for d, level in enumerate(model.layout.levels)) + 1
        self._rounds = int(np.ceil(np.log2(depth + 1)))
        self.locations_h = np.concatenate([self.locations, np.ones((self.locations.shape[0], 1))], axis=1)

        # Coordinates: the one segment each drives, the twist sums and the marker mask.
        n_q = coupling.n_coordinates
        self.n_coordinates = n_q
        driver = np.asarray(coupling.dof_coordinate, dtype=int)
        if driver.size != K:
            raise ValueError(f"the coupling drives {driver.size} joint values, the model has {K}")
        driver = np.append(driver, -1)
        coordinate_segment = np.full(n_q, -1)
        for k in np.flatnonzero(driver >= 0):
            c, s = driver[k], model.joint_segment[k]
            if coordinate_segment[c] not in (-1, s):
                raise ValueError(f"coordinate {coupling.names[c]!r} drives axes of two segments")
            coordinate_segment[c] = s
        second = np.asarray(getattr(coupling, "dof_second", np.full(K, -1)), dtype=int)
        for k in np.flatnonzero(second >= 0):
            c, s = second[k], model.joint_segment[k]
            if model.joints[k].kind != PRISMATIC:
                raise ValueError(f"joint {model.joints[k].name!r}: only translations may depend on two coordinates")
            if coordinate_segment[c] not in (-1, s):
                raise ValueError(f"coordinate {coupling.names[c]!r} drives axes of two segments")
            coordinate_segment[c] = s
        # Translations that depend on a second coordinate: (joint value index, segment, slot, coordinate)
        self._second = [(k, int(model.joint_segment[k]), int(np.flatnonzero(sliding[model.joint_segment[k]] == k)[0]),
                         int(second[k])) for k in np.flatnonzero(second >= 0)]
        self._slots = np.concatenate([sliding, turning], axis=1)               # (S, 3 + n_turn): twist rows
        slots = self._slots.reshape(-1)
        self._sum = np.zeros((n_q, slots.size))                    # twist of c = sum over its axes
        self._sum[driver[slots][driver[slots] >= 0], np.flatnonzero(driver[slots] >= 0)] = 1.0
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
        self._lever = np.empty((0, self.segments.size, 3, 6))       # scratch [-[x]x  I] per marker

    def _forward(self, q, joints: bool):
        """World frames [R p] (F, S + 1, 3, 4) of every segment (and the world, last), and with
        `joints` the coordinates' twists (F, 6, n_q) (module docstring)."""
        theta, slope = self.coupling.dofs_and_slopes(q)
        F, S = q.shape[0], self.n_segments
        theta = np.concatenate([theta, np.zeros((F, 1))], axis=1)
        turn = KINDS[REVOLUTE].motion(theta[:, self._turning, None], self._turn_constants)[0]   # (F, S, n_turn, 3, 3)
        first_two = turn[:, :, 0] @ turn[:, :, 1]
        local = np.empty((F, S + 1, 3, 4))
        local[:, S] = np.eye(3, 4)
        turned = [turn[:, :, 0], first_two]                     # the rotation after 1, 2, ... slots
        for i in range(2, self.n_turn - 1):
            turned.append(turned[-1] @ turn[:, :, i])
        local[:, :S, :, :3] = turned[-1] @ turn[:, :, self.n_turn - 1]
        slide = np.einsum("fst,stj->fsj", theta[:, self._sliding], self._slide_axis)
        local[:, :S, :, 3] = slide
        local[:, :S] = _compose(self._rest, local[:, :S])
        if self.has_post:
            local[:, :S] = _compose(local[:, :S], self._post[:, :3])
        world, above = local, self._parent
        for _ in range(self._rounds):
            world, above = _compose(world[:, above], world), above[above]
        if not joints:
            return world, None
        # Every axis in the world (direction w) and, for the rotations, their pivot o: the frame
        # before the segment's joints moved by its translations.
        before = _compose(world[:, self._parent[:S]], self._rest)                            # (F, S, 3, 4)
        n_slots = 3 + self.n_turn
        axes = np.empty((F, S, n_slots, 3))
        axes[:, :, :3] = self._slide_axis
        axes[:, :, 3] = self._turn_axis[:, 0]
        for i in range(1, self.n_turn):
            axes[:, :, 3 + i] = np.einsum("fsij,sj->fsi", turned[i - 1], self._turn_axis[:, i])
        slope = np.concatenate([slope, np.zeros((F, 1))], axis=1)
        rate = slope[:, self._slots]                                                        # (F, S, 6)
        w = (axes @ np.swapaxes(before[..., :3], -1, -2)) * rate[..., None]                   # (F, S, 6, 3)
        o = np.einsum("fsij,fsj->fsi", before[..., :3], slide) + before[..., 3]
        twist = np.zeros((F, S, n_slots, 6))
        twist[:, :, :3, 3:] = w[:, :, :3]
        twist[:, :, 3:, :3] = w[:, :, 3:]
        twist[:, :, 3:, 3:] = w[:, :, 3:] @ (o @ CROSS).reshape(F, S, 3, 3)                   # o x w
        out = np.tensordot(twist.reshape(F, n_slots * S, 6), self._sum, axes=([1], [1]))      # (F, 6, n_q)
        if self._second:                      # translations' rates along their second coordinate
            rates = self.coupling.second_slopes(q)
            for (k, s, slot, c), rate in zip(self._second, rates.T):
                out[:, 3:, c] += (before[:, s, :, :3] @ self._slide_axis[s, slot]) * rate[:, None]
        return world, out

    def _markers(self, world):
        return np.einsum("fmij,mj->fmi", world[:, self.segments], self.locations_h)

    def positions(self, q) -> np.ndarray:
        """Marker positions (F, M, 3) for coordinates q (F, n_q)."""
        q = np.asarray(q, dtype=float)
        world, _ = self._forward(q, joints=False)
        return self._markers(world)

    def positions_and_jacobian(self, q, out=None, twists: bool = False):
        """(x (F, M, 3), dx/dq (F, 3M, n_q)), rows 3m .. 3m+2 for marker m, and with `twists` the
        coordinates' twists (F, 6, n_q) (Omega rows first). The Jacobian is written into `out`
        when given (a C-contiguous array of that shape, reused across calls by the solver:
        allocating a megabyte per call costs more than the work on this model)."""
        q = np.asarray(q, dtype=float)
        world, coordinate_twists = self._forward(q, joints=True)
        x = self._markers(world)
        F, M = x.shape[:2]
        if self._lever.shape[0] < F:
            self._lever = np.empty((F, M, 3, 6))
            self._lever[..., 3:] = np.eye(3)
        lever = self._lever[:F]
        lever[..., :3] = (x @ CROSS).reshape(F, M, 3, 3)
        if out is None:
            out = np.empty((F, 3 * M, self.n_coordinates))
        np.matmul(lever.reshape(F, 3 * M, 6), coordinate_twists, out=out)
        out *= self._mask
        return (x, out, coordinate_twists) if twists else (x, out)


def _compose(a, b):
    """a b for [R p] blocks (..., 3, 4): R_a R_b and R_a p_b + p_a."""
    out = a[..., :3] @ b
    out[..., 3] += a[..., 3]
    return out

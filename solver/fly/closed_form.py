"""The four stages of the fly leg (solver.fly.legs) in closed form, all legs and frames in one batch.

A stage moves one segment of fixed length L about its joint j, so its tip lies on the sphere of
radius L around j, and the least-squares point for the keypoint m is the tip pointing along
m - j. Each stage's angles only turn that segment's direction u (a unit vector in the frame R its
earlier joints leave, v = R^T (m - j) / |m - j|), so solving a stage is reading angles off v:

    stage 1  u = Rx(a) Ry(b) (0, 0, -1) = (-sin b, sin a cos b, -cos a cos b)
             b = atan2(-v_x, |(v_y, v_z)|), a = atan2(v_y, -v_z);        other branch (a + pi, pi - b)
    stage 2  u = Rz(c) Ry(e) (0, 0, -1) = (-sin e cos c, -sin e sin c, -cos e)
    and 3    e = atan2(|(v_x, v_y)|, -v_z), c = atan2(-v_y, -v_x);      other branch (c + pi, -e)
    stage 4  u = Ry(t) (0, 0, -1) = (-sin t, 0, -cos t): one angle, the tip nearest m is the one
             pointing along v's projection on the xz plane, t = atan2(-v_x, -v_z) (t + pi is the
             farthest, a maximum).

Where v does not fix an angle (the keypoint on that angle's axis: cos b = 0, sin e = 0, or v along
y in stage 4; the keypoint at the joint; a keypoint or joint that is not finite) every value is
optimal, and the angle keeps its warm start, as the iterative solver does (a zero gradient never
moves it).

Which branch. The two branches of a two-angle stage meet only on the axis (cos b = 0, sin e = 0)
and lie on opposite sheets of it (the sign of cos b, of sin e). Moved continuously from its warm
start, the segment cannot change sheet without passing through the axis, and the iterative
solver's small steps do the same: on the fly data it never changes sheet, even at sin e = 0.026,
where the branch nearest in angles is sometimes the other one (1000-frame file, LF leg from frame
427). So a frame takes the branch on the warm start's sheet, or the nearer one in the sum of
squared wrapped angle differences when the warm start is on the axis itself (as the hanging rest
pose is for stages 2 and 3), at the multiple of 2 pi nearest the warm start. (Damped steps can
jump the axis when the warm start lies within a step of it and the keypoint beyond it, e.g. a
start 0.1 rad off the axis; there the two answers differ by the branch, with equal keypoints.)
The warm start is the previous frame's
answer (frame 0: the start; every frame: the start with warm_start='none'), which is one of the
previous frame's branches, so the choice in frame f depends only on which branch frame f-1 took:
a map T_f from branch to branch, computed for all frames at once. Frame f's branch is
T_f(T_{f-1}(... T_0(start))), a prefix composition of maps evaluated by doubling in log2(F)
batched steps. An angle that the keypoint leaves free takes its value from the last frame that
fixed it (in the same branch), and the frame keeps its predecessor's branch.
"""

from __future__ import annotations

import numpy as np

from ..geometry import wrap_angle_nearest
from ..rotations import axis_rotation, in_place

# An angle is left free when the part of the unit direction that would fix it is below this.
AXIS_TOLERANCE = 1e-12


def _unknown(v: np.ndarray):
    """Norms of the directions (...,) and where they fix nothing (zero length, not finite)."""
    r = np.linalg.norm(v, axis=-1)
    return r, ~(np.isfinite(r) & (r > 0))


def _yaw_pitch(v):
    """Stage 1: branches (..., 2, 2) of (a, b) with Rx(a) Ry(b) (0,0,-1) along v, free (..., 2)."""
    r, unknown = _unknown(v)
    across = np.hypot(v[..., 1], v[..., 2])
    b = np.arctan2(-v[..., 0], across)
    a = np.arctan2(v[..., 1], -v[..., 2])
    branches = np.stack([np.stack([a, b], -1), np.stack([a + np.pi, np.pi - b], -1)], -2)
    free = np.stack([unknown | (across <= AXIS_TOLERANCE * r), unknown], -1)
    return branches, free


def _roll_pitch(v):
    """Stages 2, 3: branches (..., 2, 2) of (c, e) with Rz(c) Ry(e) (0,0,-1) along v, free (..., 2)."""
    r, unknown = _unknown(v)
    across = np.hypot(v[..., 0], v[..., 1])
    e = np.arctan2(across, -v[..., 2])
    c = np.arctan2(-v[..., 1], -v[..., 0])
    branches = np.stack([np.stack([c, e], -1), np.stack([c + np.pi, -e], -1)], -2)
    free = np.stack([unknown | (across <= AXIS_TOLERANCE * r), unknown], -1)
    return branches, free


def _pitch(v):
    """Stage 4: the one branch (..., 1, 1) of t with Ry(t) (0,0,-1) nearest v, free (..., 1)."""
    r, unknown = _unknown(v)
    across = np.hypot(v[..., 0], v[..., 2])
    t = np.arctan2(-v[..., 0], -v[..., 2])
    return t[..., None, None], (unknown | (across <= AXIS_TOLERANCE * r))[..., None]


def _cos_pitch(x):
    return in_place(np.cos, np.empty(x.shape[:-1]), x[..., 1])


def _sin_pitch(x):
    return in_place(np.sin, np.empty(x.shape[:-1]), x[..., 1])


# Per stage: the angle columns (legs.ANGLES order), the branches of a direction, the body axes the
# angles turn about, and the sheet: the quantity whose sign tells the two branches apart (zero on
# the axis where they meet; None for the one-branch stage).
STAGES = (((0, 1), _yaw_pitch, (0, 1), _cos_pitch), ((2, 3), _roll_pitch, (2, 1), _sin_pitch),
          ((4, 5), _roll_pitch, (2, 1), _sin_pitch), ((6,), _pitch, (1,), None))


def _nearest(branches: np.ndarray, previous: np.ndarray, sheet) -> np.ndarray:
    """For each previous answer (..., P, n), the index of the branch (..., K, n) the solver moves
    to from it (..., P): one on the previous answer's sheet unless that is on the axis, and of
    those the nearest in the sum of squared wrapped angle differences."""
    distance = np.sum(wrap_angle_nearest(branches[..., None, :, :] - previous[..., :, None, :]) ** 2, axis=-1)
    if sheet is not None:
        side = sheet(previous)
        side = np.where(np.abs(side) > AXIS_TOLERANCE, side, 0.0)
        distance = np.where(side[..., :, None] * sheet(branches)[..., None, :] < 0, np.inf, distance)
    return np.argmin(distance, axis=-1)


def resolve_branches(branches: np.ndarray, free: np.ndarray, start: np.ndarray, sheet=None,
                     recurrence: bool = True) -> np.ndarray:
    """Per frame one branch of `branches` (B, F, K, n), free angles filled in, as the warm-started
    iterative solver picks them (module docstring): angles (B, F, n). `free` (B, F, n) marks the
    angles a frame leaves free; `start` (B, n) is frame 0's warm start; `sheet` maps angles
    (..., n) to the quantity whose sign separates the branches. With recurrence=False every frame
    starts from `start` instead of the previous frame's answer."""
    B, F, K, n = branches.shape
    frame = np.broadcast_to(np.arange(F)[None, :, None], free.shape)
    if recurrence:
        # Free angles from the last frame that fixed them (each branch its own), else the start.
        source = np.maximum.accumulate(np.where(free, -1, frame), axis=1)
        index = np.broadcast_to(np.maximum(source, 0)[:, :, None, :], branches.shape)
        y = np.take_along_axis(branches, index, axis=1)
        y = np.where((source < 0)[:, :, None, :], start[:, None, None, :], y)
        # maps[f, i]: the branch frame f takes after frame f-1 took branch i (frame -1: the start).
        previous = np.concatenate([np.broadcast_to(start[:, None, None, :], (B, 1, K, n)), y[:, :-1]], axis=1)
        maps = _nearest(y, previous, sheet)
        keep = np.any(free, axis=-1)                          # the branches agree on every fixed angle
        maps = np.where(keep[..., None], np.arange(K), maps)
        step = 1
        while step < F:                                       # maps[f] <- maps[f] o maps[f - step]
            maps[:, step:] = np.take_along_axis(maps[:, step:], maps[:, :-step], axis=-1)
            step *= 2
        label = maps[..., 0]
    else:
        y = np.where(free[:, :, None, :], start[:, None, None, :], branches)
        label = _nearest(y, np.broadcast_to(start[:, None, None, :], (B, F, 1, n)), sheet)[..., 0]
    chosen = np.take_along_axis(y, label[:, :, None, None], axis=2)[:, :, 0]
    if recurrence:
        steps = wrap_angle_nearest(np.diff(np.concatenate([start[:, None], chosen], axis=1), axis=1))
        near = start[:, None] + np.cumsum(steps, axis=1)
    else:
        near = start[:, None] + wrap_angle_nearest(chosen - start[:, None])
    # The chosen branch's own value plus the multiple of 2 pi that keeps it near its warm start.
    return chosen + 2.0 * np.pi * np.round((near - chosen) / (2.0 * np.pi))


def solve_stages(keypoints, lengths, start, recurrence: bool = True):
    """The four stages for keypoints (B, F, 5, 3), lengths (B, 4) and frame 0's angles (B, 7):
    angles (B, F, 7), the tips the angles put the joints at (B, F, 5, 3: the Coxa keypoint, then
    each segment's tip) and each stage's keypoint distance (B, F, 4)."""
    keypoints = np.asarray(keypoints, float)
    joint = keypoints[..., 0, :]
    R = np.broadcast_to(np.eye(3), joint.shape + (3,)).copy()
    angles = np.empty(keypoints.shape[:2] + (7,))
    tips = [joint]
    for k, (columns, aim, axes, sheet) in enumerate(STAGES):
        v = np.einsum("...ji,...j->...i", R, keypoints[..., k + 1, :] - joint)      # R^T (m - j)
        branches, free = aim(v)
        x = resolve_branches(branches, free, start[:, list(columns)], sheet, recurrence)
        angles[..., list(columns)] = x
        for axis, value in zip(axes, np.moveaxis(x, -1, 0)):
            R = R @ axis_rotation(axis, value)
        joint = joint - lengths[:, None, k, None] * R[..., :, 2]                # j + R (0, 0, -L)
        tips.append(joint)
    tips = np.stack(tips, axis=-2)
    return angles, tips, np.linalg.norm(tips[..., 1:, :] - keypoints[..., 1:, :], axis=-1)

"""Pose bones' own channels (location, rotation in its mode, scale) and the matrix_basis they make,
worked out in double precision from the channels' float32 values.

Blender composes a bone's matrix_basis in float32 as T(location) R S(scale) (no location for a
bone connected to its parent), with R from the rotation mode: the normalised quaternion; the
axis (normalised; a zero axis is no rotation) and angle; or the Euler angles applied in the order
the mode names (XYZ: X first, R = Rz Ry Rx).
`basis` composes the same in float64. Both the bake and live preview take their start pose from
it: the channels are the same float32 numbers however they were read (Blender's evaluation of
the pose bones in a bake, the kept channels and F-curves in live preview, `own_pose`), so the
start is the same to the last bit, which Blender's float32 matrix_basis would not give (it is
composed from live preview's own rotations on bones whose channels it wrote).
"""

from __future__ import annotations

import numpy as np

from ..solver.rotations import axis_rotation

# One row of channel values per bone: where each channel lies in it.
LOCATION, QUATERNION, EULER, AXIS_ANGLE, SCALE = (slice(0, 3), slice(3, 7), slice(7, 10), slice(10, 14),
                                                   slice(14, 17))
WIDTH = 17
CHANNELS = (("location", LOCATION), ("rotation_quaternion", QUATERNION), ("rotation_euler", EULER),
            ("rotation_axis_angle", AXIS_ANGLE), ("scale", SCALE))
# rotation_mode as foreach_get gives it (RNA enum values); Euler orders as the axes applied first to last.
QUATERNION_MODE, AXIS_ANGLE_MODE = 0, -1
EULER_ORDERS = {1: (0, 1, 2), 2: (0, 2, 1), 3: (1, 0, 2), 4: (1, 2, 0), 5: (2, 0, 1), 6: (2, 1, 0)}
MODE_NUMBERS = {"QUATERNION": 0, "AXIS_ANGLE": -1, "XYZ": 1, "XZY": 2, "YXZ": 3, "YZX": 4, "ZXY": 5, "ZYX": 6}
MODE_NAMES = {number: name for name, number in MODE_NUMBERS.items()}


def read(pose_bones, rows, modes_out, values_out):
    """Into modes_out (S,) and values_out (S, WIDTH): the rotation modes and channel values of the
    pose bones at indices `rows` of the collection `pose_bones` (one foreach_get per channel)."""
    n = len(pose_bones)
    modes = np.empty(n, np.int32)
    pose_bones.foreach_get("rotation_mode", modes)
    modes_out[...] = modes[rows]
    for name, part in CHANNELS:
        width = part.stop - part.start
        buffer = np.empty((n, width), np.float32)
        pose_bones.foreach_get(name, buffer.ravel())
        values_out[..., part] = buffer[rows]


def rotations(modes, values):
    """Rotation matrices (..., 3, 3) float64 of channel rows values (..., WIDTH) in modes (...)."""
    modes = np.asarray(modes)
    v = np.asarray(values, np.float64)
    R = np.empty(modes.shape + (3, 3))
    R[...] = np.eye(3)
    present = set(modes.ravel().tolist())
    if QUATERNION_MODE in present:
        quat = modes == QUATERNION_MODE
        q = v[quat][:, QUATERNION]
        size = np.sqrt((q * q).sum(axis=-1))
        q = np.where(size[:, None] > 0.0, q / np.where(size > 0.0, size, 1.0)[:, None], [1.0, 0.0, 0.0, 0.0])
        w, x, y, z = q.T
        R[quat] = np.stack([
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)
    if AXIS_ANGLE_MODE in present:
        axis_angle = modes == AXIS_ANGLE_MODE
        a = v[axis_angle][:, AXIS_ANGLE]
        angle, axis = a[:, 0], a[:, 1:]
        size = np.sqrt((axis * axis).sum(axis=-1))
        k = axis / np.where(size > 0.0, size, 1.0)[:, None]
        angle = np.where(size > 0.0, angle, 0.0)
        c, s = np.cos(angle)[:, None, None], np.sin(angle)[:, None, None]
        K = np.zeros(k.shape[:1] + (3, 3))
        K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -k[:, 2], k[:, 1], -k[:, 0]
        K[:, 1, 0], K[:, 2, 0], K[:, 2, 1] = k[:, 2], -k[:, 1], k[:, 0]
        R[axis_angle] = np.eye(3) + s * K + (1.0 - c) * (K @ K)
    for mode, order in EULER_ORDERS.items():
        if mode in present:
            here = modes == mode
            e = v[here][:, EULER]
            out = np.broadcast_to(np.eye(3), e.shape[:1] + (3, 3))
            for axis in order:                       # the first axis applied is the rightmost factor
                out = axis_rotation(axis, e[:, axis]) @ out
            R[here] = out
    return R


def basis(modes, values, connected=False):
    """matrix_basis (..., 4, 4) float64 from channel rows: T(location) R diag(scale); `connected`
    (broadcast over the rows' bones): bones connected to their parent, whose location Blender
    leaves out."""
    v = np.asarray(values, np.float64)
    M = np.zeros(v.shape[:-1] + (4, 4))
    M[..., :3, :3] = rotations(modes, values) * v[..., None, SCALE]
    M[..., :3, 3] = np.where(np.asarray(connected)[..., None], 0.0, v[..., LOCATION])
    M[..., 3, 3] = 1.0
    return M

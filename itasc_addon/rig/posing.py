"""Coordinates from poses and poses from coordinates: the solved joints as pose bones' channels."""

from __future__ import annotations

import numpy as np

from ...solver.kinematics import segment_motions
from ...solver.rotations import quaternion_from_matrix
from .. import chain_bones, pose_channels
from .base import Rig, RigError

def pose_from_coordinates(rig: Rig, q, motions=None):
    """Per model bone and frame: rotation matrices (F, S, 3, 3) and uniform scales (F, S) that make
    the pose bones' matrix_basis reproduce the solved joints as Blender evaluates them: a
    stretching bone's total scale is its stretch (L + d) / L, every other bone's 1, each written
    divided by the scale it inherits (`chain_bones.written_scales`). `motions`: the segments' joint
    motions at q when the caller has them (an evaluation's pose.local)."""
    q = np.asarray(q, float)
    R = (segment_motions(rig.model, q) if motions is None else motions)[..., :3, :3]
    total = np.ones(q.shape[:1] + (len(rig.bones),))
    for name, c in rig.stretch_coordinate.items():
        s = rig.bones.index(name)
        total[:, s] = (rig.model.length[s] + q[:, c]) / rig.model.length[s]
    if rig.scale_parents is None or not rig.stretch_coordinate:
        return R, total
    return R, chain_bones.written_scales(total, rig.scale_parents)


def apply_pose(rig: Rig, obj, R, scale, bones=None):
    """Set pose bones (one frame: R (S, 3, 3), scale (S,)) through their own rotation mode, and the
    uniform scale of the bones whose scale we write (`Rig.scaled`); locations stay as they are,
    and so do the other bones' scales. Refuses anything non-finite.

    Every channel goes in with one foreach_set per channel kind (quaternions, Euler angles, axis
    angles, scales), which does not reliably get the pose evaluated again (4.2 tags nothing; 5.0
    copies the channels, but the pose of the first frame written stayed the old one); the
    object's one transform tag afterwards does: the evaluated pose then shows the written
    channels (tests/addon/test_addon_live.py, every frame). A rotation set per bone through its
    property would tag the object's geometry as well, which makes Blender's evaluation after the
    write slower (BENCHMARKS.md, live preview). Euler angles continue from the bone's current
    ones (mathutils' compatible Euler), axis angles are mathutils' of the rotation's quaternion,
    quaternions take the short way from the current ones."""
    from mathutils import Euler, Matrix

    if not (np.isfinite(R).all() and np.isfinite(scale).all()):
        raise RigError("the solver returned a non-finite pose; nothing was written")
    pose_bones = obj.pose.bones
    written = (np.arange(len(rig.bones)) if bones is None
               else np.array([s for s, name in enumerate(rig.bones) if name in bones], dtype=int))
    index = rig.pose_rows[written]
    n = len(pose_bones)
    if n != len(rig.pose_index) or (index < 0).any():
        raise RigError(f"bones of '{obj.name}' were added, deleted or renamed while solving; nothing was written")
    numbers = pose_channels.MODE_NUMBERS
    written_modes = np.array([numbers[pose_bones[int(i)].rotation_mode] for i in index], dtype=np.int32)
    by_quaternion = written_modes == pose_channels.QUATERNION_MODE
    if by_quaternion.any():
        rows, at = written[by_quaternion], index[by_quaternion]
        quat = np.empty((n, 4), np.float32)
        pose_bones.foreach_get("rotation_quaternion", quat.ravel())
        new = quaternion_from_matrix(R[rows])
        quat[at] = new * np.where((new * quat[at]).sum(axis=-1) < 0.0, -1.0, 1.0)[:, None]   # the short way
        pose_bones.foreach_set("rotation_quaternion", quat.ravel())
    by_axis_angle = written_modes == pose_channels.AXIS_ANGLE_MODE
    if by_axis_angle.any():
        channels = np.empty((n, 4), np.float32)
        pose_bones.foreach_get("rotation_axis_angle", channels.ravel())
        for s, i in zip(written[by_axis_angle], index[by_axis_angle]):
            axis, angle = Matrix(R[s].tolist()).to_quaternion().to_axis_angle()
            channels[i] = (angle, *axis)
        pose_bones.foreach_set("rotation_axis_angle", channels.ravel())
    by_euler = ~(by_quaternion | by_axis_angle)
    if by_euler.any():
        channels = np.empty((n, 3), np.float32)
        pose_bones.foreach_get("rotation_euler", channels.ravel())
        for s, i, mode in zip(written[by_euler], index[by_euler], written_modes[by_euler]):
            order = pose_channels.MODE_NAMES[int(mode)]
            channels[i] = Matrix(R[s].tolist()).to_euler(order, Euler(channels[i].tolist(), order))
        pose_bones.foreach_set("rotation_euler", channels.ravel())
    scaled = rig.scaled_rows[written]
    if scaled.any():
        channels = np.empty((n, 3), np.float32)
        pose_bones.foreach_get("scale", channels.ravel())
        channels[index[scaled]] = np.asarray(scale, float)[written[scaled], None]
        pose_bones.foreach_set("scale", channels.ravel())
    if len(written):
        obj.update_tag(refresh={"OBJECT"})

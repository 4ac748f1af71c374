"""Small scenes used by the demo, the tests and the benchmarks."""

from __future__ import annotations

import numpy as np

from .bones import Bone, model_from_bones, rest_matrix
from .tasks import CopyPose, on_object, on_segment
from .model import Model, Segment, revolute
from .scene import Scene

# Franka Emika Panda, as Franka publishes it: modified (Craig) Denavit-Hartenberg parameters
# (a_{i-1} m, d_i m, alpha_{i-1} rad) of joints 1-7 and of the flange, and joint limits (rad).
PANDA_DH = ((0.0, 0.333, 0.0), (0.0, 0.0, -np.pi / 2), (0.0, 0.316, np.pi / 2), (0.0825, 0.0, np.pi / 2),
            (-0.0825, 0.384, -np.pi / 2), (0.0, 0.0, np.pi / 2), (0.088, 0.0, np.pi / 2))
PANDA_FLANGE = (0.0, 0.107, 0.0)
PANDA_LOWER = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)
PANDA_UPPER = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)


def straight_chain(n_bones: int, bone_length: float = 1.0, **ik) -> list:
    """A chain of `n_bones` bones standing straight up +Z from the origin, all axes free
    (sphere joints) unless `ik` sets lock / limits / stiffness / stretch for every bone."""
    bones = []
    for i in range(n_bones):
        head = np.array([0.0, 0.0, i * bone_length])
        matrix = rest_matrix(head, head + [0.0, 0.0, bone_length])
        bones.append(Bone(f"bone{i}", matrix, bone_length, parent=f"bone{i - 1}" if i else None, **ik))
    return bones


def reach_scene(bones, rotation: bool = False) -> Scene:
    """The last bone's tail follows object 0 (position, and rotation when asked)."""
    model = model_from_bones(bones)
    tip = on_segment(len(model.segments) - 1, (0.0, model.length[-1], 0.0))
    task = CopyPose(tip, on_object(0), rotation=(rotation,) * 3, name="reach")
    return Scene(model, [task], n_objects=1)


def lissajous(n_frames: int, reach: float, center=(0.0, 0.0, 0.0)) -> np.ndarray:
    """Target poses (F, 1, 4, 4) on a 3-D Lissajous curve of radius up to 0.7 * reach about
    `center` + (0, 0, 0.35 reach): inside the reach of a chain of that length rooted at center."""
    t = np.linspace(0.0, 1.0, n_frames, endpoint=False)
    p = np.stack([0.45 * np.sin(2 * np.pi * 3 * t),
                  0.45 * np.sin(2 * np.pi * 2 * t + 0.5),
                  0.35 + 0.25 * np.sin(2 * np.pi * 5 * t + 1.0)], axis=-1) * reach + np.asarray(center)
    poses = np.broadcast_to(np.eye(4), (n_frames, 1, 4, 4)).copy()
    poses[:, 0, :3, 3] = p
    return poses


def modified_dh(a: float, d: float, alpha: float) -> np.ndarray:
    """The fixed part of a modified-DH link, Rot_x(alpha) Trans_x(a) Trans_z(d); the joint's own
    Rot_z(theta) follows it (and commutes with Trans_z(d))."""
    c, s = np.cos(alpha), np.sin(alpha)
    return np.array([[1.0, 0.0, 0.0, a], [0.0, c, -s, -s * d], [0.0, s, c, c * d], [0.0, 0.0, 0.0, 1.0]])


def panda_arm() -> Model:
    """The Franka Emika Panda arm: seven revolute Z joints with Franka's limits, one segment per
    link (link i's frame is DH frame i), and a jointless 'flange' segment at the flange frame."""
    segments = [Segment(f"link{i + 1}", i - 1, modified_dh(*dh),
                        (revolute("Z", lower=(lo,), upper=(hi,), name=f"joint{i + 1}"),))
                for i, (dh, lo, hi) in enumerate(zip(PANDA_DH, PANDA_LOWER, PANDA_UPPER))]
    segments.append(Segment("flange", len(segments) - 1, modified_dh(*PANDA_FLANGE)))
    return Model(segments, armature_names=["panda"])


def pose_scene(model: Model, segment: int = -1) -> Scene:
    """Segment `segment`'s frame follows object 0 in position and rotation (a 6-D pose task)."""
    segment = segment % len(model.segments)
    task = CopyPose(on_segment(segment), on_object(0), rotation=(True, True, True), name="pose")
    return Scene(model, [task], n_objects=1)

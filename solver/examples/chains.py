"""Straight chains of bones reaching for a target on a Lissajous curve: the demo's scene, and the
one most tests and benchmarks use."""

from __future__ import annotations

import numpy as np

from ..bones import Bone, model_from_bones, rest_matrix
from ..tasks import CopyPose, on_object, on_segment
from ..scene import Scene


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

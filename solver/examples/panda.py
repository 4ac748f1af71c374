"""The Franka Emika Panda arm from its published modified-DH table and joint limits, and a 6-D
pose task for it."""

from __future__ import annotations

import numpy as np

from ..tasks import CopyPose, on_object, on_segment
from ..model import Model, Segment, revolute
from ..scene import Scene

# Franka Emika Panda, as Franka publishes it: modified (Craig) Denavit-Hartenberg parameters
# (a_{i-1} m, d_i m, alpha_{i-1} rad) of joints 1-7 and of the flange, and joint limits (rad).
PANDA_DH = ((0.0, 0.333, 0.0), (0.0, 0.0, -np.pi / 2), (0.0, 0.316, np.pi / 2), (0.0825, 0.0, np.pi / 2),
            (-0.0825, 0.384, -np.pi / 2), (0.0, 0.0, np.pi / 2), (0.088, 0.0, np.pi / 2))
PANDA_FLANGE = (0.0, 0.107, 0.0)
PANDA_LOWER = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)
PANDA_UPPER = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)


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

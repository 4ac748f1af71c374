"""The lecture's quadruped leg (the example of solver.gradient).

`quadruped_leg` builds the lecture's example: a leg of three revolute joints, each a rotation
R_z about its own frame's z axis, p(q) = F01 Rz(t1) F12 Rz(t2) F23 Rz(t3) p0 with
p0 = (0.062, -0.062, 0.018) in the foot frame, placed in the world by the torso pose.
"""

from __future__ import annotations

import numpy as np

from ..tasks import CopyPose, on_object, on_segment
from ..model import Model, Segment, revolute
from ..rotations import axis_angle_matrix
from ..scene import Scene

TOE = (0.062, -0.062, 0.018)


def _transform(rotation=None, translation=(0.0, 0.0, 0.0)) -> np.ndarray:
    T = np.eye(4)
    if rotation is not None:
        T[:3, :3] = rotation
    T[:3, 3] = translation
    return T


def quadruped_offsets():
    """The fixed transforms of the lecture's chain, F01, F12, F23 (4x4 each).

    The lecture writes p(q) = F01 Rz(t1) F12 Rz(t2) F23 Rz(t3) p0 but gives no numbers for the F's;
    ours are a Pupper-sized front-left leg in the torso frame (x forward, y left, z up):
    F01 puts the hip 0.10 forward and 0.05 left and turns z onto the torso's x axis (abduction);
    F12 moves 0.03 further left and turns z onto the torso's y axis (hip flexion), so the thigh's
    x axis points down; F23 runs 0.08 along the thigh to the knee, whose z axis is parallel to the
    hip's. The toe p0 = (0.062, -0.062, 0.018) then sits below and ahead of the knee.
    """
    y90 = axis_angle_matrix(np.array([0.0, 1.0, 0.0]), np.pi / 2)
    x_90 = axis_angle_matrix(np.array([1.0, 0.0, 0.0]), -np.pi / 2)
    F01 = _transform(y90, (0.10, 0.05, 0.0))
    F12 = _transform(x_90, (0.0, 0.03, 0.0))
    F23 = _transform(None, (0.08, 0.0, 0.0))
    return F01, F12, F23


def default_torso() -> np.ndarray:
    """The torso's pose in the world: 0.16 above the ground, turned 0.3 rad about the vertical."""
    return _transform(axis_angle_matrix(np.array([0.0, 0.0, 1.0]), 0.3), (0.2, -0.1, 0.16))


def quadruped_leg(torso=None) -> tuple[Model, int, np.ndarray]:
    """The lecture's leg as a model (three segments, one revolute Z joint each) placed in the
    world by `torso` (4x4, default_torso() when None); returns (model, foot segment, toe p0)."""
    torso = default_torso() if torso is None else np.asarray(torso, float)
    F01, F12, F23 = quadruped_offsets()
    model = Model([
        Segment("hip", -1, torso @ F01, (revolute("Z", name="theta1"),)),
        Segment("thigh", 0, F12, (revolute("Z", name="theta2"),)),
        Segment("foot", 1, F23, (revolute("Z", name="theta3"),)),
    ])
    return model, 2, np.array(TOE)


def quadruped_scene(torso=None) -> Scene:
    """The lecture's reaching task for the engine: the toe follows object 0 (position only)."""
    model, foot, toe = quadruped_leg(torso)
    return Scene(model, [CopyPose(on_segment(foot, toe), on_object(0), name="toe")], n_objects=1)

"""Small scenes used by the demo, the tests and the benchmarks.

    chains.py      straight chains of bones and Lissajous targets (the demo's scene)
    panda.py       the Franka Emika Panda arm and a 6-D pose task
    quadruped.py   the lecture's quadruped leg (gradient descent's example)
    demo.py        `python -m solver demo`
"""

from .chains import lissajous, reach_scene, straight_chain
from .panda import PANDA_DH, PANDA_FLANGE, PANDA_LOWER, PANDA_UPPER, modified_dh, panda_arm, pose_scene
from .quadruped import TOE, default_torso, quadruped_leg, quadruped_offsets, quadruped_scene

__all__ = ["lissajous", "reach_scene", "straight_chain",
           "PANDA_DH", "PANDA_FLANGE", "PANDA_LOWER", "PANDA_UPPER", "modified_dh", "panda_arm", "pose_scene",
           "TOE", "default_torso", "quadruped_leg", "quadruped_offsets", "quadruped_scene"]

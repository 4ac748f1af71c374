"""Markerless motion capture in Blender: 3-D keypoints (Pose2Sim, OpenCap, MediaPipe, FreeMoCap,
MotionBERT) fitted onto any rig by the engine (`solver.keypoints`), keys written as a bake writes
them and every keypoint measured on Blender's evaluation of them.

Modules by role, lowest first: `reading` (a keypoint file or trial, Z up), `job` (one fit, or
the engine's rotation-copy baseline for contrast, in steps, measured); above them the UI:
`properties`, `operators`, `panels`. The rig side (bone maps, the bones moved, keys on Rigify's
controls) is the retarget's (`..retarget`).
"""

from ..registration import modules_factory
from . import operators, panels, properties

register, unregister = modules_factory((properties, operators, panels))

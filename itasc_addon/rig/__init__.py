"""The rig side: an armature read into the engine's terms and the solved pose written back, by role.

- `base`: the rig read (`Rig`, `Driven`, `Target`), `RigError`, the armature's IK constraints,
  matrix helpers;
- `order`: which IK constraints we drive, in which stage, and which stay Blender's;
- `reading`: one stage's chains into a Model and tasks (`read_rig`), joint-control tasks;
- `signature`: everything the reader reads that is not the pose (live preview reads again on a change);
- `sampling`: targets, bases and the animated pose per frame (`Sampler`, `Samples`);
- `prediction`: a later stage's inputs computed from the stages before it (one reading of
  Blender's evaluation for every stage that allows it);
- `posing`: solved coordinates to pose channels (`pose_from_coordinates`, `apply_pose`).
"""

from .base import (Driven, Rig, RigError, Target, column_lengths, evaluated_world, ik_constraints, object_scale,
                   orthonormalize, uniform_scales)
from .posing import apply_pose, pose_from_coordinates
from .reading import control_values, engine_bone, read_rig, with_joint_control
from .sampling import Sampler, Samples, sample
from .signature import rig_signature

__all__ = ["Driven", "Rig", "RigError", "Sampler", "Samples", "Target", "apply_pose", "column_lengths",
           "control_values", "engine_bone", "evaluated_world", "ik_constraints", "object_scale", "orthonormalize",
           "pose_from_coordinates", "read_rig", "rig_signature", "sample", "uniform_scales", "with_joint_control"]

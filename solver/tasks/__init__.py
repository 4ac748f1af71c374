"""Tasks (iTaSC's constraints): what the solver drives. Each is one class implementing `Task`
(base.py); a scene stacks whatever implements it. To add one, see ARCHITECTURE.md."""

from .base import Endpoint, LoopTask, Place, Stack, Task, TaskInputs, on_object, on_segment, relative_pose
from .coordinate_coupler import CoordinateCoupler
from .copy_pose import CopyPose
from .distance import Distance
from .joint_value import JointValue
from .pole import Pole

__all__ = ["Endpoint", "LoopTask", "Place", "Stack", "Task", "TaskInputs", "on_object", "on_segment",
           "relative_pose", "CoordinateCoupler", "CopyPose", "Distance", "JointValue", "Pole"]

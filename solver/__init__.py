"""iTaSC inverse kinematics in numpy: models, constraints, and the animation / simulation solvers.

Importable with numpy alone; nothing here imports Blender.
"""

from .runtime import keep_freed_memory
from .bones import Bone, combine, model_from_bones, rest_matrix
from .tasks import CopyPose, Distance, Endpoint, JointValue, Pole, Task, on_object, on_segment
from .kinematics import Pose, forward_kinematics, point_jacobian
from .model import Joint, Model, Segment, prismatic, revolute, sphere, swing
from .scene import Evaluation, Scene
from .animation import solve_animation
from .simulation import simulate_frame, solve_simulation
from .result import Result
from .settings import Settings

__all__ = [
    "Bone", "combine", "model_from_bones", "rest_matrix",
    "CopyPose", "Distance", "Endpoint", "JointValue", "Pole", "Task", "on_object", "on_segment",
    "Pose", "forward_kinematics", "point_jacobian",
    "Joint", "Model", "Segment", "prismatic", "revolute", "sphere", "swing",
    "Evaluation", "Scene", "Result", "Settings", "solve_animation", "solve_simulation", "simulate_frame", "keep_freed_memory",
]

"""JointValue: hold one coordinate near a value (a soft task)."""

from __future__ import annotations

import numpy as np

from .base import Place, Stack, Task, TaskInputs


class JointValue(Task):
    """Hold one coordinate near a value: y = q_c, Cq = e_c, no virtual armature (Cf = 0).
    OpenSim's coordinate task and Blender's IK rotation control are this task. Its desired value
    may be given per frame (a solve's `values`; NaN leaves the task out of that frame)."""

    soft = True
    n_values = 1
    n_outputs = 1

    def __init__(self, coordinate: int, value: float = 0.0, weight: float = 1.0, rotational: bool = True,
                 name: str = "joint_value"):
        if not (np.isfinite(value) and np.isfinite(weight) and weight >= 0):
            raise ValueError(f"constraint '{name}': value {value} and weight {weight} must be finite, weight >= 0")
        self.name = name
        self.coordinate, self.value, self.weight = int(coordinate), float(value), float(weight)
        self.has_position, self.has_rotation = not rotational, rotational

    def coordinate_rows(self) -> tuple:
        return ((0, self.coordinate),)

    def evaluate(self, place: Place, inputs: TaskInputs, out: Stack) -> None:
        q, rows = inputs.q, place.rows
        F = q.shape[0]
        value = np.broadcast_to(self.value if inputs.values is None else inputs.values[:, place.first_value], (F,))
        given = np.isfinite(value)
        value = np.where(given, value, q[:, self.coordinate])
        out.y[:, rows] = q[:, self.coordinate, None]
        out.yd[:, rows] = value[:, None]
        out.task_weight[:, rows] = np.where(given, self.weight, 0.0)[:, None]
        err = np.where(given, np.abs(q[:, self.coordinate] - value), np.nan)
        (out.rotation_error if self.has_rotation else out.position_error)[:, place.index] = err

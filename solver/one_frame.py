"""Scene.evaluate for one frame (F = 1), in few numpy calls.

At F = 1 (live preview's animation-mode frame, one query) an evaluation's cost is the number of
numpy calls, not their arithmetic. Forward kinematics and the endpoints' Jacobians are the
batched engine's (kinematics.forward_kinematics on the model's plan, Scene's endpoint frames and
kinematics.moved_point_jacobian), which at F = 1 are already a short sequence of calls over small
arrays; what `OneFrame` saves is in the task system: constants folded once per scene, and each
task kind through its `Task.one_frame_batch` (Pole's on Python floats, the others their `batch`).

Results equal Scene.evaluate's batched path to rounding (the order of some sums differs);
tests/engine/test_one_frame.py compares them on random rigs of every joint and task kind and with
missing objects. A scene with a `coupling` is evaluated by the batched code.
"""

from __future__ import annotations

import math

import numpy as np

from .kinematics import forward_kinematics, moved_point_jacobian
from .tasks import Stack, TaskInputs

_EYE4 = np.eye(4)


class OneFrame:
    """Scene.evaluate at F = 1 for one scene (module docstring); built once per scene."""

    def __init__(self, scene):
        self.scene = scene
        self.model = scene.model
        self.has_ends = bool(scene._endpoints)
        # Which coordinates move each endpoint (1, E, 1, n): none for endpoints on objects.
        self.moves = np.zeros((1, len(scene._endpoints), 1, self.model.n_coordinates))
        self.moves[0, scene._seg_ends, 0] = self.model.moves[:, scene._seg_of_ends].T
        self.batches = [kind.one_frame_batch(tasks, places) for kind, tasks, places in scene._groups]
        self.outputs_shape = (3, 1, scene.n_outputs)
        self.no_errors = np.full((2, 1, len(scene.constraints)), np.nan)

    def evaluate(self, q, objects, bases, jacobians, values):
        """Scene.evaluate's arguments at F = 1; the fields of its Evaluation, in order."""
        scene, m = self.scene, self.model
        missing = None
        if objects is not None and not math.isfinite(objects.sum()):
            finite = np.isfinite(objects)
            if not finite.all():
                missing = ~finite.all(axis=(-2, -1))
                objects = np.where(missing[..., None, None], _EYE4, objects)
        pose = forward_kinematics(m, q, bases)
        frames = scene._endpoint_frames(pose, objects)
        n = m.n_coordinates
        y, yd, task_weight = np.zeros(self.outputs_shape)
        position_error, rotation_error = self.no_errors.copy()
        b_matrix = bool(jacobians) and not isinstance(jacobians, str)
        A = np.zeros((1, scene.n_outputs, n)) if jacobians else None
        B = np.zeros((1, scene.n_outputs, scene.n_u)) if b_matrix else None
        Jends = None
        if jacobians and self.has_ends:
            if b_matrix:
                Jends = scene._endpoint_jacobians(pose, frames, objects, bases, b_matrix)
            else:                  # A alone: the endpoints' Jacobians without the Xu columns
                Jends = moved_point_jacobian(m, pose, frames[..., 3])            # (p, 1)
                Jends *= self.moves
        inputs = TaskInputs(q, frames, Jends, values, n)
        out = Stack(y, yd, task_weight, position_error, rotation_error, A, B)
        for batch in self.batches:
            batch(inputs, out)
        if missing is not None:
            gone = (missing[:, None, :] & scene._task_objects).any(axis=-1)
            task_weight[gone[:, scene._row_task]] = 0.0
            position_error[gone] = rotation_error[gone] = np.nan
        if jacobians and scene._cq_rows.size:
            A[:, scene._cq_rows, scene._cq_columns] += 1.0
        return y, yd, task_weight, position_error, rotation_error, pose, A, B

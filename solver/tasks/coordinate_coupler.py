"""CoordinateCoupler: hold one coordinate a function of another (OpenSim's CoordinateCouplerConstraint)."""

from __future__ import annotations

import numpy as np

from .base import Place, Stack, Task, TaskInputs


class CoordinateCoupler(Task):
    """Hold q_dep = f(q_ind): the output is the residual y = q_dep - f(q_ind), yd = 0, with the row
    A = e_dep - f'(q_ind) e_ind (Cf = 0: no virtual armature). `function` is any object with
    `value_and_derivative(x) -> (f(x), f'(x))`, batched over arrays (solver.opensim.functions).

    A task with a weight: OpenSim's constraint held as a penalty (a finite constraint_weight).
    Its rows are on the scene's solver coordinates, so it fills A directly; in a scene with a
    coupling the scene maps A from joint values, and the scene must place these rows itself (as
    solver.opensim's MarkerScene does) or hold the constraint exactly by eliminating q_dep."""

    n_outputs = 1
    n_values = 0

    def __init__(self, dependent: int, independent: int, function, weight: float = 1.0, rotational: bool = True,
                 name: str = "coordinate_coupler"):
        if not (np.isfinite(weight) and weight >= 0):
            raise ValueError(f"constraint '{name}': weight {weight} must be finite and >= 0")
        if int(dependent) == int(independent):
            raise ValueError(f"constraint '{name}': a coordinate cannot be coupled to itself")
        self.name = name
        self.dependent, self.independent = int(dependent), int(independent)
        self.function, self.weight = function, float(weight)
        self.has_position, self.has_rotation = not rotational, rotational

    def coordinates(self) -> tuple:
        return (self.dependent, self.independent)

    def residual(self, q):
        """(y, dy/dq_ind) for solver coordinates q (F, n): the residual and -f'(q_ind)."""
        value, slope = self.function.value_and_derivative(q[:, self.independent])
        return q[:, self.dependent] - value, -slope

    def evaluate(self, place: Place, inputs: TaskInputs, out: Stack) -> None:
        residual, slope = self.residual(inputs.q)
        row = place.rows.start
        out.y[:, row] = residual
        out.yd[:, row] = 0.0
        out.task_weight[:, row] = self.weight
        (out.rotation_error if self.has_rotation else out.position_error)[:, place.index] = np.abs(residual)
        if out.A is not None:
            out.A[:, row, self.dependent] += 1.0
            out.A[:, row, self.independent] += slope

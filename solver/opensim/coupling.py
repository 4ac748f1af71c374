"""OpenSim coordinates q -> the engine's per-axis joint values theta.

Every engine joint (one per transform axis, see osim.py) has a value

    theta_k = f_k(q_c(k))          (c(k) = -1: theta_k = f_k(0), a constant)

so the Jacobian is diagonal-by-blocks through the chain rule:

    d theta_k / d q_j = f_k'(q_c(k))  if j == c(k),  else 0.

A coordinate may drive several axes (the knee angle drives a rotation and two translations of
gait2354's tibia through splines). Affine f_k (Constant, LinearFunction, multiples of them) are
evaluated for all frames and axes at once; other functions once per distinct function (both
knees share theirs), each batched over frames and the axes it drives, value and slope together.
"""

from __future__ import annotations

import numpy as np

from .functions import Function


class Coupling:
    """Per coordinate (n_q): `names`, `default` values, `range_lower`/`range_upper` (the file's
    range), `lower`/`upper` (the range when the coordinate is clamped, else -inf/+inf), `locked`,
    `clamped`, `rotational` (motion type rotational), `motion_type`. Per engine joint value
    (n_dof): `dof_coordinate` (-1 for none) and `dof_function`."""

    def __init__(self, coordinates, dof_coordinate, dof_function):
        coordinates = list(coordinates)
        self.coordinates = coordinates
        self.names = [c.name for c in coordinates]
        self.n_coordinates = len(coordinates)
        self.default = np.array([c.default_value for c in coordinates], dtype=float)
        self.range_lower = np.array([c.range[0] for c in coordinates], dtype=float)
        self.range_upper = np.array([c.range[1] for c in coordinates], dtype=float)
        self.clamped = np.array([c.clamped for c in coordinates], dtype=bool)
        self.locked = np.array([c.locked for c in coordinates], dtype=bool)
        self.lower = np.where(self.clamped, self.range_lower, -np.inf)
        self.upper = np.where(self.clamped, self.range_upper, np.inf)
        self.motion_type = [c.motion_type for c in coordinates]
        self.rotational = np.array([m == "rotational" for m in self.motion_type], dtype=bool)

        self.dof_coordinate = np.asarray(dof_coordinate, dtype=int).reshape(-1)
        self.dof_function: list = list(dof_function)
        self.n_dofs = self.dof_coordinate.size
        if len(self.dof_function) != self.n_dofs:
            raise ValueError(f"{self.n_dofs} dof coordinates but {len(self.dof_function)} functions")
        if np.any(self.dof_coordinate >= self.n_coordinates) or np.any(self.dof_coordinate < -1):
            raise ValueError("dof_coordinate must index the coordinates (or be -1)")
        for f in self.dof_function:
            if not isinstance(f, Function):
                raise TypeError(f"{f!r} is not a Function")

        affine = np.array([f.affine is not None for f in self.dof_function], dtype=bool)
        self._affine = np.flatnonzero(affine)
        self._other = np.flatnonzero(~affine)
        self._slope = np.array([self.dof_function[k].affine[0] for k in self._affine], dtype=float)
        self._offset = np.array([self.dof_function[k].affine[1] for k in self._affine], dtype=float)
        self._affine_driven = self.dof_coordinate[self._affine] >= 0      # affine axes with a coordinate
        groups = {}                                                       # equal functions: one call
        for k in self._other:
            groups.setdefault(repr(self.dof_function[k]), []).append(k)
        self._groups = [(self.dof_function[ks[0]], np.array(ks), self.dof_coordinate[ks]) for ks in groups.values()]

    def index(self, names) -> np.ndarray:
        """Coordinate indices of `names` (a name gives a 0-d array)."""
        lookup = {n: i for i, n in enumerate(self.names)}
        try:
            if isinstance(names, str):
                return np.array(lookup[names])
            return np.array([lookup[n] for n in names], dtype=int)
        except KeyError as exc:
            raise KeyError(f"no coordinate called {exc.args[0]!r}") from None

    def default_coordinates(self, n_frames: int = 1) -> np.ndarray:
        """The model's default pose, (n_frames, n_q)."""
        return np.tile(self.default, (n_frames, 1))

    def dofs(self, q) -> np.ndarray:
        """theta (F, n_dof) for coordinates q (F, n_q)."""
        return self.dofs_and_slopes(q)[0]

    def dofs_and_slopes(self, q):
        """(theta (F, n_dof), f_k'(q_c(k)) (F, n_dof)): the joint values and each one's
        derivative along its coordinate (0 for the constant ones), the only nonzero entries of
        `jacobian`. Axes with equal functions (a knee's spline on both legs) share one call."""
        q = np.asarray(q, dtype=float)
        if q.ndim != 2 or q.shape[1] != self.n_coordinates:
            raise ValueError(f"q must be (F, {self.n_coordinates}), got {q.shape}")
        F = q.shape[0]
        theta, slopes = np.empty((F, self.n_dofs)), np.zeros((F, self.n_dofs))
        theta[:, self._affine] = self._offset
        driven = self._affine[self._affine_driven]
        theta[:, driven] += self._slope[self._affine_driven] * q[:, self.dof_coordinate[driven]]
        slopes[:, driven] = self._slope[self._affine_driven]
        for function, axes, coordinates in self._groups:
            argument = np.where(coordinates >= 0, q[:, coordinates], 0.0)
            theta[:, axes], slope = function.value_and_derivative(argument)
            slopes[:, axes] = np.where(coordinates >= 0, slope, 0.0)
        return theta, slopes

    def jacobian(self, q) -> np.ndarray:
        """d theta / d q (F, n_dof, n_q)."""
        slopes = self.dofs_and_slopes(q)[1]
        J = np.zeros((slopes.shape[0], self.n_dofs, self.n_coordinates))
        driven = np.flatnonzero(self.dof_coordinate >= 0)
        J[:, driven, self.dof_coordinate[driven]] = slopes[:, driven]
        return J

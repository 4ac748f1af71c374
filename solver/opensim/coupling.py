"""OpenSim coordinates q -> the engine's per-axis joint values theta.

Every engine joint (one per transform axis, see osim.py) has a value

    theta_k = f_k(q_c(k))          (c(k) = -1: theta_k = f_k(0), a constant)

so the Jacobian is diagonal-by-blocks through the chain rule:

    d theta_k / d q_j = f_k'(q_c(k))  if j == c(k),  else 0.

A few joint values depend on a second coordinate e(k) (the ScapulothoracicJoint's point on its
ellipsoid, scapulothoracic.py): theta_k = f_k(q_c(k), q_e(k)), and d theta_k / d q_e(k) is
another nonzero entry (`second_slopes`); `dofs_and_slopes` gives the slope along c(k) as for the
others.

A coordinate may drive several axes (the knee angle drives a rotation and two translations of
gait2354's tibia through splines). Affine f_k (Constant, LinearFunction, multiples of them) are
evaluated for all frames and axes at once; other functions once per distinct function (both
knees share theirs), each batched over frames and the axes it drives, value and slope together.

CoordinateCouplerConstraints (`Coupler`): OpenSim's equality

    c(q) = q_dep - s f(q_ind) = 0

between a dependent and an independent coordinate. Held exactly (`constraint_weight` Infinity),
the dependent coordinates are eliminated: a solve moves only the others (z), and every pose it
reaches is q = fill_dependents(z), which sets q_dep = s f(q_ind) (chains in order), with tangent
dq = T(q) dz (`coupler_tangent`); the engine's Jacobians J become J T. Held as a penalty (a finite
weight), c(q) is an output row like any other (the engine task CoordinateCoupler; gauss_newton.py
adds its rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .functions import Function, MultiplierFunction


class Coupling:
    """Per coordinate (n_q): `names`, `default` values, `range_lower`/`range_upper` (the file's
    range), `lower`/`upper` (the range when the coordinate is clamped, else -inf/+inf), `locked`,
    `clamped`, `rotational` (motion type rotational), `motion_type`. Per engine joint value
    (n_dof): `dof_coordinate` (-1 for none) and `dof_function`; `dof_second` (-1 for none) the
    second coordinate of the joint values that have one (their functions have
    `value_and_gradient(q_c, q_e)`), None when none has."""

    def __init__(self, coordinates, dof_coordinate, dof_function, dof_second=None):
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

        self.dof_second = (np.full(self.n_dofs, -1) if dof_second is None
                           else np.asarray(dof_second, dtype=int).reshape(-1))
        if self.dof_second.size != self.n_dofs or np.any(self.dof_second >= self.n_coordinates) \
                or np.any((self.dof_second >= 0) & (self.dof_coordinate < 0)):
            raise ValueError("dof_second must index the coordinates (or be -1) for driven joint values")
        self.second = np.flatnonzero(self.dof_second >= 0)              # joint values of two coordinates
        affine = np.array([f.affine is not None for f in self.dof_function], dtype=bool)
        self._affine = np.flatnonzero(affine)
        self._other = np.flatnonzero(~affine & (self.dof_second < 0))
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
        for k in self.second:
            theta[:, k], slopes[:, k], _ = self.dof_function[k].value_and_gradient(
                q[:, self.dof_coordinate[k]], q[:, self.dof_second[k]])
        return theta, slopes

    def second_slopes(self, q) -> np.ndarray:
        """d theta_k / d q_e(k) (F, len(self.second)) for the joint values `self.second`."""
        q = np.asarray(q, dtype=float)
        return np.stack([self.dof_function[k].value_and_gradient(q[:, self.dof_coordinate[k]],
                                                                 q[:, self.dof_second[k]])[2]
                         for k in self.second], axis=1) if self.second.size else np.zeros((q.shape[0], 0))

    def jacobian(self, q) -> np.ndarray:
        """d theta / d q (F, n_dof, n_q)."""
        return self.dofs_and_jacobian(q)[1]

    def dofs_and_jacobian(self, q):
        """(theta (F, n_dof), d theta / d q (F, n_dof, n_q))."""
        theta, slopes = self.dofs_and_slopes(q)
        J = np.zeros((slopes.shape[0], self.n_dofs, self.n_coordinates))
        driven = np.flatnonzero(self.dof_coordinate >= 0)
        J[:, driven, self.dof_coordinate[driven]] = slopes[:, driven]
        if self.second.size:
            J[:, self.second, self.dof_second[self.second]] += self.second_slopes(q)
        return theta, J


@dataclass(frozen=True)
class Coupler:
    """A CoordinateCouplerConstraint: q[dependent] = function(q[independent]) (the file's scale
    factor folded into `function`)."""

    name: str
    dependent: int
    independent: int
    function: Function

    def residual_and_slope(self, q):
        """c = q_dep - f(q_ind) (F,) and f'(q_ind) (F,)."""
        value, slope = self.function.value_and_derivative(q[:, self.independent])
        return q[:, self.dependent] - value, slope


def scaled(function: Function, scale: float) -> Function:
    return function if scale == 1.0 else MultiplierFunction(function, scale)


def coupler_order(couplers) -> list:
    """The couplers in an order where a coupler whose independent coordinate is another's
    dependent comes after that one; ValueError on a loop or on two couplers of one dependent."""
    by_dependent = {}
    for c in couplers:
        if c.dependent in by_dependent:
            raise ValueError(f"coordinate {c.dependent} is the dependent of two couplers "
                             f"({by_dependent[c.dependent].name!r} and {c.name!r})")
        by_dependent[c.dependent] = c
    order, placed = [], set()
    for c in couplers:
        chain, at = [], c
        while at is not None and at.dependent not in placed:
            if at in chain:
                raise ValueError(f"coordinate couplers form a loop through {at.name!r}")
            chain.append(at)
            at = by_dependent.get(at.independent)
        for link in reversed(chain):
            order.append(link)
            placed.add(link.dependent)
    return order


def fill_dependents(q, couplers) -> np.ndarray:
    """q (F, n) with every coupler's dependent coordinate set from its independent one."""
    q = np.array(q, dtype=float)
    for c in coupler_order(couplers):
        q[:, c.dependent] = c.function.value(q[:, c.independent])
    return q


def coupler_tangent(q, couplers) -> np.ndarray:
    """T (F, n, n) with dq = T dz for steps dz of the coordinates no coupler sets, at q (F, n)
    where every coupler holds: identity on those, dq_dep = f'(q_ind) dq_ind on each dependent
    (chains multiply their slopes), and zero columns for the dependents."""
    q = np.asarray(q, dtype=float)
    F, n = q.shape
    T = np.broadcast_to(np.eye(n), (F, n, n)).copy()
    for c in coupler_order(couplers):
        slope = c.function.derivative(q[:, c.independent])
        T[:, c.dependent, :] = slope[:, None] * T[:, c.independent, :]
    return T

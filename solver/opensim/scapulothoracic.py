"""OpenSim's ScapulothoracicJoint as engine axes: the scapula gliding on an ellipsoid over the thorax.

The joint has four rotational coordinates, in file order abduction q_a, elevation q_e, upward
rotation q_u and winging q_w, and three parameters: the thoracic ellipsoid's radii (r_x, r_y, r_z)
along the axes of the parent-side frame P (its centre is P's origin), and the winging axis's
direction d and origin (o_x, o_y) in the scapula plane.

In OpenSim (Simbody's Ellipsoid mobilizer, then a pin, then a weld to the child-side frame M):

* The ellipsoid frame is E = P Rz(pi/2); its radii along E's axes are (r_y, r_x, r_z).
* The Ellipsoid mobilizer turns by R = Rx(q_a) Ry(q_e) Rz(q_u) (body-fixed X-Y-Z angles) and puts
  the moving frame's origin at diag(r_y, r_x, r_z) R e_z (a point on the ellipsoid):
  X_E,N = [R  diag(r_y, r_x, r_z) R e_z]. The massless body that carries it has the frame
  K = N Rz(pi/2)^-1.
* The winging pin turns by q_w about the axis (-sin d, cos d, 0) through (o_x, o_y, 0) of K;
  the scapula's child-side frame M is the pin's moving frame.

With C = Rz(pi/2), C Rx(a) C^-1 = R_y(a), C Ry(b) C^-1 = R_-x(b) and C Rz C^-1 = Rz, so with
R e_z = (sin q_e, -sin q_a cos q_e, cos q_a cos q_e):

    X_P,K = C X_E,N C^-1 = T(p) R_y(q_a) R_-x(q_e) R_z(q_u),
    p = (r_x sin q_a cos q_e,  r_y sin q_e,  r_z cos q_a cos q_e)         (in P, on the ellipsoid
                                                                            x^2/r_x^2 + ... = 1)

and then M = K T(o) R_axis(q_w) T(-o) with o = (o_x, o_y, 0): the pin's frames on both massless
bodies are the same transform [R_w, o] (R_w turns z onto the axis), so the pin turns the
scapula about the axis through o and M = K where q_w = 0. As engine axes (osim.py's transform
axes, in order): three translations along P's x, y, z by the three components of p (functions
of q_a and q_e, `EllipsoidPoint`), rotations about y by q_a, about -x by q_e, about z by q_u,
and about (-sin d, cos d, 0) by q_w with pivot o. The marker kinematics' layout (translations,
then rotations, per segment) has no slot for T(o) between the rotations, so a pivot off the
origin splits the joint as Simbody does (osim.build_model): a massless segment K carries the
ellipsoid's six axes; the scapula's segment hangs from it at T(o) with the winging rotation,
and the body (and what hangs from it) sits at T(-o) from that segment's frame. Checked against
opensim 4.6's body transforms in the tests.
"""

from __future__ import annotations

import numpy as np

from .functions import Function, LinearFunction

COORDINATES = ("abduction", "elevation", "upward_rotation", "winging")


class EllipsoidPoint(Function):
    """One component of the ellipsoid point p(q_a, q_e) (module docstring): `component` 0, 1 or 2
    of (r_x sin a cos e, r_y sin e, r_z cos a cos e) for the radius `radius` of that axis. A function
    of two coordinates: `value_and_gradient(a, e)` gives the value and both partial derivatives;
    as a Function of one argument it is the value along a at e = 0 (never used so)."""

    def __init__(self, radius: float, component: int):
        self.radius, self.component = float(radius), int(component)

    def value_and_gradient(self, a, e):
        """(p_k, dp_k/da, dp_k/de) for arrays a, e of one shape."""
        a, e = np.asarray(a, dtype=float), np.asarray(e, dtype=float)
        r = self.radius
        if self.component == 1:
            return r * np.sin(e), np.zeros_like(a), r * np.cos(e)
        ca, sa, ce, se = np.cos(a), np.sin(a), np.cos(e), np.sin(e)
        if self.component == 0:
            return r * sa * ce, r * ca * ce, -r * sa * se
        return r * ca * ce, -r * sa * ce, -r * ca * se

    def value(self, x):
        return self.value_and_gradient(x, np.zeros_like(np.asarray(x, dtype=float)))[0]

    def derivative(self, x):
        return self.value_and_gradient(x, np.zeros_like(np.asarray(x, dtype=float)))[1]

    def __repr__(self):
        return f"EllipsoidPoint({self.radius!r}, {self.component})"


def winging_axis(direction: float) -> np.ndarray:
    """The winging axis (-sin d, cos d, 0) in the scapula plane's frame K."""
    return np.array([-np.sin(direction), np.cos(direction), 0.0])


def axes(radii, direction: float, coordinates: list, origin=(0.0, 0.0)):
    """[(kind, axis, coordinate, second coordinate or None, function, pivot or None)] in
    application order for a ScapulothoracicJoint of ellipsoid `radii` (r_x, r_y, r_z), winging
    `direction` and `origin` (o_x, o_y) and its four `coordinates` (names, in file order). The
    winging rotation's pivot is (o_x, o_y, 0) in K, None when that is K's origin."""
    a, e, u, w = coordinates
    eye = np.eye(3)
    pivot = np.array([origin[0], origin[1], 0.0], dtype=float)
    out = [("translation", eye[k], a, e, EllipsoidPoint(radii[k], k), None) for k in range(3)]
    out += [("rotation", eye[1], a, None, LinearFunction(1.0, 0.0), None),
            ("rotation", -eye[0], e, None, LinearFunction(1.0, 0.0), None),
            ("rotation", eye[2], u, None, LinearFunction(1.0, 0.0), None),
            ("rotation", winging_axis(direction), w, None, LinearFunction(1.0, 0.0),
             pivot if np.any(pivot != 0.0) else None)]
    return out

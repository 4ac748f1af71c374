"""Pole: turn a chain's bend plane about its root->target axis to face a pole, as Blender's IK
constraint does with a pole target and `pole_angle`.

Blender's convention (the same in both of its solvers: Standard IK's
`IK_QJacobianSolver::ConstrainPoleVector` in intern/iksolver, iTaSC's `base_callback` in
source/blender/ikplugin/intern/itasc_plugin.cc; both get the pole position from
`BKE_constraint_target_matrix_get` with target index 1). With h the head of the chain's root bone
(its first, parent-most bone), X and Z that bone's posed axes, a = pole_angle, t the IK target's
position and P the pole's:

    up = X cos a + Z sin a            (the root bone's X axis turned toward its Z axis by a)
    u  = (t - h) / |t - h|            (the root->target axis)
    p  = P - h                        (the pole direction)

Both solvers build a "look-at" frame from (u, up) and another from (u, p) and turn the chain
about h by the rotation between them, so that `up`, made perpendicular to u, points the way `p`,
made perpendicular to u, points. Standard IK does it once, on the pose before it iterates (the
later iterations keep it nearly, not exactly); iTaSC does it again at every time step on the
current pose, so its fixed point is exactly the condition this task drives: up_perp parallel to
p_perp, same direction. The sign: a positive a turns `up` from X toward Z, i.e. by -a about the
bone's Y axis; a chain whose elbow sticks out along its root bone's -Z faces the pole at
a = -90 degrees, along +Z at +90, and at a = 0 its X axis faces the pole.

The task's one output is the signed angle from p_perp to up_perp about u,

    y = theta = atan2(s, c),   s = u . (p x up),   c = p . up - (u . p)(u . up)

(s and c are |p_perp| |up_perp| times the sine and cosine: the parts along u drop out), in
(-pi, pi]; yd = 0. When the root bone's Y axis lies along u, theta is the angle of the bone's
X axis from the pole minus a. rotation_error = |theta|, position_error NaN.

Endpoints: the root (its origin is h, its rotation gives X and Z: `on_segment(root_bone)`), the
target and the pole (points; their rotations do not enter), each on a segment or an object. With
their twist Jacobians J (linear rows J_l at each origin, angular rows J_w), by the chain rule

    d theta = g_p . dp + g_up . dup + g_u . du,      N = s^2 + c^2 = |up_perp|^2 |p_perp|^2,
    g_p  = (c (up x u) - s up_perp) / N,
    g_up = (c (u x p) - s p_perp) / N,
    g_u  = (c (p x up) + s ((u . up) p + (u . p) up)) / N,

with dp = J_l(pole) - J_l(root), dup = w_root x up, du = (I - u u^T) (J_l(target) - J_l(root)) / |t - h|:

    row = g_p J_l(pole) + g_d J_l(target) - (g_p + g_d) J_l(root) + (up x g_up) J_w(root),
    g_d = (I - u u^T) g_u / |t - h|,

over all columns n + n_u; A = row[:n] and B = -row[n:] (A q' = y' + B Xu', as for a loop task).

Singular configurations (no angle there): the target at the root (|t - h| <= 1e-12 times
|t - h| + |p|), the pole on the axis (|p_perp| <= 1e-6 |p|) or `up` along it (|up_perp| <= 1e-6).
In those frames the task asks nothing: y = 0, weight 0, rows of A and B zero, rotation_error 0.
"""

from __future__ import annotations

import numpy as np

from .base import Endpoint, Place, Stack, Task, TaskInputs, check_weight

_AT_ROOT = 1e-12      # |t - h| relative to |t - h| + |p| below which the axis is undefined
_ON_AXIS = 1e-6       # sine of the angle between u and the pole (or up) below which no plane is defined


def _dot(a, b):
    return (a * b).sum(axis=-1)


class Pole(Task):
    """Turn the bend plane of a chain about its root->target axis to face a pole (module docstring):
    one output, the signed angle theta of the root bone's "up" (X cos a + Z sin a, a = `pole_angle`)
    from the pole direction about that axis, driven to 0 with task weight `weight`."""

    n_outputs = 1
    has_position = False
    has_rotation = True

    def __init__(self, root: Endpoint, target: Endpoint, pole: Endpoint, pole_angle: float = 0.0,
                 weight: float = 1.0, name: str = "pole"):
        check_weight(name, "weight", weight)
        if not np.isfinite(pole_angle):
            raise ValueError(f"constraint '{name}': pole_angle {pole_angle} must be finite")
        self.name = name
        self.root, self.target, self.pole = root, target, pole
        self.pole_angle, self.weight = float(pole_angle), float(weight)
        self.up_local = np.array([np.cos(self.pole_angle), 0.0, np.sin(self.pole_angle)])

    def endpoints(self) -> tuple:
        return (self.root, self.target, self.pole)

    def geometry(self, root: np.ndarray, target: np.ndarray, pole: np.ndarray) -> dict:
        """theta and the quantities its derivative needs, from the three frames (F, 4, 4); `valid`
        is False in the singular frames (theta is 0 there)."""
        h = root[:, :3, 3]
        up = root[:, :3, :3] @ self.up_local
        d = target[:, :3, 3] - h
        p = pole[:, :3, 3] - h
        D = np.sqrt(_dot(d, d))
        P = np.sqrt(_dot(p, p))
        u = d / np.where(D > 0.0, D, 1.0)[:, None]
        u_up, u_p = _dot(u, up), _dot(u, p)
        up_perp = up - u_up[:, None] * u
        p_perp = p - u_p[:, None] * u
        valid = ((D > _AT_ROOT * (D + P)) & (np.sqrt(_dot(p_perp, p_perp)) > _ON_AXIS * P)
                 & (np.sqrt(_dot(up_perp, up_perp)) > _ON_AXIS))
        p_x_up = np.cross(p, up)
        s = _dot(u, p_x_up)
        c = _dot(p, up) - u_p * u_up
        theta = np.arctan2(s, c)
        theta = np.where(valid, np.where(theta <= -np.pi, theta + 2 * np.pi, theta), 0.0)
        return dict(theta=theta, valid=valid, u=u, up=up, p=p, D=D, u_up=u_up, u_p=u_p, up_perp=up_perp,
                    p_perp=p_perp, p_x_up=p_x_up, s=s, c=c)

    def evaluate(self, place: Place, inputs: TaskInputs, out: Stack) -> None:
        e, rows, k = place.first_endpoint, place.rows, place.index
        frames = inputs.frames
        g = self.geometry(frames[:, e], frames[:, e + 1], frames[:, e + 2])
        valid, theta = g["valid"], g["theta"]
        out.y[:, rows] = theta[:, None]
        out.yd[:, rows] = 0.0
        out.task_weight[:, rows] = np.where(valid, self.weight, 0.0)[:, None]
        out.rotation_error[:, k] = np.abs(theta)
        out.position_error[:, k] = np.nan
        if out.A is None:
            return
        u, up, p, s, c = g["u"], g["up"], g["p"], g["s"], g["c"]
        s_, c_ = s[:, None], c[:, None]
        N = np.where(valid, s * s + c * c, 1.0)[:, None]
        g_p = (c_ * np.cross(up, u) - s_ * g["up_perp"]) / N
        g_up = (c_ * np.cross(u, p) - s_ * g["p_perp"]) / N
        g_u = (c_ * g["p_x_up"] + s_ * (g["u_up"][:, None] * p + g["u_p"][:, None] * up)) / N
        g_d = (g_u - _dot(g_u, u)[:, None] * u) / np.where(valid, g["D"], 1.0)[:, None]
        J = inputs.jacobians
        Jr, Jt, Jp = J[:, e], J[:, e + 1], J[:, e + 2]            # (F, 6, n + n_u) each
        row = (np.einsum("fi,fik->fk", g_p, Jp[:, :3]) + np.einsum("fi,fik->fk", g_d, Jt[:, :3])
               - np.einsum("fi,fik->fk", g_p + g_d, Jr[:, :3])
               + np.einsum("fi,fik->fk", np.cross(up, g_up), Jr[:, 3:]))
        row *= valid[:, None]
        n = inputs.n
        out.A[:, rows] = row[:, None, :n]
        if out.B is not None:
            out.B[:, rows] = -row[:, None, n:]

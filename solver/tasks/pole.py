"""Pole: turn a chain about its root so that its bend plane faces a pole, as Blender's IK
constraint does with a pole target and `pole_angle`.

Blender's convention, the same in both of its solvers (Standard IK:
`IK_QJacobianSolver::ConstrainPoleVector` in intern/iksolver/intern/IK_QJacobianSolver.cpp, fed by
`execute_posetree` in source/blender/ikplugin/intern/iksolver_plugin.cc; iTaSC: `base_callback` in
source/blender/ikplugin/intern/itasc_plugin.cc). With h the head of the chain's root bone (its
first, parent-most bone), X and Z that bone's posed axes, a = pole_angle, e the chain's effector
(the tip bone's tail), t the IK target's position and P the pole's:

    up   = X cos a + Z sin a          the root bone's X axis turned toward its Z axis by a
    dir  = (e - h) / |e - h|          the chain's own root->effector line
    u    = (t - h) / |t - h|          the root->target line ("poledir")
    p    = P - h                      the pole direction ("poleup")

Each solver builds a look-at frame from (dir, up) and one from (u, p) and turns the chain about h
by the rotation between them: it takes dir onto u and `up`, made perpendicular to dir, onto the
side of u where p lies. iTaSC does it again at every time step, as an extra rotation of the
chain's base, from the chain as it was at its previous evaluation (so a frame evaluated once after
a jump is off; evaluated again it meets the condition below exactly). The sign: a positive a turns
`up` from X toward Z, i.e. by -a about the bone's Y axis; at a = 0 the root bone's X axis faces
the pole, and a chain whose elbow sticks out along its root bone's -Z (+Z) faces it with the elbow
at a = -90 (+90) degrees.

Standard IK turns the chain once, on its start pose (the pose before IK), and does not ask for the
pole again: `Solve` calls ConstrainPoleVector before its loop, which folds the turn into the
matrix above the chain's root (the root's own joint values, limits and stiffness stay as they
were); the loop's damped least-squares steps then move every joint, the root's included, to
reach the target, and the turn is prepended to the root's basis after the loop. What the final
pose meets is therefore where those steps settle from the turned start, not a condition of its
own. Where the turned start is symmetric under the reflection through a plane that holds u (a
chain lying in one plane, its joints' axes and `up` each normal to that plane or in it), the steps
toward the target stay symmetric, so the answer keeps `up` on the pole exactly; otherwise the
iterations drift off it. So a solve here starts from the same turn (`turn_start`: `blender_turn`,
made by the root's own joints) and then holds the condition below throughout: from a symmetric
start both reach the same plane and the same root axes; what is left free inside the plane (where
the knee sits on a redundant chain) is chosen by each solver's own steps.

This task's output is the part of that rotation about u, which Blender removes. Let Q be the
shortest rotation taking dir onto u (k = dir x u, cos = dir . u):

    Q = I + [k]x + [k]x^2 / (1 + dir . u),        w = Q up,
    y = theta = atan2(s, c),   s = u . (p x w),   c = p . w - (u . p)(u . w),

the signed angle, about u, from p to w, both made perpendicular to u (s and c are |p_perp| |w_perp|
times its sine and cosine); in (-pi, pi], yd = 0. Once the effector is on the target, dir = u, Q = I
and theta is simply the angle from p_perp to up_perp about u: the condition iTaSC's fixed point
meets. (Measuring `up` across u instead of across dir would define the same solutions but cut the
poses that meet the pole into two halves, root bone toward the target and away from it, with no
path between them that keeps the pole met: a chain starting away from its target then stalls.)
rotation_error = |theta|; position_error NaN. The task fixes the plane, not the side of it the
chain bends to: a knee bent either way meets it, and a solve keeps the side its start pose has
unless its way to the target folds the chain through (Blender keeps the start pose's side).

Endpoints: the root (origin h, its rotation gives X and Z: `on_segment(root_bone)`), the effector,
the target and the pole (points: their rotations do not enter); each on a segment or an object.
By the chain rule, with g_w = d theta / dw and the twist Jacobians J of the endpoints (linear rows
J_l at each origin, angular rows J_w):

    N    = s^2 + c^2 = |w_perp|^2 |p_perp|^2
    g_p  = (c (w x u) - s w_perp) / N,       g_w = (c (u x p) - s p_perp) / N,
    g_u  = (c (p x w) + s ((u . w) p + (u . p) w)) / N            (u's own entries in theta)
    m    = M_k^T g_w = up x g_w + ((k x up) x g_w - up x (k x g_w)) / (1 + cos)
    z    = g_w . dw/d(cos) = -g_w . (k x (k x up)) / (1 + cos)^2
    d theta / d dir = u x m + z u,     d theta / d u = g_u - dir x m + z dir,
    d theta / d up  = Q^T g_w

(M_k = dw/dk); then dir and u vary as (I - dir dir^T)(J_l(e) - J_l(h)) / |e - h| and
(I - u u^T)(J_l(t) - J_l(h)) / |t - h|, up as J_w(h) x up, p as J_l(P) - J_l(h). The sum over all
columns n + n_u is one row; A = row[:n], B = -row[n:] (A q' = y' + B Xu', as for a loop task).

Singular configurations (no angle there): the effector or the target at the root (within 1e-12
of the configuration's size, |e - h| + |t - h| + |p|), the effector pointing straight away from
the target (dir . u < 0 and |dir x u| <= 1e-6), the pole on the root->target line
(|p_perp| <= 1e-6 |p|), or `up` along the root->effector line (|up_perp| <= 1e-6). In those frames
the task asks nothing: y = 0, task weight 0, its rows of A and B zero, rotation_error 0.
"""

from __future__ import annotations

import math

import numpy as np

from ..bones import coordinates_from_basis
from ..model import PRISMATIC, as_slice
from .base import Endpoint, Place, Stack, Task, TaskInputs, check_weight

_AT_ROOT = 1e-12      # a distance from the root, relative to the configuration's size, below which no line is defined
_ON_AXIS = 1e-6       # a sine below which two directions count as one line


def _dot(a, b):
    return (a * b).sum(axis=-1)


_NEXT, _AFTER = np.array([1, 2, 0]), np.array([2, 0, 1])     # (a x b)_i = a_next b_after - a_after b_next


def _cross(a, b):
    """a x b for (..., 3) arrays: the products and differences numpy's cross forms, taken for all
    three components at once."""
    out = a.take(_NEXT, axis=-1) * b.take(_AFTER, axis=-1)
    out -= a.take(_AFTER, axis=-1) * b.take(_NEXT, axis=-1)
    return out


def _unit(v, size):
    return v / np.where(size > 0.0, size, 1.0)[:, None]


def at_head(root, J, d, column):
    """The root bone's frame (N, 4, 4) at its head, and the twist Jacobian (N, 6, cols) there (None:
    none), from its segment frame and that frame's Jacobian: a bone that stretches (a prismatic
    joint along its Y, coordinate `column`, value d (N,)) has its segment frame at head + d y. The
    head is the frame's point -d y: it moves by J_l + d (y x J_w), less y for d itself."""
    y = root[:, :3, 1]
    out = root.copy()
    out[:, :3, 3] -= d[:, None] * y
    if J is None:
        return out, None
    J = J.copy()
    J[:, :3] += d[:, None, None] * np.cross(y[:, :, None], J[:, 3:], axis=1)
    J[:, :3, column] -= y
    return out, J


def components(frames, up_local):
    """up, e - h, t - h and P - h (module docstring) per component (4, 3, N), from the four
    frames (N, 4, 4, 4) in the order root, effector, target, pole and the root bone's "up" in its
    own frame (3,) or (N, 3)."""
    root = frames[:, 0, :3, :3]
    positions = frames[:, :, :3, 3]
    out = np.empty((4, 3, frames.shape[0]))
    out[0] = (root @ up_local if up_local.ndim == 1 else (root @ up_local[:, :, None])[..., 0]).T
    out[1:] = (positions[:, 1:] - positions[:, :1]).transpose(1, 2, 0)
    return out


def blender_turn(root, effector, target, pole, up_local):
    """Standard IK's turn of a chain toward its pole before it iterates (module docstring): the
    rotation R (N, 3, 3), about the root's head, that takes the look-at frame of (dir, up) onto
    that of (u, p):

        a0 = dir x up / |dir x up|,  a1 = a0 x dir,  a2 = -dir
        b0 = u x p / |u x p|,        b1 = b0 x u,    b2 = -u,        R = sum_i b_i a_i^T

    so R dir = u and R takes `up`, made perpendicular to dir, onto p made perpendicular to u.
    From the four frames (N, 4, 4) and the root bone's up in its own frame (3,). Returns R and
    `valid` (N,): False (and R = I) where a look-at frame is not defined (the effector or the
    target at the root, up along dir, the pole on the root->target line: the sines below
    _ON_AXIS)."""
    h = root[:, :3, 3]
    axes = root[:, :3, :3]
    up = (axes / np.linalg.norm(axes, axis=-2, keepdims=True)) @ up_local
    e, d, p = effector[:, :3, 3] - h, target[:, :3, 3] - h, pole[:, :3, 3] - h
    E, D, P = (np.sqrt(_dot(v, v)) for v in (e, d, p))
    a, u = _unit(e, E), _unit(d, D)
    a0, b0 = _cross(a, up), _cross(u, _unit(p, P))
    A0, B0 = np.sqrt(_dot(a0, a0)), np.sqrt(_dot(b0, b0))
    size = E + D + P
    valid = (E > _AT_ROOT * size) & (D > _AT_ROOT * size) & (A0 > _ON_AXIS) & (B0 > _ON_AXIS)
    a0, b0 = _unit(a0, A0), _unit(b0, B0)
    frame_a = np.stack([a0, _cross(a0, a), -a], axis=-2)              # rows a0, a1, a2
    frame_b = np.stack([b0, _cross(b0, u), -u], axis=-2)
    R = np.swapaxes(frame_b, -1, -2) @ frame_a
    return np.where(valid[:, None, None], R, np.eye(3)), valid


def turn_segment(model, q, pose, segment: int, R):
    """q (F, n) with the rotational coordinates of `segment` changed so that its frame (and all it
    carries) turns by R (F, 3, 3), world axes, about its origin; `pose` the model's
    kinematics.Pose at q. The segment's own motion M (rest-relative, pose.local) becomes
    M W^T R W (W its world axes made unit), turned into coordinates as coordinates_from_basis
    does (the nearest its joints make, onto its limits). A model not made of bones
    (bone_joints) keeps q."""
    motions = pose.local
    M = motions[:, segment, :3, :3]
    world = pose.frames[:, segment, :3, :3]
    W = world / np.linalg.norm(world, axis=-2, keepdims=True)
    basis = motions.copy()
    basis[:, segment, :3, :3] = M @ np.swapaxes(W, -1, -2) @ R @ W
    try:
        turned = coordinates_from_basis(model, basis)
    except ValueError:
        return q
    out = q.copy()
    for k in np.flatnonzero(model.joint_segment == segment):
        if model.joints[k].kind != PRISMATIC:
            first = model.joint_first[k]
            columns = slice(first, first + model.joints[k].type.n_coordinates)
            out[:, columns] = turned[:, columns]
    return out


def _turning_coordinates(model, segment: int) -> int:
    """How many rotational coordinates the joints of `segment` have (3: any rotation)."""
    return sum(model.joints[k].type.n_coordinates for k in np.flatnonzero(model.joint_segment == segment)
               if model.joints[k].kind != PRISMATIC)


class Pole(Task):
    """Turn a chain about its root so that its root bone's "up" (X cos a + Z sin a, a = `pole_angle`)
    faces the pole across the root->target line, Blender's pole target (module docstring). One
    output, the signed angle theta left to turn, driven to 0 with task weight `weight`."""

    n_outputs = 1
    has_position = False
    has_rotation = True

    def __init__(self, root: Endpoint, effector: Endpoint, target: Endpoint, pole: Endpoint,
                 pole_angle: float = 0.0, weight: float = 1.0, name: str = "pole", root_stretch: int | None = None):
        check_weight(name, "weight", weight)
        if not np.isfinite(pole_angle):
            raise ValueError(f"constraint '{name}': pole_angle {pole_angle} must be finite")
        if root_stretch is not None and (root.segment < 0 or not np.array_equal(root.offset[:3, :3], np.eye(3))):
            raise ValueError(f"constraint '{name}': root_stretch needs the root on a segment, axes aligned with it")
        self.name = name
        self.root, self.effector, self.target, self.pole = root, effector, target, pole
        self.root_stretch = root_stretch      # the root bone's stretch coordinate: the apex is its head (at_head)
        self.pole_angle, self.weight = float(pole_angle), float(weight)
        self.up_local = np.array([np.cos(self.pole_angle), 0.0, np.sin(self.pole_angle)])

    def endpoints(self) -> tuple:
        return (self.root, self.effector, self.target, self.pole)

    def turn_start(self, model, q, pose, frames):
        """The start turned as Standard IK turns it (blender_turn) by the root bone's own joints
        (turn_segment), except in frames where the chain from the root to the effector starts
        straight: turned, it would point straight at its target, a saddle no step bends it out
        of (Standard IK stays there, short of the target). A root whose joints cannot make every
        rotation (locked axes: Standard IK turns it regardless of them), or a root or an
        effector on an object, keeps q."""
        if self.root.segment < 0 or self.effector.segment < 0 or _turning_coordinates(model, self.root.segment) < 3:
            return q
        R, valid = blender_turn(frames[:, 0], frames[:, 1], frames[:, 2], frames[:, 3], self.up_local)
        turning = valid & ~self._straight(model, pose)
        if not turning.any():
            return q
        return np.where(turning[:, None], turn_segment(model, q, pose, self.root.segment, R), q)

    def _straight(self, model, pose):
        """(F,) whether every segment origin on the way from the root to the effector lies on the
        root->effector line (within a sine of _ON_AXIS seen from the root); False for a chain of
        one bone."""
        on_way = [s for s in range(len(model.segments)) if model.segment_ancestors[self.effector.segment, s]
                  and model.segment_ancestors[s, self.root.segment] and s != self.root.segment]
        if not on_way:
            return np.zeros(pose.frames.shape[0], dtype=bool)
        h = pose.frames[:, self.root.segment, :3, 3]
        e = (pose.frames[:, self.effector.segment] @ self.effector.offset)[:, :3, 3] - h
        E = np.sqrt(_dot(e, e))
        line = _unit(e, E)
        points = pose.frames[:, on_way][..., :3, 3] - h[:, None]
        off = points - _dot(points, line[:, None])[..., None] * line[:, None]
        return (np.sqrt(_dot(off, off)) <= _ON_AXIS * E[:, None]).all(axis=1)

    def geometry(self, root, effector, target, pole) -> dict:
        """theta and `valid` (False in the singular frames, where theta is 0) from the four frames
        (F, 4, 4)."""
        theta, valid, _ = angle(*components(np.stack([root, effector, target, pole], axis=1), self.up_local), _Arrays)
        return dict(theta=theta, valid=valid)

    def errors(self, frames):
        """theta is read off the effector, target and pole positions across the root (per_length
        1/|e| + 1/|d| + 1/|p_perp|) and off the root bone's up across the chain's line (per_turn
        1/|w_perp|: near the singular pose where up lies along that line, theta is ill-defined)."""
        theta, valid, (E, D, P_perp, W_perp) = angle(*components(np.stack(frames, axis=1), self.up_local), _Arrays,
                                                     sizes=True)
        size = lambda v: np.where(valid, v, 1.0)     # noqa: E731
        per_length = 1.0 / size(E) + 1.0 / size(D) + 1.0 / size(P_perp)
        per_turn = 1.0 / np.maximum(size(W_perp), 1e-12)
        return np.full(theta.shape, np.nan), np.abs(theta), valid & (self.weight > 0), per_length, per_turn

    def batch_key(self):
        return "poles"                      # every pole of a scene in one batch

    @classmethod
    def batch(cls, tasks, places):
        """The poles `tasks` of a scene evaluated at once, for any number of frames: frames and
        tasks flattened into one axis of N = F x T rows, each row one pole at one frame."""
        ends = as_slice(np.array([[p.first_endpoint + j for j in range(4)] for p in places]).ravel())
        rows = as_slice(np.array([p.rows.start for p in places]))
        index = as_slice(np.array([p.index for p in places]))
        up_local = np.array([t.up_local for t in tasks])
        weight = np.array([t.weight for t in tasks])
        T = len(tasks)
        stretching = [(k, t.root_stretch) for k, t in enumerate(tasks) if t.root_stretch is not None]

        def evaluate(inputs: TaskInputs, out: Stack) -> None:
            F = inputs.frames.shape[0]
            frames = inputs.frames[:, ends].reshape(F, T, 4, 4, 4)          # a view where the ends run on
            J = None if out.A is None else inputs.jacobians[:, ends].reshape((F, T, 4) + inputs.jacobians.shape[2:])
            if stretching:                                    # those roots at their heads (at_head)
                frames, J = frames.copy(), None if J is None else J.copy()
            for k, column in stretching:
                head, J_head = at_head(frames[:, k, 0], None if J is None else J[:, k, 0], inputs.q[:, column],
                                       column)
                frames[:, k, 0] = head
                if J is not None:
                    J[:, k, 0] = J_head
            frames = frames.reshape(F * T, 4, 4, 4)
            gradients = out.A is not None
            theta, valid, g = angle(*components(frames, up_local[0] if T == 1 else
                                                np.broadcast_to(up_local, (F, T, 3)).reshape(F * T, 3)),
                                    _Arrays, gradients)
            theta, valid = theta.reshape(F, T), valid.reshape(F, T)
            out.y[:, rows] = theta
            out.yd[:, rows] = 0.0
            out.task_weight[:, rows] = np.where(valid, weight, 0.0)
            out.rotation_error[:, index] = np.abs(theta)
            out.position_error[:, index] = np.nan
            if not gradients:
                return
            twist = np.zeros((F * T, 1, 24))
            twist[:, 0, _TWIST_ROWS] = np.stack([c for vector in g for c in vector], axis=1)
            row = (twist @ J.reshape(F * T, 24, -1)).reshape(F, T, -1) * valid[..., None]
            n = inputs.n
            out.A[:, rows] = row[..., :n]
            if out.B is not None:
                out.B[:, rows] = -row[..., n:]
        return evaluate

    def evaluate(self, place: Place, inputs: TaskInputs, out: Stack) -> None:
        """This pole alone: its `batch` of one."""
        type(self).batch([self], [place])(inputs, out)

    @classmethod
    def one_frame_batch(cls, tasks, places):
        """All poles of a scene at one frame, each on Python floats (_OneFrame)."""
        return _OneFrame(tasks, places)


class _OneFrame:
    """The poles of a scene at one frame (F = 1): per pole, `angle` on Python floats (a handful of
    numpy calls for all poles instead of a few hundred)."""

    def __init__(self, tasks, places):
        self.ends = np.array([[p.first_endpoint + j for j in range(4)] for p in places])     # (T, 4)
        self.rows = as_slice(np.array([p.rows.start for p in places]))
        self.index = as_slice(np.array([p.index for p in places]))
        self.up_local = np.array([t.up_local for t in tasks])[:, :, None]                   # (T, 3, 1)
        self.weight = [t.weight for t in tasks]
        self.stretching = [(k, t.root_stretch) for k, t in enumerate(tasks) if t.root_stretch is not None]

    def __call__(self, inputs: TaskInputs, out: Stack) -> None:
        frames = inputs.frames[0].take(self.ends, axis=0)                                   # (T, 4, 4, 4)
        J = None if out.A is None else inputs.jacobians[0].take(self.ends, axis=0)         # (T, 4, 6, n + n_u)
        for k, column in self.stretching:                     # those roots at their heads (at_head)
            head, J_head = at_head(frames[k:k + 1, 0], None if J is None else J[k:k + 1, 0],
                                   inputs.q[0:1, column], column)
            frames[k, 0] = head[0]
            if J is not None:
                J[k, 0] = J_head[0]
        up = (frames[:, 0, :3, :3] @ self.up_local)[..., 0]
        positions = frames[:, :, :3, 3]
        vectors = np.concatenate([up[:, None], positions[:, 1:] - positions[:, :1]], axis=1)   # up, e, d, p
        gradients = out.A is not None
        theta, weight, rows = [], [], []
        for (up, e, d, p), task_weight in zip(vectors.tolist(), self.weight):
            turn, valid, g = angle(up, e, d, p, _Floats, gradients)
            theta.append(turn)
            weight.append(task_weight if valid else 0.0)
            if gradients:        # over the twists' rows of root, effector, target, pole (linear, angular)
                rows.append([*g[0], *g[4], *g[1], 0.0, 0.0, 0.0, *g[2], 0.0, 0.0, 0.0, *g[3], 0.0, 0.0, 0.0]
                            if valid else _NO_ROW)
        out.y[0, self.rows] = theta
        out.yd[0, self.rows] = 0.0
        out.task_weight[0, self.rows] = weight
        out.rotation_error[0, self.index] = [abs(angle) for angle in theta]
        out.position_error[0, self.index] = np.nan
        if not gradients:
            return
        T = len(theta)
        row = (np.array(rows)[:, None] @ J.reshape(T, 24, -1))[:, 0]
        n = inputs.n
        out.A[0, self.rows] = row[:, :n]
        if out.B is not None:
            out.B[0, self.rows] = -row[:, n:]


class _Floats:
    """`angle` on Python floats: one pole at one frame."""

    sqrt, atan2 = math.sqrt, math.atan2

    @staticmethod
    def where(condition, a, b):
        return a if condition else b


class _Arrays:
    """`angle` on numpy arrays (N,): N poles or frames at once."""

    sqrt, atan2, where = np.sqrt, np.arctan2, np.where


# Where `angle`'s five gradients enter the twist rows of root, effector, target, pole (linear,
# angular): root linear, effector linear, target linear, pole linear, root angular.
_TWIST_ROWS = [0, 1, 2, 6, 7, 8, 12, 13, 14, 18, 19, 20, 3, 4, 5]
_NO_ROW = [0.0] * 24


def angle(up, e, d, p, ops, gradients: bool = False, sizes: bool = False):
    """theta (0 where not valid), valid and, with `gradients`, d theta / d (h, e, t, P, root's
    rotation) as five 3-vectors (not masked where not valid), or with `sizes` (|e - h|, |t - h|,
    |p_perp|, |w_perp|), from up, e - h, t - h, P - h given per component (3-sequences): Python
    floats with ops _Floats (one pole at one frame) or arrays (N,) with _Arrays (N at once), the
    one arithmetic for both. The module docstring's vectors are written out per component, one
    line per vector, as names x_ y_ z_ (on Python floats a function call per vector would cost
    more than its arithmetic)."""
    sqrt, where = ops.sqrt, ops.where
    upx, upy, upz = up
    ex, ey, ez = e
    dx, dy, dz = d
    px, py, pz = p
    E, D, P = sqrt(ex * ex + ey * ey + ez * ez), sqrt(dx * dx + dy * dy + dz * dz), sqrt(px * px + py * py + pz * pz)
    E1, D1 = where(E > 0.0, E, 1.0), where(D > 0.0, D, 1.0)
    ie, id_ = 1.0 / E1, 1.0 / D1
    ax, ay, az = ex * ie, ey * ie, ez * ie                                      # a = dir
    ux, uy, uz = dx * id_, dy * id_, dz * id_                                   # u
    kx, ky, kz = ay * uz - az * uy, az * ux - ax * uz, ax * uy - ay * ux        # k = a x u
    cos = ax * ux + ay * uy + az * uz
    turnable = (cos >= 0.0) | (sqrt(kx * kx + ky * ky + kz * kz) > _ON_AXIS)   # not straight away
    inv = 1.0 / where(turnable, 1.0 + cos, 1.0)                                # 1 / one_plus
    qx, qy, qz = ky * upz - kz * upy, kz * upx - kx * upz, kx * upy - ky * upx  # k_up = k x up
    rx, ry, rz = ky * qz - kz * qy, kz * qx - kx * qz, kx * qy - ky * qx        # k x k_up
    wx, wy, wz = upx + qx + rx * inv, upy + qy + ry * inv, upz + qz + rz * inv  # w = Q up
    u_w, u_p, a_up = ux * wx + uy * wy + uz * wz, ux * px + uy * py + uz * pz, ax * upx + ay * upy + az * upz
    vx, vy, vz = wx - u_w * ux, wy - u_w * uy, wz - u_w * uz                    # w_perp
    ox, oy, oz = px - u_p * ux, py - u_p * uy, pz - u_p * uz                    # p_perp
    lx, ly, lz = upx - a_up * ax, upy - a_up * ay, upz - a_up * az              # up_perp
    size = E + D + P
    P_perp = sqrt(ox * ox + oy * oy + oz * oz)
    valid = ((E > _AT_ROOT * size) & (D > _AT_ROOT * size) & turnable & (P_perp > _ON_AXIS * P)
             & (sqrt(lx * lx + ly * ly + lz * lz) > _ON_AXIS))
    mx, my, mz = py * wz - pz * wy, pz * wx - px * wz, px * wy - py * wx        # p x w
    s, c = ux * mx + uy * my + uz * mz, px * wx + py * wy + pz * wz - u_p * u_w
    theta = ops.atan2(s, c)
    theta = where(valid, where(theta <= -math.pi, theta + 2 * math.pi, theta), 0.0)
    if sizes:
        return theta, valid, (E, D, P_perp, sqrt(vx * vx + vy * vy + vz * vz))
    if not gradients:
        return theta, valid, None
    N = where(valid, s * s + c * c, 1.0)
    sN, cN = s / N, c / N
    # g_p = (c w x u - s w_perp) / N, g_w = (c u x p - s p_perp) / N, g_u = (c p x w + s (u_w p + u_p w)) / N
    gpx, gpy, gpz = (cN * (wy * uz - wz * uy) - sN * vx, cN * (wz * ux - wx * uz) - sN * vy,
                     cN * (wx * uy - wy * ux) - sN * vz)
    gwx, gwy, gwz = (cN * (uy * pz - uz * py) - sN * ox, cN * (uz * px - ux * pz) - sN * oy,
                     cN * (ux * py - uy * px) - sN * oz)
    gux, guy, guz = (cN * mx + sN * (u_w * px + u_p * wx), cN * my + sN * (u_w * py + u_p * wy),
                     cN * mz + sN * (u_w * pz + u_p * wz))
    hx, hy, hz = ky * gwz - kz * gwy, kz * gwx - kx * gwz, kx * gwy - ky * gwx  # k_g = k x g_w
    # m = up x g_w + (k_up x g_w - up x k_g) / one_plus,  z = -g_w . (k x k_up) / one_plus^2
    nx = upy * gwz - upz * gwy + inv * (qy * gwz - qz * gwy - (upy * hz - upz * hy))
    ny = upz * gwx - upx * gwz + inv * (qz * gwx - qx * gwz - (upz * hx - upx * hz))
    nz = upx * gwy - upy * gwx + inv * (qx * gwy - qy * gwx - (upx * hy - upy * hx))
    z = -(gwx * rx + gwy * ry + gwz * rz) * inv * inv
    # g_dir = u x m + z u,  g_u = g_u - a x m + z a,  g_up = g_w - k_g + k x k_g / one_plus
    fx, fy, fz = uy * nz - uz * ny + z * ux, uz * nx - ux * nz + z * uy, ux * ny - uy * nx + z * uz
    gux, guy, guz = (gux - (ay * nz - az * ny) + z * ax, guy - (az * nx - ax * nz) + z * ay,
                     guz - (ax * ny - ay * nx) + z * az)
    bx, by, bz = (gwx - hx + inv * (ky * hz - kz * hy), gwy - hy + inv * (kz * hx - kx * hz),
                  gwz - hz + inv * (kx * hy - ky * hx))
    # g_e = (g_dir - (g_dir . a) a) / E,  g_t = (g_u - (g_u . u) u) / D
    f_a, g_u_u = fx * ax + fy * ay + fz * az, gux * ux + guy * uy + guz * uz
    gex, gey, gez = (fx - f_a * ax) / E1, (fy - f_a * ay) / E1, (fz - f_a * az) / E1
    gtx, gty, gtz = (gux - g_u_u * ux) / D1, (guy - g_u_u * uy) / D1, (guz - g_u_u * uz) / D1
    return theta, valid, [(-(gpx + gex + gtx), -(gpy + gey + gty), -(gpz + gez + gtz)), (gex, gey, gez),
                         (gtx, gty, gtz), (gpx, gpy, gpz),
                         (upy * bz - upz * by, upz * bx - upx * bz, upx * by - upy * bx)]   # up x g_up

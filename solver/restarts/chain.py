"""One pose task on a serial chain of revolute joints, evaluated for many starts at once with
few numpy calls and arrays allocated once (solver.restarts).

Scene.evaluate serves any tree, any joint kind and any stack of tasks; for R starts of one query
of the common robot-arm case (revolute joints one after another, the last link's frame brought
onto a target in position and rotation) most of its calls are bookkeeping. `PoseChain` computes
the same system from constants folded per chain. Each joint's frame is turned (a constant Q_k
with Q_k z = a_k) so that it rotates about its own z axis, M_k(theta) Q_k = Q_k Rz(theta) for the
revolute kind's transform M_k about a_k; with the fixed transforms N_k before it folded in,

    joint k           Q_{k-1}^T N_k M_k(theta) Q_k = sin theta S_k + (1 - cos theta) K_k + P_k
                      (the kind's constants [a_k]x, [a_k]x^2, I with Q_{k-1}^T N_k and Q_k folded
                      in: joints.Revolute.fold, times its `coefficients`)
    link frames       T_k = T_{k-1} Q_{k-1}^T N_k M_k(theta_k) Q_k,   effector  T_e = T_n E
    joint k's world axis and pivot:   w_k = z axis of T_k,   o_k = origin of T_k

and, as CopyPose with reference 'effector' gives them (tasks/copy_pose.py, tasks/base.py), with
the target T_t:

    y = (R_e^T (p_t - p_e), log(R_e^T R_t)) = (p, phi),   yd = 0
    A = -diag(R_e^T, J(phi)^-1 R_e^T) [w_k x (p_t - o_k); w_k]      (columns k)

(the effector's twist shifted to the target point, turned into the effector frame, through
Jf^-1), with J(phi)^-1 = I - [phi]x / 2 + d [phi]x^2, d = (1 - t sin t / (2 (1 - cos t))) / t^2
= (1 - (t/2) / tan(t/2)) / t^2, t = |phi| (1/12 + t^2/720 for small t). log is rotations.log_map's:
phi = t / (2 sin t) vee(R), and near t = pi the axis from the symmetric part.

The chain is evaluated in the target's frame: T_t^-1 is folded into the first joint's constants
once per target (`aim`), so every frame T'_k = T_t^-1 T_k, and with M = R'_e^T = R_e^T R_t
(R'_e, p'_e the effector's rotation and origin in that frame; w'_k, o'_k joint k's axis and pivot)

    p = -M p'_e,   phi = log(M),   A = [M (w'_k x o'_k); -J(phi)^-1 M w'_k]

(rotating both factors of a cross product rotates it: R_e^T (w_k x (p_t - o_k)) = -M (w'_k x
o'_k)), which saves the target's products and differences in every evaluation. y, A and the
errors |p|, |phi| equal Scene.evaluate's to rounding (tests/apps/test_restarts.py compares them).
"""

from __future__ import annotations

import weakref

import numpy as np

from ..joints import REVOLUTE as REVOLUTE_KIND
from ..model import REVOLUTE
from ..rotations import _SMALL
from ..scene import Scene
from ..tasks import CopyPose

# cross(a, b)_i = EPSILON[i, 3 j + k] a_j b_k: the Levi-Civita symbol as a (3, 9) matrix.
_EPSILON = np.zeros((3, 9))
for _i, _j, _k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
    _EPSILON[_i, 3 * _j + _k], _EPSILON[_i, 3 * _k + _j] = 1.0, -1.0
# Where log reads the axis from the symmetric part: t within about 1.4e-3 of pi (sin t < 1.5e-3),
# beyond which vee(R) = 2 sin t k keeps a relative accuracy of 1e-12 (rotations.log_map switches
# at cos t = -0.99; the two agree to rounding in between).
_NEAR_PI = -1.0 + 1e-6
# Linear maps of a flattened 3 x 3 matrix -M (-M9 @ map): half the trace of M, and vee(M) = (M[2,1] -
# M[1,2], M[0,2] - M[2,0], M[1,0] - M[0,1]); of a vector phi: [phi]x / 2 flattened.
_MINUS_HALF_TRACE = np.zeros(9)
_MINUS_HALF_TRACE[[0, 4, 8]] = -0.5
_MINUS_VEE = np.zeros((9, 3))
for _i, (_plus, _minus) in enumerate(((7, 5), (2, 6), (3, 1))):
    _MINUS_VEE[_plus, _i], _MINUS_VEE[_minus, _i] = -1.0, 1.0
_HALF_SKEW = np.zeros((3, 9))
for _i, (_plus, _minus) in enumerate(((7, 5), (2, 6), (3, 1))):
    _HALF_SKEW[_i, _plus], _HALF_SKEW[_i, _minus] = 0.5, -0.5
_QUARTER = np.full(3, 0.25)
_IDENTITY3 = np.eye(3)
_LAST_ROW = np.array([0.0, 0.0, 0.0, 1.0])


def _looped(shape) -> np.ndarray:
    """A zeroed array of `shape` whose last axis takes every other item of a buffer twice as long.
    numpy's matmul calls BLAS once per matrix of a stack when every operand's rows are contiguous,
    and runs its own loop otherwise; for stacks of 3 x 3 to 4 x 7 products its loop is the faster,
    and an output like this one keeps matmul on it (the values are the same products, summed in
    another order)."""
    return np.zeros(tuple(shape[:-1]) + (2 * shape[-1],))[..., ::2]


def _turn_z_onto(a) -> np.ndarray:
    """A rotation Q (4, 4) with Q z = a (a unit vector)."""
    a = np.asarray(a, dtype=float)
    helper = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, a)
    x /= np.linalg.norm(x)
    Q = np.eye(4)
    Q[:3, :3] = np.column_stack([x, np.cross(a, x), a])
    return Q


def rigid(target: np.ndarray, tolerance: float = 1e-9) -> bool:
    """Whether a frame's rotation part is a rotation (R^T R = I within `tolerance`, det R > 0):
    the frames `PoseChain.aim` takes."""
    R = target[:3, :3]
    (a, b, c), (d, e, f), (g, h, i) = R.tolist()
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    return det > 0.0 and float(np.abs(R.T @ R - _IDENTITY3).max()) <= tolerance


class PoseChain:
    """The constants of one scene that `pose_chain` accepts, and its evaluation for R starts."""

    def __init__(self, scene: Scene, axes, ends_before, after, task: CopyPose):
        self.names, self.n = list(scene.names), len(axes)       # no reference to the scene: it keys the cache
        axes = np.asarray(axes, dtype=float)
        turns = np.stack([_turn_z_onto(a) for a in axes])     # Q_k
        before = np.array(ends_before)                           # N_k, then Q_{k-1}^T N_k
        before[1:] = turns[:-1].swapaxes(-1, -2) @ before[1:]
        # The last joint's frame Q_n, and Q_n^T to the effector after it: its transform to the effector.
        folded_after = turns.copy()
        folded_after[-1] = after @ task.effector.offset
        self.constants = REVOLUTE_KIND.fold(axes, before, folded_after)      # (n, 3, 16)
        # The last joint's axis and pivot: the z column and origin of Q_{n-1}^T N_n Q_n, which Rz keeps.
        self.last_columns = (before[-1] @ turns[-1])[:, 2:]
        self.target_offset = task.target.offset
        self.target_object = task.target.obj
        self.weight = np.asarray(task.task_weight, dtype=float)  # (6,): position rows, then rotation
        self.sqrt_weight = np.sqrt(self.weight)
        self.minus_sqrt_weight = -self.sqrt_weight
        self.lower, self.upper = scene.lower, scene.upper
        self.joint_weight = scene.joint_weight
        self.races: dict = {}                                   # solve_racing's arrays, per number of starts

    def workspace(self, R: int) -> "Workspace":
        """New arrays for evaluations of R starts (to keep and reuse: `evaluate` writes into them);
        `aim` gives them a target before the first evaluation."""
        ws = Workspace(R, self.n)
        np.copyto(ws.constants, self.constants)
        ws.last_columns[:] = self.last_columns
        return ws

    def target(self, objects: np.ndarray) -> np.ndarray:
        """The target frame (4, 4) from one query's object poses (K, 4, 4)."""
        return objects[self.target_object] @ self.target_offset

    def aim(self, target: np.ndarray, ws: "Workspace") -> None:
        """Evaluations in ws measure against `target` (4, 4), a rigid transform (see `rigid`):
        its inverse L = [R_t^T, -R_t^T p_t] folded into the first joint's constants (E is folded
        into the last one's once per chain), so that the chain's product is T'_e = L T_e; the last
        joint's axis and pivot, the z column and origin of T'_n, come from `last_columns` (L's
        product with them for a single joint)."""
        inverse = np.empty((4, 4))
        inverse[3] = _LAST_ROW
        np.copyto(inverse[:3, :3], target[:3, :3].T)
        np.matmul(inverse[:3, :3], target[:3, 3], out=inverse[:3, 3])
        np.negative(inverse[:3, 3], out=inverse[:3, 3])
        np.matmul(inverse, self.constants[0].reshape(3, 4, 4), out=ws.constants[0].reshape(3, 4, 4))
        if self.n == 1:
            np.matmul(inverse, self.last_columns, out=ws.last_columns)

    def evaluate(self, q: np.ndarray, ws: "Workspace", jacobians: bool = True) -> None:
        """Fill ws.y (R, 6), ws.position_error, ws.rotation_error, ws.cost (R,) and, with
        `jacobians`, ws.A (R, 6, n) for coordinates q (R, n) and the target `aim` gave ws, in
        the target's frame (the module docstring)."""
        n = self.n
        REVOLUTE_KIND.coefficients(q.T, ws.coefficients)
        np.matmul(ws.coefficients, ws.constants, out=ws.N16)    # the joints' folded transforms (n, R, 4, 4)
        N, T = ws.N, ws.T                                        # T (n, R, 4, 4): link frames after each joint
        if n == 1:
            np.copyto(ws.Te, N[0])
            ws.T[0, :, :, 2:] = ws.last_columns
        else:
            np.copyto(T[0], N[0])
            for k in range(1, n - 1):
                np.matmul(T[k - 1], N[k], out=T[k])
            np.matmul(T[n - 2], N[n - 1], out=ws.Te)
            if jacobians:                                        # the last joint's axis and pivot
                np.matmul(ws.before_last_rows, ws.last_columns, out=ws.last_axis_pivot)
        np.negative(ws.Te[:, :3, :3].swapaxes(-1, -2), out=ws.minus_M)   # -M = -R'_e^T
        np.matmul(ws.minus_M, ws.Te[:, :3, 3, None], out=ws.y[:, :3, None])    # p = -M p'_e
        self._log(ws)                                            # phi
        np.multiply(ws.y, ws.y, out=ws.yy)
        np.sqrt(ws.yy.reshape(-1, 2, 3).sum(axis=2), out=ws.errors)   # |p|, |phi|
        np.matmul(ws.yy, self.weight, out=ws.cost)
        if not jacobians:
            return
        np.copyto(ws.axes_pivots, T[:, :, :3, 2:].transpose(3, 2, 0, 1))
        w, o = ws.axes_pivots                                    # (3, n, R): w'_k, o'_k per start
        np.multiply(o[:, None], w[None, :], out=ws.outer)        # o_j w_k, (3, 3, n, R)
        np.matmul(_EPSILON, ws.outer.reshape(9, -1), out=ws.cross.reshape(3, -1))   # o' x w', (3, n, R)
        A = ws.A
        np.matmul(ws.minus_M, ws.cross.transpose(2, 0, 1), out=A[:, :3])   # M (w' x o')
        self._jacobian_inverse(ws)                               # ws.G = -J(phi)^-1 M
        np.matmul(ws.G, w.transpose(2, 0, 1), out=A[:, 3:])

    @staticmethod
    def _log(ws: "Workspace") -> None:
        """ws.y[:, 3:] = log(M), read from -M (ws.minus_M), as rotations.log_map computes it."""
        minus_M9 = ws.minus_M.reshape(-1, 9)
        cos_t = ws.cos_t
        np.matmul(minus_M9, _MINUS_HALF_TRACE, out=cos_t)        # trace(M) / 2
        cos_t -= 0.5                                             # may pass +-1 by rounding: arctan2 takes that
        vee = ws.vee
        np.matmul(minus_M9, _MINUS_VEE, out=vee)                 # vee(M)
        sin_t = ws.sin_t
        np.sqrt(np.matmul(vee * vee, _QUARTER), out=sin_t)       # |vee| / 2
        t = np.arctan2(sin_t, cos_t, out=ws.t)
        ratio = t / np.maximum(sin_t, 1e-300)
        ratio *= 0.5
        if t.min() < _SMALL:
            ratio = np.where(t < _SMALL, 0.5 + t * t / 12.0, ratio)
        phi = ws.y[:, 3:]
        np.multiply(ratio[:, None], vee, out=phi)
        if cos_t.min() < _NEAR_PI:
            near_pi = cos_t < _NEAR_PI
            R, c = -ws.minus_M[near_pi], cos_t[near_pi]
            kk = ((R + R.swapaxes(-1, -2)) / 2.0 - c[:, None, None] * np.eye(3)) / (1.0 - c)[:, None, None]
            column = np.argmax(np.diagonal(kk, axis1=-2, axis2=-1), axis=-1)
            axis = np.take_along_axis(kk, column[:, None, None], axis=-1)[..., 0]
            axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
            sign = np.where(np.sum(axis * vee[near_pi], axis=-1) < 0.0, -1.0, 1.0)
            phi[near_pi] = (sign * t[near_pi])[:, None] * axis

    @staticmethod
    def _jacobian_inverse(ws: "Workspace") -> None:
        """ws.G = -J(phi)^-1 M = -M + [phi]x M / 2 - d [phi]x^2 M for phi = ws.y[:, 3:] (see the
        module docstring), as (4 d [phi]x / 2) ([phi]x / 2 (-M)) - [phi]x / 2 (-M) + (-M)."""
        phi, K, t = ws.y[:, 3:], ws.K, ws.t                     # t = |phi|, from _log
        np.matmul(phi, _HALF_SKEW, out=K.reshape(-1, 9))         # [phi]x / 2
        small = t.min() < _SMALL
        ts = np.where(t < _SMALL, 1.0, t) if small else t
        half = 0.5 * ts
        d = 1.0 - half / np.tan(half)          # = 1 - t sin t / (2 (1 - cos t)), without its cancellation
        d /= ts * ts
        if small:
            d = np.where(t < _SMALL, 1.0 / 12.0 + t * t / 720.0, d)
        d *= 4.0
        np.matmul(K, ws.minus_M, out=ws.KR)                      # -[phi]x M / 2
        np.multiply(K, d[:, None, None], out=ws.Kd)              # 2 d [phi]x
        np.matmul(ws.Kd, ws.KR, out=ws.G)                        # -d [phi]x^2 M
        ws.G -= ws.KR
        ws.G += ws.minus_M


class Workspace:
    """Arrays of one evaluation for R starts of an n-joint chain, and the constants `aim` folds
    with its target."""

    def __init__(self, R: int, n: int):
        self.R, self.n = R, n
        self.constants = np.empty((n, 3, 16))                   # the chain's, the target folded in
        self.last_columns = np.empty((4, 2))
        self.coefficients = np.ones((n, R, 3))                  # (sin, 1 - cos, 1) per joint and start
        self.N16 = np.empty((n, R, 16))
        self.N = self.N16.reshape(n, R, 4, 4)
        self.T = _looped((n, R, 4, 4))                          # the last one: its z column and origin only
        self.before_last_rows = self.T[max(n - 2, 0)].reshape(R * 4, 4)
        self.last_axis_pivot = self.T[n - 1, :, :, 2:].reshape(R * 4, 2)     # views into T
        self.Te = _looped((R, 4, 4))
        self.minus_M = np.empty((R, 3, 3))
        self.cos_t, self.sin_t, self.t, self.vee = np.empty(R), np.empty(R), np.empty(R), np.empty((R, 3))
        self.y, self.yy = np.empty((R, 6)), np.empty((R, 6))
        self.errors, self.cost = np.empty((R, 2)), np.empty(R)
        self.position_error, self.rotation_error = self.errors[:, 0], self.errors[:, 1]
        self.axes_pivots = np.empty((2, 3, n, R))               # joints' axes and pivots, starts last
        self.outer, self.cross = np.empty((3, 3, n, R)), np.empty((3, n, R))
        self.K, self.Kd = np.zeros((R, 3, 3)), np.empty((R, 3, 3))
        self.KR, self.G = _looped((R, 3, 3)), _looped((R, 3, 3))
        self.A = _looped((R, 6, n))


_CHAINS: "weakref.WeakKeyDictionary[Scene, PoseChain | None]" = weakref.WeakKeyDictionary()


def pose_chain(scene: Scene) -> PoseChain | None:
    """The scene's PoseChain (made once per scene), or None where it has none (see _make)."""
    if scene not in _CHAINS:
        _CHAINS[scene] = _make(scene)
    return _CHAINS[scene]


def _make(scene: Scene) -> PoseChain | None:
    """A PoseChain of the scene, or None where it is not one pose task on a serial chain: one
    armature placed at the origin (no bases), every coordinate a revolute joint on the path from
    the root to the effector's segment, no post transforms, no coupling, and a single CopyPose on
    all six axes with reference 'effector', no clamp, positive weights, from a segment to an object."""
    model = scene.model
    if scene.coupling is not None or len(scene.constraints) != 1 or model.n_armatures != 1 or model.has_post:
        return None
    task = scene.constraints[0]
    if (type(task) is not CopyPose or task.reference != "effector" or task.selected.tolist() != list(range(6))
            or task.clamp is not None or not np.all(task.task_weight > 0)
            or task.effector.segment < 0 or task.target.obj < 0):
        return None
    if any(j.kind != REVOLUTE for j in model.joints) or model.n_coordinates == 0:
        return None
    path, s = [], task.effector.segment
    while s >= 0:
        path.append(s)
        s = int(model.parent[s])
    path.reverse()
    joints, ends_before, pending = [], [], np.eye(4)
    for seg in path:
        pending = pending @ model.rest[seg]
        for j in np.flatnonzero(model.joint_segment == seg):
            joints.append(int(j))
            ends_before.append(pending)
            pending = np.eye(4)
    if joints != list(range(model.n_coordinates)):      # every coordinate on the path, in order
        return None
    return PoseChain(scene, model.joint_axis[joints], ends_before, pending, task)

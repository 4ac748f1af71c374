"""Gradient descent IK as the lecture teaches it, and a Jacobian checker built on the same pieces.

A point r fixed to segment s of a model moves with the coordinates q (F frames, n coordinates):

    p(q) = W_s(q) [r; 1]            (world position; W_s from forward kinematics)
    C(q) = p(q) - p_bar             (3 residuals: the lecture's constraint)
    f(q) = ||C(q)||^2               (the objective; its minimum is 0 when p_bar is reachable)
    grad f = 2 J^T C,               J = dp/dq (3 x n), rows 0-2 of the geometric Jacobian

The gradient comes either from the analytic Jacobian (kinematics.point_jacobian) or, as in the
lecture's lab, from central finite differences of f itself (finite_differences.numerical_jacobian).

Each iteration moves q <- P(q - alpha d), d = grad f, P the projection onto the joint limits
(identity when there are none). The step size alpha is not a constant: it starts at the Cauchy
step of the linearised residual,

    f(q - alpha d) ~ ||C - alpha J d||^2   is smallest at   alpha_0 = C^T J d / ||J d||^2 = ||d||^2 / (2 ||J d||^2)

(J d from the analytic Jacobian, or from a central difference of p along d when the gradient is
numerical), and is halved until the Armijo condition holds:

    f(q_new) <= f(q) + c d^T (q_new - q),    c = 1e-4     (= f(q) - c alpha ||d||^2 without limits)

The iteration stops, per frame, when f <= tolerance^2 (converged), when no halving of alpha
satisfies Armijo or d vanishes (a stationary point: not converged unless f is small enough), or
after max_iterations. All frames iterate together; finished frames drop out of the batch.

`check_jacobians` compares the engine's geometric Jacobian of every segment's tail (or given points)
with central differences of forward kinematics: the linear rows against dp/dq, the angular rows
against omega_c = vee(dR/dq_c R^T).

`quadruped_leg` builds the lecture's example: a leg of three revolute joints, each a rotation
R_z about its own frame's z axis, p(q) = F01 Rz(t1) F12 Rz(t2) F23 Rz(t3) p0 with
p0 = (0.062, -0.062, 0.018) in the foot frame, placed in the world by the torso pose.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .tasks import CopyPose, on_object, on_segment
from .finite_differences import numerical_jacobian, relative_difference
from .kinematics import forward_kinematics, point_jacobian
from .limits import project
from .model import Model, Segment, revolute
from .rotations import axis_angle_matrix
from .scene import Scene

ARMIJO_C = 1e-4          # sufficient-decrease constant of the Armijo condition
MAX_HALVINGS = 60        # 2^-60 alpha_0: below that no step in double precision changes f


@dataclass
class GradientResult:
    """Per frame: solved q (F, n), distance |p(q) - p_bar| (F,), iterations (F,), converged (F,)."""

    q: np.ndarray
    error: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    seconds: float


def point_positions(model: Model, q: np.ndarray, segment: int, point, bases=None) -> np.ndarray:
    """World positions (F, 3) of the local `point` (3,) of `segment` at coordinates q (F, n)."""
    frames = forward_kinematics(model, q, bases).frames[:, segment]
    return frames[:, :3, :3] @ np.asarray(point, float) + frames[:, :3, 3]


def objective(model: Model, q: np.ndarray, segment: int, point, target: np.ndarray, bases=None) -> np.ndarray:
    """f(q) = ||p(q) - p_bar||^2 per frame (F,)."""
    C = point_positions(model, q, segment, point, bases) - target
    return np.sum(C * C, axis=-1)


def gradient_descent(model: Model, segment: int, point, target, q0, gradient: str = "analytic",
                     tolerance: float = 1e-6, max_iterations: int = 20000, bases=None,
                     fd_step: float = 1e-6) -> GradientResult:
    """Minimise ||p(q) - p_bar||^2 by gradient descent with Armijo backtracking (module docstring).

    `target` (F, 3) or (3,), `q0` (F, n) or (n,); `gradient` is 'analytic' (2 J^T C) or 'finite'
    (central differences of f with step `fd_step`); `tolerance` is on the distance |C|.
    """
    if gradient not in ("analytic", "finite"):
        raise ValueError(f"gradient must be 'analytic' or 'finite', not {gradient!r}")
    start = time.perf_counter()
    q = project(model, np.atleast_2d(np.asarray(q0, dtype=float)).copy())
    target = np.asarray(target, dtype=float)
    F = max(q.shape[0], target.shape[0] if target.ndim == 2 else 1)
    q = np.broadcast_to(q, (F, model.n_coordinates)).copy()
    target = np.broadcast_to(target, (F, 3))
    bases = None if bases is None else np.broadcast_to(np.asarray(bases, float), (F, model.n_armatures, 4, 4))
    point = np.asarray(point, dtype=float)
    seg = np.array([segment])

    def sub(array, idx):
        return None if array is None else array[idx]

    def residual(x, idx):
        return point_positions(model, x, segment, point, sub(bases, idx)) - target[idx]

    def f_of(x, idx):
        C = residual(x, idx)
        return np.sum(C * C, axis=-1)

    iterations = np.zeros(F, dtype=int)
    converged = np.zeros(F, dtype=bool)
    active = np.arange(F)
    f = f_of(q, active)
    goal = tolerance * tolerance
    while active.size:
        done = f[active] <= goal
        converged[active[done]] = True
        active = active[~done & (iterations[active] < max_iterations)]
        if not active.size:
            break
        x = q[active]
        if gradient == "analytic":
            pose = forward_kinematics(model, x, sub(bases, active))
            frames = pose.frames[:, segment]
            p = frames[:, :3, :3] @ point + frames[:, :3, 3]
            J = point_jacobian(model, pose, seg, p[:, None])[:, 0, :3]     # (A, 3, n)
            C = p - target[active]
            d = 2.0 * np.einsum("fkn,fk->fn", J, C)
            Jd = np.einsum("fkn,fn->fk", J, d)
        else:
            d = numerical_jacobian(lambda y: f_of(y, active), x, fd_step)
            norm = np.linalg.norm(d, axis=-1, keepdims=True)
            unit = d / np.maximum(norm, 1e-300)
            h = fd_step
            Jd = (residual(x + h * unit, active) - residual(x - h * unit, active)) / (2.0 * h) * norm
        dd = np.sum(d * d, axis=-1)
        JdJd = np.sum(Jd * Jd, axis=-1)
        stationary = (dd == 0.0) | (JdJd == 0.0)
        alpha = np.where(stationary, 0.0, 0.5 * dd / np.where(JdJd > 0, JdJd, 1.0))
        iterations[active] += 1

        # Armijo backtracking, all pending frames together.
        accepted = np.zeros(active.size, dtype=bool)
        pending = np.flatnonzero(~stationary)
        for _ in range(MAX_HALVINGS):
            if not pending.size:
                break
            idx = active[pending]
            trial = project(model, x[pending] - alpha[pending, None] * d[pending])
            f_trial = f_of(trial, idx)
            decrease = np.sum(d[pending] * (trial - x[pending]), axis=-1)     # d^T (q_new - q) <= 0
            ok = (f_trial <= f[idx] + ARMIJO_C * decrease) & np.any(trial != x[pending], axis=-1)
            q[idx[ok]] = trial[ok]
            f[idx[ok]] = f_trial[ok]
            accepted[pending[ok]] = True
            pending = pending[~ok]
            alpha[pending] *= 0.5
        # Frames where no step satisfied Armijo sit at a stationary point (to machine precision).
        active = active[accepted]
    error = np.sqrt(f)
    converged = error <= tolerance
    return GradientResult(q=q, error=error, iterations=iterations, converged=converged,
                          seconds=time.perf_counter() - start)


@dataclass
class JacobianCheck:
    """Relative differences (finite_differences.relative_difference, maximum over frames) between
    the engine's Jacobian and central differences, per segment: linear rows and angular rows."""

    linear: np.ndarray
    angular: np.ndarray

    @property
    def worst(self) -> float:
        return float(max(np.max(self.linear, initial=0.0), np.max(self.angular, initial=0.0)))


def check_jacobians(model: Model, q, points=None, bases=None, step: float = 1e-6,
                    jacobian=point_jacobian) -> JacobianCheck:
    """Compare `jacobian` (default kinematics.point_jacobian; same signature) at every segment's
    tail (0, length, 0) — or at `points` (S, 3) in the segments' frames — with central differences
    of forward kinematics at q (F, n); `bases` (F, A, 4, 4) as for forward_kinematics."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    S = len(model.segments)
    local = (np.stack([np.zeros(S), model.length, np.zeros(S)], axis=-1) if points is None
             else np.asarray(points, float).reshape(S, 3))
    segments = np.arange(S)

    def world(x):
        frames = forward_kinematics(model, x, bases).frames
        return np.einsum("fsij,sj->fsi", frames[..., :3, :3], local) + frames[..., :3, 3]

    def rotations(x):
        return forward_kinematics(model, x, bases).frames[..., :3, :3]

    pose = forward_kinematics(model, q, bases)
    J = jacobian(model, pose, segments, world(q))                          # (F, S, 6, n)
    linear = numerical_jacobian(world, q, step)                            # (F, S, 3, n)
    dR = numerical_jacobian(lambda x: rotations(x).reshape(x.shape[0], -1), q, step)
    dR = dR.reshape(q.shape[0], S, 3, 3, -1)
    W = np.einsum("fsijc,fskj->fsikc", dR, rotations(q))                    # dR/dq_c R^T, skew
    omega = np.stack([W[:, :, 2, 1], W[:, :, 0, 2], W[:, :, 1, 0]], axis=2)  # (F, S, 3, n)
    lin = np.array([relative_difference(J[:, s, :3], linear[:, s]) for s in segments])
    ang = np.array([relative_difference(J[:, s, 3:], omega[:, s]) for s in segments])
    return JacobianCheck(linear=lin, angular=ang)


# ---------------------------------------------------------------- the lecture's quadruped leg

TOE = (0.062, -0.062, 0.018)


def _transform(rotation=None, translation=(0.0, 0.0, 0.0)) -> np.ndarray:
    T = np.eye(4)
    if rotation is not None:
        T[:3, :3] = rotation
    T[:3, 3] = translation
    return T


def quadruped_offsets():
    """The fixed transforms of the lecture's chain, F01, F12, F23 (4x4 each).

    The lecture writes p(q) = F01 Rz(t1) F12 Rz(t2) F23 Rz(t3) p0 but gives no numbers for the F's;
    ours are a Pupper-sized front-left leg in the torso frame (x forward, y left, z up):
    F01 puts the hip 0.10 forward and 0.05 left and turns z onto the torso's x axis (abduction);
    F12 moves 0.03 further left and turns z onto the torso's y axis (hip flexion), so the thigh's
    x axis points down; F23 runs 0.08 along the thigh to the knee, whose z axis is parallel to the
    hip's. The toe p0 = (0.062, -0.062, 0.018) then sits below and ahead of the knee.
    """
    y90 = axis_angle_matrix(np.array([0.0, 1.0, 0.0]), np.pi / 2)
    x_90 = axis_angle_matrix(np.array([1.0, 0.0, 0.0]), -np.pi / 2)
    F01 = _transform(y90, (0.10, 0.05, 0.0))
    F12 = _transform(x_90, (0.0, 0.03, 0.0))
    F23 = _transform(None, (0.08, 0.0, 0.0))
    return F01, F12, F23


def default_torso() -> np.ndarray:
    """The torso's pose in the world: 0.16 above the ground, turned 0.3 rad about the vertical."""
    return _transform(axis_angle_matrix(np.array([0.0, 0.0, 1.0]), 0.3), (0.2, -0.1, 0.16))


def quadruped_leg(torso=None) -> tuple[Model, int, np.ndarray]:
    """The lecture's leg as a model (three segments, one revolute Z joint each) placed in the
    world by `torso` (4x4, default_torso() when None); returns (model, foot segment, toe p0)."""
    torso = default_torso() if torso is None else np.asarray(torso, float)
    F01, F12, F23 = quadruped_offsets()
    model = Model([
        Segment("hip", -1, torso @ F01, (revolute("Z", name="theta1"),)),
        Segment("thigh", 0, F12, (revolute("Z", name="theta2"),)),
        Segment("foot", 1, F23, (revolute("Z", name="theta3"),)),
    ])
    return model, 2, np.array(TOE)


def quadruped_scene(torso=None) -> Scene:
    """The lecture's reaching task for the engine: the toe follows object 0 (position only)."""
    model, foot, toe = quadruped_leg(torso)
    return Scene(model, [CopyPose(on_segment(foot, toe), on_object(0), name="toe")], n_objects=1)

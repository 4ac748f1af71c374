"""The Jacobian checker (solver.gradient).

`check_jacobians` compares the engine's geometric Jacobian of every segment's tail (or given
points) with central differences of forward kinematics: the linear rows against dp/dq, the angular
rows against omega_c = vee(dR/dq_c R^T).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..finite_differences import numerical_jacobian, relative_difference
from ..kinematics import forward_kinematics, point_jacobian
from ..model import Model


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

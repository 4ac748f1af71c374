"""The keypoint term's full Hessian, for the Newton steps of the trajectory fit (fit.py).

Gauss-Newton's H = sum_k w_k J_k^T J_k leaves out the residuals' curvature,
sum_k w_k e_k . d2x_k/dq2, of the order of the residuals over the lever arms. Where the keypoints
leave a direction nearly free (two bones turning about nearly one axis, an upper arm's twist that
the forearm's turn undoes) only the weak pull to rest holds it, and there the term left out is
larger than what is kept: Gauss-Newton's steps along such a valley overshoot, the damping shortens
them, and the fit creeps along it for many iterations. Newton's steps with the full Hessian
follow it in a few.

The full Hessian is the derivative of the gradient (data_term's descent side)

    g(q) = -sum_k J_k^T f_k,   f_k = w_k e_k (per axis),

taken by forward differences. The gradient needs no Jacobian: kinematics.point_jacobian_transpose_times
sums each coordinate's (x_k x f_k; f_k) over the keypoints it moves and takes one product with its
twist.

Coordinates that move no keypoint in common (the two elbows) are stepped together, one gradient
per group. What a coordinate moves is its segment's subtree, so any two such sets are nested or
apart. Column c's entry in row i is read from its group's difference where no other member moves
a keypoint that i moves; where another does, i moves both and so every keypoint c moves (i is an
ancestor), and the entry is read from row c of i's own group, where no other member can
overlap i, by symmetry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..geometry import points_on
from ..kinematics import forward_kinematics, point_jacobian_transpose_times
from .data_term import per_axis
from .placement import Placement

STEP = 1e-6                 # the forward difference's step (radians or rig units)
BATCH = 4096                # frames per forward-kinematics call (groups times frames)


def gradient(placement: Placement, Q, y, w) -> np.ndarray:
    """g (F, n) of the module docstring, as data_term gives it, from forward kinematics alone."""
    model = placement.model
    pose = forward_kinematics(model, Q)
    x = points_on(pose.frames[:, placement.segments], placement.offsets)
    f = per_axis(w) * (x - y)
    return -point_jacobian_transpose_times(model, pose, placement.segments, x, f)


@dataclass(frozen=True)
class Grouping:
    """Coordinates stepped together: `steps` (G, n) one row per group; `group` (n,) each
    coordinate's; `read` (n, n): entry (i, c) of the Hessian read from the difference of c's
    group (else from (c, i)); `nonzero` (n, n): coordinates moving a keypoint in common (the
    Hessian's pattern)."""

    steps: np.ndarray
    group: np.ndarray
    read: np.ndarray
    nonzero: np.ndarray


def grouping(placement: Placement) -> Grouping:
    """Greedy groups of coordinates moving no keypoint in common, largest reach first."""
    moves = placement.model.moves[:, placement.segments]                        # (n, K)
    n = moves.shape[0]
    groups = []
    for c in np.argsort(-moves.sum(axis=1), kind="stable"):
        for group in groups:
            if not (moves[group].any(axis=0) & moves[c]).any():
                group.append(int(c))
                break
        else:
            groups.append([int(c)])
    shared = (moves.astype(int) @ moves.T.astype(int)) > 0                       # (n, n)
    steps = np.zeros((len(groups), n))
    of = np.zeros(n, int)
    read = np.zeros((n, n), bool)
    for g, group in enumerate(groups):
        steps[g, group] = 1.0
        of[group] = g
        for c in group:
            others = [d for d in group if d != c]
            read[:, c] = ~shared[:, others].any(axis=1)
    return Grouping(steps, of, read, shared)


def full_hessian(placement: Placement, Q, y, w, g, groups: Grouping) -> np.ndarray:
    """The Hessian (F, n, n) of the keypoint term's half cost at Q (H_gn plus the curvature term),
    `g` the gradient there (data_term's), `groups` from grouping(placement)."""
    F, n = Q.shape
    G = groups.steps.shape[0]
    per_call = max(1, BATCH // F)
    difference = np.empty((G, F, n))
    for a in range(0, G, per_call):
        steps = groups.steps[a:a + per_call]
        b = steps.shape[0]
        stepped = (Q[None] + STEP * steps[:, None]).reshape(b * F, n)
        tiled = np.broadcast_to(y, (b,) + y.shape).reshape((b * F,) + y.shape[1:])
        w_tiled = np.broadcast_to(w, (b,) + w.shape).reshape((b * F,) + w.shape[1:])
        difference[a:a + b] = (g - gradient(placement, stepped, tiled, w_tiled).reshape(b, F, n)) / STEP
    H = np.transpose(difference[groups.group], (1, 2, 0))                  # (F, i, c): c's group's
    H = np.where(groups.read, H, np.swapaxes(H, 1, 2)) * groups.nonzero
    return 0.5 * (H + np.swapaxes(H, 1, 2))

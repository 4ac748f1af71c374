"""The retarget's batched prioritized least squares: hard tasks exactly, soft ones as well as they can.

Per frame, with the hard tasks' rows A_h dq = b_h (contact pins: A_h = the point's Jacobian,
b_h = pin - point; a floor that binds: A_h = up^T J, b_h = floor - height) and the soft tasks'
weighted rows A_s dq = b_s (world rotations: the bone's angular Jacobian and log(D R^T); points:
their Jacobian and target - point), one Gauss-Newton step is the task-priority step

    dq = argmin |A_s dq - b_s|^2 + mu |dq|^2   subject to   A_h dq = b_h

(H = A_s^T A_s and g = A_s^T b_s suffice; priority_step solves it by its Schur complement): the
soft tasks move only what leaves the hard ones met to first order, and the iteration converges
to poses where the hard tasks hold exactly and the soft error is least among them (mu damps the
step, not the answer). Since the gradient of |log(D R^T)|^2 / 2 with respect to the bone's
angular velocity is exactly -log(D R^T), the rotation rows' fixed point is the true least-squares
optimum. Joint limits hold exactly, as update.weighted_step holds them: coordinates that would
leave are put on their limit and locked, the rest solved again. The floor is an inequality, by
active sets: a contact point not pinned in a frame gets a floor row where it lies below the floor
or the step would take it there, and loses it where the row's multiplier pulls it down (it would
rise off the floor); frames whose set changed are solved again.

Every array has a leading frame axis; frames that have converged drop out of the iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import update
from ..geometry import points_on
from ..kinematics import forward_kinematics, point_jacobian
from ..model import Model
from ..rotations import log_map
from ..runtime.blas_threads import one_blas_thread
from ..scene import Scene

_HARD_DAMPING = 1e-6      # scene units per unit step: hard directions weaker than this are damped


@dataclass
class Problem:
    """One retarget for the solve: F frames, R rotation tasks, E soft points, P contact points.

    rotation_segments (R,), rotations (F, R, 3, 3) desired world rotations, rotation_weight (R,);
    point_segments (E,), point_local (E, 3), point_targets (F, E, 3), point_weight (F, E);
    contact_segments (P,), contact_local (P, 3), pins (F, P, 3), pinned (F, P) bool, and the
    contact points' soft targets (F, P, 3) with their weights (F, P) (0: none);
    floor (height along the unit vector `up`)."""

    model: Model
    rotation_segments: np.ndarray
    rotations: np.ndarray
    rotation_weight: np.ndarray
    point_segments: np.ndarray
    point_local: np.ndarray
    point_targets: np.ndarray
    point_weight: np.ndarray
    contact_segments: np.ndarray
    contact_local: np.ndarray
    pins: np.ndarray
    pinned: np.ndarray
    contact_targets: np.ndarray
    contact_weight: np.ndarray
    floor: float
    up: np.ndarray


@dataclass
class Solution:
    """Coordinates (F, n), iterations taken (F,), converged (F,)."""

    q: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray


def _points(frames: np.ndarray, segments: np.ndarray, local: np.ndarray) -> np.ndarray:
    """World positions (F, k, 3) of points `local` (k, 3) on `segments` (k,)."""
    return points_on(frames[:, segments], local)


class System:
    """The system of one problem at coordinates q of frames `index`: the soft tasks' normal
    equations H = A_s^T A_s + damping I, g = A_s^T b_s, and what the hard rows are made of.

    A rotation task's rows are its bone's angular Jacobian, the columns w_c of the coordinates
    that move the bone (mask m_r), so its part of H is (w_c . w_d) m_r[c] m_r[d]: summed over the
    tasks, H_rot = (W^T W) o M with M = sum_r weight_r m_r m_r^T, one constant (n, n) matrix."""

    def __init__(self, problem: Problem, q: np.ndarray, index: np.ndarray, rotation_mask: np.ndarray,
                 damping: float = 0.0):
        p, m = problem, problem.model
        pose = forward_kinematics(m, q)
        frames = pose.frames
        R = frames[:, p.rotation_segments, :3, :3]
        error = log_map(p.rotations[index] @ np.swapaxes(R, -1, -2))                       # (f, R, 3)
        angular = np.where(m.rotational[None, :, None], pose.direction, 0.0)              # (f, n, 3)
        H = (angular @ np.swapaxes(angular, -1, -2)) * rotation_mask                      # (f, n, n)
        weighted = p.rotation_weight[:, None] * m.moves[:, p.rotation_segments].T          # (R, n)
        g = np.einsum("fni,fni->fn", angular, np.einsum("rn,fri->fni", weighted, error))
        # Soft points, then the contact points (soft where blended toward their pins).
        P = p.contact_segments.size
        segments = np.concatenate([p.point_segments, p.contact_segments])
        E = segments.size
        points = _points(frames, segments, np.concatenate([p.point_local, p.contact_local]))
        J = point_jacobian(m, pose, segments, points, linear=True)                         # (f, E, 3, n)
        w = np.concatenate([p.point_weight[index], p.contact_weight[index]], axis=1)
        targets = np.concatenate([p.point_targets[index], p.contact_targets[index]], axis=1)
        Jw = (J * np.sqrt(w)[..., None, None]).reshape(q.shape[0], 3 * E, -1)
        H += np.swapaxes(Jw, -1, -2) @ Jw
        n = H.shape[-1]
        H[:, np.arange(n), np.arange(n)] += damping
        g += np.einsum("feij,fei->fj", J, (targets - points) * w[..., None])
        self.H, self.g = H, g          # H with `damping` on its diagonal
        # Contact points: pins and the floor.
        self.contacts, self.J_contacts = points[:, E - P:], J[:, E - P:]
        self.height = self.contacts @ p.up
        self.pinned = p.pinned[index]
        self.pin_gap = np.where(self.pinned[..., None], p.pins[index] - self.contacts, 0.0)
        self.up_rows = np.einsum("i,fpin->fpn", p.up, self.J_contacts)                   # (f, P, n)

    def hard(self, floor_active: np.ndarray, floor: float, rows: np.ndarray):
        """A_h (f, 3P, n) and b_h (f, 3P) of the frames `rows`: pinned points' three rows; a
        binding floor's one row (the first of the point's three); zero rows elsewhere."""
        _, P, _, n = self.J_contacts.shape
        f = rows.size
        A = np.where(self.pinned[rows, :, None, None], self.J_contacts[rows], 0.0)
        A[:, :, 0] = np.where(floor_active[..., None], self.up_rows[rows], A[:, :, 0])
        b = self.pin_gap[rows].copy()
        b[:, :, 0] = np.where(floor_active, floor - self.height[rows], b[:, :, 0])
        return A.reshape(f, 3 * P, n), b.reshape(f, 3 * P)

    def hard_error(self, floor: float) -> np.ndarray:
        """The largest pin distance or floor penetration per frame (f,)."""
        pin = np.linalg.norm(self.pin_gap, axis=-1)
        below = np.where(self.pinned, 0.0, np.maximum(floor - self.height, 0.0))
        return np.maximum(pin, below).max(axis=-1, initial=0.0)


def priority_step(H, g, A_h, b_h, cols, damping: float) -> np.ndarray:
    """The task-priority step of the module docstring in the columns `cols` (f, n) (1 free,
    0 locked): the least |A_s C x - b_s|^2 + damping |x|^2 (H = A_s^T A_s + damping I,
    g = A_s^T b_s) subject to A_h C x = b_h, by its Schur complement,

        x = H'^-1 g + H'^-1 A^T lambda,   (A H'^-1 A^T + delta I) lambda = b_h - A H'^-1 g,

    with H' = C H C + damping I and A = A_h C. delta = _HARD_DAMPING^2 leaves zero rows (tasks
    not active in a frame) and redundant ones (a rigid pair of pins) out, and damps the hard
    step only in directions A moves less than _HARD_DAMPING per unit step; where the hard tasks
    can be met, the iteration meets them exactly. Returns x and lambda (f, m): a row's lambda is
    the force its task exerts, along the row (positive: toward increasing A_h x)."""
    n, m = H.shape[-1], A_h.shape[1]
    if not np.all(cols == 1.0):
        H = H * cols[:, :, None] * cols[:, None, :]
        H[:, np.arange(n), np.arange(n)] += damping * (1.0 - cols * cols)
        g = g * cols
        A_h = A_h * cols[:, None, :]
    X = np.linalg.solve(H, np.concatenate([g[..., None], np.swapaxes(A_h, -1, -2)], axis=-1))
    x, HA = X[..., 0], X[..., 1:]                                                       # (f, n), (f, n, m)
    if not m:
        return x, np.zeros(g.shape[:1] + (0,))
    S = A_h @ HA
    S[:, np.arange(m), np.arange(m)] += _HARD_DAMPING**2
    lam = np.linalg.solve(S, (b_h - np.einsum("fmn,fn->fm", A_h, x))[..., None])
    return x + (HA @ lam)[..., 0], lam[..., 0]


def limited_step(scene: Scene, q, H, g, A_h, b_h, max_step: float, damping: float) -> np.ndarray:
    """priority_step with the joint limits held exactly, by the update law's own locking
    (update.limited_step): a locked coordinate's motion is taken out of both levels' right-hand
    sides. Returns the step and the hard rows' lambda."""
    lam = np.zeros(b_h.shape)

    def solve_free(rows, cols, locked):
        g_free, b_free = g[rows], b_h[rows]
        if locked is not None:
            g_free = g_free - np.einsum("fnm,fm->fn", H[rows], locked)
            b_free = b_free - np.einsum("fmn,fn->fm", A_h[rows], locked)
        x, lam[rows] = priority_step(H[rows], g_free, A_h[rows], b_free, cols, damping)
        return x

    return update.limited_step(scene, q, np.full(q.shape[0], float(max_step)), solve_free), lam


@one_blas_thread()
def solve(problem: Problem, q0: np.ndarray, *, max_iterations: int = 40, max_step: float = 0.5,
          hard_tolerance: float = 1e-6, step_tolerance: float = 1e-7, damping: float = 1e-6) -> Solution:
    """Iterate the prioritized step from q0 (F, n) until every frame converges (its hard error
    below hard_tolerance and its step below step_tolerance) or max_iterations."""
    scene = Scene(problem.model, [])
    q = scene.project(np.asarray(q0, dtype=float))
    F = q.shape[0]
    P = problem.contact_segments.size
    masks = problem.model.moves[:, problem.rotation_segments].astype(float)                   # (n, R)
    rotation_mask = (masks * problem.rotation_weight) @ masks.T
    iterations = np.zeros(F, dtype=int)
    converged = np.zeros(F, dtype=bool)
    active = np.arange(F)
    while active.size:
        rows = System(problem, q[active], active, rotation_mask, damping)
        dq = _step(scene, q[active], rows, problem.floor, P, max_step, damping)
        settled = (np.abs(dq).max(axis=1, initial=0.0) <= step_tolerance) & \
            (rows.hard_error(problem.floor) <= hard_tolerance)
        converged[active[settled]] = True
        going = ~settled & (iterations[active] < max_iterations)
        active, dq = active[going], dq[going]
        q[active] += dq
        iterations[active] += 1
    return Solution(q=q, iterations=iterations, converged=converged)


def copied(problem: Problem, q: np.ndarray, hard_tolerance: float) -> Solution:
    """The start q itself as a solution (no iteration), converged where its hard tasks hold."""
    scene = Scene(problem.model, [])
    q = scene.project(np.asarray(q, dtype=float))
    masks = problem.model.moves[:, problem.rotation_segments].astype(float)
    rows = System(problem, q, np.arange(q.shape[0]), (masks * problem.rotation_weight) @ masks.T)
    return Solution(q=q, iterations=np.zeros(q.shape[0], dtype=int),
                    converged=rows.hard_error(problem.floor) <= hard_tolerance)


def _step(scene: Scene, q: np.ndarray, rows: System, floor: float, P: int, max_step: float, damping: float):
    """limited_step with the floor as an inequality, by active sets: a contact point not pinned
    gets a floor row where it lies below the floor or the step would take it there, and loses it
    where the row pulls it down (lambda < 0: it would rise off the floor); the frames whose set
    changed are solved again, a bounded number of times."""
    floor_active = ~rows.pinned & (rows.height < floor)
    dq = np.zeros(q.shape)
    redo = np.arange(q.shape[0])
    for _ in range(2 * P + 2):
        A_h, b_h = rows.hard(floor_active[redo], floor, redo)
        dq[redo], lam = limited_step(scene, q[redo], rows.H[redo], rows.g[redo], A_h, b_h, max_step, damping)
        predicted = rows.height[redo] + np.einsum("fpn,fn->fp", rows.up_rows[redo], dq[redo])
        add = ~rows.pinned[redo] & ~floor_active[redo] & (predicted < floor - 1e-12)
        drop = floor_active[redo] & (lam.reshape(redo.size, P, 3)[..., 0] < 0.0)
        change = add | drop
        if not change.any():
            break
        floor_active[redo] ^= change
        redo = redo[change.any(axis=1)]
    return dq

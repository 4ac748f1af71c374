"""The retarget's batched prioritized least squares: hard tasks exactly, soft ones as well as they can.

Per frame, with the hard tasks' rows A_h dq = b_h (contact pins: A_h = the point's Jacobian,
b_h = pin - point; a floor that binds: A_h = up^T J, b_h = floor - height) and the soft tasks'
weighted rows A_s dq = b_s (world rotations: the bone's angular Jacobian and log(D R^T); points:
their Jacobian and target - point), one Gauss-Newton step is the task-priority step

    x_h = A_h# b_h                                    (damped where A_h is near singular)
    N   = I - V^T V                                    (V: A_h's row space, orthonormal rows)
    z   = (N H N + mu I)^-1 N (g - H x_h),   H = A_s^T A_s,  g = A_s^T b_s
    dq  = x_h + N z

so the soft tasks move only what leaves the hard ones unchanged to first order, and the iteration
converges to poses where the hard tasks hold exactly and the soft error is least among them
(mu damps the step, not the answer). Since the gradient of |log(D R^T)|^2 / 2 with respect to the
bone's angular velocity is exactly -log(D R^T), the rotation rows' fixed point is the true
least-squares optimum. Joint limits hold exactly as in the update law (as update.weighted_step holds them:
coordinates that would leave are put on their limit and locked, the rest solved again). The
floor is an inequality: a contact point not pinned in a frame gets a floor row where it lies
below the floor or the step would take it there (rows added until no new one binds).

Every array has a leading frame axis; frames that have converged drop out of the iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kinematics import forward_kinematics, point_jacobian
from ..model import Model
from ..pseudoinverse import svd_by_gram
from ..rotations import log_map
from ..scene import Scene
from ..runtime.blas_threads import one_blas_thread

_HARD_DAMPING = 1e-4      # scene units: damps A_h# only where A_h is this close to singular
_RCOND = 1e-6             # hard directions below this fraction of the largest are redundant


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
    q: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray


def _points(frames: np.ndarray, segments: np.ndarray, local: np.ndarray) -> np.ndarray:
    """World positions (F, k, 3) of points `local` (k, 3) on `segments` (k,)."""
    T = frames[:, segments]
    return np.einsum("fkij,kj->fki", T[..., :3, :3], local) + T[..., :3, 3]


class System:
    """The system of one problem at coordinates q of frames `index`: the soft tasks' normal
    equations H = A_s^T A_s, g = A_s^T b_s, and what the hard rows are made of.

    A rotation task's rows are its bone's angular Jacobian, the columns w_c of the coordinates
    that move the bone (mask m_r), so its part of H is (w_c . w_d) m_r[c] m_r[d]: summed over the
    tasks, H_rot = (W^T W) o M with M = sum_r weight_r m_r m_r^T, one constant (n, n) matrix."""

    def __init__(self, problem: Problem, q: np.ndarray, index: np.ndarray, rotation_mask: np.ndarray):
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
        J = point_jacobian(m, pose, segments, points)[:, :, :3]                           # (f, E, 3, n)
        w = np.concatenate([p.point_weight[index], p.contact_weight[index]], axis=1)
        targets = np.concatenate([p.point_targets[index], p.contact_targets[index]], axis=1)
        Jw = (J * np.sqrt(w)[..., None, None]).reshape(q.shape[0], 3 * E, -1)
        H += np.swapaxes(Jw, -1, -2) @ Jw
        g += np.einsum("feij,fei->fj", J, (targets - points) * w[..., None])
        self.H, self.g = H, g
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
    0 locked): x with A_h C x = b_h as nearly as A_h allows and, among those, the least
    |A_s C x - b_s|^2 + damping |x|^2, from H = A_s^T A_s and g = A_s^T b_s."""
    n = H.shape[-1]
    H = H * cols[:, :, None] * cols[:, None, :]
    g = g * cols
    A_h = A_h * cols[:, None, :]
    U, s, Vt = svd_by_gram(A_h)
    kept = s > _RCOND * np.maximum(s[..., :1], 1e-300)
    inv = np.where(kept, s / (s * s + _HARD_DAMPING**2), 0.0)
    x_h = np.einsum("fkn,fk->fn", Vt, inv * np.einsum("fmk,fm->fk", U, b_h))
    V = Vt * kept[..., None]                                                     # (f, k, n)
    r = g - np.einsum("fnm,fm->fn", H, x_h)
    # N H N = H - V^T X - X^T V with X = V H - (V H V^T) V / 2 (N = I - V^T V).
    VH = V @ H                                                                  # (f, k, n)
    X = VH - 0.5 * (VH @ np.swapaxes(V, -1, -2)) @ V
    VX = np.swapaxes(V, -1, -2) @ X
    NHN = H - VX - np.swapaxes(VX, -1, -2)
    NHN[:, np.arange(n), np.arange(n)] += damping
    project = lambda v: v - np.einsum("fkn,fk->fn", V, np.einsum("fkn,fn->fk", V, v))  # noqa: E731
    z = np.linalg.solve(NHN, project(r)[..., None])[..., 0]
    return x_h + project(z)


def limited_step(scene: Scene, q, H, g, A_h, b_h, max_step: float, damping: float) -> np.ndarray:
    """priority_step with the joint limits held exactly (as update.weighted_step holds them): a
    coordinate the step would take past a limit is put on it and locked, its motion taken out of
    both levels' right-hand sides, and the other coordinates solved again; the free part of the
    step is scaled to at most max_step."""
    free = np.empty(q.shape, dtype=bool)
    free[:] = scene.joint_weight > 0
    locked = np.zeros(q.shape)
    inside = np.empty(q.shape)
    rows = np.arange(q.shape[0])
    for _ in range(scene.n_coordinates + 1):
        cols = scene.joint_weight * free[rows]
        gl = g[rows] - np.einsum("fnm,fm->fn", H[rows], locked[rows])
        bl = b_h[rows] - np.einsum("fmn,fn->fm", A_h[rows], locked[rows])
        step = cols * priority_step(H[rows], gl, A_h[rows], bl, cols, damping)
        largest = np.abs(step).max(axis=-1, initial=0.0)
        step *= np.where(largest > max_step, max_step / np.maximum(largest, 1e-300), 1.0)[:, None]
        moved = q[rows] + step + locked[rows]
        inside[rows] = scene.limit(moved)
        hit = free[rows] & (inside[rows] != moved)
        again = hit.any(axis=1)
        if not again.any():
            break
        rows, hit = rows[again], hit[again]
        locked[rows] = np.where(hit, scene.wrap(inside[rows]) - q[rows], locked[rows])
        free[rows] &= ~hit
    return scene.wrap(inside) - q


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
    for _ in range(max_iterations + 1):
        if not active.size:
            break
        rows = System(problem, q[active], active, rotation_mask)
        floor_active = ~rows.pinned & (rows.height < problem.floor)
        dq = np.zeros((active.size, q.shape[1]))
        redo = np.arange(active.size)
        for _ in range(P + 1):
            A_h, b_h = rows.hard(floor_active[redo], problem.floor, redo)
            dq[redo] = limited_step(scene, q[active[redo]], rows.H[redo], rows.g[redo], A_h, b_h, max_step, damping)
            predicted = rows.height[redo] + np.einsum("fpn,fn->fp", rows.up_rows[redo], dq[redo])
            new = ~rows.pinned[redo] & ~floor_active[redo] & (predicted < problem.floor - 1e-12)
            if not new.any():
                break
            floor_active[redo] |= new
            redo = redo[new.any(axis=1)]
        settled = (np.abs(dq).max(axis=1, initial=0.0) <= step_tolerance) & \
            (rows.hard_error(problem.floor) <= hard_tolerance)
        converged[active[settled]] = True
        if iterations[active[0]] >= max_iterations:
            break
        moving = ~settled
        q[active[moving]] += dq[moving]
        iterations[active[moving]] += 1
        active = active[moving]
    return Solution(q=q, iterations=iterations, converged=converged)

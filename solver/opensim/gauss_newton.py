"""Batched Gauss-Newton for marker IK: the engine's fit-mode update-law step (method 'pinv',
animation.py) specialised to marker and coordinate tasks, with the frame's normal equations
assembled straight from the marker Jacobian (marker_kinematics.py), and Newton's second-order
term once a frame is close.

Per frame, with r_m = x_m^exp - x_m(q) over the markers, weights W_m (0 for a missing marker;
scaled as MarkerScene.marker_scale says) and coordinate tasks (coordinate c_j, weight w_j,
target t_j, left out where the target is NaN):

    cost = sum_m W_m |r_m|^2 + sum_j w_j (t_j - q_cj)^2
    H    = sum_m W_m J_m^T J_m + sum_j w_j e_cj e_cj^T,     J_m = dx_m/dq
    g    = sum_m W_m J_m^T r_m + sum_j w_j (t_j - q_cj) e_cj

Coordinate couplers held as a penalty of weight w (OpenSim's finite constraint_weight) add
w sum_k c_k^2 to the cost, c_k = q_dep - f_k(q_ind), with rows a_k = dc_k/dq: w a_k a_k^T to H and
-w c_k a_k to g (coupling.py).

Couplers held exactly (`held`, OpenSim's constraint_weight Infinity) eliminate their dependent
coordinates (coupling.py): H, g and S are taken to the coordinates left, T^T H T, T^T g, T^T S T,
and every trial pose has its dependents filled in, so each one holds the couplers to rounding.

PointConstraints (x_1(q) = x_2(q), two points of two bodies: `points`, a MarkerKinematics of the
2P points, the first P to meet the last P) with c(q) = x_1 - x_2 (3P rows) and A = dc/dq:
held exactly (`point_weight` Infinity, as OpenSim's assembler holds them) every pose a frame
visits is projected onto c = 0 by Gauss-Newton on c alone, q <- q - A^+ c (the least change of
the free coordinates, through the held couplers' tangent), until |c| <= POINT_TOLERANCE; and H,
g, S are taken to the constraint's tangent space by the projector N = I - A^+ A (N H N, N g,
N S N), so a step moves along it, and Newton's term S takes in the constraint's curvature,
sum_i mu_i d2c_i/dq dq with the multipliers mu = (A^+)^T g. Projected poses hold c = 0 to
rounding only, so costs compare to about 1e-14 of their value: a frame where no step lowers the
cost, or whose full step promises a decrease g dq - dq (H - S) dq / 2 below FLAT times the cost,
has converged (the minimum is as sharp as rounding lets it be; without held PointConstraints
such a frame goes on in the engine instead). A frame whose pose misses a held PointConstraint by
more than POINT_HELD (one no pose can hold) has not converged. With a finite weight w they are penalty rows like the
couplers': w |c|^2 in the cost.

The step solves H dq = g on the free coordinates (the pseudo-inverse step of the weighted
system; a relative 1e-12 on the diagonal keeps coordinates no task sees at rest, as the
pseudo-inverse does). The step is update.weighted_step's: a free coordinate the step would carry past
its limit is put on the limit and locked, and the rest solved again; the free part of the step is
scaled to at most `max_step`. The step is halved until the cost falls. A frame has converged when
its full step is at most `accuracy` (largest entry, radians or metres); frames that stop
improving or run out of iterations are handed back unconverged (`MarkerIK` passes them on to the
engine's solver).

Gauss-Newton converges only linearly where the markers stay far from the model's (noisy data): it
leaves out S = sum_m W_m r_m . d2x_m/dq dq of the cost's Hessian. For a marker, the second
derivative along coordinates a and b, a's axes before b's on the way to the marker, is
omega_a x J_b (the later column turned by the earlier coordinate's angular velocity), so

    S_ab = omega_a . K_b,   K_b = sum_m W_m J_b,m x r_m       (S_ba = S_ab; 0 when a, b are not
                                                              on one path from the world)

A coordinate driving several axes of its segment through functions (gait2354's knee) gets its
diagonal entry from its summed twist, which leaves out the functions' second derivatives and
counts its translations as turned by its rotation: close, not exact, and only a step's rate
depends on it, not where the steps stop. Frames whose last full step was below `newton_below`
(near the optimum, where H - S is positive definite) step with H - S, which takes fewer iterations
on noisy markers and as many on clean ones (BENCHMARKS.md, "Measurements behind design choices").

A nearly flat direction with large residuals (forearm pronation with few arm markers) defeats the
step-size test: there Gauss-Newton's steps stay long (0.1-0.5 rad) while the cost barely changes,
since S is as large as H along it, and it overshoots and halves, or creeps, for tens of
iterations. So a frame whose last accepted step lowered the cost by less than CREEP of it while the
step was long ("creeping": close to its minimum in cost, not in coordinates) also steps with
H - S. A Newton step that does not descend (g . dq <= 0, H - S not positive definite along it) is
replaced by Gauss-Newton's. With S not exact (above) Newton's rate there is linear (about 0.07
per step on the coupler model's knees), so a frame that crept finishes at its third step below
`accuracy` in a row (SHORT_STEPS) rather than its first: it ends as close to its minimum as the
longer Gauss-Newton runs did, not merely within the accuracy. Such a short step that does not
lower the cost finds the frame at its minimum to rounding: converged, without halvings.
"""

from __future__ import annotations

import numpy as np

from ..update import weighted_step
from .coupling import coupler_tangent, fill_dependents
from .marker_kinematics import CROSS, MarkerKinematics

_MAX_HALVINGS = 30
_RIDGE = 1e-12
POINT_TOLERANCE = 1e-15           # metres: how closely a pose holds a PointConstraint held exactly
_PROJECTIONS = 30
POINT_HELD = 1e-9                 # metres: a frame farther from a held PointConstraint has not converged
SHORT_STEPS = 3                   # a frame that crept stops at this many steps below the accuracy in a row
CREEP = 1e-3                      # relative: a long step lowering the cost less than this creeps
FLAT = 1e-13                      # relative: a cost change below this is rounding (PointConstraints held)


class GaussNewton:
    """The fixed part of the problem: kinematics of the markers in use, free coordinates and
    limits, coordinate tasks (index and weight per task)."""

    def __init__(self, kinematics: MarkerKinematics, free, lower, upper, task_coordinates, task_weights,
                 max_step: float = 0.5, newton_below: float = 0.03, couplers=(), coupler_weight: float = 0.0,
                 held=(), points: MarkerKinematics | None = None, point_weight: float = np.inf):
        self.kinematics = kinematics
        self.points = points if points is not None and points.segments.size else None
        self.point_weight = float(point_weight) if self.points is not None else 0.0
        self.points_held = self.points is not None and np.isinf(self.point_weight)
        self.free = np.asarray(free, bool)
        self.lower, self.upper = np.asarray(lower, float), np.asarray(upper, float)
        self._box = _Box(self.free, self.lower, self.upper)
        self.task_coordinates = np.asarray(task_coordinates, int)
        self.task_weights = np.asarray(task_weights, float)
        self.max_step, self.newton_below = float(max_step), float(newton_below)
        n = kinematics.n_coordinates
        self._task_sum = np.zeros((self.task_coordinates.size, n))      # task j -> its coordinate
        self._task_sum[np.arange(self.task_coordinates.size), self.task_coordinates] = 1.0
        self._jacobian = np.empty((0, 3 * kinematics.segments.size, n))  # scratch, grown as needed
        self.couplers = list(couplers) if coupler_weight > 0 else []
        self.coupler_weight = float(coupler_weight)
        self.held = list(held)              # couplers held exactly: their dependents are eliminated
        if self.held:
            self.free = self.free.copy()
            self.free[[c.dependent for c in self.held]] = False
            self._box = _Box(self.free, self.lower, self.upper)

    def fill(self, q):
        """q with the held couplers' dependent coordinates set from their independent ones."""
        return fill_dependents(q, self.held) if self.held else q

    def point_rows(self, q):
        """The PointConstraints' residuals c = x_1 - x_2 (F, 3P) and rows A = dc/dq (F, 3P, n)."""
        x, J = self.points.positions_and_jacobian(q)
        F, P = q.shape[0], x.shape[1] // 2
        J = J.reshape(F, 2, 3 * P, q.shape[1])
        return (x[:, :P] - x[:, P:]).reshape(F, 3 * P), J[:, 0] - J[:, 1]

    def _tangent_rows(self, q, A):
        """A through the held couplers (A T) with the columns of coordinates that may not move
        set to 0, and T (None without held couplers)."""
        T = coupler_tangent(q, self.held) if self.held else None
        if T is not None:
            A = A @ T
        return A * self.free, T

    def place(self, q):
        """q clipped to the limits, the held couplers' dependents filled, and, with PointConstraints
        held exactly, projected onto them (module docstring)."""
        q = self.fill(np.clip(q, self.lower, self.upper))
        if not self.points_held:
            return q
        q = np.array(q, dtype=float)
        pending = np.arange(q.shape[0])
        last = np.full(q.shape[0], np.inf)
        for _ in range(_PROJECTIONS):
            c, A = self.point_rows(q[pending])
            error = np.max(np.abs(c), axis=1, initial=0.0)
            far = (error > POINT_TOLERANCE) & (error < 0.5 * last[pending])      # (rounding stops it)
            last[pending] = error
            pending, c, A = pending[far], c[far], A[far]
            if not pending.size:
                break
            A, T = self._tangent_rows(q[pending], A)
            dz = -(np.linalg.pinv(A) @ c[..., None])[..., 0]
            q[pending] = self.fill(q[pending] + (dz if T is None else (T @ dz[..., None])[..., 0]))
        return q

    def point_error(self, q) -> np.ndarray:
        """The largest |x_1 - x_2| over the PointConstraints per frame (F,), 0 without them."""
        if self.points is None:
            return np.zeros(q.shape[0])
        c = self.point_rows(q)[0]
        return np.max(np.linalg.norm(c.reshape(c.shape[0], -1, 3), axis=-1), axis=1)
    def coupler_rows(self, q):
        """The couplers' residuals c = q_dep - f(q_ind) (F, K) and their rows dc/dq (F, K, n)."""
        F, K = q.shape[0], len(self.couplers)
        c, A = np.empty((F, K)), np.zeros((F, K, q.shape[1]))
        for k, coupler in enumerate(self.couplers):
            c[:, k], slope = coupler.residual_and_slope(q)
            A[:, k, coupler.dependent] += 1.0
            A[:, k, coupler.independent] -= slope
        return c, A

    def cost(self, q, measured, weights, targets):
        """The cost (F,) alone (normal_equations)."""
        r = measured - self.kinematics.positions(q)
        cost = np.sum(weights * np.sum(r * r, axis=-1), axis=1)
        if self.task_coordinates.size:
            given = np.isfinite(targets)
            d = np.where(given, targets - q[:, self.task_coordinates], 0.0)
            cost += np.sum(np.where(given, self.task_weights, 0.0) * d * d, axis=1)
        if self.couplers:
            cost += self.coupler_weight * np.sum(self.coupler_rows(q)[0] ** 2, axis=1)
        if self.points is not None and not self.points_held:
            cost += self.point_weight * np.sum(self.point_rows(q)[0] ** 2, axis=1)
        return cost

    def normal_equations(self, q, measured, weights, targets, extra=None):
        """cost (F,), H (F, n, n), g (F, n) and the second-order term S (F, n, n) at q (F, n) for
        measured markers (F, M, 3) (any finite value where the weight is 0), marker weights
        (F, M) and task targets (F, T); `extra` (cost, H, g) of more terms on all the coordinates
        (smoothing.py's contact pins), added before the held couplers and constraints take them."""
        F, M = measured.shape[:2]
        if self._jacobian.shape[0] < F:
            self._jacobian = np.empty((F,) + self._jacobian.shape[1:])
        J = self._jacobian[:F]
        x, _, twists = self.kinematics.positions_and_jacobian(q, out=J, twists=True)
        root = np.sqrt(weights)
        J *= np.repeat(root, 3, axis=1)[..., None]
        r = (measured - x) * root[..., None]                                   # weighted residuals
        Jt = np.swapaxes(J, 1, 2)
        H = Jt @ J
        g = (Jt @ r.reshape(F, 3 * M, 1))[..., 0]
        cost = np.sum(r * r, axis=(1, 2))
        S = _second_order(self.kinematics.before, twists, J, r)
        if self.task_coordinates.size:
            given = np.isfinite(targets)
            w = np.where(given, self.task_weights, 0.0)
            d = np.where(given, targets - q[:, self.task_coordinates], 0.0)
            cost += np.sum(w * d * d, axis=1)
            g += (w * d) @ self._task_sum
            n = H.shape[1]
            H[:, np.arange(n), np.arange(n)] += w @ self._task_sum             # unit rows: the diagonal
        if self.couplers:
            c, A = self.coupler_rows(q)
            w = self.coupler_weight
            cost += w * np.sum(c * c, axis=1)
            g -= w * (np.swapaxes(A, 1, 2) @ c[..., None])[..., 0]
            H += w * np.swapaxes(A, 1, 2) @ A
        if self.points is not None and not self.points_held:
            c, A = self.point_rows(q)
            w = self.point_weight
            cost += w * np.sum(c * c, axis=1)
            g -= w * (np.swapaxes(A, 1, 2) @ c[..., None])[..., 0]
            H += w * np.swapaxes(A, 1, 2) @ A
        if extra is not None:
            cost, H, g = cost + extra[0], H + extra[1], g + extra[2]
        if self.held:                                  # in the coordinates left: J T for J
            T = coupler_tangent(q, self.held)
            Tt = np.swapaxes(T, 1, 2)
            H, S = Tt @ H @ T, Tt @ S @ T
            g = (Tt @ g[..., None])[..., 0]
        if self.points_held:                           # along the PointConstraints: N H N, N g, N S N
            x, Jp, twists = self.points.positions_and_jacobian(q, twists=True)
            P = x.shape[1] // 2
            A, T = self._tangent_rows(q, Jp[:, :3 * P] - Jp[:, 3 * P:])
            pinv = np.linalg.pinv(A)
            mu = (np.swapaxes(pinv, 1, 2) @ g[..., None])[..., 0]               # the multipliers
            # the constraint's curvature, sum mu . d2c/dq dq: the markers' term with r = (mu, -mu)
            Sc = _second_order(self.points.before, twists, Jp, np.concatenate([mu, -mu], axis=1).reshape(F, 2 * P, 3))
            if T is not None:
                Sc = np.swapaxes(T, 1, 2) @ Sc @ T
            N = np.eye(q.shape[1]) - pinv @ A
            H, S = N @ H @ N, N @ (S - Sc) @ N
            g = (N @ g[..., None])[..., 0]
        return cost, H, g, S

    def step(self, q, H, g):
        """The limit-keeping Gauss-Newton step dq (F, n): the update law's weighted step
        (update.weighted_step) with the normal equations H dq = g as its solve."""
        F = q.shape[0]
        return weighted_step(self._box, q, H, g, np.ones((F, 1)), np.full(F, self.max_step), _normal_solver)[0]

    def solve(self, q0, measured, weights, targets, accuracy: float, max_iterations: int):
        """Iterate every frame of q0 (F, n) to convergence: (q, iterations, converged)."""
        q = self.place(np.array(q0, dtype=float))
        F = q.shape[0]
        measured = np.where(weights[..., None] > 0, measured, 0.0)
        iterations = np.zeros(F, dtype=int)
        converged = np.zeros(F, dtype=bool)
        near = np.zeros(F, dtype=bool)                          # steps with Newton's term S
        creeping = np.zeros(F, dtype=bool)                      # (module docstring: flat directions)
        crept = np.zeros(F, dtype=bool)
        short = np.zeros(F, dtype=int)                          # steps below the accuracy in a row
        active = np.arange(F)
        state = self.normal_equations(q, measured, weights, targets)               # cost, H, g, S
        while active.size:
            iterations[active] += 1
            q_a = q[active]
            cost, H, g, S = state
            newton = near[active] | creeping[active]
            dq = self.step(q_a, H - newton[:, None, None] * S, g)
            uphill = np.flatnonzero(newton & (np.einsum("fi,fi->f", g, dq) <= 0.0))
            if uphill.size:                            # a Newton step that does not descend: Gauss-Newton's
                dq[uphill] = self.step(q_a[uphill], H[uphill], g[uphill])
            proposed = np.max(np.abs(dq), axis=1, initial=0.0)
            near[active] = proposed < self.newton_below
            finished = proposed <= accuracy
            # a frame that crept along a flat direction stops at its SHORT_STEPS-th short step in a row
            short[active] = np.where(finished, short[active] + 1, 0)
            waiting = finished & crept[active] & (short[active] < SHORT_STEPS)
            finished &= ~waiting
            if self.points_held:                       # a step below the cost's rounding: converged
                finished |= _flat(cost, H - near[active, None, None] * S, g, dq)
            # A frame whose step is this small has converged: it takes the step if the cost
            # does not rise, and needs no Jacobian there.
            last = np.flatnonzero(finished)
            if last.size:
                rows = active[last]
                trial = self.place(q_a[last] + dq[last])
                better = self.cost(trial, measured[rows], weights[rows], targets[rows]) <= cost[last]
                q[rows[better]] = trial[better]
                converged[rows] = True
            going = np.flatnonzero(~finished)
            state = [part[going] for part in state]
            pending, alpha = np.arange(going.size), 1.0
            stopped = pending[:0]
            for _ in range(_MAX_HALVINGS):
                if not pending.size:
                    break
                rows = active[going[pending]]
                trial = self.place(q_a[going[pending]] + alpha * dq[going[pending]])
                at_trial = self.normal_equations(trial, measured[rows], weights[rows], targets[rows])
                better = at_trial[0] < state[0][pending]
                took, before = rows[better], state[0][pending[better]]
                creeping[took] = (before - at_trial[0][better] < CREEP * before) & ~near[took]
                crept[took] |= creeping[took]
                q[took] = trial[better]
                for part, new in zip(state, at_trial):
                    part[pending[better]] = new[better]
                pending = pending[~better]
                if alpha == 1.0:                       # a short step that does not lower the cost: at
                    at_minimum = waiting[going[pending]]          # the minimum to rounding, converged
                    converged[active[going[pending[at_minimum]]]] = True
                    stopped, pending = pending[at_minimum], pending[~at_minimum]
                alpha *= 0.5
            if self.points_held and pending.size:
                # No step decreases the cost: converged where the full step's predicted decrease is
                # below the cost's rounding (module docstring).
                cost_p, H_p, g_p, S_p = (part[pending] for part in state)
                curved = H_p - near[active[going[pending]], None, None] * S_p
                converged[active[going[pending]]] = _flat(cost_p, curved, g_p, dq[going[pending]])
            keep = np.ones(going.size, bool)
            keep[pending] = False                                                # stopped improving
            keep[stopped] = False
            keep &= iterations[active[going]] < max_iterations
            active = active[going[keep]]
            state = [part[keep] for part in state]
        if self.points_held:                             # a constraint no pose can hold: not converged
            converged &= self.point_error(q) <= POINT_HELD
        return q, iterations, converged


def _flat(cost, H, g, dq):
    """Per frame: does the step dq promise a decrease g dq - dq H dq / 2 below FLAT times the cost?"""
    predicted = np.einsum("fi,fi->f", g, dq) - 0.5 * np.einsum("fi,fij,fj->f", dq, H, dq)
    return predicted <= FLAT * np.abs(cost)


def _second_order(before, twists, J, r):
    """S (F, n, n), S_ab = omega_a . K_b for a before b (and S_ba = S_ab), K_b = sum_m J_b,m x r_m
    = sum_m -[r_m]x J_b,m: sum_m r_m . d2x_m/dq dq (module docstring) for points with
    Jacobian J (F, 3M, n) and residuals r (F, M, 3), coordinates' twists (F, 6, n)."""
    F, M = r.shape[:2]
    cross = np.swapaxes((r @ CROSS).reshape(F, M, 3, 3), 1, 2).reshape(F, 3, 3 * M)
    S = np.where(before, np.swapaxes(twists[:, :3], 1, 2) @ (cross @ J), 0.0)
    S = S + np.swapaxes(S, 1, 2)
    S.reshape(F, -1)[:, ::S.shape[1] + 1] *= 0.5                            # the diagonal once
    return S


class _Box:
    """Free coordinates and box limits, as weighted_step reads them off a scene."""

    def __init__(self, free, lower, upper):
        self.joint_weight = free.astype(float)
        self.n_coordinates = free.size
        self.lower, self.upper = lower, upper

    def limit(self, q):
        return np.clip(q, self.lower, self.upper)

    def wrap(self, q):
        return q


def _normal_solver(H, g, task_weight, cols, locked_step, frames):
    """x solving H x = g - H locked_step on the free coordinates (cols > 0), 0 elsewhere; a relative
    _RIDGE on the diagonal keeps coordinates no task sees at rest, as the pseudo-inverse does."""
    F, n = g.shape
    free = cols > 0
    A = np.where(free[:, :, None] & free[:, None, :], H, 0.0)
    diagonal = A.reshape(F, n * n)[:, ::n + 1]                          # a view
    ridge = _RIDGE * np.max(diagonal, axis=1, initial=0.0) + 1e-300
    diagonal += np.where(free, ridge[:, None], 1.0)
    rhs = g if locked_step is None else g - (H @ locked_step[..., None])[..., 0]
    x = np.linalg.solve(A, np.where(free, rhs, 0.0)[..., None])[..., 0]
    return x, np.nan

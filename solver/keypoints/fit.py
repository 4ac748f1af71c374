"""The fit: a calibrated rig moved through a keypoint trial, all frames in one solve.

Over all F frames at once, the coordinates Q (F, n) minimise

    sum_f sum_k w_fk |x_k(q_f) - s p_fk|^2  +  S(Q)  +  rho |Q|^2

within the joint limits: the keypoint term (data_term.py; weights w from the confidence, 0 where
a keypoint is missing or below the confidence threshold), the acceleration penalty S
(smoothness.py; `cutoff` in Hz sets it, None leaves frames independent) and a weak pull rho to
rest for coordinates no keypoint sees (data_term.rest_weights). Where keypoints are missing the smoothness term alone
carries their bones across the gap (a bone with no keypoint for a while moves as smoothly as it
can between the frames that have them).

With contacts (contacts.py) each foot keypoint is also drawn to its pin through its spans and up
to the floor where it lies below it: two more rows of points on the same bones, with their own
targets and weights (the floor's on the height alone, and only where the point lies below it).

Levenberg-Marquardt, first frame by frame (batched, each frame its own damping), then, with the
smoothness term, on the whole trajectory from there (trajectory.py, the loop marker IK's smoothing
shares): its normal matrix is sum_f H_f (block
diagonal) plus D^T D (x) Lambda, banded with each frame tied to the two before and after it.
Pairs of frames as blocks of 2n make it block tridiagonal, solved exactly by cyclic reduction
(block_tridiagonal.py). The damping adds mu times the frame's mean data stiffness to the
diagonal (so directions no keypoint sees take short steps); a step that lowers the cost is taken
and mu divided by 3, else mu multiplied by 4. Coordinates on a limit that the step would push out
are locked, and a step's end is projected into the limits (limits.project). Once a step gains
less than NEWTON_FROM of the cost, the keypoint term's full Hessian (second_order.py; in the
trajectory refreshed every NEWTON_EVERY steps) takes Gauss-Newton's place: the valleys that only
the pull to rest decides are then crossed in a few steps instead of crept along.

The result reports per frame and keypoint the position error |x - s p| (rig units, NaN where missing),
which keypoints were missing (the gaps the smoothness bridged) and per frame the RMS over the
keypoints present; with contacts, the spans, the floor, each contact point's distance from its pin
and how far it lies below the floor.
"""


from __future__ import annotations

import time as _time
from dataclasses import dataclass, field

import numpy as np

from ..limits import project
from ..runtime.blas_threads import one_blas_thread
from . import smoothness
from .contacts import UP, FootContacts
from .data_term import data_term, free_coordinates, per_axis, rest_weights, targets_and_weights
from .placement import Placement
from .root_start import start_pose
from .second_order import full_hessian, grouping
from .trajectory import FLAT, MU_GIVE_UP as _MU_GIVE_UP, NEWTON_FROM, minimise

_MU_START = 1e-3            # Levenberg-Marquardt damping, relative to the mean data stiffness


@dataclass
class KeypointFit:
    """q (F, n) coordinates; position_error (F, K) |x - s p| in rig units (NaN where missing);
    missing (F, K) keypoints the fit did not see (NaN or below the confidence threshold); rms (F,)
    over the keypoints present (NaN in a frame without any); bridged (F,) frames with a keypoint
    missing; the keypoints' names `keypoint_names` (the K axis); iterations, converged, seconds;
    the smoothness weight per coordinate `smoothing` and the pull to rest `rest` (rho). With
    contacts: `contacts` {contact keypoint: [Span, ...]}, the `floor` height (rig units, along
    +Z), and per frame and contact point (`contact_names`) `pin_error` (F, P) the distance from its
    pin (NaN where no span holds it) and `floor_penetration` (F, P) how far below the floor it lies
    (0 above it)."""

    q: np.ndarray
    position_error: np.ndarray
    missing: np.ndarray
    rms: np.ndarray
    bridged: np.ndarray
    keypoint_names: tuple
    iterations: int
    converged: bool
    seconds: float
    smoothing: np.ndarray
    rest: np.ndarray | None = None
    contacts: dict = field(default_factory=dict)
    floor: float | None = None
    contact_names: tuple = ()
    pin_error: np.ndarray | None = None
    floor_penetration: np.ndarray | None = None

    @property
    def gap_frames(self) -> np.ndarray:
        """Frame indices with a keypoint missing."""
        return np.flatnonzero(self.bridged)


class _Terms:
    """The fit's point terms: the keypoints (K rows) and, with contacts, each contact point's pin
    and floor rows; the floor rows weigh only where their point lies below the floor."""

    def __init__(self, placement: Placement, y, w, contacts: FootContacts | None):
        self.keypoints = len(placement.names)
        self.contacts = contacts
        if contacts is None:
            self.placement, self.y, self.w = placement, y, w
            return
        i, P = contacts.index, contacts.index.size
        self.placement = Placement(placement.model, placement.names + contacts.names * 2,
                                   np.concatenate([placement.segments, placement.segments[i], placement.segments[i]]),
                                   np.concatenate([placement.offsets, placement.offsets[i], placement.offsets[i]]),
                                   placement.root)
        F = y.shape[0]
        floor = np.broadcast_to(contacts.floor * UP, (F, P, 3))
        self.y = np.concatenate([y, np.nan_to_num(contacts.pins), floor], axis=1)
        self.w = np.concatenate([np.broadcast_to(w[..., None], (F, self.keypoints, 3)),
                                 np.broadcast_to(contacts.weight * contacts.pinned[..., None], (F, P, 3)),
                                 np.broadcast_to(contacts.weight * UP, (F, P, 3))], axis=1)

    def frames(self, index) -> "_Terms":
        """The terms of some frames only."""
        sub = object.__new__(_Terms)
        sub.keypoints, sub.contacts, sub.placement = self.keypoints, self.contacts, self.placement
        sub.y, sub.w = self.y[index], self.w[index]
        return sub

    def weights(self, x) -> np.ndarray:
        """The weights at points x: the floor rows' only where they lie below the floor."""
        if self.contacts is None:
            return self.w
        below = x[:, -self.contacts.index.size:] @ UP < self.contacts.floor
        w = self.w.copy()
        w[:, -below.shape[1]:] *= below[..., None]
        return w

    def cost(self, Q) -> np.ndarray:
        """The terms' cost per frame (F,)."""
        x = self.placement.evaluate(Q, jacobian=False)
        e = x - self.y
        w = self.weights(x)
        return np.sum(per_axis(w) * e * e, axis=(1, 2))

    def term(self, Q):
        """data_term at Q with the weights that hold there, and those weights."""
        w = self.weights(self.placement.evaluate(Q, jacobian=False)) if self.contacts is not None else self.w
        return data_term(self.placement, Q, self.y, w), w


def _frame_by_frame(terms: _Terms, Q, rho, max_iterations, tolerance):
    """Every frame on its own (no smoothness): Levenberg-Marquardt per frame, batched over the
    frames still going, each until its step is below `tolerance` or gains less than FLAT of its
    cost, with Newton's steps once a step of its gains less than NEWTON_FROM.
    Returns Q, iterations (F,), converged (F,)."""
    model = terms.placement.model
    F, n = Q.shape
    Q = Q.copy()
    groups = grouping(terms.placement)
    mu = np.full(F, _MU_START)
    iterations, converged, newton = np.zeros(F, int), np.zeros(F, bool), np.zeros(F, bool)
    active = np.arange(F)
    for _ in range(max_iterations):
        if not active.size:
            break
        these = terms.frames(active)
        term, w = these.term(Q[active])
        cost = term.cost + np.sum(rho * Q[active] ** 2, axis=1)
        g = term.g - rho * Q[active]
        free = free_coordinates(model, Q[active], g)
        H = term.H + np.diag(rho)
        close = newton[active]
        if close.any():
            H[close] = full_hessian(these.placement, Q[active[close]], these.y[close], w[close], term.g[close],
                                    groups) + np.diag(rho)
        scale = np.mean(np.diagonal(term.H, axis1=1, axis2=2), axis=1) + 1e-300
        H = H + (mu[active] * scale)[:, None, None] * np.eye(n)
        H = np.where(free[:, :, None] & free[:, None, :], H, 0.0) + np.eye(n) * (~free)[:, None, :]
        dQ = np.linalg.solve(H, (g * free)[..., None])[..., 0]
        trial = project(model, Q[active] + dQ)
        trial_cost = these.cost(trial) + np.sum(rho * trial ** 2, axis=1)
        better = trial_cost <= cost
        step = np.max(np.abs(trial - Q[active]), axis=1, initial=0.0)
        gain = (cost - trial_cost) / np.where(cost > 0, cost, 1.0)
        Q[active[better]] = trial[better]
        iterations[active] += 1
        mu[active] = np.where(better, mu[active] / 3.0, mu[active] * 4.0)
        newton[active[better & (gain < NEWTON_FROM)]] = True
        done = (better & ((step < tolerance) | (gain <= FLAT))) | (mu[active] > _MU_GIVE_UP)
        converged[active[done]] = True
        active = active[~done]
    return Q, iterations, converged


class _KeypointTrajectory:
    """The keypoint fit as trajectory.minimise's problem: the point terms and the pull to rest."""

    def __init__(self, terms: _Terms, rho, Lambda):
        self.terms, self.rho, self.Lambda = terms, rho, Lambda
        self.model = terms.placement.model
        self.groups = grouping(terms.placement)

    def total(self, Q):
        return self.terms.cost(Q).sum() + smoothness.cost(Q, self.Lambda) + np.sum(self.rho * Q * Q)

    def normal(self, Q):
        term, w = self.terms.term(Q)
        scale = np.mean(np.diagonal(term.H, axis1=1, axis2=2), axis=1) + 1e-300
        return term.H + np.diag(self.rho), term.g - self.rho * Q, scale, (term, w)

    def curvature(self, Q, context):
        term, w = context
        return full_hessian(self.terms.placement, Q, self.terms.y, w, term.g, self.groups) - term.H

    def free(self, Q, g):
        return free_coordinates(self.model, Q, g)

    def place(self, Q):
        return project(self.model, Q)


@one_blas_thread()
def fit_trajectory(placement: Placement, positions: np.ndarray, weights: np.ndarray, *, scale: float = 1.0,
                   rate: float = 60.0, cutoff: float | None = 6.0, start: np.ndarray | None = None,
                   max_iterations: int = 200, tolerance: float = 1e-7, contacts: FootContacts | None = None,
                   previous: KeypointFit | None = None) -> KeypointFit:
    """Fit the placement's model to keypoints `positions` (F, K, 3, data units, NaN where
    missing; the placement's order) with `weights` (F, K) (module docstring). `start` (F, n)
    overrides the rigid start (root_start.start_pose). Each frame is first solved on its own,
    then, with a cutoff, all together with the smoothness term from there. `contacts`
    (contacts.foot_contacts) holds the feet; `previous`, a fit of the same keypoints, is then
    carried on from (its coordinates, smoothing and pull to rest) with the contacts added."""
    began = _time.perf_counter()
    model = placement.model
    F, n = positions.shape[0], model.n_coordinates
    if not (np.isfinite(rate) and rate > 0):
        raise ValueError(f"the frame rate {rate} must be a positive number")
    y, w = targets_and_weights(positions, weights, scale, count=len(placement.names))
    seen = w.sum(axis=1) > 0
    terms = _Terms(placement, y, w, contacts)
    smoothed = cutoff is not None and F >= 3
    iterations, converged = 0, True
    if previous is not None:
        Q, Lambda, rho = previous.q, previous.smoothing, previous.rest
    else:
        if smoothed:
            smoothness.cutoff_weight(cutoff, rate)                    # the cutoff checked before solving
        Q = project(model, np.array(start, float)) if start is not None else start_pose(placement, y, w)
        stiffness = np.diagonal(data_term(placement, Q, y, w).H, axis1=1, axis2=2)
        rho = rest_weights(placement, stiffness[seen])
        Q, frame_iterations, frame_converged = _frame_by_frame(terms, Q, rho, max_iterations, tolerance)
        iterations, converged = int(frame_iterations.max()), bool(frame_converged.all())
        Lambda = np.zeros(n)
        if smoothed:
            stiffness = np.diagonal(data_term(placement, Q, y, w).H, axis1=1, axis2=2)
            Lambda = smoothness.cutoff_weight(cutoff, rate) * (np.median(stiffness[seen], axis=0) if seen.any()
                                                               else np.zeros(n))
    if smoothed:
        Q, more, converged = minimise(_KeypointTrajectory(terms, rho, Lambda), Q, Lambda, max_iterations, tolerance)
        iterations += more
    elif previous is not None:
        Q, frame_iterations, frame_converged = _frame_by_frame(terms, Q, rho, max_iterations, tolerance)
        iterations, converged = int(frame_iterations.max()), bool(frame_converged.all())
    x = placement.evaluate(Q, jacobian=False)
    missing = w <= 0
    error = np.where(missing, np.nan, np.linalg.norm(x - y, axis=-1))
    count = (~missing).sum(axis=1)
    rms = np.where(count > 0, np.sqrt(np.nansum(error ** 2, axis=1) / np.maximum(count, 1)), np.nan)
    fit = KeypointFit(Q, error, missing, rms, missing.any(axis=1), placement.names, iterations, converged,
                      0.0, Lambda, rest=rho)
    if contacts is not None:
        points = x[:, contacts.index]
        fit.contacts, fit.floor, fit.contact_names = contacts.spans, contacts.floor, contacts.names
        fit.pin_error = np.where(contacts.pinned, np.linalg.norm(points - contacts.pins, axis=-1), np.nan)
        fit.floor_penetration = np.maximum(contacts.floor - points @ UP, 0.0)
    fit.seconds = _time.perf_counter() - began
    return fit

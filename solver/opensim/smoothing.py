"""Marker IK across frames: the per-frame solution refined over the whole trial with the keypoint
fit's acceleration penalty and, optionally, its feet held where they stand still.

Over all F frames at once, the coordinates the solve moves (not prescribed, not set by a coupler
held exactly; the couplers' dependents follow through their functions) minimise

    sum_f E_f(q_f)  +  sum_c Lambda_c sum_f (q_{f-1,c} - 2 q_{f,c} + q_{f+1,c})^2  (+ contact terms)

with E_f the frame's own objective (ik.py: the marker term normalised as OpenSim does, coordinate
tasks, constraints held as penalties), within the clamped ranges. The weights Lambda_c come from
`cutoff` (Hz) as the keypoint fit's do (keypoints/smoothness.py: Lambda_c = lam(cutoff, rate) h_c,
h_c the median over frames of the coordinate's data stiffness, the diagonal of E_f's Gauss-Newton
matrix, over the frames where it is positive): every coordinate smoothed to about the same cutoff.
A coordinate no marker moves in any frame stays where the frames left it. A marker missing in
a frame weighs nothing there (as per frame); the smoothness term carries the coordinates across
frames with few or no markers.

The frame's normal equations, its Newton term and its constraint handling are gauss_newton.py's
(held couplers through their tangent, `place` after every step); the loop over the trajectory
and its block-tridiagonal steps are keypoints/trajectory.py's. PointConstraints held exactly
(constraint_weight Infinity) would need every cross-frame block taken to their tangent spaces:
not done, a ValueError says so (a finite constraint_weight works).

Contacts (contacts.py): from the solution so far (smoothed when `cutoff` is given) the contact
markers' spans, pins and floor; then the trajectory again with two more terms per contact marker
and frame, weight W = CONTACT_WEIGHT times the mean marker weight of the frames:
W |pin - x|^2 in the frames its spans hold it, and W (floor - x.up)^2 where it lies below the
floor (Gauss-Newton rows on the same bodies as the markers; Newton's term leaves their curvature out).
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass

import numpy as np

from ..keypoints import smoothness
from ..keypoints.contacts import FootContacts
from ..keypoints.data_term import free_coordinates
from ..keypoints.trajectory import minimise
from ..retarget.contacts import ContactDetection
from .contacts import contact_markers, foot_contacts
from .marker_kinematics import MarkerKinematics

CONTACTS = ("auto", None)


@dataclass
class Smoothing:
    """What the refinement did: coordinates `q` (F, n), `iterations`, `converged`, `smoothing`
    Lambda (n,), the `contacts` held (FootContacts or None) and per frame and contact marker
    `pin_error` (F, P) |x - pin| (NaN where no span holds it) and `floor_penetration` (F, P)
    how far below the floor it lies (0 above), metres; `seconds`."""

    q: np.ndarray
    iterations: int
    converged: bool
    smoothing: np.ndarray
    contacts: FootContacts | None = None
    pin_error: np.ndarray | None = None
    floor_penetration: np.ndarray | None = None
    seconds: float = 0.0


def check_options(cutoff, contacts, floor, rate: float) -> None:
    """ValueError for options that mean nothing (before any solving)."""
    if contacts not in CONTACTS:
        raise ValueError(f"contacts must be 'auto' or None, got {contacts!r}")
    if floor is not None and (contacts is None or not np.isfinite(floor)):
        raise ValueError(f"floor {floor!r}: a finite height (metres along +Y) for contacts='auto'")
    if cutoff is not None:
        smoothness.cutoff_weight(cutoff, rate)


def frame_rate(time) -> float:
    """Frames per second of a trial's times (the median step)."""
    steps = np.diff(np.asarray(time, float))
    return float(1.0 / np.median(steps)) if steps.size and np.median(steps) > 0 else np.nan


class _ContactRows:
    """The contact terms (module docstring) at poses Q: cost (F,), and Gauss-Newton's H, g."""

    def __init__(self, om, marker_names, held: FootContacts):
        used = om.markers.index(list(marker_names))[held.index]
        self.kinematics = MarkerKinematics(om.model, om.coupling, om.markers.segments[used], om.markers.locations[used])
        self.held, self.up = held, np.asarray(held.up, float)
        self.pinned = held.pinned[..., None].astype(float)                            # (F, P, 1)
        self.pins = np.nan_to_num(held.pins)

    def residuals(self, x):
        """Pin residuals (F, P, 3) and floor residuals (F, P), 0 where a term does not act."""
        pin = (self.pins - x) * self.pinned
        floor = np.maximum(self.held.floor - x @ self.up, 0.0)
        return pin, floor

    def cost(self, Q):
        pin, floor = self.residuals(self.kinematics.positions(Q))
        return self.held.weight * (np.sum(pin * pin, axis=(1, 2)) + np.sum(floor * floor, axis=1))

    def normal(self, Q):
        x, J = self.kinematics.positions_and_jacobian(Q)
        F, P = x.shape[:2]
        pin, floor = self.residuals(x)
        J = J.reshape(F, P, 3, -1)
        Jp = J * self.pinned[..., None]
        Ju = np.einsum("a,fpan->fpn", self.up, J) * (floor > 0)[..., None]       # heights below the floor
        W = self.held.weight
        H = W * (np.einsum("fpai,fpaj->fij", Jp, Jp) + np.einsum("fpi,fpj->fij", Ju, Ju))
        g = W * (np.einsum("fpai,fpa->fi", Jp, pin) + np.einsum("fpi,fp->fi", Ju, floor))
        cost = W * (np.sum(pin * pin, axis=(1, 2)) + np.sum(floor * floor, axis=1))
        return cost, H, g


class MarkerTrajectory:
    """The objective of the module docstring as keypoints/trajectory.minimise's problem, on
    gauss_newton's frames (`gauss_newton`, the frames' measured markers, weights and targets);
    `movable` (n,) the coordinates a step may move."""

    def __init__(self, gauss_newton, measured, weights, targets, Lambda, movable, contacts: _ContactRows | None = None):
        self.gn, self.weights, self.targets = gauss_newton, weights, targets
        self.measured = np.where(weights[..., None] > 0, measured, 0.0)
        self.Lambda, self.movable, self.contacts = Lambda, movable, contacts

    def frame_costs(self, Q) -> np.ndarray:
        cost = self.gn.cost(Q, self.measured, self.weights, self.targets)
        return cost if self.contacts is None else cost + self.contacts.cost(Q)

    def total(self, Q) -> float:
        return float(self.frame_costs(Q).sum()) + smoothness.cost(Q, self.Lambda)

    def normal(self, Q):
        extra = self.contacts.normal(Q) if self.contacts is not None else None
        _, H, g, S = self.gn.normal_equations(Q, self.measured, self.weights, self.targets, extra)
        scale = np.mean(np.diagonal(H, axis1=1, axis2=2)[:, self.movable], axis=1) + 1e-300
        return H, g, scale, S

    def gradient(self, Q) -> np.ndarray:
        """The descent side (F, n), half the negative gradient of `total` in the movable coordinates
        (the held couplers' dependents through their functions), 0 in the others."""
        _, g, _, _ = self.normal(Q)
        return (g - smoothness.second_difference_normal(Q) * self.Lambda) * self.movable

    def curvature(self, Q, S):
        return -S

    def free(self, Q, g):
        return free_coordinates(self.gn, Q, g) & self.movable

    def place(self, Q):
        return self.gn.place(Q)


def smoothing_weights(gauss_newton, q, measured, weights, targets, cutoff, rate, movable):
    """Lambda (n,) of the module docstring (0 without a cutoff) and the coordinates a step may
    move: `movable` less those no marker moves in any frame."""
    _, H, _, _ = gauss_newton.normal_equations(q, np.where(weights[..., None] > 0, measured, 0.0), weights, targets)
    stiffness = np.diagonal(H, axis1=1, axis2=2)
    seen = stiffness > 0
    movable = movable & seen.any(axis=0)
    median = np.zeros(q.shape[1])
    median[movable] = np.nanmedian(np.where(seen, stiffness, np.nan)[:, movable], axis=0)
    lam = smoothness.cutoff_weight(cutoff, rate) if cutoff is not None else 0.0
    return lam * median, movable


def refine(problem, q, *, cutoff=None, contacts=None, floor=None, contact_names=None, rate=None,
           accuracy: float = 1e-5, max_iterations: int = 200,
           detection: ContactDetection = ContactDetection()) -> Smoothing:
    """The refinement of the module docstring of a MarkerIK `problem`'s per-frame solution q
    (F, n): with `cutoff` (Hz) the acceleration penalty, with contacts 'auto' the feet held
    (`contact_names` the contact markers, `floor` metres along +Y instead of the estimate).
    `rate` defaults to the trial's; steps stop below `accuracy` (radians or metres)."""
    began = _time.perf_counter()
    rate = frame_rate(problem.time) if rate is None else float(rate)
    check_options(cutoff, contacts, floor, rate)
    gn = problem.gauss_newton
    if gn.points_held:
        raise ValueError("smoothing and contacts do not carry PointConstraints held exactly (constraint_weight "
                         "Infinity): give the setup a finite constraint_weight")
    F = q.shape[0]
    if F < 3:
        cutoff = None                                       # no acceleration in fewer than three frames
    weights = problem.frame_weights
    stay = np.full((F, problem._stay.size), np.nan)
    if cutoff is None:        # frames the markers do not determine stay where they are, as per frame
        stay[~problem.determined] = q[~problem.determined][:, problem._stay]
    targets = np.concatenate([problem.coordinate_targets, stay], axis=1)
    Lambda, movable = smoothing_weights(gn, q, problem.measured, weights, targets, cutoff, rate, gn.free.copy())
    trajectory = MarkerTrajectory(gn, problem.measured, weights, targets, Lambda, movable)
    iterations, converged = 0, True
    if cutoff is not None:
        q, iterations, converged = minimise(trajectory, q, Lambda, max_iterations, accuracy)
    result = Smoothing(q, iterations, converged, Lambda)
    if contacts == "auto":
        index = contact_markers(problem.om, problem.marker_names, contact_names)
        mean_weight = float(np.mean(weights[weights > 0]))
        held = foot_contacts(problem.om, problem.marker_names, index, q, rate, mean_weight, floor=floor,
                             detection=detection)
        rows = _ContactRows(problem.om, problem.marker_names, held)
        trajectory.contacts = rows
        q, more, converged = minimise(trajectory, q, Lambda, max_iterations, accuracy)
        x = rows.kinematics.positions(q)
        result = Smoothing(q, iterations + more, converged, Lambda, held,
                           np.where(held.pinned, np.linalg.norm(x - held.pins, axis=-1), np.nan),
                           np.maximum(held.floor - x @ rows.up, 0.0))
    result.seconds = _time.perf_counter() - began
    return result

"""Feet on the floor: when a fit's foot keypoints stand still, one world point per span, and the
floor below them.

The contact points are the keypoints riding on the rig's foot and toe bones (heel, toes, ankle).
Their paths in a fit without contacts (smooth where the fit is smoothed, so the data's jitter does
not read as motion) go through the retarget's contact detection (solver.retarget.contacts:
slow and near the floor, with hysteresis, each span's ends trimmed where the point rises), with
the floor estimated as the retarget estimates it (a low percentile of the contact points'
heights) and the rig's leg length as the size. Each span's pin is the mean of its point's path
over the span. The floor kept under every contact point is that estimate, or the lowest pin
where one rests lower.

In the fit (fit.py), a contact point is drawn to its pin in every frame of its spans and, in any
frame where it lies below the floor, up to the floor (on the height alone), each with `weight`
times the mean keypoint weight: penalties, so a point held stays still to within the pull of the
keypoints on its foot over that weight, and one pushed up to the floor stays within a few
hundredths of a millimetre below it (on Pose2Sim's balancing trial).

Up is +Z: the rig's world, as Blender's (KeypointTrial.z_up); `held_points` takes any up (marker IK's
smoothing, opensim/contacts.py, gives OpenSim's +Y).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kinematics import forward_kinematics
from ..retarget.contacts import ContactDetection, detect_contacts, estimate_floor
from ..retarget.skeletons import leg_length
from .placement import Placement

UP = np.array([0.0, 0.0, 1.0])
CONTACT_WEIGHT = 1e3        # a pin's and the floor's weight, relative to the mean keypoint weight
FOOT_ROLES = ("foot.L", "foot.R", "toe.L", "toe.R")


@dataclass(frozen=True)
class FootContacts:
    """The contact points `names` (P,) at `index` (P,) in the placement; `spans` {name: [Span]};
    `pins` (F, P, 3) each frame's pin where a span holds the point (NaN elsewhere); the `floor`
    height (along `up`, the world's up: +Z for a rig); `weight` of a pin and of the floor."""

    names: tuple
    index: np.ndarray
    spans: dict
    pins: np.ndarray
    floor: float
    weight: float
    up: tuple = (0.0, 0.0, 1.0)

    @property
    def pinned(self) -> np.ndarray:
        """(F, P) frames where a span holds each point."""
        return np.isfinite(self.pins[..., 0])


def contact_points(placement: Placement, target_model) -> np.ndarray:
    """Indices of the keypoints riding on the rig's foot and toe bones."""
    feet = [target_model.role_segment[r] for r in FOOT_ROLES if r in target_model.role_segment]
    return np.flatnonzero(np.isin(placement.segments, feet))


def rig_leg_length(target_model) -> float:
    """The rig's leg length at rest (retarget.skeletons.leg_length of its thigh, shin and foot heads)."""
    model = target_model.model
    frames = forward_kinematics(model, model.neutral(1)).frames[0]
    return leg_length({role: frames[target_model.role_segment[role], :3, 3]
                       for side in "LR" for role in (f"thigh.{side}", f"shin.{side}", f"foot.{side}")})


def foot_contacts(placement: Placement, target_model, Q: np.ndarray, rate: float, mean_weight: float, *,
                  detection: ContactDetection = ContactDetection(), floor: float | None = None) -> FootContacts:
    """The contacts of the module docstring, from the fit `Q` (F, n) of `placement` at `rate` Hz;
    `floor` (rig units along +Z) instead of the estimate; `mean_weight` the keypoints' mean weight."""
    index = contact_points(placement, target_model)
    names = tuple(placement.names[i] for i in index)
    if not index.size:
        raise ValueError("contacts need keypoints on the rig's foot or toe bones: none of the trial's is on one")
    paths = placement.evaluate(Q, jacobian=False)[:, index]
    return held_points(names, index, paths, rate, rig_leg_length(target_model), mean_weight, UP,
                       detection=detection, floor=floor)


def held_points(names, index, paths: np.ndarray, rate: float, size: float, mean_weight: float, up, *,
                detection: ContactDetection = ContactDetection(), floor: float | None = None) -> FootContacts:
    """The spans, pins and floor (module docstring) of contact points `names` (at `index` among
    the fit's points) moving along `paths` (F, P, 3) at `rate` Hz, for a body whose legs are `size`
    long; `up` the world's up (unit), `floor` (along it) instead of the estimate."""
    F, P = paths.shape[:2]
    ground = estimate_floor(paths, up, detection.percentile) if floor is None else float(floor)
    spans = {name: detect_contacts(paths[:, i], rate, up=up, floor=ground, size=size, detection=detection)
             for i, name in enumerate(names)}
    pins = np.full((F, P, 3), np.nan)
    for i, name in enumerate(names):
        for span in spans[name]:
            pins[span.start:span.end + 1, i] = paths[span.start:span.end + 1, i].mean(axis=0)
    resting = (pins @ up)[np.isfinite(pins[..., 0])]
    if floor is None and resting.size:
        ground = min(ground, float(resting.min()))
    return FootContacts(tuple(names), np.asarray(index), spans, pins, float(ground), CONTACT_WEIGHT * mean_weight,
                        tuple(float(u) for u in up))

"""Still feet in marker IK: which markers can stand on the floor, and their spans.

The contact markers are the markers in use on the model's foot bodies (OpenSim's gait models name
them calcn_* and toes_*; `names` picks others). Their paths in a solution without contacts go
through the keypoint fit's contact detection (keypoints/contacts.held_points: the retarget's
detection, one pin per span at the mean of its path, the floor a low percentile of their heights
or the lowest pin), with OpenSim's up (+Y: its ground, gravity along -Y) and the model's leg
length as the size: the height of the root body's origin above the lowest contact marker in the
default pose.
"""

from __future__ import annotations

import numpy as np

from ..keypoints.contacts import FootContacts, held_points
from ..retarget.contacts import ContactDetection
from .marker_kinematics import MarkerKinematics

UP = np.array([0.0, 1.0, 0.0])
FOOT_BODIES = ("calcn", "toes")


def contact_markers(om, marker_names, names=None) -> np.ndarray:
    """Indices into `marker_names` (the markers in use) of the contact markers: `names`, or those
    on a body whose name starts with one of FOOT_BODIES; ValueError where there are none."""
    marker_names = list(marker_names)
    if names is not None:
        unknown = [n for n in names if n not in marker_names]
        if unknown:
            raise ValueError(f"contact markers {unknown} are not markers in use ({len(marker_names)} markers)")
        index = np.array([marker_names.index(n) for n in names], dtype=int)
    else:
        segments = om.markers.segments[om.markers.index(marker_names)]
        index = np.flatnonzero([om.model.names[s].startswith(FOOT_BODIES) for s in segments])
    if not index.size:
        raise ValueError(f"contacts need markers on the feet (on bodies named {'*, '.join(FOOT_BODIES)}*, or "
                         "named as contact markers): the trial has none")
    return index


def leg_length(om, kinematics: MarkerKinematics) -> float:
    """The model's leg length (module docstring); `kinematics` the contact markers'."""
    q = om.fill_dependents(om.coupling.default_coordinates(1))
    feet = kinematics.positions(q)[0] @ UP
    root = MarkerKinematics(om.model, om.coupling, np.array([1]), np.zeros((1, 3))).positions(q)[0, 0] @ UP
    size = float(root - feet.min())
    if not (np.isfinite(size) and size > 0):
        raise ValueError(f"the model's root lies {size:g} m above its lowest contact marker in the default pose: "
                         "no leg length to scale the contact detection by")
    return size


def foot_contacts(om, marker_names, index, q, rate: float, mean_weight: float, *, floor: float | None = None,
                  detection: ContactDetection = ContactDetection()) -> FootContacts:
    """The spans, pins and floor of the contact markers `index` (of the markers in use
    `marker_names`) along the solution q (F, n) at `rate` Hz; `floor` (metres along +Y) instead of
    the estimate; `mean_weight` the markers' mean weight (a pin weighs CONTACT_WEIGHT times it)."""
    if not (np.isfinite(rate) and rate > 0):
        raise ValueError(f"contacts need the trial's frame rate: got {rate}")
    used = om.markers.index(list(marker_names))[index]
    kinematics = MarkerKinematics(om.model, om.coupling, om.markers.segments[used], om.markers.locations[used])
    names = tuple(marker_names[i] for i in index)
    return held_points(names, index, kinematics.positions(q), rate, leg_length(om, kinematics), mean_weight, UP,
                       detection=detection, floor=floor)

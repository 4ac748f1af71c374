"""Retargeting a source motion onto a target rig: one batched least-squares problem over all frames.

Per frame t, with the leg-length ratio k = (target leg) / (source leg) and o the hips' ground
point at the calibration frame (the hips' head with its height along `up` removed), a source
point p maps to  o + k (p - o) + s up  (s shifts the clip's floor onto `floor` where one is given).
The target pose q(t) then solves, in order of priority,

    hard    every contact point c on its pin target P_c(t) while a span holds it: one world point
            per span (the mean of its mapped source path over the span, put on the floor), the
            target sliding in from the mapped path over `blend_frames` at each edge;
            every other contact point at or above the floor (an inequality, active where it binds);
            the target's joint limits (held exactly: coordinates that would leave are locked on them)
    soft    the calibrated world rotation D_r(t) of every mapped bone (calibration.py), the mapped
            effectors' heads (hands, head, feet), the hips' mapped head (the root trajectory),
            weighted by Weights

each frame the exact minimiser of the soft tasks' weighted squared error among the poses that meet
the hard ones (solve.py). Contacts come from detect_contacts on the mapped contact point paths,
or from the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model import Model
from .calibration import Calibration
from .contacts import ContactDetection
from .roles import EFFECTOR_ROLES
from .skeletons import Source, Target




@dataclass(frozen=True)
class Weights:
    """Soft task weights: `rotation` per radian of each mapped bone's world rotation error,
    `effector` and `root` per leg length of position error; `roles` overrides the rotation weight
    of single roles (0 leaves a role's rotation free)."""

    rotation: float = 1.0
    effector: float = 0.3
    root: float = 3.0
    effectors: tuple = EFFECTOR_ROLES
    roles: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RetargetSettings:
    """The solve's iteration: at most `max_iterations` Gauss-Newton steps per frame, each at most
    `max_step` (radians or scene units) per coordinate; a frame converges when its hard tasks hold
    within `hard_tolerance` (scene units) and its step falls below `step_tolerance`."""

    max_iterations: int = 40
    max_step: float = 0.5
    hard_tolerance: float = 1e-6
    step_tolerance: float = 1e-7
    damping: float = 1e-6


@dataclass
class RetargetResult:
    """A retarget's answer. Bone arrays follow target.bones' order (B bones); frames are the
    source's (F). Errors are NaN where a task asks nothing.

    q                 (F, n) the model's coordinates (`model`, TargetModel)
    local_rotations   (F, B, 3, 3) each bone's rotation relative to its rest (Blender's
                      matrix_basis rotation; identity for rigid bones)
    root_translation  (F, 3) the hips bone's location in its rest frame (matrix_basis translation)
    world             (F, B, 4, 4) every bone's pose matrix in armature space (Blender's pose_bone.matrix)
    contacts          {contact point name: [Span, ...]} the spans used
    pins              {contact point name: (spans, 3)} each span's world point
    pin_error         (F, P) distance of each contact point from its pin target, NaN where unpinned
    floor_penetration (F, P) how far each contact point lies below the floor (0 above it)
    floor             the floor height along `up`
    style_difference  {role: radians} mean angle between the calibrated source's and the target's
                      local rotations (relative to the nearest mapped ancestor role; world for hips)
    converged         (F,) hard tasks held and steps settled
    iterations        (F,)
    scale             the leg-length ratio k
    seconds           wall time of the whole retarget
    """

    q: np.ndarray
    local_rotations: np.ndarray
    root_translation: np.ndarray
    world: np.ndarray
    contacts: dict
    pins: dict
    pin_error: np.ndarray
    floor_penetration: np.ndarray
    floor: float
    style_difference: dict
    converged: np.ndarray
    iterations: np.ndarray
    scale: float
    seconds: float
    model: object = None
    bone_names: tuple = ()
    point_names: tuple = ()
    calibration: Calibration | None = None


def retarget(source: Source, target: Target, *, contacts="auto", calibration_frame: int = 0,
             floor: float | None = None, up=(0.0, 0.0, 1.0), blend_frames: int = 4,
             weights: Weights = Weights(), detection: ContactDetection = ContactDetection(),
             settings: RetargetSettings = RetargetSettings()) -> RetargetResult:
    """Retarget `source` onto `target` (module docstring). `contacts`: "auto" (detect_contacts on
    each contact point's mapped source path), None (no pins), or {contact point name: [Span, ...]}
    (the caller's spans; points not named get none). `floor` None keeps the clip's own floor
    (estimated from the contact points' mapped paths); a number moves it there. Raises ValueError
    (naming the role, channel, point or span) on bad input."""
    raise NotImplementedError

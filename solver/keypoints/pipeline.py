"""Keypoints onto a rig in one call: place the trial's keypoints on the rig by role, calibrate on
a static trial or window (offsets and scale), fit every frame (fit.py); with contacts, find where
the feet stand still in that fit and fit again from it with them held (contacts.py). The
rotation-copy baseline on the same calibration: `copy_keypoints` (aim.py).

    result = fit_keypoints(trial.z_up(), target_model(target), static=static.z_up())

The trials must be in the rig's world frame (KeypointTrial.z_up for a Blender rig).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..geometry import points_on
from ..retarget.contacts import ContactDetection
from .aim import aimed_poses
from .calibration import Calibration, calibrate
from .contacts import contact_points, foot_contacts
from .fit import KeypointFit, fit_trajectory
from .placement import place_keypoints
from .trial import KeypointTrial


@dataclass
class KeypointResult:
    """The fit, the calibration it used and the keypoints left out ({name: why}); the contact
    spans and the floor are the fit's (`contacts`, `floor`)."""

    fit: KeypointFit
    calibration: Calibration
    left_out: dict

    @property
    def contacts(self) -> dict:
        """{contact keypoint: [Span, ...]}: where the fit held each foot keypoint still."""
        return self.fit.contacts

    @property
    def floor(self) -> float | None:
        """The floor's height (rig units, along +Z) the fit kept the foot keypoints above."""
        return self.fit.floor


def _in_order(trial: KeypointTrial, names, threshold: float):
    index = [trial.index(n) for n in names]
    return trial.positions[:, index], trial.weights(threshold)[:, index]


def _calibrated(trial, target_model, static, static_frames, threshold, offset_prior, roles):
    """(the Calibration on `static` or the trial's `static_frames`, the keypoints left out)."""
    placement, left_out = place_keypoints(target_model, trial.keypoint_set, trial.names, roles)
    calibration_trial = trial if static is None else static
    missing = [n for n in placement.names if n not in calibration_trial.names]
    if missing:
        raise ValueError(f"the calibration trial lacks the keypoints {missing}")
    positions, weights = _in_order(calibration_trial.frames(static_frames), placement.names, threshold)
    if not np.any(weights > 0):
        raise ValueError("the calibration frames hold no keypoint above the confidence threshold")
    return calibrate(placement, positions, weights, offset_prior=offset_prior), left_out


def fit_keypoints(trial: KeypointTrial, target_model, *, static: KeypointTrial | None = None,
                  static_frames=slice(None), threshold: float = 0.0, cutoff: float | None = 6.0,
                  offset_prior: float = 1.0, roles=None, max_iterations: int = 100, contacts: str | None = "auto",
                  floor: float | None = None, detection: ContactDetection = ContactDetection()) -> KeypointResult:
    """Fit `trial` onto the rig of a retarget TargetModel. Calibration uses `static` (another
    trial of the same person standing still; the trial itself when None) on `static_frames`;
    keypoints below confidence `threshold` count as missing; `cutoff` (Hz) sets the smoothing
    (None: none); `roles` (name -> role) places keypoints the trial's keypoint set does not know.
    `contacts` "auto" holds the foot keypoints where they stand still and above the floor
    (contacts.py; nothing where no keypoint rides on a foot or toe bone), None leaves them
    free; `floor` (rig units along +Z) replaces the estimated floor, `detection` the thresholds."""
    if contacts not in ("auto", None):
        raise ValueError(f"contacts must be 'auto' or None, got {contacts!r}")
    calibration, left_out = _calibrated(trial, target_model, static, static_frames, threshold, offset_prior, roles)
    placement = calibration.placement
    positions, weights = _in_order(trial, placement.names, threshold)
    options = dict(scale=calibration.scale, rate=trial.rate, cutoff=cutoff, max_iterations=max_iterations)
    fit = fit_trajectory(calibration.placement, positions, weights, **options)
    if contacts == "auto" and contact_points(placement, target_model).size:
        held = foot_contacts(calibration.placement, target_model, fit.q, trial.rate, float(np.mean(weights[weights > 0])),
                             detection=detection, floor=floor)
        free = fit
        fit = fit_trajectory(calibration.placement, positions, weights, contacts=held, previous=free, **options)
        fit.iterations += free.iterations
        fit.seconds += free.seconds
    return KeypointResult(fit, calibration, left_out)


def copy_keypoints(trial: KeypointTrial, target, target_model, *, static: KeypointTrial | None = None,
                   static_frames=slice(None), threshold: float = 0.0, offset_prior: float = 1.0, roles=None):
    """The rotation-copy baseline (aim.py) of `trial` on the rig of `target` (a retarget Target,
    `target_model` its TargetModel), on the calibration `fit_keypoints` would use: (pose matrices
    (F, B, 4, 4) of target.bones in armature space, the Calibration, the keypoints left out)."""
    calibration, left_out = _calibrated(trial, target_model, static, static_frames, threshold, offset_prior, roles)
    placed = calibration.placement
    positions, weights = _in_order(trial, placed.names, threshold)
    y = np.where((weights > 0)[..., None], calibration.scale * positions, np.nan)
    names = [b.name for b in target.bones]
    rows = [names.index(target_model.model.names[s]) for s in placed.segments]

    rest_points = placed.evaluate(target_model.model.neutral(1), jacobian=False)[0]
    poses = aimed_poses(y, trial.keypoint_set, list(placed.names), names, {b.name: b.parent for b in target.bones},
                        np.array([b.matrix for b in target.bones]), {b: r for r, b in target.roles.items()},
                        rest_points, lambda poses: points_on(poses[:, rows], placed.offsets))
    return poses, calibration, left_out

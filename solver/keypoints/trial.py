"""One structure behind every keypoint file: a KeypointTrial.

`positions` (F, K, 3) in metres, NaN where a keypoint is missing (all three coordinates
together); `confidence` (F, K) where the format has one (finite, >= 0; None otherwise: every
keypoint present counts fully); `names` (K,) in the file's order; `rate` in Hz and `time` (F,) in
seconds; `units` as the file stored them; `keypoint_set` the KeypointSet the names belong to (None
for names of no known set); `up` the file's up direction in its own coordinates (None where the
format does not fix it); `source` the reader's format name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..retarget.calibration import minimal_rotation
from .keypoint_sets import KeypointSet


@dataclass
class KeypointTrial:
    """Keypoint trajectories of one trial (module docstring)."""

    names: list
    positions: np.ndarray
    rate: float
    time: np.ndarray
    confidence: np.ndarray | None = None
    units: str = "m"
    keypoint_set: KeypointSet | None = None
    up: tuple | None = None
    source: str = ""
    path: Path | None = None

    def __post_init__(self):
        F, K = self.positions.shape[:2]
        if self.positions.shape != (F, len(self.names), 3) or self.time.shape != (F,):
            raise ValueError(f"positions {self.positions.shape}, names {len(self.names)} and time {self.time.shape} "
                             "disagree")
        if self.confidence is not None and self.confidence.shape != (F, K):
            raise ValueError(f"confidence {self.confidence.shape} does not match positions {self.positions.shape}")

    @property
    def n_frames(self) -> int:
        return self.positions.shape[0]

    @property
    def n_keypoints(self) -> int:
        return self.positions.shape[1]

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no keypoint called {name!r} in {self.path or 'the trial'}") from None

    def weights(self, threshold: float = 0.0) -> np.ndarray:
        """(F, K): the confidence (1 without one) where the keypoint is present and its confidence
        at least `threshold`, else 0."""
        present = np.isfinite(self.positions).all(axis=-1)
        c = np.ones(present.shape) if self.confidence is None else np.nan_to_num(self.confidence, nan=0.0)
        return np.where(present & (c >= threshold), c, 0.0)

    def frames(self, keep) -> "KeypointTrial":
        """The trial on the frames `keep` (a slice, indices or a boolean mask)."""
        return replace(self, positions=self.positions[keep], time=self.time[keep],
                       confidence=None if self.confidence is None else self.confidence[keep])

    def z_up(self) -> "KeypointTrial":
        """The trial turned so that its up direction is +Z (Blender's), by the smallest rotation
        (a Y-up file: (x, y, z) -> (x, -z, y)). ValueError when the up direction is unknown."""
        if self.up is None:
            raise ValueError(f"the up direction of {self.path or 'the trial'} is unknown: set trial.up first")
        R = minimal_rotation(np.asarray(self.up, float) / np.linalg.norm(self.up), np.array([0.0, 0.0, 1.0]))
        return replace(self, positions=self.positions @ R.T, up=(0.0, 0.0, 1.0))

"""What a solve returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Result:
    """Solved coordinates and per-frame diagnostics; errors are (frames, constraints), NaN where
    a constraint has no position (rotation) part or a frame could not be solved."""

    q: np.ndarray
    position_error: np.ndarray
    rotation_error: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    sigma_min: np.ndarray
    seconds: float
    frames: np.ndarray = field(default=None)
    constraint_names: list = field(default_factory=list)     # the constraints' names, in column order
    evaluation: object = None    # simulation: the last frame's Evaluation, a next call's `start`

    def __post_init__(self):
        if self.frames is None:
            self.frames = np.arange(self.q.shape[0])

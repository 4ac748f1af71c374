"""Settings of a solve: the update law's pseudo-inverse and its parameters, both modes' limits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import pseudoinverse

STEPS = ("update-law", "damped")


@dataclass(frozen=True)
class Settings:
    method: str = "dls"              # A#: 'pinv', 'dls', 'sdls' or the 'gradient' baseline
    precision: float = 1e-6          # position (scene units) and rotation (radians) error to stop at
    max_iterations: int = 300        # animation mode, per frame
    max_step: float = 0.5            # largest coordinate change of one update (radians or units)
    damping_max: float = 0.5         # DLS
    damping_epsilon: float = 0.1     # DLS
    gamma_max: float | None = None   # SDLS: the largest coordinate change one update may cause;
    #                                  None: the mode's own (update.SDLS_BOUND)
    feedback: float = 20.0           # K, per second (simulation)
    max_velocity: float = 50.0       # largest coordinate speed (simulation)
    substeps: int = 0                # simulation: 0 chooses them from the joint speed
    substep_angle: float = 0.05      # automatic sub-steps keep each under this coordinate change
    max_substeps: int = 64
    fps: float = 24.0
    feedforward: bool = True         # simulation: use B Xu'
    converge_first_frame: bool = True  # simulation: solve the first frame in animation mode
    steps: str = "update-law"        # animation: 'update-law' steps, damped ones where they stall; or
    #                                  'damped' (Levenberg-Marquardt) steps from the first iteration
    curvature: bool = True           # animation: damped steps also try the curvature estimate (for
    #                                  targets out of reach; without it they are plain Levenberg-Marquardt)
    fit: bool = False                # a least-squares fit (marker IK): frames converge when their
    #                                  steps fall below precision, not when targets are met

    def __post_init__(self):
        if self.method not in pseudoinverse.METHODS:
            raise ValueError(f"unknown solver {self.method!r}; choose one of {pseudoinverse.METHODS}")
        if self.steps not in STEPS:
            raise ValueError(f"unknown steps {self.steps!r}; choose one of {STEPS}")
        for name in ("precision", "max_step", "feedback", "max_velocity", "fps", "substep_angle",
                     "damping_max", "damping_epsilon", "gamma_max"):
            value = getattr(self, name)
            if value is None and name == "gamma_max":
                continue
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"setting {name} = {value} must be a positive number")
        if self.max_iterations < 1 or self.substeps < 0 or self.max_substeps < 1:
            raise ValueError("max_iterations and max_substeps must be >= 1, substeps >= 0")

"""The constants and the per-frame rules of animation mode's iteration (animation.py explains
the method), shared by its batched loop (animation.py) and its loop for one frame
(animation_frame.py), so that both take every step by the same numbers."""

from __future__ import annotations

import numpy as np

from .scene import Evaluation, Scene

LAMBDA_START = 1e-3
LAMBDA_FIRST = 0.1   # a frame's damping when it takes damped steps from the start (Settings.steps);
#                      chosen on the Panda's random poses (BENCHMARKS.md, "Measurements behind design choices")
LAMBDA_GIVE_UP = 1e12
NUDGE = 1e-3
SETTLED = 1e-13      # relative fall of the error energy below which a secant frame has settled
SLOW = 0.5           # an update-law step is slow when it does not halve the error energy
SLOW_RUN = 3         # after this many slow steps in a row a frame turns to secant steps
PROMISE = 0.1        # an SDLS step is sound when the linear model promised this fall or more


def slow_step(method: str, before, after, promised):
    """Whether an update-law step was slow: it did not halve the error energy (`before` ->
    `after`), unless the method is the gradient baseline (which stays on plain steps) or, for
    SDLS, which bounds its steps on purpose, the linear model promised a fall of at least
    PROMISE * before and the step delivered at least half of it. `promised()` gives that fall
    (asked only for SDLS, and only when some step did not halve the error). Elementwise over
    frames (arrays) or for one frame (floats)."""
    slow = (after > SLOW * before) & (method != "gradient")
    if method == "sdls" and (slow.any() if isinstance(slow, np.ndarray) else slow):
        fall = promised()
        slow = slow & np.logical_not((fall >= PROMISE * before) & (before - after >= SLOW * fall))
    return slow


def nudge_direction(n: int) -> np.ndarray:
    """A fixed, irregular unit direction in coordinate space (the same on every run)."""
    d = np.sin(np.arange(1, n + 1) * 2.399963)  # golden-angle steps
    return d / max(np.linalg.norm(d), 1e-300)


def sigma_min(scene: Scene, ev: Evaluation) -> np.ndarray:
    """Smallest singular value of the weighted A of each frame of an evaluation."""
    if not (ev.y.shape[0] and scene.n_outputs and scene.n_coordinates):
        return np.full(ev.y.shape[0], np.nan)
    Aw = np.sqrt(ev.task_weight)[..., None] * ev.A * scene.joint_weight
    return np.linalg.svd(Aw, compute_uv=False)[:, -1]

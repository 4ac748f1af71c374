"""Where a solve starts (solver.restarts): the middle of the limits, uniform random coordinates
within them, and the best of several random draws by error energy."""

from __future__ import annotations

import numpy as np

from ..scene import Scene
from ..update import cost


def middle_of_limits(scene: Scene) -> np.ndarray:
    """The coordinates halfway between the limits (zero where a limit is infinite)."""
    middle = 0.5 * (scene.lower + scene.upper)
    return np.where(np.isfinite(middle), middle, 0.0)


def random_coordinates(scene: Scene, around: np.ndarray, rng) -> np.ndarray:
    """Uniform random coordinates (like `around`, (F, n)) within the limits; within pi of
    `around` where a limit is infinite; frozen coordinates (weight 0) as in `around`."""
    lower = np.where(np.isfinite(scene.lower), scene.lower, around - np.pi)
    upper = np.where(np.isfinite(scene.upper), scene.upper, around + np.pi)
    q = rng.uniform(lower, upper)
    return scene.project(np.where(scene.joint_weight > 0, q, around))


def best_of_random(scene: Scene, around, objects, bases, candidates: int, rng) -> np.ndarray:
    """Per frame, the lowest-error of `candidates` random coordinate vectors."""
    F, n = around.shape
    draws = random_coordinates(scene, np.repeat(around, candidates, axis=0), rng)
    if candidates == 1:
        return draws
    rep = lambda poses: None if poses is None else np.repeat(poses, candidates, axis=0)  # noqa: E731
    energy = cost(scene.evaluate(draws, rep(objects), rep(bases), jacobians=False)).reshape(F, candidates)
    return draws.reshape(F, candidates, n)[np.arange(F), np.argmin(energy, axis=1)]

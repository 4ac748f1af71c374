"""Joint limits: project coordinates onto their allowed set.

Box limits clamp each coordinate into [lower, upper]. An elliptic swing or sphere limit keeps the
rotation vector inside sum_i (phi_i / a_i)^2 <= 1, with a_i = upper_i for phi_i >= 0 and
a_i = -lower_i otherwise; a vector outside is scaled back along its own direction onto the
boundary, which is exact and keeps it in its quadrant (so the same semi-axes apply). A zero
semi-axis forbids that side: the component is clamped to zero first.

`wrap_spheres` turns unlimited sphere joints the short way round (angle at most pi, the same
rotation), so that their rotation-vector Jacobian stays far from its singularity at 2 pi.
"""

from __future__ import annotations

import numpy as np

from .model import Model


def project(model: Model, q: np.ndarray) -> np.ndarray:
    """The nearest allowed coordinates along the limit rules above, for q (F, n) or (n,). Frozen
    coordinates (weight 0) of an elliptic joint keep their values while they fit: the free ones
    are scaled onto what the ellipse leaves them."""
    if not model.limited:
        return q.copy()
    out = np.minimum(np.maximum(q, model.lower), model.upper)
    for coords in model.elliptic_groups:
        phi = q[..., coords]                                     # (F, k, d)
        semi = np.where(phi >= 0, model.upper[coords], -model.lower[coords])
        phi = np.where(semi > 0, phi, 0.0)
        term = np.where(semi > 0, phi / np.where(semi > 0, semi, 1.0), 0.0) ** 2
        frozen = model.weight[coords] == 0                        # (k, d)
        fixed = np.sum(np.where(frozen, term, 0.0), axis=-1)
        free = np.sum(np.where(frozen, 0.0, term), axis=-1)
        # Points a rounding error outside (as projected ones may be) stay put: projecting is idempotent.
        outside = fixed + free > 1.0 + 1e-15
        fits = fixed <= 1.0
        free_scale = np.sqrt(np.clip(1.0 - fixed, 0.0, None) / np.maximum(free, 1e-300))
        all_scale = 1.0 / np.sqrt(np.maximum(fixed + free, 1.0))
        scale = np.where(~outside[..., None], 1.0, np.where(fits[..., None] & ~frozen, free_scale[..., None],
                                                 np.where(fits[..., None], 1.0, all_scale[..., None])))
        out[..., coords] = phi * scale
    return out


def wrap_spheres(model: Model, q: np.ndarray) -> np.ndarray:
    """The same pose q (F, n) or (n,) with every unlimited sphere joint turned the short way round
    (angle <= pi)."""
    if not model.unlimited_spheres.size:
        return q
    c = model.unlimited_sphere_coordinates                                      # (k, 3)
    phi = q.take(c, axis=-1)
    t = np.sqrt(np.add.reduce(phi * phi, axis=-1, keepdims=True))
    if not np.count_nonzero(t > np.pi):
        return q
    out = q.copy()
    turns = np.round(t / (2.0 * np.pi))                # whole turns to take off the angle
    out[..., c] = np.where(t > np.pi, phi * (1.0 - 2.0 * np.pi * turns / np.maximum(t, 1e-300)), phi)
    return out


def violation(model: Model, q: np.ndarray) -> np.ndarray:
    """How far each frame of q lies outside its limits (0 inside): the largest box excess or
    elliptic excess sqrt(sum (phi/a)^2) - 1, for tests and input checks."""
    excess = np.max(np.maximum(q - model.upper, model.lower - q), axis=-1, initial=0.0)
    excess = np.maximum(excess, 0.0)
    for coords in model.elliptic_groups:
        phi = q[:, coords]
        semi = np.where(phi >= 0, model.upper[coords], -model.lower[coords])
        ratio = np.where(semi > 0, phi / np.where(semi > 0, semi, 1.0), np.where(phi != 0, np.inf, 0.0))
        excess = np.maximum(excess, np.max(np.sqrt(np.sum(ratio**2, axis=-1)) - 1.0, axis=-1))
    return excess

"""Central finite differences: the independent reference every analytic Jacobian is checked against."""

from __future__ import annotations

import numpy as np


def numerical_jacobian(f, x: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """d f / d x by central differences, batched over frames: x (F, n) -> f(x) (F, ...) gives
    (F, ..., n). f must treat frames independently."""
    x = np.asarray(x, dtype=float)
    columns = []
    for j in range(x.shape[-1]):
        dx = np.zeros_like(x)
        dx[..., j] = step
        columns.append((np.asarray(f(x + dx)) - np.asarray(f(x - dx))) / (2.0 * step))
    return np.stack(columns, axis=-1)


def relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max(1, max |b|): the figure Jacobian tests bound."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))

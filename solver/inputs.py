"""What a solve is given: checked arrays, and which frames can be solved or count as converged."""

from __future__ import annotations

import numpy as np

from .scene import Scene


def check_inputs(scene: Scene, q, objects, bases, values=None):
    """Validated float arrays: q (F, n), objects (F, K, 4, 4), bases (F, A, 4, 4) and values
    (F, values the tasks take), the last three None when not given."""
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[1] != scene.n_coordinates:
        raise ValueError(f"coordinates must have shape (frames, {scene.n_coordinates}), got {q.shape}")
    bad = ~np.all(np.isfinite(q), axis=1)
    if bad.any():
        raise ValueError(f"starting coordinates are not finite in frame(s) {np.flatnonzero(bad)[:10].tolist()}")
    F = q.shape[0]
    if scene.n_objects:
        if objects is None:
            raise ValueError(f"the scene needs poses for {scene.n_objects} object(s)")
        objects = np.broadcast_to(np.asarray(objects, float), (F, scene.n_objects, 4, 4))
    else:
        objects = None
    if bases is not None:
        bases = np.broadcast_to(np.asarray(bases, float), (F, scene.model.n_armatures, 4, 4))
    if values is not None:
        values = np.broadcast_to(np.asarray(values, float), (F, scene.n_values))
    return q, objects, bases, values


def finite_frames(objects, bases, F: int) -> np.ndarray:
    """Frames that can be solved: armature bases finite. (Objects without a finite pose only
    leave their own constraints out of a frame; see Scene.evaluate.)"""
    ok = np.ones(F, dtype=bool)
    if bases is not None:
        ok &= np.all(np.isfinite(bases), axis=(1, 2, 3))
    return ok


def frames_with_a_target(objects, F: int) -> np.ndarray:
    """Frames where at least one object has a finite pose: a fit there has something to fit."""
    if objects is None:
        return np.ones(F, dtype=bool)
    return np.any(np.all(np.isfinite(objects), axis=(-2, -1)), axis=-1)


def complete_frames(objects, F: int) -> np.ndarray:
    """Frames where every object has a finite pose: only these can count as converged."""
    if objects is None:
        return np.ones(F, dtype=bool)
    return np.all(np.isfinite(objects), axis=(1, 2, 3))

"""The fly pose pickles (SOURCES.md of the fly data): a loader that resolves numpy's array
reconstruction and nothing else, and the leg keypoints in either file's layout."""

from __future__ import annotations

import importlib
import io
import pickle

import numpy as np

KEYPOINTS = ("Coxa", "Femur", "Tibia", "Tarsus", "Claw")
LEGS = ("RF_leg", "RM_leg", "RH_leg", "LF_leg", "LM_leg", "LH_leg")

# The only globals the fly pose pickles reference (SOURCES.md), and where each module may live:
# numpy 1.x has numpy.core.multiarray, numpy 2.x numpy._core.multiarray (numpy.core is an alias).
_ALLOWED = {
    ("numpy", "ndarray"): ("numpy",),
    ("numpy", "dtype"): ("numpy",),
    ("numpy.core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "numpy.core.multiarray"),
    ("numpy.core.multiarray", "scalar"): ("numpy._core.multiarray", "numpy.core.multiarray"),
    ("numpy._core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "numpy.core.multiarray"),
    ("numpy._core.multiarray", "scalar"): ("numpy._core.multiarray", "numpy.core.multiarray"),
}


class NumpyOnlyUnpickler(pickle.Unpickler):
    """An Unpickler that resolves only numpy's array reconstruction names; any other global
    (a function, a class, os.system ...) raises pickle.UnpicklingError before it is touched."""

    def find_class(self, module, name):
        places = _ALLOWED.get((module, name))
        if places is None:
            raise pickle.UnpicklingError(f"global '{module}.{name}' is not allowed in a pose file")
        for place in places:
            try:
                return getattr(importlib.import_module(place), name)
            except (ImportError, AttributeError):
                continue
        raise pickle.UnpicklingError(f"numpy has no '{module}.{name}'")


def load_pickle(path_or_bytes):
    """Load a pose pickle (path or bytes) with NumpyOnlyUnpickler."""
    if isinstance(path_or_bytes, (bytes, bytearray)):
        return NumpyOnlyUnpickler(io.BytesIO(path_or_bytes)).load()
    with open(path_or_bytes, "rb") as fh:
        return NumpyOnlyUnpickler(fh).load()


def load_legs(path) -> dict:
    """Leg keypoints {leg: (F, 5, 3)} in KEYPOINTS order from either file of SOURCES.md: the
    flat dict of (F, 5, 3) arrays (pose3d_aligned.pkl) or the nested DeepFly3D dict
    {leg: {keypoint: {'raw_pos_aligned': (F, 3), ...}}} (pose_result_*_aligned.pkl)."""
    data = load_pickle(path)
    legs = {}
    for leg in LEGS:
        value = data[leg]
        if isinstance(value, dict):
            value = np.stack([np.asarray(value[k]["raw_pos_aligned"], float) for k in KEYPOINTS], axis=1)
        value = np.asarray(value, dtype=float)
        if value.ndim != 3 or value.shape[1:] != (len(KEYPOINTS), 3):
            raise ValueError(f"{leg}: keypoints of shape {value.shape}, expected (frames, 5, 3)")
        legs[leg] = value
    return legs

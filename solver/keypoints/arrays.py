"""Keypoints in NumPy files: .npy holding (F, K, 3) positions or (F, K, 4) with a confidence
column (COCO_17, HALPE_26, H36M_17, SMPL_24 or MediaPipe's 33 by K, as MotionBERT, SMPL fits and
MediaPipe exports write them), .npz holding such an array under one of POSITION_KEYS (or as its
only array) with optional confidence and rate arrays, and FreeMoCap's mediapipe_body_3d_xyz.npy
((F, 33, 3) in millimetres). None of them fixes an up direction, except MediaPipe's world
landmarks (y points down)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .checks import as_rate, chosen_set, make_trial
from .errors import KeypointFileError
from .keypoint_sets import KEYPOINT_SETS
from ..opensim.trc import UNIT_SCALE

POSITION_KEYS = ("positions", "keypoints", "keypoints_3d", "joints3d", "joints_3d", "joints", "pose3d", "kpts",
                 "X3D", "data")
CONFIDENCE_KEYS = ("confidence", "scores", "visibility")
RATE_KEYS = ("rate", "fps", "framerate", "frame_rate")
FREEMOCAP_NAME = "mediapipe_body_3d_xyz.npy"
MEDIAPIPE_UP = (0.0, -1.0, 0.0)


def _load(path: Path):
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:     # numpy's header parsing raises many kinds, varying with the version
        raise KeypointFileError(path, None, f"cannot read file as NumPy data: {exc}") from None


def _numeric(path: Path, array, what: str) -> np.ndarray:
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
        kind = getattr(array, "dtype", type(array))
        raise KeypointFileError(path, None, f"{what} holds {kind}, not real numbers")
    return array


def _from_npz(path: Path, archive):
    try:
        with archive:
            keys = list(archive.files)
            found = [k for k in POSITION_KEYS if k in keys]
            if not found and len(keys) != 1:
                raise KeypointFileError(path, None, f"no keypoint array in the archive (looked for "
                                                    f"{', '.join(POSITION_KEYS)}; it holds {keys[:8]})")
            key = found[0] if found else keys[0]
            positions = _numeric(path, archive[key], f"array {key!r}")
            confidence = next((_numeric(path, archive[k], f"array {k!r}") for k in CONFIDENCE_KEYS if k in keys), None)
            rate = next((_numeric(path, archive[k], f"array {k!r}") for k in RATE_KEYS if k in keys), None)
    except KeypointFileError:
        raise
    except Exception as exc:     # a broken archive member: zipfile's and numpy's errors, as in _load
        raise KeypointFileError(path, None, f"cannot read file as NumPy data: {exc}") from None
    if rate is not None:
        if rate.size != 1:
            raise KeypointFileError(path, None, f"the rate array holds {rate.size} values, not one")
        rate = float(rate.reshape(-1)[0])
    return positions, confidence, rate


def read_array_file(path, *, keypoint_set=None, rate=None, units=None, up=None, freemocap=None):
    """The KeypointTrial of a .npy or .npz file (module docstring). `freemocap` None: by the file
    name; `units` None: millimetres for FreeMoCap, metres otherwise."""
    path = Path(path)
    freemocap = path.name == FREEMOCAP_NAME if freemocap is None else freemocap
    data = _load(path)
    if not isinstance(data, np.ndarray):                      # an .npz archive
        positions, confidence, file_rate = _from_npz(path, data)
    else:
        positions, confidence, file_rate = _numeric(path, data, "the file"), None, None
    if positions.ndim != 3 or positions.shape[-1] not in (3, 4):
        raise KeypointFileError(path, None, f"an array of shape {positions.shape}: expected (frames, keypoints, 3), "
                                            "or 4 with a confidence column")
    if positions.shape[-1] == 4:
        if confidence is not None:
            raise KeypointFileError(path, None, "a confidence column and a confidence array: which one?")
        positions, confidence = positions[..., :3], positions[..., 3]
    if confidence is not None and confidence.shape != positions.shape[:2]:
        raise KeypointFileError(path, None, f"confidence of shape {confidence.shape} for positions {positions.shape}")
    units = units or ("mm" if freemocap else "m")
    if units.lower() not in UNIT_SCALE:
        raise KeypointFileError(path, None, f"unknown units {units!r} (mm, cm or m)")
    chosen = KEYPOINT_SETS["MEDIAPIPE_33"] if freemocap and keypoint_set is None else keypoint_set
    chosen = chosen_set(path, int(positions.shape[1]), chosen)
    if up is None and not freemocap and chosen is not None and chosen.name == "MEDIAPIPE_33":
        up = MEDIAPIPE_UP
    return make_trial(path, positions, confidence, as_rate(path, rate if rate is not None else file_rate),
                      units=units, scale=UNIT_SCALE[units.lower()], chosen=chosen, up=up,
                      source="freemocap" if freemocap else "numpy")

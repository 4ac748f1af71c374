"""Checks every reader applies to what it read before it makes a KeypointTrial: numbers finite or
NaN (missing), confidence >= 0, a rate, a known keypoint set of the right size."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import KeypointFileError
from .keypoint_sets import KeypointSet, keypoint_set, set_naming, sets_of_size
from .trial import KeypointTrial


def as_rate(path, rate, what: str = "the file") -> float:
    """`rate` as a positive finite float; KeypointFileError when it is missing or not one."""
    if rate is None:
        raise KeypointFileError(path, None, f"{what} holds no frame rate: pass rate= (frames per second)")
    try:
        value = float(rate)
    except (TypeError, ValueError):
        value = np.nan
    if not (np.isfinite(value) and value > 0):
        raise KeypointFileError(path, None, f"the frame rate must be a positive number, got {rate!r}")
    return value


def chosen_set(path, names_or_count, requested) -> KeypointSet | None:
    """The keypoint set: `requested` (a name or KeypointSet) checked against the file, else the one
    the names (a list) or the keypoint count (an int) pick; None for names of no set."""
    if requested is not None:
        chosen = requested if isinstance(requested, KeypointSet) else keypoint_set(requested)
        if isinstance(names_or_count, int):
            if names_or_count != len(chosen):
                raise KeypointFileError(path, None, f"{names_or_count} keypoints per frame, but {chosen.name} has "
                                                    f"{len(chosen)}")
        elif not set(names_or_count) <= set(chosen.names):
            extra = sorted(set(names_or_count) - set(chosen.names))
            raise KeypointFileError(path, None, f"keypoints {extra[:5]} are not in {chosen.name}")
        return chosen
    if not isinstance(names_or_count, int):
        return set_naming(names_or_count)
    fits = sets_of_size(names_or_count)
    if len(fits) == 1:
        return fits[0]
    if not fits:
        raise KeypointFileError(path, None, f"{names_or_count} keypoints per frame is no known keypoint set "
                                            f"(pass keypoint_set=)")
    raise KeypointFileError(path, None, f"{names_or_count} keypoints per frame fit {' and '.join(s.name for s in fits)}: "
                                        "pass keypoint_set= to say which")


def make_trial(path, positions, confidence, rate, *, names=None, time=None, units="m", scale=1.0,
               chosen=None, up=None, source="") -> KeypointTrial:
    """The KeypointTrial of raw arrays (positions (F, K, 3) in file units, confidence (F, K) or
    None), after the checks of the module docstring; names default to the set's."""
    positions = np.array(positions, dtype=float)
    if positions.ndim != 3 or positions.shape[-1] != 3 or positions.shape[0] == 0 or positions.shape[1] == 0:
        raise KeypointFileError(path, None, f"keypoint positions of shape {positions.shape}: expected "
                                            "(frames, keypoints, 3) with at least one of each")
    F, K = positions.shape[:2]
    if np.isinf(positions).any():
        f, k = np.argwhere(np.isinf(positions))[0][:2]
        raise KeypointFileError(path, None, f"frame {f}, keypoint {k} has an infinite coordinate (a missing "
                                            "keypoint is NaN)")
    with np.errstate(over="ignore", invalid="ignore"):
        positions = positions * scale
    if np.isinf(positions).any():
        raise KeypointFileError(path, None, "coordinates too large to convert to metres")
    if confidence is not None:
        confidence = np.array(confidence, dtype=float).reshape(F, K)
        bad = np.isinf(confidence) | (confidence < 0)
        if bad.any():
            f, k = np.argwhere(bad)[0]
            raise KeypointFileError(path, None, f"frame {f}, keypoint {k}: confidence {confidence[f, k]!r} is not "
                                                "a number >= 0")
    missing = np.isnan(positions).any(axis=-1)
    if confidence is not None:
        missing |= np.isnan(confidence)
        confidence = np.where(missing, 0.0, confidence)
    positions[missing] = np.nan
    if names is None:
        if chosen is None:
            raise KeypointFileError(path, None, "the file names no keypoints and no keypoint set was given")
        names = list(chosen.names)
    if time is None:
        time = np.arange(F) / rate
    return KeypointTrial(names=list(names), positions=positions, rate=rate, time=np.asarray(time, float),
                         confidence=confidence, units=units, keypoint_set=chosen, up=up, source=source,
                         path=None if path is None else Path(path))

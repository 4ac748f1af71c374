"""Read any keypoint file into a KeypointTrial, by suffix:

    .trc          Pose2Sim / OpenCap triangulated keypoints (solver.opensim's .trc reader; Y up)
    .json         MediaPipe Pose world landmarks (mediapipe.py)
    .csv          a keypoint table, MediaPipe's or another set's (mediapipe.py)
    .npy, .npz    NumPy arrays of COCO_17, HALPE_26, H36M_17, SMPL_24 or MediaPipe's 33, and
                  FreeMoCap's mediapipe_body_3d_xyz.npy (arrays.py)

Every reader raises KeypointFileError (an OpenSimFileError) on malformed input.
"""

from __future__ import annotations

from pathlib import Path

from ..opensim.trc import read_trc
from .arrays import read_array_file
from .checks import chosen_set, make_trial
from .errors import KeypointFileError
from .mediapipe import read_keypoint_csv, read_mediapipe_json
from .trial import KeypointTrial

KEYPOINT_SUFFIXES = (".trc", ".json", ".csv", ".npy", ".npz")
TRC_UP = (0.0, 1.0, 0.0)


def read_keypoint_trc(path, *, keypoint_set=None, rate=None, units=None, up=None) -> KeypointTrial:
    """The KeypointTrial of a .trc file: its markers as keypoints (no confidence), Y up as OpenSim's
    and Pose2Sim's are; `rate` and `units` come from the file."""
    markers = read_trc(path)
    chosen = chosen_set(path, list(markers.names), keypoint_set)
    return make_trial(path, markers.positions, None, markers.data_rate, names=list(markers.names),
                      time=markers.time, units=markers.units, chosen=chosen, up=TRC_UP if up is None else up,
                      source="trc")


READERS = {".trc": read_keypoint_trc, ".json": read_mediapipe_json, ".csv": read_keypoint_csv,
           ".npy": read_array_file, ".npz": read_array_file}


def read_keypoints(path, *, keypoint_set=None, rate=None, units=None, up=None) -> KeypointTrial:
    """The keypoints in `path` (module docstring). `keypoint_set` names the set where the file
    does not (17 keypoints: COCO_17 or H36M_17); `rate` (Hz) is needed where the file has none;
    `units` overrides what the format implies (not for .trc); `up` overrides the format's up."""
    path = Path(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise KeypointFileError(path, None, f"unknown keypoint file type {path.suffix!r} "
                                            f"(expected {', '.join(KEYPOINT_SUFFIXES)})")
    return reader(path, keypoint_set=keypoint_set, rate=rate, units=units, up=up)

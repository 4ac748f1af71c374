"""Markerless motion capture: 3-D keypoints (Pose2Sim, OpenCap, MediaPipe, FreeMoCap, MotionBERT,
SMPL fits) read into one KeypointTrial and fitted onto an engine model.

    tables.py, keypoint_sets.py   the keypoint sets as tables (name, parent, role, place on the bone)
    trial.py                      KeypointTrial: (F, K, 3) positions, (F, K) confidence, rate, units
    read.py                       read_keypoints(path): .trc, .json, .csv, .npy, .npz by suffix
"""

from .errors import KeypointFileError
from .keypoint_sets import KEYPOINT_SETS, KeypointSet, keypoint_set, set_naming
from .trial import KeypointTrial
from .read import KEYPOINT_SUFFIXES, read_keypoints

__all__ = ["KeypointFileError", "KEYPOINT_SETS", "KeypointSet", "keypoint_set", "set_naming", "KeypointTrial",
           "KEYPOINT_SUFFIXES", "read_keypoints"]

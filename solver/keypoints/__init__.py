"""Markerless motion capture: 3-D keypoints (Pose2Sim, OpenCap, MediaPipe, FreeMoCap, MotionBERT,
SMPL fits) read into one KeypointTrial and fitted onto a rig.

    tables.py, keypoint_sets.py   the keypoint sets as tables (name, parent, role, place on the bone)
    trial.py                      KeypointTrial: (F, K, 3) positions, (F, K) confidence, rate, units
    read.py                       read_keypoints(path): .trc, .json, .csv, .npy, .npz by suffix
                                  (checks.py, arrays.py, mediapipe.py: the formats)
    placement.py                  keypoints on a rig's bones by role, their offsets
    root_start.py                 where a fit starts: the rest rig moved rigidly onto the keypoints
    data_term.py                  weighted keypoint least squares per frame, limits, the pull to rest
    calibration.py                offsets and one uniform scale on a static window
    smoothness.py                 the acceleration penalty and its cutoff in Hz
    block_tridiagonal.py          the banded solve (block cyclic reduction)
    trajectory.py                 Levenberg-Marquardt over all frames (shared with marker IK's smoothing)
    second_order.py               the keypoint term's full Hessian, for Newton's steps
    contacts.py                   still feet: spans (the retarget's detection), pins, the floor
    fit.py                        all frames in one solve; errors, gaps and contacts reported
    pipeline.py                   fit_keypoints(trial, target_model, static=...): all of it
    aim.py                        the rotation-copy baseline (copy_keypoints): bones aimed along keypoints

    result = fit_keypoints(read_keypoints("trial.trc").z_up(), target_model(target),
                           static=read_keypoints("static.trc").z_up())
"""

from .errors import KeypointFileError
from .keypoint_sets import KEYPOINT_SETS, KeypointSet, keypoint_set, set_naming
from .trial import KeypointTrial
from .read import KEYPOINT_SUFFIXES, read_keypoints
from .placement import Placement, place_keypoints
from .calibration import Calibration, calibrate
from .fit import KeypointFit, fit_trajectory
from .pipeline import KeypointResult, copy_keypoints, fit_keypoints

__all__ = ["KeypointFileError", "KEYPOINT_SETS", "KeypointSet", "keypoint_set", "set_naming", "KeypointTrial",
           "KEYPOINT_SUFFIXES", "read_keypoints", "Placement", "place_keypoints", "Calibration", "calibrate",
           "KeypointFit", "fit_trajectory", "KeypointResult", "fit_keypoints", "copy_keypoints"]

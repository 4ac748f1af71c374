"""The fly, after the DeepFly3D seed: the leg preset of sequential IK, a safe loader for the fly
pose pickles, and vector-based head and antenna angles.

    data.py         the pose pickles: a loader that accepts numpy arrays only; leg keypoints
    legs.py         the leg model, its four stages, solve_leg / solve_legs
    closed_form.py  the four stages in closed form, all legs and frames in one batch
    head.py         head and antenna angles from vectors between keypoints

Body frame (the data's, aligned to the NeuroMechFly template): x anteroposterior (anterior +),
y mediolateral (left +), z dorsoventral (dorsal +).
"""

from .data import KEYPOINTS, LEGS, NumpyOnlyUnpickler, load_legs, load_pickle
from .head import AntennaAngles, HeadAngles, antenna_angles, derotate, head_angles, head_rotation
from .legs import (ANGLE_COLUMNS, ANGLES, COORDINATES, FLY_SETTINGS, LEG_MODEL, LENGTH_COLUMNS, METHODS, SEGMENTS,
                   TIP_SEGMENTS, LegSolution, keypoint_error_table, leg_coordinates, leg_keypoints, leg_model,
                   leg_stages, segment_lengths, solve_leg, solve_legs, whole_chain_stage)

__all__ = [
    "KEYPOINTS", "LEGS", "NumpyOnlyUnpickler", "load_legs", "load_pickle",
    "AntennaAngles", "HeadAngles", "antenna_angles", "derotate", "head_angles", "head_rotation",
    "ANGLE_COLUMNS", "ANGLES", "COORDINATES", "FLY_SETTINGS", "LEG_MODEL", "LENGTH_COLUMNS", "METHODS", "SEGMENTS",
    "TIP_SEGMENTS", "LegSolution", "keypoint_error_table", "leg_coordinates", "leg_keypoints", "leg_model",
    "leg_stages", "segment_lengths", "solve_leg", "solve_legs", "whole_chain_stage",
]

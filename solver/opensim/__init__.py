"""OpenSim file formats and models for the numpy engine: .trc and C3D markers (one Trial), .mot/.sto storage,
InverseKinematicsTool setups and IK task sets, OpenSim functions, .osim models turned into an
engine Model plus a Coupling from OpenSim coordinates to per-axis joint values, marker IK as
OpenSim's InverseKinematicsTool defines it, solved by the engine (ik.py), and OpenSim's ScaleTool
(scale_tool.py: model scaler, marker placer on that IK).

Pure numpy and the standard library; nothing here imports the `opensim` package.
"""

from .coupling import Coupling
from .errors import OpenSimFileError, OpenSimFileWarning
from .ik import (IKResult, IKRun, MarkerIK, MarkerScene, frame_range, output_paths, run_ik_setup, solve_marker_ik,
                 write_marker_errors, write_marker_locations, write_motion)
from .functions import (Constant, Function, LinearFunction, MultiplierFunction, NaturalCubicSpline,
                        PiecewiseLinearFunction, PolynomialFunction, SimmSpline)
from .markers import marker_jacobian, marker_positions
from .osim import MarkerSet, OpenSimModel, OsimModel, build_model, load_osim, read_osim
from .setup import IKCoordinateTask, IKMarkerTask, IKSetup, IKTaskSet, read_ik_setup, read_ik_task_set
from .storage import Storage, read_storage, write_storage
from .trc import MarkerData, read_trc, write_trc
from .trial import Trial
from .c3d import read_c3d
from .marker_file import MARKER_SUFFIXES, read_trial
from .scale_setup import ScaleSetup, read_scale_set, read_scale_setup
from .scale_tool import ScaleRun, run_scale_setup

__all__ = [
    "OpenSimFileError", "OpenSimFileWarning",
    "Coupling", "MarkerSet", "OpenSimModel", "OsimModel", "build_model", "load_osim", "read_osim",
    "marker_jacobian", "marker_positions",
    "Constant", "Function", "LinearFunction", "MultiplierFunction", "NaturalCubicSpline",
    "PiecewiseLinearFunction", "PolynomialFunction", "SimmSpline",
    "IKCoordinateTask", "IKMarkerTask", "IKSetup", "IKTaskSet", "read_ik_setup", "read_ik_task_set",
    "Storage", "read_storage", "write_storage",
    "MarkerData", "read_trc", "write_trc", "Trial", "read_c3d", "read_trial", "MARKER_SUFFIXES",
    "IKResult", "IKRun", "MarkerIK", "MarkerScene", "frame_range", "output_paths", "run_ik_setup", "solve_marker_ik",
    "write_marker_errors", "write_marker_locations", "write_motion",
    "ScaleSetup", "read_scale_set", "read_scale_setup", "ScaleRun", "run_scale_setup",
]

"""The fly-leg preset of sequential IK, a safe loader for the fly pose pickles, and vector-based
head and antenna angles.

Body frame (the data's, aligned to the NeuroMechFly template): x anteroposterior (anterior +),
y mediolateral (left +), z dorsoventral (dorsal +). Every segment's frame is parallel to the body
frame in the rest pose, where the leg hangs straight down: a segment of length L runs from its
joint to its tip at (0, 0, -L) in its own frame. In the seed's words yaw is the rotation about the
anteroposterior axis (x), pitch about the mediolateral axis (y), roll about the dorsoventral axis
(z), which in the rest pose is the segment's own long axis. Joints compose intrinsically (each
about the axis of the frame the previous joints left), in the order listed:

    coxa    ThC_yaw (x), ThC_pitch (y), ThC_roll (z)     R_coxa  = Rx(yaw) Ry(pitch) Rz(roll)
    femur   CTr_pitch (y), TrF_roll (z)                  R_femur = R_coxa Ry(ctr) Rz(trf)
    tibia   FTi_pitch (y)                                R_tibia = R_femur Ry(fti)
    tarsus  TiTa_pitch (y)                               R_tars  = R_tibia Ry(tita)

and the joints sit at the keypoints: ThC = Coxa (the root), CTr = Femur = ThC + R_coxa (0,0,-L_coxa),
FTi = Tibia = CTr + R_femur (0,0,-L_femur), TiTa = Tarsus, Claw = TiTa + R_tars (0,0,-L_tarsus).
A model that replays the angles must use this order and these axes (the seed's note on the
intrinsic Euler convention).

Stages (the seed's four): (ThC_yaw, ThC_pitch) bring the coxa tip to the Femur keypoint;
(ThC_roll, CTr_pitch) the femur tip to the Tibia keypoint; (TrF_roll, FTi_pitch) the tibia tip to
the Tarsus keypoint; (TiTa_pitch) the claw to the Claw keypoint. Each roll spins a segment about
its own axis, so it does not move that segment's tip: a stage never needs a later stage's angles.
solve_leg solves the stages in closed form by default (fly_closed_form.py: each stage points its
segment at its keypoint), or with the engine (method='sequential-iterative', sequential.py).
Segment lengths are the per-segment mean over frames of the measured keypoint distances. In the
model each length is a translation coordinate along the segment's -z axis, frozen in every stage,
so one model serves all six legs and they solve as one batch (see `leg_model`).

The whole-chain alternative solves all seven angles against the Claw keypoint alone: the claw
lands exactly wherever it is within reach, and the proximal keypoints go wherever the redundancy
puts them.

Head and antennae (vector-based, the seed's definitions; see `head_angles`, `antenna_angles`).
"""

from __future__ import annotations

import importlib
import io
import pickle
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import Model, Segment, Settings, forward_kinematics, prismatic, revolute
from .fly_closed_form import STAGES, solve_stages
from .rotations import axis_rotation
from .sequential import WARM_STARTS, SequentialResult, Stage, sequential_ik

KEYPOINTS = ("Coxa", "Femur", "Tibia", "Tarsus", "Claw")
LEGS = ("RF_leg", "RM_leg", "RH_leg", "LF_leg", "LM_leg", "LH_leg")
SEGMENTS = ("coxa", "femur", "tibia", "tarsus")
ANGLES = ("ThC_yaw", "ThC_pitch", "ThC_roll", "CTr_pitch", "TrF_roll", "FTi_pitch", "TiTa_pitch")

# ------------------------------------------------------------------------- safe pickle loading

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


# ------------------------------------------------------------------------- the leg model

# Coordinates of the leg model: the seven angles, and after each segment's joints its length as a
# translation along the segment's -z axis. Lengths are coordinates, not rest offsets, so one model
# serves every leg: stages never solve them (sequential.py freezes every coordinate outside a
# stage), each leg's rows carry its own lengths, and all legs solve in one batch.
COORDINATES = ("ThC_yaw", "ThC_pitch", "ThC_roll", "coxa_length", "CTr_pitch", "TrF_roll", "femur_length",
               "FTi_pitch", "tibia_length", "TiTa_pitch", "tarsus_length")
ANGLE_COLUMNS = np.array([COORDINATES.index(a) for a in ANGLES])
LENGTH_COLUMNS = np.array([COORDINATES.index(f"{s}_length") for s in SEGMENTS])
TIP_SEGMENTS = np.array([1, 3, 5, 7])          # the segments whose origins are the coxa, femur, tibia, tarsus tips


def leg_model() -> Model:
    """The leg of the module docstring: coxa, femur, tibia, tarsus, each followed by a segment
    '<name>_tip' that holds its length (a prismatic joint along -z) and whose origin is its tip."""
    down = (0.0, 0.0, -1.0)
    segments = [
        Segment("coxa", -1, np.eye(4), (revolute("X", name="ThC_yaw"), revolute("Y", name="ThC_pitch"),
                                        revolute("Z", name="ThC_roll"))),
        Segment("coxa_tip", 0, np.eye(4), (prismatic(down, name="coxa_length"),)),
        Segment("femur", 1, np.eye(4), (revolute("Y", name="CTr_pitch"), revolute("Z", name="TrF_roll"))),
        Segment("femur_tip", 2, np.eye(4), (prismatic(down, name="femur_length"),)),
        Segment("tibia", 3, np.eye(4), (revolute("Y", name="FTi_pitch"),)),
        Segment("tibia_tip", 4, np.eye(4), (prismatic(down, name="tibia_length"),)),
        Segment("tarsus", 5, np.eye(4), (revolute("Y", name="TiTa_pitch"),)),
        Segment("tarsus_tip", 6, np.eye(4), (prismatic(down, name="tarsus_length"),)),
    ]
    return Model(segments)


LEG_MODEL = leg_model()


def leg_coordinates(angles, lengths) -> np.ndarray:
    """Model coordinates (..., 11) from angles (..., 7) in ANGLES order and lengths (..., 4)."""
    angles, lengths = np.asarray(angles, float), np.asarray(lengths, float)
    shape = np.broadcast_shapes(angles.shape[:-1], lengths.shape[:-1])
    q = np.zeros(shape + (len(COORDINATES),))
    q[..., ANGLE_COLUMNS] = angles
    q[..., LENGTH_COLUMNS] = lengths
    return q


def leg_stages() -> list:
    """The seed's four stages (module docstring); keypoint columns follow KEYPOINTS."""
    c = COORDINATES.index
    return [
        Stage((c("ThC_yaw"), c("ThC_pitch")), "coxa_tip", 1, name="coxa tip -> Femur"),
        Stage((c("ThC_roll"), c("CTr_pitch")), "femur_tip", 2, name="femur tip -> Tibia"),
        Stage((c("TrF_roll"), c("FTi_pitch")), "tibia_tip", 3, name="tibia tip -> Tarsus"),
        Stage((c("TiTa_pitch"),), "tarsus_tip", 4, name="claw -> Claw"),
    ]


def whole_chain_stage() -> list:
    """One stage: all seven angles against the Claw keypoint only."""
    return [Stage(tuple(ANGLE_COLUMNS.tolist()), "tarsus_tip", 4, name="claw -> Claw (whole chain)")]


def leg_keypoints(angles, lengths, origin=None) -> np.ndarray:
    """Forward kinematics of the leg: keypoints (..., 5, 3) in KEYPOINTS order for angles (..., 7)
    and lengths (..., 4), with the ThC joint at `origin` (..., 3) (the body origin when None)."""
    q = leg_coordinates(angles, lengths)
    lead = q.shape[:-1]
    frames = forward_kinematics(LEG_MODEL, q.reshape(-1, q.shape[-1])).frames
    points = frames[:, np.concatenate([[0], TIP_SEGMENTS])][..., :3, 3].reshape(lead + (5, 3))
    return points if origin is None else points + np.asarray(origin, float)[..., None, :]


def _bases(origin: np.ndarray) -> np.ndarray:
    """Translations (..., 1, 4, 4) to the ThC joint positions (..., 3)."""
    T = np.broadcast_to(np.eye(4), origin.shape[:-1] + (1, 4, 4)).copy()
    T[..., 0, :3, 3] = origin
    return T


# Stage problems of the leg are least-squares fits that rarely reach zero error (fit mode: a frame
# is done when its step falls below 1e-9); SDLS keeps full steps where the plain pseudo-inverse
# would overshoot near the straight-leg singularity.
FLY_SETTINGS = Settings(method="sdls", precision=1e-9, max_iterations=100, fit=True)


@dataclass
class LegSolution:
    """Angles (..., F, 7) in ANGLES order, the FK keypoints of those angles (..., F, 5, 3), the
    distance of every keypoint from its measurement (..., F, 5), the segment lengths used (..., 4)
    and the solver's report."""

    angles: np.ndarray
    fitted: np.ndarray
    error: np.ndarray
    lengths: np.ndarray
    report: SequentialResult


METHODS = ("sequential", "sequential-iterative", "whole_chain")


def solve_leg(keypoints, method: str = "sequential", lengths=None, q0=None, settings: Settings = FLY_SETTINGS,
              warm_start: str = "auto", max_passes: int | None = None) -> LegSolution:
    """Joint angles from leg keypoints (F, 5, 3), or (B, F, 5, 3) for B legs solved in one batch:
    the seed's four stages ('sequential' in closed form, fly_closed_form.py; 'sequential-iterative'
    with the engine, sequential.py) or one solve of all seven angles against the claw
    ('whole_chain'). Lengths (4,) or (B, 4) default to each leg's mean measured lengths. The ThC
    joint follows the measured Coxa keypoint in every frame (the leg's base is translated there;
    the body axes are the data's). Frame 0 starts from the angles `q0` ((7,) or (B, 7); the hanging
    rest pose when None), later frames from the previous frame's solution (warm_start='none':
    every frame from q0). `settings` and `max_passes` apply to the engine's methods only."""
    keypoints = np.asarray(keypoints, float)
    if keypoints.ndim not in (3, 4) or keypoints.shape[-2:] != (len(KEYPOINTS), 3):
        raise ValueError(f"keypoints must have shape (F, 5, 3) or (B, F, 5, 3), got {keypoints.shape}")
    lengths = segment_lengths(keypoints) if lengths is None else np.asarray(lengths, float)
    if lengths.shape[-1:] != (len(SEGMENTS),) or not np.all(np.isfinite(lengths) & (lengths > 0)):
        raise ValueError(f"segment lengths must be 4 finite positive numbers per leg, got {lengths}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    start = np.zeros(7) if q0 is None else np.asarray(q0, float)
    origin = keypoints[..., 0, :]
    if method == "sequential":
        if max_passes is not None:
            raise ValueError("max_passes applies to method='sequential-iterative' only")
        if warm_start not in WARM_STARTS:
            raise ValueError(f"warm_start must be one of {WARM_STARTS}, not {warm_start!r}")
        return _closed_form(keypoints, lengths, start, warm_start != "none")
    stages = leg_stages() if method == "sequential-iterative" else whole_chain_stage()
    q_start = leg_coordinates(start[..., None, :], lengths[..., None, :])      # (..., 1, 11)
    report = sequential_ik(LEG_MODEL, stages, keypoints, q0=q_start, bases=_bases(origin), settings=settings,
                           warm_start=warm_start, max_passes=max_passes)
    angles = report.q[..., ANGLE_COLUMNS]
    fitted = leg_keypoints(angles, lengths[..., None, :], origin)
    return LegSolution(angles=angles, fitted=fitted, error=np.linalg.norm(fitted - keypoints, axis=-1),
                       lengths=lengths, report=report)


def _closed_form(keypoints, lengths, start, recurrence: bool) -> LegSolution:
    """solve_leg's 'sequential': fly_closed_form.solve_stages on a (B, F) batch, reported like
    the engine's stages (one pass per stage, no iterations, converged where the keypoint is known)."""
    t = time.perf_counter()
    single = keypoints.ndim == 3
    batch = keypoints[None] if single else keypoints
    B, F = batch.shape[:2]
    if start.shape[:-1] not in ((), (B,)) or start.shape[-1:] != (len(ANGLES),) or not np.all(np.isfinite(start)):
        raise ValueError(f"q0 must be finite angles of shape (7,) or ({B}, 7), got {start}")
    angles, fitted, stage_error = solve_stages(batch, np.broadcast_to(lengths, (B, len(SEGMENTS))),
                                               np.broadcast_to(start, (B, len(ANGLES))), recurrence)
    if single:
        angles, fitted, stage_error = angles[0], fitted[0], stage_error[0]
    S = len(STAGES)
    report = SequentialResult(q=leg_coordinates(angles, lengths[..., None, :]), keypoint_error=stage_error,
                              iterations=np.zeros(stage_error.shape, dtype=int), converged=np.isfinite(stage_error),
                              passes=np.ones(S, dtype=int), frame_solves=np.full(S, B * F),
                              warm_starts=["sequential" if recurrence else "none"] * S,
                              seconds=time.perf_counter() - t)
    return LegSolution(angles=angles, fitted=fitted, error=np.linalg.norm(fitted - keypoints, axis=-1),
                       lengths=lengths, report=report)


def solve_legs(legs: dict, method: str = "sequential", **options) -> dict:
    """Every leg of {leg: keypoints (F, 5, 3)} in one batch (legs of equal frame counts);
    returns {leg: LegSolution} with each leg's own slice."""
    names = list(legs)
    both = solve_leg(np.stack([legs[n] for n in names]), method=method, **options)
    return {n: LegSolution(angles=both.angles[i], fitted=both.fitted[i], error=both.error[i],
                           lengths=both.lengths[i], report=both.report) for i, n in enumerate(names)}


def segment_lengths(keypoints: np.ndarray) -> np.ndarray:
    """Mean length of each leg segment over frames (..., 4): mean_f |k_{i+1}(f) - k_i(f)| for
    keypoints (..., F, 5, 3), over the frames where both keypoints are finite."""
    distance = np.linalg.norm(np.diff(np.asarray(keypoints, float), axis=-2), axis=-1)
    known = np.isfinite(distance)
    count = known.sum(axis=-2)
    if np.any(count == 0):
        raise ValueError("a segment has no frame with both of its keypoints finite: give its length")
    return np.where(known, distance, 0.0).sum(axis=-2) / count


def keypoint_error_table(solutions: dict) -> dict:
    """{leg: {'mean': (5,), 'max': (5,)}} of the distances between measured and fitted keypoints."""
    return {leg: {"mean": s.error.mean(axis=0), "max": s.error.max(axis=0)} for leg, s in solutions.items()}


# ------------------------------------------------------------------------- head and antennae


def _plane_angle(u: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray:
    """Signed angle from u to v (..., 3) after projecting both onto the plane normal to body axis
    `axis`, positive for a right-handed turn about that axis: atan2(n . (u x v), u . v)."""
    keep = [k for k in range(3) if k != axis]
    a, b = u[..., keep], v[..., keep]
    sign = 1.0 if axis != 1 else -1.0            # (z, x) is the right-handed order about y
    cross = sign * (a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0])
    return np.arctan2(cross, np.sum(a * b, axis=-1))


_X, _Y = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])


@dataclass
class HeadAngles:
    """Head roll, pitch, yaw (F,) in radians, and the head rotation R = Rz(yaw) Rx(roll) Ry(pitch)."""

    roll: np.ndarray
    pitch: np.ndarray
    yaw: np.ndarray
    rotation: np.ndarray


def head_rotation(roll, pitch, yaw) -> np.ndarray:
    """R_head = Rz(yaw) Rx(roll) Ry(pitch): intrinsic yaw about z, then roll about the head's x,
    then pitch about the head's y."""
    return axis_rotation(2, yaw) @ axis_rotation(0, roll) @ axis_rotation(1, pitch)


def head_angles(left_base, right_base, neck, rest_pitch: float = 0.0) -> HeadAngles:
    """Head angles from the antenna bases and the neck (each (F, 3)), after the seed:

    w = left_base - right_base (the head's mediolateral axis), u = mid-antennae - neck.
      yaw   = the angle of w from the global mediolateral axis (y) in the dorsal plane (xy), turning
              about z. (The seed measures w against the anteroposterior axis: that angle minus 90 deg.)
      roll  = the angle of w from y in the transverse plane (yz), turning about x, measured after
              de-rotating w by the yaw: w1 = Rz(-yaw) w.
      pitch = the angle of u from the global anteroposterior axis (x) in the sagittal plane (xz),
              turning about y, measured after de-rotating u by yaw and roll:
              u2 = Rx(-roll) Rz(-yaw) u; minus `rest_pitch`, the resting head pitch.

    The seed measures each angle in its global plane; that is exact when only that angle is
    non-zero. Measuring each in the plane left by the angles already found makes the three exact
    for any head rotation R = Rz(yaw) Rx(roll) Ry(pitch) (see head_rotation): w = R (0, |w|, 0)
    gives yaw and roll, and u = R Ry(rest_pitch) (|u|, 0, 0) gives pitch.
    """
    left_base, right_base, neck = (np.atleast_2d(np.asarray(a, float)) for a in (left_base, right_base, neck))
    w = left_base - right_base
    u = 0.5 * (left_base + right_base) - neck
    yaw = _plane_angle(_Y, w, 2)
    w1 = np.einsum("fji,fj->fi", axis_rotation(2, yaw), w)                  # Rz(-yaw) w  (R^T w)
    roll = _plane_angle(_Y, w1, 0)
    Rzx = axis_rotation(2, yaw) @ axis_rotation(0, roll)
    u2 = np.einsum("fji,fj->fi", Rzx, u)                           # Rx(-roll) Rz(-yaw) u
    pitch = _plane_angle(_X, u2, 1) - rest_pitch
    return HeadAngles(roll=roll, pitch=pitch, yaw=yaw, rotation=head_rotation(roll, pitch, yaw))


@dataclass
class AntennaAngles:
    pitch: np.ndarray
    yaw: np.ndarray


def derotate(points, neck, head: HeadAngles) -> np.ndarray:
    """Points (F, ..., 3) in the head frame: R_head^T (p - neck)."""
    points = np.asarray(points, float)
    rel = points - np.asarray(neck, float).reshape(points.shape[0], *([1] * (points.ndim - 2)), 3)
    return np.einsum("fji,f...j->f...i", head.rotation, rel)


def antenna_angles(base, tip, left_base, right_base, neck, head: HeadAngles | None = None,
                   rest_pitch: float = 0.0) -> AntennaAngles:
    """Pitch and yaw of one antenna (base and tip (F, 3)), after the seed, in the head frame:
    all keypoints are first de-rotated by the head rotation (head_angles), R_head^T (p - neck), so
    the angles do not swap roles when the head turns. With a = base - neck, d = tip - base and
    w = left_base - right_base (all de-rotated):

      pitch = the angle from a to d in the sagittal plane (xz), turning about y;
      yaw   = the angle from w to d in the transverse plane (yz), turning about x, measured after
              de-rotating d by its own sagittal direction (d1 = Ry(-beta) d, beta the angle of d from
              -z about y), i.e. in the plane that contains d and the mediolateral axis.

    Both are exact for an antenna direction d = |d| Ry(beta) Rx(gamma) (0, 0, -1) in the head frame:
    pitch = beta - (angle of a from -z about y) and yaw = gamma - 90 deg (the seed's angle from the
    right-to-left axis, so an antenna hanging straight down has yaw -90 deg).
    """
    head = head_angles(left_base, right_base, neck, rest_pitch) if head is None else head
    pts = derotate(np.stack([np.atleast_2d(base), np.atleast_2d(tip), np.atleast_2d(left_base),
                             np.atleast_2d(right_base)], axis=1), neck, head)
    a, d, w = pts[:, 0], pts[:, 1] - pts[:, 0], pts[:, 2] - pts[:, 3]
    pitch = _plane_angle(a, d, 1)
    down = np.array([0.0, 0.0, -1.0])
    beta = _plane_angle(np.broadcast_to(down, d.shape), d, 1)
    d1 = np.einsum("fji,fj->fi", axis_rotation(1, beta), d)                 # Ry(-beta) d: in the yz plane
    yaw = _plane_angle(w, d1, 0)
    return AntennaAngles(pitch=pitch, yaw=yaw)


def data_path(name: str = "pose3d_aligned.pkl") -> Path:
    """Where the shared fly pose files live, relative to this repository."""
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "fly_pose" / name

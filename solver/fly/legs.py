"""The fly-leg preset of sequential IK: the leg model, its four stages, and the solve.

Every segment's frame is parallel to the body frame (solver.fly) in the rest pose, where the leg
hangs straight down: a segment of length L runs from its joint to its tip at (0, 0, -L) in its
own frame. In the seed's words yaw is the rotation about the anteroposterior axis (x), pitch about
the mediolateral axis (y), roll about the dorsoventral axis (z), which in the rest pose is the
segment's own long axis. Joints compose intrinsically (each about the axis of the frame the
previous joints left), in the order listed:

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
solve_leg solves the stages in closed form by default (closed_form.py: each stage points its
segment at its keypoint), or with the engine (method='sequential-iterative', solver.sequential).
Segment lengths are the per-segment mean over frames of the measured keypoint distances. In the
model each length is a translation coordinate along the segment's -z axis, frozen in every stage,
so one model serves all six legs and they solve as one batch (see `leg_model`).

The whole-chain alternative solves all seven angles against the Claw keypoint alone: the claw
lands exactly wherever it is within reach, and the proximal keypoints go wherever the redundancy
puts them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import Model, Segment, Settings, forward_kinematics, prismatic, revolute
from ..geometry import translations
from ..sequential import WARM_STARTS, SequentialResult, Stage, sequential_ik
from .closed_form import STAGES, solve_stages
from .data import KEYPOINTS

SEGMENTS = ("coxa", "femur", "tibia", "tarsus")
ANGLES = ("ThC_yaw", "ThC_pitch", "ThC_roll", "CTr_pitch", "TrF_roll", "FTi_pitch", "TiTa_pitch")

# Coordinates of the leg model: the seven angles, and after each segment's joints its length as a
# translation along the segment's -z axis. Lengths are coordinates, not rest offsets, so one model
# serves every leg: stages never solve them (solver.sequential freezes every coordinate outside
# a stage), each leg's rows carry its own lengths, and all legs solve in one batch.
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


# Stage problems of the leg are least-squares fits that rarely reach zero error (fit mode: a frame
# is done when its step falls below 1e-9); SDLS keeps full steps where the plain pseudo-inverse
# would overshoot near the straight-leg singularity.
FLY_SETTINGS = Settings(method="sdls", precision=1e-9, max_iterations=100, fit=True)


@dataclass
class LegSolution:
    """Angles (..., F, 7) in ANGLES order, the FK keypoints of those angles (..., F, 5, 3), the
    distance of every keypoint from its measurement `position_error` (..., F, 5), the segment
    lengths used (..., 4) and the solver's report."""

    angles: np.ndarray
    fitted: np.ndarray
    position_error: np.ndarray
    lengths: np.ndarray
    report: SequentialResult


METHODS = ("sequential", "sequential-iterative", "whole_chain")


def solve_leg(keypoints, method: str = "sequential", lengths=None, q0=None, settings: Settings = FLY_SETTINGS,
              warm_start: str = "auto", max_passes: int | None = None) -> LegSolution:
    """Joint angles from leg keypoints (F, 5, 3), or (B, F, 5, 3) for B legs solved in one batch:
    the seed's four stages ('sequential' in closed form, closed_form.py; 'sequential-iterative'
    with the engine, solver.sequential) or one solve of all seven angles against the claw
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
    report = sequential_ik(LEG_MODEL, stages, keypoints, q0=q_start, bases=translations(origin[..., None, :]),
                           settings=settings, warm_start=warm_start, max_passes=max_passes)
    angles = report.q[..., ANGLE_COLUMNS]
    fitted = leg_keypoints(angles, lengths[..., None, :], origin)
    return LegSolution(angles=angles, fitted=fitted, position_error=np.linalg.norm(fitted - keypoints, axis=-1),
                       lengths=lengths, report=report)


def _closed_form(keypoints, lengths, start, recurrence: bool) -> LegSolution:
    """solve_leg's 'sequential': closed_form.solve_stages on a (B, F) batch, reported like
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
    report = SequentialResult(q=leg_coordinates(angles, lengths[..., None, :]), position_error=stage_error,
                              iterations=np.zeros(stage_error.shape, dtype=int), converged=np.isfinite(stage_error),
                              passes=np.ones(S, dtype=int), frame_solves=np.full(S, B * F),
                              warm_starts=["sequential" if recurrence else "none"] * S,
                              seconds=time.perf_counter() - t)
    return LegSolution(angles=angles, fitted=fitted, position_error=np.linalg.norm(fitted - keypoints, axis=-1),
                       lengths=lengths, report=report)


def solve_legs(legs: dict, method: str = "sequential", **options) -> dict:
    """Every leg of {leg: keypoints (F, 5, 3)} in one batch (legs of equal frame counts);
    returns {leg: LegSolution} with each leg's own slice."""
    names = list(legs)
    both = solve_leg(np.stack([legs[n] for n in names]), method=method, **options)
    return {n: LegSolution(angles=both.angles[i], fitted=both.fitted[i], position_error=both.position_error[i],
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
    return {leg: {"mean": s.position_error.mean(axis=0), "max": s.position_error.max(axis=0)}
            for leg, s in solutions.items()}

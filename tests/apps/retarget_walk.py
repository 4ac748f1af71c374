"""A synthetic walk for the retarget tests: a source whose contacts are known analytically, and
targets of other proportions and rest poses.

The source walks along -Y at SPEED, Z up. Its cycle is counted in frames at FPS (sampled at any
rate): each foot is planted flat on one world point for STANCE frames of every PERIOD-frame cycle
(the left foot from frame LEFT_OFFSET, the right one from RIGHT_OFFSET), optionally skating about
that point, and swings to its next plant in between (straight ahead at constant speed, lifted by a
half sine of height LIFT). Thighs and shins follow from the hip and ankle positions by the two-bone
triangle in the sagittal plane, knees forward; the pelvis yaws, the spine counter-rotates and the
arms swing, each by a sine of the cycle. Arms hang `arm_drop` radians below horizontal (0: a
T-pose) plus their swing. With `heel_off` (H, degrees), each foot's last H stance frames pivot
about its planted ball, the heel rising linearly to that pitch (the swing then starts from the
flat plant again: a jump the retarget need not care about).
"""

from __future__ import annotations

import numpy as np

from solver.bones import Bone, rest_matrix
from solver.rotations import axis_angle_matrix
from solver.retarget import Source, Span, Target

FPS = 30.0
PERIOD, STANCE = 30, 18
LEFT_OFFSET, RIGHT_OFFSET = 5, 20
SPEED = 1.0
LIFT = 0.12
THIGH, SHIN = 0.45, 0.45
HIPS_HEIGHT, HIP_DROP, HIP_WIDTH = 0.85, 0.07, 0.1
ANKLE, BALL_FORWARD, BALL_HEIGHT = 0.08, 0.13, 0.02

_X, _Y, _Z = np.eye(3)


def rotation_along(direction, side=_X) -> np.ndarray:
    """A rotation (..., 3, 3) whose Y axis is `direction` (..., 3) and whose X axis is `side`
    (perpendicular to it) made orthogonal: a Blender bone's frame with that roll."""
    y = direction / np.linalg.norm(direction, axis=-1, keepdims=True)
    x = side - (side * y).sum(axis=-1, keepdims=True) * y
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return np.stack([x, y, np.cross(x, y)], axis=-1)


def _phase(n_frames: int, offset: int, fps: float):
    """Per frame: the cycle index k and the phase within it, in frames of the 30 fps cycle."""
    t = np.arange(n_frames) * (FPS / fps) - offset
    k = np.floor(t / PERIOD)
    return k, t - k * PERIOD


def true_spans(n_frames: int, offset: int, fps: float = FPS) -> list:
    """The frames where a foot with this cycle offset is planted, as Spans."""
    planted = _phase(n_frames, offset, fps)[1] <= STANCE - 1
    edges = np.diff(np.concatenate([[0], planted.astype(int), [0]]))
    return [Span(a, b - 1) for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))]


def ankle_path(n_frames: int, offset: int, x: float, fps: float = FPS, skate: float = 0.0) -> np.ndarray:
    """(F, 3): planted under the hips' mid-stance position (sliding forward at `skate` m/s about
    it, as a foot of careless mocap does), swinging to the next plant."""
    k, phase = _phase(n_frames, offset, fps)
    half = (STANCE - 1) / 2
    plant = lambda k: -SPEED * (offset + PERIOD * k + half) / FPS  # noqa: E731
    stance = phase <= STANCE - 1
    s = np.where(stance, 0.0, (phase - (STANCE - 1)) / (PERIOD - STANCE + 1))
    lift, land = plant(k) - skate * half / FPS, plant(k + 1) + skate * half / FPS
    y = np.where(stance, plant(k) - skate * (phase - half) / FPS, lift + s * (land - lift))
    z = ANKLE + LIFT * np.sin(np.pi * s)
    return np.stack([np.full(n_frames, x), y, z], axis=-1)


def heel_pitch(n_frames: int, offset: int, heel_off, fps: float = FPS) -> np.ndarray:
    """The foot's pitch (F,) about its ball in radians: 0, rising linearly over the last H stance
    frames to `heel_off` = (H, degrees); zero where heel_off is None."""
    if heel_off is None:
        return np.zeros(n_frames)
    frames, degrees = heel_off
    phase = _phase(n_frames, offset, fps)[1]
    start = STANCE - 1 - frames
    return np.radians(degrees) * np.clip((phase - start) / frames, 0.0, None) * (phase <= STANCE - 1)


def walk_source(n_frames: int = 100, arm_drop: float = 0.0, fps: float = FPS, skate: float = 0.0,
                heel_off=None) -> Source:
    """The synthetic walk (module docstring) as a Source sampled at `fps`, planted feet sliding
    at `skate` m/s, heels lifting about the balls at the end of each stance by `heel_off`."""
    t = np.arange(n_frames) * (FPS / fps)            # in frames of the 30 fps cycle
    cycle = 2 * np.pi * t / PERIOD
    hips = np.stack([np.zeros(n_frames), -SPEED * t / FPS, np.full(n_frames, HIPS_HEIGHT)], axis=-1)
    yaw = 0.1 * np.sin(cycle)
    rotations, heads = {}, {}

    def upright(angle):
        return axis_angle_matrix(_Z, angle) @ rotation_along(_Z)

    rotations["hips"], heads["hips"] = upright(yaw), hips
    column = [("spine", 0.12, -0.5), ("chest", 0.27, -0.7), ("neck", 0.45, -0.3), ("head", 0.55, -0.1)]
    for role, height, share in column:
        rotations[role] = upright(share * yaw)
        heads[role] = hips + [0.0, 0.0, height]
    for side, sign, offset in (("L", 1.0, LEFT_OFFSET), ("R", -1.0, RIGHT_OFFSET)):
        hip = hips + [sign * HIP_WIDTH, 0.0, -HIP_DROP]
        ankle = ankle_path(n_frames, offset, sign * HIP_WIDTH, fps, skate)
        to_ball = np.array([0.0, -BALL_FORWARD, BALL_HEIGHT - ANKLE])
        pitch = axis_angle_matrix(_X, heel_pitch(n_frames, offset, heel_off, fps)) \
            if heel_off is not None else np.broadcast_to(np.eye(3), (n_frames, 3, 3))
        ankle = ankle + to_ball - pitch @ to_ball               # turned about the ball, which stays
        d = ankle - hip
        length = np.linalg.norm(d, axis=-1, keepdims=True)
        u = d / length
        bend = np.arccos((THIGH**2 + length**2 - SHIN**2) / (2 * THIGH * length))[:, 0]   # at the hip
        forward = np.stack([np.zeros(n_frames), -u[:, 2], u[:, 1]], axis=-1)          # u turned +90 deg about X
        forward *= np.where(forward[:, 1:2] < 0, 1.0, -1.0)                           # knees point to -Y
        knee = hip + THIGH * (np.cos(bend)[:, None] * u + np.sin(bend)[:, None] * forward)
        ball = ankle + pitch @ to_ball
        heads.update({f"thigh.{side}": hip, f"shin.{side}": knee, f"foot.{side}": ankle, f"toe.{side}": ball})
        rotations[f"thigh.{side}"] = rotation_along(knee - hip)
        rotations[f"shin.{side}"] = rotation_along(ankle - knee)
        rotations[f"foot.{side}"] = rotation_along(ball - ankle)
        rotations[f"toe.{side}"] = rotation_along(np.broadcast_to(-_Y, ball.shape))
        chest_yaw = axis_angle_matrix(_Z, -0.7 * yaw)
        shoulder = hips + np.einsum("fij,j->fi", chest_yaw, [sign * 0.03, 0.0, 0.43])
        arm_root = hips + np.einsum("fij,j->fi", chest_yaw, [sign * 0.18, 0.0, 0.43])
        rotations[f"shoulder.{side}"] = chest_yaw @ rotation_along(sign * _X, _Y)
        heads[f"shoulder.{side}"] = shoulder
        swing = axis_angle_matrix(_X, sign * 0.35 * np.sin(cycle)) @ axis_angle_matrix(_Y, -sign * arm_drop)
        upper = chest_yaw @ swing @ rotation_along(sign * _X, _Y)
        fore = upper @ axis_angle_matrix(_Z, sign * (0.2 + 0.15 * np.sin(cycle)))
        rotations[f"upper_arm.{side}"], heads[f"upper_arm.{side}"] = upper, arm_root
        elbow = arm_root + 0.28 * upper[..., :, 1]
        rotations[f"forearm.{side}"], heads[f"forearm.{side}"] = fore, elbow
        rotations[f"hand.{side}"], heads[f"hand.{side}"] = fore, elbow + 0.25 * fore[..., :, 1]
    return Source(rotations=rotations, heads=heads, fps=fps)


KNEE_LIMIT = (0.0, 1.5)


def target_bones(arm_drop: float = np.pi / 4, limits: bool = True) -> list:
    """A target taller than the source, with longer legs, an unmapped root, an unmapped spine bone
    between two mapped ones, and arms `arm_drop` below horizontal (pi/4: an A-pose). Knees are
    hinges about their X axis (flexion positive) within KNEE_LIMIT when `limits`."""
    bones = []

    def add(name, head, tail, parent, **kw):
        M = rest_matrix(head, tail, 0.0)
        bones.append(Bone(name, M, float(np.linalg.norm(np.subtract(tail, head))), parent, **kw))

    add("root", (0, 0, 0), (0, 0.3, 0), None)
    add("pelvis", (0, 0, 1.15), (0, 0, 1.27), "root")
    add("spine", (0, 0, 1.27), (0, 0, 1.42), "pelvis")
    add("spine.001", (0, 0, 1.42), (0, 0, 1.55), "spine")
    add("chest", (0, 0, 1.55), (0, 0, 1.70), "spine.001")
    add("neck", (0, 0, 1.70), (0, 0, 1.80), "chest")
    add("head", (0, 0, 1.80), (0, 0, 2.00), "neck")
    knee = dict(lock=(False, True, True), limits=(KNEE_LIMIT, None, None)) if limits else {}
    for side, s in (("L", 1.0), ("R", -1.0)):
        add(f"thigh.{side}", (s * 0.11, 0, 1.11), (s * 0.11, -0.02, 0.61), "pelvis")
        add(f"shin.{side}", (s * 0.11, -0.02, 0.61), (s * 0.11, 0, 0.09), f"thigh.{side}", **knee)
        add(f"foot.{side}", (s * 0.11, 0, 0.09), (s * 0.11, -0.15, 0.025), f"shin.{side}")
        add(f"toe.{side}", (s * 0.11, -0.15, 0.025), (s * 0.11, -0.22, 0.02), f"foot.{side}")
        add(f"shoulder.{side}", (s * 0.03, 0, 1.66), (s * 0.2, 0, 1.66), "chest")
        arm = np.array([s * np.cos(arm_drop), 0.0, -np.sin(arm_drop)])
        elbow = np.array([s * 0.2, 0, 1.66]) + 0.32 * arm
        add(f"upper_arm.{side}", (s * 0.2, 0, 1.66), tuple(elbow), f"shoulder.{side}")
        add(f"forearm.{side}", tuple(elbow), tuple(elbow + 0.28 * arm), f"upper_arm.{side}")
        add(f"hand.{side}", tuple(elbow + 0.28 * arm), tuple(elbow + 0.38 * arm), f"forearm.{side}")
    return bones


ROLE_MAP = {"hips": "pelvis", "spine": "spine", "chest": "chest", "neck": "neck", "head": "head",
            **{f"{r}.{s}": f"{r}.{s}" for s in "LR"
               for r in ("thigh", "shin", "foot", "toe", "shoulder", "upper_arm", "forearm", "hand")}}


def walk_target(arm_drop: float = np.pi / 4, limits: bool = True, **kw) -> Target:
    return Target(target_bones(arm_drop, limits), dict(ROLE_MAP), **kw)

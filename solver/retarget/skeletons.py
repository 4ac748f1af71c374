"""The two skeletons of a retarget, as arrays: the source's motion and the target's rest rig.

Source: per role, the source bone's world rotation R_r(t) (F, 3, 3) and head position h_r(t)
(F, 3), optionally its tail (F, 3), sampled at the source's own frames, `fps` per second, in the
space the target's armature lives in (the caller converts). A bone's direction is tail - head
where a tail is given, else its rotation's Y axis (a Blender bone's Y axis runs along it).

Target: its bones as solver.bones.Bone records in rest pose (armature space), which bone plays
each role (by name), and its contact points: a point on a role's bone, in that bone's frame
(Y along the bone). `target_model` turns it into the Model the solve moves:

    the hips role's bone      a free root: translations along its rest X, Y, Z, then a sphere
    other mapped bones        the joints their IK locks and limits give (bones.bone_joints),
                              without stretch unless `stretch` is set
    unmapped bones            rigid

so a solved pose is, per bone, Blender's matrix_basis: the hips' translation (its pose location)
and each bone's rotation relative to its rest.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..bones import Bone, segments_from_bones
from ..model import Model, Segment, prismatic, sphere
from .roles import LEG_ROLES, check_role, missing_required


@dataclass(frozen=True)
class Source:
    """A source motion per role (see the module docstring). Arrays are checked by `check`."""

    rotations: Mapping[str, np.ndarray]          # role -> (F, 3, 3) world rotation
    heads: Mapping[str, np.ndarray]              # role -> (F, 3) head position
    fps: float = 30.0
    tails: Mapping[str, np.ndarray] = field(default_factory=dict)   # role -> (F, 3), optional

    @property
    def roles(self) -> list:
        return list(self.rotations)

    @property
    def n_frames(self) -> int:
        return int(np.shape(next(iter(self.rotations.values())))[0]) if self.rotations else 0

    def direction(self, role: str) -> np.ndarray:
        """Unit bone direction (F, 3): tail - head where a tail is given, else the rotation's Y axis."""
        if role in self.tails:
            d = np.asarray(self.tails[role], float) - np.asarray(self.heads[role], float)
            return d / np.linalg.norm(d, axis=-1, keepdims=True)
        return np.asarray(self.rotations[role], float)[..., :, 1]

    def check(self) -> None:
        """ValueError naming what is wrong: unknown roles, missing channels, zero frames, shapes
        that disagree, rotations that are not finite rotations, non-finite heads or tails,
        bones of zero length."""
        if not (np.isfinite(self.fps) and self.fps > 0):
            raise ValueError(f"source fps {self.fps} must be a positive number")
        for role in set(self.rotations) | set(self.heads) | set(self.tails):
            check_role(role, "source role")
        for role in self.rotations:
            if role not in self.heads:
                raise ValueError(f"source role {role!r} has a rotation channel but no head positions")
        for role in self.heads:
            if role not in self.rotations:
                raise ValueError(f"source role {role!r} has head positions but no rotation channel")
        for role in self.tails:
            if role not in self.rotations:
                raise ValueError(f"source role {role!r} has tail positions but no rotation channel")
        missing = missing_required(self.rotations)
        if missing:
            raise ValueError(f"the source lacks the role(s) {missing} (hips and both legs down to the feet are needed)")
        F = self.n_frames
        if F == 0:
            raise ValueError("the source has zero frames")
        for role in self.rotations:
            R = np.asarray(self.rotations[role], dtype=float)
            _check_channel(R, (F, 3, 3), f"source rotation of {role!r}")
            error = np.abs(np.swapaxes(R, -1, -2) @ R - np.eye(3)).max(axis=(-2, -1))
            bad = np.flatnonzero((error > 1e-4) | (np.linalg.det(R) < 0))
            if bad.size:
                raise ValueError(f"source rotation of {role!r} is not a rotation in frame(s) {bad[:10].tolist()} "
                                 "(orthonormal, determinant 1: divide out any scale)")
            _check_channel(np.asarray(self.heads[role], float), (F, 3), f"source head of {role!r}")
            if role in self.tails:
                tail = np.asarray(self.tails[role], float)
                _check_channel(tail, (F, 3), f"source tail of {role!r}")
                short = np.flatnonzero(np.linalg.norm(tail - np.asarray(self.heads[role], float), axis=-1) < 1e-9)
                if short.size:
                    raise ValueError(f"source bone {role!r} has zero length in frame(s) {short[:10].tolist()}")


def _check_channel(array: np.ndarray, shape: tuple, what: str) -> None:
    if array.shape != shape:
        raise ValueError(f"{what} has shape {array.shape}, expected {shape}")
    bad = ~np.isfinite(array).reshape(shape[0], -1).all(axis=1)
    if bad.any():
        raise ValueError(f"{what} is not finite (NaN or missing) in frame(s) {np.flatnonzero(bad)[:10].tolist()}")


@dataclass(frozen=True)
class ContactPoint:
    """A point that may rest on the floor: `point` in the frame of the bone playing `role`;
    `clearance` how high above the floor it rests when its foot stands flat (0 for points on
    the sole; the toe's tip where the rig's toe ends above its sole); `pinned` False: only kept
    above the floor, no contact spans are detected for it (the caller may still give some)."""

    name: str
    role: str
    point: tuple = (0.0, 0.0, 0.0)
    clearance: float = 0.0
    pinned: bool = True


@dataclass(frozen=True)
class Target:
    """The target rig at rest (see the module docstring). `roles` maps role -> bone name;
    `contact_points` None takes default_contact_points (heel, ball and toe tip of each foot); `stretch`
    keeps the bones' IK stretch as a joint."""

    bones: Sequence[Bone]
    roles: Mapping[str, str]
    contact_points: Sequence[ContactPoint] | None = None
    stretch: bool = False

    def bone(self, role: str) -> Bone:
        name = self.roles[role]
        return next(b for b in self.bones if b.name == name)

    def check(self) -> None:
        """ValueError naming what is wrong: unknown roles, roles on bones it does not have, missing
        leg roles, mapped bones outside the hips' subtree, contact points on unmapped roles."""
        names = [b.name for b in self.bones]
        if len(set(names)) != len(names):
            raise ValueError("the target has bones with the same name")
        for role, bone in self.roles.items():
            check_role(role, "target role")
            if bone not in names:
                raise ValueError(f"target role {role!r} is mapped to {bone!r}, which is not a bone of the target")
        missing = missing_required(self.roles)
        if missing:
            raise ValueError(f"the target lacks the role(s) {missing} (hips and both legs down to the feet are needed)")
        used = {}
        for role, bone in self.roles.items():
            if bone in used:
                raise ValueError(f"target bone {bone!r} plays two roles, {used[bone]!r} and {role!r}")
            used[bone] = role
        parent = {b.name: b.parent for b in self.bones}
        hips = self.roles["hips"]
        for role, bone in self.roles.items():
            b, seen = bone, set()
            while b is not None and b != hips and b not in seen:
                seen.add(b)
                b = parent.get(b)
            if b != hips:
                raise ValueError(f"target role {role!r} (bone {bone!r}) does not hang from the hips bone {hips!r}")
        for point in self.points():
            if point.role not in self.roles:
                raise ValueError(f"contact point {point.name!r} is on role {point.role!r}, which the target does not map")
            if not np.all(np.isfinite(point.point)) or np.shape(point.point) != (3,):
                raise ValueError(f"contact point {point.name!r}: {point.point} is not a finite 3-vector")
            if not (np.isfinite(point.clearance) and point.clearance >= 0):
                raise ValueError(f"contact point {point.name!r}: clearance {point.clearance} must be finite and >= 0")
        point_names = [p.name for p in self.points()]
        if len(set(point_names)) != len(point_names):
            raise ValueError(f"contact point names repeat: {point_names}")

    def points(self, up=(0.0, 0.0, 1.0)) -> tuple:
        """The contact points: given, or default_contact_points (on the ground below `up`)."""
        if self.contact_points is not None:
            return tuple(self.contact_points)
        return default_contact_points(self, up)


def rest_ground(bones: Sequence[Bone], up=(0.0, 0.0, 1.0)) -> float:
    """The lowest height along `up` of any bone's head or tail at rest."""
    up = np.asarray(up, float)
    heads = np.array([np.asarray(b.matrix, float)[:3, 3] for b in bones])
    tails = np.array([(np.asarray(b.matrix, float) @ [0.0, b.length, 0.0, 1.0])[:3] for b in bones])
    return float(min((heads @ up).min(), (tails @ up).min()))


def default_contact_points(target: Target, up=(0.0, 0.0, 1.0)) -> tuple:
    """Heel, ball and toe tip of each foot. The heel is the foot's head (the ankle) and the ball
    the toe's head (the foot's tail where no toe role is mapped), each moved straight down onto
    the rest ground (rest_ground), on the foot bone; the toe tip is the toe bone's tail, resting
    as high above the ground as it is at rest (its clearance), where a toe role is mapped: kept
    above the floor, not pinned (the toe bends on the floor while the ball holds the foot)."""
    up = np.asarray(up, float)
    ground = rest_ground(target.bones, up)
    points = []
    for side in "LR":
        foot = target.bone(f"foot.{side}")
        M = np.asarray(foot.matrix, float)
        toe = target.bone(f"toe.{side}") if f"toe.{side}" in target.roles else None
        ball = np.asarray(toe.matrix, float)[:3, 3] if toe is not None else (M @ [0.0, foot.length, 0.0, 1.0])[:3]
        for name, world in (("heel", M[:3, 3]), ("ball", ball)):
            on_ground = world - (world @ up - ground) * up
            local = M[:3, :3].T @ (on_ground - M[:3, 3])
            points.append(ContactPoint(f"{name}.{side}", f"foot.{side}", tuple(float(v) for v in local)))
        if toe is not None:
            tip = (np.asarray(toe.matrix, float) @ [0.0, toe.length, 0.0, 1.0])[:3]
            points.append(ContactPoint(f"toe_tip.{side}", f"toe.{side}", (0.0, float(toe.length), 0.0),
                                       max(0.0, float(tip @ up - ground)), pinned=False))
    return tuple(points)


@dataclass(frozen=True)
class TargetModel:
    """The Model a retarget moves, and where the target's bones and roles are in it.

    `segment` (B,) is each of target.bones' segment in the model (bones keep the target's order in
    every result array; the model orders parents first); `role_segment` maps role -> segment;
    `root` is the hips' segment and `root_translation` its three translation coordinates."""

    model: Model
    segment: np.ndarray
    role_segment: dict
    root: int
    root_translation: np.ndarray
    bone_names: tuple


def target_model(target: Target) -> TargetModel:
    """The model of the module docstring, for a checked target."""
    target.check()
    mapped = set(target.roles.values())
    hips = target.roles["hips"]
    bones = []
    for b in target.bones:
        if b.name not in mapped:
            b = dataclasses.replace(b, lock=(True, True, True), stretch=0.0)
        elif not target.stretch:
            b = dataclasses.replace(b, stretch=0.0)
        bones.append(b)
    segments = segments_from_bones(bones)
    order = [s.name for s in segments]
    i = order.index(hips)
    root = segments[i]
    segments[i] = Segment(root.name, root.parent, root.rest,
                          (prismatic("X", name=f"{hips}.loc_x"), prismatic("Y", name=f"{hips}.loc_y"),
                           prismatic("Z", name=f"{hips}.loc_z"), sphere(name=f"{hips}.sphere")),
                          root.length, root.post, root.armature)
    model = Model(segments, armature_names=["target"])
    segment = np.array([order.index(b.name) for b in target.bones], dtype=int)
    role_segment = {role: order.index(bone) for role, bone in target.roles.items()}
    return TargetModel(model, segment, role_segment, i, model.coordinates_of(i)[:3],
                       tuple(b.name for b in target.bones))


def leg_length(heads: Mapping[str, np.ndarray]) -> float:
    """Mean over both legs of |shin - thigh| + |foot - shin| (head positions (3,) per role)."""
    total = 0.0
    for side in "LR":
        thigh, shin, foot = (np.asarray(heads[f"{r}.{side}"], float) for r in ("thigh", "shin", "foot"))
        total += np.linalg.norm(shin - thigh) + np.linalg.norm(foot - shin)
    length = total / 2.0
    if not (np.isfinite(length) and length > 1e-9):
        raise ValueError(f"leg length {length} is not positive (roles {LEG_ROLES})")
    return float(length)

"""The kinematic model: an immutable tree of segments, each moved by a short list of joints.

A segment s hangs from its parent's frame (or, for a root, from its armature's base frame) by

    W_s = W_parent @ rest_s @ J_1(q) @ J_2(q) @ ... @ post_s

where each J_k is one joint of a kind in joints.KINDS:

    revolute(axis)    rotation by one coordinate about a unit axis through the frame origin
    prismatic(axis)   translation by one coordinate along a unit axis
    swing             2 coordinates (phi_x, phi_z): rotation vector (phi_x, 0, phi_z)
    sphere            3 coordinates: rotation vector (phi_x, phi_y, phi_z)

A bone's tail is at (0, length, 0) in its segment frame. Coordinates are numbered segment by
segment in tree order; per coordinate the model keeps lower / upper limits and a weight
(1 - stiffness; 0 freezes the coordinate). Swing and sphere joints may carry an elliptic limit:
with semi-axes chosen per sign of each component (the upper limit for a positive component, minus
the lower for a negative one), sum_i (phi_i / a_i)^2 <= 1.

The model is built once per rig; per-solve state (coordinate values, frames) lives elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .joints import KINDS, JointKind, as_slice, group_joints  # noqa: F401 (as_slice: model.as_slice)

REVOLUTE, PRISMATIC, SWING, SPHERE = "revolute", "prismatic", "swing", "sphere"
_AXES = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}


@dataclass(frozen=True)
class Joint:
    """One joint of a segment. `lower`, `upper`, `weight` have one entry per coordinate.

    For swing joints the coordinates are (phi_x, phi_z); for sphere joints (phi_x, phi_y, phi_z).
    `elliptic` turns the per-coordinate limits of a swing or sphere joint into the elliptic limit
    described in the module docstring (a box limit otherwise).
    """

    kind: str
    axis: tuple = (0.0, 0.0, 0.0)
    lower: tuple | None = None
    upper: tuple | None = None
    weight: tuple | None = None
    elliptic: bool = False
    name: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"joint '{self.name}': unknown kind {self.kind!r}")
        n = KINDS[self.kind].n_coordinates
        if KINDS[self.kind].has_axis:
            axis = np.asarray(self.axis, dtype=float)
            norm = np.linalg.norm(axis)
            if not np.isfinite(norm) or norm < 1e-12:
                raise ValueError(f"joint '{self.name}': axis {self.axis} is not a direction")
            object.__setattr__(self, "axis", tuple(axis / norm))
        for attr, default in (("lower", -np.inf), ("upper", np.inf), ("weight", 1.0)):
            value = getattr(self, attr)
            value = (default,) * n if value is None else tuple(float(v) for v in np.atleast_1d(value))
            if len(value) != n:
                raise ValueError(f"joint '{self.name}': {attr} needs {n} values, got {len(value)}")
            object.__setattr__(self, attr, value)
        lower, upper = np.array(self.lower), np.array(self.upper)
        if np.any(np.isnan(lower)) or np.any(np.isnan(upper)) or np.any(lower > upper):
            raise ValueError(f"joint '{self.name}': limits {self.lower}..{self.upper} are not a range")
        if self.elliptic and (self.kind not in (SWING, SPHERE) or np.any(lower > 0) or np.any(upper < 0)
                              or not np.all(np.isfinite(lower)) or not np.all(np.isfinite(upper))):
            raise ValueError(f"joint '{self.name}': an elliptic limit needs a swing or sphere joint "
                             "with finite limits lower <= 0 <= upper on every coordinate")
        if any(not (0.0 <= w <= 1.0) for w in self.weight):
            raise ValueError(f"joint '{self.name}': weights {self.weight} must lie in [0, 1]")

    @property
    def n_coordinates(self) -> int:
        return KINDS[self.kind].n_coordinates

    @property
    def type(self) -> JointKind:
        """What this joint's kind does (joints.py)."""
        return KINDS[self.kind]

    @property
    def labels(self) -> tuple:
        """Its coordinates' labels: rot_x, loc_y, swing_x, ... (an axis not X, Y or Z by the joint's name)."""
        named = {v: k for k, v in _AXES.items()}.get(tuple(np.asarray(self.axis)))
        return self.type.labels(named.lower() if named else (self.name or "axis"))


def revolute(axis, **kw) -> Joint:
    """A rotation about `axis` ('X', 'Y', 'Z' or a vector)."""
    return Joint(REVOLUTE, _AXES.get(axis, axis) if isinstance(axis, str) else axis, **kw)


def prismatic(axis, **kw) -> Joint:
    """A translation along `axis` ('X', 'Y', 'Z' or a vector)."""
    return Joint(PRISMATIC, _AXES.get(axis, axis) if isinstance(axis, str) else axis, **kw)


def swing(**kw) -> Joint:
    return Joint(SWING, **kw)


def sphere(**kw) -> Joint:
    return Joint(SPHERE, **kw)


@dataclass(frozen=True)
class Segment:
    """A rigid body of the tree. `parent` is a segment index or -1 for a root of `armature`."""

    name: str
    parent: int = -1
    rest: np.ndarray = field(default_factory=lambda: np.eye(4))
    joints: tuple = ()
    length: float = 0.0
    post: np.ndarray | None = None
    armature: int = 0



class Model:
    """An immutable kinematic tree with flat per-coordinate and per-joint index arrays.

    Per segment: names, parent, armature, rest, post, length. Per joint (tree order): joints,
    joint_segment, joint_slot (its place on its segment), joint_first (its first coordinate),
    joint_axis. Per coordinate: coordinate_segment, coordinate_joint, lower, upper, weight,
    rotational, coordinate_names. For forward kinematics: joint_groups (joints by kind),
    fixed_columns and `layout` (KinematicLayout); for limits: elliptic_groups, unlimited_spheres;
    for Jacobians: segment_ancestors and moves.
    """

    def __init__(self, segments: Sequence[Segment], armature_names: Sequence[str] | None = None):
        self.segments = tuple(segments)
        _check_segments(self.segments)
        self.names = [s.name for s in self.segments]
        self.parent = np.array([s.parent for s in self.segments], dtype=int)
        self.armature = np.array([s.armature for s in self.segments], dtype=int)
        self.n_armatures = int(self.armature.max()) + 1
        self.armature_names = list(armature_names or [f"armature{i}" for i in range(self.n_armatures)])
        self.rest = np.stack([np.asarray(s.rest, dtype=float) for s in self.segments])
        self.has_post = any(s.post is not None for s in self.segments)
        self.post = np.stack([np.eye(4) if s.post is None else np.asarray(s.post, float) for s in self.segments])
        self.length = np.array([s.length for s in self.segments], dtype=float)
        self._flatten_joints()
        self.joint_groups, self.fixed_columns = group_joints([j.kind for j in self.joints], self.joint_axis,
                                                             self.joint_first)
        self._limit_indices()
        self.layout = kinematic_layout(self.parent, self.joint_segment, self.joint_slot, self.coordinate_joint)
        self.segment_ancestors = _ancestors(self.parent)          # [s, a]: a is s or an ancestor of s
        n_seg = len(self.segments)
        self.moves = (self.segment_ancestors[:, self.coordinate_segment].T if self.n_coordinates
                      else np.zeros((0, n_seg), bool))           # [c, s]: coordinate c moves segment s

    def _flatten_joints(self):
        """Joints in tree order with their segment, slot and first coordinate; per coordinate its
        joint, segment, limits, weight, kind and name."""
        joints, joint_segment, joint_slot, joint_first = [], [], [], []
        n_q = 0
        for i, s in enumerate(self.segments):
            for slot, joint in enumerate(s.joints):
                joints.append(joint)
                joint_segment.append(i)
                joint_slot.append(slot)
                joint_first.append(n_q)
                n_q += joint.n_coordinates
        self.joints = tuple(joints)
        self.joint_segment = np.array(joint_segment, dtype=int)
        self.joint_slot = np.array(joint_slot, dtype=int)
        self.joint_first = np.array(joint_first, dtype=int)
        self.joint_axis = np.array([j.axis for j in joints], dtype=float).reshape(-1, 3)
        self.n_coordinates = n_q

        coord_joint = np.repeat(np.arange(len(joints)), [j.n_coordinates for j in joints]).astype(int)
        self.coordinate_segment = self.joint_segment[coord_joint] if n_q else np.zeros(0, int)
        self.coordinate_joint = coord_joint
        self.lower = np.array([v for j in joints for v in j.lower], dtype=float)
        self.upper = np.array([v for j in joints for v in j.upper], dtype=float)
        self.weight = np.array([v for j in joints for v in j.weight], dtype=float)
        self.rotational = np.array([j.type.rotational for j in joints for _ in range(j.n_coordinates)], dtype=bool)
        self.translational = np.flatnonzero(~self.rotational)
        self.coordinate_names = [f"{self.names[seg]}.{c}" for j, seg in zip(joints, joint_segment) for c in j.labels]

    def _limit_indices(self):
        """Which joints limits.project and limits.wrap_spheres treat: elliptic swings and spheres,
        and unlimited spheres free in every component (wrapped the short way round; frozen
        components stay put)."""
        joints, first = self.joints, self.joint_first
        self.limited = bool(np.isfinite(self.lower).any() or np.isfinite(self.upper).any())
        self.elliptic_joints = np.array([k for k, j in enumerate(joints) if j.elliptic], dtype=int)
        # Coordinate index arrays (k, 2) of elliptic swings and (k, 3) of elliptic spheres.
        elliptic = {}
        for j in self.elliptic_joints:
            elliptic.setdefault(joints[j].n_coordinates, []).append(first[j] + np.arange(joints[j].n_coordinates))
        self.elliptic_groups = [np.array(g) for g in elliptic.values()]
        self.unlimited_spheres = np.array(
            [k for k, j in enumerate(joints)
             if j.kind == SPHERE and np.all(np.isinf(j.lower)) and np.all(np.isinf(j.upper)) and min(j.weight) > 0],
            dtype=int)
        self.unlimited_sphere_coordinates = first[self.unlimited_spheres][:, None] + np.arange(3)

    def moving_mask(self, segments: np.ndarray):
        """Which coordinates move a point on each of `segments` (E,), shaped (1, E, 1, n) to mask
        Jacobians (F, E, 6, n); None when every coordinate moves every one of them."""
        moves = self.moves[:, segments].T                                 # (E, n)
        return None if moves.all() else moves[None, :, None, :]

    def index(self, name: str) -> int:
        """The index of the segment called `name`."""
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no segment called '{name}'") from None

    def coordinates_of(self, segment: int | str) -> np.ndarray:
        """The coordinate indices of one segment's joints."""
        s = self.index(segment) if isinstance(segment, str) else segment
        return np.flatnonzero(self.coordinate_segment == s)

    def neutral(self, n_frames: int = 1) -> np.ndarray:
        """Coordinates of the rest pose (all zero, moved inside any limit that excludes zero)."""
        return np.tile(np.clip(0.0, self.lower, self.upper), (n_frames, 1))


def _check_segments(segments) -> None:
    """Parents come before their children; rest and post matrices are finite; lengths finite and >= 0."""
    if not segments:
        raise ValueError("a model needs at least one segment")
    for i, s in enumerate(segments):
        if not (-1 <= s.parent < i):
            raise ValueError(f"segment '{s.name}': parent {s.parent} must come before it in the list")
        for name, matrix in (("rest", s.rest), ("post", s.post)):
            if matrix is not None and not np.all(np.isfinite(matrix)):
                raise ValueError(f"segment '{s.name}': {name} matrix is not finite")
        if not np.isfinite(s.length) or s.length < 0:
            raise ValueError(f"segment '{s.name}': length {s.length} must be finite and >= 0")


def _ancestors(parent: np.ndarray) -> np.ndarray:
    """[s, a]: segment a is s or an ancestor of s (parents come first)."""
    ancestor = np.eye(parent.size, dtype=bool)
    for i in range(parent.size):
        if parent[i] >= 0:
            ancestor[i] |= ancestor[parent[i]]
    return ancestor


@dataclass(frozen=True)
class KinematicLayout:
    """The index caches of forward kinematics (kinematics.py), as slices where contiguous.

    Segments are composed level by level (a level: the segments whose parent lies on the level
    before), in level order, where every level is a run of positions:

        levels                  per level, its segments (index arrays)
        level_index             the same as slices where contiguous
        level_run               its run of level-order positions
        level_parent_position   its parents' positions (None for the roots)
        segment_position        level order back to segment order (None when they agree)
        joint_position          each joint's segment's level-order position

    A segment's joints are composed slot by slot (slot k: every segment's k-th joint):

        slots                   per slot, its joints
        one_joint_per_segment   each segment has exactly one joint (no composing at all)
        first_slot_index        the first slot's joints, first_slot_segments their segments
        jointless_index         the segments without joints
        coordinate_joint_index  each coordinate's joint
    """

    levels: list
    level_index: list
    level_run: list
    level_parent_position: list
    segment_position: np.ndarray | None
    joint_position: slice | np.ndarray
    slots: list
    one_joint_per_segment: bool
    first_slot_index: slice | np.ndarray
    first_slot_segments: slice | np.ndarray
    jointless_index: slice | np.ndarray
    coordinate_joint_index: slice | np.ndarray


def kinematic_layout(parent: np.ndarray, joint_segment: np.ndarray, joint_slot: np.ndarray,
                     coordinate_joint: np.ndarray) -> KinematicLayout:
    """The layout of a tree with these parents (-1: a root), joints' segments and slots, and
    coordinates' joints."""
    n_seg = parent.size
    depth = np.zeros(n_seg, dtype=int)
    for i in range(n_seg):
        depth[i] = 0 if parent[i] < 0 else depth[parent[i]] + 1
    levels = [np.flatnonzero(depth == d) for d in range(depth.max() + 1)]
    position = np.empty(n_seg, dtype=int)
    position[np.concatenate(levels)] = np.arange(n_seg)
    ends = np.cumsum([0] + [level.size for level in levels])
    slots = [np.flatnonzero(joint_slot == k) for k in range(int(joint_slot.max(initial=-1)) + 1)]
    first_slot = slots[0] if slots else np.zeros(0, int)
    return KinematicLayout(
        levels=levels,
        level_index=[as_slice(level) for level in levels],
        level_run=[slice(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:])],
        level_parent_position=[None if parent[level[0]] < 0 else as_slice(position[parent[level]]) for level in levels],
        segment_position=None if np.array_equal(position, np.arange(n_seg)) else position,
        joint_position=as_slice(position[joint_segment]),
        slots=slots,
        one_joint_per_segment=np.array_equal(joint_segment, np.arange(n_seg)),
        first_slot_index=as_slice(first_slot),
        first_slot_segments=as_slice(joint_segment[first_slot]),
        jointless_index=as_slice(np.setdiff1d(np.arange(n_seg), joint_segment)),
        coordinate_joint_index=as_slice(coordinate_joint),
    )


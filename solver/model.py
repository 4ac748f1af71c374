"""The kinematic model: an immutable tree of segments, each moved by a short list of joints.

A segment s hangs from its parent's frame (or, for a root, from its armature's base frame) by

    W_s = W_parent @ rest_s @ J_1(q) @ J_2(q) @ ... @ post_s

where each J_k is one joint:

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

from .rotations import skew

REVOLUTE, PRISMATIC, SWING, SPHERE = "revolute", "prismatic", "swing", "sphere"
_DOF = {REVOLUTE: 1, PRISMATIC: 1, SWING: 2, SPHERE: 3}
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
        if self.kind not in _DOF:
            raise ValueError(f"joint '{self.name}': unknown kind {self.kind!r}")
        n = _DOF[self.kind]
        if self.kind in (REVOLUTE, PRISMATIC):
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
        return _DOF[self.kind]


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
    """An immutable kinematic tree with flat per-coordinate and per-joint index arrays."""

    def __init__(self, segments: Sequence[Segment], armature_names: Sequence[str] | None = None):
        self.segments = tuple(segments)
        n_seg = len(self.segments)
        if n_seg == 0:
            raise ValueError("a model needs at least one segment")
        self.names = [s.name for s in self.segments]
        self.parent = np.array([s.parent for s in self.segments], dtype=int)
        for i, s in enumerate(self.segments):
            if not (-1 <= s.parent < i):
                raise ValueError(f"segment '{s.name}': parent {s.parent} must come before it in the list")
            for name, matrix in (("rest", s.rest), ("post", s.post)):
                if matrix is not None and not np.all(np.isfinite(matrix)):
                    raise ValueError(f"segment '{s.name}': {name} matrix is not finite")
            if not np.isfinite(s.length) or s.length < 0:
                raise ValueError(f"segment '{s.name}': length {s.length} must be finite and >= 0")
        self.armature = np.array([s.armature for s in self.segments], dtype=int)
        self.n_armatures = int(self.armature.max()) + 1
        self.armature_names = list(armature_names or [f"armature{i}" for i in range(self.n_armatures)])
        self.rest = np.stack([np.asarray(s.rest, dtype=float) for s in self.segments])
        self.has_post = any(s.post is not None for s in self.segments)
        self.post = np.stack([np.eye(4) if s.post is None else np.asarray(s.post, float) for s in self.segments])
        self.length = np.array([s.length for s in self.segments], dtype=float)

        # Joints, flat: which segment, which slot in that segment, first coordinate.
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
        self.n_coordinates = n_q

        coord_joint = np.repeat(np.arange(len(joints)), [j.n_coordinates for j in joints]).astype(int)
        self.coordinate_segment = self.joint_segment[coord_joint] if n_q else np.zeros(0, int)
        self.coordinate_joint = coord_joint
        self.lower = np.array([v for j in joints for v in j.lower], dtype=float)
        self.upper = np.array([v for j in joints for v in j.upper], dtype=float)
        self.weight = np.array([v for j in joints for v in j.weight], dtype=float)
        self.rotational = np.array([j.kind != PRISMATIC for j in joints for _ in range(j.n_coordinates)], dtype=bool)
        self.coordinate_names = [f"{self.names[seg]}.{c}"
                                 for j, seg in zip(joints, joint_segment) for c in _coordinate_labels(j)]

        # Index arrays by joint kind, used by forward kinematics.
        def of_kind(kind):
            return np.array([k for k, j in enumerate(joints) if j.kind == kind], dtype=int)
        self.revolute_joints, self.prismatic_joints = of_kind(REVOLUTE), of_kind(PRISMATIC)
        self.swing_joints, self.sphere_joints = of_kind(SWING), of_kind(SPHERE)
        # Revolute joints and their coordinates as slices where contiguous (views), and the
        # velocity columns of revolute and prismatic joints, which do not depend on q.
        self.revolute_index = as_slice(self.revolute_joints)
        self.revolute_coordinates = as_slice(self.joint_first[self.revolute_joints])
        self.fixed_columns = np.zeros((n_q, 3))
        for k, j in enumerate(joints):
            if j.kind in (REVOLUTE, PRISMATIC):
                self.fixed_columns[joint_first[k]] = j.axis
        # Sphere joints and their coordinates in joint order, as slices where contiguous (views).
        self.sphere_index = as_slice(self.sphere_joints)
        self.sphere_coordinate_index = as_slice((self.joint_first[self.sphere_joints][:, None] + np.arange(3)).ravel())
        self.joint_axis = np.array([j.axis for j in joints], dtype=float).reshape(-1, 3)
        revolute_skew = skew(self.joint_axis[self.revolute_joints])
        self.revolute_skew = (revolute_skew, revolute_skew @ revolute_skew)    # [axis]x and its square
        self.elliptic_joints = np.array([k for k, j in enumerate(joints) if j.elliptic], dtype=int)
        self.unlimited_spheres = np.array(
            [k for k, j in enumerate(joints)
             if j.kind == SPHERE and np.all(np.isinf(j.lower)) and np.all(np.isinf(j.upper)) and min(j.weight) > 0],
            dtype=int)  # wrapped the short way round (limits.wrap_spheres); frozen components stay put
        self.unlimited_sphere_coordinates = self.joint_first[self.unlimited_spheres][:, None] + np.arange(3)
        self.limited = bool(np.isfinite(self.lower).any() or np.isfinite(self.upper).any())
        # Coordinate index arrays (k, 2) of elliptic swings and (k, 3) of elliptic spheres (limits.project).
        elliptic = {}
        for j in self.elliptic_joints:
            elliptic.setdefault(joints[j].n_coordinates, []).append(self.joint_first[j] + np.arange(joints[j].n_coordinates))
        self.elliptic_groups = [np.array(g) for g in elliptic.values()]

        # Tree levels (segments whose parent lies on the previous level) for batched composition.
        depth = np.zeros(n_seg, dtype=int)
        for i in range(n_seg):
            depth[i] = 0 if self.parent[i] < 0 else depth[self.parent[i]] + 1
        self.levels = [np.flatnonzero(depth == d) for d in range(depth.max() + 1)]
        self.slots = [np.flatnonzero(self.joint_slot == k) for k in range(int(self.joint_slot.max(initial=-1)) + 1)]
        # Forward kinematics works in level order (segments sorted by level), where every level is a
        # run of positions; per level: its segments (a slice where contiguous), its run, its parents'
        # positions (None for the roots). Where level order is not segment order, `segment_position`
        # takes frames back (None where it is).
        self.level_index = [as_slice(level) for level in self.levels]
        position = np.empty(n_seg, dtype=int)
        position[np.concatenate(self.levels)] = np.arange(n_seg)
        ends = np.cumsum([0] + [level.size for level in self.levels])
        self.level_run = [slice(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:])]
        self.level_parent_position = [None if self.parent[level[0]] < 0 else as_slice(position[self.parent[level]])
                                      for level in self.levels]
        self.segment_position = None if np.array_equal(position, np.arange(n_seg)) else position
        self.one_joint_per_segment = np.array_equal(self.joint_segment, np.arange(n_seg))
        # Each joint's level-order position and each coordinate's joint, as slices where
        # contiguous (a chain with one joint per link and a jointless end, one coordinate per joint), and
        # the jointless segments.
        self.joint_position = as_slice(position[self.joint_segment])
        first_slot = self.slots[0] if self.slots else np.zeros(0, int)
        self.first_slot_index, self.first_slot_segments = as_slice(first_slot), as_slice(self.joint_segment[first_slot])
        self.coordinate_joint_index = as_slice(self.coordinate_joint)
        self.jointless_index = as_slice(np.setdiff1d(np.arange(n_seg), self.joint_segment))
        self.translational = np.flatnonzero(~self.rotational)

        # moves[c, s]: coordinate c moves segment s (it sits on s or on one of its ancestors).
        ancestor = np.eye(n_seg, dtype=bool)
        for i in range(n_seg):
            if self.parent[i] >= 0:
                ancestor[i] |= ancestor[self.parent[i]]
        self.segment_ancestors = ancestor  # [s, a]: a is s or an ancestor of s
        self.moves = ancestor[:, self.coordinate_segment].T if n_q else np.zeros((0, n_seg), bool)

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


def as_slice(index: np.ndarray):
    """A run of consecutive indices as a slice; any other index array as it is."""
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0]) + index.size)
    return index


def _coordinate_labels(joint: Joint):
    if joint.kind == SWING:
        return ("swing_x", "swing_z")
    if joint.kind == SPHERE:
        return ("sphere_x", "sphere_y", "sphere_z")
    axis = np.asarray(joint.axis)
    named = {v: k for k, v in _AXES.items()}.get(tuple(axis))
    prefix = "rot" if joint.kind == REVOLUTE else "loc"
    return (f"{prefix}_{named.lower()}" if named else f"{prefix}_{joint.name or 'axis'}",)

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
    rotational (rotation_mask: 1.0 per rotation, (n, 1)), coordinate_names. For forward kinematics: joint_groups (joints by kind),
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
        groups, self.fixed_columns = group_joints([j.kind for j in self.joints], self.joint_axis, self.joint_first)
        self.joint_groups = groups
        self._limit_indices()
        self.layout = kinematic_layout(self.segments, self.armature, self.joint_segment, self.joint_slot,
                                       self.coordinate_joint, groups, self.rest, self.post)
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
        self.rotation_mask = self.rotational.astype(float)[:, None]      # (n, 1): 1.0 for rotations
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
class LevelPlan:
    """One level of world nodes (KinematicLayout): its run of nodes, their parents and offsets;
    its fixed nodes (a constant offset) with their parents and constants, and its moving nodes
    with, per node, the node before its segment's first joint."""

    nodes: slice
    parents: slice | np.ndarray
    offsets: slice
    fixed: slice
    fixed_parents: slice | np.ndarray
    constants: slice
    moving: slice
    moving_before: slice | np.ndarray
    moving_rows: slice | np.ndarray


@dataclass(frozen=True)
class KinematicLayout:
    """The plan of forward kinematics (kinematics.py): index arrays folded once per model, as
    slices where contiguous, that compose any number of frames F in the same few numpy calls.
    Arrays are node-major, (rows, F, 4, 4), so that each step writes one contiguous run.

    Transforms X: the joints' transforms, grouped by kind (`group_runs`, in joint_groups' order),
    then the segments' post transforms, then partial products (`template`: their first values,
    identity but for the posts; `n_transforms` rows). A segment s with factors X_1 .. X_m (its
    joints in slot order, then its post) has the partial products P_s1 = X_1 and
    P_sk = P_s(k-1) X_k, one matmul per slot k >= 2 for all segments that have one (`products`:
    the rows of P_s(k-1) and of X_k, and the run written).

    Nodes W: the armature bases (A rows), then the world frames level by level (a level: one
    depth of the tree): each segment's frame W_parent rest_s P_sm and the frame before each joint
    at slot k, W_parent rest_s P_sk (P_s0 = I). A node is fixed when its offset from the parent
    is a constant (slot 0, or a segment with a post alone: `constants`), moving otherwise;
    per level (LevelPlan) the fixed nodes come first.

    Under kinematics._FRAMES_BY_ARITHMETIC frames X goes on (the rest of `template`) with the
    constants and the rest-folded partial products Q_s1 = rest_s X_1, Q_sk = Q_s(k-1) X_k
    (`rest_products`, laid out as `products`); each node's offset is the X row `node_sources`,
    and each level one product (`level_runs`: its nodes, parents and offsets). From that many
    frames on, each level's fixed nodes are W_parent C and its moving ones (the node before
    their segment's first joint) times P_sk, the X rows `moving_rows`.

    `segment_nodes`, `joint_nodes` (the node before each joint), `coordinate_nodes` (the same
    per coordinate), `coordinate_joints` (each coordinate's joint), and `local_segments` /
    `local_rows` (the segments with joints and their P after the last joint: Pose.local) read
    the results; `levels` lists each depth's segments.
    """

    group_runs: list
    template: np.ndarray
    n_transforms: int
    products: list
    n_armatures: int
    n_nodes: int
    fixed_nodes: slice | np.ndarray
    constants: np.ndarray
    rest_products: list
    node_sources: slice | np.ndarray
    node_levels: list
    level_runs: list
    segment_nodes: slice | np.ndarray
    joint_nodes: slice | np.ndarray
    coordinate_nodes: slice | np.ndarray
    coordinate_joints: slice | np.ndarray
    local_segments: slice | np.ndarray
    local_rows: slice | np.ndarray
    all_segments_move: bool
    levels: list


def kinematic_layout(segments, armature: np.ndarray, joint_segment: np.ndarray, joint_slot: np.ndarray,
                     coordinate_joint: np.ndarray, groups, rest: np.ndarray, post: np.ndarray) -> KinematicLayout:
    """The plan of forward kinematics of a tree of `segments` (with their armatures, rest and
    post transforms), its joints' segments and slots, coordinates' joints and joint groups."""
    S, G, A = len(segments), joint_segment.size, int(armature.max()) + 1
    parent = np.array([segment.parent for segment in segments], dtype=int)
    # Transforms: the joints, one run per kind (the kinds of earlier slots first, so that a slot's
    # joints tend to be one run), then the posts.
    row = np.empty(G, dtype=int)
    group_runs, start = [None] * len(groups), 0
    for g in sorted(range(len(groups)), key=lambda g: joint_slot[groups[g].joints].mean()):
        joints = np.arange(G)[groups[g].joints]
        row[joints] = np.arange(start, start + joints.size)
        group_runs[g] = slice(start, start + joints.size)
        start += joints.size
    posted = [s for s, segment in enumerate(segments) if segment.post is not None]
    template = np.concatenate([np.tile(np.eye(4), (G, 1, 1)), post[posted].reshape(-1, 4, 4)])     # then products
    factors = [[] for _ in range(S)]
    for j in range(G):
        factors[joint_segment[j]].append(row[j])           # joints come in slot order
    for k, s in enumerate(posted):
        factors[s].append(G + k)
    # Partial products: partial[s][k - 1] is the row of P_sk.
    partial = [f[:1] for f in factors]
    products, size = [], G + len(posted)
    for k in range(1, max(len(f) for f in factors)):
        segs = [s for s in range(S) if len(factors[s]) > k]
        run = slice(size, size + len(segs))
        products.append((as_slice(np.array([partial[s][k - 1] for s in segs])),
                         as_slice(np.array([factors[s][k] for s in segs])), run))
        for i, s in enumerate(segs):
            partial[s].append(run.start + i)
        size = run.stop
    template = np.concatenate([template, np.tile(np.eye(4), (size - template.shape[0], 1, 1))])
    # Nodes level by level: (level, kind, item), kind 0 a segment, 1 a joint; per node its offset
    # (segment, k): Q = rest_s P_sk, P_s0 = I. An offset is constant when P_sk holds no joint (slot
    # 0, or a segment with a post alone); within a level the constant ones come first.
    depth = np.zeros(S, dtype=int)
    for s in range(S):
        depth[s] = 0 if parent[s] < 0 else depth[parent[s]] + 1
    offset = {(0, s): (s, len(factors[s])) for s in range(S)}
    offset.update({(1, j): (joint_segment[j], joint_slot[j]) for j in range(G)})
    moves = {(kind, item): int(offset[kind, item][1] > 0 and len(segments[offset[kind, item][0]].joints) > 0)
             for kind, item in offset}
    nodes = sorted([(depth[s], 0, s) for s in range(S)] + [(depth[joint_segment[j]], 1, j) for j in range(G)],
                   key=lambda node: (node[0], moves[node[1:]]))
    number = {(kind, item): A + i for i, (_, kind, item) in enumerate(nodes)}
    segment_node = np.array([number[0, s] for s in range(S)], dtype=int)
    joint_node = np.array([number[1, j] for j in range(G)], dtype=int)
    parents = np.array([armature[s] if parent[s] < 0 else segment_node[parent[s]]
                        for s in (offset[node[1:]][0] for node in nodes)], dtype=int)
    moving = np.array([moves[node[1:]] for node in nodes], dtype=bool)
    fixed_nodes = np.flatnonzero(~moving)
    constants = np.array([rest[s] @ (post[s] if k else np.eye(4)) for s, k in (offset[nodes[i][1:]] for i in fixed_nodes)])
    # Under kinematics._FRAMES_BY_ARITHMETIC frames the rests fold into the partial products:
    # Q_s1 = rest_s X_1, Q_sk = Q_s(k-1) X_k, one matmul per slot (`rest_products`), in rows after
    # the P_sk: the fixed nodes' constants (rest_s among them, the offset of s's first joint's
    # node), then the Q_sk. Each node's offset is then one row of X (`node_sources`).
    constants_start = size
    constant_row = {int(i): constants_start + k for k, i in enumerate(fixed_nodes)}
    first_joint_row = {s: constant_row[number[1, int(np.flatnonzero(joint_segment == s)[0])] - A]
                       for s in range(S) if segments[s].joints}
    segs = sorted(first_joint_row, key=first_joint_row.get)
    previous = [first_joint_row[s] for s in segs]
    rest_products, q_row, start = [], {}, constants_start + fixed_nodes.size
    for k in range(1, max((len(factors[s]) for s in segs), default=0) + 1):
        kept = [i for i, s in enumerate(segs) if len(factors[s]) >= k]
        segs, previous = [segs[i] for i in kept], [previous[i] for i in kept]
        run = slice(start, start + len(segs))
        rest_products.append((as_slice(np.array(previous)), as_slice(np.array([factors[s][k - 1] for s in segs])), run))
        q_row.update({(s, k): run.start + i for i, s in enumerate(segs)})
        previous, start = list(range(run.start, run.stop)), run.stop
    node_sources = np.array([q_row[offset[nodes[i][1:]]] if moving[i] else constant_row[i] for i in range(len(nodes))],
                            dtype=int)
    template = np.concatenate([template, constants.reshape(-1, 4, 4),
                               np.tile(np.eye(4), (start - constants_start - fixed_nodes.size, 1, 1))])
    node_levels = []
    levels = np.array([level for level, _, _ in nodes], dtype=int)
    for level in range(depth.max() + 1):
        members = np.flatnonzero(levels == level)
        p = parents[members]
        shared = slice(int(p[0]), int(p[0]) + 1) if np.all(p == p[0]) else as_slice(p)
        run = slice(int(members[0]), int(members[-1]) + 1)
        fixed = members[~moving[members]]
        # the frame before each moving node's segment's first joint: the fixed node of slot 0
        before = np.array([joint_node[np.flatnonzero(joint_segment == offset[nodes[i][1:]][0])[0]] for i in members
                           if moving[i]], dtype=int)
        node_levels.append(LevelPlan(
            nodes=slice(A + run.start, A + run.stop), parents=shared, offsets=run,
            fixed=slice(A + int(fixed[0]), A + int(fixed[-1]) + 1),
            fixed_parents=shared if isinstance(shared, slice) else as_slice(p[:fixed.size]),
            constants=slice(int(np.searchsorted(fixed_nodes, fixed[0])), int(np.searchsorted(fixed_nodes, fixed[0])) + fixed.size),
            moving=slice(A + int(fixed[-1]) + 1, A + run.stop), moving_before=as_slice(before),
            moving_rows=as_slice(np.array([partial[s][k - 1] for s, k in (offset[nodes[i][1:]] for i in members
                                                                           if moving[i])], dtype=int))))
    jointed = np.array([s for s in range(S) if segments[s].joints], dtype=int)
    return KinematicLayout(
        group_runs=group_runs,
        template=template[:, None],
        n_transforms=size,
        products=products,
        n_armatures=A,
        n_nodes=A + len(nodes),
        fixed_nodes=as_slice(fixed_nodes),
        constants=constants.reshape(-1, 1, 4, 4),
        rest_products=rest_products,
        node_sources=as_slice(node_sources),
        node_levels=node_levels,
        level_runs=[(level.nodes, level.parents, level.offsets) for level in node_levels],
        segment_nodes=_as_run(segment_node),
        joint_nodes=_as_run(joint_node),
        coordinate_nodes=_as_run(joint_node[coordinate_joint]) if coordinate_joint.size else slice(0, 0),
        coordinate_joints=as_slice(coordinate_joint),
        local_segments=as_slice(jointed),
        local_rows=as_slice(np.array([partial[s][len(segments[s].joints) - 1] for s in jointed], dtype=int)),
        all_segments_move=jointed.size == S,
        levels=[np.flatnonzero(depth == d) for d in range(depth.max() + 1)],
    )


def _as_run(index: np.ndarray):
    """Indices in steps of one size as a slice (a view, also where the step is not 1), any other
    index array as it is."""
    if index.size > 1 and index[1] > index[0] and np.all(np.diff(index) == index[1] - index[0]):
        return slice(int(index[0]), int(index[-1]) + 1, int(index[1] - index[0]))
    return as_slice(index)

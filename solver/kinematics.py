"""Batched forward kinematics and geometric Jacobians.

Coordinates q have shape (F, n): a leading frame axis F. Forward kinematics returns, per frame,
the world frame of every segment and, per coordinate, the world direction it moves along:

    a rotation coordinate   turns the subtree with angular velocity  w_c  about the point  o_c
    a translation coordinate moves the subtree with velocity  u_c

so the geometric Jacobian of a point p on segment s has, for every coordinate c that moves s,
the column  [w_c x (p - o_c); w_c]  (rotation)  or  [u_c; 0]  (translation): linear velocity of
the point, then angular velocity of its frame, both in world coordinates.

For a rotation-vector joint (swing, sphere) with value phi applied in the frame B before it,
w_c is column c of  R_B J(phi)  (see rotations.rotvec_jacobian).
"""

from __future__ import annotations


import numpy as np

from .model import Model
from .rotations import skew

_IDENTITY4 = np.eye(4)
_FRAMES_BY_ARITHMETIC = 32      # from this many frames on, forward_kinematics schedules for arithmetic


class _computed_once:
    """functools.cached_property without its lock: Python before 3.12 takes one on each first
    read, which at one frame costs more than the small computations it guards."""

    def __init__(self, compute):
        self.compute, self.name = compute, compute.__name__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.compute(instance)
        return value


class Pose:
    """The state forward kinematics computes for one set of coordinates (F frames), each field
    computed when first read:

        frames      (F, S, 4, 4) world frame of each segment
        local       (F, S, 4, 4) motion of each segment's joints (rest-relative)
        direction   (F, n, 3) w_c or u_c per coordinate
        pivot       (F, n, 3) o_c per coordinate (unused for translations)

    They are views of node-major arrays (model.layout): `nodes`, the world nodes W, and the
    transforms X (A + N and T rows, each (F, 4, 4)) and the velocity columns (F, n, 3);
    `n_frames` is F."""

    def __init__(self, model: Model, nodes: np.ndarray, transforms: np.ndarray, columns: np.ndarray,
                 partial_products: bool = True):
        self._model, self.nodes, self._transforms, self._columns = model, nodes, transforms, columns
        self._partial_products = partial_products
        self.n_frames = transforms.shape[1]

    @_computed_once
    def frames(self) -> np.ndarray:
        return _take(self.nodes, self._model.layout.segment_nodes).swapaxes(0, 1)

    @_computed_once
    def local(self) -> np.ndarray:
        layout = self._model.layout
        if not self._partial_products:              # few frames composed rest_s P_sk, not P_sk
            _fill_partial_products(self._transforms, layout.products)
        moved = _take(self._transforms, layout.local_rows)
        if not layout.all_segments_move:
            local = np.empty((len(self._model.segments),) + moved.shape[1:])
            local[:] = _IDENTITY4
            local[layout.local_segments] = moved
            moved = local
        return moved.swapaxes(0, 1)

    @_computed_once
    def _world_columns(self):
        """w_c = R c_c with R the frame before c's joint and c_c its column there; o_c that
        frame's origin (under _FRAMES_BY_ARITHMETIC frames (o_c, 1), its last column)."""
        layout = self._model.layout
        if self.nodes.shape[1] < _FRAMES_BY_ARITHMETIC:         # fewest calls: each coordinate's node
            before = _take(self.nodes, layout.coordinate_nodes).swapaxes(0, 1)      # (F, n, 4, 4)
            return (before[..., :3, :3] @ self._columns[..., None])[..., 0], before[..., 3]
        # many frames: per joint first, then per coordinate, frame-major and contiguous
        before = _take(self.nodes, layout.joint_nodes).swapaxes(0, 1)               # (F, G, 4, 4)
        R = _per_coordinate(np.ascontiguousarray(before[..., :3, :3]), layout.coordinate_joints)
        o = _per_coordinate(before[..., :3, 3], layout.coordinate_joints)
        return np.einsum("fnij,fnj->fni", R, self._columns), o

    @property
    def direction(self) -> np.ndarray:
        return self._world_columns[0]

    @property
    def pivot(self) -> np.ndarray:
        return self._world_columns[1][..., :3]


def _per_coordinate(per_joint: np.ndarray, index) -> np.ndarray:
    """per_joint (F, G, ...) for each coordinate's joint (F, n, ...), frame-major and contiguous."""
    return np.ascontiguousarray(per_joint[:, index]) if isinstance(index, slice) else per_joint.take(index, axis=1)


def segment_nodes(model: Model, segments: np.ndarray):
    """The rows of `segments` (E,) in the world nodes (Pose.nodes), and how many nodes there are."""
    layout = model.layout
    return np.arange(layout.n_nodes)[layout.segment_nodes][segments], layout.n_nodes


def _take(array: np.ndarray, index):
    """array[index] along the first axis: a view for a slice, np.take for an index array (several
    times cheaper than fancy indexing on small arrays)."""
    return array[index] if isinstance(index, slice) else array.take(index, axis=0)


def joint_transforms(model: Model, q: np.ndarray, rests: bool = False):
    """The transforms X (T, F, 4, 4) of model.layout: each joint's transform (its kind's group
    in one call, joints.py) and the post transforms, rows for the partial products left to fill
    (with `rests`, also the rows of the rests and constants and of the rest_s P_sk); and each
    coordinate's velocity column (F, n, 3) in the frame before its joint."""
    F = q.shape[0]
    layout = model.layout
    template = layout.template if rests else layout.template[:layout.n_transforms]          # (T, 1, 4, 4)
    # Revolute and prismatic columns are fixed axes; only swing and sphere columns vary with q.
    if F == 1:          # one frame: the kinds' motion without a frame axis, fewer and smaller calls
        X, columns = template.copy(), model.fixed_columns[None].copy()
        for group, run in zip(model.joint_groups, layout.group_runs):
            coordinates = group.coordinates
            values = q[:, coordinates] if isinstance(coordinates, slice) else q.take(coordinates, axis=1)
            R, t, varying = group.kind.motion(values.reshape(-1, group.kind.n_coordinates), group.prepared)
            if R is not None:
                X[run, 0, :3, :3] = R
            if t is not None:
                X[run, 0, :3, 3] = t
            if varying is not None:
                columns[0, coordinates] = varying.reshape(-1, 3)
        return X, columns
    X = template.repeat(F, axis=1)
    columns = model.fixed_columns[None].repeat(F, axis=0)
    for group, run in zip(model.joint_groups, layout.group_runs):
        coordinates = group.coordinates
        values = (q[:, coordinates] if isinstance(coordinates, slice) else q.take(coordinates, axis=1)
                  ).reshape(F, -1, group.kind.n_coordinates)                                   # (F, G, d)
        R, t, varying = group.kind.motion(values, group.prepared)
        if R is not None:
            X[run, :, :3, :3] = R.swapaxes(0, 1)
        if t is not None:
            X[run, :, :3, 3] = t.swapaxes(0, 1)
        if varying is not None:
            columns[:, coordinates] = varying.reshape(F, -1, 3)
    return X, columns


def forward_kinematics(model: Model, q: np.ndarray, bases: np.ndarray | None = None) -> Pose:
    """World frames of all segments for coordinates q (F, n); `bases` (F, A, 4, 4) places each
    armature in the world (identity when None). The plan (model.layout): the joints' transforms,
    each segment's partial products slot by slot, their offsets from the parent, then the world
    nodes level by level: the same few numpy calls for any F."""
    q = np.asarray(q, dtype=float)
    F = q.shape[0]
    layout = model.layout
    A = layout.n_armatures
    W = np.empty((layout.n_nodes, F, 4, 4))
    W[:A] = _IDENTITY4 if bases is None else np.asarray(bases, dtype=float).swapaxes(0, 1)
    if F < _FRAMES_BY_ARITHMETIC:
        # Few frames cost by the call: the rests folded into the partial products, Q_sk = rest_s
        # P_sk, each node's offset Q (a constant or a Q_sk) gathered, then one product W_parent Q
        # per level.
        X, columns = joint_transforms(model, q, rests=True)
        _fill_partial_products(X, layout.rest_products)
        offsets = _take(X, layout.node_sources)
        nodes_3d, offsets_3d = (W[:, 0], offsets[:, 0]) if F == 1 else (W, offsets)     # one frame: 3-D, fewer loops
        for nodes, parents, run in layout.level_runs:
            np.matmul(nodes_3d[parents] if parents.__class__ is slice else nodes_3d.take(parents, axis=0),
                      offsets_3d[run], out=nodes_3d[nodes])
        return Pose(model, W, X, columns, partial_products=False)
    # Many frames cost by the arithmetic: the fixed nodes W_parent C (a 2-D product per constant
    # where the parent is shared), then each moving node from the node before its segment's first
    # joint, (W_parent rest_s) P_sk: one 4x4 product per frame and node.
    X, columns = _partial_products(model, q)
    for level in layout.node_levels:
        _times_constant(_take(W, level.fixed_parents), layout.constants[level.constants], out=W[level.fixed])
        if level.moving.stop > level.moving.start:
            np.matmul(_take(W, level.moving_before), _take(X, level.moving_rows), out=W[level.moving])
    return Pose(model, W, X, columns)


def segment_motions(model: Model, q: np.ndarray) -> np.ndarray:
    """Each segment's own joint motion (F, S, 4, 4), rest-relative: Pose.local without the rest."""
    return Pose(model, None, _partial_products(model, np.asarray(q, dtype=float))[0], None).local


def _partial_products(model: Model, q: np.ndarray):
    """joint_transforms with the partial products filled in, one matmul per slot."""
    X, columns = joint_transforms(model, q)
    _fill_partial_products(X, model.layout.products)
    return X, columns


def _fill_partial_products(X: np.ndarray, products) -> None:
    """Each slot's partial products into X, one matmul per slot."""
    for previous, factor, run in products:
        np.matmul(_take(X, previous), _take(X, factor), out=X[run])


def _times_constant(M: np.ndarray, C: np.ndarray, out: np.ndarray) -> None:
    """out = M (L or 1, F, 4, 4) @ C (L, 1, 4, 4), node-major, into a contiguous `out`. With one M
    this is one matrix product over all frames per constant, which numpy runs several times faster
    than a stack of 4x4 products."""
    if M.shape[0] == 1:
        for i in range(C.shape[0]):
            np.matmul(M.reshape(-1, 4), C[i, 0], out=out[i].reshape(-1, 4))    # reshapes of contiguous blocks: views
    else:
        np.matmul(M, C, out=out)


_NEXT, _AFTER = [1, 2, 0], [2, 0, 1]     # (a x b)_i = a_next b_after - a_after b_next
_MINUS_SKEW = -skew(np.eye(3)).reshape(3, 9)   # -[p]x flattened = p @ _MINUS_SKEW
_TO_POINT = np.zeros((6, 6))             # [[-[p]x, I], [I, 0]] without its -[p]x
_TO_POINT[:3, 3:] = _TO_POINT[3:, :3] = np.eye(3)
# [[-[p]x, I], [I, 0]] flattened = (p, 1) @ _POINT_MAP (linear in the homogeneous point)
_POINT_MAP = np.concatenate([np.pad(-skew(np.eye(3)), ((0, 0), (0, 3), (0, 3))), _TO_POINT[None]]).reshape(4, 36)
# V = (w; o x w) = _TWIST_MAP ((o, 1) w^T flattened), o x w = [o]x w component by component
_TWIST_MAP = np.zeros((6, 4, 3))
_TWIST_MAP[:3, 3] = np.eye(3)
for _i, (_j, _k) in enumerate(zip(_NEXT, _AFTER)):
    _TWIST_MAP[3 + _i, _j, _k], _TWIST_MAP[3 + _i, _k, _j] = 1.0, -1.0
_TWIST_MAP = _TWIST_MAP.reshape(6, 12)


def point_jacobian(model: Model, pose: Pose, segments: np.ndarray, points: np.ndarray,
                   linear: bool = False) -> np.ndarray:
    """Geometric Jacobians (F, E, 6, n) of world points (F, E, 3) fixed to `segments` (E,):
    rows 0-2 the point's linear velocity, rows 3-5 the segment's angular velocity; `linear`: rows
    0-2 alone (F, E, 3, n)."""
    J = moved_point_jacobian(model, pose, points, linear)
    mask = model.moving_mask(segments)
    if mask is not None:
        J *= mask
    return J


def moved_point_jacobian(model: Model, pose: Pose, points: np.ndarray, linear: bool = False) -> np.ndarray:
    """point_jacobian before its mask: the Jacobians of points (F, E, 3), or (F, E, 4)
    homogeneous (p, 1), as if every coordinate moved every point; times
    Model.moving_mask(segments) they are point_jacobian's. With V the coordinates' twists
    (coordinate_twists), J = [[-[p]x, I], [I, 0]] V, one product per point (with `linear`, its
    first three rows)."""
    return twists_at_points(coordinate_twists(model, pose), points, linear)


def twists_at_points(twists: np.ndarray, points: np.ndarray, linear: bool = False,
                     out: np.ndarray | None = None) -> np.ndarray:
    """[[-[p]x, I], [I, 0]] V (F, E, 6, m) for twists V (F, 6, m) (coordinate_twists, or those
    times a chain rule's d coordinates / d q) at points p (F, E, 3) or (F, E, 4) homogeneous: each
    twist's point velocity, then its angular velocity (with `linear`, the point velocity alone:
    (F, E, 3, m)); into `out` when given."""
    F, E = points.shape[0], points.shape[1]
    rows = 3 if linear else 6
    if F < _FRAMES_BY_ARITHMETIC:                   # [[-[p]x, I], [I, 0]] from (p, 1), one product
        to_point = (points @ _POINT_MAP[:points.shape[-1], :6 * rows]).reshape(F, E, rows, 6)
        if points.shape[-1] == 3:
            to_point += _TO_POINT[:rows]
    else:
        to_point = np.empty((F, E, rows, 6))
        to_point[:] = _TO_POINT[:rows]
        to_point[..., :3, :3] = (points[..., :3] @ _MINUS_SKEW).reshape(F, E, 3, 3)
    return np.matmul(to_point, twists[:, None], out=out)


def coordinate_twists(model: Model, pose: Pose) -> np.ndarray:
    """Each coordinate's twist V (F, 6, n): per coordinate c, the linear rows of a point p's
    Jacobian are w_c x (p - o_c) = -[p]x w_c + o_c x w_c (rotations) or u_c (translations), the
    angular rows w_c or 0, so with V = (w; o x w + u) every point's Jacobian is
    [[-[p]x, I], [I, 0]] V."""
    w = u = pose.direction
    F, n = w.shape[0], model.n_coordinates
    translations = model.translational.size
    if translations:                                            # w = 0 for translations, u = 0 for rotations
        w = u * model.rotation_mask
        u = u - w
    if F < _FRAMES_BY_ARITHMETIC:                   # (w; o x w) from the products (o, 1) w^T, one product
        o1 = pose._world_columns[1].swapaxes(-1, -2)                                        # (F, 4, n)
        V = _TWIST_MAP @ (o1[:, :, None] * w.swapaxes(-1, -2)[:, None]).reshape(F, 12, n)
    else:
        o = pose.pivot
        V = np.empty((F, 6, n))
        V[:, :3] = w.swapaxes(-1, -2)
        other = np.empty((F, n))
        for i, (j, k) in enumerate(zip(_NEXT, _AFTER)):          # o x w, one component at a time
            np.multiply(o[..., j], w[..., k], out=V[:, 3 + i])
            np.multiply(o[..., k], w[..., j], out=other)
            V[:, 3 + i] -= other
    if translations:
        V[:, 3:] += u.swapaxes(-1, -2)
    return V


def point_jacobian_transpose_times(model: Model, pose: Pose, segments: np.ndarray, points: np.ndarray,
                                   forces: np.ndarray) -> np.ndarray:
    """sum_e J_e^T f_e (F, n) over points (F, E, 3) fixed to `segments` (E,), J_e the linear rows
    of point_jacobian, without forming J: J_e = [-[p_e]x, I] V masked to the coordinates that move
    e, so J_e^T f_e = V^T (p_e x f_e; f_e) there, and the sum over points of each coordinate's
    (p x f; f) comes first, one product by the (n, E) mask of what moves what."""
    moves = model.moves[:, segments].astype(float)                                # (n, E)
    V = coordinate_twists(model, pose)
    return (np.einsum("fkc,fck->fc", V[:, :3], moves @ np.cross(points, forces))
            + np.einsum("fkc,fck->fc", V[:, 3:], moves @ forces))

"""Scene.evaluate for one frame (F = 1), in few numpy calls.

At F = 1 (live preview's animation-mode frame, one query) an evaluation's cost is the number of
numpy calls, not their arithmetic. `OneFrame` computes what Scene.evaluate computes, from
constants folded once per scene, as one short sequence of calls over small arrays:

    joint transforms      per joint kind, its `motion` (joints.KINDS) on the frame's values
    partial products      per segment s with factors X_1 .. X_m (its joints, then its post
                          transform), Q_s0 = rest_s, Q_sk = Q_s(k-1) X_k: one product per slot
    world frames          "nodes": each segment's frame, the frame before each of its joints, each
                          endpoint on a segment; a node is its parent's node times a partial
                          product (or the endpoint's offset), W_node = W_parent Q, one product per
                          tree level for all its nodes
    Jacobian columns      w_c = R_node(c) col_c, o_c its origin (kinematics.py's definitions)
    endpoint Jacobians    w_c x (p_e - o_c) = -[p_e]x w_c + o_c x w_c (or u_c), and w_c: one
                          product of [[-[p_e]x, I], [I, 0]] (per endpoint) with (w; o x w + u)
                          (per coordinate), masked by which coordinates move the endpoint

The tasks then read the endpoints' frames and Jacobians as they do in the batched evaluation
(TaskInputs with F = 1), each kind through its `Task.one_frame_batch` (Pole's on Python floats,
the others their `batch`). Results equal Scene.evaluate's batched path to rounding (the order of
some sums differs); tests/engine/test_one_frame.py compares them on random rigs of every joint
and task kind and with missing objects. A scene with a `coupling` is evaluated by the batched code.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from .kinematics import segment_motions
from .rotations import _SKEW_BASIS
from .tasks import Stack, TaskInputs

_EYE3, _EYE4 = np.eye(3), np.eye(4)
_SKEW = _SKEW_BASIS                     # [v]x flattened = v @ _SKEW
_MINUS_SKEW = -_SKEW


def _index(index: np.ndarray):
    """A run of consecutive indices as a slice (a view), else the index array (for take)."""
    index = np.asarray(index, dtype=np.intp)
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0]) + index.size)
    return index


def _take(array: np.ndarray, index):
    """array[index] along the first axis: a view for a slice, np.take for an index array (several
    times cheaper than fancy indexing on small arrays)."""
    return array[index] if isinstance(index, slice) else array.take(index, axis=0)


class OneFramePose:
    """kinematics.Pose for one frame: `frames` and `local` (1, S, 4, 4), `direction` and `pivot`
    (1, n, 3), each computed when first read (direction and pivot given where Jacobians needed them)."""

    def __init__(self, plan: OneFrame, q, world, columns, direction=None, pivot=None):
        self._plan, self._q, self._world, self._columns = plan, q, world, columns
        if direction is not None:
            self.__dict__["_world_columns"] = direction[None], pivot[None]

    @cached_property
    def frames(self) -> np.ndarray:
        return _take(self._world, self._plan.segment_nodes)[None]

    @cached_property
    def local(self) -> np.ndarray:
        return segment_motions(self._plan.model, self._q)

    @cached_property
    def _world_columns(self):
        return tuple(x[None] for x in self._plan.columns(self._world, self._columns))

    @property
    def direction(self) -> np.ndarray:
        return self._world_columns[0]

    @property
    def pivot(self) -> np.ndarray:
        return self._world_columns[1]


class OneFrame:
    """Scene.evaluate at F = 1 for one scene (module docstring); built once per scene."""

    def __init__(self, scene):
        self.scene = scene
        m = scene.model
        self.model = m
        self._index_transforms(m)
        self._index_nodes(m, scene)
        self._index_jacobians(m, scene)

    def _index_transforms(self, m) -> None:
        """Transforms X (G + posts, 4, 4): the joints grouped by kind (each group a run), then the
        segments' post transforms (constants); per segment its factors (joints in slot order, then
        its post) as indices into X; the partial products' entries."""
        G, S = len(m.joints), len(m.segments)
        position = np.empty(G, dtype=np.intp)
        self.motions, start = [], 0
        for group in m.joint_groups:
            joints = np.arange(G)[group.joints]
            run = slice(start, start + joints.size)
            position[joints] = np.arange(run.start, run.stop)
            take = group.coordinates if isinstance(group.coordinates, slice) else np.asarray(group.coordinates)
            shape = (joints.size, group.kind.n_coordinates)        # motion without a frame axis
            self.motions.append((group, shape, run, take, group.coordinates))
            start = run.stop
        posted = [s for s, seg in enumerate(m.segments) if seg.post is not None]
        self.transforms = np.tile(_EYE4, (G + len(posted), 1, 1))
        self.transforms[G:] = m.post[posted]
        factors = [[] for _ in range(S)]
        for j in range(G):
            factors[m.joint_segment[j]].append(position[j])     # joints come in slot order
        for k, s in enumerate(posted):
            factors[s].append(G + k)
        # Partial products Q: entries [0, S) the rests; then slot by slot, one run per slot.
        entry = [[s] for s in range(S)]
        self.slots, size = [], S
        for k in range(max(len(f) for f in factors)):
            segs = [s for s in range(S) if len(factors[s]) > k]
            run = slice(size, size + len(segs))
            self.slots.append((_index([entry[s][k] for s in segs]), _index([factors[s][k] for s in segs]), run))
            for i, s in enumerate(segs):
                entry[s].append(run.start + i)
            size = run.stop
        self._entry = entry
        self._n_products = size

    def _index_nodes(self, m, scene) -> None:
        """World-frame nodes: [0, A) the armature bases; then level by level, each segment's frame
        and the frames before its joints (level: its depth + 1) and each segment endpoint (its
        segment's depth + 2). Per node: its parent node and its entry of the offsets (partial
        products, then the endpoints' offsets)."""
        S, A = len(m.segments), m.n_armatures
        depth = np.zeros(S, dtype=int)
        for s in range(S):
            depth[s] = 0 if m.parent[s] < 0 else depth[m.parent[s]] + 1
        ends = scene._seg_ends
        end_segments = scene._seg_of_ends
        # (level, kind, item): kind 0 a segment, 1 a joint, 2 an endpoint
        nodes = [(depth[s] + 1, 0, s) for s in range(S)]
        nodes += [(depth[m.joint_segment[j]] + 1, 1, j) for j in range(len(m.joints))]
        nodes += [(depth[end_segments[i]] + 2, 2, i) for i in range(ends.size)]
        nodes.sort(key=lambda node: node[0])
        number = {(kind, item): A + i for i, (_, kind, item) in enumerate(nodes)}
        segment_node = np.array([number[0, s] for s in range(S)], dtype=np.intp)
        parent_node = lambda s: m.armature[s] if m.parent[s] < 0 else segment_node[m.parent[s]]   # noqa: E731
        parents, sources = [], []
        for _, kind, item in nodes:
            if kind == 0:
                parents.append(parent_node(item))
                sources.append(self._entry[item][-1])
            elif kind == 1:
                s = m.joint_segment[item]
                parents.append(parent_node(s))
                sources.append(self._entry[s][m.joint_slot[item]])
            else:
                parents.append(segment_node[end_segments[item]])
                sources.append(self._n_products + item)
        offsets = [scene._endpoints[e].offset for e in ends]
        self.offsets = np.concatenate([np.zeros((self._n_products, 4, 4)),
                                       np.reshape(offsets, (-1, 4, 4))]) if offsets else np.zeros((self._n_products, 4, 4))
        self.offsets[:S] = m.rest
        self.sources = _index(sources)
        self.levels = []
        levels = np.array([level for level, _, _ in nodes])
        parents = np.array(parents, dtype=np.intp)
        for level in range(1, int(levels.max(initial=0)) + 1):
            members = np.flatnonzero(levels == level)
            if not members.size:
                continue
            run = slice(A + int(members[0]), A + int(members[-1]) + 1)
            p = parents[members]
            if np.all(p == p[0]):
                p = slice(int(p[0]), int(p[0]) + 1)                 # one parent: broadcast
            else:
                p = _index(p)
            self.levels.append((run, p, slice(run.start - A, run.stop - A)))
        self.n_nodes = A + len(nodes)
        self.segment_nodes = _index(segment_node)
        joint_node = np.array([number[1, j] for j in range(len(m.joints))], dtype=np.intp)
        self.coordinate_nodes = _index(joint_node[m.coordinate_joint]) if m.n_coordinates else slice(0, 0)
        self.end_nodes = _index(np.array([number[2, i] for i in range(ends.size)], dtype=np.intp))

    def _index_jacobians(self, m, scene) -> None:
        n = m.n_coordinates
        self.fixed_columns = m.fixed_columns.copy()
        self.translational = m.translational if m.translational.size else None
        self.rotational = m.rotational.astype(float)[:, None]
        # Which coordinates move each endpoint (E, 1, n): none for endpoints on objects.
        self.moves = np.zeros((len(scene._endpoints), 1, n))
        self.moves[scene._seg_ends, 0] = m.moves[:, scene._seg_of_ends].T
        # [[-[p]x, I], [I, 0]] per endpoint, -[p]x filled per call
        self.to_point = np.zeros((len(scene._endpoints), 6, 6))
        self.to_point[:, :3, 3:] = self.to_point[:, 3:, :3] = _EYE3
        self.n_ends = len(scene._endpoints)
        self.seg_end_index, self.obj_end_index = scene._seg_end_index, scene._obj_end_index
        self.obj_of_ends = np.asarray(scene._obj_of_ends, dtype=np.intp)
        self.obj_offsets = scene._obj_offsets
        self.n_coordinates, self.n_columns = n, n + scene.n_u
        self.has_ends = bool(scene._endpoints)
        self.batches = [kind.one_frame_batch(tasks, places) for kind, tasks, places in scene._groups]
        self.outputs_shape = (3, 1, scene.n_outputs)
        self.no_errors = np.full((2, 1, len(scene.constraints)), np.nan)

    # -- one evaluation --------------------------------------------------------------------

    def forward(self, q: np.ndarray, bases):
        """World frames of all nodes (N, 4, 4), and each coordinate's velocity column (n, 3) in the
        frame before its joint."""
        m = self.model
        X = self.transforms.copy()
        columns = self.fixed_columns.copy()
        for group, shape, run, take, coordinates in self.motions:
            R, t, varying = group.kind.motion(q[take].reshape(shape), group.prepared)
            if R is not None:
                X[run, :3, :3] = R
            if t is not None:
                X[run, :3, 3] = t
            if varying is not None:                                 # (G, d, 3)
                if isinstance(coordinates, slice):
                    columns[coordinates].reshape(varying.shape)[...] = varying
                else:
                    columns[coordinates] = varying.reshape(-1, 3)
        Q = self.offsets.copy()
        for previous, factors, run in self.slots:
            np.matmul(_take(Q, previous), _take(X, factors), out=Q[run])
        offsets = _take(Q, self.sources)
        W = np.empty((self.n_nodes, 4, 4))
        A = m.n_armatures
        W[:A] = _EYE4 if bases is None else bases[0]
        for run, parent, local in self.levels:
            np.matmul(_take(W, parent), offsets[local], out=W[run])
        return W, columns

    def columns(self, W, columns):
        """Per coordinate its world direction w_c or u_c and its pivot o_c (n, 3) (kinematics.py)."""
        joint_frames = _take(W, self.coordinate_nodes)
        return (joint_frames[:, :3, :3] @ columns[:, :, None])[..., 0], joint_frames[:, :3, 3]

    def endpoint_jacobians(self, frames, direction, pivot, objects, bases, b_matrix):
        """The endpoints' twist Jacobians (1, E, 6, n (+ n_u with `b_matrix`)), as
        Scene._endpoint_jacobians. Per coordinate c and endpoint at p, the linear rows
        w_c x (p - o_c) = -[p]x w_c + o_c x w_c (rotations) or u_c (translations), the angular
        rows w_c (rotations) or 0: with V = (w; o x w + u) (6, n), J_e = [[-[p]x, I], [I, 0]] V,
        zero where c does not move the endpoint (object endpoints: every c)."""
        n = self.n_coordinates
        if self.translational is None:
            w = direction
            moment = ((pivot @ _SKEW).reshape(n, 3, 3) @ w[:, :, None])[..., 0]
        else:
            w = direction * self.rotational
            moment = ((pivot @ _SKEW).reshape(n, 3, 3) @ w[:, :, None])[..., 0] + (direction - w)
        V = np.concatenate([w.T, moment.T])
        to_point = self.to_point.copy()
        to_point[:, :3, :3] = (frames[0, :, :3, 3] @ _MINUS_SKEW).reshape(-1, 3, 3)
        Js = to_point @ V                                                       # (E, 6, n)
        Js *= self.moves
        if not b_matrix:
            return Js[None]
        J = np.zeros((1, self.n_ends, 6, self.n_columns))
        J[0, :, :, :n] = Js
        self.scene._fill_xu_columns(J, frames, objects, bases)
        return J

    def evaluate(self, q, objects, bases, jacobians, values):
        """Scene.evaluate's arguments at F = 1; the fields of its Evaluation, in order."""
        scene, m = self.scene, self.model
        q1 = q[0]
        missing = None
        if objects is not None and not math.isfinite(objects.sum()):
            finite = np.isfinite(objects)
            if not finite.all():
                missing = ~finite.all(axis=(-2, -1))
                objects = np.where(missing[..., None, None], _EYE4, objects)
        W, columns = self.forward(q1, bases)
        frames = np.empty((1, self.n_ends, 4, 4))
        if self.has_ends:
            if scene._seg_ends.size:
                frames[0, self.seg_end_index] = _take(W, self.end_nodes)
            if scene._obj_ends.size:
                ends = objects[0].take(self.obj_of_ends, axis=0)
                frames[0, self.obj_end_index] = ends if self.obj_offsets is None else ends @ self.obj_offsets
        n = m.n_coordinates
        y, yd, task_weight = np.zeros(self.outputs_shape)
        position_error, rotation_error = self.no_errors.copy()
        b_matrix = bool(jacobians) and not isinstance(jacobians, str)
        A = np.zeros((1, scene.n_outputs, n)) if jacobians else None
        B = np.zeros((1, scene.n_outputs, scene.n_u)) if b_matrix else None
        direction = pivot = None
        Jends = None
        if jacobians:
            direction, pivot = self.columns(W, columns)
            if self.has_ends:
                Jends = self.endpoint_jacobians(frames, direction, pivot, objects, bases, b_matrix)
        inputs = TaskInputs(q, frames, Jends, values, n)
        out = Stack(y, yd, task_weight, position_error, rotation_error, A, B)
        for batch in self.batches:
            batch(inputs, out)
        if missing is not None:
            gone = (missing[:, None, :] & scene._task_objects).any(axis=-1)
            task_weight[gone[:, scene._row_task]] = 0.0
            position_error[gone] = rotation_error[gone] = np.nan
        if jacobians and scene._cq_rows.size:
            A[:, scene._cq_rows, scene._cq_columns] += 1.0
        pose = OneFramePose(self, q, W, columns, direction, pivot)
        return y, yd, task_weight, position_error, rotation_error, pose, A, B


"""A scene: one model (possibly several armatures), its constraints, and external objects.

`Scene.evaluate` runs forward kinematics and stacks every constraint's outputs into one system

    y, yd, task weights        (F, M)
    A = Cq - Cf Jf^-1 Jq       (F, M, n)    n coordinates of all armatures together
    B = Cf Jf^-1 Ju            (F, M, 6 (K + n_armatures))

The unconstrained coordinates Xu are, per external object k and then per armature base, a world
twist: the linear velocity of its origin and its angular velocity. So constraints between bones
of two armatures move both, and a moving target or armature base feeds forward through B.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .blocks import Blocks, independent_blocks
from .kinematics import _FRAMES_BY_ARITHMETIC, Pose, _take, forward_kinematics, moved_point_jacobian, segment_nodes
from .limits import project, wrap_spheres
from .model import Model, as_slice
from .one_frame import OneFrame
from .tasks import Place, Stack, Task, TaskInputs
from .twists import shift_matrix


@dataclass
class Evaluation:
    """The stacked system at one set of coordinates (see the module docstring)."""

    y: np.ndarray
    yd: np.ndarray
    task_weight: np.ndarray      # Wy, per output row
    position_error: np.ndarray   # (F, C), NaN where a constraint has no position part
    rotation_error: np.ndarray   # (F, C), NaN where a constraint has no rotation part
    pose: Pose
    A: np.ndarray | None = None
    B: np.ndarray | None = None


class Scene:
    """The solver's coordinates q are the model's joint coordinates, or, with a `coupling`, the
    coordinates it maps onto them: theta = coupling.dofs(q), and every Jacobian is taken through
    d theta / d q by the chain rule. A coupling has `n_coordinates`, `lower`, `upper`, `locked`
    (per coordinate), `dofs(q)` and `jacobian(q)` (F, n_theta, n_q) — OpenSim's coordinates that
    drive several joint axes through functions are one."""

    def __init__(self, model: Model, constraints, n_objects: int = 0, coupling=None):
        self.model = model
        self.coupling = coupling
        self.constraints = list(constraints)
        self.n_objects = int(n_objects)
        self.n_u = 6 * (self.n_objects + model.n_armatures)
        if coupling is None:
            self.n_coordinates = model.n_coordinates
            self.lower, self.upper, self.joint_weight = model.lower, model.upper, model.weight
        else:
            self.n_coordinates = int(coupling.n_coordinates)
            self.lower = np.asarray(coupling.lower, float)
            self.upper = np.asarray(coupling.upper, float)
            self.joint_weight = np.where(np.asarray(coupling.locked, bool), 0.0, 1.0)
        self._check_tasks()
        self.names = [c.name for c in self.constraints]
        self.rows = np.cumsum([0] + [c.n_outputs for c in self.constraints])
        self.n_outputs = int(self.rows[-1])
        self.value_tasks = [k for k, c in enumerate(self.constraints) if c.n_values]   # take per-frame values
        self.n_values = sum(c.n_values for c in self.constraints)
        # Tasks with a target to reach; soft ones (joint values) are preferences.
        self.hard_tasks = np.array([k for k, c in enumerate(self.constraints) if not c.soft], dtype=int)
        self.hard_task_index = as_slice(self.hard_tasks)
        self._place_tasks()
        self._index_endpoints()
        self._index_missing()

    def _check_tasks(self) -> None:
        n_seg = len(self.model.segments)
        for c in self.constraints:
            for _, coordinate in c.coordinate_rows():
                if not 0 <= coordinate < self.n_coordinates:
                    raise ValueError(f"constraint '{c.name}': coordinate {coordinate} is not in the model")
            for end in c.endpoints():
                if end.segment >= n_seg or end.obj >= self.n_objects:
                    raise ValueError(f"constraint '{c.name}': endpoint {end} is not in the scene")

    def _place_tasks(self) -> None:
        """Each task's Place, the batches that evaluate them, and Cq's entries."""
        places, endpoints, n_values = [], [], 0
        for k, c in enumerate(self.constraints):
            ends = c.endpoints()
            places.append(Place(k, slice(self.rows[k], self.rows[k + 1]), len(endpoints) if ends else -1,
                                n_values if c.n_values else -1))
            endpoints += ends
            n_values += c.n_values
        self._endpoints, self._places = endpoints, places
        groups: dict = {}
        for c, place in zip(self.constraints, places):
            groups.setdefault((type(c), c.batch_key()), []).append((c, place))
        self._groups = [(kind, [c for c, _ in group], [p for _, p in group]) for (kind, _), group in groups.items()]
        self._batches = [kind.batch(tasks, places) for kind, tasks, places in self._groups]
        cq = [(self.rows[k] + row, coordinate) for k, c in enumerate(self.constraints)
              for row, coordinate in c.coordinate_rows()]
        self._cq_rows = np.array([r for r, _ in cq], dtype=int)
        self._cq_columns = np.array([c for _, c in cq], dtype=int)

    def _index_endpoints(self) -> None:
        """Per-scene constants of evaluate for the endpoints, so that a call builds none of them."""
        endpoints, model = self._endpoints, self.model
        self._seg_ends = np.array([k for k, e in enumerate(endpoints) if e.segment >= 0], dtype=int)
        self._obj_ends = np.array([k for k, e in enumerate(endpoints) if e.obj >= 0], dtype=int)
        offsets = np.stack([e.offset for e in endpoints]) if endpoints else np.zeros((0, 4, 4))
        self._seg_of_ends = np.array([endpoints[k].segment for k in self._seg_ends], dtype=int)
        self._obj_of_ends = np.array([endpoints[k].obj for k in self._obj_ends], dtype=int)
        # Slices where contiguous (views in evaluate).
        self._seg_end_index, self._obj_end_index = as_slice(self._seg_ends), as_slice(self._obj_ends)
        self._obj_of_end_index = as_slice(self._obj_of_ends)
        # Each endpoint's frame is one row of forward kinematics' world nodes (Pose.nodes) followed
        # by the objects, its segment's or its object's, times the endpoint's offset (node-major);
        # offsets that are all the identity are None: a product with I only copies (finite) frames.
        rows = np.empty(len(endpoints), dtype=int)
        rows[self._seg_ends], n_nodes = segment_nodes(model, self._seg_of_ends)
        rows[self._obj_ends] = n_nodes + self._obj_of_ends
        self._end_rows, self._seg_end_rows = as_slice(rows), as_slice(rows[self._seg_ends])
        self._end_offsets = None if np.all(offsets == np.eye(4)) else offsets[:, None]
        self._end_moves = model.moving_mask(self._seg_of_ends)     # which coordinates move each endpoint
        # Where each endpoint's own twist (Xu) enters B: the columns of its object, or of the
        # armature base of its segment; as index arrays (endpoints, 6, 6) for one assignment.
        n, six = model.n_coordinates, np.arange(6)
        columns = np.concatenate([n + 6 * (self.n_objects + model.armature[self._seg_of_ends]),
                                  n + 6 * self._obj_of_ends]).astype(int)
        ends = np.concatenate([self._seg_ends, self._obj_ends]).astype(int)
        self._xu_index = (ends[:, None, None], six[None, :, None], columns[:, None, None] + six[None, None, :])

    def _index_missing(self) -> None:
        """Which objects each task reads (tasks x objects) and which task owns each output row: an
        object without a pose in a frame leaves its tasks out of that frame."""
        self._task_objects = np.zeros((len(self.constraints), self.n_objects), dtype=bool)
        for k, c in enumerate(self.constraints):
            for end in c.endpoints():
                if end.obj >= 0:
                    self._task_objects[k, end.obj] = True
        self._row_task = np.repeat(np.arange(len(self.constraints)), np.diff(self.rows))

    @cached_property
    def blocks(self) -> Blocks | None:
        """The system's independent blocks (blocks.py), None for fewer than two."""
        return independent_blocks(self)

    @cached_property
    def _one_frame(self) -> OneFrame | None:
        """The evaluation of one frame (one_frame.py), built at the first; None with a coupling."""
        return OneFrame(self) if self.coupling is None else None

    def project(self, q: np.ndarray) -> np.ndarray:
        """q moved onto its limits (see limits.project); coupled coordinates have box limits."""
        return self.wrap(self.limit(q))

    def limit(self, q: np.ndarray) -> np.ndarray:
        """q clamped onto its limits (a new array), sphere joints not yet wrapped (see `wrap`)."""
        if self.coupling is None:
            return project(self.model, q)
        return np.clip(q, self.lower, self.upper)

    def wrap(self, q: np.ndarray) -> np.ndarray:
        """The same pose with unlimited sphere joints turned the short way round (limits.wrap_spheres)."""
        return wrap_spheres(self.model, q) if self.coupling is None else q

    def turn_start(self, q: np.ndarray, objects=None, bases=None) -> np.ndarray:
        """The start q (F, n) of a solve after each task's `turn_start` (in task order, each from
        the pose the ones before it left); q itself when no task turns it, or with a coupling.
        An object without a finite pose in a frame leaves that frame as it was."""
        turning = [(c, place) for c, place in zip(self.constraints, self._places)
                   if type(c).turn_start is not Task.turn_start]
        if not turning or self.coupling is not None:
            return q
        missing = None
        if objects is not None:
            missing = ~np.isfinite(objects).all(axis=(1, 2, 3))
            objects = np.where(missing[:, None, None, None], np.eye(4), objects)
        turned = q
        for c, place in turning:
            pose = forward_kinematics(self.model, turned, bases)
            ends = slice(place.first_endpoint, place.first_endpoint + len(c.endpoints()))
            turned = c.turn_start(self.model, turned, pose, self._endpoint_frames(pose, objects)[:, ends])
        return turned if missing is None else np.where(missing[:, None], q, turned)

    def _endpoint_frames(self, pose: Pose, objects):
        """Every endpoint's world frame (F, E, 4, 4): its row of the world nodes and the objects
        times its offset, in one product. Under _FRAMES_BY_ARITHMETIC frames the rows come in one
        take from the nodes and the objects joined; from there on segments' and objects' apart
        (joining would copy every node)."""
        F = pose.n_frames
        if not self._obj_ends.size or F < _FRAMES_BY_ARITHMETIC:
            sources = pose.nodes if not self._obj_ends.size else np.concatenate((pose.nodes, objects.swapaxes(0, 1)))
            ends = _take(sources, self._end_rows)                                         # (E, F, 4, 4)
        else:
            ends = np.empty((len(self._endpoints), F, 4, 4))
            ends[self._seg_end_index] = _take(pose.nodes, self._seg_end_rows)
            ends[self._obj_end_index] = objects.swapaxes(0, 1)[self._obj_of_end_index]
        frames = np.empty((F, len(self._endpoints), 4, 4))
        if self._end_offsets is None:
            frames.swapaxes(0, 1)[...] = ends
        else:
            np.matmul(ends, self._end_offsets, out=frames.swapaxes(0, 1))
        return frames

    def _endpoint_jacobians(self, pose: Pose, frames, objects, bases, b_matrix: bool):
        """Twist Jacobians (F, E, 6, n + n_u) of all endpoints, at their own origins; the Xu
        columns are left zero without `b_matrix`. (They stay in the array even then: A's products
        over its first n columns then round exactly as they do with B.)"""
        F, E = frames.shape[:2]
        m = self.model
        n = m.n_coordinates
        J = np.zeros((F, E, 6, n + self.n_u))
        if self._seg_ends.size:
            J_seg = moved_point_jacobian(m, pose, frames[..., 3][:, self._seg_end_index])     # (p, 1)
            if self._end_moves is not None:
                J_seg *= self._end_moves
            J[:, self._seg_end_index, :, :n] = J_seg
        if b_matrix:
            self._fill_xu_columns(J, frames, objects, bases)
        return J

    def _fill_xu_columns(self, J, frames, objects, bases) -> None:
        """The Xu columns of the endpoints' twist Jacobians J (F, E, 6, n + n_u): an endpoint moves
        with its object's or its armature base's twist, shifted from that origin to the
        endpoint's, S(p_e - o)."""
        F, E = frames.shape[:2]
        m = self.model
        points = frames[..., :3, 3]
        origins = np.empty((F, E, 3))
        if self._seg_ends.size:
            arm = m.armature[self._seg_of_ends]
            origins[:, self._seg_ends] = 0.0 if bases is None else bases[:, arm][..., :3, 3]
        if self._obj_ends.size:
            origins[:, self._obj_ends] = objects[:, self._obj_of_ends][..., :3, 3]
        ends = self._xu_index[0][:, 0, 0]
        J[(slice(None),) + self._xu_index] = shift_matrix(points[:, ends] - origins[:, ends])

    def evaluate(self, q, objects=None, bases=None, jacobians: bool | str = True, values=None,
                 one_frame: bool = False) -> Evaluation:
        """Outputs (and, with `jacobians`, A and B) at coordinates q (F, n), object poses
        (F, K, 4, 4) and armature bases (F, A, 4, 4). `values` (F, n_values) gives the tasks that take them (JointValue)
        their desired values per frame, in task order; NaN leaves a task out of a frame.
        jacobians="A" leaves B out (None): only simulation mode feeds Xu' forward.
        `one_frame` with F = 1: evaluated by one_frame.OneFrame in a fraction of the numpy calls,
        equal to the batched evaluation to rounding, not bit for bit (a scene with a coupling, and
        F > 1, take the batched code)."""
        q = np.asarray(q, dtype=float)
        F = q.shape[0]
        if one_frame and F == 1 and self._one_frame is not None:
            return Evaluation(*self._one_frame.evaluate(q, None if objects is None else np.asarray(objects, dtype=float),
                                                        None if bases is None else np.asarray(bases, dtype=float),
                                                        jacobians, values))
        m = self.model
        theta = q if self.coupling is None else self.coupling.dofs(q)
        pose = forward_kinematics(m, theta, bases)
        missing = None
        if objects is not None:
            # An object without a finite pose in a frame (a marker out of view, a deleted target)
            # leaves its constraints out of that frame: weight 0, errors NaN.
            finite = np.isfinite(objects)
            if not finite.all():
                missing = ~finite.all(axis=(-2, -1))                                 # (F, K)
                objects = np.where(missing[..., None, None], np.eye(4), objects)
        frames = self._endpoint_frames(pose, objects)
        C, M, n = len(self.constraints), self.n_outputs, m.n_coordinates
        y, yd, task_weight = np.zeros((3, F, M))
        position_error, rotation_error = np.full((2, F, C), np.nan)
        b_matrix = bool(jacobians) and not isinstance(jacobians, str)     # jacobians="A": A only
        A = np.zeros((F, M, n)) if jacobians else None
        B = np.zeros((F, M, self.n_u)) if b_matrix else None
        Jends = self._endpoint_jacobians(pose, frames, objects, bases, b_matrix) if jacobians and self._endpoints \
            else None
        inputs = TaskInputs(q, frames, Jends, values, n)
        out = Stack(y, yd, task_weight, position_error, rotation_error, A, B)
        for batch in self._batches:
            batch(inputs, out)
        if missing is not None:
            gone = (missing[:, None, :] & self._task_objects).any(axis=-1)               # (F, C)
            task_weight[gone[:, self._row_task]] = 0.0
            position_error[gone] = rotation_error[gone] = np.nan
        if jacobians:
            if self.coupling is not None:
                A = A @ self.coupling.jacobian(q)
            if self._cq_rows.size:
                A[:, self._cq_rows, self._cq_columns] += 1.0                              # + Cq
        return Evaluation(y, yd, task_weight, position_error, rotation_error, pose, A, B)

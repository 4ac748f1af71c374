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

import numpy as np

from .constraints import JointValue
from .kinematics import Pose, forward_kinematics, moved_point_jacobian
from .limits import project, wrap_spheres
from .model import Model, as_slice
from .rotations import skew


@dataclass
class Evaluation:
    y: np.ndarray
    yd: np.ndarray
    weight: np.ndarray
    position_error: np.ndarray   # (F, C), NaN where a constraint has no position part
    rotation_error: np.ndarray   # (F, C), NaN where a constraint has no rotation part
    pose: Pose
    A: np.ndarray | None = None
    B: np.ndarray | None = None


def shift_matrix(r: np.ndarray) -> np.ndarray:
    """S(r) = [[I, -[r]x], [0, I]] (..., 6, 6): shift_twist(r, I)."""
    S = np.zeros(r.shape[:-1] + (6, 6))
    _diagonal6(S)[...] = 1.0
    S[..., :3, 3:] = -skew(r)
    return S


def _diagonal6(M: np.ndarray) -> np.ndarray:
    """The diagonals (..., 6) of contiguous matrices M (..., 6, 6), as a writable view."""
    return M.reshape(M.shape[:-2] + (36,))[..., ::7]


def shift_twist(r: np.ndarray, J: np.ndarray) -> np.ndarray:
    """S(r) J: twist Jacobians (..., 6, k) whose linear rows are moved to a point r further on
    (v + w x r, the velocity of a point rigidly attached at offset r)."""
    lever = skew(r) @ J[..., 3:, :]
    out = J.copy() if J.shape[:-2] == lever.shape[:-2] else np.broadcast_to(J, lever.shape[:-2] + J.shape[-2:]).copy()
    out[..., :3, :] -= lever
    return out


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
            self.lower, self.upper, self.weight = model.lower, model.upper, model.weight
        else:
            self.n_coordinates = int(coupling.n_coordinates)
            self.lower = np.asarray(coupling.lower, float)
            self.upper = np.asarray(coupling.upper, float)
            self.weight = np.where(np.asarray(coupling.locked, bool), 0.0, 1.0)
        n_seg = len(model.segments)
        for c in self.constraints:
            if isinstance(c, JointValue):
                if not 0 <= c.coordinate < self.n_coordinates:
                    raise ValueError(f"constraint '{c.name}': coordinate {c.coordinate} is not in the model")
                continue
            for end in (c.base, c.tip):
                if end.segment >= n_seg or end.obj >= self.n_objects:
                    raise ValueError(f"constraint '{c.name}': endpoint {end} is not in the scene")
        self.rows = np.cumsum([0] + [c.n_outputs for c in self.constraints])
        self.n_outputs = int(self.rows[-1])
        self.looped = [i for i, c in enumerate(self.constraints) if not isinstance(c, JointValue)]
        self.joint_tasks = [i for i, c in enumerate(self.constraints) if isinstance(c, JointValue)]
        self.names = [c.name for c in self.constraints]
        endpoints = [e for i in self.looped for e in (self.constraints[i].base, self.constraints[i].tip)]
        self._endpoints = endpoints
        self._seg_ends = np.array([k for k, e in enumerate(endpoints) if e.segment >= 0], dtype=int)
        self._obj_ends = np.array([k for k, e in enumerate(endpoints) if e.obj >= 0], dtype=int)
        self._offsets = np.stack([e.offset for e in endpoints]) if endpoints else np.zeros((0, 4, 4))
        # Point-to-point tasks (CopyPose on all three position axes, no rotation) are evaluated all
        # together: y = p_T - p_B in world axes, A = J_T - J_B (linear rows), B = -(those in Xu).
        self.point_tasks = [k for k in self.looped if self.constraints[k].points_only]
        self._one_by_one = [k for k in range(len(self.constraints)) if k not in set(self.point_tasks)]
        self._point_columns = np.array(self.point_tasks, dtype=int)
        ends = np.array([2 * self.looped.index(k) for k in self.point_tasks], dtype=int)
        self._point_ends = (ends, ends + 1)
        self._point_rows = np.array([self.rows[k] for k in self.point_tasks], dtype=int)[:, None] + np.arange(3)
        self._point_weight = np.array([self.constraints[k].task_weight[0] for k in self.point_tasks])
        self._point_objects = np.array([[e.obj for e in (self.constraints[k].base, self.constraints[k].tip)]
                                        for k in self.point_tasks], dtype=int).reshape(-1, 2)

        # Per-scene constants of evaluate, so that a call builds none of them.
        self._seg_of_ends = np.array([endpoints[k].segment for k in self._seg_ends], dtype=int)
        self._obj_of_ends = np.array([endpoints[k].obj for k in self._obj_ends], dtype=int)
        # Offsets that are all the identity are None: a product with I only copies (finite) frames.
        self._seg_offsets, self._obj_offsets = (None if np.all(o == np.eye(4)) else o
                                                for o in (self._offsets[self._seg_ends], self._offsets[self._obj_ends]))
        # The same indices as slices where contiguous (views in evaluate).
        self._seg_end_index, self._obj_end_index = as_slice(self._seg_ends), as_slice(self._obj_ends)
        self._seg_of_end_index, self._obj_of_end_index = as_slice(self._seg_of_ends), as_slice(self._obj_of_ends)
        self._end_moves = model.moving_mask(self._seg_of_ends)     # which coordinates move each endpoint
        self._loop_end = {k: 2 * i for i, k in enumerate(self.looped)}            # constraint -> base endpoint
        self._row_slices = [slice(self.rows[k], self.rows[k + 1]) for k in range(len(self.constraints))]
        # Each looped constraint's Cf, None where it selects all six features (Cf = I: its product is a copy).
        self._selection = {k: None if np.array_equal(self.constraints[k].Cf, np.eye(6)) else self.constraints[k].Cf
                           for k in self.looped}
        self._value_column = {k: i for i, k in enumerate(self.joint_tasks)}      # constraint -> column of values
        self._joint_rows = np.array([self.rows[k] for k in self.joint_tasks], dtype=int)
        self._joint_coordinates = np.array([self.constraints[k].coordinate for k in self.joint_tasks], dtype=int)
        # Where each endpoint's own twist (Xu) enters B: the columns of its object, or of the
        # armature base of its segment; as index arrays (endpoints, 6, 6) for one assignment.
        n, six = self.model.n_coordinates, np.arange(6)
        columns = np.concatenate([n + 6 * (self.n_objects + model.armature[self._seg_of_ends]),
                                  n + 6 * self._obj_of_ends]).astype(int)
        ends = np.concatenate([self._seg_ends, self._obj_ends]).astype(int)
        self._xu_index = (ends[:, None, None], six[None, :, None], columns[:, None, None] + six[None, None, :])
        # Constraints with a target to reach (pose and distance; joint values are soft).
        self.hard_tasks = np.array([k for k, c in enumerate(self.constraints) if hasattr(c, "Cf")], dtype=int)
        self.hard_task_index = as_slice(self.hard_tasks)

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

    def _endpoint_frames(self, pose: Pose, objects):
        F = pose.frames.shape[0]
        frames = np.empty((F, len(self._endpoints), 4, 4))
        if self._seg_ends.size:
            ends = pose.frames[:, self._seg_of_end_index]
            frames[:, self._seg_end_index] = ends if self._seg_offsets is None else ends @ self._seg_offsets
        if self._obj_ends.size:
            ends = objects[:, self._obj_of_end_index]
            frames[:, self._obj_end_index] = ends if self._obj_offsets is None else ends @ self._obj_offsets
        return frames

    def _endpoint_jacobians(self, pose: Pose, frames, objects, bases, b_matrix: bool):
        """Twist Jacobians (F, E, 6, n + n_u) of all endpoints, at their own origins; the Xu
        columns are left zero without `b_matrix`. (They stay in the array even then: A's products
        over its first n columns then round exactly as they do with B.)"""
        F, E = frames.shape[:2]
        m = self.model
        n = m.n_coordinates
        J = np.zeros((F, E, 6, n + self.n_u))
        points = frames[..., :3, 3]
        if self._seg_ends.size:
            J_seg = moved_point_jacobian(m, pose, points[:, self._seg_end_index])
            if self._end_moves is not None:
                J_seg *= self._end_moves
            J[:, self._seg_end_index, :, :n] = J_seg
        if b_matrix:
            # An endpoint moves with its object's or its armature base's twist, shifted from that
            # origin to the endpoint's: S(p_e - o).
            origins = np.empty((F, E, 3))
            if self._seg_ends.size:
                arm = m.armature[self._seg_of_ends]
                origins[:, self._seg_ends] = 0.0 if bases is None else bases[:, arm][..., :3, 3]
            if self._obj_ends.size:
                origins[:, self._obj_ends] = objects[:, self._obj_of_ends][..., :3, 3]
            ends = self._xu_index[0][:, 0, 0]
            J[(slice(None),) + self._xu_index] = shift_matrix(points[:, ends] - origins[:, ends])
        return J

    def _point_outputs(self, frames, Jends, missing, y, weight, position_error, A, B):
        """Fill the rows of all point-to-point tasks at once (see __init__)."""
        base, tip = self._point_ends
        d = frames[:, tip][..., :3, 3] - frames[:, base][..., :3, 3]             # (F, P, 3)
        y[:, self._point_rows] = d
        w = self._point_weight
        err = np.sqrt((d * d).sum(axis=-1))
        if missing is not None:
            gone = np.zeros(d.shape[:2], dtype=bool)
            for side in range(2):
                obj = self._point_objects[:, side]
                gone[:, obj >= 0] |= missing[:, obj[obj >= 0]]
            w, err = np.where(gone, 0.0, w), np.where(gone, np.nan, err)
        weight[:, self._point_rows] = w[..., None]
        position_error[:, self._point_columns] = err
        if A is not None:
            n = self.model.n_coordinates
            J = Jends[:, tip, :3] - Jends[:, base, :3]                           # (F, P, 3, n + n_u)
            A[:, self._point_rows] = J[..., :n]
            if B is not None:
                B[:, self._point_rows] = -J[..., n:]

    def evaluate(self, q, objects=None, bases=None, jacobians: bool | str = True, values=None) -> Evaluation:
        """Outputs (and, with `jacobians`, A and B) at coordinates q (F, n), object poses
        (F, K, 4, 4) and armature bases (F, A, 4, 4). `values` (F, number of JointValue tasks, in
        their order) gives those tasks a desired value per frame; NaN leaves a task out of a frame.
        jacobians="A" leaves B out (None): only simulation mode feeds Xu' forward."""
        q = np.asarray(q, dtype=float)
        F = q.shape[0]
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
        y, yd, weight = np.zeros((3, F, M))
        position_error, rotation_error = np.full((2, F, C), np.nan)
        b_matrix = bool(jacobians) and not isinstance(jacobians, str)     # jacobians="A": A only
        A = np.zeros((F, M, n)) if jacobians else None
        B = np.zeros((F, M, self.n_u)) if b_matrix else None
        Jends = self._endpoint_jacobians(pose, frames, objects, bases, b_matrix) if jacobians and self.looped else None

        if self.point_tasks:
            self._point_outputs(frames, Jends, missing, y, weight, position_error, A, B)
        for k in self._one_by_one:
            c, rows = self.constraints[k], self._row_slices[k]
            if isinstance(c, JointValue):
                value = np.broadcast_to(c.value if values is None else values[:, self._value_column[k]], (F,))
                given = np.isfinite(value)
                value = np.where(given, value, q[:, c.coordinate])
                y[:, rows] = q[:, c.coordinate, None]
                yd[:, rows] = value[:, None]
                weight[:, rows] = np.where(given, c.weight, 0.0)[:, None]
                err = np.where(given, np.abs(q[:, c.coordinate] - value), np.nan)
                (rotation_error if c.has_rotation else position_error)[:, k] = err
                continue
            e = self._loop_end[k]
            Tb, Tt = frames[:, e], frames[:, e + 1]
            Jb, Jt = (Jends[:, e], Jends[:, e + 1]) if jacobians else (None, None)
            Xf, Jinv = c.loop(Tb, Tt)
            y[:, rows], yd[:, rows], weight[:, rows], position_error[:, k], rotation_error[:, k] = c.outputs(Xf)
            if missing is not None:
                gone = np.zeros(F, dtype=bool)
                for end in (c.base, c.tip):
                    if end.obj >= 0:
                        gone |= missing[:, end.obj]
                weight[gone, rows] = 0.0
                position_error[gone, k] = rotation_error[gone, k] = np.nan
            if jacobians:
                Rb_t = Tb[:, :3, :3].swapaxes(-1, -2)
                to_base = np.zeros((F, 6, 6))
                to_base[:, :3, :3] = Rb_t
                to_base[:, 3:, 3:] = Rb_t
                Cf = self._selection[k]
                G = (Jinv if Cf is None else Cf @ Jinv) @ to_base           # (F, m, 6)
                loop = Jt - shift_twist(Tt[:, :3, 3] - Tb[:, :3, 3], Jb)
                A[:, rows] = G @ loop[..., :n]
                if b_matrix:
                    B[:, rows] = -(G @ loop[..., n:])
        if jacobians:
            if self.coupling is not None:
                A = A @ self.coupling.jacobian(q)
            if self.joint_tasks:
                A[:, self._joint_rows, self._joint_coordinates] = 1.0
        return Evaluation(y, yd, weight, position_error, rotation_error, pose, A, B)

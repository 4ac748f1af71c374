"""What every task is to the scene: the interface, the endpoints tasks relate, and the iTaSC loop.

A task contributes output rows y (its `n_outputs` per frame) that the update law drives toward yd,
with per-row task weights, and rows of

    A = Cq - Cf Jf^-1 Jq,    B = Cf Jf^-1 Ju.

A *loop task* relates two frames, a base B and a tip T, each on a segment of the model or on an
external object (an `Endpoint`). Between them iTaSC places a virtual armature of exactly six joints
whose values are the feature coordinates Xf; it closes the loop world -> B -> (virtual armature)
-> T -> world. With both frames' twists in world coordinates (see `twists`), the loop's velocity is

    Jf(Xf) Xf' = L q' + L_u Xu',     L = diag(R_B^T, R_B^T) (J_T - S(p_T - p_B) J_B),

where Jf holds the virtual joints' twists in B's coordinates at the tip. In the seed's notation
Jq = -L and Ju = -L_u, so a loop task's rows are A = Cf Jf^-1 L (its Cq is zero) and
B = -Cf Jf^-1 L_u; `LoopTask.evaluate` computes exactly that. A loop task says which frames are B
and T (`loop` gives Xf and Jf^-1 there), its selection Cf and its outputs (`outputs`).

A *coordinate task* drives coordinates directly: its rows of Cq hold ones (`coordinate_rows`),
Cf = 0. The scene adds Cq after the loop rows.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..twists import shift_twist

_IDENTITY6 = np.eye(6)


@dataclass(frozen=True)
class Endpoint:
    """A frame fixed to a segment of the model (`segment` >= 0) or to an external object such as
    an empty (`obj` >= 0, an index into the poses given to the solver), at a local `offset`."""

    segment: int = -1
    obj: int = -1
    offset: np.ndarray = field(default_factory=lambda: np.eye(4))

    def __post_init__(self):
        if (self.segment >= 0) == (self.obj >= 0):
            raise ValueError("an endpoint lies on exactly one segment or one object")


def on_segment(segment: int, point=(0.0, 0.0, 0.0)) -> Endpoint:
    """A frame on a segment, at `point` in the segment's frame, axes aligned with it."""
    offset = np.eye(4)
    offset[:3, 3] = point
    return Endpoint(segment=segment, offset=offset)


def on_object(obj: int, offset=None) -> Endpoint:
    return Endpoint(obj=obj, offset=np.eye(4) if offset is None else np.asarray(offset, float))


def relative_pose(base: np.ndarray, tip: np.ndarray):
    """Position and rotation of the tip frame in the base frame: R_B^T (p_T - p_B), R_B^T R_T."""
    Rb_t = base[..., :3, :3].swapaxes(-1, -2)
    p = np.einsum("...ij,...j->...i", Rb_t, tip[..., :3, 3] - base[..., :3, 3])
    return p, Rb_t @ tip[..., :3, :3]


def check_weight(name: str, label: str, value: float) -> None:
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"constraint '{name}': {label} {value} must be finite and >= 0")


@dataclass(frozen=True)
class Place:
    """Where a scene puts one task: its column in the error arrays, its output rows, the index of
    its first endpoint among the scene's endpoints, and its first column of per-frame values."""

    index: int
    rows: slice
    first_endpoint: int = -1
    first_value: int = -1


@dataclass
class TaskInputs:
    """What a scene hands its tasks at one evaluation: solver coordinates q (F, n_q), the frames of
    all endpoints (F, E, 4, 4) and their twist Jacobians (F, E, 6, n + n_u; None without
    Jacobians), where n is the model's coordinates; per-frame task values (F, V) or None."""

    q: np.ndarray
    frames: np.ndarray
    jacobians: np.ndarray | None
    values: np.ndarray | None
    n: int


@dataclass
class Stack:
    """The stacked system a scene's tasks fill: y, yd, task_weight (F, M); position_error and
    rotation_error (F, tasks), NaN where a task has no such part; A (F, M, n) and B (F, M, n_u),
    None where not asked for."""

    y: np.ndarray
    yd: np.ndarray
    task_weight: np.ndarray
    position_error: np.ndarray
    rotation_error: np.ndarray
    A: np.ndarray | None
    B: np.ndarray | None


class Task(ABC):
    """One task. Subclasses set `name`, `n_outputs`, `has_position`, `has_rotation` and implement
    `evaluate`; the rest has defaults."""

    name: str
    n_outputs: int
    has_position: bool
    has_rotation: bool
    soft: bool = False      # a preference (a joint value): never counts toward a frame's targets reached
    n_values: int = 0       # desired values per frame it takes from a solve's `values`

    def endpoints(self) -> tuple:
        """The frames whose poses (and twist Jacobians) it reads, in order."""
        return ()

    def coordinate_rows(self) -> tuple:
        """(output row, coordinate) pairs where Cq = 1, rows counted from the task's first."""
        return ()

    def coordinates(self) -> tuple:
        """The coordinates its rows depend on other than through its endpoints (whose chains up to
        their roots the scene adds): those of `coordinate_rows`, unless it fills A itself."""
        return tuple(coordinate for _, coordinate in self.coordinate_rows())

    def batch_key(self):
        """Tasks of one class with equal keys are evaluated by one `batch` of that class."""
        return self

    @classmethod
    def batch(cls, tasks, places) -> Callable[[TaskInputs, Stack], None]:
        """How a scene evaluates `tasks` (one class, equal batch keys) at `places`; built once per
        scene. By default, one task after another."""
        pairs = list(zip(tasks, places))

        def evaluate(inputs: TaskInputs, out: Stack) -> None:
            for task, place in pairs:
                task.evaluate(place, inputs, out)
        return evaluate

    @classmethod
    def one_frame_batch(cls, tasks, places) -> Callable[[TaskInputs, Stack], None]:
        """`batch` for inputs of one frame (F = 1, one_frame.py): the same results to rounding,
        in fewer numpy calls where a kind overrides it. By default, `batch`."""
        return cls.batch(tasks, places)

    def turn_start(self, model, q: np.ndarray, pose, frames: np.ndarray) -> np.ndarray:
        """The start coordinates q (F, n) of a solve as this task turns them before the solve
        iterates, from the model's pose at q (kinematics.Pose) and its endpoints' frames
        (F, E, 4, 4) there (as Pole does: Blender's Standard IK turns a chain toward its pole
        once before it iterates). By default, q itself."""
        return q

    @abstractmethod
    def evaluate(self, place: Place, inputs: TaskInputs, out: Stack) -> None:
        """Fill this task's rows of y, yd, task_weight, its errors, and its loop rows of A and B
        (where `out` has them). Cq is added by the scene from `coordinate_rows`."""

    def errors(self, frames):
        """(position error, rotation error, asks, per_length, per_turn), each (F,), of the task at
        its endpoints' frames given from outside (a list of (F, 4, 4) in `endpoints()` order, e.g.
        Blender's evaluation of a written pose); NaN where it has no such part, `asks` False where
        it asks nothing (weight 0, a singular pose). Frames known to within a length d and an angle
        r leave the rotation error known to within per_length d + per_turn r. Only tasks with
        endpoints can be measured this way."""
        raise NotImplementedError(f"{type(self).__name__} is not measured from frames")


class LoopTask(Task):
    """A task on a virtual armature between `base` and `tip` (see the module docstring).
    Subclasses set `base`, `tip`, `Cf` and implement `loop` and `outputs`."""

    base: Endpoint
    tip: Endpoint
    Cf: np.ndarray

    def endpoints(self) -> tuple:
        return (self.base, self.tip)

    @abstractmethod
    def loop(self, base: np.ndarray, tip: np.ndarray):
        """Xf (F, 6) and Jf^-1 (F, 6, 6) for base and tip frames (F, 4, 4)."""

    @abstractmethod
    def outputs(self, Xf: np.ndarray):
        """y, yd, per-row weight (F, n_outputs, or broadcastable), position and rotation errors (F,)."""

    def output_jacobian(self, Xf: np.ndarray):
        """dy / d(Cf Xf) (F, n_outputs, n_outputs) where the outputs are a nonlinear function of the
        selected features; None where y = Cf Xf."""
        return None

    def errors(self, frames):
        Xf, _ = self.loop(*frames)
        _, _, weight, position, rotation = self.outputs(Xf)
        asks = np.broadcast_to(weight, Xf.shape[:-1] + (self.n_outputs,)).max(axis=-1) > 0
        return position, rotation, asks, np.zeros(asks.shape), np.ones(asks.shape)

    @functools.cached_property
    def _selection(self):
        """Cf, or None where it selects all six features (Cf = I: its product is a copy)."""
        return None if np.array_equal(self.Cf, _IDENTITY6) else self.Cf

    def evaluate(self, place: Place, inputs: TaskInputs, out: Stack) -> None:
        e, rows, k = place.first_endpoint, place.rows, place.index
        Tb, Tt = inputs.frames[:, e], inputs.frames[:, e + 1]
        Xf, Jinv = self.loop(Tb, Tt)
        out.y[:, rows], out.yd[:, rows], out.task_weight[:, rows], out.position_error[:, k], \
            out.rotation_error[:, k] = self.outputs(Xf)
        if out.A is None:
            return
        Jb, Jt = inputs.jacobians[:, e], inputs.jacobians[:, e + 1]
        G = loop_gain(Tb, Jinv, self._selection)
        D = self.output_jacobian(Xf)
        if D is not None:
            G = D @ G
        L = Jt - shift_twist(Tt[:, :3, 3] - Tb[:, :3, 3], Jb)        # world-axis loop twist, Jq = -R L
        n = inputs.n
        out.A[:, rows] = G @ L[..., :n]
        if out.B is not None:
            out.B[:, rows] = -(G @ L[..., n:])


def loop_gain(Tb: np.ndarray, Jinv: np.ndarray, Cf) -> np.ndarray:
    """Cf Jf^-1 diag(R_B^T, R_B^T) (F, m, 6): what turns the loop's world twist into output rates
    (Cf None: all six features)."""
    Rb_t = Tb[:, :3, :3].swapaxes(-1, -2)
    to_base = np.zeros((Tb.shape[0], 6, 6))
    to_base[:, :3, :3] = Rb_t
    to_base[:, 3:, 3:] = Rb_t
    return (Jinv if Cf is None else Cf @ Jinv) @ to_base


def length(v: np.ndarray) -> np.ndarray:
    """Euclidean length along the last axis (what np.linalg.norm computes, in fewer calls)."""
    return np.sqrt((v * v).sum(axis=-1))

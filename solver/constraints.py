"""Constraints: what the solver drives, each in iTaSC form.

A constraint relates two frames, a *base* B and a *tip* T. Between them iTaSC places a virtual
armature of exactly six joints whose values are the feature coordinates Xf; it closes the loop
world -> B -> (virtual armature) -> T -> world. With both frames' twists written in world
coordinates ([linear velocity of the frame's origin; angular velocity]), the loop's velocity is

    Jf(Xf) Xf' = L q' + L_u Xu',     L = diag(R_B^T, R_B^T) (J_T - S(p_T - p_B) J_B)

where Jf holds the virtual joints' twists in B's coordinates at the tip and S(r) = [[I, -[r]x], [0, I]]
moves a twist's reference point by r. In the seed's notation Jq = -L and Ju = -L_u, so the outputs
y = Cq q + Cf Xf obey

    A q' = y' + B Xu',    A = Cq - Cf Jf^-1 Jq,    B = Cf Jf^-1 Ju.

Each constraint here says which frames are B and T, how to read Xf off the relative pose, its Jf,
the selection matrices, the desired outputs yd and the task weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .model import as_slice
from .rotations import axis_angle_matrix, log_map, rotvec_jacobian, rotvec_jacobian_inverse

_AXIS_INDEX = {"X": 0, "Y": 1, "Z": 2}
_IDENTITY3 = np.eye(3)


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


class CopyPose:
    """Bring the effector onto the target: Xf = (p, phi), the tip's position and rotation vector
    in the base frame, through three translations and a spherical rotation:

        Jf = diag(I, J(phi)),   Jf^-1 = diag(I, J(phi)^-1).

    `position` / `rotation` pick the controlled axes (X, Y, Z each), `reference` the frame they
    are measured in: 'effector' (B = effector, T = target) or 'target' (B = target, T = effector).
    A task on all three position axes and no rotation measures the world vector between the points.
    Desired output yd = 0. Task weights: `weight` on position rows, `orient_weight` on rotation rows.
    """

    def __init__(self, effector: Endpoint, target: Endpoint, position=(True, True, True),
                 rotation=(False, False, False), reference: str = "effector", weight: float = 1.0,
                 orient_weight: float = 1.0, name: str = "copy_pose"):
        if reference not in ("effector", "target"):
            raise ValueError(f"constraint '{name}': reference must be 'effector' or 'target'")
        for label, w in (("weight", weight), ("orient_weight", orient_weight)):
            if not (np.isfinite(w) and w >= 0):
                raise ValueError(f"constraint '{name}': {label} {w} must be finite and >= 0")
        self.name = name
        self.effector, self.target = effector, target
        self.selected = np.flatnonzero(np.concatenate([np.asarray(position, bool), np.asarray(rotation, bool)]))
        # A task on all three position axes and no rotation only relates two points: its frames are
        # taken world-aligned at those points (twists without angular part), so that neither end's
        # turning enters the Jacobian; y is then the world vector from one point to the other.
        self.points_only = list(self.selected) == [0, 1, 2]
        self.reference = reference
        self.base, self.tip = (effector, target) if reference == "effector" else (target, effector)
        if self.selected.size == 0:
            raise ValueError(f"constraint '{name}': no axis is controlled")
        self.Cf = np.eye(6)[self.selected]
        self.task_weight = np.where(self.selected < 3, weight, orient_weight)
        # As slices where contiguous (all of them, as usual): views instead of copies.
        self._selected_index = as_slice(self.selected)
        self._position_outputs = as_slice(np.flatnonzero(self.selected < 3))
        self._rotation_outputs = as_slice(np.flatnonzero(self.selected >= 3))
        self.has_position = bool(np.any(self.selected < 3))
        self.has_rotation = bool(np.any(self.selected >= 3))

    @property
    def n_outputs(self) -> int:
        return self.selected.size

    def features(self, base: np.ndarray, tip: np.ndarray) -> np.ndarray:
        if self.points_only:  # world-aligned frames at the two points: no relative rotation
            return np.concatenate([tip[..., :3, 3] - base[..., :3, 3], np.zeros(base.shape[:-2] + (3,))], axis=-1)
        p, R = relative_pose(base, tip)
        return np.concatenate([p, log_map(R)], axis=-1)

    def feature_jacobian(self, base: np.ndarray, tip: np.ndarray) -> np.ndarray:
        phi = self.features(base, tip)[..., 3:]
        Jf = np.zeros(phi.shape[:-1] + (6, 6))
        Jf[..., :3, :3] = np.eye(3)
        Jf[..., 3:, 3:] = rotvec_jacobian(phi)
        return Jf

    def loop(self, base: np.ndarray, tip: np.ndarray):
        """Xf and Jf^-1 for the solver, in one pass."""
        Xf = self.features(base, tip)
        Jinv = np.zeros(Xf.shape[:-1] + (6, 6))
        Jinv[..., :3, :3] = _IDENTITY3
        Jinv[..., 3:, 3:] = rotvec_jacobian_inverse(Xf[..., 3:])
        return Xf, Jinv

    def outputs(self, Xf: np.ndarray):
        """y, yd, per-row weight (frames x outputs), and the position / rotation errors."""
        y = Xf[..., self._selected_index]
        position_error = _length(y[..., self._position_outputs]) if self.has_position else np.full(y.shape[:-1], np.nan)
        rotation_error = _length(y[..., self._rotation_outputs]) if self.has_rotation else np.full(y.shape[:-1], np.nan)
        return y, 0.0, self.task_weight, position_error, rotation_error     # yd and weight broadcast


def _length(v: np.ndarray) -> np.ndarray:
    """Euclidean length along the last axis (what np.linalg.norm computes, in fewer calls)."""
    return np.sqrt((v * v).sum(axis=-1))


class Distance:
    """Keep the effector at a distance from the target: inside, outside, or on the surface of a
    sphere of `radius` around it. The virtual armature is RotZ, RotX, TransY, RotZ, RotY, RotX
    from the effector, so Xf[2] is the distance d itself; y = d, Cf = [0 0 1 0 0 0].

    The armature starts from a reference rotation R0 chosen afresh at each evaluation so that the
    first two angles are zero (R0's Y axis points at the target) and the middle angle of the last
    three is zero (a spin of R0 about that Y axis), far from both gimbal singularities; Jf is then
    invertible whenever d > 0. For 'inside' / 'outside' the task is active only while violated.
    """

    MODES = ("inside", "outside", "surface")

    def __init__(self, effector: Endpoint, target: Endpoint, radius: float, mode: str = "surface",
                 weight: float = 1.0, name: str = "distance"):
        if mode not in self.MODES:
            raise ValueError(f"constraint '{name}': mode must be one of {self.MODES}")
        if not (np.isfinite(radius) and radius >= 0):
            raise ValueError(f"constraint '{name}': radius {radius} must be finite and >= 0")
        if not (np.isfinite(weight) and weight >= 0):
            raise ValueError(f"constraint '{name}': weight {weight} must be finite and >= 0")
        self.name = name
        self.effector, self.target = effector, target
        self.base, self.tip = effector, target
        self.radius, self.mode, self.weight = float(radius), mode, float(weight)
        self.Cf = np.eye(6)[[2]]
        self.has_position, self.has_rotation = True, False
        self.points_only = False

    n_outputs = 1

    def features(self, base: np.ndarray, tip: np.ndarray) -> np.ndarray:
        return self._armature(base, tip)[0]

    def feature_jacobian(self, base: np.ndarray, tip: np.ndarray) -> np.ndarray:
        return self._jacobian(*self._armature(base, tip))

    def loop(self, base: np.ndarray, tip: np.ndarray):
        """Xf and Jf^-1 for the solver, in one pass."""
        Xf, R0 = self._armature(base, tip)
        return Xf, np.linalg.inv(self._jacobian(Xf, R0))

    @staticmethod
    def _armature(base: np.ndarray, tip: np.ndarray):
        """Xf and the reference rotation R0 the virtual armature starts from."""
        p, R = relative_pose(base, tip)
        d = np.linalg.norm(p, axis=-1)
        # R0: Y axis along p (the base's own Y axis when d vanishes), then spun to zero the middle angle.
        y_axis = np.where(d[..., None] > 1e-12, p / np.maximum(d, 1e-300)[..., None], [0.0, 1.0, 0.0])
        helper = np.where(np.abs(y_axis[..., :1]) < 0.9, [1.0, 0.0, 0.0], [0.0, 0.0, 1.0])
        z_axis = np.cross(helper, y_axis)
        z_axis /= np.linalg.norm(z_axis, axis=-1, keepdims=True)
        R0 = np.stack([np.cross(y_axis, z_axis), y_axis, z_axis], axis=-1)
        M = np.swapaxes(R0, -1, -2) @ R
        spin = np.arctan2(-M[..., 2, 0], M[..., 0, 0])
        Rspin = axis_angle_matrix(np.array([0.0, 1.0, 0.0]), spin)
        R0 = R0 @ Rspin
        M = np.swapaxes(Rspin, -1, -2) @ M
        c = np.arctan2(M[..., 1, 0], M[..., 0, 0])
        f = np.arctan2(M[..., 2, 1], M[..., 2, 2])
        zero = np.zeros_like(d)
        return np.stack([zero, zero, d, c, zero, f], axis=-1), R0

    @staticmethod
    def _jacobian(Xf: np.ndarray, R0: np.ndarray) -> np.ndarray:
        """Twists of the six virtual joints in the base frame, taken at the tip point."""
        d = np.maximum(Xf[..., 2], 1e-9)
        x0, y0, z0 = R0[..., :, 0], R0[..., :, 1], R0[..., :, 2]
        tip = y0 * d[..., None]
        Rc = R0 @ axis_angle_matrix(np.array([0.0, 0.0, 1.0]), Xf[..., 3])
        zero = np.zeros_like(x0)
        columns = [
            np.concatenate([np.cross(z0, tip), z0], axis=-1),   # RotZ at the base
            np.concatenate([np.cross(x0, tip), x0], axis=-1),   # RotX at the base
            np.concatenate([y0, zero], axis=-1),                # TransY: the distance
            np.concatenate([zero, z0], axis=-1),                # RotZ at the tip
            np.concatenate([zero, Rc[..., :, 1]], axis=-1),     # RotY at the tip
            np.concatenate([zero, Rc[..., :, 0]], axis=-1),     # RotX at the tip (middle angle 0)
        ]
        return np.stack(columns, axis=-1)

    def outputs(self, Xf: np.ndarray):
        d = Xf[..., 2:3]
        if self.mode == "inside":
            active = d > self.radius
        elif self.mode == "outside":
            active = d < self.radius
        else:
            active = np.ones_like(d, dtype=bool)
        yd = np.full_like(d, self.radius)
        weight = np.where(active, self.weight, 0.0)
        position_error = np.where(active[..., 0], np.abs(d - yd)[..., 0], 0.0)
        return d, yd, weight, position_error, np.full(d.shape[:-1], np.nan)


class JointValue:
    """Hold one coordinate near a value: y = q_c, Cq = e_c, no virtual armature (Cf = 0).
    OpenSim's coordinate task and Blender's IK rotation control are this task."""

    def __init__(self, coordinate: int, value: float = 0.0, weight: float = 1.0, rotational: bool = True,
                 name: str = "joint_value"):
        if not (np.isfinite(value) and np.isfinite(weight) and weight >= 0):
            raise ValueError(f"constraint '{name}': value {value} and weight {weight} must be finite, weight >= 0")
        self.name = name
        self.coordinate, self.value, self.weight = int(coordinate), float(value), float(weight)
        self.has_position, self.has_rotation = not rotational, rotational

    n_outputs = 1

"""Joint kinds: what one joint of a given kind does, one small object per kind.

A joint with coordinates q (d of them) moves its segment, in the frame B just before it, by the
rest-relative transform M(q) = [R(q) t(q); 0 1]. Its velocity columns say how, per coordinate c,
in that frame B:

    a rotation coordinate     dR/dq_c = [w_c]x R     (angular velocity direction w_c)
    a translation coordinate  dt/dq_c = u_c          (linear velocity direction u_c)

A kind's coordinates are all rotations about B's origin (t = 0; forward kinematics takes that
origin as their pivot) or all translations (R = I).

The kinds:

    revolute(a)   R = exp(q [a]x) = I + sin q [a]x + (1 - cos q) [a]x^2,  w = a
                  (one product of (sin q, 1 - cos q, 1) with the constants ([a]x, [a]x^2, I);
                  `fold` folds fixed transforms on either side into them)
    prismatic(a)  t = q a,  u = a
    swing         phi = (q_0, 0, q_1),  R = exp([phi]x),  w_0 = J(phi) e_x,  w_1 = J(phi) e_z
    sphere        phi = q,  R = exp([phi]x),  w_c = J(phi) e_c

with J(phi) the Jacobian of the rotation vector (rotations.exp_map_with_jacobian). Each kind also
inverts itself: `from_rotation(R, axis)` gives the coordinates whose rotation is nearest R in the
swing-twist sense (revolute: the twist of R about its axis; swing: the swing that turns +Y onto
R's Y axis, dropping the twist about Y; sphere: log(R)), and `from_transform(M, axis)` the
coordinates that make M (prismatic: the translation along the axis). For M made by the kind
itself, within |angle| < pi, both return the coordinates that made it.

Forward kinematics works on groups: `group_joints` sorts a model's joints by kind once, and per
group the kind's `prepare` computes whatever does not depend on q (for revolute joints [a]x and
its square), so that `motion` makes all of a group's transforms and columns in a few batched
numpy calls, for one frame as for ten thousand (kinematics.py is the one place that composes them
into frames). A new kind is one class here and one entry in KINDS (tests/engine/test_joints.py then runs
it through forward kinematics against finite differences and its inverse round trip).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .rotations import exp_map, exp_map_with_jacobian, in_place, log_map, skew

_EYE3 = np.eye(3)


class JointKind:
    """The interface every kind implements (see the module docstring). Arrays: q (F, G, d) for
    G joints of this kind, axes (G, 3) unit vectors (unused by kinds without an axis). `motion`
    takes any leading axes before (G, d), none at all for one frame."""

    name: str = ""
    n_coordinates: int = 0
    rotational: bool = True        # its coordinates are angles (False: lengths)
    has_axis: bool = False         # built with an axis (revolute, prismatic)

    def labels(self, axis_name: str) -> tuple:
        """One label per coordinate; `axis_name` names the joint's axis ('x', 'y', 'z' or the joint)."""
        raise NotImplementedError

    def prepare(self, axes: np.ndarray):
        """What `motion` needs that does not depend on q, computed once per model and group."""
        return axes

    def fixed_columns(self, axes: np.ndarray) -> np.ndarray | None:
        """The velocity columns (G, d, 3) when they do not depend on q, else None."""
        return None

    def motion(self, q: np.ndarray, prepared):
        """(R (F, G, 3, 3) or None for I, t (F, G, 3) or None for 0, columns (F, G, d, 3) or None
        for the fixed ones)."""
        raise NotImplementedError

    def from_rotation(self, R: np.ndarray, axis=None) -> np.ndarray:
        """Coordinates (..., d) whose rotation is nearest R (..., 3, 3)."""
        raise NotImplementedError

    # Built on the above: the batched transform and columns, and the inverse of a transform.

    def transform(self, q: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
        """M(q) (F, G, 4, 4) for q (F, G, d)."""
        q = np.asarray(q, dtype=float)
        R, t, _ = self.motion(q, self.prepare(_axes(axes, q)))
        M = np.zeros(q.shape[:2] + (4, 4))
        M[..., :3, :3] = _EYE3 if R is None else R
        if t is not None:
            M[..., :3, 3] = t
        M[..., 3, 3] = 1.0
        return M

    def columns(self, q: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
        """The velocity columns (F, G, d, 3) at q (F, G, d), in the frame before the joint."""
        q = np.asarray(q, dtype=float)
        axes = _axes(axes, q)
        columns = self.motion(q, self.prepare(axes))[2]
        return np.broadcast_to(self.fixed_columns(axes), q.shape + (3,)) if columns is None else columns

    def from_transform(self, M: np.ndarray, axis=None) -> np.ndarray:
        """Coordinates (..., d) of the transform M (..., 4, 4) (its rotation for rotation kinds)."""
        return self.from_rotation(np.asarray(M, dtype=float)[..., :3, :3], axis)


@functools.lru_cache(maxsize=16)
def _ones(shape: tuple) -> np.ndarray:
    """Ones of `shape`, to copy (one numpy call where filling a new array would take two)."""
    return np.ones(shape)


def _axes(axes, q):
    return np.zeros((q.shape[1], 3)) if axes is None else np.asarray(axes, dtype=float).reshape(-1, 3)


class Revolute(JointKind):
    name, n_coordinates, rotational, has_axis = "revolute", 1, True, True

    def labels(self, axis_name):
        return (f"rot_{axis_name}",)

    def prepare(self, axes):
        """([a]x, [a]x^2, I) flattened, (..., 3, 9) for axes (..., 3)."""
        k = skew(axes)
        basis = np.empty(axes.shape[:-1] + (3, 9))
        basis[..., 0, :] = k.reshape(axes.shape[:-1] + (9,))
        basis[..., 1, :] = (k @ k).reshape(axes.shape[:-1] + (9,))
        basis[..., 2, :] = _EYE3.ravel()
        return basis

    def fixed_columns(self, axes):
        return axes[:, None, :]

    def fold(self, axes, before, after):
        """The constants (G, 3, 16) of the transforms before_g M(q) after_g (G, 4, 4) of joints with
        fixed transforms on either side, M(q) = [R(q) 0; 0 1]: flattened, they are the product of
        (sin q, 1 - cos q, 1) (`coefficients`) with these, as R(q) is with `prepare`'s; a chain of
        such joints then takes one product per joint."""
        basis = np.zeros((len(axes), 3, 4, 4))
        basis[:, :, :3, :3] = self.prepare(axes).reshape(-1, 3, 3, 3)
        basis[:, 2, 3, 3] = 1.0
        return (before[:, None] @ basis @ after[:, None]).reshape(-1, 3, 16)

    @staticmethod
    def coefficients(angle, out):
        """(sin q, 1 - cos q) of angles q (...) written into out[..., 0] and out[..., 1] (out
        (..., 3), its last entry the constant 1, left as it is); returns out."""
        in_place(np.sin, out[..., 0], angle)
        cos = in_place(np.cos, out[..., 1], angle)
        np.subtract(1.0, cos, out=cos)
        return out

    def motion(self, q, prepared):
        shape = q.shape[:-1]
        coefficients = _ones(shape + (1, 3)).copy()                # (sin q, 1 - cos q, 1) per joint
        self.coefficients(q[..., 0], coefficients[..., 0, :])
        return (coefficients @ prepared).reshape(shape + (3, 3)), None, None

    def from_rotation(self, R, axis=None):
        """The twist of R about `axis`: 2 atan2(v . a, w) for R's unit quaternion (w, v)."""
        phi = log_map(R)
        t = np.linalg.norm(phi, axis=-1)
        w = np.cos(0.5 * t)
        s = np.where(t > 1e-12, np.sin(0.5 * t) / np.maximum(t, 1e-300), 0.5)
        v = s[..., None] * phi
        return (2.0 * np.arctan2(v @ np.asarray(axis, float), w))[..., None]


class Prismatic(JointKind):
    name, n_coordinates, rotational, has_axis = "prismatic", 1, False, True

    def labels(self, axis_name):
        return (f"loc_{axis_name}",)

    def fixed_columns(self, axes):
        return axes[:, None, :]

    def motion(self, q, prepared):
        return None, prepared * q, None

    def from_rotation(self, R, axis=None):
        """A translation turns nothing: every value is as near; the rest value 0."""
        return np.zeros(np.shape(R)[:-2] + (1,))

    def from_transform(self, M, axis=None):
        """The translation along the axis, a . t."""
        return (np.asarray(M, dtype=float)[..., :3, 3] @ np.asarray(axis, float))[..., None]


class Swing(JointKind):
    name, n_coordinates = "swing", 2

    def labels(self, axis_name):
        return ("swing_x", "swing_z")

    def motion(self, q, prepared):
        phi = np.zeros(q.shape[:-1] + (3,))
        phi[..., ::2] = q
        R, J = exp_map_with_jacobian(phi)
        return R, None, J[..., ::2].swapaxes(-1, -2)                # columns J e_x, J e_z

    def from_rotation(self, R, axis=None):
        """(phi_x, phi_z) of the swing that turns +Y onto R's Y axis y: the angle arccos(y_y)
        about the unit vector along +Y x y = (y_z, 0, -y_x) (R = Swing @ RotY(twist))."""
        y = np.asarray(R, dtype=float)[..., :, 1]
        angle = np.arccos(np.clip(y[..., 1], -1.0, 1.0))
        normal = np.stack([y[..., 2], np.zeros_like(angle), -y[..., 0]], axis=-1)
        norm = np.linalg.norm(normal, axis=-1)
        scale = np.where(norm > 1e-12, angle / np.maximum(norm, 1e-300), 0.0)
        return np.stack([normal[..., 0] * scale, normal[..., 2] * scale], axis=-1)

    def rotation(self, q):
        """The swing's rotation exp([phi]x), phi = (q_0, 0, q_1), for q (..., 2)."""
        q = np.asarray(q, dtype=float)
        return exp_map(np.stack([q[..., 0], np.zeros(q.shape[:-1]), q[..., 1]], axis=-1))


class Sphere(JointKind):
    name, n_coordinates = "sphere", 3

    def labels(self, axis_name):
        return ("sphere_x", "sphere_y", "sphere_z")

    def motion(self, q, prepared):
        R, J = exp_map_with_jacobian(q)
        return R, None, J.swapaxes(-1, -2)          # rows of J^T: the columns J e_c

    def from_rotation(self, R, axis=None):
        return log_map(R)


REVOLUTE, PRISMATIC, SWING, SPHERE = Revolute(), Prismatic(), Swing(), Sphere()
KINDS = {kind.name: kind for kind in (REVOLUTE, PRISMATIC, SWING, SPHERE)}


@dataclass(frozen=True)
class JointGroup:
    """The joints of one kind in a model: `joints` their indices (a slice where contiguous),
    `coordinates` their coordinates in joint order (G * d, a slice where contiguous),
    `prepared` the kind's q-independent constants."""

    kind: JointKind
    joints: slice | np.ndarray
    coordinates: slice | np.ndarray
    prepared: object


def group_joints(kinds, axes: np.ndarray, first: np.ndarray):
    """Joint groups by kind, in KINDS order, for joints of `kinds` (names), `axes` (G, 3) and
    first coordinates `first` (G,); and the fixed velocity columns (n, 3) of all coordinates
    (zero where they depend on q)."""
    n = sum(KINDS[k].n_coordinates for k in kinds)
    fixed = np.zeros((n, 3))
    groups = []
    for kind in KINDS.values():
        index = np.array([g for g, k in enumerate(kinds) if k == kind.name], dtype=int)
        if not index.size:
            continue
        d = kind.n_coordinates
        coordinates = (first[index][:, None] + np.arange(d)).ravel()
        columns = kind.fixed_columns(axes[index])
        if columns is not None:
            fixed[coordinates] = columns.reshape(-1, 3)
        groups.append(JointGroup(kind, as_slice(index), as_slice(coordinates), kind.prepare(axes[index])))
    return groups, fixed


def as_slice(index: np.ndarray):
    """A run of consecutive indices as a slice; any other index array as it is."""
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0]) + index.size)
    return index

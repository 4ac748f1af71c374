"""The root body placed on its markers: a start pose for marker IK frames solved from scratch.

A frame solved from the model's default pose must turn the whole model onto the markers; where
the root (the pelvis) is far from its default orientation, near its Euler angles' gimbal lock
(pelvis_tilt +-90 degrees), that turn can go the wrong way round and the legs settle in another
local minimum. The root's own markers say where it is:

1. Rigid fit. With l_m the root's markers in its segment frame and x_m the measured ones
   (weights w_m, 0 where missing), the world frame W = [R t] of the segment minimises
   sum_m w_m |x_m - (R l_m + t)|^2: with centroids l0, x0 and H = sum_m w_m (l_m - l0)(x_m - x0)^T
   = U S V^T, R = V diag(1, 1, det(V U^T)) U^T and t = x0 - R l0 (Kabsch). Frames with fewer than
   three root markers, or with them on a line, get no seed.

2. The root joint's coordinates. The root hangs from the ground at `rest` by three translations
   along orthonormal axes then three rotations about signed coordinate axes s_k e_(i_k) (distinct
   i_k), each theta_k = a_k q_k + b_k of its own coordinate (a CustomJoint or FreeJoint pelvis):
   M = rest^-1 W = [R_1 R_2 R_3  p], so theta_t = t_k . p for the translations and, with
   R_1 R_2 R_3 = R_i(alpha) R_j(beta) R_k(gamma) (body-fixed Tait-Bryan angles, e = +1 when
   (i, j, k) is a cyclic order of (x, y, z), else -1),

       sin beta = e M_ik,   alpha = atan2(-e M_jk, M_kk),   gamma = atan2(-e M_ij, M_ii),

   and the flip (alpha + pi, pi - beta, gamma + pi) is the same rotation: both are candidates,
   theta_k = s_k times its angle, each angle moved by whole turns to within half a turn of the
   coordinate's start value. Which of the two the seed takes is for the objective to say
   (MarkerIK: the lower; at equal cost, as a flip costs nothing to the markers, the one nearer
   the start).

`RootSeed.of(scene, om)` is None where the model's root joint is not of that form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..geometry import kabsch
from ..model import PRISMATIC, REVOLUTE

MIN_MARKERS = 3
LINE = 1e-6                           # relative: a second singular value below this is a line


def _axis_index(axis) -> tuple:
    """(i, sign) of a unit coordinate axis +-e_i, or None."""
    axis = np.asarray(axis, dtype=float)
    i = int(np.argmax(np.abs(axis)))
    if abs(abs(axis[i]) - 1.0) > 1e-12 or np.abs(np.delete(axis, i)).max() > 1e-12:
        return None
    return i, float(np.sign(axis[i]))


def rigid_fit(local, measured, weights):
    """(R (F, 3, 3), t (F, 3), ok (F,)) of the weighted rigid fit (module docstring, step 1);
    `local` (M, 3), `measured` (F, M, 3) with NaN where missing, `weights` (F, M)."""
    present = np.all(np.isfinite(measured), axis=-1) & (weights > 0)
    w = np.where(present, weights, 0.0)
    x = np.where(present[..., None], measured, 0.0)
    total = w.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)
    l0 = (w @ local) / safe[:, None]                                             # (F, 3)
    x0 = np.einsum("fm,fmk->fk", w, x) / safe[:, None]
    dl = local[None] - l0[:, None]                                               # (F, M, 3)
    dx = x - x0[:, None]
    H = np.einsum("fm,fmi,fmj->fij", w, dl, dx)
    R, _, _ = kabsch(np.swapaxes(H, 1, 2))
    t = x0 - np.einsum("fij,fj->fi", R, l0)
    spread = np.linalg.svd(np.where(present[..., None], dl, 0.0), compute_uv=False)      # (F, 3)
    ok = (present.sum(axis=1) >= MIN_MARKERS) & (spread[:, 1] > LINE * np.maximum(spread[:, 0], 1e-300))
    return R, t, ok


def tait_bryan(M, order) -> tuple:
    """Both angle triples (F, 3) of R_i(alpha) R_j(beta) R_k(gamma) = M[:, :3, :3], `order` (i, j, k)."""
    i, j, k = order
    e = 1.0 if (i, j, k) in ((0, 1, 2), (1, 2, 0), (2, 0, 1)) else -1.0
    # Each entry's frames contiguous: numpy on AVX-512 takes arctan2 from SVML or from libm (a few
    # roundings apart) by an overlap check that a strided operand can fail as the heap happens to
    # lie (rotations.in_place); contiguous operands always pass it.
    entry = np.ascontiguousarray(np.moveaxis(M[:, :3, :3], 0, -1))                 # (3, 3, F)
    beta = np.arcsin(np.clip(e * entry[i, k], -1.0, 1.0))
    alpha = np.arctan2(-e * entry[j, k], entry[k, k])
    gamma = np.arctan2(-e * entry[i, j], entry[i, i])
    first = np.stack([alpha, beta, gamma], axis=1)
    return first, np.stack([alpha + np.pi, np.pi - beta, gamma + np.pi], axis=1)


@dataclass
class RootSeed:
    """The root joint of a marker scene's model in the form the module docstring needs."""

    segment: int
    rest_inverse: np.ndarray            # (4, 4)
    slide_axes: np.ndarray              # (3, 3) rows t_k
    turn_order: tuple                   # (i, j, k)
    turn_signs: np.ndarray              # (3,)
    slide_coordinates: np.ndarray       # (3,) coordinate indices
    turn_coordinates: np.ndarray
    slide_affine: np.ndarray            # (3, 2) (a, b): theta = a q + b
    turn_affine: np.ndarray

    @classmethod
    def of(cls, model, coupling, frozen) -> "RootSeed | None":
        roots = [s for s, seg in enumerate(model.segments) if seg.parent >= 0
                 and model.segments[seg.parent].parent < 0 and model.segments[seg.parent].joints == ()]
        if len(roots) != 1 or model.segments[roots[0]].post is not None:
            return None
        s = roots[0]
        first = model.joint_first[model.joint_segment == s]
        joints = model.segments[s].joints
        kinds = [j.kind for j in joints]
        if kinds != [PRISMATIC] * 3 + [REVOLUTE] * 3:
            return None
        coords = np.asarray(coupling.dof_coordinate)[first]
        if np.any(coords < 0) or len(set(coords.tolist())) != 6 or np.any(np.asarray(frozen)[coords]):
            return None
        if np.any(np.asarray(coupling.dof_second)[first] >= 0):
            return None
        affine = [coupling.dof_function[k].affine for k in first]
        if any(a is None or a[0] == 0 for a in affine):
            return None
        slides = np.array([model.joint_axis[k] for k in first[:3]], dtype=float)
        if np.abs(slides @ slides.T - np.eye(3)).max() > 1e-9:
            return None
        turns = [_axis_index(model.joint_axis[k]) for k in first[3:]]
        if any(t is None for t in turns) or len({t[0] for t in turns}) != 3:
            return None
        rest = np.asarray(model.segments[s].rest, dtype=float)
        return cls(s, np.linalg.inv(rest), slides, tuple(t[0] for t in turns), np.array([t[1] for t in turns]),
                   coords[:3], coords[3:], np.array(affine[:3], dtype=float), np.array(affine[3:], dtype=float))

    def seeds(self, local, measured, weights, start) -> tuple:
        """(two candidate starts (2, F, n), ok (F,)): `start` (F, n) with the root's coordinates
        from the rigid fit of its markers (`local` (M, 3) in its segment frame, `measured`
        (F, M, 3), `weights` (F, M)), one per Euler branch; ok False where there is no fit."""
        R, t, ok = rigid_fit(local, measured, weights)
        W = np.broadcast_to(np.eye(4), R.shape[:1] + (4, 4)).copy()
        W[:, :3, :3], W[:, :3, 3] = R, t
        M = self.rest_inverse @ W
        slide = M[:, :3, 3] @ self.slide_axes.T                                 # (F, 3) theta
        out = np.broadcast_to(start, (2,) + start.shape).copy()
        for b, angles in enumerate(tait_bryan(M, self.turn_order)):
            theta = angles * self.turn_signs
            q_turn = (theta - self.turn_affine[:, 1]) / self.turn_affine[:, 0]
            turn = 2 * np.pi / np.abs(self.turn_affine[:, 0])
            here = start[:, self.turn_coordinates]
            q_turn = q_turn - turn * np.round((q_turn - here) / turn)
            out[b][:, self.turn_coordinates] = np.where(ok[:, None], q_turn, here)
            q_slide = (slide - self.slide_affine[:, 1]) / self.slide_affine[:, 0]
            out[b][:, self.slide_coordinates] = np.where(ok[:, None], q_slide, start[:, self.slide_coordinates])
        return out, ok

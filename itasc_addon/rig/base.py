"""What every part of the rig side shares: the rig read (`Rig`, its constraints and targets), the
error it raises, the armature's IK constraints, and matrix helpers."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ... import solver


class RigError(ValueError):
    """The rig cannot be solved as it is; the message says what to change."""


@dataclass
class Target:
    """Where a constraint's target comes from: an object, or a bone of an armature object."""

    object: str
    bone: str = ""

    @property
    def label(self):
        return f"{self.object}:{self.bone}" if self.bone else self.object


@dataclass
class Driven:
    """One Blender IK constraint as the solver drives it."""

    bone: str            # the bone that owns the constraint
    name: str            # the constraint's name
    kind: str            # 'COPY_POSE' or 'DISTANCE'
    tip: str             # the chain's last bone (the owner, or its parent without Use Tail)
    target: int          # index into Rig.targets
    influence: float
    pole: Target | None = None     # the pole target, read per frame (Samples.poles) for the pole task
    pole_angle: float = 0.0


@dataclass
class Rig:
    """An armature read for solving: the engine scene plus how to map it back onto pose bones."""

    object: str
    scene: solver.Scene
    bones: list                     # segment order: bone names
    groups: list                    # per engine armature: (root bone, parent bone outside or None)
    driven: list                    # Driven, one per engine constraint (same order)
    targets: list                   # Target per engine object
    stretch_coordinate: dict        # bone -> coordinate index of its stretch
    scale: float                    # the armature object's uniform scale
    warnings: list = field(default_factory=list)
    pose_index: dict = field(default_factory=dict)   # pose bone name -> its index in obj.pose.bones
    scale_parents: np.ndarray | None = None          # per bone, the bone whose scale it inherits (-1: none)
    scaled: list = field(default_factory=list)       # bones whose scale channels we write (chain_bones)
    pole_of: list = field(default_factory=list)      # per pole task (after the driven ones), its driven constraint

    @property
    def model(self):
        return self.scene.model

    @property
    def constraint_names(self):
        return [f"{d.bone}/{d.name}" for d in self.driven]

    @functools.cached_property
    def pose_rows(self):
        """Each model bone's index in obj.pose.bones (-1: not there), worked out once: live preview
        writes the pose every frame."""
        return np.array([self.pose_index.get(name, -1) for name in self.bones], dtype=int)

    @functools.cached_property
    def bone_groups(self):
        """Per model bone, the index of the chain group (engine armature) it is on."""
        roots = [root for root, _ in self.groups]
        out = []
        for s in range(len(self.bones)):
            while self.model.parent[s] >= 0:
                s = self.model.parent[s]
            out.append(roots.index(self.model.names[s]))
        return np.array(out, dtype=int)

    @functools.cached_property
    def constraint_groups(self):
        """Per driven constraint, the index of the chain group (engine armature) its effector is on."""
        return np.array([self.bone_groups[self.model.index(d.tip)] for d in self.driven], dtype=int)

    @functools.cached_property
    def scaled_rows(self):
        """Per model bone, whether we write its scale (`scaled`)."""
        scaled = set(self.scaled)
        return np.array([name in scaled for name in self.bones], dtype=bool)


def ik_constraints(obj):
    """(pose bone, constraint) for every IK constraint of the armature object, in bone order."""
    import bpy

    if obj is None or obj.pose is None:       # a new armature has no pose until evaluated
        return []
    # (An IK constraint is told by its Python type rather than its `type` enum, which costs a
    # string per constraint: live preview reads this every frame.)
    ik = bpy.types.KinematicConstraint
    return [(pb, con) for pb in obj.pose.bones for con in pb.constraints if isinstance(con, ik)]


def uniform_scales(matrix_world):
    """For world matrices (..., 4, 4): the mean axis scale, whether the matrix is unusable
    (non-finite or an axis of (near) zero length), and whether its scale is not uniform."""
    M = np.asarray(matrix_world, float)
    s = column_lengths(M[..., :3, :3])
    shortest, longest = s.min(axis=-1), s.max(axis=-1)
    degenerate = ~(np.isfinite(M).all(axis=(-2, -1)) & (shortest >= 1e-12))
    return s.sum(axis=-1) / 3.0, degenerate, longest - shortest > 1e-5 * longest      # the mean, without np.mean's overhead


def column_lengths(M):
    """The lengths of the columns of matrices (..., 3, 3), as (..., 3)."""
    return np.sqrt((M * M).sum(axis=-2))


def object_scale(matrix_world, what):
    """The uniform scale of a world matrix; a non-uniform (or degenerate) one is an error."""
    scale, degenerate, uneven = uniform_scales(matrix_world)
    if degenerate:
        raise RigError(f"{what} has a degenerate or non-finite transform")
    if uneven:
        s = np.linalg.norm(np.asarray(matrix_world, float)[:3, :3], axis=0)
        raise RigError(f"{what} has a non-uniform scale {tuple(round(float(v), 6) for v in s)}; "
                       "apply the scale (Ctrl A) or make it uniform")
    return float(scale)


def evaluated_world(obj):
    """The object's world matrix as the depsgraph has it now (after any pending edits)."""
    import bpy

    return np.array(obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world, float)


def orthonormalize(M):
    """Matrices (..., 4, 4) with their 3x3 part replaced by the nearest rotation (polar factor)."""
    M = np.array(M, dtype=float)
    U, _, Vt = np.linalg.svd(M[..., :3, :3])
    R = U @ Vt
    flip = np.linalg.det(R) < 0
    if flip.any():
        U[flip, :, -1] *= -1
        R = U @ Vt
    M[..., :3, :3] = R
    M[..., 3, :] = (0.0, 0.0, 0.0, 1.0)
    return M


def offset_matrix(bone):
    """A bone's rest relative to its parent's (4x4), as Blender's pose evaluation composes it: its
    own rest rotation (``Bone.matrix``, float32 as stored) at its head, the parent's tail being
    (0, parent length, 0); a bone without a parent: at its head in armature space."""
    out = np.eye(4)
    out[:3, :3] = np.array(bone.matrix, float)
    out[:3, 3] = (np.array(bone.head, float) + (0.0, bone.parent.length, 0.0) if bone.parent is not None
                  else np.array(bone.head_local, float))
    return out


def rest_matrix(obj, name):
    """A bone's rest frame in armature space (4x4, float64). A bone without a parent: its offset
    (`offset_matrix`), exactly what Blender poses it from. A bone with parents: the product of the
    offsets from the hierarchy's root down to it, made a rotation (polar factor): a chain hanging
    from such a bone gets its base from Blender's pose of the parent at every frame, and this frame
    is only its reference. ``Bone.matrix_local``, the same product kept in float32, drifts from a
    rotation down deep hierarchies (2.5e-5 on Rigify's horse), and so does this product, while the
    pose Blender shows the parent with does not (constraints on the way re-make it a rotation): a
    base read against a drifting rest would carry the drift as a scale."""
    M = composed_rest(obj, name)
    if obj.data.bones[name].parent is None:
        return M
    U, _, Vt = np.linalg.svd(M[:3, :3])
    M[:3, :3] = U @ Vt
    return M


def composed_rest(obj, name):
    """The product of the offsets (`offset_matrix`) from the hierarchy's root down to a bone (4x4,
    float64): its rest in armature space as Blender's pose composes it, drift included."""
    bone = obj.data.bones[name]
    M = offset_matrix(bone)
    while bone.parent is not None:
        bone = bone.parent
        M = offset_matrix(bone) @ M
    return M

"""A later stage's inputs computed from the earlier stages' solved poses, so that one reading of
Blender's evaluation of the frames serves several stages.

A stage reads, per frame, bones that may ride on bones an earlier stage moves: its targets and
poles, the bones its chains hang from, the chains' roots (`rig.order`). Read from Blender, they
cost one more evaluation of every frame per stage, after the earlier stages are written. Where
the way from the solved bones to such a bone is made only of what is evaluated here exactly as
Blender evaluates it, it is computed instead (`Prediction.evaluate`), bone by bone, parents and
constraint targets first, in armature space (the armature object's scale is uniform: the
sampler refuses any other, and every step below commutes with a rotation and a uniform scale):

* a bone that inherits its parent's rotation: parent pose @ rest offset @ its channels (read in
  the first pass: what we write never changes them); where it inherits scale other than fully,
  only while the parent is unscaled (checked every frame), where every mode is the full one;
* Copy Location (world or pose space on both sides, every axis, no offset or inversion): the
  owner moves to the target's point (its head, or `head_tail` of the way to its tail);
* Damped Track: the owner turned by the least rotation that points its track axis at the point;
* Copy Scale: the owner's axes scaled to the target's axis lengths (raised to its power,
  uniform, with its offset);
* influence below 1: Blender's blend of the matrices before and after the constraint (the
  rotation parts of their polar decompositions slerped, the stretch parts and locations lerped).

Bones on the way that depend on no solved bone are read in the first pass as Blender shows them;
solved bones come from the forward kinematics of their stage (`solved_matrices`). Anything else on
the way (another constraint, a driver on a bone's channels, another object) keeps the stage's
own reading (`reason` says why). The constraints' settings (influence and the rest) are taken as
they are when the bake starts. The bake's verification reads every predicted bone again
(`job.Job`): a prediction Blender does not confirm (a setting animated or driven to change over
the frames, say) sends the stage back to a reading of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ... import solver
from ...solver.rotations import axis_angle_matrix, exp_map, log_map
from .. import pose_channels
from .base import column_lengths, offset_matrix
from .sampling import rescaled_points

SPACES = ("WORLD", "POSE")
TRACK_AXES = {"TRACK_X": (1.0, 0.0, 0.0), "TRACK_Y": (0.0, 1.0, 0.0), "TRACK_Z": (0.0, 0.0, 1.0),
              "TRACK_NEGATIVE_X": (-1.0, 0.0, 0.0), "TRACK_NEGATIVE_Y": (0.0, -1.0, 0.0),
              "TRACK_NEGATIVE_Z": (0.0, 0.0, -1.0)}
UNIT_SCALE = 1e-5       # scales this close to 1 are unit scales (float32 products of rotations)


class Unpredictable(ValueError):
    """A bone cannot be computed here (the message says why): the stage reads Blender instead."""


@dataclass
class _Constraint:
    kind: str               # COPY_LOCATION, DAMPED_TRACK or COPY_SCALE
    target: str             # the target bone (same armature)
    head_tail: float
    influence: float
    axis: tuple = (0.0, 1.0, 0.0)            # Damped Track: the owner's axis to turn
    axes: tuple = (True, True, True)        # Copy Scale: the owner's axes it scales
    power: float = 1.0
    uniform: bool = False
    offset: str = ""                        # Copy Scale's offset: "", "MULTIPLY" or "ADD"


@dataclass
class _Bone:
    name: str
    parent: str | None
    offset: np.ndarray                                  # rest offset from the parent (or armature)
    row: int                                            # index in obj.pose.bones
    constraints: list = field(default_factory=list)
    needs_unit_parent: bool = False     # inherits scale other than fully: the same while the parent is unscaled


class Prediction:
    """How to compute the bones `wanted` of armature `obj` from the bones `solved` (names: the
    earlier stages' chain bones) and what the first pass reads. `reason` is empty when it can."""

    def __init__(self, obj, wanted, solved, driven, walker):
        self.obj, self.solved = obj, set(solved)
        self._driven = set(driven)          # (bone, constraint name) of the IK constraints we drive (muted)
        self._walker, self._keys = walker, {(obj.as_pointer(), name) for name in solved}
        self._bones: dict[str, _Bone] = {}
        self._rows = {pb.name: i for i, pb in enumerate(obj.pose.bones)}
        self.order: list[str] = []                     # bones computed, in evaluation order
        self.read_bones: list[str] = []                # bones read as Blender shows them
        self.wanted = [name for name in dict.fromkeys(wanted) if self._rides_on_solved(name)]
        self.reason = ""
        try:
            for name in self.wanted:
                self._source(name, ())
        except Unpredictable as err:
            self.reason = str(err)
        self._read_rows = np.array([self._rows[n] for n in self.read_bones], dtype=int)
        self._basis_rows = np.array([self._bones[n].row for n in self.order], dtype=int)
        self._connected = np.array([obj.data.bones[n].use_connect for n in self.order], dtype=bool)
        self._read, self._modes, self._values = None, None, None

    def _rides_on_solved(self, name):
        return name in self.solved or bool(self._walker.reached((self.obj, name), self._keys))

    def _source(self, name, path):
        """Plan bone `name` (once): solved, read, or computed from its parent and constraints."""
        if name in self.solved or name in self._bones or name in self.read_bones:
            return
        if not self._rides_on_solved(name):
            self.read_bones.append(name)
            return
        if name in path:
            raise Unpredictable(f"bone '{name}' depends on itself")
        pb = self.obj.pose.bones[name]
        bone = pb.bone
        if not (bone.use_inherit_rotation and bone.use_local_location):
            raise Unpredictable(f"bone '{name}' does not inherit its parent's rotation, or moves in its parent's axes")
        for fc in self._walker.drivers(self.obj).get(name, ()):
            if fc.data_path.endswith(("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle",
                                      "scale")):
                raise Unpredictable(f"a driver moves bone '{name}'")
        path = path + (name,)
        if pb.parent is not None:
            self._source(pb.parent.name, path)
        constraints = []
        for con in pb.constraints:
            if con.mute or con.influence <= 0.0 or (con.type == "IK" and (name, con.name) in self._driven):
                continue
            constraints.append(self._constraint(name, con))
            self._source(constraints[-1].target, path)
        self._bones[name] = _Bone(name, pb.parent.name if pb.parent else None, offset_matrix(bone),
                                  self._rows[name], constraints, bone.inherit_scale != "FULL")
        self.order.append(name)

    def _constraint(self, name, con):
        where = f"constraint '{con.name}' ({con.type}) of bone '{name}'"
        if con.type not in ("COPY_LOCATION", "DAMPED_TRACK", "COPY_SCALE"):
            raise Unpredictable(f"{where} is not computed here")
        if con.target != self.obj or not con.subtarget or con.subtarget not in self.obj.pose.bones:
            raise Unpredictable(f"{where} does not aim at a bone of the armature")
        if getattr(con, "use_bbone_shape", False):
            raise Unpredictable(f"{where} follows a B-Bone's curve")
        head_tail = float(getattr(con, "head_tail", 0.0))
        if con.type == "DAMPED_TRACK":
            return _Constraint(con.type, con.subtarget, head_tail, con.influence, TRACK_AXES[con.track_axis])
        if con.owner_space not in SPACES or con.target_space != con.owner_space:
            raise Unpredictable(f"{where} is in {con.owner_space} / {con.target_space} space")
        if con.type == "COPY_LOCATION":
            if not (con.use_x and con.use_y and con.use_z) or con.invert_x or con.invert_y or con.invert_z \
                    or con.use_offset:
                raise Unpredictable(f"{where} copies part of the location, inverted or with an offset")
            return _Constraint(con.type, con.subtarget, head_tail, con.influence)
        axes = (con.use_x, con.use_y, con.use_z)
        if con.use_make_uniform and not all(axes):
            raise Unpredictable(f"{where} makes a uniform scale of some axes")
        offset = ("MULTIPLY" if not con.use_add else "ADD") if con.use_offset else ""
        if con.owner_space == "WORLD" and (con.power != 1.0 or offset):
            scale = column_lengths(np.array(self.obj.matrix_world)[:3, :3])
            if np.abs(scale - 1.0).max() > UNIT_SCALE:
                raise Unpredictable(f"{where} raises or offsets the scale in World Space of a scaled armature")
        return _Constraint(con.type, con.subtarget, head_tail, con.influence, axes=axes, power=float(con.power),
                           uniform=bool(con.use_make_uniform), offset=offset)

    # -- the first pass ----------------------------------------------------------------------------

    def start(self, n_frames):
        self._read = np.zeros((n_frames, len(self.read_bones), 16), np.float32)
        self._modes = np.zeros((n_frames, len(self.order)), np.int32)
        self._values = np.zeros((n_frames, len(self.order), pose_channels.WIDTH), np.float32)

    def read(self, i, pose_bones, all_matrices):
        """Frame i as Blender shows it: `all_matrices` (n, 16) is every bone's pose matrix, read by
        the caller with one foreach_get."""
        self._read[i] = all_matrices[self._read_rows]
        pose_channels.read(pose_bones, self._basis_rows, self._modes[i], self._values[i])

    # -- computing ---------------------------------------------------------------------------------

    def evaluate(self, solved):
        """{bone: (F, 4, 4)} of every wanted bone, from `solved` {bone: (F, 4, 4)} (pose matrices
        in armature space) and what the first pass read. Raises Unpredictable."""
        out = dict(solved)
        read = np.swapaxes(self._read.reshape(self._read.shape[:2] + (4, 4)), -1, -2).astype(float)
        for b, name in enumerate(self.read_bones):
            out[name] = read[:, b]
        basis = pose_channels.basis(self._modes, self._values, self._connected)
        lengths = {pb.name: pb.bone.length for pb in self.obj.pose.bones}
        for j, name in enumerate(self.order):
            bone = self._bones[name]
            M = bone.offset @ basis[:, j]
            if bone.parent is not None:
                if bone.needs_unit_parent:
                    _unit_scale(out[bone.parent], f"bone '{name}': its parent", "it inherits its scale partly")
                M = out[bone.parent] @ M
            for con in bone.constraints:
                after = _apply(con, M, out[con.target], lengths[con.target], name)
                M = after if con.influence >= 1.0 else blend_matrices(M, after, con.influence)
            out[name] = M
        return {name: out[name] for name in self.wanted}


def _unit_scale(M, what, why):
    """Raise Unpredictable unless the pose matrices M (F, 4, 4) are rotations (orthonormal axes)."""
    gram = np.swapaxes(M[:, :3, :3], -1, -2) @ M[:, :3, :3]
    if np.abs(gram - np.eye(3)).max() > UNIT_SCALE:
        raise Unpredictable(f"{what} is scaled and {why}")


def _point(M, length, head_tail):
    """A bone's head (pose matrix M), or `head_tail` of the way to its tail."""
    return M[:, :3, 3] + head_tail * length * M[:, :3, 1]


def _apply(con, M, target, length, name):
    out = M.copy()
    if con.kind == "COPY_LOCATION":
        out[:, :3, 3] = _point(target, length, con.head_tail)
        return out
    if con.kind == "COPY_SCALE":
        own = column_lengths(M[:, :3, :3])                    # (F, 3) the owner's axis lengths
        size = column_lengths(target[:, :3, :3])
        if con.uniform:
            size = np.repeat(np.cbrt(np.abs(np.linalg.det(target[:, :3, :3])))[:, None], 3, axis=1)
        size = size ** con.power
        if con.offset == "MULTIPLY":
            size = size * own
        elif con.offset == "ADD":
            size = size + own - 1.0
        ratio = np.where(np.array(con.axes) & (own != 0.0), size / np.where(own != 0.0, own, 1.0), 1.0)
        out[:, :3, :3] = M[:, :3, :3] * ratio[:, None, :]
        return out
    direction = _point(target, length, con.head_tail) - M[:, :3, 3]
    size = np.linalg.norm(direction, axis=-1)
    axis = M[:, :3, :3] @ np.array(con.axis)
    axis_size = np.linalg.norm(axis, axis=-1)
    if (size == 0.0).any() or (axis_size == 0.0).any():
        raise Unpredictable(f"bone '{name}': Damped Track onto its own head, or a zero-size axis")
    to, now = direction / size[:, None], axis / axis_size[:, None]
    normal = np.cross(now, to)
    sin = np.linalg.norm(normal, axis=-1)
    if (sin < 1e-7).any():
        raise Unpredictable(f"bone '{name}': Damped Track along or against its axis (no unique turn)")
    angle = np.arccos(np.clip(np.sum(now * to, axis=-1), -1.0, 1.0))
    out[:, :3, :3] = axis_angle_matrix(normal / sin[:, None], angle) @ M[:, :3, :3]
    return out


def blend_matrices(A, B, t):
    """Blender's blend of pose matrices A and B (F, 4, 4) by t: each 3x3 part split into rotation
    U and stretch P (polar decomposition, M = U P), the rotations slerped, the stretches and the
    locations lerped."""
    U_A, P_A = _polar(A[:, :3, :3])
    U_B, P_B = _polar(B[:, :3, :3])
    out = A.copy()
    U = U_A @ exp_map(t * log_map(np.swapaxes(U_A, -1, -2) @ U_B))
    out[:, :3, :3] = U @ ((1.0 - t) * P_A + t * P_B)
    out[:, :3, 3] = (1.0 - t) * A[:, :3, 3] + t * B[:, :3, 3]
    return out


def _polar(M):
    W, s, Vt = np.linalg.svd(M)
    if (np.linalg.det(W @ Vt) < 0.0).any():
        raise Unpredictable("a mirrored bone matrix (negative scale) in a blend")
    V = np.swapaxes(Vt, -1, -2)
    return W @ Vt, V @ (s[..., None] * Vt)


def solved_matrices(rig, q, samples):
    """{bone: (F, 4, 4)}: the pose matrices (armature space) Blender shows the stage's bones with
    once its solution q is written: the forward kinematics' frames, at each bone's head and
    scaled by its stretch, and, for a chain solved unscaled about a scaled base, by the base's
    scale about its origin (`sampling.rescaled_points`)."""
    frames = solver.forward_kinematics(rig.model, q, samples.bases).frames.copy()
    for name, c in rig.stretch_coordinate.items():
        # The engine stretches a bone by d along its Y after its rotation: its frame sits d past the head.
        s, d = rig.model.index(name), q[:, c]
        frames[:, s, :3, 3] -= d[:, None] * frames[:, s, :3, 1]
        frames[:, s, :3, :3] *= ((rig.model.length[s] + d) / rig.model.length[s])[:, None, None]
    if samples.base_scale is not None:
        groups = rig.bone_groups
        scale, bases = samples.base_scale[:, groups], samples.bases[:, groups]
        frames[..., :3, :3] *= scale[..., None, None]
        frames[..., :3, 3] = rescaled_points(frames[..., :3, 3], bases, scale)
    return {name: frames[:, s] for s, name in enumerate(rig.bones)}

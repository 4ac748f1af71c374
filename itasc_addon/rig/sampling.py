"""Per-frame samples of a rig read: targets, the chains' bases and the animated pose, in the
armature's space, read one frame at a time and computed for all frames at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import chain_bones, pose_channels
from .base import (Rig, RigError, column_lengths, composed_rest, object_scale, offset_matrix, orthonormalize,
                   rest_matrix, uniform_scales)

@dataclass
class Samples:
    """What Blender says at each frame: targets and bases in armature space, and the animated pose.
    A chain whose parent is scaled (uniformly) is solved unscaled, its targets moved to match."""

    frames: np.ndarray          # (F,)
    objects: np.ndarray         # (F, K, 4, 4) targets in armature space (rotation orthonormal)
    bases: np.ndarray           # (F, A, 4, 4)
    basis: np.ndarray           # (F, S, 4, 4) pose bones' matrix_basis of the model's bones
    scale: np.ndarray           # (F,) the armature object's uniform scale
    poles: np.ndarray | None = None   # (F, C, 4, 4) per driven constraint its pole in armature space
                                      # (a bone's head and orientation), NaN without a pole
    base_scale: np.ndarray | None = None   # (F, A) the uniform scale each group's base carries: its
    #                                        chain's targets and poles above are moved for it (`_unscaled`)


_IDENTITY4 = np.eye(4)
UNEVEN = 1e-4      # a parent's axis scales this far apart (relative) count as a non-uniform scale


def _inherits_fully(pb):
    """Whether a bone's pose matrix is its parent's pose matrix times the rest offset and its own
    matrix_basis: it inherits rotation and scale fully and no constraint of its own acts on it (IK
    constraints are the hand-over's, muted while ours drives)."""
    bone = pb.bone
    return (bone.use_inherit_rotation and bone.inherit_scale == "FULL" and bone.use_local_location
            and not any(c.type != "IK" and not c.mute and c.influence > 0.0 for c in pb.constraints))


def _matrices(raw):
    """(F, n, 4, 4) float matrices from foreach_get's rows (F, n, 16) of column-major float32."""
    return np.swapaxes(raw.reshape(raw.shape[:2] + (4, 4)), -1, -2).astype(float)


class Sampler:
    """Reads one frame at a time after the scene has been set to it (`read(frame)`), so that a
    modal operator can spread the sampling over timer events. A frame only copies Blender's
    matrices; everything computed from them is done for all frames at once in `samples()`."""

    def __init__(self, rig: Rig, obj, frames):
        import bpy

        self.rig, self.obj = rig, obj
        self.frames = np.asarray(frames, dtype=float)
        F, K = len(self.frames), len(rig.targets)
        self.world = np.zeros((F, 4, 4))               # the armature object
        self.target_world = np.zeros((F, K, 4, 4))     # target objects
        self.target_bone = np.broadcast_to(np.eye(4), (F, K, 4, 4)).copy()   # target bones in their armature
        self._poles = [(c, d.pole) for c, d in enumerate(rig.driven) if d.pole is not None]
        self._pole_world = np.zeros((F, len(self._poles), 4, 4))
        self._pole_bone = np.broadcast_to(np.eye(4), (F, len(self._poles), 4, 4)).copy()
        self._bpy = bpy
        bone_order = {pb.name: i for i, pb in enumerate(obj.pose.bones)}
        index = np.array([bone_order[n] for n in rig.bones])
        root_index = np.array([bone_order[root] for root, _ in rig.groups])
        self._hanging = [a for a, (_, parent) in enumerate(rig.groups) if parent is not None]
        # Per frame, the rotation modes and channels (pose_channels) of the chains' bones (the roots
        # among them), and the pose matrix of roots that hang from a bone, as Blender hands them
        # over (float32); `samples()` converts all frames at once.
        self._read_basis, where = np.unique(np.concatenate([index, root_index]), return_inverse=True)
        self._index, self._root_index = where[:len(index)], where[len(index):]
        self._read_matrix = root_index[self._hanging]
        # The pose matrices of the bones those roots hang from: with the roots' locations, all a
        # base depends on (`samples` keys its memo on them).
        self._read_parent = np.array([bone_order[rig.groups[a][1]] for a in self._hanging], dtype=int)
        self._all = np.zeros((len(obj.pose.bones), 16), dtype=np.float32)   # one frame of every bone
        self._stretches = np.array([n in rig.stretch_coordinate for n in rig.bones], dtype=bool)
        self._scale_parents = (rig.scale_parents if rig.scale_parents is not None
                               else np.full(len(rig.bones), -1, dtype=int))
        self._connected = np.array([obj.pose.bones[int(i)].bone.use_connect for i in self._read_basis], dtype=bool)
        self.read_channels = True       # False: the caller gives them (`put_channels`)
        self._animated = None           # channels to start from, read before our keys (`take_channels`)
        self._modes = np.zeros((F, len(self._read_basis)), dtype=np.int32)
        self._values = np.zeros((F, len(self._read_basis), pose_channels.WIDTH), dtype=np.float32)
        self._raw_matrix = np.zeros((F, len(self._read_matrix), 16), dtype=np.float32)
        self._raw_parent = np.zeros((F, len(self._read_parent), 16), dtype=np.float32)
        # Hanging roots whose pose matrix is their parent's carried by the rest offset and their own
        # basis (full inheritance, no constraint of their own): their base follows from the
        # parent's pose matrix alone, whatever rotation the root is shown with.
        self._from_parent = np.array([_inherits_fully(obj.pose.bones[rig.groups[a][0]]) for a in self._hanging],
                                     dtype=bool)
        self._parent_offset = np.array([offset_matrix(obj.data.bones[rig.groups[a][0]])
                                        for a in self._hanging]).reshape(-1, 4, 4)
        self._memo = {}
        self._rest = np.stack([rest_matrix(obj, root) for root, _ in rig.groups])
        drifted = np.array([composed_rest(obj, rig.groups[a][0]) for a in self._hanging]).reshape(-1, 4, 4)
        self._drifted_inverse = np.linalg.inv(drifted[:, :3, :3]) if len(drifted) else drifted[:, :3, :3]
        self._rest_inverse = np.linalg.inv(self._rest)
        for name in [t.object for t in rig.targets] + [t.object for _, t in self._poles]:
            if name not in bpy.data.objects:
                raise RigError(f"target object '{name}' no longer exists")

    def read(self, i):
        """Read frame i of `frames`; the scene must already be at that frame."""
        bpy, rig = self._bpy, self.rig
        depsgraph = bpy.context.evaluated_depsgraph_get()
        ob = self.obj.evaluated_get(depsgraph)
        self.world[i] = ob.matrix_world
        names = rig.constraint_names
        for k, t in enumerate(rig.targets):
            self._read_target(t, names[k], depsgraph, i, self.target_world[i, k], self.target_bone[i, k])
        for p, (c, t) in enumerate(self._poles):
            self._read_target(t, names[c], depsgraph, i, self._pole_world[i, p], self._pole_bone[i, p])
        if self.read_channels:
            pose_channels.read(ob.pose.bones, self._read_basis, self._modes[i], self._values[i])
        if self._hanging:
            ob.pose.bones.foreach_get("matrix", self._all.ravel())
            self._raw_matrix[i] = self._all[self._read_matrix]
            self._raw_parent[i] = self._all[self._read_parent]

    def take_channels(self, other):
        """Start from the channels (the animated pose) that `other`, a sampler of the same rig and
        frames, read before our keys were written; the channels read now still place the chains'
        bases, with the roots' pose matrices read now."""
        self._animated = other._modes.copy(), other._values.copy()

    def inputs(self):
        """(bones of the armature read as Blender shows them, other targets): the target and pole
        bones of the armature itself, the hanging roots and the bones they hang from; and the
        (object, bone or "") of targets and poles elsewhere."""
        bones, others = [], []
        for t in list(self.rig.targets) + [t for _, t in self._poles]:
            if t.object == self.obj.name and t.bone:
                bones.append(t.bone)
            else:
                others.append((t.object, t.bone))
        bones += [self.rig.groups[a][0] for a in self._hanging] + [self.rig.groups[a][1] for a in self._hanging]
        return list(dict.fromkeys(bones)), others

    def put_bones(self, matrices):
        """Take these bones' pose matrices ({bone: (F, 4, 4)}, armature space) in place of what
        `read` read of them: a later stage's inputs computed from the stages before (`prediction`)."""
        def raw(M):
            return np.swapaxes(M, -1, -2).reshape(M.shape[0], 16)

        own = self.obj.name
        for k, t in enumerate(self.rig.targets):
            if t.object == own and t.bone in matrices:
                self.target_bone[:, k] = matrices[t.bone]
        for p, (_, t) in enumerate(self._poles):
            if t.object == own and t.bone in matrices:
                self._pole_bone[:, p] = matrices[t.bone]
        for j, a in enumerate(self._hanging):
            root, parent = self.rig.groups[a]
            if root in matrices:
                self._raw_matrix[:, j] = raw(matrices[root])
            if parent in matrices:
                self._raw_parent[:, j] = raw(matrices[parent])

    def put_channels(self, i, modes, values):
        """Frame i's channels of the model's bones given from outside (live preview: the user's own
        pose, `own_pose.animated_channels`): modes (S,) and values (S, pose_channels.WIDTH), in
        the rig's bone order, in place of those `read` took from the evaluated pose."""
        self._modes[i, self._index] = modes
        self._values[i, self._index] = values

    def _read_target(self, t, constraint, depsgraph, i, world, bone):
        """Into `world` and `bone`: the evaluated world matrix of a Target's object and, for a bone,
        the bone's pose matrix (its head, where Blender's IK aims)."""
        tob = self._bpy.data.objects.get(t.object)
        if tob is None or (t.bone and (tob.pose is None or t.bone not in tob.pose.bones)):
            raise RigError(f"the target '{t.label}' of '{constraint}' was deleted or renamed "
                           f"while solving (at frame {self.frames[i]:g}); nothing was written")
        tob = tob.evaluated_get(depsgraph)
        world[...] = tob.matrix_world
        if t.bone:
            bone[...] = tob.pose.bones[t.bone].matrix

    def _world_part(self):
        """The armature's uniform scale per frame (a non-uniform or degenerate one is an error)
        and its inverse world matrices."""
        scale, degenerate, uneven = uniform_scales(self.world)
        if (degenerate | uneven).any():
            i = np.flatnonzero(degenerate | uneven)[0]
            object_scale(self.world[i], f"armature '{self.obj.name}' at frame {self.frames[i]:g}")   # raises
        return scale, np.linalg.inv(self.world)

    def _bases(self, root_basis):
        """Each chain group's base (F, A, 4, 4) in armature space and the uniform scale it carries
        (F, A), divided out of it: the rest frame of its root bone as its parent (or the armature)
        carries it, with the root's own pose location (root_basis: the roots' matrix_basis), times
        the inverse of the root's rest in the model, so that base @ rest is exactly the frame
        Blender poses the root's rest in (scale apart).

        That frame is a rotation, scaled where the parent is (a stretch), and also off a rotation
        by the float32 drift of a deep hierarchy where Blender's pose carries it (no constraint on
        the way makes it a rotation again). The base keeps that drift, so the chain is posed as
        Blender poses it; the scale is read off whichever of base and frame @ (the rest as the
        float32 product composes it)^-1 is nearer a scaled rotation: the one the drift cancels in."""
        loc = np.empty(root_basis.shape)
        loc[...] = _IDENTITY4
        loc[..., :3, 3] = root_basis[..., :3, 3]
        bases = self._rest @ loc @ self._rest_inverse
        scale = np.ones(bases.shape[:2])
        hanging = self._hanging
        if hanging:
            root_matrix = _matrices(self._raw_matrix)
            parent_frame = root_matrix @ np.linalg.inv(root_basis[:, hanging])
            if self._from_parent.any():
                carried = _matrices(self._raw_parent) @ self._parent_offset
                parent_frame[:, self._from_parent] = carried[:, self._from_parent]
            frame = parent_frame @ loc[:, hanging]
            if not np.isfinite(frame).all():
                bad = ~np.isfinite(frame).all(axis=(1, 2, 3))
                raise RigError(f"the chains' parent bones are not finite at frame(s) {self.frames[bad][:5].tolist()}")
            base = frame @ self._rest_inverse[hanging]
            s, spread = _scaled_rotation(base[..., :3, :3])
            s_drifted, spread_drifted = _scaled_rotation(frame[..., :3, :3] @ self._drifted_inverse)
            drifted = spread_drifted < spread
            s, spread = np.where(drifted, s_drifted, s), np.where(drifted, spread_drifted, spread)
            bad = ~(s > 1e-12) | (spread > UNEVEN)
            if bad.any():
                i = hanging[int(np.flatnonzero(bad.any(axis=0))[0])]
                raise RigError(f"the bone '{self.rig.groups[i][1]}' that chain '{self.rig.groups[i][0]}' hangs from "
                               "is scaled unevenly (or to zero); the solver needs parents scaled alike on every axis")
            base[..., :3, :3] /= s[..., None, None]
            bases[:, hanging] = base
            scale[:, hanging] = s
        return bases, scale

    def _remembered(self, name, key, compute):
        """compute(), or what it returned the last time it was asked for `name` with this key.
        (Live preview samples one frame after the other: the armature object and the chains'
        roots rarely move, and what follows from them is not worked out again.)"""
        last = self._memo.get(name)
        if last is None or last[0] != key:
            value = compute()
            for array in value if isinstance(value, tuple) else (value,):
                array.flags.writeable = False           # handed out again: nobody may change it
            last = self._memo[name] = (key, value)
        return last[1]

    def _start_pose(self, modes, values):
        """(matrix_basis (F, B, 4, 4) of the bones read, the model bones' start pose (F, S, 4, 4))
        from the channels read: each stretching bone's Y axis scaled by its stretch as Blender
        shows it. Refuses a non-finite pose and chain bones scaled to zero; warns (once) of pose
        scales the solver does not model."""
        pose_basis = pose_channels.basis(modes, values, self._connected)
        basis = pose_basis[:, self._index]
        bad = ~np.isfinite(basis).all(axis=(1, 2, 3))
        if bad.any():
            raise RigError(f"the animated pose is not finite at frame(s) {self.frames[bad][:5].tolist()}")
        # The solver models rigid bones: a chain bone scaled to (near) zero collapses its children.
        size = column_lengths(basis[..., :3, :3])                         # (F, S, 3)
        flat = size.min(axis=-1) < 1e-6                                   # (F, S)
        if flat.any():
            s = np.flatnonzero(flat.any(axis=0))[0]
            raise RigError(f"bone '{self.rig.bones[s]}' is scaled to zero at frame(s) "
                           f"{self.frames[flat[:, s]][:5].tolist()}; the solver needs chain bones of non-zero "
                           "size: reset its scale")
        # What Blender shows is each bone's total scale, its own times the one it inherits
        # (chain_bones): a stretching bone's is uniform, its stretch; every other bone's is 1.
        total = chain_bones.total_scales(size, self._scale_parents)
        if self._stretches.any():
            basis = basis.copy()
            basis[..., :3, 1] *= (total[..., 1] / size[..., 1])[..., None]    # the stretch read as Y scale
        off = np.abs(total - 1.0) > 1e-4
        off[:, self._stretches] = (np.abs(total - total[..., 1:2]) > 1e-4 * total[..., 1:2])[:, self._stretches]
        for s in np.flatnonzero(off.any(axis=(0, 2))) if off.any() else ():
            message = f"bone '{self.rig.bones[s]}' has a pose scale; the solver treats it as unscaled: expect errors"
            if message not in self.rig.warnings:
                self.rig.warnings.append(message)
        return pose_basis, basis

    def samples(self) -> Samples:
        scale, world_inverse = self._remembered("world", self.world.tobytes(), self._world_part)
        objects = world_inverse[:, None] @ self.target_world @ self.target_bone
        bad = ~np.isfinite(objects).all(axis=(1, 2, 3))
        if bad.any():
            raise RigError(f"targets are not finite at frame(s) {self.frames[bad][:5].tolist()}")
        # The start pose follows from the channels alone (live preview: the user's own, the same
        # from frame to frame unless animated).
        roots_now = None
        modes, values = self._modes, self._values
        if self._animated is not None:
            roots_now = pose_channels.basis(modes, values, self._connected)[:, self._root_index]
            modes, values = self._animated
        pose_basis, self.basis = self._remembered("basis", modes.tobytes() + values.tobytes(),
                                                  lambda: self._start_pose(modes, values))
        # A root's rotation cancels in its base: while the roots stay where they are and the bones
        # they hang from do not move, the base is the same (up to float32 rounding). (A change of
        # how a root inherits its parent's motion changes the rig's signature: live preview then
        # reads the rig again, with a new sampler.)
        root_basis = pose_basis[:, self._root_index] if roots_now is None else roots_now
        roots_at = root_basis[:, :, :3, 3]
        bases, base_scale = self._remembered("bases", roots_at.tobytes() + self._raw_parent.tobytes(),
                                             lambda: self._bases(root_basis))
        poles = None
        objects = orthonormalize(objects)
        if self._poles:
            poles = np.full(objects.shape[:1] + (len(self.rig.driven), 4, 4), np.nan)
            poles[:, [c for c, _ in self._poles]] = orthonormalize(world_inverse[:, None] @ self._pole_world
                                                                   @ self._pole_bone)
        if np.any(base_scale != 1.0):
            groups = self.rig.constraint_groups
            objects = _unscaled(objects, bases[:, groups], base_scale[:, groups])
            if poles is not None:
                poles = _unscaled(poles, bases[:, groups], base_scale[:, groups])
        if poles is not None and self.rig.pole_of:                # the pole tasks' objects, after the targets
            objects = np.concatenate([objects, poles[:, self.rig.pole_of]], axis=1)
        return Samples(self.frames, objects, bases, self.basis, scale, poles, base_scale)


def _scaled_rotation(M):
    """(s, spread) of 3x3 matrices (..., 3, 3): s their uniform scale (the mean axis length),
    spread how far M^T M / s^2 is from the identity (largest entry): 0 for a scaled rotation."""
    s = column_lengths(M).mean(axis=-1)
    gram = np.swapaxes(M, -1, -2) @ M / (s * s)[..., None, None]
    return s, np.abs(gram - np.eye(3)).max(axis=(-2, -1))


def unscaled_points(points, bases, scale):
    """Points (..., 3) of a chain hanging from bases (..., 4, 4) scaled by `scale` (...), moved so
    that the unscaled chain reaches them as the scaled one reaches the originals: a chain carried
    by a parent scaled by s (as IK stretch scales a bone, and its children inherit it) is the
    unscaled chain magnified by s about its base's origin o, so its effector is at p exactly where
    the unscaled one is at o + (p - o) / s."""
    origin = bases[..., :3, 3]
    return origin + (points - origin) / scale[..., None]


def rescaled_points(points, bases, scale):
    """The inverse of `unscaled_points`: where the scaled chain puts what the unscaled one puts at
    `points`."""
    origin = bases[..., :3, 3]
    return origin + (points - origin) * scale[..., None]


def _unscaled(objects, bases, scale):
    """Objects (F, C, 4, 4) of constraints whose chains hang from bases (F, C, 4, 4) scaled by
    `scale` (F, C), their points moved as `unscaled_points` says; rotations are unchanged."""
    out = objects.copy()
    out[..., :3, 3] = unscaled_points(objects[..., :3, 3], bases, scale)
    return out


def sample(rig: Rig, obj, frames, progress=None) -> Samples:
    """Set the scene to each frame in turn and read it; the current frame is restored."""
    import bpy

    scene = bpy.context.scene
    frame, subframe = scene.frame_current, scene.frame_subframe
    sampler = Sampler(rig, obj, frames)
    try:
        for i, f in enumerate(sampler.frames):
            scene.frame_set(int(np.floor(f)), subframe=float(f - np.floor(f)))
            sampler.read(i)
            if progress:
                progress(i)
    finally:
        scene.frame_set(frame, subframe=subframe)
    return sampler.samples()

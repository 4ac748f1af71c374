"""The target armature's bones as numpy arrays, and the pose channels that give its bones chosen
world matrices.

Blender poses a bone (inheriting rotation and scale, no constraints) as

    pose_b = pose_parent @ rest_parent^-1 @ rest_b @ basis_b        (armature space)

with ``rest = bone.matrix_local`` and ``basis = T(location) R(rotation) S(scale)``; a root bone's
pose is ``rest_b @ basis_b``. `Skeleton.bases` inverts that down the hierarchy: given the world
matrices some bones should have (F, 4, 4 each; the others keep their basis), it returns each
given bone's basis, parent poses computed from the bases found above it. Only the rotation (and,
for bones whose location is asked, the head) of a wanted matrix is followed; scale stays 1.

`rig_target` is the engine's `Target` of a rig by its map {role: bone}: the bones a solve moves
(the mapped ones and those between them and the hips), with their IK locks and limits; on a rig
Rigify generated its ORG- skeleton, moving as Rigify's IK chains let it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...solver import retarget as engine
from ..rig import RigError, engine_bone
from . import rigify_controls


@dataclass
class Skeleton:
    """An armature's bones: names in parent-before-child order, `parent` (B,) index or -1, `rest`
    (B, 4, 4) armature-space rest matrices, `world` (4, 4) the object's world matrix (static)."""

    names: list
    parent: np.ndarray
    rest: np.ndarray
    world: np.ndarray
    lengths: np.ndarray

    def index(self, name):
        return self.names.index(name)

    def rest_world(self, name):
        return self.world @ self.rest[self.index(name)]

    def bases(self, wanted: dict, located=()):
        """{bone: basis (F, 4, 4)} for the bones in `wanted` ({bone: world matrix (F, 4, 4)}): the
        basis whose pose puts the bone's axes along the wanted rotation and, for bones in
        `located`, its head at the wanted position. Bones not wanted keep an identity basis."""
        F = len(next(iter(wanted.values())))
        pose = np.empty((F, len(self.names), 4, 4))
        out = {}
        inv_world = np.linalg.inv(self.world)
        for b, name in enumerate(self.names):
            p = self.parent[b]
            local_rest = self.rest[b] if p < 0 else pose[:, p] @ np.linalg.inv(self.rest[p]) @ self.rest[b]
            local_rest = np.broadcast_to(local_rest, (F, 4, 4))
            if name not in wanted:
                pose[:, b] = local_rest
                continue
            want = inv_world @ np.asarray(wanted[name], float)
            basis = np.broadcast_to(np.eye(4), (F, 4, 4)).copy()
            rot = local_rest[:, :3, :3]
            scale = np.linalg.norm(rot, axis=-2, keepdims=True)          # the columns' lengths
            axes = rot / scale
            target = want[:, :3, :3] / np.linalg.norm(want[:, :3, :3], axis=-2, keepdims=True)
            basis[:, :3, :3] = np.swapaxes(axes, -1, -2) @ target
            if name in located:
                basis[:, :3, 3] = (np.linalg.inv(local_rest) @ want[:, :, 3:])[:, :3, 0]
            pose[:, b] = local_rest @ basis
            out[name] = basis
        return out


def read_skeleton(obj, names=None, parents=None) -> Skeleton:
    """The armature's bones (or those of `names`, parents first) in parent-before-child order (the
    order of ``data.bones``); `parents` {bone: parent name or None} overrides the armature's own
    hierarchy (a parent outside `names` makes a root)."""
    bones = list(obj.data.bones) if names is None else [obj.data.bones[n] for n in names]
    names = [b.name for b in bones]
    if parents is None:
        parents = {b.name: b.parent.name if b.parent else None for b in bones}
    at = {n: i for i, n in enumerate(names)}
    parent = np.array([at.get(parents[n], -1) for n in names], dtype=int)
    if np.any(parent >= np.arange(len(names))):
        raise RigError(f"armature '{obj.name}': bones not listed parent first")
    rest = np.array([np.array(b.matrix_local) for b in bones]).reshape(-1, 4, 4)
    world = np.array(obj.matrix_world)
    scale = np.cbrt(abs(np.linalg.det(world[:3, :3])))
    lengths = np.array([b.length for b in bones]) * scale
    return Skeleton(names=names, parent=parent, rest=rest, world=world, lengths=lengths)


def parents_of(rig):
    """{bone: parent bone name or None}: the armature's own hierarchy, or on a rig Rigify generated
    the metarig's hierarchy of its ORG- bones (`rigify_controls.org_parents`)."""
    out = {b.name: b.parent.name if b.parent else None for b in rig.data.bones}
    if rigify_controls.is_generated_rigify(rig):
        out.update(rigify_controls.org_parents(rig))
    return out


def solved_bones(rig, t_map, parents):
    """The target bones the solve moves: the mapped ones and those between them and the hips,
    in the armature's parent-first order."""
    hips = t_map["hips"]
    keep = set()
    for bone in t_map.values():
        b = bone
        chain = []
        while b is not None and b != hips:
            chain.append(b)
            b = parents[b]
        if b is None:
            raise RigError(f"target bone '{bone}' does not hang from the hips bone '{hips}'; fix the bone map")
        keep.update(chain)
    keep.add(hips)
    order, placed = [], set()
    pending = [b.name for b in rig.data.bones if b.name in keep]
    while pending:                                  # parents first (Rigify lists ORG- bones otherwise)
        ready = [n for n in pending if n == hips or parents[n] in placed]
        order += ready
        placed.update(ready)
        pending = [n for n in pending if n not in placed]
    return order


def rig_target(rig, t_map):
    """(bone names parents first, {bone: parent}, the engine's Target) of the bones the solve
    moves (`solved_bones`); on a rig Rigify generated, each ORG bone of a limb moves as its IK
    chain's bone may (locks, limits) and its knee or elbow bends to the side its pole does."""
    parents = parents_of(rig)
    names = solved_bones(rig, t_map, parents)
    rigify = rigify_controls.is_generated_rigify(rig)
    settings_of = rigify_controls.ik_settings_of(rig) if rigify else {}
    hinges = rigify_controls.hinge_limits(rig) if rigify else {}
    bones = []
    for i, n in enumerate(names):
        bone = replace(engine_bone(rig, n, False), parent=None if i == 0 else parents[n])
        if n in settings_of:
            chain = engine_bone(rig, settings_of[n], False)
            bone = replace(bone, lock=chain.lock, limits=chain.limits, stiffness=chain.stiffness)
        if n in hinges:
            x = bone.limits[0]
            lo, hi = hinges[n] if x is None else (max(x[0], hinges[n][0]), min(x[1], hinges[n][1]))
            bone = replace(bone, limits=((lo, hi), *bone.limits[1:]))
        bones.append(bone)
    return names, parents, engine.Target(bones=bones, roles=dict(t_map))

"""Blender's evaluation of what a solve wrote, measured against the targets.

After a bake (or a solve of one frame) has written its keys or pose, Blender evaluates each
written frame; for every IK constraint the solve drove, the constraint's effector as Blender poses
it (the tail of its chain's last bone: the bone's pose matrix applied to (0, length, 0), scale
and everything acting after IK included) is set against its target (the object's world matrix,
or a target bone's pose matrix in its armature) in the constraint's own terms: the engine task's
outputs, so that a frame's figures mean what the engine's mean:

- Copy Pose: the length of the controlled position axes of the target relative to the effector
  (or the effector relative to the target, by the constraint's reference axis), and of the
  controlled axes of the relative rotation vector;
- Distance: |d - distance| while the limit is violated (inside / outside), always on the surface.

The effector's frame has the bone's pose rotation (the polar factor of its pose matrix, so that a
scaled bone keeps its axes) placed at the effector point. Everything is in the armature object's
space; position errors become scene units by the armature's uniform scale at each frame.

A constraint is reached where its errors are within the precision plus what Blender's float32
evaluation resolves there (`float32_floor`): keys are float32 and Blender composes pose matrices
in float32 down the whole bone hierarchy, so even an exact solution shows rounding that grows
with the number of bones above the effector and with the size of the coordinates involved
(tests/addon/test_addon_verify.py measures it). That floor is

    position: eps32 * sqrt(depth + 2) * R,     rotation: eps32 * sqrt(depth + 2) (per_turn + per_length R),

with eps32 = 2^-23, depth the number of bones from the armature's root to the effector's bone,
R the largest coordinate magnitude involved (effector, target, the armature's and the target
object's world positions, in armature units, and the extent of the effector's ancestors), and
per_turn, per_length how the task's rotation error follows its frames' angles and positions
(Task.errors: 1 and 0 for a rotation read off a bone's axes; a pole's plane is read off
positions, and is ill-defined near the pose where the root bone's up lies along the chain).

A `Reader` copies, per frame (the caller sets the scene to it), the armature's world matrix, the
chains' tip bones' pose matrices (one `foreach_get`, float32 as Blender keeps them) and the
targets' matrices; `measure` computes every frame's errors at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import bpy
import numpy as np

from .rig import RigError, orthonormalize, uniform_scales


class Lost(RigError):
    """The rig changed under the reader (a target or bone deleted or renamed between two frames)."""


@dataclass
class Measured:
    """Blender's evaluation at the frames read: per frame (F) and driven constraint (C) position
    errors in scene units and rotation errors in radians (NaN: no such part, or the frame was not
    read); `reached` (F, C): the constraint within `precision` and the float32 floor there
    (constraints that ask nothing, of weight 0, count as reached); `verified` (F,): the frame
    was read."""

    position_error: np.ndarray
    rotation_error: np.ndarray
    reached: np.ndarray
    verified: np.ndarray
    float32_floor: np.ndarray       # (F, C) the position error Blender's float32 resolves at the rig's size,
    #                                 scene units (`SolveResult.float32_floor`)
    pole_error: np.ndarray          # (F, C) how far each chain's bend plane is turned from its pole,
    #                                 radians (NaN: no pole task); `reached` counts the poles too

    @property
    def converged(self) -> np.ndarray:
        """(F,) every driven constraint within the precision in Blender's evaluation."""
        return self.verified & self.reached.all(axis=1)


class Reader:
    """Reads Blender's evaluation of `obj` for the rig's driven constraints, one frame at a time
    (`read(i)` once the scene shows frame i of the F frames); frames never read stay unverified."""

    def __init__(self, rig, obj, n_frames: int):
        self.rig, self.obj = rig, obj
        # What the scene's engine objects are: the targets, then the poles (Rig.pole_of).
        self.sources = list(rig.targets) + [rig.driven[c].pole for c in rig.pole_of]
        F, K = int(n_frames), len(self.sources)
        # The driven constraints' tasks, then their pole tasks.
        self.tasks = list(rig.scene.constraints[:len(rig.driven) + len(rig.pole_of)])
        # The pose bones the driven tasks' segment endpoints sit on, in obj.pose.bones order.
        segments = sorted({e.segment for task in self.tasks for e in task.endpoints() if e.segment >= 0})
        self._segments = np.array(segments, dtype=int)
        self._rows = np.array([rig.pose_index[rig.bones[s]] for s in segments], dtype=int)
        # Per task: the bones from the root to its effector's bone (their number and extent).
        self.depth, self.extent = np.zeros(len(self.tasks)), np.zeros(len(self.tasks))
        for c, task in enumerate(self.tasks):
            bone = next((obj.data.bones[rig.bones[e.segment]] for e in task.endpoints() if e.segment >= 0), None)
            while bone is not None:
                self.depth[c] += 1
                self.extent[c] = max(self.extent[c], bone.head_local.length, bone.tail_local.length)
                bone = bone.parent
        self._n_bones = len(rig.pose_index)
        self._all = np.zeros((self._n_bones, 16), dtype=np.float32)
        self.world = np.broadcast_to(np.eye(4), (F, 4, 4)).copy()
        self.pose = np.zeros((F, len(segments), 16), dtype=np.float32)
        self.target_world = np.broadcast_to(np.eye(4), (F, K, 4, 4)).copy()
        self.target_bone = np.broadcast_to(np.eye(4), (F, K, 4, 4)).copy()
        self.verified = np.zeros(F, dtype=bool)
        self._kept_rows = {}
        self._kept = np.zeros((F, 0, 16), dtype=np.float32)

    def keep(self, bones):
        """Also keep these bones' pose matrices at each frame read (`kept`)."""
        self._kept_rows = {name: k for k, name in enumerate(dict.fromkeys(bones))}
        self._rows_kept = np.array([self.rig.pose_index[name] for name in self._kept_rows], dtype=int)
        self._kept = np.zeros((len(self.verified), len(self._kept_rows), 16), dtype=np.float32)

    def kept(self, bones):
        """{bone: (F, 4, 4)} the pose matrices kept (`keep`) of these bones."""
        M = np.swapaxes(self._kept.reshape(self._kept.shape[:2] + (4, 4)), -1, -2).astype(float)
        return {name: M[:, self._kept_rows[name]] for name in bones}

    def read(self, i, label=""):
        """Copy frame i as Blender evaluates it now; `Lost` if a target or bone went missing
        (`label` names the frame in the message)."""
        rig = self.rig
        depsgraph = bpy.context.evaluated_depsgraph_get()
        ob = self.obj.evaluated_get(depsgraph)
        if len(ob.pose.bones) != self._n_bones:
            raise Lost(f"bones of '{self.obj.name}' were added or deleted{label}")
        self.world[i] = ob.matrix_world
        for k, t in enumerate(self.sources):
            tob = bpy.data.objects.get(t.object)
            if tob is None or (t.bone and (tob.pose is None or t.bone not in tob.pose.bones)):
                owner = rig.constraint_names[k if k < len(rig.targets) else rig.pole_of[k - len(rig.targets)]]
                raise Lost(f"the target '{t.label}' of '{owner}' was deleted or renamed{label}")
            tob = tob.evaluated_get(depsgraph)
            self.target_world[i, k] = tob.matrix_world
            if t.bone:
                self.target_bone[i, k] = tob.pose.bones[t.bone].matrix
        ob.pose.bones.foreach_get("matrix", self._all.ravel())
        self.pose[i] = self._all[self._rows]
        if self._kept_rows:
            self._kept[i] = self._all[self._rows_kept]
        self.verified[i] = True

    def targets(self):
        """The engine objects (F, K, 4, 4: the targets, then the poles) in the armature's space,
        rotations orthonormal, and the
        armature's uniform scale (F,) (frames not read: identity, scale 1)."""
        scale, degenerate, _ = uniform_scales(self.world)
        world = np.where(degenerate[:, None, None], np.eye(4), self.world)
        objects = np.linalg.inv(world)[:, None] @ self.target_world @ self.target_bone
        return orthonormalize(objects), np.where(degenerate, np.nan, scale)

    def magnitudes(self, scale):
        """(F, K) the largest world coordinate magnitude of the armature and each target object,
        in armature units (part of R in `float32_floor`)."""
        armature = np.linalg.norm(self.world[:, :3, 3], axis=-1)
        target = np.linalg.norm(self.target_world[..., :3, 3], axis=-1)
        return np.maximum(armature[:, None], target) / scale[:, None]


EPS32 = float(np.finfo(np.float32).eps)


def float32_floor(depth, magnitude):
    """What Blender's float32 evaluation resolves (module docstring): (position in the units
    of `magnitude`, rotation in radians)."""
    spread = EPS32 * np.sqrt(np.asarray(depth, float) + 2.0)
    return spread * magnitude, spread


def measure(reader: Reader, objects, scale, precision: float, unjudged=()) -> Measured:
    """Errors of every frame the reader read against `objects` (F, K, 4, 4) in armature space
    (the targets the solve aimed at, e.g. `Reader.targets` blended by influence); `scale` (F,)
    the armature's uniform scale; `precision` in armature units (the engine's, for position
    and rotation alike); `unjudged`: the driven constraints (indices) measured but counted as
    reached (no target is theirs to reach, e.g. Blender's IK at influence below 1)."""
    verified = reader.verified
    F, C = len(verified), len(reader.tasks)
    M = np.swapaxes(reader.pose.reshape(F, -1, 4, 4), -1, -2).astype(float)     # column-major rows
    at = {s: j for j, s in enumerate(reader._segments)}
    rotation = orthonormalize(M) if M.shape[1] else M
    position = np.full((F, C), np.nan)
    turn = np.full((F, C), np.nan)
    floor = np.full((F, C), np.nan)
    reached = np.ones((F, C), dtype=bool)
    worlds = reader.magnitudes(scale)

    def frame_of(endpoint):
        if endpoint.segment < 0:
            return objects[:, endpoint.obj] @ endpoint.offset
        j = at[endpoint.segment]
        out = rotation[:, j] @ endpoint.offset                 # the bone's axes, turned by the offset
        out[:, :, 3] = M[:, j] @ endpoint.offset[:, 3]          # the point where Blender puts it
        return out

    with np.errstate(invalid="ignore"):
        for c, task in enumerate(reader.tasks):
            ends = [frame_of(e) for e in task.endpoints()]
            p, r, asks, per_length, per_turn = task.errors(ends)
            objects_at = [e.obj for e in task.endpoints() if e.obj >= 0]
            R = np.maximum.reduce([np.linalg.norm(T[:, :3, 3], axis=-1) for T in ends]
                                  + [np.full(F, reader.extent[c])] + [worlds[:, k] for k in objects_at])
            p_floor, r_floor = float32_floor(reader.depth[c], R)
            r_floor = per_turn * r_floor + per_length * p_floor     # a rotation read off positions too
            missed = (p > precision + p_floor) | (r > precision + r_floor)   # NaN (no such part): never missed
            reached[:, c] = ~missed | ~asks
            position[:, c] = p * scale
            turn[:, c] = r
            floor[:, c] = p_floor * scale
    for array in (position, turn, floor):
        array[~verified] = np.nan
    driven = len(reader.rig.driven)
    for c in unjudged:
        reached[:, c] = True
        reached[:, driven:][:, np.asarray(reader.rig.pole_of) == c] = True
    reached[~verified] = False
    pole = np.full((F, driven), np.nan)
    pole[:, reader.rig.pole_of] = turn[:, driven:]
    return Measured(position[:, :driven], turn[:, :driven], reached, verified.copy(), floor[:, :driven], pole)

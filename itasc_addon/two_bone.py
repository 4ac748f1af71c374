"""The exact fast path: a chain of two bones under one IK constraint on position alone, with
nothing else acting on it, is solved in closed form (`solver.analytic.two_bone_ik`), all frames
in one batch, instead of by the iterative engine. Results say which ran (`SOLVER_PATH`, their `solver_path`).

Eligibility is decided from plain facts (`Facts`, read by `read_facts`) by the pure function
`why_not`, which returns '' for an eligible rig and otherwise the reason it is not:

    animation mode (simulation mode steps through time, velocity-bounded: the engine's job);
    exactly one driven IK constraint, Copy Pose on all three location axes and no rotation axis
    (Use Rotation off, or on with no axis enabled);
    its chain exactly two bones, the second the child of the first, in one group (one root);
    no IK stretch in effect, no IK limits, no locked IK axes, no stiffness, no IK rotation
    control in effect (on with weight > 0), the second bone inheriting its parent's rotation;
    connected: the second bone's head at the first bone's tail at rest (within CONNECT_TOLERANCE
    of the chain's reach) and in the pose (`pose_reason`: no pose location on the second bone and
    no pose scale on either, at every frame solved);
    no other armature linked: neither the target nor the pole is another armature or its bone,
    and the pole is not a bone of this armature (a target bone of this armature is read per frame
    by the rig's sampler like any target).

Influence below 1 is kept: the target is blended as for the engine (`solving.blend_targets`).

The solve (`solve`), in armature space per frame. The root is the first bone's head, base @ rest
of the first bone (its parent's pose and its own pose location included, as the engine has it);
l1 = the distance from the first bone's head to the second's at rest, l2 = the second bone's
length. The bend plane:

* with a pole target, as Blender's IK places it (its Standard solver turns the chain, as posed
  before solving, about the root so that the root->tail line points at the target and the first
  bone's "up" axis, X cos(pole_angle) + Z sin(pole_angle), points across that line at the pole,
  then only bends it in its plane): in the first bone's frame of the pose being solved, take the
  line t to the tail, "up" made perpendicular to t, and the bend side s = n_loc x t (n_loc: the
  bend axis of that pose, from the second bone's direction relative to the first; for a straight
  pose, the rest pose's; for a straight rest pose, the first bone's -X: a straight chain bends as a
  positive X rotation of its second bone bends it). With psi the angle from "up" to s about t,
  w = R_u(psi) p, p the unit pole direction across u and R_u a right-handed turn about u. So
  pole_angle turns the bend plane about the root->target axis, and a chain whose elbow sticks out
  along its first bone's -Z (+Z) puts it toward the pole at pole_angle -90 (+90) degrees, as
  Blender's own IK does. A pole on
  the root->target line (or an "up" along t) falls back to the rule without a pole.
* without a pole, the bend stays on the side it has now: w = the elbow's current offset from the
  root->target line (the pose being solved); if the elbow sits on that line (within 1e-6 rad),
  w = n x u with n the bend axis n_loc above in armature space (so a chain straight now and at rest
  bends its elbow toward its first bone's -Z); if that is along u too, `two_bone_ik`'s own
  deterministic choice (the world axis least aligned with u).

Rotations: each bone turns by the shortest arc that takes its current direction (in the pose being
solved; the rest direction for a rig at rest) to its new one, so no twist about the bone is added
and any keyed twist is kept: R_new = arc(R_now c, d_new) @ R_now, in the frame the bone's pose
rotation acts in. Exactly opposite directions turn by pi about the bone's X axis made
perpendicular (or Z). Blender's rest matrices are float32, orthonormal only to ~1e-7, and so is the
model built on them: the closed form lands within ~1e-7 of the target, so reachable frames aim
again at the target moved by the miss (the miss shrinks ~1e7-fold per pass; at most 3 passes).
The rotations are written like the engine's (rotation mode respected, keys
through `keys`); the report (errors, converged, smallest singular value) comes from the engine's
own evaluation of the written pose, so it reads exactly as the iterative path's. Unreachable
targets get the chain straight toward the target (or folded, inside |l1 - l2|), not converged.
Iterations are 0: nothing iterates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import solver
from ..solver.analytic import two_bone_ik
from ..solver.bones import coordinates_from_basis
from ..solver.geometry import dot, unit
from ..solver.rotations import exp_map
from ..solver.update import reached
from . import rig as rig_module
from .rig.sampling import unscaled_points

SOLVER_PATH = "analytic two-bone"
CONNECT_TOLERANCE = 1e-6     # gap between the second head and the first tail, relative to the reach
SCALE_TOLERANCE = 1e-6       # pose scale this close to 1 counts as unscaled (keys are float32)
_TINY = 1e-9                 # relative size below which a direction is taken as undefined
_ON_LINE = 1e-6              # sine of the angle below which the elbow counts as on the root->target
                             # line (Blender's float32 data blurs the side of a straight chain)


@dataclass(frozen=True)
class BoneFacts:
    """What matters about one chain bone (True: the setting is in effect)."""

    name: str
    limits: bool = False
    locks: bool = False
    stiffness: bool = False
    stretch: bool = False
    rotation_control: bool = False
    inherit_rotation: bool = True


@dataclass(frozen=True)
class Facts:
    """What decides the fast path, as plain values (see the module docstring)."""

    mode: str = "ANIMATION"
    constraints: int = 1               # driven IK constraints
    kind: str = "COPY_POSE"
    position: tuple = (True, True, True)
    rotation: tuple = (False, False, False)
    chain: tuple = ()                  # BoneFacts, root first
    parented: bool = True              # the second bone's parent is the first
    groups: int = 1
    rest_gap: float = 0.0              # |second head - first tail| at rest / reach
    linked: str = ""                   # what links another armature (or this one's bone as pole)


def why_not(facts: Facts) -> str:
    """'' when the two-bone fast path applies, else why not (one reason, the first found)."""
    if str(facts.mode).upper() != "ANIMATION":
        return "simulation mode"
    if facts.constraints != 1:
        return f"{facts.constraints} driven IK constraints"
    if facts.kind != "COPY_POSE":
        return f"{facts.kind.lower()} constraint"
    if not all(facts.position):
        return "not all three location axes"
    if any(facts.rotation):
        return "rotation is constrained"
    if len(facts.chain) != 2:
        return f"a chain of {len(facts.chain)} bone(s)"
    if not facts.parented or facts.groups != 1:
        return "the two bones are not parent and child"
    for bone in facts.chain:
        for what, label in (("stretch", "IK stretch"), ("limits", "IK limits"), ("locks", "locked IK axes"),
                            ("stiffness", "IK stiffness"), ("rotation_control", "IK rotation control")):
            if getattr(bone, what):
                return f"{label} on '{bone.name}'"
    if not facts.chain[1].inherit_rotation:
        return f"'{facts.chain[1].name}' does not inherit rotation"
    if not facts.rest_gap <= CONNECT_TOLERANCE:
        return f"'{facts.chain[1].name}' does not start at the tail of '{facts.chain[0].name}'"
    if facts.linked:
        return facts.linked
    return ""


def pose_reason(basis, names=("first bone", "second bone")) -> str:
    """'' when the pose keeps the chain connected at every frame: basis (F, 2, 4, 4), the two
    bones' matrix_basis; the second bone has no pose location and neither bone a pose scale."""
    basis = np.asarray(basis, float)
    scale = np.linalg.norm(basis[:, :, :3, :3], axis=-2)
    for s in range(2):
        if np.any(np.abs(scale[:, s] - 1.0) > SCALE_TOLERANCE):
            return f"'{names[s]}' is scaled in the pose"
    if np.any(np.abs(basis[:, 1, :3, 3]) > 0.0):
        return f"'{names[1]}' has a pose location"
    return ""


# --- reading the facts from Blender --------------------------------------------------------------

def _constraint(obj, driven):
    return obj.pose.bones[driven.bone].constraints[driven.name]


def _linked(obj, con):
    for what, target, sub in (("target", con.target, con.subtarget), ("pole", con.pole_target, con.pole_subtarget)):
        if target is None:
            continue
        if target == obj and what == "target":
            continue                    # a bone of this armature, read per frame like any target
        if target == obj:
            return f"the {what} is a bone of this armature"
        if target.type == "ARMATURE":
            return f"linked to armature '{target.name}' ({what})"
    return ""


def read_facts(rig, obj, mode) -> Facts:
    """The facts `why_not` decides on, for a rig read by `rig.read_rig`."""
    chain = []
    for name in rig.bones:
        pb = obj.pose.bones[name]
        chain.append(BoneFacts(
            name=name,
            limits=any(getattr(pb, f"use_ik_limit_{a}") for a in "xyz"),
            locks=any(getattr(pb, f"lock_ik_{a}") for a in "xyz"),
            stiffness=any(getattr(pb, f"ik_stiffness_{a}") > 0.0 for a in "xyz"),
            stretch=name in rig.stretch_coordinate,
            rotation_control=bool(pb.use_ik_rotation_control and pb.ik_rotation_weight > 0.0),
            inherit_rotation=bool(pb.bone.use_inherit_rotation)))
    con = _constraint(obj, rig.driven[0]) if rig.driven else None
    position = rotation = (False,) * 3
    if con is not None and con.ik_type == "COPY_POSE":
        position = tuple(bool(con.use_location and getattr(con, f"lock_location_{a}")) for a in "xyz")
        rotation = tuple(bool(con.use_rotation and getattr(con, f"lock_rotation_{a}")) for a in "xyz")
    parented, gap = False, np.inf
    if len(rig.bones) == 2:
        first, second = (obj.data.bones[n] for n in rig.bones)
        parented = second.parent is not None and second.parent.name == first.name
        reach = first.length + second.length
        if reach > 0:
            gap = float(np.linalg.norm(np.subtract(second.head_local, first.tail_local))) / reach
    return Facts(mode=str(mode), constraints=len(rig.driven), kind=rig.driven[0].kind if rig.driven else "",
                 position=position, rotation=rotation, chain=tuple(chain), parented=parented,
                 groups=len(rig.groups), rest_gap=gap, linked=_linked(obj, con) if con is not None else "")


@dataclass(frozen=True)
class Plan:
    """An eligible rig: where its pole comes from (object name or None) and the pole angle."""

    pole: str | None = None
    pole_angle: float = 0.0


def plan_for(rig, obj, mode):
    """(Plan, '') when the fast path applies to this rig and mode, else (None, reason)."""
    reason = why_not(read_facts(rig, obj, mode))
    if reason:
        return None, reason
    con = _constraint(obj, rig.driven[0])
    pole = con.pole_target.name if con.pole_target is not None else None
    return Plan(pole, float(con.pole_angle) if pole else 0.0), ""


class Sampler(rig_module.Sampler):
    """The rig's sampler that also reads the pole target's position in armature space."""

    def __init__(self, rig, obj, frames, plan: Plan):
        super().__init__(rig, obj, frames)
        self.pole = plan.pole
        self.poles = np.full((len(self.frames), 3), np.nan)      # in armature space, set by samples()
        self.pole_world = np.full((len(self.frames), 3), np.nan)
        if self.pole is not None and self.pole not in self._bpy.data.objects:
            raise rig_module.RigError(f"pole target '{self.pole}' no longer exists")

    def read(self, i):
        super().read(i)
        if self.pole is not None:
            depsgraph = self._bpy.context.evaluated_depsgraph_get()
            self.pole_world[i] = self._bpy.data.objects[self.pole].evaluated_get(depsgraph).matrix_world.translation

    def samples(self):
        samples = super().samples()
        if self.pole is not None:
            to_armature = np.linalg.inv(self.world)
            self.poles = np.einsum("fij,fj->fi", to_armature[:, :3, :3], self.pole_world) + to_armature[:, :3, 3]
            g = self.rig.constraint_groups[0]
            if np.any(samples.base_scale[:, g] != 1.0):        # moved as the target is
                self.poles = unscaled_points(self.poles, samples.bases[:, g], samples.base_scale[:, g])
        return samples


# --- the solve -------------------------------------------------------------------------------------

def _apply(R, v):
    return np.einsum("...ij,...j->...i", R, v)


def _turn(axis, v, angle):
    """v turned by `angle` about the unit `axis` (Rodrigues; v across the axis)."""
    angle = np.asarray(angle, float)[..., None]
    return np.cos(angle) * v + np.sin(angle) * np.cross(axis, v)


def shortest_arc(a, b, fallback):
    """Rotations (..., 3, 3) taking unit a to unit b about a x b (the shortest arc), from the
    quaternion (a.h, a x h) of the half-way vector h; exactly opposite vectors turn by pi about
    `fallback` made perpendicular to a."""
    h, size = unit(a + b)
    opposite = size <= 1e-12
    if np.any(opposite):
        f = fallback - dot(fallback, a)[..., None] * a
        f = np.where((np.linalg.norm(f, axis=-1) > 1e-6)[..., None], f, np.cross(a, [0.0, 0.0, 1.0]))
        h = np.where(opposite[..., None], unit(f)[0], h)
    w = dot(a, h)
    x, y, z = np.moveaxis(np.cross(a, h), -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def _bend_axis_local(c, second_now, second_rest):
    """The bend axis n_loc in the first bone's frame (see the module docstring): from the second
    bone's direction now, else at rest, else the first bone's -X; perpendicular to c."""
    now, size_now = unit(-np.cross(c, second_now))
    rest, size_rest = unit(-np.cross(c, second_rest))
    minus_x = np.array([-1.0, 0.0, 0.0]) - (-c[0]) * c
    minus_x /= np.linalg.norm(minus_x)
    out = np.where((size_rest > _TINY)[..., None], rest, minus_x)
    return np.where((size_now > _TINY)[..., None], now, out)


def solve(rig, plan: Plan, samples, q0, objects, poles, scene, settings):
    """Solve every frame of an eligible rig at once. Returns (solver.Result, rotations (F, 2, 3, 3))
    to write as the two bones' pose rotations."""
    start = time.perf_counter()
    m = rig.model
    F = len(samples.frames)
    B0 = samples.bases[:, 0] @ m.rest[0]
    root, A0 = B0[:, :3, 3], B0[:, :3, :3]
    offset = m.rest[1][:3, 3]
    l1 = float(np.linalg.norm(offset))
    c = offset / l1
    S1 = m.rest[1][:3, :3]
    l2 = float(m.length[1])
    R0, R1 = (exp_map(q0[:, m.coordinates_of(s)]) for s in (0, 1))      # one sphere joint per bone
    frame0 = A0 @ R0                                    # the first bone's frame in the pose now
    second_local = _apply(S1 @ R1, [0.0, 1.0, 0.0])     # second bone's direction, first bone's frame
    n_loc = _bend_axis_local(c, second_local, S1[:, 1])
    target = objects[:, rig.driven[0].target, :3, 3]
    u, distance = unit(target - root)

    # Without a pole: the elbow's offset from the root->target line, else the bend axis turned.
    elbow = _apply(frame0, c)                            # unit direction root->elbow now
    across = elbow - dot(elbow, u)[..., None] * u
    w, size = unit(across)
    from_axis, size_axis = unit(np.cross(_apply(frame0, n_loc), u))
    w = np.where((size > _ON_LINE)[..., None], w, np.where((size_axis > _TINY)[..., None], from_axis, 0.0))

    if plan.pole is not None:
        # In the first bone's frame: the line to the tail now, the pole's "up" across it, and the bend
        # side across it; the bend side keeps its angle from "up" once the line is turned onto u.
        line, _ = unit(offset + l2 * second_local)
        up = np.array([np.cos(plan.pole_angle), 0.0, np.sin(plan.pole_angle)])
        up, up_size = unit(up - dot(up, line)[..., None] * line)
        side, side_size = unit(np.cross(n_loc, line))
        psi = np.arctan2(dot(line, np.cross(up, side)), dot(up, side))
        p = poles - root
        p_across, p_size = unit(p - dot(p, u)[..., None] * u)
        use = ((p_size > _TINY * np.linalg.norm(p, axis=-1)) & (distance > 0.0)
               & (up_size > _TINY) & (side_size > _TINY))
        w = np.where(use[..., None], _turn(u, p_across, psi), w)

    def pose(goal):
        """The two bones' new pose rotations for the chain two_bone_ik finds toward `goal`, and
        where that pose puts the tail (the model's own forward kinematics)."""
        ik = two_bone_ik(root, l1, l2, goal, w, pole_is_point=False)
        d1, _ = unit(np.linalg.solve(A0, ik.dir1[..., None])[..., 0])     # in the frame R0 acts in
        new0 = shortest_arc(_apply(R0, c), d1, R0[:, :, 0]) @ R0
        M1 = A0 @ new0 @ S1
        d2, _ = unit(np.linalg.solve(M1, ik.dir2[..., None])[..., 0])
        new1 = shortest_arc(R1[:, :, 1], d2, R1[:, :, 0]) @ R1
        tail = root + _apply(A0 @ new0, offset) + l2 * (M1 @ new1)[:, :, 1]
        return ik, new0, new1, tail

    # Float32 rest matrices: aim again at the target moved by the miss (module docstring).
    goal = target.copy()
    for _ in range(3):
        ik, new0, new1, tail = pose(goal)
        miss = target - tail
        if not np.any(ik.reachable) or np.max(np.abs(miss[ik.reachable])) <= 1e-13 * (l1 + l2):
            break
        goal = np.where(ik.reachable[:, None], goal + miss, goal)
    rotations = np.stack([new0, new1], axis=1)

    basis = np.tile(np.eye(4), (F, 2, 1, 1))
    basis[:, :, :3, :3] = rotations
    q = coordinates_from_basis(rig.model, basis)
    ev = scene.evaluate(q, objects, samples.bases)
    Aw = np.sqrt(ev.task_weight)[..., None] * ev.A * scene.joint_weight
    sigma_min = np.linalg.svd(Aw, compute_uv=False)[:, -1]
    result = solver.Result(q=q, position_error=ev.position_error, rotation_error=ev.rotation_error,
                           iterations=np.zeros(F, dtype=int), converged=reached(scene, ev, settings.precision),
                           sigma_min=sigma_min, seconds=time.perf_counter() - start, constraint_names=list(scene.names))
    return result, rotations

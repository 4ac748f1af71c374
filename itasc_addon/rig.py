"""Read an armature as it is into the engine's terms, and turn solved coordinates back into poses.

Everything runs in the armature object's own space: the solver sees bones at their rest matrices
(``Bone.matrix_local``), targets as world matrices brought into that space (a bone target, of this
armature or another, at its evaluated head with its orientation: where Blender's IK aims), and
the whole model with identity bases except where a chain hangs from a bone we do not solve.

The model holds the union of all driven chains. A chain runs from the constraint's bone (its
parent when "Use Tail" is off) up ``chain_count`` bones (0: to the root). Bones of the union whose
parent is outside it start a *group*; each group is one "armature" of the engine, whose base
frame is read from Blender at every frame, so a chain follows whatever moves its parent (and the
group root's own pose location):

    base = M_root @ basis_root^-1 @ T(location_root) @ rest_root^-1

where M_root is the root's evaluated pose matrix. Solved bones get their rotation (and, with IK
stretch, a uniform scale: `chain_bones`) from the solver; their location stays as animated.

Nothing here writes to Blender data except `apply_pose`, which sets pose bones' matrices.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field

import numpy as np

from .. import solver
from ..solver.bones import itasc_stretch_weight
from ..solver.kinematics import segment_motions
from ..solver.rotations import quaternion_from_matrix
from . import chain_bones, dependencies, pose_channels

# Blender's IK follows a pole only on a chain that shares no bone with another IK constraint's, and
# (Standard IK) with Use Location on and weight > 0; where it does not, neither does ours.
POLE_IGNORED = ("Blender's IK ignores this pole (the chain shares bones with another IK constraint, or the "
                "constraint has no location part); so does the solver")
LIMIT_MODES = {"LIMITDIST_INSIDE": "inside", "LIMITDIST_OUTSIDE": "outside", "LIMITDIST_ONSURFACE": "surface"}


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
    def constraint_groups(self):
        """Per driven constraint, the index of the chain group (engine armature) its effector is on."""
        roots = [root for root, _ in self.groups]
        out = []
        for d in self.driven:
            s = self.model.index(d.tip)
            while self.model.parent[s] >= 0:
                s = self.model.parent[s]
            out.append(roots.index(self.model.names[s]))
        return np.array(out, dtype=int)

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


def _chain(obj, con, pb, warnings):
    """The bone names of a constraint's chain, tip first, and the tip bone's name."""
    tip = pb if con.use_tail else pb.parent
    if tip is None:
        raise RigError(f"IK constraint '{con.name}' on bone '{pb.name}' has no chain: "
                       "'Use Tail' is off and the bone has no parent")
    chain, bone = [], tip
    limit = con.chain_count if con.chain_count > 0 else 1 << 30
    while bone is not None and len(chain) < limit:
        chain.append(bone.name)
        bone = bone.parent
    if con.chain_count > len(chain):
        warnings.append(f"'{pb.name}/{con.name}': chain length {con.chain_count} is longer than the chain "
                        f"({len(chain)} bone(s) from '{tip.name}' to the root); the whole chain is solved")
    return chain, tip.name


def _node_label(obj, node):
    """How a message names an object or a bone: 'name', or 'armature:bone' for another armature's bone."""
    if isinstance(node, tuple):
        ob, bone = node
        return bone if ob == obj else f"{ob.name}:{bone}"
    return node.name


def _target(obj, con, bone_name, pole=False):
    """The Target of a constraint's target (or its pole, `pole`), or None when it has none.
    A bone target is read where Blender's IK aims: the bone's head, with the bone's orientation."""
    what = "pole target" if pole else "target"
    target = con.pole_target if pole else con.target
    sub = con.pole_subtarget if pole else con.subtarget
    if target is None:
        return None
    if target.type == "ARMATURE" and sub:
        if target.pose is None or sub not in target.pose.bones:
            raise RigError(f"IK constraint '{con.name}' on bone '{bone_name}': {what} bone "
                           f"'{sub}' is not in '{target.name}'")
        return Target(target.name, sub)
    if target == obj:
        raise RigError(f"IK constraint '{con.name}' on bone '{bone_name}': its {what} is its own armature "
                       "object; pick a bone of it (Bone field) or another object")
    return Target(target.name)


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


def engine_bone(obj, name, stretch_allowed):
    """A solver Bone from a bone's rest data and its pose bone's IK settings; a Limit Rotation the
    reader models (chain_bones.limit_rotation) narrows the IK limits."""
    bone, pb = obj.data.bones[name], obj.pose.bones[name]
    limits = []
    for axis, constraint in zip("xyz", chain_bones.limit_rotation(pb)):
        limit = constraint
        if getattr(pb, f"use_ik_limit_{axis}"):
            lo, hi = float(getattr(pb, f"ik_min_{axis}")), float(getattr(pb, f"ik_max_{axis}"))
            limit = (min(lo, 0.0), max(hi, 0.0))
            if constraint is not None:
                limit = (max(limit[0], constraint[0]), min(limit[1], constraint[1]))
                if limit[0] > limit[1]:
                    raise RigError(f"bone '{name}': its IK limits and its Limit Rotation constraint leave no "
                                   f"{axis.upper()} rotation between them; widen one of them")
        limits.append(limit)
    return solver.Bone(
        name=name,
        matrix=np.array(bone.matrix_local, dtype=float),
        length=float(bone.length),
        parent=bone.parent.name if bone.parent else None,
        lock=(pb.lock_ik_x, pb.lock_ik_y, pb.lock_ik_z),
        limits=tuple(limits),
        stiffness=tuple(min(max(float(getattr(pb, f"ik_stiffness_{a}")), 0.0), 1.0) for a in "xyz"),
        stretch=float(pb.ik_stretch) if stretch_allowed else 0.0,
        stretch_weight=itasc_stretch_weight(pb.ik_stretch) if stretch_allowed else None,
    )


def read_rig(obj, drives=None, *, measure=False, poles_of=None, rigid=()) -> Rig:
    """The engine scene for the armature object `obj`.

    drives(pose_bone, constraint) -> bool says which IK constraints the solver drives (default:
    all that are not muted). Constraints without a target, with influence 0 or with nothing to
    control are left out with a warning; a rig with no constraint left is an error.

    The steps: pick the driven constraints and their chains, leave out (with a warning) those whose
    target, pole or chain's parent moves with the solve and those whose chain holds a bone with
    something on it the solver does not model (`_solvable`), build the Model of the chains' union
    (one engine armature per group), one task per constraint aimed at its own engine object, and
    the stretch coordinates and scale inheritance.

    `measure`: the rig is read to measure Blender's evaluation of the constraints (`verify`), not
    to solve them: none is left out for what the solver does not model. poles_of(bone, constraint
    name) -> bool: whose poles get a pole task (default: every one the solver follows). `rigid`:
    bones the solver does not stretch (`rig_order.Order.rigid`).
    """
    if obj is None or obj.type != "ARMATURE":
        raise RigError("select an armature object")
    warnings = []
    scale = object_scale(evaluated_world(obj), f"armature '{obj.name}'")
    picked = _picked(obj, drives or (lambda pb, con: not con.mute), warnings)
    if not measure:
        picked = _solvable(obj, picked, warnings)
    in_model, stretchy = _union(picked)
    groups, model = _model(obj, in_model, stretchy - set(rigid))
    _warn_pose_locations(obj, model, in_model, warnings)
    constraints, targets, driven, chains = _tasks(obj, model, picked, warnings)
    poles, pole_of = _pole_tasks(model, constraints, driven, chains, len(targets), warnings, poles_of)
    stretch_coordinate = _stretch_coordinates(model)
    parents = chain_bones.scale_parents(obj, model.names)
    scaled = [name for s, name in enumerate(model.names)
              if name in stretch_coordinate or (parents[s] >= 0 and model.names[parents[s]] in stretch_coordinate)]
    scene = solver.Scene(model, constraints + poles, n_objects=len(targets) + len(poles))
    return Rig(obj.name, scene, list(model.names), groups, driven, targets, stretch_coordinate, scale, warnings,
               {pb.name: i for i, pb in enumerate(obj.pose.bones)}, parents, scaled, pole_of)


def _picked(obj, drives, warnings):
    """(pose bone, constraint, chain, tip) of every driven IK constraint that has something to do."""
    picked = []
    for pb, con in ik_constraints(obj):
        if not drives(pb, con):
            continue
        if con.target is None:
            warnings.append(f"'{pb.name}/{con.name}' has no target: left out")
            continue
        if con.influence <= 0.0:
            warnings.append(f"'{pb.name}/{con.name}' has influence 0: left out")
            continue
        if con.ik_type == "COPY_POSE" and not (con.use_location or con.use_rotation):
            warnings.append(f"'{pb.name}/{con.name}' uses neither location nor rotation: left out")
            continue
        chain, tip = _chain(obj, con, pb, warnings)
        picked.append((pb, con, chain, tip))
    if not picked:
        raise RigError(f"armature '{obj.name}' has no IK constraint to drive"
                       + (f" ({'; '.join(warnings)})" if warnings else ""))
    return picked


def _solvable(obj, picked, warnings):
    """`picked` less the constraints the solver cannot follow as Blender will show them, each left
    out with a warning: those whose target or pole, or the bone their chain hangs from, depends on
    a bone the solve moves (`dependencies`: a dependency cycle, each key would move them again),
    and those whose chain holds a bone with something on it the solver does not model
    (`chain_bones.problems`). Leaving one out solves fewer bones, so this repeats until nothing changes."""
    walker = dependencies.Walker()
    kept = list(picked)
    while True:
        in_model, stretchy = _union(kept)
        stretchy = {name for name in stretchy if obj.pose.bones[name].ik_stretch > 0.0}
        roots = {name for name in in_model if (p := obj.data.bones[name].parent) is None or p.name not in in_model}
        problems = chain_bones.problems(obj, in_model, stretchy, roots, walker)
        solved = {(obj.as_pointer(), name) for name in in_model}
        still = []
        for pb, con, chain, tip in kept:
            reason = _cycle_reason(obj, walker, con, chain, in_model, solved)
            bad = next((name for name in chain if name in problems), None)
            if reason:
                warnings.append(f"'{pb.name}/{con.name}': {reason}, which this solve moves (a dependency cycle): "
                                "left out")
            elif bad is not None:
                warnings.append(f"'{pb.name}/{con.name}': {problems[bad]}: left out")
            else:
                still.append((pb, con, chain, tip))
        if len(still) == len(kept):
            break
        kept = still
    if not kept:
        raise RigError(f"armature '{obj.name}' has no IK constraint to drive ({'; '.join(warnings)})")
    return kept


def _cycle_reason(obj, walker, con, chain, in_model, solved):
    """Why a constraint's inputs move with the solve ('' when they do not)."""
    for what, target, sub in (("target", con.target, con.subtarget), ("pole target", con.pole_target,
                                                                        con.pole_subtarget)):
        start = dependencies.node(target, sub)
        if start is None:
            continue
        found = walker.depends_on(start, solved)
        if found is not None:
            return f"its {what} '{_node_label(obj, start)}' moves with bone '{found[1]}'"
    parent = obj.pose.bones[chain[-1]].parent
    while parent is not None and parent.name in in_model:
        parent = parent.parent
    if parent is not None:
        found = walker.depends_on((obj, parent.name), solved)
        if found is not None:
            return f"its chain hangs from bone '{parent.name}', moving with bone '{found[1]}'"
    return ""


def _union(picked):
    """The union of the chains' bones, and those that stretch (where any chain through them allows)."""
    in_model, stretchy = set(), set()
    for pb, con, chain, tip in picked:
        in_model.update(chain)
        if con.use_stretch:
            stretchy.update(chain)
    return in_model, stretchy


def _model(obj, in_model, stretchy):
    """(groups, Model) of the bones `in_model`, in the armature's bone order: bones whose parent is
    outside start a group, one engine armature each, listed as (root bone, its parent or None)."""
    names = [b.name for b in obj.data.bones if b.name in in_model]
    groups, members = [], {}
    for name in names:
        bone = obj.data.bones[name]
        root = bone
        while root.parent is not None and root.parent.name in in_model:
            root = root.parent
        if root.name not in members:
            groups.append((root.name, root.parent.name if root.parent else None))
            members[root.name] = []
        members[root.name].append(name)
    bones_per_group = []
    for root, _ in groups:
        group = []
        for name in members[root]:
            b = engine_bone(obj, name, name in stretchy and not chain_bones.holds_scale(obj.pose.bones[name]))
            if name == root:
                b = solver.Bone(b.name, b.matrix, b.length, None, b.lock, b.limits, b.stiffness, b.stretch,
                                b.stretch_weight)
            group.append(b)
        bones_per_group.append(group)
    try:
        model = solver.combine(bones_per_group, names=[root for root, _ in groups])
    except ValueError as err:
        raise RigError(f"armature '{obj.name}': {err}") from None
    return groups, model


def _warn_pose_locations(obj, model, in_model, warnings):
    """Non-root chain bones keep their rest head: a pose location there is not modelled."""
    for name in model.names:
        bone = obj.data.bones[name]
        if bone.parent is not None and bone.parent.name in in_model and not bone.use_connect:
            if any(abs(v) > 1e-9 for v in obj.pose.bones[name].location):
                warnings.append(f"bone '{name}' has a pose location inside an IK chain; the solver keeps "
                                "it at its rest offset")


def _tasks(obj, model, picked, warnings):
    """(tasks, Target per engine object, Driven per task): one engine object per constraint
    (targets are not shared: influence blends each on its own)."""
    targets, constraints, driven, chains = [], [], [], []
    for i, (pb, con, chain, tip) in enumerate(picked):
        k = len(targets)
        shared = any(set(chain) & set(other[2]) for j, other in enumerate(picked) if j != i)
        task = _task(con, model, tip, k, f"{pb.name}/{con.name}", warnings, shared)
        if task is None:
            continue
        constraints.append(task)
        chains.append(chain)
        targets.append(_target(obj, con, pb.name))
        pole = _target(obj, con, pb.name, pole=True)
        driven.append(Driven(pb.name, con.name, con.ik_type, tip, k, float(min(con.influence, 1.0)), pole,
                             float(con.pole_angle) if pole is not None else 0.0))
    if not constraints:
        raise RigError(f"armature '{obj.name}' has no IK constraint to drive ({'; '.join(warnings)})")
    return constraints, targets, driven, chains


def _pole_tasks(model, constraints, driven, chains, n_targets, warnings, wanted=None):
    """(Pole tasks, the driven constraint of each): a constraint's pole where Blender's IK follows
    it (see POLE_IGNORED), aimed at engine object n_targets + i (Samples.objects appends the poles
    in this order). The pole turns the chain's root bone about the line from its head to the
    target, as Blender's pole_angle says (solver.tasks.pole)."""
    poles, pole_of = [], []
    for c, d in enumerate(driven):
        if d.pole is None or (wanted is not None and not wanted(d.bone, d.name)):
            continue
        alone = not any(set(chains[c]) & set(chains[other]) for other in range(len(driven)) if other != c)
        task = constraints[c]
        if not (alone and d.kind == "COPY_POSE" and task.has_position and task.task_weight[0] > 0.0):
            warnings.append(f"'{d.bone}/{d.name}': {POLE_IGNORED}")
            continue
        root = solver.on_segment(model.index(chains[c][-1]))
        poles.append(solver.Pole(root, task.effector, task.target, solver.on_object(n_targets + len(poles)),
                                 pole_angle=d.pole_angle, name=f"{d.bone}/{d.name}/pole"))
        pole_of.append(c)
    return poles, pole_of


def _task(con, model, tip, k, label, warnings, shared=False):
    """The engine task of one IK constraint on the tail of `tip`, aimed at engine object k (None,
    with a warning, when it constrains no axis)."""
    s = model.index(tip)
    effector = solver.on_segment(s, (0.0, model.length[s], 0.0))
    if con.ik_type == "DISTANCE":
        return solver.Distance(effector, solver.on_object(k), radius=float(con.distance),
                               mode=LIMIT_MODES.get(con.limit_mode, "inside"), weight=float(con.weight), name=label)
    # Despite their names, lock_location_x / lock_rotation_x say the axis *is* constrained
    # (RNA: "Constraint position along X axis"); Blender's default is all three on.
    position = tuple(con.use_location and getattr(con, f"lock_location_{a}") for a in "xyz")
    rotation = tuple(con.use_rotation and getattr(con, f"lock_rotation_{a}") for a in "xyz")
    if not any(position + rotation):
        warnings.append(f"'{label}' constrains no axis: left out")
        return None
    # iTaSC weighs a task's rows by the constraint's weight (w^2 in a least-squares cost) and clamps
    # its position error at half the mean bone length from the tip up (solver.CopyPose, clamp). The
    # clamp only moves where tasks that share bones balance; alone, a task keeps the plain error.
    clamp = None
    if shared:
        lengths, bone = [], s
        while bone >= 0:
            lengths.append(model.length[bone])
            bone = model.parent[bone]
        clamp = 0.5 * float(np.mean(lengths))
    return solver.CopyPose(effector, solver.on_object(k), position=position, rotation=rotation,
                           reference="effector" if con.reference_axis == "BONE" else "target",
                           weight=float(con.weight) ** 2, orient_weight=float(con.orient_weight) ** 2, name=label,
                           clamp=clamp)


def _stretch_coordinates(model):
    """bone name -> the coordinate index of its stretch (its prismatic joint)."""
    out = {}
    for j, joint in enumerate(model.joints):
        if joint.kind == "prismatic":
            out[model.names[model.joint_segment[j]]] = int(model.joint_first[j])
    return out


# --- telling whether a rig changed --------------------------------------------------------------

_CONSTRAINT_FIELDS = operator.attrgetter(
    "influence", "ik_type", "use_tail", "chain_count", "use_stretch", "use_location", "use_rotation",
    "lock_location_x", "lock_location_y", "lock_location_z", "lock_rotation_x", "lock_rotation_y", "lock_rotation_z",
    "reference_axis", "weight", "orient_weight", "distance", "limit_mode", "subtarget", "pole_subtarget", "pole_angle")
# How a bone follows its parent: the sampler's remembered bases rely on it staying the same.
_INHERITANCE = operator.attrgetter("use_connect", "use_inherit_rotation", "inherit_scale", "use_local_location")
_BONE_FIELDS = operator.attrgetter(
    "lock_ik_x", "lock_ik_y", "lock_ik_z", "use_ik_limit_x", "use_ik_limit_y", "use_ik_limit_z", "ik_min_x",
    "ik_max_x", "ik_min_y", "ik_max_y", "ik_min_z", "ik_max_z", "ik_stiffness_x", "ik_stiffness_y", "ik_stiffness_z",
    "ik_stretch", "use_ik_rotation_control", "ik_rotation_weight", "use_ik_linear_control", "ik_linear_weight")


def _name(ob):
    return None if ob is None else ob.name


def _target_signature(obj, target, subtargets=()):
    """What `_target` and `_cycle` read of a target: the object, its parents and their constraints,
    whether the bones `subtargets` (names) are in it; and whether it hangs from the armature (then
    the cycle test reads the armature's bone hierarchy)."""
    items, seen, hangs = [], set(), False
    ob = target
    while ob is not None and (name := ob.name) not in seen:
        seen.add(name)
        parent = ob.parent
        cons = [(c.type, getattr(c, "target", None), getattr(c, "subtarget", ""), c.mute) for c in ob.constraints]
        items.append((name, ob.type, _name(parent), ob.parent_type, ob.parent_bone,
                      tuple((kind, _name(on), sub, mute) for kind, on, sub, mute in cons)))
        hangs = hangs or parent == obj or any(on == obj for _, on, _, _ in cons)
        ob = parent
    if target is not None and target.type == "ARMATURE" and target.pose is not None:
        bones = target.pose.bones
        items.append(tuple(sub in bones for sub in subtargets if sub))       # whether the named bones exist
    return tuple(items), hangs


def rig_signature(obj, drives=None):
    """Everything `read_rig(obj, drives)` reads from Blender that is not the pose (the IK
    constraints, which of them are driven, their targets' hierarchy, the chain bones' rest, IK
    settings, inheritance and other constraints), as one comparable value: while it stays equal,
    so does the rig read (and what live preview's sampler remembers of it). The pose bones'
    rotations and the targets' matrices, which change every frame, are not part of it."""
    drives = drives or (lambda pb, con: not con.mute)
    bones = obj.data.bones
    rest = np.empty(len(bones) * 16, np.float32)
    bones.foreach_get("matrix_local", rest)
    length = np.empty(len(bones), np.float32)
    bones.foreach_get("length", length)
    items = [obj.name, rest.tobytes(), length.tobytes()]
    in_chains, hanging = {}, False
    for pb, con in ik_constraints(obj):
        target, hangs = _target_signature(obj, con.target, (con.subtarget, con.pole_subtarget
                                                            if con.pole_target == con.target else ""))
        hanging = hanging or hangs
        items.append((pb.name, con.name, bool(drives(pb, con)), _name(con.pole_target), _CONSTRAINT_FIELDS(con),
                      target))
        # The chain (from the bone or its parent, chain_count long) and the bone it hangs from.
        bone, count = pb, con.chain_count + 1 if con.chain_count > 0 else 1 << 30
        while bone is not None and count >= 0:
            name, parent = bone.name, bone.parent
            if name not in in_chains:
                in_chains[name] = (_name(parent), _INHERITANCE(bone.bone), _BONE_FIELDS(bone),
                                   chain_bones.signature(bone))
            bone, count = parent, count - 1
    items.append(tuple(in_chains.items()))
    if hanging:
        items.append(tuple((b.name, _name(b.parent)) for b in obj.data.bones))
    return tuple(items)


def with_joint_control(rig: Rig, obj):
    """The rig's scene plus Blender's IK "rotation control" and "linear control" of its bones: a soft
    task holding each controlled joint value at the animated pose's (JointValue, weight
    ik_rotation_weight / ik_linear_weight). The values change from frame to frame: give them to the
    solve as `control_values(scene, q)` of the animated pose. Tasks come after the IK constraints,
    so result columns 0..C-1 stay the IK constraints'."""
    model = rig.model
    extra = []
    for s, name in enumerate(model.names):
        pb = obj.pose.bones[name]
        coords = model.coordinates_of(s)
        stretch = rig.stretch_coordinate.get(name)
        wanted = []
        if pb.use_ik_rotation_control and pb.ik_rotation_weight > 0:
            wanted += [(int(c), float(pb.ik_rotation_weight), True) for c in coords if c != stretch]
        if pb.use_ik_linear_control and pb.ik_linear_weight > 0 and stretch is not None:
            wanted.append((stretch, float(pb.ik_linear_weight), False))
        extra += [solver.JointValue(c, 0.0, min(weight, 1.0), rotational=rotational, name=f"{name}/control")
                  for c, weight, rotational in wanted]
    if not extra:
        return rig.scene
    return solver.Scene(model, list(rig.scene.constraints) + extra, n_objects=rig.scene.n_objects)


def control_values(scene, q):
    """The values (F, control tasks) that `with_joint_control`'s tasks hold at each frame, from the
    animated pose's joint values q (F, n); None without such tasks."""
    if not scene.value_tasks:
        return None
    return q[:, [scene.constraints[k].coordinate for k in scene.value_tasks]]


# --- per-frame samples ------------------------------------------------------------------------

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
        self._modes = np.zeros((F, len(self._read_basis)), dtype=np.int32)
        self._values = np.zeros((F, len(self._read_basis), pose_channels.WIDTH), dtype=np.float32)
        self._raw_matrix = np.zeros((F, len(self._read_matrix), 16), dtype=np.float32)
        self._raw_parent = np.zeros((F, len(self._read_parent), 16), dtype=np.float32)
        # Hanging roots whose pose matrix is their parent's carried by the rest offset and their own
        # basis (full inheritance, no constraint of their own): their base follows from the
        # parent's pose matrix alone, whatever rotation the root is shown with.
        bones = obj.data.bones
        self._from_parent = np.array([_inherits_fully(obj.pose.bones[rig.groups[a][0]]) for a in self._hanging],
                                     dtype=bool)
        self._parent_offset = np.array([np.linalg.inv(np.array(bones[rig.groups[a][1]].matrix_local, float))
                                        @ np.array(bones[rig.groups[a][0]].matrix_local, float)
                                        for a in self._hanging]).reshape(-1, 4, 4)
        self._memo = {}
        self._rest = np.stack([np.array(obj.data.bones[root].matrix_local, float) for root, _ in rig.groups])
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
        """Each chain group's base (F, A, 4, 4) in armature space, orthonormal: the rest frame of
        its root bone as its parent (or the armature) carries it, with the root's own pose
        location (root_basis: the roots' matrix_basis)."""
        loc = np.empty(root_basis.shape)
        loc[...] = _IDENTITY4
        loc[..., :3, 3] = root_basis[..., :3, 3]
        rest_inverse = self._rest_inverse
        bases = self._rest @ loc @ rest_inverse
        hanging = self._hanging
        if hanging:
            root_matrix = _matrices(self._raw_matrix)
            parent_frame = root_matrix @ np.linalg.inv(root_basis[:, hanging])
            if self._from_parent.any():
                carried = _matrices(self._raw_parent) @ self._parent_offset
                parent_frame[:, self._from_parent] = carried[:, self._from_parent]
            bases[:, hanging] = parent_frame @ loc[:, hanging] @ rest_inverse[hanging]
        bad = ~np.isfinite(bases).all(axis=(1, 2, 3))
        if bad.any():
            raise RigError(f"the chains' parent bones are not finite at frame(s) {self.frames[bad][:5].tolist()}")
        scale, degenerate, _ = uniform_scales(bases)                   # (F, A)
        axes = column_lengths(bases[..., :3, :3])
        uneven = axes.max(axis=-1) - axes.min(axis=-1) > UNEVEN * scale   # float32 matrices differ more than 1e-5
        if (degenerate | uneven).any():
            i = np.flatnonzero((degenerate | uneven).any(axis=0))[0]
            raise RigError(f"the bone '{self.rig.groups[i][1]}' that chain '{self.rig.groups[i][0]}' hangs from "
                           "is scaled unevenly (or to zero); the solver needs parents scaled alike on every axis")
        return orthonormalize(bases), scale

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

    def _start_pose(self):
        """(matrix_basis (F, B, 4, 4) of the bones read, the model bones' start pose (F, S, 4, 4))
        from the channels read: each stretching bone's Y axis scaled by its stretch as Blender
        shows it. Refuses a non-finite pose and chain bones scaled to zero; warns (once) of pose
        scales the solver does not model."""
        pose_basis = pose_channels.basis(self._modes, self._values, self._connected)
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
        pose_basis, self.basis = self._remembered("basis", self._modes.tobytes() + self._values.tobytes(),
                                                  self._start_pose)
        # A root's rotation cancels in its base: while the roots stay where they are and the bones
        # they hang from do not move, the base is the same (up to float32 rounding). (A change of
        # how a root inherits its parent's motion changes the rig's signature: live preview then
        # reads the rig again, with a new sampler.)
        roots_at = pose_basis[:, self._root_index, :3, 3]
        bases, base_scale = self._remembered("bases", roots_at.tobytes() + self._raw_parent.tobytes(),
                                             lambda: self._bases(pose_basis[:, self._root_index]))
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


def _unscaled(objects, bases, scale):
    """Objects (F, C, 4, 4) of constraints whose chains hang from bases (F, C, 4, 4) scaled by
    `scale` (F, C), moved so that the unscaled chain reaches them as the scaled one reaches the
    originals: a chain carried by a parent scaled by s (as IK stretch scales a bone, and its
    children inherit it) is the unscaled chain magnified by s about its base's origin o, so its
    effector is at p exactly where the unscaled one is at o + (p - o) / s. Rotations are unchanged."""
    out = objects.copy()
    origin = bases[..., :3, 3]
    out[..., :3, 3] = origin + (objects[..., :3, 3] - origin) / scale[..., None]
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


# --- coordinates from poses and poses from coordinates --------------------------------------

def pose_from_coordinates(rig: Rig, q, motions=None):
    """Per model bone and frame: rotation matrices (F, S, 3, 3) and uniform scales (F, S) that make
    the pose bones' matrix_basis reproduce the solved joints as Blender evaluates them: a
    stretching bone's total scale is its stretch (L + d) / L, every other bone's 1, each written
    divided by the scale it inherits (`chain_bones.written_scales`). `motions`: the segments' joint
    motions at q when the caller has them (an evaluation's pose.local)."""
    q = np.asarray(q, float)
    R = (segment_motions(rig.model, q) if motions is None else motions)[..., :3, :3]
    total = np.ones(q.shape[:1] + (len(rig.bones),))
    for name, c in rig.stretch_coordinate.items():
        s = rig.bones.index(name)
        total[:, s] = (rig.model.length[s] + q[:, c]) / rig.model.length[s]
    if rig.scale_parents is None or not rig.stretch_coordinate:
        return R, total
    return R, chain_bones.written_scales(total, rig.scale_parents)


def apply_pose(rig: Rig, obj, R, scale, bones=None):
    """Set pose bones (one frame: R (S, 3, 3), scale (S,)) through their own rotation mode, and the
    uniform scale of the bones whose scale we write (`Rig.scaled`); locations stay as they are,
    and so do the other bones' scales. Refuses anything non-finite.

    Every channel goes in with one foreach_set per channel kind (quaternions, Euler angles, axis
    angles, scales), which does not reliably get the pose evaluated again (4.2 tags nothing; 5.0
    copies the channels, but the pose of the first frame written stayed the old one); the
    object's one transform tag afterwards does: the evaluated pose then shows the written
    channels (tests/addon/test_addon_live.py, every frame). A rotation set per bone through its
    property would tag the object's geometry as well, which makes Blender's evaluation after the
    write slower (BENCHMARKS.md, live preview). Euler angles continue from the bone's current
    ones (mathutils' compatible Euler), axis angles are mathutils' of the rotation's quaternion,
    quaternions take the short way from the current ones."""
    from mathutils import Euler, Matrix

    if not (np.isfinite(R).all() and np.isfinite(scale).all()):
        raise RigError("the solver returned a non-finite pose; nothing was written")
    pose_bones = obj.pose.bones
    written = (np.arange(len(rig.bones)) if bones is None
               else np.array([s for s, name in enumerate(rig.bones) if name in bones], dtype=int))
    index = rig.pose_rows[written]
    n = len(pose_bones)
    if n != len(rig.pose_index) or (index < 0).any():
        raise RigError(f"bones of '{obj.name}' were added, deleted or renamed while solving; nothing was written")
    numbers = pose_channels.MODE_NUMBERS
    written_modes = np.array([numbers[pose_bones[int(i)].rotation_mode] for i in index], dtype=np.int32)
    by_quaternion = written_modes == pose_channels.QUATERNION_MODE
    if by_quaternion.any():
        rows, at = written[by_quaternion], index[by_quaternion]
        quat = np.empty((n, 4), np.float32)
        pose_bones.foreach_get("rotation_quaternion", quat.ravel())
        new = quaternion_from_matrix(R[rows])
        quat[at] = new * np.where((new * quat[at]).sum(axis=-1) < 0.0, -1.0, 1.0)[:, None]   # the short way
        pose_bones.foreach_set("rotation_quaternion", quat.ravel())
    by_axis_angle = written_modes == pose_channels.AXIS_ANGLE_MODE
    if by_axis_angle.any():
        channels = np.empty((n, 4), np.float32)
        pose_bones.foreach_get("rotation_axis_angle", channels.ravel())
        for s, i in zip(written[by_axis_angle], index[by_axis_angle]):
            axis, angle = Matrix(R[s].tolist()).to_quaternion().to_axis_angle()
            channels[i] = (angle, *axis)
        pose_bones.foreach_set("rotation_axis_angle", channels.ravel())
    by_euler = ~(by_quaternion | by_axis_angle)
    if by_euler.any():
        channels = np.empty((n, 3), np.float32)
        pose_bones.foreach_get("rotation_euler", channels.ravel())
        for s, i, mode in zip(written[by_euler], index[by_euler], written_modes[by_euler]):
            order = pose_channels.MODE_NAMES[int(mode)]
            channels[i] = Matrix(R[s].tolist()).to_euler(order, Euler(channels[i].tolist(), order))
        pose_bones.foreach_set("rotation_euler", channels.ravel())
    scaled = rig.scaled_rows[written]
    if scaled.any():
        channels = np.empty((n, 3), np.float32)
        pose_bones.foreach_get("scale", channels.ravel())
        channels[index[scaled]] = np.asarray(scale, float)[written[scaled], None]
        pose_bones.foreach_set("scale", channels.ravel())
    if len(written):
        obj.update_tag(refresh={"OBJECT"})

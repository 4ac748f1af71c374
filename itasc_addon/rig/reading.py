"""Read an armature as it is into the engine's terms: the Model of its IK chains, a task per constraint.

Everything runs in the armature object's own space: the solver sees bones at their rest matrices
(`base.rest_matrix`, as Blender's pose evaluation composes them), targets as world matrices brought into that space (a bone target, of this
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

Nothing here writes to Blender data.
"""

from __future__ import annotations

import numpy as np

from ... import solver
from ...solver.bones import itasc_stretch_weight
from .. import chain_bones, dependencies
from .base import (Driven, Rig, RigError, Target, evaluated_world, ik_constraints, object_scale, offset_matrix,
                   rest_matrix)

# Blender's IK follows a pole only on a chain that shares no bone with another IK constraint's, and
# (Standard IK) with Use Location on and weight > 0; where it does not, neither does ours.
POLE_IGNORED = ("Blender's IK ignores this pole (the chain shares bones with another IK constraint, or the "
                "constraint has no location part); so does the solver")
LIMIT_MODES = {"LIMITDIST_INSIDE": "inside", "LIMITDIST_OUTSIDE": "outside", "LIMITDIST_ONSURFACE": "surface"}


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


def engine_bone(obj, name, stretch_allowed, matrix=None):
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
        matrix=rest_matrix(obj, name) if matrix is None else matrix,
        length=float(bone.length),
        parent=bone.parent.name if bone.parent else None,
        lock=(pb.lock_ik_x, pb.lock_ik_y, pb.lock_ik_z),
        limits=tuple(limits),
        stiffness=tuple(min(max(float(getattr(pb, f"ik_stiffness_{a}")), 0.0), 1.0) for a in "xyz"),
        stretch=float(pb.ik_stretch) if stretch_allowed else 0.0,
        stretch_weight=itasc_stretch_weight(pb.ik_stretch) if stretch_allowed else None,
    )


def read_rig(obj, drives=None, *, measure=False, poles_of=None) -> Rig:
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
    name) -> bool: whose poles get a pole task (default: every one the solver follows).
    """
    if obj is None or obj.type != "ARMATURE":
        raise RigError("select an armature object")
    warnings = []
    scale = object_scale(evaluated_world(obj), f"armature '{obj.name}'")
    picked = _picked(obj, drives or (lambda pb, con: not con.mute), warnings)
    if not measure:
        picked = _solvable(obj, picked, warnings)
    in_model, stretchy = _union(picked)
    groups, model = _model(obj, in_model, stretchy)
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
    bones_per_group, rests = [], {}
    for root, _ in groups:
        group = []
        for name in members[root]:
            # the root's rest frame, and below it each bone at its offset as Blender poses it
            rests[name] = (rest_matrix(obj, name) if name == root
                           else rests[obj.data.bones[name].parent.name] @ offset_matrix(obj.data.bones[name]))
            b = engine_bone(obj, name, name in stretchy and not chain_bones.holds_scale(obj.pose.bones[name]),
                            rests[name])
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
    target, as Blender's pole_angle says (solver.tasks.pole); a root bone that stretches has its
    head off its segment frame (`root_stretch`)."""
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
                                 pole_angle=d.pole_angle, name=f"{d.bone}/{d.name}/pole",
                                 root_stretch=_stretch_coordinates(model).get(chains[c][-1])))
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

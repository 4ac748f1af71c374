"""Every rig Rigify generates from the metarigs it ships, animated as a user would: inside Blender.

`build(bpy, metarig, n_frames)` adds the metarig (``object.armature_<metarig>_metarig_add``),
generates the rig (``pose.rigify_generate``), puts every limb in IK (``IK_FK`` 0) with its pole on
(``pole_vector``), and keys on every frame the controls an animator moves: each IK control
(``*foot_ik.*``, ``hand_ik.*``), each pole control, and any other control an active IK constraint
aims at (the horse's neck aims at ``head``) travel on small circles about where they rest.
`active_ik(rig)` lists the IK constraints that are on; `tail_errors` is Blender's own measure of
each: the distance from the tail of the chain's last bone to the head of the target bone.

Used by the add-on tests (tests/addon/in_blender/rigify_rigs.py), `make demo --rig NAME` and the
benchmarks. A session that calls `build` must end with exit_at_once (Blender 4.2 crashes on exit
once Rigify was enabled).
"""

from __future__ import annotations

import math
import re

METARIGS = ("human", "basic_human", "basic_quadruped", "cat", "wolf", "horse", "bird", "shark")
PERIOD = 48.0               # frames per circle
RADIUS = 0.02               # circle radius, as a fraction of the rig's largest dimension
_IK_CONTROL = re.compile(r"(^|_)(foot|hand)_ik\.[LR]$")
_PREFIXED = ("MCH-", "ORG-", "DEF-", "VIS_")


def active_ik(rig):
    """(pose bone, constraint) of every IK constraint that is on (not muted, influence > 0, a target)."""
    return [(pb, c) for pb in rig.pose.bones for c in pb.constraints
            if c.type == "IK" and not c.mute and c.influence > 0.0 and c.target is not None]


def tip(pb, con):
    """The chain's last bone: the constraint's bone, or its parent without Use Tail."""
    return pb if con.use_tail else pb.parent


def _controls(rig):
    """The bones to animate: IK controls, pole controls, and controls the IK constraints aim at."""
    names = {pb.name for pb in rig.pose.bones if _IK_CONTROL.search(pb.name)}
    for _, con in active_ik(rig):
        for sub in (con.subtarget, con.pole_subtarget):
            if sub and not sub.startswith(_PREFIXED):
                names.add(sub)
    return [pb for pb in rig.pose.bones if pb.name in names]


def _key_circle(bpy, rig, pb, n_frames, radius, phase):
    """Key `pb`'s location on frames 1..n_frames so that its head travels a circle of `radius`
    (armature space, in the plane across the rig: X and Z) about where it is now."""
    from mathutils import Vector

    rest = pb.matrix.copy()
    centre = rest.translation.copy()
    for f in range(1, n_frames + 1):
        a = 2 * math.pi * (f - 1) / PERIOD + phase
        pose = rest.copy()
        pose.translation = centre + Vector((radius * math.cos(a) - radius, 0.0, radius * math.sin(a)))
        pb.matrix_basis = rig.convert_space(pose_bone=pb, matrix=pose, from_space="POSE", to_space="LOCAL")
        pb.keyframe_insert("location", frame=f)


def build(bpy, metarig, n_frames):
    """(scene, rig, animated control names) of the generated rig, animated (module docstring)."""
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    for data in (bpy.data.armatures, bpy.data.actions):
        for block in list(data):
            data.remove(block)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, n_frames
    scene.frame_set(1)
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    getattr(bpy.ops.object, f"armature_{metarig}_metarig_add")()
    bpy.ops.object.mode_set(mode="OBJECT")
    if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
        raise RuntimeError(f"Rigify could not generate a rig from its {metarig} metarig")
    rig = bpy.context.view_layer.objects.active
    for pb in rig.pose.bones:
        if "IK_FK" in pb.keys():
            pb["IK_FK"] = 0.0
        if "pole_vector" in pb.keys():
            pb["pole_vector"] = True
    rig.update_tag()
    bpy.context.view_layer.update()
    radius = RADIUS * max(rig.dimensions)
    controls = _controls(rig)
    for n, pb in enumerate(controls):
        _key_circle(bpy, rig, pb, n_frames, radius, phase=n * 0.7)
    scene.frame_set(1)
    return scene, rig, [pb.name for pb in controls]


def tail_errors(bpy, scene, rig, frames, constraints=None):
    """Per frame, per active IK constraint ("bone/constraint": `active_ik` unless given): Blender's
    evaluated distance (armature space) from the chain's last bone's tail to the target's head
    (the bone's head for a bone target, the object's origin otherwise)."""
    constraints = constraints or [f"{pb.name}/{c.name}" for pb, c in active_ik(rig)]
    out = []
    for f in frames:
        scene.frame_set(int(f))
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        inverse = ev.matrix_world.inverted()
        row = []
        for name in constraints:
            bone, cname = name.split("/", 1)
            con = rig.pose.bones[bone].constraints[cname]
            end = ev.pose.bones[tip(rig.pose.bones[bone], con).name].tail
            target = con.target.evaluated_get(bpy.context.evaluated_depsgraph_get())
            head = (target.matrix_world @ target.pose.bones[con.subtarget].head if con.subtarget
                    else target.matrix_world.translation)
            row.append(((inverse @ head) - end).length)
        out.append(row)
    return out


def deform_heads(bpy, scene, rig, frames):
    """Per frame, the evaluated heads and tails of the deform bones (armature space), as lists."""
    out = []
    names = [b.name for b in rig.data.bones if b.use_deform]
    for f in frames:
        scene.frame_set(int(f))
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        out.append([list(ev.pose.bones[n].head) + list(ev.pose.bones[n].tail) for n in names])
    return out


def bend_normals(bpy, scene, rig, frames, constraints):
    """Per frame, per IK constraint ("bone/constraint"): the unit normal (armature space) of the plane
    its chain's last two bones bend in, upper bone x lower bone, and the bend (the angle between
    the two bones, degrees): ([F][C][3], [F][C]). Near a straight chain the normal means little."""
    import numpy as np

    normals, bends = [], []
    for f in frames:
        scene.frame_set(int(f))
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        row, bend = [], []
        for name in constraints:
            bone, cname = name.split("/", 1)
            lower = ev.pose.bones[tip(rig.pose.bones[bone], rig.pose.bones[bone].constraints[cname]).name]
            upper = lower.parent
            a, b = np.array(upper.tail - upper.head), np.array(lower.tail - lower.head)
            n = np.cross(a, b)
            size = np.linalg.norm(n)
            row.append((n / size).tolist() if size > 0.0 else [float("nan")] * 3)
            bend.append(float(np.degrees(np.arctan2(size, np.dot(a, b)))))
        normals.append(row)
        bends.append(bend)
    return normals, bends

"""Bodies of test_addon_poles: chains with a pole target baked by us against Blender's own
Standard IK on the same rig, both measured through Blender's evaluation."""

import math

import bpy
import numpy as np
from mathutils import Vector

from .scenes import api, clear_scene


def hinge_chain(n_bones, pole_angle, pole_is_bone, n_frames, stretch=0.0, limit=False, stiffness=0.0):
    """A chain of `n_bones` bones (the root free, the others hinges about X, bent a little at
    rest) on an armature turned in the world, an IK constraint (location) on its last bone aimed
    at an empty on a keyed path inside reach, and a pole target (an empty, or a bone of a second
    armature) keyed on a circle around the chain. Returns (scene, rig, target, pole object, pole bone)."""
    clear_scene()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, n_frames
    scene.frame_set(1)
    rig = bpy.data.objects.new("chain", bpy.data.armatures.new("chain"))
    scene.collection.objects.link(rig)
    rig.rotation_euler = (0.2, -0.3, 0.4)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    parent, head = None, Vector((0.0, 0.0, 0.0))
    length = 2.0 / n_bones
    for i in range(n_bones):
        bone = rig.data.edit_bones.new(f"b{i}")
        tail = head + Vector((0.0, 0.15 * length * (-1) ** i, length))
        bone.head, bone.tail = head, tail
        bone.parent, bone.use_connect = parent, parent is not None
        parent, head = bone, tail
    bpy.ops.object.mode_set(mode="OBJECT")
    for i, pb in enumerate(rig.pose.bones):
        if i:
            pb.lock_ik_y = pb.lock_ik_z = True
            if limit:
                pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, -2.5, 2.5
            pb.ik_stiffness_x = stiffness
        pb.ik_stretch = stretch
    target = bpy.data.objects.new("target", None)
    scene.collection.objects.link(target)
    holder, pole_object, pole_bone = None, None, ""
    if pole_is_bone:
        holder = bpy.data.objects.new("holder", bpy.data.armatures.new("holder"))
        scene.collection.objects.link(holder)
        bpy.context.view_layer.objects.active = holder
        bpy.ops.object.mode_set(mode="EDIT")
        b = holder.data.edit_bones.new("pole")
        b.head, b.tail = (0.0, 0.0, 0.0), (0.0, 0.0, 0.2)
        bpy.ops.object.mode_set(mode="OBJECT")
        pole_object, pole_bone = holder, "pole"
    else:
        pole_object = bpy.data.objects.new("pole", None)
        scene.collection.objects.link(pole_object)
    world = rig.matrix_world.copy()
    for f in range(1, n_frames + 1):
        t = 2.0 * math.pi * (f - 1) / n_frames
        target.location = world @ Vector((0.3 * math.sin(t), 0.2 * math.cos(t), 1.3 + 0.2 * math.sin(2 * t)))
        target.keyframe_insert("location", frame=f)
        pole = world @ Vector((2.0 * math.cos(0.7 * t + 0.5), 2.0 * math.sin(0.7 * t + 0.5), 0.8))
        if pole_is_bone:
            holder.pose.bones["pole"].location = holder.matrix_world.inverted() @ pole
            holder.pose.bones["pole"].keyframe_insert("location", frame=f)
        else:
            pole_object.location = pole
            pole_object.keyframe_insert("location", frame=f)
    ik = rig.pose.bones[-1].constraints.new("IK")
    ik.target, ik.chain_count, ik.use_tail, ik.use_rotation = target, n_bones, True, False
    ik.use_stretch = stretch > 0.0
    ik.pole_target, ik.pole_subtarget, ik.pole_angle = pole_object, pole_bone, math.radians(pole_angle)
    rig.pose.ik_solver = "LEGACY"
    scene.frame_set(1)
    return scene, rig, target


def _measure(scene, rig, target, frames):
    """Per frame, through Blender's evaluation: the root bone's X axis (the hinge axis, the normal of
    the chain's bend plane) in world space, and the last bone's tail against the target."""
    normal, miss = [], []
    for f in frames:
        scene.frame_set(int(f))
        dg = bpy.context.evaluated_depsgraph_get()
        re, te = rig.evaluated_get(dg), target.evaluated_get(dg)
        root = re.matrix_world @ re.pose.bones[0].matrix
        normal.append(tuple(root.col[0].xyz.normalized()))
        last = re.pose.bones[-1]
        tail = re.matrix_world @ last.matrix @ Vector((0.0, last.bone.length, 0.0))
        miss.append((tail - te.matrix_world.translation).length)
    return np.array(normal), np.array(miss)


def against_standard(n_bones, pole_angle, pole_is_bone, n_frames=12, stretch=0.0, limit=False, stiffness=0.0):
    """Blender's Standard IK first (our solver not yet driving), then our bake of the same rig:
    the angle between the two bend planes' normals (up to sign: the plane, not which way the
    chain folds) and both tails' misses, per frame."""
    scene, rig, target = hinge_chain(n_bones, pole_angle, pole_is_bone, n_frames, stretch, limit, stiffness)
    frames = range(1, n_frames + 1)
    theirs, their_miss = _measure(scene, rig, target, frames)
    result = api.bake(rig, 1, n_frames)
    ours, our_miss = _measure(scene, rig, target, frames)
    cosine = np.abs(np.sum(ours * theirs, axis=1)).clip(0.0, 1.0)
    return {"plane_degrees": np.degrees(np.arccos(cosine)).tolist(), "our_miss": our_miss.tolist(),
            "their_miss": their_miss.tolist(), "converged": result.converged.tolist(),
            "pole_error": result.pole_error.tolist(),
            "warnings": result.warnings, "method": result.method}


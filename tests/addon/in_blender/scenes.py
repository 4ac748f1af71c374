"""Scenes the add-on tests build inside Blender, and what they measure on them with Blender's own
evaluation. Other bodies import them: ``from .scenes import api, chain_rig, clear_scene, ...``."""

import math

import bpy
import numpy as np
from mathutils import Vector

from . import addon

api = addon("api")
keys_module = addon("keys")


def clear_scene():
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    for data in (bpy.data.armatures, bpy.data.curves, bpy.data.actions):
        for block in list(data):
            data.remove(block)


def chain_rig(n_bones=6, n_frames=60, name="chain", rotation_modes=None):
    """A straight chain of unit bones up +Z with an IK constraint (Copy Pose, whole chain) on its
    last bone, aimed at an empty that follows a circle path (Follow Path, animated offset) inside
    reach. Returns (scene, armature object, target empty)."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, n_frames
    scene.frame_set(1)
    arm = bpy.data.armatures.new(name)
    rig = bpy.data.objects.new(name, arm)
    scene.collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    rig.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    parent = None
    for i in range(n_bones):
        bone = arm.edit_bones.new(f"bone{i:02d}")
        bone.head, bone.tail = (0.0, 0.0, float(i)), (0.0, 0.0, float(i + 1))
        bone.parent, bone.use_connect = parent, parent is not None
        parent = bone
    bpy.ops.object.mode_set(mode="OBJECT")
    for i, mode in enumerate(rotation_modes or []):
        rig.pose.bones[i].rotation_mode = mode

    reach = float(n_bones)
    curve = bpy.data.curves.new(f"{name}_path", "CURVE")
    curve.dimensions = "3D"
    spline = curve.splines.new("POLY")
    ring = 32
    spline.points.add(ring - 1)
    for k in range(ring):
        t = 2.0 * math.pi * k / ring
        spline.points[k].co = (0.4 * reach * math.cos(t), 0.3 * reach * math.sin(t),
                               0.5 * reach + 0.15 * reach * math.sin(2 * t), 1.0)
    spline.use_cyclic_u = True
    path = bpy.data.objects.new(f"{name}_path", curve)
    scene.collection.objects.link(path)
    target = bpy.data.objects.new(f"{name}_target", None)
    scene.collection.objects.link(target)
    follow = target.constraints.new("FOLLOW_PATH")
    follow.target, follow.use_fixed_location = path, True
    for frame, value in ((1, 0.0), (n_frames, 1.0)):
        follow.offset_factor = value
        follow.keyframe_insert("offset_factor", frame=frame)

    ik = rig.pose.bones[-1].constraints.new("IK")
    ik.target, ik.chain_count, ik.use_tail = target, n_bones, True
    rig.pose.ik_solver = "ITASC"
    return scene, rig, target


def held_chain_rig(n_frames):
    """chain_rig(6, n_frames) whose bone02 has IK rotation control (weight 1) and its own rotation
    animated from 0 to 0.6 rad about its Z over the frames. Returns (scene, rig, target, bone02)."""
    scene, rig, target = chain_rig(6, n_frames)
    held = rig.pose.bones[2]
    held.use_ik_rotation_control, held.ik_rotation_weight = True, 1.0
    for frame, angle in ((1, 0.0), (n_frames, 0.6)):
        held.rotation_quaternion = (math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2))
        held.keyframe_insert("rotation_quaternion", frame=frame)
    return scene, rig, target, held


def tip_errors(scene, rig, target, frames, bone=-1):
    """Distance from a bone's tail to the target, measured by Blender at each frame (world space,
    from the evaluated pose bones' matrices)."""
    out = []
    for f in frames:
        scene.frame_set(int(f))
        dg = bpy.context.evaluated_depsgraph_get()
        re, te = rig.evaluated_get(dg), target.evaluated_get(dg)
        pb = re.pose.bones[bone]
        world = re.matrix_world @ pb.matrix
        tail = world @ Vector((0.0, pb.bone.length, 0.0))
        out.append((tail - te.matrix_world.translation).length)
    return out


def all_keys(obj):
    """Every F-curve key's co and handles as plain lists: {"path[index]": [[co, hl, hr, ...], ...]}."""
    out = {}
    for (path, index), attrs in keys_module.snapshot(obj).items():
        out[f"{path}[{index}]"] = {name: np.asarray(value).tolist() for name, value in attrs.items()}
    return out


def path_scene_tip_errors(n_bones=6, n_frames=12):
    """Blender's own iTaSC on a fresh chain_rig: its tip error at every frame, and the IK type."""
    clear_scene()
    scene, rig, target = chain_rig(n_bones, n_frames)
    errors = tip_errors(scene, rig, target, range(1, n_frames + 1))
    return {"frames": len(errors), "max": max(errors), "ik": rig.pose.bones[-1].constraints[0].type}


def generated_rigify_rig(n_frames=24, poles=False):
    """The rig Rigify generates from its human metarig (Blender's bundled Rigify), every limb in
    IK mode (IK_FK 0), poles on or off (`pole_vector`), and each IK control (hands and feet)
    keyed on a small circle over `n_frames` frames so that every frame asks something new.
    Returns (scene, rig, {limb control name: its pose bone}). The session must end with
    exit_at_once (Blender 4.2 crashes on exit once Rigify was enabled)."""
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    clear_scene()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, n_frames
    scene.frame_set(1)
    bpy.ops.object.armature_human_metarig_add()
    bpy.ops.object.mode_set(mode="OBJECT")
    if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
        raise RuntimeError("Rigify could not generate its rig")
    rig = bpy.context.view_layer.objects.active
    controls = {}
    for limb, control in (("upper_arm", "hand_ik"), ("thigh", "foot_ik")):
        for side in (".L", ".R"):
            parent = rig.pose.bones[f"{limb}_parent{side}"]
            parent["IK_FK"], parent["pole_vector"] = 0.0, bool(poles)
            controls[control + side] = rig.pose.bones[control + side]
    for k, (name, pb) in enumerate(controls.items()):
        rest = pb.location.copy()
        for f in range(1, n_frames + 1):
            t = 2.0 * math.pi * (f - 1) / max(n_frames, 1) + k
            pb.location = rest + Vector((0.04 * math.cos(t), 0.04 * math.sin(t), 0.03 * math.sin(2 * t)))
            pb.keyframe_insert("location", frame=f)
    scene.frame_set(1)
    return scene, rig, controls

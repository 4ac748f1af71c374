"""Bodies of test_addon_poles: chains with a pole target baked by us against Blender's own
Standard IK on the same rig, both measured through Blender's evaluation."""

import math

import bpy
import numpy as np
from mathutils import Matrix, Vector

from .scenes import api, clear_scene


def hinge_chain(n_bones, pole_angle, pole_is_bone, n_frames, stretch=0.0, limit=False, stiffness=0.0, joints=None,
                root_limit=0.0, root_stiffness=0.0):
    """A chain of `n_bones` bones (the root free, the others hinges about X, bent a little at
    rest) on an armature turned in the world, an IK constraint (location) on its last bone aimed
    at an empty on a keyed path inside reach, and a pole target (an empty, or a bone of a second
    armature) keyed on a circle around the chain. `joints` (one letter a bone, "H" a hinge about
    X, "F" free) replaces the hinges; `limit` and `stiffness` act on the hinges, `root_limit`
    (radians, about X and Z) and `root_stiffness` (all axes) on the root. Returns (scene, rig, target)."""
    joints = joints or "F" + "H" * (n_bones - 1)
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
    for pb, joint in zip(rig.pose.bones, joints):
        if joint == "H":
            pb.lock_ik_y = pb.lock_ik_z = True
            if limit:
                pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, -2.5, 2.5
            pb.ik_stiffness_x = stiffness
        pb.ik_stretch = stretch
    root = rig.pose.bones[0]
    if root_limit:
        root.use_ik_limit_x, root.ik_min_x, root.ik_max_x = True, -root_limit, root_limit
        root.use_ik_limit_z, root.ik_min_z, root.ik_max_z = True, -root_limit, root_limit
    root.ik_stiffness_x = root.ik_stiffness_y = root.ik_stiffness_z = root_stiffness
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


def _chain_pose(scene, rig, target, ik, frames):
    """Per frame, through Blender's evaluation, in world space: the root bone's X and Z axes, the
    root->target line u, the root->pole direction, the joints (each bone's head, then the last
    tail) and the last tail's miss of the target."""
    x_axis, z_axis, u, pole, joints, miss = [], [], [], [], [], []
    for f in frames:
        scene.frame_set(int(f))
        dg = bpy.context.evaluated_depsgraph_get()
        re, te, pe = rig.evaluated_get(dg), target.evaluated_get(dg), ik.pole_target.evaluated_get(dg)
        root = re.matrix_world @ re.pose.bones[0].matrix
        head, aim = root.translation, te.matrix_world.translation
        at = pe.matrix_world @ pe.pose.bones[ik.pole_subtarget].head if ik.pole_subtarget else pe.matrix_world.translation
        points = [re.matrix_world @ pb.head for pb in re.pose.bones] + [re.matrix_world @ re.pose.bones[-1].tail]
        x_axis.append(tuple(root.col[0].xyz.normalized()))
        z_axis.append(tuple(root.col[2].xyz.normalized()))
        u.append(tuple((aim - head).normalized()))
        pole.append(tuple((at - head).normalized()))
        joints.append([tuple(p) for p in points])
        miss.append((points[-1] - aim).length)
    return np.array(x_axis), np.array(z_axis), np.array(u), np.array(pole), np.array(joints), np.array(miss)


def _bend_normal(joints):
    """The normal (F, 3) of the plane that fits the chain's joints (F, J, 3) best (least squares),
    and each frame's largest distance of a joint from it (F,): 0 for a chain in one plane."""
    centred = joints - joints.mean(axis=1, keepdims=True)
    _, _, vt = np.linalg.svd(centred)
    normal = vt[:, -1]
    return normal, np.abs(np.einsum("fjk,fk->fj", centred, normal)).max(axis=1)


def _degrees(a, b, signed=True):
    cosine = np.sum(a * b, axis=1)
    return np.degrees(np.arccos((cosine if signed else np.abs(cosine)).clip(-1.0, 1.0)))


def free_chain_against_standard(joints, pole_angle, pole_is_bone, root_limit=0.0, root_stiffness=0.0, n_frames=12):
    """Blender's Standard IK first, then our bake of the same chain with free (non-hinge) bones
    (`joints` as hinge_chain takes them), both measured through Blender's evaluation, per frame:
    the angle between the two root X axes (Blender's pole plane), between the planes fitting
    the two chains' joints (up to sign) and between the two root bones' Y axes (where the knee
    lies); Blender's own root X off its pole plane; both tails' misses; and the largest
    difference of joint values between each frame solved alone and the bake."""
    scene, rig, target = hinge_chain(len(joints), pole_angle, pole_is_bone, n_frames, joints=joints,
                                     root_limit=root_limit, root_stiffness=root_stiffness)
    ik = rig.pose.bones[-1].constraints[0]
    frames = range(1, n_frames + 1)
    their_x, their_z, u, pole, their_joints, their_miss = _chain_pose(scene, rig, target, ik, frames)
    alone = []                       # frames solved one at a time (live preview's loop), from the same start
    for f in frames:
        alone.append(api.solve_frame(rig, f, key=False).engine.q[0])
        for pb in rig.pose.bones:                 # back to the user's (rest) pose
            pb.matrix_basis = Matrix.Identity(4)
    result = api.bake(rig, 1, n_frames)
    our_x, _, _, _, our_joints, our_miss = _chain_pose(scene, rig, target, ik, frames)
    their_normal, their_flatness = _bend_normal(their_joints)
    our_normal, our_flatness = _bend_normal(our_joints)
    a = math.radians(pole_angle)
    up = their_x * math.cos(a) + their_z * math.sin(a)
    side = np.cross(u, pole)                     # normal of Blender's pole plane (u, pole)
    side /= np.linalg.norm(side, axis=1, keepdims=True)
    knee = lambda j: (j[:, 1] - j[:, 0]) / np.linalg.norm(j[:, 1] - j[:, 0], axis=1, keepdims=True)  # noqa: E731
    return {"root_x_degrees": _degrees(our_x, their_x).tolist(),
            "bend_plane_degrees": _degrees(our_normal, their_normal, signed=False).tolist(),
            "knee_degrees": _degrees(knee(our_joints), knee(their_joints)).tolist(),
            "their_off_pole_plane_degrees": np.degrees(np.arcsin(np.abs(np.sum(up * side, axis=1)).clip(0, 1))).tolist(),
            "their_flatness": their_flatness.tolist(), "our_flatness": our_flatness.tolist(),
            "our_miss": our_miss.tolist(), "their_miss": their_miss.tolist(),
            "alone_minus_bake": float(np.abs(np.array(alone) - result.engine.q).max()),
            "converged": result.converged.tolist(), "pole_error": result.pole_error.tolist(),
            "warnings": result.warnings}

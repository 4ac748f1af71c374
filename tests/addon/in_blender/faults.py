"""Bodies of test_addon_faults: each fault's report and the state of the scene after it."""

import math
import os
import tempfile

import bpy
import numpy as np

from . import addon
from .scenes import all_keys, api, chain_rig, clear_scene, keys_module, tip_errors

solving = addon("solving")
bake_job = addon("job")


def mutes(rig):
    return [[pb.name, c.name, bool(c.mute)] for pb in rig.pose.bones for c in pb.constraints]


def finite():
    """No NaN or infinity in any pose bone's matrix_basis or any F-curve key of any object."""
    for ob in bpy.data.objects:
        if ob.pose is not None:
            for pb in ob.pose.bones:
                if not np.isfinite(np.array(pb.matrix_basis)).all():
                    return f"{ob.name}/{pb.name}"
        for channel, attrs in keys_module.snapshot(ob).items():
            if not all(np.isfinite(np.asarray(v, float)).all() for v in attrs.values()):
                return f"{ob.name}: {channel}"
    return True


def attempt(fn):
    """(None, result) or (the RigError's message, None)."""
    try:
        return None, fn()
    except api.RigError as err:
        return str(err), None


def add_user_keys(rig, frames=(1, 5, 18, 20)):
    """Keys a bake must leave alone: a location channel of a chain bone over the whole range, and
    the tip's rotation channel (which bakes write) with keys before and after the baked range."""
    tip = rig.pose.bones[-1]
    for i, f in enumerate(frames):
        rig.pose.bones[0].location = (0.01 * i, 0.0, 0.0)
        rig.pose.bones[0].keyframe_insert("location", frame=f)
        tip.rotation_quaternion = (math.cos(0.1 * i), math.sin(0.1 * i), 0.0, 0.0)
        tip.keyframe_insert("rotation_quaternion", frame=f)
    rig.pose.bones[0].location = (0.0, 0.0, 0.0)
    tip.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)


def missing_target():
    """A second IK constraint with no target object, baked over frames 8-12."""
    clear_scene()
    scene, rig, target = chain_rig(4, 20)
    add_user_keys(rig)
    lost = rig.pose.bones["bone01"].constraints.new("IK")        # no target object
    lost.chain_count = 2
    original = mutes(rig)
    before = all_keys(rig)
    message, res = attempt(lambda: api.bake(rig, 8, 12))
    after = all_keys(rig)
    driving = mutes(rig)
    api.release(rig)
    return {"message": message, "warnings": res.warnings, "constraints": res.constraint_names, "bones": res.bones,
            "converged": bool(res.converged.all()), "before": before, "after": after, "finite": finite(),
            "original": original, "driving": driving, "released": mutes(rig)}


def deleted():
    """The target renamed or deleted within one bake (a modal bake runs in steps, and the user may
    act between them), then between two calls."""
    clear_scene()
    scene, rig, target = chain_rig(4, 40)
    add_user_keys(rig, (1, 10, 30, 40))
    scene.frame_set(7)
    original = mutes(rig)
    before = all_keys(rig)
    out = {}
    for what in ("rename", "delete"):
        job = bake_job.prepare(rig, list(range(1, 41)))
        steps = job.steps()
        next(steps)                                         # frames 1..16 read
        if what == "rename":
            target.name = "moved_away"
        else:
            bpy.data.objects.remove(target)
        message, _ = attempt(lambda: list(steps))
        out[what] = {"message": message, "frame": scene.frame_current, "keys": all_keys(rig) == before,
                     "finite": finite()}
        if what == "rename":
            target.name = "chain_target"
            api.release(rig)
            out["released"] = mutes(rig) == original
    # Between two calls: the first bakes, the second meets the deleted target.
    scene2, rig2, target2 = chain_rig(4, 20, name="second")
    rig2.pose.bones[-1].constraints[0].target = target2
    api.bake(rig2, 1, 20)
    target2.name = "renamed"
    message_renamed, res = attempt(lambda: api.bake(rig2, 1, 20))
    baked = all_keys(rig2)
    bpy.data.objects.remove(target2)
    message_deleted, _ = attempt(lambda: api.bake(rig2, 1, 20))
    return {"within": out, "renamed": [message_renamed, bool(res.converged.all())], "deleted": message_deleted,
            "second_keys": all_keys(rig2) == baked, "finite": finite()}


def zero():
    """A bone of 10 micrometres at the tip of the chain, then a bone scaled to zero in pose mode
    (and keyed so, in the middle of the range)."""
    clear_scene()
    scene, rig, target = chain_rig(4, 12)
    # Blender drops zero-length bones when edit mode ends; a bone of 10 micrometres stays.
    bpy.ops.object.mode_set(mode="EDIT")
    tiny = rig.data.edit_bones.new("tiny")
    tiny.head, tiny.tail = (0.0, 0.0, 4.0), (0.0, 0.0, 4.0 + 1e-5)
    tiny.parent, tiny.use_connect = rig.data.edit_bones["bone03"], True
    bpy.ops.object.mode_set(mode="OBJECT")
    ik = rig.pose.bones["bone03"].constraints[0]
    rig.pose.bones["bone03"].constraints.remove(ik)
    ik = rig.pose.bones["tiny"].constraints.new("IK")
    ik.target, ik.chain_count = target, 5
    length = rig.data.bones["tiny"].length
    message_tiny, res = attempt(lambda: api.bake(rig, 1, 12))
    tiny_errors = tip_errors(scene, rig, target, range(1, 13), bone="tiny")
    rig.pose.bones["bone01"].scale = (1.0, 1.0, 1.0)
    rig.pose.bones["bone01"].keyframe_insert("scale", frame=1)
    rig.pose.bones["bone01"].scale = (0.0, 0.0, 0.0)
    rig.pose.bones["bone01"].keyframe_insert("scale", frame=6)
    for fc in keys_module.Channels(rig).all():
        if fc.data_path.endswith(".scale"):
            for k in fc.keyframe_points:
                k.interpolation = "CONSTANT"
    scene.frame_set(1)
    before = all_keys(rig)
    message_zero, _ = attempt(lambda: api.bake(rig, 1, 12))
    return {"length": length, "tiny": [message_tiny, bool(res.converged.all())], "tiny_errors": tiny_errors,
            "zero": message_zero, "kept": all_keys(rig) == before, "finite": finite()}


def cycle():
    """The target parented to the bone it drives; then to a parent that hangs from a chain bone;
    then held by a Child Of constraint on a chain bone; at last beside a second constraint with a
    good target."""
    clear_scene()
    scene, rig, target = chain_rig(4, 12)
    add_user_keys(rig)
    out = {}
    hook = bpy.data.objects.new("hook", None)
    scene.collection.objects.link(hook)
    hook.parent, hook.parent_type, hook.parent_bone = rig, "BONE", "bone03"
    ik = rig.pose.bones["bone03"].constraints[0]
    holder = bpy.data.objects.new("holder", None)
    scene.collection.objects.link(holder)
    holder.parent, holder.parent_type, holder.parent_bone = rig, "BONE", "bone01"
    child = bpy.data.objects.new("child", None)
    scene.collection.objects.link(child)
    child.parent = holder
    child_of = bpy.data.objects.new("child_of", None)
    scene.collection.objects.link(child_of)
    c = child_of.constraints.new("CHILD_OF")
    c.target, c.subtarget = rig, "bone02"
    original = mutes(rig)
    before = all_keys(rig)
    for name in ("hook", "child", "child_of"):
        ik.target = bpy.data.objects[name]
        out[name], _ = attempt(lambda: api.bake(rig, 1, 12))
        out[name + "_mutes"] = mutes(rig) == original
    # A second constraint with a good target on a chain it shares with the cyclic one: one tree,
    # which Blender's IK keeps; nothing is left to drive.
    ik.target = hook
    good = rig.pose.bones["bone01"].constraints.new("IK")
    good.target, good.chain_count = target, 2
    unshared = mutes(rig)
    shared, _ = attempt(lambda: api.bake(rig, 1, 12))
    shared_mutes = mutes(rig) == unshared
    # On chains of their own (the cyclic one on bone02..03, the good one on bone01), the good one
    # is driven and the cyclic one stays Blender's, unmuted.
    ik.chain_count = 2
    good.chain_count = 1
    message, res = attempt(lambda: api.bake(rig, 1, 12))
    ik_muted = bool(ik.mute)
    return {"refused": out, "before": before, "after": all_keys(rig), "message": message, "shared": shared,
            "shared_mutes": shared_mutes, "cyclic_muted": ik_muted, "solved_by": res.solved_by,
            "warnings": res.warnings, "constraints": res.constraint_names, "bones": res.bones, "finite": finite()}


def chain_count():
    """chain_count 25 on a chain of 4 bones."""
    clear_scene()
    scene, rig, target = chain_rig(4, 20)
    add_user_keys(rig)
    rig.pose.bones[-1].constraints[0].chain_count = 25
    before = all_keys(rig)
    message, res = attempt(lambda: api.bake(rig, 6, 15))
    return {"message": message, "warnings": res.warnings, "bones": res.bones,
            "converged": bool(res.converged.all()),
            "errors": tip_errors(scene, rig, target, range(6, 16)), "before": before, "after": all_keys(rig),
            "finite": finite()}


def fight():
    """A second IK constraint on the tip (weight 0.1) aimed at a far, unreachable target."""
    clear_scene()
    scene, rig, target = chain_rig(4, 20)
    add_user_keys(rig)
    far = bpy.data.objects.new("far", None)
    scene.collection.objects.link(far)
    far.location = (0.0, 0.0, -10.0)
    second = rig.pose.bones[-1].constraints.new("IK")
    second.target, second.chain_count, second.weight = far, 4, 0.1
    before = all_keys(rig)
    message, res = attempt(lambda: api.bake(rig, 3, 14))
    near_errors = tip_errors(scene, rig, target, range(3, 15))
    far_errors = tip_errors(scene, rig, far, range(3, 15))
    return {"message": message, "constraints": res.constraint_names, "error": res.position_error.tolist(),
            "not_converged": res.not_converged, "summary": res.summary(), "near": near_errors, "far": far_errors,
            "bones": res.bones, "before": before, "after": all_keys(rig), "finite": finite()}


def linked():
    """The rig linked from a library file, then a library override of it, then made local."""
    clear_scene()
    scene, rig, target = chain_rig(3, 12)
    add_user_keys(rig, (1, 4, 10, 12))
    library = os.path.join(tempfile.mkdtemp(), "rig_library.blend")
    bpy.ops.wm.save_as_mainfile(filepath=library)
    bpy.ops.wm.read_homefile(use_empty=True)
    with bpy.data.libraries.load(library, link=True) as (source, linked_data):
        linked_data.objects = ["chain", "chain_target", "chain_path"]
    for ob in linked_data.objects:
        bpy.context.scene.collection.objects.link(ob)
    rig = bpy.data.objects["chain"]
    before = all_keys(rig)
    original = mutes(rig)
    linked_message, _ = attempt(lambda: api.bake(rig, 1, 12))
    linked_frame, _ = attempt(lambda: api.solve_frame(rig, 3))
    linked_state = [all_keys(rig) == before, mutes(rig) == original]
    # A library override of it: refused too (our settings' collections cannot grow on an override).
    override = rig.override_create(remap_local_usages=True)
    override_message, _ = attempt(lambda: api.bake(override, 1, 12))
    state = [all_keys(override) == before, mutes(override) == original]
    # Made local, it still plays the library's action: refused until it has a local one.
    local = override.make_local(clear_liboverride=True)
    local_state = [local.library is None, local.override_library is None,
                   local.animation_data.action.library is not None]
    action_message, _ = attempt(lambda: api.bake(local, 1, 12))
    state += [all_keys(local) == before, mutes(local) == original]
    local.animation_data.action = local.animation_data.action.copy()
    message, res = attempt(lambda: api.bake(local, 5, 8))
    return {"linked": linked_message, "linked_frame": linked_frame, "linked_state": linked_state,
            "override": override_message, "local_state": local_state, "action": action_message, "state": state,
            "message": message, "bones": res.bones,
            "converged": bool(res.converged.all()), "before": before, "after": all_keys(local),
            "library_keys": all_keys(rig) == before, "finite": finite()}


def one_frame():
    """A bake of frames 9 to 9."""
    clear_scene()
    scene, rig, target = chain_rig(4, 20)
    add_user_keys(rig)
    before = all_keys(rig)
    message, res = attempt(lambda: api.bake(rig, 9, 9))
    after = all_keys(rig)
    baked = sorted({co[0] for c, k in after.items() if c not in before for co in k["co"]})
    tip = after['pose.bones["bone03"].rotation_quaternion[0]']["co"]
    return {"message": message, "frames": res.frames.tolist(), "converged": res.converged.tolist(),
            "errors": tip_errors(scene, rig, target, [9]), "baked": baked, "tip": [co[0] for co in tip],
            "bones": res.bones, "before": before, "after": after, "finite": finite()}


def cancel():
    """A 600-frame bake stopped (as Esc does) once every frame is read and the first chunk solved."""
    clear_scene()
    scene, rig, target = chain_rig(5, 600)
    add_user_keys(rig, (1, 50, 400, 600))
    scene.frame_set(33)
    original = mutes(rig)
    before = all_keys(rig)
    basis = [list(map(list, pb.matrix_basis)) for pb in rig.pose.bones]
    job = bake_job.prepare(rig, list(range(1, 601)))
    steps, stepping = 0, job.steps()
    while job.phase != "solve" or len(job.stage.pieces) < 1:   # read every frame, solve the first chunk
        next(stepping)
        steps += 1
    progress = [job.done, job.total]
    job.restore_frame()                                      # what Esc does in the modal operator
    scene.frame_set(scene.frame_current)
    result = {"steps": steps, "progress": progress, "phase": job.phase, "result": job.result is None,
              "frame": scene.frame_current, "keys": all_keys(rig) == before, "records": len(rig.itasc.baked),
              "basis": [list(map(list, pb.matrix_basis)) for pb in rig.pose.bones] == basis,
              "finite": finite(), "driving": mutes(rig) != original}
    api.release(rig)
    result["released"] = mutes(rig) == original
    return result

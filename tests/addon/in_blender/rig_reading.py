"""Bodies of test_addon_rig_reading: what real rigs put around their IK chains (bone targets and
poles, stretch through scale inheritance, other constraints and drivers on chain bones), each
baked and measured by Blender's evaluation, or refused with a message naming what to change."""

import math

import bpy
import numpy as np

from . import addon
from .faults import attempt, finite, mutes
from .scenes import all_keys, api, chain_rig, clear_scene, tip_errors

rig_module = addon("rig")


def _add_bones(rig, specs):
    """Add bones in edit mode: specs [(name, head, tail, parent name or None, connected)]."""
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    for name, head, tail, parent, connected in specs:
        bone = rig.data.edit_bones.new(name)
        bone.head, bone.tail = head, tail
        if parent:
            bone.parent, bone.use_connect = rig.data.edit_bones[parent], connected
    bpy.ops.object.mode_set(mode="OBJECT")


def _head_errors(scene, rig, tip, target_rig, target_bone, frames):
    """Blender's evaluated distance from a bone's tail to another bone's head (world space)."""
    out = []
    for f in frames:
        scene.frame_set(int(f))
        dg = bpy.context.evaluated_depsgraph_get()
        ev, tev = rig.evaluated_get(dg), target_rig.evaluated_get(dg)
        tail = ev.matrix_world @ ev.pose.bones[tip].tail
        out.append((tail - tev.matrix_world @ tev.pose.bones[target_bone].head).length)
    return out


def _goal_rig(n_frames=12):
    """chain_rig(3) whose IK constraint aims at the bone 'goal' of the same armature (not in the
    chain), keyed along a loop inside reach."""
    scene, rig, target = chain_rig(3, n_frames)
    _add_bones(rig, [("goal", (1.0, 0.0, 1.5), (1.0, 0.0, 2.0), None, False),
                     ("pole", (0.0, -2.0, 1.5), (0.0, -2.0, 2.0), None, False)])
    goal, pole = rig.pose.bones["goal"], rig.pose.bones["pole"]
    for f in range(1, n_frames + 1):
        t = 2.0 * math.pi * f / n_frames
        goal.location = (0.3 * math.cos(t), 0.4 * math.sin(t), 0.2 * math.sin(2 * t))
        goal.keyframe_insert("location", frame=f)
        pole.location = (0.1 * f, 0.0, 0.0)
        pole.keyframe_insert("location", frame=f)
    ik = rig.pose.bones["bone02"].constraints[0]
    ik.target, ik.subtarget = rig, "goal"
    return scene, rig, ik


def bone_targets(n_frames=12):
    """A target bone of the chain's own armature: where Blender's IK aims, our bake measured by
    Blender, poles that are bones read per frame; then targets that depend on the chain."""
    clear_scene()
    scene, rig, ik = _goal_rig(n_frames)
    frames = range(1, n_frames + 1)
    out = {}
    # Blender's own iTaSC on this rig: where does the tip go, the target bone's head or its tail?
    out["blender_head"] = _head_errors(scene, rig, "bone02", rig, "goal", frames)
    tails = []
    for f in frames:
        scene.frame_set(f)
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        tails.append((ev.pose.bones["bone02"].tail - ev.pose.bones["goal"].tail).length)
    out["blender_tail"] = tails
    # A pole that is a bone: read with the rig, per frame, at the bone's head in armature space.
    ik.pole_target, ik.pole_subtarget, ik.pole_angle = rig, "pole", -math.pi / 2
    read = rig_module.read_rig(rig)
    samples = rig_module.sample(read, rig, [1.0, 4.0])
    heads = []
    for f in (1, 4):
        scene.frame_set(f)
        heads.append(list(rig.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones["pole"].head))
    out["pole"] = [read.driven[0].pole.label, read.driven[0].pole_angle]
    out["pole_heads"] = [samples.poles[:, 0, :3, 3].tolist(), heads]
    ik.pole_target = None
    before = all_keys(rig)
    res = api.bake(rig, 1, n_frames)
    out["ours"] = _head_errors(scene, rig, "bone02", rig, "goal", frames)
    out["reported"] = res.position_error[:, 0].tolist()
    out["converged"] = bool(res.converged.all())
    out["warnings"] = res.warnings
    out["kept"] = {k: v for k, v in all_keys(rig).items() if k in before} == before
    api.release(rig)
    # Two bones of that chain: the closed-form fast path, the target bone read the same way.
    ik.chain_count = 2
    res = api.bake(rig, 1, n_frames)
    out["two_bone"] = [res.solver_path, _head_errors(scene, rig, "bone02", rig, "goal", frames)]
    ik.chain_count = 3
    api.release(rig)

    # A bone of another armature.
    other = bpy.data.objects.new("other", bpy.data.armatures.new("other"))
    scene.collection.objects.link(other)
    other.location = (0.5, 0.2, 0.0)
    _add_bones(other, [("hand", (0.0, 0.0, 2.0), (0.0, 0.0, 2.4), None, False)])
    ik.target, ik.subtarget = other, "hand"
    res = api.bake(rig, 1, 4)
    out["other"] = _head_errors(scene, rig, "bone02", other, "hand", range(1, 5))
    api.release(rig)

    # Targets that move with the chain: each refused naming the target and the chain bone.
    ik.target, ik.subtarget = rig, "goal"
    kept = all_keys(rig)
    refused = {}
    _set_parent(rig, "goal", "bone01")
    refused["parent"], _ = attempt(lambda: api.bake(rig, 1, 4))
    out["refused_mutes"] = [ik.mute, rig.itasc.active]               # a refused rig is not handed over
    out["refused_keys"] = all_keys(rig) == kept                        # and nothing is written
    _set_parent(rig, "goal", None)
    copy = rig.pose.bones["goal"].constraints.new("COPY_LOCATION")
    copy.target, copy.subtarget = rig, "bone02"
    refused["constraint"], _ = attempt(lambda: api.bake(rig, 1, 4))
    copy.mute = True
    message, res = attempt(lambda: api.bake(rig, 1, 4))       # a muted constraint does not count
    out["muted_constraint"] = [message, bool(res.converged.all()) if res else None]
    api.release(rig)
    rig.pose.bones["goal"].constraints.remove(copy)
    fc = rig.driver_add('pose.bones["goal"].location', 2)
    var = fc.driver.variables.new()
    var.type = "TRANSFORMS"
    var.targets[0].id, var.targets[0].bone_target, var.targets[0].transform_type = rig, "bone01", "ROT_X"
    fc.driver.expression = var.name
    refused["driver"], _ = attempt(lambda: api.bake(rig, 1, 4))
    # A driver reading a custom property of a chain bone does not depend on its pose.
    rig.pose.bones["bone01"]["switch"] = 0.0
    var.type = "SINGLE_PROP"
    t = var.targets[0]
    t.id_type, t.id, t.data_path = "OBJECT", rig, 'pose.bones["bone01"]["switch"]'
    message, res = attempt(lambda: api.bake(rig, 1, 4))
    out["custom_property"] = [message, bool(res.converged.all()) if res else None]
    api.release(rig)
    rig.driver_remove('pose.bones["goal"].location', 2)
    # The chain hangs from a bone that turns toward the chain's own tip.
    _add_bones(rig, [("swing", (0.0, 0.0, -1.0), (0.0, 0.0, 0.0), None, False)])
    _set_parent(rig, "bone00", "swing")
    track = rig.pose.bones["swing"].constraints.new("DAMPED_TRACK")
    track.target, track.subtarget = rig, "bone02"
    ik.chain_count = 3
    refused["hanging"], _ = attempt(lambda: api.bake(rig, 1, 4))
    track.subtarget = "goal"                                  # toward the target instead: no cycle
    message, res = attempt(lambda: api.bake(rig, 1, 4))
    out["hanging_ok"] = [message, _head_errors(scene, rig, "bone02", rig, "goal", range(1, 5))]
    api.release(rig)
    out["refused"] = refused
    out["finite"] = finite()
    return out


def _set_parent(rig, name, parent):
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    bone = rig.data.edit_bones[name]
    bone.parent = rig.data.edit_bones[parent] if parent else None
    bone.use_connect = False
    bpy.ops.object.mode_set(mode="OBJECT")


def _stretch_chain(inherit, connected, stretches, n_frames):
    """A chain of three unit bones up +Z (the last two inheriting scale by `inherit`, connected or
    only touching), IK Stretch per bone `stretches`, aimed at an empty keyed from inside its reach
    (2.5 from the root) out to 4.5."""
    clear_scene()
    scene, rig, target = chain_rig(3, n_frames)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    for name in ("bone01", "bone02"):
        rig.data.edit_bones[name].use_connect = connected
    bpy.ops.object.mode_set(mode="OBJECT")
    for name in ("bone01", "bone02"):
        rig.data.bones[name].inherit_scale = inherit
    for pb, s in zip(rig.pose.bones, stretches):
        pb.ik_stretch = s
    ik = rig.pose.bones["bone02"].constraints[0]
    ik.use_stretch = True
    target.constraints[0].mute = True
    for f in range(1, n_frames + 1):
        r = 2.5 + 2.0 * (f - 1) / max(n_frames - 1, 1)
        a = 0.7 * f
        target.location = (r * 0.6 * math.cos(a), r * 0.6 * math.sin(a), r * 0.8)
        target.keyframe_insert("location", frame=f)
    return scene, rig, target


def stretch_chains(n_frames=10):
    """Every inherit_scale mode, connected and not, IK Stretch on every bone (and on all but the
    middle bone): baked, Blender's evaluation of the tip against the target; a stretching bone
    whose child does not start at its tail is refused."""
    out = {}
    for inherit in ("FULL", "FIX_SHEAR", "ALIGNED", "AVERAGE", "NONE", "NONE_LEGACY"):
        for connected in (True, False):
            for stretches in ((0.3, 0.6, 1.0), (0.5, 0.0, 0.5)):
                scene, rig, target = _stretch_chain(inherit, connected, stretches, n_frames)
                res = api.bake(rig, 1, n_frames)
                errors = tip_errors(scene, rig, target, range(1, n_frames + 1))
                scales = []
                for f in (1, n_frames):
                    scene.frame_set(f)
                    ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
                    scales.append([float(np.linalg.norm(np.array(pb.matrix)[:3, 1])) for pb in ev.pose.bones])
                out[f"{inherit} {'connected' if connected else 'touching'} {stretches}"] = {
                    "errors": errors, "converged": bool(res.converged.all()), "warnings": res.warnings,
                    "scales": scales}
    # A child that does not start at its stretching parent's tail.
    scene, rig, target = _stretch_chain("FULL", False, (0.5, 0.5, 0.5), n_frames)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    rig.data.edit_bones["bone02"].head = (0.0, 0.1, 2.0)
    bpy.ops.object.mode_set(mode="OBJECT")
    original, before = mutes(rig), all_keys(rig)
    message, _ = attempt(lambda: api.bake(rig, 1, n_frames))
    return {"chains": out, "gap": message, "gap_kept": [mutes(rig) == original, all_keys(rig) == before],
            "finite": finite()}


def chain_bone_constraints(n_frames=8):
    """Constraints and drivers on a chain bone: each one the solver does not model refuses the rig
    naming bone, constraint (or driver) and what to change; muted, it bakes. A Limit Rotation on a
    hinge is modelled as the hinge's limits. A bone outside the chain that copies a chain bone
    (Rigify's ORG and DEF bones) changes nothing."""
    clear_scene()
    scene, rig, target = chain_rig(4, n_frames)
    other = bpy.data.objects.new("other", None)
    scene.collection.objects.link(other)
    other.location = (0.3, 0.2, 1.0)
    original, before = mutes(rig), all_keys(rig)
    bone = rig.pose.bones["bone01"]
    refused = {}
    for kind in ("COPY_ROTATION", "COPY_LOCATION", "COPY_TRANSFORMS", "DAMPED_TRACK", "LIMIT_ROTATION", "CHILD_OF",
                 "TRANSFORM"):
        con = bone.constraints.new(kind)
        if hasattr(con, "target"):
            con.target = other
        if kind == "LIMIT_ROTATION":
            con.owner_space, con.use_limit_x, con.max_x = "LOCAL", True, 0.2
        message, _ = attempt(lambda: api.bake(rig, 1, n_frames))
        con.mute = True
        muted, res = attempt(lambda: api.bake(rig, 1, n_frames))
        api.release(rig)
        refused[kind] = {"message": message, "name": con.name, "muted": [muted, bool(res.converged.all())]}
        bone.constraints.remove(con)
    after_refusals = [mutes(rig) == original]
    # A driver on a chain bone's rotation.
    fc = rig.driver_add('pose.bones["bone02"].rotation_quaternion', 1)
    fc.driver.expression = "0.1"
    driver_message, _ = attempt(lambda: api.bake(rig, 1, n_frames))
    fc.mute = True
    muted_driver, _ = attempt(lambda: api.bake(rig, 1, n_frames))
    api.release(rig)
    rig.driver_remove('pose.bones["bone02"].rotation_quaternion', 1)

    # A Limit Rotation on a hinge (bone02 turns about X only, 5 to 6 degrees), in Local Space:
    # modelled. The rest pose (0 degrees) is outside it, so the solve starts on the limit.
    hinge = rig.pose.bones["bone02"]
    hinge.lock_ik_y = hinge.lock_ik_z = True
    limit = hinge.constraints.new("LIMIT_ROTATION")
    limit.owner_space, limit.use_limit_x, limit.min_x, limit.max_x = "LOCAL", True, math.radians(5), math.radians(6)
    res = api.bake(rig, 1, n_frames)
    shown, angles = [], []
    for f in range(1, n_frames + 1):
        scene.frame_set(f)
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        with_limit = [np.array(pb.matrix).tolist() for pb in ev.pose.bones]
        limit.mute = True
        scene.frame_set(f)
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        without = [np.array(pb.matrix).tolist() for pb in ev.pose.bones]
        limit.mute = False
        shown.append(float(np.abs(np.array(with_limit) - np.array(without)).max()))
        q = hinge.rotation_quaternion
        angles.append(2.0 * math.atan2(q.x, q.w))
    limited = {"shown": shown, "angles": angles, "errors": tip_errors(scene, rig, target, range(1, n_frames + 1)),
               "reported": res.position_error[:, 0].tolist(), "warnings": res.warnings}
    api.release(rig)
    # The same Limit Rotation on a bone turning about every axis: refused.
    hinge.lock_ik_y = hinge.lock_ik_z = False
    free_message, _ = attempt(lambda: api.bake(rig, 1, n_frames))
    hinge.constraints.remove(limit)

    # Rigify's pattern: bones outside the chain copying chain bones; and two chains, one refused.
    _add_bones(rig, [("org", (0.5, 0.0, 1.0), (0.5, 0.0, 2.0), None, False)])
    copy = rig.pose.bones["org"].constraints.new("COPY_TRANSFORMS")
    copy.target, copy.subtarget = rig, "bone01"
    follower, res = attempt(lambda: api.bake(rig, 1, n_frames))
    follower_errors = tip_errors(scene, rig, target, range(1, n_frames + 1), bone="bone03")
    api.release(rig)
    _add_bones(rig, [("side0", (1.0, 0.0, 0.0), (1.0, 0.0, 1.0), None, False),
                     ("side1", (1.0, 0.0, 1.0), (1.0, 0.0, 2.0), "side0", True)])
    side = rig.pose.bones["side1"].constraints.new("IK")
    side.target, side.chain_count = other, 2
    track = rig.pose.bones["side0"].constraints.new("DAMPED_TRACK")
    track.target = other
    message, two = attempt(lambda: api.bake(rig, 1, n_frames))
    api.release(rig)
    return {"refused": refused, "after_refusals": after_refusals, "driver": driver_message,
            "muted_driver": muted_driver, "limited": limited, "free": free_message,
            "follower": [follower, res.warnings if res else None, follower_errors],
            "two": [message, two.constraint_names if two else None, two.warnings if two else None],
            "before": before, "after": all_keys(rig), "finite": finite()}


def animated_mute(n_frames=10):
    """An IK constraint whose mute is keyed (on at frame 4, off again at frame 7), and beside it a
    second one on the same bone whose mute a scripted driver sets from a custom property (as
    Rigify's pole switch does, here with an expression): while ours drives, Blender's IK stays off
    on every frame whatever the keys and the switch say, ours follows the switch, and the release
    gives every F-curve and mute back."""
    clear_scene()
    scene, rig, target = chain_rig(3, n_frames)
    tip = rig.pose.bones["bone02"]
    ik = tip.constraints[0]
    for f, value in ((1, False), (4, True), (7, False)):
        ik.mute = value
        ik.keyframe_insert("mute", frame=f)
    ik.mute = False
    other = tip.constraints.new("IK")
    other.target, other.chain_count = target, 3
    tip["switch"] = 0.0
    fc = other.driver_add("mute")
    var = fc.driver.variables.new()
    var.name = "switch"
    var.targets[0].id, var.targets[0].data_path = rig, 'pose.bones["bone02"]["switch"]'
    fc.driver.type, fc.driver.expression = "SCRIPTED", "1 - switch"
    scene.frame_set(1)

    def state():
        curves = [[c.data_path, bool(c.mute)] for c in rig.animation_data.drivers]
        curves += [[c.data_path, bool(c.mute)] for c in addon("keys").Channels(rig).all()
                   if "constraints" in c.data_path]
        return {"mutes": [bool(ik.mute), bool(other.mute)], "curves": curves,
                "expression": fc.driver.expression, "keys": all_keys(rig)}

    original = state()
    res = api.bake(rig, 1, n_frames)
    driving = []
    for f in range(1, n_frames + 1):
        scene.frame_set(f)
        driving.append([bool(ik.mute), bool(other.mute)])
    errors = tip_errors(scene, rig, target, range(1, n_frames + 1), bone="bone02")
    tip["switch"] = 1.0                      # the driver now unmutes the second constraint
    rig.update_tag()
    scene.frame_set(2)
    switched = [bool(ik.mute), bool(other.mute)]
    solved = [api.solve_frame(rig, 2).constraint_names]
    scene.frame_set(5)                       # where the keys mute the first one
    solved.append(api.solve_frame(rig, 5).constraint_names)
    tip["switch"] = 0.0
    rig.update_tag()
    api.release(rig)
    released = state()
    released["keys"] = {k: v for k, v in released["keys"].items() if k in original["keys"]}
    return {"constraints": res.constraint_names, "driving": driving, "errors": errors, "switched": switched,
            "switched_constraints": solved, "same": released == original,
            "original": {k: v for k, v in original.items() if k != "keys"},
            "released": {k: v for k, v in released.items() if k != "keys"}, "finite": finite()}

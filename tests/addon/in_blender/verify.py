"""Bodies of test_addon_verify: the result's errors and `converged` are Blender's evaluation of
what a bake or solve wrote. Each body measures that evaluation itself, independently of the
add-on (mathutils on the evaluated pose bones and objects, as `scenes.tip_errors` does)."""

import math

import bpy
import numpy as np
from mathutils import Vector

from . import addon
from .scenes import all_keys, api, chain_rig, clear_scene, generated_rigify_rig, tip_errors

solving = addon("solving")
bake_job = addon("job")


def figures(res):
    """The result's arrays as lists (NaN as None)."""
    def plain(a):
        return [[None if math.isnan(v) else v for v in row] for row in np.asarray(a, float).tolist()]
    return {"position": plain(res.position_error), "rotation": plain(res.rotation_error),
            "engine_position": plain(res.engine.position_error), "engine_rotation": plain(res.engine.rotation_error),
            "converged": res.converged.tolist(), "engine_converged": res.engine.converged.tolist(),
            "verified": res.verified.tolist(), "floor": plain(res.float32_floor),
            "verify_seconds": res.verify_seconds, "seconds": res.seconds, "warnings": res.warnings,
            "constraints": res.constraints, "frames": res.frames.tolist(), "summary": res.summary()}


def effector_and_goal(ob, pb, con, depsgraph):
    """World effector (the chain's last bone's tail) and the target's world matrix of an IK
    constraint, as Blender evaluates them now."""
    ev = ob.evaluated_get(depsgraph)
    tip = ev.pose.bones[pb.name] if con.use_tail else ev.pose.bones[pb.name].parent
    world = ev.matrix_world @ tip.matrix
    tail = world @ Vector((0.0, tip.bone.length, 0.0))
    target = con.target.evaluated_get(depsgraph)
    goal = target.matrix_world.copy()
    if con.subtarget:
        goal = goal @ target.pose.bones[con.subtarget].matrix
    return tail, world, goal


def shown(scene, ob, names, frames, move=True):
    """Per frame and constraint ("bone/constraint"): Blender's tail-to-target distance and the
    angle between the chain's last bone and the target (world space), as `shown_position` and
    `shown_angle`. `move`: set the scene to each frame first."""
    out = {"shown_position": [], "shown_angle": []}
    for f in frames:
        if move:
            scene.frame_set(int(f))
        dg = bpy.context.evaluated_depsgraph_get()
        row_p, row_a = [], []
        for name in names:
            bone, con_name = name.split("/")
            pb = ob.pose.bones[bone]
            tail, world, goal = effector_and_goal(ob, pb, pb.constraints[con_name], dg)
            row_p.append((tail - goal.translation).length)
            turn = world.to_quaternion().rotation_difference(goal.to_quaternion())
            row_a.append(abs(turn.angle if turn.angle <= math.pi else 2 * math.pi - turn.angle))
        out["shown_position"].append(row_p)
        out["shown_angle"].append(row_a)
    return out


def clean_chain():
    """chain_rig baked three ways (location only; location and rotation, the target turning;
    a Distance constraint on the surface) and one frame solved without keys."""
    out = {}
    clear_scene()
    scene, rig, target = chain_rig(6, 40)
    ik = rig.pose.bones[-1].constraints[0]
    res = api.solve_frame(rig, 7, key=False)             # a pose, no keys: measured where it stands
    out["frame"] = figures(res) | shown(scene, rig, res.constraints, [7], move=False)
    res = api.bake(rig, 1, 40)
    out["location"] = figures(res) | shown(scene, rig, res.constraints, res.frames)

    clear_scene()
    scene, rig, target = chain_rig(6, 40, name="turning")
    ik = rig.pose.bones[-1].constraints[0]
    ik.use_rotation = True
    for f, angle in ((1, 0.0), (40, 1.2)):
        target.rotation_euler = (angle, 0.3 * angle, 0.0)
        target.keyframe_insert("rotation_euler", frame=f)
    res = api.bake(rig, 1, 40)
    out["rotation"] = figures(res) | shown(scene, rig, res.constraints, res.frames)

    clear_scene()
    scene, rig, target = chain_rig(6, 40, name="distance")
    ik = rig.pose.bones[-1].constraints[0]
    ik.ik_type, ik.limit_mode, ik.distance = "DISTANCE", "LIMITDIST_ONSURFACE", 0.5
    res = api.bake(rig, 1, 40)
    out["distance"] = figures(res) | shown(scene, rig, res.constraints, res.frames)
    return out


def off_target():
    """Three chains where Blender shows something other than what our model solved: only the
    selected tip keyed (the other bones stay as animated), a Copy Rotation (Replace) on a chain bone
    aimed at a turning empty, a driver on a chain bone's rotation. Each baked over 30 frames."""
    out = {}
    N = 30
    for case in ("only_selected", "copy_rotation", "driver"):
        clear_scene()
        scene, rig, target = chain_rig(4, N, name=case)
        options = {}
        if case == "only_selected":
            for pb in rig.pose.bones:
                if hasattr(pb, "select"):
                    pb.select = pb.name == "bone03"
                else:
                    pb.bone.select = pb.name == "bone03"
            options["only_selected"] = True
        elif case == "copy_rotation":
            spinner = bpy.data.objects.new("spinner", None)
            scene.collection.objects.link(spinner)
            for f, angle in ((1, 0.0), (N, 2.0)):
                spinner.rotation_euler = (angle, 0.0, 0.5 * angle)
                spinner.keyframe_insert("rotation_euler", frame=f)
            copy = rig.pose.bones["bone01"].constraints.new("COPY_ROTATION")
            copy.target, copy.mix_mode = spinner, "REPLACE"
        else:
            pb = rig.pose.bones["bone02"]
            pb.rotation_mode = "XYZ"
            fc = pb.driver_add("rotation_euler", 0)
            fc.driver.type = "SCRIPTED"
            fc.driver.expression = "frame / 20"
        try:
            res = api.bake(rig, 1, N, **options)
        except api.RigError as err:                  # a reader that refuses the case names it
            out[case] = {"refused": str(err)}
            continue
        out[case] = figures(res) | {"blender": tip_errors(scene, rig, target, range(1, N + 1))}
    return out


def rigify_metarig(n_frames=40):
    """Rigify's human metarig with hands and feet on moving targets (tools.demo_rigify), baked at
    the demo's precision."""
    from tools import demo_rigify

    scene, rig, targets = demo_rigify._build(bpy, n_frames)
    res = api.bake(rig, 1, n_frames, precision=demo_rigify.PRECISION)
    return figures(res) | shown(scene, rig, res.constraints, res.frames) | {"precision": demo_rigify.PRECISION}


def rigify_generated(n_frames=12):
    """The rig Rigify generates, every limb in IK, baked; refused with the reader's message when
    the rig reader does not take it."""
    scene, rig, controls = generated_rigify_rig(n_frames)
    try:
        res = api.bake(rig, 1, n_frames)
    except api.RigError as err:
        return {"refused": str(err)}
    return figures(res) | shown(scene, rig, res.constraints, res.frames)


def steps_and_cancel():
    """A 100-frame bake stepped as the modal operator steps it: its progress, then one cancelled
    while verifying (keys kept, frames not read reported not verified) and one whose target is
    deleted while verifying."""
    N = 100
    clear_scene()
    scene, rig, target = chain_rig(5, N)
    scene.frame_set(33)
    before = all_keys(rig)
    job = bake_job.prepare(rig, list(range(1, N + 1)))
    progress, phases = [job.done], []
    for done in job.steps():
        progress.append(done)
        phases.append(job.phase)
    whole = figures(job.result)
    whole["frame"] = scene.frame_current

    api.clear_bake(rig)
    job = bake_job.prepare(rig, list(range(1, N + 1)))
    steps = job.steps()
    while job.phase != "verify" or job.v < 20:
        next(steps)
    read = job.v
    message = job.cancel()
    cancelled = figures(job.result) | {"message": message, "read": read, "phase": job.phase,
                                       "frame": scene.frame_current, "keys": all_keys(rig) != before,
                                       "has_result": rig.itasc.has_result,
                                       "not_converged": rig.itasc.result_not_converged}
    cancelled["blender"] = tip_errors(scene, rig, target, range(1, N + 1))
    scene.frame_set(33)

    api.clear_bake(rig)
    job = bake_job.prepare(rig, list(range(1, N + 1)))
    steps = job.steps()
    while job.phase != "verify" or job.v < 20:
        next(steps)
    bpy.data.objects.remove(target)
    for _ in steps:
        pass
    lost = figures(job.result) | {"frame": scene.frame_current}
    return {"progress": progress, "total": job.total, "phases": sorted(set(phases)), "whole": whole,
            "cancelled": cancelled, "lost": lost}


def strip_state(strip):
    return [strip.frame_start, strip.frame_end, strip.action_frame_start, strip.action_frame_end, strip.scale,
            strip.repeat, strip.use_reverse, strip.use_sync_length, strip.extrapolation, strip.blend_type,
            strip.influence, strip.mute, strip.name, strip.action.name]


def nla_tweak():
    """A chain whose action (keys of the root's location at its frames 1 and 30, which bakes do
    not touch) is an NLA strip starting at scene frame 11, in tweak mode: baked over frames
    11-40; then the same strip scaled by 2 (frames 11-69) and reversed, baked over 11-69 every 2nd
    frame; then asked for frames before the strip and past the first cycle of a repeated strip
    (refused, nothing written)."""
    out = {}
    clear_scene()
    scene, rig, target = chain_rig(4, 80, name="nla")
    for f in (1, 30):
        rig.pose.bones[0].keyframe_insert("location", frame=f)
    anim = rig.animation_data
    action = anim.action
    track = anim.nla_tracks.new()
    strip = track.strips.new("walk", 11, action)
    anim.action = None
    strip.select = True
    anim.use_tweak_mode = True
    before = strip_state(strip)
    res = api.bake(rig, 11, 40)
    out["plain"] = figures(res) | {
        "blender": tip_errors(scene, rig, target, range(11, 41)), "strip": strip_state(strip) == before,
        "tweak": anim.use_tweak_mode, "action": anim.action == action,
        "keyed": sorted({co[0] for c, k in all_keys(rig).items() if '"bone03"].rotation' in c for co in k["co"]}),
        "records": sorted({(item.frame_start, item.frame_end) for item in rig.itasc.baked})}
    api.clear_bake(rig)

    anim.use_tweak_mode = False
    strip.scale, strip.use_reverse = 2.0, True
    anim.use_tweak_mode = True
    before = strip_state(strip)
    frames = list(range(11, 70, 2))
    res = api.bake(rig, 11, 69, step=2)
    out["scaled"] = figures(res) | {"blender": tip_errors(scene, rig, target, frames),
                                    "strip": strip_state(strip) == before, "span": [strip.frame_start, strip.frame_end]}
    api.clear_bake(rig)

    refused = {}
    keys_before = all_keys(rig)
    for label, change, first, last in (("before", None, 1, 20), ("repeated", 2.0, 11, 80)):
        if change is not None:
            anim.use_tweak_mode = False
            strip.scale, strip.use_reverse, strip.repeat = 1.0, False, change
            anim.use_tweak_mode = True
        state = strip_state(strip)
        try:
            api.bake(rig, first, last)
            refused[label] = None
        except api.RigError as err:
            refused[label] = str(err)
        refused[label + "_kept"] = strip_state(strip) == state and all_keys(rig) == keys_before
    out["refused"] = refused
    return out

"""Live preview inside Blender: scrubbing and moving the target pose the rig without keys, the rig
is read again after the user's edits, remembered bases follow a moving parent, the user's own pose
comes back when it stops, a bake during live preview starts from the user's pose; in animation
mode it shows the bake's pose, in simulation mode it tracks as Blender's iTaSC does."""

import math
import os
import tempfile

import bpy
import numpy as np
from mathutils import Vector

from . import addon
from .scenes import api, chain_rig, clear_scene, held_chain_rig, keys_module, tip_errors


def _tail(rig):
    """The last bone's tail in world space, from the evaluated pose."""
    re = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    pb = re.pose.bones[-1]
    return re.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))


def _target_location(target):
    return target.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world.translation


def _toggle(rig):
    """Run the live preview operator on `rig` (it switches live preview on or off)."""
    with bpy.context.temp_override(object=rig, active_object=rig):
        return list(bpy.ops.itasc.live_preview())


def _shown_differs(rig):
    """How far the evaluated pose matrices are from the written channels composed by hand along
    the chain (M_i = M_parent rest_parent^-1 rest_i basis_i): whether Blender shows the pose."""
    re = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    worst, parent = 0.0, None
    for pb in rig.pose.bones:
        rest = pb.bone.matrix_local
        M = (rest if parent is None else parent @ pb.parent.bone.matrix_local.inverted() @ rest) @ pb.matrix_basis
        worst = max(worst, max(abs(a - b) for ra, rb in zip(M, re.pose.bones[pb.name].matrix) for a, b in zip(ra, rb)))
        parent = M
    return worst


def scrub_and_move_target():
    """Live preview on a 6-bone chain in simulation mode: scrub 48 frames (tip error and whether Blender shows the
    written pose, per frame), then move the unanimated target by hand at a fixed frame."""
    clear_scene()
    scene, rig, target = chain_rig(6, 48, rotation_modes=["QUATERNION", "XYZ", "QUATERNION", "AXIS_ANGLE"])
    rig.pose.ik_param.mode = "SIMULATION"
    started = _toggle(rig)
    on = rig.itasc.live_preview
    muted = rig.pose.bones[-1].constraints[0].mute
    errors, shown = [], []
    for f in range(1, 49):
        scene.frame_set(f)                         # frame_change_post advances the simulation one step
        errors.append((_tail(rig) - _target_location(target)).length)
        shown.append(_shown_differs(rig))
    keys_after_scrub = len(keys_module.Channels(rig).all())
    # Move the (unanimated) target by hand at a fixed frame: depsgraph updates re-solve.
    target.constraints[0].mute = True
    for frac in (0.2, 0.4, 0.6, 0.8, 1.0):
        target.location = (1.5 * frac, 1.0, 3.5)
        bpy.context.view_layer.update()
    after_move = (_tail(rig) - Vector((1.5, 1.0, 3.5))).length
    stopped = _toggle(rig)
    return {"started": started, "on": on, "muted": muted, "errors": errors, "keys": keys_after_scrub,
            "after_move": after_move, "shown": max(shown), "stopped": stopped, "off": rig.itasc.live_preview}


def _empty(name, location):
    ob = bpy.data.objects.new(name, None)
    bpy.context.scene.collection.objects.link(ob)
    ob.location = location
    return ob


def _lengthen_last_bone(rig):
    bpy.ops.object.mode_set(mode="EDIT")
    rig.data.edit_bones[-1].tail.z += 0.5
    bpy.ops.object.mode_set(mode="OBJECT")


def _second_constraint(rig):
    con = rig.pose.bones["bone03"].constraints.new("IK")
    con.target, con.chain_count = _empty("second", (1.0, 1.0, 2.5)), 2


def _edits():
    """The user's edits while live preview runs: {frame before which it happens: edit(rig, con)}."""
    handover = addon("handover")
    return {
        6: lambda rig, con: setattr(con, "chain_count", 4),
        10: lambda rig, con: setattr(rig.pose.bones["bone02"], "lock_ik_x", True),
        13: lambda rig, con: setattr(rig.pose.bones["bone04"], "ik_stiffness_y", 0.8),
        16: lambda rig, con: (setattr(rig.pose.bones["bone03"], "use_ik_limit_z", True),
                              setattr(rig.pose.bones["bone03"], "ik_max_z", 0.05)),
        19: lambda rig, con: setattr(con, "target", _empty("other", (2.0, -1.0, 3.0))),
        22: lambda rig, con: setattr(con, "use_tail", False),
        25: lambda rig, con: _second_constraint(rig),
        28: lambda rig, con: setattr(handover.entry(rig, "bone03", "IK", create=True), "use", False),
        31: lambda rig, con: setattr(con, "chain_count", 0),
        34: lambda rig, con: _lengthen_last_bone(rig),
        37: lambda rig, con: setattr(rig.data.bones["bone00"], "inherit_scale", "NONE"),
    }


def _play_with_edits(how):
    """Live preview over 40 frames with the edits; the pose bones' matrix_basis after each frame.
    how: 'cached' (as shipped), 'fresh' (the rig read anew every frame), 'stale' (never re-read)."""
    live, rig_module, handover = addon("live"), addon("rig"), addon("handover")
    read_rig, rig_signature = rig_module.read_rig, rig_module.rig_signature
    clear_scene()
    live._rigs.clear()
    scene, rig, target = chain_rig(6, 48)
    con = rig.pose.bones[-1].constraints[0]
    reads, signature_changed = [0], []

    def counting_read(*args):
        reads[0] += 1
        return read_rig(*args)

    rig_module.read_rig = counting_read
    rig_module.rig_signature = (lambda obj, drives=None: 0) if how == "stale" else rig_signature
    rig.itasc.live_preview = True
    poses, edits = [], _edits()
    try:
        for f in range(1, 41):
            if f in edits:
                drives = lambda pb, c: handover.chosen(rig, pb, c)  # noqa: E731
                before = rig_signature(rig, drives)
                edits[f](rig, con)
                signature_changed.append(before != rig_signature(rig, drives))
            if how == "fresh":
                live._rigs.clear()
            scene.frame_set(f)
            bpy.context.view_layer.update()
            poses.append([list(map(list, pb.matrix_basis)) for pb in rig.pose.bones])
    finally:
        rig_module.read_rig, rig_module.rig_signature = read_rig, rig_signature
    return {"poses": poses, "reads": reads[0], "signature_changed": signature_changed,
            "message": rig.itasc.result_message}


def rig_read_again_after_edits():
    """`_play_with_edits` as shipped, with the rig read anew every frame, and never re-read."""
    return {how: _play_with_edits(how) for how in ("cached", "fresh", "stale")}


def _play_moving_parent(fresh):
    """Live preview over 40 frames of a chain (bone01-05) hanging from an animated bone00 in a
    moving armature, each still for a while; the pose bones' matrix_basis after each frame and the
    tip's distance from the target. fresh: the sampler forgets what it remembered every frame."""
    live = addon("live")
    clear_scene()
    live._rigs.clear()
    scene, rig, target = chain_rig(6, 40)
    rig.pose.bones[-1].constraints[0].chain_count = 5
    root = rig.pose.bones["bone00"]
    for f, angle in ((1, 0.0), (10, 0.4), (20, 0.4), (30, -0.2)):
        root.rotation_quaternion = (math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0)
        root.keyframe_insert("rotation_quaternion", frame=f)
    for f, x in ((1, 0.0), (15, 0.0), (25, 0.6)):
        rig.location = (x, 0.0, 0.0)
        rig.keyframe_insert("location", frame=f)
    rig.itasc.live_preview = True
    poses, errors = [], []
    for f in range(1, 41):
        if fresh and rig.as_pointer() in live._rigs:
            live._rigs[rig.as_pointer()].sampler._memo.clear()
        scene.frame_set(f)
        poses.append([list(map(list, pb.matrix_basis)) for pb in rig.pose.bones])
        errors.append((_tail(rig) - _target_location(target)).length)
    return {"poses": poses, "errors": errors, "message": rig.itasc.result_message}


def moving_parent_remembered_and_fresh():
    return {"remembered": _play_moving_parent(False), "fresh": _play_moving_parent(True)}


_CHANNELS = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle", "scale")


def _channels(rig):
    return {pb.name: {c: list(getattr(pb, c)) for c in _CHANNELS} for pb in rig.pose.bones}


def users_pose_given_back():
    """The chain's own channels before live preview, while it runs, after it stops and the
    action's values at that frame; then the same across a save and a reopen with it on."""
    clear_scene()
    scene, rig, target = chain_rig(
        6, 24, rotation_modes=["QUATERNION", "XYZ", "QUATERNION", "AXIS_ANGLE", "QUATERNION", "ZXY"])
    bones = rig.pose.bones
    bones[0].rotation_quaternion = (0.9, 0.1, -0.2, 0.3)
    bones[1].rotation_euler = (0.1, 0.2, 0.3)
    bones[3].rotation_axis_angle = (0.3, 0.0, 0.6, 0.8)
    bones[4].scale = (1.2, 1.0, 0.9)
    for frame, angle in ((1, 0.0), (24, 0.5)):                   # the last bone's rotation is animated
        bones[5].rotation_euler = (angle, 0.0, -angle)
        bones[5].keyframe_insert("rotation_euler", frame=frame)

    scene.frame_set(1)
    before = _channels(rig)
    out = {"on": _toggle(rig)}
    for f in range(2, 11):
        scene.frame_set(f)
    out["live"] = _channels(rig)
    out["off"] = _toggle(rig)
    out["after"] = _channels(rig)
    out["kept_left"] = len(rig.itasc.kept_pose)
    scene.frame_set(10)                                           # the action's own values at frame 10
    out["animated"] = _channels(rig)["bone05"]["rotation_euler"]

    # Live preview on across a save and a reopen: the kept pose comes back from the file.
    scene.frame_set(1)
    out["before"] = before
    _toggle(rig)
    for f in range(2, 7):
        scene.frame_set(f)
    path = os.path.join(tempfile.mkdtemp(), "kept.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects["chain"]
    bpy.context.view_layer.objects.active = rig
    scene = bpy.context.scene
    out["reopened_live"] = rig.itasc.live_preview
    scene.frame_set(7)
    out["reopened_off"] = _toggle(rig)
    out["reopened_after"] = _channels(rig)
    scene.frame_set(7)
    out["reopened_animated"] = _channels(rig)["bone05"]["rotation_euler"]
    return out


def influence_blends_with_users_pose():
    """A constraint at influence 0.5 on a chain with a posed and an animated bone, in simulation
    mode: where Blender
    puts the tail with the IK muted, half way to the target ("expected"), and where live preview
    puts it ("shown"), at frame 30 (a jump) and 40 (after simulated frames)."""
    clear_scene()
    scene, rig, target = chain_rig(6, 48)
    bones = rig.pose.bones
    bones[0].rotation_mode = "XYZ"
    bones[0].rotation_euler = (0.3, 0.0, 0.2)                     # the user's own pose, not the rest pose
    for frame, angle in ((1, 0.0), (48, 0.8)):                    # and an animated bone
        bones[3].rotation_quaternion = (math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0)
        bones[3].keyframe_insert("rotation_quaternion", frame=frame)
    ik = bones[-1].constraints[0]
    ik.influence = 0.5
    rig.pose.ik_param.mode = "SIMULATION"

    # Blender's own evaluation with the IK muted: where the user's pose puts the tail at each frame.
    ik.mute = True
    expected = {}
    for f in (30, 40):
        scene.frame_set(f)
        tail, goal = _tail(rig), _target_location(target)
        expected[f] = list(0.5 * tail + 0.5 * goal)               # influence 0.5: half way to the target
    ik.mute = False
    scene.frame_set(1)
    _toggle(rig)
    shown = {}
    scene.frame_set(30)                                           # a jump: solved to convergence
    shown[30] = list(_tail(rig))
    for f in range(31, 35):                                       # simulation steps: live preview's own pose
        scene.frame_set(f)
    scene.frame_set(40)
    shown[40] = list(_tail(rig))
    return {"expected": expected, "shown": shown}


def rotation_control_held_to_users_pose():
    """held_chain_rig under live preview in simulation mode: the held bone's rotation as written and as animated,
    and the tail's error, at frame 30 (a jump) and 40 (after simulated frames)."""
    clear_scene()
    scene, rig, target, held = held_chain_rig(48)           # bone02's own rotation is animated
    rig.pose.ik_param.mode = "SIMULATION"
    curves = keys_module.Channels(rig)

    def state(f):
        animated = [curves.find('pose.bones["bone02"].rotation_quaternion', i).evaluate(f) for i in range(4)]
        return {"written": list(held.rotation_quaternion), "animated": animated,
                "error": (_tail(rig) - _target_location(target)).length}

    scene.frame_set(1)
    _toggle(rig)
    out = {}
    scene.frame_set(30)                                           # a jump: solved to convergence
    out[30] = state(30)
    for f in range(31, 35):
        scene.frame_set(f)
    scene.frame_set(40)
    out[40] = state(40)
    return out


def bake_during_live_preview():
    """Two identical rigs (influence 0.5, a held bone with rotation control); live preview poses
    the first; both are baked. Returns their joint values and how far live preview moved it."""
    clear_scene()
    rigs = {}
    for live_on in (True, False):
        scene, rig, target = chain_rig(6, 12, name=f"live{int(live_on)}")
        rig.pose.bones[-1].constraints[0].influence = 0.5           # blends with the user's own pose
        held = rig.pose.bones[1]
        held.rotation_quaternion = (math.cos(0.2), math.sin(0.2), 0.0, 0.0)   # held, not animated
        held.use_ik_rotation_control, held.ik_rotation_weight = True, 0.5
        rigs[live_on] = rig
    scene.frame_set(1)
    _toggle(rigs[True])
    for f in (4, 5, 6, 9):
        scene.frame_set(f)                          # live preview poses the first rig's chain
    live_moved = max((rigs[True].pose.bones[i].rotation_quaternion.rotation_difference(
        rigs[False].pose.bones[i].rotation_quaternion).angle) for i in range(6))
    baked = {str(on): api.bake(rig, 1, 12).engine.q.tolist() for on, rig in rigs.items()}
    return {"baked": baked, "live_moved": live_moved, "still_on": rigs[True].itasc.live_preview}


# ---- animation mode: live preview shows the bake's pose ------------------------------------------

def _featured_rig(n_frames):
    """chain_rig with a constraint at influence 0.7, a pole target (pole_angle 30 degrees) and
    bone02 under IK rotation control (weight 0.5) with its own rotation animated."""
    scene, rig, target, held = held_chain_rig(n_frames)
    held.ik_rotation_weight = 0.5
    ik = rig.pose.bones[-1].constraints[0]
    ik.influence = 0.7
    ik.pole_target, ik.pole_angle = _empty("pole", (3.0, -2.0, 2.0)), math.radians(30.0)
    return scene, rig, target


def _build_for_equality(kind, n_frames):
    """(scene, rig, the target to drag or None) of a kind: 'chain', 'featured', 'metarig' or
    'generated' (the rig Rigify generates, limbs in IK with poles, controls keyed)."""
    if kind in ("metarig", "generated"):
        from tools import demo_rigify

        if kind == "generated":
            scene, rig = demo_rigify.build_generated(bpy, n_frames)
        else:
            scene, rig, _ = demo_rigify._build(bpy, n_frames)
        return scene, rig, None
    clear_scene()
    if kind == "featured":
        return _featured_rig(n_frames)
    return chain_rig(6, n_frames)


def _chain_tails(rig, names):
    """World tails of the named bones as Blender evaluates them now, and the chains' reach."""
    re = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return [list(re.matrix_world @ re.pose.bones[n].tail) for n in names]


def _reach(rig, name, names):
    """The length of the chain from its root (among `names`) to the tail of bone `name`."""
    bone, total = rig.data.bones[name], 0.0
    while bone is not None and bone.name in names:
        total, bone = total + bone.length, bone.parent
    return total


def _live_q(rig):
    return addon("live")._state[rig.as_pointer()].q[0].tolist()


def _baked_tails(scene, rig, names, frames):
    out = {}
    for f in sorted(set(frames)):
        scene.frame_set(f)
        out[f] = _chain_tails(rig, names)
    return out


def live_equals_bake(kind, visits=(1, 2, 3, 4, 5, 6, 7, 8, 30, 29, 28, 27, 26, 5, 6), drag_frame=20):
    """Live preview in animation mode over frames played, jumped to and scrubbed back (`visits`),
    then a bake of the same frames: per visit the joint values and the chain bones' tails Blender
    shows, live and baked. With a target to drag (not on the metarig, whose targets are keyed):
    at `drag_frame` the target is moved by hand in steps (depsgraph updates re-solve), then that
    frame is baked with the target where it was left."""
    live = addon("live")
    n_frames = max(max(visits), drag_frame)
    scene, rig, target = _build_for_equality(kind, n_frames)
    scene.frame_set(1)
    live._rigs.clear()
    out = {"mode": rig.pose.ik_param.mode if rig.pose.ik_solver == "ITASC" else "LEGACY", "on": _toggle(rig)}
    names = list(live._rigs[rig.as_pointer()].rig.bones)
    lengths = [_reach(rig, n, names) for n in names]
    live_q, live_tails = [], []
    for f in visits:
        scene.frame_set(f)
        live_q.append(_live_q(rig))
        live_tails.append(_chain_tails(rig, names))
    out["off"] = _toggle(rig)
    res = api.bake(rig, 1, n_frames)
    baked = _baked_tails(scene, rig, names, visits)
    api.clear_bake(rig)
    out.update(names=names, lengths=lengths, visits=list(visits), live_q=live_q, live_tails=live_tails,
               bake_q=[res.engine.q[f - 1].tolist() for f in visits], bake_tails=[baked[f] for f in visits],
               converged=[bool(res.converged[f - 1]) for f in visits], message=rig.itasc.result_message)
    if target is None:
        return out
    # A dragged target: at drag_frame, the target's own animation (its Follow Path) muted and its
    # location set step by step, each step evaluated (the depsgraph handler solves).
    scene.frame_set(drag_frame)
    _toggle(rig)
    scene.frame_set(drag_frame)
    target.constraints[0].mute = True
    drag_q, drag_tails = [], []
    for frac in (0.25, 0.5, 0.75, 1.0):
        target.location = (1.0 + frac, 1.5 - frac, 2.5 + 0.5 * frac)
        bpy.context.view_layer.update()
        drag_q.append(_live_q(rig))
        drag_tails.append(_chain_tails(rig, names))
    _toggle(rig)
    res = api.bake(rig, drag_frame, drag_frame)
    scene.frame_set(drag_frame)
    out.update(drag_q=drag_q[-1], drag_tails=drag_tails[-1], drag_bake_q=res.engine.q[0].tolist(),
               drag_bake_tails=_chain_tails(rig, names),
               drag_moved=max(abs(a - b) for a, b in zip(drag_q[0], drag_q[-1])))
    api.clear_bake(rig)
    return out


def simulation_against_itasc(n_frames=96):
    """chain_rig in simulation mode at Blender's default settings, played frame by frame from frame
    1: the tip's distance from the target at every frame as Blender shows it, under Blender's own
    iTaSC and under our live preview."""
    clear_scene()
    scene, rig, target = chain_rig(6, n_frames)
    rig.pose.ik_param.mode = "SIMULATION"
    scene.frame_set(1)
    theirs = tip_errors(scene, rig, target, range(1, n_frames + 1))
    scene.frame_set(1)
    on = _toggle(rig)
    ours = tip_errors(scene, rig, target, range(1, n_frames + 1))
    settings = {k: getattr(rig.pose.ik_param, k) for k in ("mode", "solver", "feedback", "velocity_max",
                                                          "use_auto_step", "step_min", "step_max")}
    return {"on": on, "theirs": theirs, "ours": ours, "settings": settings, "message": rig.itasc.result_message}


def channels_against_matrix_basis():
    """A chain's bones in every rotation mode, with locations (left out on the connected ones),
    scales and odd rotations (an unnormalised quaternion, a zero axis-angle axis): per bone the
    matrix_basis Blender evaluates and the one pose_channels composes from the channels."""
    pose_channels = addon("pose_channels")
    clear_scene()
    modes = ["QUATERNION", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX", "AXIS_ANGLE", "QUATERNION", "AXIS_ANGLE"]
    scene, rig, target = chain_rig(len(modes), 4, rotation_modes=modes)
    for i, pb in enumerate(rig.pose.bones):
        pb.location = (0.1 * i, -0.2, 0.05 * i)
        pb.scale = (1.0 + 0.1 * i, 0.9, 1.2)
        pb.rotation_quaternion = (0.3 + 0.1 * i, -0.5, 0.2, 0.7 * (i + 1))        # not normalised
        pb.rotation_euler = (0.4 * i - 1.0, 2.5 - 0.3 * i, 0.1 * i)
        pb.rotation_axis_angle = (2.0 - 0.2 * i, 0.3, -0.4, 0.5) if i < 8 else (1.0, 0.0, 0.0, 0.0)
    bpy.context.view_layer.update()
    bones = rig.pose.bones
    modes_read = np.zeros(len(bones), np.int32)
    values = np.zeros((len(bones), pose_channels.WIDTH), np.float32)
    pose_channels.read(bones, np.arange(len(bones)), modes_read, values)
    composed = pose_channels.basis(modes_read, values, [pb.bone.use_connect for pb in bones])
    ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    blender = [[list(row) for row in pb.matrix_basis] for pb in ev.pose.bones]
    return {"composed": composed.tolist(), "blender": blender, "modes": [pb.rotation_mode for pb in bones]}

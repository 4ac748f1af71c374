"""Live preview: frame changes and target moves pose the rig in simulation mode, without keys,
and it stands aside during a bake."""

import pytest

from tests.addon.test_addon_scenes import SCENES
from tools.blender_session import run_in_blender

pytestmark = pytest.mark.blender

LIVE = r'''
clear_scene()
scene, rig, target = chain_rig(6, 48, rotation_modes=["QUATERNION", "XYZ", "QUATERNION", "AXIS_ANGLE"])
with bpy.context.temp_override(object=rig, active_object=rig):
    started = bpy.ops.itasc.live_preview()
on = rig.itasc.live_preview
muted = rig.pose.bones[-1].constraints[0].mute
def tip_error(goal=None):
    dg = bpy.context.evaluated_depsgraph_get()
    re = rig.evaluated_get(dg)
    pb = re.pose.bones[-1]
    tail = re.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))
    return (tail - (goal or target.evaluated_get(dg).matrix_world.translation)).length


def shown_differs():
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


errors, shown = [], []
for f in range(1, 49):
    scene.frame_set(f)                         # frame_change_post advances the simulation one step
    errors.append(tip_error())
    shown.append(shown_differs())
keys_after_scrub = len(keys_module.Channels(rig).all())
# Move the (unanimated) target by hand at a fixed frame: depsgraph updates re-solve.
target.constraints[0].mute = True
for frac in (0.2, 0.4, 0.6, 0.8, 1.0):
    target.location = (1.5 * frac, 1.0, 3.5)
    bpy.context.view_layer.update()
after_move = tip_error(Vector((1.5, 1.0, 3.5)))
with bpy.context.temp_override(object=rig, active_object=rig):
    stopped = bpy.ops.itasc.live_preview()
result = {"started": list(started), "on": on, "muted": muted, "errors": errors, "keys": keys_after_scrub,
          "after_move": after_move, "shown": max(shown), "stopped": list(stopped), "off": rig.itasc.live_preview}
'''


def test_live_preview_tracks_the_target_while_scrubbing_and_when_it_moves(extension_zip):
    r = run_in_blender(SCENES + LIVE, extension_zip=extension_zip)
    assert r["started"] == ["FINISHED"] and r["on"] and r["muted"]
    assert r["keys"] == 0                              # live preview poses, it does not key
    assert r["shown"] < 1e-5                           # every frame Blender shows the pose written
    errors = r["errors"]
    print(f"\nlive preview (simulation) while scrubbing 48 frames: max tip error {max(errors):.3g}, "
          f"median {sorted(errors)[24]:.3g}; after moving the target by hand: {r['after_move']:.3g}")
    assert max(errors) < 0.1                           # simulation follows with a small lag (~1% of reach)
    assert r["after_move"] < 1e-5                    # a hand move within a frame converges
    assert r["stopped"] == ["FINISHED"] and not r["off"]


CACHE = r'''
live = importlib.import_module("bl_ext.user_default.itasc_ik.itasc_addon.live")
rig_module = importlib.import_module("bl_ext.user_default.itasc_ik.itasc_addon.rig")
handover = importlib.import_module("bl_ext.user_default.itasc_ik.itasc_addon.handover")
read_rig, rig_signature = rig_module.read_rig, rig_module.rig_signature


def empty(name, location):
    ob = bpy.data.objects.new(name, None)
    bpy.context.scene.collection.objects.link(ob)
    ob.location = location
    return ob


def lengthen_last_bone(rig):
    bpy.ops.object.mode_set(mode="EDIT")
    rig.data.edit_bones[-1].tail.z += 0.5
    bpy.ops.object.mode_set(mode="OBJECT")


def second_constraint(rig):
    con = rig.pose.bones["bone03"].constraints.new("IK")
    con.target, con.chain_count = empty("second", (1.0, 1.0, 2.5)), 2


# The user's edits while live preview runs: (frame before which it happens, edit).
EDITS = [
    (6, lambda rig, con: setattr(con, "chain_count", 4)),
    (10, lambda rig, con: setattr(rig.pose.bones["bone02"], "lock_ik_x", True)),
    (13, lambda rig, con: setattr(rig.pose.bones["bone04"], "ik_stiffness_y", 0.8)),
    (16, lambda rig, con: (setattr(rig.pose.bones["bone03"], "use_ik_limit_z", True),
                           setattr(rig.pose.bones["bone03"], "ik_max_z", 0.05))),
    (19, lambda rig, con: setattr(con, "target", empty("other", (2.0, -1.0, 3.0)))),
    (22, lambda rig, con: setattr(con, "use_tail", False)),
    (25, lambda rig, con: second_constraint(rig)),
    (28, lambda rig, con: setattr(handover.entry(rig, "bone03", "IK", create=True), "use", False)),
    (31, lambda rig, con: setattr(con, "chain_count", 0)),
    (34, lambda rig, con: lengthen_last_bone(rig)),
    (37, lambda rig, con: setattr(rig.data.bones["bone00"], "inherit_scale", "NONE")),
]


def play(how):
    """Live preview over 40 frames with the edits; the pose bones' matrix_basis after each frame.
    how: 'cached' (as shipped), 'fresh' (the rig read anew every frame), 'stale' (never re-read)."""
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
    poses, edits = [], dict(EDITS)
    try:
        for f in range(1, 41):
            if f in edits:
                drives = lambda pb, c: handover.chosen(rig, pb, c)
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


result = {how: play(how) for how in ("cached", "fresh", "stale")}
'''


def test_live_preview_reads_the_rig_again_when_the_user_edits_it(extension_zip):
    """Live preview keeps the rig it read while nothing but the pose and the targets change, and
    reads it again after each kind of edit: the poses equal those of a rig read anew every frame."""
    import numpy as np

    r = run_in_blender(SCENES + CACHE, extension_zip=extension_zip)
    cached, fresh, stale = (r[k] for k in ("cached", "fresh", "stale"))
    assert cached["message"] == "" and fresh["message"] == ""
    assert all(cached["signature_changed"]), cached["signature_changed"]       # every edit is seen
    assert cached["reads"] == 1 + len(cached["signature_changed"])             # and nothing else re-reads
    assert fresh["reads"] >= 40
    poses = {k: np.asarray(v["poses"]) for k, v in r.items()}
    np.testing.assert_allclose(poses["cached"], poses["fresh"], rtol=0, atol=1e-12)
    # The edits matter: a cache that never re-read would pose the rig differently.
    assert stale["reads"] == 1
    assert np.abs(poses["stale"] - poses["fresh"]).max() > 1e-2


REMEMBERED = r'''
live = importlib.import_module("bl_ext.user_default.itasc_ik.itasc_addon.live")


def play(fresh):
    """Live preview over 40 frames of a chain (bone01-05) hanging from an animated bone00 in a
    moving armature, each still for a while; the pose bones' matrix_basis after each frame and the
    tip's distance from the target. fresh: the sampler forgets what it remembered every frame."""
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
        dg = bpy.context.evaluated_depsgraph_get()
        re = rig.evaluated_get(dg)
        pb = re.pose.bones[-1]
        tail = re.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))
        errors.append((tail - target.evaluated_get(dg).matrix_world.translation).length)
    return {"poses": poses, "errors": errors, "message": rig.itasc.result_message}


result = {"remembered": play(False), "fresh": play(True)}
'''


def test_live_preview_follows_a_moving_parent_bone_and_armature(extension_zip):
    """The sampler remembers the armature's inverse and the chains' bases while they stand still:
    with the chain's parent bone and the armature object animated (and held in between), the poses
    equal those of a sampler that works everything out every frame, and the tip tracks the target."""
    import numpy as np

    r = run_in_blender(SCENES + REMEMBERED, extension_zip=extension_zip)
    remembered, fresh = r["remembered"], r["fresh"]
    assert remembered["message"] == "" and fresh["message"] == ""
    # A base remembered from an earlier frame differs by float32 rounding of Blender's matrices.
    np.testing.assert_allclose(remembered["poses"], fresh["poses"], rtol=0, atol=1e-5)
    assert max(remembered["errors"]) < 0.1


KEPT = r'''
import tempfile
clear_scene()
scene, rig, target = chain_rig(6, 24, rotation_modes=["QUATERNION", "XYZ", "QUATERNION", "AXIS_ANGLE", "QUATERNION", "ZXY"])
bones = rig.pose.bones
bones[0].rotation_quaternion = (0.9, 0.1, -0.2, 0.3)
bones[1].rotation_euler = (0.1, 0.2, 0.3)
bones[3].rotation_axis_angle = (0.3, 0.0, 0.6, 0.8)
bones[4].scale = (1.2, 1.0, 0.9)
for frame, angle in ((1, 0.0), (24, 0.5)):                   # the last bone's rotation is animated
    bones[5].rotation_euler = (angle, 0.0, -angle)
    bones[5].keyframe_insert("rotation_euler", frame=frame)
CHANNELS = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle", "scale")


def channels(rig):
    return {pb.name: {c: list(getattr(pb, c)) for c in CHANNELS} for pb in rig.pose.bones}


def toggle(rig):
    with bpy.context.temp_override(object=rig, active_object=rig):
        return list(bpy.ops.itasc.live_preview())


scene.frame_set(1)
before = channels(rig)
out = {"on": toggle(rig)}
for f in range(2, 11):
    scene.frame_set(f)
out["live"] = channels(rig)
out["off"] = toggle(rig)
out["after"] = channels(rig)
out["kept_left"] = len(rig.itasc.kept_pose)
scene.frame_set(10)                                           # the action's own values at frame 10
out["animated"] = channels(rig)["bone05"]["rotation_euler"]

# Live preview on across a save and a reopen: the kept pose comes back from the file.
scene.frame_set(1)
out["before"] = before
toggle(rig)
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
out["reopened_off"] = toggle(rig)
out["reopened_after"] = channels(rig)
scene.frame_set(7)
out["reopened_animated"] = channels(rig)["bone05"]["rotation_euler"]
result = out
'''


def test_live_preview_gives_the_users_pose_back_when_switched_off(extension_zip):
    """The chain bones' own channels come back exactly when live preview stops, animated channels
    at the action's value of the frame; also after the file was saved and opened with it on."""
    import numpy as np

    r = run_in_blender(SCENES + "import os\n" + KEPT, extension_zip=extension_zip)
    assert r["on"] == ["FINISHED"] and r["off"] == ["FINISHED"] and r["kept_left"] == 0
    before, live = r["before"], r["live"]
    moved = max(np.abs(np.subtract(live[b][c], before[b][c])).max() for b in before for c in before[b])
    assert moved > 0.05                                 # live preview did pose the chain
    for key, animated in (("after", "animated"), ("reopened_after", "reopened_animated")):
        after = r[key]
        for bone, values in before.items():
            for channel, value in values.items():
                if bone == "bone05" and channel == "rotation_euler":
                    np.testing.assert_allclose(after[bone][channel], r[animated], rtol=0, atol=1e-6)
                else:
                    assert after[bone][channel] == value, (key, bone, channel)
    assert r["reopened_live"] and r["reopened_off"] == ["FINISHED"]
    assert r["reopened_animated"] != before["bone05"]["rotation_euler"]     # frame 7's, not frame 1's


INFLUENCE = r'''
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


def tail_and_target():
    dg = bpy.context.evaluated_depsgraph_get()
    re = rig.evaluated_get(dg)
    pb = re.pose.bones[-1]
    return re.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0)), target.evaluated_get(dg).matrix_world.translation


# Blender's own evaluation with the IK muted: where the user's pose puts the tail at each frame.
ik.mute = True
expected = {}
for f in (30, 40):
    scene.frame_set(f)
    tail, goal = tail_and_target()
    expected[f] = list(0.5 * tail + 0.5 * goal)               # influence 0.5: half way to the target
ik.mute = False
scene.frame_set(1)
with bpy.context.temp_override(object=rig, active_object=rig):
    bpy.ops.itasc.live_preview()
shown = {}
scene.frame_set(30)                                           # a jump: solved to convergence
shown[30] = list(tail_and_target()[0])
for f in range(31, 35):                                       # simulation steps: live preview's own pose
    scene.frame_set(f)
scene.frame_set(40)
shown[40] = list(tail_and_target()[0])
result = {"expected": expected, "shown": shown}
'''


def test_live_preview_blends_influence_with_the_users_own_pose(extension_zip):
    """A constraint at influence 0.5 aims live preview half way from where the user's own pose
    (kept channels, F-curves at the frame) puts the tail to the target, as Blender measures both
    with the IK muted; after simulated frames too, so live preview's own output is not taken for
    the user's pose."""
    import numpy as np

    r = run_in_blender(SCENES + INFLUENCE, extension_zip=extension_zip)
    for f in ("30", "40"):
        np.testing.assert_allclose(r["shown"][f], r["expected"][f], rtol=0, atol=1e-5)


CONTROL = r'''
clear_scene()
scene, rig, target, held = held_chain_rig(48)           # bone02's own rotation is animated
curves = keys_module.Channels(rig)


def state(f):
    """The held bone's rotation as written and as animated at frame f, and the tail's error."""
    dg = bpy.context.evaluated_depsgraph_get()
    re = rig.evaluated_get(dg)
    pb = re.pose.bones[-1]
    tail = re.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))
    animated = [curves.find('pose.bones["bone02"].rotation_quaternion', i).evaluate(f) for i in range(4)]
    return {"written": list(held.rotation_quaternion), "animated": animated,
            "error": (tail - target.evaluated_get(dg).matrix_world.translation).length}


scene.frame_set(1)
with bpy.context.temp_override(object=rig, active_object=rig):
    bpy.ops.itasc.live_preview()
out = {}
scene.frame_set(30)                                           # a jump: solved to convergence
out[30] = state(30)
for f in range(31, 35):
    scene.frame_set(f)
scene.frame_set(40)
out[40] = state(40)
result = out
'''


def test_live_preview_holds_ik_rotation_control_to_the_users_own_pose(extension_zip):
    """A bone with IK rotation control keeps its animated rotation (the F-curve's value at the
    frame) while the chain reaches the target, after simulated frames too."""
    import numpy as np

    r = run_in_blender(SCENES + CONTROL, extension_zip=extension_zip)
    for f in ("30", "40"):
        written, animated = np.asarray(r[f]["written"]), np.asarray(r[f]["animated"])
        animated /= np.linalg.norm(animated)
        angle = 2.0 * min(np.linalg.norm(written - animated), np.linalg.norm(written + animated))  # small angles
        assert angle < 1e-4, (f, angle)
        assert r[f]["error"] < 1e-5


BAKE_DURING_LIVE = r'''
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
with bpy.context.temp_override(object=rigs[True], active_object=rigs[True]):
    bpy.ops.itasc.live_preview()
for f in (4, 5, 6, 9):
    scene.frame_set(f)                          # live preview poses the first rig's chain
live_moved = max((rigs[True].pose.bones[i].rotation_quaternion.rotation_difference(
    rigs[False].pose.bones[i].rotation_quaternion).angle) for i in range(6))
baked = {str(on): api.bake(rig, 1, 12).q.tolist() for on, rig in rigs.items()}
result = {"baked": baked, "live_moved": live_moved, "still_on": rigs[True].itasc.live_preview}
'''


def test_a_bake_during_live_preview_starts_from_the_users_own_pose_not_live_previews(extension_zip):
    """Live preview has posed one of two identical rigs; baking both gives the same joint values:
    the start pose, the pose a constraint's influence of 0.5 blends with and the rotation an IK
    rotation control holds to are the user's own, not live preview's last output."""
    import numpy as np

    r = run_in_blender(SCENES + BAKE_DURING_LIVE, extension_zip=extension_zip)
    assert r["still_on"]
    assert r["live_moved"] > 0.05                 # live preview's pose is not the user's
    np.testing.assert_allclose(r["baked"]["True"], r["baked"]["False"], rtol=0, atol=1e-12)

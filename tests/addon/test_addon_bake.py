"""Baking and solving through the API in real Blender: accuracy measured by Blender itself, keys
left alone outside what a bake writes, the hand-over of Blender's IK constraints, bad input."""

import pytest

from tests.addon.test_addon_scenes import SCENES
from tools.blender_session import run_in_blender

pytestmark = pytest.mark.blender


def run(body, extension_zip):
    return run_in_blender(SCENES + body, extension_zip=extension_zip)


ACCURACY = r'''
clear_scene()
scene, rig, target = chain_rig(N_BONES, N_FRAMES)
frames = range(1, N_FRAMES + 1)
# Blender's own iTaSC on the same rig first (its defaults), for contrast only.
import time
t = time.perf_counter()
blender = tip_errors(scene, rig, target, frames)
blender_seconds = time.perf_counter() - t
res = api.bake(rig, 1, N_FRAMES)
ik = rig.pose.bones[-1].constraints[0]
muted = ik.mute
ours = tip_errors(scene, rig, target, frames)   # Blender re-evaluates the baked keys, its IK muted
result = {
    "ours": ours, "blender": blender, "blender_seconds": blender_seconds, "muted": muted,
    "frames": res.frames.tolist(), "shape": list(res.position_error.shape),
    "rotation_error_nan": bool(np.isnan(res.rotation_error).all()),
    "reported": res.position_error[:, 0].tolist(), "converged": res.converged.tolist(),
    "iterations": res.iterations.tolist(), "seconds": res.seconds,
    "types": [type(getattr(res, n)).__name__ for n in ("frames", "position_error", "rotation_error",
                                                      "iterations", "converged")],
    "keys": len(keys_module.Channels(rig).all()),
}
'''


@pytest.mark.parametrize("n_bones", [6, 30])
def test_bake_puts_every_tail_on_the_target_as_blender_measures_it(extension_zip, n_bones):
    n_frames = 120
    body = ACCURACY.replace("N_BONES", str(n_bones)).replace("N_FRAMES", str(n_frames))
    r = run(body, extension_zip)
    tolerance = 1e-6 * n_bones
    ours, blender = r["ours"], r["blender"]
    print(f"\n{n_bones}-bone chain, {n_frames} frames on a path: ours (baked, measured in Blender) max "
          f"{max(ours):.3g}, median {sorted(ours)[len(ours) // 2]:.3g}, bake {r['seconds']:.3f} s; Blender's "
          f"iTaSC max {max(blender):.3g}, median {sorted(blender)[len(blender) // 2]:.3g}, "
          f"{sum(e > 1e-3 for e in blender)} frames > 1 mm, {r['blender_seconds']:.3f} s")
    assert r["muted"]
    assert r["frames"] == list(range(1, n_frames + 1))
    assert r["shape"] == [n_frames, 1] and r["rotation_error_nan"]
    assert set(r["types"]) == {"ndarray"}
    assert all(r["converged"])
    assert max(ours) <= tolerance, max(ours)
    # Our own report agrees with Blender's measurement to float32 rounding.
    assert max(abs(a - b) for a, b in zip(ours, r["reported"])) <= tolerance
    assert r["keys"] == 4 * n_bones            # quaternion channels of every chain bone


KEEP = r'''
clear_scene()
scene, rig, target = chain_rig(6, 60, rotation_modes=["QUATERNION", "XYZ", "ZXY", "QUATERNION", "AXIS_ANGLE"])
pb = rig.pose.bones
# Keys that must survive: other channels of chain bones, chain channels outside the range
# (with unusual handle types and interpolation), and a bone outside the chain.
arm = rig.data
bpy.context.view_layer.objects.active = rig
bpy.ops.object.mode_set(mode="EDIT")
extra = arm.edit_bones.new("extra")
extra.head, extra.tail = (2.0, 0.0, 0.0), (2.0, 0.0, 1.0)
bpy.ops.object.mode_set(mode="OBJECT")
pb = rig.pose.bones
for f, v in ((1, 0.1), (20, 0.3), (45, -0.2)):
    pb["extra"].location = (v, 0.0, 0.0)
    pb["extra"].keyframe_insert("location", frame=f)
    pb["bone03"].scale = (1.0, 1.0, 1.0)        # keyed, but unscaled: the solver models rigid bones
    pb["bone03"].keyframe_insert("scale", frame=f)
for f, angle in ((1, 0.2), (5, 0.25), (25, 0.4), (50, 0.1), (58, -0.3)):
    pb["bone01"].rotation_euler = (angle, 0.0, 0.0)
    pb["bone01"].keyframe_insert("rotation_euler", frame=f)
    pb["bone00"].rotation_quaternion = (math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0)
    pb["bone00"].keyframe_insert("rotation_quaternion", frame=f)
fc = next(c for c in keys_module.Channels(rig).all() if c.data_path.endswith("rotation_euler") and c.array_index == 0)
fc.keyframe_points[0].interpolation = "CONSTANT"
fc.keyframe_points[-1].handle_left_type = "VECTOR"
fc.keyframe_points[1].type = "BREAKDOWN"
before = all_keys(rig)
res = api.bake(rig, 10, 40)
after = all_keys(rig)
scene.frame_set(1)
errors = tip_errors(scene, rig, target, range(10, 41), bone="bone05")
rot = {}
for name in ("bone00", "bone01", "bone02", "bone04"):
    b = rig.pose.bones[name]
    path = {"QUATERNION": "rotation_quaternion",
            "AXIS_ANGLE": "rotation_axis_angle"}.get(b.rotation_mode, "rotation_euler")
    rot[name] = [after[f'pose.bones["{name}"].{path}[{i}]']["co"] for i in range(4 if "euler" not in path else 3)]
result = {"before": before, "after": after, "errors": errors, "rot": rot, "converged": bool(res.converged.all())}
'''


def _in(frame, first=10, last=40):
    return first <= frame <= last


def test_bake_leaves_every_other_key_exactly_as_it_was(extension_zip):
    r = run(KEEP, extension_zip)
    before, after = r["before"], r["after"]
    assert r["converged"] and max(r["errors"]) <= 6e-6
    chain_rotation = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle")
    for channel, old in before.items():
        new = after[channel]
        if not any(p in channel for p in chain_rotation) or "extra" in channel:
            assert new == old, channel                      # other bones and channels: byte for byte
            continue
        keep = [i for i, co in enumerate(old["co"]) if not _in(co[0])]
        kept = [i for i, co in enumerate(new["co"]) if not _in(co[0])]
        assert len(keep) == len(kept), channel
        for i, j in zip(keep, kept):
            for name in old:
                assert new[name][j] == old[name][i], (channel, name, old["co"][i])
        baked = [co[0] for co in new["co"] if _in(co[0])]
        assert baked == list(range(10, 41)), channel
    # New keys are the same whether their curve was new (keyframe_points.add's own defaults) or
    # rebuilt around kept keys: every attribute but position and handles.
    fresh, rebuilt = after['pose.bones["bone02"].rotation_euler[2]'], after['pose.bones["bone01"].rotation_euler[0]']
    assert not any('bone02"].rotation_euler' in c for c in before)
    rebuilt_new = [i for i, co in enumerate(rebuilt["co"]) if _in(co[0])]
    for name in set(fresh) - {"co", "handle_left", "handle_right"}:
        assert {repr(v) for v in fresh[name]} == {repr(rebuilt[name][i]) for i in rebuilt_new}, name
    # Baked channels exist for every chain bone, in its own rotation mode.
    assert 'pose.bones["bone04"].rotation_axis_angle[0]' in after
    assert 'pose.bones["bone02"].rotation_euler[2]' in after
    assert not any("rotation_quaternion" in c and "bone01" in c for c in after)
    # Continuity: consecutive baked Euler angles and quaternions do not jump.
    # (Axis-angle: the angle; its axis swings freely where the angle is small.)
    for name, channels in r["rot"].items():
        for values in channels[:1] if name == "bone04" else channels:
            inside = [v for f, v in values if _in(f)]
            assert max(abs(a - b) for a, b in zip(inside, inside[1:])) < 0.5, name


SOLVE_FRAME = r'''
clear_scene()
scene, rig, target = chain_rig(6, 40)
for f in (1, 30):
    rig.pose.bones["bone02"].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    rig.pose.bones["bone02"].keyframe_insert("rotation_quaternion", frame=f)
    rig.pose.bones["bone02"].keyframe_insert("location", frame=f)
scene.frame_set(17)
before = all_keys(rig)
res_pose = api.solve_frame(rig)                 # auto-keying is off: pose only
dg = bpy.context.evaluated_depsgraph_get()
pb = rig.evaluated_get(dg).pose.bones[-1]
tail = rig.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))
pose_error = (tail - target.evaluated_get(dg).matrix_world.translation).length
unchanged = all_keys(rig) == before
res_key = api.solve_frame(rig, frame=23, key=True)
after = all_keys(rig)
keyed_error = tip_errors(scene, rig, target, [23])[0]
result = {"pose_error": pose_error, "unchanged": unchanged, "frame": res_key.frames.tolist(),
          "before": before, "after": after, "keyed_error": keyed_error, "current": scene.frame_current}
'''


def test_solve_frame_poses_the_current_frame_and_keys_only_that_frame(extension_zip):
    r = run(SOLVE_FRAME, extension_zip)
    assert r["pose_error"] <= 6e-6
    assert r["unchanged"]
    assert r["frame"] == [23.0] and r["current"] == 23
    assert r["keyed_error"] <= 6e-6
    before, after = r["before"], r["after"]
    for channel, old in before.items():
        new = after[channel]
        if "rotation_quaternion" not in channel:
            assert new == old, channel
            continue
        frames = [co[0] for co in new["co"]]
        assert frames == [1.0, 23.0, 30.0], channel
        for name in old:
            assert [new[name][0], new[name][2]] == old[name], (channel, name)
    new_channels = set(after) - set(before)
    assert new_channels and all(len(after[c]["co"]) == 1 and after[c]["co"][0][0] == 23.0 for c in new_channels)


STRETCH = r'''
clear_scene()
scene, rig, target = chain_rig(3, 10)
rig.pose.bones[-1].constraints[0].use_stretch = True
rig.pose.bones[-1].ik_stretch = 0.3              # the last bone only: a parent's Y scale would scale its children
target.constraints[0].mute = True
target.location = (0.0, 1.0, 3.5)              # 3.64 from the root: out of the unstretched reach 3
res = api.solve_frame(rig)
dg = bpy.context.evaluated_depsgraph_get()
pb = rig.evaluated_get(dg).pose.bones[-1]
tail = rig.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))
result = {"error": (tail - Vector((0.0, 1.0, 3.5))).length, "scales": [list(pb.scale) for pb in rig.pose.bones],
          "warnings": list(res.warnings)}
'''


def test_solve_frame_writes_the_stretch_as_the_bones_y_scale(extension_zip):
    r = run(STRETCH, extension_zip)
    assert r["error"] <= 1e-5                          # the stretched chain reaches the target
    assert r["scales"][-1][1] > 1.6 and r["warnings"] == []    # 3 unit bones cover 3.64 only stretched
    assert all(x == 1.0 and z == 1.0 for x, _, z in r["scales"])   # X / Z scale as they were


HAND_OVER = r'''
clear_scene()
scene, rig, target = chain_rig(4, 10)
# A second IK constraint the user had muted: we neither drive it nor unmute it.
other = rig.pose.bones["bone01"].constraints.new("IK")
other.target, other.chain_count, other.mute = target, 2, True
first = rig.pose.bones["bone03"].constraints[0]
api.drive(rig)
driving = [first.mute, other.mute]
res = api.bake(rig, 1, 10)
path = bpy.path.abspath("//") or "."
import os, tempfile
blend = os.path.join(tempfile.mkdtemp(), "handover.blend")
bpy.ops.wm.save_as_mainfile(filepath=blend)
bpy.ops.wm.open_mainfile(filepath=blend)
rig = bpy.data.objects["chain"]
reloaded = [rig.pose.bones["bone03"].constraints[0].mute, rig.pose.bones["bone01"].constraints[-1].mute,
            rig.itasc.active]
api.release(rig)
released = [rig.pose.bones["bone03"].constraints[0].mute, rig.pose.bones["bone01"].constraints[-1].mute,
            rig.itasc.active]
result = {"driving": driving, "reloaded": reloaded, "released": released, "constraints": res.constraints}
'''


def test_blender_ik_is_muted_while_we_drive_and_restored_after_save_and_reload(extension_zip):
    r = run(HAND_OVER, extension_zip)
    assert r["driving"] == [True, True]
    assert r["constraints"] == ["bone03/IK"]           # the user's muted constraint is not driven
    assert r["reloaded"] == [True, True, True]
    assert r["released"] == [False, True, False]


CLEAR = r'''
clear_scene()
scene, rig, target = chain_rig(3, 20)
rig.pose.bones["bone01"].keyframe_insert("location", frame=5)
before = all_keys(rig)
api.bake(rig, 1, 20)
baked = sorted(all_keys(rig))
cleared = api.clear_bake(rig)
result = {"before": before, "after": all_keys(rig), "baked": baked, "cleared": cleared,
          "records": len(rig.itasc.baked)}
'''


def test_clear_bake_removes_what_the_bake_wrote(extension_zip):
    r = run(CLEAR, extension_zip)
    assert len(r["baked"]) == 1 * 3 + 4 * 3
    assert r["cleared"] == 12 and r["records"] == 0
    assert r["after"] == r["before"]


UNDO = r'''
clear_scene()
scene, rig, target = chain_rig(3, 12)
rig.pose.bones["bone00"].rotation_quaternion = (0.9, 0.1, 0.0, 0.0)
rig.pose.bones["bone00"].keyframe_insert("rotation_quaternion", frame=4)
bpy.ops.ed.undo_push(message="before bake")
before = all_keys(rig)
with bpy.context.temp_override(object=rig, active_object=rig):
    # Called from a script, an operator pushes an undo step only when asked (the second argument).
    done = bpy.ops.itasc.bake("EXEC_DEFAULT", True, frame_start=1, frame_end=12)
baked = all_keys(rig)
undone = bpy.ops.ed.undo()
rig = bpy.data.objects["chain"]
result = {"done": list(done), "changed": baked != before, "undone": list(undone), "restored": all_keys(rig) == before,
          "active": rig.itasc.active, "mute": rig.pose.bones[-1].constraints[0].mute}
'''


def test_undo_after_the_bake_operator_restores_the_keys(extension_zip):
    r = run(UNDO, extension_zip)
    assert r["done"] == ["FINISHED"] and r["changed"]
    assert r["undone"] == ["FINISHED"]
    assert r["restored"]
    assert r["active"] is False and r["mute"] is False     # the hand-over is part of the same step


BAD = r'''
clear_scene()
scene, rig, target = chain_rig(3, 10)
rig.pose.bones["bone00"].keyframe_insert("location", frame=1)
before = all_keys(rig)
messages = {}
def attempt(label, fn):
    try:
        fn()
        messages[label] = None
    except api.RigError as err:
        messages[label] = str(err)
rig.scale = (1.0, 2.0, 1.0)
attempt("scale", lambda: api.bake(rig, 1, 10))
untouched = [rig.itasc.active, rig.pose.bones[-1].constraints[0].mute]
rig.scale = (2.0, 2.0, 2.0)
attempt("uniform", lambda: api.bake(rig, 1, 10))
rig.scale = (1.0, 1.0, 1.0)
target.location = (float("nan"), 0.0, 0.0)
target.constraints[0].mute = True
attempt("nan", lambda: api.bake(rig, 1, 10))
target.location = (0.0, 0.0, 1.0)
attempt("options", lambda: api.bake(rig, 1, 10, method="QR"))
attempt("range", lambda: api.bake(rig, 10, 1))
rig.pose.bones[-1].constraints[0].target = None
attempt("no target", lambda: api.bake(rig, 1, 10))
empty = bpy.data.objects.new("lonely", None)
attempt("not armature", lambda: api.bake(empty, 1, 10))
after = all_keys(rig)
# The uniform-scale bake did write (and reached its target); drop those channels to compare the rest.
location = 'pose.bones["bone00"].location[0]'
result = {"untouched": untouched, "messages": messages, "location_kept": after[location] == before[location],
          "finite": all(np.isfinite(v).all() for c in after.values() for v in map(np.asarray, c.values()))}
'''


def test_bad_input_gets_a_clear_message_and_writes_nothing_bad(extension_zip):
    r = run(BAD, extension_zip)
    m = r["messages"]
    assert "non-uniform scale" in m["scale"]
    assert r["untouched"] == [False, False]              # a refused rig is not handed over
    assert m["uniform"] is None
    assert "not finite" in m["nan"]
    assert "method" in m["options"]
    assert "before" in m["range"]
    assert "no IK constraint to drive" in m["no target"] and "no target" in m["no target"]
    assert "armature" in m["not armature"]
    assert r["location_kept"] and r["finite"]


TRANSFORMED = r'''
clear_scene()
scene, rig, target = chain_rig(6, 40)
# The armature object moved, turned and uniformly scaled; the chain (5 bones) hangs from bone00,
# which is animated and not solved; a second constraint holds bone02's tail at a distance.
rig.location = (0.5, -0.3, 0.2)
rig.rotation_euler = (0.1, -0.2, 0.3)
rig.scale = (1.3, 1.3, 1.3)
ik = rig.pose.bones[-1].constraints[0]
ik.chain_count = 5
root = rig.pose.bones["bone00"]
for f, angle in ((1, 0.0), (40, 0.3)):
    root.rotation_quaternion = (math.cos(angle / 2), 0.0, math.sin(angle / 2), 0.0)
    root.keyframe_insert("rotation_quaternion", frame=f)
anchor = bpy.data.objects.new("anchor", None)
scene.collection.objects.link(anchor)
anchor.location = (2.0, 0.0, 3.0)
dist = rig.pose.bones["bone02"].constraints.new("IK")
dist.target, dist.ik_type, dist.distance, dist.chain_count = anchor, "DISTANCE", 2.5, 2
dist.limit_mode = "LIMITDIST_ONSURFACE"
res = api.bake(rig, 1, 40)
errors = tip_errors(scene, rig, target, range(1, 41), bone="bone05")
distances = []
for f in range(1, 41):
    scene.frame_set(f)
    dg = bpy.context.evaluated_depsgraph_get()
    re = rig.evaluated_get(dg)
    pb = re.pose.bones["bone02"]
    tail = re.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))
    distances.append((tail - anchor.matrix_world.translation).length)
result = {"errors": errors, "distances": distances, "converged": res.converged.tolist(),
          "constraints": res.constraints, "reported": np.nanmax(res.position_error, axis=0).tolist()}
'''


def test_moved_scaled_armature_with_an_animated_parent_and_a_distance_constraint(extension_zip):
    r = run(TRANSFORMED, extension_zip)
    assert r["constraints"] == ["bone02/IK", "bone05/IK"]
    assert all(r["converged"])
    scene_tolerance = 1e-6 * 6 * 1.3
    assert max(r["errors"]) <= scene_tolerance
    # The distance constraint's radius is in the armature's own units: 2.5 x 1.3 in the world.
    assert max(abs(d - 2.5 * 1.3) for d in r["distances"]) <= scene_tolerance


STEP = r"""
clear_scene()
scene, rig, target = chain_rig(4, 30)
for pb in rig.pose.bones:
    if hasattr(pb, "select"):
        pb.select = pb.name in ("bone01", "bone03")
    else:
        pb.bone.select = pb.name in ("bone01", "bone03")
res = api.bake(rig, 3, 20, step=4, only_selected=True)
after = all_keys(rig)
result = {"frames": res.frames.tolist(), "channels": sorted({c.split('"')[1] for c in after}),
          "keyed": sorted({co[0] for c in after.values() for co in c["co"]})}
"""


def test_bake_with_a_step_keys_only_the_selected_bones_on_those_frames(extension_zip):
    r = run(STEP, extension_zip)
    assert r["frames"] == [3.0, 7.0, 11.0, 15.0, 19.0]
    assert r["channels"] == ["bone01", "bone03"]
    assert r["keyed"] == r["frames"]


CONTROL = r"""
clear_scene()
out = {}
for control in (False, True):
    scene, rig, target = chain_rig(6, 12, name=f"chain{int(control)}")
    root = rig.pose.bones["bone00"]
    root.rotation_quaternion = (math.cos(0.15), math.sin(0.15), 0.0, 0.0)   # a held pose, not animated
    root.use_ik_rotation_control, root.ik_rotation_weight = control, 1.0
    res = api.bake(rig, 1, 12)
    angles = []
    for f in range(1, 13):
        scene.frame_set(f)
        angles.append(rig.pose.bones["bone00"].rotation_quaternion.rotation_difference(
            root.rotation_quaternion.__class__((math.cos(0.15), math.sin(0.15), 0.0, 0.0))).angle)
    out[str(control)] = {"converged": bool(res.converged.all()), "shape": list(res.position_error.shape),
                         "drift": max(angles), "error": float(np.nanmax(res.position_error))}
    bpy.data.objects.remove(target)
result = out
"""


def test_rotation_control_keeps_a_bone_near_its_pose_while_the_target_is_reached(extension_zip):
    r = run(CONTROL, extension_zip)
    free, held = r["False"], r["True"]
    assert free["converged"] and held["converged"]
    assert held["shape"] == [12, 1] and held["error"] <= 6e-6
    print(f"\nbone00 drift from its pose: free {free['drift']:.3f} rad, with rotation control {held['drift']:.3f} rad")
    assert held["drift"] < free["drift"]


ANIMATED_CONTROL = r"""
clear_scene()
scene, rig, target, held = held_chain_rig(24)           # bone02's own rotation is animated
path = 'pose.bones["bone02"].rotation_quaternion'
curves = keys_module.Channels(rig)
animated = {f: [curves.find(path, i).evaluate(f) for i in range(4)] for f in range(1, 25)}
res = api.bake(rig, 1, 24)
baked = {f: [curves.find(path, i).evaluate(f) for i in range(4)] for f in range(1, 25)}
result = {"animated": animated, "baked": baked, "error": float(np.nanmax(res.position_error)),
          "warnings": list(res.warnings)}
"""


def test_bake_holds_ik_rotation_control_to_the_animated_rotation_of_each_frame(extension_zip):
    """A bone with IK rotation control whose own rotation is animated keeps, at every baked frame,
    the rotation its F-curves gave it at that frame (not the first frame's), while the tail reaches
    the target."""
    import numpy as np

    r = run(ANIMATED_CONTROL, extension_zip)
    assert r["error"] < 1e-5
    assert not any("control" in w for w in r["warnings"]), r["warnings"]
    for f in range(1, 25):
        animated, baked = np.asarray(r["animated"][str(f)]), np.asarray(r["baked"][str(f)])
        animated /= np.linalg.norm(animated)
        baked /= np.linalg.norm(baked)
        angle = 2.0 * min(np.linalg.norm(baked - animated), np.linalg.norm(baked + animated))  # small angles
        assert angle < 1e-4, (f, angle)


BASELINE = r'''
clear_scene()
scene, rig, target = chain_rig(3, 10)
res = api.bake(rig, 1, 10, method="GRADIENT", max_iterations=5000)
result = {"method": res.method, "errors": tip_errors(scene, rig, target, range(1, 11)),
          "converged": res.converged.tolist(), "iterations": res.iterations.tolist()}
'''


def test_gradient_descent_is_selectable_as_a_baseline(extension_zip):
    r = run(BASELINE, extension_zip)
    assert "GRADIENT" in r["method"].upper()
    assert all(r["converged"]) and max(r["errors"]) <= 3e-6
    print(f"\ngradient descent baseline: {sum(r['iterations']) / 10:.0f} iterations per frame")

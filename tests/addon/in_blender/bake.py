"""Bodies of test_addon_bake: baking and solving through the API, measured by Blender itself."""

import math
import os
import tempfile
import time

import bpy
import numpy as np
from mathutils import Quaternion, Vector

from .scenes import all_keys, api, chain_rig, clear_scene, held_chain_rig, keys_module, tip_errors


def accuracy(n_bones, n_frames):
    """Bake a chain on the path scene; Blender's own iTaSC on the same rig first, for contrast."""
    clear_scene()
    scene, rig, target = chain_rig(n_bones, n_frames)
    frames = range(1, n_frames + 1)
    t = time.perf_counter()
    blender = tip_errors(scene, rig, target, frames)
    blender_seconds = time.perf_counter() - t
    res = api.bake(rig, 1, n_frames)
    muted = rig.pose.bones[-1].constraints[0].mute
    ours = tip_errors(scene, rig, target, frames)   # Blender re-evaluates the baked keys, its IK muted
    return {
        "ours": ours, "blender": blender, "blender_seconds": blender_seconds, "muted": muted,
        "frames": res.frames.tolist(), "shape": list(res.position_error.shape),
        "rotation_error_nan": bool(np.isnan(res.rotation_error).all()),
        "reported": res.position_error[:, 0].tolist(), "converged": res.converged.tolist(),
        "iterations": res.iterations.tolist(), "seconds": res.seconds,
        "types": [type(getattr(res, n)).__name__ for n in ("frames", "position_error", "rotation_error",
                                                          "iterations", "converged")],
        "keys": len(keys_module.Channels(rig).all()),
    }


def keep():
    """Bake frames 10-40 of a chain whose keys must survive: other channels of chain bones, chain
    channels outside the range (unusual handle types and interpolation), a bone outside the chain."""
    clear_scene()
    scene, rig, target = chain_rig(6, 60, rotation_modes=["QUATERNION", "XYZ", "ZXY", "QUATERNION", "AXIS_ANGLE"])
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
    fc = next(c for c in keys_module.Channels(rig).all()
              if c.data_path.endswith("rotation_euler") and c.array_index == 0)
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
    return {"before": before, "after": after, "errors": errors, "rot": rot, "converged": bool(res.converged.all())}


def solve_frame():
    """solve_frame at the current frame (pose only, auto-keying off), then keyed at frame 23."""
    clear_scene()
    scene, rig, target = chain_rig(6, 40)
    for f in (1, 30):
        rig.pose.bones["bone02"].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        rig.pose.bones["bone02"].keyframe_insert("rotation_quaternion", frame=f)
        rig.pose.bones["bone02"].keyframe_insert("location", frame=f)
    scene.frame_set(17)
    before = all_keys(rig)
    api.solve_frame(rig)                            # auto-keying is off: pose only
    dg = bpy.context.evaluated_depsgraph_get()
    pb = rig.evaluated_get(dg).pose.bones[-1]
    tail = rig.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))
    pose_error = (tail - target.evaluated_get(dg).matrix_world.translation).length
    unchanged = all_keys(rig) == before
    res_key = api.solve_frame(rig, frame=23, key=True)
    after = all_keys(rig)
    keyed_error = tip_errors(scene, rig, target, [23])[0]
    return {"pose_error": pose_error, "unchanged": unchanged, "frame": res_key.frames.tolist(),
            "before": before, "after": after, "keyed_error": keyed_error, "current": scene.frame_current}


def stretch():
    """A 3-bone chain whose last bone stretches, aimed out of its unstretched reach."""
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
    return {"error": (tail - Vector((0.0, 1.0, 3.5))).length, "scales": [list(pb.scale) for pb in rig.pose.bones],
            "warnings": list(res.warnings)}


def hand_over():
    """drive, bake, save and reload the file, release: the mutes of Blender's IK at each step."""
    clear_scene()
    scene, rig, target = chain_rig(4, 10)
    # A second IK constraint the user had muted: we neither drive it nor unmute it.
    other = rig.pose.bones["bone01"].constraints.new("IK")
    other.target, other.chain_count, other.mute = target, 2, True
    first = rig.pose.bones["bone03"].constraints[0]
    api.drive(rig)
    driving = [first.mute, other.mute]
    res = api.bake(rig, 1, 10)
    blend = os.path.join(tempfile.mkdtemp(), "handover.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    bpy.ops.wm.open_mainfile(filepath=blend)
    rig = bpy.data.objects["chain"]
    reloaded = [rig.pose.bones["bone03"].constraints[0].mute, rig.pose.bones["bone01"].constraints[-1].mute,
                rig.itasc.active]
    api.release(rig)
    released = [rig.pose.bones["bone03"].constraints[0].mute, rig.pose.bones["bone01"].constraints[-1].mute,
                rig.itasc.active]
    return {"driving": driving, "reloaded": reloaded, "released": released, "constraints": res.constraint_names}


def clear():
    """Bake, then clear_bake: the keys before, baked and after."""
    clear_scene()
    scene, rig, target = chain_rig(3, 20)
    rig.pose.bones["bone01"].keyframe_insert("location", frame=5)
    before = all_keys(rig)
    api.bake(rig, 1, 20)
    baked = sorted(all_keys(rig))
    cleared = api.clear_bake(rig)
    return {"before": before, "after": all_keys(rig), "baked": baked, "cleared": cleared,
            "records": len(rig.itasc.baked)}


def undo():
    """The bake operator with an undo push, then one undo."""
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
    return {"done": list(done), "changed": baked != before, "undone": list(undone),
            "restored": all_keys(rig) == before,
            "active": rig.itasc.active, "mute": rig.pose.bones[-1].constraints[0].mute}


def bad_input():
    """Bakes of refused rigs and options: each one's message (None where it baked)."""
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
    return {"untouched": untouched, "messages": messages, "location_kept": after[location] == before[location],
            "finite": all(np.isfinite(v).all() for c in after.values() for v in map(np.asarray, c.values()))}


def transformed():
    """The armature object moved, turned and uniformly scaled; the chain (5 bones) hangs from bone00,
    which is animated and not solved; a second constraint holds bone02's tail at a distance."""
    clear_scene()
    scene, rig, target = chain_rig(6, 40)
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
    return {"errors": errors, "distances": distances, "converged": res.converged.tolist(),
            "constraints": res.constraint_names, "reported": np.nanmax(res.position_error, axis=0).tolist()}


def step():
    """Bake frames 3-20 every 4th frame, only the selected bones bone01 and bone03."""
    clear_scene()
    scene, rig, target = chain_rig(4, 30)
    for pb in rig.pose.bones:
        if hasattr(pb, "select"):
            pb.select = pb.name in ("bone01", "bone03")
        else:
            pb.bone.select = pb.name in ("bone01", "bone03")
    res = api.bake(rig, 3, 20, step=4, only_selected=True)
    after = all_keys(rig)
    return {"frames": res.frames.tolist(), "channels": sorted({c.split('"')[1] for c in after}),
            "keyed": sorted({co[0] for c in after.values() for co in c["co"]})}


def control():
    """The same held root pose baked without and with IK rotation control: its drift per case."""
    clear_scene()
    out = {}
    held_pose = Quaternion((math.cos(0.15), math.sin(0.15), 0.0, 0.0))
    for on in (False, True):
        scene, rig, target = chain_rig(6, 12, name=f"chain{int(on)}")
        root = rig.pose.bones["bone00"]
        root.rotation_quaternion = held_pose                # a held pose, not animated
        root.use_ik_rotation_control, root.ik_rotation_weight = on, 1.0
        res = api.bake(rig, 1, 12)
        angles = []
        for f in range(1, 13):
            scene.frame_set(f)
            angles.append(rig.pose.bones["bone00"].rotation_quaternion.rotation_difference(held_pose).angle)
        out[str(on)] = {"converged": bool(res.converged.all()), "shape": list(res.position_error.shape),
                        "drift": max(angles), "error": float(np.nanmax(res.position_error))}
        bpy.data.objects.remove(target)
    return out


def animated_control():
    """held_chain_rig's bone02 (rotation control, animated rotation): its F-curves before and after
    the bake, evaluated at every frame."""
    clear_scene()
    scene, rig, target, held = held_chain_rig(24)
    path = 'pose.bones["bone02"].rotation_quaternion'
    curves = keys_module.Channels(rig)
    animated = {f: [curves.find(path, i).evaluate(f) for i in range(4)] for f in range(1, 25)}
    res = api.bake(rig, 1, 24)
    baked = {f: [curves.find(path, i).evaluate(f) for i in range(4)] for f in range(1, 25)}
    return {"animated": animated, "baked": baked, "error": float(np.nanmax(res.position_error)),
            "warnings": list(res.warnings)}


def gradient_baseline():
    """A bake with method GRADIENT."""
    clear_scene()
    scene, rig, target = chain_rig(3, 10)
    res = api.bake(rig, 1, 10, method="GRADIENT", max_iterations=5000)
    return {"solver_path": res.solver_path, "errors": tip_errors(scene, rig, target, range(1, 11)),
            "converged": res.converged.tolist(), "iterations": res.iterations.tolist()}

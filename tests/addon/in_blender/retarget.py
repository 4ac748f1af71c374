"""Bodies of test_addon_retarget: both CMU clips (../shared/data/bvh, through Blender's own BVH
importer) retargeted onto Rigify's human metarig and onto the rig Rigify generates, ours and the
copy-rotation retarget, measured by Blender's evaluation of the keys; the clips renamed
and turned, mapped from their skeletons (bone_map_session). Sessions that call
these end with exit_at_once (Blender 4.2 crashes on exit once Rigify was enabled)."""

import importlib
import json
import math
from pathlib import Path

import bpy
import numpy as np

from . import addon
from .scenes import all_keys, clear_scene

api = addon("api")
bone_maps = addon("retarget.bone_maps")
rig_module = addon("rig")
keys_module = addon("keys")

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "bvh"
CLIPS = {"walk": "cmu_02_01_walk.bvh", "131": "cmu_131_01_start_walk_stop.bvh"}
CMU_UNIT = 0.056444          # metres per CMU unit (SOURCES.md)
KNEE_LIMIT = (0.0, math.radians(150.0))


def import_clip(name):
    """The clip through Blender's BVH importer, in metres, the scene at the clip's 120 fps."""
    before = set(bpy.data.objects)
    bpy.ops.import_anim.bvh(filepath=str(DATA / CLIPS[name]), global_scale=CMU_UNIT, update_scene_fps=True,
                            update_scene_duration=True)
    return next(o for o in bpy.data.objects if o not in before and o.type == "ARMATURE")


def metarig(name="metarig", knee_limits=True):
    """Rigify's human metarig; its knees given IK limits (X only, 0..150 degrees), so that the
    retarget has joint limits to keep."""
    bpy.ops.object.armature_human_metarig_add()
    obj = bpy.context.view_layer.objects.active
    obj.name = name
    if knee_limits:
        for side in "LR":
            pb = obj.pose.bones[f"shin.{side}"]
            pb.lock_ik_y = pb.lock_ik_z = True
            pb.use_ik_limit_x = True
            pb.ik_min_x, pb.ik_max_x = KNEE_LIMIT
    bpy.ops.object.mode_set(mode="OBJECT")
    return obj


def summary(result):
    """The figures the host asserts, as JSON-able values."""
    spans = result.spans()
    held = np.nan_to_num(result.position_error, nan=0.0)
    return {
        "frames": len(result.frames), "spans": [[p, a, b] for p, a, b, _ in spans],
        "slide": [s for *_, s in spans],
        "pin_distance": [float(d) for p in result.points for d in result.pin_distance[p]],
        "held_max": float(held.max()),
        "below_floor": float(np.max(result.floor_penetration)),
        "finite": bool(np.isfinite(result.rotation_error).all() and np.isfinite(result.floor_penetration).all()),
        "keyed_rotation_error": float(np.max(result.rotation_error)),
        "keyed_by_role": dict(zip(result.roles, np.max(result.rotation_error, axis=0).tolist())),
        "style": result.style_difference, "converged": int(result.converged.sum()),
        "seconds": result.seconds, "solve_seconds": result.solve_seconds, "method": result.method, "scale": result.scale,
        "warnings": list(result.warnings),
        "engine_converged": int(np.sum(result.engine.converged)) if result.engine is not None else None,
    }


def knee_angles(rig, frames):
    """Blender's evaluated knee rotation per frame and side: (X angle, |Y|+|Z| off-axis) from the
    shin's matrix_basis quaternion, as keyed."""
    out = []
    scene = bpy.context.scene
    for f in frames:
        scene.frame_set(int(f))
        row = []
        for side in "LR":
            q = rig.pose.bones[f"shin.{side}"].matrix_basis.to_quaternion()
            e = q.to_euler("XYZ")
            row.append([e.x, abs(e.y) + abs(e.z)])
        out.append(row)
    return out


def foot_paths(src, frames):
    """An armature's foot and toe heads (F, 4, 3) in world space (foot.L, toe.L, foot.R, toe.R by role)."""
    smap = bone_maps.auto_map([b.name for b in src.data.bones])
    names = [smap[r] for r in ("foot.L", "toe.L", "foot.R", "toe.R")]
    out = []
    scene = bpy.context.scene
    for f in frames:
        scene.frame_set(int(f))
        out.append([list(src.matrix_world @ src.pose.bones[n].head) for n in names])
    return np.array(out)


def metarig_session():
    """Everything on the metarig (one session): bone maps, both clips ours and copied, the walk's
    contacts against its own feet, user-edited spans, T-pose/A-pose, bad input."""
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    clear_scene()
    out = {}
    walk, clip = import_clip("walk"), import_clip("131")
    rig = metarig()
    names = {n: [b.name for b in o.data.bones] for n, o in (("walk", walk), ("131", clip), ("metarig", rig))}
    out["presets"] = {n: bone_maps.best_preset(v)[0] for n, v in names.items()}
    out["unmapped"] = {n: bone_maps.unmapped(bone_maps.auto_map(v)) for n, v in names.items()}
    partial = ["mixamorig:Hips", "mixamorig:Spine", "mixamorig:LeftUpLeg", "mixamorig:LeftLeg", "mixamorig:LeftFoot"]
    out["mixamo_partial"] = [bone_maps.best_preset(partial)[0], bone_maps.unmapped(bone_maps.auto_map(partial))]
    pairs = {r: (bone_maps.auto_map(names["walk"]).get(r, ""), bone_maps.auto_map(names["metarig"]).get(r, ""))
             for r in bone_maps.ROLES}
    out["json_round_trip"] = bone_maps.from_json(bone_maps.to_json(pairs)) == pairs

    # The walk: ours, then the copy-rotation retarget on the same spans.
    ours = api.retarget(rig, walk, calibration_frame=1)
    out["walk"] = summary(ours)
    out["walk_jumps"] = control_jumps(rig, walk, ours)
    frames = ours.frames
    out["walk_knees"] = knee_angles(rig, frames[::4])
    out["walk_feet"] = foot_paths(walk, frames).tolist()
    out["walk_target_feet"] = foot_paths(rig, frames).tolist()
    out["metarig_feet"] = [list(rig.data.bones[n].head_local) for n in ("foot.L", "toe.L", "foot.R", "toe.R")]
    out["walk_frames"] = frames.tolist()
    out["fps"] = bpy.context.scene.render.fps / bpy.context.scene.render.fps_base
    out["walk_copy"] = summary(api.retarget(rig, walk, calibration_frame=1, method="copy", contacts=ours.contacts))

    # User-edited spans: one removed, one moved, one added; the result holds exactly those.
    edited = {p: list(s) for p, s in ours.contacts.items()}
    removed = edited["heel.L"].pop(0)
    a, b = edited["ball.R"][0]
    edited["ball.R"][0] = (a + 2, b - 2)
    edited["heel.L"].insert(0, (removed[0] + 5, removed[0] + 25))       # a new, shorter one inside it
    mine = api.retarget(rig, walk, calibration_frame=1, contacts=edited)          # the whole walk: spans to its end
    out["edited"] = {"asked": {p: [list(s) for s in v] for p, v in edited.items()},
                     "used": {p: [list(s) for s in v] for p, v in mine.contacts.items()},
                     "removed": list(removed), **summary(mine)}

    # The other clip (its walk part) onto the metarig.
    out["131"] = summary(api.retarget(rig, clip, 480, 720, calibration_frame=480))
    out["131_copy"] = summary(api.retarget(rig, clip, 480, 720, calibration_frame=480, method="copy"))

    # T-pose source (the walk's frame 1 is the conversion's T-pose) onto an A-pose target (a copy
    # of the metarig with its arms lowered 40 degrees at rest), and an A-pose source (the metarig
    # keyed from the walk, arms lowered) onto a T-pose target.
    a_rig = metarig("metarig_A")
    bpy.context.view_layer.objects.active = a_rig
    bpy.ops.object.mode_set(mode="EDIT")
    for side, sign in (("L", 1.0), ("R", -1.0)):
        eb = a_rig.data.edit_bones[f"upper_arm.{side}"]
        from mathutils import Matrix
        pivot = eb.head.copy()
        turn = Matrix.Translation(pivot) @ Matrix.Rotation(math.radians(40.0 * sign), 4, "Y") @ Matrix.Translation(-pivot)
        for name in [f"upper_arm.{side}", f"forearm.{side}", f"hand.{side}"] + \
                [b.name for b in a_rig.data.edit_bones if b.name.endswith(f".{side}") and b.parent and
                 b.parent.name.startswith(f"hand.{side}")]:
            bone = a_rig.data.edit_bones[name]
            bone.transform(turn)
    bpy.ops.object.mode_set(mode="OBJECT")
    short = {p: [s for s in v if s[1] <= 160] for p, v in ours.contacts.items()}
    out["short_spans"] = [[p, a, b] for p, v in short.items() for a, b in v]
    t_to_a = api.retarget(a_rig, walk, 1, 160, calibration_frame=1, contacts=short)
    out["t_to_a"] = summary(t_to_a)
    out["t_to_a_arm_rest_z"] = [a_rig.data.bones["hand.L"].head_local.z, rig.data.bones["hand.L"].head_local.z]
    # the reverse: the A-pose rig (now keyed with the walk) as the source of the T-pose metarig
    t_rig = metarig("metarig_T")
    for name, mode in (("thigh.L", "YXZ"), ("spine.003", "AXIS_ANGLE")):       # keys in each bone's own mode
        t_rig.pose.bones[name].rotation_mode = mode
    a_map = {r: (b, b) for r, b in bone_maps.auto_map([b.name for b in a_rig.data.bones]).items()}
    a_to_t = api.retarget(t_rig, a_rig, 1, 160, bone_map=a_map, calibration_frame=11, contacts=short)
    out["a_to_t"] = summary(a_to_t)
    out["a_to_t_paths"] = sorted({k.split("].")[1].split("[")[0] for k in all_keys(t_rig)
                                  if k.startswith(('pose.bones["thigh.L"]', 'pose.bones["spine.003"]'))})
    out["steps"] = job_steps(rig, walk)

    out["bad"] = bad_input(rig, walk)
    out["ui"] = panel_and_operators(rig, walk)
    return out


def panel_and_operators(rig, walk):
    """The panel's way: auto map, the map through JSON and back, spans edited with the list
    operators (add, move, remove), the retarget operator holding exactly those spans; what it
    keyed on the target, and whether anything else changed."""
    import tempfile

    scene = bpy.context.scene
    p = scene.itasc_retarget
    p.source, p.target = walk, rig
    out = {"auto": bpy.ops.itasc.retarget_auto_map() == {"FINISHED"}}
    out["mapped"] = sum(bool(r.source_bone and r.target_bone) for r in p.bone_map)
    path = Path(tempfile.mkdtemp()) / "map.json"
    bpy.ops.itasc.retarget_map_export(filepath=str(path))
    before_map = [(r.role, r.source_bone, r.target_bone) for r in p.bone_map]
    p.bone_map[0].source_bone = "nothing"
    bpy.ops.itasc.retarget_map_import(filepath=str(path))
    out["json"] = [(r.role, r.source_bone, r.target_bone) for r in p.bone_map] == before_map
    p.spans.clear()
    for point, a, b in (("heel.L", 10, 70), ("ball.L", 12, 80), ("heel.R", 75, 140)):
        row = p.spans.add()
        row.point, row.start, row.end = point, a, b
    p.span_index = 2
    out["up"] = bpy.ops.itasc.retarget_span(action="UP") == {"FINISHED"}
    p.span_index = 0
    out["remove"] = bpy.ops.itasc.retarget_span(action="REMOVE") == {"FINISHED"}
    scene.frame_set(20)
    out["add"] = bpy.ops.itasc.retarget_span(action="ADD") == {"FINISHED"}
    p.spans[p.span_index].point = "heel.L"
    out["listed"] = [(r.point, r.start, r.end) for r in p.spans]
    p.calibration_frame = 1
    others = {o.name: all_keys(o) for o in bpy.data.objects if o != rig and o.animation_data}
    before = all_keys(rig)
    out["run"] = bpy.ops.itasc.retarget() == {"FINISHED"}
    after = all_keys(rig)
    out["others_unchanged"] = json.dumps(others) == json.dumps(
        {o.name: all_keys(o) for o in bpy.data.objects if o != rig and o.animation_data})
    out["changed_channels"] = sorted(k for k in after if before.get(k) != after[k])
    out["summary"] = p.summary
    out["frame"] = scene.frame_current
    p.bone_map[1].source_bone = ""                               # an unmapped role shows in the panel
    out["drawn"] = draw_panel()
    return out


class Layout:
    """Records what a panel draws (the UI layout only exists while Blender draws a region)."""

    def __init__(self, log):
        self.log = log

    def row(self, **kw):
        return Layout(self.log)

    column = box = row

    def label(self, text="", icon="NONE"):
        self.log.append(["label", text])

    def prop(self, data, name, **kw):
        getattr(data, name)
        self.log.append(["prop", name])

    def prop_search(self, data, name, search_data, search_name, **kw):
        getattr(data, name)
        getattr(search_data, search_name)
        self.log.append(["prop_search", name])

    def template_list(self, list_type, list_id, data, name, active_data, active_name, **kw):
        getattr(bpy.types, list_type)
        items = getattr(data, name)
        getattr(active_data, active_name)
        for item in items:                                          # each row as the list draws it
            getattr(bpy.types, list_type).draw_item(None, bpy.context, self, data, item, 0, active_data, active_name)
        self.log.append(["list", name, len(items)])

    def operator(self, idname, **kw):
        module, name = idname.split(".")
        getattr(getattr(bpy.ops, module), name).get_rna_type()
        self.log.append(["operator", idname])
        return type("Props", (), {})()


def draw_panel():
    """What the Retarget panel draws now."""
    panels = addon("retarget.panels")
    log = []
    panels.ITASC_PT_retarget.draw(type("PanelSelf", (), {"layout": Layout(log)})(), bpy.context)
    return log


def job_steps(rig, walk):
    """A retarget run step by step as the modal operator runs it: progress never goes back and
    ends at the total; a job stopped before its write step leaves every key as it was, one
    stopped after it keeps its keys and says so."""
    job_module = addon("retarget.job")
    before = json.dumps(all_keys(rig))
    stopped = job_module.prepare(rig, walk, calibration_frame=1)
    out = {"prepared_unchanged": json.dumps(all_keys(rig)) == before}
    steps = stopped.steps()
    for _ in range(3):
        next(steps)
    out.update(stopped={"done": stopped.done, "frames": len(stopped.frames), "written": stopped.written},
               stopped_message=stopped.cancel(), unchanged=json.dumps(all_keys(rig)) == before)
    late = job_module.prepare(rig, walk, 1, 20, calibration_frame=1)
    steps, late_progress = late.steps(), []
    while not late.written:
        late_progress.append(next(steps))
    out["late"] = {"progress": late_progress, "total": late.total, "keys_written": late.keys_written,
                   "message": late.cancel()}
    job = job_module.prepare(rig, walk, 1, 100, calibration_frame=1)
    progress = [job.done]
    for done in job.steps():
        progress.append(done)
    out.update(progress=progress, total=job.total, converged=bool(job.result.converged.all()))
    return out


def bad_input(rig, walk):
    """Each bad input's message, and whether anything changed (keys of every object, records)."""
    def attempt(fn):
        before = {o.name: all_keys(o) for o in bpy.data.objects if o.animation_data}
        records = len(rig.itasc.baked)
        try:
            fn()
            message = None
        except rig_module.RigError as err:
            message = str(err)
        after = {o.name: all_keys(o) for o in bpy.data.objects if o.animation_data}
        return {"message": message,
                "unchanged": json.dumps(before) == json.dumps(after) and records == len(rig.itasc.baked)}

    out = {}
    smap = bone_maps.auto_map([b.name for b in walk.data.bones])
    tmap = bone_maps.auto_map([b.name for b in rig.data.bones])
    pairs = {r: (smap[r], tmap[r]) for r in smap if r in tmap}
    out["unmapped"] = attempt(lambda: api.retarget(rig, walk, bone_map={r: p for r, p in pairs.items()
                                                                        if r != "shin.L"}))
    out["zero_frames"] = attempt(lambda: api.retarget(rig, walk, 500, 400))
    out["outside"] = attempt(lambda: api.retarget(rig, walk, 1000, 1100))
    # A target without legs: the metarig copy with its legs deleted.
    legless = rig.copy()
    legless.data = rig.data.copy()
    legless.animation_data_clear()
    bpy.context.scene.collection.objects.link(legless)
    bpy.context.view_layer.objects.active = legless
    bpy.ops.object.mode_set(mode="EDIT")
    for b in list(legless.data.edit_bones):
        if b.name.startswith(("thigh", "shin", "foot", "toe", "heel")):
            legless.data.edit_bones.remove(b)
    bpy.ops.object.mode_set(mode="OBJECT")
    out["no_legs"] = attempt(lambda: api.retarget(legless, walk))
    # NaN and missing channels on a copy of the clip.
    bad = walk.copy()
    bad.animation_data.action = walk.animation_data.action.copy()
    bpy.context.scene.collection.objects.link(bad)
    keys = addon("keys")
    channels = keys.Channels(bad)
    fc = next(fc for fc in channels.all() if fc.data_path.startswith(f'pose.bones["{smap["shin.R"]}"].rotation'))
    fc.keyframe_points[40].co.y = float("nan")
    out["nan"] = attempt(lambda: api.retarget(rig, bad))
    for fc in [fc for fc in channels.all() if fc.data_path.startswith(f'pose.bones["{smap["foot.L"]}"].rotation')]:
        channels.remove(fc)
    out["missing"] = attempt(lambda: api.retarget(rig, bad))
    return out


def basis_rotations(obj, bone, frames):
    """(F, 3, 3) the bone's keyed rotation (its F-curves in its rotation mode) at `frames`."""
    from mathutils import Euler, Quaternion

    pb = obj.pose.bones[bone]
    mode = pb.rotation_mode
    prop = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")
    channels = keys_module.Channels(obj)
    curves = [channels.find(f'pose.bones["{bone}"].{prop}', i) for i in range(4 if prop != "rotation_euler" else 3)]
    default = list(getattr(pb, prop))
    out = []
    for f in frames:
        v = [fc.evaluate(f) if fc is not None else default[i] for i, fc in enumerate(curves)]
        if mode == "QUATERNION":
            m = Quaternion(v).normalized().to_matrix()
        elif mode == "AXIS_ANGLE":
            m = Quaternion(v[1:], v[0]).to_matrix()
        else:
            m = Euler(v, mode).to_matrix()
        out.append(np.array(m))
    return np.array(out)


def _jumps(R):
    """(F-1,) angle between consecutive rotations of (F, 3, 3)."""
    c = (np.trace(np.swapaxes(R[:-1], -1, -2) @ R[1:], axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.arccos(np.clip(c, -1.0, 1.0))


def control_jumps(rig, src, result):
    """{control: (its largest rotation change between frames, the source's own largest, the frame
    of the control's)} for each keyed control of a rig Rigify generated: the control's keyed
    rotation against the largest change the source bone of its role has, per frame the sum of
    its and its ancestors' keyed rotation changes (its world rotation changes by at most that)."""
    controls = addon("retarget.rigify_controls")
    frames = result.frames
    role_of = {t: r for r, (s, t) in result.bone_map.items()}
    out = {}
    for control, org, _ in controls.pairs(rig):
        role = role_of.get(org)
        if role is None:
            continue
        step = _jumps(basis_rotations(rig, control, frames))
        bound = np.zeros_like(step)
        bone = src.pose.bones[result.bone_map[role][0]]
        while bone is not None:
            bound += _jumps(basis_rotations(src, bone.name, frames))
            bone = bone.parent
        out[control] = [float(step.max()), float(bound.max()), int(frames[int(np.argmax(step))])]
    return out


def generated_session():
    """Both clips onto the rig Rigify generates (generated once), ours and copied; keys on its
    controls: which channels were keyed."""
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    clear_scene()
    walk, clip = import_clip("walk"), import_clip("131")
    bpy.ops.object.armature_human_metarig_add()
    bpy.ops.object.mode_set(mode="OBJECT")
    if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
        raise RuntimeError("Rigify could not generate its rig")
    rig = bpy.context.view_layer.objects.active
    out = {"preset": bone_maps.best_preset([b.name for b in rig.data.bones])[0]}
    before = {"stretch": {pb.name: pb.ik_stretch for pb in rig.pose.bones},
              "switches": {pb.name: pb.get("IK_FK") for pb in rig.pose.bones if "IK_FK" in pb}}
    ours = api.retarget(rig, walk, calibration_frame=1)
    out["walk"] = summary(ours)
    out["walk_jumps"] = control_jumps(rig, walk, ours)
    out["keyed_bones"] = sorted({path.split('"]')[0].split('["')[1] for path in all_keys(rig)})
    out["walk_copy"] = summary(api.retarget(rig, walk, calibration_frame=1, method="copy", contacts=ours.contacts))
    ours_131 = api.retarget(rig, clip, 480, 640, calibration_frame=480)
    out["131"] = summary(ours_131)
    out["131_jumps"] = control_jumps(rig, clip, ours_131)
    out["ik_fk"] = [rig.pose.bones[f"thigh_parent.{s}"]["IK_FK"] for s in "LR"]
    out["stretch_changed"] = sorted(b for b, v in before["stretch"].items() if rig.pose.bones[b].ik_stretch != v)
    api.clear_bake(rig)
    out["after_clear"] = {
        "keys": len(all_keys(rig)),
        "stretch_changed": sorted(b for b, v in before["stretch"].items() if rig.pose.bones[b].ik_stretch != v),
        "switches_changed": sorted(b for b, v in before["switches"].items() if rig.pose.bones[b].get("IK_FK") != v)}
    return json.loads(json.dumps(out, default=float))


# --- bone maps from the skeleton (#33) ---------------------------------------------------------

def rename_bones(obj, table):
    """Rename the armature's bones by `table` {old: new} (Blender renames the action's F-curve
    paths with them); two passes, so that names may swap."""
    for i, old in enumerate(table):
        obj.data.bones[old].name = f"__tmp{i}"
    for i, new in enumerate(table.values()):
        obj.data.bones[f"__tmp{i}"].name = new


def turn_rest(obj, axis, degrees):
    """Turn the armature's rest pose (every bone) about the armature's origin and the object
    back by the same turn: the world motion stays, the armature-space rest is turned (as a
    Y-up importer leaves it)."""
    from mathutils import Matrix
    R = Matrix.Rotation(math.radians(degrees), 4, axis)
    obj.data.transform(R)
    obj.matrix_world = obj.matrix_world @ R.inverted()


def random_names(names, seed):
    rng = np.random.default_rng(seed)
    return {n: "".join(rng.choice(list("0123456789abcdef"), 10)) for n in names}


def bone_map_session():
    """Clips renamed (Bandai style, Mixamo with the prefix "mixamorig7:", random names), their
    rest turned (Y up in armature space) or imported facing +Y, retargeted with no bone map onto
    the metarig, a metarig with random bone names and the rig Rigify generates; the structural
    maps of those targets; the panel's Auto operator and notes."""
    from tests.apps.retarget_bvh import BANDAI, MIXAMO, TRUTH
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    structure = importlib.import_module("bl_ext.user_default.itasc_ik.solver.retarget.structure")
    auto = addon("retarget.auto_map")
    clear_scene()
    out = {"runs": {}, "maps": {}}

    def structural(obj):
        names, parents, heads, tails = auto.rest_skeleton(obj)
        m = structure.structural_map(names, parents, heads, tails)
        return {"roles": m.roles, "ambiguous": m.ambiguous, "facing": m.facing}

    plain = metarig("metarig_plain", knee_limits=False)
    if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
        raise RuntimeError("Rigify could not generate its rig")
    generated = bpy.context.view_layer.objects.active
    bpy.ops.object.mode_set(mode="OBJECT")
    rig = metarig()
    out["maps"]["metarig"] = structural(rig)
    out["maps"]["metarig_plain"] = structural(plain)
    out["maps"]["metarig_preset"] = dict(bone_maps.PRESETS["rigify_metarig"])

    # Sources: the walk renamed Bandai style, rest turned to Y up in armature space.
    bandai = import_clip("walk")
    rename_bones(bandai, {TRUTH["walk"][r]: BANDAI[r] for r in bone_maps.ROLES})
    turn_rest(bandai, "X", -90.0)
    # The 131 clip renamed Mixamo style with a namespace prefix.
    mixamo = import_clip("131")
    rename_bones(mixamo, {**{b.name: "mixamorig7:" + ("Neck1" if b.name == "Neck" else b.name)
                             for b in mixamo.data.bones},
                          **{TRUTH["131"][r]: "mixamorig7:" + MIXAMO[r] for r in bone_maps.ROLES}})
    # The walk with random names, imported facing +Y (the importer's forward axis flipped).
    before = set(bpy.data.objects)
    bpy.ops.import_anim.bvh(filepath=str(DATA / CLIPS["walk"]), global_scale=CMU_UNIT, update_scene_fps=True,
                            update_scene_duration=True, axis_forward="Z")
    anonymous = next(o for o in bpy.data.objects if o not in before and o.type == "ARMATURE")
    fresh = random_names([b.name for b in anonymous.data.bones], 33)
    rename_bones(anonymous, fresh)
    truth = {"bandai": BANDAI, "mixamo": {r: "mixamorig7:" + MIXAMO[r] for r in bone_maps.ROLES},
             "anonymous": {r: fresh[TRUTH["walk"][r]] for r in bone_maps.ROLES}}
    out["truth"] = truth
    for key, obj in (("bandai", bandai), ("mixamo", mixamo), ("anonymous", anonymous)):
        mapping, notes, how = auto.armature_map(obj)
        out["maps"][key] = {"roles": mapping, "notes": notes, "how": how,
                            "names_only_unmapped": bone_maps.unmapped(bone_maps.auto_map([b.name for b in obj.data.bones]))}

    # A target with random bone names: a copy of the metarig renamed.
    odd = metarig("metarig_odd")
    odd_names = random_names([b.name for b in odd.data.bones], 7)
    rename_bones(odd, odd_names)
    out["truth"]["odd"] = {r: odd_names[b] for r, b in bone_maps.PRESETS["rigify_metarig"].items()}
    mapping, notes, how = auto.armature_map(odd)
    out["maps"]["odd"] = {"roles": mapping, "notes": notes, "how": how}

    # Retargets with no bone map.
    runs = (("bandai", rig, bandai, {}), ("anonymous", odd, anonymous, {}),
            ("mixamo", rig, mixamo, {"frame_start": 480, "frame_end": 720, "calibration_frame": 480}))
    for key, target, src, options in runs:
        options = {"calibration_frame": 1, **options}
        result = api.retarget(target, src, **options)
        out["runs"][key] = {**summary(result), "bone_map": {r: list(p) for r, p in result.bone_map.items()}}
    # The panel: Auto fills the map from names and skeletons, its notes are drawn.
    p = bpy.context.scene.itasc_retarget
    p.source, p.target = anonymous, odd
    out["ui_auto"] = bpy.ops.itasc.retarget_auto_map() == {"FINISHED"}
    out["ui_mapped"] = sum(bool(r.source_bone and r.target_bone) for r in p.bone_map)
    p.map_notes = "left/right: a note\nhead: another"
    out["ui_drawn"] = draw_panel()

    # The rig Rigify generates: its ORG- skeleton mapped by structure; a renamed clip onto it.
    out["maps"]["generated"] = structural(generated)
    out["maps"]["generated_preset"] = dict(bone_maps.PRESETS["rigify"])
    result = api.retarget(generated, bandai, calibration_frame=1)
    out["runs"]["bandai_generated"] = {**summary(result), "bone_map": {r: list(p) for r, p in result.bone_map.items()}}
    return json.loads(json.dumps(out, default=float))

"""OpenSim marker IK inside Blender: the gait2354 model and its trial imported, solved, baked,
exported and undone through the operators, and a trial with gaps in centimetres at 30 fps."""

import bpy
import numpy as np

from . import addon
from .scenes import all_keys, clear_scene, keys_module

S = addon("opensim.solve")
I = addon("opensim.importing")  # noqa: E741
P = addon("opensim.panels")
LAB = I.LAB_TO_BLENDER



def rotation_angle(A, B):
    """Angle (rad) of A^T B for nearly orthonormal 3x3 matrices, robust near zero."""
    D = A.T @ B
    skew = np.array([D[2, 1] - D[1, 2], D[0, 2] - D[2, 0], D[1, 0] - D[0, 1]])
    return float(np.arctan2(0.5 * np.linalg.norm(skew), 0.5 * (np.trace(D) - 1.0)))


def pose_errors(arm, om, q, frames, u=1.0):
    """Largest (translation in metres, rotation in radians) difference between the body frames
    that Blender's evaluated pose shows (pose matrix @ C_b^-1, C_b from the rest pose) and
    body_frames(q), over the given sample frames."""
    W = om.body_frames(q)
    W0 = om.body_frames(om.coupling.default_coordinates(1))[0]
    worst_t = worst_r = 0.0
    scene = bpy.context.scene
    for i, f in enumerate(frames):
        scene.frame_set(int(np.floor(f)), subframe=float(f - np.floor(f)))
        ev = arm.evaluated_get(bpy.context.evaluated_depsgraph_get())
        for item in arm.itasc_opensim.bodies:
            s = om.segment(item.body)
            rest = np.array(arm.data.bones[item.bone].matrix_local, dtype=float)
            C = np.linalg.inv(I.scaled(W0[s], u)) @ rest
            shown = I.scaled(np.array(ev.pose.bones[item.bone].matrix, dtype=float) @ np.linalg.inv(C), 1.0 / u)
            worst_t = max(worst_t, float(np.abs(shown[:3, 3] - W[i, s, :3, 3]).max()))
            worst_r = max(worst_r, rotation_angle(shown[:3, :3], W[i, s, :3, :3]))
    return worst_t, worst_r


class Layout:
    """Records what a panel draws (the UI layout only exists while Blender draws a region)."""

    def __init__(self, log):
        self.log = log
        self.use_property_split = False

    def row(self, **kw):
        return Layout(self.log)

    column = box = row

    def label(self, text="", icon="NONE"):
        self.log.append(["label", text])

    def prop(self, data, name, **kw):
        getattr(data, name)
        self.log.append(["prop", name])

    def operator(self, idname, **kw):
        module, name = idname.split(".")
        getattr(getattr(bpy.ops, module), name).get_rna_type()
        self.log.append(["operator", idname])
        return type("Props", (), {})()


def draw_panels(obj):
    out = {}
    with bpy.context.temp_override(object=obj, active_object=obj):
        for cls in P.classes:
            if hasattr(cls, "poll") and not cls.poll(bpy.context):
                out[cls.__name__] = None
                continue
            log = []
            cls.draw(type("PanelSelf", (), {"layout": Layout(log)})(), bpy.context)
            out[cls.__name__] = log
    return out


def poll_message(op, obj):
    with bpy.context.temp_override(object=obj, active_object=obj):
        try:
            op()
            return None
        except RuntimeError as err:
            return str(err)


def gait_trial(osim, trc, mot, sto, trc_positions):
    """Import the model `osim` and the trial `trc` (marker positions `trc_positions`, (F, M, 3)
    metres), solve and bake, export the motion to `mot` and the errors to `sto`, draw the panels,
    undo; what each step gave."""
    clear_scene()
    scene = bpy.context.scene
    polls = {"nothing": poll_message(lambda: bpy.ops.itasc.opensim_solve(), None)}
    assert bpy.ops.itasc.opensim_import_model(filepath=osim) == {"FINISHED"}
    arm = bpy.context.object
    polls["no trial"] = poll_message(lambda: bpy.ops.itasc.opensim_solve(), arm)
    polls["export before solving"] = poll_message(lambda: bpy.ops.itasc.opensim_export_motion(filepath=mot), arm)
    assert bpy.ops.itasc.opensim_import_trc(filepath=trc) == {"FINISHED"}
    trial = arm.itasc_opensim.trial
    om = S.load_model(arm)
    q0 = om.coupling.default_coordinates(1)
    W0 = om.body_frames(q0)[0]

    # The import: bones at the body frames (up to a rotation of their own), markers where OpenSim has them.
    rest = {}
    for item in arm.itasc_opensim.bodies:
        bone = arm.data.bones[item.bone]
        C = np.linalg.inv(W0[om.segment(item.body)]) @ np.array(bone.matrix_local, dtype=float)
        rest[item.bone] = {"offset": float(np.abs(C[:3, 3]).max()),
                           "orthonormal": float(np.abs(C[:3, :3].T @ C[:3, :3] - np.eye(3)).max()),
                           "parent": bone.parent.name if bone.parent else None,
                           "tail": list(bone.tail_local), "length": bone.length}
    scene.frame_set(1)
    dg = bpy.context.evaluated_depsgraph_get()
    model_markers = {c.itasc_opensim.marker: c for c in arm.children if c.itasc_opensim.kind == "MODEL_MARKER"}
    expected = om.marker_positions(q0)[0]
    marker_error = max(float(np.abs(np.array(model_markers[n].evaluated_get(dg).matrix_world.translation)
                                    - (LAB[:3, :3] @ expected[k])).max()) for k, n in enumerate(om.markers.names))
    measured = {c.itasc_opensim.marker: c for c in trial.children}
    key_counts = {n: len(keys_module.Channels(e).find("location", 0).keyframe_points) for n, e in measured.items()}
    positions = np.array(trc_positions)      # (F, M, 3), metres, the file's marker order
    names = list(trial.itasc_opensim["markers"])
    trc_error = 0.0
    for f in (1, 30, 73):
        scene.frame_set(f)
        dg = bpy.context.evaluated_depsgraph_get()
        for m, n in enumerate(names):
            world = np.array(measured[n].evaluated_get(dg).matrix_world.translation)
            trc_error = max(trc_error, float(np.abs(world - LAB[:3, :3] @ positions[f - 1, m]).max()))
    scene.frame_set(1)

    # The user's own animation, which the bake must leave alone.
    pelvis, torso, femur = (arm.pose.bones[n] for n in ("pelvis", "torso", "femur_l"))
    torso.rotation_mode = "ZXY"
    femur.rotation_mode = "AXIS_ANGLE"
    pelvis.rotation_quaternion = (0.9, 0.1, 0.2, 0.0)
    for frame in (100, 120):
        pelvis.keyframe_insert("rotation_quaternion", frame=frame)
    torso.scale = (1.0, 1.0, 1.0)
    torso.keyframe_insert("scale", frame=10)
    arm.location = (0.0, 0.0, 0.0)
    arm.keyframe_insert("location", frame=5)
    pelvis.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    before = all_keys(arm)

    bpy.ops.ed.undo_push(message="before solving")
    with bpy.context.temp_override(object=arm, active_object=arm):
        done = bpy.ops.itasc.opensim_solve("EXEC_DEFAULT", True)
    after = all_keys(arm)
    untouched = {}
    for channel, attrs in before.items():
        now = after[channel]
        if channel.startswith('pose.bones["pelvis"].rotation_quaternion'):
            keep = [i for i, co in enumerate(now["co"]) if co[0] > 73.5]
            now = {k: [v[i] for i in keep] for k, v in now.items()}
        untouched[channel] = now == attrs

    result_ik = S.stored_result(arm)
    frames = S.stored(arm.itasc_opensim, "solution_frames")
    t_err, r_err = pose_errors(arm, om, result_ik.q, frames)
    location_keyed = sorted({p.split('"')[1] for p in after if p.endswith("].location[0]") and p.startswith("pose")})

    with bpy.context.temp_override(object=arm, active_object=arm):
        exported = bpy.ops.itasc.opensim_export_motion(filepath=mot)
        reported = bpy.ops.itasc.opensim_write_errors(filepath=sto)
        bpy.ops.itasc.opensim_worst_frame()
    worst_frame = scene.frame_current
    scene.frame_set(10)
    panels = {"model": draw_panels(arm), "marker": draw_panels(measured["R.Heel"]), "nothing": draw_panels(None)}
    at10 = S.frame_report(arm, 10)

    result = {
        "polls": polls, "bones": len(arm.data.bones), "rest": rest, "marker_error": marker_error,
        "n_model_markers": len(model_markers), "key_counts": key_counts, "trc_error": trc_error,
        "fps": scene.render.fps / scene.render.fps_base, "range": [scene.frame_start, scene.frame_end],
        "source": arm.itasc_opensim.source, "bodies": [[i.body, i.bone] for i in arm.itasc_opensim.bodies],
        "done": list(done), "untouched": untouched, "t_err": t_err, "r_err": r_err, "frames": frames.tolist(),
        "q": result_ik.q.tolist(), "rms": result_ik.marker_error_rms.tolist(), "max": result_ik.marker_error_max.tolist(),
        "worst": result_ik.worst_marker, "location_keyed": location_keyed,
        "exported": list(exported), "reported": list(reported), "worst_frame": worst_frame,
        "panels": panels, "at10": at10,
    }
    name = arm.name
    undone = bpy.ops.ed.undo()                        # every reference to Blender data is stale after this
    arm = bpy.data.objects[name]
    result.update(undone=list(undone), restored=all_keys(arm) == before, has_result_after_undo=arm.itasc_opensim.has_result)
    return result


def gaps_trial(osim, trc, tasks, gaps):
    """Import the model `osim` with the task set `tasks` and the trial `trc` into a scene in
    centimetres at 30 fps, solve (twice, and in chunks); the keys and hiding of the markers with
    `gaps` ({name: [first, last] sample}), the solution and the baked pose's error."""
    clear_scene()
    scene = bpy.context.scene
    scene.unit_settings.system = "METRIC"
    scene.unit_settings.scale_length = 0.01          # scene units are centimetres
    scene.render.fps, scene.render.fps_base = 30, 1.0
    assert bpy.ops.itasc.opensim_import_model(filepath=osim) == {"FINISHED"}
    arm = bpy.context.object
    arm.itasc_opensim.task_file = tasks
    assert bpy.ops.itasc.opensim_import_trc(filepath=trc, adjust_scene=False) == {"FINISHED"}
    trial = arm.itasc_opensim.trial
    om = S.load_model(arm)
    u = 100.0
    frames = S.stored(trial.itasc_opensim, "frames")
    measured = {c.itasc_opensim.marker: c for c in trial.children}
    seen = {}
    for name, (first, last) in gaps.items():
        empty = measured[name]
        channels = keys_module.Channels(empty)
        fc = channels.find("location", 0)
        keyed = [] if fc is None else [k.co[0] for k in fc.keyframe_points]
        hide = channels.find("hide_viewport", 0)
        hidden_at = lambda samples: None if hide is None else [hide.evaluate(frames[i]) for i in samples]  # noqa: E731
        seen[name] = {"keys": len(keyed),
                      "keyed_in_gap": any(frames[first] - 1e-3 <= k <= frames[last] + 1e-3 for k in keyed),
                      "hidden_in_gap": hidden_at((first, last)), "hidden_outside": hidden_at((0, first - 1, last + 1)),
                      "static_hidden": empty.hide_viewport}
    with bpy.context.temp_override(object=arm, active_object=arm):
        done = bpy.ops.itasc.opensim_solve()
        baked_once = all_keys(arm)
        bpy.ops.itasc.opensim_solve()
    same_keys_twice = all_keys(arm) == baked_once
    ik, solved_frames, messages = S.solve(arm)
    chunked = S.prepare(arm, chunk=7).solve_all()      # 11 chunks, each warm-started from the one before
    stopped = S.prepare(arm, chunk=7)
    keys_before = all_keys(arm)
    next(stopped.steps())                              # one chunk solved, nothing written; then Esc
    stopped = {"done": stopped.done, "total": stopped.total, "written": stopped.written,
               "message": stopped.cancel(), "unchanged": all_keys(arm) == keys_before}
    checks = [0, 1, 2, 37, 72]                         # half frames among them
    W_err = pose_errors(arm, om, ik.q[checks], frames[checks], u)
    return {"done": list(done), "twice": same_keys_twice, "frames": frames.tolist(), "gaps": seen, "q": ik.q.tolist(),
            "q_chunked": chunked.q.tolist(), "stopped": stopped,
            "marker_names": ik.marker_names, "errors_nan": np.isnan(ik.marker_errors).tolist(),
            "rms": ik.marker_error_rms.tolist(), "pose": W_err, "message": arm.itasc_opensim.result_message,
            "range": [scene.frame_start, scene.frame_end], "fps": scene.render.fps}


def scale_from_static(osim, setup, static, trc, blend):
    """Import the generic model, bind a trial, scale it through the panel's operator from `setup`
    on the `static` trial (the .blend saved as `blend` first, so the scaled model is written
    beside it), and report the rebuilt armature: bones, model markers, the per-marker report,
    the binding, the panel's lines."""
    clear_scene()
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    assert bpy.ops.itasc.opensim_import_model(filepath=osim) == {"FINISHED"}
    arm = bpy.context.object
    assert bpy.ops.itasc.opensim_import_trc(filepath=trc) == {"FINISHED"}
    trial = arm.itasc_opensim.trial
    bpy.context.view_layer.objects.active = arm
    polls = {"no setup": poll_message(lambda: bpy.ops.itasc.opensim_scale(), arm)}
    old_markers = len([c for c in arm.children if c.itasc_opensim.kind == "MODEL_MARKER"])
    arm.itasc_opensim.scale_setup = setup
    arm.itasc_opensim.static_trial = static
    with bpy.context.temp_override(object=arm, active_object=arm):
        done = bpy.ops.itasc.opensim_scale()
    s = arm.itasc_opensim
    bones = {item.body: np.array(arm.data.bones[item.bone].matrix_local, dtype=float).tolist() for item in s.bodies}
    parents = {b.name: (b.parent.name if b.parent else None) for b in arm.data.bones}
    bpy.context.scene.frame_set(1)
    dg = bpy.context.evaluated_depsgraph_get()
    markers = {c.itasc_opensim.marker: list(np.linalg.inv(LAB)[:3, :3] @ np.array(c.evaluated_get(dg).matrix_world.translation))
               for c in arm.children if c.itasc_opensim.kind == "MODEL_MARKER"}
    report = [[m.marker, m.kind, m.error] for m in s.scale_markers]
    return {"done": sorted(done), "polls": polls, "source": s.source, "bones": bones, "parents": parents,
            "markers": markers, "old_markers": old_markers, "report": report, "rms": s.scale_rms,
            "trial_kept": s.trial == trial, "has_result": s.has_result,
            "objects": sorted(o.name for o in bpy.data.objects if o.itasc_opensim.kind == "MODEL"),
            "panels": draw_panels(arm)}


def import_only(osim):
    """Import a model; its bones (rest matrices, parents) and its model markers in OpenSim ground."""
    clear_scene()
    assert bpy.ops.itasc.opensim_import_model(filepath=osim) == {"FINISHED"}
    arm = bpy.context.object
    dg = bpy.context.evaluated_depsgraph_get()
    markers = {c.itasc_opensim.marker: list(np.linalg.inv(LAB)[:3, :3] @ np.array(c.evaluated_get(dg).matrix_world.translation))
               for c in arm.children if c.itasc_opensim.kind == "MODEL_MARKER"}
    return {"bodies": [[i.body, i.bone] for i in arm.itasc_opensim.bodies],
            "bones": {b.name: np.array(b.matrix_local, dtype=float).tolist() for b in arm.data.bones},
            "parents": {b.name: (b.parent.name if b.parent else None) for b in arm.data.bones},
            "markers": markers}

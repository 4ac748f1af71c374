"""Bodies of test_addon_keypoints: Pose2Sim's balancing trial (../shared/data/markerless_pose2sim,
calibrated on its static trial) onto the rig Rigify generates and onto Rigify's metarig, ours and
the rotation-copy baseline, measured by Blender's evaluation of the keys; a wrist gap; the
panel's operator and its undo; bad input. Sessions that call these end with exit_at_once
(Blender 4.2 crashes on exit once Rigify was enabled)."""

import importlib
import json
import tempfile
from pathlib import Path

import bpy
import numpy as np

from tools.demo_markerless import jitter

from . import EXTENSION, addon
from .panels import Layout
from .scenes import all_keys, clear_scene

api = addon("api")
rig_module = addon("rig")
target = addon("retarget.target")
kp = importlib.import_module(f"{EXTENSION}.solver.keypoints")

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "markerless_pose2sim"


def metarig():
    """Rigify's human metarig in an empty scene."""
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    clear_scene()
    bpy.ops.object.armature_human_metarig_add()
    bpy.ops.object.mode_set(mode="OBJECT")
    return bpy.context.view_layer.objects.active


def generated_rig():
    """(the rig Rigify generates from its human metarig, the metarig)."""
    metarig_obj = metarig()
    if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
        raise RuntimeError("Rigify could not generate its rig")
    return bpy.context.view_layer.objects.active, metarig_obj


def figures(result, rig=None, rate=None):
    """What the host asserts, as JSON-able values; with the rig and the trial's rate, the joint
    jitter (`tools.demo_markerless.jitter`: mean over frames)."""
    engine, f0 = result.engine, int(result.frames[0])
    return {
        "frames": result.frames.tolist(), "names": result.names,
        "mean_error": result.mean_error, "error": np.nan_to_num(result.error, nan=-1.0).tolist(),
        "missing": result.missing.tolist(), "finite_pose": bool(np.isfinite(result.bone_matrices).all()),
        "engine_error": None if engine is None else np.nan_to_num(engine.fit.error, nan=-1.0).tolist(),
        "engine_mean": None if engine is None else float(np.nanmean(engine.fit.error)),
        "gap_frames": result.gap_frames.tolist(), "gaps": {k: [list(s) for s in v] for k, v in result.gaps.items()},
        "scale": result.scale, "keys": result.keys_written, "warnings": result.warnings, "seconds": result.seconds,
        "solve_seconds": result.solve_seconds, "write_seconds": result.write_seconds, "passes": result.control_passes,
        "bone_map": result.bone_map, "left_out": result.left_out,
        "contacts": {k: [list(s) for s in v] for k, v in result.contacts.items()},
        "foot_slide": {k: v.tolist() for k, v in result.foot_slide.items()},
        "source_drift": {k: [_drift(result.data[a - f0:b - f0 + 1, result.names.index(k)]) for a, b in v]
                         for k, v in result.contacts.items()},
        "jitter": None if rig is None else float(np.nanmean(jitter(result.bone_matrices, target.parents_of(rig),
                                                                   result.bone_names, rate)))}


def _drift(path):
    """The largest distance (NaN-aware) of a path (n, 3) from its first point."""
    return float(np.nanmax(np.linalg.norm(path - path[0], axis=-1)))


def generated_session(first=0, count=30):
    """The balancing trial's frames first..first+count onto the generated rig: ours, the
    baseline, a 0.3 s gap in the right wrist; keys and Clear Bake."""
    rig, _ = generated_rig()
    static = kp.read_keypoints(DATA / "static_0-12.trc")
    trial = kp.read_keypoints(DATA / "balancing_0-100.trc").frames(slice(first, first + count))
    out = {"rate": trial.rate}
    # The user's own keys: on a control the fit does not key, and on one it keys, outside the range.
    written = {c for c, _, _ in addon("retarget.rigify_controls").pairs(rig)}
    user_bone = next(pb.name for pb in rig.pose.bones if pb.name.startswith("thumb") and pb.name not in written
                     and not pb.name.startswith(("ORG-", "MCH-", "DEF-")))
    rig.pose.bones[user_bone].rotation_quaternion = (0.9, 0.1, 0.2, 0.0)
    rig.pose.bones[user_bone].keyframe_insert("rotation_quaternion", frame=5)
    rig.pose.bones["torso"].location = (0.0, 0.1, 0.0)
    rig.pose.bones["torso"].keyframe_insert("location", frame=count + 20)
    user = all_keys(rig)
    ours = api.fit_keypoints(rig, trial, static=static, frame_start=1)
    out["ours"] = figures(ours, rig, trial.rate)
    after = all_keys(rig)
    keyed = set(after) - set(user)
    out["user_keys_kept"] = all(after[p]["co"][-1] == v["co"][-1] if p.startswith('pose.bones["torso"]')
                                else after[p] == v for p, v in user.items())
    out["keyed_bones"] = sorted({p.split('"]')[0].split('["')[1] for p in keyed if p.startswith("pose.bones")})
    out["nan_keys"] = sum(not np.all(np.isfinite(np.asarray(v["co"]))) for v in all_keys(rig).values())
    out["copy"] = figures(api.fit_keypoints(rig, trial, static=static, frame_start=1, method="copy"), rig, trial.rate)
    filtered = kp.read_keypoints(DATA / "balancing_0-100_filt_butterworth.trc").frames(slice(first, first + count))
    out["copy_filtered"] = figures(api.fit_keypoints(rig, filtered, static=static, frame_start=1, method="copy"),
                                   rig, trial.rate)
    gappy = trial.frames(slice(None))
    gappy.positions = trial.positions.copy()
    wrist = trial.index("RWrist")
    gap = np.arange(5, 5 + round(0.3 * trial.rate))
    gappy.positions[gap, wrist] = np.nan
    out["gap"] = figures(api.fit_keypoints(rig, gappy, static=static, frame_start=1))
    out["gap_index"] = gap.tolist()
    api.clear_bake(rig)
    out["after_clear"] = all_keys(rig) == user
    return json.loads(json.dumps(out, default=float))


def modal_run(esc=None):
    """The Fit Keypoints operator's modal path (`modal_job.ModalJob`) on the panel's settings,
    driven by hand as Blender's event loop drives it (background Blender runs `execute`
    instead): a timer event per step, Esc once `esc(job)` holds. What it returned, reported and
    showed as progress, and whether the bake guard is released."""
    from types import SimpleNamespace

    modal_job, guard = addon("modal_job"), addon("guard")
    operator = addon("keypoints.operators").ITASC_OT_fit_keypoints
    log = {"reports": [], "progress": []}

    class WindowManager:
        def progress_begin(self, low, high):
            log["range"] = [low, high]

        def progress_update(self, value):
            log["progress"].append(value)

        def progress_end(self):
            log["ended"] = True

        def event_timer_add(self, step, window=None):
            return "timer"

        def event_timer_remove(self, timer):
            log["timer_removed"] = True

        def modal_handler_add(self, op):
            pass

    members = {name: getattr(operator, name) for name in ("_make_job", "_finish", "job_errors", "job_noun")}
    op = type("FitKeypoints", (modal_job.ModalJob,), members)()
    op.report = lambda kind, text: log["reports"].append([sorted(kind), text])
    context = SimpleNamespace(window_manager=WindowManager(), window=object(), scene=bpy.context.scene)
    states = [sorted(op._start(context))]
    log["guard_during"] = guard.baking()
    while states[-1] == ["RUNNING_MODAL"] and len(states) < 100:
        kind = "ESC" if esc is not None and esc(op._job) else "TIMER"
        states.append(sorted(op.modal(context, SimpleNamespace(type=kind))))
    log.update(states=states, guard_after=guard.baking(), written=op._job.written)
    return log


def attempt(fn, objects):
    """(the RigError's message or None, whether every object's keys stayed as they were)."""
    before = {o.name: all_keys(o) for o in objects}
    try:
        fn()
        message = None
    except rig_module.RigError as err:
        message = str(err)
    return {"message": message, "unchanged": before == {o.name: all_keys(o) for o in objects}}


def metarig_session(count=20):
    """The balancing trial's first `count` frames onto Rigify's metarig, ours and the baseline;
    the panel drawn and its operator run on the static trial with one undo; bad input."""
    rig = metarig()
    static = kp.read_keypoints(DATA / "static_0-12.trc")
    trial = kp.read_keypoints(DATA / "balancing_0-100.trc").frames(slice(0, count))
    out = {"ours": figures(api.fit_keypoints(rig, trial, static=static)),
           "copy": figures(api.fit_keypoints(rig, trial, static=static, method="copy"))}
    api.clear_bake(rig)
    # The panel and its operator, as a user runs them (Clear Bake first: an empty rig).
    props = bpy.context.scene.itasc_keypoints
    props.rig, props.filepath, props.frame_start = rig, str(DATA / "static_0-12.trc"), 1
    log = []
    panel = type("PanelSelf", (), {"layout": Layout(log)})()
    addon("keypoints.panels").ITASC_PT_keypoints.draw(panel, bpy.context)
    out["panel"] = log
    bpy.ops.ed.undo_push(message="before the fit")
    before = all_keys(rig)
    done = bpy.ops.itasc.fit_keypoints("EXEC_DEFAULT", True)
    fitted = all_keys(rig)
    out["operator"] = {"done": list(done), "changed": fitted != before, "summary": props.summary,
                       "frames": sorted({round(k[0]) for v in fitted.values() for k in v["co"]})}
    name = rig.name
    out["undone"] = list(bpy.ops.ed.undo())            # every reference to Blender data is stale after this
    rig = bpy.data.objects[name]
    props = bpy.context.scene.itasc_keypoints
    job_module = addon("keypoints.job")
    late = job_module.prepare(rig, DATA / "static_0-12.trc", frame_start=1)
    steps, late_progress = late.steps(), []
    while not late.written:                                 # fitted, written; then Esc
        late_progress.append(next(steps))
    out["late"] = {"progress": late_progress, "message": late.cancel(), "keys_written": late.keys_written}
    job = job_module.prepare(rig, DATA / "static_0-12.trc", frame_start=1)
    early = job_module.prepare(rig, DATA / "static_0-12.trc", frame_start=1)
    next(early.steps())                                     # fitted, nothing written; then Esc
    out["early"] = {"done": early.done, "written": early.written, "message": early.cancel()}
    out["progress"] = [job.done] + list(job.steps())
    out["total"] = job.total
    out["modal"] = {"finished": modal_run(), "esc_early": modal_run(esc=lambda job: job.done >= 1),
                    "esc_late": modal_run(esc=lambda job: job.written)}
    api.clear_bake(rig)
    out["restored"] = all_keys(rig) == before
    # Bad input: nothing written, a message saying what to change.
    tmp = Path(tempfile.mkdtemp())
    junk = tmp / "junk.trc"
    junk.write_text("PathFileType\t4\t(X/Y/Z)\tjunk.trc\nnot a header\n1\t2\n")
    bpy.ops.object.armature_add()
    stick = bpy.context.view_layer.objects.active
    objects = [rig, stick]
    bad = {
        "missing_file": attempt(lambda: api.fit_keypoints(rig, tmp / "nowhere.trc"), objects),
        "unreadable": attempt(lambda: api.fit_keypoints(rig, junk), objects),
        "unknown_set": attempt(lambda: api.fit_keypoints(rig, trial, keypoint_set="HALPE_27"), objects),
        "no_skeleton": attempt(lambda: api.fit_keypoints(stick, trial, static=static), objects),
        "not_armature": attempt(lambda: api.fit_keypoints("nothing", trial), objects),
    }
    props.filepath = str(junk)
    try:                                    # an operator's error report reaches a script as a RuntimeError
        bad["operator"] = {"done": list(bpy.ops.itasc.fit_keypoints("EXEC_DEFAULT")), "message": None}
    except RuntimeError as err:
        bad["operator"] = {"done": None, "message": str(err)}
    out["bad"] = bad
    return json.loads(json.dumps(out, default=float))

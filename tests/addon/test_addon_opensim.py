"""OpenSim marker IK in real Blender: import the gait2354 model as an armature and its trial as
marker empties, solve and bake through the operators, and check the baked pose as Blender
evaluates it against the model's body frames, the exported .mot against OpenSim's reference
result, the error report against the solution, the panel, the polls, the user's other keys and
undo. A second trial (with gaps, a task set, scene units in centimetres, a scene not at the data
rate) checks missing markers and the mapping of units and frames against the engine run outside
Blender on the same data."""

import json
import warnings

import numpy as np
import pytest

from solver.opensim import load_osim, read_ik_task_set, read_storage, read_trc, solve_marker_ik, write_trc
from solver.opensim.setup import IKMarkerTask, IKTaskSet
from tests.addon.test_addon_scenes import SCENES
from tests.opensim_reference import DATA, GAIT, needs_data
from tools.blender_session import run_in_blender

pytestmark = [pytest.mark.blender, needs_data]

TRC = DATA / "subject01_synthetic_marker_data.trc"
REFERENCE = DATA / "std_subject01_walk1_ik.mot"
TASKS = DATA / "gait2354_IK_Tasks.xml"
DEG = 180.0 / np.pi

HELPERS = r'''
import json
S = importlib.import_module("bl_ext.user_default.itasc_ik.itasc_addon.opensim.solve")
I = importlib.import_module("bl_ext.user_default.itasc_ik.itasc_addon.opensim.importing")
P = importlib.import_module("bl_ext.user_default.itasc_ik.itasc_addon.opensim.panels")
PARAMS = json.loads(PARAMS_JSON)
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
'''

GAIT_TRIAL = r'''
clear_scene()
scene = bpy.context.scene
polls = {"nothing": poll_message(lambda: bpy.ops.itasc.opensim_solve(), None)}
assert bpy.ops.itasc.opensim_import_model(filepath=PARAMS["osim"]) == {"FINISHED"}
arm = bpy.context.object
polls["no trial"] = poll_message(lambda: bpy.ops.itasc.opensim_solve(), arm)
polls["export before solving"] = poll_message(lambda: bpy.ops.itasc.opensim_export_motion(filepath=PARAMS["mot"]), arm)
assert bpy.ops.itasc.opensim_import_trc(filepath=PARAMS["trc"]) == {"FINISHED"}
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
trc = np.array(PARAMS["trc_positions"])            # (F, M, 3), metres, the file's marker order
names = list(trial.itasc_opensim["markers"])
trc_error = 0.0
for f in (1, 30, 73):
    scene.frame_set(f)
    dg = bpy.context.evaluated_depsgraph_get()
    for m, n in enumerate(names):
        world = np.array(measured[n].evaluated_get(dg).matrix_world.translation)
        trc_error = max(trc_error, float(np.abs(world - LAB[:3, :3] @ trc[f - 1, m]).max()))
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
    exported = bpy.ops.itasc.opensim_export_motion(filepath=PARAMS["mot"])
    reported = bpy.ops.itasc.opensim_write_errors(filepath=PARAMS["sto"])
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
'''


def _run(body, params, extension_zip):
    snippet = SCENES + f"PARAMS_JSON = {json.dumps(json.dumps(params))}\n" + HELPERS + body
    return run_in_blender(snippet, extension_zip=extension_zip)


def test_gait_trial_imported_solved_baked_and_exported(extension_zip, tmp_path):
    trc = read_trc(TRC)
    params = {"osim": str(GAIT), "trc": str(TRC), "mot": str(tmp_path / "walk_ik.mot"),
              "sto": str(tmp_path / "walk_ik_marker_errors.sto"), "trc_positions": trc.positions.tolist()}
    r = _run(GAIT_TRIAL, params, extension_zip)

    # Polls say why an operator cannot run.
    assert "Select an OpenSim model" in r["polls"]["nothing"]
    assert "Bind a trial" in r["polls"]["no trial"]
    assert "Solve the trial first" in r["polls"]["export before solving"]

    # Import: one bone per body (no ground), hanging as the joints do; rest = body frame @ a rotation.
    om = load_osim(GAIT)
    assert r["bones"] == len(om.model.names) - 1 == 12
    assert r["bodies"] == [[n, n] for n in om.model.names[1:]]
    assert r["source"] == str(GAIT)
    for name, rest in r["rest"].items():
        assert rest["offset"] <= 1e-6 and rest["orthonormal"] <= 1e-6, (name, rest)
        parent = om.model.names[om.model.parent[om.segment(name)]]
        assert rest["parent"] == (None if parent == "ground" else parent)
    W0 = om.body_frames(om.coupling.default_coordinates(1))[0]
    assert np.allclose(r["rest"]["femur_r"]["tail"], W0[om.segment("tibia_r"), :3, 3], atol=1e-6)
    assert np.allclose(r["rest"]["pelvis"]["tail"], W0[om.segment("torso"), :3, 3], atol=1e-6)
    assert r["n_model_markers"] == 39 and r["marker_error"] <= 1e-6
    assert set(r["key_counts"].values()) == {73} and len(r["key_counts"]) == 31
    assert r["trc_error"] <= 1e-6
    assert r["fps"] == 60 and r["range"] == [1, 73]

    # Solve and bake: Blender's evaluated pose shows the solution's body frames.
    assert r["done"] == ["FINISHED"]
    assert r["frames"] == list(range(1, 74))
    print(f"\nbaked pose vs body_frames(q), 73 frames x 12 bones: {r['t_err']:.2g} m, {r['r_err']:.2g} rad")
    assert r["t_err"] <= 1e-5 and r["r_err"] <= 1e-5
    assert r["location_keyed"] == ["pelvis", "tibia_l", "tibia_r"]     # the free joint and the knees translate
    assert all(r["untouched"].values()), r["untouched"]

    # The solution: the engine outside Blender on the file itself gives the same.
    tasks = IKTaskSet(marker_tasks=[IKMarkerTask(n, True, 1.0) for n in trc.names])
    direct = solve_marker_ik(om, trc, tasks)
    q = np.array(r["q"])
    print(f"coordinates vs the engine on the .trc: {np.abs(q - direct.q).max():.2g}; "
          f"RMS vs engine {np.abs(np.array(r['rms']) - direct.marker_error_rms).max():.2g} m")
    assert np.abs(q - direct.q).max() <= 1e-5
    assert np.allclose(r["rms"], direct.marker_error_rms, rtol=1e-3, atol=1e-8)

    # The .mot against OpenSim's reference result.
    assert r["exported"] == ["FINISHED"]
    ours, reference = read_storage(params["mot"]), read_storage(REFERENCE)
    assert ours.degrees and ours.labels == ["time"] + om.coupling.names
    assert np.allclose(ours.time, reference.time, atol=1e-9)
    worst_deg = worst_mm = 0.0
    for i, name in enumerate(om.coupling.names):
        diff = ours.column(name) - reference.column(name)
        rms = float(np.sqrt(np.mean(diff ** 2)))
        if om.coupling.rotational[i]:
            worst_deg = max(worst_deg, rms)
        else:
            worst_mm = max(worst_mm, 1e3 * rms)
    print(f".mot vs std_subject01_walk1_ik.mot: worst RMS {worst_deg:.3g} deg, {worst_mm:.3g} mm")
    assert worst_deg <= 0.1 and worst_mm <= 0.1

    # The error report loads and carries the solution's numbers.
    assert r["reported"] == ["FINISHED"]
    report = read_storage(params["sto"])
    assert report.labels == ["time", "total_squared_error", "marker_error_RMS", "marker_error_max"]
    assert np.allclose(report.column("marker_error_RMS"), r["rms"], rtol=1e-10, atol=0)
    assert np.allclose(report.column("marker_error_max"), r["max"], rtol=1e-10, atol=0)
    assert np.allclose(report.time, trc.time)

    # The panel, at frame 10, for the model and for one of its measured markers; worst frame.
    at10 = r["at10"]
    assert at10["frame"] == 10 and at10["worst"] == r["worst"][9]
    for who in ("model", "marker"):
        drawn = r["panels"][who]
        labels = " ".join(text for kind, text in drawn["ITASC_PT_opensim_errors"] if kind == "label")
        assert "Frame 10 " in labels and f"Worst marker: {r['worst'][9]}" in labels and "RMS" in labels
        assert ["operator", "itasc.opensim_solve"] in drawn["ITASC_PT_opensim"]
        assert ["operator", "itasc.opensim_write_errors"] in drawn["ITASC_PT_opensim"]
        assert ["prop", "trial"] in drawn["ITASC_PT_opensim"]
        assert any("31 markers bound" in text for _, text in drawn["ITASC_PT_opensim"])
    assert r["panels"]["nothing"]["ITASC_PT_opensim_errors"] is None
    assert ["label", "Select an OpenSim model"] in r["panels"]["nothing"]["ITASC_PT_opensim"]
    assert r["worst_frame"] == 1 + int(np.argmax(r["max"]))

    # One undo step takes the whole solve and bake back.
    assert r["undone"] == ["FINISHED"] and r["restored"] and not r["has_result_after_undo"]


GAPS_TRIAL = r'''
clear_scene()
scene = bpy.context.scene
scene.unit_settings.system = "METRIC"
scene.unit_settings.scale_length = 0.01          # scene units are centimetres
scene.render.fps, scene.render.fps_base = 30, 1.0
assert bpy.ops.itasc.opensim_import_model(filepath=PARAMS["osim"]) == {"FINISHED"}
arm = bpy.context.object
arm.itasc_opensim.task_file = PARAMS["tasks"]
assert bpy.ops.itasc.opensim_import_trc(filepath=PARAMS["trc"], adjust_scene=False) == {"FINISHED"}
trial = arm.itasc_opensim.trial
om = S.load_model(arm)
u = 100.0
frames = S.stored(trial.itasc_opensim, "frames")
measured = {c.itasc_opensim.marker: c for c in trial.children}
gaps = {}
for name, (first, last) in PARAMS["gaps"].items():
    empty = measured[name]
    channels = keys_module.Channels(empty)
    fc = channels.find("location", 0)
    keyed = [] if fc is None else [k.co[0] for k in fc.keyframe_points]
    hide = channels.find("hide_viewport", 0)
    hidden_at = lambda samples: None if hide is None else [hide.evaluate(frames[i]) for i in samples]  # noqa: E731
    gaps[name] = {"keys": len(keyed),
                  "keyed_in_gap": any(frames[first] - 1e-3 <= k <= frames[last] + 1e-3 for k in keyed),
                  "hidden_in_gap": hidden_at((first, last)), "hidden_outside": hidden_at((0, first - 1, last + 1)),
                  "static_hidden": empty.hide_viewport}
with bpy.context.temp_override(object=arm, active_object=arm):
    done = bpy.ops.itasc.opensim_solve()
    baked_once = all_keys(arm)
    bpy.ops.itasc.opensim_solve()
same_keys_twice = all_keys(arm) == baked_once
ik, solved_frames, messages = S.solve(arm)
chunked = S.SolveJob(arm, chunk=7).solve_all()      # 11 chunks, each warm-started from the one before
checks = [0, 1, 2, 37, 72]                         # half frames among them
W_err = pose_errors(arm, om, ik.q[checks], frames[checks], u)
result = {"done": list(done), "twice": same_keys_twice, "frames": frames.tolist(), "gaps": gaps, "q": ik.q.tolist(),
          "q_chunked": chunked.q.tolist(),
          "marker_names": ik.marker_names, "errors_nan": np.isnan(ik.marker_errors).tolist(),
          "rms": ik.marker_error_rms.tolist(), "pose": W_err, "message": arm.itasc_opensim.result_message,
          "range": [scene.frame_start, scene.frame_end], "fps": scene.render.fps}
'''


def test_gaps_units_frame_rate_and_task_set_against_the_engine(extension_zip, tmp_path):
    trc = read_trc(TRC)
    positions = trc.positions.copy()
    gaps = {"R.Heel": (10, 20), "L.Toe.Tip": (0, 4), "Sternum": (0, 72)}      # sample ranges, inclusive
    for name, (first, last) in gaps.items():
        positions[first:last + 1, trc.index(name)] = np.nan
    trc.positions = positions
    path = tmp_path / "gappy.trc"
    write_trc(path, trc, units="mm", fmt="%.9f")
    params = {"osim": str(GAIT), "trc": str(path), "tasks": str(TASKS), "gaps": gaps}
    r = _run(GAPS_TRIAL, params, extension_zip)

    assert r["done"] == ["FINISHED"] and r["twice"]                # solving again rewrites the same keys
    assert r["fps"] == 30 and r["range"] != [1, 73]                 # the scene was left as it was
    assert r["frames"] == [1 + i / 2 for i in range(73)]            # 60 Hz samples on a 30 fps scene
    heel, toe, sternum = (r["gaps"][n] for n in ("R.Heel", "L.Toe.Tip", "Sternum"))
    assert heel["keys"] == 73 - 11 and not heel["keyed_in_gap"]
    assert heel["hidden_in_gap"] == [1.0, 1.0] and heel["hidden_outside"] == [0.0, 0.0, 0.0]
    assert toe["keys"] == 73 - 5 and toe["hidden_in_gap"] == [1.0, 1.0]
    assert sternum["keys"] == 0 and sternum["static_hidden"]
    assert "stray closing tag" in r["message"]                       # the task file's warning is passed on

    # Missing samples are missing for the solver, and the solution is the engine's on the file.
    read = read_trc(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks = read_ik_task_set(TASKS)
    direct = solve_marker_ik(load_osim(GAIT), read, tasks)
    assert r["marker_names"] == direct.marker_names
    assert np.array_equal(np.array(r["errors_nan"]), np.isnan(direct.marker_errors))
    q = np.array(r["q"])
    print(f"\ngappy trial in cm at 30 fps: coordinates vs the engine {np.abs(q - direct.q).max():.2g} "
          f"(in chunks of 7 frames {np.abs(np.array(r['q_chunked']) - direct.q).max():.2g}), "
          f"baked pose {r['pose'][0]:.2g} m, {r['pose'][1]:.2g} rad")
    assert np.abs(q - direct.q).max() <= 1e-5
    assert np.abs(np.array(r["q_chunked"]) - direct.q).max() <= 1e-5
    assert r["pose"][0] <= 1e-5 and r["pose"][1] <= 1e-5

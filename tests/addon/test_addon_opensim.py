"""OpenSim marker IK in real Blender: import the gait2354 model as an armature and its trial as
marker empties, solve and bake through the operators, and check the baked pose as Blender
evaluates it against the model's body frames, the exported .mot against OpenSim's reference
result, the error report against the solution, the panel, the polls, the user's other keys and
undo. A second trial (with gaps, a task set, scene units in centimetres, a scene not at the data
rate) checks missing markers and the mapping of units and frames against the engine run outside
Blender on the same data."""

import warnings

import numpy as np
import pytest

from solver.opensim import load_osim, read_ik_task_set, read_storage, read_trc, solve_marker_ik, write_trc
from solver.opensim.setup import IKMarkerTask, IKTaskSet
from tests.opensim_reference import DATA, GAIT, needs_data
from tools.blender_session import call_in_blender

pytestmark = [pytest.mark.blender, needs_data]

TRC = DATA / "subject01_synthetic_marker_data.trc"
REFERENCE = DATA / "std_subject01_walk1_ik.mot"
TASKS = DATA / "gait2354_IK_Tasks.xml"
DEG = 180.0 / np.pi


def test_gait_trial_imported_solved_baked_and_exported(extension_zip, tmp_path):
    trc = read_trc(TRC)
    params = {"osim": str(GAIT), "trc": str(TRC), "mot": str(tmp_path / "walk_ik.mot"),
              "sto": str(tmp_path / "walk_ik_marker_errors.sto"), "trc_positions": trc.positions.tolist()}
    r = call_in_blender("opensim:gait_trial", extension_zip=extension_zip, **params)

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
    r = call_in_blender("opensim:gaps_trial", extension_zip=extension_zip, **params)

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
    # Esc after the first of 11 chunks (73 samples by 7), before the bake: nothing written
    assert r["stopped"] == {"done": 1, "total": 11 + 1, "written": False, "message": None, "unchanged": True}
    assert r["pose"][0] <= 1e-5 and r["pose"][1] <= 1e-5


def test_scaling_the_imported_model_from_a_static_trial(extension_zip, tmp_path):
    """OpenSim's Scale regression setup (gait2354 generic model, subject01 static trial) run from
    the panel on the imported generic model: the armature is rebuilt from the marker-placed model
    in place, its bones on the bodies of OpenSim's expected scaled model (std_subject01_simbody.osim)
    at our static pose, its markers where the placed model has them, the per-marker report as the
    engine gives it outside Blender (this setup moves all 39 markers; 10 of the trial's are not
    in the model), the trial still bound."""
    from solver.opensim.scale_tool import run_scale_setup
    scale = DATA.parent / "opensim_scale"
    setup, static, generic = (scale / n for n in ("subject01_Setup_Scale.xml", "subject01_static.trc",
                                                  "gait2354_simbody.osim"))
    r = call_in_blender("opensim:scale_from_static", extension_zip=extension_zip, osim=str(generic),
                        setup=str(setup), static=str(static), trc=str(TRC), blend=str(tmp_path / "scale.blend"))
    assert "Pick a Scale Setup" in r["polls"]["no setup"]
    assert r["done"] == ["FINISHED"] and r["trial_kept"] and not r["has_result"]
    assert r["source"] == str(tmp_path / "gait2354_simbody_scaled.osim") and len(r["objects"]) == 1
    ours = load_osim(r["source"])
    q = ours.coupling.default_coordinates(1)
    W = ours.body_frames(q)[0]
    std = load_osim(scale / "std_subject01_simbody.osim")
    assert std.coordinate_names == ours.coordinate_names
    V = std.body_frames(q)[0]
    assert set(r["bones"]) == set(ours.model.names[1:]) and len(r["bones"]) == 12
    for body, matrix in r["bones"].items():
        s = ours.segment(body)
        assert np.abs(np.array(matrix)[:3, 3] - W[s, :3, 3]).max() < 1e-6            # float32 bones, on our bodies
        assert np.abs(W[s, :3, 3] - V[std.segment(body), :3, 3]).max() < 1e-5        # and OpenSim's
    run = run_scale_setup(setup, write=False, model_file=generic, marker_file=static)
    placed = ours.marker_positions(q)[0]
    assert set(r["markers"]) == set(ours.markers.names)
    for k, name in enumerate(ours.markers.names):
        assert np.abs(np.array(r["markers"][name]) - placed[k]).max() < 1e-6, name
    kinds = {"FIXED": {}, "MOVED": {}, "MODEL_ONLY": {}, "TRIAL_ONLY": {}}
    for name, kind, error in r["report"]:
        kinds[kind][name] = error
    assert kinds["FIXED"] == pytest.approx(run.placement.fixed_errors, rel=1e-6)       # float properties:
    assert kinds["MOVED"] == pytest.approx(run.placement.moved_errors, rel=1e-6)       # single precision
    assert len(kinds["FIXED"]) + len(kinds["MOVED"]) == len(r["markers"]) == 39      # this setup fixes none
    assert sorted(kinds["TRIAL_ONLY"]) == sorted(run.trial_only_markers) and len(kinds["TRIAL_ONLY"]) == 10
    assert not kinds["MODEL_ONLY"]
    assert r["rms"] == pytest.approx(float(run.placement.ik.marker_error_rms[0]), rel=1e-6)
    lines = r["panels"]["ITASC_PT_opensim_scale"]
    assert any("Tracking: moved by (39)" in str(line) for line in lines), lines
    assert any("In the trial only (ignored) (10)" in str(line) for line in lines), lines


def test_a_scapulothoracic_joint_split_at_its_winging_origin_imports_as_bodies(extension_zip, tmp_path):
    """The thoracoscapular model with its winging axis off the origin: the engine splits the joint
    with a massless segment, which is no bone; the scapula hangs from the thorax, bones sit on the
    body frames and markers where the model has them."""
    model = DATA.parent / "opensim_constraints" / "ThoracoscapularShoulderModel.osim"
    if not model.is_file():
        pytest.skip("shared/data/opensim_constraints is missing")
    path = tmp_path / "winging.osim"
    path.write_text(model.read_text().replace("<scapula_winging_axis_origin>0 0</scapula_winging_axis_origin>",
                                              "<scapula_winging_axis_origin>0.012 -0.021</scapula_winging_axis_origin>"))
    om = load_osim(path)
    assert "scapulothoracic/intermediate" in om.model.names
    r = call_in_blender("opensim:import_only", extension_zip=extension_zip, osim=str(path))
    bodies = [b.name for b in om.source.bodies[1:]]
    assert sorted(r["bones"]) == sorted(bodies) and r["parents"]["scapula"] == "thorax"
    W0 = om.body_frames(om.coupling.default_coordinates(1))[0]
    for body in bodies:
        assert np.abs(np.array(r["bones"][body])[:3, 3] - W0[om.segment(body), :3, 3]).max() < 1e-6, body
    x = om.marker_positions(om.coupling.default_coordinates(1))[0]
    for k, name in enumerate(om.markers.names):
        assert np.abs(np.array(r["markers"][name]) - x[k]).max() < 1e-6, name

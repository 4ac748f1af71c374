"""Markerless keypoints in real Blender (issue #34, the Blender side): Pose2Sim's balancing trial
(../shared/data/markerless_pose2sim, calibrated on its static trial) onto the rig Rigify
generates and onto Rigify's metarig, measured by Blender's evaluation of the keys, beside the
rotation-copy baseline; a 0.3 s gap in one wrist; the panel's operator with its undo; bad input.

Three Blender sessions: the generated rig (30 frames: ours, the baseline, the gap; the user's keys
and Clear Bake), the metarig (20 frames: ours and the baseline; the operator on the static
trial, undone; bad input) and `make demo-markerless` on 12 frames."""

from pathlib import Path

import numpy as np
import pytest

from bench.markerless import marker_errors, opensim_ik
from solver.keypoints import read_keypoints
from tests.opensim_reference import opensim
from tools.blender_session import ROOT, call_in_blender

pytestmark = pytest.mark.blender

FRAMES = 30


@pytest.fixture(scope="module")
def generated(extension_zip):
    return call_in_blender("keypoints:generated_session", extension_zip=extension_zip, sys_path=[ROOT],
                           exit_at_once=True, count=FRAMES)


@pytest.fixture(scope="module")
def metarig(extension_zip):
    return call_in_blender("keypoints:metarig_session", extension_zip=extension_zip, sys_path=[ROOT],
                           exit_at_once=True)


def errors(figures, key="error"):
    e = np.array(figures[key], float)
    return np.where(e < 0, np.nan, e)


def assert_measured_as_solved(f, rigify):
    """Blender's evaluation of the keys puts every calibrated keypoint where the engine's fit put
    it: the mean error over all frames and keypoints equal to the engine's to float32 rounding;
    per keypoint within 1e-6 where a control carries the bone rigidly and, on the generated rig,
    within 0.1 mm for the knees, ankles, elbows and wrists, which Rigify's IK chains place (to
    their own tolerance: about 0.04 mm here)."""
    blender, engine = errors(f), errors(f, "engine_error")
    assert np.array_equal(np.isnan(blender), np.isnan(engine))
    assert f["mean_error"] == pytest.approx(f["engine_mean"], rel=1e-5, abs=1e-6)
    worst = np.nanmax(np.abs(blender - engine), axis=0)
    chains = [k for k, n in enumerate(f["names"]) if n[1:] in ("Knee", "Ankle", "Heel", "Elbow", "Wrist")] if rigify else []
    rigid = [k for k in range(len(f["names"])) if k not in chains]
    assert np.max(worst[rigid]) < 1e-5, dict(zip(f["names"], worst))
    if chains:
        assert np.max(worst[chains]) < 1e-4, dict(zip(f["names"], worst))


def test_balancing_onto_the_generated_rigify_rig(generated):
    ours, copy = generated["ours"], generated["copy"]
    assert ours["frames"] == list(range(1, FRAMES + 1)) and len(ours["error"]) == FRAMES
    assert not np.isnan(errors(ours)).any()                # every keypoint in every frame measured
    assert ours["finite_pose"] and generated["nan_keys"] == 0
    assert not ours["gap_frames"] and not ours["left_out"] and len(ours["names"]) == 21
    assert_measured_as_solved(ours, rigify=True)
    # the baseline, on the same calibration and measured the same way, misses by far more
    assert copy["finite_pose"] and copy["scale"] == ours["scale"]
    assert ours["mean_error"] < 0.5 * copy["mean_error"], (ours["mean_error"], copy["mean_error"])
    # markerless keypoints do not sit on a rigid rig: centimetres, not millimetres
    assert 0.005 < ours["mean_error"] < 0.04
    print("generated rig, mean keypoint error: Blender", ours["mean_error"], "engine", ours["engine_mean"],
          "copy", copy["mean_error"], "solve seconds", ours["solve_seconds"])


def test_the_feet_stand_where_the_fit_holds_them_as_blender_shows_it(generated):
    """Contacts (the default): the fit finds where a foot stands still and holds its keypoints
    there; Blender's evaluation of the keys shows each held keypoint within 5 mm of where it is at
    its span's first frame (the issue's bar), where the data's own keypoint moves more."""
    ours = generated["ours"]
    spans = [(k, a, b) for k, v in ours["contacts"].items() for a, b in v]
    assert spans and all(1 <= a <= b <= FRAMES for _, a, b in spans), spans
    assert {k[0] for k, _, _ in spans} <= {"L", "R"} and any(b - a >= 5 for _, a, b in spans)
    held = [d for v in ours["foot_slide"].values() for d in v]
    source = [d for v in ours["source_drift"].values() for d in v]
    assert max(held) <= 0.005, ours["foot_slide"]
    assert max(source) > max(held), (ours["source_drift"], ours["foot_slide"])
    print("held keypoints' drift (m):", max(held), "the data's:", max(source))


def test_joints_jitter_less_than_the_keypoints_files_give_them(generated):
    """Joint jitter (RMS angular acceleration of each bone relative to its parent, as Blender shows
    the keys) of ours on the raw keypoints: far below what the raw keypoints give the bones (the
    rotation copy of the raw file) and no more than the Butterworth-filtered file gives them."""
    ours, raw, filtered = (generated[k]["jitter"] for k in ("ours", "copy", "copy_filtered"))
    assert ours < 0.25 * raw and ours <= filtered, (ours, raw, filtered)
    print("joint jitter (rad/s^2): ours", ours, "raw keypoints", raw, "filtered keypoints", filtered)


def test_mean_error_below_opensims_marker_rms(generated, tmp_path):
    """The issue's bar on the same frames: Blender's mean keypoint error of ours (in the data's
    metres) no larger than OpenSim 4.6's marker RMS with Pose2Sim's model scaled by its scaling
    setup and its IK setup (bench.markerless.opensim_ik). OpenSim's RMS is computed from the
    model marker locations it writes; where its optimizer stops early the RMS is only higher."""
    opensim()
    data = Path(ROOT).parent / "shared" / "data" / "markerless_pose2sim" / "balancing_0-100.trc"
    raw = read_keypoints(data).frames(slice(0, FRAMES))
    run = opensim_ik(data, tmp_path, (raw.time[0], raw.time[-1]))
    _, _, locations, names, _, setup = run
    rms = np.sqrt(np.mean(marker_errors(locations, names, raw, setup) ** 2, axis=1))
    ours = generated["ours"]["mean_error"] / generated["ours"]["scale"]
    assert ours <= rms.mean(), (ours, rms.mean())
    print("mean keypoint error: ours (Blender)", ours, "OpenSim marker RMS", rms.mean())


def test_keys_on_rigify_controls_and_clear_bake(generated):
    keyed = set(generated["keyed_bones"])
    assert {"torso", "foot_ik.L", "foot_ik.R", "hand_ik.L", "hand_ik.R", "neck", "head"} <= keyed
    assert not any(b.startswith(("ORG-", "DEF-", "MCH-")) for b in keyed), keyed
    assert generated["user_keys_kept"]
    assert generated["after_clear"]


def test_wrist_gap_is_bridged_and_reported(generated):
    """0.3 s of the right wrist removed: exactly those frames reported, as one gap of that
    keypoint; Blender shows the fit as solved; the other keypoints' error stays near the
    complete trial's."""
    gap = generated["gap"]
    frames = [1 + i for i in generated["gap_index"]]
    assert len(frames) == round(0.3 * generated["rate"])
    assert gap["gap_frames"] == frames
    assert gap["gaps"] == {"RWrist": [[frames[0], frames[-1]]]}
    assert gap["finite_pose"]
    assert_measured_as_solved(gap, rigify=True)
    missing = np.array(gap["missing"])
    assert missing[:, gap["names"].index("RWrist")].sum() == len(frames) and missing.sum() == len(frames)
    kept = ~missing
    assert np.mean(errors(gap)[kept]) <= 1.10 * np.mean(errors(generated["ours"])[kept])


def test_balancing_onto_the_metarig(metarig):
    ours, copy = metarig["ours"], metarig["copy"]
    assert ours["finite_pose"] and len(ours["frames"]) == 20
    assert ours["bone_map"]["hips"] == "spine" and ours["bone_map"]["head"] == "spine.006"
    assert_measured_as_solved(ours, rigify=False)
    assert ours["mean_error"] < 0.5 * copy["mean_error"], (ours["mean_error"], copy["mean_error"])
    print("metarig, mean keypoint error: Blender", ours["mean_error"], "engine", ours["engine_mean"],
          "copy", copy["mean_error"])


def test_panel_operator_and_undo(metarig):
    assert ["operator", "itasc.fit_keypoints"] in metarig["panel"]
    for prop in ("filepath", "static_path", "keypoint_set", "cutoff", "rig"):
        assert ["prop", prop] in metarig["panel"]
    op = metarig["operator"]
    assert op["done"] == ["FINISHED"] and op["changed"]
    assert op["frames"] == list(range(1, 13))                  # the static trial's 12 frames
    assert "12 frame(s)" in op["summary"]
    assert metarig["undone"] == ["FINISHED"] and metarig["restored"]
    # the modal job's progress: rising to its total, the fit before anything is written
    progress, total = metarig["progress"], metarig["total"]
    assert progress == sorted(progress) and progress[-1] == total == 12 + 2
    # Esc after the fit: nothing written; after the write: the keys stay, and the message says so
    assert metarig["early"] == {"done": 1, "written": False, "message": None}
    late = metarig["late"]
    assert late["progress"] == [1, 2] and late["keys_written"] > 0 and "the keys are written" in late["message"]
    # the same through the operator's modal path: a step per timer event, Esc between them
    modal = metarig["modal"]
    for log in modal.values():
        assert log["states"][0] == ["RUNNING_MODAL"] and log["guard_during"] and not log["guard_after"]
        assert log["range"] == [0, total] and log["ended"] and log["timer_removed"]
    finished = modal["finished"]
    assert finished["progress"] == progress[1:] + [total] and finished["states"][-1] == ["FINISHED"]
    assert finished["reports"][-1][0] == ["INFO"] and "12 frame(s)" in finished["reports"][-1][1]
    early, late = modal["esc_early"], modal["esc_late"]
    assert early["progress"] == [1] and early["states"][-1] == ["CANCELLED"] and not early["written"]
    assert early["reports"] == [[["WARNING"], "Keypoint fit cancelled; no keys were written"]]
    assert late["progress"] == [1, 2] and late["states"][-1] == ["CANCELLED"] and late["written"]
    assert late["reports"][-1][0] == ["WARNING"] and "the keys are written" in late["reports"][-1][1]


def test_bad_input_is_refused_clearly(metarig):
    bad = metarig["bad"]
    words = {"missing_file": "does not exist", "unreadable": "could not read the keypoint file",
             "unknown_set": "unknown keypoint set", "no_skeleton": "no skeleton the keypoints can be mapped onto",
             "not_armature": "armature"}
    for case, word in words.items():
        assert bad[case]["message"] is not None and word in bad[case]["message"], (case, bad[case])
        assert bad[case]["unchanged"], case
    assert "could not read the keypoint file" in bad["operator"]["message"]


def test_demo_markerless_writes_its_blend_and_plot(extension_zip, tmp_path):
    """`make demo-markerless` on the trial's first 12 frames: the four cases measured, ours
    nearer the keypoints and smoother than the rotation copy on both rigs, Blender's error equal
    to the engine's; out/markerless.blend and out/markerless.png written."""
    from tools import demo_markerless

    data = demo_markerless.run_demo(tmp_path, extension_zip, count=12)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["markerless.blend", "markerless.png"]
    assert (tmp_path / "markerless.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cases = data["cases"]
    assert sorted(cases) == ["generated copy", "generated fit", "metarig copy", "metarig fit"]
    for rig in ("generated", "metarig"):
        ours, copy = cases[f"{rig} fit"], cases[f"{rig} copy"]
        assert len(ours["error"]) == 12
        assert ours["mean_error"] == pytest.approx(ours["engine_mean"], abs=1e-6)
        assert ours["mean_error"] < 0.5 * copy["mean_error"]
        jitter = np.array(ours["jitter"])[1:-1], np.array(copy["jitter"])[1:-1]
        assert np.sqrt(np.mean(jitter[0] ** 2)) < np.sqrt(np.mean(jitter[1] ** 2))
    print(data["table"])

"""`python -m solver batch retarget` (issue #33, item 5): three ~60-frame pieces of the CMU walk
and a broken BVH onto Rigify's human metarig saved as a .blend, on 2 Dask workers, each with a
Blender process of its own (the Blender of `blender_python()`: bpy 5.0, or 4.2 with
$ITASC_TEST_PYTHON). Every piece is done and the broken one failed with the importer's message;
one output .blend, read back in a fresh Blender with nothing of the add-on loaded, holds every
contact span's point within 1 mm as Blender evaluates the rig's keys, and the rig's hips travel
as the clip's own (the file's forward kinematics) scaled; onto the rig Rigify generates too; a second run skips every clip done, a
clip over its time limit or whose Blender crashes fails as such, the next clip done."""

import json
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

from tests.apps.retarget_bvh import DATA, read_bvh, world_joints, write_bvh
from tools.blender_session import ROOT, blender_python, call_in_blender

pytestmark = pytest.mark.blender

MM = 1e-3
CMU_UNIT = 0.056444                     # metres per CMU unit (SOURCES.md)
STARTS = {"walk_a": 60, "walk_b": 150, "walk_c": 240}
LENGTH = 60
ARMS = ("shoulder", "upper_arm", "forearm", "hand")


def piece(bvh, start):
    """The clip's first frame (its T-pose, the retarget's calibration) and LENGTH frames from `start`."""
    return dict(bvh, frames=np.concatenate([bvh["frames"][:1], bvh["frames"][start:start + LENGTH]]))


def batch(rig, clips, out, *extra):
    cmd = [sys.executable, "-m", "solver", "batch", "retarget", str(rig), str(clips), "-o", str(out), "--workers", "2",
           "--scale", str(CMU_UNIT), "--blender-python", blender_python(), "-q", *extra]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch_retarget")
    clips = tmp / "clips"
    clips.mkdir()
    walk = read_bvh(DATA / "cmu_02_01_walk.bvh")
    for name, start in STARTS.items():
        write_bvh(piece(walk, start), clips / f"{name}.bvh")
    (clips / "broken.bvh").write_text("HIERARCHY\nROOT Hips\n{\n\tOFFSET 0 0\n")
    rig = tmp / "metarig.blend"
    call_in_blender("batch_retarget:save_metarig", path=str(rig), exit_at_once=True)
    first = batch(rig, clips, tmp / "out")
    reports = {p.stem: json.loads(p.read_text()) for p in (tmp / "out").glob("*.json")}
    second = batch(rig, clips, tmp / "out", "--resume")
    return {"tmp": tmp, "clips": clips, "rig": rig, "walk": walk, "first": first, "second": second, "reports": reports}


def test_every_clip_done_and_the_broken_one_failed_with_its_message(run):
    first, reports = run["first"], run["reports"]
    assert first.returncode == 1, first.stdout + first.stderr          # one trial failed
    assert "4 trials: 3 solved, 1 failed, 0 skipped" in first.stdout, first.stdout + first.stderr
    assert reports["broken"]["status"] == "failed"
    assert reports["broken"]["message"].startswith("Blender's BVH importer could not read broken.bvh: ")
    for name in STARTS:
        r = reports[name]
        assert r["status"] == "done", r
        assert r["frames"] == LENGTH + 1 and r["frame_start"] == 1
        assert r["converged"] >= LENGTH - 2, r["converged"]
        assert r["spans"] >= 2 and r["foot_slide_max"] <= MM and r["pin_distance_max"] <= MM, r
        assert r["floor_penetration_max"] <= MM
        assert (run["tmp"] / "out" / f"{name}.blend").stat().st_size > 0
    assert not (run["tmp"] / "out" / "broken.blend").exists()
    summary = (run["tmp"] / "out" / "batch_summary.csv").read_text().splitlines()
    assert len(summary) == 5 and summary[0].startswith("trial,kind,status,frames,converged,spans,foot_slide_max")


def test_an_output_blend_holds_the_contacts_as_blender_evaluates_it(run):
    r = run["reports"]["walk_b"]
    seen = call_in_blender("batch_retarget:contact_slides", path=str(run["tmp"] / "out" / "walk_b.blend"),
                           bone_map=r["bone_map"], contacts=r["contacts"])
    assert seen["armatures"] == ["metarig", "walk_b"] and seen["action"]
    assert seen["version"] == r["blender"]
    assert seen["frame_range"] == [1, LENGTH + 1]
    slides = [s for point in seen["slides"] for s in seen["slides"][point]]
    assert len(slides) == sum(len(v) for p, v in r["contacts"].items() if not p.startswith("toe_tip"))
    assert slides and max(slides) <= MM, seen["slides"]
    for point, values in seen["slides"].items():            # the report's figures are Blender's too
        np.testing.assert_allclose(values, r["foot_slide"][point], atol=1e-6)
    hips = world_joints(piece(run["walk"], STARTS["walk_b"]))[:, 0]
    source_travel = np.linalg.norm(hips[-1] - hips[1]) * CMU_UNIT * r["scale"]
    assert seen["hips_travel"] == pytest.approx(source_travel, rel=0.03)


def test_onto_the_rig_rigify_generates(run, tmp_path):
    """The same clips onto the rig Rigify generates (keys on its controls): done, contacts held."""
    rig = tmp_path / "generated.blend"
    assert call_in_blender("batch_retarget:save_metarig", path=str(rig), generate=True, exit_at_once=True) == ["rig"]
    done = batch(rig, run["clips"], tmp_path / "out", "--pattern", "walk_*.bvh")
    assert done.returncode == 0 and "3 trials: 3 solved, 0 failed" in done.stdout, done.stdout + done.stderr
    for name in STARTS:
        r = json.loads((tmp_path / "out" / f"{name}.json").read_text())
        assert r["spans"] >= 2 and r["foot_slide_max"] <= MM and r["pin_distance_max"] <= MM, r
        assert r["bone_map"]["foot.L"][1] == "ORG-foot.L" and r["keys_written"] > 0


def test_a_second_run_skips_every_clip_done(run):
    second = run["second"]
    assert "4 trials: 0 solved, 1 failed, 3 skipped" in second.stdout, second.stdout + second.stderr


def test_a_clip_over_its_time_limit_fails_as_such(run):
    out = run["tmp"] / "limited"
    done = batch(run["rig"], run["clips"] / "walk_a.bvh", out, "--time-limit", "0.5")
    report = json.loads((out / "walk_a.json").read_text())
    assert done.returncode == 1 and report["status"] == "failed"
    assert report["message"] == "stopped at the time limit of 0.5 s"
    assert not (out / "walk_a.blend").exists()


def test_a_bone_map_file_is_the_map_used(run, tmp_path):
    """The report's automatic map without the arms, saved as the panel saves maps: the clip is
    retargeted with exactly that map; a map without the legs fails with the retarget's reason."""
    legs = {r: p for r, p in run["reports"]["walk_a"]["bone_map"].items() if r.split(".")[0] not in ARMS}
    for name, pairs in (("legs", legs), ("hips", {"hips": legs["hips"]})):
        roles = {r: {"source": s, "target": t} for r, (s, t) in pairs.items()}
        (tmp_path / f"{name}.json").write_text(json.dumps({"format": "itasc_ik bone map", "version": 1, "roles": roles}))
    batch(run["rig"], run["clips"] / "walk_a.bvh", tmp_path / "legs", "--bone-map", str(tmp_path / "legs.json"))
    report = json.loads((tmp_path / "legs" / "walk_a.json").read_text())
    assert report["status"] == "done" and report["bone_map"] == legs and report["foot_slide_max"] <= MM
    batch(run["rig"], run["clips"] / "walk_a.bvh", tmp_path / "hips", "--bone-map", str(tmp_path / "hips.json"))
    report = json.loads((tmp_path / "hips" / "walk_a.json").read_text())
    assert report["status"] == "failed" and "the bone map leaves required role(s) unmapped" in report["message"]


def test_a_blender_crash_fails_that_clip_alone(run, tmp_path):
    """Blender's process ended by SIGSEGV while it works on a clip: that clip fails with how
    Blender ended, and the next clip is retarget by a new Blender."""
    from solver.batch import blender
    python, options = blender_python(), {"scale": CMU_UNIT}
    process = blender._process(python)
    crash = threading.Timer(0.5, os.kill, (process.proc.pid, signal.SIGSEGV))
    crash.start()
    with pytest.raises(blender.BlenderError, match=r"^Blender crashed \(SIGSEGV\)"):
        blender.retarget_clip(python, run["rig"], run["clips"] / "walk_a.bvh", options)
    crash.join()
    assert not process.alive
    data, figures = blender.retarget_clip(python, run["rig"], run["clips"] / "walk_c.bvh", options)
    assert data.startswith(b"BLENDER") and figures["frames"] == LENGTH + 1
    assert blender._process(python) is not process
    blender.close_all()


def test_bad_arguments_are_refused_clearly(run, tmp_path):
    done = batch(tmp_path / "none.blend", run["clips"], tmp_path / "out")
    assert done.returncode == 1 and "error: no such rig file: " in done.stderr
    done = batch(run["rig"], run["clips"] / "walk_a.bvh", tmp_path / "out", "--rig", "nobody")
    report = json.loads((tmp_path / "out" / "walk_a.json").read_text())
    assert report["message"] == "the rig file has no armature object 'nobody' (armatures: metarig)"
    no_bpy = tmp_path / "python-without-site"                 # this Python without site-packages: no bpy
    no_bpy.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    no_bpy.chmod(0o755)
    done = batch(run["rig"], run["clips"], tmp_path / "out", "--blender-python", str(no_bpy))
    assert done.returncode == 1
    assert f"error: --blender-python {no_bpy} cannot import bpy" in done.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, *sys.argv[1:]]))


def test_a_batch_in_this_process_runs_a_blender_per_worker_and_ends_them(run, tmp_path):
    """run_batch called from Python: the retarget kind's workers are threads of this process, each
    with a Blender process of its own, and those processes end with the batch."""
    from solver.batch import blender, find_trials, retarget_specs, run_batch
    specs = retarget_specs(run["rig"], find_trials("retarget", [run["clips"]], ["walk_*.bvh"]), python=blender_python(),
                           scale=CMU_UNIT)
    started = []
    real = blender.BlenderProcess.__init__

    def record(self, python):
        real(self, python)
        started.append(self)

    blender.BlenderProcess.__init__ = record
    try:
        result = run_batch(specs, tmp_path / "out", workers=2, progress=False)
    finally:
        blender.BlenderProcess.__init__ = real
    assert sorted(result.solved) == sorted(STARTS) and not result.failed and result.workers == 2
    assert len(started) == 2 and len({p.proc.pid for p in started}) == 2
    assert not blender._processes and all(not p.alive for p in started)

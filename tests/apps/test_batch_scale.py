"""Batches of the Scale tool (issue 31): `python -m solver batch scale SETUPS...` and `python -m
solver batch subjects FOLDERS...` (scale, then marker IK on every trial of each subject) on a
LocalCluster of 2 workers.

References: OpenSim's own Scale regression case (shared/data/opensim_scale, gait2354 subject01:
its expected scale set, which OpenSim's test holds to 1e-6) and, for every output, the file the
single-run tool writes for that subject or trial alone (`python -m solver scale` and `python -m
solver ik`), byte for byte. Subjects are built in a temporary folder: setups naming the shared
files in place, 8-frame walking trials cut from the gait2354 trial of the same subject.

Needs dask `distributed` (requirements.txt): skipped where it is not installed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed", reason="Dask distributed runs the batches (not in the engine-only venvs)")

from solver.__main__ import main as solver_main                                          # noqa: E402
from solver.batch import find_trials, group_specs, run_batch, scale_specs               # noqa: E402
from solver.batch.subjects import find_subjects, run_subjects                           # noqa: E402
from solver.opensim import read_trc, run_ik_setup, write_trc                            # noqa: E402
from solver.opensim.scale_setup import read_scale_set                                   # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
SCALE = SHARED / "opensim_scale"
GAIT = SHARED / "opensim_gait2354"
IK_SETUP = GAIT / "subject01_Setup_InverseKinematics.xml"
pytestmark = pytest.mark.skipif(not (SCALE.is_dir() and GAIT.is_dir()), reason="shared/data is not beside the repository")

FRAMES = 8


def write_scale_setup(path: Path, model: Path | None = None, mass: float | None = None) -> Path:
    """subject01's Scale setup naming the shared files in place (another model or mass if given)."""
    text = (SCALE / "subject01_Setup_Scale.xml").read_text()
    for name in ("gait2354_simbody.osim", "gait2354_Scale_MarkerSet.xml", "subject01_static.trc"):
        text = text.replace(f"> {name} <", f"> {SCALE / name} <")
    if model is not None:
        text = text.replace(f"> {SCALE / 'gait2354_simbody.osim'} <", f"> {model} <")
    if mass is not None:
        text = re.sub(r"<mass>[^<]*</mass>", f"<mass>{mass}</mass>", text, count=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_walks(folder: Path, starts) -> None:
    gait = read_trc(GAIT / "subject01_synthetic_marker_data.trc")
    for start in starts:
        t = gait.between(gait.time[start] - 1e-9, gait.time[start + FRAMES - 1] + 1e-9)
        t.frame_numbers = np.arange(FRAMES) + 1
        write_trc(folder / f"walk_{start:02d}.trc", t, units="mm")


@pytest.fixture(scope="module")
def client():
    from solver.batch import local_cluster
    from distributed import Client
    cluster = local_cluster(2)
    with Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """lab/s01 (subject01, three walks), lab/s02 (the same at 80 kg, two walks), lab/s03 (a
    setup naming a model that does not exist, one walk)."""
    lab = tmp_path_factory.mktemp("lab")
    write_scale_setup(lab / "s01" / "subject01_Setup_Scale.xml")
    write_walks(lab / "s01", (0, 20, 40))
    write_scale_setup(lab / "s02" / "s02_scale.xml", mass=80.0)
    write_walks(lab / "s02", (10, 30))
    write_scale_setup(lab / "s03" / "s03_scale.xml", model=lab / "missing.osim")
    write_walks(lab / "s03", (5,))
    (lab / "s01" / "notes.xml").write_text("<notes/>")                 # not a setup: passed over
    return lab


def test_batch_scale_equals_the_scale_tool_alone_and_opensims_scale_set(lab, client, tmp_path):
    specs = scale_specs(find_trials("scale", [lab]))
    assert [s.name for s in specs] == ["s01/subject01_Setup_Scale", "s02/s02_scale", "s03/s03_scale"]
    result = run_batch(specs, tmp_path / "out", client=client, progress=False)
    assert sorted(result.solved) == ["s01/subject01_Setup_Scale", "s02/s02_scale"]
    assert list(result.failed) == ["s03/s03_scale"] and "missing.osim" in result.failed["s03/s03_scale"]
    for name, setup in (("s01/subject01_Setup_Scale", lab / "s01" / "subject01_Setup_Scale.xml"),
                        ("s02/s02_scale", lab / "s02" / "s02_scale.xml")):
        alone = tmp_path / "alone" / name
        assert solver_main(["scale", str(setup), "--output-dir", str(alone)]) == 0
        pairs = {"_scaled.osim": "subject01_scaledOnly.osim", "_scale_set.xml": "subject01_scaleSet_applied.xml",
                 "_placed.osim": "subject01_simbody.osim", "_static.mot": "subject01_static_output.mot"}
        for suffix, theirs in pairs.items():
            assert (tmp_path / "out" / f"{name}{suffix}").read_bytes() == (alone / theirs).read_bytes(), suffix
        report = json.loads((tmp_path / "out" / f"{name}.json").read_text())
        assert report["status"] == "done" and report["markers"] == 39
        assert report["fixed_markers"] + report["moved_markers"] == 39
    # the factors against OpenSim's expected scale set (mass does not change them)
    expected = {s.segment: s.factors for s in read_scale_set(SCALE / "std_subject01_scaleSet_applied.xml")}
    for name in ("s01/subject01_Setup_Scale", "s02/s02_scale"):
        factors = json.loads((tmp_path / "out" / f"{name}.json").read_text())["scale_factors"]
        assert set(factors) == set(expected)
        for body, f in factors.items():
            assert np.allclose(f, expected[body], rtol=0, atol=1e-6), body
    rows = (tmp_path / "out" / "batch_summary.csv").read_text().splitlines()
    assert len(rows) == 4 and rows[0].startswith("trial,kind,status,frames,marker_error_rms")
    again = run_batch(specs, tmp_path / "out", client=client, progress=False, resume=True)
    assert sorted(again.skipped) == sorted(result.solved) and list(again.failed) == ["s03/s03_scale"]


def test_subjects_scale_then_ik_equal_each_tool_alone(lab, client, tmp_path, capsys):
    subjects = find_subjects([lab], ik_setup=IK_SETUP)
    assert [s.name for s in subjects] == ["s01", "s02", "s03"]
    assert [n for n, _ in subjects[0].trials] == ["s01/walk_00", "s01/walk_20", "s01/walk_40"]
    out = tmp_path / "out"
    scaled, solved, skipped = run_subjects(subjects, out, client=client, progress=False)
    assert list(scaled.failed) == ["s03/s03_scale"] and list(skipped) == ["s03"]
    assert sorted(solved.solved) == ["s01/walk_00", "s01/walk_20", "s01/walk_40", "s02/walk_10", "s02/walk_30"]
    # each trial alone: `python -m solver ik` on its setup, whose model is the subject's placed model
    for name in solved.solved:
        setup = out / f"{name}_setup.xml"
        subject = name.split("/")[0]
        placed = next(out.glob(f"{subject}/*_placed.osim")).resolve()
        assert f"<model_file>{placed}</model_file>" in setup.read_text()
        run = run_ik_setup(setup, tmp_path / "alone" / name)
        assert (out / f"{name}.mot").read_bytes() == run.files["motion"].read_bytes()
        assert (out / f"{name}_ik_marker_errors.sto").read_bytes() == run.files["marker_errors"].read_bytes()
        rms = json.loads((out / f"{name}.json").read_text())["marker_error_rms_max"]
        assert rms < 0.02                            # the subject's own model on its own walk: about a cm
    assert (out / "scale_summary.csv").exists() and (out / "batch_summary.csv").exists()
    # resumed: nothing to do, the templates untouched
    template = out / "s01" / "s01_ik_template.xml"
    stamp = template.stat().st_mtime_ns
    status = solver_main(["batch", "subjects", str(lab), "--ik-setup", str(IK_SETUP), "-o", str(out), "-q",
                          "--resume", "--workers", "2"])
    printed = capsys.readouterr().out
    assert status == 1 and "3 subjects scaled: 0 solved, 1 failed, 2 skipped" in printed, printed
    assert "5 trials of the subjects scaled: 0 solved, 0 failed, 5 skipped" in printed and "not run: the trials of s03" in printed
    assert template.stat().st_mtime_ns == stamp


def test_groups_keep_order_and_put_large_trials_alone(tmp_path):
    sizes = [10] * 12 + [400] + [10] * 27
    specs = []
    for i, size in enumerate(sizes):
        path = tmp_path / f"t{i:02d}.trc"
        path.write_bytes(b"x" * size)
        specs.append(type("Spec", (), {"input": str(path), "name": path.stem})())
    groups = group_specs(specs, 2)
    assert [s for g in groups for s in g] == specs
    assert [specs[12]] in groups and len(groups) >= 8 and max(len(g) for g in groups) <= 8

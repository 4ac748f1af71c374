"""C3D marker files (issue 22): real files from three capture systems read with the labels, rates,
units and gaps their SOURCES.md states (facts checked there with ezc3d and the c3d package), the
same values from ezc3d where installed, a .trc written from the trial equal to the trial, and
marker IK on a C3D trial equal to the same trial as a .trc.

Needs the `c3d` package (requirements.txt); skipped where it is not installed."""

from __future__ import annotations

import re
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

c3d = pytest.importorskip("c3d", reason="the c3d package is the reader under test (not in the engine-only venvs)")

from solver.__main__ import main as solver_main                              # noqa: E402
from solver.opensim import (OpenSimFileError, Trial, read_c3d, read_trc, read_trial, run_ik_setup,   # noqa: E402
                            write_trc)

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
C3D_DATA = SHARED / "c3d"
GAIT = SHARED / "opensim_gait2354"
needs_c3d_data = pytest.mark.skipif(not C3D_DATA.is_dir(), reason="shared/data/c3d is not beside the repository")
needs_gait = pytest.mark.skipif(not GAIT.is_dir(), reason="shared/data/opensim_gait2354 is not beside the repository")

VICON, QUALISYS, OPTITRACK = "vicon_walking2.c3d", "qualisys_cgm2_gait1.c3d", "optitrack_wheelchair_sprint.c3d"

# From SOURCES.md: markers (file order), rate, frames, units, header first frame, invalid share.
FACTS = {
    VICON: dict(labels="RTH1 RFHD RTH3 LTH2 LTH3 LTB1 LTB2 LPSI LTH1 RBHD LFHD RPSI T10 LMT2 LBHD C7 RTB1 RTB2 RMT2 "
                       "RTB3 LTB3 RMT1 RASI RTH2 LASI LMT1 RCAL STRN CLAV LCAL RLFC RMFC LLFC LMFC RMMAL RLMAL LMMAL "
                       "LLMAL LAJC LHJC LKJC RAJC RHJC RKJC",
                rate=250.0, frames=1249, units="mm", first=1, invalid=0.502, company="Vicon"),
    QUALISYS: dict(labels="LFHD LBHD RBHD RFHD C7 T10 CLAV STRN RBAK LSHO LELB LWRA LWRB LFIN RSHO RELB RWRA RWRB "
                          "RFIN LASI LPSI RPSI RASI LTHAP LHTAD LTHI LKNE LTIAP LTIAD LTIB LANK LHEE LFMH LSMH LVMH "
                          "LTOE RTHAP RTHAD RTHI RKNE RTIAP RTIAD RTIB RANK RHEE RFMH RSMH RVMH RTOE",
                   rate=100.0, frames=344, units="mm", first=393, invalid=0.0, company="Qualisys"),
    OPTITRACK: dict(labels="WheelchairL:Marker1 SWL:Marker2 WheelchairL:Marker2 ArmL:Marker1 SWL:Marker3 ArmL:Marker2 "
                           "ArmL:Marker3 SWL:Marker4 WheelchairL:Marker4 ArmL:Marker4 WheelchairL:Marker3 SWL:Marker1 "
                           "ForearmL:Marker4 ForearmL:Marker2 ForearmL:Marker1 ForearmL:Marker3 BodyL:Forehead "
                           "BodyL:TempleL BodyL:EarL BodyL:C7 BodyL:AcromionL BodyL:ScapularSpineL BodyL:ScapulaL "
                           "BodyL:LateralEpicondyleL BodyL:HandL Sync:Sync",
                    rate=120.0, frames=3678, units="m", first=0, invalid=0.388, company="OptiTrack"),
}


@pytest.fixture(scope="module")
def trials():
    if not C3D_DATA.is_dir():
        pytest.skip("shared/data/c3d is not beside the repository")
    return {name: read_c3d(C3D_DATA / name) for name in FACTS}


@needs_c3d_data
@pytest.mark.parametrize("name", sorted(FACTS))
def test_real_files_read_as_their_sources_state(trials, name):
    t, facts = trials[name], FACTS[name]
    assert isinstance(t, Trial) and t.source == "c3d"
    assert t.labels == facts["labels"].split()
    assert (t.rate, t.n_frames, t.units, t.first_frame) == (facts["rate"], facts["frames"], facts["units"], facts["first"])
    assert t.points.shape == (facts["frames"], len(t.labels), 3)
    assert np.array_equal(t.frame_numbers, facts["first"] + np.arange(facts["frames"]))
    # frame 1 (the C3D convention's first frame; 0 where an export counts from 0) is at t = 0
    assert t.time[0] == pytest.approx(max(facts["first"] - 1, 0) / facts["rate"], abs=1e-12)
    assert np.allclose(np.diff(t.time), 1 / facts["rate"], rtol=0, atol=1e-12)
    missing = np.isnan(t.points)
    assert np.array_equal(missing.any(-1), missing.all(-1))
    assert missing[..., 0].mean() == pytest.approx(facts["invalid"], abs=5e-4)
    assert t.header["MANUFACTURER:COMPANY"] == facts["company"]


@needs_c3d_data
def test_gaps_units_and_analog_channels(trials):
    vicon, qualisys, optitrack = trials[VICON], trials[QUALISYS], trials[OPTITRACK]
    # Vicon: first valid sample at frame 206, last at 1229 (0-based); all 44 valid in 423-836 exactly
    valid = ~np.isnan(vicon.points[..., 0])
    assert np.flatnonzero(valid.any(1))[[0, -1]].tolist() == [206, 1229]
    all_valid = np.flatnonzero(valid.all(1))
    assert all_valid[[0, -1]].tolist() == [423, 836] and all_valid.size == 836 - 423 + 1
    # units: mm files scaled to metres (pelvis about 1.05 m and 0.93 m high, Z up); the m file kept
    pelvis = [vicon.index(n) for n in ("LASI", "RASI", "LPSI", "RPSI")]
    assert np.nanmean(vicon.points[423:837, pelvis, 2]) == pytest.approx(1.05, abs=0.05)
    pelvis = [qualisys.index(n) for n in ("LASI", "RASI", "LPSI", "RPSI")]
    assert np.mean(qualisys.points[:, pelvis, 2]) == pytest.approx(0.93, abs=0.05)
    chair = [optitrack.index(n) for n in optitrack.labels if n.startswith("WheelchairL:")]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        x = np.nanmean(optitrack.points[:, chair, 0], axis=1)
    assert np.nanmedian(x[:1500]) == pytest.approx(-3.5, abs=0.5) and x[2100] == pytest.approx(5.8, abs=0.4)
    wheelchair = optitrack.marker("WheelchairL:Marker1")
    assert np.sum(np.diff(np.isnan(wheelchair[:, 0]).astype(int)) == 1) >= 40       # gaps inside the trajectory
    # analog: 12 channels at 2000 Hz, 8 per frame (OpenSim's own test reads 9992 force rows)
    assert (vicon.analog.shape, vicon.analog_rate, vicon.analog_per_frame) == ((9992, 12), 2000.0, 8)
    assert vicon.analog_labels == ["Fx1", "Fy1", "Fz1", "Mx1", "My1", "Mz1", "Fx2", "Fy2", "Fz2", "Mx2", "My2", "Mz2"]
    assert (qualisys.analog.shape, qualisys.analog_rate) == ((3440, 12), 1000.0)
    assert set(qualisys.analog_labels) == {"Amti Optima OPT400600-2K-STT 10"}      # all alike, as in the file
    assert optitrack.analog.shape[0] == 0 and optitrack.analog_labels == []
    fz = vicon.analog[:, vicon.analog_labels.index("Fz1")]
    assert np.all(np.isfinite(vicon.analog)) and np.ptp(fz) > 100                     # a foot on the plate


@needs_c3d_data
@pytest.mark.parametrize("name", sorted(FACTS))
def test_ezc3d_reads_the_same(trials, name):
    pytest.importorskip("ezc3d", reason="ezc3d is the second, optional reader")
    ours, theirs = trials[name], read_c3d(C3D_DATA / name, reader="ezc3d")
    assert theirs.source == "ezc3d"
    assert theirs.labels == ours.labels and theirs.rate == ours.rate and theirs.units == ours.units
    assert np.array_equal(theirs.points, ours.points, equal_nan=True)
    assert np.array_equal(theirs.time, ours.time)
    assert theirs.analog.shape == ours.analog.shape and theirs.analog_labels == ours.analog_labels
    assert np.allclose(theirs.analog, ours.analog, rtol=1e-6, atol=1e-6)


@needs_c3d_data
@pytest.mark.parametrize("name", sorted(FACTS))
def test_a_trc_written_from_the_trial_equals_the_trial(trials, name, tmp_path):
    t = trials[name]
    exact = tmp_path / "exact.trc"
    write_trc(exact, t, units="m", fmt="%.17g")                 # every double written in full
    back = read_trc(exact)
    assert back.names == t.names and back.data_rate == t.rate
    assert np.array_equal(back.frame_numbers, t.frame_numbers) and np.array_equal(back.time, t.time)
    assert np.array_equal(back.positions, t.positions, equal_nan=True)
    as_file = tmp_path / "units.trc"
    write_trc(as_file, t, units=t.units)                         # in the file's own units, 6 decimals
    back = read_trc(as_file)
    assert back.units == t.units
    assert np.array_equal(np.isnan(back.positions), np.isnan(t.positions))
    assert np.nanmax(np.abs(back.positions - t.positions)) <= 0.5e-6 * (1e-3 if t.units == "mm" else 1) + 1e-15


@needs_c3d_data
def test_read_trial_picks_the_reader_by_suffix(tmp_path):
    upper = tmp_path / "trial.C3D"
    shutil.copy(C3D_DATA / QUALISYS, upper)
    assert read_trial(upper).n_frames == 344
    with pytest.raises(OpenSimFileError, match="unknown marker file type '.txt'"):
        read_trial(tmp_path / "markers.txt")


# ------------------------------------------------------------------------------ marker IK on a C3D

def write_c3d(path, markers, first_frame, invalid=(), units="mm"):
    """A C3D file (the c3d package's writer) of MarkerData: points in `units`, float format,
    samples listed in `invalid` ((frame, marker) pairs) marked invalid."""
    scale = {"mm": 1000.0, "m": 1.0}[units]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)            # "No analog data found in file."
        writer = c3d.Writer(point_rate=float(markers.data_rate), point_units=units)
        writer.set_point_labels(markers.names)
        writer.set_start_frame(first_frame)
        points = np.zeros((markers.n_frames, markers.n_markers, 5), np.float32)
        points[..., :3] = np.nan_to_num(markers.positions * scale)
        points[np.isnan(markers.positions[..., 0]), 3] = -1
        for f, m in invalid:
            points[f, m, 3] = -1
        writer.add_frames([(p, np.zeros((0, 0))) for p in points])
        with open(path, "wb") as fh:
            writer.write(fh)


def setup_for(tmp_path, marker_file: Path, name: str) -> Path:
    """The gait2354 IK setup with its model and task files beside it, reading `marker_file`."""
    for f in ("subject01_simbody.osim", "gait2354_IK_Tasks_uniform.xml"):
        if not (tmp_path / f).exists():
            shutil.copy(GAIT / f, tmp_path / f)
    text = (GAIT / "subject01_Setup_InverseKinematics.xml").read_text()
    text = re.sub(r"<marker_file>[^<]*</marker_file>", f"<marker_file>{marker_file.name}</marker_file>", text)
    text = re.sub(r"<output_motion_file>[^<]*</output_motion_file>", f"<output_motion_file>{name}.mot"
                                                                     "</output_motion_file>", text)
    text = text.replace('name="subject01"', f'name="{name}"')
    path = tmp_path / f"{name}_setup.xml"
    path.write_text(text)
    return path


@needs_gait
def test_marker_ik_on_a_c3d_trial_equals_the_same_trial_as_trc(tmp_path):
    gait = read_trc(GAIT / "subject01_synthetic_marker_data.trc")
    dropped = [(f, 7) for f in range(10, 20)] + [(40, 2), (41, 2)]             # V.Sacral and L.Acromium gaps
    write_c3d(tmp_path / "walk.c3d", gait, first_frame=25, invalid=dropped)     # 24 / 60 Hz = 0.4 s, as the .trc
    trial = read_trial(tmp_path / "walk.c3d")
    assert all(np.isnan(trial.points[f, m]).all() for f, m in dropped)
    assert np.allclose(trial.time, gait.time, atol=5e-4)                         # the .trc's times have 3 decimals
    write_trc(tmp_path / "walk.trc", trial, units="m", fmt="%.17g")
    from_c3d = run_ik_setup(setup_for(tmp_path, tmp_path / "walk.c3d", "from_c3d"))
    from_trc = run_ik_setup(setup_for(tmp_path, tmp_path / "walk.trc", "from_trc"))
    a, b = from_c3d.result, from_trc.result
    assert a.n_frames == b.n_frames == 73 and a.converged.all()
    assert np.max(np.abs(a.q - b.q)) <= 1e-12
    assert np.array_equal(a.time, b.time)
    assert np.allclose(a.marker_errors, b.marker_errors, atol=1e-12, equal_nan=True)
    assert np.array_equal(np.isnan(a.marker_errors), np.isnan(b.marker_errors))
    # and the C3D trial (float32 millimetres) is the original .trc trial to float32 rounding
    original = run_ik_setup(GAIT / "subject01_Setup_InverseKinematics.xml", tmp_path / "original").result
    assert np.max(np.abs(a.q[:10] - original.q[:10])) < 1e-5


@needs_gait
def test_the_ik_command_takes_a_c3d_marker_file(tmp_path, capsys):
    write_c3d(tmp_path / "walk.c3d", read_trc(GAIT / "subject01_synthetic_marker_data.trc"), first_frame=25)
    setup = setup_for(tmp_path, tmp_path / "walk.c3d", "cli")
    assert solver_main(["ik", str(setup), "--output-dir", str(tmp_path / "out")]) == 0
    assert "73 frames" in capsys.readouterr().out
    motion = (tmp_path / "out" / "cli.mot").read_text().splitlines()
    assert "nRows=73" in motion
    broken = tmp_path / "broken.c3d"
    broken.write_bytes((tmp_path / "walk.c3d").read_bytes()[:3000])
    assert solver_main(["ik", str(setup_for(tmp_path, broken, "broken"))]) == 1
    assert f"{broken.resolve()}: truncated" in capsys.readouterr().err


def test_without_the_library_the_error_says_what_to_install(monkeypatch, tmp_path):
    path = tmp_path / "any.c3d"
    path.write_bytes(bytes([2, 0x50]) + bytes(510))
    for library in ("c3d", "ezc3d"):
        monkeypatch.setitem(sys.modules, library, None)            # as if it were not installed
        with pytest.raises(OpenSimFileError, match=f"needs the `{library}` package \\(pip install {library}\\)"):
            read_c3d(path, reader=library)

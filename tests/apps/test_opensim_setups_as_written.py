"""Setups and files as labs write them, each built in the test: `Unassigned` values, .trc headers
whose NumFrames disagrees with the rows or that double their tabs, an IKTaskSet that applies no
marker task, the IKTool setups of OpenSim 1.x/2.x, and Latin-1 bytes in an .osim declared UTF-8.
Where the `opensim` package is installed, its readers and tool run on the same files."""

import numpy as np
import pytest

from solver.opensim import (MarkerData, OpenSimFileWarning, load_osim, read_ik_setup, read_storage, read_trc,
                            run_ik_setup, write_trc)
from solver.opensim.ik import cli
from tests.opensim_reference import DATA, GAIT, needs_data
from tests.opensim_reference import opensim_if_installed

TRC_HEAD = ("PathFileType\t4\t(X/Y/Z)\tt.trc\n"
            "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame\tOrigNumFrames\n"
            "{values}\n"
            "Frame#\tTime\tA\t\t\tB\t\t\n"
            "\t\tX1\tY1\tZ1\tX2\tY2\tZ2\n\n")
TRC_ROWS = "1\t0.00\t1\t2\t3\t4\t5\t6\n2\t0.01\t7\t8\t9\t10\t11\t12\n3\t0.02\t13\t14\t15\t16\t17\t18\n"


def _gait_frames(folder, frames=slice(6, 9)):
    """Three frames of the gait2354 trial written as a new .trc (in mm) in `folder`."""
    d = read_trc(DATA / "subject01_synthetic_marker_data.trc")
    part = MarkerData(d.names, d.time[frames], d.positions[frames], d.frame_numbers[frames], d.data_rate,
                      d.camera_rate, "mm")
    write_trc(folder / "trial.trc", part, units="mm")
    return part


# ------------------------------------------------------------------------------------------ .trc

@pytest.mark.parametrize("values, frames", [("100\t100\t900\t2\tmm\t100\t1\t900", 900),
                                            ("100\t100\t2\t2\tmm\t100\t1\t2", 2)])
def test_trc_numframes_other_than_the_rows_reads_the_rows_with_a_warning(tmp_path, values, frames):
    path = tmp_path / "t.trc"
    path.write_text(TRC_HEAD.format(values=values) + TRC_ROWS)
    with pytest.warns(OpenSimFileWarning, match=rf"line 9: NumFrames is {frames} but the file has 3 data rows"):
        d = read_trc(path)
    np.testing.assert_allclose(d.positions.reshape(3, 6), np.arange(1, 19).reshape(3, 6) * 1e-3, rtol=1e-15)
    osim = opensim_if_installed()
    if osim is None:                  # opensim not installed: the cross-check with OpenSim is left out
        return
    assert osim.TimeSeriesTableVec3(str(path)).getNumRows() == 3               # OpenSim reads the rows too


def test_trc_doubled_tabs_between_header_values(tmp_path):
    path = tmp_path / "t.trc"
    path.write_text(TRC_HEAD.format(values="100\t\t120\t3\t\t2\tmm\t\t100\t1\t3") + TRC_ROWS)
    d = read_trc(path)
    assert (d.data_rate, d.camera_rate, d.units, d.n_frames, d.n_markers) == (100.0, 120.0, "mm", 3, 2)
    assert d.header["OrigDataStartFrame"] == "1"
    osim = opensim_if_installed()
    if osim is None:                  # opensim not installed: the cross-check with OpenSim is left out
        return
    table = osim.TimeSeriesTableVec3(str(path))
    assert float(table.getTableMetaDataAsString("CameraRate")) == d.camera_rate
    assert table.getNumRows() == 3


# ------------------------------------------------------------------------------------- setups

SETUP = """<?xml version="1.0" encoding="UTF-8"?>
<OpenSimDocument Version="30000">
  <InverseKinematicsTool name="lab">
    <results_directory>Unassigned</results_directory>
    <model_file>{model}</model_file>
    <constraint_weight>Unassigned</constraint_weight>
    <accuracy>Unassigned</accuracy>
    <IKTaskSet name="tasks">{tasks}</IKTaskSet>
    <marker_file>trial.trc</marker_file>
    <coordinate_file>Unassigned</coordinate_file>
    <time_range>-Infinity Infinity</time_range>
    <output_motion_file>lab_ik.mot</output_motion_file>
    <report_marker_locations>true</report_marker_locations>
  </InverseKinematicsTool>
</OpenSimDocument>
"""
UNIFORM = "<objects>" + "".join(f"<IKMarkerTask name=\"{n}\"><weight>1</weight></IKMarkerTask>"
                                for n in ("Sternum", "R.ASIS", "L.ASIS", "V.Sacral")) + "</objects>"


@needs_data
def test_unassigned_values_read_as_empty(tmp_path):
    path = tmp_path / "setup.xml"
    path.write_text(SETUP.format(model=GAIT, tasks=UNIFORM))
    s = read_ik_setup(path)
    assert s.coordinate_file is None and s.results_directory == tmp_path
    assert s.constraint_weight == np.inf and s.accuracy == 1e-5                # OpenSim's defaults
    assert list(s.tasks.marker_weights()) == ["Sternum", "R.ASIS", "L.ASIS", "V.Sacral"]
    _gait_frames(tmp_path)
    run = run_ik_setup(path)
    assert run.result.n_frames == 3 and run.result.converged.all()
    assert (tmp_path / "lab_ik.mot").is_file() and (tmp_path / "lab_ik_marker_errors.sto").is_file()


@needs_data
def test_empty_task_set_tracks_every_model_marker_at_weight_one(tmp_path, capsys):
    """OpenSim 4.6 tracks every model marker of the file at weight 1 when the task set applies no
    marker task (empty, or every task apply=false); checked against its tool where installed."""
    part = _gait_frames(tmp_path)
    model_markers = load_osim(GAIT).markers.names
    expected = [n for n in part.names if n in model_markers]
    every = "<objects>" + "".join(f"<IKMarkerTask name=\"{n}\"><weight>1</weight></IKMarkerTask>"
                                  for n in expected) + "</objects>"
    off = "<objects><IKMarkerTask name=\"Sternum\"><apply>false</apply><weight>3</weight></IKMarkerTask></objects>"
    runs = {}
    for name, tasks in (("empty", ""), ("off", off), ("every", every)):
        path = tmp_path / f"{name}.xml"
        path.write_text(SETUP.format(model=GAIT, tasks=tasks).replace('name="lab"', f'name="{name}"')
                        .replace("lab_ik.mot", f"{name}_ik.mot"))
        if name == "every":
            runs[name] = run_ik_setup(path)
            continue
        with pytest.warns(OpenSimFileWarning, match=f"tracking all {len(expected)} model markers"):
            runs[name] = run_ik_setup(path)
        assert any("applies no marker task" in n for n in runs[name].notes)
    for name in ("empty", "off"):
        assert runs[name].result.marker_names == expected
        np.testing.assert_allclose(runs[name].result.q, runs["every"].result.q, atol=1e-9)
    with pytest.warns(OpenSimFileWarning):
        assert cli(tmp_path / "empty.xml") == 0
    assert "note: the IKTaskSet applies no marker task" in capsys.readouterr().out
    osim = opensim_if_installed()
    if osim is None:                  # opensim not installed: the cross-check with OpenSim is left out
        return
    tool = osim.InverseKinematicsTool(str(tmp_path / "empty.xml"))
    tool.setResultsDir(str(tmp_path / "opensim"))
    (tmp_path / "empty_ik.mot").unlink()                      # ours: OpenSim writes its own there
    assert tool.run()
    theirs = read_storage(tmp_path / "opensim" / "empty_ik_marker_errors.sto")
    motion = read_storage(tmp_path / "empty_ik.mot")
    ours = runs["empty"].result
    # the same markers in use: coordinates within 0.1 deg / 0.1 mm, RMS within 0.1 mm (OpenSim's
    # accuracy 1e-5 stops it earlier than ours)
    d = load_osim(GAIT).coordinates_from(motion) - ours.q
    assert np.all(np.abs(np.where(ours.rotational, np.degrees(d), 1e3 * d)) < 0.1)
    np.testing.assert_allclose(theirs.column("marker_error_RMS"), ours.marker_error_rms, atol=1e-4)


@needs_data
def test_marker_file_without_model_markers_is_an_error(tmp_path):
    """OpenSim stops with 'Marker data does not correspond to any model markers'; so do we
    (before, every frame was 'solved' at the default pose)."""
    part = _gait_frames(tmp_path)
    renamed = MarkerData([f"X{n}" for n in part.names], part.time, part.positions, part.frame_numbers,
                         part.data_rate, part.camera_rate)
    write_trc(tmp_path / "trial.trc", renamed, units="mm")
    path = tmp_path / "setup.xml"
    path.write_text(SETUP.format(model=GAIT, tasks=UNIFORM))
    with pytest.raises(ValueError, match="no marker of .*trial.trc is a model marker with an applied IKMarkerTask"):
        run_ik_setup(path)
    assert cli(path) == 1

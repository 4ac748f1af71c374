"""Readers and writers for .trc and .mot/.sto files, checked against the OpenSim regression data
(read in place from shared/data) and, when installed, the `opensim` package's own readers."""


import numpy as np
import pytest

from solver.opensim import (
    OpenSimFileError,
    read_storage,
    read_trc,
    write_storage,
    write_trc,
)
from tests.opensim_reference import DATA, needs_data
from tests.opensim_reference import opensim as _opensim, opensim_if_installed

TRC = DATA / "subject01_synthetic_marker_data.trc"
MOT = DATA / "std_subject01_walk1_ik.mot"





# ----------------------------------------------------------------------------------------- .trc

@needs_data
def test_trc_reads_the_gait_trial():
    d = read_trc(TRC)
    assert (d.n_frames, d.n_markers) == (73, 31)
    assert d.data_rate == 60.0 and d.units == "m"
    assert d.names[:3] == ["Sternum", "R.Acromium", "L.Acromium"]
    assert d.time[0] == pytest.approx(0.4) and d.time[-1] == pytest.approx(1.6)
    assert list(d.frame_numbers[:3]) == [1, 2, 3]
    np.testing.assert_array_equal(d.marker("Sternum")[0], [0.67076, 1.3961, -0.025106])
    assert not np.any(np.isnan(d.positions))
    part = d.between(0.5, 0.6)
    assert part.time.min() >= 0.5 - 1e-9 and part.time.max() <= 0.6 + 1e-9 and part.n_frames == 7


@needs_data
def test_trc_matches_opensim_reader():
    osim = _opensim()
    table = osim.TimeSeriesTableVec3(str(TRC))
    ours = read_trc(TRC)
    assert list(table.getColumnLabels()) == ours.names
    np.testing.assert_allclose(list(table.getIndependentColumn()), ours.time, rtol=0, atol=0)
    theirs = np.array([[list(table.getMatrix().getElt(r, c).to_numpy()) for c in range(table.getNumColumns())]
                       for r in range(table.getNumRows())])
    np.testing.assert_array_equal(theirs, ours.positions)   # Units m: no conversion either side


TRC_MM = (
    "PathFileType\t4\t(X/Y/Z)\tgaps.trc\n"
    "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame\tOrigNumFrames\t\n"
    "100\t100\t3\t3\tmm\t100\t1\t3\t\n"
    "Frame#\tTime\tA\t\t\tB\t\t\tC\t\t\t\n"
    "\t\tX1\tY1\tZ1\tX2\tY2\tZ2\tX3\tY3\tZ3\t\n"
    "\n"
    "1\t0.00\t1000\t2000\t3000\t\t\t\t7\t8\t9\t\r\n"
    "2\t0.01\t1100\t2100\t3100\t4\t5\t6\n"
    "3\t0.02\t1200\t\t3200\t4\t5\t6\t7\t8\t9\n"
)


def test_trc_units_gaps_and_trailing_tabs(tmp_path):
    path = tmp_path / "gaps.trc"
    path.write_text(TRC_MM)
    d = read_trc(path)
    assert d.names == ["A", "B", "C"] and d.units == "mm"
    np.testing.assert_allclose(d.marker("A")[0], [1.0, 2.0, 3.0])
    assert np.all(np.isnan(d.marker("B")[0]))          # empty cells
    assert np.all(np.isnan(d.marker("C")[1]))          # the row ends early
    assert np.all(np.isnan(d.marker("A")[2]))          # one coordinate missing: the whole marker
    np.testing.assert_allclose(d.marker("C")[2], [0.007, 0.008, 0.009])


def test_trc_gaps_agree_with_opensim(tmp_path):
    osim = _opensim()
    path = tmp_path / "gaps.trc"
    # OpenSim rejects rows that end early, so here the gaps are inside full-length rows.
    text = TRC_MM.replace("1200\t\t3200", "1200\t2200\t3200").replace("\t4\t5\t6\n2", "\t4\t5\t6\t\t\t\t\n2")
    text = text.replace("2\t0.01\t1100\t2100\t3100\t4\t5\t6\n", "2\t0.01\t\t\t\t4\t5\t6\t7\t8\t9\n")
    path.write_text(text)
    table = osim.TimeSeriesTableVec3(str(path))
    ours = read_trc(path)
    theirs = np.array([[list(table.getMatrix().getElt(r, c).to_numpy()) for c in range(3)] for r in range(3)])
    np.testing.assert_allclose(theirs / 1000.0, ours.positions, rtol=1e-15)   # both NaN in the same places


def test_trc_write_read_round_trip_and_opensim_reads_ours(tmp_path):
    src = tmp_path / "gaps.trc"
    src.write_text(TRC_MM)
    d = read_trc(src)
    out = tmp_path / "out.trc"
    write_trc(out, d, units="mm", fmt="%.9f")
    again = read_trc(out)
    assert again.names == d.names
    np.testing.assert_allclose(again.positions, d.positions, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(again.time, d.time)
    osim = opensim_if_installed()
    if osim is None:                  # opensim not installed: the cross-check with OpenSim is left out
        return
    table = osim.TimeSeriesTableVec3(str(out))
    assert list(table.getColumnLabels()) == d.names and table.getNumRows() == 3


@pytest.mark.parametrize("change, line, words", [
    (("100\t100\t3\t3\tmm", "100\t100\t3\t4\tmm"), 4, "NumMarkers is 4"),
    (("100\t100\t3\t3\tmm", "100\t100\t3\t3\tinches"), 3, "unknown Units"),
    (("1100\t2100", "1100\tx2100"), 8, "not a number"),
    (("\t4\t5\t6\n3", "\t4\t5\t6\t1\t2\t3\t4\n3"), 8, "more than the 11"),
    (("2\t0.01", "2\t0.00"), 8, "time must increase"),
])
def test_trc_malformed_input_names_file_and_line(tmp_path, change, line, words):
    path = tmp_path / "bad.trc"
    path.write_text(TRC_MM.replace(*change, 1))
    with pytest.raises(OpenSimFileError) as info:
        read_trc(path)
    assert info.value.line == line and words in info.value.reason
    assert str(path) in str(info.value)


def test_trc_unreadable_file_is_our_error(tmp_path):
    with pytest.raises(OpenSimFileError):
        read_trc(tmp_path / "missing.trc")


# ----------------------------------------------------------------------------------- .mot / .sto

@needs_data
def test_mot_simm_header_reference_result():
    s = read_storage(MOT)
    assert s.labels[0] == "time" and len(s.labels) == 24 and s.n_rows == 73
    assert s.name == "first trial"
    assert s.header["nRows"] == "73" and s.header["datacolumns"] == "24" and s.header["range"].startswith("0.4")
    assert s.in_degrees is None and s.degrees           # no inDegrees line; a .mot is in degrees
    assert s.time[0] == pytest.approx(0.4) and s.time[-1] == pytest.approx(1.6)
    assert s.column("pelvis_tilt")[0] == pytest.approx(5.21211788)
    r = s.in_radians(["pelvis_tilt"])
    assert r.column("pelvis_tilt")[0] == pytest.approx(np.radians(5.21211788))
    assert r.column("pelvis_tx")[0] == s.column("pelvis_tx")[0]


@needs_data
def test_mot_matches_opensim_storage():
    osim = _opensim()
    theirs = osim.Storage(str(MOT))
    ours = read_storage(MOT)
    labels = theirs.getColumnLabels()
    assert [labels.get(i) for i in range(labels.getSize())] == ours.labels
    assert theirs.isInDegrees() == ours.degrees
    for name in ours.labels[1:]:
        column = osim.ArrayDouble()
        theirs.getDataColumn(name, column)
        np.testing.assert_array_equal([column.get(i) for i in range(column.getSize())], ours.column(name))


def test_version1_header_and_round_trip(tmp_path):
    text = ("walk\nversion=1\nnRows=2\nnColumns=3\ninDegrees=no\nDataType=double\nendheader\n"
            "time\tknee\tpelvis_tx\t\n0.0\t0.5\t1.25\n0.1\t-0.25\t1.5\n")
    path = tmp_path / "walk.sto"
    path.write_text(text)
    s = read_storage(path)
    assert s.name == "walk" and s.in_degrees is False and not s.degrees
    assert s.labels == ["time", "knee", "pelvis_tx"] and s.header["DataType"] == "double"
    np.testing.assert_array_equal(s.columns(["pelvis_tx", "knee"]), [[1.25, 0.5], [1.5, -0.25]])
    np.testing.assert_array_equal(s.in_radians(["knee"]).data, s.data)   # already radians

    out = tmp_path / "out.mot"
    write_storage(out, s.labels, s.data, name="again", in_degrees=True, fmt="%.17g")
    again = read_storage(out)
    assert again.in_degrees is True and again.name == "again"
    np.testing.assert_array_equal(again.data, s.data)


def test_opensim_reads_our_storage(tmp_path):
    osim = _opensim()
    out = tmp_path / "ours.sto"
    data = np.array([[0.0, 0.1, 0.2], [0.5, 0.3, -0.4], [1.0, 1e-7, 3.5]])
    write_storage(out, ["time", "a", "b"], data, in_degrees=False, fmt="%.17g")
    table = osim.TimeSeriesTable(str(out))
    assert list(table.getColumnLabels()) == ["a", "b"]
    assert table.getTableMetaDataAsString("inDegrees") == "no"
    np.testing.assert_array_equal(table.getMatrix().to_numpy(), data[:, 1:])
    np.testing.assert_array_equal(list(table.getIndependentColumn()), data[:, 0])


@pytest.mark.parametrize("text, line, words", [
    ("x\nnRows=1\ntime\ta\n0\t1\n", None, "endheader"),
    ("x\nnRows=2\nendheader\ntime\ta\n0\t1\n", 2, "nRows=2"),
    ("x\nendheader\ntime\ta\n0\t1\t2\n", 4, "3 numbers but 2"),
    ("x\ninDegrees=maybe\nendheader\ntime\ta\n0\t1\n", 2, "inDegrees"),
    ("x\nendheader\ntime\ta\n0\tone\n", 4, "not a number"),
    ("x\nendheader\n\n", 2, "no column labels"),
    ("x\nendheader\ntime\ta\ta\n", 3, "repeat"),
])
def test_storage_malformed_input_names_file_and_line(tmp_path, text, line, words):
    path = tmp_path / "bad.sto"
    path.write_text(text)
    with pytest.raises(OpenSimFileError) as info:
        read_storage(path)
    assert info.value.line == line and words in info.value.reason

"""Model marker positions and Jacobians w.r.t. OpenSim coordinates: Jacobians against finite
differences, positions against the `opensim` package (Marker.getLocationInGround), and the
upstream reference IK result against the measured .trc markers."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from solver.finite_differences import numerical_jacobian, relative_difference
from solver.opensim import (
    load_osim,
    marker_jacobian,
    marker_positions,
    read_storage,
    read_trc,
)
from tests.opensim_reference import DATA, GAIT, needs_data
from tests.opensim_reference import opensim as _opensim


def _hand(tmp_path):
    """The hand-written OpenSim 4 model of test_opensim_model.py."""
    spec = importlib.util.spec_from_file_location("_opensim_model_tests", Path(__file__).with_name("test_opensim_model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / "hand.osim"
    path.write_text(module.HAND)
    return path


def _poses(om, n, seed):
    """The default pose and n random poses inside the coordinates' ranges."""
    rng = np.random.default_rng(seed)
    c = om.coupling
    lo = np.where(np.isfinite(c.range_lower), c.range_lower, -1.0)
    hi = np.where(np.isfinite(c.range_upper), c.range_upper, 1.0)
    return np.vstack([c.default_coordinates(1), rng.uniform(lo, hi, size=(n, c.n_coordinates))])


@pytest.mark.parametrize("which", ["gait", "hand"])
def test_marker_jacobian_matches_finite_differences(which, tmp_path):
    if which == "gait" and not DATA.is_dir():
        pytest.skip("shared/data/opensim_gait2354 is not beside the repository")
    om = load_osim(GAIT if which == "gait" else _hand(tmp_path))
    q = _poses(om, 8, seed=11)
    x, J = marker_jacobian(om, q, with_positions=True)
    M = len(om.markers.names)
    assert x.shape == (q.shape[0], M, 3) and J.shape == (q.shape[0], M, 3, om.coupling.n_coordinates)
    np.testing.assert_array_equal(x, marker_positions(om, q))
    fd = numerical_jacobian(lambda qq: marker_positions(om, qq), q, step=1e-6)
    assert relative_difference(J, fd) <= 1e-6


@needs_data
def test_marker_subsets_keep_the_requested_order():
    om = load_osim(GAIT)
    q = _poses(om, 2, seed=12)
    names = ["R.Heel", "Sternum", "L.Toe.Tip"]
    full = om.marker_positions(q)
    np.testing.assert_array_equal(om.marker_positions(q, names), full[:, om.markers.index(names)])
    np.testing.assert_array_equal(om.marker_jacobian(q, names), om.marker_jacobian(q)[:, om.markers.index(names)])
    with pytest.raises(KeyError, match="Nose"):
        om.marker_positions(q, ["Nose"])


def _opensim_markers(osim, path, om, poses):
    model = osim.Model(str(path))
    state = model.initSystem()
    coordinates, markers = model.getCoordinateSet(), model.getMarkerSet()
    out = []
    for q in poses:
        for name, value in zip(om.coupling.names, q):
            coordinates.get(name).setLocked(state, False)
            coordinates.get(name).setValue(state, float(value), False)
        model.realizePosition(state)
        out.append([markers.get(n).getLocationInGround(state).to_numpy() for n in om.markers.names])
    return np.array(out)


@needs_data
def test_gait_markers_match_opensim():
    osim = _opensim()
    om = load_osim(GAIT)
    poses = _poses(om, 6, seed=13)                       # the default pose and six random ones
    theirs = _opensim_markers(osim, GAIT, om, poses)
    ours = marker_positions(om, poses)
    assert ours.shape == (7, 39, 3)
    assert np.abs(ours - theirs).max() < 1e-9            # metres; seen: ~1e-15


def test_hand_markers_match_opensim(tmp_path):
    osim = _opensim()
    path = _hand(tmp_path)
    om = load_osim(path)
    poses = _poses(om, 6, seed=14)
    assert np.abs(marker_positions(om, poses) - _opensim_markers(osim, path, om, poses)).max() < 1e-9


@needs_data
def test_reference_ik_result_reproduces_the_measured_markers():
    """The upstream IK result (degrees for rotations) puts our model's markers on the synthetic
    .trc markers: RMS 0.03 mm, worst 0.13 mm (the files' rounding), far under a centimetre."""
    om = load_osim(GAIT)
    mot = read_storage(DATA / "std_subject01_walk1_ik.mot")
    assert mot.degrees                                   # SIMM header, .mot: degrees, as OpenSim reads it
    rotational = [n for n, r in zip(om.coupling.names, om.coupling.rotational) if r]
    q = mot.in_radians(rotational).columns(om.coupling.names)
    np.testing.assert_array_equal(om.coordinates_from(mot), q)
    trc = read_trc(DATA / "subject01_synthetic_marker_data.trc")
    np.testing.assert_allclose(trc.time, mot.time, rtol=0, atol=1e-12)
    error = np.linalg.norm(marker_positions(om, q, trc.names) - trc.positions, axis=-1)   # (73, 31)
    rms = float(np.sqrt(np.mean(error ** 2)))
    print(f"reference IK vs .trc: RMS {rms * 1e3:.3f} mm, max {error.max() * 1e3:.3f} mm")
    assert rms < 1e-4 and error.max() < 5e-4
    # Read as radians instead, the same file would miss by decimetres: the unit matters.
    wrong = np.linalg.norm(marker_positions(om, mot.columns(om.coupling.names), trc.names) - trc.positions, axis=-1)
    assert np.sqrt(np.mean(wrong ** 2)) > 0.1
    np.testing.assert_array_equal(om.coordinates_from(mot, degrees=False), mot.columns(om.coupling.names))


def test_coordinates_from_a_storage_fill_missing_columns(tmp_path):
    from solver.opensim import write_storage
    om = load_osim(_hand(tmp_path))
    write_storage(tmp_path / "q.mot", ["time", "qc", "qb"], [[0.0, 90.0, 0.5], [0.1, -45.0, 0.25]], in_degrees=True)
    mot = read_storage(tmp_path / "q.mot")
    q = om.coordinates_from(mot)
    # qa has no column: its default 0.1; qc is rotational: degrees -> radians; qb is coupled: as is
    np.testing.assert_allclose(q, [[0.1, 0.5, np.pi / 2], [0.1, 0.25, -np.pi / 4]], rtol=1e-15)
    with pytest.raises(KeyError, match="'qa'"):
        om.coordinates_from(mot, missing="error")

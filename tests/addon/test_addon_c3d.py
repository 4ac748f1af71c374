"""The OpenSim panel imports a .c3d marker trial as it imports a .trc (issue 22), in real Blender
with the extension installed from the built zip, whose bundled `c3d` wheel Blender installs: the
gait2354 trial written as a C3D file (with gaps) and the same trial as a .trc give the same keys,
the same frames and the same marker IK solution; the keys are the trial's positions."""

import warnings

import numpy as np
import pytest

from solver.opensim import read_trc, read_trial, write_trc
from tests.opensim_reference import DATA, GAIT, needs_data
from tools.blender_session import call_in_blender

c3d = pytest.importorskip("c3d", reason="the c3d package writes the test's .c3d file")
pytestmark = [pytest.mark.blender, needs_data]

GAPS = {"R.Heel": (20, 29), "Sternum": (0, 4)}            # marker: first and last missing sample


def write_gait_c3d(path):
    gait = read_trc(DATA / "subject01_synthetic_marker_data.trc")
    points = np.zeros((gait.n_frames, gait.n_markers, 5), np.float32)
    points[..., :3] = gait.positions * 1000
    for name, (first, last) in GAPS.items():
        points[first:last + 1, gait.index(name), 3] = -1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        writer = c3d.Writer(point_rate=60.0, point_units="mm")
        writer.set_point_labels(gait.names)
        writer.set_start_frame(25)
        writer.add_frames([(p, np.zeros((0, 0))) for p in points])
        with open(path, "wb") as fh:
            writer.write(fh)


def test_a_c3d_trial_imports_and_solves_as_the_same_trc(extension_zip, tmp_path):
    write_gait_c3d(tmp_path / "walk.c3d")
    trial = read_trial(tmp_path / "walk.c3d")
    write_trc(tmp_path / "walk.trc", trial, units="m", fmt="%.17g")
    r = call_in_blender("c3d_import:c3d_and_trc", extension_zip=extension_zip, osim=str(GAIT),
                        c3d_file=str(tmp_path / "walk.c3d"), trc_file=str(tmp_path / "walk.trc"))
    assert len(r["wheel"]) == 1, "Blender did not install the extension's c3d wheel"
    a, b = r["c3d"], r["trc"]
    assert a["names"] == b["names"] == trial.names and a["rate"] == b["rate"] == 60.0
    assert a["frames"] == b["frames"] == list(range(25, 98)) and a["range"] == [25, 97]
    assert np.array_equal(a["time"], trial.time)
    assert a["markers"] == b["markers"]
    for m, name in enumerate(trial.names):
        keyed = a["markers"][name]
        present = ~np.isnan(trial.points[:, m, 0])
        assert keyed["frames"] == [25.0 + i for i in np.flatnonzero(present)]
        assert np.allclose(np.array(keyed["values"]).T, trial.points[present, m], atol=1e-6)   # lab frame, metres
        if name in GAPS:
            first, last = GAPS[name]
            hidden = dict(map(tuple, keyed["hidden"]))
            assert hidden[25.0 + first] == 1.0 and hidden.get(26.0 + last) == 0.0
    # The same keys solved twice: numpy's vector loops may round a sum differently with an array's
    # alignment in memory, and a frame may then stop one Gauss-Newton step apart: within the
    # solver's accuracy (1e-5, the panel's default; measured up to 4e-10).
    assert np.max(np.abs(np.array(a["q"]) - np.array(b["q"]))) <= 1e-5

"""Marker IK on OpenSim's thoracoscapular shoulder model: ours against OpenSim's InverseKinematicsTool.

The model (../shared/data/opensim_constraints: a ScapulothoracicJoint, a PointConstraint, 17
coordinates, 21 markers) moves every free coordinate on a sine (0.25 rad, 1.5 Hz, random phases,
seed 7) for 24 frames at 50 Hz; OpenSim assembles each frame onto the constraint and its
forward kinematics gives the markers ('clean'); 'noisy' adds 2 mm of Gaussian noise (seed 3).
Both tools solve at accuracy 1e-7 with every marker at weight 1, the constraint held exactly.

Columns: time per frame of OpenSim's tool (its run(), file writing included) and of our
MarkerIK.solve; the largest coordinate difference between the two answers (degrees, or mm for
translations, over all frames and coordinates) and of ours from the motion; the largest
constraint distance of each answer; the mean marker RMS of both.

    python -m bench.opensim_scapula [--quick]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from solver.opensim import IKMarkerTask, IKTaskSet, MarkerIK, load_osim, read_storage, write_trc
from tests.opensim_reference import assembled_motion

from .common import best_time

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "opensim_constraints"
MODEL = DATA / "ThoracoscapularShoulderModel.osim"
FRAMES, RATE = 24, 50.0
CASES = {"clean": 0.0, "noisy": 0.002}
COLUMNS = [("case", "case", "{}"), ("frames", "frames", "{}"),
           ("opensim_ms", "OpenSim tool ms/frame", "{:.2f}"), ("ours_ms", "ours ms/frame", "{:.2f}"),
           ("speed", "OpenSim / ours", "{:.2f}"),
           ("to_opensim", "worst diff to OpenSim deg or mm", "{:.4f}"),
           ("to_motion", "ours to motion deg or mm", "{:.2g}"),
           ("gap_ours", "AC gap ours m", "{:.1e}"), ("gap_opensim", "AC gap OpenSim m", "{:.1e}"),
           ("rms", "marker RMS ours / OpenSim mm", "{}")]


def _opensim():
    import opensim as osim
    osim.Logger.removeFileSink()
    osim.Logger.setLevelString("error")
    return osim


def motion(osim, om, noise: float):
    """(MarkerData, true coordinates (F, n)): the module docstring's motion, assembled by OpenSim."""
    return assembled_motion(osim, MODEL, om.coupling, FRAMES, RATE, noise)


def _opensim_tool(osim, trc: Path, names, end: float, out: Path):
    model = osim.Model(str(MODEL))
    model.initSystem()
    tool = osim.InverseKinematicsTool()
    tool.setModel(model)
    tool.setMarkerDataFileName(str(trc))
    for name in names:
        task = osim.IKMarkerTask()
        task.setName(name)
        task.setApply(True)
        task.setWeight(1.0)
        tool.getIKTaskSet().cloneAndAppend(task)
    tool.set_accuracy(1e-7)
    tool.setStartTime(0.0)
    tool.setEndTime(end)
    tool.setResultsDir(str(out.parent))
    tool.setOutputMotionFileName(str(out))
    started = time.perf_counter()
    assert tool.run()
    return time.perf_counter() - started, None


def run_case(osim, folder: Path, case: str, repeats: int) -> dict:
    om = load_osim(MODEL)
    data, truth = motion(osim, om, CASES[case])
    trc = folder / f"{case}.trc"
    write_trc(trc, data, units="m", fmt="%.12f")
    out = folder / f"{case}_opensim.mot"
    opensim_s, _ = best_time(lambda: _opensim_tool(osim, trc, data.names, float(data.time[-1]), out), repeats)
    theirs_q = om.coordinates_from(read_storage(out))
    tasks = IKTaskSet(marker_tasks=[IKMarkerTask(name, True, 1.0) for name in data.names])

    def ours_run():
        started = time.perf_counter()
        result = MarkerIK(om, data, tasks).solve(accuracy=1e-7)
        return time.perf_counter() - started, result

    ours_s, ours = best_time(ours_run, repeats)
    scale = np.where(om.coupling.rotational, 180.0 / np.pi, 1e3)
    theirs = MarkerIK(om, data, tasks).report(theirs_q)
    return {"case": case, "frames": FRAMES, "opensim_ms": 1e3 * opensim_s / FRAMES, "ours_ms": 1e3 * ours_s / FRAMES,
            "speed": opensim_s / ours_s, "to_opensim": float(np.max(np.abs(ours.q - theirs_q) * scale)),
            "to_motion": float(np.max(np.abs(ours.q - truth) * scale)),
            "gap_ours": float(np.max(ours.constraint_errors)), "gap_opensim": float(np.max(theirs.constraint_errors)),
            "rms": f"{1e3 * np.mean(ours.marker_error_rms):.4f} / {1e3 * np.mean(theirs.marker_error_rms):.4f}",
            "converged": int(np.sum(ours.converged))}


def run(quick: bool = False):
    """Both cases as a bench.common Table (for `python -m bench`)."""
    from .common import Column, Table

    osim = _opensim()
    repeats = 2 if quick else 5
    with tempfile.TemporaryDirectory(prefix="bench_scapula_") as tmp:
        rows = [run_case(osim, Path(tmp), case, repeats) for case in CASES]
    columns = [Column(key, header, fmt, text=(key in ("case", "rms"))) for key, header, fmt in COLUMNS]
    return Table("opensim_scapula", "Marker IK on the thoracoscapular shoulder model: OpenSim's tool vs ours",
                 __doc__.split("\n\n")[1].replace("\n", " ") + f" Best of {repeats} runs; ratios above 1: ours faster.",
                 columns, rows)


def draw(table, path: Path) -> None:
    from .common import plot

    series = {}
    for row in table.rows:
        series[f"{row['case']}: OpenSim tool"] = row["opensim_ms"]
        series[f"{row['case']}: ours"] = row["ours_ms"]
    plot(path, table.title, "ms per frame", series, log=False)


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv[1:]).markdown())

"""Scale tool: OpenSim's ScaleTool (the `opensim` package) and ours on OpenSim's Scale regression setup
(gait2354, subject01: five measurements, four manual scales, mass 72.6 kg, marker placement on the
static trial's 1-2 s), in the same run.

Timed per run of the whole setup, best of the repeats (interleaved: OpenSim, then ours):

    opensim tool     ScaleTool(setup).run(): generic model and marker set, model scaler, marker
                     placer, the scaled model, scale set, placed model and static motion written
    ours tool        solver.opensim.run_scale_setup: the same setup, the same files written

and compared: the largest difference of the scale factors, and of the placed markers (mm) between
the two tools' placed models (OpenSim's placer stops where its static pose's objective is flat;
the objective ratio ours / OpenSim's at the two static poses is below 1 where ours is smaller).

    python -m bench.opensim_scale [--quick]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from solver.opensim import MarkerData, MarkerIK, load_osim, read_storage, read_trial
from solver.opensim.marker_placer import averaged_frames
from solver.opensim.scale_setup import read_scale_set
from solver.opensim.scale_tool import run_scale_setup

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "opensim_scale"
FILES = ("subject01_Setup_Scale.xml", "gait2354_simbody.osim", "gait2354_Scale_MarkerSet.xml", "subject01_static.trc")
COLUMNS = [("case", "case", "{}"), ("opensim_ms", "OpenSim tool ms", "{:.1f}"), ("ours_ms", "ours tool ms", "{:.1f}"),
           ("ratio", "OpenSim / ours", "{:.2f}"), ("factor_diff", "largest factor diff", "{:.1e}"),
           ("marker_mm", "largest placed-marker diff mm", "{:.3f}"),
           ("objective_ratio", "static-pose objective ours/OpenSim", "{:.6f}")]


def _factors(path) -> dict:
    out = {}
    for s in read_scale_set(path):
        out.setdefault(s.segment, s.factors)
    return out


def run(quick: bool = False, verbose: bool = True) -> dict:
    """Both tools on the regression setup; returns {"rows": [...], "repeats": n, "opensim": version}."""
    from .opensim_ik import _cwd, _opensim, _quiet_stdout

    osim = _opensim()
    repeats = 2 if quick else 7
    with tempfile.TemporaryDirectory(prefix="bench_opensim_scale_") as tmp:
        theirs_dir, ours_dir = Path(tmp) / "opensim", Path(tmp) / "ours"
        for folder in (theirs_dir, ours_dir):
            folder.mkdir()
            for name in FILES:
                shutil.copyfile(DATA / name, folder / name)
        opensim_s, ours_s = [], []
        for _ in range(repeats):
            with _cwd(theirs_dir), _quiet_stdout():
                start = time.perf_counter()
                ok = osim.ScaleTool("subject01_Setup_Scale.xml").run()
                opensim_s.append(time.perf_counter() - start)
            if not ok:
                raise RuntimeError("OpenSim's ScaleTool failed on the regression setup")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                result = run_scale_setup(ours_dir / "subject01_Setup_Scale.xml")
                ours_s.append(time.perf_counter() - start)
        ours_f, theirs_f = (_factors(d / "subject01_scaleSet_applied.xml") for d in (ours_dir, theirs_dir))
        a, b = (load_osim(d / "subject01_simbody.osim").source for d in (ours_dir, theirs_dir))
        la, lb = ({m.name: m.location for m in x.markers} for x in (a, b))
        motion = read_storage(theirs_dir / "subject01_static_output.mot")
        names = result.placement.coordinate_names
        pose = np.array([next(motion.column(k)[0] for k in motion.labels if k.endswith(f"/{n}/value")) for n in names])
        placer = result.setup.marker_placer
        trial = read_trial(placer.marker_file)
        t, ik_frame, _ = averaged_frames(trial, *placer.time_range)
        problem = MarkerIK(result.scaled.om(), MarkerData(list(trial.names), np.array([t]), ik_frame[None],
                                                          np.array([1]), trial.data_rate, trial.camera_rate),
                           placer.tasks)
        objective = problem.report(result.placement.q[None]).objective[0] / problem.report(pose[None]).objective[0]
    row = {"case": "gait2354 subject01", "opensim_ms": 1e3 * min(opensim_s), "ours_ms": 1e3 * min(ours_s),
           "ratio": min(opensim_s) / min(ours_s),
           "factor_diff": max(float(np.max(np.abs(ours_f[k] - theirs_f[k]))) for k in theirs_f),
           "marker_mm": 1e3 * max(float(np.linalg.norm(la[n] - lb[n])) for n in lb),
           "objective_ratio": float(objective)}
    out = {"rows": [row], "repeats": repeats, "opensim": osim.GetVersion()}
    if verbose:
        print(f"Scale tool, OpenSim's ScaleTool vs ours (best of {repeats}; ratio above 1: ours faster; OpenSim's "
              "scale set file prints 6 digits)\n")
        print("| " + " | ".join(h for _, h, _ in COLUMNS) + " |")
        print("|" + "|".join("---:" for _ in COLUMNS) + "|")
        print("| " + " | ".join(fmt.format(row[k]) for k, _, fmt in COLUMNS) + " |")
    return out


def table(quick: bool = False):
    """The same as a bench.common Table, for `python -m bench`."""
    from .common import Column, Table

    result = run(quick, verbose=False)
    columns = [Column(key, header, fmt, text=(key == "case")) for key, header, fmt in COLUMNS]
    return Table("opensim_scale", "Scale tool: OpenSim's ScaleTool vs ours",
                 __doc__.split("\n\n")[1].replace("\n", " ") + f" Best of {result['repeats']} runs; ratio above 1: "
                 "ours faster; OpenSim's scale set file prints 6 significant digits.", columns, result["rows"])


def draw(table, path: Path) -> None:
    from .common import plot

    row = table.rows[0]
    plot(path, table.title, "ms per run", {"OpenSim ScaleTool": row["opensim_ms"], "ours": row["ours_ms"]}, log=False)


if __name__ == "__main__":
    run(quick="--quick" in sys.argv[1:])

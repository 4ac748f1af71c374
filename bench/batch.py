"""Batches of marker IK trials: trials per second of `python -m solver batch ik` on a LocalCluster of
1 and 2 workers, against the same trials solved one by one in one process (run_ik_setup on each
trial's setup, as `python -m solver ik` does) and against OpenSim's InverseKinematicsTool run over
the same setups one by one (the `opensim` package; its row is left out where it is not installed).

Trials: the gait2354 trial (73 frames, 31 markers) with 5 mm of noise drawn anew for each trial,
as .trc files; the template is the trial's own setup. Batch times are wall times of the whole run
as a user sees them, cluster start and stop included (their cost is the 'start' column: the
time to start and stop the cluster with no trial).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from solver.opensim import read_trc, run_ik_setup, write_trc

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "opensim_gait2354"
SETUP = DATA / "subject01_Setup_InverseKinematics.xml"
COLUMNS = [("runner", "runner", "{}"), ("workers", "workers", "{}"), ("trials", "trials", "{}"),
           ("seconds", "wall s", "{:.2f}"), ("start", "start s", "{:.2f}"), ("per_second", "trials / s", "{:.2f}"),
           ("speedup", "vs one by one", "{:.2f}x")]


def make_trials(folder: Path, n: int) -> list:
    gait = read_trc(DATA / "subject01_synthetic_marker_data.trc")
    rng = np.random.default_rng(22)
    paths = []
    for i in range(n):
        gait_i = read_trc(DATA / "subject01_synthetic_marker_data.trc")
        gait_i.positions = gait.positions + rng.normal(0, 5e-3, gait.positions.shape)
        path = folder / f"trial_{i:03d}.trc"
        write_trc(path, gait_i, units="mm")
        paths.append(path)
    return paths


def one_by_one(specs, folder: Path) -> float:
    start = time.perf_counter()
    for spec in specs:
        setup = folder / f"{spec.base}_setup.xml"
        setup.write_text(spec.options["setup_xml"])
        run_ik_setup(setup, folder / "one_by_one")
    return time.perf_counter() - start


def opensim_one_by_one(specs, folder: Path) -> float | None:
    try:
        from .opensim_ik import _cwd, _opensim, _quiet_stdout
        osim = _opensim()
    except ImportError:
        return None
    work = folder / "opensim"
    work.mkdir()
    for spec in specs:
        (work / f"{spec.base}_setup.xml").write_text(spec.options["setup_xml"])
    start = time.perf_counter()
    with _cwd(work), _quiet_stdout():
        for spec in specs:
            if not osim.InverseKinematicsTool(str(work / f"{spec.base}_setup.xml")).run():
                raise RuntimeError(f"OpenSim's tool failed on {spec.name}")
    return time.perf_counter() - start


def cluster_start(workers: int) -> float:
    from solver.batch import local_cluster
    from distributed import Client
    start = time.perf_counter()
    cluster = local_cluster(workers)
    with Client(cluster):
        pass
    cluster.close()
    return time.perf_counter() - start


def run(quick: bool = False) -> list:
    from solver.batch import find_trials, ik_specs, run_batch
    n = 8 if quick else 40
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_batch_") as tmp:
        folder = Path(tmp)
        (folder / "trials").mkdir()
        make_trials(folder / "trials", n)
        specs = ik_specs(SETUP, find_trials("ik", [folder / "trials"]))
        alone = one_by_one(specs, folder)
        rows.append({"runner": "ours, one by one in one process", "workers": 1, "trials": n, "seconds": alone})
        for workers in (1, 2):
            start = cluster_start(workers)
            result = run_batch(specs, folder / f"batch_{workers}", workers=workers, progress=False)
            if result.failed or len(result.solved) != n:
                raise RuntimeError(f"batch on {workers} workers: {result.failed}")
            rows.append({"runner": "python -m solver batch ik (LocalCluster)", "workers": workers, "trials": n,
                         "seconds": result.seconds, "start": start})
        theirs = opensim_one_by_one(specs, folder)
        if theirs is not None:
            rows.append({"runner": "OpenSim InverseKinematicsTool, one by one", "workers": 1, "trials": n,
                         "seconds": theirs})
    for row in rows:
        row["per_second"] = row["trials"] / row["seconds"]
        row["speedup"] = alone / row["seconds"]
    return rows


def table(quick: bool = False):
    from .common import Column, Table
    rows = run(quick)
    columns = [Column(key, header, fmt, text=(key == "runner")) for key, header, fmt in COLUMNS]
    return Table("batch", "Batches of marker IK trials: Dask LocalCluster vs one by one vs OpenSim",
                 " ".join(__doc__.split("\n\n")[:2]).replace("\n", " "), columns, rows)


def draw(table, path: Path) -> None:
    from .common import plot
    plot(path, table.title, "trials per second",
         {f"{r['runner']} ({r['workers']})": r["per_second"] for r in table.rows}, log=False)

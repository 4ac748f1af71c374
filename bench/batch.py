"""Batches of marker IK trials: trials per second of `python -m solver batch ik` on a LocalCluster of
1 and 2 workers, against the same trials solved one by one in one process (run_ik_setup on each
trial's setup, as `python -m solver ik` does) and against OpenSim's InverseKinematicsTool run over
the same setups one by one (the `opensim` package; its row is left out where it is not installed).

Trials: the gait2354 trial (73 frames, 31 markers) with 5 mm of noise drawn anew for each trial,
as .trc files; the template is the trial's own setup. Batch times are wall times of the whole run
as a user sees them, cluster start and stop included (their cost is the 'start' column: the
time to start and stop the cluster with no trial); 'warm cluster' rows run on a cluster already
started (as `--scheduler` does), whose workers have solved one batch. CPU s: processor time of
every process of the run (this one and, for a warm cluster, its workers); 'on free cores' is
what the rates would be with a core per worker: one by one's CPU time over the batch's CPU time
per worker (an estimate, for a machine shared with other work). Rows are interleaved over the
repeats, best of each kept; the machine's load average is printed with the table.
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
           ("speedup", "vs one by one", "{:.2f}x"), ("cpu", "CPU s", "{:.2f}"),
           ("free_speedup", "vs one by one on free cores", "{:.2f}x")]


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


def batch_seconds(specs, out: Path, **options) -> float:
    from solver.batch import run_batch
    result = run_batch(specs, out, progress=False, **options)
    if result.failed or len(result.solved) != len(specs):
        raise RuntimeError(f"batch into {out}: {result.failed}")
    return result.seconds


def warm_batch(specs, out: Path, client) -> tuple:
    """(wall s, CPU s of this process and the workers) of a batch on a running cluster."""
    workers = client.run(time.process_time)
    mine = time.process_time()
    seconds = batch_seconds(specs, out, client=client)
    cpu = time.process_time() - mine + sum(t - workers[w] for w, t in client.run(time.process_time).items())
    return seconds, cpu


def alone_batch(specs, folder: Path) -> tuple:
    mine = time.process_time()
    seconds = one_by_one(specs, folder)
    return seconds, time.process_time() - mine


def run(quick: bool = False) -> list:
    import os
    from distributed import Client
    from solver.batch import find_trials, ik_specs, local_cluster
    n, repeats = (8, 1) if quick else (40, 5)
    best = {}

    def keep(key, seconds):
        best[key] = min(best.get(key, float("inf")), seconds)

    with tempfile.TemporaryDirectory(prefix="bench_batch_") as tmp:
        folder = Path(tmp)
        (folder / "trials").mkdir()
        make_trials(folder / "trials", n)
        specs = ik_specs(SETUP, find_trials("ik", [folder / "trials"]))
        warm = {w: (local_cluster(w),) for w in (1, 2)}
        warm = {w: (c, Client(c)) for w, (c,) in warm.items()}
        for w, (_, client) in warm.items():
            batch_seconds(specs, folder / f"warm_up_{w}", client=client)
        load = os.getloadavg()[0]
        for r in range(repeats):
            seconds, cpu = alone_batch(specs, folder)
            keep("alone", seconds)
            keep("alone_cpu", cpu)
            for w in (1, 2):
                keep(("start", w), cluster_start(w))
                keep(("cold", w), batch_seconds(specs, folder / f"cold_{w}_{r}", workers=w))
                seconds, cpu = warm_batch(specs, folder / f"warm_{w}_{r}", warm[w][1])
                keep(("warm", w), seconds)
                keep(("warm_cpu", w), cpu)
        for cluster, client in warm.values():
            client.close()
            cluster.close()
        load = max(load, os.getloadavg()[0])
        alone = best["alone"]
        rows = [{"runner": "ours, one by one in one process", "workers": 1, "trials": n, "seconds": alone,
                 "cpu": best["alone_cpu"]}]
        for w in (1, 2):
            rows.append({"runner": "python -m solver batch ik (LocalCluster)", "workers": w, "trials": n,
                         "seconds": best[("cold", w)], "start": best[("start", w)]})
        for w in (1, 2):
            rows.append({"runner": "python -m solver batch ik (warm cluster)", "workers": w, "trials": n,
                         "seconds": best[("warm", w)], "cpu": best[("warm_cpu", w)]})
        theirs = opensim_one_by_one(specs, folder)
        if theirs is not None:
            rows.append({"runner": "OpenSim InverseKinematicsTool, one by one", "workers": 1, "trials": n,
                         "seconds": theirs})
    for row in rows:
        row["per_second"] = row["trials"] / row["seconds"]
        row["speedup"] = alone / row["seconds"]
        row["load"] = load
        if "cpu" in row:
            row["free_speedup"] = best["alone_cpu"] / (row["cpu"] / row["workers"])
    return rows


def table(quick: bool = False):
    from .common import Column, Table
    rows = run(quick)
    columns = [Column(key, header, fmt, text=(key == "runner")) for key, header, fmt in COLUMNS]
    note = " ".join(__doc__.split("\n\n")[:2]).replace("\n", " ")
    note += f" Load average (1 min) during the run: up to {rows[0]['load']:.1f} on {os_cpus()} cores."
    return Table("batch", "Batches of marker IK trials: Dask LocalCluster vs one by one vs OpenSim", note, columns, rows)


def os_cpus() -> int:
    import os
    return os.cpu_count() or 1


def draw(table, path: Path) -> None:
    from .common import plot
    plot(path, table.title, "trials per second",
         {f"{r['runner']} ({r['workers']})": r["per_second"] for r in table.rows}, log=False)

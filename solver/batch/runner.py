"""Run a batch of trials on Dask `distributed`.

Where: a LocalCluster by default (one worker process per core, one thread each, BLAS on one
thread: the engine's small factorisations are fastest that way and each process keeps its core),
or an existing cluster's scheduler (`scheduler='tcp://host:8786'`), or a Client given. Workers
must see the trial files, the model, the task set and the output folder at the same paths (a
cluster's shared file system) and import `solver` (installed, or on PYTHONPATH).

A batch of the 'retarget' kind runs on a LocalCluster of threads instead: its work happens in a
Blender process per worker (blender.py), so a worker only waits, and threads start in
milliseconds where processes take a fork server's start; the batch's Blender processes end with it.

Starting warm: the LocalCluster's worker processes are forked from a fork server that has
imported `distributed`, numpy and the solver once (multiprocessing's 'forkserver' method with
those modules preloaded, where the platform has it; Dask's default 'spawn' elsewhere), so a
worker is ready in milliseconds with nothing left to import; each worker then reads a model once
for all its trials (kinds.cached_model).

How: trials are grouped into tasks (groups.py), `kinds.solve_group`, which solves each trial of
its group as `kinds.solve_and_write` does alone: it never raises for a bad trial and writes the
trial's files itself, each through a temporary file renamed into place and the JSON report last,
so an interrupted run leaves whole files only and a resumed run (plan.select) sees exactly what
was finished. The client waits for tasks to finish and reads each finished trial's report from
its JSON file: it never fetches a result from a worker, so a worker lost after finishing a task
costs nothing. A worker that dies takes its running task with it; the scheduler runs it again on
the other workers (Dask's own recovery); a group whose task fails all the same (Dask's
KilledWorker) is run again one trial per task, so a trial that kills workers again and again is
reported failed alone. At the end (also after Ctrl-C) the summary CSV lists every trial of the
batch, from each one's last JSON report.
"""

from __future__ import annotations

import csv
import logging
import multiprocessing
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime import ONE_THREAD_ENV
from .groups import group_specs
from .kinds import Outcome, TrialSpec, report_bytes, solve_group, write_outputs
from .plan import last_report, select
from .progress import Progress

SUMMARY = "batch_summary.csv"
COLUMNS = {
    "ik": ["marker_error_rms_mean", "marker_error_rms_max", "marker_error_max", "worst_marker", "markers"],
    "scale": ["marker_error_rms", "marker_error_max", "worst_marker", "fixed_error_rms", "fixed_error_max",
              "worst_fixed_marker", "moved_by_rms", "moved_by_max", "markers"],
    "fly": ["keypoint_error_mean", "keypoint_error_max", "worst_leg", "worst_keypoint"],
    "retarget": ["converged", "spans", "foot_slide_max", "pin_distance_max", "floor", "floor_penetration_max"],
}


@dataclass
class BatchResult:
    """What a run did: trials solved and failed now ({name: message}), trials skipped as up to
    date (or, with only_failed, as not failed), the summary CSV, wall time, whether it was
    interrupted before the end, workers, and how many trials the batch has."""

    out_dir: Path
    solved: list = field(default_factory=list)
    failed: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    summary: Path | None = None
    seconds: float = 0.0
    interrupted: bool = False
    workers: int = 0
    trials: int = 0


PRELOAD = ("distributed", "numpy", "solver.batch.kinds", "solver.opensim")


def start_fork_server() -> str:
    """Start the fork server with PRELOAD where the platform has one ('forkserver'), else nothing
    ('spawn'); returns the method. The server imports PRELOAD in its own process while this one
    goes on, so calling this early (before planning a batch) hides that time."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    import dask
    from multiprocessing import forkserver
    from distributed.utils import get_mp_context
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        get_mp_context()                                # Dask's own preload, set once per process ...
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(PRELOAD))    # ... and ours instead
    forkserver.ensure_running()
    return "forkserver"


def local_cluster(workers: int | None = None, processes: bool = True):
    """A LocalCluster of `workers` processes (default: one per core), one thread each, BLAS on one
    thread, started warm (module docstring); with `processes` false, of threads in this process."""
    import dask
    from distributed import LocalCluster
    options = dict(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, dashboard_address=":0",
                   scheduler_kwargs={"dashboard": False}, silence_logs=logging.ERROR)
    if not processes:
        return LocalCluster(processes=False, **options)
    with dask.config.set({"distributed.worker.multiprocessing-method": start_fork_server()}):
        return LocalCluster(processes=True, env=dict(ONE_THREAD_ENV), **options)


def lost(spec: TrialSpec, exc: BaseException) -> Outcome:
    """The failed outcome of a trial whose task itself failed (its workers died)."""
    message = f"{type(exc).__name__}: {exc}"
    report = {"trial": spec.name, "kind": spec.kind, "input": spec.input, "status": "failed", "message": message,
              "seconds": None}
    return Outcome(spec.name, "failed", {f"{spec.name}.json": report_bytes(report)}, report, message)


def _outcome(spec: TrialSpec, out_dir: Path, failure: BaseException | None) -> Outcome:
    """A finished trial's outcome from its JSON report, or the failed one of a task that failed."""
    if failure is None:
        report = last_report(spec, out_dir)
        if report is not None:
            return Outcome(spec.name, report.get("status", "failed"), {}, report, report.get("message", ""))
        failure = FileNotFoundError(f"the worker wrote no report into {out_dir}: workers must see the output folder")
    outcome = lost(spec, failure)
    write_outputs(out_dir, outcome, spec)
    return outcome


def write_summary(out_dir: Path, specs, name: str = SUMMARY) -> Path:
    """One row per trial from its last JSON report (status 'not run' where it has none)."""
    kind = specs[0].kind if specs else "ik"
    columns = ["trial", "kind", "status", "frames", *COLUMNS.get(kind, []), "frames_not_converged", "seconds",
               "message", "input"]
    path = out_dir / name
    part = path.with_name(path.name + ".part")
    with open(part, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for spec in specs:
            report = last_report(spec, out_dir) or {"trial": spec.name, "kind": spec.kind, "status": "not run",
                                                    "input": spec.input}
            writer.writerow(["" if report.get(c) is None else report.get(c) for c in columns])
    os.replace(part, path)
    return path


def run_batch(specs, out_dir, *, scheduler: str | None = None, workers: int | None = None, client=None,
              resume: bool = False, only_failed: bool = False, time_limit: float | None = None,
              progress: bool = True, stream=None, on_outcome=None, summary: str = SUMMARY) -> BatchResult:
    """Solve `specs` (plan.ik_specs / fly_specs) into `out_dir` (module docstring). `resume` skips
    trials that are up to date, `only_failed` solves only those whose last report failed;
    `time_limit` (s) stops a trial that runs longer; `on_outcome(outcome)` is called after each
    trial's files are written; `summary` names the summary CSV. Ctrl-C stops the run cleanly
    (result.interrupted)."""
    from distributed import Client, wait
    started = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    specs = list(specs)
    todo, skipped = select(specs, out_dir, resume=resume, only_failed=only_failed)
    result = BatchResult(out_dir, skipped=[s.name for s in skipped], trials=len(specs))
    bar = Progress(len(todo), skipped=len(skipped), stream=stream, enabled=progress)
    cluster = own_client = None
    in_blender = bool(todo) and all(spec.kind == "retarget" for spec in todo)
    futures = []
    try:
        if todo:
            if client is None:
                if scheduler is None:
                    cluster = local_cluster(workers, processes=not in_blender)
                    own_client = client = Client(cluster)
                else:
                    own_client = client = Client(scheduler)
            result.workers = len(client.scheduler_info(n_workers=-1)["workers"])
            run_id = uuid.uuid4().hex[:12]             # keys unique to this run, across clients and runs
            groups = {}

            def submit(group):
                key = f"trials-{run_id}-{len(groups):06d}-{group[0].name}"
                groups[key] = group
                future = client.submit(solve_group, group, str(out_dir.resolve()), time_limit, key=key, pure=False)
                futures.append(future)
                return future

            pending = {submit(group) for group in group_specs(todo, max(result.workers, 1))}
            bar.update(0, 0)
            while pending:
                done, pending = wait(pending, return_when="FIRST_COMPLETED")
                for future in done:
                    group = groups[future.key]
                    if future.status == "error" and len(group) > 1:        # its worker died: each trial alone
                        future.release()
                        pending |= {submit([spec]) for spec in group}
                        continue
                    if future.status not in ("finished", "error"):     # lost again before we looked: wait anew
                        pending.add(future)
                        continue
                    failure = future.exception() if future.status == "error" else None
                    future.release()
                    for spec in group:
                        outcome = _outcome(spec, out_dir, failure)
                        if outcome.status == "done":
                            result.solved.append(spec.name)
                        else:
                            result.failed[spec.name] = outcome.message
                        bar.update(len(result.solved), len(result.failed))
                        if on_outcome is not None:
                            on_outcome(outcome)
    except KeyboardInterrupt:
        result.interrupted = True
        if futures:
            client.cancel(futures)
    finally:
        if own_client is not None:
            own_client.close()
        if cluster is not None:
            cluster.close()
            if in_blender:
                from .blender import close_all
                close_all()
        bar.close()
        result.summary = write_summary(out_dir, specs, summary)
        result.seconds = time.perf_counter() - started
    return result

"""Batches of trials on Dask (issue 22): 40 short trials generated from the gait2354 trial (noise,
shifted times, dropped markers, half of them .c3d, one corrupt) on a LocalCluster of 2 workers,
every output byte for byte the one `python -m solver ik <trial>_setup.xml` writes for that trial
alone; a run stopped halfway and resumed solves only what was missing; a scheduler and two
workers started as separate processes (`dask scheduler`, `dask worker`), one worker killed midway,
every trial still done and equal; the per-trial time limit; the fly kind.

Needs dask `distributed` and `c3d` (requirements.txt): skipped where they are not installed (the
numpy-line venvs). Trials are 8 frames each, so the whole file stays a few seconds plus clusters.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed", reason="Dask distributed runs the batches (not in the engine-only venvs)")
c3d = pytest.importorskip("c3d", reason="half the trials are written as .c3d")

from solver.__main__ import main as solver_main                                          # noqa: E402
from solver.batch import (find_trials, fly_specs, group_specs, ik_specs, output_names, run_batch,  # noqa: E402
                          solve_trial, up_to_date)
from solver.opensim import read_storage, read_trc, run_ik_setup, write_trc             # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
GAIT = SHARED / "opensim_gait2354"
FLY = SHARED / "fly_pose"
SETUP = GAIT / "subject01_Setup_InverseKinematics.xml"
pytestmark = pytest.mark.skipif(not GAIT.is_dir(), reason="shared/data is not beside the repository")

N_TRIALS, FRAMES = 40, 8
CORRUPT = "subject_b/trial_39"


def write_c3d(path, trial):
    points = np.zeros((trial.n_frames, trial.n_markers, 5), np.float32)
    points[..., :3] = np.nan_to_num(trial.positions * 1000)
    points[np.isnan(trial.positions[..., 0]), 3] = -1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)                # "No analog data found in file."
        writer = c3d.Writer(point_rate=float(trial.data_rate), point_units="mm")
        writer.set_point_labels(trial.names)
        writer.set_start_frame(int(trial.frame_numbers[0]))
        writer.add_frames([(p, np.zeros((0, 0))) for p in points])
        with open(path, "wb") as fh:
            writer.write(fh)


def make_trials(folder: Path) -> Path:
    """N_TRIALS trials of FRAMES frames cut from the gait2354 trial, in two sub-folders: every
    fourth with 3 mm noise, with times shifted by whole seconds, with markers dropped (one
    marker throughout, others in some frames), or plain; even ones as .c3d; the last one corrupt."""
    gait = read_trc(GAIT / "subject01_synthetic_marker_data.trc")
    rng = np.random.default_rng(22)
    for i in range(N_TRIALS):
        start = (i * 5) % (gait.n_frames - FRAMES)
        t = gait.between(gait.time[start] - 1e-9, gait.time[start + FRAMES - 1] + 1e-9)
        t.positions = t.positions.copy()
        t.frame_numbers = np.arange(FRAMES) + 1
        t.time = np.round(gait.time[start] + np.arange(FRAMES) / gait.data_rate, 9)
        if i % 4 == 0:
            t.positions += rng.normal(0, 3e-3, t.positions.shape)
        elif i % 4 == 1:
            t.time = t.time + 1 + i // 4
            t.frame_numbers = t.frame_numbers + int(round((1 + i // 4) * gait.data_rate))
        elif i % 4 == 2:
            t.positions[:, i % t.n_markers] = np.nan
            t.positions[rng.integers(0, FRAMES, 3), (i + 5) % t.n_markers] = np.nan
        sub = folder / ("subject_a" if i < N_TRIALS // 2 else "subject_b")
        sub.mkdir(parents=True, exist_ok=True)
        name = sub / f"trial_{i:02d}"
        if i % 2 == 0:
            write_c3d(name.with_suffix(".c3d"), t)
        else:
            write_trc(name.with_suffix(".trc"), t, units="mm")
    corrupt = folder / f"{CORRUPT}.trc"
    corrupt.write_bytes(corrupt.read_bytes()[:700])                 # cut inside the header
    return folder


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    return make_trials(tmp_path_factory.mktemp("trials"))


@pytest.fixture(scope="module")
def specs(trials):
    return ik_specs(SETUP, find_trials("ik", [trials]))


@pytest.fixture(scope="module")
def client():
    from solver.batch import local_cluster
    from distributed import Client
    cluster = local_cluster(2)
    with Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def alone(specs, tmp_path_factory):
    """Each trial solved alone, as `python -m solver ik <trial>_setup.xml` does (in this process,
    the model loaded afresh for each): {trial: {output name: bytes}}."""
    folder = tmp_path_factory.mktemp("alone")
    out = {}
    for spec in specs:
        if spec.name == CORRUPT:
            continue
        setup = folder / f"{spec.base}_setup.xml"
        setup.write_text(spec.options["setup_xml"])
        run = run_ik_setup(setup, folder / spec.base)
        out[spec.name] = {f"{spec.name}.mot": run.files["motion"].read_bytes(),
                          f"{spec.name}_ik_marker_errors.sto": run.files["marker_errors"].read_bytes()}
    return out


def check_equal_to_alone(out_dir: Path, alone: dict):
    for name, files in alone.items():
        for file, data in files.items():
            assert (out_dir / file).read_bytes() == data, f"{file} differs from the trial solved alone"
        report = json.loads((out_dir / f"{name}.json").read_text())
        assert report["status"] == "done" and report["frames"] == FRAMES


def test_forty_trials_on_two_workers_equal_each_trial_alone(specs, alone, client, tmp_path):
    assert len(specs) == N_TRIALS and sum(s.input.endswith(".c3d") for s in specs) == N_TRIALS // 2
    stream = io.StringIO()
    result = run_batch(specs, tmp_path, client=client, stream=stream)
    assert result.workers == 2 and not result.interrupted
    assert sorted(result.solved) == sorted(alone) and list(result.failed) == [CORRUPT]
    corrupt = next(s.input for s in specs if s.name == CORRUPT)
    assert corrupt in result.failed[CORRUPT] and "no frames" in result.failed[CORRUPT]
    check_equal_to_alone(tmp_path, alone)
    assert (tmp_path / f"{CORRUPT}_setup.xml").exists() is False and (tmp_path / f"{CORRUPT}.json").exists()
    # the JSON report is the one the trial alone gives (all but the timings), and matches its .sto
    spec = next(s for s in specs if s.name == "subject_a/trial_02")
    mine = json.loads((tmp_path / "subject_a/trial_02.json").read_text())
    theirs = solve_trial(spec).report
    for key in ("seconds", "solve_seconds"):
        mine.pop(key), theirs.pop(key)
    assert mine == theirs
    sto = read_storage(tmp_path / "subject_a/trial_02_ik_marker_errors.sto")
    assert mine["marker_error_max"] == pytest.approx(sto.column("marker_error_max").max(), rel=1e-9)
    assert mine["marker_error_rms_mean"] == pytest.approx(sto.column("marker_error_RMS").mean(), rel=1e-9)
    # one summary row per trial; the progress line counts done / failed / left
    rows = (tmp_path / "batch_summary.csv").read_text().splitlines()
    assert len(rows) == 1 + N_TRIALS and rows[0].startswith("trial,kind,status,frames,marker_error_rms_mean")
    assert sum(",failed," in r for r in rows) == 1
    assert "40/40: 39 done, 1 failed, 0 left" in stream.getvalue()


def test_a_run_stopped_halfway_resumes_with_what_was_missing(specs, alone, client, tmp_path):
    seen = []

    def stop(outcome):
        seen.append(outcome.name)
        if len(seen) == 15:
            raise KeyboardInterrupt

    first = run_batch(specs, tmp_path, client=client, progress=False, on_outcome=stop)
    assert first.interrupted and len(first.solved) + len(first.failed) == 15
    time.sleep(2.0)                       # trials already running when it stopped finish and write their files
    finished = {s.name: (tmp_path / f"{s.name}.mot").stat().st_mtime_ns for s in specs if up_to_date(s, tmp_path)}
    assert set(first.solved) <= set(finished) and len(finished) < N_TRIALS - 5
    rows = (tmp_path / "batch_summary.csv").read_text()
    in_flight = 2 * max(len(g) for g in group_specs(specs, 2))               # a group on each of 2 workers
    assert rows.count(",not run,") >= N_TRIALS - len(finished) - 1 - in_flight          # and the corrupt one
    second = run_batch(specs, tmp_path, client=client, progress=False, resume=True)
    assert sorted(second.skipped) == sorted(finished)
    assert sorted(second.solved + list(second.failed)) == sorted(set(s.name for s in specs) - set(finished))
    assert {n: (tmp_path / f"{n}.mot").stat().st_mtime_ns for n in finished} == finished
    check_equal_to_alone(tmp_path, alone)
    # an input changed: only its trial is out of date; the corrupt one fails again until fixed
    changed = next(s for s in specs if s.name == "subject_a/trial_03")
    os.utime(changed.input)
    third = run_batch(specs, tmp_path, client=client, progress=False, resume=True)
    assert third.solved == ["subject_a/trial_03"] and list(third.failed) == [CORRUPT]
    only = run_batch(specs, tmp_path, client=client, progress=False, only_failed=True)
    assert only.solved == [] and list(only.failed) == [CORRUPT] and len(only.skipped) == N_TRIALS - 1


@pytest.fixture(scope="module")
def long_specs(tmp_path_factory):
    """Two trials of the gait2354 trial played 20 times over (1460 frames): solves of seconds."""
    folder = tmp_path_factory.mktemp("long")
    gait = read_trc(GAIT / "subject01_synthetic_marker_data.trc")
    F = gait.n_frames
    gait.positions = np.tile(gait.positions, (20, 1, 1))
    gait.frame_numbers = np.arange(20 * F) + 1
    gait.time = np.round(np.arange(20 * F) / gait.data_rate, 9)
    for name in ("long_a", "long_b"):
        write_trc(folder / f"{name}.trc", gait, units="mm")
    return ik_specs(SETUP, find_trials("ik", [folder]))


def test_the_time_limit_stops_a_trial_in_a_worker_thread(long_specs, specs):
    spec = long_specs[0]
    found = {}
    thread = threading.Thread(target=lambda: found.update(outcome=solve_trial(spec, seconds_limit=0.05)))
    started = time.perf_counter()
    thread.start()
    thread.join(60)
    outcome = found["outcome"]
    assert outcome.status == "failed" and outcome.message == "stopped at the time limit of 0.05 s"
    assert list(outcome.files) == ["long_a.json"] and time.perf_counter() - started < 5
    short = next(s for s in specs if s.name == "subject_a/trial_01")
    assert solve_trial(short, seconds_limit=60).status == "done"


def test_a_batch_time_limit_fails_the_trials_that_exceed_it(long_specs, client, tmp_path):
    result = run_batch(long_specs, tmp_path, client=client, progress=False, time_limit=0.05)
    reports = [json.loads((tmp_path / f"{s.name}.json").read_text()) for s in long_specs]
    assert result.solved == [] and set(result.failed.values()) == {"stopped at the time limit of 0.05 s"}, reports
    assert not (tmp_path / "long_a.mot").exists()
    assert "stopped at the time limit" in (tmp_path / "batch_summary.csv").read_text()


def test_the_fly_kind_solves_every_keypoint_file(client, tmp_path):
    if not FLY.is_dir():
        pytest.skip("shared/data/fly_pose is not beside the repository")
    from solver.fly import ANGLES, load_legs, solve_legs
    specs = fly_specs(find_trials("fly", [FLY]))
    assert [s.name for s in specs] == ["pose3d_aligned", "pose_result__210902_PR_Fly1_aligned"]
    result = run_batch(specs, tmp_path, client=client, progress=False)
    assert sorted(result.solved) == sorted(s.name for s in specs)
    for spec in specs:
        assert solve_trial(spec).files[f"{spec.name}_angles.mot"] == (tmp_path / f"{spec.name}_angles.mot").read_bytes()
        angles = read_storage(tmp_path / f"{spec.name}_angles.mot")
        direct = solve_legs(load_legs(spec.input))
        for leg, solution in direct.items():
            for k, angle in enumerate(ANGLES):
                assert np.allclose(angles.column(f"{leg}_{angle}"), np.degrees(solution.angles[:, k]), atol=1e-9)
        report = json.loads((tmp_path / f"{spec.name}.json").read_text())
        assert report["frames"] == angles.n_rows and report["frames_not_converged"] == 0
        assert report["keypoint_error_max"] == pytest.approx(max(s.position_error.max() for s in direct.values()))


def _start(args, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "dask", *args], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)


def _stop(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(10)


def test_a_scheduler_and_two_worker_processes_one_killed_midway(specs, alone, trials, tmp_path, capsys):
    address_file = tmp_path / "scheduler.json"
    scheduler = _start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", str(address_file)])
    workers = []
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(address_file.read_text())["address"]
        worker_args = ["worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                       "--host", "127.0.0.1"]
        workers = [_start(worker_args), _start(worker_args)]
        from distributed import Client
        with Client(address, timeout=60) as c:
            c.wait_for_workers(2, timeout=60)
        out = tmp_path / "out"
        killed = {}

        def kill_one_midway():
            while time.monotonic() < deadline + 60:
                if len(list(out.rglob("*.json"))) >= 10:
                    _stop(workers[1])
                    killed["after"] = len(list(out.rglob("*.json")))
                    return
                time.sleep(0.002)

        watcher = threading.Thread(target=kill_one_midway, daemon=True)
        watcher.start()
        ran = {}
        batch = threading.Thread(daemon=True, target=lambda: ran.update(status=solver_main(
            ["batch", "ik", str(SETUP), str(trials), "-o", str(out), "--scheduler", address, "-q"])))
        batch.start()
        batch.join(180)                                   # a hang fails here instead of stalling the suite
        assert not batch.is_alive(), "the batch did not finish after a worker was killed"
        status = ran["status"]
        watcher.join(5)
        printed = capsys.readouterr().out
        assert status == 1 and "40 trials: 39 solved, 1 failed, 0 skipped" in printed, printed
        assert f"failed {CORRUPT}:" in printed
        assert 10 <= killed["after"] < N_TRIALS, killed
        assert workers[1].poll() is not None and workers[0].poll() is None
        check_equal_to_alone(out, alone)
        assert all((out / n).exists() for s in specs if s.name != CORRUPT for n in output_names(s))
    finally:
        for p in workers + [scheduler]:
            _stop(p)

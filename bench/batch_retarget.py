"""Batches of BVH retargets: `python -m solver batch retarget` of 8 clips onto Rigify's human
metarig on a LocalCluster of 1 and 2 workers, against the same clips one by one in one Blender
process (as each batch worker runs its clips: the add-on registered once, the rig file opened
anew per clip) and one by one with a new Blender process per clip (Blender's start and the
add-on's registration paid per clip).

Clips: 300-frame pieces (2.5 s at 120 fps) of both CMU clips (../shared/data/bvh), each with its
file's first frame (the T-pose the retarget calibrates on). Wall times of the whole run as a
user sees it (cluster start and stop included); best of the repeats, rows interleaved. The
machine's load average is printed with the table: on a shared machine the ratios say more than
the times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CMU_UNIT = 0.056444
PIECES = [("cmu_02_01_walk.bvh", 20)] + [("cmu_131_01_start_walk_stop.bvh", s) for s in range(0, 700, 100)]
LENGTH = 300          # 2.5 s at 120 fps: pieces of the clips as long as the walk, not one-second slivers
COLUMNS = [("runner", "runner", "{}"), ("workers", "workers", "{}"), ("clips", "clips", "{}"),
           ("seconds", "wall s", "{:.2f}"), ("per_clip", "s / clip", "{:.2f}"),
           ("speedup", "vs one by one", "{:.2f}x"), ("vs_fresh", "vs a process per clip", "{:.2f}x")]

def make_clips(folder: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.apps.retarget_bvh import DATA, read_bvh, write_bvh
    for i, (name, start) in enumerate(PIECES):
        bvh = read_bvh(DATA / name)
        frames = np.concatenate([bvh["frames"][:1], bvh["frames"][start:start + LENGTH]])
        write_bvh(dict(bvh, frames=frames), folder / f"clip_{i}.bvh")


def make_rig(python: str, path: Path) -> None:
    code = ("import bpy, os, sys\n"
            "bpy.ops.wm.read_factory_settings(use_empty=True)\n"
            "bpy.ops.preferences.addon_enable(module='rigify')\n"
            "bpy.ops.object.armature_human_metarig_add()\n"
            "bpy.ops.object.mode_set(mode='OBJECT')\n"
            "bpy.ops.wm.save_as_mainfile(filepath=sys.argv[1])\n"
            "sys.stdout.flush(); os._exit(0)\n")        # Blender 4.2 crashes on exit once Rigify was enabled
    subprocess.run([python, "-c", code, str(path)], check=True, capture_output=True, cwd=path.parent)


def one_by_one(specs, fresh: bool) -> float:
    """Wall time of the clips retargeted in turn by this process's Blender (fresh: a new one per clip)."""
    from solver.batch.blender import close_all, retarget_clip
    start = time.perf_counter()
    for spec in specs:
        retarget_clip(spec.options["python"], spec.options["rig_file"], spec.input, spec.options)
        if fresh:
            close_all()
    close_all()
    return time.perf_counter() - start


def batch_seconds(specs, out: Path, workers: int) -> float:
    from solver.batch import run_batch
    result = run_batch(specs, out, workers=workers, progress=False)
    if result.failed or len(result.solved) != len(specs):
        raise RuntimeError(f"batch into {out}: {result.failed}")
    return result.seconds


def run(quick: bool = False):
    from solver.batch import find_trials, retarget_specs
    from solver.batch.blender import blender_python
    from .common import Column, Table
    python = blender_python(os.environ.get("ITASC_TEST_PYTHON"))
    repeats = 1 if quick else 3
    best = {}
    with tempfile.TemporaryDirectory(prefix="bench_batch_retarget_") as tmp:
        tmp = Path(tmp)
        (tmp / "clips").mkdir()
        make_clips(tmp / "clips")
        make_rig(python, tmp / "metarig.blend")
        trials = find_trials("retarget", [tmp / "clips"])
        specs = retarget_specs(tmp / "metarig.blend", trials, python=python, scale=CMU_UNIT)
        load = os.getloadavg()[0]
        for r in range(repeats):
            for key, measure in (("fresh", lambda: one_by_one(specs, True)),
                                 ("alone", lambda: one_by_one(specs, False)),
                                 (1, lambda: batch_seconds(specs, tmp / f"batch_1_{r}", 1)),
                                 (2, lambda: batch_seconds(specs, tmp / f"batch_2_{r}", 2))):
                best[key] = min(best.get(key, float("inf")), measure())
            load = max(load, os.getloadavg()[0])
        frames = [json.loads(p.read_text())["frames"] for p in (tmp / "batch_2_0").glob("*.json")]
    n = len(specs)
    rows = [{"runner": "one by one, a new Blender process per clip", "workers": 1, "seconds": best["fresh"]},
            {"runner": "one by one in one Blender process", "workers": 1, "seconds": best["alone"]},
            *({"runner": "python -m solver batch retarget (LocalCluster)", "workers": w, "seconds": best[w]}
              for w in (1, 2))]
    for row in rows:
        row.update(clips=n, per_clip=row["seconds"] / n, speedup=best["alone"] / row["seconds"],
                   vs_fresh=best["fresh"] / row["seconds"], load=load)
    note = " ".join(__doc__.split("\n\n")[:2]).replace("\n", " ")
    note += (f" {n} clips of {min(frames)}-{max(frames)} frames; Blender {_version(python)}; load average (1 min) "
             f"during the run: up to {load:.1f} on {os.cpu_count() or 1} cores.")
    columns = [Column(key, header, fmt, text=(key == "runner")) for key, header, fmt in COLUMNS]
    return Table("batch_retarget", "Batches of BVH retargets: Dask LocalCluster vs one by one", note, columns, rows)


def _version(python: str) -> str:
    code = "import bpy, os, sys; print(bpy.app.version_string); sys.stdout.flush(); os._exit(0)"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else "?"


def draw(table, path: Path) -> None:
    from .common import plot
    plot(path, table.title, "seconds per clip",
         {f"{r['runner']} ({r['workers']})": r["per_clip"] for r in table.rows}, log=False)

"""Run the side-by-side benchmarks: print the tables, write JSON and one PNG per table.

    python -m bench                      # everything (Blender's rows need bpy): a few minutes
    python -m bench --quick              # a short run with fewer frames (results in bench/results/quick/)
    python -m bench --only chains blender --markdown BENCHMARKS.md

Tables: chains (ours vs IKPy), blender (ours vs Blender's iTaSC / Standard IK), scaling_frames
and scaling_bones (our time per frame against batch size and chain length), opensim_ik (marker IK,
ours vs OpenSim's InverseKinematicsTool on its gait2354 trial; needs the opensim package and
../shared/data/opensim_gait2354), opensim_scapula (the same on OpenSim's thoracoscapular shoulder model, a
motion OpenSim makes), opensim_scale (OpenSim's ScaleTool vs ours on its Scale regression setup, ../shared/data/opensim_scale), fly_ikpy (sequential IK on fly legs, ours vs IKPy), bake (end-to-end bake to keys
of the chains and Rigify's metarig, our add-on vs Blender's nla.bake under its iTaSC / Standard IK), rigify_rigs
(a bake on the rig Rigify generates from each of its metarigs against Blender's evaluation of the frames), long_bake (peak memory and time of a Rigify bake
against frames: 1,000 to 20,000), random_poses (6-D pose IK of the 7-DOF Franka Panda on random
reachable poses: ours with random restarts, IKPy, TRAC-IK's published figures), random_poses_iterations
(the same poses' solve rate against iterations allowed per pose, one start at a time), live (live preview per
frame in animation and in simulation mode on the 6-bone chain, Rigify's metarig and the generated rig, ours
vs Blender's iTaSC in the same mode or the generated rig's Standard IK), batch (marker IK trials per second:
`python -m solver batch` on 1 and 2 Dask workers vs one by one vs OpenSim's tool one by one), batch_retarget
(8 BVH clips retargeted onto Rigify's metarig: `python -m solver batch retarget` on 1 and 2 workers vs one by one),
markerless (Pose2Sim's keypoints onto a rig, ours vs OpenSim's IK on Pose2Sim's model). --markdown rewrites
the part of that file between the bench markers: each table run, with the command, date, commit and
machine that measured it (tables it did not run stay as they were).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

from solver import keep_freed_memory

from . import bake, batch, batch_retarget, blender, chains, fly_vs_ikpy, live, long_bake, markerless, opensim_ik, opensim_scale
from . import opensim_scapula
from . import random_poses, rigify_rigs, scaling
from . import retarget as retarget_bench
from .common import RESULTS

# name: (run(quick) -> Table, draw(table, path))
BENCHMARKS = {
    "chains": (chains.run, chains.draw),
    "blender": (blender.run, blender.draw),
    "scaling_frames": (scaling.run_frames, scaling.draw_frames),
    "scaling_bones": (scaling.run_bones, scaling.draw_bones),
    "opensim_ik": (opensim_ik.table, opensim_ik.draw),
    "opensim_scapula": (opensim_scapula.run, opensim_scapula.draw),
    "opensim_scale": (opensim_scale.table, opensim_scale.draw),
    "fly_ikpy": (fly_vs_ikpy.table, fly_vs_ikpy.draw),
    "bake": (bake.run, bake.draw),
    "rigify_rigs": (rigify_rigs.run, rigify_rigs.draw),
    "long_bake": (long_bake.run, long_bake.draw),
    "random_poses": (random_poses.run, random_poses.draw),
    "random_poses_iterations": (random_poses.iterations_table, random_poses.draw_iterations),
    "live": (live.run, live.draw),
    "retarget": (retarget_bench.run, retarget_bench.draw),
    "batch": (batch.table, batch.draw),
    "batch_retarget": (batch_retarget.run, batch_retarget.draw),
    "markerless": (markerless.run, markerless.draw),
}
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "system": platform.platform(),
            "python": platform.python_version(), "numpy": np.__version__}


def revision() -> str:
    """The commit measured, with "+ local changes" when the engine's files differ from it."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=Path(__file__).resolve().parent.parent,
                              capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (" + local changes to solver/" if git("status", "--porcelain", "--", "solver") else "")


def write_markdown(path: Path, tables, meta: dict) -> None:
    """Rewrite the block between the bench markers. Tables of this run replace their earlier
    version (found by the JSON name in their Data line) or are appended; tables it did not run
    stay as they were. Each table says which run measured it, on which machine: tables from
    several runs sit side by side in the file."""
    m = meta["machine"]
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    block, tail = rest.split(END, 1)
    preamble, *old = block.split("\n### ")
    old = {re.search(r"bench/results/(\w+)\.json", s).group(1): "### " + s.strip() for s in old}
    stamp = f"Measured {meta['date']}, commit {meta['commit']}, {m['cpu']} ({m['cores']} cores): `{meta['command']}`."
    new = {table.name: "\n".join([table.markdown(), "", f"Data: `bench/results/{table.name}.json` (and .png). {stamp}"])
           for table in tables}
    body = [START + preamble.rstrip()]
    for name in [*old, *(n for n in new if n not in old)]:
        body += ["", new.get(name) or old[name]]
    body += ["", END]
    path.write_text(head + "\n".join(body) + tail)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer frames and repeats")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), default=list(BENCHMARKS))
    parser.add_argument("--markdown", type=Path, help="rewrite the tables between the bench markers of this file")
    args = parser.parse_args(argv)
    freed_memory_kept = keep_freed_memory()      # as our add-on and command line do (solver.runtime.allocator)

    out = RESULTS / "quick" if args.quick else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    meta = {"command": "python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "quick": args.quick, "commit": revision(), "machine": machine(),
            "keep_freed_memory": freed_memory_kept}
    tables = []
    for name in args.only:
        run, draw = BENCHMARKS[name]
        table = run(quick=args.quick)
        tables.append(table)
        print(table.markdown() + "\n", flush=True)
        table.save(meta, out)
        draw(table, out / f"{name}.png")
    if args.markdown:
        write_markdown(args.markdown, tables, meta)


if __name__ == "__main__":
    main()

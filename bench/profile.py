"""Where a single-frame solve (F=1) spends its time: cProfile over one call per frame.

    python -m bench.profile [--bones 6] [--frames 100] [--top 20]

Prints calls and scene evaluations per solve, then the functions with the most own time and
the most cumulative time. At F=1 the arrays are tiny, so this is the per-call overhead of
Python and numpy dispatch, not arithmetic.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats

import numpy as np

from .common import chain_scene, solve_ours, targets


def profile(n_bones: int = 6, n_frames: int = 100) -> pstats.Stats:
    scene, poses = chain_scene(n_bones), targets(1000, n_bones)
    picked = poses[np.linspace(0, 1000, n_frames, endpoint=False).astype(int)]
    for f in range(min(5, n_frames)):          # warm up (imports, caches) outside the profile
        solve_ours(scene, picked[f:f + 1])
    profiler = cProfile.Profile()
    profiler.enable()
    for f in range(n_frames):
        solve_ours(scene, picked[f:f + 1])
    profiler.disable()
    return pstats.Stats(profiler)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--bones", type=int, default=6)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    stats = profile(args.bones, args.frames)
    evaluations = sum(v[1] for k, v in stats.stats.items() if k[2] == "evaluate" and k[0].endswith("scene.py"))
    print(f"{args.bones}-bone chain, {args.frames} solves of F=1: {stats.total_tt * 1e3 / args.frames:.2f} ms "
          f"per solve under the profiler, {stats.total_calls / args.frames:.0f} Python calls and "
          f"{evaluations / args.frames:.1f} scene evaluations per solve")
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()

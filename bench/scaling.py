"""How our time per frame scales with the batch size F and with the number of bones.

Frames: the 6-bone chain on a 10000-frame Lissajous path; for batch size F, N = max(F, 1000)
frames evenly spread over it are solved in N / F calls of F consecutive frames. Bones: the
n-bone chain on its own 1000-frame path, one call. Animation mode, every frame from the rest pose.
"""

from __future__ import annotations

import numpy as np

from .common import TIME, Column, Table, chain_scene, error_stats, best_time, plot, solve_ours, targets, tip_errors

BATCHES = (1, 10, 100, 1000, 10000)
BONES = (6, 30, 100)


def solve_in_batches(scene, poses, batch: int):
    """Solve poses in consecutive calls of `batch` frames: (seconds, (q, converged, iterations))."""
    seconds, results = 0.0, []
    for start in range(0, poses.shape[0], batch):
        s, r = solve_ours(scene, poses[start:start + batch])
        seconds += s
        results.append(r)
    return seconds, tuple(np.concatenate([getattr(r, k) for r in results]) for k in ("q", "converged", "iterations"))


def _row(scene, poses, n_bones, seconds, q, converged, iterations, **extra):
    stats = error_stats(tip_errors(scene, q, poses), n_bones, converged)
    return {**extra, "ms_per_frame": 1e3 * seconds / poses.shape[0], "iterations": float(np.mean(iterations)),
            **{k: stats[k] for k in ("max", "off_relative", "not_converged")}}


COMMON = [Column("iterations", "mean iterations", "{:.2f}"), Column("max", "max err", "{:.1e}"),
          Column("off_relative", "> 1e-6 L"), Column("not_converged", "not conv.")]


def run_frames(quick: bool = False, n_bones: int = 6) -> Table:
    batches, least, repeats = (BATCHES[:4], 100, 1) if quick else (BATCHES, 1000, 3)
    path = targets(max(batches), n_bones)
    scene = chain_scene(n_bones)
    table = Table(
        "scaling_frames", f"Our time per frame against batch size ({n_bones}-bone chain)",
        f"The {n_bones}-bone chain on `lissajous({max(batches)}, {n_bones})`: for batch size F, N = max(F, {least}) "
        "frames evenly spread over the path, solved in N / F calls of F frames (every frame from the rest "
        f"pose); best of {repeats} run(s). speed-up: time per frame at F=1 divided by this row's.",
        [Column("F", "F"), Column("calls", "calls"), TIME, Column("speedup", "speed-up vs F=1", "{:.1f}"), *COMMON])
    for F in batches:
        N = max(F, least)
        poses = path[np.linspace(0, path.shape[0], N, endpoint=False).astype(int)]
        seconds, (q, converged, iterations) = best_time(lambda: solve_in_batches(scene, poses, F), repeats)
        table.rows.append(_row(scene, poses, n_bones, seconds, q, converged, iterations, F=F, calls=N // F))
    for row in table.rows:
        row["speedup"] = table.rows[0]["ms_per_frame"] / row["ms_per_frame"]
    return table


def run_bones(quick: bool = False, n_frames: int = 1000) -> Table:
    n_frames = 100 if quick else n_frames
    repeats = 1 if quick else 3
    table = Table(
        "scaling_bones", f"Our time per frame against chain length ({n_frames} frames, one call)",
        f"The n-bone chain (3 n coordinates) on `lissajous({n_frames}, n)`, all frames in one call, every frame "
        f"from the rest pose; best of {repeats} run(s).",
        [Column("bones", "bones"), Column("coordinates", "coordinates"), TIME, *COMMON])
    for n in BONES:
        scene, poses = chain_scene(n), targets(n_frames, n)
        seconds, result = best_time(lambda: solve_ours(scene, poses), repeats)
        table.rows.append(_row(scene, poses, n, seconds, result.q, result.converged, result.iterations,
                               bones=n, coordinates=scene.n_coordinates))
    return table


def draw_frames(table: Table, path) -> None:
    plot(path, table.title, "ms per frame", {"ours, animation mode": [r["ms_per_frame"] for r in table.rows]},
         x=[r["F"] for r in table.rows], xlabel="frames per call F")


def draw_bones(table: Table, path) -> None:
    plot(path, table.title, "ms per frame", {"ours, animation mode": [r["ms_per_frame"] for r in table.rows]},
         x=[r["bones"] for r in table.rows], xlabel="bones")

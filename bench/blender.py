"""Our engine next to Blender's own iTaSC and Standard IK on the same chains and targets.

Blender runs in a fresh bpy process per measurement (tools.blender_ik.measure): the same straight
chain, its last bone's IK target an empty keyframed on solver.examples.lissajous, one
frame_set + depsgraph evaluation per frame. Blender's animation mode is compared with our
animation mode (every frame from the rest pose, one batched call), its simulation mode with ours
(one step per frame from the previous frame, as live preview runs).
"""

from __future__ import annotations

import time

from solver import solve_simulation
from tools.blender_ik import CONFIGS, measure

from .common import ERRORS, TIME, Column, Table, chain_scene, error_stats, best_time, plot, ratio, solve_ours, targets, tip_errors

BONES = (6, 30)


def run_simulation(scene, poses):
    start = time.perf_counter()
    result = solve_simulation(scene, scene.model.neutral(1), poses)
    return time.perf_counter() - start, result


def run_blender(n_bones, n_frames, solver, settings):
    result = measure(n_bones, n_frames, solver, **settings)
    return result["seconds"], result


def run(quick: bool = False, n_frames: int = 1000) -> Table:
    repeats, ours_repeats = (1, 1) if quick else (3, 5)
    table = Table(
        "blender", "Our engine and Blender's own IK solvers",
        f"The same straight chains and `solver.examples.lissajous({n_frames}, n)` targets (Blender: an empty "
        f"keyframed on them, measured by `tools.blender_ik`). Blender's time per frame is the loop of "
        f"`scene.frame_set` + depsgraph evaluation + reading the bone, so it includes Blender's evaluation of "
        f"the whole scene, not the solver alone; ours is the solve alone (animation: all {n_frames} frames in "
        f"one call, each from the rest pose). Times are the best of {repeats} run(s) (ours: of {ours_repeats}). ours / theirs: our time "
        "per frame divided by theirs (our animation mode for their animation and Standard IK rows, our "
        "simulation mode for theirs). Errors: tip-to-target distance in m (Blender computes in float32); "
        "> 1e-6 L, > 1 mm: frames further off than that.",
        [Column("bones", "bones"), Column("solver", "solver", text=True), TIME,
         Column("vs_theirs", "ours / theirs", "{:.2f}"), *ERRORS])
    blender_version = None
    for n in BONES:
        scene, poses = chain_scene(n), targets(n_frames, n)
        anim_s, anim = best_time(lambda: solve_ours(scene, poses), ours_repeats)
        sim_s, sim = best_time(lambda: run_simulation(scene, poses), ours_repeats)
        ours = {"ANIMATION": 1e3 * anim_s / n_frames, "SIMULATION": 1e3 * sim_s / n_frames}
        table.rows.append({"bones": n, "solver": "ours, animation", "ms_per_frame": ours["ANIMATION"],
                           **error_stats(tip_errors(scene, anim.q, poses), n, anim.converged)})
        table.rows.append({"bones": n, "solver": "ours, simulation", "ms_per_frame": ours["SIMULATION"],
                           **error_stats(tip_errors(scene, sim.q, poses), n)})
        for label, solver, settings in CONFIGS:
            seconds, result = best_time(lambda: run_blender(n, n_frames, solver, settings), repeats)
            blender_version = result["blender"]
            theirs = 1e3 * seconds / n_frames
            mine = ours["SIMULATION" if settings.get("mode") == "SIMULATION" else "ANIMATION"]
            table.rows.append({"bones": n, "solver": f"Blender {label}", "ms_per_frame": theirs,
                               "vs_theirs": ratio(mine, theirs), **error_stats(result["errors"], n),
                               "settings": result["settings"]})
    table.title += f" (Blender {blender_version})"
    return table


def draw(table: Table, path) -> None:
    plot(path, "Time per frame (Blender's includes depsgraph evaluation)",
         "ms per frame (log)", {f"{r['bones']} bones: {r['solver']}": r["ms_per_frame"] for r in table.rows})

"""A bake on each rig Rigify generates from its metarigs against Blender's own evaluation of the
same frames, side by side in one bpy session per rig (tools.rigify_rigs: every limb in IK with its
pole on, the controls keyed on circles).

- Blender: every frame set and evaluated (``scene.frame_set``) with the rig's own IK on: what
  playing the animation once costs;
- ours: the bake ``api.bake(rig, 1, N)`` runs, with the add-on's defaults (reading the targets,
  computing later stages' inputs from the stages before, solving, writing keys, reading Blender's
  evaluation of every frame: verify's share is a column; passes: the readings of every frame),
  best of REPEATS after clearing the bake; the worst IK tail of the result (Blender's evaluation,
  every active IK constraint) and the frames converged;
- nla.bake: Blender's own bake (``bpy.ops.nla.bake``, visual keying) of the bones ours keys,
  under the rig's own IK, into its action.
"""

from __future__ import annotations

import time

from .bake import _select_bones
from .common import Column, Table, blender_session, plot, ratio

RIGS = ("basic_human", "basic_quadruped", "cat", "wolf", "horse", "bird")
REPEATS = 2


def in_blender(metarig, n_frames, repeats):
    import importlib

    import bpy
    import numpy as np

    from tools import rigify_rigs
    from tools.blender_session import EXTENSION_MODULE

    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    job = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.job")
    scene, rig, _ = rigify_rigs.build(bpy, metarig, n_frames)
    frames = range(1, n_frames + 1)
    start = time.perf_counter()
    for f in frames:
        scene.frame_set(f)
        bpy.context.evaluated_depsgraph_get()
    blender = time.perf_counter() - start
    best = None
    for _ in range(repeats):
        api.clear_bake(rig)
        scene.frame_set(1)
        start = time.perf_counter()
        bake = job.prepare(rig, np.arange(1, n_frames + 1, dtype=float), bake=True)    # what api.bake runs
        res = bake.run()
        seconds = time.perf_counter() - start
        if best is None or seconds < best[0]:
            best = (seconds, res, bake.readings)
    seconds, res, readings = best
    api.release(rig)
    api.clear_bake(rig)
    _select_bones(rig, res.bones)
    selected = [rig.pose.bones[name] for name in res.bones]
    bpy.context.view_layer.objects.active = rig
    start = time.perf_counter()
    with bpy.context.temp_override(active_object=rig, selected_pose_bones=selected):
        done = bpy.ops.nla.bake(frame_start=1, frame_end=n_frames, only_selected=True, visual_keying=True,
                                clear_constraints=False, bake_types={"POSE"}, use_current_action=True)
    nla = time.perf_counter() - start
    if done != {"FINISHED"}:
        raise RuntimeError(f"nla.bake returned {done}")
    return {"blender": blender, "ours": seconds, "nla": nla, "verify": res.verify_seconds, "bones": len(rig.pose.bones),
            "active": len(res.constraint_names), "driven": sum(s >= 0 for s in res.solved_by),
            "stages": max(res.solved_by) + 1, "passes": readings + 1, "max_error": float(np.nanmax(res.position_error)),
            "converged": int(np.count_nonzero(res.converged)), "frames": n_frames, "version": bpy.app.version_string}


def run(quick: bool = False, n_frames: int = 60) -> Table:
    n_frames = 12 if quick else n_frames
    table = Table(
        "rigify_rigs", "A bake on every rig Rigify generates, against Blender's own evaluation",
        f"{n_frames} frames per rig, one bpy session each (tools.rigify_rigs: the generated rig, every limb in IK, "
        f"poles on, IK and pole controls keyed on circles). Blender: `frame_set` of every frame, the rig's own IK on. "
        f"ours: the bake `api.bake(rig, 1, {n_frames})` runs, defaults, best of {REPEATS}; verify: its share. passes: "
        f"Blender evaluations of every frame a bake reads (targets; one to verify); floor: passes x Blender s. nla.bake: Blender's visual-keying bake of the "
        f"bones ours keys, its own IK on. IK: active IK constraints (ours, stages); max error: the worst IK tail "
        f"as Blender shows the bake (m); converged: frames with every active IK constraint on target.",
        [Column("rig", "rig", text=True), Column("bones", "bones"), Column("ik", "IK (ours, stages)", text=True),
         Column("blender", "Blender s", "{:.3f}"), Column("ours", "ours s", "{:.3f}"),
         Column("vs_blender", "ours / Blender", "{:.2f}"), Column("passes", "passes", "{}"),
         Column("vs_floor", "ours / floor", "{:.2f}"), Column("nla", "nla.bake s", "{:.3f}"),
         Column("vs_nla", "ours / nla.bake", "{:.2f}"), Column("verify_share", "verify", "{:.0%}"),
         Column("max_error", "max error", "{:.1e}"), Column("converged", "converged", text=True)])
    for metarig in RIGS:
        d = blender_session("rigify_rigs", f"in_blender({metarig!r}, {n_frames}, {1 if quick else REPEATS})",
                            exit_at_once=True)
        table.rows.append({"rig": metarig, "bones": d["bones"], "ik": f"{d['active']} ({d['driven']}, {d['stages']})",
                           "blender": d["blender"], "ours": d["ours"], "vs_blender": ratio(d["ours"], d["blender"]),
                           "passes": d["passes"], "vs_floor": ratio(d["ours"], d["passes"] * d["blender"]),
                           "nla": d["nla"], "vs_nla": ratio(d["ours"], d["nla"]),
                           "verify_share": d["verify"] / d["ours"], "max_error": d["max_error"],
                           "converged": f"{d['converged']}/{d['frames']}"})
    return table


def draw(table: Table, path) -> None:
    plot(path, "Bake against Blender's evaluation, per Rigify rig", "seconds (log)",
         {f"{r['rig']}: {who}": r[who] for r in table.rows for who in ("blender", "ours")})


def profile_in_blender(metarig, n_frames):
    """cProfile of our second bake of the rig (the first warms up)."""
    import cProfile
    import importlib

    import bpy

    from tools import rigify_rigs
    from tools.blender_session import EXTENSION_MODULE

    from .common import profile_report
    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    scene, rig, _ = rigify_rigs.build(bpy, metarig, n_frames)
    api.bake(rig, 1, n_frames)
    api.clear_bake(rig)
    profiler = cProfile.Profile()
    profiler.enable()
    api.bake(rig, 1, n_frames)
    profiler.disable()
    return profile_report(profiler, 30)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="the rigify_rigs table, or a cProfile of one rig's bake")
    parser.add_argument("--profile", choices=RIGS)
    parser.add_argument("--frames", type=int, default=60)
    args = parser.parse_args()
    if args.profile:
        print(blender_session("rigify_rigs", f"profile_in_blender({args.profile!r}, {args.frames})", exit_at_once=True))
    else:
        print(run(n_frames=args.frames).markdown())

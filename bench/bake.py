"""End-to-end bake, ours vs Blender's own, on the same rig in the same bpy session.

One fresh bpy process per rig, the extension installed from the built zip (tools.blender_session):
the 6- and 30-bone straight chains (tools.blender_ik: the last bone's IK constraint, chain over
all bones, on an empty keyframed on solver.examples.lissajous) and Rigify's human metarig with
hands and feet on moving targets (tools.demo_rigify). Timed, each from the same state (the rig's
action removed, its starting pose put back, its IK constraints live):

- ours: ``api.bake(rig, 1, N)`` with the add-on's defaults (reading targets, solving, writing keys,
  then reading Blender's evaluation of every frame written: its share of the time is a column);
- theirs: ``bpy.ops.nla.bake`` with visual keying of the pose, the armature's IK solver being
  Blender's iTaSC (animation mode, default settings), then its Standard IK ('LEGACY').

Then every bake is checked the same way: all IK constraints muted, Blender evaluates each frame
of the keys and each IK tail is measured against its target in world space.

    .venv/bin/python -m bench.bake --profile 6      # cProfile of our bake inside Blender
"""

from __future__ import annotations

import time

import numpy as np

from .common import ERRORS, Column, Table, blender_session, error_stats, plot, profile_report, ratio

RIGS = (("6-bone chain", 6), ("30-bone chain", 30), ("Rigify metarig", "rigify"))     # (label, what to build)
REPEATS = 3                # the best of 3 bakes counts
SOLVERS = (("ours (api.bake)", None), ("Blender iTaSC", "ITASC"), ("Blender Standard IK", "LEGACY"))


# ---- inside Blender ---------------------------------------------------------------------------

def _build(bpy, rig, n_frames, mode="ANIMATION"):
    """(scene, armature object) with its IK constraints on keyframed targets, Blender's iTaSC in
    `mode`."""
    if rig == "rigify":
        from tools.demo_rigify import _build
        scene, obj, _ = _build(bpy, n_frames)
    else:
        from tools.blender_ik import _build_scene
        scene, obj, _ = _build_scene(rig, n_frames, "ITASC", {})
    obj.pose.ik_param.mode = mode
    return scene, obj


def _effectors(obj):
    """(pose bone, IK constraint, chain length) for every IK constraint on the rig."""
    out = []
    for pb in obj.pose.bones:
        for con in pb.constraints:
            if con.type == "IK":
                bone, length = pb, 0.0
                for _ in range(con.chain_count):
                    length, bone = length + bone.bone.length, bone.parent
                out.append((pb, con, length))
    return out


def _pose(obj):
    return [(pb, pb.location[:], pb.rotation_quaternion[:], pb.rotation_euler[:], pb.scale[:])
            for pb in obj.pose.bones]


def _reset(bpy, api, obj, pose):
    """Back to the starting state: no bake, no action, the starting pose, Blender's IK live."""
    api.clear_bake(obj)
    api.release(obj)
    if obj.animation_data and obj.animation_data.action:
        action = obj.animation_data.action
        obj.animation_data.action = None
        bpy.data.actions.remove(action)
    for pb, loc, quat, euler, scale in pose:
        pb.location, pb.rotation_quaternion, pb.rotation_euler, pb.scale = loc, quat, euler, scale


def _bake(bpy, api, obj, solver, first, last):
    """One bake; returns (seconds, frames not converged or None, seconds of those spent verifying
    or None)."""
    if solver is None:
        start = time.perf_counter()
        result = api.bake(obj, first, last)
        return time.perf_counter() - start, int(np.sum(~np.asarray(result.converged))), result.verify_seconds
    obj.pose.ik_solver = solver
    for ob in bpy.context.view_layer.objects:
        ob.select_set(ob == obj)
    bpy.context.view_layer.objects.active = obj
    start = time.perf_counter()
    done = bpy.ops.nla.bake(frame_start=first, frame_end=last, only_selected=False, visual_keying=True,
                            clear_constraints=False, bake_types={"POSE"})
    seconds = time.perf_counter() - start
    if done != {"FINISHED"}:
        raise RuntimeError(f"nla.bake returned {done}")
    return seconds, None, None


def _errors(bpy, scene, obj, n_frames):
    """Per frame and IK constraint, tail-to-target distance with every IK constraint muted."""
    effectors = _effectors(obj)
    muted = [con.mute for _, con, _ in effectors]
    for _, con, _ in effectors:
        con.mute = True
    errors = []
    for frame in range(1, n_frames + 1):
        scene.frame_set(frame)
        dg = bpy.context.evaluated_depsgraph_get()
        obj_eval = obj.evaluated_get(dg)
        errors.append([(obj_eval.matrix_world @ obj_eval.pose.bones[pb.name].tail
                        - con.target.evaluated_get(dg).matrix_world.translation).length
                       for pb, con, _ in effectors])
    for (_, con, _), m in zip(effectors, muted):
        con.mute = m
    return errors


def in_blender(rig, n_frames, repeats):
    """Build the rig, bake it each way; JSON-able times and errors per solver."""
    import importlib

    import bpy
    from tools.blender_session import EXTENSION_MODULE

    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    scene, obj = _build(bpy, rig, n_frames)
    pose = _pose(obj)
    out = {"blender": bpy.app.version_string, "lengths": [length for *_, length in _effectors(obj)]}
    for label, solver in SOLVERS:
        _reset(bpy, api, obj, pose)
        _bake(bpy, api, obj, solver, 1, 2)                     # warm-up: first-call costs out
        runs = []
        for _ in range(repeats):
            _reset(bpy, api, obj, pose)
            runs.append(_bake(bpy, api, obj, solver, 1, n_frames))
        seconds, not_converged, verify_seconds = min(runs, key=lambda run: run[0])
        out[label] = {"seconds": seconds, "times": [run[0] for run in runs], "not_converged": not_converged,
                      "verify_seconds": verify_seconds, "errors": _errors(bpy, scene, obj, n_frames)}
    return out


def profile_in_blender(rig, n_frames, top=30):
    """cProfile of one `api.bake` (after a warm-up), sorted by cumulative and by own time."""
    import cProfile
    import importlib

    import bpy
    from tools.blender_session import EXTENSION_MODULE

    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    scene, obj = _build(bpy, rig, n_frames)
    pose = _pose(obj)
    _bake(bpy, api, obj, None, 1, 2)
    _reset(bpy, api, obj, pose)
    profiler = cProfile.Profile()
    profiler.enable()
    api.bake(obj, 1, n_frames)
    profiler.disable()
    return profile_report(profiler, top)


# ---- host side --------------------------------------------------------------------------------

def _session(call, rig):
    # exit_at_once: Blender 4.2 crashes on exit after Rigify was enabled (see run_in_blender).
    return blender_session("bake", call, exit_at_once=rig == "rigify")


def run(quick: bool = False, n_frames: int = 1000) -> Table:
    n_frames = 100 if quick else n_frames
    table = Table(
        "bake", "Baking to keys end to end: our add-on and Blender's own IK",
        f"{n_frames} frames baked in one bpy session per rig, the extension installed from its zip. ours: "
        f"`api.bake(rig, 1, {n_frames})` with the add-on's defaults (reading the targets frame by frame, solving, "
        f"writing keys, reading Blender's evaluation of every frame written: verify, its share of the time; "
        f"ours' errors and `not conv.` are measured on that evaluation). Blender: "
        f"`bpy.ops.nla.bake(visual_keying=True, bake_types={{'POSE'}}, "
        f"clear_constraints=False)` with the armature's IK solver set to iTaSC (animation mode, defaults) or "
        f"Standard IK. Each bake starts from the same state (no action, the starting pose); best of {{repeats}} "
        f"bakes, after an untimed 2-frame warm-up. ours / theirs: below 1, ours is "
        f"faster. Errors: every IK constraint muted, Blender evaluates each frame of the keys and measures "
        f"each IK tail to its target (m, float32); per frame the worst tail; > 1e-6 L with L the shortest "
        f"IK chain (6 m, 30 m; Rigify's arms, {{rigify_l}}).",
        [Column("rig", "rig", text=True), Column("solver", "solver", text=True), Column("seconds", "s", "{:.2f}"),
         Column("ms_per_frame", "ms / frame", "{:.3f}"), Column("vs_theirs", "ours / theirs", "{:.2f}"),
         Column("verify_share", "verify", "{:.0%}"), *ERRORS])
    version, rigify_l = None, "—"
    for label, rig in RIGS:
        data = _session(f"in_blender({rig!r}, {n_frames}, {1 if quick else REPEATS})", rig)
        version, length = data["blender"], min(data["lengths"])
        if rig == "rigify":
            rigify_l = f"{length:.3f} m"
        ours = data[SOLVERS[0][0]]["seconds"]
        for name, _ in SOLVERS:
            d = data[name]
            worst = np.max(np.asarray(d["errors"], dtype=float), axis=1)
            table.rows.append({"rig": label, "solver": name, "seconds": d["seconds"], "times": d["times"],
                               "ms_per_frame": 1e3 * d["seconds"] / n_frames,
                               "vs_theirs": None if name == SOLVERS[0][0] else ratio(ours, d["seconds"]),
                               "verify_share": (None if d.get("verify_seconds") is None
                                                else d["verify_seconds"] / d["seconds"]),
                               **error_stats(worst, length), "not_converged": d["not_converged"]})
    table.title += f" (Blender {version})"
    table.caption = table.caption.replace("{rigify_l}", rigify_l).replace("{repeats}", str(1 if quick else REPEATS))
    return table


def draw(table: Table, path) -> None:
    plot(path, "Bake to keys, end to end", "seconds (log)",
         {f"{r['rig']}: {r['solver']}": r["seconds"] for r in table.rows})


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="cProfile of our bake inside Blender")
    parser.add_argument("--profile", default="6", help="6, 30 or rigify")
    parser.add_argument("--frames", type=int, default=1000)
    args = parser.parse_args()
    rig = args.profile if args.profile == "rigify" else int(args.profile)
    print(_session(f"profile_in_blender({rig!r}, {args.frames})", rig))

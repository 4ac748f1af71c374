"""End-to-end bake, ours vs Blender's own, on the same rig in the same bpy session.

One fresh bpy process per rig, the extension installed from the built zip (tools.blender_session):
the 6- and 30-bone straight chains (tools.blender_ik: the last bone's IK constraint, chain over
all bones, on an empty keyframed on solver.examples.lissajous), Rigify's human metarig with hands
and feet on moving targets (tools.demo_rigify: `_build`) and the rig Rigify generates from it,
all four limbs in IK with poles on, its hand, foot and pole controls keyed (`make demo`'s scene,
tools.demo_rigify.build_generated). Timed, each from the same state (the action the bake wrote
removed, the rig's own action, if any, put back as it was, its starting pose put back, its IK
constraints live as they were):

- ours: ``api.bake(rig, 1, N)`` with the add-on's defaults (reading targets, solving, writing keys,
  then reading Blender's evaluation of every frame written: its share of the time is a column);
- theirs: ``bpy.ops.nla.bake`` with visual keying of the pose, the armature's IK solver being
  Blender's iTaSC (animation mode, default settings), then its Standard IK ('LEGACY'). The
  generated rig is baked under its own Standard IK only, the chain bones ours keys selected
  (``only_selected``), into its action, which holds the controls' keys (``use_current_action``).

Then every bake is checked the same way: all IK constraints muted (and the drivers of their mute,
which Rigify's pole switch drives), Blender evaluates each frame of the keys and each IK tail is
measured against its target in world space (a target bone's head for a bone target).

    .venv/bin/python -m bench.bake --profile 6      # cProfile of our bake inside Blender
"""

from __future__ import annotations

import time

import numpy as np

from .common import ERRORS, Column, Table, blender_session, error_stats, plot, profile_report, ratio

RIGS = (("6-bone chain", 6), ("30-bone chain", 30), ("Rigify metarig", "rigify"),
        ("Rigify generated", "generated"))     # (label, what to build)
RIGIFY = ("rigify", "generated")               # the rigs whose sessions enable Rigify
REPEATS = 3                # the best of 3 bakes counts
SOLVERS = (("ours (api.bake)", None), ("Blender iTaSC", "ITASC"), ("Blender Standard IK", "LEGACY"))


def solvers(rig):
    """The bakes a rig gets: ours and Blender's; the generated rig only its own Standard IK."""
    return [s for s in SOLVERS if rig != "generated" or s[1] != "ITASC"]


# ---- inside Blender ---------------------------------------------------------------------------

def _build(bpy, rig, n_frames, mode="ANIMATION"):
    """(scene, armature object) with its IK constraints on keyframed targets, Blender's iTaSC in
    `mode`; the generated rig as Rigify sets it up (its Standard IK)."""
    if rig == "generated":
        from tools.demo_rigify import build_generated
        return build_generated(bpy, n_frames)
    if rig == "rigify":
        from tools.demo_rigify import _build
        scene, obj, _ = _build(bpy, n_frames)
    else:
        from tools.blender_ik import _build_scene
        scene, obj, _ = _build_scene(rig, n_frames, "ITASC", {})
    obj.pose.ik_param.mode = mode
    return scene, obj


def _effectors(obj):
    """(pose bone, IK constraint, chain length) for every IK bone of the rig: its first IK
    constraint (Rigify's limbs carry two, with and without a pole, on the same target)."""
    out, seen = [], set()
    for pb in obj.pose.bones:
        for con in pb.constraints:
            if con.type == "IK" and pb.name not in seen:
                seen.add(pb.name)
                bone, length = pb, 0.0
                for _ in range(con.chain_count):
                    length, bone = length + bone.bone.length, bone.parent
                out.append((pb, con, length))
    return out


def target_point(dg, con):
    """Where an IK constraint aims, as Blender evaluates it (world space): its target object's
    origin, or the head of its target bone."""
    target = con.target.evaluated_get(dg)
    if con.subtarget:
        return target.matrix_world @ target.pose.bones[con.subtarget].head
    return target.matrix_world.translation


def _ik_switches(obj):
    """Every IK constraint of the rig with its mute flag and the driver F-curves of its mute (with
    their mute flags): what `mute_ik` changes and `give_back` restores."""
    drivers = {}
    if obj.animation_data:
        for fc in obj.animation_data.drivers:
            drivers.setdefault(fc.data_path, []).append(fc)
    return [(con, con.mute, [(fc, fc.mute) for fc in drivers.get(con.path_from_id("mute"), [])])
            for pb in obj.pose.bones for con in pb.constraints if con.type == "IK"]


def mute_ik(obj):
    """Mute every IK constraint of the rig, and the drivers of their mute so that it holds; returns
    what `give_back` restores."""
    switches = _ik_switches(obj)
    for con, _, fcurves in switches:
        for fc, _ in fcurves:
            fc.mute = True
        con.mute = True
    return switches


def give_back(switches):
    """Every IK constraint's mute and its drivers' mute flags as `_ik_switches` found them."""
    for con, mute, fcurves in switches:
        for fc, fc_mute in fcurves:
            fc.mute = fc_mute
        con.mute = mute


def _pose(obj):
    """The starting state: every pose bone's channels, the IK constraints' switches and a spare
    copy of the rig's action (None when it has none)."""
    action = obj.animation_data.action if obj.animation_data else None
    spare = None
    if action is not None:
        spare = action.copy()
        spare.use_fake_user = True
    return {"bones": [(pb, pb.location[:], pb.rotation_quaternion[:], pb.rotation_euler[:], pb.scale[:])
                      for pb in obj.pose.bones],
            "switches": _ik_switches(obj), "action": spare}


def _reset(bpy, api, obj, pose):
    """Back to the starting state `pose` (`_pose`): no bake, the rig's own action as it was (or
    none), the starting pose, Blender's IK live as it was."""
    api.clear_bake(obj)
    api.release(obj)
    if obj.animation_data and obj.animation_data.action:
        action = obj.animation_data.action
        obj.animation_data.action = None
        bpy.data.actions.remove(action)
    if pose["action"] is not None:
        obj.animation_data.action = action = pose["action"].copy()
        action.use_fake_user = False
        if getattr(obj.animation_data, "action_slot", False) is None and action.slots:
            obj.animation_data.action_slot = action.slots[0]
    give_back(pose["switches"])
    for pb, loc, quat, euler, scale in pose["bones"]:
        pb.location, pb.rotation_quaternion, pb.rotation_euler, pb.scale = loc, quat, euler, scale


def _select_bones(obj, names):
    """Select exactly the pose bones `names` (Blender 5.0 keeps selection on pose bones, 4.2 on bones)."""
    for pb in obj.pose.bones:
        owner = pb if hasattr(pb, "select") else pb.bone
        owner.select = pb.name in names


def _bake(bpy, api, obj, solver, first, last, chains=None):
    """One bake; returns (seconds, frames not converged or None, seconds of those spent verifying
    or None). `chains`: for Blender's bake, key only these bones, into the rig's own action (None:
    every bone, into a new action)."""
    if solver is None:
        start = time.perf_counter()
        result = api.bake(obj, first, last)
        return time.perf_counter() - start, int(np.sum(~np.asarray(result.converged))), result.verify_seconds
    obj.pose.ik_solver = solver
    for ob in bpy.context.view_layer.objects:
        ob.select_set(ob == obj)
    bpy.context.view_layer.objects.active = obj
    options = {"frame_start": first, "frame_end": last, "only_selected": False, "visual_keying": True,
               "clear_constraints": False, "bake_types": {"POSE"}}
    if chains is None:
        start = time.perf_counter()
        done = bpy.ops.nla.bake(**options)
    else:
        _select_bones(obj, chains)
        selected = [obj.pose.bones[name] for name in chains]
        options.update(only_selected=True, use_current_action=True)
        start = time.perf_counter()
        with bpy.context.temp_override(active_object=obj, selected_pose_bones=selected):
            done = bpy.ops.nla.bake(**options)
    seconds = time.perf_counter() - start
    if done != {"FINISHED"}:
        raise RuntimeError(f"nla.bake returned {done}")
    return seconds, None, None


def _errors(bpy, scene, obj, n_frames):
    """Per frame and IK bone, tail-to-target distance with every IK constraint muted."""
    effectors = _effectors(obj)
    switches = mute_ik(obj)
    errors = []
    for frame in range(1, n_frames + 1):
        scene.frame_set(frame)
        dg = bpy.context.evaluated_depsgraph_get()
        obj_eval = obj.evaluated_get(dg)
        errors.append([(obj_eval.matrix_world @ obj_eval.pose.bones[pb.name].tail - target_point(dg, con)).length
                       for pb, con, _ in effectors])
    give_back(switches)
    return errors


def _chain_bones(obj):
    """The bones of every IK chain of the rig (what ours keys)."""
    names = set()
    for pb, con, _ in _effectors(obj):
        bone = pb
        for _ in range(con.chain_count):
            names.add(bone.name)
            bone = bone.parent
    return sorted(names)


def in_blender(rig, n_frames, repeats):
    """Build the rig, bake it each way; JSON-able times and errors per solver."""
    import importlib

    import bpy
    from tools.blender_session import EXTENSION_MODULE

    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    scene, obj = _build(bpy, rig, n_frames)
    pose = _pose(obj)
    chains = _chain_bones(obj) if rig == "generated" else None
    out = {"blender": bpy.app.version_string, "lengths": [length for *_, length in _effectors(obj)],
           "bones": len(obj.pose.bones)}
    for label, solver in solvers(rig):
        _reset(bpy, api, obj, pose)
        _bake(bpy, api, obj, solver, 1, 2, chains)             # warm-up: first-call costs out
        runs = []
        for _ in range(repeats):
            _reset(bpy, api, obj, pose)
            runs.append(_bake(bpy, api, obj, solver, 1, n_frames, chains))
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
    return blender_session("bake", call, exit_at_once=rig in RIGIFY)


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
        f"Standard IK. Rigify generated: the rig Rigify generates from its human metarig ({{generated_bones}} "
        f"bones; `make demo`'s scene, tools.demo_rigify.build_generated: all four limbs in IK, poles on, the "
        f"hand, foot and pole controls keyed on every frame), baked by ours and by `nla.bake` under its own "
        f"Standard IK with the chain bones ours keys selected (`only_selected=True`) into its action "
        f"(`use_current_action=True`, which holds the controls' keys). Each bake starts from the same state (the "
        f"baked action removed, the rig's own put back, the starting pose); best of {{repeats}} "
        f"bakes, after an untimed 2-frame warm-up. ours / theirs: below 1, ours is "
        f"faster. Errors: every IK constraint muted (and the drivers of its mute), Blender evaluates each frame "
        f"of the keys and measures each IK tail to its target, a target bone's head (m, float32); per frame the "
        f"worst tail; > 1e-6 L with L the shortest IK chain (6 m, 30 m; the metarig's arms, {{rigify_l}}; the "
        f"generated rig's arms, {{generated_l}}).",
        [Column("rig", "rig", text=True), Column("solver", "solver", text=True), Column("seconds", "s", "{:.2f}"),
         Column("ms_per_frame", "ms / frame", "{:.3f}"), Column("vs_theirs", "ours / theirs", "{:.2f}"),
         Column("verify_share", "verify", "{:.0%}"), *ERRORS])
    version, filled = None, {"rigify_l": "—", "generated_l": "—", "generated_bones": "—"}
    for label, rig in RIGS:
        data = _session(f"in_blender({rig!r}, {n_frames}, {1 if quick else REPEATS})", rig)
        version, length = data["blender"], min(data["lengths"])
        if rig in RIGIFY:
            filled[f"{rig}_l"] = f"{length:.3f} m"
        if rig == "generated":
            filled["generated_bones"] = str(data["bones"])
        ours = data[SOLVERS[0][0]]["seconds"]
        for name, _ in solvers(rig):
            d = data[name]
            worst = np.max(np.asarray(d["errors"], dtype=float), axis=1)
            table.rows.append({"rig": label, "solver": name, "seconds": d["seconds"], "times": d["times"],
                               "ms_per_frame": 1e3 * d["seconds"] / n_frames,
                               "vs_theirs": None if name == SOLVERS[0][0] else ratio(ours, d["seconds"]),
                               "verify_share": (None if d.get("verify_seconds") is None
                                                else d["verify_seconds"] / d["seconds"]),
                               **error_stats(worst, length), "not_converged": d["not_converged"]})
    table.title += f" (Blender {version})"
    for key, value in {**filled, "repeats": str(1 if quick else REPEATS)}.items():
        table.caption = table.caption.replace("{" + key + "}", value)
    return table


def draw(table: Table, path) -> None:
    plot(path, "Bake to keys, end to end", "seconds (log)",
         {f"{r['rig']}: {r['solver']}": r["seconds"] for r in table.rows})


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="cProfile of our bake inside Blender")
    parser.add_argument("--profile", default="6", help="6, 30, rigify (the metarig) or generated")
    parser.add_argument("--frames", type=int, default=1000)
    args = parser.parse_args()
    rig = args.profile if args.profile in RIGIFY else int(args.profile)
    print(_session(f"profile_in_blender({rig!r}, {args.frames})", rig))

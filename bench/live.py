"""Live preview in animation and in simulation mode: our add-on against Blender's iTaSC in the same
mode, on the same rig in the same bpy session.

One fresh bpy process per rig, the extension installed from the built zip (tools.blender_session):
the 6-bone straight chain (tools.blender_ik) and Rigify's human metarig with hands and feet on
moving targets (tools.demo_rigify), targets keyframed on every frame; and the rig Rigify generates,
all four limbs in IK with poles on, its hand, foot and pole controls keyed (`make demo`'s scene,
tools.demo_rigify.build_generated). Each side plays the same frames one after the other, one
``scene.frame_set(f)`` each (Blender evaluates the scene again when frame_change_post handlers
changed it: a ``view_layer.update()`` after it finds our written pose evaluated already), after a
few untimed warm-up frames:

- theirs: ``pose.ik_solver = 'ITASC'``, ``ik_param.mode`` the mode measured, its other settings
  Blender's defaults; the simulation restarts for every pass (solver switched away and back). On
  the generated rig: its own Standard IK as Rigify set it up (Blender's evaluation of every frame,
  which is what an animator scrubbing that rig waits for);
- ours: ``itasc.live_preview = True`` (Blender's IK constraints muted, our frame_change_post
  handler solves the frame to convergence in animation mode, advances one simulation step in
  simulation mode, with the add-on's defaults); restarts too;
- muted: every IK constraint muted (and the drivers of its mute), no live preview: plain scene
  evaluation, the floor both sides pay.

Passes alternate between the three; each frame counts with its best of REPEATS passes. Errors come from one more,
untimed pass of each IK side over the same frames from the same start: after each frame the
evaluated tail of every IK bone is measured against its evaluated target in world space.

    .venv/bin/python -m bench.live --profile 6 --mode ANIMATION     # cProfile of our live preview in Blender
    .venv/bin/python -m bench.live --profile rigify --overhead      # CPU ms: frame, handler, engine, parts, muted
    .venv/bin/python -m bench.live --profile generated --write-cost # Blender's evaluation after a pose write
"""

from __future__ import annotations

import time

import numpy as np

from .bake import RIGIFY, _build, _effectors, _pose, _reset, mute_ik, target_point
from .common import ERRORS, Column, Table, blender_session, error_stats, plot, profile_report, ratio

RIGS = (("6-bone chain", 6), ("Rigify metarig", "rigify"), ("Rigify generated", "generated"))  # (label, what to build)
REPEATS = 7
WARMUP = 5                 # untimed frames played before the timed ones
SIDES = ("ours (live preview)", "Blender iTaSC", "IK muted")
STANDARD = "Blender Standard IK"     # theirs on the generated rig: its own solver
MODES = ("ANIMATION", "SIMULATION")
ITASC_PARAMS = ("mode", "reiteration_method", "solver", "feedback", "velocity_max", "use_auto_step", "step_count",
                "step_min", "step_max", "precision", "iterations", "damping_max", "damping_epsilon",
                "translate_root_bones")


def sides(rig):
    """(ours, theirs, muted) labels for a rig."""
    return (SIDES[0], STANDARD, SIDES[2]) if rig == "generated" else SIDES


# ---- inside Blender ---------------------------------------------------------------------------

def _iks(obj):
    """(pose bone, IK constraint) per IK bone (bench.bake._effectors)."""
    return [(pb, con) for pb, con, _ in _effectors(obj)]


def _set_side(bpy, obj, side, pose):
    """Switch the rig to one side from the starting pose `pose` (bench.bake's), its state (our live
    state, Blender's iTaSC scene) fresh. Both simulations start from the pose's bones. A rig on
    Blender's Standard IK (the generated one) stays on it."""
    import importlib

    from tools.blender_session import EXTENSION_MODULE

    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    settings = obj.itasc
    settings.live_preview = False
    _reset(bpy, api, obj, pose)                  # Blender's IK constraints as they were, the pose put back
    if obj.pose.ik_solver == "ITASC":
        # Switching the solver away and back drops Blender's iTaSC scene (its simulation restarts)
        # and gives ik_param Blender's defaults again (mode ANIMATION among them): set them back.
        params = {name: getattr(obj.pose.ik_param, name) for name in ITASC_PARAMS}
        obj.pose.ik_solver = "LEGACY"
        bpy.context.view_layer.update()
        obj.pose.ik_solver = "ITASC"
        for name, value in params.items():
            setattr(obj.pose.ik_param, name, value)
    if side == SIDES[2]:
        mute_ik(obj)                             # _reset gives every mute back
    if side == SIDES[0]:
        settings.live_preview = True             # hands over: our drive mutes Blender's IK
    bpy.context.view_layer.update()


def _check_mode(obj, mode):
    """Refuse a pass in another mode than the one measured (Blender's iTaSC, and ours, which follows it)."""
    shown = obj.pose.ik_param.mode if obj.pose.ik_solver == "ITASC" else obj.itasc.mode
    if shown != mode:
        raise RuntimeError(f"the rig is in {shown} mode, not {mode}")


def _play(scene, frames, measure=None):
    """frame_set over `frames`; returns the seconds of each frame (measure() after each, outside the
    timing)."""
    times = []
    for f in frames:
        start = time.perf_counter()
        scene.frame_set(int(f))
        times.append(time.perf_counter() - start)
        if measure is not None:
            measure()
    return times


def _tails(bpy, obj, iks):
    """The IK bones' evaluated tails in world space, as a flat list."""
    ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return [v for pb, _ in iks for v in ev.matrix_world @ ev.pose.bones[pb.name].tail]


def _tail_errors(bpy, obj, iks, out):
    def measure():
        dg = bpy.context.evaluated_depsgraph_get()
        ev = obj.evaluated_get(dg)
        out.append([(ev.matrix_world @ ev.pose.bones[pb.name].tail - target_point(dg, con)).length
                    for pb, con in iks])
    return measure


def in_blender(rig, n_frames, repeats, mode="SIMULATION"):
    """Build the rig with Blender's iTaSC (and our live preview) in `mode`, play it each way;
    JSON-able per-frame times and errors per side."""
    import bpy

    scene, obj = _build(bpy, rig, WARMUP + n_frames, mode=mode)
    if obj.pose.ik_solver != "ITASC":
        obj.itasc.mode = mode                    # ours in that mode (an override: Standard IK has none)
    pose = _pose(obj)
    iks = _iks(obj)
    labels = sides(rig)
    lengths = []
    for pb, con in iks:
        bone, length = pb, 0.0
        for _ in range(con.chain_count):
            length, bone = length + bone.bone.length, bone.parent
        lengths.append(length)
    warm, timed = range(1, WARMUP + 1), range(WARMUP + 1, WARMUP + n_frames + 1)
    params = obj.pose.ik_param if obj.pose.ik_solver == "ITASC" else None
    out = {"blender": bpy.app.version_string, "lengths": lengths, "sides": labels, "solver": obj.pose.ik_solver,
           "mode": mode,
           "bones": len(obj.pose.bones),
           "settings": {} if params is None else {
               p: getattr(params, p) for p in ("mode", "reiteration_method", "solver", "feedback",
                                               "velocity_max", "use_auto_step", "step_min", "step_max")}}
    runs, ends = {side: [] for side in labels}, {side: [] for side in labels}
    for _ in range(repeats):
        for side in labels:
            _set_side(bpy, obj, side, pose)
            _check_mode(obj, mode)
            _play(scene, warm)
            runs[side].append(_play(scene, timed))
            ends[side].append(_tails(bpy, obj, iks))
    for side in labels:
        per_frame = np.min(np.asarray(runs[side]), axis=0)          # the best of each frame's passes
        totals = [float(np.sum(t)) for t in runs[side]]
        errors = []
        if side != SIDES[2]:
            _set_side(bpy, obj, side, pose)
            _check_mode(obj, mode)
            _play(scene, warm)
            _play(scene, timed, _tail_errors(bpy, obj, iks, errors))
            ends[side].append(_tails(bpy, obj, iks))
        # Every pass, timed or not, must have played the same simulation from the same start.
        spread = float(np.ptp(np.asarray(ends[side]), axis=0).max())
        if spread > 1e-6:
            raise RuntimeError(f"{side}: the passes ended {spread:.3g} apart; they did not start alike")
        out[side] = {"best_frames": per_frame.tolist(), "totals": totals, "errors": errors}
    _set_side(bpy, obj, SIDES[2], pose)
    return out


def profile_in_blender(rig, n_frames, top=30, mode="SIMULATION"):
    """cProfile of our live preview over n_frames (after the warm-up), by cumulative and own time."""
    import cProfile

    import bpy

    scene, obj = _build(bpy, rig, WARMUP + n_frames, mode=mode)
    if obj.pose.ik_solver != "ITASC":
        obj.itasc.mode = mode
    pose = _pose(obj)
    _set_side(bpy, obj, SIDES[0], pose)
    _play(scene, range(1, WARMUP + 1))
    profiler = cProfile.Profile()
    profiler.enable()
    _play(scene, range(WARMUP + 1, WARMUP + n_frames + 1))
    profiler.disable()
    return profile_report(profiler, top)


# What `overhead_in_blender` times inside our handler: (module, function) of the extension.
PARTS = (("itasc_addon.live", "solve_now"), ("solver", "solve_animation"), ("itasc_addon.live", "_reader"),
         ("itasc_addon.live", "_sample"), ("itasc_addon.solving", "frame_inputs"),
         ("itasc_addon.rig", "apply_pose"))


def overhead_in_blender(rig, n_frames, passes=5, mode="ANIMATION"):
    """Where the CPU time (`time.process_time`) of our live preview's frame goes, ms per frame, the
    best of `passes` passes each: the whole `frame_set`, our handler (`live.solve_now`), the
    engine's solve inside it (`solver.solve_animation`), the handler's parts (PARTS), and a frame
    with every IK muted. The frame minus the engine is the add-on's and Blender's share around the
    solve; the frame minus the handler and the muted frame is mostly Blender's evaluation after
    our write."""
    import importlib

    import bpy

    from tools.blender_session import EXTENSION_MODULE

    scene, obj = _build(bpy, rig, WARMUP + n_frames, mode=mode)
    if obj.pose.ik_solver != "ITASC":
        obj.itasc.mode = mode
    pose = _pose(obj)
    spent = {name: 0.0 for _, name in PARTS}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.process_time() - start
        return wrapper

    modules = [(importlib.import_module(f"{EXTENSION_MODULE}.{module}"), name) for module, name in PARTS]
    originals = [getattr(module, name) for module, name in modules]
    for module, name in modules:
        setattr(module, name, timed(name, getattr(module, name)))
    warm, frames = range(1, WARMUP + 1), range(WARMUP + 1, WARMUP + n_frames + 1)
    best = {}
    try:
        for _ in range(passes):
            for side in (SIDES[0], SIDES[2]):
                _set_side(bpy, obj, side, pose)
                _play(scene, warm)
                spent.update({name: 0.0 for name in spent})
                start = time.process_time()
                for f in frames:
                    scene.frame_set(int(f))
                total = time.process_time() - start
                parts = {"frame": total} if side == SIDES[2] else {"frame": total, **spent}
                for name, value in parts.items():
                    key = name if side == SIDES[0] else "muted"
                    best[key] = min(best.get(key, np.inf), 1e3 * value / n_frames)
    finally:
        for (module, name), original in zip(modules, originals):
            setattr(module, name, original)
    _set_side(bpy, obj, SIDES[2], pose)
    best["frame - engine"] = best["frame"] - best["solve_animation"]
    best["handler - engine"] = best["solve_now"] - best["solve_animation"]
    best["frame - handler - muted"] = best["frame"] - best["solve_now"] - best["muted"]
    return {k: round(v, 3) for k, v in best.items()}


# How `write_cost_in_blender` writes: (handler list, foreach_set the chain's quaternions, tag).
WRITES = {"nothing": ("post", False, None), "transform tag": ("post", False, {"OBJECT"}),
          "quaternions": ("post", True, None), "quaternions + transform tag": ("post", True, {"OBJECT"}),
          "geometry tag": ("post", False, {"DATA"}),
          "quaternions + transform tag, before the frame": ("pre", True, {"OBJECT"})}


def write_cost_in_blender(rig, n_frames=40, passes=3):
    """CPU ms per `frame_set` with every IK muted and a frame change handler that writes the IK
    bones' and their parents' quaternions (a small turn) and/or tags the armature object, each way
    of WRITES (frame_change_post, or frame_change_pre: before Blender evaluates the frame); the
    best of `passes` passes. What Blender's evaluation after a pose write costs."""
    import bpy

    scene, obj = _build(bpy, rig, n_frames + 2)
    mute_ik(obj)
    bpy.context.view_layer.update()
    bones = obj.pose.bones
    order = {pb.name: i for i, pb in enumerate(bones)}
    rows = sorted({order[pb.name] for pb, _ in _iks(obj)} | {order[pb.parent.name] for pb, _ in _iks(obj) if pb.parent})
    turn = [0]

    def handler_for(quaternions, tag):
        def handler(*_):
            turn[0] += 1
            if quaternions:
                values = np.empty((len(bones), 4), np.float32)
                bones.foreach_get("rotation_quaternion", values.ravel())
                angle = 0.01 * (turn[0] % 7)
                values[rows] = (np.cos(angle), np.sin(angle), 0.0, 0.0)
                bones.foreach_set("rotation_quaternion", values.ravel())
            if tag:
                obj.update_tag(refresh=tag)
        return handler

    best = {}
    for _ in range(passes):
        for name, (when, quaternions, tag) in WRITES.items():
            handlers = bpy.app.handlers.frame_change_pre if when == "pre" else bpy.app.handlers.frame_change_post
            handler = handler_for(quaternions, tag)
            handlers.append(handler)
            try:
                scene.frame_set(1)
                start = time.process_time()
                for f in range(2, n_frames + 2):
                    scene.frame_set(f)
                ms = 1e3 * (time.process_time() - start) / n_frames
            finally:
                handlers.remove(handler)
            best[name] = min(best.get(name, np.inf), ms)
    return {"bones": len(bones), "written": len(rows), **{k: round(v, 3) for k, v in best.items()}}


# ---- host side --------------------------------------------------------------------------------

def _session(call, rig):
    # exit_at_once: Blender 4.2 crashes on exit after Rigify was enabled (see run_in_blender).
    return blender_session("live", call, exit_at_once=rig in RIGIFY)


def run(quick: bool = False, n_frames: int = 250) -> Table:
    n_frames = 50 if quick else n_frames
    repeats = 1 if quick else REPEATS
    table = Table(
        "live", "Live preview in animation and simulation mode: our add-on and Blender's iTaSC in the same mode "
        "or Standard IK",
        f"{n_frames} consecutive frames played in one bpy session per rig and mode (extension installed from its zip), "
        f"each frame one `scene.frame_set(f)` (which evaluates again the pose our frame_change_post handler "
        f"wrote), after {WARMUP} untimed warm-up frames. ours: `itasc.live_preview = True`, the add-on's "
        f"defaults: in animation mode every frame solved to convergence from the action's pose, as a bake solves "
        f"it; in simulation mode one simulation step per frame. Blender: `ik_param.mode` the same mode, its "
        f"other settings default ({{settings}}). Rigify generated: the rig Rigify generates ({{generated_bones}} bones; "
        f"`make demo`'s scene, tools.demo_rigify.build_generated: all four limbs in IK, poles on, the hand, foot "
        f"and pole controls keyed on every frame); theirs is its own Standard IK, as generated (Blender "
        f"evaluating every frame with it; it has no modes), ours in the mode by our panel's override. IK muted: "
        f"every IK constraint muted (and the drivers of its mute), no live preview (scene evaluation alone); above "
        f"muted: ms / frame minus the muted one. Each side's simulation restarts at every pass; passes alternate; "
        f"each frame's time is its best of {repeats} passes (other people's load on this machine only adds), ms / "
        f"frame their mean, median frame their median; best pass: the fastest whole pass. ours / theirs: below 1, "
        f"ours is faster. Errors: one more untimed pass of each side over the same frames, after each frame every "
        f"IK bone's evaluated tail measured against its target (m, float32); per frame the worst tail; > 1e-6 L "
        f"with L the shortest IK chain (6 m; the metarig's arms, {{rigify_l}}; the generated rig's arms, "
        f"{{generated_l}}); a target bone's head for a bone target. Simulation lags a moving target by design.",
        [Column("rig", "rig", text=True), Column("mode", "mode", text=True), Column("side", "solver", text=True),
         Column("ms_per_frame", "ms / frame", "{:.3f}"), Column("median_ms", "median frame ms", "{:.3f}"),
         Column("best_pass_ms", "best pass, ms / frame", "{:.3f}"),
         Column("above_muted", "above muted, ms", "{:.3f}"), Column("vs_theirs", "ours / theirs", "{:.2f}"),
         Column("vs_theirs_above", "ours / theirs above muted", "{:.2f}"), *ERRORS[:5]])
    version, settings = None, ""
    filled = {"rigify_l": "—", "generated_l": "—", "generated_bones": "—"}
    for label, rig in RIGS:
        for mode in MODES:
            data = _session(f"in_blender({rig!r}, {n_frames}, {repeats}, {mode!r})", rig)
            version, length = data["blender"], min(data["lengths"])
            if data["settings"]:
                settings = ", ".join(f"{k} {v}" for k, v in data["settings"].items() if k != "mode")
            if rig in RIGIFY:
                filled[f"{rig}_l"] = f"{length:.3f} m"
            if rig == "generated":
                filled["generated_bones"] = str(data["bones"])
            table.rows += _rows(label, mode.lower(), data, n_frames, length)
    table.title += f" (Blender {version})"
    for key, value in {**filled, "settings": settings}.items():
        table.caption = table.caption.replace("{" + key + "}", value)
    return table


def _rows(label, mode, data, n_frames, length):
    """The table's rows of one rig in one mode."""
    ours, theirs, muted = labels = data["sides"]
    ms = {side: 1e3 * float(np.mean(data[side]["best_frames"])) for side in labels}
    above = {side: ms[side] - ms[muted] for side in labels}
    rows = []
    for side in labels:
        d = data[side]
        row = {"rig": label, "mode": mode, "side": side, "ms_per_frame": ms[side], "totals": d["totals"],
               "median_ms": 1e3 * float(np.median(d["best_frames"])), "best_pass_ms": 1e3 * min(d["totals"]) / n_frames,
               "above_muted": above[side] if side != muted else None}
        if side == ours:
            row["vs_theirs"] = ratio(ms[side], ms[theirs])
            row["vs_theirs_above"] = ratio(above[side], above[theirs])
        if d["errors"]:
            worst = np.max(np.asarray(d["errors"], dtype=float), axis=1)
            row.update(error_stats(worst, length))
            row["errors"] = worst.tolist()
        rows.append(row)
    return rows


def draw(table: Table, path) -> None:
    plot(path, "Live preview: time per frame", "ms per frame (log)",
         {f"{r['rig']}, {r['mode']}: {r['side']}": r["ms_per_frame"] for r in table.rows})


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="cProfile of our live preview inside Blender")
    parser.add_argument("--profile", default="6", help="6, rigify (the metarig) or generated")
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--mode", default="ANIMATION", choices=("ANIMATION", "SIMULATION"))
    parser.add_argument("--overhead", action="store_true",
                        help="CPU ms per frame: the whole frame, our handler, the engine inside it, IK muted")
    parser.add_argument("--write-cost", action="store_true",
                        help="CPU ms per muted frame with a handler writing the pose each way (WRITES)")
    args = parser.parse_args()
    rig = args.profile if args.profile in RIGIFY else int(args.profile)
    if args.write_cost:
        print(_session(f"write_cost_in_blender({rig!r})", rig))
    elif args.overhead:
        print(_session(f"overhead_in_blender({rig!r}, {args.frames}, mode={args.mode!r})", rig))
    else:
        print(_session(f"profile_in_blender({rig!r}, {args.frames}, mode={args.mode!r})", rig))

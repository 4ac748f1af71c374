"""Live preview's animation-mode solves recorded in Blender, replayed outside it: the engine's
per-frame cost on a real rig without Blender's share, for profiling and A/B timing.

    python -m bench.live_replay record rigify /tmp/rigify.pkl      # in a fresh bpy process (Rigify's metarig)
    python -m bench.live_replay record generated /tmp/gen.pkl      # the rig Rigify generates
    python -m bench.live_replay time /tmp/rigify.pkl               # ms per frame and per iteration
    python -m bench.live_replay profile /tmp/rigify.pkl            # cProfile of the replay

`record` plays the frames bench.live plays (its warm-up included) with live preview on in
animation mode, and keeps every `solving.solve_frames` call's engine inputs: the scene's model,
constraints and object count, and per frame q0, targets, bases, joint-control values, settings,
and the answer and iterations live preview got. `time` solves them again, one frame per call as
live preview does, reports the largest difference of any joint value from the recorded answer
and the frames whose iteration counts differ from the recorded ones, and the CPU
time (`time.process_time`: on a shared machine other processes' load lengthens wall time far
more). The file is a pickle of our own objects: load only files you recorded.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time

import numpy as np

_EXTENSION_PREFIX = "bl_ext.user_default.itasc_ik."


def record_in_blender(rig, n_frames, path):
    """Inside Blender: play `rig` (bench.live's) with live preview in animation mode and pickle every
    solve's inputs to `path`. Returns how many solves were recorded."""
    import importlib

    import bpy

    from tools.blender_session import EXTENSION_MODULE

    from .bake import _build
    from .live import SIDES, WARMUP, _play, _pose, _set_side

    solving = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.solving")
    scene, obj = _build(bpy, rig, WARMUP + n_frames, mode="ANIMATION")
    if obj.pose.ik_solver != "ITASC":
        obj.itasc.mode = "ANIMATION"
    _set_side(bpy, obj, SIDES[0], _pose(obj))
    calls, original = [], solving.solve_frames

    def recording(rig_, engine_scene, plan, samples, q0, objects, values, settings, poles=None, bases=None):
        result = original(rig_, engine_scene, plan, samples, q0, objects, values, settings, poles, bases)
        calls.append(dict(
            scene=dict(model=engine_scene.model, constraints=engine_scene.constraints, n_objects=engine_scene.n_objects),
            closed_form=plan is not None, q0=q0.copy(), objects=objects.copy(),
            bases=(samples.bases if bases is None else bases).copy(), values=None if values is None else values.copy(),
            settings=settings, q=result[0].q.copy(), iterations=result[0].iterations.copy()))
        return result

    solving.solve_frames = recording
    try:
        _play(scene, range(1, WARMUP + n_frames + 1))
    finally:
        solving.solve_frames = original
    with open(path, "wb") as fh:
        pickle.dump(calls, fh)
    return len(calls)


class _Unpickler(pickle.Unpickler):
    """Classes recorded inside Blender live in the installed extension's package: take ours."""

    def find_class(self, module, name):
        if module.startswith(_EXTENSION_PREFIX):
            module = module[len(_EXTENSION_PREFIX):]
        return super().find_class(module, name)


def load(path):
    """(engine Scene, recorded calls) of a recording; frames solved in closed form are left out."""
    from solver import Model, Scene

    with open(path, "rb") as fh:
        calls = _Unpickler(fh).load()
    calls = [c for c in calls if not c["closed_form"]]
    if not calls:
        raise SystemExit(f"{path}: no engine solves recorded")
    first = calls[0]["scene"]
    model = first["model"]        # built again: its derived constants are this checkout's
    model = Model(model.segments, model.armature_names)
    return Scene(model, first["constraints"], n_objects=first["n_objects"]), calls


def replay(scene, calls):
    """Every recorded frame solved again, one call each; the results."""
    from solver import solve_animation

    return [solve_animation(scene, c["q0"], c["objects"], c["bases"], c["settings"], c["values"]) for c in calls]


def time_replay(path, repeats=5):
    scene, calls = load(path)
    replay(scene, calls[:5])
    best = np.inf
    for _ in range(repeats):
        start = time.process_time()
        results = replay(scene, calls)
        best = min(best, time.process_time() - start)
    evaluate = _evaluate_time(scene, calls, repeats)
    largest = max(float(np.abs(r.q - c["q"]).max(initial=0.0)) for r, c in zip(results, calls))
    other_iterations = sum(not np.array_equal(r.iterations, c["iterations"]) for r, c in zip(results, calls))
    iterations = sum(int(r.iterations.sum()) for r in results)
    return (f"{path}: {len(calls)} frames, {1e3 * best / len(calls):.3f} ms CPU per frame, "
            f"{iterations / len(calls):.2f} iterations per frame, {1e6 * best / iterations:.1f} µs per iteration "
            f"(best of {repeats}), of which scene.evaluate {1e6 * evaluate / iterations:.1f} µs; "
            f"largest |q - recorded| {largest:.2e}, "
            f"{other_iterations} frames with other iteration counts than recorded")


def _evaluate_time(scene, calls, repeats):
    """CPU time of the replay's scene.evaluate calls alone (a separate replay with the calls timed;
    best of `repeats`)."""
    spent = [0.0]
    evaluate = scene.evaluate

    def timed(*args, **kwargs):
        began = time.process_time()
        try:
            return evaluate(*args, **kwargs)
        finally:
            spent[0] += time.process_time() - began

    scene.evaluate = timed
    best = np.inf
    try:
        for _ in range(repeats):
            spent[0] = 0.0
            replay(scene, calls)
            best = min(best, spent[0])
    finally:
        del scene.evaluate
    return best


def profile_replay(path, top=35):
    import cProfile
    import io
    import pstats

    scene, calls = load(path)
    replay(scene, calls[:5])
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    replay(scene, calls)
    profiler.disable()
    text = io.StringIO()
    for key in ("cumulative", "tottime"):
        pstats.Stats(profiler, stream=text).sort_stats(key).print_stats(top)
    return text.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.live_replay", description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("record", "time", "profile"))
    parser.add_argument("args", nargs="+", help="record: RIG PATH (RIG 6, rigify or generated); time/profile: PATH")
    parser.add_argument("--frames", type=int, default=250)
    args = parser.parse_args(argv)
    if args.what == "record":
        from .bake import RIGIFY
        from .common import blender_session

        rig, path = args.args
        rig = rig if rig in RIGIFY else int(rig)
        print(blender_session("live_replay", f"record_in_blender({rig!r}, {args.frames}, {path!r})",
                              exit_at_once=rig in RIGIFY), "solves recorded in", path)
    elif args.what == "time":
        print(time_replay(args.args[0]))
    else:
        print(profile_replay(args.args[0]))


if __name__ == "__main__":
    sys.exit(main())

"""Blender's own IK solvers (iTaSC and Standard/"LEGACY") on a chain tracking a moving target.

A reference for our engine, not a test: a straight chain of ``n_bones`` bones, each 1 unit
along +Z from the origin (``solver.examples.straight_chain``), an IK constraint on the last bone
(chain over all bones) whose target is an empty keyframed, frame 1..F, on
``solver.examples.lissajous(F, n_bones)``: the very targets our engine's benchmarks use, so
both solvers see the same path. For each frame: set the frame, let Blender evaluate, measure the
distance from the last bone's tail to the evaluated target in world space (Blender works in
float32: errors below ~1e-7 x the coordinates are rounding).

    .venv/bin/python -m tools.blender_ik --bones 6 30 --frames 1000

``run_blender_ik`` runs inside Blender (the repository root on ``sys.path``, so ``solver``
imports there); ``measure`` runs it in a fresh bpy subprocess.
"""

import argparse
import statistics

from tools.blender_session import ROOT, run_in_blender

TOLERANCE = 0.01  # "off" means further than 1 cm (scene units are metres)


def target_positions(n_bones, n_frames):
    """Target positions (list of xyz) for frames 1..n_frames: the engine's Lissajous path."""
    from solver.examples import lissajous

    return lissajous(n_frames, float(n_bones))[:, 0, :3, 3].tolist()


def _build_scene(n_bones, n_frames, solver, itasc_settings):
    import bpy

    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, n_frames

    arm = bpy.data.armatures.new("chain")
    chain = bpy.data.objects.new("chain", arm)
    scene.collection.objects.link(chain)
    bpy.context.view_layer.objects.active = chain
    bpy.ops.object.mode_set(mode="EDIT")
    parent = None
    for i in range(n_bones):
        bone = arm.edit_bones.new(f"bone{i:02d}")
        bone.head, bone.tail = (0.0, 0.0, float(i)), (0.0, 0.0, float(i + 1))
        bone.parent, bone.use_connect = parent, parent is not None
        parent = bone
    bpy.ops.object.mode_set(mode="OBJECT")

    target = bpy.data.objects.new("target", None)
    scene.collection.objects.link(target)
    for frame, xyz in enumerate(target_positions(n_bones, n_frames), start=1):
        target.location = xyz
        target.keyframe_insert("location", frame=frame)

    ik = chain.pose.bones[-1].constraints.new("IK")
    ik.target, ik.chain_count, ik.use_tail = target, n_bones, True

    chain.pose.ik_solver = solver
    if solver == "ITASC":
        params = chain.pose.ik_param
        params.mode = "ANIMATION"
        for name, value in itasc_settings.items():
            # pose.ik_param.solver (SDLS/DLS) is spelled itasc_solver here: `solver` is taken.
            setattr(params, "solver" if name == "itasc_solver" else name, value)
    elif itasc_settings:
        raise ValueError(f"iTaSC settings given for solver {solver!r}: {itasc_settings}")
    return scene, chain, target


def _settings(chain):
    params = chain.pose.ik_param
    if params is None:
        return {}
    return {p.identifier: getattr(params, p.identifier) for p in params.bl_rna.properties
            if p.identifier != "rna_type" and not p.is_readonly}


def run_blender_ik(n_bones=6, n_frames=1000, solver="ITASC", **itasc_settings):
    """Inside Blender: track the Lissajous target over all frames; return errors and timing.

    solver: "ITASC" or "LEGACY" (Blender's Standard IK). itasc_settings: attributes of
    ``pose.ik_param`` (mode, precision, iterations, reiteration_method, ...; its ``solver``,
    SDLS or DLS, is passed as ``itasc_solver``); mode defaults to "ANIMATION".
    """
    import time

    import bpy

    scene, chain, target = _build_scene(n_bones, n_frames, solver, itasc_settings)
    errors = []
    start = time.perf_counter()
    for frame in range(1, n_frames + 1):
        scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        chain_eval, target_eval = chain.evaluated_get(depsgraph), target.evaluated_get(depsgraph)
        tip = chain_eval.matrix_world @ chain_eval.pose.bones[-1].tail
        errors.append((tip - target_eval.matrix_world.translation).length)
    seconds = time.perf_counter() - start

    return {
        "blender": bpy.app.version_string,
        "solver": solver,
        "settings": _settings(chain),
        "n_bones": n_bones,
        "frames": n_frames,
        "off_1cm": sum(e > TOLERANCE for e in errors) / n_frames,
        "median_error": statistics.median(errors),
        "max_error": max(errors),
        "seconds": seconds,
        "errors": errors,
    }


def measure(n_bones=6, n_frames=1000, solver="ITASC", python=None, **itasc_settings):
    """Run ``run_blender_ik`` in a fresh bpy process (``python``: interpreter with bpy)."""
    call = f"run_blender_ik({n_bones!r}, {n_frames!r}, {solver!r}, **{itasc_settings!r})"
    return run_in_blender(f"from tools.blender_ik import run_blender_ik\nresult = {call}\n",
                          python=python, sys_path=[ROOT])


# (label, pose.ik_solver, iTaSC settings) rows of the table that main() prints.
CONFIGS = [
    ("iTaSC animation, defaults", "ITASC", {}),
    ("iTaSC animation, 1e-4, 1000 it.", "ITASC", {"precision": 1e-4, "iterations": 1000}),
    ("iTaSC simulation, defaults", "ITASC", {"mode": "SIMULATION"}),
    ("Standard IK (LEGACY)", "LEGACY", {}),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Blender's own IK on a chain tracking a Lissajous target")
    parser.add_argument("--bones", type=int, nargs="+", default=[6, 30])
    parser.add_argument("--frames", type=int, default=1000)
    args = parser.parse_args(argv)
    print(f"{'configuration':32} {'bones':>5} {'frames':>6} {'off>1cm':>8} {'median m':>9} {'max m':>9} "
          f"{'seconds':>7} {'ms/frame':>8}")
    for n_bones in args.bones:
        for label, solver, settings in CONFIGS:
            r = measure(n_bones, args.frames, solver, **settings)
            print(f"{label:32} {n_bones:5d} {r['frames']:6d} {r['off_1cm']:8.1%} {r['median_error']:9.2e} "
                  f"{r['max_error']:9.2e} {r['seconds']:7.2f} {1000 * r['seconds'] / r['frames']:8.3f}")
    print(f"Blender {r['blender']}; off>1cm: fraction of frames whose tip is over 1 cm from the target")


if __name__ == "__main__":
    main()

"""The main job, headless: Rigify's human metarig with both hands and both feet on moving targets,
baked by our solver and by Blender's own iTaSC, errors and time side by side.

    .venv/bin/python tools/demo_rigify.py [--frames 250] [--out out] [--zip ZIP] [--python PY]

What it does (`make demo` runs it after `make build`):

- starts a fresh Blender (``bpy`` as a module, `tools.blender_session`), installs and enables the
  extension zip, enables Blender's bundled Rigify and adds its human metarig;
- puts a Copy Pose (position only, "Use Tail") IK constraint on each hand (chain upper_arm ->
  forearm -> hand, chain count 3) and each foot (thigh -> shin -> foot, chain count 3), each aimed
  at an empty keyframed on every frame along a path: the hands circle in front of the chest, the
  feet step in place (back along the floor, forward through the air), left and right half a
  cycle apart;
- Blender's own iTaSC (``pose.ik_solver = 'ITASC'``, its default settings, animation mode)
  first: every frame evaluated by Blender and each hand/foot tail measured against its target in
  world space; our extension has not touched the rig yet;
- then ours through the installed extension's Python API (``api.bake``), which keys the chains
  and mutes Blender's IK constraints while ours drive the rig, and Blender evaluates every frame
  of the baked keys and measures the same distances (float32, as Blender stores poses);
- prints, per solver, the per-frame error (the worst of the four effectors in each frame: median,
  99th percentile, max, frames more than 1 mm off) and the time, saves ``<out>/demo.blend`` (our
  bake, Blender's IK muted) and plots the error per frame (``<out>/demo_error.png``, log scale).

``run_in_scene`` is the part that runs inside Blender (the repository root on ``sys.path``);
``run_demo`` runs it in a fresh bpy process and writes the plot on this side.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

if __package__ in (None, ""):              # run as a script: make `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import build_extension  # noqa: E402
from tools.blender_session import EXTENSION_MODULE, ROOT, run_in_blender  # noqa: E402

# (effector bone, chain count): the chain runs from the effector up that many bones.
EFFECTORS = (("hand.L", 3), ("hand.R", 3), ("foot.L", 3), ("foot.R", 3))
OFF = 1e-3                 # "off" means further than 1 mm from the target (scene units are metres)
PRECISION = 1e-7           # what we ask of our solver, in metres (its default is 1e-6)

BEND_MAX = math.radians(150)   # how far knees and elbows may bend from the rest pose
END_STIFFNESS = 0.9         # IK stiffness of hands and feet (0: free, 1: frozen)
# The pose both solvers start every frame from (animation mode): knees softly bent, feet flat, as
# a walker stands; rotations about each bone's X axis (radians). Straight legs would leave a foot
# only its ankle to lift it with: bending a straight knee first moves the ankle back, hardly up.
READY_POSE = {"thigh": -0.2, "shin": 0.4, "foot": -0.2}
HAND_PERIOD, FOOT_PERIOD = 125.0, 62.5     # frames per circle / per step cycle
HAND_RADIUS, STEP_HALF_LENGTH, STEP_HEIGHT = 0.09, 0.12, 0.10


def target_path(name, frame, stance):
    """Where the target of effector `name` is at `frame` (metres, world = armature space here).

    Hands: circles of radius HAND_RADIUS in the frontal plane, centred in front of the chest on the
    hand's side (the metarig faces -Y); the right hand mirrors the left half a circle later. Feet:
    stepping in place around `stance`, where the foot's tail is in the ready pose: back along the
    floor while the foot is down, forward through an arc STEP_HEIGHT high while it is up; the
    right foot half a cycle after the left."""
    side = 1.0 if name.endswith(".L") else -1.0
    if name.startswith("hand"):
        a = 2 * math.pi * (frame - 1) / HAND_PERIOD + (0.0 if side > 0 else math.pi)
        return (side * (0.16 + HAND_RADIUS * math.cos(a)),
                -0.32 + 0.03 * math.sin(a),
                1.28 + HAND_RADIUS * math.sin(a))
    u = 2 * math.pi * (frame - 1) / FOOT_PERIOD + (0.0 if side > 0 else math.pi)
    # y grows (backwards) while cos(u) > 0, the foot down; it comes forward, lifted, while cos(u) < 0.
    return (stance[0],
            stance[1] + STEP_HALF_LENGTH * math.sin(u),
            stance[2] + STEP_HEIGHT * max(0.0, -math.cos(u)))


def _clear_scene(bpy):
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    for data in (bpy.data.meshes, bpy.data.cameras, bpy.data.lights, bpy.data.armatures, bpy.data.actions):
        for block in list(data):
            data.remove(block)


def _build(bpy, n_frames):
    """The metarig, its four IK constraints and their keyframed targets; returns (scene, rig, targets)."""
    from mathutils import Quaternion

    _clear_scene(bpy)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, n_frames
    scene.frame_set(1)
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    bpy.ops.object.armature_human_metarig_add()
    rig = bpy.context.active_object
    rig.name = "metarig"
    bpy.ops.object.mode_set(mode="OBJECT")

    for side in ("L", "R"):
        for bone, angle in READY_POSE.items():
            rig.pose.bones[f"{bone}.{side}"].rotation_quaternion = Quaternion((1.0, 0.0, 0.0), angle)
    bpy.context.view_layer.update()

    targets = {}
    for bone, chain_count in EFFECTORS:
        stance = tuple(rig.matrix_world @ rig.pose.bones[bone].tail)
        target = bpy.data.objects.new(f"target_{bone}", None)
        target.empty_display_type, target.empty_display_size = "SPHERE", 0.03
        scene.collection.objects.link(target)
        for frame in range(1, n_frames + 1):
            target.location = target_path(bone, frame, stance)
            target.keyframe_insert("location", frame=frame)
        targets[bone] = target
        ik = rig.pose.bones[bone].constraints.new("IK")
        ik.target, ik.chain_count, ik.use_tail = target, chain_count, True
        ik.use_location, ik.use_rotation = True, False
    # The way a rigger sets up limbs for IK: knees and elbows are hinges about their X axis (+X
    # bends them the natural way on this rig; the rest pose is a little bent already), held between
    # the rest pose and BEND_MAX, so never overstretched; hands and feet are stiff, so the
    # knee lifts a foot and the elbow carries a hand rather than the wrist or ankle swivelling.
    for side in ("L", "R"):
        for hinge in (f"forearm.{side}", f"shin.{side}"):
            pb = rig.pose.bones[hinge]
            pb.lock_ik_y = pb.lock_ik_z = True
            pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, 0.0, BEND_MAX
        for end in (f"hand.{side}", f"foot.{side}"):
            pb = rig.pose.bones[end]
            pb.ik_stiffness_x = pb.ik_stiffness_y = pb.ik_stiffness_z = END_STIFFNESS
    rig.pose.ik_solver = "ITASC"            # Blender's own iTaSC, its default settings
    return scene, rig, targets


def build_keyed(bpy, n_frames):
    """The demo's scene with its targets keyed on every frame 1..n_frames along the same paths,
    one foreach_set per F-curve (n_frames keyframe_insert calls per target would take long).
    Returns the scene, the rig and the targets by effector bone."""
    import importlib

    import numpy as np

    keys = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.keys")
    scene, rig, targets = _build(bpy, 2)
    frames = np.arange(1, n_frames + 1, dtype=float)
    for bone, target in targets.items():
        fcurves = sorted(keys.Channels(target).all(), key=lambda fc: fc.array_index)
        first = np.array([fc.keyframe_points[0].co[1] for fc in fcurves])
        stance = tuple(first - np.array(target_path(bone, 1, (0.0, 0.0, 0.0))))
        path = np.array([target_path(bone, f, stance) for f in range(1, n_frames + 1)])
        for fc in fcurves:
            points = fc.keyframe_points
            points.clear()
            points.add(n_frames)
            points.foreach_set("co", np.column_stack([frames, path[:, fc.array_index]]).astype(np.float32).ravel())
            fc.update()
    scene.frame_end = n_frames
    return scene, rig, targets


def _chain_length(rig, bone, chain_count):
    pb, total = rig.pose.bones[bone], 0.0
    for _ in range(chain_count):
        total += pb.bone.length
        pb = pb.parent
    return total


def _measure(bpy, scene, rig, targets, n_frames):
    """Per frame, each effector's tail-to-target distance as Blender evaluates the scene (world
    space); and the seconds that took."""
    from mathutils import Vector

    errors = []
    start = time.perf_counter()
    for frame in range(1, n_frames + 1):
        scene.frame_set(frame)
        dg = bpy.context.evaluated_depsgraph_get()
        rig_eval = rig.evaluated_get(dg)
        row = []
        for bone, _ in EFFECTORS:
            pb = rig_eval.pose.bones[bone]
            tail = rig_eval.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))
            row.append((tail - targets[bone].evaluated_get(dg).matrix_world.translation).length)
        errors.append(row)
    return errors, time.perf_counter() - start


def run_in_scene(n_frames=250, out_dir=None, precision=PRECISION):
    """Inside Blender, the extension enabled: build the scene, measure Blender's iTaSC, bake ours,
    measure it, save ``<out_dir>/demo.blend``. Returns plain data (JSON-able)."""
    import importlib

    import bpy
    import numpy as np

    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    scene, rig, targets = _build(bpy, n_frames)
    params = rig.pose.ik_param
    blender_settings = {"mode": params.mode, "solver": params.solver, "precision": params.precision,
                        "iterations": params.iterations}

    blender_errors, blender_seconds = _measure(bpy, scene, rig, targets, n_frames)

    start = time.perf_counter()
    result = api.bake(rig, 1, n_frames, precision=precision)
    bake_seconds = time.perf_counter() - start
    muted = [c.mute for bone, _ in EFFECTORS for c in rig.pose.bones[bone].constraints if c.type == "IK"]
    ours_errors, ours_eval_seconds = _measure(bpy, scene, rig, targets, n_frames)

    # The API reports its errors per constraint, "bone/constraint": put them in EFFECTORS' order.
    columns = [next(i for i, name in enumerate(result.constraints) if name.split("/")[0] == bone)
               for bone, _ in EFFECTORS]
    scene.frame_set(1)
    saved = ""
    if out_dir is not None:
        saved = str(Path(out_dir) / "demo.blend")
        bpy.context.preferences.filepaths.save_version = 0       # no demo.blend1 next to it
        bpy.ops.wm.save_as_mainfile(filepath=saved)
    return {
        "blender_version": bpy.app.version_string,
        "frames": n_frames,
        "effectors": [bone for bone, _ in EFFECTORS],
        "chain_lengths": [_chain_length(rig, bone, count) for bone, count in EFFECTORS],
        "blender": {"errors": blender_errors, "seconds": blender_seconds, "settings": blender_settings},
        "ours": {"errors": ours_errors, "seconds": bake_seconds, "api_seconds": result.seconds,
                 "eval_seconds": ours_eval_seconds,
                 "reported": np.asarray(result.position_error)[:, columns].tolist(),
                 "converged": bool(np.all(result.converged)), "iterations_max": int(np.max(result.iterations)),
                 "method": result.method, "precision": precision, "muted": muted,
                 "warnings": list(result.warnings)},
        "blend": saved,
    }


def statistics(errors):
    """Per-frame error = the worst effector in that frame: median, 99th percentile, max, frames off."""
    import numpy as np

    worst = np.max(np.asarray(errors, dtype=float), axis=1)
    return {"median": float(np.median(worst)), "p99": float(np.percentile(worst, 99)),
            "max": float(worst.max()), "off": int(np.count_nonzero(worst > OFF)), "frames": len(worst)}


def table(data):
    """The side-by-side table (a string)."""
    ours, blender = data["ours"], data["blender"]
    n = data["frames"]
    s = blender["settings"]
    lengths = ", ".join(f"{b} {length:.3f} m" for b, length in zip(data["effectors"], data["chain_lengths"]))
    rows = [
        (f"ours (api.bake, {ours['method']}, precision {ours['precision']:g} m)", statistics(ours["errors"]),
         ours["seconds"]),
        (f"Blender iTaSC ({s['mode'].lower()}, {s['solver']}, precision {s['precision']:g}, {s['iterations']} it.)",
         statistics(blender["errors"]), blender["seconds"]),
    ]
    width = max(len(label) for label, _, _ in rows)
    lines = [
        f"Rigify human metarig, Blender {data['blender_version']}: hands and feet on moving targets, {n} frames",
        f"chains of 3 bones: {lengths}",
        "error per frame = the worst of the four tails' distances to their targets, measured by Blender (m)",
        f"{'solver':{width}}  {'median':>9} {'p99':>9} {'max':>9} {'>1 mm':>6} {'seconds':>8} {'ms/frame':>8}",
    ]
    for label, st, seconds in rows:
        lines.append(f"{label:{width}}  {st['median']:9.2e} {st['p99']:9.2e} {st['max']:9.2e} {st['off']:6d} "
                     f"{seconds:8.3f} {1000 * seconds / n:8.2f}")
    lines.append(f"ours: time = the whole bake (reading targets, solving, writing keys); all converged: "
                 f"{ours['converged']}; largest error the solver reports {_max(ours['reported']):.2e} m")
    lines.append("Blender: time = evaluating every frame with its iTaSC on (its IK runs in the evaluation)")
    return "\n".join(lines)


def _max(rows):
    return max(max(row) for row in rows)


def plot(data, path):
    """Error per frame (the worst effector), both solvers, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    frames = np.arange(1, data["frames"] + 1)
    floor = 1e-10                          # exact zeros would vanish from a log axis
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=120)
    for key, label, color in (("blender", "Blender's iTaSC (defaults)", "tab:orange"),
                              ("ours", "ours (itasc_ik)", "tab:blue")):
        worst = np.maximum(np.max(np.asarray(data[key]["errors"]), axis=1), floor)
        st = statistics(data[key]["errors"])
        ax.plot(frames, worst, color=color, lw=1.4,
                label=f"{label}: median {st['median']:.1e} m, max {st['max']:.1e} m, "
                      f"{st['off']} frames > 1 mm, {data[key]['seconds']:.2f} s")
    ax.axhline(OFF, color="0.4", ls="--", lw=1)
    ax.text(frames[0], OFF * 1.3, "1 mm", color="0.3", fontsize=8)
    tolerance = 1e-6 * min(data["chain_lengths"])
    ax.axhline(tolerance, color="0.4", ls=":", lw=1)
    ax.text(frames[0], tolerance * 1.3, "1e-6 × arm chain length", color="0.3", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(bottom=1e-8)
    ax.text(frames[0], 1.6e-8, "Blender measures in float32: about 1e-7 m at these coordinates is its rounding",
            color="0.3", fontsize=8)
    ax.set_xlim(frames[0], frames[-1])
    ax.set_xlabel("frame")
    ax.set_ylabel("worst hand/foot tail to target (m)")
    ax.set_title(f"Rigify human metarig, hands and feet on moving targets (Blender {data['blender_version']})",
                 fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="center right", fontsize=8, framealpha=0.9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def run_demo(n_frames=250, out_dir=ROOT / "out", extension_zip=None, python=None):
    """Run the demo in a fresh bpy process (``python``: an interpreter with bpy; default this one),
    write ``demo.blend`` and ``demo_error.png`` into `out_dir`; return the data and the table."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if extension_zip is None:                  # the sources as they are now, where `make build` puts them
        extension_zip = build_extension.write_zip(ROOT / "dist")
    snippet = (f"from tools.demo_rigify import run_in_scene\n"
               f"result = run_in_scene({int(n_frames)!r}, {str(out_dir)!r})\n")
    # exit_at_once: Blender 4.2 crashes on exit after Rigify was enabled (see run_in_blender).
    data = run_in_blender(snippet, extension_zip=extension_zip, python=python, sys_path=[ROOT],
                          exit_at_once=True)
    data["plot"] = str(plot(data, out_dir / "demo_error.png"))
    data["table"] = table(data)
    return data


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--out", type=Path, default=ROOT / "out", help="where demo.blend and demo_error.png go")
    parser.add_argument("--zip", type=Path, default=None,
                        help="the extension zip to install (default: build dist/<id>-<version>.zip from the sources)")
    parser.add_argument("--python", default=None, help="interpreter with bpy for the Blender side")
    args = parser.parse_args(argv)
    data = run_demo(args.frames, args.out, args.zip, args.python)
    print(data["table"])
    print(f"wrote {data['blend']} and {data['plot']}")
    return data


if __name__ == "__main__":
    main()

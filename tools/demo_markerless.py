"""Markerless demo: Pose2Sim's balancing trial (../shared/data/markerless_pose2sim: 21 HALPE_26
keypoints triangulated from four videos, 60 Hz; calibrated on its static trial) onto the rig
Rigify generates from its human metarig and onto the metarig itself, ours beside the
rotation-copy baseline (each bone aimed along its two keypoints).

In a fresh headless Blender with the extension installed from the built zip: two rigs generated
from one metarig and a copy of the metarig; `api.fit_keypoints` keys one rig of each kind with
the fit, the other with the baseline (on the same calibration); the rigs are then set 1 m apart
so all four show. Prints per case the mean keypoint error (Blender's evaluation of the keys), the
jitter (RMS angular acceleration of the bones relative to their parents, as Blender shows them),
the stance foot's drift and the time; saves out/markerless.blend and out/markerless.png (per
frame: keypoint error, jitter, and the stance foot's drift beside the raw keypoints' own).

    .venv/bin/python tools/demo_markerless.py          # or: make demo-markerless
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):              # run as a script: make `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.blender_session import EXTENSION_MODULE, OUT, ROOT, run_demo_scene  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "markerless_pose2sim"
CASES = (("generated", "fit"), ("generated", "copy"), ("metarig", "fit"), ("metarig", "copy"))


def stance_foot(positions, names):
    """The side ("L" or "R") whose foot keypoints (heel, toes, ankle) stay nearest where they
    were at the first frame over most of the trial (the median frame's distance), and their rows."""
    import numpy as np

    rows = {s: [names.index(f"{s}{p}") for p in ("Heel", "BigToe", "SmallToe", "Ankle")] for s in "LR"}
    moved = {s: float(np.nanmedian(np.linalg.norm(positions[:, r] - positions[0, r], axis=-1))) for s, r in rows.items()}
    side = min(moved, key=moved.get)
    return side, rows[side]


def jitter(world, parents, names, rate):
    """Per frame (F,) the RMS over bones of the angular acceleration (rad/s^2) of each bone's
    rotation relative to its parent (world matrices (F, B, 4, 4)); NaN at the first and last
    frame. With R the relative rotation, w(f) = log(R(f)^T R(f+1)) rate and a = (w(f) - w(f-1)) rate."""
    import importlib

    import numpy as np

    log_map = importlib.import_module(f"{EXTENSION_MODULE}.solver.rotations").log_map
    R = world[..., :3, :3] / np.linalg.norm(world[..., :3, :3], axis=-2, keepdims=True)
    at = {n: i for i, n in enumerate(names)}
    local = np.stack([R[:, b] if parents.get(n) not in at else np.swapaxes(R[:, at[parents[n]]], -1, -2) @ R[:, b]
                      for b, n in enumerate(names)], axis=1)
    w = log_map(np.swapaxes(local[:-1], -1, -2) @ local[1:]) * rate
    a = np.linalg.norm(np.diff(w, axis=0), axis=-1) * rate
    out = np.full(world.shape[0], np.nan)
    out[1:-1] = np.sqrt(np.mean(a ** 2, axis=1))
    return out


def run_in_scene(out_dir, first=0, count=None):
    """Inside Blender: the rigs, the four fits, the .blend; returns the figures."""
    import importlib

    import bpy
    import numpy as np

    api = importlib.import_module(f"{EXTENSION_MODULE}.itasc_addon.api")
    target = importlib.import_module(f"{EXTENSION_MODULE}.itasc_addon.retarget.target")
    keypoints = importlib.import_module(f"{EXTENSION_MODULE}.solver.keypoints")
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    bpy.ops.wm.read_homefile(use_empty=True)
    static = keypoints.read_keypoints(DATA / "static_0-12.trc")
    trial = keypoints.read_keypoints(DATA / "balancing_0-100.trc")
    trial = trial.frames(slice(first, None if count is None else first + count))
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = int(round(trial.rate)), 1.0
    scene.frame_start, scene.frame_end = 1, trial.n_frames
    bpy.ops.object.armature_human_metarig_add()
    metarig = bpy.context.view_layer.objects.active
    bpy.ops.object.mode_set(mode="OBJECT")
    rigs = {}
    for method in ("fit", "copy"):
        metarig.data.rigify_target_rig = None
        bpy.context.view_layer.objects.active = metarig
        if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
            raise RuntimeError("Rigify could not generate its rig")
        rigs["generated", method] = bpy.context.view_layer.objects.active
        rigs["generated", method].name = f"rigify_{method}"
    copy = metarig.copy()
    copy.data = metarig.data.copy()
    scene.collection.objects.link(copy)
    metarig.name, copy.name = "metarig_fit", "metarig_copy"
    rigs["metarig", "fit"], rigs["metarig", "copy"] = metarig, copy
    side, rows = None, None
    out = {"cases": {}, "rate": trial.rate, "blender": bpy.app.version_string}
    for x, (kind, method) in enumerate(CASES):
        rig = rigs[kind, method]
        result = api.fit_keypoints(rig, trial, static=static, frame_start=1, method=method)
        if side is None:
            side, rows = stance_foot(result.data, result.names)
            out["frames"], out["names"], out["stance"] = result.frames.tolist(), result.names, side
            raw = result.data[:, rows]
            out["raw_drift"] = np.nanmean(np.linalg.norm(raw - raw[0], axis=-1), axis=1).tolist()
        foot = result.points[:, rows]
        out["cases"][f"{kind} {method}"] = {
            "error": np.nanmean(result.error, axis=1).tolist(), "mean_error": result.mean_error,
            "jitter": np.nan_to_num(jitter(result.bone_matrices, target.parents_of(rig), result.bone_names,
                                           trial.rate), nan=-1.0).tolist(),
            "drift": np.mean(np.linalg.norm(foot - foot[0], axis=-1), axis=1).tolist(),
            "seconds": result.seconds, "solve_seconds": result.solve_seconds,
            "engine_mean": None if result.engine is None else float(np.nanmean(result.engine.fit.error)),
            "scale": result.scale}
        rig.location.x += 1.0 * x
    blend = Path(out_dir) / "markerless.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend), check_existing=False)
    out["blend"] = str(blend)
    return out


def table(data):
    """Per case: mean keypoint error, jitter, stance foot drift (mm), seconds."""
    import numpy as np

    lines = [f"Pose2Sim's balancing trial ({len(data['frames'])} frames at {data['rate']:g} Hz), Blender "
             f"{data['blender']}; stance foot {data['stance']}, its keypoints drift "
             f"{np.median(data['raw_drift']) * 1e3:.1f} mm (median frame) in the raw data",
             f"{'case':<20}{'error (mm)':>12}{'engine (mm)':>13}{'jitter (rad/s²)':>17}{'foot drift median (mm)':>24}"
             f"{'seconds':>9}"]
    for case, d in data["cases"].items():
        j = np.array(d["jitter"])
        engine = "" if d["engine_mean"] is None else f"{d['engine_mean'] * 1e3:.3f}"
        lines.append(f"{case:<20}{d['mean_error'] * 1e3:>12.3f}{engine:>13}{np.sqrt(np.mean(j[j >= 0] ** 2)):>17.1f}"
                     f"{np.median(d['drift']) * 1e3:>24.1f}{d['seconds']:>9.1f}")
    lines.append("errors and drift in rig units (the rigs' metres), measured on Blender's evaluation of the keys")
    return "\n".join(lines)


def plot(data, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    frames = np.array(data["frames"])
    fig, axes = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    for case, d in data["cases"].items():
        style = "-" if case.endswith("fit") else ":"
        axes[0].plot(frames, np.array(d["error"]) * 1e3, style, lw=1.2, label=case)
        j = np.array(d["jitter"], float)
        axes[1].plot(frames, np.where(j < 0, np.nan, j), style, lw=1.2, label=case)
        axes[2].plot(frames, np.array(d["drift"]) * 1e3, style, lw=1.2, label=case)
    axes[2].plot(frames, np.array(data["raw_drift"]) * 1e3, "k--", lw=1, label="raw keypoints (scaled)")
    axes[0].set_ylabel("mean keypoint error (mm)")
    axes[1].set_ylabel("jitter: RMS joint\nacceleration (rad/s²)")
    axes[1].set_yscale("log")
    axes[2].set_ylabel(f"stance foot ({data['stance']})\ndrift from frame 1 (mm)")
    axes[2].set_ylim(0, 150)                   # the trial ends with a step off that foot
    axes[2].set_xlabel("frame")
    axes[0].legend(ncol=2, fontsize=8)
    axes[2].legend(ncol=3, fontsize=8)
    axes[0].set_title("Balancing trial as Blender shows it: the fit (solid) and the rotation copy (dotted)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def run_demo(out_dir=ROOT / "out", extension_zip=None, python=None, first=0, count=None):
    out_dir, data = run_demo_scene("demo_markerless", [OUT, first, count], out_dir, extension_zip, python)
    data["plot"] = str(plot(data, out_dir / "markerless.png"))
    data["table"] = table(data)
    return data


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out", help="where markerless.blend and .png go")
    parser.add_argument("--zip", type=Path, default=None, help="the extension zip (default: build it)")
    parser.add_argument("--python", default=None, help="interpreter with bpy for the Blender side")
    parser.add_argument("--frames", type=int, default=None, help="only the trial's first FRAMES frames")
    args = parser.parse_args(argv)
    data = run_demo(args.out, args.zip, args.python, count=args.frames)
    print(data["table"])
    print(f"wrote {data['blend']} and {data['plot']}")
    return data


if __name__ == "__main__":
    main()

"""Retarget demo: the CMU walk (../shared/data/bvh/cmu_02_01_walk.bvh, through Blender's own BVH
importer) onto the rig Rigify generates, ours beside the copy-rotation retarget.

In a fresh headless Blender with the extension installed from the built zip: Rigify's human
metarig generates two rigs; `api.retarget` keys one of them with the feet held on every detected
contact span (keys on the animator controls, limbs in IK), the other with the copy-rotation retarget
(rotations copied, root scaled by the leg-length ratio) on the same spans; the copy rig is then
moved 1 m aside so both show. Prints the foot slide of every span for both (Blender's
evaluation of the keys) and both times, saves out/retarget.blend and out/retarget_feet.png
(per frame: the height of each contact point, and its slide from where its span began).

    .venv/bin/python tools/demo_retarget.py          # or: make demo-retarget
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):              # run as a script: make `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.blender_session import EXTENSION_MODULE, OUT, ROOT, run_demo_scene  # noqa: E402

CLIP = ROOT.parent / "shared" / "data" / "bvh" / "cmu_02_01_walk.bvh"
CMU_UNIT = 0.056444          # metres per CMU unit (the data's SOURCES.md)


def run_in_scene(out_dir, clip=str(CLIP)):
    """Inside Blender: the scene, both retargets, the .blend; returns the figures."""
    import importlib

    import bpy
    import numpy as np

    api = importlib.import_module(f"{EXTENSION_MODULE}.itasc_addon.api")
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    bpy.ops.wm.read_homefile(use_empty=True)
    started = time.perf_counter()
    bpy.ops.import_anim.bvh(filepath=clip, global_scale=CMU_UNIT, update_scene_fps=True, update_scene_duration=True)
    walk = bpy.context.view_layer.objects.active
    import_seconds = time.perf_counter() - started
    bpy.ops.object.armature_human_metarig_add()
    metarig = bpy.context.view_layer.objects.active
    bpy.ops.object.mode_set(mode="OBJECT")
    rigs = {}
    for name in ("ours", "copy"):
        metarig.data.rigify_target_rig = None
        bpy.context.view_layer.objects.active = metarig
        if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
            raise RuntimeError("Rigify could not generate its rig")
        rig = bpy.context.view_layer.objects.active
        rig.name = f"rig_{name}"
        rigs[name] = rig
    metarig.hide_viewport = True
    rigs["copy"].hide_viewport = True          # a disabled object is not evaluated: each retarget reads one rig
    ours = api.retarget(rigs["ours"], walk, calibration_frame=1)
    rigs["copy"].hide_viewport, rigs["ours"].hide_viewport = False, True
    copied = api.retarget(rigs["copy"], walk, calibration_frame=1, method="copy", contacts=ours.contacts)
    rigs["ours"].hide_viewport = False
    rigs["copy"].location.x += 1.0
    out = Path(out_dir)
    blend = out / "retarget.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend), check_existing=False)

    def per_frame(result):
        pos = result.point_positions
        slide = np.full(pos.shape[:2], np.nan)
        f0 = int(result.frames[0])
        for j, p in enumerate(result.points):
            for a, b in result.contacts[p]:
                path = pos[a - f0:b - f0 + 1, j]
                slide[a - f0:b - f0 + 1, j] = np.linalg.norm(path - path[0], axis=-1)
        return {"height": (pos[..., 2] - result.floor).tolist(), "slide": np.nan_to_num(slide, nan=-1.0).tolist(),
                "spans": result.spans(), "seconds": result.seconds, "solve_seconds": result.solve_seconds,
                "write_seconds": result.write_seconds, "verify_seconds": result.verify_seconds,
                "read_seconds": result.read_seconds, "below_floor": float(np.max(result.floor_penetration)),
                "not_converged": result.not_converged}

    fps = bpy.context.scene.render.fps / bpy.context.scene.render.fps_base
    return {"frames": ours.frames.tolist(), "points": ours.points, "ours": per_frame(ours), "copy": per_frame(copied),
            "import_seconds": import_seconds, "fps": fps, "blend": str(blend), "blender": bpy.app.version_string}


def table(data):
    """Per span: the foot slide of both methods (mm); then both times."""
    lines = [(f"CMU walk ({len(data['frames'])} frames at {data['fps']:.0f} fps, "
              f"{len(data['frames']) / data['fps']:.2f} s) onto the generated Rigify rig, Blender {data['blender']}"),
             f"{'contact point':<14}{'frames':>12}{'ours (mm)':>12}{'copy (mm)':>12}"]
    for (p, a, b, s), (_, _, _, n) in zip(data["ours"]["spans"], data["copy"]["spans"]):
        lines.append(f"{p:<14}{f'{a}-{b}':>12}{s * 1e3:>12.3f}{n * 1e3:>12.1f}")
    for key in ("ours", "copy"):
        d = data[key]
        slides = [s for *_, s in d["spans"]]
        lines.append(f"{key}: foot slide max {max(slides) * 1e3:.3f} mm, mean {sum(slides) / len(slides) * 1e3:.3f} mm; "
                     f"{d['seconds']:.2f} s (read {d['read_seconds']:.2f}, solve {d['solve_seconds']:.2f}, keys on the "
                     f"controls {d['write_seconds']:.2f}, in passes over Blender's evaluation, the last of which "
                     f"is the check); "
                     f"lowest point {d['below_floor'] * 1e3:.3f} mm below the floor")
    lines.append(f"BVH import (Blender's importer) {data['import_seconds']:.2f} s, not included above")
    return "\n".join(lines)


def plot(data, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    frames = np.array(data["frames"])
    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    for key, style in (("ours", "-"), ("copy", ":")):
        height = np.array(data[key]["height"])
        slide = np.array(data[key]["slide"])
        slide[slide < 0] = np.nan
        for j, p in enumerate(data["points"]):
            axes[0].plot(frames, height[:, j] * 1e3, style, lw=1, label=f"{p} {key}")
            axes[1].plot(frames, slide[:, j] * 1e3, style, lw=1, label=f"{p} {key}")
    axes[0].set_ylabel("height above floor (mm)")
    axes[1].set_ylabel("slide within its span (mm)")
    axes[1].set_yscale("symlog", linthresh=1.0)
    axes[1].set_xlabel("frame")
    axes[0].legend(ncol=4, fontsize=7)
    axes[0].set_title("Contact points as Blender shows them: ours (solid) and copy-rotation (dotted)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def run_demo(out_dir=ROOT / "out", extension_zip=None, python=None):
    out_dir, data = run_demo_scene("demo_retarget", [OUT], out_dir, extension_zip, python)
    data["plot"] = str(plot(data, out_dir / "retarget_feet.png"))
    data["table"] = table(data)
    return data


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out", help="where retarget.blend and retarget_feet.png go")
    parser.add_argument("--zip", type=Path, default=None, help="the extension zip (default: build it)")
    parser.add_argument("--python", default=None, help="interpreter with bpy for the Blender side")
    args = parser.parse_args(argv)
    data = run_demo(args.out, args.zip, args.python)
    print(data["table"])
    print(f"wrote {data['blend']} and {data['plot']}")
    return data


if __name__ == "__main__":
    main()

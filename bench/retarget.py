"""Retargeting a whole clip in Blender, end to end, against the clip's duration and against
Blender's own bake of a copy-rotation retarget. Clips (../shared/data/bvh): the 994-frame CMU clip 131_01
(8.28 s at 120 fps) onto Rigify's human metarig and onto the rig Rigify generates; onto the
generated rig also the CMU walk 02_01 (344 frames, 2.87 s at 120 fps) and a 300-frame 60 fps
clip (131_01 from its frame 394, every other frame: 5.0 s).

Per row, in one fresh bpy process with the extension installed from the built zip:

- import: Blender's BVH importer (reported, not counted in "ours");
- ours: `api.retarget(rig, clip)` over every frame: reading the source by Blender's evaluation,
  the engine's solve (contacts detected and pinned), keys (on the generated rig: its controls,
  fixed-point passes on Blender's evaluation), and Blender's evaluation of every written frame;
- nla.bake: a second copy of the rig keyed with the copy-rotation retarget (`method="copy"`), then
  ``bpy.ops.nla.bake`` (visual keying, the mapped bones, every frame): what baking a retarget
  costs in Blender itself. A constraint-driven copy setup would bake slower (its constraints
  are evaluated too), so this is the cheaper side of that baseline.

Ratios: ours / the clip's duration (below 1: faster than it plays), ours / nla.bake; and ours
in CPU seconds of the Blender process (`time.process_time`, all its threads) / the clip's
duration, which other processes' load on a shared machine leaves nearly alone.

    .venv/bin/python -m bench --only retarget --markdown BENCHMARKS.md
"""

from __future__ import annotations

import time
from pathlib import Path

from .common import Column, Table, blender_session, plot

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "bvh"
CLIPS = {"131": DATA / "cmu_131_01_start_walk_stop.bvh", "walk": DATA / "cmu_02_01_walk.bvh"}
CMU_UNIT = 0.056444
QUICK_FRAMES = 240
ROWS = (("metarig", "131"), ("generated", "131"), ("generated", "walk"), ("generated", "60fps"))


def clip_path(clip: str) -> Path:
    """The BVH file of a row's clip; "60fps" is written to a temporary file: 131_01's frames
    394, 396, ... (300 of them) at 1/60 s each."""
    if clip != "60fps":
        return CLIPS[clip]
    import tempfile

    lines = CLIPS["131"].read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == "MOTION")
    frames = [line for line in lines[at + 3:] if line.strip()][394::2]
    path = Path(tempfile.mkdtemp(prefix="itasc_bench_")) / "cmu_131_60fps.bvh"
    path.write_text("\n".join(lines[:at + 1] + [f"Frames: {len(frames)}", "Frame Time: 0.0166667"] + frames) + "\n")
    return path


def in_blender(rig_kind: str, n_frames: int | None = None, clip_name: str = "131"):
    """Inside Blender: one row's figures (module docstring)."""
    import importlib

    import bpy
    import numpy as np

    from tools.blender_session import EXTENSION_MODULE

    api = importlib.import_module(f"{EXTENSION_MODULE}.itasc_addon.api")
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    bpy.ops.wm.read_homefile(use_empty=True)
    path = clip_path(clip_name)
    started = time.perf_counter()
    bpy.ops.import_anim.bvh(filepath=str(path), global_scale=CMU_UNIT, update_scene_fps=True,
                            update_scene_duration=True)
    import_seconds = time.perf_counter() - started
    clip = bpy.context.view_layer.objects.active
    first, last = (int(v) for v in clip.animation_data.action.frame_range)
    if n_frames:
        last = first + n_frames - 1

    def rig():
        bpy.ops.object.armature_human_metarig_add()
        meta = bpy.context.view_layer.objects.active
        bpy.ops.object.mode_set(mode="OBJECT")
        if rig_kind == "metarig":
            return meta
        if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
            raise RuntimeError("Rigify could not generate its rig")
        generated = bpy.context.view_layer.objects.active
        meta.hide_viewport = True
        return generated

    ours_rig = rig()
    calibration = first + 1 if clip_name == "walk" else first         # the walk's first frame: a synthetic T-pose
    cpu = time.process_time()
    ours = api.retarget(ours_rig, clip, first, last, calibration_frame=calibration)
    ours_cpu = time.process_time() - cpu
    ours_rig.hide_viewport = True                    # not evaluated while the baseline runs
    copy_rig = rig()
    copied = api.retarget(copy_rig, clip, first, last, method="copy", contacts=ours.contacts,
                          calibration_frame=calibration)
    bones = sorted({t for _, t in copied.bone_map.values()})
    bpy.context.view_layer.objects.active = copy_rig
    bpy.ops.object.mode_set(mode="POSE")
    for pb in copy_rig.pose.bones:
        selected = pb.name in bones
        if hasattr(pb, "select"):
            pb.select = selected
        else:
            copy_rig.data.bones[pb.name].select = selected
    started, cpu = time.perf_counter(), time.process_time()
    bpy.ops.nla.bake(frame_start=first, frame_end=last, only_selected=True, visual_keying=True,
                     clear_constraints=False, use_current_action=True, bake_types={"POSE"})
    bake_seconds, bake_cpu = time.perf_counter() - started, time.process_time() - cpu
    bpy.ops.object.mode_set(mode="OBJECT")
    fps = bpy.context.scene.render.fps / bpy.context.scene.render.fps_base
    slides = [s for *_, s in ours.spans()]
    copy_slides = [s for *_, s in copied.spans()]
    return {"blender": bpy.app.version_string, "frames": last - first + 1, "fps": fps, "import": import_seconds,
            "ours": ours.seconds, "read": ours.read_seconds, "solve": ours.solve_seconds, "keys": ours.write_seconds,
            "passes": ours.control_passes, "copy_keys": copied.seconds,
            "nla_bake": bake_seconds, "ours_cpu": ours_cpu, "bake_cpu": bake_cpu,
            "spans": len(slides), "slide_max": float(max(slides)), "copy_slide_max": float(max(copy_slides)),
            "below_floor": float(np.max(ours.floor_penetration)), "verify": ours.verify_seconds,
            "converged": int(np.sum(ours.converged))}


def run(quick: bool = False) -> Table:
    n = QUICK_FRAMES if quick else None
    table = Table(
        "retarget", "Retargeting BVH clips end to end in Blender, against their duration and nla.bake",
        "CMU 131_01 (994 frames, 120 fps) onto Rigify's human metarig and the rig Rigify generates; onto the "
        "generated rig also the CMU walk 02_01 (344 frames, 120 fps) and 300 frames of 131_01 at 60 fps (every "
        "other frame from 394); Blender's BVH importer, metres; one fresh bpy process per row. ours: "
        "`api.retarget(rig, clip)` over every frame (source read "
        "by Blender's evaluation, the engine's solve with contacts detected and pinned, keys, Blender's evaluation "
        "of every written frame); import excluded. nla.bake: a copy of the rig keyed with the copy-rotation retarget, then "
        "`bpy.ops.nla.bake` (visual keying, the mapped bones, every frame). Foot slide: the largest of any contact "
        "span, Blender's evaluation of the keys, ours and the copy on the same spans.",
        [Column("rig", "rig", text=True), Column("clip", "clip", text=True), Column("frames", "frames"),
         Column("clip_s", "clip s", "{:.2f}"),
         Column("ours", "ours s", "{:.2f}"), Column("solve", "solve s", "{:.2f}"), Column("keys", "keys s", "{:.2f}"),
         Column("nla_bake", "nla.bake s", "{:.2f}"), Column("per_clip", "ours / clip", "{:.2f}"),
         Column("per_bake", "ours / nla.bake", "{:.2f}"), Column("cpu_per_clip", "ours CPU / clip", "{:.2f}"), Column("slide_mm", "slide ours (mm)", "{:.3f}"),
         Column("copy_mm", "slide copy (mm)", "{:.1f}"), Column("converged", "converged", text=True),
         Column("import", "import s", "{:.2f}")])
    version = None
    for kind, clip_name in ROWS:
        r = blender_session("retarget", f"in_blender({kind!r}, {n!r}, {clip_name!r})", exit_at_once=True)
        version = r["blender"]
        clip = r["frames"] / r["fps"]
        table.rows.append({"rig": kind, "clip": clip_name, "frames": r["frames"], "clip_s": clip, "ours": r["ours"], "solve": r["solve"],
                           "keys": r["keys"], "nla_bake": r["nla_bake"], "per_clip": r["ours"] / clip,
                           "per_bake": r["ours"] / r["nla_bake"], "cpu_per_clip": r["ours_cpu"] / clip, "slide_mm": 1e3 * r["slide_max"],
                           "copy_mm": 1e3 * r["copy_slide_max"], "converged": f"{r['converged']}/{r['frames']}",
                           "import": r["import"], "raw": r})
    table.title += f" (Blender {version})"
    return table


def draw(table: Table, path) -> None:
    plot(path, "Retarget of a BVH clip end to end, seconds", "seconds (log)",
         {f"{r['rig']} {r['clip']}: {label}": r[key] for r in table.rows
          for key, label in (("ours", "ours"), ("nla_bake", "nla.bake of the copy"), ("clip_s", "clip duration"))})

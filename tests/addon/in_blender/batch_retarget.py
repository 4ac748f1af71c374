"""Bodies of test_addon_batch_retarget: the rig file a batch retargets onto (Rigify's human
metarig saved as a .blend), and an output .blend read back with nothing of the add-on loaded."""

import bpy
import numpy as np


def save_metarig(path, generate=False):
    """Rigify's human metarig alone in a new file at `path`, or with `generate` the rig Rigify
    generates from it alone (needs Rigify; call with exit_at_once)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    bpy.ops.object.armature_human_metarig_add()
    meta = bpy.context.view_layer.objects.active
    meta.name = "metarig"
    bpy.ops.object.mode_set(mode="OBJECT")
    if generate:
        bpy.ops.pose.rigify_generate()
        bpy.data.objects.remove(meta)
    bpy.ops.wm.save_as_mainfile(filepath=path)
    return [o.name for o in bpy.data.objects if o.type == "ARMATURE"]


def _ground(rig, bones):
    """The lowest head or tail height of `bones` at rest, in armature space."""
    return min(min(rig.data.bones[b].head_local.z, rig.data.bones[b].tail_local.z) for b in bones)


def contact_slides(path, bone_map, contacts):
    """Open the batch's output .blend at `path` and measure, from Blender's evaluation of the rig's
    keys, each contact span's slide: the largest distance of its point from where it is at the
    span's first frame. The points as docs/retarget-contacts.md defines them: the foot bone's
    head (heel) and the toe bone's head (ball), each moved straight down at rest onto the rest
    ground (the lowest head or tail of the mapped bones), carried by the foot bone. Also what
    the file holds: its armatures, the rig's action, the scene's frames and how far the rig's
    hips travel from the second to the last (the first is the clip's T-pose)."""
    bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
    rig = bpy.data.objects["metarig"]
    mapped = [t for _, t in bone_map.values()]
    ground = _ground(rig, mapped)
    local = {}
    for point in contacts:
        kind, side = point.split(".")
        if kind == "toe_tip":
            continue
        foot = rig.data.bones[bone_map[f"foot.{side}"][1]]
        at = foot.head_local if kind == "heel" else rig.data.bones[bone_map[f"toe.{side}"][1]].head_local
        on_ground = np.array([at.x, at.y, ground, 1.0])
        local[point] = (foot.name, np.linalg.inv(np.array(foot.matrix_local)) @ on_ground)
    scene = bpy.context.scene
    slides = {}
    for point, (bone, p) in local.items():
        slides[point] = []
        for first, last in contacts[point]:
            where = []
            for f in range(first, last + 1):
                scene.frame_set(f)
                M = np.array(rig.matrix_world) @ np.array(rig.pose.bones[bone].matrix)
                where.append((M @ p)[:3])
            where = np.array(where)
            slides[point].append(float(np.max(np.linalg.norm(where - where[0], axis=1))))
    action = rig.animation_data.action if rig.animation_data else None
    hips = rig.pose.bones[bone_map["hips"][1]]
    ends = []
    for f in (scene.frame_start + 1, scene.frame_end):
        scene.frame_set(f)
        ends.append(np.array(rig.matrix_world @ hips.head))
    return {"slides": slides, "armatures": sorted(o.name for o in bpy.data.objects if o.type == "ARMATURE"),
            "action": action.name if action else None, "frame_range": [scene.frame_start, scene.frame_end],
            "hips_travel": float(np.linalg.norm(ends[1] - ends[0])), "version": bpy.app.version_string}

"""The "Keypoints" panel in the 3D View's sidebar (iTaSC tab), beside "Retarget": rig, keypoint
file, static file, keypoint set, smoothing, threshold, feet held, first frame, method, fit. Drawing only
reads data."""

from __future__ import annotations

import bpy


class ITASC_PT_keypoints(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "iTaSC"
    bl_label = "Keypoints"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        layout = self.layout
        p = context.scene.itasc_keypoints
        layout.prop(p, "rig")
        layout.prop(p, "filepath")
        layout.prop(p, "static_path")
        layout.prop(p, "keypoint_set")
        row = layout.row(align=True)
        row.prop(p, "use_cutoff")
        sub = row.row(align=True)
        sub.enabled = p.use_cutoff
        sub.prop(p, "cutoff")
        layout.prop(p, "threshold")
        layout.prop(p, "hold_feet")
        layout.prop(p, "frame_start")
        layout.prop(p, "method")
        layout.operator("itasc.fit_keypoints", icon="ARMATURE_DATA")
        for line in p.summary.split("\n")[:3]:
            layout.label(text=line[:120], icon="INFO")


classes = (ITASC_PT_keypoints,)
register, unregister = bpy.utils.register_classes_factory(classes)

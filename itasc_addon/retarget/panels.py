"""The "Retarget" panel in the 3D View's sidebar (iTaSC tab): source and target, the bone map
(auto, editable list, JSON, what the auto map left ambiguous), the contact spans (editable list), calibration frame, retarget and
one-click "Import BVH and retarget". Drawing only reads data."""

from __future__ import annotations

import bpy


class ITASC_UL_roles(bpy.types.UIList):
    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0):
        p = context.scene.itasc_retarget
        row = layout.row(align=True)
        row.label(text=item.role, icon="ERROR" if not (item.source_bone and item.target_bone) else "BONE_DATA")
        if p.source is not None:
            row.prop_search(item, "source_bone", p.source.data, "bones", text="")
        else:
            row.prop(item, "source_bone", text="")
        if p.target is not None:
            row.prop_search(item, "target_bone", p.target.data, "bones", text="")
        else:
            row.prop(item, "target_bone", text="")


class ITASC_UL_spans(bpy.types.UIList):
    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0):
        row = layout.row(align=True)
        row.prop(item, "point", text="")
        row.prop(item, "start", text="")
        row.prop(item, "end", text="")


class ITASC_PT_retarget(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "iTaSC"
    bl_label = "Retarget"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        layout = self.layout
        p = context.scene.itasc_retarget
        layout.prop(p, "source")
        layout.prop(p, "target")
        layout.prop(p, "method")
        layout.prop(p, "calibration_frame")
        layout.prop(p, "layer")
        box = layout.box()
        row = box.row(align=True)
        row.label(text="Bone Map")
        row.operator("itasc.retarget_auto_map", text="Auto", icon="AUTO")
        row.operator("itasc.retarget_map_import", text="", icon="IMPORT")
        row.operator("itasc.retarget_map_export", text="", icon="EXPORT")
        box.template_list("ITASC_UL_roles", "", p, "bone_map", p, "map_index", rows=4)
        unmapped = [r.role for r in p.bone_map if not (r.source_bone and r.target_bone)]
        if unmapped:
            box.label(text=f"Unmapped: {', '.join(unmapped)}"[:120], icon="INFO")
        for note in [n for n in p.map_notes.split("\n") if n][:6]:
            box.label(text=f"Check: {note}"[:160], icon="QUESTION")
        box = layout.box()
        box.prop(p, "use_spans", text="Contact Spans (edited)" if p.use_spans else "Contact Spans (detected)")
        row = box.row()
        row.template_list("ITASC_UL_spans", "", p, "spans", p, "span_index", rows=4)
        col = row.column(align=True)
        for action, icon in (("ADD", "ADD"), ("REMOVE", "REMOVE"), ("UP", "TRIA_UP"), ("DOWN", "TRIA_DOWN")):
            col.operator("itasc.retarget_span", text="", icon=icon).action = action
        layout.operator("itasc.retarget", icon="ARMATURE_DATA")
        layout.operator("itasc.import_bvh_retarget", icon="IMPORT")
        for line in p.summary.split("\n")[:3]:
            layout.label(text=line[:120], icon="INFO")


classes = (ITASC_UL_roles, ITASC_UL_spans, ITASC_PT_retarget)
register, unregister = bpy.utils.register_classes_factory(classes)

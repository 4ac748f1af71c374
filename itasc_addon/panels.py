"""The "iTaSC" tab in the 3D View's sidebar: settings, the constraints we drive, live preview,
bake, and the last result. Drawing only reads data (no writes in draw)."""

from __future__ import annotations

import bpy

from . import ik_settings
from .handover import entry, originally_muted
from .rig import RigError, ik_constraints


def _armature(context):
    obj = context.object
    return obj if obj is not None and obj.type == "ARMATURE" else None


class ITASC_PT_main(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "iTaSC"
    bl_label = "iTaSC IK"

    def draw(self, context):
        layout = self.layout
        obj = _armature(context)
        if obj is None:
            layout.label(text="Select an armature", icon="INFO")
            return
        constraints = ik_constraints(obj)
        if not constraints:
            layout.label(text="No IK constraints on this armature", icon="INFO")
            layout.label(text="Add one in Bone Constraint properties")
            return
        props = obj.itasc
        row = layout.row(align=True)
        row.operator("itasc.drive", text="Drive Rig", icon="CON_KINEMATIC", depress=props.active).active = \
            not props.active
        row.operator("itasc.live_preview", text="Live", icon="PLAY" if not props.live_preview else "PAUSE",
                     depress=props.live_preview)
        layout.operator("itasc.solve_frame", icon="CON_KINEMATIC")
        if props.result_message:
            layout.label(text=props.result_message[:120], icon="ERROR")


class _Sub:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "iTaSC"
    bl_parent_id = "ITASC_PT_main"

    @classmethod
    def poll(cls, context):
        obj = _armature(context)
        return obj is not None and bool(ik_constraints(obj))


class ITASC_PT_settings(_Sub, bpy.types.Panel):
    """The solver's settings as a solve uses them (`ik_settings`): each from the armature's IK
    panel (drawn from there, so editing it here edits the armature's) unless its override is on
    (then ours); what Blender has that this solver does not follow."""

    bl_label = "Solver"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        obj = context.object
        props = obj.itasc
        try:
            chosen = ik_settings.choose(obj, fps=_fps(context))
        except RigError as err:                 # e.g. an enum value a newer file stored
            layout.label(text=str(err), icon="ERROR")
            return
        v = chosen.values
        params = obj.pose.ik_param if chosen.solver == "ITASC" else None
        col = layout.column()
        if params is None:
            col.label(text="Blender's Standard IK solver is set on this armature:", icon="INFO")
            col.label(text="it is solved with the iTaSC engine of this add-on")
        for f in ik_settings.FIELDS:
            if (f.simulation and v["mode"] != "SIMULATION") or (f.dls and v["method"] != "DLS"):
                continue
            _field_row(col, props, params, f, chosen)
        if params is not None:
            _itasc_extras(col, params, chosen)


def _field_row(layout, props, params, f, chosen):
    """One setting: the armature's property where it is followed, ours where overridden or where
    Blender has none, with the override toggle where there is something to override."""
    source = chosen.sources[f.name]
    row = layout.row(align=True)
    if source == ik_settings.ARMATURE and f.name == "substeps":
        row.prop(params, "use_auto_step", text="Auto Sub-steps")
        if not params.use_auto_step:
            layout.prop(params, "step_count", text="Sub-steps")
    elif source == ik_settings.ARMATURE:
        row.prop(params, f.itasc, text=f.label)
    elif source == ik_settings.CONSTRAINTS:
        row.label(text=f"{f.label}: {chosen.values[f.name]} (from the IK constraints)")
    else:
        row.prop(props, f.name)
    if f.name in chosen.followable:
        row.prop(props, "override_" + f.name, text="", icon="DECORATE_OVERRIDE")


def _itasc_extras(layout, params, chosen):
    """The iTaSC settings without a field of ours: what they do here, and what is not used."""
    v = chosen.values
    if v["mode"] == "SIMULATION":
        layout.prop(params, "reiteration_method")
        if v["max_substeps"] is not None:
            layout.prop(params, "step_min", text="Steps Min")
            layout.label(text=f"At most {v['max_substeps']} sub-step(s) per frame")
    layout.label(text="Blender's iTaSC settings not used by this solver:")
    for name in ik_settings.not_used(params, v["mode"]):
        layout.label(text=f"  {name}", icon="INFO")
    layout.label(text="(Precision above is this add-on's: it stops on the error itself)")
    for text in chosen.warnings:
        layout.label(text=text[:120], icon="ERROR")


def _fps(context):
    render = context.scene.render
    return render.fps / render.fps_base


class ITASC_PT_constraints(_Sub, bpy.types.Panel):
    bl_label = "Constraints"

    def draw(self, context):
        layout = self.layout
        obj = context.object
        col = layout.column(align=True)
        for pb, con in ik_constraints(obj):
            item = entry(obj, pb.name, con.name)
            use = item is None or item.use
            row = col.row(align=True)
            op = row.operator("itasc.toggle_constraint", text="", depress=use,
                              icon="CHECKBOX_HLT" if use else "CHECKBOX_DEHLT", emboss=False)
            op.bone, op.constraint = pb.name, con.name
            target = con.target.name if con.target else "no target"
            if con.target is not None and con.subtarget:
                target += f":{con.subtarget}"
            row.label(text=f"{pb.name} / {con.name}")
            sub = row.row()
            sub.alignment = "RIGHT"
            label = "muted" if originally_muted(obj, pb, con) else target
            sub.label(text=label, icon="HIDE_ON" if originally_muted(obj, pb, con) else "OBJECT_DATA")
            if item is not None and item.result_stage > -2 and obj.itasc.has_result:
                solved = "Blender's IK" if item.result_stage < 0 else f"stage {item.result_stage}"
                col.label(text=f"    last: {solved}, max error {item.result_max_error:.2g}",
                          icon="ERROR" if item.result_stage < 0 else "BLANK1")


class ITASC_PT_bake(_Sub, bpy.types.Panel):
    bl_label = "Bake"

    def draw(self, context):
        layout = self.layout
        props = context.object.itasc
        row = layout.row(align=True)
        row.prop(props, "frame_start")
        row.prop(props, "frame_end")
        layout.prop(props, "frame_step")
        layout.prop(props, "only_selected")
        row = layout.row(align=True)
        row.operator("itasc.bake", icon="KEYTYPE_KEYFRAME_VEC")
        row.operator("itasc.clear_bake", text="", icon="X")


class ITASC_PT_result(_Sub, bpy.types.Panel):
    bl_label = "Last Result"

    def draw(self, context):
        layout = self.layout
        props = context.object.itasc
        if not props.has_result:
            layout.label(text="Nothing solved yet")
            return
        col = layout.column(align=True)
        col.label(text=f"{props.result_kind}: {props.result_frames} frame(s) in {props.result_seconds:.2f} s")
        if props.result_solver_path:
            col.label(text=f"Solver: {props.result_solver_path}")
        icon = "CHECKMARK" if props.result_not_converged == 0 else "ERROR"
        col.label(text=f"Not converged: {props.result_not_converged}", icon=icon)
        col.label(text=f"Max position error: {props.result_max_error:.3g}")
        col.label(text=f"RMS position error: {props.result_rms_error:.3g}")


classes = (ITASC_PT_main, ITASC_PT_settings, ITASC_PT_constraints, ITASC_PT_bake, ITASC_PT_result)
register, unregister = bpy.utils.register_classes_factory(classes)

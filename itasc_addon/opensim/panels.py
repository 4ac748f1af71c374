"""The "OpenSim Marker IK" panel in the iTaSC sidebar tab: import a model and a trial, the binding,
solve and bake, export the .mot and the error report, and the marker errors of the current frame.
Drawing only reads data."""

from __future__ import annotations

from pathlib import Path

import bpy

from . import solve


MAX_REPORT_LINES = 40


def _mm(metres):
    return f"{1e3 * metres:.3g} mm"


def _binding_counts(obj):
    """(bound, model markers, measured markers) by name, from the objects (no file read)."""
    model = {c.itasc_opensim.marker for c in obj.children if c.itasc_opensim.kind == "MODEL_MARKER"}
    trial = obj.itasc_opensim.trial
    measured = set() if trial is None else {c.itasc_opensim.marker for c in trial.children
                                            if c.itasc_opensim.kind == "MARKER"}
    return len(model & measured), len(model), len(measured)


class ITASC_PT_opensim(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "iTaSC"
    bl_label = "OpenSim Marker IK"

    def draw(self, context):
        layout = self.layout
        col = layout.column(align=True)
        col.operator("itasc.opensim_import_model", text="Import Model (.osim)", icon="ARMATURE_DATA")
        col.operator("itasc.opensim_import_trc", text="Import Markers (.trc, .c3d)", icon="EMPTY_DATA")
        obj = solve.model_object(context.object)
        if obj is None:
            layout.label(text="Select an OpenSim model", icon="INFO")
            return
        s = obj.itasc_opensim
        box = layout.box()
        box.label(text=f"{obj.name}: {Path(s.source).name}", icon="ARMATURE_DATA")
        box.prop(s, "trial")
        bound, n_model, n_measured = _binding_counts(obj)
        if s.trial is not None:
            icon = "CHECKMARK" if bound else "ERROR"
            box.label(text=f"{bound} markers bound by name ({n_model} in the model, {n_measured} measured)", icon=icon)
        layout.prop(s, "task_file")
        row = layout.row(align=True)
        row.prop(s, "accuracy")
        row.prop(s, "max_iterations", text="Iterations")
        layout.operator("itasc.opensim_solve", icon="KEYTYPE_KEYFRAME_VEC")
        row = layout.row(align=True)
        row.operator("itasc.opensim_export_motion", text="Export .mot", icon="EXPORT")
        row.operator("itasc.opensim_write_errors", text="Error Report", icon="TEXT")
        row = layout.row(align=True)
        row.operator("itasc.clear_bake", text="Clear Bake", icon="X")


class ITASC_PT_opensim_errors(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "iTaSC"
    bl_parent_id = "ITASC_PT_opensim"
    bl_label = "Marker Errors"

    @classmethod
    def poll(cls, context):
        return solve.model_object(context.object) is not None

    def draw(self, context):
        layout = self.layout
        obj = solve.model_object(context.object)
        s = obj.itasc_opensim
        if not s.has_result:
            layout.label(text="Nothing solved yet")
            return
        col = layout.column(align=True)
        icon = "CHECKMARK" if s.result_converged == s.result_frames else "ERROR"
        col.label(text=f"{s.result_trial}: {s.result_frames} frames in {s.result_seconds:.2f} s", icon="TIME")
        col.label(text=f"Converged: {s.result_converged}/{s.result_frames}", icon=icon)
        scene = context.scene
        current = scene.frame_current + scene.frame_subframe
        at = solve.frame_report(obj, current)
        box = layout.box()
        col = box.column(align=True)
        if at is None:
            col.label(text=f"Frame {current:g} is not a solved sample")
        else:
            col.label(text=f"Frame {at['frame']:g} (t = {at['time']:.4g} s)")
            col.label(text=f"RMS {_mm(at['rms'])}, max {_mm(at['max'])}")
            col.label(text=f"Worst marker: {at['worst'] or '-'}")
        mean_rms, largest, frame = solve.trial_summary(obj)
        col = layout.column(align=True)
        col.label(text=f"Trial: mean RMS {_mm(mean_rms)}")
        col.label(text=f"Largest error {_mm(largest)} at frame {frame:g}")
        layout.operator("itasc.opensim_worst_frame", icon="VIEWZOOM")
        if s.result_message:
            layout.label(text=s.result_message[:120], icon="ERROR")


class ITASC_PT_opensim_scale(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "iTaSC"
    bl_parent_id = "ITASC_PT_opensim"
    bl_label = "Scale"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        return solve.model_object(context.object) is not None

    def draw(self, context):
        layout = self.layout
        s = solve.model_object(context.object).itasc_opensim
        layout.prop(s, "scale_setup")
        layout.prop(s, "static_trial")
        layout.operator("itasc.opensim_scale", icon="FULLSCREEN_ENTER")
        if not s.scale_markers:
            return
        box = layout.box()
        col = box.column(align=True)
        col.label(text=f"Scaled with {Path(s.scaled_from).name}", icon="CHECKMARK")
        if s.scale_rms == s.scale_rms:
            col.label(text=f"Static pose: marker RMS {_mm(s.scale_rms)}")
        titles = {"FIXED": "Anatomical (kept): error", "MOVED": "Tracking: moved by",
                  "MODEL_ONLY": "In the model only", "TRIAL_ONLY": "In the trial only (ignored)"}
        shown = 0
        for kind, title in titles.items():
            items = [m for m in s.scale_markers if m.kind == kind]
            if not items:
                continue
            col = box.column(align=True)
            col.label(text=f"{title} ({len(items)})")
            for m in items:
                if shown >= MAX_REPORT_LINES:
                    break
                row = col.row()
                row.label(text=m.marker)
                row.label(text=_mm(m.error) if m.error == m.error else "-")
                shown += 1
        if shown < len(s.scale_markers):
            box.label(text=f"... {len(s.scale_markers) - shown} more", icon="INFO")


classes = (ITASC_PT_opensim, ITASC_PT_opensim_errors, ITASC_PT_opensim_scale)
register, unregister = bpy.utils.register_classes_factory(classes)

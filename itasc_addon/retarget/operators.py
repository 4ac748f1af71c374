"""Retarget operators (``bpy.ops.itasc.retarget*``): retarget (progress, Esc), auto bone map,
bone map JSON export and import, contact spans add / remove / move / detect, and one-click
"Import BVH and retarget". Thin: the work is in `job`."""

from __future__ import annotations

from pathlib import Path

import bpy
from bpy.props import EnumProperty, StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper

from ..modal_job import ModalJob
from ..rig import RigError
from . import auto_map, bone_maps, job
from .properties import fill_map, map_pairs, span_dict


def _props(context):
    return context.scene.itasc_retarget


def _ready(cls, context):
    p = _props(context)
    if p.source is None or p.target is None:
        cls.poll_message_set("Pick a source and a target armature")
        return False
    return True


def make_job(context, props, **overrides):
    """A retarget job from the panel's settings."""
    options = {"bone_map": map_pairs(props), "method": props.method, "layer": props.layer,
               "contacts": span_dict(props) if props.use_spans else "auto"}
    if props.calibration_frame >= 0:
        options["calibration_frame"] = props.calibration_frame
    options.update(overrides)
    return job.prepare(props.target, props.source, **options)


class ITASC_OT_retarget(ModalJob, bpy.types.Operator):
    """Retarget the source's motion onto the target, foot contacts held (Esc cancels)"""

    bl_idname = "itasc.retarget"
    bl_label = "Retarget"
    bl_options = {"REGISTER", "UNDO"}
    job_errors = (RigError, ValueError)
    job_noun = "Retarget"

    @classmethod
    def poll(cls, context):
        return _ready(cls, context)

    def _make_job(self, context):
        return make_job(context, _props(context))

    def _finish(self):
        result = self._job.result
        props = bpy.context.scene.itasc_retarget
        props.summary = result.summary()[:1000]
        if not props.use_spans:                          # show the spans used; the user edits them there
            props.spans.clear()
            for point, spans in result.contacts.items():
                for a, b in spans:
                    row = props.spans.add()
                    row.point, row.start, row.end = point, a, b
        self.report({"INFO"} if result.not_converged == 0 else {"WARNING"}, result.summary())
        return {"FINISHED"}


class ITASC_OT_retarget_auto_map(bpy.types.Operator):
    """Fill the bone map from both armatures' bone names (presets), else from their skeletons"""

    bl_idname = "itasc.retarget_auto_map"
    bl_label = "Auto Map"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return _ready(cls, context)

    def execute(self, context):
        p = _props(context)
        pairs, notes = auto_map.auto_pairs(p.source, p.target)
        fill_map(p, pairs)
        p.map_notes = "\n".join(notes)
        missing = [r for r, (s, t) in pairs.items() if not (s and t)]
        if missing or notes:
            self.report({"WARNING"}, "; ".join(([f"unmapped roles: {', '.join(missing)}"] if missing else []) + notes))
        return {"FINISHED"}


class ITASC_OT_retarget_map_export(bpy.types.Operator, ExportHelper):
    """Save the bone map as JSON"""

    bl_idname = "itasc.retarget_map_export"
    bl_label = "Export Bone Map"
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    def execute(self, context):
        pairs = map_pairs(_props(context)) or {}
        Path(self.filepath).write_text(bone_maps.to_json(pairs))
        return {"FINISHED"}


class ITASC_OT_retarget_map_import(bpy.types.Operator, ImportHelper):
    """Load a bone map from JSON"""

    bl_idname = "itasc.retarget_map_import"
    bl_label = "Import Bone Map"
    bl_options = {"REGISTER", "UNDO"}
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    def execute(self, context):
        try:
            pairs = bone_maps.from_json(Path(self.filepath).read_text())
        except (OSError, ValueError) as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        fill_map(_props(context), pairs)
        return {"FINISHED"}


class ITASC_OT_retarget_span(bpy.types.Operator):
    """Add, remove or move a contact span in the list"""

    bl_idname = "itasc.retarget_span"
    bl_label = "Edit Contact Span"
    bl_options = {"REGISTER", "UNDO"}
    action: EnumProperty(items=(("ADD", "Add", ""), ("REMOVE", "Remove", ""), ("UP", "Up", ""), ("DOWN", "Down", "")))

    def execute(self, context):
        p = _props(context)
        i = p.span_index
        if self.action == "ADD":
            row = p.spans.add()
            frame = context.scene.frame_current
            row.point, row.start, row.end = (p.spans[i].point if 0 <= i < len(p.spans) - 1 else "heel.L"), frame, frame + 10
            p.span_index = len(p.spans) - 1
        elif not (0 <= i < len(p.spans)):
            return {"CANCELLED"}
        elif self.action == "REMOVE":
            p.spans.remove(i)
            p.span_index = min(i, len(p.spans) - 1)
        else:
            j = i - 1 if self.action == "UP" else i + 1
            if 0 <= j < len(p.spans):
                p.spans.move(i, j)
                p.span_index = j
        p.use_spans = True
        return {"FINISHED"}


class ITASC_OT_import_bvh_retarget(bpy.types.Operator, ImportHelper):
    """Import a BVH file with Blender's importer and retarget it onto the target"""

    bl_idname = "itasc.import_bvh_retarget"
    bl_label = "Import BVH and Retarget"
    bl_options = {"REGISTER", "UNDO"}
    filename_ext = ".bvh"
    filter_glob: StringProperty(default="*.bvh", options={"HIDDEN"})
    global_scale: bpy.props.FloatProperty(name="Scale", default=1.0, min=1e-6,
                                          description="Scale of the BVH's units in scene units")

    @classmethod
    def poll(cls, context):
        if _props(context).target is None:
            cls.poll_message_set("Pick a target armature")
            return False
        return True

    def execute(self, context):
        p = _props(context)
        before = set(bpy.data.objects)
        bpy.ops.import_anim.bvh(filepath=self.filepath, global_scale=self.global_scale, update_scene_fps=True,
                                update_scene_duration=True)
        new = [o for o in bpy.data.objects if o not in before and o.type == "ARMATURE"]
        if not new:
            self.report({"ERROR"}, f"Blender's BVH importer made no armature from {self.filepath}")
            return {"CANCELLED"}
        p.source = new[0]
        try:
            j = make_job(context, p, bone_map=None)
            result = j.run()
        except (RigError, ValueError) as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        p.summary = result.summary()[:1000]
        self.report({"INFO"}, result.summary())
        return {"FINISHED"}


classes = (ITASC_OT_retarget, ITASC_OT_retarget_auto_map, ITASC_OT_retarget_map_export, ITASC_OT_retarget_map_import,
           ITASC_OT_retarget_span, ITASC_OT_import_bvh_retarget)
register, unregister = bpy.utils.register_classes_factory(classes)

"""Operators for OpenSim marker IK (``bpy.ops.itasc.opensim_*``): import a model, import a trial,
solve and bake, export the .mot, write the marker-error report. Thin: the work is in
`importing` and `solve`."""

from __future__ import annotations

from pathlib import Path

import bpy
from bpy.props import BoolProperty, FloatProperty, IntProperty, StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper

from ...solver.opensim import OpenSimFileError
from .. import guard
from . import importing, scaling, solve
from ..modal_job import ModalJob
from ..rig import RigError

ERRORS = (RigError, OpenSimFileError, OSError, KeyError, ValueError)


def _message(err):
    return err.args[0] if isinstance(err, KeyError) and err.args else str(err)


def _object_mode_poll(cls, context):
    if context.mode != "OBJECT":
        cls.poll_message_set("Switch to Object Mode first")
        return False
    return True


def _model_poll(cls, context, need_result=False):
    obj = solve.model_object(context.object)
    if obj is None:
        cls.poll_message_set("Select an OpenSim model (import one with Import OpenSim Model)")
        return False
    if need_result and not obj.itasc_opensim.has_result:
        cls.poll_message_set("Solve the trial first")
        return False
    return True


class ITASC_OT_opensim_import_model(bpy.types.Operator, ImportHelper):
    """Import an OpenSim model (.osim) as an armature: one bone per body, its markers as empties on the bones"""

    bl_idname = "itasc.opensim_import_model"
    bl_label = "Import OpenSim Model"
    bl_options = {"REGISTER", "UNDO"}

    filename_ext = ".osim"
    filter_glob: StringProperty(default="*.osim", options={"HIDDEN"})
    y_up: BoolProperty(name="Y Up to Z Up", default=True,
                       description="Stand the model up in Blender (OpenSim's ground is Y-up)")
    marker_size: FloatProperty(name="Marker Size", default=0.012, min=0.0001, soft_max=0.1, unit="LENGTH",
                               description="Display size of the model marker empties, in metres")

    @classmethod
    def poll(cls, context):
        return _object_mode_poll(cls, context)

    def execute(self, context):
        try:
            obj = importing.import_model(context, self.filepath, y_up=self.y_up, marker_size=self.marker_size)
        except ERRORS as err:
            self.report({"ERROR"}, _message(err))
            return {"CANCELLED"}
        n_markers = sum(1 for child in obj.children if child.itasc_opensim.kind == "MODEL_MARKER")
        self.report({"INFO"}, f"Imported '{obj.name}': {len(obj.data.bones)} bones, {n_markers} model markers")
        return {"FINISHED"}


class ITASC_OT_opensim_import_trc(bpy.types.Operator, ImportHelper):
    """Import a .trc or .c3d marker trial as animated marker empties; bind it to the selected OpenSim model"""

    bl_idname = "itasc.opensim_import_trc"
    bl_label = "Import Marker Trial"
    bl_options = {"REGISTER", "UNDO"}

    filename_ext = ".trc"
    filter_glob: StringProperty(default="*.trc;*.c3d", options={"HIDDEN"})
    y_up: BoolProperty(name="Y Up to Z Up", default=True,
                       description="Turn the lab's Y-up frame upright in Blender, as the model import does")
    adjust_scene: BoolProperty(
        name="Match Scene to Trial", default=True,
        description="Set the scene's frame rate to the data rate and its frame range to the trial")
    first_frame: IntProperty(name="First Frame", default=-1, min=-1,
                             description="Frame of the first sample (-1: its frame number in the file)")
    marker_size: FloatProperty(name="Marker Size", default=0.01, min=0.0001, soft_max=0.1, unit="LENGTH",
                               description="Display size of the marker empties, in metres")

    @classmethod
    def poll(cls, context):
        return _object_mode_poll(cls, context)

    def execute(self, context):
        model = solve.model_object(context.object)
        try:
            root = importing.import_trial(
                context, self.filepath, y_up=self.y_up, adjust_scene=self.adjust_scene,
                first_frame=None if self.first_frame < 0 else self.first_frame, model=model,
                marker_size=self.marker_size)
        except ERRORS as err:
            self.report({"ERROR"}, _message(err))
            return {"CANCELLED"}
        frames, _ = solve.trial_samples(root)
        text = (f"Imported '{root.name}': {len(frames)} samples (frames {frames[0]:g} to {frames[-1]:g}), "
                f"{len(root.children)} markers")
        if model is not None:
            try:
                text += f"; bound to '{model.name}' ({len(solve.binding(model).names)} markers by name)"
            except ERRORS as err:
                self.report({"WARNING"}, f"Bound to '{model.name}', but: {_message(err)}")
        self.report({"INFO"}, text)
        return {"FINISHED"}


class ITASC_OT_opensim_scale(bpy.types.Operator):
    """Scale the model to the subject with OpenSim's Scale tool (the setup's measurements and marker placer on the static trial); the armature is rebuilt from the scaled model"""

    bl_idname = "itasc.opensim_scale"
    bl_label = "Scale Model"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        if not (_object_mode_poll(cls, context) and _model_poll(cls, context)):
            return False
        if not solve.model_object(context.object).itasc_opensim.scale_setup:
            cls.poll_message_set("Pick a Scale Setup (.xml) first")
            return False
        if guard.baking():
            cls.poll_message_set("A bake is running")
            return False
        return True

    def execute(self, context):
        obj = solve.model_object(context.object)
        s = obj.itasc_opensim
        try:
            run = scaling.scale_model(context, obj, s.scale_setup, s.static_trial or None)
        except ERRORS as err:
            self.report({"ERROR"}, _message(err))
            return {"CANCELLED"}
        for note in run.notes:
            self.report({"WARNING"}, note)
        rms = f", static pose marker RMS {1e3 * s.scale_rms:.3g} mm" if s.scale_rms == s.scale_rms else ""
        self.report({"INFO"}, f"Scaled '{obj.name}' to {s.source}{rms}")
        return {"FINISHED"}


class ITASC_OT_opensim_solve(ModalJob, bpy.types.Operator):
    """Solve every sample of the bound trial with marker IK (OpenSim's objective) and key the bones (Esc cancels)"""

    bl_idname = "itasc.opensim_solve"
    bl_label = "Solve and Bake"
    bl_options = {"REGISTER", "UNDO"}

    job_errors = ERRORS
    job_noun = "Solve"

    def error_text(self, err):
        return _message(err)

    @classmethod
    def poll(cls, context):
        if not _model_poll(cls, context):
            return False
        if solve.model_object(context.object).itasc_opensim.trial is None:
            cls.poll_message_set("Bind a trial: import a .trc or .c3d with the model selected, or pick one in the panel")
            return False
        if context.mode not in ("OBJECT", "POSE"):
            cls.poll_message_set("Switch to Object or Pose Mode first")
            return False
        if guard.baking():
            cls.poll_message_set("A bake is running")
            return False
        return True

    def _finished(self, report):
        for message in report.messages:
            self.report({"WARNING"}, message)
        converged = report.engine.converged is None or bool(report.engine.converged.all())
        self.report({"INFO"} if converged else {"WARNING"}, report.summary())
        return {"FINISHED"}

    def execute(self, context):
        wm = context.window_manager
        try:
            job = self._make_job(context)
            wm.progress_begin(0, job.total)
            try:
                with guard.suspended():
                    for done in job.steps():
                        wm.progress_update(done)
            finally:
                wm.progress_end()
        except ERRORS as err:
            self.report({"ERROR"}, _message(err))
            return {"CANCELLED"}
        return self._finished(job.report)

    def _make_job(self, context):
        return solve.prepare(solve.model_object(context.object))

    def _finish(self):
        return self._finished(self._job.report)


class _Writer(ExportHelper):
    suffix = ""

    @classmethod
    def poll(cls, context):
        return _model_poll(cls, context, need_result=True)

    def invoke(self, context, event):
        obj = solve.model_object(context.object)
        stem = bpy.path.clean_name(obj.itasc_opensim.result_trial or obj.name)
        folder = Path(bpy.path.abspath("//")) if bpy.data.filepath else Path.cwd()
        self.filepath = str(folder / f"{stem}{self.suffix}{self.filename_ext}")
        return ExportHelper.invoke(self, context, event)

    def write(self, obj, path):
        raise NotImplementedError

    def execute(self, context):
        obj = solve.model_object(context.object)
        try:
            path = self.write(obj, self.filepath)
        except ERRORS as err:
            self.report({"ERROR"}, _message(err))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Wrote {path}")
        return {"FINISHED"}


class ITASC_OT_opensim_export_motion(_Writer, bpy.types.Operator):
    """Write the solved coordinates as an OpenSim motion (.mot, rotations in degrees)"""

    bl_idname = "itasc.opensim_export_motion"
    bl_label = "Export Motion (.mot)"
    filename_ext = ".mot"
    suffix = "_ik"
    filter_glob: StringProperty(default="*.mot", options={"HIDDEN"})

    def write(self, obj, path):
        return solve.write_motion_file(obj, path)


class ITASC_OT_opensim_write_errors(_Writer, bpy.types.Operator):
    """Write the per-frame marker errors (total squared, RMS, max) as OpenSim's marker-error report (.sto)"""

    bl_idname = "itasc.opensim_write_errors"
    bl_label = "Write Error Report"
    filename_ext = ".sto"
    suffix = "_ik_marker_errors"
    filter_glob: StringProperty(default="*.sto", options={"HIDDEN"})

    def write(self, obj, path):
        return solve.write_error_report(obj, path)


class ITASC_OT_opensim_worst_frame(bpy.types.Operator):
    """Go to the frame with the largest marker error of the solved trial"""

    bl_idname = "itasc.opensim_worst_frame"
    bl_label = "Go to Worst Frame"
    bl_options = {"REGISTER"}

    @classmethod
    def poll(cls, context):
        return _model_poll(cls, context, need_result=True)

    def execute(self, context):
        obj = solve.model_object(context.object)
        _, largest, frame = solve.trial_summary(obj)
        whole = int(frame // 1)
        context.scene.frame_set(whole, subframe=float(frame - whole))
        self.report({"INFO"}, f"Frame {frame:g}: largest marker error {1e3 * largest:.3g} mm")
        return {"FINISHED"}


classes = (ITASC_OT_opensim_import_model, ITASC_OT_opensim_import_trc, ITASC_OT_opensim_scale, ITASC_OT_opensim_solve,
           ITASC_OT_opensim_export_motion, ITASC_OT_opensim_write_errors, ITASC_OT_opensim_worst_frame)
register, unregister = bpy.utils.register_classes_factory(classes)

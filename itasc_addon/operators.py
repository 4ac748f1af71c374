"""Operators (``bpy.ops.itasc.*``): solve the current frame, bake a range, clear a bake, live
preview, hand the rig over, choose the constraints we drive. Thin: the work is in `job` and `live`."""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty, IntProperty, StringProperty

from . import api, guard, handover, job, keys, live
from .modal_job import ModalJob
from .rig import RigError, ik_constraints


def _armature_poll(cls, context):
    obj = context.object
    if obj is None or obj.type != "ARMATURE":
        cls.poll_message_set("Select an armature object")
        return False
    if not ik_constraints(obj):
        cls.poll_message_set("The armature has no IK constraint")
        return False
    if guard.baking():
        cls.poll_message_set("A bake is running")
        return False
    return True


def _report_result(op, result):
    for warning in result.warnings:
        op.report({"WARNING"}, warning)
    level = {"INFO"} if result.not_converged == 0 else {"WARNING"}
    op.report(level, result.summary())


class ITASC_OT_solve_frame(bpy.types.Operator):
    """Solve the current frame with the iTaSC IK solver and pose the driven bones"""

    bl_idname = "itasc.solve_frame"
    bl_label = "Solve Frame"
    bl_options = {"REGISTER", "UNDO"}

    key: BoolProperty(name="Insert Keys", default=False,
                      description="Also key the solved channels at this frame")

    @classmethod
    def poll(cls, context):
        return _armature_poll(cls, context)

    def invoke(self, context, event):
        self.key = bool(context.scene.tool_settings.use_keyframe_insert_auto)
        return self.execute(context)

    def execute(self, context):
        try:
            result = api.solve_frame(context.object, key=self.key)
        except (RigError, ValueError) as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        _report_result(self, result)
        return {"FINISHED"}


class ITASC_OT_bake(ModalJob, bpy.types.Operator):
    """Bake the frame range to keyframes with the iTaSC IK solver (Esc cancels)"""

    bl_idname = "itasc.bake"
    bl_label = "Bake IK"
    bl_options = {"REGISTER", "UNDO"}

    frame_start: IntProperty(name="Start", default=-1, description="First frame (-1: the panel's)")
    frame_end: IntProperty(name="End", default=-1, description="Last frame (-1: the panel's)")
    step: IntProperty(name="Step", default=0, min=0, description="Frame step (0: the panel's)")
    only_selected: BoolProperty(name="Only Selected Bones", default=False)

    job_errors = (RigError, ValueError)
    job_noun = "Bake"

    @classmethod
    def poll(cls, context):
        return _armature_poll(cls, context)

    def _make_job(self, context):
        obj = context.object
        props = obj.itasc
        start = props.frame_start if self.frame_start < 0 else self.frame_start
        end = props.frame_end if self.frame_end < 0 else self.frame_end
        step = props.frame_step if self.step == 0 else self.step
        only = self.only_selected or props.only_selected
        if end < start:
            raise RigError(f"the bake range {start}..{end} is empty")
        bones = api.selected_bones(obj) if only else None
        return job.prepare(obj, list(range(start, end + 1, step)), bake=True, bones=bones)

    def execute(self, context):
        try:
            with guard.suspended():
                result = self._make_job(context).run()
        except (RigError, ValueError) as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        _report_result(self, result)
        return {"FINISHED"}

    def _finish(self):
        _report_result(self, self._job.result)
        return {"FINISHED"}


class ITASC_OT_clear_bake(bpy.types.Operator):
    """Remove the keys that iTaSC IK bakes wrote on this armature"""

    bl_idname = "itasc.clear_bake"
    bl_label = "Clear Bake"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        obj = context.object
        if obj is None or obj.type != "ARMATURE":
            cls.poll_message_set("Select an armature object")
            return False
        if not len(obj.itasc.baked):
            cls.poll_message_set("Nothing baked on this armature")
            return False
        return True

    def execute(self, context):
        n = keys.clear_bake(context.object)
        self.report({"INFO"}, f"Cleared {n} baked channel(s)")
        return {"FINISHED"}


class ITASC_OT_live_preview(bpy.types.Operator):
    """Switch live preview on or off: solve when the frame changes or a target moves (animation mode: as a bake)"""

    bl_idname = "itasc.live_preview"
    bl_label = "Live Preview"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return _armature_poll(cls, context)

    def execute(self, context):
        obj = context.object
        handover.initialize(obj)
        on = not obj.itasc.live_preview
        obj.itasc.live_preview = on
        if on:
            try:
                live.solve_now(obj)
            except (RigError, ValueError) as err:
                obj.itasc.live_preview = False
                self.report({"ERROR"}, str(err))
                return {"CANCELLED"}
        self.report({"INFO"}, f"Live preview {'on' if on else 'off'}")
        return {"FINISHED"}


class ITASC_OT_drive(bpy.types.Operator):
    """Hand the rig to the iTaSC IK solver, or give it back to Blender's IK"""

    bl_idname = "itasc.drive"
    bl_label = "Drive Rig"
    bl_options = {"REGISTER", "UNDO"}

    active: BoolProperty(name="Active", default=True)

    @classmethod
    def poll(cls, context):
        return _armature_poll(cls, context)

    def execute(self, context):
        handover.set_active(context.object, self.active)
        self.report({"INFO"}, "iTaSC IK drives the rig" if self.active else "Blender's IK drives the rig")
        return {"FINISHED"}


class ITASC_OT_toggle_constraint(bpy.types.Operator):
    """Drive this IK constraint with the iTaSC IK solver, or leave it to Blender"""

    bl_idname = "itasc.toggle_constraint"
    bl_label = "Drive Constraint"
    bl_options = {"REGISTER", "UNDO", "INTERNAL"}

    bone: StringProperty()
    constraint: StringProperty()

    @classmethod
    def poll(cls, context):
        obj = context.object
        return obj is not None and obj.type == "ARMATURE"

    def execute(self, context):
        obj = context.object
        item = handover.entry(obj, self.bone, self.constraint, create=True)
        item.use = not item.use
        return {"FINISHED"}


classes = (ITASC_OT_solve_frame, ITASC_OT_bake, ITASC_OT_clear_bake, ITASC_OT_live_preview, ITASC_OT_drive,
           ITASC_OT_toggle_constraint)
register, unregister = bpy.utils.register_classes_factory(classes)

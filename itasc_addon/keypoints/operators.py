"""The keypoint fit's operator (``bpy.ops.itasc.fit_keypoints``): a modal job with a progress bar
(Esc cancels), one undo step. Thin: the work is in `job`."""

from __future__ import annotations

import bpy

from ..modal_job import ModalJob
from ..rig import RigError
from . import job
from .properties import job_options


class ITASC_OT_fit_keypoints(ModalJob, bpy.types.Operator):
    """Fit the keypoint file onto the rig and key it (Esc cancels)"""

    bl_idname = "itasc.fit_keypoints"
    bl_label = "Fit Keypoints"
    bl_options = {"REGISTER", "UNDO"}
    job_errors = (RigError, ValueError)
    job_noun = "Keypoint fit"

    @classmethod
    def poll(cls, context):
        p = context.scene.itasc_keypoints
        if p.rig is None or not p.filepath.strip():
            cls.poll_message_set("Pick a rig and a keypoint file")
            return False
        return True

    def _make_job(self, context):
        p = context.scene.itasc_keypoints
        return job.prepare(p.rig, bpy.path.abspath(p.filepath), **job_options(p))

    def _finish(self):
        result = self._job.result
        bpy.context.scene.itasc_keypoints.summary = result.summary()[:1000]
        self.report({"INFO"}, result.summary())
        return {"FINISHED"}


classes = (ITASC_OT_fit_keypoints,)
register, unregister = bpy.utils.register_classes_factory(classes)

"""Long work in steps under a timer: a progress bar, Esc to cancel (nothing written before the job's
write step; what a job keeps when cancelled later, its `cancel()` says).

An operator mixes `ModalJob` in and gives `_make_job(context)` (a prepared job, from its job
module's `prepare`: reading and checking done, nothing changed; an object with `steps()`, a
generator that yields its `done` after each piece of work, `total`, and `cancel()`, which says
what it kept or None when it wrote nothing), `_finish()` (the report once the job is through),
the exceptions it reports as errors and how to word them, and the noun its cancel message uses. Without a window
(background Blender, scripts) `invoke` runs `execute` to the end instead: by default the job's
`run()`, then `_finish()`. Each step runs on one BLAS thread (`solver.runtime.blas_threads`), as the
jobs' own `run()` do: their small stacked matrices are slower on several, far slower on a busy
machine.
"""

from __future__ import annotations

import bpy

from ..solver.runtime.blas_threads import one_blas_thread
from . import guard


class ModalJob:
    _job = None
    _steps = None
    _timer = None
    job_errors: tuple = (ValueError,)
    job_noun = "Job"

    def error_text(self, err) -> str:
        return str(err)

    def execute(self, context):
        try:
            self._job = self._make_job(context)
            self._job.run()
        except self.job_errors as err:
            self.report({"ERROR"}, self.error_text(err))
            return {"CANCELLED"}
        return self._finish()

    def invoke(self, context, event):
        if context.window is None or bpy.app.background:     # no event loop: run to the end
            return self.execute(context)
        return self._start(context)

    def _start(self, context):
        """Make the job and run it a step per timer event (`modal`), with a progress bar and Esc."""
        try:
            self._job = self._make_job(context)
            self._steps = self._job.steps()
        except self.job_errors as err:
            self.report({"ERROR"}, self.error_text(err))
            return {"CANCELLED"}
        guard.begin_bake()
        wm = context.window_manager
        wm.progress_begin(0, self._job.total)
        self._timer = wm.event_timer_add(0.001, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def _end(self, context):
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        guard.end_bake()

    def _abandon(self, context):
        """Stop the job: its `cancel()` puts the scene's frame back and says what it kept (None
        when nothing was written). Returns that message."""
        message = self._job.cancel()
        self._end(context)
        return message

    def modal(self, context, event):
        if event.type == "ESC":
            message = self._abandon(context)
            self.report({"WARNING"}, message or f"{self.job_noun} cancelled; no keys were written")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        try:
            with one_blas_thread():
                more = next(self._steps, StopIteration) is not StopIteration
        except self.job_errors as err:
            self._end(context)
            self.report({"ERROR"}, self.error_text(err))
            return {"CANCELLED"}
        context.window_manager.progress_update(self._job.done)
        if more:
            return {"RUNNING_MODAL"}
        self._end(context)
        return self._finish()

    def cancel(self, context):
        if self._job is not None:
            self._abandon(context)
        else:
            self._end(context)

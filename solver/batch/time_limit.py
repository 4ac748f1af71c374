"""A time limit on a block of Python code running in any thread (a Dask worker runs its tasks in
threads, where signals cannot reach): a timer raises TrialTimeLimit inside the thread that entered
the block, through CPython's asynchronous exception (PyThreadState_SetAsyncExc). The exception
lands at the next Python bytecode the thread runs, so a single long call into C (one huge numpy
operation) ends first; the engine's solves are made of many short calls. It can land where
Python ignores exceptions (a garbage-collector callback, as Dask's workers install: "Exception
ignored in ..."), so the timer raises it again every RETRY seconds until the block has ended.

Where the interpreter is not CPython the limit is not enforced (the block runs to its end).
"""

from __future__ import annotations

import ctypes
import platform
import threading


RETRY = 0.05


class TrialTimeLimit(Exception):
    """A trial ran longer than its time limit."""


class time_limit:
    """`with time_limit(seconds):` raises TrialTimeLimit in this thread after `seconds` (None: no limit)."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self._lock = threading.Lock()
        self._active = False
        self._timer = None
        self._ident = None
        self._fired = False

    def _fire(self):
        with self._lock:
            if self._active:
                self._fired = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._ident), ctypes.py_object(TrialTimeLimit))
                self._start_timer(RETRY)

    def _start_timer(self, seconds):
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def __enter__(self):
        if self.seconds is not None and platform.python_implementation() == "CPython":
            self._active, self._ident = True, threading.get_ident()
            self._start_timer(self.seconds)
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._active = False
            if self._fired:                          # drop a raise still pending (the block ended, or a retry)
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._ident), None)
            timer = self._timer
        if timer is not None:
            timer.cancel()
        return False

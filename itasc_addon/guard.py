"""Who may solve now: live preview stands aside while a bake runs, while Blender renders, and while
it is solving itself (its own pose writes trigger handlers). Plain flags, kept in memory."""

from __future__ import annotations

import contextlib

import bpy

_flags = {"baking": 0, "rendering": False, "busy": False}


def baking():
    return _flags["baking"] > 0


def begin_bake():
    _flags["baking"] += 1


def end_bake():
    _flags["baking"] = max(0, _flags["baking"] - 1)


@contextlib.contextmanager
def suspended():
    """Live preview stands aside inside this block (a bake)."""
    begin_bake()
    try:
        yield
    finally:
        end_bake()


def set_rendering(on):
    _flags["rendering"] = bool(on)


@contextlib.contextmanager
def busy():
    """Live preview is solving inside this block: handlers its pose writes trigger stand aside."""
    _flags["busy"] = True
    try:
        yield
    finally:
        _flags["busy"] = False


def standing_aside():
    """Whether live preview must not solve now (a bake, a render or its own solve is running)."""
    if baking() or _flags["rendering"] or _flags["busy"]:
        return True
    is_running = getattr(bpy.app, "is_job_running", None)
    return bool(is_running and is_running("RENDER"))

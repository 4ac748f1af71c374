"""The smallest body: what the harness itself is checked with."""

import importlib.util

import bpy

from . import addon


def versions(scale=1.0):
    return {"blender": list(bpy.app.version), "api": hasattr(addon("api"), "bake"), "scale": 2.0 * scale}


def repository_importable():
    """Whether the repository's own engine could be imported here (it must not: the tests must
    exercise the installed extension)."""
    return importlib.util.find_spec("solver") is not None

"""Test bodies that run inside Blender (bpy as a module), called by name from the host side with
`tools.blender_session.call_in_blender("module:function", **kwargs)`. They reach the extension as
a user's script does, through `bl_ext.user_default.itasc_ik`; what they return goes back as JSON."""

import importlib

EXTENSION = "bl_ext.user_default.itasc_ik"


def addon(name):
    """The add-on module ``itasc_addon.<name>`` of the installed extension (e.g. ``addon("api")``).
    Every test body reaches the add-on's modules through here, so a renamed module is one edit."""
    return importlib.import_module(f"{EXTENSION}.itasc_addon.{name}")

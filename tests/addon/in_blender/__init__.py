"""Test bodies that run inside Blender (bpy as a module), called by name from the host side with
`tools.blender_session.call_in_blender("module:function", **kwargs)`. They reach the extension as
a user's script does, through `bl_ext.user_default.itasc_ik`; what they return goes back as JSON.

`addon(name)` is the one place that spells out where the add-on's modules live."""

import importlib

EXTENSION = "bl_ext.user_default.itasc_ik"


def addon(name):
    """The installed add-on's module ``itasc_addon.<name>`` (e.g. ``addon("api")``)."""
    return importlib.import_module(f"{EXTENSION}.itasc_addon.{name}")

"""The installed extension as Blender sees it: loaded, in the preferences, its engine under the
user's extension folder, and unloaded again by disabling it."""

import importlib

import addon_utils
import bpy


def installed_and_disabled(module):
    """Facts about the installed extension `module` (e.g. ``bl_ext.user_default.itasc_ik``),
    then whether it is still loaded after ``addon_disable``."""
    solver = importlib.import_module(module + ".solver")
    result = {
        "blender": bpy.app.version_string,
        "loaded": addon_utils.check(module),
        "in_preferences": module in bpy.context.preferences.addons,
        "solver_dir": list(solver.__path__)[0],
        "user_extensions": bpy.utils.user_resource("EXTENSIONS"),
    }
    bpy.ops.preferences.addon_disable(module=module)
    result["loaded_after_disable"] = addon_utils.check(module)
    return result

"""The Blender side of iTaSC IK: turns bpy data into solver inputs and back.

Modules by role: `rig` reads armatures into the engine's terms and poses back, `keys` writes
keyframes in bulk, `solving` runs solves and bakes, `properties` holds our settings on each
armature object, `operators` and `panels` are the UI, `live` is live preview, `api` is for scripts.
OpenSim marker IK in Blender is the package `opensim`.
"""

import bpy

from .. import solver
from . import live, opensim, operators, panels, properties

_modules = (properties, operators, panels, live, opensim)


def register():
    solver.keep_freed_memory()      # batched solves reuse freed memory instead of faulting it in again
    for module in _modules:
        module.register()
    bpy.types.Object.itasc = bpy.props.PointerProperty(type=properties.ITASC_PG_settings)


def unregister():
    del bpy.types.Object.itasc
    for module in reversed(_modules):
        module.unregister()

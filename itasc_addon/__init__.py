"""The Blender side of iTaSC IK: turns bpy data into solver inputs and back.

Modules by role, lowest first: `rig` reads armatures into the engine's terms and poses back,
`keys` writes keyframes in bulk (and what bakes wrote), `guard` says when live preview stands
aside, `own_pose` keeps the user's own pose of the bones live preview poses, `handover` mutes
Blender's IK while ours drives and gives it back, `two_bone` is the closed-form fast path,
`solving` runs solves and bakes, `live` is live preview; above them `properties` holds our
settings on each armature object, `operators`, `panels` and `modal_job` are the UI
(`registration` registers a package's modules), `api` is for scripts. OpenSim marker IK in
Blender is the package `opensim`, motion-capture retargeting `retarget`, markerless keypoints
`keypoints`. Imports only go downwards.
"""

import bpy

from .. import solver
from . import keypoints, live, opensim, operators, panels, properties, retarget

_modules = (properties, operators, panels, live, opensim, retarget, keypoints)


def register():
    solver.keep_freed_memory()      # batched solves reuse freed memory instead of faulting it in again
    for module in _modules:
        module.register()
    bpy.types.Object.itasc = bpy.props.PointerProperty(type=properties.ITASC_PG_settings)


def unregister():
    del bpy.types.Object.itasc
    for module in reversed(_modules):
        module.unregister()

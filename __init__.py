"""Extension entry point: Blender loads this package as ``bl_ext.<repo>.itasc_ik``.

It only hands register/unregister on to the add-on package, importing it when Blender calls
them, so that importing the repository root outside Blender (pytest does) needs no bpy.
"""


def register():
    from .itasc_addon import register as register_addon
    register_addon()


def unregister():
    from .itasc_addon import unregister as unregister_addon
    unregister_addon()

"""The Blender side of iTaSC IK: turns bpy data into solver inputs and back."""

import bpy


class ITASC_PG_scene(bpy.types.PropertyGroup):
    """Per-scene settings of the iTaSC IK extension (none yet)."""


classes = (ITASC_PG_scene,)
_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)


def register():
    _register_classes()
    bpy.types.Scene.itasc_ik = bpy.props.PointerProperty(type=ITASC_PG_scene)


def unregister():
    del bpy.types.Scene.itasc_ik
    _unregister_classes()

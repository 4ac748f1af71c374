"""The retarget's settings, saved with the file on the scene (``scene.itasc_retarget``): source
and target armatures, the bone map (one row per role: source bone, target bone), the contact
spans the user edits, the calibration frame, the last result's summary and what the automatic
bone map left ambiguous."""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty, CollectionProperty, EnumProperty, IntProperty, PointerProperty, StringProperty


def _is_armature(self, obj):
    return obj.type == "ARMATURE"


class ITASC_PG_role(bpy.types.PropertyGroup):
    """One role of the bone map: the bone playing it on each side ('' leaves it unmapped)."""

    role: StringProperty(name="Role")
    source_bone: StringProperty(name="Source Bone")
    target_bone: StringProperty(name="Target Bone")


class ITASC_PG_span(bpy.types.PropertyGroup):
    """A contact span: the contact point held on one world point from `start` to `end`."""

    point: StringProperty(name="Contact Point", default="heel.L")
    start: IntProperty(name="Start")
    end: IntProperty(name="End")


class ITASC_PG_retarget(bpy.types.PropertyGroup):
    source: PointerProperty(type=bpy.types.Object, name="Source", poll=_is_armature,
                            description="The armature whose motion is retargeted (e.g. an imported BVH)")
    target: PointerProperty(type=bpy.types.Object, name="Target", poll=_is_armature,
                            description="The rig that receives the keys")
    bone_map: CollectionProperty(type=ITASC_PG_role)
    map_index: IntProperty()
    spans: CollectionProperty(type=ITASC_PG_span)
    span_index: IntProperty()
    use_spans: BoolProperty(name="Use These Spans", default=False,
                            description="Hold the contacts listed here instead of detecting them from the source")
    calibration_frame: IntProperty(name="Calibration Frame", default=-1,
                                   description="The frame whose source pose the target's rest pose matches "
                                               "(-1: the first frame)")
    method: EnumProperty(name="Method", items=(("ik", "iTaSC (contacts held)", "Contacts pinned, floor, limits"),
                                               ("copy", "Copy rotations", "What the usual tools do, for contrast")))
    layer: BoolProperty(name="As a Layer", default=False,
                        description="Put the target's action on an NLA track (as Push Down does) and key the "
                                    "retarget into a new action over it; unmapped bones keep their animation")
    summary: StringProperty(name="Last Result")
    map_notes: StringProperty(name="Bone Map Notes",
                              description="What the automatic bone map could not settle, one line each")


classes = (ITASC_PG_role, ITASC_PG_span, ITASC_PG_retarget)
_register, _unregister = bpy.utils.register_classes_factory(classes)


def register():
    _register()
    bpy.types.Scene.itasc_retarget = PointerProperty(type=ITASC_PG_retarget)


def unregister():
    del bpy.types.Scene.itasc_retarget
    _unregister()


def map_pairs(props):
    """The bone map in the panel as {role: (source bone, target bone)} (None: empty map)."""
    if not len(props.bone_map):
        return None
    return {row.role: (row.source_bone, row.target_bone) for row in props.bone_map}


def fill_map(props, pairs):
    """Replace the panel's map by `pairs` {role: (source bone, target bone)}, one row per role."""
    from .bone_maps import ROLES
    props.bone_map.clear()
    props.map_notes = ""
    for role in ROLES:
        s, t = pairs.get(role, ("", ""))
        row = props.bone_map.add()
        row.role, row.source_bone, row.target_bone = role, s or "", t or ""


def span_dict(props):
    """The panel's spans as {point: [(start, end), ...]} (in list order)."""
    out = {}
    for row in props.spans:
        out.setdefault(row.point, []).append((int(row.start), int(row.end)))
    return out

"""What the OpenSim side keeps on objects: ``object.itasc_opensim``.

One property group serves every object an OpenSim import makes; `kind` says which it is:

    MODEL         the armature of an .osim model: `source` (the .osim), `bodies` (body <-> bone
                  names), the bound `trial`, the solve options and the last solution; the Scale
                  tool's inputs (`scale_setup`, `static_trial`) and its last per-marker report
                  (`scale_markers`, `scale_rms`, `scale_summary`, `scaled_from`)
    MODEL_MARKER  an empty for a model marker, parented to its body's bone: `marker`, `body`
    TRIAL         the root empty of an imported .trc (the lab frame): `source`, `data_rate`
    MARKER        an empty for a measured marker, a child of its trial: `marker`

Numbers that must keep double precision or have one value per frame are ID properties inside
the group (not shown in the Custom Properties panel), written and read by the modules that own
them: on a MODEL, ``units_per_metre`` and the solution (``solution_*``, see `solve`); on a
TRIAL, ``units_per_metre``, ``time`` and ``frames`` (one per sample) and ``markers`` (names in
the file's order).
"""

from __future__ import annotations

import bpy
from bpy.props import (BoolProperty, CollectionProperty, EnumProperty, FloatProperty, IntProperty, PointerProperty,
                       StringProperty)

KINDS = (
    ("NONE", "None", "Not part of an OpenSim import"),
    ("MODEL", "Model", "The armature of an OpenSim model"),
    ("MODEL_MARKER", "Model Marker", "A marker of an OpenSim model, fixed on its body's bone"),
    ("TRIAL", "Trial", "The lab frame of an imported .trc trial; its children are the measured markers"),
    ("MARKER", "Measured Marker", "A measured marker of an imported .trc trial"),
)


class ITASC_PG_opensim_body(bpy.types.PropertyGroup):
    """One OpenSim body and the bone that shows it."""

    body: StringProperty(name="Body")
    bone: StringProperty(name="Bone")


SCALE_MARKER_KINDS = (
    ("FIXED", "Anatomical", "A fixed marker: kept where the model has it; its error at the static pose stays"),
    ("MOVED", "Tracking", "Moved onto the static trial's marker by this distance"),
    ("MODEL_ONLY", "Model only", "In the model, not in the static trial"),
    ("TRIAL_ONLY", "Trial only", "In the static trial, not in the model: ignored"),
)


class ITASC_PG_opensim_scale_marker(bpy.types.PropertyGroup):
    """One marker of the Scale tool's report (see opensim.scaling)."""

    marker: StringProperty(name="Marker")
    kind: EnumProperty(name="Kind", items=SCALE_MARKER_KINDS, default="FIXED")
    error: FloatProperty(name="Error", unit="LENGTH", precision=5,
                         description="Metres: the error kept (anatomical) or the distance moved (tracking)")


def _is_trial(self, obj):
    return obj.itasc_opensim.kind == "TRIAL"


class ITASC_PG_opensim(bpy.types.PropertyGroup):
    """OpenSim data of one object (see the module docstring)."""

    kind: EnumProperty(name="Kind", items=KINDS, default="NONE")
    source: StringProperty(name="File", subtype="FILE_PATH",
                           description="The .osim model or .trc trial this object was imported from")
    marker: StringProperty(name="Marker", description="The OpenSim marker name (binding is by this name)")
    body: StringProperty(name="Body", description="The OpenSim body the model marker is fixed in")
    bodies: CollectionProperty(type=ITASC_PG_opensim_body)
    data_rate: FloatProperty(name="Data Rate", description="Samples per second of the .trc trial")
    trial: PointerProperty(
        type=bpy.types.Object, name="Trial", poll=_is_trial,
        description="The imported .trc trial whose markers this model follows (bound by marker name)")
    task_file: StringProperty(
        name="Task Set", subtype="FILE_PATH",
        description="An OpenSim IK task set (.xml) for marker weights and coordinate tasks; empty: every "
                    "bound marker with weight 1")
    accuracy: FloatProperty(
        name="Accuracy", default=1e-5, min=1e-12, soft_max=1e-2, precision=8,
        description="A frame has converged when its Gauss-Newton step is below this (radians or metres), "
                    "as OpenSim's accuracy")
    max_iterations: IntProperty(name="Max Iterations", default=1000, min=1, soft_max=10000,
                                description="Iteration cap per frame and warm-start pass")
    # Summary of the last solution (its arrays are ID properties, see `solve`).
    has_result: BoolProperty(default=False)
    result_frames: IntProperty(default=0)
    result_converged: IntProperty(default=0)
    result_seconds: FloatProperty(default=0.0)
    result_trial: StringProperty(default="")
    result_message: StringProperty(default="")
    # The Scale tool (opensim.scaling).
    scale_setup: StringProperty(
        name="Scale Setup", subtype="FILE_PATH",
        description="An OpenSim ScaleTool setup (.xml): measurements, manual scales, marker set, the marker "
                    "placer's tasks and the subject's mass; its generic model is this armature's .osim")
    static_trial: StringProperty(
        name="Static Trial", subtype="FILE_PATH",
        description="The subject's static trial (.trc or .c3d); empty: the setup's own marker file")
    scale_markers: CollectionProperty(type=ITASC_PG_opensim_scale_marker)
    scale_rms: FloatProperty(default=float("nan"))
    scale_summary: StringProperty(default="")
    scaled_from: StringProperty(default="")


classes = (ITASC_PG_opensim_body, ITASC_PG_opensim_scale_marker, ITASC_PG_opensim)
_register, _unregister = bpy.utils.register_classes_factory(classes)


def register():
    _register()
    bpy.types.Object.itasc_opensim = PointerProperty(type=ITASC_PG_opensim)


def unregister():
    del bpy.types.Object.itasc_opensim
    _unregister()

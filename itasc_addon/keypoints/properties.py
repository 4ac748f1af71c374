"""The keypoint fit's settings, saved with the file on the scene (``scene.itasc_keypoints``): the
rig, the keypoint file and the optional static file, the keypoint set, smoothing cutoff,
confidence threshold, feet held, first frame, method, and the last result's summary."""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, PointerProperty, StringProperty

from ...solver.keypoints import KEYPOINT_SETS


def _is_armature(self, obj):
    return obj.type == "ARMATURE"


class ITASC_PG_keypoints(bpy.types.PropertyGroup):
    rig: PointerProperty(type=bpy.types.Object, name="Rig", poll=_is_armature,
                         description="The armature that receives the keys")
    filepath: StringProperty(name="Keypoints", subtype="FILE_PATH",
                             description="3-D keypoints: .trc (Pose2Sim, OpenCap), MediaPipe .json, .csv, .npy, .npz")
    static_path: StringProperty(name="Static", subtype="FILE_PATH",
                                description="Optional: the person standing still, to calibrate keypoint places and "
                                            "scale on (empty: the trial itself)")
    keypoint_set: EnumProperty(name="Keypoint Set",
                               items=[("AUTO", "From the File", "The set the file's names or keypoint count pick")]
                               + [(name, name, f"{len(s)} keypoints") for name, s in KEYPOINT_SETS.items()])
    use_cutoff: BoolProperty(name="Smooth", default=True,
                             description="Penalise joint acceleration across frames (off: frames fitted independently)")
    cutoff: FloatProperty(name="Cutoff", default=6.0, min=0.1, soft_max=20.0, subtype="NONE", unit="NONE",
                          description="Smoothing cutoff in Hz (Pose2Sim's Butterworth filter uses 6)")
    threshold: FloatProperty(name="Confidence Threshold", default=0.0, min=0.0, max=1.0,
                             description="Keypoints whose confidence is below this count as missing")
    hold_feet: BoolProperty(name="Hold Feet", default=True,
                            description="Hold each foot's keypoints on one point where the foot stands still, and "
                                        "above the floor")
    frame_start: IntProperty(name="First Frame", default=-1,
                             description="Scene frame of the trial's first frame (-1: the scene's start)")
    method: EnumProperty(name="Method", items=(("fit", "iTaSC fit", "Calibrated keypoints, limits, smoothness"),
                                               ("copy", "Copy rotations", "Each bone aimed along its two keypoints, "
                                                                          "for contrast")))
    summary: StringProperty(name="Last Result")


classes = (ITASC_PG_keypoints,)
_register, _unregister = bpy.utils.register_classes_factory(classes)


def register():
    _register()
    bpy.types.Scene.itasc_keypoints = PointerProperty(type=ITASC_PG_keypoints)


def unregister():
    del bpy.types.Scene.itasc_keypoints
    _unregister()


def job_options(props):
    """The panel's settings as `job.prepare` keywords."""
    return {"static": bpy.path.abspath(props.static_path) if props.static_path.strip() else None,
            "keypoint_set": None if props.keypoint_set == "AUTO" else props.keypoint_set,
            "cutoff": float(props.cutoff) if props.use_cutoff else None, "threshold": float(props.threshold),
            "contacts": "auto" if props.hold_feet else None,
            "frame_start": None if props.frame_start < 0 else int(props.frame_start), "method": props.method}

"""Body of test_addon_retarget's layering test: the CMU walk onto Rigify's human metarig that has
animation of its own (a finger the bone map leaves out, and a thigh it maps), retargeted as a
layer (`layer=True`) and, for contrast, into the rig's action as before."""

import bpy
import numpy as np

from .retarget import api, import_clip, metarig, summary
from .scenes import all_keys, clear_scene

FRAMES = (1, 120)
FINGER, THIGH = "f_index.01.L", "thigh.L"


def _keyed(rig):
    """The rig's own animation: the finger curls and the thigh swings over the frames."""
    for f in range(FRAMES[0], FRAMES[1] + 1, 20):
        for name, angle in ((FINGER, 0.6), (THIGH, 0.4)):
            pb = rig.pose.bones[name]
            pb.rotation_mode = "XYZ"
            pb.rotation_euler = (angle * np.sin(f / 15.0), 0.0, 0.0)
            pb.keyframe_insert("rotation_euler", frame=f)


def _evaluated(rig, name, frames):
    """The bone's animated channels (its evaluated matrix_basis) at each frame."""
    scene = bpy.context.scene
    out = []
    for f in frames:
        scene.frame_set(int(f))
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        out.append(np.array(ev.pose.bones[name].matrix_basis).tolist())
    return out


def _paths(action_keys):
    return sorted({k.split('"]')[0].split('["')[1] for k in action_keys if k.startswith("pose.bones")})


def layer_session():
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    clear_scene()
    walk = import_clip("walk")
    out = {}
    for layer in (True, False):
        rig = metarig(f"metarig_{'layer' if layer else 'plain'}")
        _keyed(rig)
        frames = range(FRAMES[0], FRAMES[1] + 1, 7)
        own = rig.animation_data.action
        before = {"finger": _evaluated(rig, FINGER, frames), "keys": all_keys(rig), "action": own.name}
        res = api.retarget(rig, walk, *FRAMES, calibration_frame=1, layer=layer)
        anim = rig.animation_data
        after = {"finger": _evaluated(rig, FINGER, frames), "active": anim.action.name,
                 "active_paths": _paths(all_keys(rig)), "layer_action": res.layer_action,
                 "tracks": [[t.name, [(s.action.name if s.action else "") for s in t.strips]]
                            for t in anim.nla_tracks], **summary(res)}
        if layer:                                        # the rig's own action, as it was
            anim.action = own
            after["own_keys"] = all_keys(rig)
        else:
            after["own_keys"] = all_keys(rig)
        out["layer" if layer else "plain"] = {"before": before, "after": after}
    return out

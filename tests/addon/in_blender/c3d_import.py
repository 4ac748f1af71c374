"""The OpenSim panel's marker import takes a .c3d as it takes a .trc: the same trial imported from
both files, each bound to its own import of the model and solved."""

import glob
import os

import bpy

from . import addon
from .scenes import clear_scene, keys_module

S = addon("opensim.solve")


def c3d_and_trc(osim, c3d_file, trc_file):
    """Import the model twice, bind `c3d_file` to one and `trc_file` to the other, solve both;
    the keys each import made, its frames and solution, and where Blender installed the `c3d` wheel."""
    clear_scene()
    site = bpy.utils.user_resource("EXTENSIONS", path=".local")
    out = {"wheel": sorted(glob.glob(os.path.join(site, "lib", "python*", "site-packages", "c3d", "__init__.py")))}
    for kind, path in (("c3d", c3d_file), ("trc", trc_file)):
        assert bpy.ops.itasc.opensim_import_model(filepath=osim) == {"FINISHED"}
        arm = bpy.context.object
        assert bpy.ops.itasc.opensim_import_trc(filepath=path) == {"FINISHED"}
        trial = arm.itasc_opensim.trial
        markers = {}
        for empty in trial.children:
            channels = keys_module.Channels(empty)
            curves = [channels.find("location", axis) for axis in range(3)]
            hide = channels.find("hide_viewport", 0)
            markers[empty.itasc_opensim.marker] = {
                "frames": [k.co[0] for k in curves[0].keyframe_points] if curves[0] else [],
                "values": [[k.co[1] for k in fc.keyframe_points] for fc in curves] if curves[0] else [],
                "hidden": [[k.co[0], k.co[1]] for k in hide.keyframe_points] if hide else [],
            }
        ik, frames, messages = S.solve(arm)
        out[kind] = {"markers": markers, "names": list(trial.itasc_opensim["markers"]),
                     "frames": S.stored(trial.itasc_opensim, "frames").tolist(),
                     "time": S.stored(trial.itasc_opensim, "time").tolist(), "rate": trial.itasc_opensim.data_rate,
                     "q": ik.q.tolist(), "range": [bpy.context.scene.frame_start, bpy.context.scene.frame_end]}
    return out

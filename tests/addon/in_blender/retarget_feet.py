"""Bodies of test_addon_retarget's clips from other libraries (#33): the CMU walk rewritten with
three namings (Bandai Namco style, Mixamo with a "mixamorig7:" prefix, random names), each with
another rest pose (arms lowered, knees bent at rest, the spine leaning) and, for the Bandai one,
a floor raised 0.28 m and tilted 2 degrees; written as BVH files, imported by Blender's BVH
importer, retargeted with no bone map onto Rigify's metarig and onto the rig Rigify generates,
measured by Blender's evaluation of the keys. The plain walk is retargeted too, as the floor's
reference. Sessions end with exit_at_once (Rigify)."""

import json
import tempfile
from pathlib import Path

import bpy
import numpy as np

from . import addon
from .retarget import CMU_UNIT, metarig, summary
from .scenes import clear_scene

api = addon("api")
bone_maps = addon("retarget.bone_maps")

RAISE = 5.0              # CMU units the Bandai clip's floor is raised (0.28 m)
TILT = 2.0               # degrees the Bandai clip's floor is tilted, about the file's X axis


def clips(folder):
    """{key: (path, truth {role: joint name})}: the walk rewritten (module docstring)."""
    from tests.apps.retarget_bvh import BANDAI, CLIPS, DATA, MIXAMO, TRUTH, read_bvh, restposed, rotation, write_bvh
    walk = read_bvh(DATA / CLIPS["walk"])
    cmu = TRUTH["walk"]
    rng = np.random.default_rng(33)
    anonymous = {n: "j" + "".join(rng.choice(list("0123456789abcdef"), 9)) for n in walk["names"]}
    variants = {
        "bandai": ({cmu[r]: BANDAI[r] for r in BANDAI},
                   {"LeftArm": rotation("Z", 40.0), "RightArm": rotation("Z", -40.0),
                    "LeftLeg": rotation("X", 15.0), "RightLeg": rotation("X", 15.0)},
                   rotation("X", TILT), (0.0, RAISE, 0.0)),
        "mixamo": ({**{n: "mixamorig7:" + n for n in walk["names"]}, **{cmu[r]: "mixamorig7:" + MIXAMO[r] for r in MIXAMO}},
                   {"LeftArm": rotation("Z", 60.0), "RightArm": rotation("Z", -60.0)}, np.eye(3), (0.0, 0.0, 0.0)),
        "anonymous": (anonymous, {"LowerBack": rotation("X", 12.0), "LeftArm": rotation("Z", 25.0),
                                  "RightArm": rotation("Z", -25.0), "LeftFoot": rotation("X", -20.0),
                                  "RightFoot": rotation("X", -20.0)}, np.eye(3), (0.0, 0.0, 0.0)),
    }
    out = {}
    for key, (names, turns, tilt, lift) in variants.items():
        path = Path(folder) / f"walk_{key}.bvh"
        write_bvh(restposed(walk, turns, names, tilt, lift), path)
        out[key] = (path, {r: names.get(cmu[r], cmu[r]) for r in cmu})
    return out


def import_bvh(path):
    before = set(bpy.data.objects)
    bpy.ops.import_anim.bvh(filepath=str(path), global_scale=CMU_UNIT, update_scene_fps=True,
                            update_scene_duration=True)
    return next(o for o in bpy.data.objects if o not in before and o.type == "ARMATURE")


def world_heads(obj, frames):
    """The armature's bone heads (F, B, 3) in world space as Blender evaluates them, bones in the
    armature's order."""
    out = []
    for f in frames:
        bpy.context.scene.frame_set(int(f))
        out.append([list(obj.matrix_world @ pb.head) for pb in obj.pose.bones])
    return np.array(out)


def states():
    """Every object's selection and viewport visibility, and the active object."""
    layer = bpy.context.view_layer
    return [[o.name, o.select_get(), o.hide_viewport, o.visible_get()] for o in layer.objects] + \
        [getattr(layer.objects.active, "name", None)]


def run(rig, src):
    before = states()
    result = api.retarget(rig, src, calibration_frame=1)
    scene_kept = states() == before
    hips = src.pose.bones[result.bone_map["hips"][0]]
    bpy.context.scene.frame_set(1)
    return {**summary(result), "bone_map": {r: s for r, (s, _) in result.bone_map.items()},
            "points": list(result.contact_names), "floor": result.floor, "floor_normal": list(result.floor_normal),
            "floor_slope": result.floor_slope, "source_floor": result.source_floor,
            "hips_start": list(src.matrix_world @ hips.head), "frames_converged": int(result.converged.sum()),
            "scene_kept": scene_kept}


def namings_session():
    """The three rewritten walks and the plain one onto the metarig and the generated rig."""
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    clear_scene()
    folder = tempfile.mkdtemp(prefix="itasc_clips_")
    made = clips(folder)
    sources = {key: import_bvh(path) for key, (path, _) in made.items()}
    from tests.apps.retarget_bvh import CLIPS, DATA
    sources["plain"] = import_bvh(DATA / CLIPS["walk"])
    out = {"truth": {key: truth for key, (_, truth) in made.items()}, "runs": {}}
    # The rewritten clips' world motion is the plain one's (turned and raised for the Bandai one):
    # the joints' world heads, Blender's evaluation, give that transform independently.
    frames = range(1, 344, 7)
    plain_heads = world_heads(sources["plain"], frames)
    out["heads"] = {key: world_heads(sources[key], frames).tolist() for key in made}
    out["plain_heads"] = plain_heads.tolist()
    rig = metarig()
    bpy.ops.object.armature_human_metarig_add()
    meta = bpy.context.view_layer.objects.active
    bpy.ops.object.mode_set(mode="OBJECT")
    if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
        raise RuntimeError("Rigify could not generate its rig")
    generated = bpy.context.view_layer.objects.active
    meta.hide_viewport = True
    bpy.ops.object.mode_set(mode="OBJECT")
    for obj in (rig, sources["bandai"]):                 # a selection the retargets must leave as it is
        obj.select_set(True)
    for key, src in sources.items():
        out["runs"][f"{key}_metarig"] = run(rig, src)
        out["runs"][f"{key}_generated"] = run(generated, src)
    return json.loads(json.dumps(out, default=float))

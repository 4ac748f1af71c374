"""Bodies of test_addon_settings: the solver's settings followed from the armature's own IK panel,
our panel's overrides, the API's options, a rig on Blender's Standard solver, an older file."""

import os
import tempfile

import bpy
import numpy as np

from . import addon
from .panels import draw_in
from .scenes import api, chain_rig, clear_scene, tip_errors

solving = addon("solving")
N_FRAMES = 6


def _bake(rig, **options):
    """Bake frames 1..N_FRAMES from the rest pose (an earlier bake cleared, the pose it left
    reset) and report."""
    api.clear_bake(rig)
    for pb in rig.pose.bones:
        pb.matrix_basis.identity()
    res = api.bake(rig, 1, N_FRAMES, **options)
    return {"settings": res.settings, "from": res.settings_from, "mode": res.mode, "method": res.method,
            "iterations": res.iterations.tolist(), "engine_error": float(np.nanmax(res.engine.position_error)),
            "engine_converged": res.engine.converged.tolist(), "error": float(np.nanmax(res.position_error)),
            "converged": res.converged.tolist(), "notes": res.notes, "warnings": res.warnings}


def _labels(obj, panel="ITASC_PT_settings"):
    return [text for kind, text in draw_in(obj)[panel] if kind == "label"]


def _props(obj, panel="ITASC_PT_settings"):
    return [name for kind, name in draw_in(obj)[panel] if kind == "prop"]


def followed():
    """A chain on Blender's iTaSC: baked, then the armature's iTaSC settings changed between bakes
    (iterations and solver, then precision, then mode); what `settings_for` (what live preview
    asks every frame) gives after each change; the panel as drawn."""
    clear_scene()
    scene, rig, target = chain_rig(4, N_FRAMES)
    p = rig.pose.ik_param
    out = {"defaults": {"precision": p.precision, "iterations": p.iterations}}
    out["first"] = _bake(rig)
    out["panel"] = {"labels": _labels(rig), "props": _props(rig)}
    p.iterations, p.solver = 1, "DLS"
    out["live_iterations"] = solving.settings_for(rig)[1].max_iterations
    out["one_iteration"] = _bake(rig)
    p.iterations, p.precision = 100, 1e-9
    out["tight"] = _bake(rig)
    p.mode = "SIMULATION"
    out["simulation"] = _bake(rig)
    out["overrides"] = [k for k in rig.itasc.keys() if k.startswith("override_") and rig.itasc[k]]
    return out


def overridden():
    """Our panel's overrides against the armature's settings and the API's options."""
    clear_scene()
    scene, rig, target = chain_rig(4, N_FRAMES)
    p, props = rig.pose.ik_param, rig.itasc
    out = {}
    p.iterations = 77
    props.override_max_iterations = True
    out["started_at"] = props.max_iterations            # the value in use when the override went on
    props.max_iterations = 2
    p.iterations = 50
    out["override"] = _bake(rig)
    out["option"] = _bake(rig, max_iterations=3)
    props.override_max_iterations = False
    out["released"] = _bake(rig)
    props.precision = 0.01                               # set as in the panel: its override turns on
    out["precision_flag"] = props.override_precision
    out["loose"] = _bake(rig)
    out["loose_shown"] = tip_errors(scene, rig, target, range(1, N_FRAMES + 1))
    out["panel"] = {"labels": _labels(rig), "props": _props(rig)}
    out["option_precision"] = _bake(rig, precision=1e-7)
    return out


def standard():
    """A chain on Blender's Standard IK solver: its constraint's iterations followed, what the
    result and the panel say."""
    clear_scene()
    scene, rig, target = chain_rig(4, N_FRAMES)
    rig.pose.ik_solver = "LEGACY"
    con = rig.pose.bones[-1].constraints[0]
    con.iterations = 2
    out = {"few": _bake(rig)}
    con.iterations = 500
    out["many"] = _bake(rig)
    out["shown"] = tip_errors(scene, rig, target, range(1, N_FRAMES + 1))
    out["panel"] = {"labels": _labels(rig), "props": _props(rig)}
    return out


def itasc_only():
    """iTaSC settings without a field of ours, in simulation mode: reiteration NEVER / INITIAL /
    ALWAYS, step_min (the most sub-steps), step_max and Translate Roots (not followed)."""
    clear_scene()
    scene, rig, target = chain_rig(4, N_FRAMES)
    p = rig.pose.ik_param
    p.mode = "SIMULATION"
    out = {"fps": scene.render.fps / scene.render.fps_base}
    p.reiteration_method = "NEVER"
    out["never"] = _bake(rig)
    p.reiteration_method = "INITIAL"
    p.step_min = 0.02
    out["initial"] = _bake(rig)
    p.step_min = 0.001
    out["small_steps"] = _bake(rig)
    p.reiteration_method, p.translate_root_bones, p.step_max = "ALWAYS", True, 0.02
    out["unfollowed"] = _bake(rig)
    out["panel"] = {"labels": _labels(rig), "props": _props(rig)}
    return out


def older_file():
    """A file saved by the add-on before the override flags: our settings stored (as the first
    use copied them, or a user set them) without flags. Saved, opened again, baked: an iTaSC rig
    follows its armature, a Standard one keeps what our panel held."""
    clear_scene()
    scene, rig, target = chain_rig(4, N_FRAMES)
    scene2, legacy, target2 = chain_rig(4, N_FRAMES, name="legacy")
    legacy.pose.ik_solver = "LEGACY"
    for obj in (rig, legacy):
        stored = obj.itasc
        stored["initialized"] = True
        stored["mode"], stored["method"] = 1, 1                # SIMULATION, DLS
        stored["max_iterations"], stored["precision"], stored["feedback"] = 7, 1e-3, 3.0
    path = os.path.join(tempfile.mkdtemp(prefix="itasc_old_"), "old.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    scene = bpy.context.scene
    rig, legacy = bpy.data.objects["chain"], bpy.data.objects["legacy"]
    out = {"stored": {"method": rig.itasc.method, "max_iterations": rig.itasc.max_iterations},
           "flags": [k for k in rig.itasc.keys() if k.startswith("override_")]}
    out["itasc"] = _bake(rig)
    out["itasc_shown"] = tip_errors(scene, rig, bpy.data.objects["chain_target"], range(1, N_FRAMES + 1))
    out["legacy"] = _bake(legacy)
    return out

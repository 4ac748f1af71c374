"""Bodies of test_addon_rigify_rigs: the rig Rigify generates from each of its metarigs, every limb in
IK with its pole on and the controls keyed (tools.rigify_rigs), baked with the add-on's defaults and
measured by Blender's own evaluation beside Blender's own IK. Sessions end with exit_at_once."""

import bpy
import numpy as np

from tools import rigify_rigs

from . import addon

api = addon("api")


def mutes(rig):
    return {f"{pb.name}/{c.name}": bool(c.mute) for pb in rig.pose.bones for c in pb.constraints if c.type == "IK"}


def bake(metarig, n_frames=12):
    """Blender's own IK on the generated rig, then our bake, each measured by Blender; or the
    refusal's message where the rig has no IK."""
    scene, rig, controls = rigify_rigs.build(bpy, metarig, n_frames)
    frames = range(1, n_frames + 1)
    active = [f"{pb.name}/{c.name}" for pb, c in rigify_rigs.active_ik(rig)]
    before = mutes(rig)
    if not active:
        try:
            api.bake(rig, 1, n_frames)
        except ValueError as err:
            return {"refused": str(err), "mutes": mutes(rig) == before}
        return {"refused": ""}
    blender = rigify_rigs.tail_errors(bpy, scene, rig, frames, active)
    blender_bones = rigify_rigs.deform_heads(bpy, scene, rig, frames)
    res = api.bake(rig, 1, n_frames)
    ours = rigify_rigs.tail_errors(bpy, scene, rig, frames, active)
    ours_bones = rigify_rigs.deform_heads(bpy, scene, rig, frames)
    after = mutes(rig)
    columns = [res.constraints.index(name) if name in res.constraints else -1 for name in active]
    api.release(rig)
    return {
        "controls": controls, "active": active, "constraints": list(res.constraints),
        "solved_by": [res.solved_by[c] if c >= 0 else None for c in columns],
        "reported": np.asarray(res.position_error)[:, [c for c in columns if c >= 0]].tolist(),
        "converged": np.asarray(res.converged).tolist(), "warnings": list(res.warnings),
        "blender": blender, "ours": ours,
        "bones_moved": float(np.max(np.abs(np.subtract(ours_bones, blender_bones)))),
        "muted_after_bake": [name for name in active if after[name]],
        "released": mutes(rig) == before, "seconds": res.seconds, "verify_seconds": res.verify_seconds,
        "precision": float(res.settings.get("precision", np.nan)) if res.settings else None,
        "pole_error": np.asarray(res.pole_error)[:, [c for c in columns if c >= 0]].tolist(),
        "rotation_error": np.asarray(res.rotation_error)[:, [c for c in columns if c >= 0]].tolist(),
        "solver_converged": np.asarray(res.solver_converged).tolist(),
        "floor": np.asarray(res.float32_floor)[:, [c for c in columns if c >= 0]].tolist(),
    }

"""Bodies of test_addon_rigify: the rig Rigify generates (scenes.generated_rigify_rig), baked,
solved and handed back, measured by Blender's own evaluation. Sessions that call these end with
exit_at_once (Blender 4.2 crashes on exit once Rigify was enabled)."""

import bpy
import numpy as np

from . import addon
from .faults import finite
from .scenes import all_keys, api, generated_rigify_rig

handover = addon("handover")

# Per limb: the bone that carries the IK constraints, the target bone they aim at, the limb's
# property bone (IK_FK, pole_vector) and the chain (tip first).
LIMBS = {
    "leg.L": ("MCH-shin_ik.L", "MCH-thigh_ik_target.L", "thigh_parent.L", ("MCH-shin_ik.L", "thigh_ik.L")),
    "leg.R": ("MCH-shin_ik.R", "MCH-thigh_ik_target.R", "thigh_parent.R", ("MCH-shin_ik.R", "thigh_ik.R")),
    "arm.L": ("MCH-forearm_ik.L", "MCH-upper_arm_ik_target.L", "upper_arm_parent.L",
              ("MCH-forearm_ik.L", "upper_arm_ik.L")),
    "arm.R": ("MCH-forearm_ik.R", "MCH-upper_arm_ik_target.R", "upper_arm_parent.R",
              ("MCH-forearm_ik.R", "upper_arm_ik.R")),
}
CHAIN_BONES = sorted(b for *_, chain in LIMBS.values() for b in chain)


def tail_errors(scene, rig, frames):
    """Per frame, per limb: Blender's evaluated distance from the IK bone's tail to the head of
    its target bone (where Blender's IK aims), in world space."""
    out = []
    for f in frames:
        scene.frame_set(int(f))
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        world = ev.matrix_world
        out.append([(world @ ev.pose.bones[tip].tail - world @ ev.pose.bones[target].head).length
                    for tip, target, _, _ in LIMBS.values()])
    return out


def chain_matrices(rig, frame):
    """The chain bones' evaluated pose matrices at a frame, as nested lists."""
    bpy.context.scene.frame_set(frame)
    ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return {b: [list(row) for row in ev.pose.bones[b].matrix] for b in CHAIN_BONES}


def rig_state(rig):
    """Everything the hand-over may touch, as plain values compared bit for bit: every constraint's
    mute and influence, and every driver (its F-curve's mute flag, keys and modifiers, the
    driver's type, expression and variables)."""
    constraints = [[pb.name, c.name, c.type, bool(c.mute), float(c.influence)]
                   for pb in rig.pose.bones for c in pb.constraints]
    drivers = []
    for fc in rig.animation_data.drivers:
        d = fc.driver
        drivers.append([
            fc.data_path, fc.array_index, bool(fc.mute), d.type, d.expression, bool(d.use_self),
            [[v.name, v.type, [[t.id.name if t.id else None, t.data_path, t.bone_target, t.transform_type,
                                t.transform_space] for t in v.targets]] for v in d.variables],
            [[m.type, bool(m.mute)] + (list(m.coefficients) if m.type == "GENERATOR" else []) for m in fc.modifiers],
            [list(k.co) + list(k.handle_left) + list(k.handle_right) for k in fc.keyframe_points]])
    return {"constraints": constraints, "drivers": drivers}


def ik_mutes(rig):
    return {f"{tip}/{c.name}": bool(c.mute) for tip, *_ in LIMBS.values() for c in rig.pose.bones[tip].constraints}


def generated(n_frames=24):
    """The generated rig, every limb in IK with poles off: bake, solve frames, the user flipping a
    pole switch while ours drives, and the release, each measured by Blender."""
    scene, rig, controls = generated_rigify_rig(n_frames)
    frames = list(range(1, n_frames + 1))
    original = rig_state(rig)
    before = all_keys(rig)
    blender = tail_errors(scene, rig, frames)            # Blender's own (LEGACY) IK on the rig as generated

    res = api.bake(rig, 1, n_frames)
    baked = tail_errors(scene, rig, frames)
    out = {"blender": blender, "baked": baked, "constraints": res.constraint_names, "bones": sorted(res.bones),
           "warnings": res.warnings, "converged": bool(res.converged.all()), "keys_written": res.keys_written,
           "driving": ik_mutes(rig), "chain_bones": CHAIN_BONES, "before": before, "after": all_keys(rig)}

    # solve_frame at a few frames (keys stay as baked: the pose is written, not keyed).
    solved = {}
    for f in (3, 11, 20):
        r = api.solve_frame(rig, f)
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        world = ev.matrix_world
        solved[f] = {"frame": scene.frame_current, "converged": bool(r.converged.all()),
                     "errors": [(world @ ev.pose.bones[tip].tail - world @ ev.pose.bones[target].head).length
                                for tip, target, _, _ in LIMBS.values()]}
    out["solved"] = solved

    # The user flips the left leg's pole switch while ours drives: Blender's IK stays off (both of
    # the leg's constraints stay muted through evaluations, the chain shows our keys), and ours
    # now drives the pole variant.
    frame = 7
    shown = chain_matrices(rig, frame)
    rig.pose.bones["thigh_parent.L"]["pole_vector"] = True
    rig.update_tag()
    for f in (frame + 1, frame):
        scene.frame_set(f)
    out["flipped_mutes"] = ik_mutes(rig)
    out["flipped_shown"] = chain_matrices(rig, frame) == shown
    out["flipped_errors"] = tail_errors(scene, rig, [frame])[0]
    out["flipped_chosen"] = {c.name: handover.chosen(rig, rig.pose.bones["MCH-shin_ik.L"], c)
                             for c in rig.pose.bones["MCH-shin_ik.L"].constraints}
    r = api.solve_frame(rig, frame)
    out["flipped_constraints"] = r.constraint_names

    # Release with the switch still flipped: every mute, driver and influence as it was before.
    api.release(rig)
    out["released"] = rig_state(rig) == original
    out["released_diff"] = _diff(original, rig_state(rig))
    # Blender's drivers act again: the flipped leg's pole variant is on, the plain one off.
    scene.frame_set(frame + 1)
    out["after_release_mutes"] = ik_mutes(rig)
    rig.pose.bones["thigh_parent.L"]["pole_vector"] = False
    rig.update_tag()
    scene.frame_set(frame)
    out["switched_back"] = rig_state(rig) == original
    out["finite"] = finite()
    return out


def _diff(a, b):
    """The first entries where two rig_state values differ (for the failure message)."""
    out = []
    for key in a:
        out += [[key, x, y] for x, y in zip(a[key], b[key]) if x != y][:3]
    return out


def generated_stretch(n_frames=12):
    """The generated rig with each IK control moved out of its limb's reach (every frame): the
    chains must stretch (IK Stretch 0.1 on both bones of each, as generated). Baked, then Blender's
    evaluation of the keys: tails to targets, and the bones' total scales."""
    scene, rig, controls = generated_rigify_rig(n_frames)
    away = {"foot_ik.L": (0.1, 0.0, -0.25), "foot_ik.R": (-0.1, 0.0, -0.25),
            "hand_ik.L": (0.3, -0.2, 0.0), "hand_ik.R": (-0.3, -0.2, 0.0)}
    for name, offset in away.items():
        pb = controls[name]
        for f in range(1, n_frames + 1):
            scene.frame_set(f)
            pb.location = pb.location + type(pb.location)(offset)
            pb.keyframe_insert("location", frame=f)
    frames = list(range(1, n_frames + 1))
    before = all_keys(rig)
    res = api.bake(rig, 1, n_frames)
    errors = tail_errors(scene, rig, frames)
    totals = []
    for f in frames:
        scene.frame_set(f)
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        totals.append({b: [float(np.linalg.norm(np.array(ev.pose.bones[b].matrix)[:3, i])) for i in range(3)]
                       for b in CHAIN_BONES})
    return {"errors": errors, "totals": totals, "converged": bool(res.converged.all()),
            "reported": float(np.nanmax(res.position_error)), "warnings": res.warnings,
            "bones": sorted(res.bones), "before": before, "after": all_keys(rig), "finite": finite()}


def generated_live(n_frames=12):
    """Live preview on the generated rig: each frame scrubbed is solved and posed (simulation mode:
    one step per frame, then on to convergence when the frame is set again); Blender's evaluation
    of that pose against the targets. Switched off and released, the rig is as generated."""
    scene, rig, controls = generated_rigify_rig(n_frames)
    original = rig_state(rig)
    before = all_keys(rig)
    rig.itasc.live_preview = True
    errors, held = [], []

    def measured():
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        world = ev.matrix_world
        return [(world @ ev.pose.bones[tip].tail - world @ ev.pose.bones[target].head).length
                for tip, target, _, _ in LIMBS.values()]

    for f in range(1, n_frames + 1):
        scene.frame_set(f)                  # one simulation step from the last frame
        errors.append(measured())
        scene.frame_set(f)                  # the same frame again: solved on from there
        held.append(measured())
    message = rig.itasc.result_message
    driving = ik_mutes(rig)
    rig.itasc.live_preview = False
    api.release(rig)
    return {"errors": errors, "held": held, "message": message, "driving": driving, "released": rig_state(rig) == original,
            "keys": all_keys(rig) == before, "finite": finite()}


def bend_normals(scene, rig, frames):
    """Per frame, per limb: the unit normal of the limb's bend plane (root head, joint, tail) as
    Blender evaluates the chain, in world space."""
    out = []
    for f in frames:
        scene.frame_set(int(f))
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        row = []
        for tip, _, _, chain in LIMBS.values():
            root, lower = ev.pose.bones[chain[-1]], ev.pose.bones[tip]
            n = np.cross(np.array(root.tail - root.head), np.array(lower.tail - lower.head))
            row.append((np.array(ev.matrix_world.to_3x3()) @ n / np.linalg.norm(n)).tolist())
        out.append(row)
    return np.array(out)


def generated_poles(n_frames=12):
    """The generated rig with poles on: Blender's own Standard IK first, then our bake; per frame
    and limb the angle between the two bend planes (degrees, up to sign) and both tails' misses."""
    scene, rig, _ = generated_rigify_rig(n_frames, poles=True)
    frames = range(1, n_frames + 1)
    theirs, their_miss = bend_normals(scene, rig, frames), tail_errors(scene, rig, frames)
    result = api.bake(rig, 1, n_frames)
    ours, our_miss = bend_normals(scene, rig, frames), tail_errors(scene, rig, frames)
    cosine = np.abs(np.sum(ours * theirs, axis=-1)).clip(0.0, 1.0)
    # One frame posed (not keyed) by solve_frame on the baked rig, measured where it stands.
    api.clear_bake(rig)
    frame = n_frames // 2
    scene.frame_set(frame)
    single = api.solve_frame(rig, frame)
    ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    solved_miss = [(ev.matrix_world @ ev.pose.bones[tip].tail - ev.matrix_world @ ev.pose.bones[target].head).length
                   for tip, target, _, _ in LIMBS.values()]
    solved_normal = []
    for tip, _, _, chain in LIMBS.values():
        root, lower = ev.pose.bones[chain[-1]], ev.pose.bones[tip]
        n = np.cross(np.array(root.tail - root.head), np.array(lower.tail - lower.head))
        solved_normal.append(np.array(ev.matrix_world.to_3x3()) @ n / np.linalg.norm(n))
    solved_cos = np.abs(np.sum(np.array(solved_normal) * theirs[frame - 1], axis=-1)).clip(0.0, 1.0)
    return {"plane_degrees": np.degrees(np.arccos(cosine)).tolist(), "our_miss": our_miss,
            "solved_miss": solved_miss, "solved_plane_degrees": np.degrees(np.arccos(solved_cos)).tolist(),
            "solved_converged": bool(single.converged.all()),
            "their_miss": their_miss, "converged": bool(result.converged.all()), "warnings": result.warnings,
            "constraints": result.constraint_names, "pole_error": result.pole_error.tolist()}

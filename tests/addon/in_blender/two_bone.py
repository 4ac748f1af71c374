"""The two-bone fast path inside Blender: arm rigs, what Blender shows of them, and the bodies of
the two-bone tests."""

import math
import time

import bpy
import numpy as np
from mathutils import Vector

from . import addon
from .scenes import api, clear_scene, keys_module

two_bone = addon("two_bone")
solving = addon("solving")
bake_job = addon("job")
panels_module = addon("panels")


def arm_rig(n_frames, name="arm", bones=((0.0, 0.1, 1.0), (0.0, 0.0, 1.8)), roll=0.0,
            modes=("XYZ", "QUATERNION"), pole=None, pole_angle=0.0, distances=None, connect=True):
    """A two-bone arm (head at the armature's origin, bent slightly toward +Y at rest) on a moved,
    turned and uniformly scaled armature object, with an IK constraint (Copy Pose, location only)
    on its last bone aimed at an empty keyed at every frame along a path around the root whose
    distance from it swings through and beyond the chain's reach. Returns (scene, rig, target,
    targets in armature space (F, 3))."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, n_frames
    scene.frame_set(1)
    arm = bpy.data.armatures.new(name)
    rig = bpy.data.objects.new(name, arm)
    scene.collection.objects.link(rig)
    rig.location, rig.rotation_euler, rig.scale = (0.3, -0.2, 0.5), (0.3, -0.2, 0.8), (1.5, 1.5, 1.5)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    parent, head = None, (0.0, 0.0, 0.0)
    for i, tail in enumerate(bones):
        bone = arm.edit_bones.new(f"{name}{i}")
        bone.head, bone.tail, bone.roll = head, tail, roll
        bone.parent, bone.use_connect = parent, parent is not None and connect
        parent, head = bone, tail
    bpy.ops.object.mode_set(mode="OBJECT")
    for pb, mode in zip(rig.pose.bones, modes):
        pb.rotation_mode = mode
    bpy.context.view_layer.update()
    world = np.array(rig.matrix_world, dtype=float)

    t = np.arange(n_frames, dtype=float)
    if distances is None:
        distances = 1.25 + 0.9 * np.sin(2 * np.pi * t / 47.0)           # 0.35 .. 2.15 (reach 1.81)
    a = 0.3 + 1.0 * (0.5 + 0.5 * np.sin(2 * np.pi * t / 71.0))
    b = 2 * np.pi * t / 113.0
    local = distances[:, None] * np.stack([np.sin(a) * np.cos(b), np.sin(a) * np.sin(b), np.cos(a)], -1)
    points = (world @ np.concatenate([local, np.ones((n_frames, 1))], 1).T).T[:, :3]
    target = bpy.data.objects.new(f"{name}_target", None)
    scene.collection.objects.link(target)
    key_path(target, points)
    ik = rig.pose.bones[-1].constraints.new("IK")
    ik.target, ik.chain_count, ik.use_tail = target, len(bones), True
    ik.use_rotation = False
    if pole is not None:
        goal = bpy.data.objects.new(f"{name}_pole", None)
        scene.collection.objects.link(goal)
        key_path(goal, (world @ np.concatenate([pole, np.ones((len(pole), 1))], 1).T).T[:, :3])
        ik.pole_target, ik.pole_angle = goal, pole_angle
    return scene, rig, target, local


def key_path(ob, points):
    """Key ob's location at frames 1.. to `points` (world), linear."""
    ob.location = tuple(points[0])
    ob.keyframe_insert("location", frame=1)
    fcurves = keys_module.Channels(ob).all()
    n = len(points)
    for fc in fcurves:
        fc.keyframe_points.add(n - 1)
        co = np.stack([np.arange(1, n + 1, dtype=float), points[:, fc.array_index]], -1)
        fc.keyframe_points.foreach_set("co", co.astype(np.float32).ravel())
        fc.keyframe_points.foreach_set("interpolation", [1] * n)       # LINEAR
        fc.update()


def rotation(phi):
    """exp of rotation vectors (..., 3), in double (Rodrigues)."""
    phi = np.asarray(phi, float)
    t = np.linalg.norm(phi, axis=-1)[..., None, None]
    k = np.zeros(phi.shape[:-1] + (3, 3))
    k[..., 0, 1], k[..., 0, 2], k[..., 1, 2] = -phi[..., 2], phi[..., 1], -phi[..., 0]
    k = k - np.swapaxes(k, -1, -2)
    ts = np.where(t > 0, t, 1.0)
    return np.eye(3) + np.sin(t) / ts * k + (1 - np.cos(t)) / ts**2 * (k @ k)


def chain_points(rig, q):
    """Elbow and tail (F, 3) in armature space, in double, from the solved coordinates q (two
    sphere joints) and the rest as Blender's pose evaluation composes it: each bone's own rest
    rotation (``Bone.matrix``) at its head, the child's relative to its parent's tail (the tested
    claim: exact)."""
    b0, b1 = rig.data.bones[0], rig.data.bones[1]
    rest0, rel = np.eye(4), np.eye(4)
    rest0[:3, :3], rest0[:3, 3] = np.array(b0.matrix, dtype=float), np.array(b0.head_local, dtype=float)
    rel[:3, :3], rel[:3, 3] = np.array(b1.matrix, dtype=float), np.array(b1.head, dtype=float) + (0.0, b0.length, 0.0)
    R0, R1 = rotation(q[:, 0:3]), rotation(q[:, 3:6])
    A0 = rest0[:3, :3] @ R0
    elbow = rest0[:3, 3] + A0 @ rel[:3, 3]
    tail = elbow + ((A0 @ rel[:3, :3] @ R1) @ np.array([0.0, b1.length, 0.0]))
    return elbow, tail


def blender_pose(scene, rig, frames):
    """Per frame, from the evaluated pose bones' world matrices (float32, as Blender has them):
    world root, elbow and tail (F, 3) and the bones' world Y axes (F, 2, 3)."""
    out = {"root": [], "elbow": [], "tail": [], "y": []}
    for f in frames:
        scene.frame_set(int(f))
        re = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        m = [re.matrix_world @ pb.matrix for pb in re.pose.bones]
        out["root"].append(tuple(m[0].translation))
        out["elbow"].append(tuple(m[0] @ Vector((0.0, re.pose.bones[0].bone.length, 0.0))))
        out["tail"].append(tuple(m[1] @ Vector((0.0, re.pose.bones[1].bone.length, 0.0))))
        out["y"].append([tuple(mm.col[1].xyz.normalized()) for mm in m])
    return {k: np.array(v) for k, v in out.items()}


def world_targets(scene, ob, frames):
    out = []
    for f in frames:
        scene.frame_set(int(f))
        out.append(tuple(ob.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world.translation))
    return np.array(out)


class Layout:
    def __init__(self, log):
        self.log = log

    def column(self, **kw):
        return self

    def label(self, text="", icon="NONE"):
        self.log.append(text)


def panel_labels(obj):
    log = []
    with bpy.context.temp_override(object=obj, active_object=obj):
        panels_module.ITASC_PT_result.draw(type("PanelSelf", (), {"layout": Layout(log)})(), bpy.context)
    return log


class iterative_only:
    """Inside this block the add-on does not take the fast path (for comparisons)."""

    def __enter__(self):
        self.plan_for = two_bone.plan_for
        two_bone.plan_for = lambda *args: (None, "switched off by the test")

    def __exit__(self, *exc):
        two_bone.plan_for = self.plan_for


def bake_arm():
    """A 120-frame arm baked on the fast path, compared with Blender's own IK, the iterative path,
    one frame and simulation mode."""
    clear_scene()
    N = 120
    scene, rig, target, local = arm_rig(N)
    frames = range(1, N + 1)
    ik = rig.pose.bones[-1].constraints[0]
    blender = blender_pose(scene, rig, frames)                 # Blender's own IK, before the hand-over
    res = api.bake(rig, 1, N)
    muted = ik.mute
    ours = blender_pose(scene, rig, frames)                    # the baked keys, Blender's IK muted
    goal = world_targets(scene, target, frames)
    elbow, tail = chain_points(rig, res.engine.q)
    world = np.array(rig.matrix_world, dtype=float)
    to_arm = np.linalg.inv(world)
    goal_arm = (to_arm @ np.concatenate([goal, np.ones((N, 1))], 1).T).T[:, :3]
    reach = rig.data.bones[0].length + rig.data.bones[1].length
    labels = panel_labels(rig)
    fcurves = sorted(fc.data_path.split(".")[-1] for fc in keys_module.Channels(rig).all())
    with iterative_only():
        rig.animation_data_clear()
        ref = api.bake(rig, 1, N)
    frame = api.solve_frame(rig, 30)
    simulation = api.bake(rig, 1, 5, mode="SIMULATION")
    return {
        "method": res.method, "fallback": res.fallback_reason, "muted": muted, "warnings": res.warnings,
        "labels": labels, "fcurves": fcurves, "summary": res.summary(),
        "double_tail": np.linalg.norm(tail - goal_arm, axis=1).tolist(),
        "double_straight": [float(max(np.linalg.norm(np.cross(v, g)) / (np.linalg.norm(v) * np.linalg.norm(g))
                                      for v in (e, t - e))) for e, t, g in zip(elbow, tail, goal_arm)],
        "distance": (np.linalg.norm(goal_arm, axis=1)).tolist(), "reach": reach,
        "scale": float(np.linalg.norm(world[:3, :3], axis=0).mean()),
        "blender_tail": np.linalg.norm(ours["tail"] - goal, axis=1).tolist(),
        "blender_ik_tail": np.linalg.norm(blender["tail"] - goal, axis=1).tolist(),
        "straight": [float(max(np.linalg.norm(np.cross(y, g - r)) / np.linalg.norm(g - r) for y in ys))
                     for ys, g, r in zip(ours["y"], goal, ours["root"])],
        # The engine's own report (the result's errors are Blender's evaluation, `measured`).
        "reported": res.engine.position_error[:, 0].tolist(), "converged": res.converged.tolist(),
        "measured": res.position_error[:, 0].tolist(),
        "iterations": res.iterations.tolist(), "sigma_min": res.engine.sigma_min.tolist(),
        "ref_method": ref.method, "ref_reported": ref.engine.position_error[:, 0].tolist(),
        "ref_converged": ref.converged.tolist(),
        "frame_method": frame.method, "frame_error": float(frame.engine.position_error[0, 0]),
        "simulation": [simulation.method, simulation.fallback_reason],
    }


def pole_cases():
    """Arms with a pole target at several rolls and pole angles, baked; the elbow's direction
    against the pole's and against Blender's Standard IK."""
    clear_scene()
    N = 60
    t = np.arange(N, dtype=float)
    distances = 1.1 + 0.5 * np.sin(2 * np.pi * t / 37.0)                  # inside reach: an elbow every frame
    pole = np.stack([1.5 * np.cos(2 * np.pi * t / 53.0), 1.5 * np.sin(2 * np.pi * t / 53.0), 0.4 + 0 * t], -1)
    frames = range(1, N + 1)
    cases = [(0.0, -90.0), (0.0, 0.0), (0.0, 60.0), (0.7, -90.0), (0.7, 150.0)]
    rigs = []
    for k, (roll, angle) in enumerate(cases):
        scene, rig, target, local = arm_rig(N, name=f"arm{k}_", roll=roll, pole=pole, pole_angle=math.radians(angle),
                                            distances=distances)
        rig.pose.ik_solver = "LEGACY"                          # Blender's Standard IK, for its pole placement
        rigs.append((rig, target, bpy.data.objects[f"arm{k}__pole"]))
    bpy.context.view_layer.update()
    out = []
    for rig, target, goal in rigs:
        theirs = blender_pose(scene, rig, frames)
        res = api.bake(rig, 1, N)
        ours = blender_pose(scene, rig, frames)
        goal_world = world_targets(scene, target, frames)
        pole_world = world_targets(scene, goal, frames)
        world = np.array(rig.matrix_world, dtype=float)
        to_arm = np.linalg.inv(world)
        arm = lambda p: (to_arm @ np.concatenate([p, np.ones((len(p), 1))], 1).T).T[:, :3]  # noqa: E731
        elbow, tail = chain_points(rig, res.engine.q)
        g, p = arm(goal_world), arm(pole_world)                 # the root is the armature origin
        u = g / np.linalg.norm(g, axis=1, keepdims=True)
        across = lambda v: v - np.sum(v * u, axis=1, keepdims=True) * u
        e_ours, e_pole = across(elbow), across(p)
        e_theirs = across(arm(theirs["elbow"]) - arm(theirs["root"]))
        angle = lambda a, b: np.arctan2(np.linalg.norm(np.cross(a, b), axis=1), np.sum(a * b, axis=1))
        out.append({
            "method": res.method, "warnings": res.warnings,
            "to_pole": angle(e_ours, e_pole).tolist(),          # signed angle not needed: 0 means on the pole side
            "vs_blender": angle(e_ours, e_theirs).tolist(),
            "blender_tail": np.linalg.norm(theirs["tail"] - goal_world, axis=1).tolist(),
            "tail": np.linalg.norm(tail - g, axis=1).tolist(),
            "shown_tail": np.linalg.norm(arm(ours["tail"]) - g, axis=1).tolist(),
        })
    return {"cases": cases, "out": out}


def not_eligible():
    """Why each rule turns the fast path off (on Facts and on pose matrices), and what bakes of
    rigs that break one of them report."""
    Facts, BoneFacts = two_bone.Facts, two_bone.BoneFacts
    chain = (BoneFacts("a"), BoneFacts("b"))
    ok = Facts(chain=chain)
    rules = {
        "eligible": ok,
        "simulation": Facts(mode="SIMULATION", chain=chain),
        "two constraints": Facts(constraints=2, chain=chain),
        "distance": Facts(kind="DISTANCE", chain=chain),
        "two axes": Facts(position=(True, True, False), chain=chain),
        "rotation": Facts(rotation=(False, True, False), chain=chain),
        "three bones": Facts(chain=chain + (BoneFacts("c"),)),
        "not parented": Facts(chain=chain, parented=False),
        "stretch": Facts(chain=(BoneFacts("a"), BoneFacts("b", stretch=True))),
        "limits": Facts(chain=(BoneFacts("a", limits=True), BoneFacts("b"))),
        "locks": Facts(chain=(BoneFacts("a"), BoneFacts("b", locks=True))),
        "stiffness": Facts(chain=(BoneFacts("a", stiffness=True), BoneFacts("b"))),
        "rotation control": Facts(chain=(BoneFacts("a"), BoneFacts("b", rotation_control=True))),
        "no inherit": Facts(chain=(BoneFacts("a"), BoneFacts("b", inherit_rotation=False))),
        "gap": Facts(chain=chain, rest_gap=1e-3),
        "linked": Facts(chain=chain, linked="linked to armature 'other' (target)"),
    }
    reasons = {name: two_bone.why_not(facts) for name, facts in rules.items()}
    pose = np.tile(np.eye(4), (3, 2, 1, 1))
    pose_reasons = {"rest": two_bone.pose_reason(pose)}
    moved = pose.copy()
    moved[1, 1, 0, 3] = 0.01
    pose_reasons["location"] = two_bone.pose_reason(moved, ("a", "b"))
    scaled = pose.copy()
    scaled[2, 0, :3, :3] *= 1.01
    pose_reasons["scale"] = two_bone.pose_reason(scaled, ("a", "b"))

    clear_scene()
    N = 20
    rigs = {}
    rigs["three bones"] = arm_rig(N, name="three", bones=((0.0, 0.1, 1.0), (0.0, 0.0, 1.8), (0.0, 0.1, 2.4)))[1]
    rigs["limits"] = arm_rig(N, name="limited")[1]
    rigs["limits"].pose.bones[0].use_ik_limit_x = True
    rigs["stiffness"] = arm_rig(N, name="stiff")[1]
    rigs["stiffness"].pose.bones[1].ik_stiffness_z = 0.3
    rigs["rotation"] = arm_rig(N, name="turning")[1]
    rigs["rotation"].pose.bones[-1].constraints[0].use_rotation = True
    rigs["pose location"] = arm_rig(N, name="loose", connect=False)[1]
    rigs["pose location"].pose.bones[1].location = (0.0, 0.05, 0.0)
    rigs["pose location"].pose.bones[1].keyframe_insert("location", frame=1)
    baked = {}
    for name, rig in rigs.items():
        res = api.bake(rig, 1, N)
        baked[name] = [res.method, res.fallback_reason, panel_labels(rig)]
    return {"reasons": reasons, "pose_reasons": pose_reasons, "baked": baked}


def timing():
    """Sample, solve and whole-bake times of a 1000-frame arm on the fast and the iterative path."""
    clear_scene()
    N = 1000
    scene, rig, target, local = arm_rig(N)
    frames = list(range(1, N + 1))

    def timed(job):
        t0 = time.perf_counter()
        steps = job.steps()
        while job.phase in ("ready", "sample"):
            next(steps)
        t1 = time.perf_counter()
        while job.phase == "solve":
            next(steps)
        t2 = time.perf_counter()
        for _ in steps:
            pass
        res = job.result
        return res, t1 - t0, t2 - t1, time.perf_counter() - t0

    out = {}
    for run_ in range(2):                                      # the second round is the one reported
        rig.animation_data_clear()
        fast = timed(bake_job.prepare(rig, frames, bake=True))
        rig.animation_data_clear()
        with iterative_only():
            slow = timed(bake_job.prepare(rig, frames, bake=True))
        out = {name: {"method": res.method, "sample": a, "solve": b, "total": c,
                      "not_converged": res.not_converged, "max_reachable_error": float(np.max(
                          np.where(res.converged, res.position_error[:, 0], 0.0)))}
               for name, (res, a, b, c) in (("fast", fast), ("iterative", slow))}
    return out


def straight_chain():
    """A straight arm aimed along itself (two frames in reach, one beyond): elbow, tail, miss."""
    clear_scene()
    scene, rig, target, local = arm_rig(3, name="straight", bones=((0.0, 0.0, 1.0), (0.0, 0.0, 1.8)))
    world = np.array(rig.matrix_world, dtype=float)
    on_line = np.array([[0.0, 0.0, 1.2], [0.0, 0.0, 0.5], [0.0, 0.0, 2.5]])        # along the straight chain
    target.animation_data_clear()
    key_path(target, (world @ np.concatenate([on_line, np.ones((3, 1))], 1).T).T[:, :3])
    res = api.bake(rig, 1, 3)
    elbow, tail = chain_points(rig, res.engine.q)
    goal = world_targets(scene, target, range(1, 4))
    goal = (np.linalg.inv(world) @ np.concatenate([goal, np.ones((3, 1))], 1).T).T[:, :3]   # as keyed (float32)
    return {"method": res.method, "elbow": elbow.tolist(), "miss": np.linalg.norm(tail - goal, axis=1).tolist(),
            "tail": tail.tolist(), "converged": res.converged.tolist()}

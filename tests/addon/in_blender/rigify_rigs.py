"""Bodies of test_addon_rigify_rigs: the rig Rigify generates from each of its metarigs, every limb in
IK with its pole on and the controls keyed (tools.rigify_rigs), baked with the add-on's defaults and
measured by Blender's own evaluation beside Blender's own IK. Sessions end with exit_at_once."""

import bpy
import numpy as np

from tools import rigify_rigs

from . import addon

api = addon("api")
job = addon("job")


def _jobs_run():
    """The add-on's jobs as they run (`api.bake` runs one), to read how they read Blender."""
    jobs, run = [], job.Job.run

    def recorded(self):
        jobs.append(self)
        return run(self)

    job.Job.run = recorded
    return jobs


def _readings(j):
    """How a bake read Blender: passes over the frames for its stages, the stages, the largest gap
    per stage between its computed inputs and Blender's evaluation of them, and the stages read on
    their own with why."""
    return {"readings": j.readings, "stages": len(j.rigs),
            "gaps": {str(k): v for k, v in j.prediction_gaps.items()},
            "unpredicted": {str(k): v for k, v in j.unpredicted.items()}}


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
    blender_planes = rigify_rigs.bend_normals(bpy, scene, rig, frames, active)
    jobs = _jobs_run()
    res = api.bake(rig, 1, n_frames)
    ours = rigify_rigs.tail_errors(bpy, scene, rig, frames, active)
    ours_bones = rigify_rigs.deform_heads(bpy, scene, rig, frames)
    ours_planes = rigify_rigs.bend_normals(bpy, scene, rig, frames, active)
    cosine = np.clip(np.sum(np.array(ours_planes[0]) * np.array(blender_planes[0]), axis=-1), -1.0, 1.0)
    bends = np.minimum(ours_planes[1], blender_planes[1])          # the smaller of the two bends
    with_pole = [bool(rig.pose.bones[name.split("/", 1)[0]].constraints[name.split("/", 1)[1]].pole_target)
                 for name in active]
    after = mutes(rig)
    columns = [res.constraints.index(name) if name in res.constraints else -1 for name in active]
    records = {f"{i.bone}/{i.constraint}": [i.result_stage, i.result_max_error] for i in rig.itasc.constraints}
    api.release(rig)
    return {
        "controls": controls, "active": active, "constraints": list(res.constraints),
        "solved_by": [res.solved_by[c] if c >= 0 else None for c in columns],
        "reported": np.asarray(res.position_error)[:, [c for c in columns if c >= 0]].tolist(),
        "converged": np.asarray(res.converged).tolist(), "warnings": list(res.warnings),
        "blender": blender, "ours": ours,
        "bones_moved": float(np.max(np.abs(np.subtract(ours_bones, blender_bones)))),
        "muted_after_bake": [name for name in active if after[name]],
        "records": [records.get(name) for name in active],
        "plane_degrees": np.degrees(np.arccos(cosine)).tolist(), "with_pole": with_pole, "bends": bends.tolist(),
        "released": mutes(rig) == before, "seconds": res.seconds, "verify_seconds": res.verify_seconds,
        "precision": float(res.settings.get("precision", np.nan)) if res.settings else None,
        "pole_error": np.asarray(res.pole_error)[:, [c for c in columns if c >= 0]].tolist(),
        "rotation_error": np.asarray(res.rotation_error)[:, [c for c in columns if c >= 0]].tolist(),
        "engine_converged": np.asarray(res.engine.converged).tolist(),
        "engine_error": np.asarray(res.engine.position_error)[:, [c for c in columns if c >= 0]].tolist(),
        "floor": np.asarray(res.float32_floor)[:, [c for c in columns if c >= 0]].tolist(),
        **_readings(jobs[-1]),
    }


def _three_chain_rig(n_frames):
    """Chain A (3 bones) aims at an animated empty; chain B's target bone is a child of A's tip
    (a chain's target riding on another chain); chain C has a Copy Scale on a chain bone."""
    from .scenes import clear_scene

    clear_scene()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, n_frames
    arm = bpy.data.armatures.new("three")
    rig = bpy.data.objects.new("three", arm)
    scene.collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")

    def chain(prefix, x, n, z=0.0):
        bones = []
        for i in range(n):
            b = arm.edit_bones.new(f"{prefix}{i}")
            b.head, b.tail = (x, 0.0, z + i), (x, 0.0, z + i + 1)
            b.parent, b.use_connect = (bones[-1], True) if bones else (None, False)
            bones.append(b)
        return bones

    a, b, c = chain("A", 0.0, 3), chain("B", 2.0, 2, z=1.0), chain("C", -2.0, 2)
    ride = arm.edit_bones.new("B_target")          # rides on A's tip
    ride.head, ride.tail, ride.parent = (0.5, 0.0, 3.0), (0.5, 0.0, 3.3), a[-1]
    c_target = arm.edit_bones.new("C_target")
    c_target.head, c_target.tail = (-1.2, 0.0, 1.5), (-1.2, 0.0, 1.8)
    scaler = arm.edit_bones.new("scaler")
    scaler.head, scaler.tail = (4.0, 0.0, 0.0), (4.0, 0.0, 1.0)
    bpy.ops.object.mode_set(mode="OBJECT")
    empty = bpy.data.objects.new("A_goal", None)
    scene.collection.objects.link(empty)
    for f in range(1, n_frames + 1):
        t = 2 * np.pi * (f - 1) / n_frames
        empty.location = (0.8 + 0.3 * np.cos(t), 0.3 * np.sin(t), 2.2)
        empty.keyframe_insert("location", frame=f)
        ct = rig.pose.bones["C_target"]
        ct.location = (0.0, 0.2 * np.sin(t), 0.2 * np.cos(t))
        ct.keyframe_insert("location", frame=f)
    for name, target, sub in (("A2", empty, ""), ("B1", rig, "B_target"), ("C1", rig, "C_target")):
        con = rig.pose.bones[name].constraints.new("IK")
        con.target, con.subtarget, con.chain_count = target, sub, 0 if name == "A2" else 2
    copy = rig.pose.bones["C0"].constraints.new("COPY_SCALE")
    copy.target, copy.subtarget = rig, "scaler"
    return scene, rig


def three_chains(n_frames=10):
    """Issue #30's reproduction without Rigify (`_three_chain_rig`): Blender's own IK first, then
    our bake, each measured by Blender."""
    scene, rig = _three_chain_rig(n_frames)
    frames = range(1, n_frames + 1)
    active = [f"{pb.name}/{c.name}" for pb, c in rigify_rigs.active_ik(rig)]
    before = mutes(rig)
    out = {"active": active}
    for case in ("unscaled", "scaled"):              # the Copy Scale's target bone at scale 1, then 1.5
        rig.pose.bones["scaler"].scale = (1.0, 1.0, 1.0) if case == "unscaled" else (1.5, 1.5, 1.5)
        api.clear_bake(rig)
        blender = rigify_rigs.tail_errors(bpy, scene, rig, frames, active)
        res = api.bake(rig, 1, n_frames)
        ours = rigify_rigs.tail_errors(bpy, scene, rig, frames, active)
        after = mutes(rig)
        columns = [res.constraints.index(name) for name in active]
        api.release(rig)
        out[case] = {"solved_by": [res.solved_by[c] for c in columns], "blender": blender, "ours": ours,
                     "reported": np.asarray(res.position_error)[:, columns].tolist(), "warnings": list(res.warnings),
                     "converged": np.asarray(res.converged).tolist(), "muted": [n for n in active if after[n]],
                     "released": mutes(rig) == before}
    return out


def three_chains_readings(n_frames=10):
    """B's target rides on A's tip by parenting: computed, one reading for both stages. Then with
    no computed input taken as confirmed (a tolerance below 0): B read again after the verification;
    with its computation failing when it runs: B read in a pass of its own. With B's first bone
    following A's middle one (a Copy Scale), or B's target under a Copy Rotation of it (not
    computed here): B read in a pass of its own from the start. Every tail as Blender shows it after each bake."""
    scene, rig = _three_chain_rig(n_frames)
    frames = range(1, n_frames + 1)
    active = [f"{pb.name}/{c.name}" for pb, c in rigify_rigs.active_ik(rig)]
    jobs = _jobs_run()
    out = {}
    tolerance, evaluate = job.PREDICTION_TOLERANCE, job.prediction.Prediction.evaluate

    def fails(self, solved):
        raise job.prediction.Unpredictable("failed on purpose")

    for case in ("parented", "unconfirmed", "failing", "chain_follows_a", "copy_rotation"):
        job.PREDICTION_TOLERANCE = -1.0 if case == "unconfirmed" else tolerance
        job.prediction.Prediction.evaluate = fails if case == "failing" else evaluate
        if case == "chain_follows_a":
            follow = rig.pose.bones["B0"].constraints.new("COPY_SCALE")
            follow.target, follow.subtarget = rig, "A1"
        if case == "copy_rotation":
            rig.pose.bones["B0"].constraints.remove(follow)
            con = rig.pose.bones["B_target"].constraints.new("COPY_ROTATION")
            con.target, con.subtarget = rig, "A1"
        api.clear_bake(rig)
        res = api.bake(rig, 1, n_frames)
        ours = rigify_rigs.tail_errors(bpy, scene, rig, frames, active)
        api.release(rig)
        out[case] = {"ours": ours, "converged": np.asarray(res.converged).tolist(), **_readings(jobs[-1])}
    job.PREDICTION_TOLERANCE = tolerance
    return out


def solve_one_frame(metarig, frame=3):
    """`api.solve_frame` (no keys: the pose of one frame) on a rig solved in stages, measured by
    Blender at that frame as the pose stands."""
    scene, rig, _ = rigify_rigs.build(bpy, metarig, 6)
    active = [f"{pb.name}/{c.name}" for pb, c in rigify_rigs.active_ik(rig)]
    scene.frame_set(frame)
    res = api.solve_frame(rig, frame)
    bpy.context.view_layer.update()
    ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    ours = []
    for name in active:
        bone, cname = name.split("/", 1)
        con = rig.pose.bones[bone].constraints[cname]
        tail = ev.pose.bones[rigify_rigs.tip(rig.pose.bones[bone], con).name].tail
        ours.append((ev.pose.bones[con.subtarget].head - tail).length)
    columns = [res.constraints.index(name) for name in active]
    return {"ours": ours, "reported": np.asarray(res.position_error)[0, columns].tolist(),
            "solved_by": [res.solved_by[c] for c in columns], "frame": scene.frame_current}


def _points(scene, rig, frames, bone, end="tail"):
    """Per frame, the evaluated tail (or head) of `bone`, in armature space."""
    out = []
    for f in frames:
        scene.frame_set(int(f))
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        out.append(list(getattr(ev.pose.bones[bone], end)))
    return np.array(out)


def three_chains_at_influence(n_frames=10):
    """The three chains with B's IK (solved in stage 1) at influence 0.5 and C's (Blender's: its
    Copy Scale target is scaled) at 0.7: B's tail before IK, B's target and every tail as Blender
    shows them with its own IK and after our bake, and what the bake reported."""
    scene, rig = _three_chain_rig(n_frames)
    rig.pose.bones["scaler"].scale = (1.5, 1.5, 1.5)
    frames = range(1, n_frames + 1)
    b_ik, c_ik = rig.pose.bones["B1"].constraints["IK"], rig.pose.bones["C1"].constraints["IK"]
    b_ik.mute = True
    before_ik = _points(scene, rig, frames, "B1")
    b_ik.mute = False
    b_ik.influence, c_ik.influence = 0.5, 0.7
    blender = _points(scene, rig, frames, "B1")
    res = api.bake(rig, 1, n_frames)
    ours = _points(scene, rig, frames, "B1")
    target = _points(scene, rig, frames, "B_target", "head")
    names = list(res.constraints)
    out = {"before_ik": before_ik.tolist(), "blender": blender.tolist(), "ours": ours.tolist(),
           "target": target.tolist(), "solved_by": dict(zip(names, res.solved_by)),
           "reported": np.asarray(res.position_error)[:, names.index("B1/IK")].tolist(),
           "converged": np.asarray(res.converged).tolist(), "warnings": list(res.warnings)}
    api.release(rig)
    return out

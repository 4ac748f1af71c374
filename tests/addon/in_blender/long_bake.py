"""Body of test_addon_long_bake: a long bake of Rigify's human metarig through `job.Job`, step
by step as the modal operator drives it. Needs the repository root on sys.path (tools.demo_rigify)."""

import math
import time

import bpy
import numpy as np

from tools import demo_rigify

from .faults import bake_job, finite
from .scenes import all_keys


def rigify_bake(n_frames):
    """The demo's scene with its targets keyed on all n_frames frames in bulk along the same paths:
    two jobs stopped (while reading frames, while solving), then the whole bake, then Blender's
    evaluation of a sample of frames with every IK constraint muted."""
    N = n_frames
    scene, rig, targets = demo_rigify.build_keyed(bpy, N)
    frames = np.arange(1, N + 1, dtype=float)

    # Keys of the user's a bake must leave alone: a bone outside every chain, and a chain bone's
    # rotation (which the bake writes) keyed before and after the baked range.
    for i, f in enumerate((1, 7000, N)):
        rig.pose.bones["spine"].location = (0.002 * i, 0.0, 0.0)
        rig.pose.bones["spine"].keyframe_insert("location", frame=f)
    hand = rig.pose.bones["hand.L"]
    for i, f in enumerate((-10, 5, N + 10)):
        hand.rotation_quaternion = (math.cos(0.05 * i), 0.0, math.sin(0.05 * i), 0.0)
        hand.keyframe_insert("rotation_quaternion", frame=f)
    hand.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    rig.pose.bones["spine"].location = (0.0, 0.0, 0.0)
    chains = set()
    for bone, count in demo_rigify.EFFECTORS:
        pb = rig.pose.bones[bone]
        for _ in range(count):
            chains.add(pb.name)
            pb = pb.parent

    scene.frame_set(33)
    before = all_keys(rig)
    basis = [list(map(list, pb.matrix_basis)) for pb in rig.pose.bones]

    def stopped(until):
        """A job stepped until `until(job)`, then abandoned the way Esc abandons it."""
        job = bake_job.prepare(rig, frames, precision=demo_rigify.PRECISION)
        steps, stepping = 0, job.steps()
        while not until(job):
            next(stepping)
            steps += 1
        state = {"steps": steps, "phase": job.phase, "done": job.done, "total": job.total}
        job.restore_frame()
        state.update(frame=scene.frame_current, keys=all_keys(rig) == before, records=len(rig.itasc.baked),
                     basis=[list(map(list, pb.matrix_basis)) for pb in rig.pose.bones] == basis)
        return state

    stops = {"sample": stopped(lambda job: job.done >= 80),                       # 5 steps of frames read
             "solve": stopped(lambda job: job.phase == "solve" and len(job.stage.pieces) >= 3)}

    # The whole bake, step by step, progress read after each step.
    start = time.perf_counter()
    job = bake_job.prepare(rig, frames, precision=demo_rigify.PRECISION)
    progress = [job.done]
    for done in job.steps():
        progress.append(done)
    seconds = time.perf_counter() - start
    res = job.result
    after = all_keys(rig)
    new = sorted(set(after) - set(before))
    new_frames = {c: after[c]["co"][0][0] == 1.0 and after[c]["co"][-1][0] == N and len(after[c]["co"]) == N
                  for c in new}

    # Blender evaluates a sample of frames with every IK constraint muted: each tail to its target.
    for bone, _ in demo_rigify.EFFECTORS:
        for con in rig.pose.bones[bone].constraints:
            con.mute = True
    sample = [*range(1, N + 1, 500), N]
    errors = []
    for f in sample:
        scene.frame_set(f)
        dg = bpy.context.evaluated_depsgraph_get()
        ev = rig.evaluated_get(dg)
        errors.append(max((ev.matrix_world @ ev.pose.bones[b].tail
                           - targets[b].evaluated_get(dg).matrix_world.translation).length
                          for b, _ in demo_rigify.EFFECTORS))
    return {"stops": stops, "progress": progress, "total": job.total, "seconds": seconds,
            "converged": bool(res.converged.all()), "reported": float(np.nanmax(res.position_error)),
            "frames": len(res.frames), "bones": sorted(res.bones), "chains": sorted(chains),
            "rotation_modes": sorted({rig.pose.bones[b].rotation_mode for b in chains}),
            "new": new, "new_frames": new_frames, "errors": errors, "sample": sample,
            "before": before, "after": after, "finite": finite()}

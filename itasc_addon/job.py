"""A solve or bake of an armature, read top to bottom: `prepare` reads and checks (nothing in the
file changes), then `Job.steps()` hands the rig over, and per reading samples the stages it
serves, solves and writes each, then reads Blender's evaluation of what was written (`verify`):
that is the result.

`steps()` is a generator that yields between pieces of work, so that a modal operator can show
progress (`done` of `total`) and stop on Esc between them (`cancel`); `run()` does it all at once.
`run()` and the modal operator's steps (`modal_job`) run on one BLAS thread
(`solver.runtime.blas_threads`): the stacks of small matrices a bake inverts and decomposes are
slower on several, and far slower on a busy machine.
Nothing is written to the user's data before a stage's write (except for the hand-over, which
mutes the driven IK constraints). Cancelled once keys are written, they stay, and the frames not
yet read are reported not verified and not converged.

Stages (`rig.order`): a chain whose target, pole or parent rides on another chain is solved one
stage after it. Its inputs are computed from the stages before (`rig.prediction`) where the way
from them is one we evaluate exactly, else read from Blender's evaluation of what the stages
before wrote; the verification confirms what was computed, or the stage is read and solved
again. Constraints the solver cannot drive stay Blender's (never muted) and are measured like ours.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import bpy
import numpy as np

from .. import solver
from ..solver.runtime.blas_threads import one_blas_thread
from . import dependencies, guard, handover, keys, own_pose, two_bone, verify
from . import rig as rig_module
from .rig import RigError
from .rig import order as rig_order
from .rig import prediction
from .rig.sampling import rescaled_points
from .solving import (SolveResult, blend_pose, check_writable, chosen_settings, effector_poses, frame_inputs,
                      solve_frames)

CHUNK = 256  # frames solved in the first step (the engine is batched: larger chunks are faster)
STEP_SECONDS = 0.1  # later steps are sized to take about this long (progress and Esc between them)
READ_STEP = 16  # frames read (sampled or verified) per step
PREDICTION_TOLERANCE = 1e-5     # computed inputs this close to Blender's (relative to their coordinates) are confirmed


def prepare(obj, frames, *, bake=True, bones=None, key=False, record=True, **options) -> Job:
    """Everything a solve of `obj` at `frames` needs, read and checked: the rig's active IK
    constraints in stages (`rig.order`), each stage read (`rig.read_rig`), and the rig that every
    active IK constraint is measured on. Bad input raises RigError here, with nothing changed.
    `bake`: key every frame (else pose the last, and key it with `key`); `bones`: key only these.
    The result's `seconds` count from here."""
    started = time.perf_counter()
    frames = np.atleast_1d(np.asarray(frames, dtype=float))
    if frames.size == 0:
        raise RigError("no frames to solve")
    if not np.all(np.isfinite(frames)):
        raise RigError("frames must be finite numbers")
    check_writable(obj, keys_too=bake or key)
    if bake or key:
        keys.action_frames(obj, frames)     # frames the action cannot play at are refused here
    on = handover.on_chooser(obj)
    order = rig_order.order(obj, handover.chooser(obj), on)
    rig_order.check(order, obj)
    rigs = [rig_module.read_rig(obj, rig_order.members(stage)) for stage in order.stages]
    driven = order.driven
    measure_rig = (rigs[0] if len(rigs) == 1 and not order.blender else
                   rig_module.read_rig(obj, on, measure=True, poles_of=lambda bone, name: (bone, name) in driven))
    return Job(obj, frames, order, rigs, measure_rig, bake=bake, bones=bones, key=key, record=record,
               options=options, started=started)


@dataclass
class Stage:
    """One stage's rig, settings and solver, and what it read and solved."""

    rig: object                     # rig.Rig of the stage's constraints
    engine_scene: object            # its engine Scene with the bones' joint-control tasks
    mode: str
    settings: object                # solver.Settings
    chosen: object                  # ik_settings.Chosen: where each setting came from
    plan: object                    # the two-bone closed form's plan, or None
    fallback_reason: str
    sampler: object
    start_values: dict              # per bone its rotation values at the first frame (keys continue them)
    samples: object = None          # rig.Samples, once every frame is read
    q0: np.ndarray | None = None    # the animated pose (the start), (F, n)
    objects: np.ndarray | None = None   # the targets the solve aims at (blended by influence)
    values: np.ndarray | None = None    # the joint-control tasks' values
    pieces: list = field(default_factory=list)   # the engine's results, chunk by chunk
    rotations: np.ndarray | None = None          # the closed form's pose rotations (F, S, 3, 3)
    index: int = 0                               # its place in the job's stages
    prediction: object = None                    # rig.prediction.Prediction of its inputs, or None: read
    predicted: dict | None = None                # the inputs computed, {bone: (F, 4, 4)}
    q: np.ndarray | None = None                  # its solution, once written

    @property
    def solved(self) -> int:
        return sum(len(p.q) for p in self.pieces)


class Job:
    """A prepared solve (`prepare`); `steps()` does it, `result` is its SolveResult."""

    def __init__(self, obj, frames, order, rigs, measure_rig, *, bake, bones, key, record, options, started):
        self.obj, self.frames, self.order, self.rigs, self.measure_rig = obj, frames, order, rigs, measure_rig
        self.bake, self.bones_filter, self.key, self.record, self.options = bake, bones, key, record, options
        self.scene = bpy.context.scene
        self._frame = (self.scene.frame_current, self.scene.frame_subframe)
        self.phase = "ready"         # what the job is doing: sample, solve, write, verify, finished
        self.stage = None            # the Stage under way
        self.stage_results = []      # the engine's figures of the stages written
        self.blended = {}            # per constraint aimed short of its target: (influence, its effector before)
        self.stages_result = None    # the stages' results joined (`merge_stages`), once all are written
        self.reader = None           # Blender's evaluation of what was written
        self.to_read, self.v = [], 0     # the frames (indices) to read there, how many are read
        self.verify_warnings = []
        self.readings = 0                # passes over the frames that read Blender's evaluation for stages
        self.solved_stages = []          # the stages written, in order
        self.unpredicted = {}            # stage -> why its inputs are read, not computed
        self.prediction_gaps = {}        # stage -> largest gap between computed and Blender's inputs
        self._walker = dependencies.Walker()
        self._first_readings = {}        # stage -> the Stage of its first reading (the animated pose)
        self._all_bones = np.zeros((len(obj.pose.bones), 16), np.float32)
        self.verify_seconds = 0.0
        self.result = None
        self.done = 0
        self.started = started           # when `prepare` began

    @property
    def total(self):
        """Progress units: a reading, each stage's solve and the verification of every frame
        (a stage read or verified again holds the bar where it is)."""
        return (len(self.rigs) + 2) * len(self.frames) + 1

    @one_blas_thread()
    def run(self):
        """Everything at once (no progress to show between steps): each stage solved in one piece."""
        for _ in self.steps(chunk=max(len(self.frames), 1)):
            pass
        return self.result

    def steps(self, chunk=CHUNK):
        """Do the job, yielding `done` after each piece of work. Stages are read in passes: a
        pass reads one stage from Blender's evaluation of every frame, and with it each stage
        after it whose inputs are computed from the stages before (`prediction`). The
        verification confirms those inputs; a stage Blender does not confirm is done again from
        a reading of its own."""
        handover.leave_to_blender(self.obj, {(bone, name) for bone, name, _ in self.order.blender})
        handover.set_active(self.obj, True)
        F = len(self.frames)
        first = 0
        while first is not None:
            k = first
            while k < len(self.rigs):
                group = [self._stage(k)] + self._predicted_after(k)
                self.readings += 1
                self.phase = "sample"
                for a in range(0, F, READ_STEP):
                    self._sample(group, a, min(a + READ_STEP, F))
                    self.done = min(self.done + min(READ_STEP, F - a), self.total)
                    yield self.done
                self.restore_frame()
                for stage in group:
                    self._first_readings.setdefault(stage.index, stage)
                k = group[-1].index + 1
                for stage in group:
                    if not self._take_prediction(stage):
                        k = stage.index         # computed inputs Blender would not give: read them
                        break
                    self.stage = stage
                    self._inputs(stage)
                    self.phase = "solve"
                    base = self.done
                    for _ in self._solve(stage, chunk):
                        self.done = min(base + stage.solved, self.total)
                        yield self.done
                    self.phase = "write"
                    self._write(stage)
                    self.done = min(base + F, self.total)
                    yield self.done
            self._start_verify()
            self.phase = "verify"
            while self.v < len(self.to_read):
                before = self.v
                self._verify()
                self.done = min(self.done + self.v - before, self.total)
                yield self.done
            first = self._unconfirmed()
        self.result = self._finish_result()
        self.phase = "finished"
        self.done = self.total
        yield self.done

    def cancel(self):
        """Stop where the job is (what Esc does), the scene back at its frame. Before the first
        stage's write nothing was written: returns None. Once keys are written (verifying, or a
        later stage under way) they stay, the result is finished with the frames not read yet
        reported not verified and not converged, and the returned message says so."""
        self.restore_frame()
        if self.reader is None and not self.stage_results:
            return None
        if self.reader is None:
            self._start_verify()
        self.result = self._finish_result()
        self.phase = "finished"
        unread = int(np.count_nonzero(~self.result.verified))
        return (f"Cancelled while checking Blender's evaluation of the keys: the keys are written; {unread} of "
                f"{len(self.frames)} frame(s) not verified, reported not converged")

    def restore_frame(self):
        with guard.suspended():
            self.scene.frame_set(self._frame[0], subframe=self._frame[1])

    # -- a stage: sample, solve, write ------------------------------------------------------------

    def _stage(self, k) -> Stage:
        """Stage k's rig, settings and sampler."""
        obj, frames, rig = self.obj, self.frames, self.rigs[k]
        step = float(np.min(np.diff(frames))) if frames.size > 1 else 1.0
        render = bpy.context.scene.render
        mode, settings, chosen = chosen_settings(obj, render.fps / render.fps_base / max(step, 1e-9), rig.scale,
                                                 rig, **self.options)
        plan, fallback_reason = two_bone.plan_for(rig, obj, mode)
        sampler = (two_bone.Sampler(rig, obj, frames, plan) if plan is not None
                   else rig_module.Sampler(rig, obj, frames))
        stage = Stage(rig, rig_module.with_joint_control(rig, obj), mode, settings, chosen, plan, fallback_reason,
                      sampler, self._start_values(rig), index=k)
        first = self._first_readings.get(k)
        if first is not None:           # read again after our keys: the animated pose is the first reading's
            sampler.take_channels(first.sampler)
            stage.start_values = first.start_values
        return stage

    def _start_values(self, rig):
        out = {}
        for name in rig.bones:
            pb = self.obj.pose.bones[name]
            out[name] = {"QUATERNION": tuple(pb.rotation_quaternion), "AXIS_ANGLE": tuple(pb.rotation_axis_angle)
                         }.get(pb.rotation_mode, tuple(pb.rotation_euler))
        return out

    def _sample(self, group, a, b):
        """Read frames a..b-1 as Blender evaluates them, for every stage of the pass (a later stage
        of a one-frame solve reads the pose written, where it is)."""
        predicting = [stage.prediction for stage in group if stage.prediction is not None]
        try:
            with guard.suspended(), own_pose.restored(self.obj):
                for i in range(a, b):
                    f = self.frames[i]
                    if self.bake or not self.stage_results:
                        self.scene.frame_set(int(np.floor(f)), subframe=float(f - np.floor(f)))
                    for stage in group:
                        stage.sampler.read(i)
                        if i == 0 and stage.index not in self._first_readings:
                            stage.start_values = self._start_values(stage.rig)
                    if predicting:
                        pose_bones = self.obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones
                        pose_bones.foreach_get("matrix", self._all_bones.ravel())
                        for prediction in predicting:
                            prediction.read(i, pose_bones, self._all_bones)
        except Exception:
            self.restore_frame()
            raise

    # -- later stages' inputs computed (`rig.prediction`) -------------------------------------------

    def _predicted_after(self, k):
        """The stages after k whose inputs can be computed from the stages before them, up to the
        first that cannot: read in stage k's pass."""
        out = []
        for j in range(k + 1, len(self.rigs)):
            if j in self.unpredicted:
                break
            solved = [name for rig in self.rigs[:j] for name in rig.bones]
            if self.bones_filter is not None and not set(solved) <= set(self.bones_filter):
                self.unpredicted[j] = "the stages before key only some of their bones (only selected)"
                break
            stage = self._stage(j)
            bones, others = stage.sampler.inputs()
            stage.prediction = prediction.Prediction(self.obj, bones, solved, self.order.driven, self._walker)
            reason = stage.prediction.reason or self._uncomputed(stage, bones, others, solved)
            if reason:
                self.unpredicted[j] = reason
                break
            stage.prediction.start(len(self.frames))
            out.append(stage)
        return out

    def _uncomputed(self, stage, bones, others, solved):
        """Why a stage's inputs that follow the stages before are not all among those computed
        (`bones`): a target or pole on another object, or something else a chain bone follows
        (a constraint's target, a driver); '' when they are."""
        keys = {(self.obj.as_pointer(), name) for name in solved}
        for name, bone in others:
            node = dependencies.node(bpy.data.objects.get(name), bone)
            if node is not None and self._walker.reached(node, keys):
                return f"its target '{name + (':' + bone if bone else '')}' is another object that follows the pose"
        known = set(bones) | set(stage.rig.bones)
        for name in stage.rig.bones:
            if any(self._walker.reached(node, keys) for node in self._walker.outside_inputs(self.obj, [name], known)):
                return f"bone '{name}' follows something that moves with the stages before"
        return ""

    def _take_prediction(self, stage):
        """Put a predicted stage's computed inputs into its sampler; False if they cannot be
        computed after all (the stage is then read on its own)."""
        if stage.prediction is None:
            return True
        solved = {}
        for earlier in self.solved_stages[:stage.index]:
            solved.update(prediction.solved_matrices(earlier.rig, earlier.q, earlier.samples))
        try:
            stage.predicted = stage.prediction.evaluate(solved)
        except prediction.Unpredictable as err:
            self.unpredicted[stage.index] = str(err)
            return False
        stage.sampler.put_bones(stage.predicted)
        return True

    def _unconfirmed(self):
        """After verifying: the first predicted stage whose computed inputs Blender's evaluation
        does not confirm (or None). It and the stages after it are read and solved again; until
        they are verified anew, nothing of this verification stands."""
        frames = self.reader.verified
        for stage in self.solved_stages:
            checked = _checked_inputs(stage)
            if not checked or not frames.any():
                continue
            read = self.reader.kept(checked)
            gap = max(_pose_gap(stage.predicted[name][frames], read[name][frames]) for name in checked)
            self.prediction_gaps[stage.index] = gap
            if gap > PREDICTION_TOLERANCE * max(1.0, _extent(stage.predicted)):
                self.unpredicted[stage.index] = f"Blender's evaluation differs from the computed inputs by {gap:.2g}"
                del self.stage_results[stage.index:]
                del self.solved_stages[stage.index:]
                self.reader = None
                return stage.index
        return None

    def _inputs(self, stage):
        """The solve's inputs from all frames read: the animated pose's joint values (the start),
        targets blended by influence, the joint-control tasks' values; whether the fast path's
        chain stays connected in that pose."""
        stage.samples = stage.sampler.samples()
        stage.q0, stage.objects, stage.values = frame_inputs(stage.rig, stage.engine_scene, stage.samples)
        if stage.plan is not None:
            reason = two_bone.pose_reason(stage.samples.basis, stage.rig.bones)
            if reason:
                stage.plan, stage.fallback_reason = None, reason

    def _solve(self, stage, chunk):
        """Solve the stage's frames, one chunk per step (the closed form: all in one)."""
        if stage.plan is not None:
            piece, stage.rotations = solve_frames(stage.rig, stage.engine_scene, stage.plan, stage.samples, stage.q0,
                                                  stage.objects, stage.values, stage.settings, stage.sampler.poles)
            stage.pieces.append(piece)
            yield
            return
        F = len(self.frames)
        while stage.solved < F:
            a = stage.solved
            b = min(a + chunk, F)
            started = time.perf_counter()
            stage.pieces.append(self._solve_chunk(stage, a, b))
            rate = (b - a) / max(time.perf_counter() - started, 1e-6)
            chunk = int(np.clip(rate * STEP_SECONDS, 64, 8192))
            yield

    def _solve_chunk(self, stage, a, b):
        scene, s, settings = stage.engine_scene, stage.samples, stage.settings

        def values(first, stop):
            return None if stage.values is None else stage.values[first:stop]

        if stage.mode == "ANIMATION":
            return solve_frames(stage.rig, scene, None, s, stage.q0[a:b], stage.objects[a:b], values(a, b), settings,
                                bases=s.bases[a:b])[0]
        if a == 0:
            return solver.solve_simulation(scene, stage.q0[0], stage.objects[:b], s.bases[:b], settings, values(0, b))
        # Simulation continues from the last solved frame: include it, then drop it.
        last = stage.pieces[-1]
        res = solver.solve_simulation(scene, last.q[-1], stage.objects[a - 1:b], s.bases[a - 1:b],
                                      replace(settings, converge_first_frame=False), values(a - 1, b),
                                      start=last.evaluation)
        return solver.Result(q=res.q[1:], position_error=res.position_error[1:], rotation_error=res.rotation_error[1:],
                             iterations=res.iterations[1:], converged=res.converged[1:], sigma_min=res.sigma_min[1:],
                             seconds=res.seconds, evaluation=res.evaluation)

    def _write(self, stage):
        """The stage's solved joint values as pose rotations and stretches, written as keys (or the
        pose of the last frame); the engine's part of the result."""
        q = np.concatenate([p.q for p in stage.pieces])
        if not np.all(np.isfinite(q)):
            raise RigError("the solver returned non-finite joint values; nothing was written")
        if stage.rotations is not None:
            R, y_scale = stage.rotations, np.ones(stage.rotations.shape[:2])
        else:
            R, y_scale = rig_module.pose_from_coordinates(stage.rig, q)
        rig, obj = stage.rig, self.obj
        bones = [n for n in rig.bones if self.bones_filter is None or n in self.bones_filter]
        if self.bake:
            written = keys.write_channels(obj, self.frames, bone_channels(obj, rig, R, y_scale, bones,
                                                                          stage.start_values), record=self.record)
        else:
            rig_module.apply_pose(rig, obj, R[-1], y_scale[-1], bones)
            written = 0
            if self.key:
                plan = bone_channels(obj, rig, R[-1:], y_scale[-1:], bones, self._start_values(rig))
                written = keys.write_channels(obj, self.frames[-1:], plan, record=False)
        self.stage_results.append(self._stage_result(stage, q, written))
        stage.q = q
        self.solved_stages.append(stage)
        self._remember_blends(stage)
        obj.update_tag()

    def _remember_blends(self, stage):
        """Constraints with influence below 1 aim short of their targets (`solving.blend_targets`):
        their effectors before the solve, in armature space, to measure them by the same blend."""
        rig, s = stage.rig, stage.samples
        weak = [c for c, d in enumerate(rig.driven) if d.influence < 1.0]
        if not weak:
            return
        tips = effector_poses(rig, stage.q0, s.bases, weak)
        for c, tip in zip(weak, tips):
            if s.base_scale is not None:         # the chain was solved unscaled about its base
                g = rig.constraint_groups[c]
                tip = tip.copy()
                tip[:, :3, 3] = rescaled_points(tip[:, :3, 3], s.bases[:, g], s.base_scale[:, g])
            self.blended[rig.constraint_names[c]] = (rig.driven[c].influence, tip)

    def _stage_result(self, stage, q, written):
        """The stage's result, its `engine` the pieces joined, per IK constraint, position errors
        in scene units (its errors and `converged` the engine's until Blender's evaluation is read)."""
        rig, pieces = stage.rig, stage.pieces
        scale = stage.samples.scale[:, None]
        if stage.samples.base_scale is not None:              # lengths in a scaled parent's frame
            scale = scale * stage.samples.base_scale[:, rig.constraint_groups]
        C = len(rig.driven)            # joint-control tasks (after the IK constraints) are not reported
        engine = solver.Result(
            q=q, position_error=np.concatenate([p.position_error[:, :C] for p in pieces]) * scale,
            rotation_error=np.concatenate([p.rotation_error[:, :C] for p in pieces]),
            iterations=np.concatenate([p.iterations for p in pieces]).astype(int),
            converged=np.concatenate([p.converged for p in pieces]).astype(bool),
            sigma_min=np.concatenate([p.sigma_min for p in pieces]), seconds=sum(p.seconds for p in pieces),
            frames=self.frames.copy(), names=list(rig.constraint_names))
        return SolveResult(
            frames=engine.frames, position_error=engine.position_error, rotation_error=engine.rotation_error,
            iterations=engine.iterations, converged=engine.converged, seconds=time.perf_counter() - self.started,
            engine=engine, constraints=rig.constraint_names, bones=list(rig.bones),
            mode=stage.mode, warnings=list(rig.warnings) + list(stage.chosen.warnings), keys_written=written,
            settings=dict(stage.chosen.values), settings_from=dict(stage.chosen.sources),
            notes=list(stage.chosen.notes),
            method=two_bone.METHOD if stage.plan is not None else f"iterative {stage.settings.method.upper()}",
            fallback_reason="" if stage.plan is not None else stage.fallback_reason)

    # -- verify: Blender's evaluation of what was written ------------------------------------------

    def _start_verify(self):
        """The reader of Blender's evaluation of every active IK constraint (`measure_rig`)."""
        self.stages_result = merge_stages(self.stage_results, self.measure_rig, self.order,
                                          time.perf_counter() - self.started)
        self.reader = verify.Reader(self.measure_rig, self.obj, len(self.frames))
        self.reader.keep([name for stage in self.solved_stages for name in _checked_inputs(stage)])
        # A bake's keys are read at each frame; a solved pose where it is (a frame change would
        # give the bones their animated channels back): at the last frame's row.
        self.to_read = list(range(len(self.frames))) if self.bake else [len(self.frames) - 1]
        self.v = 0

    def _verify(self):
        """Read Blender's evaluation at the next frames to read (if the rig changed under the
        reader, the frames left stay unverified, with a warning)."""
        started = time.perf_counter()
        stop = min(self.v + READ_STEP, len(self.to_read))
        try:
            with guard.suspended():
                for n in range(self.v, stop):
                    i = self.to_read[n]
                    if self.bake:
                        f = self.frames[i]
                        self.scene.frame_set(int(np.floor(f)), subframe=float(f - np.floor(f)))
                    self.reader.read(i, f" (at frame {self.frames[i]:g})")
                    self.v = n + 1
        except verify.Lost as err:
            self.verify_warnings.append(f"Blender's evaluation could not be checked: {err}; the keys are written, the "
                                        "frames from there on are reported not verified and not converged")
            self.v = len(self.to_read)
        except Exception:
            self.restore_frame()
            raise
        if self.v == len(self.to_read) and self.bake:
            self.restore_frame()
        self.verify_seconds += time.perf_counter() - started

    def _finish_result(self):
        """The result: Blender's evaluation of the frames read (`verify.measure`) as the errors and
        `converged`, the engine's own result beside them (`engine`); stored on the object."""
        started = time.perf_counter()
        result, rig = self.stages_result, self.measure_rig
        objects, scale = self.reader.targets()
        kept_short = []              # Blender's constraints at influence below 1: not judged
        for c, d in enumerate(rig.driven):
            name = rig.constraint_names[c]
            if name in self.blended:             # where our solve aimed
                influence, tip = self.blended[name]
                objects[:, d.target] = blend_pose(tip, objects[:, d.target], influence)
            elif d.influence < 1.0:
                kept_short.append(c)
        measured = verify.measure(self.reader, objects, scale, self.stage.settings.precision, unjudged=kept_short)
        warnings = [f"'{rig.constraint_names[c]}' (Blender's IK, influence {rig.driven[c].influence:g}): its error "
                    "is shown against the whole target and not counted in converged" for c in kept_short]
        self.verify_seconds += time.perf_counter() - started
        result = replace(
            result, position_error=measured.position_error, rotation_error=measured.rotation_error,
            converged=measured.converged & result.engine.converged, verified=measured.verified,
            float32_floor=measured.float32_floor, verify_seconds=self.verify_seconds,
            pole_error=measured.pole_error, notes=result.notes + self._reading_notes(),
            warnings=result.warnings + warnings + self.verify_warnings, seconds=time.perf_counter() - self.started)
        store_result(self.obj, result, "Bake" if self.bake else "Solve")
        return result


    def _reading_notes(self):
        if len(self.rigs) < 2:
            return []
        return ([f"{len(self.rigs)} stages from {self.readings} reading(s) of Blender's evaluation of the frames"] +
                [f"stage {k}'s inputs read, not computed: {why}" for k, why in sorted(self.unpredicted.items())])


def merge_stages(results, measure_rig, order, seconds):
    """One SolveResult of the stages' results, its columns (and its engine's) the measured rig's
    constraints (every active IK constraint; NaN errors for those Blender's IK solves)."""
    names = measure_rig.constraint_names
    F = len(results[0].frames)
    position, rotation = np.full((F, len(names)), np.nan), np.full((F, len(names)), np.nan)
    solved_by = [-1] * len(names)
    for k, r in enumerate(results):
        for c, name in enumerate(r.constraints):
            j = names.index(name)
            position[:, j], rotation[:, j], solved_by[j] = r.position_error[:, c], r.rotation_error[:, c], k

    def joined(lists):
        return list(dict.fromkeys(item for items in lists for item in items))

    engines = [r.engine for r in results]
    engine = solver.Result(
        q=np.concatenate([e.q for e in engines], axis=1), position_error=position, rotation_error=rotation,
        iterations=np.sum([e.iterations for e in engines], axis=0),
        converged=np.logical_and.reduce([e.converged for e in engines]),
        sigma_min=np.minimum.reduce([e.sigma_min for e in engines]), seconds=sum(e.seconds for e in engines),
        frames=engines[0].frames, names=list(names))
    return replace(
        results[0], position_error=position, rotation_error=rotation, iterations=engine.iterations,
        converged=engine.converged, engine=engine, constraints=list(names),
        bones=[b for r in results for b in r.bones],
        warnings=joined([order.warnings] + [r.warnings for r in results]),
        keys_written=sum(r.keys_written for r in results),
        method=" then ".join(joined([[r.method] for r in results])),
        fallback_reason="; ".join(joined([[r.fallback_reason] for r in results if r.fallback_reason])),
        notes=joined([r.notes for r in results]), solved_by=solved_by, seconds=seconds)


def bone_channels(obj, rig, R, y_scale, bones, start_values):
    """The key plan (`keys.write_channels`) of solved rotations R (F, S, 3, 3), in each bone's
    rotation mode and continuing from its `start_values`, and of the scales of the bones whose
    scale we write (`rig.Rig.scaled`: the stretching bones and the children compensating it)."""
    plan = []
    for name in bones:
        s = rig.bones.index(name)
        pb = obj.pose.bones[name]
        prop, values = keys.rotation_values(R[:, s], pb.rotation_mode, start_values[name])
        path = f'pose.bones["{bpy.utils.escape_identifier(name)}"].'
        for index in range(values.shape[1]):
            plan.append((path + prop, index, values[:, index], name))
        if name in rig.scaled:          # uniform, as Blender's IK stretches (chain_bones)
            plan += [(path + "scale", i, y_scale[:, s], name) for i in range(3)]
    return plan


def store_result(obj, result, kind):
    props = obj.itasc
    worst, rms = result.position_stats()
    props.has_result = True
    props.result_kind = kind
    props.result_frames = len(result.frames)
    props.result_not_converged = result.not_converged
    props.result_max_error = worst
    props.result_rms_error = rms
    props.result_seconds = result.seconds
    props.result_message = "; ".join(result.warnings)[:1000]
    props.result_method = result.method
    column = {name: c for c, name in enumerate(result.constraints)}
    for pb, con in rig_module.ik_constraints(obj):
        c = column.get(f"{pb.name}/{con.name}")
        item = handover.entry(obj, pb.name, con.name, create=c is not None)
        if item is None:
            continue
        item.result_stage = -2 if c is None else result.solved_by[c] if result.solved_by else 0
        errors = result.position_error[:, c] if c is not None else np.full(1, np.nan)
        item.result_max_error = float(np.nanmax(errors)) if np.isfinite(errors).any() else 0.0


def _checked_inputs(stage):
    """The computed inputs of a stage that its verification checks: all but its own chain bones
    (its roots), which its solve has posed since (their parents and constraints' targets are
    checked, and the roots' own constraints show in its constraints' errors)."""
    return [name for name in stage.predicted or () if name not in stage.rig.bones]


def _pose_gap(A, B):
    """The largest difference of two pose matrix series (F, 4, 4): locations and axes."""
    return float(np.abs(A[:, :3, :] - B[:, :3, :]).max())


def _extent(matrices):
    """The largest location coordinate of {bone: (F, 4, 4)}."""
    return float(max(np.abs(M[:, :3, 3]).max() for M in matrices.values()))

"""Solving a rig over frames: read targets frame by frame, solve with the engine, write poses or
keys. Plain functions and one resumable job, shared by the API, the operators and live preview.

A `Job` runs in steps (`step()` returns False when done) so that a modal operator can show
progress and stop on Esc between them; `run()` does it all at once. Nothing is written to the
user's data before the write step, so a job cancelled before it leaves the file as it was (except
for the hand-over to our solver, which mutes the driven IK constraints). After writing, the job
reads Blender's evaluation of every written frame (`verify`): the result's errors and `converged`
describe what Blender shows. Cancelled while doing that (`Job.cancel`), the keys stay written and
the frames not yet read are reported not verified and not converged.

The armature's data flows one way: `rig.read_rig` (the Model and its tasks, plus the bones'
joint-control tasks) -> per-frame samples (`rig.Sampler`) -> one batched solve (the engine, or
`two_bone`'s closed form) -> the engine's results -> pose rotations (`rig.pose_from_coordinates`)
-> keys (`bone_channels`, `keys.write_channels`) -> Blender's evaluation of them (`verify`) -> the
`SolveResult`.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace

import bpy
import numpy as np

from .. import solver
from ..solver.bones import coordinates_from_basis
from ..solver.rotations import exp_map, log_map
from . import guard, handover, ik_settings, keys, own_pose, two_bone, verify
from . import rig as rig_module
from .rig import order as rig_order
from .rig import RigError

OPTION_NAMES = ik_settings.NAMES
CHUNK = 256  # frames solved in the first step (the engine is batched: larger chunks are faster)
STEP_SECONDS = 0.1  # later steps are sized to take about this long (progress and Esc between them)


@dataclass
class SolveResult:
    """What a solve or bake did. Arrays per frame (and per constraint): errors in scene units
    (position) and radians (rotation), NaN where a constraint has no such part.

    `constraints` are every active IK constraint of the rig: those our solver drove (in stages,
    `solved_by`) and those Blender's own IK keeps solving (`solved_by` -1; the warnings say why).
    `position_error`, `rotation_error` and `converged` describe Blender's evaluation of what was
    written (`verify`): a frame is converged when the engine converged there and Blender shows
    every active IK constraint within the precision. The engine's own figures are `solver_*`
    (NaN for Blender's constraints).
    Blender keys and evaluates in float32: "within the precision" allows for what that resolves
    at the rig's size, `float32_floor` (frames x constraints, scene units; `verify`).
    `verified` says which frames Blender's evaluation was read at (a frame not read, e.g. after
    a cancel, has NaN errors and is not converged); `verify_seconds` is the part of `seconds`
    spent reading and measuring it. `pole_error` (frames x constraints, radians) is how far
    Blender shows each chain's bend plane turned from its pole (NaN: the constraint has no pole
    the solver follows); a frame is converged only with those within the precision too."""

    frames: np.ndarray
    position_error: np.ndarray
    rotation_error: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    seconds: float
    constraints: list = field(default_factory=list)
    bones: list = field(default_factory=list)
    sigma_min: np.ndarray | None = None
    mode: str = "ANIMATION"
    warnings: list = field(default_factory=list)
    keys_written: int = 0
    q: np.ndarray | None = None
    method: str = ""              # which solver ran: two_bone.METHOD or "iterative <update law>"
    fallback_reason: str = ""     # why the two-bone fast path did not run ('' when it did)
    solver_position_error: np.ndarray | None = None   # the engine's own figures, same shapes and units
    solver_rotation_error: np.ndarray | None = None
    solver_converged: np.ndarray | None = None
    verified: np.ndarray | None = None
    float32_floor: np.ndarray | None = None
    verify_seconds: float = 0.0
    pole_error: np.ndarray | None = None
    settings: dict = field(default_factory=dict)       # the settings used (`ik_settings.Chosen.values`)
    settings_from: dict = field(default_factory=dict)  # where each came from: option, override, armature, ...
    notes: list = field(default_factory=list)          # about the settings: the Standard solver, what is not used
    solved_by: list = field(default_factory=list)      # per constraint: the stage we drove it in, -1: Blender's IK

    @property
    def not_converged(self) -> int:
        return int(np.count_nonzero(~self.converged))

    def position_stats(self):
        """(max, RMS) of the per-frame largest position error, in scene units (0 without any)."""
        err = self.position_error
        if err.size == 0 or np.all(np.isnan(err)):
            return 0.0, 0.0
        worst = np.nanmax(np.where(np.isnan(err), -np.inf, err), axis=1)
        worst = worst[np.isfinite(worst)]
        return float(worst.max()), float(np.sqrt(np.mean(worst**2)))

    def summary(self) -> str:
        worst, rms = self.position_stats()
        text = (f"{len(self.frames)} frame(s) solved, {self.not_converged} not converged, position error "
                f"max {worst:.3g} RMS {rms:.3g} (as Blender shows it), {self.seconds:.2f} s")
        unread = 0 if self.verified is None else int(np.count_nonzero(~self.verified))
        if unread:
            text += f", {unread} not verified"
        if self.method:
            text += f" ({self.method})"
        return text


def settings_for(obj, fps=None, scale=None, rig=None, **options):
    """The mode and the engine's Settings of a solve of `obj` (`ik_settings.choose`: the armature's
    own IK settings, read now, overridden by our panel's overrides and by `options`: mode, method,
    precision, max_iterations, feedback, max_velocity, damping_max, damping_epsilon, substeps).
    Precision is in scene units; the engine works in the armature's (`scale`: the armature's
    uniform scale when the caller has checked it already); `fps`: the solve's frame rate; `rig`:
    the rig read (`rig.read_rig`), whose IK constraints' iterations a Standard-solver rig follows
    (None: every IK constraint's, found by a walk over the pose bones)."""
    mode, settings, _ = chosen_settings(obj, fps, scale, rig, **options)
    return mode, settings


def chosen_settings(obj, fps=None, scale=None, rig=None, **options):
    """`settings_for` and the `ik_settings.Chosen` it was made from (values, sources, notes)."""
    if fps is None:
        render = bpy.context.scene.render
        fps = render.fps / render.fps_base
    constraints = None if rig is None else [(d.bone, d.name) for d in rig.driven]
    chosen = ik_settings.choose(obj, options, fps, constraints)
    if scale is None:
        scale = rig_module.object_scale(rig_module.evaluated_world(obj), f"armature '{obj.name}'")
    try:
        settings = _settings(**ik_settings.engine_keywords(chosen, fps, scale))
    except ValueError as err:
        raise RigError(f"{err} (settings from: {_sources(chosen)})") from None
    return chosen.values["mode"], settings, chosen


def _sources(chosen):
    return ", ".join(f"{name} {chosen.sources[name]}" for name in ik_settings.NAMES)


# Settings are immutable and checked when built: live preview asks for the same ones every frame.
_settings = functools.lru_cache(maxsize=64)(solver.Settings)


def blend_targets(rig, q0, samples, objects):
    """Constraints with influence below 1 aim at a point between the effector's pose at the
    action's pose (q0) and the target: position lerp, rotation slerp by the influence."""
    weak = [i for i, d in enumerate(rig.driven) if d.influence < 1.0]
    if not weak:
        return objects
    objects = objects.copy()
    pose = solver.forward_kinematics(rig.model, q0, samples.bases)
    for i in weak:
        d = rig.driven[i]
        s = rig.model.index(d.tip)
        tip = pose.frames[:, s].copy()
        tip[:, :3, 3] += tip[:, :3, :3] @ np.array([0.0, rig.model.length[s], 0.0])
        target = objects[:, d.target]
        t = d.influence
        out = target.copy()
        out[:, :3, 3] = (1 - t) * tip[:, :3, 3] + t * target[:, :3, 3]
        relative = np.swapaxes(tip[:, :3, :3], -1, -2) @ target[:, :3, :3]
        out[:, :3, :3] = tip[:, :3, :3] @ exp_map(t * log_map(relative))
        objects[:, d.target] = out
    return objects


def frame_inputs(rig, engine_scene, samples, q0=None):
    """(start q0 (F, n), targets (F, K, 4, 4), joint-control values or None) of an animation-mode
    solve of the frames sampled: the start is the animated pose (the user's own channels,
    `pose_channels`), targets of constraints with influence below 1 are blended with it, and the
    IK rotation / linear control tasks hold to it. The bake and live preview both start here.
    `q0`: the start, when the caller has it already (`coordinates_from_basis` of samples.basis)."""
    if q0 is None:
        q0 = coordinates_from_basis(rig.model, samples.basis)
    objects = blend_targets(rig, q0, samples, samples.objects)
    return q0, objects, rig_module.control_values(engine_scene, q0)


def solve_frames(rig, engine_scene, plan, samples, q0, objects, values, settings, poles=None, bases=None):
    """(engine Result, pose rotations (F, S, 3, 3) or None) of an animation-mode solve of the
    frames from `frame_inputs`: the two-bone closed form where `plan` is given (its rotations are
    what is written), else the engine from q0. Each frame's answer depends on its own inputs
    alone, so one frame solved alone (live preview) equals that frame of a bake."""
    if plan is not None:
        return two_bone.solve(rig, plan, samples, q0, objects, poles, engine_scene, settings)
    bases = samples.bases if bases is None else bases
    return solver.solve_animation(engine_scene, q0, objects, bases, settings, values), None


class Job:
    """Solve `obj` at `frames` and write the result: keys (`bake=True`) or the pose of one frame.

    The rig's IK constraints are solved in stages (`rig_order`: a chain whose target rides on
    another chain comes after it); each stage samples its targets from Blender's evaluation of what
    the stages before it wrote, solves and writes. Constraints the solver cannot drive stay
    Blender's (never muted). Then Blender's evaluation of every active IK constraint of the rig,
    ours and Blender's alike, is measured (`verify`): that is the result."""

    def __init__(self, obj, frames, *, bake=True, bones=None, key=False, record=True, **options):
        frames = np.atleast_1d(np.asarray(frames, dtype=float))
        if frames.size == 0:
            raise RigError("no frames to solve")
        if not np.all(np.isfinite(frames)):
            raise RigError("frames must be finite numbers")
        self.obj, self.frames, self.bake, self.key, self.record = obj, frames, bake, key, record
        self.bones_filter = bones
        self.options = options
        check_writable(obj, keys_too=bake or key)
        if bake or key:
            keys.action_frames(obj, frames)     # frames the action cannot play at are refused here
        on = handover.on_chooser(obj)
        self.order = rig_order.order(obj, handover.chooser(obj), on)
        rig_order.check(self.order, obj)
        self.rigs = [rig_module.read_rig(obj, rig_order.members(stage)) for stage in self.order.stages]
        driven = self.order.driven
        self.measure_rig = (self.rigs[0] if len(self.rigs) == 1 and not self.order.blender else
                            rig_module.read_rig(obj, on, measure=True, poles_of=lambda bone, name: (bone, name) in driven))
        # Only once the rig reads well (bad input changes nothing): hand the driven constraints over.
        handover.leave_to_blender(obj, {(bone, name) for bone, name, _ in self.order.blender})
        handover.set_active(obj, True)
        self.scene = bpy.context.scene
        self._frame = (self.scene.frame_current, self.scene.frame_subframe)
        self.stage_results = []      # the engine's figures of the stages written
        self.result = None
        self.engine_result = None    # the engine's figures, once all stages are written
        self.reader = None           # Blender's evaluation of what was written (verify phase)
        self.to_read, self.v = [], 0     # the frames (indices) to read there, how many are read
        self.verify_warnings = []
        self.verify_seconds = 0.0
        self.started = time.perf_counter()
        self._begin_stage(0)

    def _begin_stage(self, k):
        """Set up stage k: its rig, settings and sampler; the sampling starts."""
        obj, frames = self.obj, self.frames
        self.stage = k
        self.rig = self.rigs[k]
        self.engine_scene = rig_module.with_joint_control(self.rig, obj)
        step = float(np.min(np.diff(frames))) if frames.size > 1 else 1.0
        render = bpy.context.scene.render
        self.mode, self.settings, self.chosen = chosen_settings(
            obj, render.fps / render.fps_base / max(step, 1e-9), self.rig.scale, self.rig, **self.options)
        self.plan, self.fallback_reason = two_bone.plan_for(self.rig, obj, self.mode)
        self.rotations = None        # the fast path's pose rotations (F, S, 3, 3)
        self.values = None           # the IK rotation / linear control tasks' values (F, tasks)
        self.sampler = (two_bone.Sampler(self.rig, obj, frames, self.plan) if self.plan is not None
                        else rig_module.Sampler(self.rig, obj, frames))
        self.start_values = self._start_values()
        self.i = 0
        self.phase = "sample"
        self.pieces = []
        self.chunk = CHUNK

    @property
    def total(self):
        return (2 * len(self.rigs) + 1) * len(self.frames) + 1

    @property
    def done(self):
        F = len(self.frames)
        base = 2 * F * self.stage
        if self.phase == "solve":
            return base + F + sum(len(p.q) for p in self.pieces)
        if self.phase == "verify":
            return 2 * F * len(self.rigs) + 1 + self.v
        return {"sample": base + self.i, "write": base + 2 * F, "finished": self.total}[self.phase]

    def _start_values(self):
        out = {}
        for name in self.rig.bones:
            pb = self.obj.pose.bones[name]
            out[name] = {"QUATERNION": tuple(pb.rotation_quaternion), "AXIS_ANGLE": tuple(pb.rotation_axis_angle)
                         }.get(pb.rotation_mode, tuple(pb.rotation_euler))
        return out

    def _sample(self, a, b):
        try:
            for i in range(a, b):
                f = self.frames[i]
                if self.bake or self.stage == 0:    # (a later stage reads the pose written, where it is)
                    self.scene.frame_set(int(np.floor(f)), subframe=float(f - np.floor(f)))
                self.sampler.read(i)
                if i == 0:
                    self.start_values = self._start_values()
        except Exception:
            self.restore_frame()
            raise

    def step(self):
        """Advance by one piece of work; False once everything is done."""
        if self.phase == "sample":
            stop = min(self.i + 16, len(self.frames))
            with guard.suspended(), own_pose.restored(self.obj):
                self._sample(self.i, stop)
            self.i = stop
            if self.i == len(self.frames):
                self.restore_frame()
                self._inputs()
                self.phase = "solve"
            return True
        if self.phase == "solve" and self.plan is not None:      # all frames in one closed-form batch
            piece, self.rotations = solve_frames(self.rig, self.engine_scene, self.plan, self.samples, self.q0,
                                                 self.objects, self.values, self.settings, self.sampler.poles)
            self.pieces.append(piece)
            self.phase = "write"
            return True
        if self.phase == "solve":
            a = sum(len(p.q) for p in self.pieces)
            b = min(a + self.chunk, len(self.frames))
            started = time.perf_counter()
            self.pieces.append(self._solve(a, b))
            rate = (b - a) / max(time.perf_counter() - started, 1e-6)
            self.chunk = int(np.clip(rate * STEP_SECONDS, 64, 8192))
            if b == len(self.frames):
                self.phase = "write"
            return True
        if self.phase == "write":
            self._finish()
            if self.stage + 1 < len(self.rigs):
                self._begin_stage(self.stage + 1)
            else:
                self._start_verify()
                self.phase = "verify"
            return True
        if self.phase == "verify":
            started = time.perf_counter()
            more = self._verify()
            self.verify_seconds += time.perf_counter() - started
            if not more:
                self.result = self._finish_result()
                self.phase = "finished"
            return more
        return False

    def cancel(self):
        """Stop where the job is (what Esc does), the scene back at its frame. Before the first
        stage's write step nothing was written: returns None. Once keys are written (verifying,
        or a later stage under way) they stay, the result is finished with the frames not read
        yet reported not verified and not converged, and the returned message says so."""
        self.restore_frame()
        if self.phase != "verify" and not self.stage_results:
            return None
        if self.phase != "verify":
            self._start_verify()
        self.result = self._finish_result()
        self.phase = "finished"
        unread = int(np.count_nonzero(~self.result.verified))
        return (f"Cancelled while checking Blender's evaluation of the keys: the keys are written; {unread} of "
                f"{len(self.frames)} frame(s) not verified, reported not converged")

    def _inputs(self):
        """The solve's inputs from all frames read: the animated pose's joint values (the start),
        targets blended by influence, the joint-control tasks' values; whether the fast path's
        chain stays connected in that pose."""
        self.samples = self.sampler.samples()
        self.q0, self.objects, self.values = frame_inputs(self.rig, self.engine_scene, self.samples)
        if self.plan is not None:
            reason = two_bone.pose_reason(self.samples.basis, self.rig.bones)
            if reason:
                self.plan, self.fallback_reason = None, reason

    def run(self):
        """Everything at once (no progress to show between steps): the solve in one piece."""
        self.chunk = max(len(self.frames), 1)
        while self.step():
            pass
        return self.result

    def restore_frame(self):
        with guard.suspended():
            self.scene.frame_set(self._frame[0], subframe=self._frame[1])

    def _solve(self, a, b):
        scene, s, values = self.engine_scene, self.samples, self._control_values
        if self.mode == "ANIMATION":
            return solve_frames(self.rig, scene, None, s, self.q0[a:b], self.objects[a:b], values(a, b),
                                self.settings, bases=s.bases[a:b])[0]
        if a == 0:
            return solver.solve_simulation(scene, self.q0[0], self.objects[:b], s.bases[:b], self.settings,
                                           values(0, b))
        # Simulation continues from the last solved frame: include it, then drop it.
        last = self.pieces[-1]
        res = solver.solve_simulation(scene, last.q[-1], self.objects[a - 1:b], s.bases[a - 1:b],
                                      replace(self.settings, converge_first_frame=False), values(a - 1, b),
                                      start=last.evaluation)
        return solver.Result(q=res.q[1:], position_error=res.position_error[1:], rotation_error=res.rotation_error[1:],
                             iterations=res.iterations[1:], converged=res.converged[1:], sigma_min=res.sigma_min[1:],
                             seconds=res.seconds, evaluation=res.evaluation)

    def _control_values(self, first, stop):
        """The IK rotation / linear control tasks' values at frames first..stop-1 (None: no such tasks)."""
        return None if self.values is None else self.values[first:stop]

    def _finish(self):
        """The stage's solved joint values as pose rotations and stretches, written as keys (or the
        pose of the last frame); the engine's part of the result."""
        q = np.concatenate([p.q for p in self.pieces])
        if not np.all(np.isfinite(q)):
            raise RigError("the solver returned non-finite joint values; nothing was written")
        if self.rotations is not None:
            R, y_scale = self.rotations, np.ones(self.rotations.shape[:2])
        else:
            R, y_scale = rig_module.pose_from_coordinates(self.rig, q)
        written = self._write(R, y_scale)
        self.stage_results.append(self._result(q, written))
        self.obj.update_tag()

    def _start_verify(self):
        """The reader of Blender's evaluation of every active IK constraint (`measure_rig`)."""
        self.engine_result = merge_stages(self.stage_results, self.measure_rig, self.order, time.perf_counter() - self.started)
        self.reader = verify.Reader(self.measure_rig, self.obj, len(self.frames))
        # A bake's keys are read at each frame; a solved pose where it is (a frame change would
        # give the bones their animated channels back): at the last frame's row.
        self.to_read = list(range(len(self.frames))) if self.bake else [len(self.frames) - 1]
        self.v = 0

    def _verify(self):
        """Read Blender's evaluation at the next frames to read; False once all are read (or the
        rig changed under the reader: the frames left stay unverified, with a warning)."""
        stop = min(self.v + 16, len(self.to_read))
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
        if self.v < len(self.to_read):
            return True
        if self.bake:
            self.restore_frame()
        return False

    def _finish_result(self):
        """The result: Blender's evaluation of the frames read (`verify.measure`) as the errors and
        `converged`, the engine's own figures beside them; stored on the object."""
        started = time.perf_counter()
        result = self.engine_result
        reader = self.reader
        objects, scale = reader.targets()
        if self.measure_rig is self.rig and any(d.influence < 1.0 for d in self.rig.driven):  # where the solve aimed
            objects = blend_targets(self.rig, self.q0, self.samples, objects)
        measured = verify.measure(reader, objects, scale, self.settings.precision)
        self.verify_seconds += time.perf_counter() - started
        result = replace(
            result, position_error=measured.position_error, rotation_error=measured.rotation_error,
            converged=measured.converged & result.converged, solver_position_error=result.position_error,
            solver_rotation_error=result.rotation_error, solver_converged=result.converged,
            verified=measured.verified, float32_floor=measured.position_floor, verify_seconds=self.verify_seconds,
            pole_error=measured.pole_error,
            warnings=result.warnings + self.verify_warnings, seconds=time.perf_counter() - self.started)
        store_result(self.obj, result, "Bake" if self.bake else "Solve")
        return result

    def _write(self, R, y_scale):
        """Keys of the driven bones (bake), or the last frame's pose (and its keys with `key`).
        Returns the number of keys written."""
        rig, obj = self.rig, self.obj
        bones = [n for n in rig.bones if self.bones_filter is None or n in self.bones_filter]
        if self.bake:
            plan = bone_channels(obj, rig, R, y_scale, bones, self.start_values)
            return keys.write_channels(obj, self.frames, plan, record=self.record)
        rig_module.apply_pose(rig, obj, R[-1], y_scale[-1], bones)
        if not self.key:
            return 0
        plan = bone_channels(obj, rig, R[-1:], y_scale[-1:], bones, self._start_values())
        return keys.write_channels(obj, self.frames[-1:], plan, record=False)

    def _result(self, q, written):
        """The pieces' reports joined, per IK constraint, position errors in scene units."""
        rig = self.rig
        scale = self.samples.scale[:, None]
        if self.samples.base_scale is not None:              # lengths in a scaled parent's frame
            scale = scale * self.samples.base_scale[:, rig.constraint_groups]
        C = len(rig.driven)            # joint-control tasks (after the IK constraints) are not reported
        return SolveResult(
            frames=self.frames.copy(),
            position_error=np.concatenate([p.position_error[:, :C] for p in self.pieces]) * scale,
            rotation_error=np.concatenate([p.rotation_error[:, :C] for p in self.pieces]),
            iterations=np.concatenate([p.iterations for p in self.pieces]).astype(int),
            converged=np.concatenate([p.converged for p in self.pieces]).astype(bool),
            seconds=time.perf_counter() - self.started,
            constraints=rig.constraint_names, bones=list(rig.bones),
            sigma_min=np.concatenate([p.sigma_min for p in self.pieces]),
            mode=self.mode, warnings=list(self.rig.warnings) + list(self.chosen.warnings), keys_written=written, q=q,
            settings=dict(self.chosen.values), settings_from=dict(self.chosen.sources), notes=list(self.chosen.notes),
            method=two_bone.METHOD if self.plan is not None else f"iterative {self.settings.method.upper()}",
            fallback_reason="" if self.plan is not None else self.fallback_reason)


def merge_stages(results, measure_rig, order, seconds):
    """One SolveResult of the stages' engine results, its columns the measured rig's constraints
    (every active IK constraint; NaN errors for those Blender's IK solves)."""
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

    return replace(
        results[0], position_error=position, rotation_error=rotation,
        iterations=np.sum([r.iterations for r in results], axis=0),
        converged=np.logical_and.reduce([r.converged for r in results]), constraints=list(names),
        bones=[b for r in results for b in r.bones], sigma_min=np.minimum.reduce([r.sigma_min for r in results]),
        warnings=joined([order.warnings] + [r.warnings for r in results]),
        keys_written=sum(r.keys_written for r in results), q=np.concatenate([r.q for r in results], axis=1),
        method=" then ".join(joined([[r.method] for r in results])),
        fallback_reason="; ".join(joined([[r.fallback_reason] for r in results if r.fallback_reason])),
        notes=joined([r.notes for r in results]), solved_by=solved_by, seconds=seconds)


def check_writable(obj, keys_too=True):
    """Refuse an armature whose pose (or, when keying, whose action) comes read-only from a library:
    what we wrote there would be lost on save."""
    if obj.library is not None:
        raise RigError(f"armature '{obj.name}' is linked from '{obj.library.filepath}' and read-only; make a "
                       "local copy (Object > Relations > Make Local) and solve that")
    if getattr(obj, "override_library", None) is not None:
        raise RigError(f"armature '{obj.name}' is a library override: the solver cannot store its hand-over "
                       "and bake records there; make it local (Object > Relations > Make Local) and solve that")
    anim = obj.animation_data
    action = anim.action if anim is not None else None
    if keys_too and action is not None and action.library is not None:
        raise RigError(f"the action '{action.name}' of armature '{obj.name}' is linked from "
                       f"'{action.library.filepath}' and read-only; give the armature a local action "
                       "(make the action local, or a copy) and bake again")


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

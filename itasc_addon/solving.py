"""What a solve of a rig over frames is made of, shared by a bake (`job`) and live preview
(`live`): the settings chosen for it, the start and targets of each frame (`frame_inputs`), the
solve itself (`solve_frames`: the engine, or `two_bone`'s closed form) and its `SolveResult`.

Each frame's answer depends on its own inputs alone, so one frame solved alone (live preview)
equals that frame of a bake.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import bpy
import numpy as np

from .. import solver
from ..solver.bones import coordinates_from_basis
from ..solver.rotations import exp_map, log_map
from . import ik_settings, two_bone
from . import rig as rig_module
from .rig import RigError

OPTION_NAMES = ik_settings.NAMES


@dataclass
class SolveResult:
    """What a solve or bake did: what Blender measured, and `engine`, the engine's own result.
    Arrays per frame (and per constraint): errors in scene units (position) and radians
    (rotation), NaN where a constraint has no such part.

    `constraints` are every active IK constraint of the rig: those our solver drove (in stages,
    `solved_by`) and those Blender's own IK keeps solving (`solved_by` -1; the warnings say why).
    `position_error`, `rotation_error` and `converged` describe Blender's evaluation of what was
    written (`verify`): a frame is converged when the engine converged there and Blender shows
    every active IK constraint within the precision. `iterations` are the engine's.
    `engine` is the engine's `solver.Result` of the stages joined, its columns `constraints`
    (errors in scene units, NaN for Blender's constraints; `q` the stages' joint values side by
    side, `sigma_min` the smallest over the stages, `seconds` the engine's own time).
    Blender keys and evaluates in float32: "within the precision" allows for what that resolves
    at the rig's size, `float32_floor` (frames x constraints, scene units; `verify`).
    `verified` says which frames Blender's evaluation was read at (a frame not read, e.g. after
    a cancel, has NaN errors and is not converged); `seconds` counts from the start of
    `job.prepare`, `verify_seconds` is the part of it spent reading and measuring Blender's
    evaluation. `pole_error` (frames x constraints, radians) is how far
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
    mode: str = "ANIMATION"
    warnings: list = field(default_factory=list)
    keys_written: int = 0
    method: str = ""              # which solver ran: two_bone.METHOD or "iterative <update law>"
    fallback_reason: str = ""     # why the two-bone fast path did not run ('' when it did)
    verified: np.ndarray | None = None
    float32_floor: np.ndarray | None = None
    verify_seconds: float = 0.0
    pole_error: np.ndarray | None = None
    settings: dict = field(default_factory=dict)       # the settings used (`ik_settings.Chosen.values`)
    settings_from: dict = field(default_factory=dict)  # where each came from: option, override, armature, ...
    notes: list = field(default_factory=list)          # about the settings (the Standard solver, what is not
    #                                                    used) and the stages' readings of Blender's evaluation
    solved_by: list = field(default_factory=list)      # per constraint: the stage we drove it in, -1: Blender's IK
    engine: object = None                              # the engine's solver.Result, per constraint as above

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
    action's pose (q0) and the target, as Blender's Standard IK blends its goal (`blend_pose`)."""
    weak = [i for i, d in enumerate(rig.driven) if d.influence < 1.0]
    if not weak:
        return objects
    objects = objects.copy()
    for i, tip in zip(weak, effector_poses(rig, q0, samples.bases, weak)):
        d = rig.driven[i]
        objects[:, d.target] = blend_pose(tip, objects[:, d.target], d.influence)
    return objects


def effector_poses(rig, q, bases, constraints):
    """Per driven constraint in `constraints`, its effector's pose (F, 4, 4) at joint values q:
    the tail of its tip bone, with that bone's axes."""
    pose = solver.forward_kinematics(rig.model, q, bases)
    out = []
    for c in constraints:
        s = rig.model.index(rig.driven[c].tip)
        tip = pose.frames[:, s].copy()
        tip[:, :3, 3] += tip[:, :3, :3] @ np.array([0.0, rig.model.length[s], 0.0])
        out.append(tip)
    return out


def blend_pose(tip, target, influence):
    """The pose `influence` of the way from `tip` to `target` (F, 4, 4): position lerp, rotation
    slerp."""
    out = target.copy()
    out[:, :3, 3] = (1 - influence) * tip[:, :3, 3] + influence * target[:, :3, 3]
    relative = np.swapaxes(tip[:, :3, :3], -1, -2) @ target[:, :3, :3]
    out[:, :3, :3] = tip[:, :3, :3] @ exp_map(influence * log_map(relative))
    return out


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

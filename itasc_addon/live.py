"""Live preview: while an armature's ``itasc.live_preview`` is on, solve whenever the frame changes
or one of its targets moves, and pose the bones (no keys).

In animation mode (the armature's iTaSC mode; ours by default) every frame is solved to
convergence as a bake solves it: the same start (the user's own pose at that frame, the kept
channels and the action's F-curves, `own_pose.animated_channels`), the same targets (blended by
influence), the same joint-control values and the same solver (the two-bone closed form where the
bake takes it, else the engine), through the functions the bake calls (`solving.frame_inputs`,
`solving.solve_frames`). A frame's answer depends on its inputs alone, so what live preview shows
is what the bake writes there, on playback, scrubbing, jumps and a dragged target alike. A frame
asked again with the same inputs (playback looping, scrubbing back) takes the answer it had.

In simulation mode each armature keeps its last solution (joint values, frame, targets). A frame
one to a few frames after the last one advances the simulation from there (one time step per
frame); any other frame (a jump, going back) and a target moved by hand within the same frame are
solved to convergence from the last solution, so the rig stays continuous and lands on the target
when the user lets go.

Our own pose writes do not trigger a solve: only a change of the targets', bases' or start pose's
values does. Live preview stands aside while a bake runs and while Blender renders. The user's own
pose of the bones it poses is kept and given back by `own_pose`; the hand-over (muting Blender's
IK) is `handover`'s; when to stand aside is `guard`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import bpy
import numpy as np
from bpy.app.handlers import persistent

from .. import solver
from ..solver.bones import coordinates_from_basis
from ..solver.runtime.blas_threads import one_blas_thread
from . import guard, handover, own_pose, solving, two_bone
from . import rig as rig_module
from .rig import RigError

MAX_STEP_FRAMES = 4     # frame advances up to this are simulated; larger jumps are re-solved
MAX_REMEMBERED = 4096    # frames whose animation-mode answer is kept per rig (replays take it)
STILL = 1e-6            # bases that moved less than this (armature units) between frames stand still
_state = {}             # object pointer -> State
_rigs = {}              # object pointer -> Reader


@dataclass
class State:
    coordinate_names: tuple    # to tell whether the rig changed
    q: np.ndarray       # (1, n)
    frame: float
    objects: np.ndarray
    bases: np.ndarray
    evaluation: object = None    # the engine's evaluation at q in this frame, the next step's start
    basis: np.ndarray | None = None    # the start pose sampled (the user's own), to tell it changed
    sampled: np.ndarray | None = None  # the targets as sampled (objects: as aimed at, blended by influence)


def changed(obj):
    """The object's live preview was switched: forget its state and the rig read."""
    _state.pop(obj.as_pointer(), None)
    _rigs.pop(obj.as_pointer(), None)


@dataclass
class Reader:
    """An armature as read for live preview, kept while its signature stays the same."""

    signature: tuple
    rig: rig_module.Rig
    sampler: rig_module.Sampler     # one frame, read again at every solve
    scene: object                   # rig.scene plus the bones' IK rotation / linear control tasks
    plan: object = None             # the bake's two-bone closed form (animation mode), or None
    solved: dict = field(default_factory=dict)   # frame -> (its inputs, q, rotations): replays
    start: tuple = (None, None)     # (a start pose the sampler handed out, its joint values)


def _reader(obj):
    """(Reader, whether it was read just now). The rig is read again only when its signature changed
    (a constraint, a target, a chain bone's rest or IK settings): reading builds the engine's model,
    which costs more than a simulation step. Live preview does not report the rig's warnings."""
    drives = handover.chooser(obj)
    signature = rig_module.rig_signature(obj, drives)
    reader = _rigs.get(obj.as_pointer())
    if reader is not None and reader.signature == signature:
        return reader, False
    rig = rig_module.read_rig(obj, drives)
    driven = {(d.bone, d.name) for d in rig.driven}
    handover.leave_to_blender(obj, {(pb.name, con.name) for pb, con in rig_module.ik_constraints(obj)
                                    if drives(pb, con) and (pb.name, con.name) not in driven})
    scene = rig_module.with_joint_control(rig, obj)
    plan, _ = two_bone.plan_for(rig, obj, "ANIMATION")
    sampler = (two_bone.Sampler(rig, obj, [0.0], plan) if plan is not None
               else rig_module.Sampler(rig, obj, [0.0]))
    sampler.read_channels = False          # the start pose is the user's own, given by `_sample`
    reader = _rigs[obj.as_pointer()] = Reader(signature, rig, sampler, scene, plan)
    return reader, True


def _sample(reader, obj):
    """This frame's samples, the start pose the user's own (`own_pose.animated_channels`), as a bake
    samples it."""
    scene = bpy.context.scene
    sampler = reader.sampler
    sampler.obj = obj           # the Python object of this call (an undo may have replaced the last one)
    frame = scene.frame_current + scene.frame_subframe
    sampler.frames[0] = frame
    sampler.read(0)
    sampler.put_channels(0, *own_pose.animated_channels(obj, reader.rig.bones, frame))
    return sampler.samples()


def solve_now(obj, force=True):
    """Solve the armature at the current frame and pose it. Returns the joint values (1, n), or
    None when nothing needed solving (targets unchanged)."""
    with guard.busy(), one_blas_thread():
        return _solve(obj, force)


def _solve(obj, force):
    reader, fresh = _reader(obj)
    rig = reader.rig
    if fresh:
        handover.set_active(obj, True)     # mutes Blender's IK on constraints new to the rig
    samples = _sample(reader, obj)
    frame = float(samples.frames[0])
    key = obj.as_pointer()
    state = _state.get(key)
    names = tuple(rig.model.coordinate_names)
    if state is not None and state.coordinate_names != names:
        state = None
    # Targets or chain groups added or removed: the last solution still fits, the last samples do not.
    same_inputs = (state is not None and state.objects.shape == samples.objects.shape
                   and state.bases.shape == samples.bases.shape)
    if (same_inputs and not force and state.frame == frame
            and np.allclose(state.sampled, samples.objects, atol=1e-9)
            and np.allclose(state.bases, samples.bases, atol=1e-9)
            and state.basis.shape == samples.basis.shape and (state.basis == samples.basis).all()):
        return None
    render = bpy.context.scene.render
    fps = render.fps / render.fps_base
    scale = float(samples.scale[0])
    mode, settings = solving.settings_for(obj, fps=fps, scale=scale, rig=rig)
    sampled = samples.objects
    rotations = evaluation = None
    if mode == "ANIMATION":
        q, rotations, samples.objects = _animation_frame(reader, samples, settings)
    else:
        inputs = _simulation_inputs(reader, samples, state)
        samples.objects = inputs[1]          # targets blended by influence: what the solve aims at
        q, evaluation = _simulation_frame(obj, reader, state, samples, inputs, same_inputs, fresh, fps)
    if not np.isfinite(q).all():
        raise RigError("the solver returned non-finite joint values; the pose was left as it was")
    if rotations is not None:
        R, y_scale = rotations, np.ones(rotations.shape[:2])
    else:
        # The simulation's last evaluation is at q: its segment motions are the pose to write.
        motions = None if evaluation is None else evaluation.pose.local
        R, y_scale = rig_module.pose_from_coordinates(rig, q, motions)
    if fresh:
        own_pose.keep(obj, rig.bones)
    rig_module.apply_pose(rig, obj, R[0], y_scale[0])
    _state[key] = State(names, q, frame, samples.objects, samples.bases, evaluation, samples.basis, sampled)
    return q


def _animation_frame(reader, samples, settings):
    """(q (1, n), pose rotations (1, S, 3, 3) or None, the targets aimed at) of this frame solved to
    convergence as a bake solves it (`solving.frame_inputs`, `solving.solve_frames`: the same
    start, targets and solver, so the same answer). A frame asked again with the same samples
    (playback looping, scrubbing back) takes the answer it had: the samples, the settings and the
    rig (a new reader for a new signature) determine it."""
    rig = reader.rig
    poles = getattr(reader.sampler, "poles", None)
    key = (samples.basis.tobytes(), samples.objects.tobytes(), samples.bases.tobytes(),
           None if poles is None else poles.tobytes(), settings)
    frame = float(samples.frames[0])
    known = reader.solved.get(frame)
    if known is not None and known[0] == key:
        return known[1:]
    q0, objects, values = solving.frame_inputs(rig, reader.scene, samples, _start(reader, samples))
    plan = reader.plan
    if plan is not None and two_bone.pose_reason(samples.basis, rig.bones):
        plan = None
    result, rotations = solving.solve_frames(rig, reader.scene, plan, samples, q0, objects, values, settings, poles)
    if len(reader.solved) >= MAX_REMEMBERED:
        reader.solved.clear()
    reader.solved[frame] = (key, result.q, rotations, objects)
    return result.q, rotations, objects


def _simulation_inputs(reader, samples, state):
    """`solving.frame_inputs`, worked out where a simulation frame uses it: the start when there is
    no last solution, targets blended by influence, joint-control values; else (None, the
    targets as sampled, None)."""
    rig = reader.rig
    if state is None or reader.scene.value_tasks or any(d.influence < 1.0 for d in rig.driven):
        return solving.frame_inputs(rig, reader.scene, samples, _start(reader, samples))
    return None, samples.objects, None


def _start(reader, samples):
    """The joint values of the start pose (`coordinates_from_basis`; a copy), kept while the
    sampler hands out the same start pose: it remembers the pose per set of channel values and
    hands it out read-only (rig.Sampler.samples), so the same array means the same pose."""
    basis, q0 = reader.start
    if basis is not samples.basis or basis.flags.writeable:
        q0 = coordinates_from_basis(reader.rig.model, samples.basis)
        reader.start = (samples.basis, q0)
    return q0.copy()


def _simulation_frame(obj, reader, state, samples, inputs, same_inputs, fresh, fps):
    """(q (1, n), the engine's evaluation at q): one simulation step from the last solution when
    the frame advanced by 1..MAX_STEP_FRAMES with the same inputs; otherwise a solve to
    convergence from the last solution, or from the animated pose when there is none."""
    scene = reader.scene
    scale = float(samples.scale[0])
    q0, _, values = inputs
    if state is not None:
        steps = float(samples.frames[0]) - state.frame
        if 0 < steps <= MAX_STEP_FRAMES and same_inputs:
            _, settings = solving.settings_for(obj, fps=fps / steps, scale=scale, rig=reader.rig)
            if _still(state.bases, samples.bases):
                samples.bases = state.bases
            objects = np.concatenate([state.objects, samples.objects])
            bases = np.concatenate([state.bases, samples.bases])
            start = None if fresh else state.evaluation      # a rig read again has a new scene
            return solver.simulate_frame(scene, state.q, objects, bases, settings, start, values)
        _, settings = solving.settings_for(obj, fps=fps, scale=scale, rig=reader.rig)
        res = solver.solve_animation(scene, state.q, samples.objects, samples.bases, settings, values)
        return res.q, res.evaluation
    _, settings = solving.settings_for(obj, fps=fps, scale=scale, rig=reader.rig)
    res = solver.solve_animation(scene, q0, samples.objects, samples.bases, settings, values)
    return res.q, res.evaluation


def _still(before, now):
    """Whether the chains' bases did not move: Blender hands their matrices over in float32, so a
    base that stands still differs by rounding from frame to frame (1e-7); within STILL it is
    taken as not moving, and the simulation feeds no motion of it forward."""
    return bool(np.abs(now - before).max(initial=0.0) <= STILL)


def _live_objects(scene):
    return [ob for ob in scene.objects if ob.type == "ARMATURE" and ob.itasc.live_preview]


def _run(scene, force):
    if guard.standing_aside():
        return
    for obj in _live_objects(scene):
        try:
            solve_now(obj, force=force)
        except (RigError, ValueError) as err:
            obj.itasc.result_message = f"Live preview: {err}"


@persistent
def on_frame_change(scene, depsgraph=None):
    _run(scene, force=True)


@persistent
def on_depsgraph_update(scene, depsgraph=None):
    if guard.standing_aside() or depsgraph is None:
        return
    live = _live_objects(scene)
    if not live:
        return
    moved = any(isinstance(u.id, bpy.types.Object) and u.is_updated_transform for u in depsgraph.updates)
    if not moved:
        return
    for obj in live:
        # Targets moved (or the armature itself, or a parent): solve again if their matrices changed.
        try:
            solve_now(obj, force=False)
        except (RigError, ValueError) as err:
            obj.itasc.result_message = f"Live preview: {err}"


@persistent
def on_render_start(*_):
    guard.set_rendering(True)


@persistent
def on_render_end(*_):
    guard.set_rendering(False)


@persistent
def on_load(*_):
    _state.clear()
    _rigs.clear()


_HANDLERS = (
    ("frame_change_post", on_frame_change),
    ("depsgraph_update_post", on_depsgraph_update),
    ("render_init", on_render_start),
    ("render_complete", on_render_end),
    ("render_cancel", on_render_end),
    ("load_post", on_load),
)


def register():
    for name, fn in _HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if fn not in handlers:
            handlers.append(fn)


def unregister():
    for name, fn in _HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if fn in handlers:
            handlers.remove(fn)
    _state.clear()
    _rigs.clear()

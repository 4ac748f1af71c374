"""The Python API: solve or bake an armature with the iTaSC IK solver from a script.

    from bl_ext.user_default.itasc_ik.itasc_addon import api
    result = api.bake(bpy.data.objects["Armature"], 1, 250)
    result.position_error.max(), result.converged.all()

Both functions read the armature's IK constraints (those chosen in its iTaSC IK settings), hand
the rig over to our solver (its Blender IK constraints are muted, see `handover`), solve, write,
and return a `SolveResult` with numpy arrays: ``frames``, ``position_error`` (frames x constraints,
scene units, NaN where a constraint has no position part), ``rotation_error`` (radians, likewise),
``iterations``, ``converged``, and ``seconds``. The errors and ``converged`` are measured on
Blender's evaluation of what was written, at every written frame (`verify`): a frame is converged
when the engine converged and Blender shows every constraint within the precision (allowing for
its float32 rounding, ``float32_floor``). ``engine`` is the engine's own result (a
`solver.Result`: its ``position_error``, ``rotation_error``, ``converged``, ``q`` (the solved
joint values) and ``sigma_min``); ``verified`` marks the frames measured and ``verify_seconds``
the time that took; ``seconds`` counts from the start of reading the rig. Also ``constraints``
(their names), ``bones`` and ``warnings``; ``method`` says which solver ran:
"analytic two-bone" (the exact closed form, for a two-bone chain under one location-only IK
constraint with nothing else acting on it; see `two_bone`) or "iterative <update law>", and
``fallback_reason`` why the closed form did not apply.

Options (keywords): mode ('ANIMATION' or 'SIMULATION'), method ('PINV', 'DLS', 'SDLS',
'GRADIENT'), precision (scene units), max_iterations, feedback, max_velocity, damping_max,
damping_epsilon, substeps. An option wins over everything; without it a setting comes from the
add-on's iTaSC tab where its override is on, else from the armature's own IK settings, read at
every call (Blender's iTaSC panel: mode, solver, precision, iterations, feedback, velocity,
sub-steps, damping, reiteration, step_min; with Blender's Standard solver the IK constraints'
iterations, the rest from the add-on's tab). See `ik_settings`. The result says what was used:
``settings`` (values), ``settings_from`` (per setting: 'option', 'override', 'armature',
'IK constraints' or 'add-on') and ``notes`` (a rig on Blender's Standard solver, the armature's
settings this solver does not use); a setting Blender's own solver would use and ours does not,
set so that it matters, is also in ``warnings``. Bad input raises `RigError` (a ValueError) with
a message saying what to change; nothing is written then.
"""

from __future__ import annotations

import bpy
import numpy as np

from . import handover, job, keys
from .keypoints import job as keypoints_job
from .retarget import job as retarget_job
from .rig import RigError
from .solving import SolveResult

__all__ = ["RigError", "SolveResult", "bake", "clear_bake", "drive", "fit_keypoints", "release", "retarget",
           "solve_frame"]


def _armature(obj):
    if isinstance(obj, str):
        obj = bpy.data.objects.get(obj)
    if obj is None or getattr(obj, "type", None) != "ARMATURE":
        raise RigError("expected an armature object")
    return obj


def solve_frame(obj, frame=None, *, key=None, **options) -> SolveResult:
    """Solve one frame (default: the current one) and pose the driven bones. With `frame`, the
    scene moves to that frame first (a pose belongs to its frame). `key`: also key the solved
    channels at that frame (None: only when auto-keying is on). Keys elsewhere are untouched."""
    obj = _armature(obj)
    scene = bpy.context.scene
    if frame is None:
        frame = scene.frame_current + scene.frame_subframe
    frame = float(frame)
    if key is None:
        key = bool(scene.tool_settings.use_keyframe_insert_auto)
    if frame != scene.frame_current + scene.frame_subframe:
        scene.frame_set(int(np.floor(frame)), subframe=float(frame - np.floor(frame)))
    return job.prepare(obj, [frame], bake=False, key=key, **options).run()


def bake(obj, frame_start, frame_end, *, step=1, only_selected=False, **options) -> SolveResult:
    """Solve frames frame_start..frame_end (every `step`) and key the driven bones' rotations (in
    each bone's rotation mode; Y scale where IK stretch is on). Keys of those channels in the
    range are replaced; every other key stays exactly as it was. `only_selected`: key selected
    bones only (the whole chain is still solved). In the NLA's tweak mode the keys go into the
    tweaked strip's action at the action times that play at those frames (the strip's start,
    scale and reversal); frames outside the strip's first cycle are refused."""
    obj = _armature(obj)
    if step < 1 or int(step) != step:
        raise RigError(f"step must be a whole number >= 1, not {step!r}")
    if frame_end < frame_start:
        raise RigError(f"frame_end {frame_end} comes before frame_start {frame_start}")
    frames = np.arange(int(frame_start), int(frame_end) + 1, int(step), dtype=float)
    bones = None
    if only_selected:
        bones = selected_bones(obj)
    return job.prepare(obj, frames, bake=True, bones=bones, **options).run()


def retarget(rig, source, frame_start=None, frame_end=None, *, bone_map=None, contacts="auto", **options):
    """Retarget the motion of armature `source` (e.g. from Blender's BVH or FBX import) onto the
    armature `rig` at frames frame_start..frame_end (default: the source's keyed frames), with
    each foot contact held on one world point for its whole span; keys are written as `bake`
    writes them (on a rig Rigify generated: its IK and FK animator controls). `bone_map`
    {role: (source bone, target bone)} (None: made from the bone names, `retarget.bone_maps`);
    `contacts` "auto" (detected from the source), None, or {contact point: [(first, last)
    frame]}. Options: calibration_frame (the frame whose source pose the target's rest pose
    matches; default the first), method ('ik', or 'copy' for the copy-rotation retarget),
    precision (scene units), blend_frames, weights, detection, settings (the engine's),
    rigid_limbs (default True: on a rig Rigify generated, IK Stretch 0 on its limbs' IK chain
    bones so that knees and elbows show as solved; said in the result's ``warnings``), layer
    (default False: keys replace the rig's in the range; True: the rig's active action goes onto
    an NLA track, as Blender's Push Down puts it, and the keys into a new action over it, named
    in the result's ``layer_action``, so bones the map leaves out keep playing their animation). Returns
    a `retarget.job.MeasuredRetarget`, measured on Blender's evaluation of the keys: the usual
    arrays plus ``contacts`` and ``foot_slide`` (per span, scene units). Bad input raises
    `RigError` and writes nothing."""
    return retarget_job.prepare(rig, source, frame_start, frame_end, bone_map=bone_map, contacts=contacts, **options).run()


def fit_keypoints(rig, trial_or_path, *, static=None, keypoint_set=None, bone_map=None, cutoff=6.0, threshold=0.0,
                  frame_start=None, **options):
    """Fit 3-D keypoints (a file `solver.keypoints.read_keypoints` reads: .trc, MediaPipe .json,
    .csv, .npy, .npz; or a `KeypointTrial`) onto the armature `rig` and key it, trial frame i at
    scene frame `frame_start` + i (default: the scene's start). The rig's bones by role come from
    its names and skeleton as the retarget's (on a rig Rigify generated: its ORG- skeleton, keys
    on its controls), or `bone_map` {role: bone}. `static`: a trial of the person standing still
    (file or trial; None: the trial itself) on which each keypoint's place on its bone and one
    uniform scale are calibrated; `keypoint_set` (e.g. "HALPE_26") where the file does not say;
    `cutoff` (Hz, None: no smoothing) and `threshold` (confidence below it counts as missing) as
    the engine's. Options: method ('fit', or 'copy' for the rotation-copy baseline: each bone
    aimed along its two keypoints), static_frames, offset_prior, max_iterations, roles, rate,
    units, up, rigid_limbs (as `retarget`'s), contacts ('auto': the feet held where they stand
    still and above the floor, as the engine's; None: free), floor. Keys are written as `bake` writes them (Clear Bake
    removes them). Returns a `keypoints.job.MeasuredKeypoints` measured on Blender's evaluation of
    the keys: ``error`` per frame and keypoint (scene units, NaN where missing), ``gap_frames``,
    ``gaps``, the engine's own fit as ``engine``. Bad input raises `RigError` and writes nothing."""
    return keypoints_job.prepare(rig, trial_or_path, static=static, keypoint_set=keypoint_set, bone_map=bone_map,
                                 cutoff=cutoff, threshold=threshold, frame_start=frame_start, **options).run()


def clear_bake(obj) -> int:
    """Remove what bakes of this armature wrote; returns the number of channels cleared."""
    return keys.clear_bake(_armature(obj))


def drive(obj):
    """Hand the rig to our solver: its driven IK constraints are muted for Blender's own IK."""
    handover.set_active(_armature(obj), True)


def release(obj):
    """Give the rig back to Blender's IK: every constraint's own mute state is restored."""
    handover.set_active(_armature(obj), False)


def selected_bones(obj):
    """Names of the armature's selected bones."""
    return {pb.name for pb in obj.pose.bones if _selected(obj, pb)}


def _selected(obj, pb):
    select = getattr(pb, "select", None)          # Blender 5.0 keeps selection on pose bones
    if select is None:
        select = obj.data.bones[pb.name].select
    return bool(select)

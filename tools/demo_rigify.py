"""The main job, headless: the rig Rigify generates from its human metarig, all four limbs in IK
with their poles on, baked by our solver beside Blender's own Standard IK, errors and time side
by side.

    .venv/bin/python tools/demo_rigify.py [--frames 250] [--out out] [--zip ZIP] [--python PY]
                                          [--rig generated|metarig|basic_quadruped|cat|...]

What it does (`make demo` runs it after `make build`):

- starts a fresh Blender (``bpy`` as a module, `tools.blender_session`), installs and enables the
  extension zip, enables Blender's bundled Rigify, adds its human metarig and generates the rig
  from it (``pose.rigify_generate``);
- puts every limb in IK (``IK_FK`` 0) with its pole on (``pole_vector``), and keys the controls
  an animator moves on every frame: the hands (``hand_ik.*``) circle in front of the chest, the
  feet (``foot_ik.*``) step in place (back along the floor, forward through the air), left and
  right half a cycle apart, the four pole controls (``*_ik_target.*``) sway a few centimetres
  (the arms' moved out, back and down first, where elbows point with the hands in front of the
  chest); the torso sits a little lower, so knees are bent as a walker's are;
- Blender's own Standard IK first (the solver the generated rig is set to, ``LEGACY``): every
  frame evaluated by Blender with its IK on; for each limb the tail of the bone that carries the
  IK constraint is measured against the head of the bone it aims at (world space), and the plane
  the limb bends in (upper bone and lower bone) is recorded; our extension has not touched the rig;
- then ours through the installed extension's Python API (``api.bake``, the add-on's defaults),
  which keys the chains and mutes Blender's IK constraints (and the drivers of their mute) while
  ours drive the rig; Blender evaluates every frame of the baked keys and the same tails and bend
  planes are measured (float32, as Blender stores poses);
- prints, per solver, the per-frame error (the worst of the four limbs in each frame: median,
  99th percentile, max, frames more than 1 mm off) and the time, and how far each knee's and
  elbow's bend plane is from Standard's (degrees); saves ``<out>/demo.blend`` (our bake, Blender's
  IK muted) and plots the error per frame and the bend-plane angle (``<out>/demo_error.png``).

``--rig metarig`` runs the earlier demo instead: Rigify's metarig itself (not generated), a
position-only IK constraint on each hand and foot (chains of 3 bones) aimed at keyed empties,
ours beside Blender's iTaSC. Its scene (`_build`, `build_keyed`) is also what the long-bake test
and benchmarks use. ``--rig NAME`` for another metarig Rigify ships (basic_human, basic_quadruped,
cat, wolf, horse, bird) runs the same comparison on the rig it generates from it
(tools.rigify_rigs: every limb in IK with its pole on, the controls on circles), every active IK
constraint measured.

``run_in_scene`` is the part that runs inside Blender (the repository root on ``sys.path``);
``run_demo`` runs it in a fresh bpy process and writes the plot on this side.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

if __package__ in (None, ""):              # run as a script: make `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import build_extension  # noqa: E402
from tools.blender_session import EXTENSION_MODULE, ROOT, run_in_blender  # noqa: E402

# (effector bone, chain count): the chain runs from the effector up that many bones.
EFFECTORS = (("hand.L", 3), ("hand.R", 3), ("foot.L", 3), ("foot.R", 3))
OFF = 1e-3                 # "off" means further than 1 mm from the target (scene units are metres)
PRECISION = 1e-7           # what we ask of our solver, in metres (its default is 1e-6)

BEND_MAX = math.radians(150)   # how far knees and elbows may bend from the rest pose
END_STIFFNESS = 0.9         # IK stiffness of hands and feet (0: free, 1: frozen)
# The pose both solvers start every frame from (animation mode): knees softly bent, feet flat, as
# a walker stands; rotations about each bone's X axis (radians). Straight legs would leave a foot
# only its ankle to lift it with: bending a straight knee first moves the ankle back, hardly up.
READY_POSE = {"thigh": -0.2, "shin": 0.4, "foot": -0.2}
HAND_PERIOD, FOOT_PERIOD = 125.0, 62.5     # frames per circle / per step cycle
HAND_RADIUS, STEP_HALF_LENGTH, STEP_HEIGHT = 0.09, 0.12, 0.10


def target_path(name, frame, stance):
    """Where the target of effector `name` is at `frame` (metres, world = armature space here).

    Hands: circles of radius HAND_RADIUS in the frontal plane, centred in front of the chest on the
    hand's side (the metarig faces -Y); the right hand mirrors the left half a circle later. Feet:
    stepping in place around `stance`, where the foot's tail is in the ready pose: back along the
    floor while the foot is down, forward through an arc STEP_HEIGHT high while it is up; the
    right foot half a cycle after the left."""
    side = 1.0 if name.endswith(".L") else -1.0
    if name.startswith("hand"):
        a = 2 * math.pi * (frame - 1) / HAND_PERIOD + (0.0 if side > 0 else math.pi)
        return (side * (0.16 + HAND_RADIUS * math.cos(a)),
                -0.32 + 0.03 * math.sin(a),
                1.28 + HAND_RADIUS * math.sin(a))
    u = 2 * math.pi * (frame - 1) / FOOT_PERIOD + (0.0 if side > 0 else math.pi)
    # y grows (backwards) while cos(u) > 0, the foot down; it comes forward, lifted, while cos(u) < 0.
    return (stance[0],
            stance[1] + STEP_HALF_LENGTH * math.sin(u),
            stance[2] + STEP_HEIGHT * max(0.0, -math.cos(u)))


def _clear_scene(bpy):
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    for data in (bpy.data.meshes, bpy.data.cameras, bpy.data.lights, bpy.data.armatures, bpy.data.actions):
        for block in list(data):
            data.remove(block)


def _metarig_scene(bpy, n_frames):
    """An empty scene of frames 1..n_frames at frame 1 holding Rigify's human metarig (the active
    object, in object mode), Blender's bundled Rigify enabled."""
    _clear_scene(bpy)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, n_frames
    scene.frame_set(1)
    if bpy.ops.preferences.addon_enable(module="rigify") != {"FINISHED"}:
        raise RuntimeError("could not enable Blender's bundled Rigify add-on")
    bpy.ops.object.armature_human_metarig_add()
    bpy.ops.object.mode_set(mode="OBJECT")
    return scene


def _build(bpy, n_frames):
    """The metarig, its four IK constraints and their keyframed targets; returns (scene, rig, targets)."""
    from mathutils import Quaternion

    scene = _metarig_scene(bpy, n_frames)
    rig = bpy.context.active_object
    rig.name = "metarig"

    for side in ("L", "R"):
        for bone, angle in READY_POSE.items():
            rig.pose.bones[f"{bone}.{side}"].rotation_quaternion = Quaternion((1.0, 0.0, 0.0), angle)
    bpy.context.view_layer.update()

    targets = {}
    for bone, chain_count in EFFECTORS:
        stance = tuple(rig.matrix_world @ rig.pose.bones[bone].tail)
        target = bpy.data.objects.new(f"target_{bone}", None)
        target.empty_display_type, target.empty_display_size = "SPHERE", 0.03
        scene.collection.objects.link(target)
        for frame in range(1, n_frames + 1):
            target.location = target_path(bone, frame, stance)
            target.keyframe_insert("location", frame=frame)
        targets[bone] = target
        ik = rig.pose.bones[bone].constraints.new("IK")
        ik.target, ik.chain_count, ik.use_tail = target, chain_count, True
        ik.use_location, ik.use_rotation = True, False
    # The way a rigger sets up limbs for IK: knees and elbows are hinges about their X axis (+X
    # bends them the natural way on this rig; the rest pose is a little bent already), held between
    # the rest pose and BEND_MAX, so never overstretched; hands and feet are stiff, so the
    # knee lifts a foot and the elbow carries a hand rather than the wrist or ankle swivelling.
    for side in ("L", "R"):
        for hinge in (f"forearm.{side}", f"shin.{side}"):
            pb = rig.pose.bones[hinge]
            pb.lock_ik_y = pb.lock_ik_z = True
            pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, 0.0, BEND_MAX
        for end in (f"hand.{side}", f"foot.{side}"):
            pb = rig.pose.bones[end]
            pb.ik_stiffness_x = pb.ik_stiffness_y = pb.ik_stiffness_z = END_STIFFNESS
    rig.pose.ik_solver = "ITASC"            # Blender's own iTaSC, its default settings
    return scene, rig, targets


def build_keyed(bpy, n_frames):
    """The demo's scene with its targets keyed on every frame 1..n_frames along the same paths,
    one foreach_set per F-curve (n_frames keyframe_insert calls per target would take long).
    Returns the scene, the rig and the targets by effector bone."""
    import importlib

    import numpy as np

    keys = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.keys")
    scene, rig, targets = _build(bpy, 2)
    frames = np.arange(1, n_frames + 1, dtype=float)
    for bone, target in targets.items():
        fcurves = sorted(keys.Channels(target).all(), key=lambda fc: fc.array_index)
        first = np.array([fc.keyframe_points[0].co[1] for fc in fcurves])
        stance = tuple(first - np.array(target_path(bone, 1, (0.0, 0.0, 0.0))))
        path = np.array([target_path(bone, f, stance) for f in range(1, n_frames + 1)])
        for fc in fcurves:
            points = fc.keyframe_points
            points.clear()
            points.add(n_frames)
            points.foreach_set("co", np.column_stack([frames, path[:, fc.array_index]]).astype(np.float32).ravel())
            fc.update()
    scene.frame_end = n_frames
    return scene, rig, targets


def _chain_length(rig, bone, chain_count):
    pb, total = rig.pose.bones[bone], 0.0
    for _ in range(chain_count):
        total += pb.bone.length
        pb = pb.parent
    return total


def _measure(bpy, scene, rig, targets, n_frames):
    """Per frame, each effector's tail-to-target distance as Blender evaluates the scene (world
    space); and the seconds that took."""
    from mathutils import Vector

    errors = []
    start = time.perf_counter()
    for frame in range(1, n_frames + 1):
        scene.frame_set(frame)
        dg = bpy.context.evaluated_depsgraph_get()
        rig_eval = rig.evaluated_get(dg)
        row = []
        for bone, _ in EFFECTORS:
            pb = rig_eval.pose.bones[bone]
            tail = rig_eval.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))
            row.append((tail - targets[bone].evaluated_get(dg).matrix_world.translation).length)
        errors.append(row)
    return errors, time.perf_counter() - start


def run_metarig(n_frames=250, out_dir=None, precision=PRECISION):
    """Inside Blender, the extension enabled: build the metarig's scene, measure Blender's iTaSC,
    bake ours, measure it, save ``<out_dir>/demo.blend``. Returns plain data (JSON-able)."""
    import importlib

    import bpy
    import numpy as np

    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    scene, rig, targets = _build(bpy, n_frames)
    params = rig.pose.ik_param
    blender_settings = {"mode": params.mode, "solver": params.solver, "precision": params.precision,
                        "iterations": params.iterations}

    blender_errors, blender_seconds = _measure(bpy, scene, rig, targets, n_frames)

    start = time.perf_counter()
    result = api.bake(rig, 1, n_frames, precision=precision)
    bake_seconds = time.perf_counter() - start
    muted = [c.mute for bone, _ in EFFECTORS for c in rig.pose.bones[bone].constraints if c.type == "IK"]
    ours_errors, ours_eval_seconds = _measure(bpy, scene, rig, targets, n_frames)

    # The API reports its errors per constraint, "bone/constraint": put them in EFFECTORS' order.
    columns = [next(i for i, name in enumerate(result.constraints) if name.split("/")[0] == bone)
               for bone, _ in EFFECTORS]
    scene.frame_set(1)
    return {
        "rig": "metarig",
        "blender_version": bpy.app.version_string,
        "frames": n_frames,
        "effectors": [bone for bone, _ in EFFECTORS],
        "chain_lengths": [_chain_length(rig, bone, count) for bone, count in EFFECTORS],
        "blender": {"errors": blender_errors, "seconds": blender_seconds, "settings": blender_settings},
        "ours": {"errors": ours_errors, "seconds": bake_seconds, "api_seconds": result.seconds,
                 "eval_seconds": ours_eval_seconds,
                 "reported": np.asarray(result.position_error)[:, columns].tolist(),
                 "converged": bool(np.all(result.converged)), "iterations_max": int(np.max(result.iterations)),
                 "method": result.method, "precision": precision, "muted": muted,
                 "warnings": list(result.warnings)},
        "blend": _save(bpy, out_dir),
    }


def _save(bpy, out_dir):
    """Save the scene as ``<out_dir>/demo.blend`` (no demo.blend1 beside it); its path, or ''."""
    if out_dir is None:
        return ""
    saved = str(Path(out_dir) / "demo.blend")
    bpy.context.preferences.filepaths.save_version = 0
    bpy.ops.wm.save_as_mainfile(filepath=saved)
    return saved


# ---- the rig Rigify generates (the default demo) ----------------------------------------------

# Per limb of the generated rig: the bone that carries its IK constraints (the chain's lower bone),
# the bone they aim at (Blender's IK aims at its head), the chain's upper bone, the limb's
# property bone (IK_FK, pole_vector), the control an animator moves and the pole control.
LIMBS = {
    "arm.L": ("MCH-forearm_ik.L", "MCH-upper_arm_ik_target.L", "upper_arm_ik.L", "upper_arm_parent.L",
              "hand_ik.L", "upper_arm_ik_target.L"),
    "arm.R": ("MCH-forearm_ik.R", "MCH-upper_arm_ik_target.R", "upper_arm_ik.R", "upper_arm_parent.R",
              "hand_ik.R", "upper_arm_ik_target.R"),
    "leg.L": ("MCH-shin_ik.L", "MCH-thigh_ik_target.L", "thigh_ik.L", "thigh_parent.L", "foot_ik.L",
              "thigh_ik_target.L"),
    "leg.R": ("MCH-shin_ik.R", "MCH-thigh_ik_target.R", "thigh_ik.R", "thigh_parent.R", "foot_ik.R",
              "thigh_ik_target.R"),
}
CROUCH = 0.08              # how much lower the torso sits than in the rest pose (m): knees bent
# Hands: circles (HAND_RADIUS, HAND_PERIOD) in the frontal plane, their centres this far (m) in
# front of and below the shoulder and this far from the body's middle.
HAND_AHEAD, HAND_BELOW, HAND_SIDE = 0.30, 0.22, 0.20
POLE_SWAY, POLE_PERIOD = 0.05, 100.0       # the pole controls move on circles this wide (m), this slow
ARM_POLE = (0.30, 0.35, -0.35)             # where the arms' poles sway about: from the shoulder, +X outwards


def control_path(limb, frame, rest):
    """Where the control of `limb` has its head at `frame` (armature space, metres), `rest` being
    where it is in the rest pose for the feet and the shoulder (the upper arm's head) for the hands.
    The rig faces -Y. Hands circle (HAND_RADIUS) in the frontal plane in front of the chest, the
    right half a circle after the left; feet step in place around their rest position as in
    `target_path` (STEP_HALF_LENGTH, STEP_HEIGHT), the right half a cycle after the left."""
    side = 1.0 if limb.endswith(".L") else -1.0
    if limb.startswith("arm"):
        a = 2 * math.pi * (frame - 1) / HAND_PERIOD + (0.0 if side > 0 else math.pi)
        return (side * (HAND_SIDE + HAND_RADIUS * math.cos(a)),
                rest[1] - HAND_AHEAD + 0.03 * math.sin(a),
                rest[2] - HAND_BELOW + HAND_RADIUS * math.sin(a))
    return target_path(limb, frame, rest)


def pole_path(limb, frame, rest):
    """Where the pole control of `limb` has its head at `frame`: a circle of radius POLE_SWAY in
    the plane across the body's front (X, Z) about its centre. Legs: the centre is the pole's rest
    position `rest` (in front of the knee). Arms: `rest` is the shoulder, and the centre ARM_POLE
    from it (out, back and down: where elbows point while the hands work in front of the chest;
    Rigify puts the pole behind the elbow of an arm held out sideways, at shoulder height)."""
    side = 1.0 if limb.endswith(".L") else -1.0
    if limb.startswith("arm"):
        rest = (rest[0] + side * ARM_POLE[0], rest[1] + ARM_POLE[1], rest[2] + ARM_POLE[2])
    a = 2 * math.pi * (frame - 1) / POLE_PERIOD + (0.0 if side > 0 else math.pi)
    return (rest[0] + POLE_SWAY * math.cos(a), rest[1], rest[2] + POLE_SWAY * math.sin(a))


def _key_heads(bpy, rig, pb, heads):
    """Key `pb`'s location on frames 1..len(heads) so that its head is at each of `heads`
    (armature space), its rotation and its parents as they are posed now (they are not animated).
    One keyframe_insert per channel, then the keys in bulk (foreach_set)."""
    import importlib

    import numpy as np

    keys = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.keys")
    # The location channels are an affine function of the head in pose space (Blender's
    # convert_space knows the bone's flags, e.g. a location not in the bone's own axes): found
    # from four points.
    pose = pb.matrix.copy()

    def location(head):
        pose.translation = head
        return np.array(rig.convert_space(pose_bone=pb, matrix=pose, from_space="POSE", to_space="LOCAL").translation)

    origin = location((0.0, 0.0, 0.0))
    linear = np.column_stack([location(axis) - origin for axis in ((1.0, 0, 0), (0, 1.0, 0), (0, 0, 1.0))])
    locations = np.asarray(heads, dtype=float) @ linear.T + origin
    pb.keyframe_insert("location", frame=1)
    frames = np.arange(1, len(heads) + 1, dtype=float)
    channels = keys.Channels(rig)
    for index in range(3):
        fc = channels.find(f'pose.bones["{pb.name}"].location', index)
        points = fc.keyframe_points
        points.clear()
        points.add(len(heads))
        points.foreach_set("co", np.column_stack([frames, locations[:, index]]).astype(np.float32).ravel())
        fc.update()


def build_generated(bpy, n_frames):
    """The rig Rigify generates from its human metarig, every limb in IK with its pole on, the
    torso CROUCH lower (keyed), the hand and foot controls on `control_path` and the pole controls
    on `pole_path`, keyed on every frame 1..n_frames. Returns (scene, rig). A session that calls
    this must end with exit_at_once (Blender 4.2 crashes on exit once Rigify was enabled)."""
    from mathutils import Vector

    scene = _metarig_scene(bpy, n_frames)
    if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
        raise RuntimeError("Rigify could not generate its rig")
    rig = bpy.context.view_layer.objects.active
    for *_, props, _, _ in LIMBS.values():
        rig.pose.bones[props]["IK_FK"], rig.pose.bones[props]["pole_vector"] = 0.0, True
    torso = rig.pose.bones["torso"]
    lowered = torso.matrix.copy()
    lowered.translation -= Vector((0.0, 0.0, CROUCH))
    torso.matrix_basis = rig.convert_space(pose_bone=torso, matrix=lowered, from_space="POSE", to_space="LOCAL")
    torso.keyframe_insert("location", frame=1)
    rig.update_tag()
    bpy.context.view_layer.update()
    frames = range(1, n_frames + 1)
    for limb, (_, _, upper, _, control, pole) in LIMBS.items():
        rest = rig.pose.bones[upper if limb.startswith("arm") else control].head.copy()
        _key_heads(bpy, rig, rig.pose.bones[control], [control_path(limb, f, rest) for f in frames])
        rest = rig.pose.bones[upper if limb.startswith("arm") else pole].head.copy()
        _key_heads(bpy, rig, rig.pose.bones[pole], [pole_path(limb, f, rest) for f in frames])
    scene.frame_set(1)
    return scene, rig


def limb_lengths(rig):
    """Each limb's chain length (its two IK bones' rest lengths), in LIMBS' order."""
    return [rig.pose.bones[tip].bone.length + rig.pose.bones[upper].bone.length
            for tip, _, upper, *_ in LIMBS.values()]


def measure_generated(bpy, scene, rig, frames):
    """Blender's evaluation at every frame, per limb (world space): the distance from the IK bone's
    tail to the head of its target bone (``errors``), the unit normal of the plane the limb bends
    in, upper bone x lower bone (``normals``), where the knee or elbow is, the lower bone's head
    (``joints``), and the two bones' lengths against their rest lengths (``scales``, upper and
    lower); and the seconds the evaluations took (frame_set alone, the measuring left out)."""
    import numpy as np

    out = {"errors": [], "normals": [], "joints": [], "scales": []}
    seconds = 0.0
    for frame in frames:
        start = time.perf_counter()
        scene.frame_set(int(frame))
        dg = bpy.context.evaluated_depsgraph_get()
        seconds += time.perf_counter() - start
        ev = rig.evaluated_get(dg)
        world = ev.matrix_world
        rotation = np.array(world.to_3x3())
        row = {key: [] for key in out}
        for tip, target, upper, *_ in LIMBS.values():
            lower, upper = ev.pose.bones[tip], ev.pose.bones[upper]
            row["errors"].append((world @ lower.tail - world @ ev.pose.bones[target].head).length)
            n = rotation @ np.cross(np.array(upper.tail - upper.head), np.array(lower.tail - lower.head))
            row["normals"].append((n / np.linalg.norm(n)).tolist())
            row["joints"].append(list(world @ lower.head))
            row["scales"].append([(b.tail - b.head).length / b.bone.length for b in (upper, lower)])
        for key in out:
            out[key].append(row[key])
    return out, seconds


def plane_degrees(ours, theirs):
    """Per frame and limb, the angle between two bend-plane normals (degrees; a knee bent the other
    way counts as 180)."""
    import numpy as np

    cosine = np.sum(np.asarray(ours) * np.asarray(theirs), axis=-1).clip(-1.0, 1.0)
    return np.degrees(np.arccos(cosine)).tolist()


def run_generated(n_frames=250, out_dir=None):
    """Inside Blender, the extension enabled: generate and animate the rig, measure Blender's own
    Standard IK, bake ours with the add-on's defaults, measure it, save ``<out_dir>/demo.blend``.
    Returns plain data (JSON-able)."""
    import importlib

    import bpy
    import numpy as np

    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    scene, rig = build_generated(bpy, n_frames)
    frames = range(1, n_frames + 1)
    solver = rig.pose.ik_solver
    standard, standard_seconds = measure_generated(bpy, scene, rig, frames)

    start = time.perf_counter()
    result = api.bake(rig, 1, n_frames)
    bake_seconds = time.perf_counter() - start
    ours, ours_eval_seconds = measure_generated(bpy, scene, rig, frames)
    muted = {f"{tip}/{c.name}": bool(c.mute) for tip, *_ in LIMBS.values()
             for c in rig.pose.bones[tip].constraints if c.type == "IK"}
    # The API reports its errors per constraint, "bone/constraint": put them in LIMBS' order.
    columns = [next(i for i, name in enumerate(result.constraints) if name.split("/")[0] == tip)
               for tip, *_ in LIMBS.values()]
    scene.frame_set(1)
    joints = np.linalg.norm(np.asarray(ours["joints"]) - np.asarray(standard["joints"]), axis=-1)
    return {
        "rig": "generated",
        "blender_version": bpy.app.version_string,
        "frames": n_frames,
        "bones": len(rig.pose.bones),
        "effectors": list(LIMBS),
        "chain_lengths": limb_lengths(rig),
        "blender": {"errors": standard["errors"], "seconds": standard_seconds, "solver": solver,
                    "scales": standard["scales"]},
        "ours": {"errors": ours["errors"], "seconds": bake_seconds, "api_seconds": result.seconds,
                 "verify_seconds": result.verify_seconds, "eval_seconds": ours_eval_seconds,
                 "reported": np.asarray(result.position_error)[:, columns].tolist(),
                 "engine": np.asarray(result.engine.position_error)[:, columns].tolist(),
                 "converged": bool(np.all(result.converged)), "iterations_max": int(np.max(result.iterations)),
                 "method": result.method, "constraints": list(result.constraints), "muted": muted,
                 "warnings": list(result.warnings), "scales": ours["scales"]},
        "plane_degrees": plane_degrees(ours["normals"], standard["normals"]),
        "joint_distances": joints.tolist(),
        "blend": _save(bpy, out_dir),
    }


def run_other(metarig, n_frames=250, out_dir=None):
    """Inside Blender, the extension enabled: the rig Rigify generates from another of its
    metarigs (tools.rigify_rigs: limbs in IK with poles, controls on circles), Blender's own IK
    measured first, then our bake with the add-on's defaults, each tail of every active IK
    constraint measured by Blender; saves ``<out_dir>/demo.blend``."""
    import importlib

    import bpy
    import numpy as np

    from tools import rigify_rigs

    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    scene, rig, controls = rigify_rigs.build(bpy, metarig, n_frames)
    frames = range(1, n_frames + 1)
    active = [f"{pb.name}/{c.name}" for pb, c in rigify_rigs.active_ik(rig)]
    start = time.perf_counter()
    for f in frames:
        scene.frame_set(f)
        bpy.context.evaluated_depsgraph_get()
    blender_seconds = time.perf_counter() - start
    blender = rigify_rigs.tail_errors(bpy, scene, rig, frames, active)
    start = time.perf_counter()
    result = api.bake(rig, 1, n_frames)
    seconds = time.perf_counter() - start
    ours = rigify_rigs.tail_errors(bpy, scene, rig, frames, active)
    by = dict(zip(result.constraints, result.solved_by))
    scene.frame_set(1)
    return {
        "rig": metarig, "blender_version": bpy.app.version_string, "frames": n_frames, "bones": len(rig.pose.bones),
        "effectors": active, "stages": [by.get(name, -1) for name in active], "controls": controls,
        "blender": {"errors": blender, "seconds": blender_seconds, "solver": rig.pose.ik_solver},
        "ours": {"errors": ours, "seconds": seconds, "verify_seconds": result.verify_seconds,
                 "converged": int(np.count_nonzero(result.converged)), "method": result.method,
                 "warnings": list(result.warnings),
                 "reported": np.asarray(result.position_error).tolist()},
        "blend": _save(bpy, out_dir),
    }


def run_in_scene(n_frames=250, out_dir=None, rig="generated"):
    """Inside Blender, the extension enabled: the demo on the generated rig, on the metarig, or on
    the rig Rigify generates from another of its metarigs (tools.rigify_rigs.METARIGS)."""
    if rig in ("generated", "human"):
        return run_generated(n_frames, out_dir)
    if rig == "metarig":
        return run_metarig(n_frames, out_dir)
    from tools import rigify_rigs
    if rig in rigify_rigs.METARIGS:
        return run_other(rig, n_frames, out_dir)
    raise ValueError(f"rig must be 'generated', 'metarig' or one of {rigify_rigs.METARIGS}, not {rig!r}")


def statistics(errors):
    """Per-frame error = the worst effector in that frame: median, 99th percentile, max, frames off."""
    import numpy as np

    worst = np.max(np.asarray(errors, dtype=float), axis=1)
    return {"median": float(np.median(worst)), "p99": float(np.percentile(worst, 99)),
            "max": float(worst.max()), "off": int(np.count_nonzero(worst > OFF)), "frames": len(worst)}


def table(data):
    """The side-by-side table (a string)."""
    if data.get("rig") == "generated":
        return _table_generated(data)
    return _table_metarig(data) if data.get("rig", "metarig") == "metarig" else _table_other(data)


def _table_other(data):
    import numpy as np

    ours, blender = data["ours"], data["blender"]
    n = data["frames"]
    stages = data["stages"]
    rows = [(f"ours (api.bake, {ours['method']}, the add-on's defaults)", statistics(ours["errors"]), ours["seconds"]),
            (f"Blender's own IK ({blender['solver']}, the rig's own)", statistics(blender["errors"]),
             blender["seconds"])]
    worst = np.asarray(ours["errors"]).max(axis=0)
    lines = [
        (f"the rig Rigify generates from its {data['rig']} metarig ({data['bones']} bones), Blender "
         f"{data['blender_version']}: limbs in IK, poles on, {len(data['controls'])} controls on circles, {n} frames"),
        (f"{len(stages)} active IK constraints: {sum(s >= 0 for s in stages)} driven by ours in "
         f"{max(stages) + 1} stage(s), {sum(s < 0 for s in stages)} left to Blender's IK"),
        "error per frame = the worst IK tail's distance to its target, measured by Blender (m)",
        *_row_lines(rows, n),
        "per constraint, ours (stage: worst tail, m): " + ", ".join(
            f"{name} ({s}: {e:.1e})" for name, s, e in zip(data["effectors"], stages, worst)),
        (f"ours: time = the whole bake, verify {ours['verify_seconds']:.3f} s of it; frames converged (every "
         f"active IK constraint on target): {ours['converged']}/{n}"),
        "Blender: time = evaluating every frame with its IK on (its IK runs in the evaluation)",
    ] + [f"warning: {w}" for w in ours["warnings"]]
    return "\n".join(lines)


def _row_lines(rows, n):
    width = max(len(label) for label, _, _ in rows)
    lines = [f"{'solver':{width}}  {'median':>9} {'p99':>9} {'max':>9} {'>1 mm':>6} {'seconds':>8} {'ms/frame':>8}"]
    for label, st, seconds in rows:
        lines.append(f"{label:{width}}  {st['median']:9.2e} {st['p99']:9.2e} {st['max']:9.2e} {st['off']:6d} "
                     f"{seconds:8.3f} {1000 * seconds / n:8.2f}")
    return lines


def _table_generated(data):
    import numpy as np

    ours, blender = data["ours"], data["blender"]
    n = data["frames"]
    lengths = ", ".join(f"{limb} {length:.3f} m" for limb, length in zip(data["effectors"], data["chain_lengths"]))
    rows = [(f"ours (api.bake, {ours['method']}, the add-on's defaults)", statistics(ours["errors"]), ours["seconds"]),
            (f"Blender Standard IK ({blender['solver']}, the rig's own)", statistics(blender["errors"]),
             blender["seconds"])]
    degrees = np.asarray(data["plane_degrees"])
    worst = degrees.max(axis=1)
    per_limb = ", ".join(f"{limb} {d:.3f}" for limb, d in zip(data["effectors"], degrees.max(axis=0)))
    joints = np.asarray(data["joint_distances"]).max(axis=1)
    ours_scales, their_scales = np.asarray(ours["scales"]), np.asarray(blender["scales"])
    lines = [
        (f"Rigify's generated rig ({data['bones']} bones), Blender {data['blender_version']}: all four limbs in "
         f"IK, poles on, {n} frames"),
        (f"hands circle in front of the chest, feet step, pole controls sway {100 * POLE_SWAY:.0f} cm; "
         f"chains of 2 bones: {lengths}"),
        "error per frame = the worst of the four IK tails' distances to their targets, measured by Blender (m)",
        *_row_lines(rows, n),
        (f"bend planes of knees and elbows, ours against Standard's (deg, per frame the worst limb): median "
         f"{np.median(worst):.3f}, p99 {np.percentile(worst, 99):.3f}, max {worst.max():.3f}; max per limb: "
         f"{per_limb}"),
        (f"knees and elbows, ours against Standard's (m, per frame the worst limb): median "
         f"{np.median(joints):.3f}, max {joints.max():.3f}; chain bones' lengths over their rest lengths: ours "
         f"{ours_scales.min():.3f}-{ours_scales.max():.3f}, Standard {their_scales.min():.3f}-"
         f"{their_scales.max():.3f}"),
        (f"ours: time = the whole bake (reading the targets, solving, writing keys, then Blender's evaluation of "
         f"every frame written: {ours['verify_seconds']:.3f} s of it); all converged: {ours['converged']}; "
         f"largest error the engine reports {_max(ours['engine']):.2e} m"),
        "Standard: time = evaluating every frame with its IK on (its IK runs in the evaluation)",
    ]
    return "\n".join(lines)


def _table_metarig(data):
    ours, blender = data["ours"], data["blender"]
    n = data["frames"]
    s = blender["settings"]
    lengths = ", ".join(f"{b} {length:.3f} m" for b, length in zip(data["effectors"], data["chain_lengths"]))
    rows = [
        (f"ours (api.bake, {ours['method']}, precision {ours['precision']:g} m)", statistics(ours["errors"]),
         ours["seconds"]),
        (f"Blender iTaSC ({s['mode'].lower()}, {s['solver']}, precision {s['precision']:g}, {s['iterations']} it.)",
         statistics(blender["errors"]), blender["seconds"]),
    ]
    lines = [
        f"Rigify human metarig, Blender {data['blender_version']}: hands and feet on moving targets, {n} frames",
        f"chains of 3 bones: {lengths}",
        "error per frame = the worst of the four tails' distances to their targets, measured by Blender (m)",
        *_row_lines(rows, n),
        (f"ours: time = the whole bake (reading targets, solving, writing keys); all converged: "
         f"{ours['converged']}; largest error the solver reports {_max(ours['reported']):.2e} m"),
        "Blender: time = evaluating every frame with its iTaSC on (its IK runs in the evaluation)",
    ]
    return "\n".join(lines)


def _max(rows):
    return max(max(row) for row in rows)


def plot(data, path):
    """Error per frame (the worst limb), both solvers, log scale; on the generated rig also, per
    frame and limb, the angle between our bend plane and Standard's and the distance between our
    knee or elbow and Standard's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    generated = data.get("rig") == "generated"
    frames = np.arange(1, data["frames"] + 1)
    floor = 1e-10                          # exact zeros would vanish from a log axis
    if generated:
        fig, (ax, bend, joint) = plt.subplots(3, 1, figsize=(9, 8.5), dpi=120, sharex=True,
                                              gridspec_kw={"height_ratios": [2.2, 1, 1]})
        theirs = f"Blender's Standard IK ({data['blender']['solver']})"
        what = "worst IK tail to its target (m)"
        title = (f"Rigify's generated rig, all limbs in IK, poles on, controls animated "
                 f"(Blender {data['blender_version']})")
    elif data.get("rig", "metarig") == "metarig":
        fig, ax = plt.subplots(figsize=(9, 4.5), dpi=120)
        theirs, what = "Blender's iTaSC (defaults)", "worst hand/foot tail to target (m)"
        title = f"Rigify human metarig, hands and feet on moving targets (Blender {data['blender_version']})"
    else:
        fig, ax = plt.subplots(figsize=(9, 4.5), dpi=120)
        theirs, what = f"Blender's own IK ({data['blender']['solver']})", "worst IK tail to its target (m)"
        title = (f"The rig Rigify generates from its {data['rig']} metarig, limbs in IK, poles on "
                 f"(Blender {data['blender_version']})")
    for key, label, color in (("blender", theirs, "tab:orange"), ("ours", "ours (itasc_ik)", "tab:blue")):
        worst = np.maximum(np.max(np.asarray(data[key]["errors"]), axis=1), floor)
        st = statistics(data[key]["errors"])
        ax.plot(frames, worst, color=color, lw=1.4,
                label=f"{label}: median {st['median']:.1e} m, max {st['max']:.1e} m, "
                      f"{st['off']} frames > 1 mm, {data[key]['seconds']:.2f} s")
    ax.axhline(OFF, color="0.4", ls="--", lw=1)
    ax.text(frames[0], OFF * 1.3, "1 mm", color="0.3", fontsize=8)
    if generated or "stages" in data:
        ax.axhline(1e-5, color="0.4", ls=":", lw=1)
        ax.text(frames[0], 1.3e-5, "1e-5 m", color="0.3", fontsize=8)
    else:
        tolerance = 1e-6 * min(data["chain_lengths"])
        ax.axhline(tolerance, color="0.4", ls=":", lw=1)
        ax.text(frames[0], tolerance * 1.3, "1e-6 × arm chain length", color="0.3", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(bottom=1e-8)
    ax.text(frames[0], 1.6e-8, "Blender measures in float32: about 1e-7 m at these coordinates is its rounding",
            color="0.3", fontsize=8)
    ax.set_xlim(frames[0], frames[-1])
    ax.set_ylabel(what)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="center right", fontsize=8, framealpha=0.9)
    if generated:
        degrees = np.asarray(data["plane_degrees"])
        for limb, column in zip(data["effectors"], degrees.T):
            bend.plot(frames, column, lw=1.1, label=limb)
        bend.axhline(1.0, color="0.4", ls="--", lw=1)
        bend.set_ylabel("bend plane, ours vs\nStandard's (deg)")
        bend.set_ylim(0.0, max(1.2, 1.1 * float(degrees.max())))
        bend.grid(True, alpha=0.3)
        bend.legend(loc="upper right", fontsize=8, ncol=4, framealpha=0.9)
        distances = 100 * np.asarray(data["joint_distances"])
        for limb, column in zip(data["effectors"], distances.T):
            joint.plot(frames, column, lw=1.1, label=limb)
        joint.set_ylabel("knee/elbow, ours vs\nStandard's (cm)")
        joint.set_ylim(bottom=0.0, top=max(1.0, 1.15 * float(distances.max())))
        joint.grid(True, alpha=0.3)
        joint.legend(loc="lower right", fontsize=8, ncol=4, framealpha=0.9)
        ax = joint
    ax.set_xlabel("frame")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def run_demo(n_frames=250, out_dir=ROOT / "out", extension_zip=None, python=None, rig="generated"):
    """Run the demo (`rig`: "generated" or "metarig") in a fresh bpy process (``python``: an
    interpreter with bpy; default this one), write ``demo.blend`` and ``demo_error.png`` into
    `out_dir`; return the data and the table."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if extension_zip is None:                  # the sources as they are now, where `make build` puts them
        extension_zip = build_extension.write_zip(ROOT / "dist")
    snippet = (f"from tools.demo_rigify import run_in_scene\n"
               f"result = run_in_scene({int(n_frames)!r}, {str(out_dir)!r}, {rig!r})\n")
    # exit_at_once: Blender 4.2 crashes on exit after Rigify was enabled (see run_in_blender).
    data = run_in_blender(snippet, extension_zip=extension_zip, python=python, sys_path=[ROOT],
                          exit_at_once=True)
    data["plot"] = str(plot(data, out_dir / "demo_error.png"))
    data["table"] = table(data)
    return data


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--out", type=Path, default=ROOT / "out", help="where demo.blend and demo_error.png go")
    parser.add_argument("--zip", type=Path, default=None,
                        help="the extension zip to install (default: build dist/<id>-<version>.zip from the sources)")
    parser.add_argument("--python", default=None, help="interpreter with bpy for the Blender side")
    parser.add_argument("--rig", default="generated",
                        help="the rig Rigify generates from its human metarig (generated, the default), that "
                             "metarig itself with IK constraints added (metarig), or the rig it generates from "
                             "another of its metarigs: basic_human, basic_quadruped, cat, wolf, horse, bird")
    args = parser.parse_args(argv)
    data = run_demo(args.frames, args.out, args.zip, args.python, args.rig)
    print(data["table"])
    print(f"wrote {data['blend']} and {data['plot']}")
    return data


if __name__ == "__main__":
    main()

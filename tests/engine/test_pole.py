"""The pole task (solver/tasks/pole.py): its angle against independent computations, its singular
configurations, solves that reach a target with the bend plane on the pole, and comparisons with
Blender's own IK solvers."""

import numpy as np
import pytest

from solver import (Bone, CopyPose, Pole, Scene, Settings, forward_kinematics, model_from_bones, on_object,
                    on_segment, solve_animation, solve_simulation)
from solver.examples import straight_chain
from solver.model import Model, Segment
from solver.tasks import Endpoint
from solver.rotations import exp_map, log_map

ANGLES = (0.0, np.pi / 2, -np.pi / 2)


def wrap(angle):
    """Into (-pi, pi]."""
    return np.pi - (np.pi - np.asarray(angle)) % (2 * np.pi)


def poses(points, rotations=None):
    """Object poses (F, K, 4, 4) at points (F, K, 3), rotations (F, K, 3, 3) or the identity."""
    points = np.asarray(points, float)
    T = np.broadcast_to(np.eye(4), points.shape[:-1] + (4, 4)).copy()
    T[..., :3, 3] = points
    if rotations is not None:
        T[..., :3, :3] = rotations
    return T


def objects_scene(pole_angle, effector=1):
    """A pole task on objects, root 0, target 1, pole 2 and the effector `effector` (by default on
    the target), on a model that does not move."""
    model = Model([Segment("still", -1, np.eye(4), (), 1.0)])
    task = Pole(on_object(0), on_object(effector), on_object(1), on_object(2), pole_angle=pole_angle)
    return Scene(model, [task], n_objects=max(3, effector + 1))


def bone_frame(n_frames):
    """A bone's rotation for a bone pointing along +Z, roll 0, as Blender has it: X = +x, Y = +z, Z = -y."""
    return np.broadcast_to(np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]]), (n_frames, 3, 3))


@pytest.mark.parametrize("pole_angle", ANGLES)
def test_angle_of_a_bone_along_the_axis(pole_angle):
    """Root bone along +Z, target straight above, pole at azimuth phi: "up" = X cos a + Z sin a lies
    at azimuth -a, so theta = -a - phi."""
    F = 64
    phi = np.linspace(-np.pi, np.pi, F, endpoint=False) + 0.01
    pole = np.stack([3 * np.cos(phi), 3 * np.sin(phi), np.linspace(-2, 4, F)], -1)
    points = np.stack([np.zeros((F, 3)), np.tile([0.0, 0.0, 2.0], (F, 1)), pole], 1)
    rotations = np.stack([bone_frame(F), np.tile(np.eye(3), (F, 1, 1)), np.tile(np.eye(3), (F, 1, 1))], 1)
    ev = objects_scene(pole_angle).evaluate(np.zeros((F, 0)), poses(points, rotations), jacobians=False)
    np.testing.assert_allclose(wrap(ev.y[:, 0] - wrap(-pole_angle - phi)), 0.0, atol=1e-12)
    np.testing.assert_allclose(ev.rotation_error[:, 0], np.abs(ev.y[:, 0]))
    assert np.isnan(ev.position_error).all() and (ev.task_weight == 1.0).all() and (ev.yd == 0).all()


@pytest.mark.parametrize("pole_angle", ANGLES + (0.4, -2.5))
def test_angle_of_a_tilted_bone_in_the_axis_frame(pole_angle):
    """Random root frames, targets and poles: theta is the polar angle of "up" minus that of the
    pole, both read in an orthonormal frame (e1, e2, u) built from the axis u."""
    rng = np.random.default_rng(1)
    F = 200
    R = exp_map(rng.normal(size=(F, 3)) * 2)
    points = rng.normal(size=(F, 3, 3)) * 2
    rotations = np.stack([R, np.tile(np.eye(3), (F, 1, 1)), np.tile(np.eye(3), (F, 1, 1))], 1)
    ev = objects_scene(pole_angle).evaluate(np.zeros((F, 0)), poses(points, rotations), jacobians=False)
    up = R[:, :, 0] * np.cos(pole_angle) + R[:, :, 2] * np.sin(pole_angle)
    u = points[:, 1] - points[:, 0]
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    e1 = np.cross(u, [0.3, -0.5, 0.8])
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    e2 = np.cross(u, e1)
    polar = lambda v: np.arctan2((v * e2).sum(1), (v * e1).sum(1))  # noqa: E731
    expected = wrap(polar(up) - polar(points[:, 2] - points[:, 0]))
    np.testing.assert_allclose(wrap(ev.y[:, 0] - expected), 0.0, atol=1e-9)


def look_at(direction, up):
    """Blender's look-at rotation, rows x = unit(direction x up), y = x x direction, z = -direction."""
    x = np.cross(direction, up)
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return np.stack([x, np.cross(x, direction), -direction], axis=-2)


@pytest.mark.parametrize("pole_angle", ANGLES + (1.1,))
def test_angle_is_what_blenders_pole_rotation_turns_about_the_target_line(pole_angle):
    """Effector off the target: Blender turns the chain by polemat^T mat (look-at frames of the
    root->effector line with "up", and of the root->target line with the pole). Split into a turn
    about the root->target line u after one about an axis across u (swing-twist, by quaternion),
    that twist is -theta."""
    rng = np.random.default_rng(4)
    F = 300
    R = exp_map(rng.normal(size=(F, 3)) * 2)
    points = rng.normal(size=(F, 4, 3)) * 2                 # root, target, pole, effector
    rotations = np.concatenate([R[:, None], np.tile(np.eye(3), (F, 3, 1, 1))], 1)
    ev = objects_scene(pole_angle, effector=3).evaluate(np.zeros((F, 0)), poses(points, rotations), jacobians=False)
    unit = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)  # noqa: E731
    direction, u = unit(points[:, 3] - points[:, 0]), unit(points[:, 1] - points[:, 0])
    up = R[:, :, 0] * np.cos(pole_angle) + R[:, :, 2] * np.sin(pole_angle)
    turn = look_at(u, points[:, 2] - points[:, 0]).swapaxes(1, 2) @ look_at(direction, up)
    np.testing.assert_allclose(turn @ direction[..., None], u[..., None], atol=1e-9)
    rotvec = log_map(turn)
    angle = np.linalg.norm(rotvec, axis=1)
    half_sin = np.sin(angle / 2)[:, None] * rotvec / np.maximum(angle, 1e-300)[:, None]
    twist = 2 * np.arctan2((half_sin * u).sum(1), np.cos(angle / 2))
    np.testing.assert_allclose(wrap(ev.y[:, 0] + twist), 0.0, atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_a_and_b_with_endpoints_on_bones_of_two_armatures(seed):
    """The conformance check of test_tasks.py with the effector on the target (Q = I), the pole on a
    bone of the other armature and the root's frame turned by an offset."""
    from tests.engine.test_tasks import check_scene
    from tests.random_models import random_transform, random_tree

    rng = np.random.default_rng(40 + seed)
    model = random_tree(rng, 8, n_armatures=2)
    tip = on_segment(6, rng.normal(size=3))
    root = Endpoint(segment=4, offset=random_transform(rng))
    task = Pole(root, tip, tip, on_segment(7, rng.normal(size=3)), pole_angle=rng.uniform(-3, 3))
    check_scene(Scene(model, [task]), rng)


def test_singular_configurations_ask_nothing_and_stay_finite():
    """The target at the root, the pole on the axis, "up" along the axis, the effector straight away
    from the target or at the root: weight 0, y = 0, zero rows of A and B, error 0; a regular frame
    beside them is unaffected."""
    F = 6
    points = np.zeros((F, 4, 3))                           # root, target, pole, effector
    points[:, 1] = points[:, 3] = [0.0, 0.0, 2.0]
    points[:, 2] = [1.0, 0.5, 1.0]
    points[0, 1] = points[0, 3] = 0.0                      # target (and effector) at the root
    points[1, 2] = [0.0, 0.0, 5.0]                         # pole on the axis
    points[2, 1] = points[2, 3] = [0.0, 2.0, 0.0]          # the axis along the root bone's -Z = "up" at +90 deg
    points[3, 3] = [0.0, 0.0, -1.0]                        # the effector straight away from the target
    points[4, 3] = 0.0                                     # the effector at the root
    rotations = np.concatenate([bone_frame(F)[:, None], np.tile(np.eye(3), (F, 3, 1, 1))], 1)
    scene = objects_scene(np.pi / 2, effector=3)
    ev = scene.evaluate(np.zeros((F, 0)), poses(points, rotations))
    for array in (ev.y, ev.task_weight, ev.A, ev.B, ev.rotation_error):
        assert np.isfinite(array).all()
    np.testing.assert_array_equal(ev.task_weight[:, 0], [0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(ev.y[:5], 0.0)
    np.testing.assert_array_equal(ev.B[:5], 0.0)
    np.testing.assert_array_equal(ev.rotation_error[:5], 0.0)
    assert np.abs(ev.B[5]).max() > 0.1


def test_a_missing_pole_leaves_the_task_out_of_its_frame():
    scene = objects_scene(0.0)
    points = np.tile([[0.0, 0.0, 0.0], [0.0, 0.0, 2.0], [1.0, 0.0, 1.0]], (2, 1, 1))
    objects = poses(points)
    objects[1, 2] = np.nan
    ev = scene.evaluate(np.zeros((2, 0)), objects)
    np.testing.assert_array_equal(ev.task_weight[:, 0], [1.0, 0.0])
    assert np.isfinite(ev.rotation_error[0]).all() and np.isnan(ev.rotation_error[1]).all()


def test_bad_settings_are_rejected_with_names():
    with pytest.raises(ValueError, match="knee"):
        Pole(on_segment(0), on_segment(1), on_object(0), on_object(1), weight=-1.0, name="knee")
    with pytest.raises(ValueError, match="pole_angle"):
        Pole(on_segment(0), on_segment(1), on_object(0), on_object(1), pole_angle=float("nan"))


# Solves -----------------------------------------------------------------------------------------

# The task measures "up" across the root->effector line, the checks across the root->target line:
# they differ by the tail's miss over the distance, so the solves stop well inside 1e-6.
PRECISE = Settings(precision=1e-9)


def hinge_leg():
    """Two bones along +Z: the first free (sphere joint), the second bending about its X axis only."""
    bones = straight_chain(2)
    bones[1] = Bone(bones[1].name, bones[1].matrix, bones[1].length, bones[1].parent, lock=(False, True, True))
    return bones


def pole_scene(bones, pole_angle):
    """Object 0 the target of the last bone's tail, object 1 the pole of the chain rooted at bone 0."""
    model = model_from_bones(bones)
    last = len(model.segments) - 1
    tip = on_segment(last, (0.0, model.length[last], 0.0))
    reach = CopyPose(tip, on_object(0), name="reach")
    pole = Pole(on_segment(0), tip, on_object(0), on_object(1), pole_angle=pole_angle, name="pole")
    return Scene(model, [reach, pole], n_objects=2)


def measured(scene, q, objects, pole_angle):
    """Independently of the task: the tail, the elbow (bone 1's head), and the angle between the
    root bone's "up" and the pole, both made perpendicular to the root->target line."""
    frames = forward_kinematics(scene.model, q).frames
    last = len(scene.model.segments) - 1
    tail = frames[:, last, :3, 3] + frames[:, last, :3, 1] * scene.model.length[last]
    root, elbow = frames[:, 0, :3, 3], frames[:, 1, :3, 3]
    u = objects[:, 0, :3, 3] - root
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    across = lambda v: v - (v * u).sum(1, keepdims=True) * u  # noqa: E731
    up = frames[:, 0, :3, 0] * np.cos(pole_angle) + frames[:, 0, :3, 2] * np.sin(pole_angle)
    a, b = across(up), across(objects[:, 1, :3, 3] - root)
    angle = np.arctan2(np.linalg.norm(np.cross(a, b), axis=1), (a * b).sum(1))
    return tail, elbow, angle


def random_targets_and_poles(rng, n, reach, inner=0.3):
    """Targets at distances inner..0.9 reach from the origin, poles away from the origin->target
    line (at least 0.3 rad off it)."""
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    target = direction * rng.uniform(inner, 0.9, (n, 1)) * reach
    pole = rng.normal(size=(n, 3)) * reach
    off = np.linalg.norm(np.cross(pole, direction), axis=1) / np.linalg.norm(pole, axis=1)
    pole = np.where((off > np.sin(0.3))[:, None], pole, pole + 2.0 * reach * np.cross(direction, [0.6, 0.0, 0.8]))
    return poses(np.stack([target, pole], 1))


@pytest.mark.parametrize("pole_angle", ANGLES)
def test_two_bone_hinge_leg_reaches_with_its_bend_plane_on_the_pole(pole_angle):
    scene = pole_scene(hinge_leg(), pole_angle)
    objects = random_targets_and_poles(np.random.default_rng(20), 100, 2.0)
    result = solve_animation(scene, scene.model.neutral(100), objects, settings=PRECISE)
    assert result.converged.all()
    tail, elbow, angle = measured(scene, result.q, objects, pole_angle)
    assert np.linalg.norm(tail - objects[:, 0, :3, 3], axis=1).max() <= 1e-6
    assert angle.max() <= 1e-6
    # The elbow bends about the first bone's X axis, so the bend plane (root, elbow, tail) holds the
    # first bone's Z axis: at -90 / +90 degrees it is the plane through the axis and the pole.
    if pole_angle != 0.0:
        normal = np.cross(elbow, tail)
        normal /= np.linalg.norm(normal, axis=1, keepdims=True)
        p = objects[:, 1, :3, 3]
        assert np.abs(np.arcsin((normal * p).sum(1) / np.linalg.norm(p, axis=1))).max() <= 1e-6
    assert result.rotation_error[:, 1].max() <= 1e-9 and np.isnan(result.position_error[:, 1]).all()


@pytest.mark.parametrize("pole_angle", ANGLES)
def test_five_bone_chain_reaches_with_its_root_facing_the_pole(pole_angle):
    scene = pole_scene(straight_chain(5), pole_angle)
    objects = random_targets_and_poles(np.random.default_rng(21), 100, 5.0)
    result = solve_animation(scene, scene.model.neutral(100), objects, settings=PRECISE)
    assert result.converged.all()
    tail, _, angle = measured(scene, result.q, objects, pole_angle)
    assert np.linalg.norm(tail - objects[:, 0, :3, 3], axis=1).max() <= 1e-6
    assert angle.max() <= 1e-6


@pytest.mark.parametrize("bones", ["hinge leg", "five bones"])
def test_simulation_tracks_a_moving_target_and_pole(bones):
    """The target on a loop inside the reach, the pole circling the chain: after the first second
    the bend plane follows the pole within a few hundredths of a radian."""
    chain, reach = (hinge_leg(), 2.0) if bones == "hinge leg" else (straight_chain(5), 5.0)
    scene = pole_scene(chain, -np.pi / 2)
    F, fps = 120, 24.0
    t = np.arange(F) / fps
    target = np.stack([0.3 * np.sin(1.3 * t), 0.2 * np.cos(0.9 * t), 0.6 + 0.1 * np.sin(2.1 * t)], -1) * reach
    pole = np.stack([np.cos(0.8 * t), np.sin(0.8 * t), 0.3 + 0 * t], -1) * reach
    objects = poses(np.stack([target, pole], 1))
    result = solve_simulation(scene, scene.model.neutral(1), objects, settings=Settings(fps=fps))
    assert np.isfinite(result.q).all()
    tail, _, angle = measured(scene, result.q, objects, -np.pi / 2)
    settled = slice(int(fps), None)
    assert np.linalg.norm(tail - target, axis=1)[settled].max() <= 0.02 * reach
    assert angle[settled].max() <= 0.05 and result.rotation_error[settled, 1].max() <= 0.05


# Blender's own IK -------------------------------------------------------------------------------

# Inside Blender: one armature per pole angle, a leg of `bones` (the second bending about its X axis
# only) under an IK constraint with a target and a pole target keyed at every frame; each frame
# evaluated `evaluations` times; the world pose matrices of both bones and the tail per frame.
BLENDER_POLE_CHAINS = '''
import bpy

for ob in list(bpy.data.objects):
    bpy.data.objects.remove(ob)
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, len(targets)
rigs = []
for k, angle in enumerate(pole_angles):
    arm = bpy.data.armatures.new(f"leg{k}")
    rig = bpy.data.objects.new(f"leg{k}", arm)
    scene.collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    parent = None
    for i, (head, tail) in enumerate(bones):
        bone = arm.edit_bones.new(f"b{i}")
        bone.head, bone.tail, bone.roll = head, tail, 0.0
        bone.parent, bone.use_connect = parent, parent is not None
        parent = bone
    bpy.ops.object.mode_set(mode="OBJECT")
    empties = []
    for what, path in (("target", targets), ("pole", poles)):
        empty = bpy.data.objects.new(f"leg{k}_{what}", None)
        scene.collection.objects.link(empty)
        for frame, xyz in enumerate(path, start=1):
            empty.location = xyz
            empty.keyframe_insert("location", frame=frame)
        empties.append(empty)
    pb = rig.pose.bones[-1]
    pb.lock_ik_y = pb.lock_ik_z = True
    ik = pb.constraints.new("IK")
    ik.target, ik.pole_target, ik.pole_angle = empties[0], empties[1], angle
    ik.chain_count, ik.use_tail = len(bones), True
    rig.pose.ik_solver = ik_solver
    rigs.append(rig)

result = {"rest": [list(map(list, b.matrix_local)) for b in rigs[0].data.bones], "poses": []}
for rig in rigs:
    frames = []
    for frame in range(1, len(targets) + 1):
        for _ in range(evaluations):
            scene.frame_set(frame)
        pose = [list(map(list, rig.matrix_world @ pb.matrix)) for pb in rig.pose.bones]
        frames.append({"bones": pose, "tail": list(rig.matrix_world @ rig.pose.bones[-1].tail)})
    result["poses"].append(frames)
'''


@pytest.mark.blender
@pytest.mark.parametrize("ik_solver", ["LEGACY", "ITASC"])
def test_bend_plane_matches_blenders_ik(ik_solver):
    """A two-bone leg (free hip, knee bending about X), slightly bent at rest, reaching for targets
    with a pole at pole angles 0, 90, -90 degrees, in Blender's Standard IK (LEGACY) and iTaSC
    (animation mode). Blender's poses meet the task's condition (theta = 0), and our bend plane
    (through hip, knee and foot), each frame solved from rest, is within 1 degree of Blender's.

    iTaSC turns the chain onto the pole from the chain as it was at its previous evaluation: a frame
    evaluated once after another is off by up to ~130 degrees here, and exact when evaluated again;
    so each frame is evaluated twice. Both knee sides meet the target and the pole; Blender keeps
    the rest pose's side (it turns the chain onto the pole before it bends it), our iterations from
    rest may fold through to the other side on a long way round, as they do without a pole (one
    frame here)."""
    from tools.blender_session import run_in_blender

    rng = np.random.default_rng(9)
    F = 12
    bones = [((0.0, 0.0, 0.0), (0.0, 0.0, 1.0)), ((0.0, 0.0, 1.0), (0.0, 0.15, 1.8))]
    direction = rng.normal(size=(F, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    targets = direction * rng.uniform(0.8, 1.5, (F, 1))
    poles = random_targets_and_poles(rng, F, 2.0)[:, 1, :3, 3] + targets
    evaluations = 2 if ik_solver == "ITASC" else 1
    snippet = (f"bones, pole_angles, ik_solver = {bones!r}, {list(ANGLES)!r}, {ik_solver!r}\n"
               f"targets, poles, evaluations = {targets.tolist()!r}, {poles.tolist()!r}, {evaluations}\n"
               + BLENDER_POLE_CHAINS)
    blender = run_in_blender(snippet)

    rest = np.array(blender["rest"])
    chain = [Bone("b0", rest[0], 1.0), Bone("b1", rest[1], float(np.linalg.norm(np.subtract(*bones[1]))), "b0",
                                             lock=(False, True, True))]
    objects = poses(np.stack([targets, poles], 1))
    normal = lambda root, knee, foot: np.cross(knee - root, foot - root)  # noqa: E731
    for angle, theirs in zip(ANGLES, blender["poses"]):
        pose = np.array([f["bones"] for f in theirs])
        their_tail = np.array([f["tail"] for f in theirs])
        assert np.linalg.norm(their_tail - targets, axis=1).max() <= 2e-3         # Blender reached them too
        task = Pole(on_object(0), on_object(1), on_object(2), on_object(3), pole_angle=angle)
        their_theta = task.geometry(pose[:, 0], poses(their_tail), objects[:, 0], objects[:, 1])["theta"]
        assert np.abs(their_theta).max() <= 1e-4

        scene = pole_scene(chain, angle)
        result = solve_animation(scene, scene.model.neutral(F), objects, settings=PRECISE)
        assert result.converged.all()
        tail, knee, _ = measured(scene, result.q, objects, angle)
        ours = normal(forward_kinematics(scene.model, result.q).frames[:, 0, :3, 3], knee, tail)
        theirs = normal(pose[:, 0, :3, 3], pose[:, 1, :3, 3], their_tail)
        cos = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
        off = np.degrees(np.arccos(np.clip(np.abs(cos), 0.0, 1.0)))       # planes: either normal
        print(f"\n{ik_solver}, pole angle {np.degrees(angle):+.0f} deg: Blender's theta max "
              f"{np.abs(their_theta).max():.1e} rad; our bend plane vs Blender's max {off.max():.1e} deg; "
              f"knee on the other side in {(cos < 0).sum()} of {F} frames")
        assert off.max() <= 1.0, np.degrees(angle)

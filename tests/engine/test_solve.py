"""Accuracy of the animation and simulation solvers against exact references."""

import time

import numpy as np
import pytest

from solver import (Bone, CopyPose, Distance, JointValue, Scene, Settings, combine, forward_kinematics,
                    model_from_bones, on_object, on_segment, rest_matrix, solve_animation, solve_simulation)
from solver.examples import lissajous, reach_scene, straight_chain
from solver.limits import violation
from solver.model import Model, Segment, sphere, swing


def tail_positions(scene, q, segment=-1):
    frames = forward_kinematics(scene.model, q).frames[:, segment]
    return frames[:, :3, :3] @ np.array([0.0, scene.model.length[segment], 0.0]) + frames[:, :3, 3]


@pytest.mark.parametrize("method", ["pinv", "dls", "sdls"])
@pytest.mark.parametrize("n_bones", [6, 30])
def test_lissajous_path_from_a_straight_start(n_bones, method):
    """1000 frames, every one solved from the straight (singular) rest pose: within 1e-6 x length."""
    scene = reach_scene(straight_chain(n_bones))
    targets = lissajous(1000, n_bones)
    result = solve_animation(scene, scene.model.neutral(1000), targets, settings=Settings(method=method))
    error = np.linalg.norm(tail_positions(scene, result.q) - targets[:, 0, :3, 3], axis=1)
    assert result.converged.all()
    assert error.max() <= 1e-6 * n_bones
    np.testing.assert_allclose(result.position_error[:, 0], error, atol=1e-12)


def planar_two_bone(l1=1.0, l2=0.7):
    """Two bones along +Z that bend about their X axes only (Y and Z locked)."""
    lock = dict(lock=(False, True, True))
    bones = [Bone("upper", rest_matrix([0, 0, 0], [0, 0, l1]), l1, **lock),
             Bone("lower", rest_matrix([0, 0, l1], [0, 0, l1 + l2]), l2, parent="upper", **lock)]
    return reach_scene(bones)


def test_two_bone_chain_matches_the_closed_form():
    """Law of cosines: in the plane (u, v) = (-y, z) the tail is l1 e(a) + l2 e(a + b), e(t) =
    (sin t, cos t); so cos b = (d^2 - l1^2 - l2^2) / (2 l1 l2), a = atan2(u, v) - atan2(l2 sin b, l1 + l2 cos b)."""
    l1, l2 = 1.0, 0.7
    scene = planar_two_bone(l1, l2)
    rng = np.random.default_rng(3)
    n = 500
    d = rng.uniform(abs(l1 - l2) + 0.05, l1 + l2 - 0.05, n)
    heading = rng.uniform(-2.5, 2.5, n)
    u, v = d * np.sin(heading), d * np.cos(heading)
    targets = np.broadcast_to(np.eye(4), (n, 1, 4, 4)).copy()
    targets[:, 0, 1, 3], targets[:, 0, 2, 3] = -u, v
    start = np.tile([0.0, 0.3], (n, 1))
    result = solve_animation(scene, start, targets, settings=Settings(precision=1e-13))
    assert result.converged.all()
    # Both elbow branches solve it; compare with the closed form of the branch the solver took.
    def wrap(angle):
        return (angle + np.pi) % (2 * np.pi) - np.pi
    elbow = wrap(result.q[:, 1])
    b = np.sign(elbow) * np.arccos((d**2 - l1**2 - l2**2) / (2 * l1 * l2))
    a = np.arctan2(u, v) - np.arctan2(l2 * np.sin(b), l1 + l2 * np.cos(b))
    np.testing.assert_allclose(elbow, b, atol=1e-9)
    np.testing.assert_allclose(wrap(result.q[:, 0] - a), 0.0, atol=1e-9)


def unreachable_targets():
    """Four goals beyond the 6 m chain's reach, as targets, and the closest tail positions to them
    (the chain stretched toward each)."""
    goal = np.array([[10.0, 0.0, 3.0], [0.0, 0.0, -8.0], [3.0, 4.0, 12.0], [-7.0, 2.0, -1.0]])
    targets = np.broadcast_to(np.eye(4), (4, 1, 4, 4)).copy()
    targets[:, 0, :3, 3] = goal
    return goal, targets, goal / np.linalg.norm(goal, axis=1, keepdims=True) * 6.0


@pytest.mark.parametrize("curvature", [True, False])
@pytest.mark.parametrize("method", ["pinv", "dls", "sdls"])
def test_unreachable_target_ends_at_the_closest_point(method, curvature):
    scene = reach_scene(straight_chain(6))
    goal, targets, closest = unreachable_targets()
    result = solve_animation(scene, scene.model.neutral(4), targets,
                             settings=Settings(method=method, curvature=curvature))
    assert not result.converged.any()
    assert np.isfinite(result.q).all() and np.isfinite(result.position_error).all()
    # The error is flat there (it grows with the square of a sideways offset): plain steps, slower
    # near the optimum, settle a little further from it.
    np.testing.assert_allclose(tail_positions(scene, result.q), closest, atol=1e-6 if curvature else 1e-5)
    np.testing.assert_allclose(result.position_error[:, 0], np.linalg.norm(goal, axis=1) - 6.0, atol=1e-9)


@pytest.mark.parametrize("curvature", [True, False])
def test_damped_steps_from_the_first_iteration_reach_the_same_answers(curvature):
    """Settings(steps="damped"): Levenberg-Marquardt from the start, on the reachable path from the
    straight (singular) rest pose and on unreachable targets."""
    settings = Settings(steps="damped", curvature=curvature)
    scene = reach_scene(straight_chain(6))
    targets = lissajous(1000, 6)
    result = solve_animation(scene, scene.model.neutral(1000), targets, settings=settings)
    assert result.converged.all()
    assert np.linalg.norm(tail_positions(scene, result.q) - targets[:, 0, :3, 3], axis=1).max() <= 6e-6
    _, far, closest = unreachable_targets()
    result = solve_animation(scene, scene.model.neutral(4), far, settings=settings)
    assert not result.converged.any()
    np.testing.assert_allclose(tail_positions(scene, result.q), closest, atol=1e-6 if curvature else 1e-5)
    with pytest.raises(ValueError, match="steps"):
        Settings(steps="newton")


def test_the_curvature_estimate_shortens_the_way_to_an_unreachable_optimum():
    """Plain Levenberg-Marquardt steps crawl toward an optimum with a large residual; the secant
    curvature estimate is what makes that fast."""
    scene = reach_scene(straight_chain(6))
    _, targets, _ = unreachable_targets()
    with_s, plain = (solve_animation(scene, scene.model.neutral(4), targets, settings=Settings(curvature=c))
                     for c in (True, False))
    assert with_s.iterations.sum() < 0.6 * plain.iterations.sum()


def test_a_deadline_stops_the_iterations_and_leaves_the_frames_open():
    scene = reach_scene(straight_chain(6))
    targets = lissajous(50, 6)
    start = scene.model.neutral(50)
    passed = solve_animation(scene, start, targets, deadline=time.perf_counter())
    assert (passed.iterations == 0).all() and not passed.converged.any()
    np.testing.assert_array_equal(passed.q, start)
    np.testing.assert_allclose(passed.position_error[:, 0],
                               np.linalg.norm(tail_positions(scene, start) - targets[:, 0, :3, 3], axis=1), atol=1e-12)
    free, far = (solve_animation(scene, start, targets, deadline=d) for d in (None, time.perf_counter() + 3600.0))
    assert free.converged.all()
    np.testing.assert_array_equal(far.q, free.q)
    np.testing.assert_array_equal(far.iterations, free.iterations)


def limited_chain_scene(rotation=False):
    """Bones with every limit kind Blender maps: swing (elliptic), swing + RotY, RotX, and stiff axes."""
    limits = ((-0.5, 0.8), (-0.3, 0.3), (-0.4, 0.6))
    bones = straight_chain(6, limits=limits)
    bones[1] = Bone(bones[1].name, bones[1].matrix, 1.0, bones[1].parent, lock=(False, True, False), limits=limits)
    bones[2] = Bone(bones[2].name, bones[2].matrix, 1.0, bones[2].parent, lock=(False, True, True), limits=limits)
    bones[3] = Bone(bones[3].name, bones[3].matrix, 1.0, bones[3].parent, stiffness=(1.0, 0.5, 1.0), limits=limits)
    return reach_scene(bones, rotation=rotation)


@pytest.mark.parametrize("rotation", [False, True])
def test_limits_and_frozen_axes_hold_for_any_target(rotation):
    scene = limited_chain_scene(rotation)
    rng = np.random.default_rng(11)
    n = 300
    targets = np.broadcast_to(np.eye(4), (n, 1, 4, 4)).copy()
    targets[:, 0, :3, 3] = rng.normal(size=(n, 3)) * 4.0          # reachable and unreachable
    targets[:, 0, :3, :3] = np.linalg.qr(rng.normal(size=(n, 3, 3)))[0] * np.array([1, 1, -1])[None] if rotation else np.eye(3)
    start = scene.project(rng.uniform(-1, 1, size=(n, scene.n_coordinates)))
    result = solve_animation(scene, start, targets)
    assert np.isfinite(result.q).all()
    assert violation(scene.model, result.q).max() <= 1e-12
    frozen = scene.joint_weight == 0
    assert frozen.any()
    np.testing.assert_array_equal(result.q[:, frozen], start[:, frozen])
    kinds = {j.kind for j in scene.model.joints}
    assert {"swing", "revolute"} <= kinds


def test_sphere_limits_hold_and_limited_targets_are_reached_inside():
    """Our sphere joints take an elliptic limit on the rotation vector (Blender's iTaSC has none)."""
    segments = [Segment("a", -1, np.eye(4), (sphere(lower=(-0.6, -0.3, -0.6), upper=(0.6, 0.3, 0.6), elliptic=True),), 1.0)]
    offset = np.eye(4)
    offset[1, 3] = 1.0
    segments.append(Segment("b", 0, offset, (swing(lower=(-0.5, -0.4), upper=(0.7, 0.4), elliptic=True),), 1.0))
    model = Model(segments)
    scene = Scene(model, [CopyPose(on_segment(1, (0, 1, 0)), on_object(0))], n_objects=1)
    rng = np.random.default_rng(5)
    n = 400
    targets = np.broadcast_to(np.eye(4), (n, 1, 4, 4)).copy()
    targets[:, 0, :3, 3] = rng.normal(size=(n, 3)) * 2.0
    result = solve_animation(scene, model.neutral(n), targets)
    assert violation(model, result.q).max() <= 1e-12
    # Frames whose target lies inside the limited workspace are reached.
    inside = rng.uniform(-1, 1, size=(n, 4)) * [0.6, 0.3, 0.6, 0.5] * 0.6
    q_in = np.concatenate([inside[:, :3], inside[:, 3:], np.zeros((n, 1))], axis=1)
    reachable = np.broadcast_to(np.eye(4), (n, 1, 4, 4)).copy()
    reachable[:, 0, :3, 3] = tail_positions(scene, q_in)
    result = solve_animation(scene, model.neutral(n), reachable)
    assert violation(model, result.q).max() <= 1e-12
    assert result.converged.mean() > 0.95


def test_pose_with_rotation_and_target_reference():
    scene = reach_scene(straight_chain(6), rotation=True)
    rng = np.random.default_rng(2)
    q_goal = rng.uniform(-0.4, 0.4, size=(200, scene.n_coordinates))
    pose = forward_kinematics(scene.model, q_goal).frames[:, -1]
    targets = pose.copy()
    targets[:, :3, 3] += pose[:, :3, 1] * 1.0     # the tail, with the bone's orientation
    result = solve_animation(scene, scene.model.neutral(200), targets[:, None])
    assert result.converged.all()
    assert np.nanmax(result.rotation_error) <= 1e-6 and np.nanmax(result.position_error) <= 1e-6


def test_distance_and_joint_value_tasks():
    bones = straight_chain(4)
    model = model_from_bones(bones)
    tip = on_segment(3, (0, 1, 0))
    for mode, radius, start_inside in (("surface", 2.0, None), ("inside", 1.0, False), ("outside", 3.0, True)):
        scene = Scene(model, [Distance(tip, on_object(0), radius=radius, mode=mode)], n_objects=1)
        targets = np.broadcast_to(np.eye(4), (3, 1, 4, 4)).copy()
        targets[:, 0, :3, 3] = [[1.0, 0.5, 2.0], [0.0, 1.0, 3.5], [-1.0, 0.0, 1.0]]
        result = solve_animation(scene, model.neutral(3), targets)
        d = np.linalg.norm(tail_positions(scene, result.q) - targets[:, 0, :3, 3], axis=1)
        assert result.converged.all()
        if mode == "surface":
            np.testing.assert_allclose(d, radius, atol=1e-6)
        elif mode == "inside":
            assert (d <= radius + 1e-6).all()
        else:
            assert (d >= radius - 1e-6).all()
    # A joint-value task alone drives its coordinate to the value.
    scene = Scene(model, [JointValue(4, value=0.3, weight=1.0)])
    result = solve_animation(scene, model.neutral(2))
    np.testing.assert_allclose(result.q[:, 4], 0.3, atol=1e-12)
    assert np.isnan(result.position_error).all() and np.allclose(result.rotation_error, 0.0, atol=1e-12)


def test_two_armatures_linked_by_a_constraint_both_move_weighted():
    """A chain standing up from the origin and one hanging down from (1, 0, 5.5); their tails must
    meet. Either could reach alone; the stiffer armature moves less."""
    def chain(top, direction, stiffness):
        return [Bone(f"b{i}", rest_matrix(np.add(top, np.multiply(direction, i)), np.add(top, np.multiply(direction, i + 1))),
                     1.0, f"b{i - 1}" if i else None, stiffness=(stiffness,) * 3) for i in range(3)]
    for stiff_left, stiff_right in ((0.0, 0.0), (0.0, 0.9), (0.9, 0.0)):
        model = combine([chain([0, 0, 0], [0, 0, 1], stiff_left), chain([1, 0, 5.5], [0, 0, -1], stiff_right)])
        scene = Scene(model, [CopyPose(on_segment(2, (0, 1, 0)), on_segment(5, (0, 1, 0)))])
        result = solve_animation(scene, model.neutral(1))
        a = forward_kinematics(model, result.q).frames[0]
        tips = [a[s, :3, :3] @ [0, 1, 0] + a[s, :3, 3] for s in (2, 5)]
        assert result.converged.all()
        np.testing.assert_allclose(tips[0], tips[1], atol=1e-6)
        left, right = np.linalg.norm(result.q[0, :9]), np.linalg.norm(result.q[0, 9:])
        assert min(left, right) > 1e-3                       # both armatures moved
        if stiff_right > stiff_left:
            assert left > 3 * right
        elif stiff_left > stiff_right:
            assert right > 3 * left
        else:
            assert 0.5 < left / right < 2.0                  # equal weights share the motion


def test_bad_frames_are_reported_not_solved():
    scene = reach_scene(straight_chain(6))
    targets = lissajous(10, 6)
    targets[3, 0, 0, 3] = np.nan
    targets[7, 0, 1, 1] = np.inf
    result = solve_animation(scene, scene.model.neutral(10), targets)
    bad = np.zeros(10, bool)
    bad[[3, 7]] = True
    assert np.isfinite(result.q).all()
    assert not result.converged[bad].any() and result.converged[~bad].all()
    assert np.isnan(result.position_error[bad]).all()
    with pytest.raises(ValueError, match="frame"):
        solve_animation(scene, np.full((2, scene.n_coordinates), np.nan), targets[:2])
    with pytest.raises(ValueError, match="precision"):
        Settings(precision=-1.0)


def test_diagnostics_have_the_documented_shapes():
    scene = Scene(model_from_bones(straight_chain(3)),
                  [CopyPose(on_segment(2, (0, 1, 0)), on_object(0)), JointValue(0, 0.0, 0.1)], n_objects=1)
    targets = lissajous(5, 3)
    result = solve_animation(scene, scene.model.neutral(5), targets)
    assert result.position_error.shape == result.rotation_error.shape == (5, 2)
    assert np.isnan(result.rotation_error[:, 0]).all() and np.isnan(result.position_error[:, 1]).all()
    assert result.iterations.shape == result.converged.shape == result.sigma_min.shape == (5,)
    assert (result.sigma_min > 0).all() and result.seconds > 0


def moving_target(n_frames, velocity, fps):
    start = np.array([1.5, 0.5, 4.0])
    poses = np.broadcast_to(np.eye(4), (n_frames, 1, 4, 4)).copy()
    poses[:, 0, :3, 3] = start + np.arange(n_frames)[:, None] / fps * velocity
    return poses


def test_feeding_target_velocity_forward_cuts_the_tracking_error_tenfold():
    scene = reach_scene(straight_chain(6))
    fps = 24.0
    targets = moving_target(96, np.array([0.0, 0.6, -0.3]), fps)
    errors = {}
    for feedforward in (True, False):
        settings = Settings(feedforward=feedforward, feedback=20.0, fps=fps)
        result = solve_simulation(scene, scene.model.neutral(1), targets, settings=settings)
        assert np.isfinite(result.q).all()
        errors[feedforward] = result.position_error[48:, 0].mean()     # steady state
    assert errors[True] * 10 <= errors[False]


@pytest.mark.parametrize("method", ["pinv", "dls", "sdls"])
@pytest.mark.parametrize("substeps", [0, 1, 4])
def test_simulation_tracks_a_path_within_limits(method, substeps):
    scene = limited_chain_scene()
    targets = lissajous(240, 6)       # 3 x 2 x 5 periods in 10 s at 24 fps
    settings = Settings(method=method, substeps=substeps, fps=24.0)
    result = solve_simulation(scene, scene.model.neutral(1), targets, settings=settings)
    assert np.isfinite(result.q).all()
    assert violation(scene.model, result.q).max() <= 1e-12
    assert result.iterations[1:].min() >= max(substeps, 1)
    unlimited = reach_scene(straight_chain(6))
    free = solve_simulation(unlimited, unlimited.model.neutral(1), targets, settings=settings)
    assert np.median(free.position_error[:, 0]) < 0.05


def test_degenerate_scenes_answer_without_failing():
    """No joints, no constraints, a zero-weight task: each answers sensibly, nothing moves."""
    still = Model([Segment("a", -1, np.eye(4), (), 1.0)])
    scene = Scene(still, [CopyPose(on_segment(0, (0, 1, 0)), on_object(0))], n_objects=1)
    targets = lissajous(3, 1)
    result = solve_animation(scene, np.zeros((3, 0)), targets)
    expected = np.linalg.norm(targets[:, 0, :3, 3] - [0, 1, 0], axis=1)
    np.testing.assert_allclose(result.position_error[:, 0], expected)
    assert not result.converged.any()
    simulated = solve_simulation(scene, np.zeros((1, 0)), targets)
    np.testing.assert_allclose(simulated.position_error[:, 0], expected)

    chain = model_from_bones(straight_chain(2))
    result = solve_animation(Scene(chain, []), chain.neutral(2))
    assert result.converged.all() and (result.iterations == 0).all()
    ignored = Scene(chain, [CopyPose(on_segment(1, (0, 1, 0)), on_object(0), weight=0.0)], n_objects=1)
    result = solve_animation(ignored, chain.neutral(2), lissajous(2, 2))
    assert result.converged.all() and not result.q.any()


def test_a_tree_with_two_effectors_sharing_a_root():
    """A trunk and two 3-bone branches; each branch tip follows its own target, all frames."""
    trunk = Bone("trunk", rest_matrix([0, 0, 0], [0, 0, 1]), 1.0)
    bones = [trunk]
    for side, x in (("L", -1.0), ("R", 1.0)):
        parent = "trunk"
        for i in range(3):
            head, tail = [x * i / 3, 0, 1 + i], [x * (i + 1) / 3, 0, 2 + i]
            bones.append(Bone(f"{side}{i}", rest_matrix(head, tail), float(np.linalg.norm(np.subtract(tail, head))), parent))
            parent = f"{side}{i}"
    model = model_from_bones(bones)
    left, right = model.index("L2"), model.index("R2")
    scene = Scene(model, [CopyPose(on_segment(left, (0, model.length[left], 0)), on_object(0)),
                          CopyPose(on_segment(right, (0, model.length[right], 0)), on_object(1))], n_objects=2)
    # Targets from random reachable poses, so that both can be met at once.
    rng = np.random.default_rng(8)
    q_goal = rng.uniform(-0.5, 0.5, size=(200, scene.n_coordinates))
    frames = forward_kinematics(model, q_goal).frames
    targets = np.broadcast_to(np.eye(4), (200, 2, 4, 4)).copy()
    for k, s in enumerate((left, right)):
        targets[:, k, :3, 3] = frames[:, s, :3, :3] @ [0, model.length[s], 0] + frames[:, s, :3, 3]
    result = solve_animation(scene, model.neutral(200), targets)
    assert result.converged.all()
    assert np.nanmax(result.position_error) <= 1e-6


def test_fit_mode_converges_at_the_least_squares_optimum():
    """Markers that no pose meets exactly: a fit stops where the weighted error's gradient vanishes."""
    model = model_from_bones(straight_chain(3))
    points = [(2, (0, 1, 0)), (1, (0.1, 0.5, 0)), (0, (0, 0.5, 0.1))]
    tasks = [CopyPose(on_segment(s, p), on_object(k), weight=w) for k, ((s, p), w) in enumerate(zip(points, (1.0, 2.0, 0.5)))]
    scene = Scene(model, tasks, n_objects=3)
    rng = np.random.default_rng(4)
    q_true = rng.uniform(-0.5, 0.5, size=(50, scene.n_coordinates))
    frames = forward_kinematics(model, q_true).frames
    markers = np.broadcast_to(np.eye(4), (50, 3, 4, 4)).copy()
    for k, (s, p) in enumerate(points):
        markers[:, k, :3, 3] = frames[:, s, :3, :3] @ p + frames[:, s, :3, 3] + rng.normal(scale=0.02, size=(50, 3))
    result = solve_animation(scene, model.neutral(50), markers, settings=Settings(fit=True, precision=1e-10))
    assert result.converged.all()
    ev = scene.evaluate(result.q, markers)
    gradient = np.einsum("fmn,fm->fn", ev.A, ev.task_weight * (ev.y - ev.yd))
    assert np.abs(gradient).max() <= 1e-8
    assert not solve_animation(scene, model.neutral(50), markers).converged.any()   # not a fit: targets unmet


def test_joint_values_per_frame_and_missing_ones():
    """A joint-value task may ask a different value each frame; NaN leaves it out of that frame."""
    model = model_from_bones(straight_chain(2))
    scene = Scene(model, [JointValue(1, weight=1.0, name="hold"), JointValue(4, weight=1.0, name="other")])
    values = np.array([[0.1, 0.2], [-0.3, np.nan], [0.5, 0.0]])
    result = solve_animation(scene, model.neutral(3), values=values)
    np.testing.assert_allclose(result.q[:, 1], values[:, 0], atol=1e-12)
    np.testing.assert_allclose(result.q[[0, 2], 4], values[[0, 2], 1], atol=1e-12)
    assert result.q[1, 4] == 0.0 and np.isnan(result.rotation_error[1, 1])
    assert result.constraint_names == ["hold", "other"]
    simulated = solve_simulation(scene, model.neutral(1), values=values, settings=Settings(substeps=20))
    assert np.isfinite(simulated.q).all()
    np.testing.assert_allclose(simulated.q[0, 1], 0.1, atol=1e-9)      # the first frame is converged


def test_a_missing_target_leaves_out_only_its_own_constraint():
    """Two branches of a tree, one target lost in frame 1: the other is still reached there, the
    lost one reports NaN, and the frame is not converged (a fit counts it as done)."""
    model = model_from_bones(straight_chain(4))
    scene = Scene(model, [CopyPose(on_segment(3, (0, 1, 0)), on_object(0)),
                          CopyPose(on_segment(1, (0, 1, 0)), on_object(1), weight=0.1)], n_objects=2)
    q_goal = np.random.default_rng(3).uniform(-0.4, 0.4, size=(3, scene.n_coordinates))
    frames = forward_kinematics(model, q_goal).frames
    targets = np.broadcast_to(np.eye(4), (3, 2, 4, 4)).copy()
    for k, s in enumerate((3, 1)):
        targets[:, k, :3, 3] = frames[:, s, :3, :3] @ [0, 1, 0] + frames[:, s, :3, 3]
    targets[1, 1, 0, 3] = np.nan
    for run in (solve_animation, solve_simulation):
        result = run(scene, model.neutral(3 if run is solve_animation else 1), targets)
        assert np.isfinite(result.q).all()
        assert np.isnan(result.position_error[1, 1]) and np.isfinite(result.position_error[1, 0])
        assert not result.converged[1]
        if run is solve_animation:
            assert result.position_error[1, 0] <= 1e-6
    fitted = solve_animation(scene, model.neutral(3), targets, settings=Settings(fit=True))
    assert fitted.converged.all()


def test_gradient_baseline_takes_the_best_step_along_the_gradient_and_converges():
    from solver import pseudoinverse
    rng = np.random.default_rng(6)
    A, b = rng.normal(size=(20, 3, 7)), rng.normal(size=(20, 3))
    x, _ = pseudoinverse.solve(A, b, "gradient")
    g = np.einsum("fmn,fm->fn", A, b)
    np.testing.assert_allclose(x / np.linalg.norm(x, axis=1, keepdims=True),
                               g / np.linalg.norm(g, axis=1, keepdims=True), atol=1e-12)   # along the gradient ...
    residual = np.einsum("fmn,fn->fm", A, x) - b
    np.testing.assert_allclose(np.einsum("fmn,fm,fn->f", A, residual, g), 0.0, atol=1e-10)   # ... to its minimum
    scene = planar_two_bone()
    targets = np.broadcast_to(np.eye(4), (20, 1, 4, 4)).copy()
    targets[:, 0, 1:3, 3] = rng.uniform(0.6, 1.1, size=(20, 2)) * [-1, 1]
    result = solve_animation(scene, np.tile([0.1, 0.3], (20, 1)), targets,
                             settings=Settings(method="gradient", max_iterations=5000))
    assert result.converged.all() and np.nanmax(result.position_error) <= 1e-6
    newton = solve_animation(scene, np.tile([0.1, 0.3], (20, 1)), targets)
    assert result.iterations.mean() > 3 * newton.iterations.mean()     # why it is only a baseline


def test_simulation_tracks_a_target_again_when_it_reappears():
    """A target lost for one frame: that frame reports it missing; from the next frame on it is
    tracked again as if it had stood at its new pose."""
    scene = reach_scene(straight_chain(6))
    targets = lissajous(240, 6)
    lost = targets.copy()
    lost[100, 0, 0, 3] = np.nan
    settings = Settings(fps=24.0)
    result = solve_simulation(scene, scene.model.neutral(1), lost, settings=settings)
    reference = solve_simulation(scene, scene.model.neutral(1), targets, settings=settings)
    assert np.isnan(result.position_error[100, 0]) and np.isfinite(result.q).all()
    # Ten frames later the lag of a restart has died away to the steady tracking error.
    assert result.position_error[110:, 0].max() <= 2 * reference.position_error[110:, 0].max()


def test_sdls_bound_is_a_half_turn_in_animation_mode_and_buss_and_kims_in_simulation():
    """Settings.gamma_max None takes the mode's bound (update.SDLS_BOUND): pi in animation mode, whose
    halving line search guards the steps, so that frames starting at the straight (singular) rest
    pose leave it in fewer updates than with pi / 4; pi / 4 in simulation."""
    scene = reach_scene(straight_chain(6))
    targets = lissajous(200, 6)
    q0 = scene.model.neutral(200)

    def animation(gamma_max):
        return solve_animation(scene, q0, targets, settings=Settings(method="sdls", gamma_max=gamma_max))

    default, half_turn, quarter = animation(None), animation(np.pi), animation(np.pi / 4)
    np.testing.assert_array_equal(default.q, half_turn.q)
    np.testing.assert_array_equal(default.iterations, half_turn.iterations)
    assert default.converged.all() and quarter.converged.all()
    assert default.iterations.mean() < 0.9 * quarter.iterations.mean()
    assert default.position_error.max() <= 1e-6

    def simulation(gamma_max):
        settings = Settings(method="sdls", gamma_max=gamma_max, converge_first_frame=False)
        return solve_simulation(scene, q0[:1], targets[:20], settings=settings)

    np.testing.assert_array_equal(simulation(None).q, simulation(np.pi / 4).q)
    assert np.abs(simulation(None).q - simulation(np.pi).q).max() > 1e-6

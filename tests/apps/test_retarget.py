"""Retargeting (solver.retarget) on a synthetic walk whose contacts are known analytically.

References: the walk's own planted frames and plant points (tests/apps/retarget_walk.py), forward
kinematics written out here the way Blender composes pose matrices (parent pose, parent rest
inverse, rest, basis), the calibration rebuilt here from Rodrigues' formula, a per-frame state
machine for contact hysteresis, and finite differences for the solve's gradient and Hessian.
"""

import numpy as np
import pytest

from solver.finite_differences import numerical_jacobian, relative_difference
from solver.kinematics import forward_kinematics, point_jacobian
from solver.limits import violation
from solver.retarget import (ROLES, ContactDetection, ContactPoint, Source, Span, Target, calibrate, detect_contacts,
                             retarget, target_model)
from solver.retarget.solve import Problem, System, _points, _step
from solver.scene import Scene
from solver.rotations import exp_map, log_map
from tests.apps.retarget_walk import (KNEE_LIMIT, LEFT_OFFSET, RIGHT_OFFSET, walk_source, walk_target, true_spans)

F = 100
HELD = 1e-4          # metres: what "exact" means for pins and the floor
SIDE = {"L": LEFT_OFFSET, "R": RIGHT_OFFSET}


def blender_fk(target: Target, result) -> dict:
    """Each bone's pose matrix (F, 4, 4) from the result's bases, composed as Blender does:
    pose = parent pose @ parent rest^-1 @ rest @ basis (the hips' basis carries the translation)."""
    bones = {b.name: b for b in target.bones}
    hips = target.roles["hips"]
    pose = {}

    def visit(name):
        if name in pose:
            return pose[name]
        b = bones[name]
        i = result.bone_names.index(name)
        basis = np.tile(np.eye(4), (result.q.shape[0], 1, 1))
        basis[:, :3, :3] = result.local_rotations[:, i]
        if name == hips:
            basis[:, :3, 3] = result.root_translation
        rest = np.asarray(b.matrix, float)
        if b.parent is not None:
            rest = visit(b.parent) @ np.linalg.inv(np.asarray(bones[b.parent].matrix, float)) @ rest
        pose[name] = rest @ basis
        return pose[name]

    for name in bones:
        visit(name)
    return pose


def contact_paths(target: Target, result) -> dict:
    """{contact point name: (F, 3)} by blender_fk."""
    pose = blender_fk(target, result)
    return {p.name: pose[target.roles[p.role]][:, :3, :3] @ np.asarray(p.point) + pose[target.roles[p.role]][:, :3, 3]
            for p in target.points()}


def assert_held(target: Target, result, up=(0.0, 0.0, 1.0)):
    """Every span's contact point within HELD of one world point for the whole span, no contact point
    below the floor by more than HELD, no NaN; measured by blender_fk."""
    paths = contact_paths(target, result)
    clearance = {p.name: p.clearance for p in target.points(up)}
    assert result.contacts and any(result.contacts.values())
    for name, spans in result.contacts.items():
        for span, pin in zip(spans, result.pins[name]):
            path = paths[name][span.start:span.end + 1]
            assert np.linalg.norm(path - pin, axis=-1).max() < HELD, (name, span)
            assert np.linalg.norm(path - path.mean(axis=0), axis=-1).max() < HELD, (name, span)
            assert abs(result.ground.height(pin) - clearance[name]) < 1e-9
        assert result.ground.height(paths[name]).min() > -HELD, name
    for array in (result.q, result.local_rotations, result.root_translation, result.world):
        assert np.all(np.isfinite(array))
    assert result.converged.all()


def assert_spans_match_truth(contacts, n_frames=F, fps=30.0):
    for name, spans in contacts.items():
        if name.startswith("toe_tip"):
            assert spans == [], name                  # kept above the floor, not pinned
            continue
        truth = true_spans(n_frames, SIDE[name[-1]], fps)
        assert len(spans) == len(truth), (name, spans, truth)
        for found, true in zip(spans, truth):
            assert abs(found.start - true.start) <= 1 and abs(found.end - true.end) <= 1, (name, found, true)


@pytest.fixture(scope="module")
def walk():
    target = walk_target()
    return target, retarget(walk_source(F), target)


def test_detected_contacts_are_the_planted_frames(walk):
    _, result = walk
    assert set(result.contacts) == {f"{p}.{s}" for p in ("heel", "ball", "toe_tip") for s in "LR"}
    assert_spans_match_truth(result.contacts)


def test_pins_and_floor_hold_exactly(walk):
    target, result = walk
    assert_held(target, result)
    # The result's own pose matrices are Blender's composition of its bases.
    pose = blender_fk(target, result)
    for i, name in enumerate(result.bone_names):
        assert np.abs(result.world[:, i] - pose[name]).max() < 1e-9
    assert np.nanmax(result.pin_error) < HELD


def test_pins_follow_the_source_plants(walk):
    """Each pin lies where the source's foot was planted, scaled by the leg ratio about the hips'
    start and put on the floor: the planted ankle of the walk, mapped, within a centimetre."""
    target, result = walk
    source = walk_source(F)
    k, hips0 = result.scale, source.heads["hips"][0] * [1.0, 1.0, 0.0]
    for side in "LR":
        for span, pin in zip(result.contacts[f"heel.{side}"], result.pins[f"heel.{side}"]):
            ankle = source.heads[f"foot.{side}"][span.start]
            planted = hips0 + k * (ankle - hips0)
            assert np.linalg.norm((pin - planted)[:2]) < 0.01


def test_limits_hold_and_bind(walk):
    target, result = walk
    tm = target_model(target)
    assert violation(tm.model, result.q).max() <= 1e-12
    for side in "LR":
        R = result.local_rotations[:, result.bone_names.index(f"shin.{side}")]
        assert np.abs(R[:, :, 0] - [1.0, 0.0, 0.0]).max() < 1e-12           # a hinge about X
        flexion = np.arctan2(R[:, 2, 1], R[:, 1, 1])
        assert flexion.min() >= KNEE_LIMIT[0] - 1e-12 and flexion.max() <= KNEE_LIMIT[1] + 1e-12
        assert np.sum(flexion > KNEE_LIMIT[1] - 1e-9) > 3                    # the limit is met in the swing


def calibrated(source: Source, target: Target, role: str, frame: int = 0) -> np.ndarray:
    """R_src(t) R_src(c)^T A, A the target's rest frame turned by the shortest arc onto the source
    bone's direction at c (Rodrigues' formula written out)."""
    T = np.asarray(target.bone(role).matrix, float)[:3, :3]
    R = np.asarray(source.rotations[role])
    a, b = T[:, 1], R[frame][:, 1]
    axis = np.cross(a, b)
    angle = np.arctan2(np.linalg.norm(axis), a @ b)
    A = exp_map(axis / max(np.linalg.norm(axis), 1e-300) * angle) @ T
    return R @ R[frame].T @ A


UNPINNED = ("spine", "chest", "neck", "head", "upper_arm.L", "forearm.L", "hand.L", "upper_arm.R", "forearm.R",
            "hand.R")
PARENT = {"spine": "hips", "chest": "spine", "neck": "chest", "head": "neck", "upper_arm.L": "shoulder.L",
          "forearm.L": "upper_arm.L", "hand.L": "forearm.L", "upper_arm.R": "shoulder.R",
          "forearm.R": "upper_arm.R", "hand.R": "forearm.R"}


def style(source, target, result, role, frame=0) -> float:
    """Mean angle between the source's local rotations calibrated at `frame` and the target's
    (blender_fk)."""
    pose = blender_fk(target, result)
    parent = PARENT[role]
    mine = np.swapaxes(pose[target.roles[parent]][:, :3, :3], -1, -2) @ pose[target.roles[role]][:, :3, :3]
    theirs = np.swapaxes(calibrated(source, target, parent, frame), -1, -2) @ calibrated(source, target, role, frame)
    return float(np.linalg.norm(log_map(np.swapaxes(theirs, -1, -2) @ mine), axis=-1).mean())


def test_style_kept_on_unpinned_bones(walk):
    target, result = walk
    source = walk_source(F)
    for role in UNPINNED:
        measured = style(source, target, result, role)
        assert abs(measured - result.style_difference[role]) < 1e-9, role
        assert measured < 0.03, (role, measured)


@pytest.mark.parametrize("source_drop, target_drop", [(0.0, np.pi / 4), (np.pi / 4, 0.0)])
def test_t_pose_and_a_pose_swap(source_drop, target_drop):
    """A T-pose source onto an A-pose target and the reverse: the same contacts, held; the arms
    point where the source's do at the calibration frame and keep their style."""
    source, target = walk_source(F, arm_drop=source_drop), walk_target(arm_drop=target_drop)
    result = retarget(source, target, calibration_frame=3)
    assert_spans_match_truth(result.contacts)
    assert_held(target, result)
    pose = blender_fk(target, result)
    for side in "LR":
        arm = pose[f"upper_arm.{side}"][3, :3, 1]
        assert np.arccos(np.clip(arm @ source.rotations[f"upper_arm.{side}"][3][:, 1], -1, 1)) < 0.02
        assert style(source, target, result, f"upper_arm.{side}", frame=3) < 0.03


def test_calibration_offsets_align_directions():
    source, target = walk_source(20), walk_target()
    for frame in (0, 7):
        calibration = calibrate(source, target, frame)
        desired = calibration.desired_rotations(source)
        for role in target.roles:
            assert np.abs(desired[role] - calibrated(source, target, role, frame)).max() < 1e-9, role


def test_user_edited_spans_are_honoured(walk):
    target, auto = walk
    edited = {name: list(spans) for name, spans in auto.contacts.items()}
    removed = edited["heel.L"].pop(1)
    first = edited["ball.L"][0]
    edited["ball.L"][0] = Span(first.start + 3, first.end - 2)
    added = Span(40, 43)                       # the right foot in its swing
    edited["ball.R"] = sorted(edited["ball.R"] + [added])
    del edited["heel.R"]
    result = retarget(walk_source(F), target, contacts=edited)
    assert result.contacts["heel.R"] == []
    for name in ("heel.L", "ball.L", "ball.R"):
        assert result.contacts[name] == edited[name]
    assert_held(target, result)
    paths = contact_paths(target, result)
    assert np.isnan(result.pin_error[removed.start:removed.end + 1, result.contact_names.index("heel.L")]).all()
    # Only the ball holds the left foot there now; the heel, free, turns with the source's foot
    # about the ball, and the source's foot stands flat: the heel stays within a millimetre.
    assert np.ptp(paths["heel.L"][removed.start:removed.end + 1], axis=0).max() < 1e-3


def test_copy_baseline_copies_rotations_and_slides(walk):
    """method="copy" (what name-map tools do) gives every free bone its calibrated rotation
    exactly and holds nothing: its feet slide on the spans the IK holds."""
    target, ik = walk
    copy = retarget(walk_source(F), walk_target(limits=False), method="copy")
    for role in UNPINNED:
        assert copy.style_difference[role] < 1e-9, role
    assert copy.contacts == ik.contacts
    assert np.nanmax(copy.pin_error) > 100 * HELD
    assert np.all(copy.iterations == 0)


def test_pins_out_of_reach_are_reported_not_converged():
    """Legs made rigid (every axis of thighs and shins locked) cannot stand on two pins a stride
    apart: those frames come back not converged, finite, inside the limits, and every frame that
    says converged holds its pins and the floor (measured by blender_fk)."""
    import dataclasses
    target = walk_target()
    stiff = [dataclasses.replace(b, lock=(True, True, True), limits=(None, None, None))
             if b.name.startswith(("thigh", "shin")) else b for b in target.bones]
    target = Target(stiff, target.roles)
    result = retarget(walk_source(F), target)
    assert np.all(np.isfinite(result.q)) and np.all(np.isfinite(result.world))
    for name in ("thigh.L", "shin.L", "thigh.R", "shin.R"):
        assert np.abs(result.local_rotations[:, result.bone_names.index(name)] - np.eye(3)).max() == 0.0
    both = (~np.isnan(result.pin_error)).sum(axis=1) == 4          # both feet pinned
    assert both.any() and not result.converged[both].any()
    paths = contact_paths(target, result)
    for name, spans in result.contacts.items():
        for span, pin in zip(spans, result.pins[name]):
            frames = span.frames[result.converged[span.frames]]
            assert np.linalg.norm(paths[name][frames] - pin, axis=-1).max(initial=0.0) < HELD
        assert result.ground.height(paths[name][result.converged]).min() > -HELD


def test_contact_points_reach_and_leave_their_pins_without_a_jump():
    """Feet that skate 10 cm/s in the source, at 120 fps: pins hold, and each contact point's
    largest second difference (its jerkiest frame) stays near that of the copied motion, which
    follows the source exactly; without blending, the pins make it jump at the spans' edges."""
    source, target = walk_source(400, fps=120.0, skate=0.1), walk_target()

    def jerk(result, rig):
        return {name: np.linalg.norm(np.diff(path, 2, axis=0), axis=-1).max()
                for name, path in contact_paths(rig, result).items()}

    copy = jerk(retarget(source, walk_target(limits=False), method="copy"), target)
    blended = retarget(source, target)
    assert_spans_match_truth(blended.contacts, 400, 120.0)
    assert_held(target, blended)
    sharp = jerk(retarget(source, target, blend_frames=0), target)
    for name, smooth in jerk(blended, target).items():
        assert smooth < 1.3 * copy[name], name
        assert sharp[name] > 2.0 * copy[name], name
    # A plant split in two by a short gap (the foot lifted for 4 frames): two pins 4 cm apart, the
    # point slides from one to the other in the gap.
    split = {name: list(spans) for name, spans in blended.contacts.items()}
    for name in ("heel.L", "ball.L"):
        first = split[name][1]
        split[name][1:2] = [Span(first.start, first.start + 20), Span(first.start + 25, first.end)]
    gapped = retarget(source, target, contacts=split)
    assert_held(target, gapped)
    assert np.linalg.norm(gapped.pins["heel.L"][1] - gapped.pins["heel.L"][2]) > 0.03
    for name, smooth in jerk(gapped, target).items():
        assert smooth < 1.3 * copy[name], name


def test_given_floor_moves_the_clip_onto_it():
    target = walk_target()
    result = retarget(walk_source(40), target, floor=0.25)
    assert abs(result.floor - 0.25) < 1e-12             # below the hips at the start, to rounding
    assert_held(target, result)


def test_no_contacts_no_pins():
    result = retarget(walk_source(30), walk_target(), contacts=None)
    assert all(not spans for spans in result.contacts.values())
    assert np.isnan(result.pin_error).all()
    assert result.floor_penetration.max() <= HELD


def test_floor_is_an_inequality():
    """Without pins and with the floor at the median height of the feet's paths, the feet press
    on it: a point the soft tasks pull down rests exactly on the floor, while its partner on the
    same foot, which the floor would have to pull down to keep there, is let go above it."""
    target = walk_target()
    result = retarget(walk_source(F), target, contacts=None, detection=ContactDetection(percentile=50))
    assert result.converged.all()
    paths = contact_paths(target, result)
    height = np.stack([paths[name][:, 2] for name in result.contact_names], axis=1) - result.floor
    assert height.min() > -HELD
    resting = np.abs(height) < 1e-9
    left, right = [result.contact_names.index(f"{p}.{s}") for p in ("heel", "ball") for s in "L"], \
        [result.contact_names.index(f"{p}.{s}") for p in ("heel", "ball") for s in "R"]
    for heel, ball in (left, right):
        one = resting[:, heel] ^ resting[:, ball]
        assert one.sum() > 5
        assert height[one][:, [heel, ball]].max() > 1e-3                # the other point is clear of it


def test_floor_lets_go_of_a_point_it_would_pull_down():
    """One step from the rest pose with both points of the left foot 1 mm below the floor, the
    foot asked to pitch toes down: the ball is held on the floor, the heel, which the floor would
    have to pull down, is let go above it (linear prediction of the step)."""
    target = walk_target(limits=False)
    tm = target_model(target)
    model, roles = tm.model, list(target.roles)
    points = [p for p in target.points() if p.name.startswith(("heel.", "ball."))]
    q = np.zeros((1, model.n_coordinates))
    frames = forward_kinematics(model, q).frames
    segments = np.array([tm.role_segment[r] for r in roles])
    rotations = frames[:, segments, :3, :3].copy()
    foot = roles.index("foot.L")
    rotations[:, foot] = exp_map(np.array([0.3, 0.0, 0.0])) @ rotations[:, foot]
    contact_segments = np.array([tm.role_segment[p.role] for p in points])
    local = np.array([p.point for p in points])
    floor = _points(frames, contact_segments, local)[0, :, 2].max() + 1e-3
    problem = Problem(model, segments, rotations, np.full(len(roles), 1.0), np.array([tm.root]), np.zeros((1, 3)),
                      frames[:, tm.root, :3, 3][:, None], np.full((1, 1), 10.0), contact_segments, local,
                      np.zeros((1, 4, 3)), np.zeros((1, 4), bool), np.zeros((1, 4, 3)), np.zeros((1, 4)), floor,
                      np.array([0.0, 0.0, 1.0]))
    masks = model.moves[:, segments].astype(float)
    system = System(problem, q, np.arange(1), masks @ masks.T, 1e-6)
    assert (system.height < floor).all()
    dq = _step(Scene(model, []), q, system, floor, 4, 0.5, 1e-6)
    predicted = system.height + np.einsum("fpn,fn->fp", system.up_rows, dq)
    names = [p.name for p in points]
    heel, ball = names.index("heel.L"), names.index("ball.L")
    assert abs(predicted[0, ball] - floor) < 1e-9
    assert predicted[0, heel] > floor + 1e-3


def hysteresis_reference(points, fps, floor, size, detection):
    """The contact state machine, frame by frame: enter below the thresholds, leave above
    hysteresis times them; then drop short spans."""
    step = np.linalg.norm(np.diff(points, axis=0), axis=-1) * fps
    spans, start = [], None
    for t in range(len(points)):
        speed = min(step[max(t - 1, 0)], step[min(t, len(step) - 1)])
        height = points[t, 2] - floor
        low = speed < detection.speed * size and height < detection.height * size
        high = speed > detection.hysteresis * detection.speed * size or \
            height > detection.hysteresis * detection.height * size
        if start is None and low:
            start = t
        elif start is not None and high:
            spans.append(Span(start, t - 1))
            start = None
    if start is not None:
        spans.append(Span(start, len(points) - 1))
    out = []
    for s in spans:                     # each end moved in past frames above the span's median + lift
        heights = [points[t, 2] - floor for t in range(s.start, s.end + 1)]
        level = sorted(heights)[len(heights) // 2] if len(heights) % 2 else \
            sum(sorted(heights)[len(heights) // 2 - 1:len(heights) // 2 + 1]) / 2
        low = [t for t, h in zip(range(s.start, s.end + 1), heights) if h <= level + detection.lift * size]
        if low and low[-1] - low[0] + 1 >= detection.min_frames:
            out.append(Span(low[0], low[-1]))
    return out


def test_detect_contacts_matches_the_state_machine():
    rng = np.random.default_rng(3)
    detection = ContactDetection(speed=0.5, height=0.1, hysteresis=1.6, min_frames=3)
    for _ in range(20):
        steps = rng.choice([0.0, 0.3, 0.6, 1.5], size=(120, 1)) / 30 * rng.normal(size=(120, 3))
        points = np.cumsum(steps, axis=0) * [1.0, 1.0, 0.3] + [0.0, 0.0, 0.05]
        found = detect_contacts(points, 30.0, floor=0.0, size=1.0, detection=detection)
        assert found == hysteresis_reference(points, 30.0, 0.0, 1.0, detection)
        assert found


def test_detect_contacts_hysteresis_and_floor():
    """A point resting, then creeping between the two speed thresholds (still a contact), then
    moving off; raised above the height threshold it is no contact at all."""
    speeds = np.r_[np.full(10, 2.0), np.zeros(15), np.full(10, 0.7), np.full(10, 2.0)]       # leg lengths / s
    x = np.concatenate([[0.0], np.cumsum(speeds[:-1]) / 30.0])
    points = np.stack([x, np.zeros_like(x), np.full_like(x, 0.01)], axis=-1)
    detection = ContactDetection(speed=0.6, height=0.08, hysteresis=1.5, min_frames=3)
    assert detect_contacts(points, 30.0, floor=0.0, detection=detection) == [Span(10, 35)]
    raised = points + [0.0, 0.0, 0.2]
    assert detect_contacts(raised, 30.0, floor=0.0, detection=detection) == []
    # The floor estimated from the path itself (its 5th percentile) is the resting height.
    assert detect_contacts(raised, 30.0, detection=detection) == [Span(10, 35)]


def test_solve_gradient_and_hessian_against_finite_differences():
    """The solve's g = A_s^T W b_s is minus the gradient of its soft cost
    1/2 sum_r w_r |log(D_r R_r^T)|^2 + 1/2 sum_p w_p |t_p - p|^2, and where every residual is zero
    its H = A_s^T W A_s is that cost's Hessian; the contact rows are the points' Jacobians."""
    rng = np.random.default_rng(5)
    tm = target_model(walk_target(limits=False))
    model = tm.model
    q0 = rng.uniform(-0.6, 0.6, size=(2, model.n_coordinates))
    segments = np.array(sorted(tm.role_segment.values()))
    R, E = segments.size, 3
    point_segments, point_local = segments[:E], rng.normal(size=(E, 3)) * 0.1
    contact_segments, contact_local = segments[-2:], rng.normal(size=(2, 3)) * 0.1
    weights = rng.uniform(0.5, 2.0, size=R)

    def problem(rotations, targets, contact_targets):
        return Problem(model, segments, rotations, weights, point_segments, point_local, targets,
                       np.full((2, E), 3.0), contact_segments, contact_local, np.zeros((2, 2, 3)),
                       np.zeros((2, 2), bool), contact_targets, np.full((2, 2), 2.0), -10.0, np.array([0, 0, 1.0]))

    def cost(p, q):
        frames = forward_kinematics(model, q).frames
        e = log_map(p.rotations @ np.swapaxes(frames[:, segments, :3, :3], -1, -2))
        total = 0.5 * np.einsum("r,fri,fri->f", weights, e, e)
        for seg, loc, tgt, w in ((point_segments, point_local, p.point_targets, p.point_weight),
                                 (contact_segments, contact_local, p.contact_targets, p.contact_weight)):
            d = tgt - _points(frames, seg, loc)
            total += 0.5 * np.einsum("fe,fei,fei->f", w, d, d)
        return total

    far = problem(exp_map(rng.normal(size=(2, R, 3))), rng.normal(size=(2, E, 3)), rng.normal(size=(2, 2, 3)))
    index = np.arange(2)
    masks = model.moves[:, segments].astype(float)
    system = System(far, q0, index, (masks * weights) @ masks.T)
    gradient = numerical_jacobian(lambda q: cost(far, q), q0)
    assert relative_difference(system.g, -gradient) < 1e-6

    frames = forward_kinematics(model, q0).frames
    at = problem(frames[:, segments, :3, :3], _points(frames, point_segments, point_local),
                 _points(frames, contact_segments, contact_local))
    hessian = numerical_jacobian(lambda q: -System(at, q, index, (masks * weights) @ masks.T).g, q0)
    assert relative_difference(System(at, q0, index, (masks * weights) @ masks.T).H, hessian) < 1e-5

    pose = forward_kinematics(model, q0)
    contacts = _points(pose.frames, contact_segments, contact_local)
    J = numerical_jacobian(lambda q: _points(forward_kinematics(model, q).frames, contact_segments, contact_local), q0)
    assert relative_difference(system.J_contacts, J) < 1e-6
    assert relative_difference(point_jacobian(model, pose, contact_segments, contacts)[:, :, :3], J) < 1e-6


def with_channel(source: Source, role: str, **change) -> Source:
    rotations, heads = dict(source.rotations), dict(source.heads)
    if "rotation" in change:
        rotations[role] = change["rotation"]
    if "head" in change:
        heads[role] = change["head"]
    rotations = {r: v for r, v in rotations.items() if v is not None}
    heads = {r: v for r, v in heads.items() if v is not None}
    return Source(rotations, heads, source.fps)


def test_bad_input_is_named():
    source, target = walk_source(12), walk_target()
    nan = np.array(source.heads["shin.L"])
    nan[4] = np.nan
    cases = [
        (with_channel(source, "shin.L", head=nan), target, {}, r"head of 'shin.L'.*frame\(s\) \[4\]"),
        (with_channel(source, "hand.R", head=None), target, {}, r"'hand.R' has a rotation channel but no head"),
        (with_channel(source, "thigh.R", rotation=None, head=None), target, {}, r"source lacks the role\(s\) \['thigh.R'\]"),
        (Source({r: v[:0] for r, v in source.rotations.items()}, {r: v[:0] for r, v in source.heads.items()}),
         target, {}, "zero frames"),
        (source, Target(target.bones, {r: b for r, b in target.roles.items() if not r.startswith("shin")}), {},
         r"target lacks the role\(s\) \['shin.L', 'shin.R'\]"),
        (with_channel(source, "toe.L", rotation=None, head=None), target, {},
         r"target maps role\(s\) \['toe.L'\] that the source does not have"),
        (source, Target(target.bones, {**target.roles, "neck": "no_such_bone"}), {}, "'neck' is mapped to 'no_such_bone'"),
        (source, Target(target.bones, {**target.roles, "tail": "head"}), {}, "unknown target role 'tail'"),
        (source, target, {"contacts": {"heel.X": []}}, r"unknown contact point\(s\) \['heel.X'\]"),
        (source, target, {"contacts": {"heel.L": [Span(5, 12)]}}, "runs past the source's last frame 11"),
        (source, target, {"contacts": {"heel.L": [Span(1, 5), Span(4, 8)]}}, "overlap"),
        (source, target, {"calibration_frame": 12}, "calibration frame 12"),
        (source, target, {"method": "naive"}, "method must be 'ik' or 'copy'"),
        (source, Target(target.bones, target.roles, (ContactPoint("tip", "toe.X", (0, 0, 0)),)), {}, "toe.X"),
    ]
    for bad_source, bad_target, options, message in cases:
        with pytest.raises(ValueError, match=message):
            retarget(bad_source, bad_target, **options)
    rotations = dict(source.rotations)
    rotations["head"] = rotations["head"] * 2.0
    with pytest.raises(ValueError, match="rotation of 'head' is not a rotation"):
        retarget(Source(rotations, source.heads, source.fps), target)
    with pytest.raises(ValueError, match="Span|span"):
        Span(5, 2)


def test_roles_are_a_tree():
    from solver.retarget import ROLE_PARENT
    assert set(ROLE_PARENT) == set(ROLES)
    for role in ROLES:
        seen, r = set(), role
        while r is not None:
            assert r not in seen
            seen.add(r)
            r = ROLE_PARENT[r]
        assert "hips" in seen


def test_heel_and_ball_are_rigid_with_float32_rests():
    """Rest matrices rounded to float32 (as Blender stores bone matrices, a few 1e-7 from a
    rotation) still make each foot's heel and ball one rigid pair, and the other pairs not."""
    from dataclasses import replace

    from solver.retarget.retarget import _rigid_links

    target = walk_target()
    rounded = [replace(b, matrix=np.asarray(b.matrix, float).astype(np.float32).astype(float)
                       @ np.diag([1.0 + 3e-7, 1.0, 1.0 - 3e-7, 1.0])) for b in target.bones]
    target = replace(target, bones=rounded)
    points = target.points()
    rigid, _ = _rigid_links(target_model(target), points)
    names = [p.name for p in points]
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            same_foot = i != j and a.rsplit(".", 1)[-1] == b.rsplit(".", 1)[-1] and "toe_tip" not in a + b
            assert rigid[i, j] == same_foot, (a, b)


@pytest.mark.parametrize("degrees", [180.0, 120.0, -75.0])
def test_a_source_turned_about_up_gives_the_same_retarget_turned(walk, degrees):
    """The walk turned as a whole about the vertical (a clip facing +Y onto a rig facing -Y, and
    other turns past 45 degrees): the same spans, and every bone's pose is the unturned result's
    turned by the same rotation about the origin (source and result turn together), so the
    target faces where the source faces instead of keeping its rest heading."""
    target, base = walk
    source = walk_source(F)
    Q = exp_map(np.array([0.0, 0.0, np.radians(degrees)]))
    turned = Source({r: Q @ R for r, R in source.rotations.items()}, {r: h @ Q.T for r, h in source.heads.items()},
                    source.fps)
    result = retarget(turned, target)
    assert result.contacts == base.contacts
    assert np.isclose(result.calibration.turn, np.radians(degrees), atol=1e-9)
    Q4 = np.eye(4)
    Q4[:3, :3] = Q
    moved = [i for i, name in enumerate(result.bone_names) if name != "root"]       # the unmapped root stays
    difference = np.abs(result.world[:, moved] - Q4 @ base.world[:, moved])
    assert difference[..., :3, 3].max() < 1e-6 and difference[..., :3, :3].max() < 1e-6, difference.max()
    assert_held(target, result)


def test_small_heading_differences_keep_the_shortest_arcs(walk):
    """A source turned 30 degrees (under TURN_BEYOND) is calibrated by shortest arcs alone."""
    target, _ = walk
    source = walk_source(F)
    Q = exp_map(np.array([0.0, 0.0, np.radians(30.0)]))
    turned = Source({r: Q @ R for r, R in source.rotations.items()}, {r: h @ Q.T for r, h in source.heads.items()},
                    source.fps)
    calibration = calibrate(turned, target, 0)
    assert calibration.turn == 0.0
    for role in target.roles:
        assert np.abs(calibration.desired_rotations(turned)[role] - calibrated(turned, target, role)).max() < 1e-9


def test_a_raised_sloping_floor_is_fitted_and_kept():
    """The walk on a floor raised 0.3 m and tilted 2 degrees about X (the walk climbs along -Y):
    the fitted floor reports the clip's height and slope, every contact point stays on or above
    the tilted plane, pins lie on it, and the retarget is the level one tilted and raised (pins
    within a millimetre: the calibration's shortest arcs, taken about `up`, turn the tilted
    clip's bones by slightly other offsets)."""
    from solver.rotations import axis_angle_matrix

    flat_source, target = walk_source(F), walk_target()
    T, lift = axis_angle_matrix(np.array([1.0, 0.0, 0.0]), np.radians(2.0)), np.array([0.0, 0.0, 0.3])
    tilted = Source(rotations={r: T @ R for r, R in flat_source.rotations.items()},
                    heads={r: h @ T.T + lift for r, h in flat_source.heads.items()}, fps=flat_source.fps)
    flat, result = retarget(flat_source, target), retarget(tilted, target)
    below_hips = 0.3 + tilted.heads["hips"][0, 1] * np.tan(np.radians(2.0))     # the tilted floor under the hips
    assert abs(result.source_floor - flat.source_floor - below_hips) < 1e-3
    assert abs(np.degrees(result.floor_slope) - 2.0) < 0.02 and np.degrees(flat.floor_slope) < 0.02
    assert np.abs(result.ground.normal - T[:, 2]).max() < 3.5e-4                # within 0.02 degree
    assert_held(target, result)
    assert result.contacts == flat.contacts
    # Source points map by p -> o + k (p - o), o the hips' ground point at the start: the tilted
    # clip's map is the level one's tilted, plus (1 - k) (o' - T o) + k lift.
    k = result.scale
    o, o_tilted = (h["hips"][0] * [1.0, 1.0, 0.0] for h in (flat_source.heads, tilted.heads))
    for name in result.contacts:
        for a, b in zip(result.pins[name], flat.pins[name]):
            assert np.linalg.norm(a - (T @ b + (1 - k) * (o_tilted - T @ o) + k * lift)) < 1e-3, name
    # The same clip put on a level floor at 0: its height below the hips' start is 0, slope kept.
    placed = retarget(tilted, target, floor=0.0)
    assert abs(placed.floor) < 1e-12 and abs(placed.floor_slope - result.floor_slope) < 1e-12
    assert_held(target, placed)


def test_heel_off_the_heel_lets_go_and_the_foot_pivots_as_the_source():
    """The walk with each heel lifting about the planted ball over the last 6 stance frames (to
    20 degrees of pitch): the heel's spans end on the last flat frame (within one), the balls'
    stay the planted frames, and while the ball holds, the rig's foot turns from its flat pose as
    the source's does (within half a degree), its heel above the floor; pins and floor hold."""
    from tests.apps.retarget_walk import STANCE, heel_pitch
    source, target = walk_source(F, heel_off=(6, 20.0)), walk_target()
    result = retarget(source, target)
    assert_held(target, result)
    pose = blender_fk(target, result)
    heel = contact_paths(target, result)
    for side in "LR":
        pitch = heel_pitch(F, SIDE[side], (6, 20.0))
        truth = true_spans(F, SIDE[side])
        heels, balls = result.contacts[f"heel.{side}"], result.contacts[f"ball.{side}"]
        assert len(heels) == len(balls) == len(truth)
        foot = pose[f"foot.{side}"][:, :3, :3]
        checked = 0
        for found, ball, true in zip(heels, balls, truth):
            if true.end - true.start + 1 < STANCE:
                continue                                  # a stance the clip cuts short
            assert ball == true, (side, ball, true)
            flat = true.end - 6                           # the last frame of the flat foot
            assert abs(found.end - flat) <= 1 and abs(found.start - true.start) <= 1, (side, found, true)
            for t in range(flat + 1, true.end + 1):
                turn = foot[t] @ foot[flat].T
                angle = np.degrees(np.linalg.norm(log_map(turn.T @ exp_map(np.array([pitch[t], 0.0, 0.0])))))
                assert angle < 0.5, (side, t, angle)
                assert result.ground.height(heel[f"heel.{side}"][t]) > 0.005
            checked += 1
        assert checked >= 2

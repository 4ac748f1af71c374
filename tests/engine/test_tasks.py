"""A = Cq - Cf Jf^-1 Jq and B = Cf Jf^-1 Ju against finite differences of the closed loop: the
conformance test every task kind runs through (`CASES`), and each kind's own checks."""

import inspect

import numpy as np
import pytest

from solver import tasks as task_kinds
from solver.bones import Bone, model_from_bones
from solver.bones import rest_matrix as bone_rest
from solver.tasks.pole import at_head
from solver.tasks import CoordinateCoupler, CopyPose, Distance, JointValue, Pole, Task, on_object, on_segment
from solver.finite_differences import numerical_jacobian, relative_difference
from solver.scene import Scene
from solver.simulation import advance
from tests.random_models import random_transform, random_tree


def outputs(scene, q, objects, bases):
    return scene.evaluate(q, objects, bases, jacobians=False).y


def check_scene(scene, rng, F=3):
    model = scene.model
    q = rng.uniform(-1.0, 1.0, size=(F, model.n_coordinates))
    objects = np.array([[random_transform(rng) for _ in range(scene.n_objects)] for _ in range(F)]).reshape(F, -1, 4, 4)
    bases = np.stack([np.stack([random_transform(rng) for _ in range(model.n_armatures)]) for _ in range(F)])
    ev = scene.evaluate(q, objects, bases)

    dy_dq = numerical_jacobian(lambda x: outputs(scene, x, objects, bases), q)
    assert relative_difference(ev.A, dy_dq) < 1e-6

    # With q fixed, A q' = y' + B Xu' says y' = -B Xu': move each object / base along one twist.
    def moved(eps, which, twist):
        obj, bas = objects.copy(), bases.copy()
        k = which // 6
        unit = np.zeros(6)
        unit[which % 6] = 1.0
        if k < scene.n_objects:
            obj[:, k] = advance(objects[:, k], np.broadcast_to(unit, (F, 6)), eps)
        else:
            bas[:, k - scene.n_objects] = advance(bases[:, k - scene.n_objects], np.broadcast_to(unit, (F, 6)), eps)
        return outputs(scene, q, obj, bas)

    h = 1e-6
    dy_du = np.stack([(moved(h, u, None) - moved(-h, u, None)) / (2 * h) for u in range(scene.n_u)], axis=-1)
    assert relative_difference(-ev.B, dy_du) < 1e-6


def _copy_pose_scene(rng):
    model = random_tree(rng, 6)
    task = CopyPose(on_segment(5, rng.normal(size=3)), on_object(0, random_transform(rng)), rotation=(True,) * 3)
    return Scene(model, [task], n_objects=1)


def _clamped_copy_pose_scene(rng):
    """Clamped position error (iTaSC's feedback clamp), points-only and with rotation, the
    clamp small enough that random poses lie beyond it."""
    model = random_tree(rng, 6)
    tasks = [CopyPose(on_segment(5, rng.normal(size=3)), on_object(0), clamp=0.05),
             CopyPose(on_segment(4), on_object(1, random_transform(rng)), rotation=(True, False, True), clamp=0.1)]
    return Scene(model, tasks, n_objects=2)


def _distance_scene(rng):
    model = random_tree(rng, 6)
    return Scene(model, [Distance(on_segment(5, rng.normal(size=3)), on_object(0), radius=0.5)], n_objects=1)


def _joint_value_scene(rng):
    model = random_tree(rng, 6)
    while not model.n_coordinates:
        model = random_tree(rng, 6)
    return Scene(model, [JointValue(int(rng.integers(model.n_coordinates)), value=0.2, weight=2.0)])


def _coordinate_coupler_scene(rng):
    model = random_tree(rng, 6)
    while model.n_coordinates < 2:
        model = random_tree(rng, 6)
    dependent, independent = rng.choice(model.n_coordinates, size=2, replace=False)

    class Cubic:
        def value_and_derivative(self, x):
            return 0.3 * x ** 3 - x + 0.2, 0.9 * x ** 2 - 1.0

    return Scene(model, [CoordinateCoupler(int(dependent), int(independent), Cubic(), weight=3.0)])


def _pole_scene(rng):
    model = random_tree(rng, 6)
    task = Pole(on_segment(2, rng.normal(size=3)), on_segment(5, rng.normal(size=3)), on_object(0), on_object(1),
                pole_angle=rng.uniform(-np.pi, np.pi), weight=0.7)
    return Scene(model, [task], n_objects=2)


def _poles_scene(rng):
    """Three poles on different chains: they evaluate as one batch (Pole.batch)."""
    model = random_tree(rng, 8)
    poles = [Pole(on_segment(r, rng.normal(size=3)), on_segment(e, rng.normal(size=3)), on_object(2 * i),
                  on_object(2 * i + 1), pole_angle=rng.uniform(-np.pi, np.pi), weight=0.5 + i)
             for i, (r, e) in enumerate(((0, 3), (1, 7), (4, 6)))]
    return Scene(model, poles, n_objects=6)


def _stretching_chain(rng, n_bones):
    """A chain of free bones that stretch (IK stretch: a sphere and a prismatic joint along Y each),
    bent at random at rest; the model and each bone's stretch coordinate."""
    bones, head, parent = [], np.zeros(3), None
    for i in range(n_bones):
        tail = head + rng.normal(size=3) * 0.3 + np.array([0.0, 0.0, 1.0])
        bones.append(Bone(f"b{i}", bone_rest(head, tail, rng.uniform(-1, 1)), float(np.linalg.norm(tail - head)),
                          parent, stretch=0.3))
        head, parent = tail, f"b{i}"
    model = model_from_bones(bones)
    stretch = {model.names[model.joint_segment[j]]: int(model.joint_first[j])
               for j, joint in enumerate(model.joints) if joint.kind == "prismatic"}
    return model, [stretch[b.name] for b in bones]


def _stretching_poles_scene(rng):
    """Poles whose root bone stretches: the apex is the root's head, off its segment frame by the
    stretch (Pole.root_stretch); one alone and two in a batch."""
    model, stretch = _stretching_chain(rng, 3)
    poles = [Pole(on_segment(0), on_segment(2, (0.0, model.length[2], 0.0)), on_object(2 * i), on_object(2 * i + 1),
                  pole_angle=rng.uniform(-np.pi, np.pi), weight=0.5 + i, root_stretch=stretch[0])
             for i in range(2)]
    return Scene(model, poles, n_objects=4)


def _stretching_pole_scene(rng):
    model, stretch = _stretching_chain(rng, 3)
    task = Pole(on_segment(0, (0.1, -0.2, 0.05)), on_segment(2, (0.0, model.length[2], 0.0)), on_object(0),
                on_object(1), pole_angle=rng.uniform(-np.pi, np.pi), weight=0.7, root_stretch=stretch[0])
    return Scene(model, [task], n_objects=2)


# Every task kind and a scene that uses it: a new kind of task adds one line here.
CASES = [(CopyPose, _copy_pose_scene), (CopyPose, _clamped_copy_pose_scene), (Distance, _distance_scene),
         (JointValue, _joint_value_scene), (Pole, _pole_scene), (Pole, _poles_scene),
         (Pole, _stretching_pole_scene), (Pole, _stretching_poles_scene),
         (CoordinateCoupler, _coordinate_coupler_scene)]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind, scene", CASES, ids=[build.__name__.strip("_") for _, build in CASES])
def test_task_conformance(kind, scene, seed):
    rng = np.random.default_rng(300 + seed)
    built = scene(rng)
    assert {type(c) for c in built.constraints} == {kind}
    check_scene(built, rng)


@pytest.mark.parametrize("kind, scene", CASES, ids=[build.__name__.strip("_") for _, build in CASES])
def test_errors_from_frames_are_the_scenes(kind, scene):
    """Task.errors on its endpoints' frames (how Blender's evaluation is measured) gives the
    errors the scene reports, for every task with endpoints."""
    rng = np.random.default_rng(400)
    built = scene(rng)
    model, F = built.model, 3
    q = rng.uniform(-1.0, 1.0, size=(F, model.n_coordinates))
    objects = np.array([[random_transform(rng) for _ in range(built.n_objects)] for _ in range(F)]).reshape(F, -1, 4, 4)
    ev = built.evaluate(q, objects, jacobians=False)
    for k, task in enumerate(built.constraints):
        if not task.endpoints():
            continue
        frames = [(ev.pose.frames[:, e.segment] if e.segment >= 0 else objects[:, e.obj]) @ e.offset
                  for e in task.endpoints()]
        if getattr(task, "root_stretch", None) is not None:    # Blender's frame of the root bone: at its head
            frames[0] = at_head(frames[0], None, q[:, task.root_stretch], task.root_stretch)[0]
        position, rotation, asks, per_length, per_turn = task.errors(frames)
        assert (per_length >= 0).all() and (per_turn >= 1.0 - 1e-12).all()
        np.testing.assert_allclose(position, ev.position_error[:, k], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(rotation, ev.rotation_error[:, k], rtol=1e-12, atol=1e-12)
        rows = slice(built.rows[k], built.rows[k + 1])
        assert np.array_equal(asks, ev.task_weight[:, rows].max(axis=1) > 0)


def test_every_task_kind_has_a_conformance_case():
    kinds = {k for k in vars(task_kinds).values()
             if isinstance(k, type) and issubclass(k, Task) and not inspect.isabstract(k)}
    assert kinds == {kind for kind, _ in CASES}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("reference", ["effector", "target"])
def test_copy_pose_between_bone_and_object(seed, reference):
    rng = np.random.default_rng(seed)
    model = random_tree(rng, 6)
    tip = on_segment(5, rng.normal(size=3))
    axes = rng.random(6) < 0.7
    axes[0] = True
    task = CopyPose(tip, on_object(0, random_transform(rng)), position=axes[:3], rotation=axes[3:],
                    reference=reference, weight=0.7, orient_weight=0.3)
    check_scene(Scene(model, [task], n_objects=1), rng)


@pytest.mark.parametrize("seed", range(4))
def test_copy_pose_between_bones_of_two_armatures(seed):
    rng = np.random.default_rng(100 + seed)
    model = random_tree(rng, 8, n_armatures=2)
    a, b = 6, 7  # segments 6 and 7 belong to armatures 0 and 1
    task = CopyPose(on_segment(a, rng.normal(size=3)), on_segment(b, rng.normal(size=3)), rotation=(True,) * 3)
    check_scene(Scene(model, [task]), rng)


@pytest.mark.parametrize("seed", range(6))
def test_distance_and_joint_value(seed):
    rng = np.random.default_rng(200 + seed)
    model = random_tree(rng, 6)
    tasks = [Distance(on_segment(4, rng.normal(size=3)), on_object(0), radius=0.5, mode="surface"),
             Distance(on_segment(5), on_segment(2, rng.normal(size=3)), radius=0.1, mode="surface"),
             CopyPose(on_segment(3), on_object(1), rotation=(True, False, True))]
    if model.n_coordinates:
        tasks.append(JointValue(int(rng.integers(model.n_coordinates)), value=0.2, weight=2.0))
    check_scene(Scene(model, tasks, n_objects=2), rng)


def test_features_and_their_jacobian():
    """Jf maps Xf' to the relative twist of the tip in the base frame: check by moving the tip."""
    rng = np.random.default_rng(7)
    points = CopyPose(on_object(0), on_object(1))
    base, tip = random_transform(rng)[None], random_transform(rng)[None]
    np.testing.assert_allclose(points.features(base, tip)[0], np.r_[tip[0, :3, 3] - base[0, :3, 3], 0, 0, 0])
    for task in (CopyPose(on_object(0), on_object(1), rotation=(True,) * 3),
                 Distance(on_object(0), on_object(1), radius=1.0)):
        base = random_transform(rng)[None]
        tip = random_transform(rng)[None]
        Xf = task.features(base, tip)
        Jf = task.feature_jacobian(base, tip)
        for k in range(6):
            twist_base = np.zeros((1, 6))
            twist_base[0, k] = 1.0
            # A tip twist given in base coordinates at the tip point, mapped to world.
            R = base[0, :3, :3]
            world = np.concatenate([R @ twist_base[0, :3], R @ twist_base[0, 3:]])[None]
            h = 1e-6
            dX = (task.features(base, advance(tip, world, h)) - task.features(base, advance(tip, world, -h))) / (2 * h)
            if isinstance(task, Distance):
                # Only d = Xf[2] is defined independently of the re-chosen reference frame.
                assert abs(dX[0, 2] - np.linalg.solve(Jf[0], twist_base[0])[2]) < 1e-6
            else:
                np.testing.assert_allclose(Jf[0] @ dX[0], twist_base[0], atol=1e-6)
        assert np.isfinite(Xf).all()


def test_distance_outputs_by_mode():
    base = np.eye(4)[None].repeat(3, 0)
    tip = base.copy()
    tip[:, 0, 3] = [0.5, 1.0, 2.0]
    for mode, active in (("inside", [False, False, True]), ("outside", [True, False, False]),
                         ("surface", [True, True, True])):
        task = Distance(on_object(0), on_object(1), radius=1.0, mode=mode)
        y, yd, w, pos, rot = task.outputs(task.features(base, tip))
        np.testing.assert_allclose(y[:, 0], [0.5, 1.0, 2.0])
        assert np.array_equal(w[:, 0] > 0, active)
        np.testing.assert_allclose(pos, np.where(active, np.abs(y[:, 0] - 1.0), 0.0))


def test_bad_constraint_settings_are_rejected_with_names():
    with pytest.raises(ValueError, match="reach"):
        CopyPose(on_object(0), on_object(1), position=(False,) * 3, name="reach")
    with pytest.raises(ValueError, match="radius"):
        Distance(on_object(0), on_object(1), radius=float("nan"))
    with pytest.raises(ValueError, match="weight"):
        CopyPose(on_object(0), on_object(1), weight=float("inf"))
    with pytest.raises(ValueError, match="not in the scene"):
        Scene(random_tree(np.random.default_rng(0), 2), [CopyPose(on_segment(5), on_object(0))], n_objects=1)


@pytest.mark.parametrize("ratio", [0.25, 0.6, 0.9])
def test_clamped_targets_settle_where_the_clamped_feedback_balances(ratio):
    """Two position targets 1 apart pull one tail with weights 1 and ratio^2, each clamped at
    m = 0.5: where the tail lies between them, -f + ratio^2 min(1 - f, m) = 0, so f = ratio^2 m
    while 1 - f > m (where Blender 5.0.1's iTaSC puts the tail of a chain of unit bones with IK
    weights 1 and `ratio`: measured 0.03125, 0.18001, 0.40534)."""
    from solver import Settings, model_from_bones, solve_animation
    from solver.examples import straight_chain
    model = model_from_bones(straight_chain(3))
    tail = on_segment(2, (0.0, 1.0, 0.0))
    tasks = [CopyPose(tail, on_object(0), weight=1.0, clamp=0.5, name="strong"),
             CopyPose(tail, on_object(1), weight=ratio**2, clamp=0.5, name="weak")]
    scene = Scene(model, tasks, n_objects=2)
    targets = np.broadcast_to(np.eye(4), (1, 2, 4, 4)).copy()
    targets[0, 0, :3, 3], targets[0, 1, :3, 3] = (1.0, 0.0, 2.0), (1.0, 1.0, 2.0)
    q0 = model.neutral(1) + 0.1
    result = solve_animation(scene, q0, targets, settings=Settings(precision=1e-10, max_iterations=1000))
    pose = scene.evaluate(result.q, targets, jacobians=False)
    f = result.position_error[0, 0]
    np.testing.assert_allclose(f, ratio**2 * 0.5, atol=1e-7)
    np.testing.assert_allclose(result.position_error[0].sum(), 1.0, atol=1e-7)   # on the segment between them
    assert np.isfinite(pose.y).all()

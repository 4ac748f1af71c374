"""One frame (F = 1, solver/one_frame.py) evaluates as the batched path does: every output of
Scene.evaluate at F = 1 equals the same frame's row of a batched (F = 4) evaluation to rounding,
on random rigs of every joint kind (multi-joint segments, post transforms, several armatures,
armature bases, endpoint offsets), every task kind, missing objects and rotation vectors at zero."""

import numpy as np
import pytest

from solver.scene import Scene
from solver.tasks import CopyPose, Distance, JointValue, Pole, on_object, on_segment
from tests.engine.test_tasks import CASES
from tests.random_models import random_transform, random_tree

FIELDS = ("y", "yd", "task_weight", "position_error", "rotation_error", "A", "B")


def _mixed_scene(rng):
    """Every task kind on one random tree of two armatures, with segment-to-segment loops."""
    model = random_tree(rng, 10, n_armatures=2)
    while not model.n_coordinates:
        model = random_tree(rng, 10, n_armatures=2)
    tasks = [CopyPose(on_segment(9, rng.normal(size=3)), on_object(0), name="points"),
             CopyPose(on_segment(3), on_object(1, random_transform(rng)), rotation=(True,) * 3, name="pose"),
             CopyPose(on_segment(5), on_object(0), position=(True, False, True), rotation=(False, True, False),
                      reference="target", name="partial"),
             CopyPose(on_segment(8, rng.normal(size=3)), on_object(2), clamp=0.1, name="clamped"),
             CopyPose(on_segment(1, rng.normal(size=3)), on_segment(7), name="loop"),
             Distance(on_segment(6), on_object(1), 0.5, name="distance"),
             JointValue(0, 0.3, 0.5, name="value"),
             Pole(on_segment(0), on_segment(4, rng.normal(size=3)), on_object(2), on_object(3), pole_angle=0.4),
             Pole(on_segment(2), on_segment(9), on_object(0), on_object(3), pole_angle=-1.0)]
    return Scene(model, tasks, n_objects=4)


SCENES = [build for _, build in CASES] + [_mixed_scene]


def _inputs(scene, rng, F=4):
    """q of F frames: the rest pose, then rotation vectors near zero (rotations' series), then random."""
    model = scene.model
    q = rng.uniform(-1.5, 1.5, size=(F, model.n_coordinates))
    q[0] = 0.0
    q[1] *= 1e-6
    objects = np.array([[random_transform(rng) for _ in range(scene.n_objects)]
                        for _ in range(F)]).reshape(F, -1, 4, 4)
    bases = np.stack([np.stack([random_transform(rng) for _ in range(model.n_armatures)]) for _ in range(F)])
    values = rng.uniform(-1, 1, size=(F, scene.n_values)) if scene.n_values else None
    return q, objects, bases, values


def _assert_close(one, batched, what):
    assert one.shape == batched.shape, what
    assert np.array_equal(np.isnan(one), np.isnan(batched)), what
    scale = max(np.nanmax(np.abs(batched), initial=0.0), 1.0)
    difference = np.nanmax(np.abs(one - batched), initial=0.0)
    assert difference <= 1e-12 * scale, f"{what}: {difference:.3g} (scale {scale:.3g})"


def _compare(scene, q, objects, bases, values):
    F = q.shape[0]
    for jacobians in (True, "A", False):
        batched = scene.evaluate(q, objects, bases, jacobians=jacobians, values=values)
        for f in range(F):
            pick = lambda a: None if a is None else a[f:f + 1]            # noqa: E731
            one = scene.evaluate(q[f:f + 1], pick(objects), pick(bases), jacobians=jacobians, values=pick(values),
                                 one_frame=True)
            for field in FIELDS:
                a, b = getattr(one, field), getattr(batched, field)
                if b is None:
                    assert a is None, field
                    continue
                b = np.broadcast_to(b, (F,) + np.shape(a)[1:])[f:f + 1]
                _assert_close(np.broadcast_to(a, b.shape), b, f"{field} frame {f} jacobians={jacobians}")
            for field in ("frames", "direction", "pivot", "local"):
                _assert_close(getattr(one.pose, field), getattr(batched.pose, field)[f:f + 1], f"pose.{field}")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("build", SCENES, ids=[b.__name__.strip("_") for b in SCENES])
def test_one_frame_equals_the_batched_frame(build, seed):
    rng = np.random.default_rng(700 + seed)
    scene = build(rng)
    _compare(scene, *_inputs(scene, rng))
    assert scene._one_frame is not None                      # the F = 1 path did run


@pytest.mark.parametrize("seed", range(3))
def test_one_frame_with_missing_objects(seed):
    """An object without a finite pose leaves its tasks out of that frame, at F = 1 as batched."""
    rng = np.random.default_rng(800 + seed)
    scene = _mixed_scene(rng)
    q, objects, bases, values = _inputs(scene, rng)
    objects[0, 1] = np.nan
    objects[2, 3, 0, 3] = np.inf
    values[1, 0] = np.nan
    _compare(scene, q, objects, bases, values)
    one = scene.evaluate(q[:1], objects[:1], bases[:1], values=values[:1], one_frame=True)
    assert np.isnan(one.position_error[0, 1]) and (one.task_weight[0, scene.rows[1]:scene.rows[2]] == 0).all()


def test_one_frame_without_bases_or_objects():
    rng = np.random.default_rng(5)
    model = random_tree(rng, 7)
    scene = Scene(model, [CopyPose(on_segment(6, rng.normal(size=3)), on_segment(2), rotation=(True,) * 3)])
    q = rng.normal(size=(2, model.n_coordinates))
    _compare(scene, q, None, None, None)


def test_one_frame_of_a_model_without_coordinates():
    """Tasks between objects only (a jointless segment): nothing moves, A has no columns."""
    from solver.model import Model, Segment
    rng = np.random.default_rng(11)
    model = Model([Segment("root", rest=random_transform(rng), length=1.0)])
    tasks = [CopyPose(on_object(0), on_object(1), rotation=(True,) * 3),
             Pole(on_segment(0), on_object(0), on_object(1), on_object(2), pole_angle=0.3)]
    scene = Scene(model, tasks, n_objects=3)
    assert model.n_coordinates == 0
    _compare(scene, *_inputs(scene, rng))


def test_a_coupled_scene_evaluates_one_frame_by_the_batched_code():
    """A scene with a coupling (theta = C q) has no one-frame plan: one_frame=True gives the
    batched code's evaluation exactly."""
    rng = np.random.default_rng(13)
    model = random_tree(rng, 6)
    while model.n_coordinates < 2:
        model = random_tree(rng, 6)
    C = rng.normal(size=(model.n_coordinates, 2))

    class Linear:
        n_coordinates, lower, upper, locked = 2, np.full(2, -np.inf), np.full(2, np.inf), np.zeros(2, bool)

        def dofs(self, q):
            return q @ C.T

        def jacobian(self, q):
            return np.broadcast_to(C, (q.shape[0],) + C.shape)

    scene = Scene(model, [CopyPose(on_segment(5, rng.normal(size=3)), on_object(0), rotation=(True,) * 3)],
                  n_objects=1, coupling=Linear())
    q = rng.normal(size=(1, 2))
    objects = random_transform(rng)[None, None]
    one = scene.evaluate(q, objects, one_frame=True)
    batched = scene.evaluate(q, objects)
    assert scene._one_frame is None
    for field in FIELDS:
        assert np.array_equal(getattr(one, field), getattr(batched, field), equal_nan=True), field

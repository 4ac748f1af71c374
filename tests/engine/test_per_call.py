"""The shortcuts that keep a single-frame solve cheap give exactly what the full computation gives."""

import numpy as np
import pytest

from solver import Settings, simulate_frame, solve_simulation
from solver.tasks import CopyPose, Distance, JointValue, on_object, on_segment
from solver.examples import lissajous, reach_scene, straight_chain
from solver.scene import Evaluation, Scene
from solver.update import reached
from tests.random_models import random_transform, random_tree


def mixed_scene(rng):
    """Two armatures, two objects, and every kind of task: points only, pose with rotation, a
    joint value between them, a distance, and a bone-to-bone link across the armatures."""
    model = random_tree(rng, 8, n_armatures=2)
    tasks = [CopyPose(on_segment(3, (0, 0.5, 0)), on_object(0), name="point"),
             JointValue(1, 0.2, weight=0.5, name="value"),
             CopyPose(on_segment(5), on_object(1), rotation=(True, False, True), reference="target", name="pose"),
             Distance(on_segment(2), on_object(1), 0.7, name="distance"),
             CopyPose(on_segment(6), on_segment(1), rotation=(True, True, True), name="link")]
    return Scene(model, tasks, n_objects=2)


@pytest.mark.parametrize("seed", range(4))
def test_a_only_evaluation_is_the_full_one_without_b(seed):
    rng = np.random.default_rng(seed)
    scene = mixed_scene(rng)
    F = 3
    q = rng.uniform(-1, 1, size=(F, scene.n_coordinates))
    objects = np.stack([[random_transform(rng) for _ in range(2)] for _ in range(F)])
    objects[1, 0, 0, 3] = np.nan                                 # a missing object in frame 1
    bases = np.stack([[random_transform(rng, 0.3) for _ in range(2)] for _ in range(F)])
    full = scene.evaluate(q, objects, bases)
    a_only = scene.evaluate(q, objects, bases, jacobians="A")
    assert a_only.B is None and full.B.shape == (F, scene.n_outputs, scene.n_u)
    for name in ("y", "yd", "task_weight", "position_error", "rotation_error", "A"):
        assert np.array_equal(getattr(full, name), getattr(a_only, name), equal_nan=True), name


def reached_one_by_one(scene, ev, precision):
    """The definition: every constraint with a target (not joint values), unless all its rows
    have weight 0, has position and rotation errors NaN or within precision."""
    ok = np.ones(ev.y.shape[0], dtype=bool)
    for k, c in enumerate(scene.constraints):
        if isinstance(c, JointValue):
            continue
        ignored = np.max(ev.task_weight[:, scene.rows[k]:scene.rows[k + 1]], axis=1) == 0
        for err in (ev.position_error[:, k], ev.rotation_error[:, k]):
            ok &= ignored | np.isnan(err) | (err <= precision)
    return ok


def test_reached_takes_each_constraint_on_its_own_rows():
    rng = np.random.default_rng(5)
    scene = mixed_scene(rng)
    F, C, M = 4000, len(scene.constraints), scene.n_outputs
    weight = np.where(rng.random((F, M)) < 0.5, 0.0, 1.0)
    errors = [np.where(rng.random((F, C)) < 0.2, np.nan, rng.uniform(0, 1.2e-5, (F, C))) for _ in range(2)]
    ev = Evaluation(np.zeros((F, M)), np.zeros((F, M)), weight, errors[0], errors[1], pose=None)
    expected = reached_one_by_one(scene, ev, 1e-5)
    assert 0 < expected.sum() < F                                # both outcomes occur
    assert np.array_equal(reached(scene, ev, 1e-5), expected)


@pytest.mark.parametrize("feedforward", [True, False])
def test_simulation_reusing_a_frames_last_evaluation_steps_exactly_as_without(feedforward):
    """A frame's final evaluation starts the next step only when values are not given per frame;
    values of shape (F, 0) (the scene has no joint-value tasks) turn that off and must change nothing."""
    scene = reach_scene(straight_chain(6))
    poses = lissajous(60, 6.0)
    settings = Settings(feedforward=feedforward)
    reused = solve_simulation(scene, scene.model.neutral(1), poses, settings=settings)
    fresh = solve_simulation(scene, scene.model.neutral(1), poses, settings=settings, values=np.zeros((60, 0)))
    assert np.array_equal(reused.q, fresh.q)
    assert np.array_equal(reused.iterations, fresh.iterations)
    assert np.abs(np.diff(reused.q, axis=0)).max() > 1e-3       # the chain did move


def test_a_long_animation_solved_in_blocks_is_each_block_solved_alone(monkeypatch):
    """More frames than a block holds are solved block by block: the same answer per frame as
    each block solved in a call of its own, with a missing target and a bad base on the way."""
    from solver import animation

    scene = reach_scene(straight_chain(4))
    monkeypatch.setattr(animation, "BLOCK_ENTRIES", 16 * scene.n_coordinates)     # blocks of 16 frames
    objects = lissajous(40, 4.0)
    objects[5, 0, 0, 3] = np.nan                                  # a target missing in block 0
    bases = np.broadcast_to(np.eye(4), (40, 1, 4, 4)).copy()
    bases[33, 0, 1, 3] = np.inf                                   # an unusable base in block 2
    q0 = np.zeros((40, scene.n_coordinates))
    whole = animation.solve_animation(scene, q0, objects, bases)
    for a in (0, 16, 32):
        alone = animation.solve_animation(scene, q0[a:a + 16], objects[a:a + 16], bases[a:a + 16])
        for name in ("q", "position_error", "rotation_error", "iterations", "converged", "sigma_min"):
            np.testing.assert_array_equal(getattr(whole, name)[a:a + 16], getattr(alone, name), err_msg=name)
    assert whole.q.shape == (40, scene.n_coordinates) and whole.frames.tolist() == list(range(40))
    assert not whole.converged[5] and not whole.converged[33] and whole.converged.sum() == 38


@pytest.mark.parametrize("feedforward", [True, False])
def test_a_simulation_continued_from_the_last_evaluation_is_the_same_simulation(feedforward):
    """Live preview's way: each call goes on from the previous call's last frame and passes its
    Result.evaluation as `start`. Frame by frame that gives what one call over all frames gives."""
    rng = np.random.default_rng(5)
    scene = mixed_scene(rng)
    F = 8
    objects = np.stack([[random_transform(rng, 0.2) for _ in range(2)] for _ in range(F)])
    bases = np.broadcast_to(np.stack([random_transform(rng, 0.3) for _ in range(2)]), (F, 2, 4, 4)).copy()
    settings = Settings(method="sdls", feedforward=feedforward, converge_first_frame=False)
    q0 = rng.uniform(-0.5, 0.5, scene.n_coordinates)
    whole = solve_simulation(scene, q0, objects, bases, settings)
    q, start = q0[None], None
    for f in range(1, F):
        step = solve_simulation(scene, q, objects[f - 1:f + 1], bases[f - 1:f + 1], settings, start=start)
        if start is not None:     # the same first evaluation as computing it again
            again = solve_simulation(scene, q, objects[f - 1:f + 1], bases[f - 1:f + 1], settings)
            assert np.array_equal(again.q, step.q)
        # The same step as one frame with checked inputs (simulate_frame): bitwise.
        q_frame, ev_frame = simulate_frame(scene, q, objects[f - 1:f + 1], bases[f - 1:f + 1], settings, start)
        assert np.array_equal(q_frame, step.q[-1:]) and np.array_equal(ev_frame.A, step.evaluation.A)
        assert np.array_equal(ev_frame.y, step.evaluation.y) and (ev_frame.B is None) == (step.evaluation.B is None)
        q, start = step.q[-1:], step.evaluation
        np.testing.assert_allclose(q[0], whole.q[f], rtol=0, atol=1e-12)
    assert start is not None and (start.B is not None) == feedforward


def test_a_frame_with_joint_values_is_the_simulations_frame_with_them():
    """simulate_frame's `values` (live preview's IK rotation control) act as solve_simulation's
    values of that frame: the same step bitwise, and the joint task aims at them."""
    rng = np.random.default_rng(6)
    scene = mixed_scene(rng)
    objects = np.stack([[random_transform(rng, 0.2) for _ in range(2)] for _ in range(2)])
    bases = np.broadcast_to(np.stack([random_transform(rng, 0.3) for _ in range(2)]), (2, 2, 4, 4)).copy()
    settings = Settings(method="sdls", converge_first_frame=False)
    q0 = rng.uniform(-0.5, 0.5, (1, scene.n_coordinates))
    values = np.array([[0.1], [0.7]])                       # the one JointValue task's target per frame
    whole = solve_simulation(scene, q0, objects, bases, settings, values=values)
    q_frame, ev_frame = simulate_frame(scene, q0, objects, bases, settings, values=values[1:])
    assert np.array_equal(q_frame, whole.q[1:])
    row = scene.rows[scene.value_tasks[0]]
    assert ev_frame.yd[0, row] == 0.7
    without = simulate_frame(scene, q0, objects, bases, settings)[0]
    assert np.abs(without - q_frame).max() > 1e-3                  # the values matter

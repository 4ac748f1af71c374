"""The update law's limit-locking step (update.weighted_step) on a stack of frames and on one
frame's arrays without a frame axis, against the locking written out frame by frame on numpy's
own pseudo-inverse."""

import numpy as np

from solver import Settings, update
from solver.examples import lissajous, reach_scene, straight_chain


def limited_chain():
    return reach_scene(straight_chain(4, lock=(False, True, False), limits=((-0.5, 0.9), None, (-0.3, 0.4)),
                                      stiffness=(0.2, 0.0, 0.5)))


def reference_step(scene, q, A, rhs, weight, max_step):
    """One frame's step: pinv of the weighted system on the free columns, scaled to max_step; the
    coordinates it takes past a limit put on the limit and locked, their motion taken out of the
    right-hand side, and the rest solved again. Returns dq and how many solves it took."""
    free = scene.joint_weight > 0
    locked = np.zeros(q.shape)
    root_w = np.sqrt(weight)
    for solves in range(1, q.size + 2):
        cols = scene.joint_weight * free
        x = cols * (np.linalg.pinv(root_w[:, None] * A * cols, rcond=1e-10) @ (root_w * (rhs - A @ locked)))
        x = x * min(1.0, max_step / max(np.abs(x).max(), 1e-300))
        moved = q + x + locked
        inside = scene.limit(moved[None])[0]
        hit = free & (inside != moved)
        if not hit.any():
            break
        locked = np.where(hit, scene.wrap(inside[None])[0] - q, locked)
        free = free & ~hit
    return scene.wrap(inside[None])[0] - q, solves


def test_the_step_of_a_stack_and_of_one_frame_is_the_locking_frame_by_frame():
    scene = limited_chain()
    rng = np.random.default_rng(5)
    F = 40
    q = scene.project(rng.uniform(-0.6, 0.6, (F, scene.n_coordinates)))
    targets = lissajous(F, 4) * 1.6
    targets[:, :, 3, 3] = 1.0
    ev = scene.evaluate(q, targets, jacobians="A")
    rhs = (ev.yd - ev.y) * rng.uniform(0.05, 2.0, (F, 1))
    max_step = rng.uniform(0.2, 0.6, F)
    solve = update.pseudoinverse_solver(scene, Settings(method="pinv"), "animation")
    dq, _ = update.weighted_step(scene, q, ev.A, rhs, ev.task_weight, max_step, solve)
    solves = []
    for f in range(F):
        expected, n = reference_step(scene, q[f], ev.A[f], rhs[f], ev.task_weight[f], max_step[f])
        solves.append(n)
        np.testing.assert_allclose(dq[f], expected, rtol=1e-9, atol=1e-12)
        alone, s_min = update.weighted_step(scene, q[f], ev.A[f], rhs[f], ev.task_weight[f], np.array(max_step[f]),
                                            solve)
        assert alone.shape == (scene.n_coordinates,) and np.shape(s_min) == ()
        np.testing.assert_allclose(alone, dq[f], rtol=1e-12, atol=1e-14)
    # frames that hit no limit, one, and more than one, side by side in the stack
    assert {1, 2} <= set(solves) and max(solves) > 2, solves

"""The Franka Panda model against its DH table, and 6-D pose IK with random restarts (solver.restarts).

Tolerance 1e-5 means: position error <= 1e-5 m and rotation error (angle of the relative
rotation) <= 1e-5 rad, both at once, checked here by our own forward kinematics.
"""

import numpy as np
import pytest

from solver import Settings, forward_kinematics, solve_animation
from solver.examples import PANDA_DH, PANDA_FLANGE, PANDA_LOWER, PANDA_UPPER, panda_arm, pose_scene
from solver.restarts import middle_of_limits, solve_with_restarts

TOLERANCE = 1e-5


def dh_product(q):
    """Flange pose by the modified-DH product, each link Rx(alpha) Tx(a) Rz(theta) Tz(d) written out."""
    def link(a, d, alpha, theta):
        ca, sa, ct, st = np.cos(alpha), np.sin(alpha), np.cos(theta), np.sin(theta)
        return np.array([[ct, -st, 0.0, a],
                         [st * ca, ct * ca, -sa, -d * sa],
                         [st * sa, ct * sa, ca, d * ca],
                         [0.0, 0.0, 0.0, 1.0]])
    T = np.eye(4)
    for (a, d, alpha), theta in zip(PANDA_DH + (PANDA_FLANGE,), list(q) + [0.0]):
        T = T @ link(a, d, alpha, theta)
    return T


def rotation_angle(R):
    """The angle of rotations R (F, 3, 3), from both its sine and cosine (exact near zero)."""
    sin = 0.5 * np.linalg.norm(np.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]],
                                        axis=-1), axis=-1)
    return np.arctan2(sin, 0.5 * (np.trace(R, axis1=-2, axis2=-1) - 1.0))


def pose_errors(model, q, targets):
    """Position (m) and rotation (rad) distance from the flange at q to each target (F, 4, 4)."""
    T = forward_kinematics(model, q).frames[:, -1]
    position = np.linalg.norm(T[:, :3, 3] - targets[:, :3, 3], axis=-1)
    rotation = rotation_angle(np.swapaxes(targets[:, :3, :3], -1, -2) @ T[:, :3, :3])
    return position, rotation


def random_targets(model, n, seed):
    q = np.random.default_rng(seed).uniform(model.lower, model.upper, (n, model.n_coordinates))
    return q, forward_kinematics(model, q).frames[:, -1]


def test_panda_forward_kinematics_is_the_dh_product():
    model = panda_arm()
    assert model.n_coordinates == 7
    np.testing.assert_array_equal(model.lower, PANDA_LOWER)
    np.testing.assert_array_equal(model.upper, PANDA_UPPER)
    q, ours = random_targets(model, 200, seed=0)
    theirs = np.stack([dh_product(row) for row in q])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    # Franka's zero pose: the flange 0.088 m forward, 0.926 m up, pointing down (Rx(pi)).
    np.testing.assert_allclose(dh_product(np.zeros(7))[:3, 3], [0.088, 0.0, 0.926], atol=1e-12)
    np.testing.assert_allclose(dh_product(np.zeros(7))[:3, :3], np.diag([1.0, -1.0, -1.0]), atol=1e-12)


def test_random_reachable_poses_are_solved_to_tolerance():
    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 300, seed=1)
    result = solve_with_restarts(scene, targets[:, None], Settings(precision=TOLERANCE), rng=2, budget=np.inf,
                                 max_restarts=200)
    assert result.converged.all()
    assert not result.first_converged.all()          # some poses did need restarts
    assert np.all(result.q >= model.lower) and np.all(result.q <= model.upper)
    position, rotation = pose_errors(model, result.q, targets)
    assert position.max() <= TOLERANCE and rotation.max() <= TOLERANCE
    np.testing.assert_allclose(result.position_error[:, 0], position, atol=1e-12)
    np.testing.assert_allclose(result.rotation_error[:, 0], rotation, atol=1e-9)
    assert np.all(result.restarts[result.first_converged] == 0) and np.all(result.restarts[~result.first_converged] > 0)


def test_restarts_never_return_a_worse_answer_than_the_first_attempt():
    """Against the plain solve from the middle of the limits: converged frames are the same answer,
    the others are no further off (an unreachable half of the targets keeps them unconverged)."""
    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 60, seed=3)
    p = targets[::2, :3, 3]                          # 1.5 m from the base: beyond the arm's reach
    targets[::2, :3, 3] = 1.5 * p / np.linalg.norm(p, axis=-1, keepdims=True)
    settings = Settings(precision=TOLERANCE)
    first = solve_animation(scene, np.tile(middle_of_limits(scene), (60, 1)), targets[:, None], settings=settings)
    result = solve_with_restarts(scene, targets[:, None], settings, rng=4, budget=np.inf, max_restarts=20)
    np.testing.assert_array_equal(result.first_converged, first.converged)
    np.testing.assert_array_equal(result.q[first.converged], first.q[first.converged])
    assert np.all(result.converged >= first.converged)
    score = lambda r: r.position_error[:, 0] ** 2 + r.rotation_error[:, 0] ** 2  # noqa: E731
    stayed = ~result.converged
    assert stayed.sum() >= 30 and np.all(result.restarts[stayed] > 0)
    assert np.all(score(result)[stayed] <= score(first)[stayed])
    position, rotation = pose_errors(model, result.q, targets)
    np.testing.assert_allclose(result.position_error[:, 0], position, atol=1e-12)


def test_an_unreachable_pose_is_reported_not_solved_without_nan():
    model = panda_arm()
    scene = pose_scene(model)
    target = np.eye(4)
    target[:3, 3] = [2.0, 0.0, 0.5]                  # 2 m away: the arm reaches under 1 m
    result = solve_with_restarts(scene, target[None, None], Settings(precision=TOLERANCE), rng=5, budget=np.inf,
                                 max_restarts=40)
    assert not result.converged[0] and result.restarts[0] == 40
    assert np.isfinite(result.q).all() and np.isfinite(result.position_error).all()
    assert np.isfinite(result.rotation_error).all()
    assert np.all(result.q >= model.lower) and np.all(result.q <= model.upper)
    position, _ = pose_errors(model, result.q, target[None])
    assert position[0] > 1.0 and abs(result.position_error[0, 0] - position[0]) < 1e-12


def test_a_missing_target_is_not_retried_and_bad_budgets_are_refused():
    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 2, seed=6)
    targets[1, 0, 3] = np.nan
    result = solve_with_restarts(scene, targets[:, None], Settings(precision=TOLERANCE), rng=7, budget=np.inf,
                                 max_restarts=200)
    assert result.converged[0] and not result.converged[1] and result.restarts[1] == 0
    assert np.isfinite(result.q).all()
    for budget in (-1.0, np.nan):
        with pytest.raises(ValueError, match="budget"):
            solve_with_restarts(scene, targets[:1, None], budget=budget)
    with pytest.raises(ValueError, match="max_restarts"):
        solve_with_restarts(scene, targets[:1, None], max_restarts=-1)


def test_a_spent_budget_stops_the_first_solve_and_starts_no_restart():
    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 3, seed=8)
    result = solve_with_restarts(scene, targets[:, None], Settings(precision=TOLERANCE), rng=9, budget=0.0)
    assert (result.iterations == 0).all() and (result.restarts == 0).all() and not result.converged.any()
    np.testing.assert_array_equal(result.q, np.tile(middle_of_limits(scene), (3, 1)))


def test_starts_of_one_group_race_and_other_groups_are_untouched():
    """solve_animation's `groups`: a start already at its target ends its group's race at once;
    a group of its own solves exactly as it would alone in a batch (a batch of two copies: one
    frame alone takes animation_frame's loop, equal only to rounding)."""
    model = panda_arm()
    scene = pose_scene(model)
    q, targets = random_targets(model, 2, seed=10)
    settings = Settings(precision=TOLERANCE, steps="damped", curvature=False)
    middle = middle_of_limits(scene)
    starts = np.stack([q[0], middle, middle])
    objects = targets[[0, 0, 1], None]
    alone = solve_animation(scene, np.stack([middle, middle]), targets[[1, 1], None], settings=settings)
    free = solve_animation(scene, starts, objects, settings=settings)
    raced = solve_animation(scene, starts, objects, settings=settings, groups=[0, 0, 1])
    assert free.iterations[1] > 0 and free.converged[1]                 # without the race it solves
    assert raced.converged[0] and not raced.converged[1] and raced.iterations[1] == 0
    np.testing.assert_array_equal(raced.q[1], middle)
    assert alone.converged[0] and raced.iterations[2] == alone.iterations[0]
    np.testing.assert_array_equal(raced.q[2], alone.q[0])


# --- one query, many racing starts (solver.restarts.race, solver.restarts.chain) ---

def test_pose_chain_evaluates_what_the_scene_evaluates():
    """PoseChain's y, A and errors against Scene.evaluate, on random starts and targets and on
    targets turned nearly half a turn from the flange (log's two formulas, near and away from pi)."""
    from solver.restarts.chain import pose_chain
    from solver.rotations import exp_map

    model = panda_arm()
    scene = pose_scene(model)
    chain = pose_chain(scene)
    assert chain is not None
    q, _ = random_targets(model, 24, seed=20)
    _, targets = random_targets(model, 3, seed=21)
    flange = forward_kinematics(model, q[:1]).frames[0, -1]
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    for angle in (np.pi - 1e-2, np.pi - 1e-4, np.pi - 1e-9):
        turned = flange.copy()
        turned[:3, :3] = flange[:3, :3] @ exp_map(angle * axis)
        targets = np.concatenate([targets, turned[None]])
    ws = chain.workspace(q.shape[0])
    for target in targets:
        chain.aim(chain.target(target[None]), ws)
        chain.evaluate(q, ws)
        ev = scene.evaluate(q, np.broadcast_to(target, (q.shape[0], 1, 4, 4)), jacobians="A")
        np.testing.assert_allclose(ws.y, ev.y, rtol=0, atol=1e-10)
        np.testing.assert_allclose(ws.A, ev.A, rtol=0, atol=1e-9)
        np.testing.assert_allclose(ws.position_error, ev.position_error[:, 0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(ws.rotation_error, ev.rotation_error[:, 0], rtol=0, atol=1e-10)
        np.testing.assert_allclose(ws.cost, np.sum(ev.task_weight * ev.y ** 2, axis=1), rtol=1e-12, atol=1e-15)


def test_pose_chain_is_only_made_for_one_pose_task_on_a_revolute_chain():
    from solver.restarts.chain import pose_chain
    from solver import Scene
    from solver.tasks import CopyPose, on_object, on_segment

    model = panda_arm()
    assert pose_chain(pose_scene(model)) is not None
    position_only = Scene(model, [CopyPose(on_segment(7), on_object(0), name="p")], n_objects=1)
    assert pose_chain(position_only) is None


RACE = Settings(precision=TOLERANCE, steps="damped", curvature=False, max_step=1.0, max_iterations=50)


def test_racing_solves_random_reachable_poses_to_the_precision():
    """Checked by the modified-DH product (dh_product), not by the solver's own kinematics."""
    from solver.restarts import solve_racing

    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 40, seed=22)
    rng = np.random.default_rng(23)
    raced_beyond_the_first = 0
    for target in targets:
        result = solve_racing(scene, target[None, None], RACE, rng=rng, budget=np.inf, starts=16, max_passes=300)
        assert result.converged[0] and result.q.shape == (1, 7)
        q = result.q[0]
        assert np.all(q >= model.lower) and np.all(q <= model.upper)
        T = dh_product(q)
        position = np.linalg.norm(T[:3, 3] - target[:3, 3])
        rotation = rotation_angle((target[:3, :3].T @ T[:3, :3])[None])[0]
        assert position <= TOLERANCE and rotation <= TOLERANCE
        assert abs(result.position_error[0, 0] - position) < 1e-12
        assert abs(result.rotation_error[0, 0] - rotation) < 1e-9
        assert result.iterations[0] >= result.passes[0] and result.charged[0] == result.seconds
        raced_beyond_the_first += not result.first_converged[0]
    assert raced_beyond_the_first >= 1             # some poses were won by a random start


def test_racing_is_deterministic_for_a_seed():
    from solver.restarts import solve_racing

    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 6, seed=24)
    for target in targets:
        a, b = (solve_racing(scene, target[None, None], RACE, rng=25, budget=np.inf, starts=8, max_passes=60)
                for _ in range(2))
        np.testing.assert_array_equal(a.q, b.q)
        assert a.passes[0] == b.passes[0] and a.iterations[0] == b.iterations[0] and a.restarts[0] == b.restarts[0]
    other = [solve_racing(scene, t[None, None], RACE, rng=26, budget=np.inf, starts=8, max_passes=60).iterations[0]
             for t in targets]
    mine = [solve_racing(scene, t[None, None], RACE, rng=25, budget=np.inf, starts=8, max_passes=60).iterations[0]
            for t in targets]
    assert other != mine                            # the seed does choose the random starts


def test_racing_reports_an_unreachable_pose_as_not_converged():
    from solver.restarts import solve_racing

    model = panda_arm()
    scene = pose_scene(model)
    target = np.eye(4)
    target[:3, 3] = [2.0, 0.0, 0.5]                  # 2 m away: the arm reaches under 1 m
    result = solve_racing(scene, target[None, None], RACE, rng=27, budget=np.inf, starts=8, max_starts=40)
    assert not result.converged[0] and result.restarts[0] == 39
    assert np.isfinite(result.q).all() and np.isfinite(result.position_error).all()
    assert np.all(result.q >= model.lower) and np.all(result.q <= model.upper)
    position = np.linalg.norm(dh_product(result.q[0])[:3, 3] - target[:3, 3])
    assert position > 1.0 and abs(result.position_error[0, 0] - position) < 1e-12
    # The best answer of all starts: no worse than the first start's own solve from mid-range (to
    # rounding: after its 50 iterations in this flat valley, sums rounded in another order end
    # the same solve a few 1e-6 apart in squared error).
    first = solve_animation(scene, middle_of_limits(scene)[None], target[None, None], settings=RACE)
    assert result.position_error[0, 0] ** 2 + result.rotation_error[0, 0] ** 2 <= \
        (first.position_error[0, 0] ** 2 + first.rotation_error[0, 0] ** 2) * (1.0 + 1e-5)
    # A time budget of zero: one evaluation of the starts, no iteration, not converged.
    spent = solve_racing(scene, target[None, None], RACE, rng=27, budget=0.0, starts=8)
    assert not spent.converged[0] and spent.iterations[0] == 0 and np.isfinite(spent.q).all()


def test_one_racing_start_is_the_animation_solve_from_that_start():
    """Racing one start (and no restart) takes solve_animation's damped steps: the same answer
    to within rounding, which may tip a step's acceptance the other way now and then."""
    from solver.restarts import solve_racing

    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 60, seed=28)
    middle = middle_of_limits(scene)
    reference = solve_animation(scene, np.tile(middle, (60, 1)), targets[:, None], settings=RACE)
    same_iterations = 0
    for f, target in enumerate(targets):
        result = solve_racing(scene, target[None, None], RACE, rng=29, budget=np.inf, starts=1, max_starts=1)
        assert result.converged[0] == reference.converged[f]
        # a pass steps the start, or evaluates its one nudge (a step that vanished short of the target)
        assert result.iterations[0] <= result.passes[0] <= result.iterations[0] + 1 and result.restarts[0] == 0
        if reference.converged[f]:
            np.testing.assert_allclose(result.q[0], reference.q[f], rtol=0, atol=1e-5)
        same_iterations += result.iterations[0] == reference.iterations[f]
    assert reference.converged.sum() >= 40 and same_iterations >= 54


def test_racing_refuses_bad_calls_and_handles_a_missing_target_and_other_scenes():
    from solver import Scene
    from solver.restarts import solve_racing
    from solver.tasks import CopyPose, on_object, on_segment

    model = panda_arm()
    scene = pose_scene(model)
    q, targets = random_targets(model, 2, seed=30)
    with pytest.raises(ValueError, match="one query"):
        solve_racing(scene, targets[:, None], RACE)
    with pytest.raises(ValueError, match="max_starts or max_passes"):
        solve_racing(scene, targets[:1, None], RACE, budget=np.inf)
    with pytest.raises(ValueError, match="budget"):
        solve_racing(scene, targets[:1, None], RACE, budget=np.nan)
    missing = targets[:1].copy()
    missing[0, 0, 3] = np.nan
    result = solve_racing(scene, missing[:, None], RACE, rng=31, budget=np.inf, max_starts=5)
    assert not result.converged[0] and np.isfinite(result.q).all()
    # A first start beyond the limits starts on them.
    beyond = np.asarray(model.upper) + 1.0
    result = solve_racing(scene, targets[:1, None], RACE, rng=33, budget=np.inf, starts=1, q0=beyond, max_passes=0)
    np.testing.assert_array_equal(result.q[0], model.upper)
    # A scene PoseChain does not take (position only) races through solve_with_restarts.
    position_only = Scene(model, [CopyPose(on_segment(7), on_object(0), name="p")], n_objects=1)
    result = solve_racing(position_only, targets[:1, None], RACE, rng=32, budget=np.inf, max_starts=20)
    assert result.converged[0]
    reached = forward_kinematics(model, result.q).frames[0, -1, :3, 3]
    assert np.linalg.norm(reached - targets[0, :3, 3]) <= TOLERANCE


def test_racing_keeps_no_scene_alive():
    """The chain made for a scene is cached by the scene, weakly: a scene given up is freed."""
    import gc
    import weakref

    from solver.restarts import solve_racing

    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 1, seed=34)
    solve_racing(scene, targets[:, None], RACE, rng=35, budget=np.inf, starts=4, max_passes=2)
    gone = weakref.ref(scene)
    del scene
    gc.collect()
    assert gone() is None


def _damped_step_by_least_squares(A, y, lam, q, lower, upper, max_step, exact):
    """One slot's trial point, solved independently of race.py: each round the damped step of the
    free coordinates as the least-squares solution of [A_F; sqrt(lam s) I] x = [-y - A dl; 0]
    (s the largest squared column norm of A_F), scaled to max_step, clamped; coordinates that hit
    a limit are locked on it (dl) and the rest solved again: once for a random start (then
    clamped), until none hits for the first start (exact)."""
    n = q.size
    free, dl = np.ones(n, dtype=bool), np.zeros(n)
    for round_ in range(n + 1):
        AF = A[:, free]
        s = max(float(np.max(np.sum(AF * AF, axis=0), initial=0.0)), 0.0) or 1.0
        system = np.vstack([AF, np.sqrt(lam * s) * np.eye(AF.shape[1])])
        x = np.zeros(n)
        x[free] = np.linalg.lstsq(system, np.concatenate([-y - A @ dl, np.zeros(AF.shape[1])]), rcond=None)[0]
        largest = np.abs(x).max()
        if largest > max_step:
            x *= max_step / largest
        moved = q + x + dl
        inside = np.clip(moved, lower, upper)
        hit = (inside != moved) & free
        if not hit.any() or (round_ >= 1 and not exact):
            return inside, round_
        dl[hit] = inside[hit] - q[hit]
        free &= ~hit
    return inside, round_


def test_racing_step_is_the_damped_step_with_limits_locked():
    """_Race._step against _damped_step_by_least_squares, slot by slot, on random coordinates
    (some on or near the limits) and damping: the batched solve, the locking rounds on all slots
    at once, the step cap and the clamp."""
    from solver.restarts.chain import pose_chain
    from solver.restarts.race import _Race

    model = panda_arm()
    scene = pose_scene(model)
    chain = pose_chain(scene)
    rng = np.random.default_rng(36)
    _, targets = random_targets(model, 1, seed=37)
    race = _Race(chain, 24)
    race.reset(chain.target(targets), middle_of_limits(scene), RACE, rng, 32, np.inf)
    q = rng.uniform(model.lower, model.upper, (24, 7))
    q[::3, 3] = model.upper[3]                      # some on a limit, some next to one
    q[1::4, 5] = model.lower[5] + 1e-3
    q[0] = np.where(np.arange(7) % 2 == 0, model.lower + 1e-3, model.upper - 1e-3)   # the first start near all
    race.q[:] = q
    chain.evaluate(q, race.ws)
    race.A[:], race.y[:] = race.ws.A, race.ws.y
    race.lam[:] = 10.0 ** rng.uniform(-3, 0, 24)
    race.lam[0] = 1e-3
    race.forced[:] = False
    stepping = np.ones(24, dtype=bool)
    stepping[7] = False                             # a slot that does not step keeps its trial
    before = race.trial[7].copy()
    race._step(stepping)
    rounds = []
    for k in np.flatnonzero(stepping):
        expected, used = _damped_step_by_least_squares(race.A[k], race.y[k], race.lam[k], q[k], model.lower,
                                                       model.upper, RACE.max_step, exact=(k == 0))
        np.testing.assert_allclose(race.trial[k], expected, rtol=0, atol=1e-9)
        rounds.append(used)
    np.testing.assert_array_equal(race.trial[7], before)
    assert sum(r >= 1 for r in rounds) >= 5 and rounds[0] >= 2     # the locking rounds were exercised
    np.testing.assert_array_equal(race.iterations, stepping.astype(int))


def test_pose_chain_of_one_and_two_joints_evaluates_what_the_scene_evaluates():
    """The first and last joints' folds (the target into the first, the effector offset into the
    last) where they are the same joint or neighbours."""
    from solver.examples.panda import modified_dh
    from solver.model import Model, Segment, revolute
    from solver.restarts.chain import pose_chain

    for joints in (1, 2):
        segments = [Segment(f"link{i + 1}", i - 1, modified_dh(*PANDA_DH[i]),
                            (revolute("Z", lower=(PANDA_LOWER[i],), upper=(PANDA_UPPER[i],)),))
                    for i in range(joints)]
        segments.append(Segment("flange", joints - 1, modified_dh(0.05, 0.107, 0.3)))
        model = Model(segments, armature_names=["short"])
        scene = pose_scene(model)
        chain = pose_chain(scene)
        assert chain is not None and chain.n == joints
        q = np.random.default_rng(38).uniform(model.lower, model.upper, (5, joints))
        target = forward_kinematics(model, q[:1] + 0.3).frames[0, -1]
        ws = chain.workspace(5)
        chain.aim(chain.target(target[None]), ws)
        chain.evaluate(q, ws)
        ev = scene.evaluate(q, np.broadcast_to(target, (5, 1, 4, 4)), jacobians="A")
        np.testing.assert_allclose(ws.y, ev.y, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ws.A, ev.A, rtol=0, atol=1e-12)


def test_racing_holds_the_garbage_collector_off_during_a_call_only():
    """A collection inside a call would be charged to its budget: the collector is off while
    the race runs (seen from its pass), and as it was before after the call."""
    import gc

    from solver.restarts import race as race_module
    from solver.restarts import solve_racing

    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_targets(model, 1, seed=39)
    seen = []
    original = race_module._Race._step

    def step(self, stepping):
        seen.append(gc.isenabled())
        return original(self, stepping)

    race_module._Race._step = step
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            solve_racing(scene, targets[:, None], RACE, rng=40, budget=np.inf, starts=4, max_passes=3)
            assert gc.isenabled() == enabled
    finally:
        race_module._Race._step = original
        gc.enable()
    assert seen and not any(seen)

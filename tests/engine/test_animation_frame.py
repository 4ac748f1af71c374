"""Animation mode's loop for one frame (animation_frame.py) against its batched loop
(animation.py): random frames of random rigs solved one at a time and all together take the same
iterations, stop with the same flags, and land on the same coordinates to rounding. The frames
are drawn to reach every branch of the iteration, and the test checks that the compared ones did:
joint limits hit (and the step solved again), targets out of reach that turn to secant steps, a
stationary start nudged off, soft joint-value tasks, missing targets.

Rounding alone moves some frames' answers by far more than 1e-10, in either loop: near-singular
steps amplify it, and a frame crawling toward a target out of reach settles an iteration sooner
or later (the batched loop's answer for such a frame also changes with the other frames in its
batch). So the comparison is made on the frames whose batched answer is determined to rounding:
those that stay within 1e-11, with the same iterations and flags, when the start or the
targets move by 1e-13 and when the batched loop solves the frame alone, where numpy rounds
differently."""

import numpy as np
import pytest

from solver import (Bone, CopyPose, JointValue, Scene, Settings, forward_kinematics, model_from_bones, on_object,
                    on_segment, solve_animation)
from solver import animation, animation_frame, update
from solver.bones import rest_matrix
from solver.examples import reach_scene, straight_chain

TOLERANCE = 1e-10


def random_rig(rng, n_bones):
    """A random tree of bones (each on a recent one's tail), some axes locked, limited, stiff or
    stretchy."""
    bones, tails = [], []
    for i in range(n_bones):
        p = int(rng.integers(max(0, i - 2), i)) if i else None
        head = np.zeros(3) if p is None else tails[p]
        direction = rng.normal(size=3) + (0.0, 0.0, 1.5)
        tails.append(head + direction / np.linalg.norm(direction))
        lock = tuple(bool(x) for x in rng.random(3) < 0.2)
        limits = tuple((float(-rng.uniform(0.05, 0.6)), float(rng.uniform(0.05, 0.6))) if rng.random() < 0.5 else None
                       for _ in range(3))
        stiffness = tuple(float(s) for s in np.where(rng.random(3) < 0.2, 0.5, 0.0))
        stretch = 0.2 if rng.random() < 0.1 else 0.0
        bones.append(Bone(f"b{i}", rest_matrix(head, tails[-1]), 1.0, None if p is None else f"b{p}", lock, limits,
                          stiffness, stretch))
    return model_from_bones(bones)


def random_scene(rng, model, n_targets):
    S = len(model.segments)
    tasks = [CopyPose(on_segment(S - 1 - k, (0.0, float(model.length[S - 1 - k]), 0.0)), on_object(k),
                      rotation=(bool(rng.random() < 0.3),) * 3, weight=float(rng.choice([0.5, 1.0, 3.0])),
                      name=f"reach{k}")
             for k in range(n_targets)]
    tasks += [JointValue(int(c), 0.0, weight=0.1, name=f"value{c}")
              for c in rng.choice(model.n_coordinates, size=2, replace=False)]
    return Scene(model, tasks, n_objects=n_targets)


def random_frames(rng, scene, F):
    """Starts near the rest pose; targets within reach, a little out of reach (a third of them)
    or missing; joint values given or left out."""
    model = scene.model
    q0 = scene.project(0.2 * rng.normal(size=(F, model.n_coordinates)))
    tips = forward_kinematics(model, scene.project(0.5 * rng.normal(size=(F, model.n_coordinates)))).frames
    objects = np.broadcast_to(np.eye(4), (F, scene.n_objects, 4, 4)).copy()
    for k in range(scene.n_objects):           # task k reaches with the tail of segment S - 1 - k
        segment = len(model.segments) - 1 - k
        tail = np.eye(4)
        tail[1, 3] = model.length[segment]
        objects[:, k] = tips[:, segment] @ tail
        objects[:, k, :3, 3] *= np.where(rng.random(F) < 0.33, 1.3, 1.0)[:, None]
    objects[rng.random((F, scene.n_objects)) < 0.08] = np.nan
    values = np.where(rng.random((F, scene.n_values)) < 0.2, np.nan, rng.normal(scale=0.3, size=(F, scene.n_values)))
    return q0, objects, values


def straight_away_frame():
    """A straight chain of three free bones aimed directly away from its target: the start is a
    stationary point (a saddle) of the error, where every step vanishes."""
    scene = reach_scene(straight_chain(3))
    target = np.eye(4)
    target[:3, 3] = (0.0, 0.0, -1.0)
    return scene, scene.model.neutral(1), target[None, None]


class Branches:
    """Which branches of the one-frame loop a solve took (counted while it runs)."""

    def __init__(self, monkeypatch):
        self.taken = set()
        for name in ("secant_step", "stationary"):
            self._count(monkeypatch, animation_frame._Frame, name)
        original = update.limited_step

        def limited(scene, q, max_step, solve_free):
            def solve(rows, cols, locked_step):
                if locked_step is not None:
                    self.taken.add("limit")       # a coordinate hit its limit; the rest solved again
                return solve_free(rows, cols, locked_step)
            return original(scene, q, max_step, solve)
        monkeypatch.setattr(update, "limited_step", limited)

    def _count(self, monkeypatch, cls, name):
        original = getattr(cls, name)

        def counted(*args, **kwargs):
            self.taken.add(name)
            return original(*args, **kwargs)
        monkeypatch.setattr(cls, name, counted)


def batched_alone(scene, q0, objects, settings, values):
    """Every frame solved by the batched loop in a batch of two copies of itself (with other
    frames beside it, a frame's curvature estimate is padded to theirs, which changes its secant
    steps by rounding)."""
    pair = lambda a: None if a is None else np.repeat(a[:, None], 2, axis=1).reshape((-1,) + a.shape[1:])  # noqa: E731
    both = solve_animation(scene, pair(q0), pair(objects), settings=settings, values=pair(values))
    return both.q[::2], both.iterations[::2], both.converged[::2], both


def determined(scene, q0, objects, settings, values, batched):
    """Frames whose batched answer stays within 1e-11, iterations and flags the same, when the
    start moves by +-1e-13, when the targets move by 1e-13 of their distance, and when the
    batched loop solves the frame on its own (F = 1, where numpy's kernels round differently);
    and whose one-frame answer keeps its iterations and flags when its start moves by +-1e-13."""
    q, iterations, converged, _ = batched
    ok = np.ones(len(q0), bool)
    nearer, farther = objects.copy(), objects.copy()
    nearer[..., :3, 3] *= 1.0 - 1e-13
    farther[..., :3, 3] *= 1.0 + 1e-13
    for start, targets in ((q0 + 1e-13, objects), (q0 - 1e-13, objects), (q0, nearer), (q0, farther)):
        q_moved, iterations_moved, converged_moved, _ = batched_alone(scene, start, targets, settings, values)
        ok &= ((iterations_moved == iterations) & (converged_moved == converged)
               & (np.abs(q_moved - q).max(axis=1) <= 1e-11))
    for f in np.flatnonzero(ok):
        pick = lambda a: None if a is None else a[f:f + 1]  # noqa: E731
        alone = animation._solve_block(scene, q0[f:f + 1], pick(objects), None, pick(values), settings, 0.0)
        ok[f] = (alone.iterations[0] == iterations[f] and alone.converged[0] == converged[f]
                 and np.abs(alone.q[0] - q[f]).max() <= 1e-11)
        # and the one-frame loop's own answer does not hang on rounding either
        one = [solve_animation(scene, q0[f:f + 1] + d, pick(objects), settings=settings, values=pick(values))
               for d in (0.0, 1e-13, -1e-13)]
        ok[f] &= all(o.iterations[0] == one[0].iterations[0] and o.converged[0] == one[0].converged[0]
                     for o in one[1:])
    return ok


def compare_one_by_one(scene, q0, objects, settings, values, branches, every=False, tolerance=TOLERANCE):
    """Solve every frame alone and batched; assert the determined ones (`every`: all) agree to
    `tolerance`. Returns the branches the compared frames took, and how many were compared."""
    batched = batched_alone(scene, q0, objects, settings, values)
    q, iterations, converged, both = batched
    taken, compared = set(), 0
    for f in range(len(q0)) if every else np.flatnonzero(determined(scene, q0, objects, settings, values, batched)):
        branches.taken = set()
        one = solve_animation(scene, q0[f:f + 1], objects[f:f + 1], settings=settings,
                              values=None if values is None else values[f:f + 1])
        assert one.iterations[0] == iterations[f], f"frame {f}"
        assert one.converged[0] == converged[f], f"frame {f}"
        np.testing.assert_allclose(one.q[0], q[f], rtol=0, atol=tolerance, err_msg=f"frame {f}")
        for part in ("position_error", "rotation_error"):
            np.testing.assert_allclose(getattr(one, part)[0], getattr(both, part)[2 * f], rtol=0, atol=tolerance)
        np.testing.assert_allclose(one.sigma_min[0], both.sigma_min[2 * f], rtol=1e-8, atol=1e-12)
        taken |= branches.taken
        if not np.isfinite(objects[f]).all():
            taken.add("missing target")
        if values is not None and np.isfinite(values[f]).any():
            taken.add("joint values")
        compared += 1
    return taken, compared


# (Not the plain pseudo-inverse: undamped, it inverts whatever singular value passes its rcond, so
# a step near a singular pose amplifies rounding without bound, in either loop.)
SETTINGS = [Settings(method="sdls"), Settings(method="dls"), Settings(method="sdls", steps="damped"),
            Settings(method="dls", curvature=False), Settings(method="sdls", fit=True, max_iterations=60)]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"{s.method}-{s.steps}-curvature{s.curvature}-fit{s.fit}")
def test_random_frames_alone_are_the_batched_frames(settings, monkeypatch):
    branches = Branches(monkeypatch)
    rng = np.random.default_rng(7)
    taken, compared, frames = set(), 0, 0
    for _ in range(3):
        model = random_rig(rng, int(rng.integers(4, 9)))
        scene = random_scene(rng, model, int(rng.integers(1, 3)))
        q0, objects, values = random_frames(rng, scene, 8)
        more, n = compare_one_by_one(scene, q0, objects, settings, values, branches)
        taken, compared, frames = taken | more, compared + n, frames + 8
    assert compared >= frames / 2, (compared, frames)
    expected = {"limit", "missing target", "joint values"} | ({"secant_step"} if settings.steps != "damped" else set())
    assert expected <= taken, taken


@pytest.mark.parametrize("settings", [Settings(method="sdls"), Settings(method="dls")], ids=lambda s: s.method)
def test_a_stationary_start_is_nudged_alike(settings, monkeypatch):
    """(A start moved by 1e-13 is no longer stationary: this frame is compared as it is. Leaving a
    saddle amplifies the loops' rounding differences, by about 1e6 here on numpy 2.4: q to 1e-8.)"""
    branches = Branches(monkeypatch)
    scene, q0, target = straight_away_frame()
    taken, _ = compare_one_by_one(scene, np.repeat(q0, 2, axis=0), np.repeat(target, 2, axis=0), settings, None,
                                  branches, every=True, tolerance=1e-8)
    assert "stationary" in taken

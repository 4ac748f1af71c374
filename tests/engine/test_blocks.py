"""The independent blocks of a scene's system (solver/blocks.py) and SDLS solved block by block."""

import numpy as np
import pytest

from solver import (Bone, CopyPose, Distance, JointValue, Scene, model_from_bones, on_object, on_segment, pseudoinverse,
                    rest_matrix)
from solver.blocks import independent_blocks
from solver.examples import reach_scene, straight_chain
from solver.tasks import CoordinateCoupler, Pole
from tests.random_models import random_transform, random_tree


class Cubic:
    def value_and_derivative(self, x):
        return 0.3 * x ** 3 - x, 0.9 * x ** 2 - 1.0


def mixed_scene(rng):
    """A random forest (two armatures, several roots) with tasks of every kind on random segments."""
    model = random_tree(rng, 14, n_armatures=2)
    while model.n_coordinates < 4:
        model = random_tree(rng, 14, n_armatures=2)
    segment = lambda: int(rng.integers(len(model.segments)))          # noqa: E731
    coordinate = lambda: int(rng.integers(model.n_coordinates))      # noqa: E731
    tasks = [CopyPose(on_segment(segment(), rng.normal(size=3)), on_object(0), rotation=(True, False, True)),
             CopyPose(on_segment(segment()), on_segment(segment(), rng.normal(size=3))),
             Distance(on_segment(segment()), on_object(1), radius=0.5),
             Pole(on_segment(segment()), on_segment(segment()), on_object(2), on_object(3), pole_angle=0.3),
             JointValue(coordinate(), value=0.2)]
    a, b = rng.choice(model.n_coordinates, size=2, replace=False)
    tasks.append(CoordinateCoupler(int(a), int(b), Cubic()))
    keep = rng.random(len(tasks)) < 0.6
    return Scene(model, [t for t, k in zip(tasks, keep) if k] or tasks[:1], n_objects=4)


@pytest.mark.parametrize("seed", range(40))
def test_a_is_zero_outside_its_blocks(seed):
    """Evaluated at random poses, A has no entry that links a block's rows to another block's
    coordinates, and none in rows or coordinates of no block."""
    rng = np.random.default_rng(seed)
    scene = mixed_scene(rng)
    F = 4
    q = rng.uniform(-1.0, 1.0, size=(F, scene.n_coordinates))
    objects = np.array([[random_transform(rng) for _ in range(scene.n_objects)] for _ in range(F)])
    A = scene.evaluate(q, objects).A
    inside = np.zeros((scene.n_outputs, scene.n_coordinates), dtype=bool)
    blocks = independent_blocks(scene)
    if blocks is None:
        inside[:] = True
    else:
        for rows, columns, row_mask, column_mask in zip(blocks.rows, blocks.columns, blocks.row_mask, blocks.column_mask):
            inside[np.ix_(rows[row_mask > 0], columns[column_mask])] = True
        # Each row and coordinate in at most one block.
        assert np.unique(blocks.columns[blocks.column_mask]).size == blocks.column_mask.sum()
        assert np.unique(blocks.rows[blocks.row_mask > 0]).size == blocks.row_mask.sum()
    assert np.all(A[:, ~inside] == 0.0)


def test_random_scenes_have_several_blocks():
    """The scenes above do split (the test above is not about one block only)."""
    counts = [getattr(independent_blocks(mixed_scene(np.random.default_rng(seed))), "count", 1) for seed in range(40)]
    assert max(counts) >= 3 and sum(c > 1 for c in counts) >= 10


def two_limbs():
    """Two 3-bone limbs of sphere joints standing up +Z from x = 0.3 and -0.3, each with a point
    target on its tip: a block each."""
    bones = []
    for side, x in (("l", 0.3), ("r", -0.3)):
        for i in range(3):
            head = np.array([x, 0.0, float(i)])
            bones.append(Bone(f"{side}{i}", rest_matrix(head, head + [0.0, 0.0, 1.0]), 1.0,
                              parent=f"{side}{i - 1}" if i else None))
    model = model_from_bones(bones)
    tasks = [CopyPose(on_segment(2, (0, 1.0, 0)), on_object(0)), CopyPose(on_segment(5, (0, 1.0, 0)), on_object(1))]
    return Scene(model, tasks, n_objects=2)


def mirrored_systems(F, rng):
    """The two limbs in the same random poses, aimed at the same targets (mirrored across x = 0):
    the weighted systems A (F, 6, n), b (F, 6), whose singular values come in equal pairs."""
    scene = two_limbs()
    half = scene.n_coordinates // 2
    q = rng.uniform(-0.5, 0.5, size=(F, scene.n_coordinates))
    q[:, half:] = q[:, :half]
    targets = np.broadcast_to(np.eye(4), (F, 2, 4, 4)).copy()
    targets[:, 0, :3, 3] = rng.normal(size=(F, 3)) * 2.0 + [0.3, 0.0, 2.0]
    targets[:, 1, :3, 3] = targets[:, 0, :3, 3] - [0.6, 0.0, 0.0]
    ev = scene.evaluate(q, targets)
    return scene, ev.A, ev.yd - ev.y


@pytest.mark.parametrize("gamma_max", [np.pi, 0.3])
def test_sdls_by_blocks_is_each_block_solved_alone_and_stable_to_rounding(gamma_max):
    """SDLS over two independent limbs gives each limb the step it gets alone, and A changed by
    rounding (1e-15) changes it by rounding. SDLS of the whole system, whose singular vectors mix
    the limbs as rounding picks within each pair of equal singular values, moves by tenths of a
    radian under the same change."""
    rng = np.random.default_rng(3)
    F = 50
    scene, A, b = mirrored_systems(F, rng)
    blocks = scene.blocks
    assert blocks.count == 2
    x, s_min = pseudoinverse.solve(A, b, "sdls", gamma_max=gamma_max, blocks=blocks)
    half = scene.n_coordinates // 2
    for rows, columns in ((slice(0, 3), slice(0, half)), (slice(3, 6), slice(half, None))):
        alone, s_alone = pseudoinverse.solve(A[:, rows, columns], b[:, rows], "sdls", gamma_max=gamma_max)
        np.testing.assert_allclose(x[:, columns], alone, rtol=1e-9, atol=1e-12)
        assert np.all(s_min <= s_alone * (1 + 1e-12))
    noise = 1e-15 * rng.normal(size=A.shape)
    again, _ = pseudoinverse.solve(A + noise, b, "sdls", gamma_max=gamma_max, blocks=blocks)
    assert np.abs(again - x).max() < 1e-11
    whole, _ = pseudoinverse.solve(A, b, "sdls", gamma_max=gamma_max)
    whole_again, _ = pseudoinverse.solve(A + noise, b, "sdls", gamma_max=gamma_max)
    assert np.abs(whole_again - whole).max() > 1e-2
    for f in range(5):
        x_one, s_one = pseudoinverse.solve(A[f], b[f], "sdls", gamma_max=gamma_max, blocks=blocks)
        np.testing.assert_allclose(x_one, x[f], rtol=1e-10, atol=1e-13)
        assert s_one == pytest.approx(s_min[f], rel=1e-12)


def test_a_chain_is_one_block_and_a_coupling_keeps_the_system_whole():
    assert reach_scene(straight_chain(6)).blocks is None
    limbs = two_limbs()
    assert limbs.blocks.count == 2

    class Identity:            # coordinates mapped onto the joints one to one, but through a coupling
        n_coordinates = limbs.n_coordinates
        lower, upper = limbs.lower, limbs.upper
        locked = np.zeros(n_coordinates, dtype=bool)

        def dofs(self, q):
            return q

        def jacobian(self, q):
            return np.broadcast_to(np.eye(self.n_coordinates), (q.shape[0],) + (self.n_coordinates,) * 2)

    coupled = Scene(limbs.model, limbs.constraints, n_objects=2, coupling=Identity())
    assert coupled.blocks is None

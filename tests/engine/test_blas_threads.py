"""The engine runs numpy's OpenBLAS on one thread while it solves and gives the count back after."""

import threading

import numpy as np
import pytest

from solver import Settings, solve_animation, solve_simulation
from solver.runtime.blas_threads import _OPENBLAS, blas_threads, one_blas_thread
from solver.examples import lissajous, reach_scene, straight_chain

pytestmark = pytest.mark.skipif(_OPENBLAS is None, reason="numpy here does not use a bundled OpenBLAS")


@pytest.fixture
def two_threads():
    """OpenBLAS at two threads for the test (one where the build allows no more), then as found."""
    found = blas_threads()
    _OPENBLAS[1](2)
    yield blas_threads()
    _OPENBLAS[1](found)


def test_the_pypi_wheels_openblas_is_found():
    assert blas_threads() >= 1


def test_one_thread_inside_the_count_found_after(two_threads):
    with one_blas_thread():
        assert blas_threads() == 1
        with one_blas_thread():
            assert blas_threads() == 1
        assert blas_threads() == 1
    assert blas_threads() == two_threads
    with pytest.raises(RuntimeError):
        with one_blas_thread():
            raise RuntimeError("inside")
    assert blas_threads() == two_threads


def test_overlapping_python_threads_restore_once_all_left(two_threads):
    inside, leave = threading.Barrier(3), threading.Event()
    seen = []

    def worker():
        with one_blas_thread():
            inside.wait()
            leave.wait()
            seen.append(blas_threads())

    workers = [threading.Thread(target=worker) for _ in range(2)]
    for w in workers:
        w.start()
    inside.wait()
    assert blas_threads() == 1
    leave.set()
    for w in workers:
        w.join()
    assert seen == [1, 1] and blas_threads() == two_threads


@pytest.mark.parametrize("solve", [solve_animation, solve_simulation])
def test_solvers_evaluate_on_one_thread_and_give_the_count_back(two_threads, solve):
    scene = reach_scene(straight_chain(4))
    counts = []
    evaluate = scene.evaluate

    def counting(*args, **kwargs):
        counts.append(blas_threads())
        return evaluate(*args, **kwargs)

    scene.evaluate = counting
    result = solve(scene, scene.model.neutral(5 if solve is solve_animation else 1), lissajous(5, 4),
                   settings=Settings())
    assert np.all(np.isfinite(result.q)) and counts and set(counts) == {1}
    assert blas_threads() == two_threads

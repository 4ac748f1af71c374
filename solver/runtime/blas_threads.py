"""One BLAS thread while the engine solves.

numpy's wheels bundle OpenBLAS, whose LU factorisation (behind `np.linalg.solve` and `inv`) is
slower on several threads than on one for matrices as small as the engine's (6 x 6 to a few
dozen rows, stacked one per frame), while large products gain from threads (BENCHMARKS.md,
"Measurements behind design choices"). So the engine does not change the process's setting for
good: `one_blas_thread` (a context manager, or a decorator) sets one thread for the duration and
gives back the count it found, nested and from several Python threads alike.

Where numpy does not use OpenBLAS (MKL, Apple's Accelerate) or its library cannot be found, it
does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import threading

import numpy as np

# The environment that starts a process's BLAS libraries on one thread (a batch's workers, each
# on a core of its own).
ONE_THREAD_ENV = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                         "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")}

# numpy 2 wheels: scipy-openblas (scipy_openblas_..64_); numpy 1.x wheels: openblas64_ builds
_PREFIXES = ("scipy_openblas_", "openblas_")
_SUFFIXES = ("64_", "_64_", "")


def _find_openblas():
    """(get, set) of numpy's bundled OpenBLAS thread count, or None."""
    here = os.path.dirname(np.__file__)
    candidates = []
    folders = (os.path.join(os.path.dirname(here), "numpy.libs"), os.path.join(here, ".libs"), os.path.join(here, ".dylibs"))
    for folder in folders:
        candidates += sorted(glob.glob(os.path.join(folder, "*openblas*")))
    for path in candidates:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _PREFIXES:
            for suffix in _SUFFIXES:
                get = getattr(library, f"{prefix}get_num_threads{suffix}", None)
                put = getattr(library, f"{prefix}set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    get.argtypes, get.restype = (), ctypes.c_int
                    put.argtypes, put.restype = (ctypes.c_int,), None
                    return get, put
    return None


_OPENBLAS = _find_openblas()
_lock = threading.Lock()
_depth = 0
_saved = 1


def blas_threads() -> int | None:
    """The thread count numpy's OpenBLAS uses now (None where it was not found)."""
    return None if _OPENBLAS is None else int(_OPENBLAS[0]())


class one_blas_thread(contextlib.ContextDecorator):
    """numpy's OpenBLAS on one thread inside the block or the decorated call (module docstring)."""

    def __enter__(self):
        global _depth, _saved
        if _OPENBLAS is not None:
            with _lock:
                if _depth == 0:
                    _saved = _OPENBLAS[0]()
                    _OPENBLAS[1](1)
                _depth += 1
        return self

    def __exit__(self, *exc):
        global _depth
        if _OPENBLAS is not None:
            with _lock:
                _depth -= 1
                if _depth == 0:
                    _OPENBLAS[1](_saved)
        return False

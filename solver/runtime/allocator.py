"""Keep freed memory in the process for reuse (glibc only).

A batched solve allocates its temporaries afresh in every iteration: for 1000 frames of a 6-bone
chain, some tens of MB, most arrays above glibc's 128 kB mmap threshold. glibc hands such blocks
back to the kernel when they are freed (munmap, or trimming the top of the heap), so every
iteration pays page faults to get zeroed pages again (BENCHMARKS.md, "Measurements behind design
choices", gives the cost).

`keep_freed_memory` sets M_MMAP_THRESHOLD to 32 MB (the most glibc's own adaptive threshold
reaches) and M_TRIM_THRESHOLD to 64 MB, so blocks under 32 MB come from the heap and up to 64 MB
of freed heap stays in the process. It is process-wide and stays in force; where the C library is
not glibc (macOS, Windows, musl) it does nothing.
"""

from __future__ import annotations

import ctypes

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds (see above); True when they were set."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version           # glibc, not another C library with a stub mallopt
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))

"""Process-wide runtime switches the engine uses; they change speed, never a result.

    allocator.keep_freed_memory      glibc keeps freed blocks in the process for reuse
    blas_threads.one_blas_thread     numpy's OpenBLAS on one thread while the engine solves
    blas_threads.ONE_THREAD_ENV      the environment that starts a process's BLAS on one thread
"""

from .allocator import keep_freed_memory
from .blas_threads import ONE_THREAD_ENV, blas_threads, one_blas_thread

__all__ = ["keep_freed_memory", "ONE_THREAD_ENV", "blas_threads", "one_blas_thread"]

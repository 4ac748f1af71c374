"""Which trials share a Dask task.

A task costs the scheduler, the client and the worker a few round trips whatever it runs; a
short trial (tens of ms) pays as much again for them, and on a machine with as many workers as
cores that work takes the workers' cores. So consecutive trials are grouped into one task, their
size measured by the size of their input files (frames times markers, near enough): with n
trials on w workers there are g = min(n, max(GROUPS_PER_WORKER w, ceil(n / MOST_PER_GROUP)))
groups, each group filled up to (bytes left) / (groups left). A trial larger than that is a
group of its own, so long trials still spread over the workers, and each worker still gets
several groups to balance the load at the end.

A group's task solves its trials one after the other, each as it would alone (its files and
report written as soon as it is done); if the task itself fails (its worker died), the runner
runs its trials again one per task, so a trial that kills workers fails alone.
"""

from __future__ import annotations

import math
import os

GROUPS_PER_WORKER = 4
MOST_PER_GROUP = 8


def _size(spec) -> int:
    try:
        return max(os.path.getsize(spec.input), 1)
    except OSError:
        return 1


def group_specs(specs, workers: int) -> list:
    """Consecutive runs of `specs` (module docstring), as lists, in order."""
    specs = list(specs)
    n = len(specs)
    if n == 0:
        return []
    groups = min(n, max(GROUPS_PER_WORKER * max(workers, 1), math.ceil(n / MOST_PER_GROUP)))
    sizes = [_size(s) for s in specs]
    left = sum(sizes)
    out, current, filled = [], [], 0
    target = left / groups
    for spec, size in zip(specs, sizes):
        if current and (filled + size > target * 1.0001 or len(current) >= MOST_PER_GROUP):
            out.append(current)
            left -= filled
            current, filled = [], 0
            target = left / max(groups - len(out), 1)
        current.append(spec)
        filled += size
    out.append(current)
    return out

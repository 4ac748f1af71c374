"""solver.keep_freed_memory: freed blocks stay in the process instead of being faulted in again
(counted as minor page faults in a fresh interpreter, with and without it)."""

import subprocess
import sys
from pathlib import Path

import pytest

from solver import keep_freed_memory

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import resource, sys
import numpy as np
sys.path.insert(0, {root!r})
from solver import keep_freed_memory
kept = keep_freed_memory() if {keep} else False
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    [np.ones(1 << 19) for _ in range(3)]
before = faults()
for _ in range(20):
    [np.ones(1 << 19) for _ in range(3)]          # three 4 MB arrays, freed together
print(kept, (faults() - before) / 20)
"""


def faults_per_round(keep: bool):
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT), keep=keep)], capture_output=True,
                         text=True, check=True).stdout.split()
    return out[0] == "True", float(out[1])


def test_freed_arrays_are_reused_instead_of_faulted_in_again():
    if sys.platform != "linux" or not keep_freed_memory():
        pytest.skip("mallopt's thresholds are glibc's (Linux); elsewhere keep_freed_memory does nothing")
    _, default = faults_per_round(False)
    kept, tuned = faults_per_round(True)
    assert kept
    assert default > 500            # pages handed back and faulted in again (about 1000 a round here)
    assert tuned < 0.05 * default

"""Smoke test of the Blender-IK reference measurement (its numbers belong to the benchmarks)."""

import pytest

from tools.blender_ik import measure

pytestmark = pytest.mark.blender


@pytest.mark.parametrize("solver", ["ITASC", "LEGACY"])
def test_measure_returns_one_error_per_frame(solver):
    result = measure(n_bones=3, n_frames=12, solver=solver)
    assert result["solver"] == solver and result["frames"] == 12
    assert len(result["errors"]) == 12
    assert 0.0 <= result["off_1cm"] <= 1.0 and result["seconds"] > 0

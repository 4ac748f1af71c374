"""IK constraint weights as Blender's iTaSC weighs them (issue #20), measured through Blender."""

import numpy as np
import pytest

from tools.blender_session import call_in_blender

pytestmark = pytest.mark.blender


@pytest.mark.parametrize("ratio", [0.25, 0.6])
def test_weighted_constraints_balance_as_blenders_itasc(extension_zip, ratio):
    """iTaSC weighs rows by the weight and clamps each position error at half the mean bone
    length: the tail settles ratio^2 / 2 of the way to the weaker target (unit bones), where
    Blender's own iTaSC puts it, not ratio / (1 + ratio) (weights taken as they are)."""
    r = call_in_blender("weights:weighted_pair", extension_zip=extension_zip, ratio=ratio)
    ours, theirs = np.array(r["ours"]), np.array(r["theirs"])
    assert abs(theirs[1] - ratio**2 / 2) <= 1e-3, theirs
    assert np.abs(ours - theirs).max() <= 1e-3, (ours, theirs)
    assert abs(ours[1] - ratio**2 / 2) <= 1e-6, ours

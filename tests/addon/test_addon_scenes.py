"""The scenes the add-on tests build inside Blender (tests/addon/in_blender/scenes.py) build, and
Blender's own iTaSC runs on them."""

import pytest

from tools.blender_session import call_in_blender

pytestmark = pytest.mark.blender


def test_scenes_build_and_blender_iks_own_solver_tracks_them(extension_zip):
    result = call_in_blender("scenes:path_scene_tip_errors", extension_zip=extension_zip, n_bones=6, n_frames=12)
    assert result["frames"] == 12 and result["ik"] == "IK"
    print(f"Blender's own iTaSC on the path scene: max tip error {result['max']:.3g}")

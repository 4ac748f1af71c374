"""The sidebar panels draw in every state, and the operators say why they cannot run."""

import pytest

from tools.blender_session import call_in_blender

pytestmark = pytest.mark.blender


def test_panels_draw_for_every_state_and_operators_explain_their_poll(extension_zip):
    r = call_in_blender("panels:draw_states", extension_zip=extension_zip)
    s = r["states"]
    labels = lambda log: " ".join(text for kind, text in log if kind == "label")  # noqa: E731
    for state in ("nothing", "empty"):
        assert "Select an armature" in labels(s[state]["ITASC_PT_main"])
        assert s[state]["ITASC_PT_bake"] is None
    assert "No IK constraints" in labels(s["no constraints"]["ITASC_PT_main"])
    rig = s["rig"]
    assert ["operator", "itasc.bake"] in rig["ITASC_PT_bake"]
    assert ["operator", "itasc.solve_frame"] in rig["ITASC_PT_main"]
    assert "bone03 / IK" in labels(rig["ITASC_PT_constraints"])
    assert "Nothing solved yet" in labels(rig["ITASC_PT_result"])
    baked = labels(s["baked"]["ITASC_PT_result"])
    assert "Bake: 10 frame(s)" in baked and "Not converged: 0" in baked and "Max position error" in baked
    assert ["prop", "feedback"] in s["simulation"]["ITASC_PT_settings"]
    assert ["prop", "damping_max"] not in s["simulation"]["ITASC_PT_settings"]
    assert not any(r["polls"][n] for n in ("solve_frame", "bake", "clear_bake", "live_preview"))
    assert "no IK constraint" in r["polls"]["message"]

"""The rig Rigify generates from its human metarig (706 bones, Blender's LEGACY IK), every limb in
IK with poles off, driven by our solver as generated: targets that are bones of the rig itself,
two IK constraints per limb whose mute is driven by the limb's pole switch, chains of two bones
that are not connected, hinge knees and elbows, IK Stretch on both bones, each chain hanging from
a bone with a Damped Track to the target. Everything is measured by Blender's own evaluation of
what we wrote: every IK tail against the head of its target bone (where Blender's IK aims).

Sessions end with exit_at_once (Blender 4.2 crashes on exit once Rigify was enabled)."""

import numpy as np
import pytest

from tests.addon.test_addon_faults import assert_kept_outside
from tools.blender_session import call_in_blender

pytestmark = pytest.mark.blender

TOLERANCE = 1e-5          # metres, Blender's evaluation of our keys against the target


def run(body, extension_zip, **kwargs):
    return call_in_blender(f"rigify:{body}", extension_zip=extension_zip, exit_at_once=True, **kwargs)


@pytest.fixture(scope="module")
def generated(extension_zip):
    return run("generated", extension_zip, n_frames=24)


def test_bake_puts_every_limb_of_the_generated_rig_on_its_target_in_blenders_evaluation(generated):
    r = generated
    print(f"\nRigify's generated rig, 24 frames, 4 limbs: ours baked, Blender-evaluated max "
          f"{max(max(row) for row in r['baked']):.3g} m; Blender's own LEGACY IK max "
          f"{max(max(row) for row in r['blender']):.3g} m")
    assert r["constraints"] == ["MCH-shin_ik.L/IK", "MCH-shin_ik.R/IK", "MCH-forearm_ik.L/IK", "MCH-forearm_ik.R/IK"]
    assert r["bones"] == r["chain_bones"] and r["warnings"] == [] and r["converged"]
    assert len(r["baked"]) == 24 and max(max(row) for row in r["baked"]) <= TOLERANCE
    # Blender's IK is off on all eight constraints while ours drives, the pole variants included.
    assert all(r["driving"].values()), r["driving"]
    # Keys on the chain bones only; the controls' keys (and everything else) exactly as they were.
    assert_kept_outside(r["before"], r["after"], 1, 24, r["bones"])
    assert all(any(f'"{b}"]' in c for b in r["bones"]) for c in set(r["after"]) - set(r["before"]))
    assert r["finite"] is True


def test_solve_frame_puts_every_limb_on_its_target_in_blenders_evaluation(generated):
    for frame, s in generated["solved"].items():
        assert s["frame"] == int(frame) and s["converged"], (frame, s)
        assert max(s["errors"]) <= TOLERANCE, (frame, s["errors"])


def test_a_pole_switch_flipped_while_ours_drives_keeps_blenders_ik_off_and_release_gives_all_back(generated):
    r = generated
    # Both of the flipped leg's constraints stay muted through evaluations: the chain shows our keys.
    assert all(r["flipped_mutes"].values()), r["flipped_mutes"]
    assert r["flipped_shown"] and max(r["flipped_errors"]) <= TOLERANCE
    # Ours follows the switch: it now drives the leg's pole variant.
    assert r["flipped_chosen"] == {"IK": False, "IK.001": True}
    assert "MCH-shin_ik.L/IK.001" in r["flipped_constraints"] and "MCH-shin_ik.L/IK" not in r["flipped_constraints"]
    # Released: every constraint's mute and influence, every driver (mute flag, type, expression,
    # variables, modifiers, keys) bit for bit as generated, even with the switch still flipped.
    assert r["released"], r["released_diff"]
    # Blender's drivers act again: the flipped leg runs its pole variant, the other limbs the plain one.
    mutes = r["after_release_mutes"]
    assert mutes["MCH-shin_ik.L/IK"] and not mutes["MCH-shin_ik.L/IK.001"]
    assert not mutes["MCH-forearm_ik.R/IK"] and mutes["MCH-forearm_ik.R/IK.001"]
    assert r["switched_back"]


def test_limbs_out_of_reach_stretch_as_blender_evaluates_the_scales(extension_zip):
    r = run("generated_stretch", extension_zip, n_frames=12)
    worst = max(max(row) for row in r["errors"])
    print(f"\nRigify's generated rig, controls out of reach: Blender-evaluated max {worst:.3g} m")
    assert r["converged"] and r["warnings"] == [] and worst <= TOLERANCE
    # The chains did stretch: each bone's total scale uniform, the upper bones by several per cent.
    for frame in r["totals"]:
        for bone, (x, y, z) in frame.items():
            assert abs(x - y) <= 1e-5 * y and abs(z - y) <= 1e-5 * y, (bone, x, y, z)
        assert max(frame[b][1] for b in ("thigh_ik.L", "upper_arm_ik.R")) > 1.05
    assert_kept_outside(r["before"], r["after"], 1, 12, r["bones"])
    assert r["finite"] is True


def test_live_preview_poses_every_limb_of_the_generated_rig_on_its_target(extension_zip):
    r = run("generated_live", extension_zip, n_frames=12)
    worst, held = (max(max(row) for row in r[k]) for k in ("errors", "held"))
    print(f"\nRigify's generated rig, live preview over 12 frames: Blender-evaluated max {worst:.3g} m "
          f"after one simulation step, {held:.3g} m once the frame is set again")
    # Simulation follows with a lag (as test_addon_live measures on a plain chain; with stretch
    # weighted ik_stretch^2 as iTaSC weighs it, up to 2.4 cm on these 4 cm circles; issue #24 makes
    # live preview solve each frame), and solved on at the same frame it lands on the targets.
    assert r["message"] == "" and worst < 0.03 and held <= TOLERANCE, (r["message"], worst, held)
    assert all(r["driving"].values())
    assert r["released"] and r["keys"] and r["finite"] is True


def test_with_poles_on_every_knee_and_elbow_bends_toward_its_pole_as_blenders_standard_ik(extension_zip):
    r = run("generated_poles", extension_zip, n_frames=12)
    worst_plane = max(max(row) for row in r["plane_degrees"])
    print(f"\nRigify's generated rig, poles on: bend planes within {worst_plane:.3g} deg of Blender's Standard IK, "
          f"tails within {max(max(row) for row in r['our_miss']):.3g} m")
    assert r["constraints"] == ["MCH-shin_ik.L/IK.001", "MCH-shin_ik.R/IK.001", "MCH-forearm_ik.L/IK.001",
                                "MCH-forearm_ik.R/IK.001"]
    assert r["converged"] and r["warnings"] == []
    assert max(max(row) for row in r["our_miss"]) <= TOLERANCE
    assert worst_plane <= 1.0, r["plane_degrees"]
    assert np.nanmax(r["pole_error"]) <= 1e-5 and not np.isnan(r["pole_error"]).any()   # measured by Blender
    # api.solve_frame on one frame: the same, measured on the pose it leaves.
    assert r["solved_converged"] and max(r["solved_miss"]) <= TOLERANCE and max(r["solved_plane_degrees"]) <= 1.0

"""`make demo`'s main job, shortened: the rig Rigify generates, all four limbs in IK with poles on,
hand, foot and pole controls animated, baked through the API beside Blender's own Standard IK.
Blender's evaluation of our keys puts every limb's IK tail within 1e-5 m of its target on every
frame, and every knee and elbow bends in the plane Blender's Standard IK bends it in (within 1 deg).
The metarig variant (`--rig metarig`) keeps its own check: every hand and foot within 1e-6 x its
chain's length."""

import numpy as np
import pytest

from tools import demo_rigify

pytestmark = pytest.mark.blender

FRAMES = 20
TOLERANCE = 1e-5           # metres, Blender's evaluation of our keys against each target bone's head
PLANE_DEGREES = 1.0        # bend planes, ours against Blender's Standard IK


def assert_files(data, out):
    # A .blend starts with "BLENDER", or with zstd's magic number when compressed (5.0's default).
    head = (out / "demo.blend").read_bytes()[:7]
    assert head == b"BLENDER" or head[:4] == b"\x28\xb5\x2f\xfd", head
    assert (out / "demo_error.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["blend"] == str(out.resolve() / "demo.blend")
    assert sorted(p.name for p in out.iterdir()) == ["demo.blend", "demo_error.png"]


def test_demo_puts_every_limb_of_the_generated_rig_on_its_target_bending_as_standard_ik(extension_zip, tmp_path):
    out = tmp_path / "out"
    data = demo_rigify.run_demo(FRAMES, out, extension_zip)
    print("\n" + data["table"])
    assert_files(data, out)

    ours = data["ours"]
    assert data["rig"] == "generated" and data["effectors"] == ["arm.L", "arm.R", "leg.L", "leg.R"]
    # Ours drives each limb's pole variant, and Blender's IK is off on all eight constraints.
    assert ours["constraints"] == ["MCH-shin_ik.L/IK.001", "MCH-shin_ik.R/IK.001", "MCH-forearm_ik.L/IK.001",
                                   "MCH-forearm_ik.R/IK.001"]
    assert len(ours["muted"]) == 8 and all(ours["muted"].values()), ours["muted"]
    assert ours["converged"] and ours["warnings"] == []
    measured = np.asarray(ours["errors"])                          # (frames, limbs), by Blender
    reported = np.asarray(ours["reported"])                        # as the API reports them
    assert measured.shape == reported.shape == (FRAMES, 4)
    assert np.all(measured <= TOLERANCE), measured.max(axis=0)
    # The API's errors are Blender's evaluation of what was written: the same distances.
    assert np.allclose(reported, measured, rtol=0.0, atol=1e-6), np.abs(reported - measured).max()
    degrees = np.asarray(data["plane_degrees"])
    assert degrees.shape == (FRAMES, 4) and np.all(degrees <= PLANE_DEGREES), degrees.max(axis=0)
    # Blender's own Standard IK ran first on the same frames (its misses are printed, not asserted on).
    assert data["blender"]["solver"] == "LEGACY" and np.asarray(data["blender"]["errors"]).shape == (FRAMES, 4)


def test_demo_on_the_metarig_puts_hands_and_feet_on_their_targets(extension_zip, tmp_path):
    out = tmp_path / "out"
    data = demo_rigify.run_demo(FRAMES, out, extension_zip, rig="metarig")
    print("\n" + data["table"])
    assert_files(data, out)

    ours = data["ours"]
    assert data["effectors"] == ["hand.L", "hand.R", "foot.L", "foot.R"]
    tolerance = 1e-6 * np.asarray(data["chain_lengths"])          # per effector: its chain's length
    measured = np.asarray(ours["errors"])                          # (frames, effectors), by Blender
    reported = np.asarray(ours["reported"])                        # as the API reports them
    assert measured.shape == reported.shape == (FRAMES, 4)
    assert np.all(measured <= tolerance), measured.max(axis=0) / tolerance
    assert np.all(reported <= tolerance), reported.max(axis=0) / tolerance
    assert ours["converged"] and all(ours["muted"]) and len(ours["muted"]) == 4
    assert np.asarray(data["blender"]["errors"]).shape == (FRAMES, 4)   # measured, not asserted on


def test_demo_on_another_metarigs_rig_bakes_every_ik_constraint(extension_zip, tmp_path):
    """`make demo RIG=cat`: the rig Rigify generates from its cat metarig, every active IK
    constraint (paws solved in three stages) within 1e-5 m in Blender's evaluation of our keys."""
    out = tmp_path / "out"
    data = demo_rigify.run_demo(6, out, extension_zip, rig="cat")
    print("\n" + data["table"])
    assert_files(data, out)
    assert data["rig"] == "cat" and len(data["effectors"]) == 10 and max(data["stages"]) == 2
    assert min(data["stages"]) == 0                                   # nothing left to Blender
    measured = np.asarray(data["ours"]["errors"])
    assert measured.shape == (6, 10) and np.all(measured <= TOLERANCE), measured.max(axis=0)
    assert "3 stage(s)" in data["table"]

"""`make demo`'s main job, shortened: Rigify's human metarig, both hands and feet on moving targets,
baked through the API; every frame within 1e-6 x chain length of its target as Blender measures it.
Blender's own iTaSC runs in the same session for contrast (printed, not asserted on)."""

import numpy as np
import pytest

from tools import demo_rigify

pytestmark = pytest.mark.blender

FRAMES = 20


def test_demo_puts_hands_and_feet_on_their_targets_and_writes_its_files(extension_zip, tmp_path):
    out = tmp_path / "out"
    data = demo_rigify.run_demo(FRAMES, out, extension_zip)
    print("\n" + data["table"])

    # A .blend starts with "BLENDER", or with zstd's magic number when compressed (5.0's default).
    head = (out / "demo.blend").read_bytes()[:7]
    assert head == b"BLENDER" or head[:4] == b"\x28\xb5\x2f\xfd", head
    assert (out / "demo_error.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["blend"] == str(out.resolve() / "demo.blend")
    assert sorted(p.name for p in out.iterdir()) == ["demo.blend", "demo_error.png"]

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

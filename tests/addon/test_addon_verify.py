"""Verification by Blender, in real Blender: after a bake or a solve, the result's errors and
`converged` describe Blender's evaluation of what was written, every written frame; the engine's
own result stays on it (`engine`). Each test measures Blender's evaluation itself
(tests/addon/in_blender/verify.py, mathutils on the evaluated scene) and compares."""

import numpy as np
import pytest

from tools.blender_session import ROOT, call_in_blender

pytestmark = pytest.mark.blender

FLOAT32 = 1e-6      # two float32 evaluations of coordinates of a few metres differ by this much


def run(body, extension_zip, **kwargs):
    return call_in_blender(f"verify:{body}", extension_zip=extension_zip, **kwargs)


def array(values):
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)


@pytest.fixture(scope="module")
def clean(extension_zip):
    return run("clean_chain", extension_zip)


@pytest.mark.parametrize("case", ["frame", "location", "rotation", "distance"])
def test_on_a_clean_chain_blender_agrees_with_the_engine_and_every_frame_converges(clean, case):
    r = clean[case]
    position, solver, shown = array(r["position"]), array(r["engine_position"]), array(r["shown_position"])
    assert all(r["verified"]) and all(r["converged"]) and all(r["engine_converged"])
    assert 0.0 < r["verify_seconds"] < r["seconds"]
    if case == "distance":
        shown = np.abs(shown - 0.5)                 # on the surface of a sphere of 0.5 around the target
    # The result reports what Blender shows, and Blender agrees with the engine, to float32 rounding.
    assert np.max(np.abs(position - shown)) <= FLOAT32, np.max(np.abs(position - shown))
    assert np.max(np.abs(position - solver)) <= 2 * FLOAT32, np.max(np.abs(position - solver))
    assert np.max(position) <= 2 * FLOAT32
    # The float32 allowance is small: within a few times 1e-6 on this 6 m chain.
    assert np.all(array(r["floor"]) <= 3e-6)
    rotation, engine_rotation_error = array(r["rotation"]), array(r["engine_rotation"])
    if case == "rotation":
        angle = array(r["shown_angle"])
        assert np.max(np.abs(rotation - angle)) <= FLOAT32, np.max(np.abs(rotation - angle))
        assert np.max(np.abs(rotation - engine_rotation_error)) <= FLOAT32
        assert np.max(rotation) <= 2 * FLOAT32
    else:
        assert np.isnan(rotation).all() and np.isnan(engine_rotation_error).all()     # no rotation part


def test_what_blender_shows_off_target_is_never_converged(extension_zip):
    r = run("off_target", extension_zip)
    misses = 0
    for case, c in r.items():
        if "refused" in c:              # a reader that refuses the case must say why
            assert "bone" in c["refused"], (case, c["refused"])
            continue
        position, shown = array(c["position"])[:, 0], np.array(c["blender"])
        # The result's error is what Blender shows, frame by frame ...
        assert np.max(np.abs(position - shown)) <= FLOAT32, (case, np.max(np.abs(position - shown)))
        # ... and a frame Blender shows off target is not converged, whatever the engine said.
        off = shown > 1e-4
        assert not np.any(np.array(c["converged"])[off]), case
        assert np.array_equal(np.array(c["converged"]), np.array(c["engine_converged"]) & ~off), case
        if off.any():
            misses += 1
            print(f"\n{case}: Blender shows misses up to {shown.max():.3g} m on {off.sum()} of {off.size} frames; "
                  f"the engine reported {np.nanmax(array(c['engine_position'])):.2g} and "
                  f"{sum(c['engine_converged'])} frames converged; the result: {c['summary']}")
    # Keys of only the selected tip leave the rest of the chain as animated: Blender shows it off.
    only = r["only_selected"]
    assert all(only["engine_converged"]) and not any(only["converged"])
    assert np.min(np.array(only["blender"])) > 0.1
    assert misses >= 1


def test_rigify_metarig_is_verified_by_blender(extension_zip):
    # exit_at_once: Blender 4.2 crashes on exit once Rigify was enabled (see run_in_blender).
    r = run("rigify_metarig", extension_zip, sys_path=[ROOT], exit_at_once=True)
    position, solver, shown = array(r["position"]), array(r["engine_position"]), array(r["shown_position"])
    assert position.shape == (40, 4)
    assert all(r["verified"]) and all(r["converged"])
    assert np.max(np.abs(position - shown)) <= 1e-7, np.max(np.abs(position - shown))
    assert np.max(np.abs(position - solver)) <= 1e-6
    assert np.max(position) <= r["precision"] + np.max(array(r["floor"]))


def test_generated_rigify_rig_is_verified_by_blender(extension_zip):
    r = run("rigify_generated", extension_zip, exit_at_once=True)
    assert "refused" not in r, r.get("refused")
    position, shown = array(r["position"]), array(r["shown_position"])
    assert all(r["verified"])
    assert np.max(np.abs(position - shown)) <= FLOAT32, np.max(np.abs(position - shown))
    off = (shown > 1e-4).any(axis=1)
    assert not np.any(np.array(r["converged"])[off])


def test_a_stepped_bake_verifies_in_steps_and_a_cancel_while_verifying_keeps_the_keys(extension_zip):
    r = run("steps_and_cancel", extension_zip)
    N = 100
    # Progress runs over reading, solving, writing and verifying: never backwards, to the total.
    p = r["progress"]
    assert r["total"] == 3 * N + 1 and p[0] == 0 and p[-1] == r["total"]
    assert all(b >= a for a, b in zip(p, p[1:]))
    assert "verify" in r["phases"] and sum(2 * N + 1 < x < 3 * N + 1 for x in p) >= 3    # several steps verifying
    whole = r["whole"]
    assert all(whole["verified"]) and all(whole["converged"]) and whole["frame"] == 33

    # Cancelled while verifying: the keys stay written, the frame is back, the frames read are
    # measured, the others are reported not verified and not converged, and the message says so.
    c = r["cancelled"]
    read = c["read"]
    assert 0 < read < N and c["phase"] == "finished" and c["frame"] == 33 and c["keys"]
    assert c["verified"] == [True] * read + [False] * (N - read)
    assert all(c["converged"][:read]) and not any(c["converged"][read:])
    position = array(c["position"])[:, 0]
    assert np.isnan(position[read:]).all()
    assert np.max(np.abs(position[:read] - np.array(c["blender"][:read]))) <= FLOAT32
    assert max(c["blender"]) <= 2 * FLOAT32                   # the keys of every frame are there
    assert "keys are written" in c["message"] and f"{N - read} of {N} frame(s) not verified" in c["message"]
    assert c["has_result"] and c["not_converged"] == N - read
    assert f"{N - read} not verified" in c["summary"]

    # The target deleted while verifying: the frames from there on are not verified, with a warning.
    lost = r["lost"]
    n = sum(lost["verified"])
    assert 0 < n < N and lost["verified"] == [True] * n + [False] * (N - n) and lost["frame"] == 33
    assert not any(lost["converged"][n:])
    assert any("'chain_target'" in w and "not verified" in w for w in lost["warnings"]), lost["warnings"]


def test_nla_tweak_mode_keys_go_in_at_action_time(extension_zip):
    r = run("nla_tweak", extension_zip)
    # A strip starting at frame 11: frames 11-40 are keyed at action frames 1-30 and Blender's
    # evaluation of them is on target; the strip and the tweak mode are as they were.
    p = r["plain"]
    assert p["strip"] and p["tweak"] and p["action"]
    assert p["keyed"] == [float(f) for f in range(1, 31)] and p["records"] == [[1.0, 30.0]]
    assert max(p["blender"]) <= 1e-5 and all(p["converged"]) and all(p["verified"])
    assert np.max(np.abs(array(p["position"])[:, 0] - np.array(p["blender"]))) <= FLOAT32
    # Scaled by 2 and reversed (frames 11-69): still on target at every baked frame.
    s = r["scaled"]
    assert s["strip"] and s["span"] == [11.0, 69.0]
    assert max(s["blender"]) <= 1e-5 and all(s["converged"]), max(s["blender"])
    # Frames where the strip does not play its action once are refused, naming the strip; nothing changes.
    f = r["refused"]
    assert "tweak mode on strip 'walk'" in f["before"] and "frame(s) 1-10" in f["before"], f["before"]
    assert "repeated 2 times" in f["repeated"] and "frame(s) 40-80" in f["repeated"], f["repeated"]
    assert f["before_kept"] and f["repeated_kept"]

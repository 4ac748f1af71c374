"""Baking and solving through the API in real Blender: accuracy measured by Blender itself, keys
left alone outside what a bake writes, the hand-over of Blender's IK constraints, bad input."""

import pytest

from tools.blender_session import call_in_blender

pytestmark = pytest.mark.blender


def run(body, extension_zip, **kwargs):
    """Call ``in_blender.bake.<body>`` in a fresh Blender with the extension installed."""
    return call_in_blender(f"bake:{body}", extension_zip=extension_zip, **kwargs)


@pytest.mark.parametrize("n_bones", [6, 30])
def test_bake_puts_every_tail_on_the_target_as_blender_measures_it(extension_zip, n_bones):
    n_frames = 120
    r = run("accuracy", extension_zip, n_bones=n_bones, n_frames=n_frames)
    tolerance = 1e-6 * n_bones
    ours, blender = r["ours"], r["blender"]
    print(f"\n{n_bones}-bone chain, {n_frames} frames on a path: ours (baked, measured in Blender) max "
          f"{max(ours):.3g}, median {sorted(ours)[len(ours) // 2]:.3g}, bake {r['seconds']:.3f} s; Blender's "
          f"iTaSC max {max(blender):.3g}, median {sorted(blender)[len(blender) // 2]:.3g}, "
          f"{sum(e > 1e-3 for e in blender)} frames > 1 mm, {r['blender_seconds']:.3f} s")
    assert r["muted"]
    assert r["frames"] == list(range(1, n_frames + 1))
    assert r["shape"] == [n_frames, 1] and r["rotation_error_nan"]
    assert set(r["types"]) == {"ndarray"}
    assert all(r["converged"])
    assert max(ours) <= tolerance, max(ours)
    # Our own report agrees with Blender's measurement to float32 rounding.
    assert max(abs(a - b) for a, b in zip(ours, r["reported"])) <= tolerance
    assert r["keys"] == 4 * n_bones            # quaternion channels of every chain bone


def _in(frame, first=10, last=40):
    return first <= frame <= last


def test_bake_leaves_every_other_key_exactly_as_it_was(extension_zip):
    r = run("keep", extension_zip)
    before, after = r["before"], r["after"]
    assert r["converged"] and max(r["errors"]) <= 6e-6
    chain_rotation = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle")
    for channel, old in before.items():
        new = after[channel]
        if not any(p in channel for p in chain_rotation) or "extra" in channel:
            assert new == old, channel                      # other bones and channels: byte for byte
            continue
        keep = [i for i, co in enumerate(old["co"]) if not _in(co[0])]
        kept = [i for i, co in enumerate(new["co"]) if not _in(co[0])]
        assert len(keep) == len(kept), channel
        for i, j in zip(keep, kept):
            for name in old:
                assert new[name][j] == old[name][i], (channel, name, old["co"][i])
        baked = [co[0] for co in new["co"] if _in(co[0])]
        assert baked == list(range(10, 41)), channel
    # New keys are the same whether their curve was new (keyframe_points.add's own defaults) or
    # rebuilt around kept keys: every attribute but position and handles.
    fresh, rebuilt = after['pose.bones["bone02"].rotation_euler[2]'], after['pose.bones["bone01"].rotation_euler[0]']
    assert not any('bone02"].rotation_euler' in c for c in before)
    rebuilt_new = [i for i, co in enumerate(rebuilt["co"]) if _in(co[0])]
    for name in set(fresh) - {"co", "handle_left", "handle_right"}:
        assert {repr(v) for v in fresh[name]} == {repr(rebuilt[name][i]) for i in rebuilt_new}, name
    # Baked channels exist for every chain bone, in its own rotation mode.
    assert 'pose.bones["bone04"].rotation_axis_angle[0]' in after
    assert 'pose.bones["bone02"].rotation_euler[2]' in after
    assert not any("rotation_quaternion" in c and "bone01" in c for c in after)
    # Continuity: consecutive baked Euler angles and quaternions do not jump.
    # (Axis-angle: the angle; its axis swings freely where the angle is small.)
    for name, channels in r["rot"].items():
        for values in channels[:1] if name == "bone04" else channels:
            inside = [v for f, v in values if _in(f)]
            assert max(abs(a - b) for a, b in zip(inside, inside[1:])) < 0.5, name


def test_solve_frame_poses_the_current_frame_and_keys_only_that_frame(extension_zip):
    r = run("solve_frame", extension_zip)
    assert r["pose_error"] <= 6e-6
    assert r["unchanged"]
    assert r["frame"] == [23.0] and r["current"] == 23
    assert r["keyed_error"] <= 6e-6
    before, after = r["before"], r["after"]
    for channel, old in before.items():
        new = after[channel]
        if "rotation_quaternion" not in channel:
            assert new == old, channel
            continue
        frames = [co[0] for co in new["co"]]
        assert frames == [1.0, 23.0, 30.0], channel
        for name in old:
            assert [new[name][0], new[name][2]] == old[name], (channel, name)
    new_channels = set(after) - set(before)
    assert new_channels and all(len(after[c]["co"]) == 1 and after[c]["co"][0][0] == 23.0 for c in new_channels)


def test_solve_frame_writes_the_stretch_as_the_bones_uniform_scale(extension_zip):
    r = run("stretch", extension_zip)
    assert r["error"] <= 1e-5                          # the stretched chain reaches the target
    assert r["scales"][-1][1] > 1.6 and r["warnings"] == []    # 3 unit bones cover 3.64 only stretched
    # Uniform, as Blender's own IK stretches a bone (a Y scale alone would reach children as a shear);
    # the bones that do not stretch keep their scale.
    assert r["scales"][-1][0] == r["scales"][-1][1] == r["scales"][-1][2]
    assert all(x == y == z == 1.0 for x, y, z in r["scales"][:-1])


def test_blender_ik_is_muted_while_we_drive_and_restored_after_save_and_reload(extension_zip):
    r = run("hand_over", extension_zip)
    assert r["driving"] == [True, True]
    assert r["constraints"] == ["bone03/IK"]           # the user's muted constraint is not driven
    assert r["reloaded"] == [True, True, True]
    assert r["released"] == [False, True, False]


def test_clear_bake_removes_what_the_bake_wrote(extension_zip):
    r = run("clear", extension_zip)
    assert len(r["baked"]) == 1 * 3 + 4 * 3
    assert r["cleared"] == 12 and r["records"] == 0
    assert r["after"] == r["before"]


def test_undo_after_the_bake_operator_restores_the_keys(extension_zip):
    r = run("undo", extension_zip)
    assert r["done"] == ["FINISHED"] and r["changed"]
    assert r["undone"] == ["FINISHED"]
    assert r["restored"]
    assert r["active"] is False and r["mute"] is False     # the hand-over is part of the same step


def test_bad_input_gets_a_clear_message_and_writes_nothing_bad(extension_zip):
    r = run("bad_input", extension_zip)
    m = r["messages"]
    assert "non-uniform scale" in m["scale"]
    assert r["untouched"] == [False, False]              # a refused rig is not handed over
    assert m["uniform"] is None
    assert "not finite" in m["nan"]
    assert "method" in m["options"]
    assert "before" in m["range"]
    assert "no IK constraint to drive" in m["no target"] and "no target" in m["no target"]
    assert "armature" in m["not armature"]
    assert r["location_kept"] and r["finite"]


def test_moved_scaled_armature_with_an_animated_parent_and_a_distance_constraint(extension_zip):
    r = run("transformed", extension_zip)
    assert r["constraints"] == ["bone02/IK", "bone05/IK"]
    assert all(r["converged"])
    scene_tolerance = 1e-6 * 6 * 1.3
    assert max(r["errors"]) <= scene_tolerance
    # The distance constraint's radius is in the armature's own units: 2.5 x 1.3 in the world.
    assert max(abs(d - 2.5 * 1.3) for d in r["distances"]) <= scene_tolerance


def test_bake_with_a_step_keys_only_the_selected_bones_on_those_frames(extension_zip):
    r = run("step", extension_zip)
    assert r["frames"] == [3.0, 7.0, 11.0, 15.0, 19.0]
    assert r["channels"] == ["bone01", "bone03"]
    assert r["keyed"] == r["frames"]


def test_rotation_control_keeps_a_bone_near_its_pose_while_the_target_is_reached(extension_zip):
    r = run("control", extension_zip)
    free, held = r["False"], r["True"]
    assert free["converged"] and held["converged"]
    assert held["shape"] == [12, 1] and held["error"] <= 6e-6
    print(f"\nbone00 drift from its pose: free {free['drift']:.3f} rad, with rotation control {held['drift']:.3f} rad")
    assert held["drift"] < free["drift"]


def test_bake_holds_ik_rotation_control_to_the_animated_rotation_of_each_frame(extension_zip):
    """A bone with IK rotation control whose own rotation is animated keeps, at every baked frame,
    the rotation its F-curves gave it at that frame (not the first frame's), while the tail reaches
    the target."""
    import numpy as np

    r = run("animated_control", extension_zip)
    assert r["error"] < 1e-5
    assert not any("control" in w for w in r["warnings"]), r["warnings"]
    for f in range(1, 25):
        animated, baked = np.asarray(r["animated"][str(f)]), np.asarray(r["baked"][str(f)])
        animated /= np.linalg.norm(animated)
        baked /= np.linalg.norm(baked)
        angle = 2.0 * min(np.linalg.norm(baked - animated), np.linalg.norm(baked + animated))  # small angles
        assert angle < 1e-4, (f, angle)


def test_gradient_descent_is_selectable_as_a_baseline(extension_zip):
    r = run("gradient_baseline", extension_zip)
    assert "GRADIENT" in r["solver_path"].upper()
    assert all(r["converged"]) and max(r["errors"]) <= 3e-6
    print(f"\ngradient descent baseline: {sum(r['iterations']) / 10:.0f} iterations per frame")

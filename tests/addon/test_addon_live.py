"""Live preview: frame changes and target moves pose the rig without keys (in animation mode the
bake's pose, in simulation mode one time step per frame), and it stands aside during a bake."""

import pytest

from tools.blender_session import call_in_blender

pytestmark = pytest.mark.blender


def test_live_preview_tracks_the_target_while_scrubbing_and_when_it_moves(extension_zip):
    r = call_in_blender("live:scrub_and_move_target", extension_zip=extension_zip)
    assert r["started"] == ["FINISHED"] and r["on"] and r["muted"]
    assert r["keys"] == 0                              # live preview poses, it does not key
    assert r["shown"] < 1e-5                           # every frame Blender shows the pose written
    errors = r["errors"]
    print(f"\nlive preview (simulation) while scrubbing 48 frames: max tip error {max(errors):.3g}, "
          f"median {sorted(errors)[24]:.3g}; after moving the target by hand: {r['after_move']:.3g}")
    assert max(errors) < 0.1                           # simulation follows with a small lag (~1% of reach)
    assert r["after_move"] < 1e-5                    # a hand move within a frame converges
    assert r["stopped"] == ["FINISHED"] and not r["off"]



def test_live_preview_reads_the_rig_again_when_the_user_edits_it(extension_zip):
    """Live preview keeps the rig it read while nothing but the pose and the targets change, and
    reads it again after each kind of edit: the poses equal those of a rig read anew every frame."""
    import numpy as np

    r = call_in_blender("live:rig_read_again_after_edits", extension_zip=extension_zip)
    cached, fresh, stale = (r[k] for k in ("cached", "fresh", "stale"))
    assert cached["message"] == "" and fresh["message"] == ""
    assert all(cached["signature_changed"]), cached["signature_changed"]       # every edit is seen
    assert cached["reads"] == 1 + len(cached["signature_changed"])             # and nothing else re-reads
    assert fresh["reads"] >= 40
    poses = {k: np.asarray(v["poses"]) for k, v in r.items()}
    np.testing.assert_allclose(poses["cached"], poses["fresh"], rtol=0, atol=1e-12)
    # The edits matter: a cache that never re-read would pose the rig differently.
    assert stale["reads"] == 1
    assert np.abs(poses["stale"] - poses["fresh"]).max() > 1e-2



def test_live_preview_follows_a_moving_parent_bone_and_armature(extension_zip):
    """The sampler remembers the armature's inverse and the chains' bases while they stand still:
    with the chain's parent bone and the armature object animated (and held in between), the poses
    equal those of a sampler that works everything out every frame, and the tip tracks the target."""
    import numpy as np

    r = call_in_blender("live:moving_parent_remembered_and_fresh", extension_zip=extension_zip)
    remembered, fresh = r["remembered"], r["fresh"]
    assert remembered["message"] == "" and fresh["message"] == ""
    # A base remembered from an earlier frame differs by float32 rounding of Blender's matrices.
    np.testing.assert_allclose(remembered["poses"], fresh["poses"], rtol=0, atol=1e-5)
    assert max(remembered["errors"]) < 0.1



def test_live_preview_gives_the_users_pose_back_when_switched_off(extension_zip):
    """The chain bones' own channels come back exactly when live preview stops, animated channels
    at the action's value of the frame; also after the file was saved and opened with it on."""
    import numpy as np

    r = call_in_blender("live:users_pose_given_back", extension_zip=extension_zip)
    assert r["on"] == ["FINISHED"] and r["off"] == ["FINISHED"] and r["kept_left"] == 0
    before, live = r["before"], r["live"]
    moved = max(np.abs(np.subtract(live[b][c], before[b][c])).max() for b in before for c in before[b])
    assert moved > 0.05                                 # live preview did pose the chain
    for key, animated in (("after", "animated"), ("reopened_after", "reopened_animated")):
        after = r[key]
        for bone, values in before.items():
            for channel, value in values.items():
                if bone == "bone05" and channel == "rotation_euler":
                    np.testing.assert_allclose(after[bone][channel], r[animated], rtol=0, atol=1e-6)
                else:
                    assert after[bone][channel] == value, (key, bone, channel)
    assert r["reopened_live"] and r["reopened_off"] == ["FINISHED"]
    assert r["reopened_animated"] != before["bone05"]["rotation_euler"]     # frame 7's, not frame 1's



def test_live_preview_blends_influence_with_the_users_own_pose(extension_zip):
    """A constraint at influence 0.5 aims live preview half way from where the user's own pose
    (kept channels, F-curves at the frame) puts the tail to the target, as Blender measures both
    with the IK muted; after simulated frames too, so live preview's own output is not taken for
    the user's pose."""
    import numpy as np

    r = call_in_blender("live:influence_blends_with_users_pose", extension_zip=extension_zip)
    for f in ("30", "40"):
        np.testing.assert_allclose(r["shown"][f], r["expected"][f], rtol=0, atol=1e-5)



def test_live_preview_holds_ik_rotation_control_to_the_users_own_pose(extension_zip):
    """A bone with IK rotation control keeps its animated rotation (the F-curve's value at the
    frame) while the chain reaches the target, after simulated frames too."""
    import numpy as np

    r = call_in_blender("live:rotation_control_held_to_users_pose", extension_zip=extension_zip)
    for f in ("30", "40"):
        written, animated = np.asarray(r[f]["written"]), np.asarray(r[f]["animated"])
        animated /= np.linalg.norm(animated)
        angle = 2.0 * min(np.linalg.norm(written - animated), np.linalg.norm(written + animated))  # small angles
        assert angle < 1e-4, (f, angle)
        assert r[f]["error"] < 1e-5



def test_a_bake_during_live_preview_starts_from_the_users_own_pose_not_live_previews(extension_zip):
    """Live preview has posed one of two identical rigs; baking both gives the same joint values:
    the start pose, the pose a constraint's influence of 0.5 blends with and the rotation an IK
    rotation control holds to are the user's own, not live preview's last output."""
    import numpy as np

    r = call_in_blender("live:bake_during_live_preview", extension_zip=extension_zip)
    assert r["still_on"]
    assert r["live_moved"] > 0.05                 # live preview's pose is not the user's
    np.testing.assert_allclose(r["baked"]["True"], r["baked"]["False"], rtol=0, atol=1e-12)


ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", ["chain", "featured", "metarig"])
def test_live_preview_in_animation_mode_shows_the_bakes_pose(extension_zip, kind):
    """Animation mode (the armature's iTaSC default): every frame live preview shows, played,
    jumped to or scrubbed back to (and, on the chains, after a target dragged by hand), has the
    bake's joint values within 1e-9 rad, and Blender shows every chain bone's tail where it shows
    the baked one within 1e-6 of the chain's length up to that tail. On the 6-bone chain; on one with influence
    0.7, a pole and a bone under IK rotation control; on Rigify's metarig."""
    import numpy as np

    kwargs = {"sys_path": [ROOT], "exit_at_once": True} if kind == "metarig" else {}
    r = call_in_blender("live:live_equals_bake", extension_zip=extension_zip, kind=kind, **kwargs)
    assert r["mode"] == "ANIMATION" and r["on"] == ["FINISHED"] and r["off"] == ["FINISHED"]
    assert r["message"] == ""
    assert all(r["converged"])
    live_q, bake_q = np.asarray(r["live_q"]), np.asarray(r["bake_q"])
    tails = np.abs(np.asarray(r["live_tails"]) - np.asarray(r["bake_tails"]))
    print(f"\n{kind}: live - bake joint values {np.abs(live_q - bake_q).max():.3g} rad, tails {tails.max():.3g} m"
          + (f"; after a drag {np.abs(np.subtract(r['drag_q'], r['drag_bake_q'])).max():.3g} rad" if kind != "metarig"
             else ""))
    assert np.abs(live_q - live_q[0]).max() > 0.05                 # the frames ask different poses
    np.testing.assert_allclose(live_q, bake_q, rtol=0, atol=1e-9)
    reach = 1e-6 * np.asarray(r["lengths"])[None, :, None]
    assert (np.abs(np.asarray(r["live_tails"]) - np.asarray(r["bake_tails"])) <= reach).all()
    if kind != "metarig":
        assert r["drag_moved"] > 0.05                               # the drag moved the chain
        np.testing.assert_allclose(r["drag_q"], r["drag_bake_q"], rtol=0, atol=1e-9)
        assert (np.abs(np.asarray(r["drag_tails"]) - np.asarray(r["drag_bake_tails"])) <= reach[0]).all()


def test_live_preview_shows_the_bakes_pose_on_the_rig_rigify_generates(extension_zip):
    """The rig Rigify generates (limbs in IK with poles, its controls keyed; Blender's own solver
    Standard IK, ours in animation mode by default): every frame live preview shows, played,
    jumped to or scrubbed back to, has the bake's joint values within 1e-9 rad, and Blender shows
    every chain bone's tail where it shows the baked one within 1e-6 of its chain's length."""
    import numpy as np

    r = call_in_blender("live:live_equals_bake", extension_zip=extension_zip, kind="generated", sys_path=[ROOT],
                        exit_at_once=True)
    assert r["on"] == ["FINISHED"] and r["off"] == ["FINISHED"] and r["message"] == ""
    assert all(r["converged"])
    live_q, bake_q = np.asarray(r["live_q"]), np.asarray(r["bake_q"])
    print(f"\ngenerated: live - bake joint values {np.abs(live_q - bake_q).max():.3g} rad")
    assert np.abs(live_q - live_q[0]).max() > 0.05
    np.testing.assert_allclose(live_q, bake_q, rtol=0, atol=1e-9)
    reach = 1e-6 * np.asarray(r["lengths"])[None, :, None]
    assert (np.abs(np.asarray(r["live_tails"]) - np.asarray(r["bake_tails"])) <= reach).all()


def test_live_preview_in_simulation_mode_tracks_as_closely_as_blenders_itasc(extension_zip):
    """Simulation mode at Blender's default settings (feedback, max velocity, automatic sub-steps),
    on the 6-bone chain following its path: the tip's median distance from the target, as Blender
    shows it, is no more than under Blender's own iTaSC simulation on the same rig."""
    import numpy as np

    r = call_in_blender("live:simulation_against_itasc", extension_zip=extension_zip)
    assert r["on"] == ["FINISHED"] and r["message"] == "" and r["settings"]["mode"] == "SIMULATION"
    ours, theirs = np.asarray(r["ours"][1:]), np.asarray(r["theirs"][1:])     # frame 1 converges on both
    print(f"\nsimulation, median tip error: ours {np.median(ours):.3g} m, Blender's iTaSC {np.median(theirs):.3g} m")
    assert np.median(ours) <= np.median(theirs)


def test_the_start_pose_composed_from_the_channels_is_blenders_matrix_basis(extension_zip):
    """pose_channels composes each bone's matrix_basis from its channels as Blender does, in every
    rotation mode (quaternions normalised, a zero axis-angle axis no rotation): within float32
    rounding of Blender's own matrix_basis."""
    import numpy as np

    r = call_in_blender("live:channels_against_matrix_basis", extension_zip=extension_zip)
    assert len(set(r["modes"])) == 8
    np.testing.assert_allclose(r["composed"], r["blender"], rtol=0, atol=2e-6)

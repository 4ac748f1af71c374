"""What real rigs put around their IK chains, through real Blender: targets and poles that are
bones, stretch through scale inheritance, other constraints and drivers on chain bones. Each
case either bakes so that Blender's evaluation lands on the target, or is refused with a message
naming the bone, the constraint or driver and what to change."""

import math

import pytest

from tests.addon.test_addon_faults import assert_kept_outside
from tools.blender_session import call_in_blender

pytestmark = pytest.mark.blender

TOLERANCE = 1e-5


def run(body, extension_zip, **kwargs):
    return call_in_blender(f"rig_reading:{body}", extension_zip=extension_zip, **kwargs)


def test_a_bone_target_is_aimed_at_its_head_and_a_target_moving_with_the_chain_is_a_cycle(extension_zip):
    r = run("bone_targets", extension_zip)
    # Blender's own IK aims at the target bone's head: its tip ends near the head, half a bone
    # length from the tail.
    assert max(r["blender_head"]) < 0.01 and min(r["blender_tail"]) > 0.4
    # Ours, baked, measured by Blender against the head.
    assert r["converged"] and r["warnings"] == [] and max(r["ours"]) <= TOLERANCE, r["ours"]
    assert max(abs(a - b) for a, b in zip(r["ours"], r["reported"])) <= TOLERANCE
    assert r["kept"]
    assert r["two_bone"][0] == "analytic two-bone" and max(r["two_bone"][1]) <= TOLERANCE, r["two_bone"]
    assert max(r["other"]) <= TOLERANCE                      # a bone of another armature
    # A pole that is a bone: read with the rig, per frame, at the bone's head.
    assert r["pole"][0] == "chain:pole" and abs(r["pole"][1] + 1.5707963) < 1e-6
    ours, blender = r["pole_heads"]
    assert max(abs(a - b) for p, q in zip(ours, blender) for a, b in zip(p, q)) <= 1e-6
    # Targets that move with the chain: refused, naming the target and the chain bone.
    for case, bone in (("parent", "bone01"), ("constraint", "bone02"), ("driver", "bone01")):
        message = r["refused"][case]
        assert "dependency cycle" in message and "'goal'" in message and f"'{bone}'" in message, (case, message)
        assert "bone02/IK" in message
    message = r["refused"]["hanging"]
    assert "dependency cycle" in message and "hangs from bone 'swing'" in message and "'bone02'" in message
    assert r["muted_constraint"] == [None, True] and r["custom_property"] == [None, True]
    assert r["hanging_ok"][0] is None and max(r["hanging_ok"][1]) <= TOLERANCE
    assert r["refused_mutes"] == [False, False] and r["refused_keys"] and r["finite"] is True


def test_stretch_on_every_bone_lands_on_the_target_for_every_scale_inheritance(extension_zip):
    r = run("stretch_chains", extension_zip)
    for case, c in r["chains"].items():
        print(f"\n{case}: Blender-evaluated max {max(c['errors']):.3g}, Y scales {c['scales'][-1]}")
        assert max(c["errors"]) <= TOLERANCE, (case, c["errors"])
        assert c["converged"] and c["warnings"] == [], case
        assert sum(c["scales"][-1]) > 4.0, case                # 4.5 from the root: the chain stretched
    assert "'bone01'" in r["gap"] and "'bone02'" in r["gap"] and "IK Stretch" in r["gap"], r["gap"]
    assert r["gap_kept"] == [True, True] and r["finite"] is True


def test_constraints_and_drivers_on_chain_bones_are_modelled_or_refused_by_name(extension_zip):
    r = run("chain_bone_constraints", extension_zip)
    for kind, c in r["refused"].items():
        message = c["message"]
        assert message and "'bone01'" in message and f"'{c['name']}'" in message, (kind, message)
        assert "mute it" in message, (kind, message)
        assert c["muted"] == [None, True], kind                 # muted, it bakes
    assert all(r["after_refusals"])
    assert "'bone02'" in r["driver"] and "driver" in r["driver"] and "rotation_quaternion[1]" in r["driver"]
    assert r["muted_driver"] is None
    # The hinge's Limit Rotation is the hinge's limits: Blender's evaluation is the same with the
    # constraint on or muted, the hinge stays inside, and our report is what Blender shows.
    lim = r["limited"]
    assert lim["warnings"] == [] and max(lim["shown"]) <= 1e-6, lim["shown"]
    low, high = math.radians(5), math.radians(6)
    assert all(low - 1e-7 <= a <= high + 1e-7 for a in lim["angles"]), lim["angles"]
    assert min(min(a - low, high - a) for a in lim["angles"]) < 1e-6, lim["angles"]    # the limit binds
    assert max(abs(a - b) for a, b in zip(lim["errors"], lim["reported"])) <= TOLERANCE
    assert "Limit Rotation" in r["free"] and "'bone02'" in r["free"] and "more than one axis" in r["free"]
    # A bone outside the chain copying a chain bone changes nothing; of two chains, the one with a
    # Damped Track on a chain bone is left out with a warning and the other bakes.
    message, warnings, errors = r["follower"]
    assert message is None and warnings == [] and max(errors) <= TOLERANCE
    message, constraints, warnings = r["two"]
    # The refused chain stays Blender's: still in the result (every active IK constraint is), named.
    assert message is None and constraints == ["bone03/IK", "side1/IK"]
    assert any("side1/IK" in w and "'side0'" in w and "Damped Track" in w and "Blender's IK solves it" in w
               for w in warnings), warnings
    assert_kept_outside(r["before"], r["after"], 1, 8, ["bone00", "bone01", "bone02", "bone03"])
    assert r["finite"] is True


def test_a_keyed_or_driven_mute_keeps_blenders_ik_off_while_ours_drives_and_comes_back(extension_zip):
    r = run("animated_mute", extension_zip)
    # The keyed constraint is ours (unmuted at the frame the bake starts); the driven one muted.
    assert r["constraints"] == ["bone02/IK"]
    assert all(m == [True, True] for m in r["driving"]), r["driving"]
    assert max(r["errors"]) <= TOLERANCE
    # The switch flipped: Blender's IK still off on both, ours drives the other constraint too, and
    # only that one where the keys mute the first.
    assert r["switched"] == [True, True]
    assert r["switched_constraints"] == [["bone02/IK", "bone02/IK.001"], ["bone02/IK.001"]]
    assert r["same"], (r["original"], r["released"])
    assert r["finite"] is True

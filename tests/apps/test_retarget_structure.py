"""Bone maps from the skeleton (solver.retarget.structure) on both CMU BVH clips of
../shared/data/bvh, read in place (tests/apps/retarget_bvh.py, bones as Blender's importer
makes them), and on variants made from them: joints renamed (Bandai Namco style, Mixamo with a
namespace prefix and "_End" joints, random names), the skeleton turned (the BVH's Y up, Z up
facing -Y as Blender's importer turns it, facing +Y, an oblique turn), chains shortened or
lengthened (no clavicles, no toes, two or four spine bones, a root joint above the hips).

The truth is the CMU naming itself: each clip's joint names say what they are (SOURCES.md lists
them; "LeftShoulder" is a clavicle in the MotionBuilder naming and an upper arm in the 3ds Max
one), written out below per convention and carried through every renaming.
"""

import numpy as np
import pytest

from solver.retarget import ROLES
from solver.retarget.structure import name_side, structural_map, tokens
from tests.apps.retarget_bvh import (BANDAI, CLIPS, DATA, MIXAMO, TRUTH, read_rest, renamed, rotation, split,
                                     tails_of, turned, with_end_joints, with_leaf, with_root, without)

BVH_TO_BLENDER = rotation("X", 90.0)          # Y up, facing +Z  ->  Z up, facing -Y (Blender's importer)
TURNS = {"bvh_y_up": np.eye(3), "blender_z_up": BVH_TO_BLENDER,
         "z_up_facing_+y": rotation("Z", 180.0) @ BVH_TO_BLENDER,
         "oblique": rotation("Z", 37.0) @ rotation("X", 61.0) @ rotation("Y", -23.0)}


def rest(clip):
    return read_rest(DATA / CLIPS[clip])


def rename_by_role(skeleton, clip, role_names, prefix="", other=None):
    """The clip's skeleton with each role's joint named `prefix + role_names[role]` and the other
    joints named by `other` (default: prefix + their own name). Returns (skeleton, truth)."""
    table = {TRUTH[clip][r]: prefix + role_names[r] for r in ROLES}
    out = renamed(skeleton, table, other or (lambda n: prefix + n))
    return out, {r: prefix + role_names[r] for r in ROLES}


def random_names(skeleton, clip, seed):
    """Every joint a random lower-case hex name (no side or helper words possible); the truth
    for the roles whose joints the skeleton has."""
    rng = np.random.default_rng(seed)
    fresh = {n: "".join(rng.choice(list("0123456789abcdef"), 10)) for n in skeleton["names"]}
    return renamed(skeleton, fresh), {r: fresh[TRUTH[clip][r]] for r in ROLES if TRUTH[clip][r] in fresh}


def mapped(skeleton):
    return structural_map(skeleton["names"], skeleton["parents"], skeleton["heads"], skeleton["tails"])


def variants(clip):
    """(label, skeleton, truth) for every naming of the clip in every turn."""
    base = rest(clip)
    namings = [("cmu", base, TRUTH[clip])]
    namings.append(("bandai",) + rename_by_role(with_root(base, "joint_Root"), clip, BANDAI))
    namings.append(("mixamo7",) + rename_by_role(with_end_joints(base), clip, MIXAMO, prefix="mixamorig7:"))
    namings.append(("random",) + random_names(base, clip, seed=33))
    return [(f"{name}/{turn}", turned(s, M), truth) for name, s, truth in namings for turn, M in TURNS.items()]


@pytest.mark.parametrize("clip", list(CLIPS))
def test_every_naming_and_rest_orientation_maps_every_role(clip):
    """All 22 roles, as the CMU names say, for four namings in four orientations; nothing
    ambiguous; up found along the skeleton's own up (the BVH's +Y, turned with it)."""
    for label, skeleton, truth in variants(clip):
        m = mapped(skeleton)
        wrong = {r: (m.roles.get(r), truth[r]) for r in ROLES if m.roles.get(r) != truth[r]}
        assert not wrong, (clip, label, wrong)
        assert m.ambiguous == [], (clip, label, m.ambiguous)
        assert m.facing == "feet"
        M = TURNS[label.split("/")[1]]
        up_truth = M @ [0.0, 1.0, 0.0]
        assert np.degrees(np.arccos(np.clip(np.dot(m.up, up_truth), -1, 1))) < 15.0, (label, m.up)
        forward_truth = M @ [0.0, 0.0, 1.0]                    # the clips walk along the BVH's +Z
        assert np.dot(m.forward, forward_truth) > np.cos(np.radians(20.0)), (label, m.forward)
    print(clip, "maps", len(variants(clip)), "variants; up", np.round(m.up, 3), "forward", np.round(m.forward, 3))


def test_blender_facing_puts_the_characters_left_at_plus_x():
    """Turned as Blender's BVH importer turns it (facing -Y, Z up), the left leg's joints lie at
    +X, as on Rigify's metarig."""
    s = turned(rest("walk"), BVH_TO_BLENDER)
    m = mapped(s)
    assert np.allclose(m.forward, [0, -1, 0], atol=0.2) and np.allclose(m.up, [0, 0, 1], atol=0.2)
    x = {n: h[0] for n, h in zip(s["names"], s["heads"])}
    assert x[m.roles["foot.L"]] > 0.5 and x[m.roles["foot.R"]] < -0.5


@pytest.mark.parametrize("clip", list(CLIPS))
def test_shorter_and_longer_chains(clip):
    """No clavicles, no toes, a spine of two bones (the lowest gone) or four (one cut in two),
    and all of these at once under random names: the remaining roles keep their bones; with two
    spine bones the lower is spine and the upper upper_chest, with four the second is chest."""
    truth = TRUTH[clip]
    base = turned(rest(clip), BVH_TO_BLENDER)
    clavicles = [truth["shoulder.L"], truth["shoulder.R"]]
    toes = [truth["toe.L"], truth["toe.R"]]
    cases = {
        "no clavicles": (without(base, clavicles), {r: b for r, b in truth.items() if not r.startswith("shoulder")}),
        "no toes": (without(base, toes), {r: b for r, b in truth.items() if not r.startswith("toe")}),
        "two spine bones": (without(base, [truth["spine"]]),
                            {**{r: b for r, b in truth.items() if r not in ("spine", "chest")},
                             "spine": truth["chest"]}),
        "four spine bones": (split(base, truth["chest"], "SpineMid"), truth),
        "all at once": (without(split(base, truth["chest"], "Mid"), clavicles + toes),
                        {r: b for r, b in truth.items() if not r.startswith(("shoulder", "toe"))}),
    }
    for label, (skeleton, expected) in cases.items():
        m = mapped(skeleton)
        assert m.roles == {r: expected[r] for r in ROLES if r in expected}, (clip, label, m.roles)
        assert m.ambiguous == [], (clip, label, m.ambiguous)
    anonymous = random_names(cases["all at once"][0], clip, seed=7)
    names = dict(zip(cases["all at once"][0]["names"], anonymous[0]["names"]))
    m = mapped(anonymous[0])
    assert m.roles == {r: names[b] for r, b in cases["all at once"][1].items()}


def footless_walk():
    """The walk without toes, each foot ending straight below its ankle (no facing)."""
    truth = TRUTH["walk"]
    base = without(rest("walk"), [truth["toe.L"], truth["toe.R"]])
    for side in "LR":
        base["ends"][base["names"].index(truth[f"foot.{side}"])] = np.array([0.0, -0.5, 0.0])
    base["tails"] = tails_of(base["parents"], base["heads"], base["ends"])
    return base


def test_feet_without_direction_fall_back_to_names_and_say_so():
    """Toes gone and each foot's end straight below its ankle: the feet give no facing. With
    side words in the names (Bandai style) the sides come from them; with random names they are
    guessed; both are listed as ambiguous, and everything but the sides is still right."""
    base = footless_walk()
    bandai, bandai_truth = rename_by_role(base, "walk", BANDAI)
    m = mapped(turned(bandai, BVH_TO_BLENDER))
    assert m.facing == "unknown"
    assert any("facing" in a for a in m.ambiguous), m.ambiguous
    assert m.roles == {r: bandai_truth[r] for r in ROLES if not r.startswith("toe")}
    anonymous, anonymous_truth = random_names(base, "walk", seed=5)
    m = mapped(turned(anonymous, BVH_TO_BLENDER))
    assert any("guessed" in a for a in m.ambiguous), m.ambiguous
    unsided = {r.split(".")[0] + ("" if "." not in r else ".?") for r in m.roles}
    assert unsided == {r.split(".")[0] + ("" if "." not in r else ".?") for r in ROLES if not r.startswith("toe")}
    pairs = {frozenset((m.roles[f"{p}.L"], m.roles[f"{p}.R"])) for p in ("thigh", "foot", "hand")}
    truth = {frozenset((anonymous_truth[f"{p}.L"], anonymous_truth[f"{p}.R"])) for p in ("thigh", "foot", "hand")}
    assert pairs == truth


def test_a_given_forward_settles_the_sides():
    """The same footless skeleton, random names, with forward given (-Y after Blender's turn):
    every role right, nothing ambiguous about sides."""
    anonymous, anonymous_truth = random_names(footless_walk(), "walk", seed=5)
    s = turned(anonymous, BVH_TO_BLENDER)
    m = structural_map(s["names"], s["parents"], s["heads"], s["tails"], forward=(0.0, -1.0, 0.0))
    assert m.facing == "given" and m.ambiguous == []
    assert m.roles == {r: anonymous_truth[r] for r in ROLES if not r.startswith("toe")}


def test_names_that_contradict_the_rest_pose_are_reported():
    """Left and right names swapped on the legs: the rest pose decides, the clash is listed."""
    truth = TRUTH["walk"]
    swap = {truth[f"{p}.L"]: truth[f"{p}.R"] for p in ("thigh", "shin", "foot", "toe")}
    swap.update({v: k for k, v in swap.items()})
    s = renamed(rest("walk"), swap)
    m = mapped(s)
    assert m.roles["thigh.L"] == "RightUpLeg" and m.roles["foot.R"] == "LeftFoot"   # at +X, named Right
    assert any("names say" in a for a in m.ambiguous), m.ambiguous


def test_helper_bones_are_left_out():
    """Twist, roll, IK and end bones added to the clip (as leaves and in chains) change nothing."""
    truth = TRUTH["walk"]
    s = with_end_joints(rest("walk"))
    s = split(s, truth["upper_arm.L"], "LeftArmRoll")                   # in the chain
    s = split(s, truth["thigh.R"], "RightUpLegTwist")
    m = mapped(s)
    assert m.roles == truth and m.ambiguous == []


@pytest.mark.parametrize("clip", list(CLIPS))
def test_unnamed_twist_leaves_and_named_ik_bones(clip):
    """An Unreal-like skeleton: a root on the floor with IK foot bones under it (named ik_...),
    twist leaves halfway along every upper arm, forearm, thigh and shin, all other names random:
    the helpers change nothing."""
    truth = TRUTH[clip]
    s = with_root(rest(clip), "root")
    for part in ("upper_arm", "forearm", "thigh", "shin"):
        for side in "LR":
            s = with_leaf(s, truth[f"{part}.{side}"], f"{part}_twist_{side}", 0.5)
    anonymous, fresh = random_names(s, clip, seed=11)
    for side in "LR":
        foot = s["names"].index(truth[f"foot.{side}"])
        anonymous = with_leaf(anonymous, anonymous["names"][0], f"ik_foot_{side.lower()}", 0.0)
        anonymous["heads"][-1] = s["heads"][foot]
        anonymous["tails"][-1] = s["tails"][foot]
    m = mapped(turned(anonymous, BVH_TO_BLENDER))
    assert m.roles == fresh and m.ambiguous == []


def test_name_tokens():
    assert tokens("mixamorig7:LeftToe_End") == ["left", "toe", "end"]
    assert tokens("LHipJoint") == ["l", "hip", "joint"]
    assert tokens("UpperLeg_L") == ["upper", "leg", "l"]
    assert tokens("upper_arm.R.001") == ["upper", "arm", "r", "001"]
    assert [name_side(n) for n in ("Foot_L", "RightHand", "thigh.R", "spine", "LR_bone")] == ["L", "R", "R", None,
                                                                                             None]


def test_not_a_humanoid_says_so():
    m = structural_map(["a", "b", "c"], [-1, 0, 1], np.zeros((3, 3)), np.ones((3, 3)))
    assert m.roles == {} and "five" in m.ambiguous[0]


def test_legs_without_feet_are_listed_not_guessed():
    """Feet and toes gone (legs end at the ankle): no foot is made up from the shin; each leg is
    named in the list of what stayed ambiguous; the rest maps as the names say."""
    truth = TRUTH["walk"]
    s = without(rest("walk"), [truth[f"{p}.{side}"] for p in ("foot", "toe") for side in "LR"])
    m = mapped(s)
    assert sum("no ankle" in a for a in m.ambiguous) == 2, m.ambiguous
    assert not any(r.startswith(("thigh", "shin", "foot", "toe")) for r in m.roles)
    assert m.roles == {r: b for r, b in truth.items() if not r.startswith(("thigh", "shin", "foot", "toe"))}
    print("legs without feet:", m.ambiguous)


def test_any_tree_gives_a_map_of_distinct_bones_or_says_why():
    """Random trees and positions (and all bones at one point): never an exception; each bone
    plays at most one role; an empty map comes with a reason."""
    rng = np.random.default_rng(33)
    for trial in range(400):
        n = int(rng.integers(0, 40))
        parents = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)], dtype=int)[:n]
        heads = rng.normal(size=(n, 3)) * (trial % 4 != 0)
        tails = heads + rng.normal(size=(n, 3)) * (trial % 3 != 0)
        m = structural_map([f"b{i}" for i in range(n)], parents, heads, tails)
        assert len(set(m.roles.values())) == len(m.roles)
        assert set(m.roles) <= set(ROLES)
        assert m.roles or m.ambiguous


def test_a_helper_root_leaves_one_tree():
    """The skeleton and a prop bone under a root named as a helper (IK_Root): without the root
    they are two trees; the larger one is mapped."""
    s = with_leaf(with_root(rest("walk"), "IK_Root"), "IK_Root", "prop", 0.0)
    m = mapped(s)
    assert m.roles == TRUTH["walk"] and m.ambiguous == []


def test_arms_not_below_the_hips_map_nothing():
    """The walk's hierarchy rerooted at the upper chest (parents reversed along the spine): the
    arms no longer hang below the hips, so nothing is mapped, and the list says why."""
    s = rest("walk")
    names, parents = s["names"], s["parents"].copy()
    node = names.index(TRUTH["walk"]["upper_chest"])
    previous = -1
    while node >= 0:
        up = parents[node]
        parents[node] = previous
        previous, node = node, up
    m = structural_map(names, parents, s["heads"], s["tails"])
    assert m.roles == {} and "below the hips" in m.ambiguous[-1], m.ambiguous


def test_a_clip_rewritten_with_another_rest_pose_keeps_its_world_motion(tmp_path):
    """The helper the Blender tests use to make clips of other rest poses and floors: the CMU
    walk with its arms lowered and knees bent at rest, turned 2 degrees and raised, written and
    read back: every joint's world path (forward kinematics of the file's own channels) is the
    original's turned and raised, to the file's 6 decimals; the rest pose did change."""
    from tests.apps.retarget_bvh import read_bvh, restposed, world_joints, write_bvh
    walk = read_bvh(DATA / CLIPS["walk"])
    turns = {"LeftArm": rotation("Z", 40.0), "RightArm": rotation("Z", -40.0), "LeftLeg": rotation("X", 15.0)}
    tilt, lift = rotation("X", 2.0), np.array([0.0, 5.0, 0.0])
    write_bvh(restposed(walk, turns, {"Hips": "Root"}, tilt, lift), tmp_path / "walk.bvh")
    again = read_bvh(tmp_path / "walk.bvh")
    assert again["names"][0] == "Root" and again["names"][1:] == walk["names"][1:]
    assert np.abs(world_joints(again) - (world_joints(walk) @ tilt.T + lift)).max() < 1e-4
    forearm = walk["names"].index("LeftForeArm")
    assert np.degrees(np.arccos(again["offsets"][forearm] @ walk["offsets"][forearm]
                                / np.linalg.norm(walk["offsets"][forearm]) ** 2)) > 39.0

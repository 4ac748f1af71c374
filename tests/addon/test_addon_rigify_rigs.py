"""The rig Rigify generates from each metarig it ships, every limb in IK with its pole on and the
controls keyed, baked with the add-on's defaults (issue #30): every active IK constraint is in the
result, solved by us in Blender's dependency order or left, unmuted, to Blender's own IK with the
reason; the result's errors are Blender's evaluation of the bake, a frame is converged only
where every active IK constraint is on target there, and chains with a pole bend in the plane
Blender's Standard IK bends them in."""

import numpy as np
import pytest

from tools.blender_session import ROOT, call_in_blender

pytestmark = pytest.mark.blender

FRAMES = 6
RIGS = ("basic_human", "basic_quadruped", "cat", "wolf", "horse", "bird")
# The horse's neck: 4 bones with IK Stretch, which the solver does not yet show on target
# (Blender's evaluation puts its tail 3e-5 m off): reported, never counted converged.
KNOWN_OFF = {"horse": {"MCH-neck_ik.004/IK"}}


def _bake(extension_zip, metarig):
    return call_in_blender("rigify_rigs:bake", extension_zip=extension_zip, sys_path=[str(ROOT)], exit_at_once=True,
                           metarig=metarig, n_frames=FRAMES)


@pytest.mark.parametrize("metarig", RIGS)
def test_every_active_ik_constraint_is_solved_in_order_and_reported(extension_zip, metarig):
    r = _bake(extension_zip, metarig)
    active, solved_by = r["active"], r["solved_by"]
    assert None not in solved_by, f"active IK constraints missing from the result: {active}"
    ours = np.array(r["ours"])                # Blender's evaluation after the bake, per active constraint
    reported = np.array(r["reported"])
    # The result's errors are what Blender shows (measured here independently, float32 apart).
    np.testing.assert_allclose(reported, ours, atol=1e-6)
    driven = np.array([s >= 0 for s in solved_by])
    known = np.array([name in KNOWN_OFF.get(metarig, ()) for name in active])
    # Every constraint we drive is on target in Blender's evaluation (1e-5 m), stages included.
    assert ours[:, driven & ~known].max() <= 1e-5, dict(zip(active, ours.max(axis=0)))
    # Those left to Blender stay Blender's: never muted, and its own IK keeps them near (1e-4 m).
    assert not set(r["muted_after_bake"]) - {a for a, d in zip(active, driven) if d}
    assert ours[:, ~driven].max(initial=0.0) <= 1e-4
    for name, by in zip(active, solved_by):
        assert by >= 0 or any(w.startswith(f"'{name}'") and "Blender's IK solves it" for w in r["warnings"]), name
    # A frame is converged only where every active constraint is within the precision there.
    floor = np.array(r["floor"])
    off = (ours > r["precision"] + floor + 1e-7).any(axis=1)
    assert not np.any(np.array(r["converged"]) & off)
    assert r["released"]
    # Chains with a pole bend in the plane Blender's Standard IK bends them in (1 deg), where both
    # are bent (5 deg or more: a straight chain has no plane).
    planes, bends = np.array(r["plane_degrees"]), np.array(r["bends"])
    compared = (bends >= 5.0) & np.array(r["with_pole"])[None, :]
    assert planes[compared].max(initial=0.0) <= 1.0, planes.max(axis=0)
    # One reading of Blender's evaluation serves every stage: the later stages' inputs are computed
    # from the stages before, and Blender's evaluation of the bake confirms them to float32 (~1e-6 m
    # measured; the job takes them within 1e-5 relative to their coordinates).
    assert r["readings"] == 1 and not r["unpredicted"], r["unpredicted"]
    assert len(r["gaps"]) == r["stages"] - 1 and max(r["gaps"].values(), default=0.0) <= 1e-5
    # The panel's records say the same per constraint: its stage, and its worst error as Blender shows it.
    assert [stage for stage, _ in r["records"]] == solved_by
    np.testing.assert_allclose([error for _, error in r["records"]], reported.max(axis=0), rtol=1e-6)


def test_paw_legs_are_solved_in_stages(extension_zip):
    """Rigify's rear paw solves a leg in three IK steps: the second chain hangs from the first
    (and holds a Copy Scale of an unscaled control, which changes nothing), the third aims at a
    bone the second moves. Each is driven one stage after the one it depends on."""
    r = _bake(extension_zip, "basic_quadruped")
    by = dict(zip(r["active"], r["solved_by"]))
    assert (by["MCH-shin_ik2.L/IK.001"], by["MCH-foot_ik3.L/IK"], by["MCH-shin_ik.L/IK.001"]) == (0, 1, 2)
    assert not r["warnings"]


def test_shark_without_ik_is_refused_clearly(extension_zip):
    r = _bake(extension_zip, "shark")
    assert "has no IK constraint to drive" in r["refused"] and r["mutes"]


def test_chain_riding_on_a_chain_and_a_copy_scale(extension_zip):
    """Issue #30's three chains: B's target is a child of A's tip (solved one stage after A); C has
    a Copy Scale in its chain, which changes nothing while its target is unscaled (C driven), and
    would scale C's bone once its target is scaled (C left to Blender's IK, unmuted, the Copy Scale
    named). Every tail as Blender shows it on target, ours within 1e-5 m, Blender's own within its
    precision (5e-4 m here)."""
    r = call_in_blender("rigify_rigs:three_chains", extension_zip=extension_zip, sys_path=[str(ROOT)])
    for case, c_by in (("unscaled", 0), ("scaled", -1)):
        out = r[case]
        assert dict(zip(r["active"], out["solved_by"])) == {"A2/IK": 0, "B1/IK": 1, "C1/IK": c_by}, case
        ours, blender = np.array(out["ours"]), np.array(out["blender"])
        assert blender.max() <= 5e-4, case             # Blender's own IK reaches every target
        driven = np.array(out["solved_by"]) >= 0
        assert ours[:, driven].max() <= 1e-5 and ours[:, ~driven].max(initial=0.0) <= 5e-4, case
        np.testing.assert_allclose(np.array(out["reported"]), ours, atol=1e-6)
        assert sorted(out["muted"]) == sorted(np.array(r["active"])[driven].tolist()), case
        assert out["released"]
    assert not r["unscaled"]["warnings"]
    assert any("'C1/IK'" in w and "Copy Scale" in w and "scaled" in w for w in r["scaled"]["warnings"])


def test_later_stage_inputs_are_computed_and_confirmed_or_read(extension_zip):
    """B's target rides on A's tip: computed from A's solution, both stages from one reading. Taken
    as unconfirmed (a tolerance below 0), B is read again after the verification and solved again;
    where computing fails as it runs, where B's chain follows A otherwise than through its inputs,
    or under a Copy Rotation (not computed), B is read in a pass of its own. On target in every
    case."""
    r = call_in_blender("rigify_rigs:three_chains_readings", extension_zip=extension_zip, sys_path=[str(ROOT)])
    parented, unconfirmed, failing, follows, rotated = (r[case] for case in (
        "parented", "unconfirmed", "failing", "chain_follows_a", "copy_rotation"))
    assert [case["readings"] for case in (parented, unconfirmed, failing, follows, rotated)] == [1, 2, 2, 2, 2]
    assert parented["gaps"]["1"] <= 1e-5 and not parented["unpredicted"]
    assert "differs from the computed inputs" in unconfirmed["unpredicted"]["1"]
    assert failing["unpredicted"] == {"1": "failed on purpose"} and not failing["gaps"]
    assert "'B0' follows something that moves with the stages before" in follows["unpredicted"]["1"]
    assert "COPY_ROTATION" in rotated["unpredicted"]["1"] and "1" not in rotated["gaps"]
    for case in (parented, unconfirmed, failing, follows, rotated):
        assert np.max(case["ours"]) <= 1e-5 and all(case["converged"])


def test_influence_below_one_in_a_later_stage_and_on_blenders_constraint(extension_zip):
    """B's IK (stage 1, its target riding on A's tip) at influence 0.5: Blender's Standard IK aims
    halfway from the tail before IK to the target (its goal blended by influence), and so does our
    bake, measured by that blend. C's IK (left to Blender) at 0.7: shown, named, not judged."""
    r = call_in_blender("rigify_rigs:three_chains_at_influence", extension_zip=extension_zip, sys_path=[str(ROOT)])
    assert r["solved_by"] == {"A2/IK": 0, "B1/IK": 1, "C1/IK": -1}
    before, target = np.array(r["before_ik"]), np.array(r["target"])
    halfway = 0.5 * before + 0.5 * target
    assert np.linalg.norm(target - before, axis=1).min() > 0.5          # the blend is far from either end
    # Blender's own IK lands within millimetres of the blended goal (3.1 mm of a 0.73 m blend here,
    # more iterations do not close it), 0.7 m from the target itself; ours lands on it (1e-5 m).
    assert np.linalg.norm(np.array(r["blender"]) - halfway, axis=1).max() <= 5e-3
    ours = np.linalg.norm(np.array(r["ours"]) - halfway, axis=1)
    assert ours.max() <= 1e-5
    np.testing.assert_allclose(r["reported"], ours, atol=1e-6)
    assert all(r["converged"])
    assert any("'C1/IK'" in w and "influence 0.7" in w and "not counted" in w for w in r["warnings"])


def test_one_frame_of_a_staged_rig_is_solved_where_it_stands(extension_zip):
    """`api.solve_frame` poses one frame (no keys): each later stage reads the pose the earlier
    stages wrote, where it stands; every tail within 1e-5 m as Blender shows it."""
    r = call_in_blender("rigify_rigs:solve_one_frame", extension_zip=extension_zip, sys_path=[str(ROOT)],
                        exit_at_once=True, metarig="basic_quadruped")
    assert max(r["solved_by"]) == 2 and r["frame"] == 3
    assert max(r["ours"]) <= 1e-5, r["ours"]
    np.testing.assert_allclose(r["reported"], r["ours"], atol=1e-6)

"""The solver's settings in real Blender (issue #20): followed from the armature's own IK panel at
every solve, overridden field by field in our panel, options over both; a rig on Blender's Standard
solver says it is solved with ours; a file saved before the override flags loads and solves."""

import math

import pytest

from tools.blender_session import call_in_blender

pytestmark = pytest.mark.blender

MIDDLE = slice(1, -1)     # frames 2..5: the first and last (same target) start from the pose left before


def run(body, extension_zip):
    return call_in_blender(f"settings:{body}", extension_zip=extension_zip)


@pytest.fixture(scope="module")
def followed(extension_zip):
    return run("followed", extension_zip)


def test_first_solve_takes_the_armatures_itasc_settings(followed):
    first = followed["first"]
    assert followed["defaults"]["iterations"] == 100
    assert first["settings"]["max_iterations"] == 100 and first["settings"]["method"] == "SDLS"
    assert first["settings"]["mode"] == "ANIMATION" == first["mode"]
    for name in ("mode", "method", "max_iterations", "feedback", "max_velocity", "substeps", "damping_max"):
        assert first["from"][name] == "armature", name
    # Precision is this add-on's (Blender's is a step size, 1e-4 at the least): Blender shows it met.
    assert first["from"]["precision"] == "add-on" and math.isclose(first["settings"]["precision"], 1e-6, rel_tol=1e-6)
    assert all(first["converged"]) and first["error"] <= 1e-5
    assert first["warnings"] == []
    assert any("not used by this solver: precision, translate_root_bones" in n for n in first["notes"])


def test_changes_in_the_armatures_panel_are_used_by_the_next_solve(followed):
    one = followed["one_iteration"]            # iterations 1, solver DLS
    assert followed["live_iterations"] == 1    # what live preview asks at its next frame
    assert one["settings"]["max_iterations"] == 1 and one["settings"]["method"] == "DLS"
    assert one["method"] == "iterative DLS"
    assert one["iterations"][MIDDLE] == [1, 1, 1, 1]
    assert not any(one["converged"][MIDDLE]) and one["error"] > 0.1     # one step does not reach
    again = followed["tight"]                  # iterations 100 again
    assert all(again["converged"]) and again["error"] <= 1e-5
    assert max(again["iterations"]) > 1
    sim = followed["simulation"]               # mode SIMULATION
    assert sim["mode"] == "SIMULATION" and sim["settings"]["mode"] == "SIMULATION"
    assert sim["from"]["converge_first_frame"] == "armature" and sim["settings"]["converge_first_frame"]
    # step_min 0.01 s at 24 fps: at most 4 sub-steps a frame (the iterations of a simulation frame).
    assert sim["settings"]["max_substeps"] == 4 and max(sim["iterations"][1:]) <= 4
    assert followed["overrides"] == []          # nothing was set in our panel


def test_panel_draws_the_armatures_settings_with_override_toggles(followed):
    panel = followed["panel"]
    assert panel["props"] == ["mode", "override_mode", "solver", "override_method", "precision", "iterations",
                              "override_max_iterations"]
    assert "  precision" in panel["labels"] and "  translate_root_bones" in panel["labels"]


def test_override_in_our_panel_wins_and_options_win_over_both(extension_zip):
    r = run("overridden", extension_zip)
    assert r["started_at"] == 77               # an override starts at the value in use
    o = r["override"]
    assert o["settings"]["max_iterations"] == 2 and o["from"]["max_iterations"] == "override"
    assert o["iterations"] == [2] * 6 and not any(o["converged"])
    opt = r["option"]
    assert opt["settings"]["max_iterations"] == 3 and opt["from"]["max_iterations"] == "option"
    assert opt["iterations"] == [3] * 6
    back = r["released"]                       # override off: the armature's 50
    assert back["settings"]["max_iterations"] == 50 and back["from"]["max_iterations"] == "armature"
    assert all(back["converged"])
    # A precision set in our panel loosens the solve; Blender shows every tail within it.
    loose = r["loose"]
    assert r["precision_flag"] and loose["from"]["precision"] == "override"
    assert math.isclose(loose["settings"]["precision"], 0.01, rel_tol=1e-6)
    assert all(loose["converged"]) and 1e-5 < loose["engine_error"] <= 0.01
    assert 1e-5 < max(r["loose_shown"]) <= 0.01
    assert "override_max_iterations" in r["panel"]["props"] and "precision" in r["panel"]["props"]
    tight = r["option_precision"]
    assert tight["from"]["precision"] == "option" and tight["settings"]["precision"] == 1e-7
    assert tight["engine_error"] <= 1e-7


def test_standard_solver_rig_is_solved_with_ours_and_says_so(extension_zip):
    r = run("standard", extension_zip)
    few, many = r["few"], r["many"]
    assert few["settings"]["max_iterations"] == 2 and few["from"]["max_iterations"] == "IK constraints"
    assert few["iterations"] == [2] * 6 and not any(few["converged"])
    assert many["settings"]["max_iterations"] == 500 and all(many["converged"]) and max(r["shown"]) <= 1e-5
    for res in (few, many):
        assert res["from"]["mode"] == res["from"]["method"] == res["from"]["precision"] == "add-on"
        assert res["warnings"] == []
        assert len(res["notes"]) == 1
        assert "Standard IK solver" in res["notes"][0] and "iTaSC engine of this add-on" in res["notes"][0]
    labels = r["panel"]["labels"]
    assert "Blender's Standard IK solver is set on this armature:" in labels
    assert "it is solved with the iTaSC engine of this add-on" in labels
    assert "Iterations: 500 (from the IK constraints)" in labels
    assert r["panel"]["props"] == ["mode", "method", "precision", "override_max_iterations"]


def test_itasc_settings_without_a_field_of_ours(extension_zip):
    r = run("itasc_only", extension_zip)
    never, initial, small, unfollowed = r["never"], r["initial"], r["small_steps"], r["unfollowed"]
    # Reiteration NEVER: the first frame takes one time step too; INITIAL: it converges.
    assert never["settings"]["converge_first_frame"] is False and never["iterations"][0] == 0
    assert initial["settings"]["converge_first_frame"] is True and initial["iterations"][0] > 0
    assert initial["converged"][0] and not never["converged"][0]
    # step_min: at most frame time / step_min sub-steps (24 fps: 0.02 s -> 2, 0.001 s -> 41).
    assert initial["settings"]["max_substeps"] == 2 and max(initial["iterations"][1:]) <= 2
    assert small["settings"]["max_substeps"] == 41 and max(small["iterations"][1:]) > 2
    for res in (never, initial, small):
        assert res["warnings"] == []
    # ALWAYS, Translate Roots and a step_max shorter than a frame: each said once, not per frame.
    warnings = unfollowed["warnings"]
    assert len(warnings) == 3
    assert any("'Always' is not followed" in w for w in warnings)
    assert any("'Translate Roots' is not followed" in w for w in warnings)
    assert any("step_max 0.02 s is not followed" in w for w in warnings)
    assert "  step_max" in r["panel"]["labels"] and "  translate_root_bones" in r["panel"]["labels"]


def test_file_saved_before_the_override_flags_loads_and_follows_the_armature(extension_zip):
    r = run("older_file", extension_zip)
    assert r["stored"] == {"method": "DLS", "max_iterations": 7} and r["flags"] == []
    itasc = r["itasc"]
    # The stored copies (DLS, 7 iterations, simulation) do not win over the armature's settings ...
    assert (itasc["settings"]["method"], itasc["settings"]["max_iterations"], itasc["mode"]) == \
        ("SDLS", 100, "ANIMATION")
    assert all(itasc["from"][n] == "armature" for n in ("mode", "method", "max_iterations", "feedback"))
    # ... precision was always this add-on's own: the one stored is used. Blender shows it met.
    assert itasc["from"]["precision"] == "add-on" and math.isclose(itasc["settings"]["precision"], 1e-3, rel_tol=1e-6)
    assert all(itasc["converged"]) and max(r["itasc_shown"]) <= 1e-3
    # On Blender's Standard solver our panel is the only source: what it held is used.
    legacy = r["legacy"]
    assert (legacy["settings"]["method"], legacy["mode"], legacy["settings"]["feedback"]) == ("DLS", "SIMULATION", 3.0)
    assert legacy["from"]["method"] == "add-on" and legacy["settings"]["max_iterations"] == 500

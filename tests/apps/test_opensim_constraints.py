"""CoordinateCouplerConstraints as OpenSim enforces them, on OpenSim's own constraint test model
(../shared/data/opensim_constraints: 8 knee/patella couplers, its trial and setup).

The reference is opensim 4.6. Its InverseKinematicsTool, run from the default pose at accuracies
of 1e-6 and below, loses this trial (marker RMS of metres from frame 0: its optimizer stops at its
iteration limit), so the tight reference is its InverseKinematicsSolver at accuracy 1e-7 started
at our solution: it must leave every coordinate a marker moves where it is (0.1 deg / 0.1 mm) and
find the constraints satisfied (1e-6). From OpenSim's own tool answer (accuracy 1e-5) the same
solver moves far, and our objective is below the tool's in every frame. Functions of every type
OpenSim models use are checked against OpenSim's assembly of the dependent coordinates, and a
patella marker that pulls against the couplers checks how a finite constraint_weight weighs them.
All OpenSim runs happen only where the `opensim` package is installed (the main venv)."""

import re
import shutil

import numpy as np
import pytest

from solver.opensim import (IKMarkerTask, MarkerData, MarkerIK, OpenSimFileError, load_osim, read_ik_setup,
                            read_storage, read_trc, write_trc)
from solver.opensim.coupling import coupler_tangent
from solver.opensim.ik import BATCHED_PASSES
from tests.opensim_reference import DATA, scaled_by_opensim
from tests.opensim_reference import opensim as _opensim

FOLDER = DATA.parent / "opensim_constraints"
MODEL, TRIAL, SETUP = (FOLDER / n for n in ("constraintTest_ikOnly.osim", "constraintTest.trc",
                                            "constraintTest_setup_ik.xml"))
needs_constraint_data = pytest.mark.skipif(not FOLDER.is_dir(), reason="shared/data/opensim_constraints is missing")
END = 0.025                                                  # frames 0 .. 5 of the trial
DEG = 180.0 / np.pi


def _problem(weight, model=None, markers=None, tasks=None):
    setup = read_ik_setup(SETUP)
    om = load_osim(model or MODEL)
    return MarkerIK(om, markers or read_trc(TRIAL), tasks or setup.tasks, time_range=(0.0, END),
                    constraint_weight=weight)


@pytest.fixture(scope="module")
def osim():
    return _opensim()


@pytest.fixture(scope="module")
def solved():
    out = {}
    for weight in (np.inf, 10.0):                # the setup's own weight is 10
        problem = _problem(weight)
        out[weight] = problem, problem.solve(accuracy=1e-7)
    return out


def _opensim_solver(osim, model_path, trial_path, tasks, weight, accuracy=1e-7):
    model = osim.Model(str(model_path))
    state = model.initSystem()
    weights = osim.SetMarkerWeights()
    for name, w in tasks.marker_weights().items():
        weights.cloneAndAppend(osim.MarkerWeight(name, w))
    solver = osim.InverseKinematicsSolver(model, osim.MarkersReference(str(trial_path), weights),
                                          osim.SimTKArrayCoordinateReference(), weight)
    solver.setAccuracy(accuracy)
    return model, state, solver


def _assemble_from(osim, model, state, solver, time, q):
    """OpenSim's assembly of each frame started at q (F, n): its coordinates (F, n), NaN in the
    frames where its optimizer fails (on some machines Ipopt reports diverging iterates there)."""
    coordinates = model.getCoordinateSet()
    out = np.full_like(q, np.nan)
    for f, t in enumerate(time):
        state.setTime(float(t))
        for i in range(coordinates.getSize()):
            coordinates.get(i).setValue(state, float(q[f, i]), False)
        try:
            solver.assemble(state)
        except RuntimeError:
            continue
        out[f] = [coordinates.get(i).getValue(state) for i in range(coordinates.getSize())]
    return out


def _lowest_along_each_coordinate(problem, q, step):
    """Per frame, the largest drop of the objective found by moving one coordinate a marker moves
    (not a coupler's dependent) by +-step, the dependents following their couplers: <= 0 where q is
    the constrained minimum to within about step / 2 along every coordinate."""
    objective = problem.report(q).objective
    independent = _moved_by_markers(problem)
    independent[[k.dependent for k in problem.om.couplers]] = False
    drop = np.full(len(q), -np.inf)
    for i in np.flatnonzero(independent):
        for sign in (1.0, -1.0):
            moved = q.copy()
            moved[:, i] += sign * step
            drop = np.maximum(drop, objective - problem.report(problem.om.fill_dependents(moved)).objective)
    return drop, objective


def _moved_by_markers(problem):
    """Coordinates that move a marker in use, and the couplers' dependents (others are free)."""
    moved = problem.scene.kinematics.moves.any(axis=0)
    moved[[k.dependent for k in problem.om.couplers]] = True
    return moved


def _in_degrees_and_mm(d, rotational):
    return np.where(rotational, d * DEG, d * 1e3)


# ------------------------------------------------------------------------------------- reading

@needs_constraint_data
def test_couplers_are_read_and_other_constraints_refused(tmp_path):
    om = load_osim(MODEL)
    assert [k.name for k in om.couplers][:2] == ["tib_pat_r_r3_con", "tib_pat_r_tx_con"] and len(om.couplers) == 8
    names = om.coordinate_names
    assert {(names[k.dependent], names[k.independent]) for k in om.couplers} >= {("tib_pat_l_ty", "knee_flex_l")}
    text = MODEL.read_text()
    point_on_line = text.replace("<CoordinateCouplerConstraint name=\"tib_pat_l_tz_con\">",
                                 "<PointOnLineConstraint name=\"pol\"></PointOnLineConstraint>"
                                 "<CoordinateCouplerConstraint name=\"tib_pat_l_tz_con\">")
    (tmp_path / "pol.osim").write_text(point_on_line)
    with pytest.raises(OpenSimFileError, match=r"<PointOnLineConstraint name='pol'> is not supported"):
        load_osim(tmp_path / "pol.osim")
    (tmp_path / "off.osim").write_text(point_on_line.replace(
        "<PointOnLineConstraint name=\"pol\">", "<PointOnLineConstraint name=\"pol\"><isDisabled>true</isDisabled>"))
    assert len(load_osim(tmp_path / "off.osim").couplers) == 8          # disabled: not enforced, not refused
    (tmp_path / "point.osim").write_text(text.replace(
        "<CoordinateCouplerConstraint name=\"tib_pat_l_tz_con\">",
        "<PointConstraint name=\"AC\"><isDisabled>false</isDisabled></PointConstraint>"
        "<CoordinateCouplerConstraint name=\"tib_pat_l_tz_con\">"))
    with pytest.raises(OpenSimFileError, match=r"PointConstraint 'AC': no <body_1>"):
        load_osim(tmp_path / "point.osim")
    assert load_osim(FOLDER / "ThoracoscapularShoulderModel.osim").point_names == ["AC"]   # test_opensim_scapula.py


@needs_constraint_data
def test_coupler_function_as_opensim_4_writes_it(tmp_path):
    """OpenSim 4 names the function (<SimmSpline name="coupled_coordinates_function">, no wrapper)
    and writes isEnforced: the same couplers as the wrapped spelling of OpenSim 3."""
    text = re.sub(r'<coupled_coordinates_function>\s*<(\w+) name="">(.*?)</\1>\s*</coupled_coordinates_function>',
                  lambda m: f'<{m.group(1)} name="coupled_coordinates_function">{m.group(2)}</{m.group(1)}>',
                  MODEL.read_text(), flags=re.S).replace("<isDisabled> false </isDisabled>", "<isEnforced>true</isEnforced>")
    assert "<coupled_coordinates_function>" not in text
    (tmp_path / "v4.osim").write_text(text)
    v3, v4 = load_osim(MODEL), load_osim(tmp_path / "v4.osim")
    q = v3.coupling.default_coordinates(3)
    q[:, [v3.coupling.index("knee_flex_r"), v3.coupling.index("knee_flex_l")]] = [[0.1, 0.4], [1.0, 1.7], [2.5, 0.0]]
    np.testing.assert_array_equal(v4.fill_dependents(q), v3.fill_dependents(q))
    (tmp_path / "off.osim").write_text(text.replace("<isEnforced>true</isEnforced>", "<isEnforced>false</isEnforced>", 1))
    assert len(load_osim(tmp_path / "off.osim").couplers) == 7


def _with_function_types(text: str) -> str:
    """The 8 couplers with functions of every type OpenSim models use (and a scale factor)."""
    replacements = {
        "tib_pat_r_tx_con": "<LinearFunction><coefficients> -0.011 0.045 </coefficients></LinearFunction>",
        "tib_pat_r_ty_con": "<PolynomialFunction><coefficients> 0.001 -0.002 0.0005 -0.014 </coefficients>"
                            "</PolynomialFunction>",
        "tib_pat_l_r3_con": "<MultiplierFunction><function><SimmSpline><x> 0 0.5 1 1.5 2 2.8 </x>"
                            "<y> 0.05 0.25 0.3 0.31 0.35 0.57 </y></SimmSpline></function><scale> 1.5 </scale>"
                            "</MultiplierFunction>",
        "tib_pat_l_tx_con": "<MultiplierFunction><function><LinearFunction><coefficients> 0.002 -0.001 </coefficients>"
                            "</LinearFunction></function><scale> -2 </scale></MultiplierFunction>",
    }
    for name, function in replacements.items():
        text = re.sub(rf'(<CoordinateCouplerConstraint name="{name}">.*?<coupled_coordinates_function>).*?'
                      r'(</coupled_coordinates_function>)', lambda m: m.group(1) + function + m.group(2), text,
                      count=1, flags=re.S)
    # tib_pat_r_r3_con and tib_pat_l_ty_con keep their NaturalCubicSpline, tib_pat_l_tz_con its
    # PiecewiseLinearFunction; one scale factor other than 1
    return text.replace("<dependent_coordinate_name> tib_pat_l_ty </dependent_coordinate_name>\n"
                        "\t\t\t\t\t<scale_factor>       1.00000000 </scale_factor>",
                        "<dependent_coordinate_name> tib_pat_l_ty </dependent_coordinate_name>\n"
                        "\t\t\t\t\t<scale_factor>       0.50000000 </scale_factor>")


@needs_constraint_data
def test_every_function_type_sets_the_dependent_as_opensim_assembles_it(tmp_path):
    path = tmp_path / "functions.osim"
    path.write_text(_with_function_types(MODEL.read_text()))
    om = load_osim(path)
    kinds = {type(k.function).__name__ for k in om.couplers}
    assert {"LinearFunction", "PolynomialFunction", "MultiplierFunction", "SimmSpline",
            "PiecewiseLinearFunction"} <= kinds
    knees = np.array([0.05, 0.7, 1.3, 2.1])
    q = om.coupling.default_coordinates(knees.size)
    for name in ("knee_flex_r", "knee_flex_l"):
        q[:, om.coupling.index(name)] = knees
    ours = om.fill_dependents(q)
    assert np.abs(om.constraint_residuals(ours)).max() < 1e-15
    # the tangent of the eliminated coordinates against finite differences along the knee
    T = coupler_tangent(ours, om.couplers)
    step = np.zeros_like(q)
    step[:, om.coupling.index("knee_flex_l")] = 1e-6
    fd = (om.fill_dependents(q + step) - om.fill_dependents(q - step)) / 2e-6
    np.testing.assert_allclose(fd, (T @ (step / 1e-6)[..., None])[..., 0], atol=1e-7)
    osim = _opensim()
    model = osim.Model(str(path))
    state = model.initSystem()
    coordinates = model.getCoordinateSet()
    for f in range(knees.size):
        for name in ("knee_flex_r", "knee_flex_l"):
            coordinates.get(name).setLocked(state, False)
        for i in range(coordinates.getSize()):
            coordinates.get(i).setValue(state, float(q[f, i]), False)
        for name in ("knee_flex_r", "knee_flex_l"):
            coordinates.get(name).setLocked(state, True)
        model.assemble(state)
        theirs = np.array([coordinates.get(i).getValue(state) for i in range(coordinates.getSize())])
        dependents = [k.dependent for k in om.couplers]
        np.testing.assert_allclose(ours[f, dependents], theirs[dependents], atol=1e-9)


@needs_constraint_data
def test_constant_coupler_is_refused_as_opensim_does_not_hold_it(tmp_path):
    """OpenSim 4.6 does not hold a Constant coupler's dependent at the constant (measured below:
    it holds the independent coordinate there and the dependent at 0), so it is refused."""
    path = tmp_path / "constant.osim"
    path.write_text(re.sub(r'(<CoordinateCouplerConstraint name="tib_pat_r_tz_con">.*?<coupled_coordinates_function>)'
                           r'.*?(</coupled_coordinates_function>)',
                           lambda m: m.group(1) + "<Constant><value> 0.003 </value></Constant>" + m.group(2),
                           MODEL.read_text(), count=1, flags=re.S))
    with pytest.raises(OpenSimFileError, match="'tib_pat_r_tz_con': a Constant function is not supported"):
        load_osim(path)
    osim = _opensim()
    model = osim.Model(str(path))
    state = model.initSystem()
    coordinates = model.getCoordinateSet()
    coordinates.get("knee_flex_r").setValue(state, 0.7, False)
    coordinates.get("tib_pat_r_tz").setValue(state, 0.01, False)
    model.assemble(state)
    assert coordinates.get("knee_flex_r").getValue(state) == pytest.approx(0.003, abs=1e-9)
    assert coordinates.get("tib_pat_r_tz").getValue(state) == pytest.approx(0.0, abs=1e-9)


# ------------------------------------------------------------------------------------ solving

@needs_constraint_data
@pytest.mark.parametrize("weight", [np.inf, 10.0], ids=["infinity", "setup-weight-10"])
def test_coupler_trial_is_opensims_solution_at_tight_accuracy(osim, solved, weight):
    problem, ours = solved[weight]
    assert ours.converged.all() and ours.constraint_names == [k.name for k in problem.om.couplers]
    assert np.abs(ours.constraint_errors).max() < 1e-9
    if weight == np.inf:             # no coordinate step of 1e-4 rad (or m) lowers the objective
        drop, objective = _lowest_along_each_coordinate(problem, ours.q, 1e-4)
        assert np.all(drop <= 1e-12 * objective), drop / objective
    setup = read_ik_setup(SETUP)
    model, state, solver = _opensim_solver(osim, MODEL, TRIAL, setup.tasks, weight)
    theirs = _assemble_from(osim, model, state, solver, ours.time, ours.q)
    assembled = np.isfinite(theirs).all(axis=1)
    if not assembled.any():
        pytest.skip("OpenSim's assembler failed on every frame on this machine (checked by finite steps alone)")
    moved = _moved_by_markers(problem)
    d = np.abs(_in_degrees_and_mm(theirs - ours.q, ours.rotational))[assembled][:, moved]
    assert d.max() < 0.1, f"OpenSim moved {np.array(ours.coordinate_names)[moved][np.argmax(d.max(0))]} by {d.max()}"
    assert np.abs(problem.om.constraint_residuals(theirs[assembled])).max() < 1e-6
    # The same solver does move a start that is not a solution: from ours shifted by 0.5 deg /
    # 0.5 mm on every coordinate it comes back to our objective (in the frames it moves at all:
    # its accuracy is a stopping tolerance, and it may stop at once on a start 0.8 % above).
    shift = np.random.default_rng(5).normal(0.0, 1.0, ours.q.shape) * np.where(ours.rotational, 0.5 / DEG, 5e-4)
    start = problem.om.fill_dependents(ours.q + shift)
    back = _assemble_from(osim, model, state, solver, ours.time, start)
    assembled = np.isfinite(back).all(axis=1)
    back[~assembled] = start[~assembled]
    raised, left = problem.report(start).objective - ours.objective, problem.report(back).objective - ours.objective
    came_back = assembled & (raised > 1e3 * np.abs(left))
    assert came_back.sum() >= assembled.sum() // 2, (raised, left)
    assert np.all(np.abs(left[came_back]) < 1e-6 * ours.objective[came_back])


@needs_constraint_data
def test_opensims_tool_stops_above_our_objective(osim, solved, tmp_path, monkeypatch):
    """OpenSim's own tool (the setup as written, accuracy 1e-5 as OpenSim's default) ends every
    frame at a higher objective than ours, holding the couplers as well."""
    problem, ours = solved[10.0]
    for name in (MODEL, TRIAL, SETUP):
        shutil.copy(name, tmp_path / name.name)
    monkeypatch.chdir(tmp_path)
    tool = osim.InverseKinematicsTool(str(tmp_path / SETUP.name))
    tool.set_accuracy(1e-5)
    tool.setEndTime(END)
    tool.setResultsDir(str(tmp_path))
    assert tool.run()
    motion = read_storage(tmp_path / "constraintTest_ik_new.mot")
    q = problem.om.coordinates_from(motion)
    theirs = problem.report(q)
    assert np.abs(theirs.constraint_errors).max() < 1e-5
    assert np.all(ours.objective <= theirs.objective)


@needs_constraint_data
def test_finite_constraint_weight_weighs_the_couplers_as_opensim_does(osim, tmp_path):
    """A marker on the right patella, placed as if its angle were 0.15 rad off the coupler: with
    constraint_weight 0.1 the solution breaks the coupler by a compromise, and OpenSim's solver at
    accuracy 1e-7 keeps that compromise; with Infinity the coupler holds exactly."""
    text = MODEL.read_text().replace(
        "<MarkerSet name=\"\">\n\t\t\t<objects>",
        "<MarkerSet name=\"\">\n\t\t\t<objects><Marker name=\"PAT\"><body> patella_r </body>"
        "<location> 0.06 0.02 0 </location></Marker>", 1)
    model_path = tmp_path / "patella.osim"
    model_path.write_text(text)
    om = load_osim(model_path)
    base = _problem(np.inf)
    q = base.solve(accuracy=1e-7).q
    pulled = q.copy()
    pulled[:, om.coupling.index("tib_pat_r_r3")] += 0.15
    trial = read_trc(TRIAL)
    rows = base.frames
    positions = np.concatenate([trial.positions, np.full((trial.n_frames, 1, 3), np.nan)], axis=1)
    positions[rows, -1] = om.marker_positions(pulled, ["PAT"])[:, 0]
    with_pat = MarkerData(trial.names + ["PAT"], trial.time, positions, trial.frame_numbers, trial.data_rate,
                          trial.camera_rate, "mm")
    write_trc(tmp_path / "patella.trc", MarkerData(with_pat.names, with_pat.time[rows], with_pat.positions[rows],
                                                   with_pat.frame_numbers[rows], 200.0, 200.0), units="mm")
    tasks = read_ik_setup(SETUP).tasks
    tasks.marker_tasks.append(IKMarkerTask("PAT", True, 5.0))
    soft = _problem(0.1, model_path, read_trc(tmp_path / "patella.trc"), tasks).solve(accuracy=1e-7)
    hard = _problem(np.inf, model_path, read_trc(tmp_path / "patella.trc"), tasks).solve(accuracy=1e-7)
    assert np.abs(hard.constraint_errors).max() < 1e-12
    broken = np.abs(soft.constraint_errors).max()
    assert broken > 1e-3                                         # the penalty gives way
    model, state, solver = _opensim_solver(osim, model_path, tmp_path / "patella.trc", tasks, 0.1)
    theirs = _assemble_from(osim, model, state, solver, soft.time, soft.q)
    residual = load_osim(model_path).constraint_residuals(theirs)
    np.testing.assert_allclose(residual, soft.constraint_errors, atol=0.02 * broken)


@needs_constraint_data
@pytest.mark.parametrize("weight", [10.0, np.inf], ids=["setup-weight-10", "infinity"])
def test_warm_start_passes_give_the_frame_recurrence_on_the_coupler_trial(weight):
    """The coupler trial's frames in the setup (101) at its accuracy (1e-3): the batched
    warm-start passes give what OpenSim's order gives, each frame solved from the previous frame's
    solution one at a time (warm_start='sweep'), with no frame-by-frame sweep of their own although
    the seeds solved from the default pose land 2 pi away on forearm pronation; and from its
    predecessor's solution a frame needs few iterations although pronation is nearly flat
    (Gauss-Newton alone took up to 111)."""
    setup = read_ik_setup(SETUP)
    problem = MarkerIK(load_osim(MODEL), read_trc(TRIAL), setup.tasks, time_range=setup.time_range,
                       constraint_weight=weight)
    passes = problem.solve(accuracy=setup.accuracy)
    sweep = problem.solve(accuracy=setup.accuracy, warm_start="sweep")
    assert passes.converged.all() and sweep.converged.all()
    assert passes.passes < BATCHED_PASSES                              # no sweep needed
    assert np.abs(passes.q - sweep.q).max() < 1e-5
    np.testing.assert_allclose(passes.objective, sweep.objective, rtol=1e-9)
    assert sweep.iterations.max() <= 30
    assert np.abs(passes.constraint_errors).max() < (1e-12 if np.isinf(weight) else 1e-5)


@needs_constraint_data
def test_seeds_unwrap_as_numpy_does_between_restarts():
    """MarkerIK._unwrap: each stretch between restarts unwrapped as numpy's unwrap does it, on the
    free rotational coordinates without limits only (the coupler model has no clamped ones; a
    translation keeps its values)."""
    setup = read_ik_setup(SETUP)
    problem = MarkerIK(load_osim(MODEL), read_trc(TRIAL), setup.tasks, time_range=(0.0, 0.1))
    rng = np.random.default_rng(3)
    K, n = 12, problem.q_start.shape[1]
    smooth = np.cumsum(rng.uniform(-2.0, 2.0, (K, n)), axis=0)
    turned = smooth + 2 * np.pi * rng.integers(-2, 3, (K, n))
    restart = np.zeros(K, bool)
    restart[[0, 5]] = True
    out = problem._unwrap(turned, restart)
    rotational = problem.om.coupling.rotational & ~problem.scene.frozen
    expected = turned.copy()
    for a, b in ((0, 5), (5, K)):
        expected[a:b, rotational] = np.unwrap(turned[a:b, rotational], axis=0)
    np.testing.assert_allclose(out, expected, atol=1e-12)
    assert np.all(out[:, ~problem.om.coupling.rotational] == turned[:, ~problem.om.coupling.rotational])


@needs_constraint_data
def test_scaling_scales_translational_couplers_as_opensim_does(osim, tmp_path):
    """Model::scale multiplies a coupler's scale_factor by the x factor of the body its
    translational dependent's joint hangs from (the knee translations of the patella on the
    tibia), not the rotational ones; unequal factors there are refused by both. Ours against
    OpenSim 4.6's scaled model (its couplers through its API: its file prints their splines to 6
    digits): every coupler's function equal at any knee angle (1e-14), so
    marker IK on the scaled model holds OpenSim's couplers, not the unscaled ones (which miss
    them by (s - 1) f(q), 2e-3 m here)."""
    from solver.opensim.model_document import ModelDocument
    from solver.opensim.scaling import apply_scale
    factors = {"tibia_r": (1.1, 1.1, 1.1), "tibia_l": (0.95, 0.95, 0.95), "femur_r": (1.2, 0.9, 1.0),
               "patella_r": (1.05, 1.05, 1.05)}
    doc = ModelDocument.read(MODEL)
    apply_scale(doc, {b: np.array(f) for b, f in factors.items()}, True, -1.0)
    ours = load_osim(doc.write(tmp_path / "ours.osim"))
    model, state = scaled_by_opensim(osim, MODEL, factors)
    unscaled = load_osim(MODEL)
    knee = np.linspace(-0.17, 2.79, 50)
    constraints = model.getConstraintSet()
    gap = 0.0
    for a, c in zip(ours.couplers, unscaled.couplers):          # OpenSim's scaled coupler, through its API
        theirs = osim.CoordinateCouplerConstraint.safeDownCast(constraints.get(a.name))
        scale = float(theirs.getPropertyByName("scale_factor").toString())
        function = theirs.getFunction()
        values = np.array([scale * function.calcValue(osim.Vector(1, float(x))) for x in knee])
        np.testing.assert_allclose(a.function.value(knee), values, rtol=1e-14, atol=1e-17)
        gap = max(gap, np.abs(a.function.value(knee) - c.function.value(knee)).max())
    assert gap > 1e-3
    text = (tmp_path / "ours.osim").read_text()
    assert len(re.findall(r"<scale_factor>1.1</scale_factor>", text)) == 3                 # tx, ty, tz on tibia_r
    assert len(re.findall(r"<scale_factor>0.95</scale_factor>", text)) == 3
    uneven = ModelDocument.read(MODEL)
    with pytest.raises(OpenSimFileError, match="tib_pat_r_tx_con.*scaled unequally"):
        apply_scale(uneven, {"tibia_r": np.array([1.1, 1.0, 1.1])}, True, -1.0)
    model = osim.Model(str(MODEL))
    state = model.initSystem()
    scale = osim.Scale()
    scale.setSegmentName("tibia_r")
    scale.setScaleFactors(osim.Vec3(1.1, 1.0, 1.1))
    scale.setApply(True)
    scale_set = osim.ScaleSet()
    scale_set.cloneAndAppend(scale)
    with pytest.raises(Exception, match="Non-uniform scaling"):
        model.scale(state, scale_set, True, -1.0)

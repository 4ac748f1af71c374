"""OpenSim's Scale tool (issue #31) against real references: OpenSim's own Scale regression case
(gait2354, subject01: its expected scale set and scaled, marker-placed model) and Pose2Sim's
markerless scaling setup, each also run through OpenSim 4.6's ScaleTool where installed.

Tolerances follow from what is compared. The std_ files print scale factors and masses with 15-17
significant digits (1e-6 is loose for them) and marker locations with 6 (0.1 mm is loose). Files
OpenSim writes in a test are printed at 17 digits (IO.SetPrecision), except its static motion:
8 decimals (radians, metres), so a pose read from it is exact to 5e-9.

OpenSim's marker placer stops its assembler where the static pose's objective is flat: on the
regression case its pose is 0.6 degrees of lumbar bending away from the minimum, and the markers
it places differ from ours by millimetres (torso markers). So no test here needs OpenSim's
optimizer: the marker placement is checked at OpenSim's own pose (the pose recovered from the
std model's placed markers, or read from OpenSim's static motion), and our pose is checked to be
at least as good as OpenSim's by the objective both minimise.
"""

import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from solver.__main__ import main
from solver.opensim import MarkerData, load_osim, read_trial
from solver.opensim.ik import MarkerIK
from solver.opensim.marker_placer import averaged_frames, place_markers
from solver.opensim.model_document import ModelDocument, read_marker_set
from solver.opensim.scale_setup import read_scale_set, read_scale_setup
from solver.opensim.scale_tool import run_scale_setup, summary_lines
from solver.opensim.scaling import _inertia, frame_span, scale_inertia
from solver.opensim.setup import IKMarkerTask, IKTaskSet
from solver.opensim.storage import read_storage
from tests.opensim_reference import opensim_if_installed

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SCALE = SHARED / "opensim_scale"
P2S = SHARED / "markerless_pose2sim"
SETUP = SCALE / "subject01_Setup_Scale.xml"
needs_scale = pytest.mark.skipif(not SCALE.is_dir(), reason="shared/data/opensim_scale is not beside the repository")
needs_p2s = pytest.mark.skipif(not P2S.is_dir(), reason="shared/data/markerless_pose2sim is not beside the repository")
INPUTS = ("subject01_Setup_Scale.xml", "gait2354_simbody.osim", "gait2354_Scale_MarkerSet.xml",
          "subject01_static.trc")


def quiet_run(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_scale_setup(*args, **kwargs)


@pytest.fixture(scope="module")
def regression(tmp_path_factory):
    """Our run of the regression setup, its outputs in a temporary folder."""
    out = tmp_path_factory.mktemp("scale_ours")
    return quiet_run(SETUP, out), out


def scale_factors_of(path) -> dict:
    """{segment: factors} of a ScaleSet file (the first Scale of each segment)."""
    out = {}
    for s in read_scale_set(path):
        out.setdefault(s.segment, s.factors)
    return out


def masses(osim) -> dict:
    return {b.name: b.mass for b in osim.bodies}


def marker_locations(osim) -> dict:
    return {m.name: (m.body, m.location) for m in osim.markers}


def largest_marker_difference(a, b) -> float:
    la, lb = marker_locations(a), marker_locations(b)
    assert set(la) == set(lb)
    assert all(la[n][0] == lb[n][0] for n in la)
    return max(float(np.linalg.norm(la[n][1] - lb[n][1])) for n in la)


def static_pose(setup, placed_path):
    """The pose at which the model `placed_path`'s markers sit on the setup's averaged static trial:
    the marker IK of that model on that frame (a zero-residual fit, not an optimizer's stopping
    point) and its largest residual."""
    placer = setup.marker_placer
    trial = read_trial(placer.marker_file)
    time, _, moved_to = averaged_frames(trial, *placer.time_range)
    om = load_osim(placed_path)
    names = [n for n in trial.names if n in om.markers.names]
    data = MarkerData(names, np.array([time]), moved_to[None][:, [trial.names.index(n) for n in names]],
                      np.array([1]), trial.data_rate, trial.camera_rate)
    tasks = IKTaskSet(marker_tasks=[IKMarkerTask(n, True, 1.0) for n in names])
    fit = MarkerIK(om, data, tasks).solve(accuracy=1e-12, warm_start="none")
    return fit.q[0], float(fit.marker_error_max[0])


def placed_at(run, pose):
    """Our scaled model with its markers placed at `pose` (the marker placer's step 4 only)."""
    doc = run.scaled.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        place_markers(doc, run.setup.marker_placer, read_trial(run.setup.marker_placer.marker_file), pose=pose)
    return doc.osim()


# ------------------------------------------------------------------------------------ setups

@needs_scale
def test_regression_setup_reads_as_opensim():
    s = read_scale_setup(SETUP)
    assert (s.name, s.mass) == ("subject01", 72.6)
    assert s.model_file == SCALE / "gait2354_simbody.osim"
    assert s.marker_set_file == SCALE / "gait2354_Scale_MarkerSet.xml"
    m = s.model_scaler
    assert m.scaling_order == ["measurements", "manualScale"] and m.preserve_mass_distribution
    assert [x.name for x in m.measurements] == ["torso", "pelvis", "thigh", "shank", "foot"]
    assert m.measurements[2].pairs == [("R.ASIS", "R.Knee.Lat"), ("L.ASIS", "L.Knee.Lat")]
    assert m.measurements[2].bodies == {b: [0, 1, 2] for b in ("femur_r", "femur_l", "patella_r", "patella_l")}
    assert [x.segment for x in m.scales] == ["femur_r", "femur_l", "tibia_r", "tibia_l"]
    assert m.marker_file == SCALE / "subject01_static.trc" and m.time_range == (1.0, 2.0)
    p = s.marker_placer
    assert p.apply and p.coordinate_file is None and p.output_marker_file is None      # Unassigned
    assert p.output_model_file == SCALE / "subject01_simbody.osim" and p.max_marker_movement == -1.0
    assert len(p.tasks.marker_tasks) == 39 and [t.value_type for t in p.tasks.coordinate_tasks][-1] == "manual_value"


@needs_scale
def test_regression_setup_matches_opensims_reader():
    osim = opensim_if_installed()
    if osim is None:
        pytest.skip("the opensim package is the reference")
    theirs, ours = osim.ScaleTool(str(SETUP)), read_scale_setup(SETUP)
    assert theirs.getSubjectMass() == ours.mass
    scaler = theirs.getModelScaler()
    assert [scaler.getScalingOrder().get(i) for i in range(scaler.getScalingOrder().getSize())] == \
        ours.model_scaler.scaling_order
    assert scaler.getPreserveMassDist() == ours.model_scaler.preserve_mass_distribution
    assert scaler.getMeasurementSet().getSize() == len(ours.model_scaler.measurements)
    assert theirs.getMarkerPlacer().getApply() == ours.marker_placer.apply


@needs_p2s
def test_pose2sim_setup_unassigned_and_placer_off():
    s = read_scale_setup(P2S / "Scaling_Setup_Pose2Sim_Halpe26.xml")
    assert s.model_file is None and s.marker_set_file is None                     # Unassigned
    assert s.model_scaler.output_model_file is None and s.model_scaler.output_scale_file is None
    assert s.model_scaler.time_range == (0.0166667, 0.1) and s.mass == 69.0
    assert [x.apply for x in s.model_scaler.scales] == [False] * len(s.model_scaler.scales)
    assert s.marker_placer.apply is False
    # relative paths are taken from the setup's folder, as OpenSim takes them
    assert s.model_scaler.marker_file == (P2S / "../Demo/S00_Demo_Session/S00_P00_Participant/S00_P00_T00_StaticTrial/"
                                          "pose-3d/S00_P00_T00_StaticTrial_0-12.trc").resolve()


def test_frame_span_is_opensims_find_frame_range():
    time = np.arange(10) / 10.0
    assert frame_span(time, 0.25, 0.55) == (2, 6)       # last frame <= start, first frame >= end
    assert frame_span(time, 0.2, 0.5) == (2, 5)
    assert frame_span(time, -1.0, -1.0) == (0, 0)       # OpenSim's default (-1, -1)
    assert frame_span(time, 0.0, 5.0) == (0, 9)


def test_inertia_of_equal_factors_and_cylinder():
    tensor = np.diag([0.1, 0.02, 0.1])
    assert np.allclose(scale_inertia(tensor, 2.0, [1.1] * 3, scale_mass=False), tensor * 1.1 ** 2, rtol=1e-15)
    assert np.allclose(scale_inertia(tensor, 2.0, [1.1] * 3, scale_mass=True), tensor * 1.1 ** 5, rtol=1e-15)
    # a cylinder along y (its smallest moment): m r^2 / 2 about y, m (L^2/12 + r^2/4) about x and z
    m, r, L = 2.0, 0.05, 0.4
    cylinder = np.diag([m * (L * L / 12 + r * r / 4), m * r * r / 2, m * (L * L / 12 + r * r / 4)])
    s = np.array([1.2, 0.9, 1.2])
    side = m * ((0.9 * L) ** 2 / 12 + (1.2 * r) ** 2 / 4)
    assert np.allclose(scale_inertia(cylinder, m, s, scale_mass=False),
                       np.diag([side, m * (1.2 * r) ** 2 / 2, side]), rtol=1e-14)


# ------------------------------------------------------------------------ the regression case

@needs_scale
def test_scale_set_matches_opensims_expected(regression):
    run, out = regression
    std = scale_factors_of(SCALE / "std_subject01_scaleSet_applied.xml")
    ours = scale_factors_of(out / "subject01_scaleSet_applied.xml")
    assert list(ours) == list(std)
    assert [s.segment for s in read_scale_set(out / "subject01_scaleSet_applied.xml")] == \
        [s.segment for s in read_scale_set(SCALE / "std_subject01_scaleSet_applied.xml")]
    assert max(float(np.max(np.abs(ours[k] - std[k]))) for k in std) < 1e-6


@needs_scale
def test_masses_match_opensims_expected(regression):
    run, out = regression
    std = masses(load_osim(SCALE / "std_subject01_simbody.osim").source)
    for path in (out / "subject01_scaledOnly.osim", out / "subject01_simbody.osim"):
        ours = masses(load_osim(path).source)
        assert set(ours) == set(std)
        assert max(abs(ours[b] - std[b]) / std[b] for b in std if std[b] > 0) < 1e-6
        assert abs(sum(ours.values()) - 72.6) < 1e-12 * 72.6


@needs_scale
def test_placed_markers_match_opensims_expected_at_its_pose(regression):
    run, out = regression
    std_path = SCALE / "std_subject01_simbody.osim"
    pose, residual = static_pose(run.setup, std_path)
    assert residual < 1e-6                  # the std markers sit on the trial at one pose (6 digits)
    assert largest_marker_difference(placed_at(run, pose), load_osim(std_path).source) < 1e-4


@needs_scale
def test_our_static_pose_is_at_least_as_good_as_opensims(regression):
    run, out = regression
    p = run.placement
    pose, _ = static_pose(run.setup, SCALE / "std_subject01_simbody.osim")
    trial = read_trial(run.setup.marker_placer.marker_file)
    time, ik_frame, _ = averaged_frames(trial, *run.setup.marker_placer.time_range)
    om = run.scaled.om()
    problem = MarkerIK(om, MarkerData(list(trial.names), np.array([time]), ik_frame[None], np.array([1]), 60.0, 60.0),
                       run.setup.marker_placer.tasks)
    ours, theirs = problem.report(p.q[None]).objective[0], problem.report(pose[None]).objective[0]
    assert ours <= theirs * (1 + 1e-9)
    # what the file says: placed markers, the pose as default values, the static motion
    placed = load_osim(out / "subject01_simbody.osim")
    assert np.allclose(placed.coupling.default, p.q, atol=1e-15)
    assert np.allclose(placed.marker_positions(p.q[None])[0], ik_frame[[trial.names.index(n)
                                                                          for n in placed.markers.names]], atol=1e-9)
    motion = read_storage(out / "subject01_static_output.mot")
    assert motion.n_rows == 1 and motion.degrees


@needs_scale
def test_markers_named_on_both_sides(regression):
    run, out = regression
    trial = read_trial(SCALE / "subject01_static.trc")
    model = [m.name for m in read_marker_set(SCALE / "gait2354_Scale_MarkerSet.xml")]
    model += [m.name for m in load_osim(SCALE / "gait2354_simbody.osim").source.markers if m.name not in model]
    assert run.trial_only_markers == [n for n in trial.names if n not in model] and run.trial_only_markers
    assert run.model_only_markers == [n for n in model if n not in trial.names]
    assert set(run.placement.moved_errors) | set(run.placement.fixed_errors) == {n for n in model if n in trial.names}
    lines = "\n".join(summary_lines(run))
    assert "trial markers not in the model (ignored): " + ", ".join(run.trial_only_markers) in lines
    assert "moved (tracking) markers: 39" in lines


@needs_scale
def test_cli_writes_what_the_setup_names(tmp_path, capsys):
    assert main(["scale", str(SETUP), "--output-dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["subject01_scaleSet_applied.xml", "subject01_scaledOnly.osim",
                                                          "subject01_simbody.osim", "subject01_static_output.mot"]
    assert "measurement thigh: factor" in capsys.readouterr().out
    bad = tmp_path / "bad.xml"
    bad.write_text(SETUP.read_text().replace("gait2354_simbody.osim", "Unassigned"))
    assert main(["scale", str(bad)]) == 1
    assert "names no model_file" in capsys.readouterr().err


# ------------------------------------------------------------------- OpenSim 4.6's ScaleTool

BENT = 0.3          # rad or m added to every coordinate: a pose where the knees' scaled functions matter


def vec(v) -> np.ndarray:
    return np.array([v.get(i) for i in range(3)])


def opensim_model_values(osim, model) -> dict:
    """Full-precision values of an OpenSim model in memory (its files print 3-vectors with 6
    digits): per marker (base body, location in it), per body mass, inertia moments and products,
    and origin in ground at the default pose."""
    state = model.initSystem()
    markers = {}
    for i in range(model.getMarkerSet().getSize()):
        m = model.getMarkerSet().get(i)
        base = m.getParentFrame().findBaseFrame()
        markers[m.getName()] = (base.getName(), vec(m.findLocationInFrame(state, base)))
    bodies = {}
    for i in range(model.getBodySet().getSize()):
        b = model.getBodySet().get(i)
        bodies[b.getName()] = (b.getMass(), vec(b.getInertia().getMoments()), vec(b.getInertia().getProducts()),
                               vec(b.getTransformInGround(state).p()))
    coordinates = model.getCoordinateSet()
    for i in range(coordinates.getSize()):                       # every coordinate moved by BENT
        c = coordinates.get(i)
        c.setValue(state, c.getDefaultValue() + BENT, False)
    model.realizePosition(state)
    bent_q = {coordinates.get(i).getName(): coordinates.get(i).getValue(state) for i in range(coordinates.getSize())}
    bent = {model.getBodySet().get(i).getName(): vec(model.getBodySet().get(i).getTransformInGround(state).p())
            for i in range(model.getBodySet().getSize())}
    return {"markers": markers, "bodies": bodies, "bent": bent, "bent_q": bent_q}


def opensim_scale_steps(osim, setup_path) -> dict:
    """ScaleTool::run's steps through OpenSim's API, writing nothing: each applied measurement's
    factor (ModelScaler::computeMeasurementScaleFactor), the model after the model scaler and after
    the marker placer (opensim_model_values), the placer's value and its static pose."""
    tool = osim.ScaleTool(str(setup_path))
    folder = tool.getPathToSubject()
    scaler, placer = tool.getModelScaler(), tool.getMarkerPlacer()
    scaler.setPrintResultFiles(False)
    placer.setPrintResultFiles(False)
    model = tool.createModel()
    state = model.initSystem()
    trial = osim.MarkerData(folder + scaler.getMarkerFileName().strip())
    trial.convertToUnits(model.getLengthUnits())
    measurements = scaler.getMeasurementSet()
    factors = {measurements.get(i).getName(): scaler.computeMeasurementScaleFactor(state, model, trial, measurements.get(i))
               for i in range(measurements.getSize()) if measurements.get(i).getApply()}
    assert scaler.processModel(model, folder, tool.getSubjectMass())
    out = {"factors": factors, "scaled": opensim_model_values(osim, model)}
    out["placed_ok"] = placer.processModel(model, folder)
    if out["placed_ok"]:
        out["placed"] = opensim_model_values(osim, model)
        motion = placer.getOutputStorage()
        labels = motion.getColumnLabels()
        row = motion.getStateVector(0).getData()
        out["pose"] = {labels.get(k + 1).split("/")[-2]: row.get(k) for k in range(row.getSize())
                       if labels.get(k + 1).endswith("/value")}
    return out


def compare_with_opensim(om, values) -> dict:
    """Largest differences between our model `om` and OpenSim's `values` (opensim_model_values):
    marker locations (m), relative masses, inertias, body origins at the default pose (m)."""
    source = om.source
    ours = {m.name: (m.body, m.location) for m in source.markers}
    assert set(ours) == set(values["markers"])
    assert all(ours[n][0] == values["markers"][n][0] for n in ours)
    q = om.coupling.default_coordinates(1)
    origins = om.body_frames(q)[0, :, :3, 3]
    bent = om.body_frames(np.array([[values["bent_q"][n] for n in om.coordinate_names]]))[0, :, :3, 3]
    masses = {b.name: b.mass for b in source.bodies}
    return {"markers": max(float(np.linalg.norm(ours[n][1] - values["markers"][n][1])) for n in ours),
            "masses": max(abs(masses[b] - v[0]) / v[0] for b, v in values["bodies"].items() if v[0] > 0),
            "origins": max(float(np.linalg.norm(origins[om.segment(b)] - v[3])) for b, v in values["bodies"].items()),
            "bent": max(float(np.linalg.norm(bent[om.segment(b)] - v)) for b, v in values["bent"].items())}


def inertia_difference(doc: ModelDocument, values) -> float:
    """Largest relative difference of the bodies' inertia moments and products in `doc` vs OpenSim's."""
    worst = 0.0
    for body in doc.bodies():
        name = body.get("name")
        if name not in values["bodies"]:
            continue
        tensor = _inertia(body, doc.v4, None)
        _, moments, products, _ = values["bodies"][name]
        theirs = np.concatenate([moments, products])
        ours = np.concatenate([np.diag(tensor), [tensor[0, 1], tensor[0, 2], tensor[1, 2]]])
        worst = max(worst, float(np.max(np.abs(ours - theirs))) / max(float(np.max(np.abs(theirs))), 1e-300))
    return worst


@pytest.fixture(scope="module")
def opensim_regression():
    osim = opensim_if_installed()
    if osim is None or not SCALE.is_dir():
        pytest.skip("needs the opensim package and shared/data/opensim_scale")
    return opensim_scale_steps(osim, SETUP)


@needs_scale
def test_against_opensims_scale_tool(regression, opensim_regression):
    run, out = regression
    theirs = opensim_regression
    assert {m.name: m.factor for m in run.factors.measured} == pytest.approx(theirs["factors"], rel=1e-12, abs=0)
    scaled = compare_with_opensim(run.scaled.om(), theirs["scaled"])
    assert scaled["markers"] < 1e-12 and scaled["masses"] < 1e-12 and scaled["origins"] < 1e-12 and scaled["bent"] < 1e-12
    assert inertia_difference(run.scaled, theirs["scaled"]) < 1e-12
    assert theirs["placed_ok"]
    pose = np.array([theirs["pose"][n] for n in run.placement.coordinate_names])
    placed = compare_with_opensim(placed_at_doc(run, pose).om(), theirs["placed"])
    assert placed["markers"] < 1e-9 and placed["masses"] < 1e-12
    # our own static pose minimises the placer's objective at least as well as OpenSim's
    problem = static_problem(run)
    assert problem.report(run.placement.q[None]).objective[0] <= problem.report(pose[None]).objective[0] * (1 + 1e-9)


def placed_at_doc(run, pose) -> ModelDocument:
    doc = run.scaled.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        place_markers(doc, run.setup.marker_placer, read_trial(run.setup.marker_placer.marker_file), pose=pose)
    return doc


def static_problem(run) -> MarkerIK:
    """The marker placer's IK problem on our scaled model (the averaged static frame)."""
    placer = run.setup.marker_placer
    trial = read_trial(placer.marker_file)
    time, ik_frame, _ = averaged_frames(trial, *placer.time_range)
    data = MarkerData(list(trial.names), np.array([time]), ik_frame[None], np.array([1]), trial.data_rate,
                      trial.camera_rate)
    return MarkerIK(run.scaled.om(), data, placer.tasks)


# ------------------------------------------------------------------------------ Pose2Sim

def run_opensim(osim, setup_path):
    """(tool, run()'s value) of OpenSim's ScaleTool on a setup (it writes the files it names)."""
    tool = osim.ScaleTool(str(setup_path))
    return tool, tool.run()


def pose2sim_setup(folder: Path, placer_apply: bool | None = None) -> Path:
    """Pose2Sim's scaling setup with its model and static trial from shared/data, the outputs in
    `folder` (OpenSim's own paths point into Pose2Sim's folders)."""
    text = (P2S / "Scaling_Setup_Pose2Sim_Halpe26.xml").read_text()
    text = text.replace("<model_file>Unassigned</model_file>",
                        f"<model_file>{P2S / 'Model_Pose2Sim_Halpe26.osim'}</model_file>")
    # relative to the setup's folder: OpenSim's model scaler and marker placer prefix that folder to
    # marker_file even when it is absolute
    trial = os.path.relpath(P2S / "static_0-12.trc", folder)
    text = re.sub(r"<marker_file>[^<]*</marker_file>", f"<marker_file>{trial}</marker_file>", text)
    text = text.replace("<output_model_file>Unassigned</output_model_file>",
                        "<output_model_file>scaled.osim</output_model_file>", 1)
    text = text.replace("<output_scale_file>Unassigned</output_scale_file>",
                        "<output_scale_file>scale_set.xml</output_scale_file>")
    text = re.sub(r"(<MarkerPlacer>.*?<output_model_file>)[^<]*(</output_model_file>)", r"\1placed.osim\2", text,
                  flags=re.S)
    if placer_apply is not None:
        text = re.sub(r"(<MarkerPlacer>.*?<apply>)\w+(</apply>)", rf"\g<1>{str(placer_apply).lower()}\2", text,
                      count=1, flags=re.S)
    path = folder / "setup.xml"
    path.write_text(text)
    return path


def half_unit_of_sixth_digit(values) -> np.ndarray:
    """How far a number printed with 6 significant digits (OpenSim's 3-vectors) may be from its value."""
    values = np.abs(np.asarray(values, dtype=float))
    return 0.5 * 10.0 ** (np.floor(np.log10(np.where(values > 0, values, 1.0))) - 5)


@needs_p2s
def test_pose2sim_scale_factors_match_opensims_model_scaler(tmp_path):
    osim = opensim_if_installed()
    (tmp_path / "ours").mkdir()
    setup = pose2sim_setup(tmp_path)
    run = quiet_run(setup, tmp_path / "ours")
    assert run.placement is None and any("MarkerPlacer apply is false" in n for n in run.notes)
    assert sorted(p.name for p in (tmp_path / "ours").iterdir()) == ["scale_set.xml", "scaled.osim"]
    ours = scale_factors_of(tmp_path / "ours" / "scale_set.xml")
    if osim is None:
        pytest.skip("the opensim package is the reference")
    steps = opensim_scale_steps(osim, setup)
    assert {m.name: m.factor for m in run.factors.measured} == pytest.approx(steps["factors"], rel=1e-6, abs=0)
    scaled = compare_with_opensim(run.scaled.om(), steps["scaled"])
    assert scaled["markers"] < 1e-12 and scaled["masses"] < 1e-12 and scaled["origins"] < 1e-12 and scaled["bent"] < 1e-12
    assert inertia_difference(run.scaled, steps["scaled"]) < 1e-12
    # OpenSim's finding: the setup's MarkerPlacer has apply false, and MarkerPlacer::processModel returns
    # false first thing then; so ScaleTool.run() returns false without a message, after the model
    # scaler has written its files
    assert steps["placed_ok"] is False
    tool, ok = run_opensim(osim, setup)
    assert tool.getMarkerPlacer().getApply() is False and ok is False
    theirs = scale_factors_of(tmp_path / "scale_set.xml")                   # printed with 6 digits
    assert list(ours) == list(theirs)
    assert all(np.all(np.abs(ours[k] - theirs[k]) <= half_unit_of_sixth_digit(theirs[k])) for k in theirs)


@needs_p2s
def test_pose2sim_with_the_placer_on(tmp_path):
    osim = opensim_if_installed()
    setup = pose2sim_setup(tmp_path, placer_apply=True)
    run = quiet_run(setup, write=False)
    trial = read_trial(P2S / "static_0-12.trc")
    model = [m.name for m in load_osim(P2S / "Model_Pose2Sim_Halpe26.osim").source.markers]
    assert run.placement.deleted_markers == [n for n in model if n not in trial.names]
    assert set(run.placement.fixed_errors) == {n for n in model if n in trial.names}    # all fixed in this model
    if osim is None:
        pytest.skip("the opensim package is the reference")
    steps = opensim_scale_steps(osim, setup)
    assert steps["placed_ok"] is True        # the same setup runs through once the placer is applied
    pose = np.array([steps["pose"][n] for n in run.placement.coordinate_names])
    placed = compare_with_opensim(placed_at_doc(run, pose).om(), steps["placed"])
    assert placed["markers"] < 1e-12 and placed["masses"] < 1e-12
    problem = static_problem(run)
    assert problem.report(run.placement.q[None]).objective[0] <= problem.report(pose[None]).objective[0] * (1 + 1e-9)


@needs_scale
def test_unequal_manual_scales_and_scaled_masses_match_opensim(tmp_path):
    """Manual factors that differ per axis (offsets, translation functions along their axes, the
    cylinder rule for inertia) and masses scaled with the volume (preserve_mass_distribution false)."""
    osim = opensim_if_installed()
    text = SETUP.read_text()
    for name in ("gait2354_simbody.osim", "gait2354_Scale_MarkerSet.xml"):
        text = text.replace(f"> {name} <", f">{SCALE / name}<")
    text = text.replace("> subject01_static.trc <", f">{os.path.relpath(SCALE / 'subject01_static.trc', tmp_path)}<")
    text = text.replace("<scaling_order> measurements manualScale </scaling_order>",
                        "<scaling_order> manualScale </scaling_order>")
    text = text.replace("<preserve_mass_distribution> true </preserve_mass_distribution>",
                        "<preserve_mass_distribution> false </preserve_mass_distribution>")
    factors = iter(["1.1 0.9 1.2", "0.95 1.05 1.0", "1.2 0.8 1.0", "1.0 1.1 0.9"])
    text = re.sub(r"<scales>[^<]*</scales>", lambda m: f"<scales> {next(factors)} </scales>", text)
    setup = tmp_path / "setup.xml"
    setup.write_text(text)
    run = quiet_run(setup, write=False)
    assert run.factors.of("femur_r").tolist() == [1.1, 0.9, 1.2] and run.factors.of("pelvis").tolist() == [1, 1, 1]
    if osim is None:
        pytest.skip("the opensim package is the reference")
    steps = opensim_scale_steps(osim, setup)
    scaled = compare_with_opensim(run.scaled.om(), steps["scaled"])
    assert scaled["markers"] < 1e-12 and scaled["masses"] < 1e-12 and scaled["origins"] < 1e-12 and scaled["bent"] < 1e-12
    assert inertia_difference(run.scaled, steps["scaled"]) < 1e-12


@needs_scale
def test_opensim_reads_the_models_we_write(regression, tmp_path):
    """Our written files (the input's layout, OpenSim 3 here; the knees' MultiplierFunctions,
    default values, markers) mean to OpenSim what they mean to us. OpenSim 4.6 turns an OpenSim 3
    file's joint offsets into offset frames with 6 significant digits (-0.07243759657480676 is
    read as -0.0724376), so body origins agree to that rounding along a chain (< 1e-6 m), the rest
    exactly. An OpenSim 4 file keeps every digit: test_opensim_reads_our_opensim_4_files."""
    osim = opensim_if_installed()
    run, out = regression
    if osim is None:
        pytest.skip("the opensim package is the reference")
    for name in ("subject01_scaledOnly.osim", "subject01_simbody.osim"):
        model = osim.Model(str(out / name))
        values = opensim_model_values(osim, model)
        ours = compare_with_opensim(load_osim(out / name), values)
        assert ours["markers"] < 1e-12 and ours["masses"] < 1e-12
        assert ours["origins"] < 1e-6 and ours["bent"] < 1e-6
        defaults = {model.getCoordinateSet().get(i).getName(): model.getCoordinateSet().get(i).getDefaultValue()
                    for i in range(model.getCoordinateSet().getSize())}
        assert [defaults[n] for n in load_osim(out / name).coordinate_names] == \
            load_osim(out / name).coupling.default.tolist()


@needs_scale
def test_output_marker_file(tmp_path):
    text = SETUP.read_text().replace("<output_marker_file> Unassigned </output_marker_file>",
                                     "<output_marker_file> placed_markers.xml </output_marker_file>")
    for name in INPUTS[1:]:
        text = text.replace(f"> {name} <", f">{SCALE / name}<")
    (tmp_path / "setup.xml").write_text(text)
    run = quiet_run(tmp_path / "setup.xml", tmp_path / "out")
    written = {m.name: m for m in read_marker_set(run.files["marker_set"])}
    placed = {m.name: m for m in run.placed.osim().markers}
    assert list(written) == list(placed)
    assert all(written[n].frame == placed[n].body and np.array_equal(written[n].location, placed[n].location)
               for n in placed)


@needs_p2s
def test_opensim_reads_our_opensim_4_files(tmp_path):
    osim = opensim_if_installed()
    quiet_run(pose2sim_setup(tmp_path, placer_apply=True), tmp_path / "ours")
    if osim is None:
        pytest.skip("the opensim package is the reference")
    for name in ("scaled.osim", "placed.osim"):
        model = osim.Model(str(tmp_path / "ours" / name))
        ours = compare_with_opensim(load_osim(tmp_path / "ours" / name), opensim_model_values(osim, model))
        assert max(ours.values()) < 1e-12


@needs_scale
def test_what_the_model_lacks_is_named(tmp_path):
    text = SETUP.read_text()
    for name in INPUTS[1:]:
        text = text.replace(f"> {name} <", f">{SCALE / name}<")
    text = text.replace("<markers> R.ASIS L.ASIS </markers>", "<markers> R.ASIS No.Such.Marker </markers>")
    text = text.replace("<segment> tibia_l </segment>", "<segment> tibia_x </segment>")
    (tmp_path / "setup.xml").write_text(text)
    with pytest.warns(Warning, match="measurement 'pelvis' not used to scale the model: marker No.Such.Marker"):
        run = run_scale_setup(tmp_path / "setup.xml", write=False)
    assert run.factors.of("pelvis").tolist() == [1.0, 1.0, 1.0]                 # left out, as OpenSim does
    assert "the manual scale of 'tibia_x' names no body of the model" in run.notes
    assert "measurement pelvis: not used (marker No.Such.Marker is not in the model)" in summary_lines(run)


@needs_scale
@needs_p2s
def test_opensim_3_marker_set_on_an_opensim_4_model():
    """A marker set file naming <body> (OpenSim 3) put on an OpenSim 4 model gets sockets, and
    replaced markers move to the end of the set, as Model::updateMarkerSet does."""
    doc = ModelDocument.read(P2S / "Model_Pose2Sim_Halpe26.osim")
    before = [m.get("name") for m in doc.marker_elements()]
    bodies = set(doc.body_names())
    entries = [e for e in read_marker_set(SCALE / "gait2354_Scale_MarkerSet.xml") if e.frame in bodies]
    entries[0].name = before[0]                                   # replaces the model's first marker
    doc.update_markers(entries)
    markers = doc.osim().markers
    assert [m.name for m in markers] == before[1:] + [e.name for e in entries]
    added = {m.name: m for m in markers[len(before) - 1:]}
    assert all(added[e.name].body == e.frame and np.array_equal(added[e.name].location, e.location) for e in entries)


@needs_scale
def test_max_marker_movement_in_the_trials_units(tmp_path):
    """max_marker_movement is in the marker file's units (mm here), as OpenSim compares it."""
    text = SETUP.read_text()
    for name in INPUTS[1:]:
        text = text.replace(f"> {name} <", f">{SCALE / name}<")
    (tmp_path / "setup.xml").write_text(text.replace("<max_marker_movement>      -1.00000000 </max_marker_movement>",
                                                     "<max_marker_movement> 2 </max_marker_movement>"))
    run = quiet_run(tmp_path / "setup.xml", write=False)
    trial = read_trial(SCALE / "subject01_static.trc")
    first, last = frame_span(trial.time, 1.0, 2.0)
    span = trial.positions[first:last + 1]
    extent = np.max(np.nanmax(span, axis=0) - np.nanmin(span, axis=0), axis=1)
    moving = [n for n, e in zip(trial.names, extent) if e > 0.002]
    assert moving                                             # not an empty check
    assert [n.split()[1] for n in run.notes if "max_marker_movement" in n] == moving

"""OpenSim's thoracoscapular shoulder model (../shared/data/opensim_constraints): its
ScapulothoracicJoint (the scapula gliding on an ellipsoid over the thorax) and its PointConstraint
(the acromioclavicular point "AC" of clavicle and scapula held together).

References: the ellipsoid equation and finite differences (no OpenSim needed); opensim 4.6's body
transforms and marker positions at random coordinates; a motion OpenSim makes (coordinate
trajectories assembled by OpenSim onto the AC constraint, its markers from OpenSim's forward
kinematics) solved by OpenSim's InverseKinematicsTool at accuracy 1e-7. OpenSim's answers are
computed once per module (one small trial) and only where the `opensim` package is installed."""

import re

import numpy as np
import pytest

from solver import Scene
from solver.finite_differences import numerical_jacobian, relative_difference
from solver.opensim import (IKMarkerTask, IKTaskSet, MarkerData, MarkerIK, MarkerScene, OpenSimFileError, load_osim,
                            read_storage)
from solver.opensim import write_trc
from solver.opensim.marker_kinematics import MarkerKinematics
from solver.opensim.markers import marker_jacobian, marker_positions
from tests.opensim_reference import DATA, assembled_motion, scaled_by_opensim, unlocked_model
from tests.opensim_reference import opensim as _opensim

FOLDER = DATA.parent / "opensim_constraints"
MODEL = FOLDER / "ThoracoscapularShoulderModel.osim"
needs_model = pytest.mark.skipif(not MODEL.is_file(), reason="shared/data/opensim_constraints is missing")
pytestmark = needs_model
DEG = 180.0 / np.pi
SCAPULA = ["scapula_abduction", "scapula_elevation", "scapula_upward_rot", "scapula_winging"]


@pytest.fixture(scope="module")
def om():
    return load_osim(MODEL)


def _random_coordinates(om, rng, frames, spread=0.6):
    return om.coupling.default + rng.uniform(-spread, spread, (frames, len(om.coordinate_names)))


def _variant(tmp_path, direction="0.4", radii="0.07 0.17 0.09", origin=None):
    """The model with another winging axis direction and other ellipsoid radii (and origin)."""
    text = MODEL.read_text()
    if origin is not None:
        text = text.replace("<scapula_winging_axis_origin>0 0</scapula_winging_axis_origin>",
                            f"<scapula_winging_axis_origin>{origin}</scapula_winging_axis_origin>")
    text = text.replace("<scapula_winging_axis_direction>0</scapula_winging_axis_direction>",
                        f"<scapula_winging_axis_direction>{direction}</scapula_winging_axis_direction>")
    text = text.replace("<thoracic_ellipsoid_radii_x_y_z>0.082997500000000002 0.199991 0.083001000000000005"
                        "</thoracic_ellipsoid_radii_x_y_z>",
                        f"<thoracic_ellipsoid_radii_x_y_z>{radii}</thoracic_ellipsoid_radii_x_y_z>")
    path = tmp_path / "variant.osim"
    path.write_text(text)
    return path


# ------------------------------------------------------------------------------------- reading

def test_the_joint_and_the_point_constraint_are_read(om):
    joint = om.source.joint("scapulothoracic")
    assert joint.type == "ScapulothoracicJoint" and [c.name for c in joint.coordinates] == SCAPULA
    assert all(c.motion_type == "rotational" for c in joint.coordinates)
    assert om.point_names == ["AC"]
    point = om.source.points[0]
    assert (point.body_1, point.body_2) == ("clavicle", "scapula")
    np.testing.assert_allclose(point.location_2, [-0.01357, 0.00011, -0.01523])
    # the file's default pose is assembled: AC holds there
    assert np.abs(om.point_residuals(om.coupling.default_coordinates(1))).max() < 1e-12


@pytest.mark.parametrize("change, words", [
    (("<thoracic_ellipsoid_radii_x_y_z>0.082997500000000002",
      "<thoracic_ellipsoid_radii_x_y_z>-0.08"), "must be three positive numbers"),
    (("<PointConstraint name=\"AC\">", "<PointOnLineConstraint name=\"AC\">"),
     "<PointOnLineConstraint name='AC'> is not supported"),
    (("<socket_body_2>/bodyset/scapula</socket_body_2>", "<socket_body_2>/bodyset/nothing</socket_body_2>"),
     "socket path '/bodyset/nothing' names no component"),
])
def test_what_is_not_supported_is_refused_by_name(tmp_path, change, words):
    text = MODEL.read_text()
    assert change[0] in text
    text = text.replace(change[0], change[1])
    if "PointOnLine" in change[1]:
        text = text.replace("</PointConstraint>", "</PointOnLineConstraint>")
    (tmp_path / "m.osim").write_text(text)
    with pytest.raises(OpenSimFileError, match=words):
        load_osim(tmp_path / "m.osim")


def test_a_disabled_point_constraint_is_left_out(tmp_path):
    (tmp_path / "m.osim").write_text(MODEL.read_text().replace("<isEnforced>true</isEnforced>",
                                                               "<isEnforced>false</isEnforced>"))
    assert load_osim(tmp_path / "m.osim").point_names == []


# ---------------------------------------------------------------------------------- kinematics

@pytest.mark.parametrize("variant", [False, True])
def test_the_scapula_joint_origin_glides_on_the_ellipsoid(om, tmp_path, variant):
    """The scapula's joint frame origin, in the thorax's joint frame, solves x^2/r_x^2 + y^2/r_y^2
    + z^2/r_z^2 = 1 at any coordinates, and winging alone does not move it."""
    model = load_osim(_variant(tmp_path)) if variant else om
    joint = model.source.joint("scapulothoracic")
    radii = np.array([0.07, 0.17, 0.09]) if variant else np.array([0.0829975, 0.199991, 0.083001])
    q = _random_coordinates(model, np.random.default_rng(1), 20)
    W = model.body_frames(q)
    thorax, scapula = W[:, model.segment("thorax")], W[:, model.segment("scapula")]
    origin = np.linalg.inv(thorax @ joint.parent_offset) @ scapula @ joint.child_offset
    p = origin[:, :3, 3]
    np.testing.assert_allclose(np.sum((p / radii) ** 2, axis=1), 1.0, atol=1e-12)
    w = model.coupling.index("scapula_winging")
    q2 = q.copy()
    q2[:, w] += 0.3
    W2 = model.body_frames(q2)
    moved = np.linalg.inv(W2[:, model.segment("thorax")] @ joint.parent_offset) @ W2[:, model.segment("scapula")] \
        @ joint.child_offset
    np.testing.assert_allclose(moved[:, :3, 3], p, atol=1e-14)


@pytest.mark.parametrize("origin", [None, "0.012 -0.021"])
def test_marker_and_constraint_jacobians_match_finite_differences(om, tmp_path, origin):
    if origin is not None:                               # the winging axis off the scapula plane's origin
        om = load_osim(_variant(tmp_path, origin=origin))
    rng = np.random.default_rng(2)
    q = _random_coordinates(om, rng, 4)
    n = q.shape[1]
    h = 1e-6
    numeric = np.stack([(marker_positions(om, q + h * e) - marker_positions(om, q - h * e)) / (2 * h)
                        for e in np.eye(n)], axis=-1)
    J = marker_jacobian(om, q)
    assert np.abs(J - numeric).max() < 1e-8
    fast = MarkerKinematics(om.model, om.coupling, om.markers.segments, om.markers.locations)
    x, Jf = fast.positions_and_jacobian(q)
    assert np.abs(x - marker_positions(om, q)).max() < 1e-14
    assert np.abs(Jf.reshape(J.shape) - J).max() < 1e-13
    residual = np.stack([(om.point_residuals(q + h * e) - om.point_residuals(q - h * e)) / (2 * h)
                         for e in np.eye(n)], axis=-1)                                       # (F, P, 3, n)
    points = MarkerKinematics(om.model, om.coupling, om.points.segments, om.points.locations)
    Jp = points.positions_and_jacobian(q)[1].reshape(4, 2, 3, n)
    assert np.abs((Jp[:, 0] - Jp[:, 1]) - residual[:, 0]).max() < 1e-8


def _transform(t):
    X = np.eye(4)
    X[:3, :3] = [[t.R().get(i, k) for k in range(3)] for i in range(3)]
    X[:3, 3] = [t.p().get(i) for i in range(3)]
    return X


@pytest.mark.parametrize("variant", [False, True, "origin"])
def test_forward_kinematics_matches_opensim(tmp_path, variant):
    """Body frames and markers at random coordinates; 'origin': the winging axis through
    (0.012, -0.021) of the scapula plane, not its origin."""
    osim = _opensim()
    path = (_variant(tmp_path, origin="0.012 -0.021") if variant == "origin" else _variant(tmp_path) if variant
            else MODEL)
    ours = load_osim(path)
    model, state, coordinates = unlocked_model(osim, path)
    assert [coordinates.get(i).getName() for i in range(coordinates.getSize())] == ours.coordinate_names
    q = _random_coordinates(ours, np.random.default_rng(3), 6, spread=1.0)
    W, x = ours.body_frames(q), marker_positions(ours, q)
    bodies, markers = model.getBodySet(), model.getMarkerSet()
    worst_body = worst_marker = 0.0
    for f in range(q.shape[0]):
        for i in range(coordinates.getSize()):
            coordinates.get(i).setValue(state, float(q[f, i]), False)
        model.realizePosition(state)
        for b in range(bodies.getSize()):
            body = bodies.get(b)
            worst_body = max(worst_body, np.abs(_transform(body.getTransformInGround(state))
                                                - W[f, ours.segment(body.getName())]).max())
        theirs = [[markers.get(k).getLocationInGround(state).get(i) for i in range(3)]
                  for k in range(markers.getSize())]
        worst_marker = max(worst_marker, np.abs(np.array(theirs) - x[f]).max())
    assert worst_body < 1e-9 and worst_marker < 1e-9, (worst_body, worst_marker)


# ----------------------------------------------------------------------------------- marker IK

def test_a_point_constraint_held_as_a_penalty_is_a_copy_pose_task_of_the_scene(om):
    """With a finite weight the scene carries AC as a point-to-point CopyPose task: MarkerScene's
    own evaluation is the generic Scene.evaluate of its tasks, and A = dy/dq by finite differences."""
    names = ["ij", "aa", "ai", "ts"]
    assert set(names) <= set(om.markers.names)
    scene = MarkerScene(om, names, [1.0, 2.0, 0.5, 3.0], [("elbow_flexion", 2.0)], normalize=False, point_weight=40.0)
    assert [t.name for t in scene.constraints][-1] == "AC"
    rng = np.random.default_rng(4)
    q = _random_coordinates(om, rng, 5, spread=0.3)
    objects = scene.objects(rng.normal(0.0, 0.3, (5, len(names), 3)))
    targets = rng.normal(0.0, 0.5, (5, 1))
    ours, generic = scene.evaluate(q, objects, values=targets), Scene.evaluate(scene, q, objects, values=targets)
    for field in ("y", "yd", "task_weight", "A", "position_error", "rotation_error"):
        np.testing.assert_allclose(getattr(ours, field), getattr(generic, field), rtol=0, atol=1e-12, err_msg=field)
    np.testing.assert_allclose(ours.position_error[:, -1], np.linalg.norm(om.point_residuals(q)[:, 0], axis=-1))
    fd = numerical_jacobian(lambda qq: scene.evaluate(qq, objects, jacobians=False, values=targets).y, q)
    assert relative_difference(ours.A, fd) <= 1e-7


FRAMES, RATE = 12, 50.0


@pytest.fixture(scope="module")
def motion(tmp_path_factory):
    """(om, markers, true coordinates, OpenSim's IK answer at accuracy 1e-7): every free
    coordinate moves on a sine, OpenSim assembles each frame onto AC, its markers are the data."""
    osim = _opensim()
    folder = tmp_path_factory.mktemp("scapula")
    om = load_osim(MODEL)
    data, truth = assembled_motion(osim, MODEL, om.coupling, FRAMES, RATE)
    names, time = data.names, data.time
    write_trc(folder / "motion.trc", data, units="m", fmt="%.12f")

    model = osim.Model(str(MODEL))                       # as the file has it (locked coordinates locked)
    model.initSystem()
    tool = osim.InverseKinematicsTool()
    tool.setModel(model)
    tool.setMarkerDataFileName(str(folder / "motion.trc"))
    for name in names:
        task = osim.IKMarkerTask()
        task.setName(name)
        task.setApply(True)
        task.setWeight(1.0)
        tool.getIKTaskSet().cloneAndAppend(task)
    tool.set_accuracy(1e-7)
    tool.setStartTime(0.0)
    tool.setEndTime(float(time[-1]))
    tool.setResultsDir(str(folder))
    tool.setOutputMotionFileName(str(folder / "opensim_ik.mot"))
    assert tool.run()
    theirs = om.coordinates_from(read_storage(folder / "opensim_ik.mot"))
    return om, data, truth, theirs


def _tasks(names):
    return IKTaskSet(marker_tasks=[IKMarkerTask(name, True, 1.0) for name in names])


def _scaled(d, rotational):
    return np.abs(d) * np.where(rotational, DEG, 1e3)                 # degrees and millimetres


def test_marker_ik_agrees_with_opensims_tool_and_holds_the_point_constraint(motion):
    om, data, truth, theirs = motion
    problem = MarkerIK(om, data, _tasks(data.names))
    ours = problem.solve(accuracy=1e-7)
    rotational = om.coupling.rotational
    assert ours.converged.all() and ours.constraint_names == ["AC"]
    assert ours.constraint_errors.max() < 1e-6 and np.abs(om.point_residuals(ours.q)).max() < 1e-12
    assert np.abs(om.point_residuals(truth)).max() < 1e-9 and np.abs(om.point_residuals(theirs)).max() < 1e-6
    to_opensim = _scaled(ours.q - theirs, rotational).max(axis=0)
    assert to_opensim.max() < 0.1, dict(zip(om.coordinate_names, to_opensim.round(4)))
    # both recover the motion; ours to the rounding of the markers written with 12 decimals
    assert _scaled(ours.q - truth, rotational).max() < 1e-4
    assert _scaled(theirs - truth, rotational).max() < 0.1
    assert ours.marker_error_rms.max() < 1e-9


def test_a_finite_constraint_weight_is_a_penalty(motion):
    """Scapula markers moved 5 mm off the model: with constraint_weight w the solution is the
    minimum of the objective plus w |x_AC,clavicle - x_AC,scapula|^2 (its gradient vanishes, by
    finite differences) and breaks AC less as w grows; with Infinity AC holds."""
    om, data, _, _ = motion
    moved = data.positions.copy()
    scapula = [k for k, name in enumerate(data.names)
               if om.markers.segments[om.markers.index([name])[0]] == om.segment("scapula")]
    assert len(scapula) >= 3
    moved[:, scapula] += [0.005, -0.004, 0.003]
    shifted = MarkerData(names=data.names, time=data.time[:3], positions=moved[:3],
                         frame_numbers=data.frame_numbers[:3], data_rate=RATE, camera_rate=RATE)
    gaps = {}
    for weight in (10.0, 1000.0, np.inf):
        problem = MarkerIK(om, shifted, _tasks(data.names), constraint_weight=weight)
        result = problem.solve(accuracy=1e-9)
        assert result.converged.all()
        gaps[weight] = result.constraint_errors[:, 0]
        if np.isinf(weight):
            continue
        free = np.flatnonzero(~problem.scene.frozen)
        h = 1e-6
        gradient = np.stack([(problem.report(result.q + h * e).objective - problem.report(result.q - h * e).objective)
                             / (2 * h) for e in np.eye(result.q.shape[1])[free]], axis=1)
        scale = np.abs(np.stack([(problem.report(result.q + 1e-3 * e).objective - result.objective) / 1e-3
                                 for e in np.eye(result.q.shape[1])[free]], axis=1)).max()
        assert np.abs(gradient).max() < 1e-5 * scale, (weight, np.abs(gradient).max(), scale)
    assert np.all(gaps[10.0] > gaps[1000.0]) and np.all(gaps[1000.0] > 1e-7)
    assert gaps[np.inf].max() < 1e-12


def test_a_point_constraint_no_pose_can_hold_leaves_frames_unconverged(motion, tmp_path):
    """A second PointConstraint asks the clavicle's origin (its sternoclavicular centre, which no
    coordinate moves off the thorax) to sit 0.5 m away from it: every frame is reported
    unconverged, its distance (about 0.5 m) in the result, and the coordinates stay finite."""
    _, data, _, _ = motion
    far = ("<PointConstraint name=\"far\"><isEnforced>true</isEnforced>"
           "<socket_body_1>/bodyset/thorax</socket_body_1><socket_body_2>/bodyset/clavicle</socket_body_2>"
           "<location_body_1>0.506325 0.00693 0.025464</location_body_1><location_body_2>0 0 0</location_body_2>"
           "</PointConstraint>")
    (tmp_path / "far.osim").write_text(MODEL.read_text().replace("<PointConstraint name=\"AC\">",
                                                                 far + "<PointConstraint name=\"AC\">"))
    om = load_osim(tmp_path / "far.osim")
    assert om.point_names == ["far", "AC"]
    result = MarkerIK(om, data, _tasks(data.names)).solve(accuracy=1e-7)
    assert np.all(np.isfinite(result.q)) and not result.converged.any()
    np.testing.assert_allclose(result.constraint_errors[:, 0], 0.5, atol=1e-3)


# ------------------------------------------------------------------------------------- scaling

def test_scaling_the_joint_matches_opensims_model_scale(tmp_path):
    """Thorax and scapula scaled by unequal factors, the winging axis off its origin: the ellipsoid
    radii, the winging origin and then the body frames at random coordinates, ours against OpenSim
    4.6's Model::scale of the same model (its printed file, 17 digits)."""
    from solver.opensim.model_document import ModelDocument
    from solver.opensim.scaling import apply_scale
    osim = _opensim()
    path = _variant(tmp_path, origin="0.012 -0.021")
    factors = {"thorax": (1.1, 0.93, 1.05), "scapula": (1.2, 0.9, 1.15)}
    doc = ModelDocument.read(path)
    apply_scale(doc, {b: np.array(f) for b, f in factors.items()}, True, -1.0)
    ours_path = doc.write(tmp_path / "ours.osim")
    model, state = scaled_by_opensim(osim, path, factors)
    model.printToXML(str(tmp_path / "theirs.osim"))
    ours, theirs = load_osim(ours_path), load_osim(tmp_path / "theirs.osim")
    joint = osim.ScapulothoracicJoint.safeDownCast(model.getJointSet().get("scapulothoracic"))
    radii = [joint.get_thoracic_ellipsoid_radii_x_y_z().get(i) for i in range(3)]
    origin = [joint.get_scapula_winging_axis_origin(i) for i in range(2)]
    text = ours_path.read_text()

    def numbers_of(tag):
        return [float(v) for v in re.search(f"<{tag}>([^<]*)</{tag}>", text).group(1).split()]

    np.testing.assert_allclose(numbers_of("thoracic_ellipsoid_radii_x_y_z"), radii, rtol=1e-15, atol=0)
    np.testing.assert_allclose(numbers_of("scapula_winging_axis_origin"), origin, rtol=1e-15, atol=0)
    np.testing.assert_allclose(origin, np.array([0.012, -0.021]) * factors["scapula"][:2], rtol=1e-15)
    q = _random_coordinates(ours, np.random.default_rng(4), 5, spread=1.0)
    W, V = ours.body_frames(q), theirs.body_frames(q)
    assert np.abs(W - V).max() < 1e-12

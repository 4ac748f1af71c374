""".osim models: parsing (OpenSim 3 nested layout and OpenSim 4 JointSet layout), the engine
model built from them, and the Coupling q -> theta. Kinematics are checked against the `opensim`
package (bodies' transforms in ground) and the coupling's Jacobian against finite differences."""


import numpy as np
import pytest

from solver.finite_differences import numerical_jacobian, relative_difference
from solver.kinematics import forward_kinematics
from solver.opensim import OpenSimFileError
from solver.opensim.functions import MultiplierFunction, SimmSpline
from solver.opensim.osim import euler_xyz, load_osim, read_osim
from tests.opensim_reference import DATA, GAIT, needs_data
from tests.opensim_reference import opensim as _opensim

HAND = """<?xml version="1.0" encoding="UTF-8" ?>
<OpenSimDocument Version="40000">
  <Model name="hand">
    <Ground name="ground"/>
    <BodySet name="bodyset">
      <objects>
        <Body name="a"><mass>1</mass><mass_center>0 0 0</mass_center><inertia>1 1 1 0 0 0</inertia></Body>
        <Body name="b">
          <mass>1</mass><mass_center>0 0 0</mass_center><inertia>1 1 1 0 0 0</inertia>
          <components>
            <PhysicalOffsetFrame name="site">
              <socket_parent>..</socket_parent>
              <translation>0.02 -0.1 0.03</translation>
              <orientation>0.4 0.1 -0.3</orientation>
            </PhysicalOffsetFrame>
          </components>
        </Body>
      </objects>
    </BodySet>
    <JointSet name="jointset">
      <objects>
        <CustomJoint name="ja">
          <socket_parent_frame>ground_offset</socket_parent_frame>
          <socket_child_frame>a_offset</socket_child_frame>
          <coordinates>
            <Coordinate name="qa"><default_value>0.1</default_value><range>-1.5 1.5</range><clamped>true</clamped></Coordinate>
            <Coordinate name="qb"><default_value>-0.2</default_value><range>-1 1</range><locked>true</locked></Coordinate>
          </coordinates>
          <frames>
            <PhysicalOffsetFrame name="ground_offset">
              <socket_parent>/ground</socket_parent>
              <translation>0.1 0.2 0.3</translation>
              <orientation>0.3 -0.2 0.1</orientation>
            </PhysicalOffsetFrame>
            <PhysicalOffsetFrame name="a_offset">
              <socket_parent>/bodyset/a</socket_parent>
              <translation>-0.05 0.15 0.02</translation>
              <orientation>-0.1 0.25 0.2</orientation>
            </PhysicalOffsetFrame>
          </frames>
          <SpatialTransform>
            <TransformAxis name="rotation1">
              <coordinates>qa</coordinates>
              <axis>0.3 0.4 0.5</axis>
              <LinearFunction name="function"><coefficients>1 0</coefficients></LinearFunction>
            </TransformAxis>
            <TransformAxis name="rotation2">
              <coordinates>qb</coordinates>
              <axis>1 0 0</axis>
              <PolynomialFunction name="function"><coefficients>0.2 -0.5 1 0.1</coefficients></PolynomialFunction>
            </TransformAxis>
            <TransformAxis name="rotation3">
              <coordinates>qa</coordinates>
              <axis>0 1 0</axis>
              <SimmSpline name="function"><x>-1.5 -0.5 0 0.4 1.5</x><y>-0.3 0.2 0 0.5 0.1</y></SimmSpline>
            </TransformAxis>
            <TransformAxis name="translation1">
              <coordinates>qb</coordinates>
              <axis>1 0 0</axis>
              <MultiplierFunction name="function">
                <function><NaturalCubicSpline><x>-1 -0.3 0.2 1</x><y>0.01 0.05 -0.02 0.03</y></NaturalCubicSpline></function>
                <scale>1.3</scale>
              </MultiplierFunction>
            </TransformAxis>
            <TransformAxis name="translation2">
              <coordinates>qa</coordinates>
              <axis>0 1 0</axis>
              <PiecewiseLinearFunction name="function"><x>-1.5 0 0.7 1.5</x><y>0.1 0.3 0.2 0.25</y></PiecewiseLinearFunction>
            </TransformAxis>
            <TransformAxis name="translation3">
              <coordinates></coordinates>
              <axis>0 0 1</axis>
              <Constant name="function"><value>0.05</value></Constant>
            </TransformAxis>
          </SpatialTransform>
        </CustomJoint>
        <PinJoint name="jb">
          <socket_parent_frame>a_offset</socket_parent_frame>
          <socket_child_frame>b_offset</socket_child_frame>
          <coordinates><Coordinate name="qc"><default_value>0.3</default_value><range>-3 3</range></Coordinate></coordinates>
          <frames>
            <PhysicalOffsetFrame name="a_offset">
              <socket_parent>../../../bodyset/a</socket_parent>
              <translation>0 -0.4 0.01</translation>
              <orientation>0.2 0 0.1</orientation>
            </PhysicalOffsetFrame>
            <PhysicalOffsetFrame name="b_offset">
              <socket_parent>../../../bodyset/b</socket_parent>
              <translation>0.01 0.3 0</translation>
              <orientation>0 -0.3 0</orientation>
            </PhysicalOffsetFrame>
          </frames>
        </PinJoint>
      </objects>
    </JointSet>
    <MarkerSet name="markerset">
      <objects>
        <Marker name="ma"><socket_parent_frame>/bodyset/a</socket_parent_frame><location>0.1 -0.2 0.05</location></Marker>
        <Marker name="mb"><socket_parent_frame>/bodyset/b</socket_parent_frame><location>-0.03 -0.25 0.04</location></Marker>
        <Marker name="msite"><socket_parent_frame>/bodyset/b/site</socket_parent_frame><location>0.05 0.01 -0.02</location></Marker>
        <Marker name="mground"><socket_parent_frame>/ground</socket_parent_frame><location>1 2 3</location></Marker>
      </objects>
    </MarkerSet>
  </Model>
</OpenSimDocument>
"""
# A hand-written OpenSim 4 model: non-orthogonal rotation axes, every supported function type
# (a NaturalCubicSpline element, which OpenSim reads as a SimmSpline), a constant translation,
# offset frames on both sides of both joints, relative and absolute socket paths, and a marker on
# an offset frame attached to a body.




@pytest.fixture
def hand_path(tmp_path):
    path = tmp_path / "hand.osim"
    path.write_text(HAND)
    return path


def _transform(T):
    """A SimTK Transform as a 4x4 array."""
    out = np.eye(4)
    out[:3, :3] = [[T.R().get(i, j) for j in range(3)] for i in range(3)]
    out[:3, 3] = T.p().to_numpy()
    return out


def _set_state(osim, model, state, names, q):
    coordinates = model.getCoordinateSet()
    for name, value in zip(names, q):
        coordinates.get(name).setLocked(state, False)
        coordinates.get(name).setValue(state, float(value), False)
    model.realizePosition(state)


def _random_poses(om, n, seed, scale=1.0):
    """n poses inside the coordinates' ranges (unbounded ranges: within +-scale)."""
    rng = np.random.default_rng(seed)
    c = om.coupling
    lo = np.where(np.isfinite(c.range_lower), c.range_lower, -scale)
    hi = np.where(np.isfinite(c.range_upper), c.range_upper, scale)
    return np.vstack([c.default_coordinates(1), rng.uniform(lo, hi, size=(n, c.n_coordinates))])


# ---------------------------------------------------------------------------------------- parse

@needs_data
def test_gait_model_parses_in_the_nested_opensim3_layout():
    osim_model = read_osim(GAIT)
    assert osim_model.version == 20303 and osim_model.name == "subject01"
    assert [b.name for b in osim_model.bodies][:3] == ["ground", "pelvis", "femur_r"] and len(osim_model.bodies) == 13
    assert len(osim_model.joints) == 12 and len(osim_model.coordinates) == 23 and len(osim_model.markers) == 39
    knee = osim_model.joint("knee_r")
    assert (knee.type, knee.parent, knee.child) == ("CustomJoint", "femur_r", "tibia_r")
    # Constant-0 axes are left out: the knee keeps its two spline translations and one rotation.
    assert [a.name for a in knee.axes] == ["translation1", "translation2", "rotation1"]
    assert all(a.coordinate == "knee_angle_r" for a in knee.axes)
    tx = knee.axes[0].function
    assert isinstance(tx, MultiplierFunction) and isinstance(tx.function, SimmSpline) and tx.scale == 1.14724
    ankle = osim_model.joint("ankle_r").axes[0]
    assert ankle.kind == "rotation" and np.linalg.norm(ankle.axis) == pytest.approx(1.0, abs=1e-15)
    np.testing.assert_allclose(osim_model.joint("hip_r").parent_offset[:3, 3], [-0.0724376, -0.0677245, 0.0855522])
    sternum = osim_model.markers[0]
    assert sternum.name == "Sternum" and sternum.body == "torso"
    np.testing.assert_array_equal(sternum.location, [0.120488, 0.307161, -0.00325415])


@needs_data
def test_gait_coupling_fields():
    om = load_osim(GAIT)
    c = om.coupling
    assert c.n_coordinates == 23 and c.names[:3] == ["pelvis_tilt", "pelvis_list", "pelvis_rotation"]
    assert om.model.n_coordinates == c.n_dofs == 27          # 23 coordinates + the knees' 4 spline translations
    assert not c.locked.any() and not c.clamped.any()
    assert np.all(np.isinf(c.lower)) and np.all(np.isinf(c.upper))
    knee = c.index("knee_angle_r")
    assert (c.range_lower[knee], c.range_upper[knee]) == (-2.0943951, 0.17453293)
    np.testing.assert_array_equal(c.default, 0.0)
    assert list(c.rotational) == [n not in ("pelvis_tx", "pelvis_ty", "pelvis_tz") for n in c.names]
    assert [s.name for s in om.model.segments][0] == "ground" and om.model.parent[om.model.index("torso")] == 1


def test_hand_model_fields(hand_path):
    om = load_osim(hand_path)
    c = om.coupling
    assert c.names == ["qa", "qb", "qc"]
    np.testing.assert_array_equal(c.default, [0.1, -0.2, 0.3])
    np.testing.assert_array_equal(c.lower, [-1.5, -np.inf, -np.inf])      # only qa is clamped
    np.testing.assert_array_equal(c.upper, [1.5, np.inf, np.inf])
    np.testing.assert_array_equal(c.locked, [False, True, False])
    assert c.motion_type == ["rotational", "coupled", "rotational"]
    assert c.n_dofs == 7 and list(c.dof_coordinate) == [1, 0, -1, 0, 1, 0, 2]
    assert om.markers.names == ["ma", "mb", "msite", "mground"]


def test_euler_angles_are_body_fixed_xyz():
    a, b, c = 0.3, -0.7, 1.1
    rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    ry = np.array([[np.cos(b), 0, np.sin(b)], [0, 1, 0], [-np.sin(b), 0, np.cos(b)]])
    rz = np.array([[np.cos(c), -np.sin(c), 0], [np.sin(c), np.cos(c), 0], [0, 0, 1]])
    np.testing.assert_allclose(euler_xyz([a, b, c]), rx @ ry @ rz, atol=1e-15)


# ------------------------------------------------------------------------------ coupling vs FD

@pytest.mark.parametrize("which", ["gait", "hand"])
def test_coupling_jacobian_matches_finite_differences(which, hand_path):
    if which == "gait" and not DATA.is_dir():
        pytest.skip("shared/data/opensim_gait2354 is not beside the repository")
    om = load_osim(GAIT if which == "gait" else hand_path)
    q = _random_poses(om, 6, seed=3)
    analytic = om.coupling.jacobian(q)
    fd = numerical_jacobian(om.coupling.dofs, q, step=1e-6)
    assert analytic.shape == (q.shape[0], om.coupling.n_dofs, om.coupling.n_coordinates)
    assert relative_difference(analytic, fd) <= 1e-6


def test_coupling_values_follow_the_functions(hand_path):
    om = load_osim(hand_path)
    q = np.array([[0.25, -0.4, 1.0]])
    theta = om.coupling.dofs(q)[0]
    poly = 0.2 * (-0.4) ** 3 - 0.5 * (-0.4) ** 2 + 1.0 * (-0.4) + 0.1
    spline = SimmSpline([-1, -0.3, 0.2, 1], [0.01, 0.05, -0.02, 0.03]).value(-0.4) * 1.3
    piecewise = 0.3 + (0.2 - 0.3) / 0.7 * 0.25
    simm = SimmSpline([-1.5, -0.5, 0, 0.4, 1.5], [-0.3, 0.2, 0, 0.5, 0.1]).value(0.25)
    # engine order: translation1 (qb), translation2 (qa), translation3 (constant), rotation1..3, pin
    np.testing.assert_allclose(theta, [spline, piecewise, 0.05, 0.25, poly, simm, 1.0], rtol=1e-14)


# ------------------------------------------------------------------------- kinematics vs opensim

def _compare_bodies(osim, path, om, poses):
    model = osim.Model(str(path))
    state = model.initSystem()
    worst = 0.0
    for q in poses:
        _set_state(osim, model, state, om.coupling.names, q)
        ours = om.body_frames(q[None])[0]
        for s, name in enumerate(om.model.names):
            body = model.getGround() if s == 0 else model.getBodySet().get(name)
            worst = max(worst, float(np.abs(_transform(body.getTransformInGround(state)) - ours[s]).max()))
    return worst


@needs_data
def test_gait_body_frames_match_opensim():
    osim = _opensim()
    om = load_osim(GAIT)
    assert _compare_bodies(osim, GAIT, om, _random_poses(om, 5, seed=1)) < 1e-12


def test_hand_body_frames_match_opensim(hand_path):
    osim = _opensim()
    om = load_osim(hand_path)
    assert _compare_bodies(osim, hand_path, om, _random_poses(om, 5, seed=2)) < 1e-12


@needs_data
def test_opensim4_layout_of_the_gait_model_matches_the_opensim3_one(tmp_path):
    osim = _opensim()
    converted = tmp_path / "gait4.osim"
    osim.Model(str(GAIT)).printToXML(str(converted))        # OpenSim writes the JointSet layout
    assert b"<JointSet" in converted.read_bytes()
    old, new = load_osim(GAIT), load_osim(converted)
    assert new.coupling.names == old.coupling.names and new.markers.names == old.markers.names
    q = _random_poses(old, 4, seed=4)
    np.testing.assert_allclose(new.marker_positions(q), old.marker_positions(q), rtol=0, atol=1e-14)
    assert _compare_bodies(osim, converted, new, q) < 1e-12


def _zoo(osim, path):
    """An OpenSim 4 chain through every supported non-custom joint type, with random offsets."""
    rng = np.random.default_rng(7)
    model = osim.Model()
    model.setName("zoo")
    previous = model.getGround()

    def vec():
        return osim.Vec3(*rng.uniform(-0.5, 0.5, 3))

    for i, kind in enumerate(["FreeJoint", "BallJoint", "PinJoint", "SliderJoint", "WeldJoint", "GimbalJoint",
                              "UniversalJoint", "PlanarJoint"]):
        body = osim.Body(f"b{i}", 1.0, osim.Vec3(0), osim.Inertia(1, 1, 1))
        model.addBody(body)
        model.addJoint(getattr(osim, kind)(f"j{i}_{kind}", previous, vec(), vec(), body, vec(), vec()))
        model.addMarker(osim.Marker(f"m{i}", body, vec()))
        previous = body
    model.finalizeConnections()
    model.printToXML(str(path))


def test_every_joint_type_matches_opensim(tmp_path):
    osim = _opensim()
    path = tmp_path / "zoo.osim"
    _zoo(osim, path)
    om = load_osim(path)
    assert [j.type for j in om.source.joints] == ["FreeJoint", "BallJoint", "PinJoint", "SliderJoint", "WeldJoint",
                                                  "GimbalJoint", "UniversalJoint", "PlanarJoint"]
    model = osim.Model(str(path))
    coordinates = model.getCoordinateSet()
    worst = 0.0
    for q in _random_poses(om, 4, seed=5, scale=1.2):
        # Ball and Free joints keep quaternions in the state: coordinates go in as default values
        # (OpenSim turns them into the rotation Rx Ry Rz when it initializes the state).
        for name, value in zip(om.coupling.names, q):
            coordinates.get(name).setDefaultValue(float(value))
        state = model.initSystem()
        model.realizePosition(state)
        ours = om.body_frames(q[None])[0]
        for s, name in enumerate(om.model.names[1:], start=1):
            theirs = _transform(model.getBodySet().get(name).getTransformInGround(state))
            worst = max(worst, float(np.abs(theirs - ours[s]).max()))
    assert worst < 1e-12


def test_rotational_coordinates_agree_with_opensim(hand_path, tmp_path):
    osim = _opensim()
    paths = [hand_path] + ([GAIT] if DATA.is_dir() else [])
    for path in paths:
        om = load_osim(path)
        model = osim.Model(str(path))
        model.initSystem()
        theirs = [model.getCoordinateSet().get(n).getMotionType() == 1 for n in om.coupling.names]
        assert theirs == list(om.coupling.rotational)


@needs_data
def test_forward_kinematics_on_the_engine_model_gives_the_segment_frames():
    om = load_osim(GAIT)
    q = _random_poses(om, 3, seed=6)
    frames = forward_kinematics(om.model, om.coupling.dofs(q)).frames
    np.testing.assert_array_equal(frames, om.body_frames(q))   # gait bodies: segment frame = body frame



def _marker_kinematics_against_the_engine(om, seed):
    """MarkerKinematics (the coordinates' twists through the coupling's chain rule, each marker's
    Jacobian one product with them, masked per coordinate) against the engine's point_jacobian
    per joint value times the coupling's Jacobian: positions and dx/dq = J_point dtheta/dq, to
    rounding."""
    from solver.kinematics import point_jacobian
    from solver.opensim.marker_kinematics import MarkerKinematics

    segments, locations = om.markers.segments, om.markers.locations
    kinematics = MarkerKinematics(om.model, om.coupling, segments, locations)
    q = _random_poses(om, 6, seed=seed, scale=1.2)
    x, J = kinematics.positions_and_jacobian(q)
    pose = forward_kinematics(om.model, om.coupling.dofs(q))
    frames = pose.frames[:, segments]
    points = np.einsum("fmij,mj->fmi", frames[..., :3, :3], locations) + frames[..., :3, 3]
    dtheta = point_jacobian(om.model, pose, segments, points)[:, :, :3]               # (F, M, 3, K)
    engine = (dtheta @ om.coupling.jacobian(q)[:, None]).reshape(J.shape)
    np.testing.assert_allclose(x, points, rtol=0, atol=1e-12 * max(1.0, np.abs(points).max()))
    assert relative_difference(J, engine) <= 1e-12
    np.testing.assert_allclose(kinematics.positions(q), x, rtol=0, atol=0)


@needs_data
def test_marker_kinematics_is_the_engines_forward_kinematics_on_the_gait_model():
    _marker_kinematics_against_the_engine(load_osim(GAIT), seed=8)


def test_marker_kinematics_is_the_engines_forward_kinematics_on_every_joint_type(hand_path, tmp_path):
    _marker_kinematics_against_the_engine(load_osim(hand_path), seed=9)
    path = tmp_path / "zoo.osim"
    _zoo(_opensim(), path)
    _marker_kinematics_against_the_engine(load_osim(path), seed=10)

# ---------------------------------------------------------------------------------------- errors

V3 = """<OpenSimDocument Version="20303"><Model name="m"><BodySet><objects>
<Body name="ground"><Joint/></Body>
<Body name="a">
<Joint>
<{joint} name="j">
<SpatialTransform>
<TransformAxis name="rotation1">
<coordinates>{coords}</coordinates>
<axis>{axis}</axis>
<function><LinearFunction><coefficients>1 0</coefficients></LinearFunction></function>
</TransformAxis>
</SpatialTransform>
<parent_body>{parent}</parent_body>
<CoordinateSet><objects>
<Coordinate name="q"><range>{range}</range></Coordinate>
</objects></CoordinateSet>
<reverse>{reverse}</reverse>
</{joint}>
</Joint>
</Body>
</objects></BodySet>
<MarkerSet><objects>
<Marker name="m"><body>{marker_body}</body><location>0 0 0</location></Marker>
</objects></MarkerSet>
</Model></OpenSimDocument>
"""
GOOD = dict(joint="CustomJoint", coords="q", axis="0 0 1", parent="ground", range="-1 1", reverse="false",
            marker_body="a")


def test_minimal_opensim3_model_parses(tmp_path):
    path = tmp_path / "m.osim"
    path.write_text(V3.format(**GOOD))
    om = load_osim(path)
    assert om.coupling.names == ["q"] and om.markers.names == ["m"]


@pytest.mark.parametrize("change, line, words", [
    (dict(joint="EllipsoidJoint"), 5, "not supported"),
    (dict(coords="p"), 7, "coordinate 'p' is not one of the joint's"),
    (dict(coords="q q"), 7, "functions of 2 coordinates"),
    (dict(axis="0 0 0"), 9, "not a direction"),
    (dict(axis="0 1"), 9, "needs 3 numbers"),
    (dict(parent="nowhere"), 5, "no body called 'nowhere'"),
    (dict(range="1 -1"), 15, "range 1.0 > -1.0"),
    (dict(reverse="true"), 17, "reversed joints"),
    (dict(marker_body="elsewhere"), 23, "no body called 'elsewhere'"),
])
def test_malformed_models_name_file_and_line(tmp_path, change, line, words):
    path = tmp_path / "m.osim"
    path.write_text(V3.format(**{**GOOD, **change}))
    with pytest.raises(OpenSimFileError) as info:
        load_osim(path)
    assert info.value.line == line and words in info.value.reason and info.value.path == path


def test_unresolvable_socket_names_the_line(tmp_path):
    path = tmp_path / "hand.osim"
    path.write_text(HAND.replace("<socket_parent>/bodyset/a</socket_parent>", "<socket_parent>/bodyset/zz</socket_parent>"))
    line = next(i for i, s in enumerate(path.read_text().splitlines(), 1) if "/bodyset/zz" in s)
    with pytest.raises(OpenSimFileError) as info:
        load_osim(path)
    assert info.value.line == line and "names no component" in info.value.reason


def test_body_without_joint_is_an_error(tmp_path):
    path = tmp_path / "m.osim"
    path.write_text(V3.format(**GOOD).replace('<Body name="a">', '<Body name="lonely"><Joint/></Body>\n<Body name="a">'))
    with pytest.raises(OpenSimFileError, match="'lonely' has no joint"):
        load_osim(path)


def test_skipped_sections_are_still_checked_and_keep_the_lines():
    """read_osim skips the content of sections it does not read (ForceSet holds most of a model
    file): the section stays as an empty element, the lines of what follows are right, and
    malformed XML inside it is still an error naming its line."""
    from solver.opensim._xml import parse_bytes

    data = (b"<OpenSimDocument>\n<Model>\n<ForceSet>\n<objects>\n<Thelen2003Muscle name='m'>\n"
            b"<max_isometric_force>1</max_isometric_force>\n</Thelen2003Muscle>\n</objects>\n</ForceSet>\n"
            b"<MarkerSet/>\n</Model>\n</OpenSimDocument>\n")
    model = parse_bytes(data, skip=("ForceSet",))[0]
    assert [e.tag for e in model] == ["ForceSet", "MarkerSet"]
    assert len(model[0]) == 0 and model[0].line == 3 and model[1].line == 10
    assert len(parse_bytes(data)[0][0]) == 1                          # without skip: all built
    broken = data.replace(b"</max_isometric_force>", b"</max_isometric>")
    with pytest.raises(OpenSimFileError, match="line 6"):
        parse_bytes(broken, skip=("ForceSet",))

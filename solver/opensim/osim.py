"""Read .osim models (the kinematic subset gait models use) and turn them into an engine Model.

Constraints: CoordinateCouplerConstraints (coupling.py) and PointConstraints (two points of two
bodies held together: `OpenSimModel.points`, enforced by marker IK, gauss_newton.py) are read;
any other enabled constraint, PointOnLineConstraint included, is refused by name.

Two layouts are read:

* OpenSim 3 and older (OpenSimDocument Version < 30500, e.g. 20303): each <Body> of the
  BodySet holds the <Joint> that connects it to its parent: <parent_body>, the parent-side
  frame <location_in_parent>/<orientation_in_parent> and the child-side frame
  <location>/<orientation>, and the joint's <CoordinateSet>. Markers name their <body>.
* OpenSim 4: bodies in <BodySet>, joints in <JointSet>, each joint connecting
  <socket_parent_frame> to <socket_child_frame>, usually PhysicalOffsetFrames in the joint's
  <frames> (<socket_parent>, <translation>, <orientation>); its <coordinates>. Markers give
  <socket_parent_frame>. Socket paths are component paths ("/bodyset/pelvis", "../../ground",
  or a bare name), resolved from the component that owns the socket.

Frames. An offset frame with translation p and orientation (a, b, c) is X = [R p; 0 1] with
R = Rx(a) Ry(b) Rz(c): body-fixed X-Y-Z Euler angles. A joint with parent-side frame F (X_PF in
the parent body P) and child-side frame M (X_BM in the child body B) places the child at

    W_B = W_P  X_PF  X_FM(q)  X_BM^-1.

The mobilizer transform X_FM. A CustomJoint's SpatialTransform has three rotation axes
r1, r2, r3 and three translation axes t1, t2, t3 (unit vectors in F; OpenSim normalizes them),
each with a function f_k of at most one coordinate. As in Simbody's function-based mobilizer,

    X_FM = [ R1 R2 R3   p ]     R_k = rotation by f_rk(q) about r_k (body-fixed sequence:
           [ 0          1 ]           r2 is turned by R1, r3 by R1 R2),
                                p = f_t1(q) t1 + f_t2(q) t2 + f_t3(q) t3   (in F).

In the engine's product of joints that is: prismatic t1, t2, t3, then revolute r1, r2, r3 (the
translations come first, so they stay in F, and each rotation turns the axes that follow). Other
joint types are the same with fixed axes and identity functions:

    PinJoint        revolute z                       SliderJoint   prismatic x
    BallJoint       revolute x, y, z (body-fixed)    GimbalJoint   revolute x, y, z
    UniversalJoint  revolute x, y                    WeldJoint     no motion
    FreeJoint       coordinates (rx, ry, rz, tx, ty, tz): prismatic x, y, z then revolute x, y, z
    PlanarJoint     coordinates (rz, tx, ty): prismatic x, y then revolute z

(each checked against opensim 4.6 in the tests). A ScapulothoracicJoint (the scapula on an
ellipsoid over the thorax) is three translations whose values depend on two coordinates, then four
rotations, the last about an axis through a pivot point (scapulothoracic.py). So every body
becomes one engine `Segment` with one revolute/prismatic joint per axis; a joint with a pivot
off its frame's origin is split there into a massless segment (the axes before it) and the
body's (T(pivot), then the rest), the body at T(-pivot) from its segment's frame. Axes whose function is the constant 0 are left out (they do
not move anything); the per-axis joint values theta = f_k(q_c(k)) are what `Coupling` computes
from OpenSim's coordinates q.

The segment's frame is the joint's child-side frame M (W_M = W_B X_BM), not the body frame B:
the engine's forward_kinematics applies `Segment.post` after the tree pass, so a child segment
hangs from its parent's frame *before* post. Folding X_BM^-1 into what hangs from the body
instead keeps everything exact whatever post does:

    rest of the segment of B         = X_BM(P)^-1  X_PF        (X_BM(P): the parent's own child-side frame)
    marker at l in body B            = X_BM(B)^-1 [l; 1]        in the segment frame
    body frame                       W_B = W_segment  X_BM(B)^-1   (`OpenSimModel.body_frames`)

For the gait models every X_BM is the identity, and segment frames are the body frames.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model import Model, Segment, prismatic, revolute
from ..rotations import in_place
from . import _xml
from .coupling import Coupler, Coupling, coupler_order, fill_dependents, scaled
from .errors import OpenSimFileError
from . import scapulothoracic
from .functions import Constant, Function, LinearFunction, function_from_xml, function_in

ROTATION, TRANSLATION = "rotation", "translation"
_FIXED_AXES = {  # joint type -> ((kind, axis, coordinate index), ...) in application order
    "PinJoint": ((ROTATION, (0, 0, 1), 0),),
    "SliderJoint": ((TRANSLATION, (1, 0, 0), 0),),
    "WeldJoint": (),
    "BallJoint": ((ROTATION, (1, 0, 0), 0), (ROTATION, (0, 1, 0), 1), (ROTATION, (0, 0, 1), 2)),
    "GimbalJoint": ((ROTATION, (1, 0, 0), 0), (ROTATION, (0, 1, 0), 1), (ROTATION, (0, 0, 1), 2)),
    "UniversalJoint": ((ROTATION, (1, 0, 0), 0), (ROTATION, (0, 1, 0), 1)),
    "FreeJoint": ((TRANSLATION, (1, 0, 0), 3), (TRANSLATION, (0, 1, 0), 4), (TRANSLATION, (0, 0, 1), 5),
                  (ROTATION, (1, 0, 0), 0), (ROTATION, (0, 1, 0), 1), (ROTATION, (0, 0, 1), 2)),
    "PlanarJoint": ((TRANSLATION, (1, 0, 0), 1), (TRANSLATION, (0, 1, 0), 2), (ROTATION, (0, 0, 1), 0)),
}
JOINT_TYPES = ("CustomJoint", "ScapulothoracicJoint") + tuple(_FIXED_AXES)


@dataclass
class OsimCoordinate:
    """An OpenSim coordinate. `range` is (lower, upper); `motion_type` rotational (radians),
    translational (metres) or coupled."""

    name: str
    joint: str
    motion_type: str = "rotational"
    default_value: float = 0.0
    range: tuple = (-np.inf, np.inf)
    clamped: bool = False
    locked: bool = False
    line: int | None = None


@dataclass
class TransformAxis:
    """One axis of a joint: a rotation about, or translation along, the unit `axis` (in the joint's
    parent-side frame F, turned by the rotations before it) by `function`(coordinate value), or,
    with a `second` coordinate (the ScapulothoracicJoint's ellipsoid), by
    `function.value_and_gradient`(coordinate value, second coordinate value). A rotation with a
    `pivot` turns about the axis through that point of the frame it acts in (the
    ScapulothoracicJoint's winging axis off its origin): T(pivot) R T(-pivot)."""

    name: str
    kind: str
    axis: np.ndarray
    coordinate: str | None
    function: Function
    line: int | None = None
    second: str | None = None
    pivot: np.ndarray | None = None      # a rotation's axis passes through this point (None: the origin)


@dataclass
class OsimJoint:
    """A joint: `parent` and `child` body names; `parent_offset` X_PF (4x4, in the parent body) and
    `child_offset` X_BM (4x4, in the child body); `axes` in the order they are applied."""

    name: str
    type: str
    parent: str
    child: str
    parent_offset: np.ndarray
    child_offset: np.ndarray
    axes: list
    coordinates: list
    line: int | None = None


@dataclass
class OsimBody:
    name: str
    mass: float = 0.0
    mass_center: np.ndarray = field(default_factory=lambda: np.zeros(3))
    line: int | None = None


@dataclass
class OsimMarker:
    """A marker fixed at `location` (metres, in the body frame) on `body`."""

    name: str
    body: str
    location: np.ndarray
    fixed: bool = False
    line: int | None = None


@dataclass
class OsimCoupler:
    """A CoordinateCouplerConstraint: `dependent` = scale_factor * function(`independent`)."""

    name: str
    dependent: str
    independent: str
    function: Function
    scale_factor: float = 1.0
    line: int | None = None


@dataclass
class OsimPointConstraint:
    """A PointConstraint: the point `location_1` (metres, in body `body_1`'s frame) and the point
    `location_2` of `body_2` coincide."""

    name: str
    body_1: str
    location_1: np.ndarray
    body_2: str
    location_2: np.ndarray
    line: int | None = None


@dataclass
class OsimModel:
    """The parsed model: bodies (ground first), joints, coordinates in model order, markers, and
    the enabled coordinate couplers and point constraints."""

    name: str
    bodies: list
    joints: list
    markers: list
    version: int | None = None
    length_units: str = "meters"
    path: Path | None = None
    couplers: list = field(default_factory=list)
    points: list = field(default_factory=list)

    @property
    def coordinates(self) -> list:
        return [c for j in self.joints for c in j.coordinates]

    def body(self, name: str) -> OsimBody:
        for b in self.bodies:
            if b.name == name:
                return b
        raise KeyError(f"no body called {name!r}")

    def joint(self, name: str) -> OsimJoint:
        for j in self.joints:
            if j.name == name:
                return j
        raise KeyError(f"no joint called {name!r}")


# ------------------------------------------------------------------------------------ geometry

def euler_xyz(angles) -> np.ndarray:
    """R = Rx(a) Ry(b) Rz(c) for body-fixed X-Y-Z angles (a, b, c), batched over leading axes."""
    angles = np.asarray(angles, dtype=float)
    ca, cb, cc = (in_place(np.cos, np.empty(angles.shape[:-1]), angles[..., k]) for k in range(3))
    sa, sb, sc = (in_place(np.sin, np.empty(angles.shape[:-1]), angles[..., k]) for k in range(3))
    R = np.empty(angles.shape[:-1] + (3, 3))
    R[..., 0, 0] = cb * cc
    R[..., 0, 1] = -cb * sc
    R[..., 0, 2] = sb
    R[..., 1, 0] = ca * sc + sa * sb * cc
    R[..., 1, 1] = ca * cc - sa * sb * sc
    R[..., 1, 2] = -sa * cb
    R[..., 2, 0] = sa * sc - ca * sb * cc
    R[..., 2, 1] = sa * cc + ca * sb * sc
    R[..., 2, 2] = ca * cb
    return R


def offset_frame(translation, orientation) -> np.ndarray:
    """The 4x4 transform of an offset frame: [Rx Ry Rz(orientation), translation; 0 1]."""
    X = np.eye(4)
    X[:3, :3] = euler_xyz(np.asarray(orientation, dtype=float))
    X[:3, 3] = translation
    return X


def rigid_inverse(X: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = X[:3, :3].T
    out[:3, 3] = -X[:3, :3].T @ X[:3, 3]
    return out


# --------------------------------------------------------------------------------------- parse

_NOT_READ = ("ForceSet", "VisibleObject", "ProbeSet", "ControllerSet", "ContactGeometrySet")     # parsed, not built

def read_osim(path) -> OsimModel:
    """Parse a .osim file; raises OpenSimFileError naming the file and line on malformed or
    unsupported input."""
    path = Path(path).resolve()
    return osim_from_element(_xml.parse(path, skip=_NOT_READ), path)


def osim_from_element(root, path) -> OsimModel:
    """The model in a parsed .osim document (`root`: its document element, `path`: the file it
    stands for, in messages); read_osim without the file (the scale tool reads models it edits)."""
    path = Path(path)
    version = None
    if root.tag == "OpenSimDocument":
        try:
            version = int(root.get("Version", "0").strip() or 0)
        except ValueError:
            raise OpenSimFileError(path, root.line, f"Version must be a number, got {root.get('Version')!r}") from None
        model = _xml.child(root, "Model")
    else:
        model = root if root.tag == "Model" else None
    if model is None:
        raise OpenSimFileError(path, root.line, "no <Model> element")
    reader = _Reader(path, model)
    if _xml.child(model, "Ground") is not None or reader.objects(_xml.child(model, "JointSet")):
        bodies, joints, markers = reader.read_v4()
    else:
        bodies, joints, markers = reader.read_v3()
    units = _xml.child_text(model, "length_units") or "meters"
    if units.lower() not in ("meters", "metres", "m"):
        raise OpenSimFileError(path, _xml.child(model, "length_units").line,
                               f"length_units {units!r} are not supported (only meters)")
    couplers, points = reader.constraints()
    osim = OsimModel(name=model.get("name", ""), bodies=bodies, joints=joints, markers=markers,
                     version=version, length_units=units, path=path, couplers=couplers, points=points)
    _check(osim, path)
    return osim


class _Reader:
    def __init__(self, path, model):
        self.path = path
        self.model = model

    def fail(self, elem, reason):
        raise OpenSimFileError(self.path, None if elem is None else elem.line, reason)

    def objects(self, set_elem):
        if set_elem is None:
            return []
        objects = _xml.child(set_elem, "objects")
        return [] if objects is None else list(objects)

    # ------------------------------------------------------------------ pieces shared by both

    def body(self, elem) -> OsimBody:
        mass = _xml.child_float(elem, "mass", self.path, 0.0)
        center = _xml.child_floats(elem, "mass_center", self.path, 3, default=[0.0, 0.0, 0.0])
        return OsimBody(elem.get("name", ""), mass, center, elem.line)

    def coordinate(self, elem, joint: str) -> OsimCoordinate:
        name = elem.get("name")
        if not name:
            self.fail(elem, "<Coordinate> needs a name")
        motion = _xml.child_text(elem, "motion_type")
        if motion is not None and motion not in ("rotational", "translational", "coupled"):
            self.fail(_xml.child(elem, "motion_type"), f"coordinate {name!r}: unknown motion_type {motion!r}")
        rng = _xml.child_floats(elem, "range", self.path, 2, default=[-np.inf, np.inf])
        if not rng[0] <= rng[1]:
            self.fail(_xml.child(elem, "range"), f"coordinate {name!r}: range {rng[0]} > {rng[1]}")
        return OsimCoordinate(name=name, joint=joint, motion_type=motion or "",
                              default_value=_xml.child_float(elem, "default_value", self.path, 0.0, finite=True),
                              range=(float(rng[0]), float(rng[1])),
                              clamped=_xml.child_bool(elem, "clamped", self.path, False),
                              locked=_xml.child_bool(elem, "locked", self.path, False), line=elem.line)

    def axes(self, joint_elem, joint_type: str, coordinates: list) -> list:
        """The joint's transform axes in application order (see the module docstring)."""
        name = joint_elem.get("name", "")
        if joint_type == "ScapulothoracicJoint":
            return self.scapulothoracic_axes(joint_elem, coordinates)
        if joint_type != "CustomJoint":
            fixed = _FIXED_AXES[joint_type]
            needed = max((k for _, _, k in fixed), default=-1) + 1
            if len(coordinates) != needed:
                self.fail(joint_elem, f"{joint_type} {name!r} needs {needed} coordinates, has {len(coordinates)}")
            return [TransformAxis(f"{kind}_{'xyz'[int(np.argmax(axis))]}", kind, np.array(axis, dtype=float),
                                  coordinates[k].name, LinearFunction(1.0, 0.0), joint_elem.line)
                    for kind, axis, k in fixed]
        st = _xml.child(joint_elem, "SpatialTransform")
        if st is None:
            self.fail(joint_elem, f"CustomJoint {name!r} has no <SpatialTransform>")
        by_name = {}
        for ta in st:
            if ta.tag != "TransformAxis":
                continue
            axis_name = ta.get("name", "")
            if axis_name not in ("rotation1", "rotation2", "rotation3", "translation1", "translation2", "translation3"):
                self.fail(ta, f"CustomJoint {name!r}: unknown TransformAxis name {axis_name!r}")
            if axis_name in by_name:
                self.fail(ta, f"CustomJoint {name!r}: a second TransformAxis {axis_name!r}")
            by_name[axis_name] = ta
        known = {c.name for c in coordinates}
        out = []
        # Translations first (they are expressed in F), then the rotations in sequence.
        for axis_name in ("translation1", "translation2", "translation3", "rotation1", "rotation2", "rotation3"):
            ta = by_name.get(axis_name)
            if ta is None:
                continue
            kind = ROTATION if axis_name.startswith("rotation") else TRANSLATION
            axis_elem = _xml.child(ta, "axis")
            if axis_elem is None:
                self.fail(ta, f"CustomJoint {name!r} {axis_name}: no <axis>")
            axis = _xml.floats(axis_elem, self.path, 3)
            norm = np.linalg.norm(axis)
            coords = (_xml.child_text(ta, "coordinates") or "").split()
            function = function_in(ta, self.path)
            if function is None:
                function = LinearFunction(1.0, 0.0) if coords else LinearFunction(0.0, 0.0)
            if len(coords) > 1:
                self.fail(ta, f"CustomJoint {name!r} {axis_name}: functions of {len(coords)} coordinates "
                              "are not supported (only of one)")
            if coords and coords[0] not in known:
                self.fail(ta, f"CustomJoint {name!r} {axis_name}: coordinate {coords[0]!r} is not one of the "
                              f"joint's coordinates ({', '.join(sorted(known)) or 'none'})")
            if not coords and not function.is_constant:
                self.fail(ta, f"CustomJoint {name!r} {axis_name}: a function of no coordinate must be a constant")
            if function.affine == (0.0, 0.0):
                continue                                 # moves nothing: leave the axis out
            if not np.isfinite(norm) or norm < 1e-12:
                self.fail(axis_elem, f"CustomJoint {name!r} {axis_name}: axis {axis.tolist()} is not a direction")
            out.append(TransformAxis(axis_name, kind, axis / norm, coords[0] if coords else None, function, ta.line))
        return out

    def scapulothoracic_axes(self, elem, coordinates: list) -> list:
        """The ellipsoid's and the winging pin's axes (scapulothoracic.py)."""
        name = elem.get("name", "")
        if len(coordinates) != 4:
            self.fail(elem, f"ScapulothoracicJoint {name!r} needs 4 coordinates, has {len(coordinates)}")
        radii = _xml.child_floats(elem, "thoracic_ellipsoid_radii_x_y_z", self.path, 3, default=[np.nan] * 3)
        if not np.all(np.isfinite(radii)) or np.any(np.asarray(radii) <= 0):
            at = _xml.child(elem, "thoracic_ellipsoid_radii_x_y_z")
            self.fail(elem if at is None else at,
                      f"ScapulothoracicJoint {name!r}: thoracic_ellipsoid_radii_x_y_z must be three positive "
                      f"numbers, got {list(radii)}")
        origin = _xml.child_floats(elem, "scapula_winging_axis_origin", self.path, 2, default=[0.0, 0.0], finite=True)
        direction = _xml.child_float(elem, "scapula_winging_axis_direction", self.path, 0.0, finite=True)
        names = [c.name for c in coordinates]
        labels = ("translation1", "translation2", "translation3", "rotation1", "rotation2", "rotation3", "winging")
        return [TransformAxis(label, kind, np.asarray(axis, dtype=float), coordinate, function, elem.line, second, pivot)
                for label, (kind, axis, coordinate, second, function, pivot)
                in zip(labels, scapulothoracic.axes(radii, direction, names, origin))]

    def motion_types(self, joint_type: str, coordinates: list, axes: list):
        """Fill in motion types OpenSim 4 files leave out: a coordinate that drives a rotation
        through an affine function is rotational, one that drives only translations through affine
        functions is translational, any other is coupled."""
        for c in coordinates:
            if c.motion_type:
                continue
            used = [a for a in axes if a.coordinate == c.name]
            if any(a.kind == ROTATION and a.function.affine is not None for a in used):
                c.motion_type = "rotational"
            elif used and all(a.kind == TRANSLATION and a.function.affine is not None for a in used):
                c.motion_type = "translational"
            elif not used:
                c.motion_type = "rotational"
            else:
                c.motion_type = "coupled"

    def joint_core(self, elem, coordinates: list):
        joint_type = elem.tag
        if joint_type not in JOINT_TYPES:
            self.fail(elem, f"joint type <{joint_type}> is not supported (supported: {', '.join(JOINT_TYPES)})")
        if _xml.child_bool(elem, "reverse", self.path, False):
            self.fail(_xml.child(elem, "reverse"), f"joint {elem.get('name')!r}: reversed joints are not supported")
        axes = self.axes(elem, joint_type, coordinates)
        self.motion_types(joint_type, coordinates, axes)
        return joint_type, axes

    def marker(self, elem, body: str, location_in_body: np.ndarray) -> OsimMarker:
        return OsimMarker(elem.get("name", ""), body, location_in_body,
                          _xml.child_bool(elem, "fixed", self.path, False), elem.line)

    def constraints(self):
        """(couplers, point constraints): the enabled CoordinateCouplerConstraints (of one
        independent coordinate) and PointConstraints of the ConstraintSet; any other enabled
        constraint (PointOnLineConstraint, ...) is refused by name, since OpenSim's IK enforces
        it and a solve without it would be silently wrong."""
        out, points = [], []
        for c in self.objects(_xml.child(self.model, "ConstraintSet")):
            name = c.get("name", "")
            if _xml.child_bool(c, "isDisabled", self.path, False) or not _xml.child_bool(c, "isEnforced", self.path, True):
                continue
            if c.tag == "PointConstraint":
                points.append(self.point_constraint(c))
                continue
            if c.tag != "CoordinateCouplerConstraint":
                self.fail(c, f"<{c.tag} name={name!r}> is not supported (of OpenSim's constraints only "
                             "CoordinateCouplerConstraint and PointConstraint are); OpenSim's IK enforces it, so "
                             "solving without it would give wrong coordinates. Disable it (isEnforced false) to "
                             "solve without it")
            independent = (_xml.child_text(c, "independent_coordinate_names") or "").split()
            dependent = _xml.child_text(c, "dependent_coordinate_name")
            if len(independent) != 1 or dependent is None:
                self.fail(c, f"CoordinateCouplerConstraint {name!r}: needs one dependent coordinate and one independent "
                             f"coordinate (functions of {len(independent)} coordinates are not supported)")
            wrapper = _xml.child(c, "coupled_coordinates_function")
            if wrapper is not None:
                inner = list(wrapper)
                if len(inner) != 1:
                    self.fail(wrapper, f"CoordinateCouplerConstraint {name!r}: <coupled_coordinates_function> "
                                       f"must hold one function, holds {len(inner)}")
                function = function_from_xml(inner[0], self.path)
            else:
                found = [e for e in c if e.get("name") == "coupled_coordinates_function"]
                if not found:
                    self.fail(c, f"CoordinateCouplerConstraint {name!r}: no coupled_coordinates_function")
                function = function_from_xml(found[0], self.path)
            if isinstance(function, Constant):
                self.fail(c, f"CoordinateCouplerConstraint {name!r}: a Constant function is not supported: OpenSim 4.6 "
                             f"does not hold {dependent!r} at the constant but holds {independent[0]!r} there and "
                             f"{dependent!r} at 0. Use a LinearFunction with slope 0 for a constant dependent")
            scale = _xml.child_float(c, "scale_factor", self.path, 1.0, finite=True)
            out.append(OsimCoupler(name, dependent, independent[0], function, scale, c.line))
        return out, points

    def point_constraint(self, c) -> OsimPointConstraint:
        """A PointConstraint: its two frames (bodies or offset frames on them, OpenSim 4 sockets;
        body names in OpenSim 3 files) and the point on each, in the body frame."""
        ends = []
        for k in (1, 2):
            zero = [0.0, 0.0, 0.0]
            location = _xml.child_floats(c, f"location_body_{k}", self.path, 3, default=zero, finite=True)
            if hasattr(self, "by_path"):
                body, X = self.frame_of_socket(c, (f"socket_body_{k}", f"socket_body_{k}_connectee_name",
                                                   f"body_{k}"))
            else:
                body, X = _xml.child_text(c, f"body_{k}"), np.eye(4)
                if body is None:
                    self.fail(c, f"PointConstraint {c.get('name', '')!r}: no <body_{k}>")
            ends.append((body, X[:3, :3] @ location + X[:3, 3]))
        return OsimPointConstraint(c.get("name", ""), ends[0][0], ends[0][1], ends[1][0], ends[1][1], c.line)

    # ------------------------------------------------------------------------------ OpenSim 3

    def read_v3(self):
        bodies, joints = [], []
        for b in self.objects(_xml.child(self.model, "BodySet")):
            if b.tag != "Body":
                self.fail(b, f"unexpected <{b.tag}> in the BodySet")
            body = self.body(b)
            bodies.append(body)
            holder = _xml.child(b, "Joint")
            inner = [] if holder is None else list(holder)
            if not inner:
                continue
            if len(inner) > 1:
                self.fail(holder, f"body {body.name!r}: more than one joint")
            j = inner[0]
            name = j.get("name", "")
            coordinates = [self.coordinate(c, name)
                           for c in self.objects(_xml.child(j, "CoordinateSet")) if c.tag == "Coordinate"]
            joint_type, axes = self.joint_core(j, coordinates)
            parent = _xml.child_text(j, "parent_body")
            if parent is None:
                self.fail(j, f"joint {name!r}: no <parent_body>")
            zero = [0.0, 0.0, 0.0]
            X_PF = offset_frame(_xml.child_floats(j, "location_in_parent", self.path, 3, default=zero, finite=True),
                                _xml.child_floats(j, "orientation_in_parent", self.path, 3, default=zero, finite=True))
            X_BM = offset_frame(_xml.child_floats(j, "location", self.path, 3, default=zero, finite=True),
                                _xml.child_floats(j, "orientation", self.path, 3, default=zero, finite=True))
            joints.append(OsimJoint(name, joint_type, parent, body.name, X_PF, X_BM, axes, coordinates, j.line))
        # The ground comes first: the body called "ground", else the first body without a joint.
        moved = {j.child for j in joints}
        ground = next((b for b in bodies if b.name == "ground"), None) or \
            next((b for b in bodies if b.name not in moved), None)
        if ground is None:
            body_set = _xml.child(self.model, "BodySet")
            self.fail(self.model if body_set is None else body_set, "no ground body (every body has a joint)")
        bodies = [ground] + [b for b in bodies if b is not ground]
        markers = []
        for m in self.objects(_xml.child(self.model, "MarkerSet")):
            body = _xml.child_text(m, "body")
            if body is None:
                self.fail(m, f"marker {m.get('name')!r}: no <body>")
            location = _xml.child_floats(m, "location", self.path, 3, default=[0.0, 0.0, 0.0], finite=True)
            markers.append(self.marker(m, body, location))
        return bodies, joints, markers

    # ------------------------------------------------------------------------------ OpenSim 4

    def read_v4(self):
        self._index_components()
        ground = _xml.child(self.model, "Ground")
        bodies = [OsimBody(ground.get("name", "ground") if ground is not None else "ground", line=self.model.line)]
        for b in self.objects(_xml.child(self.model, "BodySet")):
            if b.tag != "Body":
                self.fail(b, f"unexpected <{b.tag}> in the BodySet")
            bodies.append(self.body(b))
        joints = []
        for j in self.objects(_xml.child(self.model, "JointSet")):
            name = j.get("name", "")
            holder = _xml.child(j, "coordinates")
            coordinates = [self.coordinate(c, name) for c in ([] if holder is None else holder)
                           if c.tag == "Coordinate"]
            joint_type, axes = self.joint_core(j, coordinates)
            parent, X_PF = self.frame_of_socket(j, ("socket_parent_frame", "socket_parent_frame_connectee_name"))
            child, X_BM = self.frame_of_socket(j, ("socket_child_frame", "socket_child_frame_connectee_name"))
            joints.append(OsimJoint(name, joint_type, parent, child, X_PF, X_BM, axes, coordinates, j.line))
        markers = []
        for m in self.objects(_xml.child(self.model, "MarkerSet")):
            body, X = self.frame_of_socket(m, ("socket_parent_frame", "socket_parent_frame_connectee_name"))
            location = _xml.child_floats(m, "location", self.path, 3, default=[0.0, 0.0, 0.0], finite=True)
            markers.append(self.marker(m, body, X[:3, :3] @ location + X[:3, 3]))
        return bodies, joints, markers

    def _index_components(self):
        """Component paths of all named elements below <Model> (unnamed elements such as
        <objects> or <frames> do not appear in paths)."""
        self.by_path, self.path_of, self.by_name = {}, {}, {}
        pending = [(c, "") for c in reversed(self.model)]   # depth first, in file order, without recursion
        while pending:                                      # (a file may nest elements thousands deep)
            c, prefix = pending.pop()
            name = c.get("name")
            if name is not None and c.tag not in ("Model",):
                prefix = f"{prefix}/{name}"
                self.by_path.setdefault(prefix, c)
                self.path_of[id(c)] = prefix
                self.by_name.setdefault(name, []).append(c)
            pending.extend((g, prefix) for g in reversed(c))

    def _resolve(self, ref: str, owner, at):
        if ref.startswith("/"):
            parts = []
        else:
            parts = self.path_of.get(id(owner), "").split("/")[1:]
        for piece in ref.split("/"):
            if piece in ("", "."):
                continue
            if piece == "..":
                if not parts:
                    self.fail(at, f"socket path {ref!r} leaves the model")
                parts.pop()
            else:
                parts.append(piece)
        found = self.by_path.get("/" + "/".join(parts))
        if found is None:
            frames = [e for e in self.by_name.get(ref.rstrip("/").rsplit("/", 1)[-1], [])
                      if e.tag in ("Body", "Ground", "PhysicalOffsetFrame")]
            if len(frames) == 1:                      # a bare name, as older 4.x files write them
                found = frames[0]
        if found is None:
            self.fail(at, f"socket path {ref!r} names no component of the model")
        return found

    def frame_of_socket(self, owner, tags, depth=0):
        """(body name, X_body_frame) of the frame a socket of `owner` connects to."""
        socket = _xml.child(owner, *tags)
        ref = _xml.text_of(socket)
        if ref is None:
            self.fail(owner, f"<{owner.tag} name={owner.get('name')!r}>: no <{tags[0]}>")
        return self.frame(self._resolve(ref, owner, socket), depth)

    def frame(self, elem, depth=0):
        tag = elem.tag
        if depth > 50:
            self.fail(elem, "offset frames refer to each other in a loop")
        if tag in ("Body", "Ground"):
            return elem.get("name", "ground"), np.eye(4)
        if tag == "PhysicalOffsetFrame":
            body, X = self.frame_of_socket(elem, ("socket_parent", "socket_parent_connectee_name"), depth + 1)
            zero = [0.0, 0.0, 0.0]
            return body, X @ offset_frame(_xml.child_floats(elem, "translation", self.path, 3, default=zero, finite=True),
                                          _xml.child_floats(elem, "orientation", self.path, 3, default=zero, finite=True))
        self.fail(elem, f"<{tag} name={elem.get('name')!r}> is not a frame this reader supports")


def _unique(items, what: str, path):
    """Raise naming the line of the first item whose name an earlier item has."""
    first = {}
    for item in items:
        if item.name in first:
            where = "" if first[item.name] is None else f" (the first is on line {first[item.name]})"
            raise OpenSimFileError(path, item.line, f"a second {what} called {item.name!r}{where}")
        first[item.name] = item.line


def _check(osim: OsimModel, path):
    names = [b.name for b in osim.bodies]
    _unique(osim.bodies, "body", path)
    child_of = {}
    for j in osim.joints:
        for end in (j.parent, j.child):
            if end not in names:
                raise OpenSimFileError(path, j.line, f"joint {j.name!r}: no body called {end!r}")
        if j.child in child_of:
            raise OpenSimFileError(path, j.line, f"body {j.child!r} is the child of two joints "
                                                 f"({child_of[j.child].name!r} and {j.name!r}): loops are not supported")
        child_of[j.child] = j
    ground = osim.bodies[0].name
    if ground in child_of:
        raise OpenSimFileError(path, child_of[ground].line, f"joint {child_of[ground].name!r} moves the ground "
                                                            "(reversed joints are not supported)")
    for b in osim.bodies[1:]:
        seen = set()
        name = b.name
        while name != ground:
            if name in seen:
                raise OpenSimFileError(path, child_of[name].line, f"joints form a loop through body {name!r}")
            seen.add(name)
            if name not in child_of:
                raise OpenSimFileError(path, b.line, f"body {b.name!r} has no joint connecting it to {ground!r}")
            name = child_of[name].parent
    _unique(osim.coordinates, "coordinate", path)
    coordinate_names = {c.name for c in osim.coordinates}
    for k in osim.couplers:
        for role, name in (("dependent", k.dependent), ("independent", k.independent)):
            if name not in coordinate_names:
                raise OpenSimFileError(path, k.line, f"CoordinateCouplerConstraint {k.name!r}: no coordinate called "
                                                     f"{name!r} ({role})")
    for p in osim.points:
        for body in (p.body_1, p.body_2):
            if body not in names:
                raise OpenSimFileError(path, p.line, f"PointConstraint {p.name!r}: no body called {body!r}")
    marker_names = [m.name for m in osim.markers]
    for m in osim.markers:
        if m.body not in names:
            raise OpenSimFileError(path, m.line, f"marker {m.name!r}: no body called {m.body!r}")
        if marker_names.count(m.name) > 1:
            raise OpenSimFileError(path, m.line, f"a second marker called {m.name!r}")


# --------------------------------------------------------------------------------------- build

@dataclass
class MarkerSet:
    """Model markers: `names` (M,), `segments` (M,) engine segment indices, `locations` (M, 3) in
    the segment (= body) frame."""

    names: list
    segments: np.ndarray
    locations: np.ndarray

    def index(self, names) -> np.ndarray:
        lookup = {n: i for i, n in enumerate(self.names)}
        try:
            return np.array([lookup[n] for n in names], dtype=int)
        except KeyError as exc:
            raise KeyError(f"no model marker called {exc.args[0]!r}") from None


class OpenSimModel:
    """An OpenSim model in engine form: `model` (one Segment per body and per joint split at a
    pivot, ground first, parents before children), `coupling` (OpenSim coordinates q -> per-axis joint values theta),
    `markers` (in segment frames), `body_transform` (S, 4, 4): body frame = segment frame @
    body_transform[s], `couplers`, `points` (the PointConstraints: a MarkerSet of 2P points, the
    first P of them to coincide with the last P) and `source` (the parsed OsimModel). See
    markers.py for marker positions and Jacobians."""

    def __init__(self, source: OsimModel, model: Model, coupling: Coupling, markers: MarkerSet,
                 body_transform: np.ndarray | None = None, couplers=(), points: MarkerSet | None = None):
        self.source, self.model, self.coupling, self.markers = source, model, coupling, markers
        S = len(model.segments)
        self.body_transform = np.broadcast_to(np.eye(4), (S, 4, 4)).copy() if body_transform is None else body_transform
        self.couplers = list(couplers)
        self.points = points if points is not None else MarkerSet([], np.zeros(0, int), np.zeros((0, 3)))

    @property
    def point_names(self) -> list:
        """The PointConstraints' names."""
        return self.points.names[:len(self.points.names) // 2]

    def point_residuals(self, q) -> np.ndarray:
        """x_1(q) - x_2(q) (F, P, 3) in ground, metres: how far q breaks each PointConstraint."""
        from .markers import _positions
        from ..kinematics import forward_kinematics
        q = np.atleast_2d(np.asarray(q, dtype=float))
        P = len(self.point_names)
        if not P:
            return np.zeros((q.shape[0], 0, 3))
        x = _positions(forward_kinematics(self.model, self.coupling.dofs(q)), self.points.segments,
                       self.points.locations)
        return x[:, :P] - x[:, P:]

    def fill_dependents(self, q) -> np.ndarray:
        """q (F, n_q) with the couplers' dependent coordinates set from their independent ones."""
        return fill_dependents(q, self.couplers)

    def constraint_residuals(self, q) -> np.ndarray:
        """q_dep - s f(q_ind) (F, couplers), radians or metres: how far q breaks each coupler."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        return np.stack([k.residual_and_slope(q)[0] for k in self.couplers], axis=1) if self.couplers \
            else np.zeros((q.shape[0], 0))

    @property
    def coordinate_names(self) -> list:
        return self.coupling.names

    def coordinates_from(self, storage, degrees: bool | None = None, missing: str = "default") -> np.ndarray:
        """Coordinates q (rows, n_q) from a Storage (.mot/.sto) whose columns are named after the
        coordinates: rotational columns converted to radians when the file is in degrees
        (`degrees`, default `storage.degrees`). A coordinate without a column takes its default
        value (`missing="default"`) or raises KeyError (`missing="error"`)."""
        c = self.coupling
        degrees = storage.degrees if degrees is None else degrees
        q = np.tile(c.default, (storage.n_rows, 1))
        for i, name in enumerate(c.names):
            if name in storage:
                q[:, i] = storage.column(name) * (np.pi / 180.0 if degrees and c.rotational[i] else 1.0)
            elif missing == "error":
                raise KeyError(f"{storage.path or 'the storage'} has no column for coordinate {name!r}")
        return q

    def segment(self, body: str) -> int:
        return self.model.index(body)

    def body_frames(self, q) -> np.ndarray:
        """World frames (F, S, 4, 4) of all bodies (in segment order) for coordinates q (F, n_q);
        a joint split at a pivot (build_model) adds its intermediate segment's frame among them."""
        from ..kinematics import forward_kinematics
        q = np.atleast_2d(np.asarray(q, dtype=float))
        return forward_kinematics(self.model, self.coupling.dofs(q)).frames @ self.body_transform

    def marker_positions(self, q, names=None) -> np.ndarray:
        from .markers import marker_positions
        return marker_positions(self, q, names)

    def marker_jacobian(self, q, names=None) -> np.ndarray:
        from .markers import marker_jacobian
        return marker_jacobian(self, q, names)


def build_model(osim: OsimModel) -> OpenSimModel:
    """The engine Model, Coupling and MarkerSet of a parsed model (module docstring)."""
    child_of = {j.child: j for j in osim.joints}
    order, placed = [osim.bodies[0].name], {osim.bodies[0].name}
    pending = [b.name for b in osim.bodies[1:]]
    while pending:                                   # parents before children, else file order
        progressed = False
        for name in list(pending):
            if child_of[name].parent in placed:
                order.append(name)
                placed.add(name)
                pending.remove(name)
                progressed = True
        if not progressed:                           # _check rules this out
            raise OpenSimFileError(osim.path, None, f"bodies {pending} are not connected to the ground")
    # A joint with a rotation about an axis off its frame's origin (a pivot) is split there: a
    # massless segment carries the axes before it, the body's segment hangs from that at T(pivot).
    split = {name: next((k for k, a in enumerate(child_of[name].axes) if a.pivot is not None), None)
             for name in order[1:]}
    names = []
    for name in order:
        if split.get(name) is not None:
            names.append(f"{child_of[name].name}/intermediate")
        names.append(name)
    index = {name: i for i, name in enumerate(names)}

    coordinates = osim.coordinates
    coord_index = {c.name: i for i, c in enumerate(coordinates)}
    # X_MB = X_BM^-1 per body (identity for the ground): body coordinates -> segment coordinates
    segment_from_body = {name: np.eye(4) for name in names}
    for name in order[1:]:
        if not np.array_equal(child_of[name].child_offset, np.eye(4)):
            with np.errstate(all="ignore"):
                segment_from_body[name] = rigid_inverse(child_of[name].child_offset)
        if split[name] is not None:
            back = np.eye(4)
            back[:3, 3] = -child_of[name].axes[split[name]].pivot
            segment_from_body[name] = back @ segment_from_body[name]
    segments, dof_coordinate, dof_function, dof_second, dof_axis, joint_of_segment = [], [], [], [], [], []

    def add_segment(name, parent, rest, joint, axes):
        engine_joints = []
        for axis in axes:
            make = revolute if axis.kind == ROTATION else prismatic
            engine_joints.append(make(tuple(axis.axis), name=f"{joint.name}/{axis.name}"))
            dof_coordinate.append(-1 if axis.coordinate is None else coord_index[axis.coordinate])
            dof_function.append(axis.function)
            dof_second.append(-1 if axis.second is None else coord_index[axis.second])
            dof_axis.append((joint, axis))
        if not np.all(np.isfinite(rest)):
            raise OpenSimFileError(osim.path, joint.line, f"joint {joint.name!r}: its offset frames are too large "
                                                          "to compute with")
        segments.append(Segment(name=name, parent=parent, rest=rest, joints=tuple(engine_joints)))
        joint_of_segment.append(joint)

    for name in order:
        joint = child_of.get(name)
        if joint is None:
            segments.append(Segment(name=name, parent=-1))
            joint_of_segment.append(None)
            continue
        with np.errstate(all="ignore"):
            rest = segment_from_body[joint.parent] @ joint.parent_offset
        k = split[name]
        if k is None:
            add_segment(name, index[joint.parent], rest, joint, joint.axes)
        else:
            at = np.eye(4)
            at[:3, 3] = joint.axes[k].pivot
            add_segment(f"{joint.name}/intermediate", index[joint.parent], rest, joint, joint.axes[:k])
            add_segment(name, index[name] - 1, at, joint, joint.axes[k:])
    model = Model(segments, armature_names=[osim.name or "opensim"])
    coupling = Coupling(coordinates, np.array(dof_coordinate, dtype=int), dof_function,
                        np.array(dof_second, dtype=int) if any(k >= 0 for k in dof_second) else None)
    with np.errstate(all="ignore"):
        locations = [segment_from_body[m.body][:3, :3] @ m.location + segment_from_body[m.body][:3, 3]
                     for m in osim.markers]
    markers = MarkerSet(names=[m.name for m in osim.markers],
                        segments=np.array([index[m.body] for m in osim.markers], dtype=int),
                        locations=np.array(locations, dtype=float).reshape(-1, 3))
    body_transform = np.stack([segment_from_body[name] for name in names])
    couplers = [Coupler(k.name, coord_index[k.dependent], coord_index[k.independent], scaled(k.function, k.scale_factor))
                for k in osim.couplers]
    ends = [(p.name, p.body_1, p.location_1) for p in osim.points] + [(p.name, p.body_2, p.location_2)
                                                                      for p in osim.points]
    points = MarkerSet(names=[name for name, _, _ in ends],
                       segments=np.array([index[body] for _, body, _ in ends], dtype=int),
                       locations=np.array([segment_from_body[body][:3, :3] @ at + segment_from_body[body][:3, 3]
                                           for _, body, at in ends], dtype=float).reshape(-1, 3))
    om = OpenSimModel(osim, model, coupling, markers, body_transform, couplers, points)
    try:
        coupler_order(couplers)                              # two couplers of one dependent, loops
    except ValueError as exc:
        raise OpenSimFileError(osim.path, None, str(exc)) from None
    _check_default_pose(om, dof_axis, joint_of_segment)
    return om


def _check_default_pose(om: OpenSimModel, dof_axis: list, joint_of_segment: list):
    """Finite numbers in the file can still overflow: the default pose must give finite joint
    values (and derivatives), body frames and marker positions. Else name the transform axis, the
    joint or the marker where it first does not."""
    path = om.source.path
    q = om.coupling.default_coordinates(1)
    with np.errstate(all="ignore"):
        theta, J = om.coupling.dofs(q)[0], om.coupling.jacobian(q)[0]
        bad = ~(np.isfinite(theta) & np.all(np.isfinite(J), axis=1))
        if bad.any():
            joint, axis = dof_axis[int(np.argmax(bad))]
            raise OpenSimFileError(path, axis.line, f"joint {joint.name!r} {axis.name}: the function is not finite at "
                                                    "the coordinates' default values")
        bad = ~np.all(np.isfinite(om.body_frames(q)[0]), axis=(1, 2))
        if bad.any():
            joint = joint_of_segment[int(np.argmax(bad))]
            raise OpenSimFileError(path, joint.line, f"joint {joint.name!r}: body {joint.child!r} is not at a finite "
                                                     "place in the default pose (offsets or values too large)")
        bad = ~np.all(np.isfinite(om.marker_positions(q)[0]), axis=1)
        if bad.any():
            marker = om.source.markers[int(np.argmax(bad))]
            raise OpenSimFileError(path, marker.line, f"marker {marker.name!r} is not at a finite place in the default "
                                                      "pose (its location is too large)")


def load_osim(path) -> OpenSimModel:
    """read_osim then build_model."""
    return build_model(read_osim(path))

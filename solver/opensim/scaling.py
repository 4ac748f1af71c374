"""OpenSim's ModelScaler: scale factors per body from a static trial, and a model scaled by them.

Scale factors. Every body (and the ground, and every offset frame) starts at (1, 1, 1); the
steps of `scaling_order` then run in order:

* measurements: a Measurement with marker pairs (a_k, b_k), k = 1..K, gives

      s = (1/K) sum_k  dbar_k / d_k,     dbar_k = (1/F) sum_f |x_b(f) - x_a(f)|   (experimental)
                                         d_k    = |p_b - p_a|   (model, default pose)

  over the frames f of the time range (from the last frame at or before its start to the first
  frame at or after its end, MarkerData::findFrameRange), and s goes to each of its bodies on
  the axes it names. A pair whose marker is missing from the model or the trial, or missing in
  a frame (NaN), leaves the measurement out (a warning), as in OpenSim.
* manualScale: each applied Scale of the ScaleSet sets its body's three factors.

Scaling a model by factors S_b = diag(s_b) (Model::scale):

* a point fixed to body b (marker location, path point, an offset frame's translation whose
  parent is on b) becomes S_b p; a joint's child-side frame is such a point on the child body;
* a CustomJoint's translation functions f_k along axis a_k become (|a_k| . s_P) f_k, s_P the
  factors of the joint's parent body (a MultiplierFunction), except the identity LinearFunction
  (1, 0), which is a degree of freedom;
* a CoordinateCouplerConstraint whose dependent coordinate is translational: its scale_factor
  times s_x of the body its joint hangs from (the parent frame's base body), which must be
  scaled uniformly (OpenSim refuses other factors, as here); rotational ones are not scaled;
* a ScapulothoracicJoint's ellipsoid radii r become S_P r (P its parent body) and its winging
  axis origin (o_x, o_y) becomes (sx o_x, sy o_y) with the child's factors, where both are scaled;
* a body's mass centre c becomes S_b c; with preserve_mass_distribution false its mass becomes
  m |sx sy sz|; its inertia I (scale_inertia): s^2 I (times |sx sy sz| when the mass scales)
  for equal factors, else as a cylinder about its smallest principal moment;
* with a subject mass M > 0 every body's mass and inertia are then multiplied by M / sum_b m_b.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _xml
from .errors import OpenSimFileError, OpenSimFileWarning
from .functions import FUNCTION_TAGS
from .model_document import ModelDocument, number, numbers, set_text
from .scale_setup import ModelScalerSetup

SIGNIFICANT = np.finfo(float).eps ** 0.875          # SimTK::SignificantReal
INERTIA_TAGS = ("inertia_xx", "inertia_yy", "inertia_zz", "inertia_xy", "inertia_xz", "inertia_yz")


def frame_span(time, start: float, end: float) -> tuple:
    """(first, last) frame indices OpenSim's MarkerData::findFrameRange picks for (start, end):
    first is the last frame at or before start (else 0), last the first frame from there at or
    after end (else the last frame)."""
    time = np.asarray(time, dtype=float)
    if start > end:
        raise ValueError(f"time range starts after it ends: {start} > {end}")
    before = np.flatnonzero(time <= start)
    first = int(before[-1]) if before.size else 0
    after = np.flatnonzero(time[first:] >= end)
    last = first + int(after[0]) if after.size else time.size - 1
    return first, last


@dataclass
class MeasuredFactor:
    """One measurement's outcome: per pair the model and experimental distances (m), the factor
    (NaN when the measurement is left out) and why it was left out."""

    name: str
    pairs: list
    model: list
    experimental: list
    factor: float
    reason: str = ""


@dataclass
class ScaleFactors:
    """Scale factors (3,) per physical frame name, in OpenSim's order (ground, bodies, offset
    frames; names may repeat, as in OpenSim's ScaleSet), and what each measurement gave."""

    frames: list
    factors: np.ndarray
    measured: list = field(default_factory=list)
    warnings: list = field(default_factory=list)

    def of(self, name: str):
        """The factors of the first frame called `name` (None if there is none)."""
        for frame, f in zip(self.frames, self.factors):
            if frame == name:
                return f
        return None

    def as_dict(self) -> dict:
        out = {}
        for frame, f in zip(self.frames, self.factors):
            out.setdefault(frame, f)
        return out


def measure(om, trial, measurement, time_range) -> MeasuredFactor:
    """ModelScaler::computeMeasurementScaleFactor (module docstring) for one Measurement, model
    distances at the default pose of `om`, experimental ones from `trial` (metres)."""
    if not measurement.pairs:
        return MeasuredFactor(measurement.name, [], [], [], np.nan, "it has no marker pairs")
    first, last = frame_span(trial.time, *time_range)
    q = om.coupling.default_coordinates(1)
    model_d, trial_d = [], []
    for a, b in measurement.pairs:
        missing = [n for n in (a, b) if n not in om.markers.names]
        if missing:
            return MeasuredFactor(measurement.name, measurement.pairs, model_d, trial_d, np.nan,
                                  f"marker {missing[0]} is not in the model")
        missing = [n for n in (a, b) if n not in trial.names]
        if missing:
            return MeasuredFactor(measurement.name, measurement.pairs, model_d, trial_d, np.nan,
                                  f"marker {missing[0]} is not in {trial.path or 'the static trial'}")
        x = om.marker_positions(q, [a, b])[0]
        model_d.append(float(np.linalg.norm(x[1] - x[0])))
        span = trial.select([a, b])[first:last + 1]
        trial_d.append(float(np.mean(np.linalg.norm(span[:, 1] - span[:, 0], axis=-1))))
        if not np.isfinite(trial_d[-1]):
            return MeasuredFactor(measurement.name, measurement.pairs, model_d, trial_d, np.nan,
                                  f"marker {a} or {b} is missing in a frame of the time range")
    factor = float(np.mean(np.array(trial_d) / np.array(model_d)))
    return MeasuredFactor(measurement.name, measurement.pairs, model_d, trial_d, factor)


def scale_factors(doc: ModelDocument, scaler: ModelScalerSetup, trial=None) -> ScaleFactors:
    """The factors ModelScaler::processModel computes for the model `doc` (module docstring)."""
    frames = doc.frame_names()
    factors = np.ones((len(frames), 3))
    out = ScaleFactors(frames, factors)
    om = None
    for step in scaler.scaling_order:
        if step == "measurements":
            applied = [m for m in scaler.measurements if m.apply]
            if applied and trial is None:
                raise ValueError("the ModelScaler uses measurements but names no marker_file")
            om = om or doc.om()
            for m in applied:
                result = measure(om, trial, m, scaler.time_range)
                out.measured.append(result)
                if not np.isfinite(result.factor):
                    out.warnings.append(f"measurement {m.name!r} not used to scale the model: {result.reason}")
                    warnings.warn(out.warnings[-1], OpenSimFileWarning, stacklevel=2)
                    continue
                for body, axes in m.bodies.items():
                    rows = [i for i, f in enumerate(frames) if f == body]
                    if not rows:
                        out.warnings.append(f"measurement {m.name!r} scales {body!r}, which the model does not have")
                    factors[np.ix_(rows, axes)] = result.factor
        else:
            for s in scaler.scales:
                if s.apply:
                    rows = [i for i, f in enumerate(frames) if f == s.segment]
                    if not rows:
                        out.warnings.append(f"the manual scale of {s.segment!r} names no body of the model")
                    factors[rows] = s.factors
    return out


# ------------------------------------------------------------------------------- the model

def scale_inertia(inertia, mass: float, factors, scale_mass: bool) -> np.ndarray:
    """Body::scaleInertialProperties: the inertia (3x3) of a body of (unscaled) `mass` scaled by
    `factors` (module docstring). Unequal factors treat the body as a cylinder along the axis of
    its smallest moment, I_axis = m r^2 / 2, I_other = m (L^2/12 + r^2/4): r and L are recovered,
    scaled (r^2 by the two other factors, L by the axis factor) and the moments rebuilt; products
    of inertia scale by their two axes' factors."""
    tensor = np.array(inertia, dtype=float).reshape(3, 3)
    s = np.asarray(factors, dtype=float)
    volume = abs(s[0] * s[1] * s[2])
    new_mass = mass * volume if scale_mass else mass
    if new_mass <= np.finfo(float).eps:
        return np.zeros((3, 3))
    if _equal(s[0], s[1]) and _equal(s[1], s[2]):
        return tensor * (volume if scale_mass else 1.0) * s[0] * s[0]
    d = np.diag(tensor)
    axis = (0 if d[0] <= d[2] else 2) if d[0] <= d[1] else (1 if d[1] <= d[2] else 2)
    term = 2.0 * d[axis] / mass
    radius = np.sqrt(term) if term >= 0 else 0.0
    other = 1 if axis == 0 else 0
    term = 12.0 * (d[other] - 0.25 * mass * radius * radius) / mass
    length = (np.sqrt(term) if term >= 0 else 0.0) * s[axis]
    rest = [k for k in range(3) if k != axis]
    radius_sq = radius * s[rest[0]] * radius * s[rest[1]]
    out = tensor * np.outer(s, s) * (volume if scale_mass else 1.0)
    side = new_mass * (length * length / 12.0 + 0.25 * radius_sq)
    out[0, 0] = out[1, 1] = out[2, 2] = side
    out[axis, axis] = 0.5 * new_mass * radius_sq
    return out


def _equal(a: float, b: float) -> bool:
    """SimTK::isNumericallyEqual at its default tolerance."""
    return abs(a - b) <= max(abs(a), abs(b), 1.0) * SIGNIFICANT


def _inertia(body, v4: bool, path) -> np.ndarray:
    if v4:
        xx, yy, zz, xy, xz, yz = _xml.child_floats(body, "inertia", path, 6, default=[0.0] * 6)
    else:
        xx, yy, zz, xy, xz, yz = (_xml.child_float(body, tag, path, 0.0) for tag in INERTIA_TAGS)
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def _set_inertia(body, tensor, v4: bool):
    values = (tensor[0, 0], tensor[1, 1], tensor[2, 2], tensor[0, 1], tensor[0, 2], tensor[1, 2])
    if v4:
        set_text(body, "inertia", numbers(values))
    else:
        for tag, value in zip(INERTIA_TAGS, values):
            set_text(body, tag, number(value))


def _scale_point(elem, tag: str, factors, path):
    values = _xml.child_floats(elem, tag, path, 3)
    if values is not None:
        set_text(elem, tag, numbers(values * factors))


def _function_element(axis):
    """(holder, function element) of a TransformAxis: <function><F/></function> (OpenSim 3) or
    <F name="function"/> (OpenSim 4); (None, None) without a function."""
    wrapper = _xml.child(axis, "function")
    if wrapper is not None:
        inner = list(wrapper)
        return (wrapper, inner[0]) if inner else (None, None)
    for c in axis:
        if c.get("name") == "function" or c.tag in FUNCTION_TAGS:
            return axis, c
    return None, None


def _scale_function(axis, factor: float, path):
    """SpatialTransform::scale on one translation axis: its function times `factor`."""
    holder, function = _function_element(axis)
    if function is None:
        return
    if function.tag == "LinearFunction":
        c = _xml.child_floats(function, "coefficients", path, 2, default=[1.0, 0.0])
        if c[0] == 1.0 and c[1] == 0.0:
            return
    if function.tag == "MultiplierFunction":
        scale = _xml.child_float(function, "scale", path, 1.0)
        set_text(function, "scale", number(scale * factor))
        return
    multiplier = _xml.Element("MultiplierFunction")
    name = function.get("name")
    if name is not None:
        multiplier.set("name", name)
        del function.attrib["name"]
    inner = _xml.Element("function")
    index = list(holder).index(function)
    holder.remove(function)
    inner.append(function)
    multiplier.append(inner)
    set_text(multiplier, "scale", number(factor))
    multiplier.tail = function.tail
    holder.insert(index, multiplier)


def _scale_scapulothoracic(joint, parent, child, path):
    """A ScapulothoracicJoint scales as OpenSim's does: the thoracic ellipsoid's radii by the
    parent body's factors (r_k s_k), the winging axis origin (o_x, o_y) by the child body's x and
    y factors, the latter only where both bodies are scaled."""
    _scale_point(joint, "thoracic_ellipsoid_radii_x_y_z", parent, path)
    origin = _xml.child_floats(joint, "scapula_winging_axis_origin", path, 2)
    if child is not None and origin is not None:
        set_text(joint, "scapula_winging_axis_origin", numbers(origin * np.asarray(child)[:2]))


def _scale_couplers(doc: ModelDocument, factors: dict) -> None:
    """CoordinateCouplerConstraints as OpenSim scales them (module docstring)."""
    holder = _xml.child(doc.model, "ConstraintSet")
    objects = None if holder is None else _xml.child(holder, "objects")
    couplers = [] if objects is None else [c for c in objects if c.tag == "CoordinateCouplerConstraint"]
    if not couplers:
        return
    osim = doc.osim()
    coordinates = {c.name: c for c in osim.coordinates}
    parent = {j.name: j.parent for j in osim.joints}
    for c in couplers:
        coordinate = coordinates.get(_xml.child_text(c, "dependent_coordinate_name") or "")
        if coordinate is None or coordinate.motion_type != "translational":
            continue
        s = factors.get(parent.get(coordinate.joint))
        if s is None:
            continue
        if not (s[0] == s[1] == s[2]):
            raise OpenSimFileError(doc.path, c.line, f"CoordinateCouplerConstraint {c.get('name', '')!r}: its "
                                   f"translational dependent {coordinate.name!r} hangs from body "
                                   f"{parent.get(coordinate.joint)!r}, scaled unequally {list(s)}: OpenSim 4.6 "
                                   "refuses that too (non-uniform scaling of couplers is not implemented)")
        set_text(c, "scale_factor", number(_xml.child_float(c, "scale_factor", doc.path, 1.0) * float(s[0])))


def apply_scale(doc: ModelDocument, factors: dict, preserve_mass_distribution: bool, mass: float) -> list:
    """Scale the model `doc` in place by `factors` ({body name: (3,)}) as Model::scale does
    (module docstring); `mass` > 0 is the subject's total mass. Returns notes on what is not
    scaled."""
    path, v4 = doc.path, doc.v4
    reader = doc._reader()

    def base_of(elem, tags):
        return reader.frame_of_socket(elem, tags)[0]

    def f(body):
        return factors.get(body)

    if v4:
        for frame in doc.model.iter("PhysicalOffsetFrame"):
            s = f(base_of(frame, ("socket_parent", "socket_parent_connectee_name")))
            if s is not None:
                _scale_point(frame, "translation", s, path)
    _scale_couplers(doc, factors)
    joints = doc.joints()
    for joint, parent, child in joints:
        if not v4:
            for tag, body in (("location_in_parent", parent), ("location", child)):
                if f(body) is not None:
                    _scale_point(joint, tag, f(body), path)
        if joint.tag == "ScapulothoracicJoint" and f(parent) is not None:
            _scale_scapulothoracic(joint, f(parent), f(child), path)
        transform = _xml.child(joint, "SpatialTransform")
        s = f(parent)
        if transform is None or s is None:
            continue
        for axis in transform:
            if axis.tag == "TransformAxis" and axis.get("name", "").startswith("translation"):
                direction = _xml.child_floats(axis, "axis", path, 3, default=[0.0, 0.0, 0.0])
                _scale_function(axis, float(np.abs(direction) @ s), path)
    frame_tags = ("socket_parent_frame", "socket_parent_frame_connectee_name")
    for marker in doc.marker_elements():
        body = base_of(marker, frame_tags) if v4 else _xml.child_text(marker, "body")
        if f(body) is not None:
            _scale_point(marker, "location", f(body), path)
    points = 0
    for tag in ("PathPoint", "ConditionalPathPoint"):
        for point in doc.model.iter(tag):
            body = base_of(point, frame_tags) if v4 else _xml.child_text(point, "body")
            if f(body) is not None:
                _scale_point(point, "location", f(body), path)
                points += 1
    ground = doc.body_names()[0]
    bodies = [b for b in doc.bodies() if b.get("name") != ground]
    masses = []
    for body in bodies:
        s = f(body.get("name"))
        m = _xml.child_float(body, "mass", path, 0.0)
        if s is not None:
            _scale_point(body, "mass_center", s, path)
            _set_inertia(body, scale_inertia(_inertia(body, v4, path), m, s, not preserve_mass_distribution), v4)
            if not preserve_mass_distribution:
                m *= abs(s[0] * s[1] * s[2])
                set_text(body, "mass", number(m))
        masses.append(m)
    total = float(np.sum(masses))
    if mass > 0 and total > 0:
        ratio = mass / total
        for body, m in zip(bodies, masses):
            set_text(body, "mass", number(m * ratio))
            _set_inertia(body, _inertia(body, v4, path) * ratio, v4)
    notes = []
    if points:
        notes.append(f"{points} muscle path points scaled; muscle fibre and tendon lengths are not (OpenSim "
                     "rescales them by the change of path length)")
    for tag in ("WrapCylinder", "WrapSphere", "WrapEllipsoid", "WrapTorus", "MovingPathPoint"):
        if next(doc.model.iter(tag), None) is not None:
            notes.append(f"the model's {tag} elements are not scaled")
    return notes


def write_scale_set(path, factors: ScaleFactors, version: str = "40600") -> None:
    """The factors as OpenSim's ScaleSet file (one <Scale> per physical frame, full precision)."""
    lines = ['<?xml version="1.0" encoding="UTF-8" ?>', f'<OpenSimDocument Version="{version}">',
             '\t<ScaleSet name="ScaleSet">', "\t\t<objects>"]
    for name, f in zip(factors.frames, factors.factors):
        lines += ["\t\t\t<Scale>", f"\t\t\t\t<scales>{numbers(f)}</scales>", f"\t\t\t\t<segment>{name}</segment>",
                  "\t\t\t\t<apply>true</apply>", "\t\t\t</Scale>"]
    lines += ["\t\t</objects>", "\t\t<groups />", "\t</ScaleSet>", "</OpenSimDocument>"]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")

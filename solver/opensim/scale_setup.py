"""ScaleTool setup files, read as OpenSim 4.6 reads them.

A setup is `<ScaleTool name=...>` (alone or inside `<OpenSimDocument>`, any Version labs write:
20302, 30000, 40000, ...) with the subject's `mass` (kg; -1 or absent: masses are not rescaled to
a total), `height` and `age` (kept, unused), and three parts, each optional:

* `GenericModelMaker`: `model_file` (the generic model) and `marker_set_file` (a MarkerSet that
  replaces the model's markers of the same name and adds the others).
* `ModelScaler`: `apply`, `scaling_order` (words `measurements` and `manualScale`, applied in
  that order), a `MeasurementSet` (each Measurement: `apply`, marker pairs, and the bodies and
  axes its factor scales), a manual `ScaleSet` (per body three factors and `apply`), the static
  trial `marker_file` and its `time_range`, `preserve_mass_distribution`, and the outputs
  `output_model_file` and `output_scale_file`.
* `MarkerPlacer`: `apply`, an `IKTaskSet` (as the IK tool's), `marker_file`, `coordinate_file`,
  `time_range`, `max_marker_movement`, and the outputs `output_model_file`,
  `output_motion_file` and `output_marker_file`.

`Unassigned` (OpenSim's spelling of an empty value) reads as empty. MeasurementSet, ScaleSet,
IKTaskSet and the GenericModelMaker's MarkerSet may sit in other files (`file="..."`); every
file name is relative to the setup file's folder, as OpenSim takes it (its "path to subject").
Where an element repeats, the first one counts. Defaults are OpenSim 4.6's: apply true, mass -1,
scaling_order empty, time_range (-1, -1), preserve_mass_distribution false,
max_marker_movement -1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _xml
from .errors import OpenSimFileError
from .setup import IKTaskSet, _clear_unassigned, _find, _task_set_from_element, read_ik_task_set

SCALING_STEPS = ("measurements", "manualScale")
AXES = {"x": 0, "y": 1, "z": 2}


@dataclass
class Measurement:
    """One measurement: the factor mean_pairs(experimental distance / model distance) of its
    `pairs` (marker name pairs) goes to `bodies` ({body: axis indices 0-2}) when `apply`."""

    name: str
    apply: bool = True
    pairs: list = field(default_factory=list)
    bodies: dict = field(default_factory=dict)


@dataclass
class ManualScale:
    """Factors (sx, sy, sz) for body `segment`, used when `apply`."""

    segment: str
    factors: np.ndarray
    apply: bool = True


@dataclass
class ModelScalerSetup:
    apply: bool = True
    scaling_order: list = field(default_factory=list)
    measurements: list = field(default_factory=list)
    scales: list = field(default_factory=list)
    marker_file: Path | None = None
    time_range: tuple = (-1.0, -1.0)
    preserve_mass_distribution: bool = False
    output_model_file: Path | None = None
    output_scale_file: Path | None = None


@dataclass
class MarkerPlacerSetup:
    apply: bool = True
    tasks: IKTaskSet = field(default_factory=IKTaskSet)
    marker_file: Path | None = None
    coordinate_file: Path | None = None
    time_range: tuple = (-1.0, -1.0)
    max_marker_movement: float = -1.0
    output_model_file: Path | None = None
    output_motion_file: Path | None = None
    output_marker_file: Path | None = None


@dataclass
class ScaleSetup:
    """A ScaleTool setup (module docstring). File fields are absolute paths, None when empty;
    `model_scaler` / `marker_placer` are None when the setup has no such part."""

    name: str = ""
    mass: float = -1.0
    height: float = -1.0
    age: float = -1.0
    model_file: Path | None = None
    marker_set_file: Path | None = None
    model_scaler: ModelScalerSetup | None = None
    marker_placer: MarkerPlacerSetup | None = None
    path: Path | None = None

    @property
    def folder(self) -> Path:
        return self.path.parent


def _root_of(path, tags):
    """The element with one of `tags` in the file at `path` (the document element or its child)."""
    root = _xml.parse(path)
    elem = _find(root, tags)
    if elem is None:
        raise OpenSimFileError(path, root.line, f"expected <{tags[0]}>, found <{root.tag}>")
    _clear_unassigned(elem)
    return elem


def _inline_or_file(elem, folder, tags, setup_path):
    """(element, its file) of a set written inline or as `<Set file="...">` (read from that file)."""
    ref = (elem.get("file") or "").strip()
    if not ref or ref == "Unassigned":
        return elem, setup_path
    target = (folder / ref).resolve()
    if not target.is_file():
        raise OpenSimFileError(setup_path, elem.line, f"the {elem.tag} file {ref!r} does not exist ({target})")
    return _root_of(target, tags), target


def _objects(elem):
    objects = _xml.child(elem, "objects")
    return [] if objects is None else list(objects)


def _time_range(elem, path):
    values = _xml.child_floats(elem, "time_range", path, 2)
    return (-1.0, -1.0) if values is None else (float(values[0]), float(values[1]))


def _file(elem, tag, folder):
    text = _xml.child_text(elem, tag)
    return None if text is None else (folder / text).resolve()


def read_measurement_set(elem, path) -> list:
    """The Measurements of a <MeasurementSet> element."""
    out = []
    for m in _objects(elem):
        if m.tag != "Measurement":
            raise OpenSimFileError(path, m.line, f"unexpected <{m.tag}> in the MeasurementSet")
        measurement = Measurement(m.get("name", ""), _xml.child_bool(m, "apply", path, True))
        pairs = _xml.child(m, "MarkerPairSet")
        for pair in ([] if pairs is None else _objects(pairs)):
            names = (_xml.child_text(pair, "markers") or "").split()
            if len(names) != 2:
                raise OpenSimFileError(path, pair.line, f"measurement {measurement.name!r}: a MarkerPair needs two "
                                                        f"marker names, got {names}")
            measurement.pairs.append((names[0], names[1]))
        bodies = _xml.child(m, "BodyScaleSet")
        for body in ([] if bodies is None else _objects(bodies)):
            words = (_xml.child_text(body, "axes") or "").split()
            unknown = [w for w in words if w.lower() not in AXES]
            if unknown:
                raise OpenSimFileError(path, body.line, f"measurement {measurement.name!r}: unknown axes {unknown} "
                                                        "(expected X, Y, Z)")
            measurement.bodies[body.get("name", "")] = sorted({AXES[w.lower()] for w in words})
        out.append(measurement)
    return out


def read_scale_set(path_or_elem, path=None) -> list:
    """The Scales of a <ScaleSet> (a file, or an element of the file at `path`)."""
    if path is None:
        path = Path(path_or_elem).resolve()
        elem = _root_of(path, ("ScaleSet",))
    else:
        elem = path_or_elem
    out = []
    for s in _objects(elem):
        if s.tag != "Scale":
            raise OpenSimFileError(path, s.line, f"unexpected <{s.tag}> in the ScaleSet")
        segment = _xml.child_text(s, "segment")
        if segment is None:
            raise OpenSimFileError(path, s.line, "a <Scale> needs a <segment>")
        factors = _xml.child_floats(s, "scales", path, 3, default=[1.0, 1.0, 1.0], finite=True)
        out.append(ManualScale(segment, factors, _xml.child_bool(s, "apply", path, True)))
    return out


def _model_scaler(elem, folder, path) -> ModelScalerSetup:
    out = ModelScalerSetup(apply=_xml.child_bool(elem, "apply", path, True))
    out.scaling_order = (_xml.child_text(elem, "scaling_order") or "").split()
    for step in out.scaling_order:
        if step not in SCALING_STEPS:
            raise OpenSimFileError(path, _xml.child(elem, "scaling_order").line,
                                   f"unrecognized scaling_order step {step!r} (expected 'measurements' or "
                                   "'manualScale', as OpenSim)")
    measurements = _xml.child(elem, "MeasurementSet")
    if measurements is not None:
        found, where = _inline_or_file(measurements, folder, ("MeasurementSet",), path)
        out.measurements = read_measurement_set(found, where)
    scales = _xml.child(elem, "ScaleSet")
    if scales is not None:
        found, where = _inline_or_file(scales, folder, ("ScaleSet",), path)
        out.scales = read_scale_set(found, where)
    out.marker_file = _file(elem, "marker_file", folder)
    out.time_range = _time_range(elem, path)
    out.preserve_mass_distribution = _xml.child_bool(elem, "preserve_mass_distribution", path, False)
    out.output_model_file = _file(elem, "output_model_file", folder)
    out.output_scale_file = _file(elem, "output_scale_file", folder)
    return out


def _marker_placer(elem, folder, path) -> MarkerPlacerSetup:
    out = MarkerPlacerSetup(apply=_xml.child_bool(elem, "apply", path, True))
    tasks = _xml.child(elem, "IKTaskSet")
    if tasks is not None:
        ref = (tasks.get("file") or "").strip()
        if ref and ref != "Unassigned":
            target = (folder / ref).resolve()
            if not target.is_file():
                raise OpenSimFileError(path, tasks.line, f"the IKTaskSet file {ref!r} does not exist ({target})")
            out.tasks = read_ik_task_set(target)
        else:
            out.tasks = _task_set_from_element(tasks, path)
    out.marker_file = _file(elem, "marker_file", folder)
    out.coordinate_file = _file(elem, "coordinate_file", folder)
    out.time_range = _time_range(elem, path)
    out.max_marker_movement = _xml.child_float(elem, "max_marker_movement", path, -1.0)
    out.output_model_file = _file(elem, "output_model_file", folder)
    out.output_motion_file = _file(elem, "output_motion_file", folder)
    out.output_marker_file = _file(elem, "output_marker_file", folder)
    return out


def read_scale_setup(path) -> ScaleSetup:
    """Read a ScaleTool setup file; see the module docstring."""
    path = Path(path).resolve()
    tool = _root_of(path, ("ScaleTool",))
    folder = path.parent
    setup = ScaleSetup(name=tool.get("name", ""), path=path,
                       mass=_xml.child_float(tool, "mass", path, -1.0),
                       height=_xml.child_float(tool, "height", path, -1.0),
                       age=_xml.child_float(tool, "age", path, -1.0))
    maker = _xml.child(tool, "GenericModelMaker")
    if maker is not None:
        setup.model_file = _file(maker, "model_file", folder)
        setup.marker_set_file = _file(maker, "marker_set_file", folder)
    scaler = _xml.child(tool, "ModelScaler")
    if scaler is not None:
        setup.model_scaler = _model_scaler(scaler, folder, path)
    placer = _xml.child(tool, "MarkerPlacer")
    if placer is not None:
        setup.marker_placer = _marker_placer(placer, folder, path)
    return setup

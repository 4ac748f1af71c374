"""InverseKinematicsTool setup files and IK task sets.

The IK tool solves, frame by frame,

    min_q  sum_i w_i |x_i^exp - x_i(q)|^2  +  sum_j w_j (q_j^exp - q_j)^2

over the unprescribed coordinates q; the marker weights w_i come from IKMarkerTasks and the
coordinate weights w_j (with q_j^exp: the model default, a manual value, or a column of the
coordinate file) from IKCoordinateTasks. A task with apply=false takes no part.

`read_ik_setup` reads the tool's XML (root `InverseKinematicsTool`, or the misspelled
`InverseKinemtaticsTool` of older setups, either alone or inside `OpenSimDocument`; or the `IKTool`
of OpenSim 1.x/2.x setups, whose trial fields (marker_file, coordinate_file, time_range,
output_motion_file) sit in the first `IKTrial` of its `IKTrialSet`). `Unassigned`, the value
OpenSim writes for an empty property, reads as empty (a constraint_weight left Unassigned is
Infinity, as OpenSim's documentation says). Its task set
is inline or in another file (`<IKTaskSet file="tasks.xml"/>`); file names are resolved relative
to the setup file's folder, as OpenSim does. Where an element repeats, the first one counts (as in
OpenSim). Defaults are OpenSim 4.6's: accuracy 1e-5, constraint_weight inf, time_range all time,
report_errors true, report_marker_locations false, results_directory the setup's folder, and
weight 0 for a task that gives none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import warnings
from pathlib import Path

import numpy as np

from . import _xml
from .errors import OpenSimFileError, OpenSimFileWarning

TOOL_TAGS = ("InverseKinematicsTool", "InverseKinemtaticsTool", "IKTool")
TRIAL_FIELDS = ("marker_file", "coordinate_file", "time_range", "output_motion_file")
UNASSIGNED = "Unassigned"
VALUE_TYPES = ("default_value", "manual_value", "from_file")


@dataclass
class IKMarkerTask:
    """Track the experimental marker of the same name with weight `weight` when `apply`."""

    name: str
    apply: bool = True
    weight: float = 0.0


@dataclass
class IKCoordinateTask:
    """Pull coordinate `name` towards a target with weight `weight` when `apply`. The target is the
    model's default value (value_type 'default_value'), `value` ('manual_value'), or the
    coordinate file's column of that name ('from_file')."""

    name: str
    apply: bool = True
    weight: float = 0.0
    value_type: str = "default_value"
    value: float = 0.0


@dataclass
class IKTaskSet:
    name: str = ""
    marker_tasks: list = field(default_factory=list)
    coordinate_tasks: list = field(default_factory=list)
    path: Path | None = None

    def marker_weights(self, applied_only: bool = True) -> dict:
        """{marker name: weight} for the (applied) marker tasks, in file order."""
        return {t.name: t.weight for t in self.marker_tasks if t.apply or not applied_only}

    def coordinate_weights(self, applied_only: bool = True) -> dict:
        """{coordinate name: weight} for the (applied) coordinate tasks, in file order."""
        return {t.name: t.weight for t in self.coordinate_tasks if t.apply or not applied_only}

    def __len__(self) -> int:
        return len(self.marker_tasks) + len(self.coordinate_tasks)


@dataclass
class IKSetup:
    """An InverseKinematicsTool setup. File fields are absolute paths (None when empty)."""

    name: str = ""
    model_file: Path | None = None
    marker_file: Path | None = None
    coordinate_file: Path | None = None
    output_motion_file: Path | None = None
    results_directory: Path | None = None
    time_range: tuple = (-np.inf, np.inf)
    accuracy: float = 1e-5
    constraint_weight: float = np.inf
    report_errors: bool = True
    report_marker_locations: bool = False
    tasks: IKTaskSet = field(default_factory=IKTaskSet)
    path: Path | None = None


def _weight(elem, path) -> float:
    w = _xml.child_float(elem, "weight", path, 0.0)
    if not np.isfinite(w) or w < 0:
        raise OpenSimFileError(path, _xml.child(elem, "weight").line, f"weight must be finite and >= 0, got {w}")
    return w


def _task_set_from_element(elem, path) -> IKTaskSet:
    tasks = IKTaskSet(name=elem.get("name", ""), path=path)
    objects = _xml.child(elem, "objects")
    seen = {}
    for item in ([] if objects is None else objects):
        tag = item.tag
        name = item.get("name")
        if tag not in ("IKMarkerTask", "IKCoordinateTask"):
            raise OpenSimFileError(path, item.line, f"unknown task type <{tag}> (expected IKMarkerTask or IKCoordinateTask)")
        if not name:
            raise OpenSimFileError(path, item.line, f"<{tag}> needs a name attribute")
        if (tag, name) in seen:
            raise OpenSimFileError(path, item.line, f"a second {tag} for {name!r} (the first is on line {seen[tag, name]})")
        seen[tag, name] = item.line
        apply = _xml.child_bool(item, "apply", path, True)
        if tag == "IKMarkerTask":
            tasks.marker_tasks.append(IKMarkerTask(name, apply, _weight(item, path)))
            continue
        value_type = _xml.child_text(item, "value_type") or "default_value"
        if value_type not in VALUE_TYPES:
            raise OpenSimFileError(path, _xml.child(item, "value_type").line,
                                   f"value_type must be one of {', '.join(VALUE_TYPES)}, got {value_type!r}")
        value = _xml.child_float(item, "value", path, 0.0, finite=True)
        tasks.coordinate_tasks.append(IKCoordinateTask(name, apply, _weight(item, path), value_type, value))
    return tasks


def _find(root, tags):
    """`root` itself or its first child with one of `tags` (an OpenSimDocument wrapper)."""
    if root.tag in tags:
        return root
    if root.tag == "OpenSimDocument":
        found = _xml.child(root, *tags)
        if found is not None:
            return found
    return None


def read_ik_task_set(path) -> IKTaskSet:
    """Read an IKTaskSet file (root IKTaskSet, or IKTaskSet inside OpenSimDocument)."""
    path = Path(path).resolve()
    root = _xml.parse(path)
    elem = _find(root, ("IKTaskSet",))
    if elem is None:
        raise OpenSimFileError(path, root.line, f"expected an <IKTaskSet>, found <{root.tag}>")
    return _task_set_from_element(elem, path)


def read_ik_setup(path) -> IKSetup:
    """Read an InverseKinematicsTool setup file; see the module docstring."""
    path = Path(path).resolve()
    root = _xml.parse(path)
    tool = _find(root, TOOL_TAGS)
    if tool is None:
        raise OpenSimFileError(path, root.line, f"expected <InverseKinematicsTool>, found <{root.tag}>")
    _clear_unassigned(tool)
    folder = path.parent
    trial = _first_trial(tool, path)

    def field_of(tag):
        """The trial's element for a trial field (OpenSim 1.x/2.x), else the tool's."""
        if trial is not None and tag in TRIAL_FIELDS and _xml.child_text(trial, tag) is not None:
            return trial
        return tool

    def file(tag):
        text = _xml.child_text(field_of(tag), tag)
        return None if text is None else (folder / text).resolve()

    setup = IKSetup(name=tool.get("name", ""), path=path)
    setup.model_file = file("model_file")
    setup.marker_file = file("marker_file")
    setup.coordinate_file = file("coordinate_file")
    setup.output_motion_file = file("output_motion_file")
    setup.results_directory = file("results_directory") or folder
    time_range = _xml.child_floats(field_of("time_range"), "time_range", path, 2)
    if time_range is not None:
        if not time_range[0] <= time_range[1]:
            raise OpenSimFileError(path, _xml.child(field_of("time_range"), "time_range").line,
                                   f"time_range starts after it ends: {time_range[0]} > {time_range[1]}")
        setup.time_range = (float(time_range[0]), float(time_range[1]))
    setup.accuracy = _xml.child_float(tool, "accuracy", path, 1e-5, finite=True)
    if not setup.accuracy > 0:
        raise OpenSimFileError(path, _xml.child(tool, "accuracy").line, f"accuracy must be > 0, got {setup.accuracy}")
    setup.constraint_weight = _xml.child_float(tool, "constraint_weight", path, np.inf)
    if not setup.constraint_weight >= 0:
        raise OpenSimFileError(path, _xml.child(tool, "constraint_weight").line,
                               f"constraint_weight must be >= 0, got {setup.constraint_weight}")
    setup.report_errors = _xml.child_bool(tool, "report_errors", path, True)
    setup.report_marker_locations = _xml.child_bool(tool, "report_marker_locations", path, False)

    task_elem = _xml.child(tool, "IKTaskSet")
    if task_elem is not None:
        ref = (task_elem.get("file") or "").strip()
        if ref and ref != UNASSIGNED:
            task_path = (folder / ref).resolve()
            try:
                found = task_path.is_file()
            except OSError:                      # e.g. a name too long for the file system
                found = False
            if not found:
                raise OpenSimFileError(path, task_elem.line, f"the IKTaskSet file {ref!r} does not exist ({task_path})")
            setup.tasks = read_ik_task_set(task_path)
        else:
            setup.tasks = _task_set_from_element(task_elem, path)
    return setup


def _clear_unassigned(elem):
    """Empty every element whose text is OpenSim's `Unassigned` (its spelling of an empty value)."""
    for e in elem.iter():
        if e.text is not None and e.text.strip() == UNASSIGNED:
            e.text = ""


def _first_trial(tool, path):
    """The first IKTrial of an OpenSim 1.x/2.x IKTool's IKTrialSet (None for other tools); a
    warning names the trials after it, which are not run."""
    trial_set = _xml.child(tool, "IKTrialSet")
    if trial_set is None:
        return None
    objects = _xml.child(trial_set, "objects")
    trials = [t for t in ([] if objects is None else objects) if t.tag == "IKTrial"]
    if not trials:
        raise OpenSimFileError(path, trial_set.line, "the IKTrialSet holds no <IKTrial>")
    if len(trials) > 1:
        names = ", ".join(repr(t.get("name", "")) for t in trials[1:])
        warnings.warn(f"{path}, line {trials[1].line}: the IKTrialSet holds {len(trials)} trials; only the first "
                      f"({trials[0].get('name', '')!r}) runs, not {names}", OpenSimFileWarning, stacklevel=3)
    return trials[0]

"""Which trials a batch has, what each is called, and which of them need solving.

Trials are files given one by one or found in folders (recursively): `.trc` and `.c3d` marker
files for 'ik', ScaleTool setup files for 'scale' (the `.xml` files whose document is a
ScaleTool: a folder's models, marker sets and task sets are passed over), `.pkl` keypoint files
for 'fly', `.bvh` clips for 'retarget'. A trial's name is its path relative to the folder
it was found in (the file name alone for a file given directly), without suffix; its outputs go
to the output folder under that name, so sub-folders are mirrored. Two trials with one name
(walk.trc beside walk.c3d) are an error: pick one with --pattern.

Resuming. A trial is up to date when all its outputs exist, its JSON report says 'done', and
the oldest output is newer than every file it depends on (the trial's file, the setup template,
the model, the task set, the coordinate file; for 'scale', the setup and every file it names;
for 'retarget', the clip, the rig's .blend and the bone map file). `select` keeps what a run must solve: everything;
with resume, what is not up to date; with only_failed, the trials whose last report says 'failed'.
"""

from __future__ import annotations

import fnmatch
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from .kinds import TrialSpec, output_names

PATTERNS = {"ik": ("*.trc", "*.c3d"), "scale": ("*.xml",), "fly": ("*.pkl",), "retarget": ("*.bvh",)}


def tool_tag(path) -> str | None:
    """The tag of the tool an XML setup file holds (alone or in an OpenSimDocument), e.g.
    "ScaleTool"; None for anything else (not XML, unreadable, another root)."""
    try:
        for _, elem in ET.iterparse(path, events=("start",)):
            if elem.tag != "OpenSimDocument":
                return elem.tag
    except (ET.ParseError, OSError, UnicodeDecodeError):
        return None
    return None


def is_scale_setup(path) -> bool:
    """Whether the XML file at `path` is a ScaleTool setup (alone or in an OpenSimDocument)."""
    return tool_tag(path) == "ScaleTool"


def find_trials(kind: str, sources, patterns=None) -> list:
    """[(name, path)] of the trial files in `sources` (files or folders), sorted by name."""
    patterns = tuple(patterns or PATTERNS[kind])
    found = {}
    for source in sources:
        source = Path(source)
        if source.is_dir():
            files = sorted(p for p in source.rglob("*") if p.is_file()
                           and any(fnmatch.fnmatch(p.name.lower(), pat.lower()) for pat in patterns)
                           and (kind != "scale" or is_scale_setup(p)))
            pairs = [(p.relative_to(source).with_suffix("").as_posix(), p) for p in files]
        elif source.is_file():
            pairs = [(source.stem, source)]
        else:
            raise FileNotFoundError(f"no such trial file or folder: {source}")
        for name, path in pairs:
            if name in found and found[name] != path.resolve():
                raise ValueError(f"two trials would write the same outputs {name!r}: {found[name]} and {path} "
                                 "(choose one with --pattern, e.g. --pattern '*.c3d')")
            found[name] = path.resolve()
    return sorted(found.items())


# ----------------------------------------------------------------------------------- marker IK

def trial_setup_xml(template, marker_file, name: str, keep_time_range: bool = False) -> str:
    """The setup for one trial: the template's model, tasks, accuracy and coordinate file (paths
    made absolute), `marker_file`, tool name and motion file from `name`, results written beside
    the setup, marker errors reported, marker locations not. The time range is the template's
    with keep_time_range, else the whole trial."""
    from ..opensim import read_ik_setup
    from ..opensim.setup import TOOL_TAGS
    setup = read_ik_setup(template)
    root = ET.parse(setup.path).getroot()
    tool = root if root.tag in TOOL_TAGS else next(e for e in root.iter() if e.tag in TOOL_TAGS)
    tool.tag = "InverseKinematicsTool"
    tool.set("name", name)

    def put(tag, text):
        for old in tool.findall(tag):
            tool.remove(old)
        if text is not None:
            ET.SubElement(tool, tag).text = str(text)

    if setup.model_file is None:
        raise ValueError(f"{setup.path}: the setup names no model_file (a batch needs one model for all trials)")
    put("model_file", setup.model_file)
    put("marker_file", Path(marker_file).resolve())
    put("coordinate_file", setup.coordinate_file)
    put("output_motion_file", f"{name}.mot")
    put("results_directory", ".")
    put("report_errors", "true")
    put("report_marker_locations", "false")
    if not keep_time_range:
        put("time_range", None)
    for holder in tool.findall("IKTaskSet"):
        if (holder.get("file") or "").strip():
            holder.set("file", str(setup.tasks.path))
    if root.tag == "OpenSimDocument" and not root.get("Version"):
        root.set("Version", "40000")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def ik_specs(template, trials, keep_time_range: bool = False, warm_start: str = "previous") -> list:
    from ..opensim import read_ik_setup
    setup = read_ik_setup(template)
    shared = [setup.path, setup.model_file, setup.tasks.path, setup.coordinate_file]
    depends = tuple(str(p) for p in shared if p is not None)
    return [TrialSpec("ik", name, str(path), (str(path),) + depends,
                      {"setup_xml": trial_setup_xml(template, path, name.rsplit("/", 1)[-1], keep_time_range),
                       "warm_start": warm_start})
            for name, path in trials]


# ---------------------------------------------------------------------------------------- scale

def scale_inputs(setup) -> list:
    """Every file a ScaleTool setup's outputs depend on: the setup, the files it names (model,
    marker set, trials, coordinate file) and the sets it keeps in other files (`file="..."`)."""
    from ..opensim import read_scale_setup
    s = read_scale_setup(setup)
    files = [s.path, s.model_file, s.marker_set_file]
    if s.model_scaler is not None:
        files.append(s.model_scaler.marker_file)
    if s.marker_placer is not None:
        files += [s.marker_placer.marker_file, s.marker_placer.coordinate_file]
    for elem in ET.parse(s.path).getroot().iter():
        ref = (elem.get("file") or "").strip()
        if ref and ref != "Unassigned":
            files.append((s.folder / ref).resolve())
    return list(dict.fromkeys(str(f) for f in files if f is not None))


def scale_outputs(setup) -> list:
    """The roles of the files a scale trial writes (kinds.SCALE_OUTPUTS), from its setup."""
    from ..opensim import read_scale_setup
    s = read_scale_setup(setup)
    roles = ["scaled_model"]
    if s.model_scaler is not None and s.model_scaler.apply:
        roles.append("scale_set")
    if s.marker_placer is not None and s.marker_placer.apply:
        roles += ["placed_model", "static_motion", "marker_set"]
    return roles


def scale_specs(trials) -> list:
    """One 'scale' trial per ScaleTool setup of `trials` ([(name, path)], find_trials('scale', ...));
    a setup that cannot be read is planned as the setup alone, and fails in its worker with the
    reason, as a bad trial does."""
    specs = []
    for name, path in trials:
        try:
            depends, outputs = tuple(scale_inputs(path)), scale_outputs(path)
        except Exception:                                     # reported by the trial itself when it runs
            depends, outputs = (str(path),), ["scaled_model"]
        specs.append(TrialSpec("scale", name, str(path), depends, {"outputs": outputs}))
    return specs


def fly_specs(trials, rate: float = 100.0, method: str = "sequential") -> list:
    return [TrialSpec("fly", name, str(path), (str(path),), {"rate": rate, "method": method})
            for name, path in trials]


def retarget_specs(rig_file, trials, *, python=None, rig=None, scale: float = 1.0, calibration_frame=None,
                   bone_map=None) -> list:
    """One 'retarget' trial per clip of `trials` onto the rig in `rig_file` (kinds.py); `python`
    the Python with bpy (default: this one). ValueError where the rig file, the bone map or a
    Python with bpy is missing, or the scale is not positive."""
    from .blender import blender_python
    rig_file = Path(rig_file).resolve()
    if not rig_file.is_file():
        raise ValueError(f"no such rig file: {rig_file}")
    if not (scale > 0):
        raise ValueError(f"--scale must be positive, not {scale}")
    depends = (str(rig_file),)
    if bone_map is not None:
        bone_map = Path(bone_map).resolve()
        if not bone_map.is_file():
            raise ValueError(f"no such bone map file: {bone_map}")
        depends += (str(bone_map),)
        bone_map = str(bone_map)
    options = {"rig_file": str(rig_file), "python": blender_python(python), "rig": rig, "scale": float(scale),
               "calibration_frame": calibration_frame, "bone_map": bone_map}
    return [TrialSpec("retarget", name, str(path), (str(path),) + depends, dict(options)) for name, path in trials]


# --------------------------------------------------------------------------------- what to run

def last_report(spec: TrialSpec, out_dir) -> dict | None:
    path = Path(out_dir) / f"{spec.name}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def up_to_date(spec: TrialSpec, out_dir) -> bool:
    """All outputs there, the report says done, and every output newer than every input."""
    report = last_report(spec, out_dir)
    if report is None or report.get("status") != "done":
        return False
    try:
        oldest_output = min((Path(out_dir) / n).stat().st_mtime_ns for n in output_names(spec))
        newest_input = max(Path(p).stat().st_mtime_ns for p in spec.depends)
    except (OSError, ValueError):
        return False
    return oldest_output > newest_input


def select(specs, out_dir, resume: bool = False, only_failed: bool = False) -> tuple:
    """(to solve, skipped) lists of specs (module docstring)."""
    run, skip = [], []
    for spec in specs:
        if only_failed:
            report = last_report(spec, out_dir)
            wanted = report is not None and report.get("status") == "failed"
        else:
            wanted = not (resume and up_to_date(spec, out_dir))
        (run if wanted else skip).append(spec)
    return run, skip

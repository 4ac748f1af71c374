"""Which trials a batch has, what each is called, and which of them need solving.

Trials are files given one by one or found in folders (recursively): `.trc` and `.c3d` marker
files for 'ik', `.pkl` keypoint files for 'fly'. A trial's name is its path relative to the folder
it was found in (the file name alone for a file given directly), without suffix; its outputs go
to the output folder under that name, so sub-folders are mirrored. Two trials with one name
(walk.trc beside walk.c3d) are an error: pick one with --pattern.

Resuming. A trial is up to date when all its outputs exist, its JSON report says 'done', and
the oldest output is newer than every file it depends on (the trial's file, the setup template,
the model, the task set, the coordinate file). `select` keeps what a run must solve: everything;
with resume, what is not up to date; with only_failed, the trials whose last report says 'failed'.
"""

from __future__ import annotations

import fnmatch
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from .kinds import TrialSpec, output_names

PATTERNS = {"ik": ("*.trc", "*.c3d"), "fly": ("*.pkl",)}


def find_trials(kind: str, sources, patterns=None) -> list:
    """[(name, path)] of the trial files in `sources` (files or folders), sorted by name."""
    patterns = tuple(patterns or PATTERNS[kind])
    found = {}
    for source in sources:
        source = Path(source)
        if source.is_dir():
            files = sorted(p for p in source.rglob("*") if p.is_file()
                           and any(fnmatch.fnmatch(p.name.lower(), pat.lower()) for pat in patterns))
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


def fly_specs(trials, rate: float = 100.0, method: str = "sequential") -> list:
    return [TrialSpec("fly", name, str(path), (str(path),), {"rate": rate, "method": method})
            for name, path in trials]


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

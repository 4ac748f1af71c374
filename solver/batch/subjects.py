"""Scale then IK, per subject: `python -m solver batch subjects FOLDERS... [--ik-setup TEMPLATE]`.

A subject is a folder holding one ScaleTool setup (the folders given are searched for them); its
trials are the .trc/.c3d files in that folder and below, except the static trials its setup
names. Two waves on one cluster:

1. 'scale' on every subject's setup (kinds.py), outputs under `<subject>/`, summary
   `scale_summary.csv`;
2. 'ik' on every trial of each subject scaled: the subject's IK template is its folder's own
   InverseKinematicsTool setup (one .xml whose document is one), else the `--ik-setup` given,
   with `model_file` set to the subject's marker-placed model (its scaled model where the setup
   places no markers); it is written as `<subject>/<subject>_ik_template.xml` (rewritten only
   when it changes, so that resuming sees IK outputs newer than it). Outputs
   `<subject>/<trial>...` as `batch ik` writes them, summary `batch_summary.csv`. The trials of a
   subject whose scaling failed are not run and are listed as such.

Resuming, failures and progress are each wave's, as in runner.py.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ..opensim.setup import TOOL_TAGS
from .kinds import SCALE_OUTPUTS
from .plan import find_trials, ik_specs, last_report, scale_specs, tool_tag
from .runner import BatchResult, local_cluster, run_batch

SCALE_SUMMARY = "scale_summary.csv"


@dataclass
class Subject:
    name: str                        # output sub-folder, posix
    setup: Path                      # its ScaleTool setup
    trials: list = field(default_factory=list)      # [(output name, path)] of its IK trials
    ik_template: Path | None = None  # the IK setup the subject's trials start from


def is_ik_setup(path) -> bool:
    """Whether the XML file at `path` is an InverseKinematicsTool setup (any version's tag)."""
    return tool_tag(path) in TOOL_TAGS


def find_subjects(sources, ik_setup=None, patterns=None) -> list:
    """The subjects under `sources` (module docstring), sorted by name."""
    from ..opensim import read_scale_setup
    subjects = []
    for source in sources:
        source = Path(source).resolve()
        for name, setup in find_trials("scale", [source]):
            folder = setup.parent
            subject = folder.relative_to(source).as_posix() if source.is_dir() else folder.name
            subject = folder.name if subject == "." else subject
            s = read_scale_setup(setup)
            static = {p.resolve() for p in (s.model_scaler and s.model_scaler.marker_file,
                                            s.marker_placer and s.marker_placer.marker_file) if p}
            trials = [(f"{subject}/{n}", p) for n, p in find_trials("ik", [folder], patterns) if p not in static]
            own = sorted(p for p in folder.glob("*.xml") if is_ik_setup(p))
            template = own[0] if len(own) == 1 else (Path(ik_setup).resolve() if ik_setup else None)
            if template is None:
                raise ValueError(f"subject {subject}: no InverseKinematicsTool setup in {folder} "
                                 "(or more than one) and no --ik-setup given")
            subjects.append(Subject(subject, setup, trials, template))
    names = [s.name for s in subjects]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"more than one ScaleTool setup in the subject folder(s) {twice}: one subject a folder")
    return sorted(subjects, key=lambda s: s.name)


def scale_name(subject: Subject) -> str:
    return f"{subject.name}/{subject.setup.stem}"


def subject_template(subject: Subject, model: Path, out_dir: Path) -> Path:
    """The subject's IK template with `model` as its model_file, written when it changed."""
    tree = ET.parse(subject.ik_template)
    root = tree.getroot()
    tool = next(e for e in root.iter() if e.tag in TOOL_TAGS)
    folder = subject.ik_template.parent
    for elem in tool.iter():                           # the template's other files, from its own folder
        if elem.tag in ("marker_file", "coordinate_file") and (elem.text or "").strip() not in ("", "Unassigned"):
            elem.text = str((folder / elem.text.strip()).resolve())
        ref = (elem.get("file") or "").strip()
        if ref and ref != "Unassigned":
            elem.set("file", str((folder / ref).resolve()))
    for old in tool.findall("model_file"):
        tool.remove(old)
    ET.SubElement(tool, "model_file").text = str(model)
    ET.indent(root)
    text = '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
    path = out_dir / subject.name / f"{Path(subject.name).name}_ik_template.xml"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def run_subjects(subjects, out_dir, *, scheduler=None, workers=None, client=None, resume=False,
                 only_failed=False, time_limit=None, progress=True, stream=None, warm_start="previous") -> tuple:
    """Both waves (module docstring): (scale BatchResult, IK BatchResult, {subject: why its
    trials were not run})."""
    from distributed import Client
    out_dir = Path(out_dir)
    cluster = own = None
    try:
        if client is None:
            if scheduler is None:
                cluster = local_cluster(workers)
                own = client = Client(cluster)
            else:
                own = client = Client(scheduler)
        options = dict(client=client, resume=resume, only_failed=only_failed, time_limit=time_limit,
                       progress=progress, stream=stream)
        specs = scale_specs([(scale_name(s), s.setup) for s in subjects])
        scaled = run_batch(specs, out_dir, summary=SCALE_SUMMARY, **options)
        if scaled.interrupted:
            return scaled, BatchResult(out_dir, interrupted=True), {}
        ik, skipped = [], {}
        for subject, spec in zip(subjects, specs):
            report = last_report(spec, out_dir) or {}
            if report.get("status") != "done":
                skipped[subject.name] = f"its scaling failed: {report.get('message', 'not run')}"
                continue
            role = "placed_model" if "placed_model" in spec.options["outputs"] else "scaled_model"
            model = (out_dir / f"{spec.name}{SCALE_OUTPUTS[role]}").resolve()
            template = subject_template(subject, model, out_dir)
            ik += ik_specs(template, subject.trials, warm_start=warm_start)
        solved = run_batch(ik, out_dir, **options)
        return scaled, solved, skipped
    finally:
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()

"""OpenSim's ScaleTool run from its setup file: `python -m solver scale SETUP.xml [--output-dir DIR]`.

The steps are OpenSim's (ScaleTool::run):

1. GenericModelMaker: read the generic model, put the marker set file's markers on it
   (model_document.update_markers), name the model after the tool.
2. ModelScaler (when present and applied): scale factors from the static trial and the manual
   scales in `scaling_order` (scaling.scale_factors), the model scaled by them
   (scaling.apply_scale, to the subject's mass); writes output_model_file and output_scale_file.
3. MarkerPlacer (when present and applied): the static pose and the markers moved onto the trial
   (marker_placer.place_markers); writes output_model_file, output_motion_file (the static pose,
   rotations in degrees, as the IK tool's .mot) and output_marker_file (the model's MarkerSet).

Where OpenSim is silent, the run says what it did: the markers of the model that the trial lacks
and the reverse, measurements left out, the static pose's marker errors with the fixed markers
apart from the moved ones, what the model scaler does not scale. A MarkerPlacer with apply false
makes OpenSim 4.6's ScaleTool::run return false without a message (MarkerPlacer::processModel
returns false first thing), after the model scaler's files are written; here the run succeeds
with the scaled model and a note says so.
"""

from __future__ import annotations

import sys
import time as _time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import OpenSimFileError
from .ik import write_motion
from .marker_file import read_trial
from .marker_placer import PLACER_ACCURACY, Placement, place_markers
from .model_document import ModelDocument, read_marker_set
from .scale_setup import ScaleSetup, read_scale_setup
from .scaling import ScaleFactors, apply_scale, scale_factors, write_scale_set
from .storage import read_storage


@dataclass
class ScaleRun:
    """What `run_scale_setup` did: the setup, the factors (None when the scaler did not run), the
    scaled model and the marker-placed one (documents; None when that step did not run), the
    placement, the files written by kind, the markers only in the model / only in the trial, and
    notes."""

    setup: ScaleSetup
    factors: ScaleFactors | None
    scaled: ModelDocument
    placed: ModelDocument | None = None
    placement: Placement | None = None
    files: dict = field(default_factory=dict)
    model_only_markers: list = field(default_factory=list)
    trial_only_markers: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    seconds: float = 0.0


def _target(path: Path | None, output_dir) -> Path | None:
    if path is None:
        return None
    return path if output_dir is None else Path(output_dir) / path.name


def run_scale_setup(path, output_dir=None, write: bool = True, accuracy: float = PLACER_ACCURACY,
                    model_file=None, marker_file=None) -> ScaleRun:
    """Run a ScaleTool setup file (module docstring). `output_dir` puts every output there
    (file names kept); `write` False writes nothing. `model_file` replaces the generic model and
    `marker_file` the static trial of the model scaler and the marker placer (as a user picking
    another subject's trial for the same setup)."""
    started = _time.perf_counter()
    setup = read_scale_setup(path)
    if model_file is not None:
        setup.model_file = Path(model_file).resolve()
    if marker_file is not None:
        for part in (setup.model_scaler, setup.marker_placer):
            if part is not None:
                part.marker_file = Path(marker_file).resolve()
    if setup.model_file is None:
        raise OpenSimFileError(setup.path, None, "the setup names no model_file (GenericModelMaker)")
    doc = ModelDocument.read(setup.model_file)
    if setup.marker_set_file is not None:
        doc.update_markers(read_marker_set(setup.marker_set_file))
    doc.set_name(setup.name)
    run = ScaleRun(setup, None, doc)
    trials = {}

    def trial_of(marker_file):
        if marker_file not in trials:
            trials[marker_file] = read_trial(marker_file)
        return trials[marker_file]

    scaler = setup.model_scaler
    if scaler is not None and scaler.apply:
        trial = trial_of(scaler.marker_file) if scaler.marker_file is not None else None
        run.factors = scale_factors(doc, scaler, trial)
        run.notes += run.factors.warnings
        run.notes += apply_scale(doc, run.factors.as_dict(), scaler.preserve_mass_distribution, setup.mass)
        if write and _target(scaler.output_model_file, output_dir):
            run.files["scaled_model"] = doc.write(_target(scaler.output_model_file, output_dir))
        if write and _target(scaler.output_scale_file, output_dir):
            run.files["scale_set"] = _target(scaler.output_scale_file, output_dir)
            write_scale_set(run.files["scale_set"], run.factors)
    else:
        run.notes.append("no ModelScaler applied: the model is not scaled")
    placer = setup.marker_placer
    if placer is not None and not placer.apply:
        run.notes.append("MarkerPlacer apply is false: markers not placed (OpenSim 4.6's ScaleTool.run() returns "
                         "false here without a message, after writing the model scaler's files)")
    elif placer is not None:
        if placer.marker_file is None:
            raise OpenSimFileError(setup.path, None, "the MarkerPlacer names no marker_file")
        trial = trial_of(placer.marker_file)
        coordinates = read_storage(placer.coordinate_file) if placer.coordinate_file is not None else None
        placed = doc.copy()
        run.placement = place_markers(placed, placer, trial, coordinates, accuracy)
        run.placed = placed
        run.notes += run.placement.warnings
        if write and _target(placer.output_model_file, output_dir):
            run.files["placed_model"] = placed.write(_target(placer.output_model_file, output_dir))
        if write and _target(placer.output_motion_file, output_dir):
            run.files["static_motion"] = _target(placer.output_motion_file, output_dir)
            run.files["static_motion"].parent.mkdir(parents=True, exist_ok=True)
            write_motion(run.files["static_motion"], run.placement.ik, name="static pose")
        if write and _target(placer.output_marker_file, output_dir):
            run.files["marker_set"] = placed.write_marker_set(_target(placer.output_marker_file, output_dir))
    model_markers = [m.get("name") for m in doc.marker_elements()]
    trial_file = (placer.marker_file if placer is not None and placer.apply and placer.marker_file is not None
                  else scaler.marker_file if scaler is not None else None)
    if trial_file is not None:
        names = trial_of(trial_file).names
        run.model_only_markers = [n for n in model_markers if n not in names]
        run.trial_only_markers = [n for n in names if n not in model_markers]
    run.seconds = _time.perf_counter() - started
    return run


def summary_lines(run: ScaleRun) -> list:
    """What `python -m solver scale` prints."""
    setup = run.setup
    lines = [f"{setup.name or setup.path.name}: subject mass {setup.mass:g} kg, model {setup.model_file}"]
    if run.factors is not None:
        for m in run.factors.measured:
            if np.isfinite(m.factor):
                pairs = ", ".join(f"{a}-{b} {e:.4f}/{d:.4f} m" for (a, b), d, e in zip(m.pairs, m.model, m.experimental))
                lines.append(f"measurement {m.name}: factor {m.factor:.6f} ({pairs})")
            else:
                lines.append(f"measurement {m.name}: not used ({m.reason})")
        bodies = run.scaled.body_names()
        scales = run.factors.as_dict()
        lines.append("scale factors: " + ", ".join(f"{b} " + " ".join(f"{v:.4f}" for v in scales[b])
                                                   if len(set(scales[b])) > 1 else f"{b} {scales[b][0]:.4f}"
                                                   for b in bodies))
    p = run.placement
    if p is not None:
        r = p.ik
        lines.append(f"static pose at t = {p.time:g} s: marker error RMS {r.marker_error_rms[0]:.4g} m, max "
                     f"{r.marker_error_max[0]:.4g} m ({r.worst_marker[0]})")
        if p.fixed_errors:
            worst = max(p.fixed_errors, key=p.fixed_errors.get)
            lines.append(f"fixed (anatomical) markers, kept: {len(p.fixed_errors)}, error RMS "
                         f"{np.sqrt(np.mean(np.square(list(p.fixed_errors.values())))):.4g} m, max "
                         f"{p.fixed_errors[worst]:.4g} m ({worst})")
        if p.moved_errors:
            worst = max(p.moved_errors, key=p.moved_errors.get)
            lines.append(f"moved (tracking) markers: {len(p.moved_errors)}, moved by RMS "
                         f"{np.sqrt(np.mean(np.square(list(p.moved_errors.values())))):.4g} m, max "
                         f"{p.moved_errors[worst]:.4g} m ({worst}); 0 after placement")
        if p.deleted_markers:
            lines.append("model markers deleted (not in the static trial): " + ", ".join(p.deleted_markers))
    if run.model_only_markers and (p is None or not p.deleted_markers):
        lines.append("model markers not in the trial: " + ", ".join(run.model_only_markers))
    if run.trial_only_markers:
        lines.append("trial markers not in the model (ignored): " + ", ".join(run.trial_only_markers))
    lines += [f"note: {note}" for note in run.notes]
    lines.append(f"done in {run.seconds:.3f} s")
    lines += [f"wrote {path}" for path in run.files.values()]
    return lines


def cli(setup_path, output_dir=None, out=None) -> int:
    """`python -m solver scale SETUP.xml [--output-dir DIR]`; returns the exit status (1 when the
    inputs are unusable)."""
    out = out or sys.stdout
    try:
        run = run_scale_setup(setup_path, output_dir)
    except (OpenSimFileError, KeyError, ValueError, OSError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {message}", file=sys.stderr)
        return 1
    print("\n".join(summary_lines(run)), file=out)
    return 0

"""Scale an imported OpenSim model in Blender: OpenSim's Scale tool (solver.opensim.run_scale_setup)
on the model armature, from a ScaleTool setup and a static trial (.trc or .c3d).

The setup gives the measurements, manual scales, marker set, the marker placer's task set and the
subject's mass; its generic model is the armature's own .osim and its static trial the one picked
(the setup's own when none is). The marker-placed model (the scaled one when the setup places no
markers) is written as `<model>_scaled.osim` (in `output_dir`: by default the .blend file's folder,
or the system's temporary folder for an unsaved file) and the armature is rebuilt from it in place
(`importing.rebuild_model`): bones at the scaled bodies in the static pose, model markers where
the placer put them; the trial bound to it and the solve settings stay, the last solution is
dropped (it was for the generic model).

The per-marker report (`report_items`) is kept on the armature (`itasc_opensim.scale_markers`)
for the panel: every marker with its kind and error at the static pose, metres: 'FIXED'
(anatomical: kept, its error stays), 'MOVED' (tracking: moved onto the trial by that distance),
'MODEL_ONLY' (in the model, not in the trial: deleted by the placer, or not measured) and
'TRIAL_ONLY' (in the trial, not in the model: ignored), with NaN where nothing was measured.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import bpy
import numpy as np

from ...solver.opensim import run_scale_setup
from ...solver.opensim.scale_tool import ScaleRun, summary_lines
from ..rig import RigError
from . import importing


def report_items(run: ScaleRun) -> list:
    """[(marker, kind, error in metres)] of a run (module docstring), worst first within a kind."""
    p = run.placement
    items = []
    if p is not None:
        items += sorted((("FIXED", n, e) for n, e in p.fixed_errors.items()), key=lambda t: -t[2])
        items += sorted((("MOVED", n, e) for n, e in p.moved_errors.items()), key=lambda t: -t[2])
        items += [("MODEL_ONLY", n, np.nan) for n in p.deleted_markers]
    listed = {n for _, n, _ in items}
    items += [("MODEL_ONLY", n, np.nan) for n in run.model_only_markers if n not in listed]
    items += [("TRIAL_ONLY", n, np.nan) for n in run.trial_only_markers]
    return [(n, kind, float(e)) for kind, n, e in items]


def default_output_dir() -> Path:
    return Path(bpy.path.abspath("//")) if bpy.data.filepath else Path(tempfile.gettempdir())


def scale_model(context, obj, setup, static=None, output_dir=None) -> ScaleRun:
    """Scale the model armature `obj` (module docstring); returns the run."""
    settings = obj.itasc_opensim
    if not settings.source:
        raise RigError(f"'{obj.name}' records no .osim file")
    setup = Path(bpy.path.abspath(str(setup))).resolve()
    static = Path(bpy.path.abspath(str(static))).resolve() if static else None
    run = run_scale_setup(setup, write=False, model_file=bpy.path.abspath(settings.source), marker_file=static)
    model = run.placed if run.placed is not None else run.scaled
    folder = Path(output_dir) if output_dir else default_output_dir()
    path = model.write(folder / f"{Path(bpy.path.abspath(settings.source)).stem}_scaled.osim")
    importing.rebuild_model(context, obj, path)
    settings.has_result = False
    settings.result_message = ""
    settings.scale_markers.clear()
    for name, kind, error in report_items(run):
        item = settings.scale_markers.add()
        item.marker, item.kind, item.error = name, kind, error
    r = run.placement.ik if run.placement is not None else None
    settings.scale_rms = float(r.marker_error_rms[0]) if r is not None else float("nan")
    settings.scale_summary = "\n".join(summary_lines(run))
    settings.scaled_from = str(setup)
    return run

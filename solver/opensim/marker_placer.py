"""OpenSim's MarkerPlacer: the static pose by marker IK, then the model's markers moved onto the trial.

1. The static trial is averaged over the time range (clamped to the trial's times), twice as
   OpenSim does: for the IK, the mean of the rows with start <= t <= end (a marker missing in any
   of them is missing); for moving markers, the mean over the frames of
   MarkerData::findFrameRange (scaling.frame_span) of each marker's present samples.
2. Model markers that are not in the trial are deleted from the model (Model::deleteUnusedMarkers).
3. The static pose q* solves the marker IK of ik.py on the averaged frame, with the placer's
   IKTaskSet (marker weights, coordinate tasks):

       q* = argmin_q  sum_i w_i |x_i - p_i(q)|^2 / sum_i w_i  +  sum_j w_j (q_j^ref - q_j)^2.

4. Every marker that is not `fixed` and present in the averaged trial gets the location
   l = X_F(q*)^-1 x in its frame F (its body, or an offset frame on it): at q* it sits on the
   measured marker. `fixed` (anatomical) markers keep theirs; their error |x - p(q*)| stays.
5. The coordinates' default values become q* (OpenSim 4.6 keeps the generic model's defaults and
   writes q* only to the static motion; here the placed model opens in the static pose).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from .errors import OpenSimFileWarning
from .ik import IKResult, MarkerIK
from .model_document import ModelDocument
from .scale_setup import MarkerPlacerSetup
from .scaling import frame_span
from .trc import UNIT_SCALE, MarkerData

PLACER_ACCURACY = 1e-9


@dataclass
class Placement:
    """What the marker placer did: the static pose `q` (n,), the IK result on the averaged frame,
    the markers deleted from the model (not in the trial) and the trial markers the model lacks,
    and per model marker its error at the static pose before moving (metres), split into the
    fixed markers (which keep it) and the moved ones (which end on their experimental marker)."""

    q: np.ndarray
    coordinate_names: list
    ik: IKResult
    time: float
    deleted_markers: list = field(default_factory=list)
    trial_only_markers: list = field(default_factory=list)
    fixed_errors: dict = field(default_factory=dict)
    moved_errors: dict = field(default_factory=dict)
    not_moved: list = field(default_factory=list)
    warnings: list = field(default_factory=list)


def averaged_frames(trial, start: float, end: float):
    """(time, IK frame (M, 3), frame the markers move to (M, 3)) of the trial over (start, end)
    clamped to its times (module docstring, step 1)."""
    time = trial.time
    start, end = max(start, time[0]), min(end, time[-1])
    rows = (time >= start) & (time <= end)
    if not rows.any():
        raise ValueError(f"{trial.path or 'the static trial'} has no frame from {start:g} to {end:g} s")
    ik_frame = trial.positions[rows].mean(axis=0)
    first, last = frame_span(time, start, end)
    span = trial.positions[first:last + 1]
    present = np.all(np.isfinite(span), axis=-1)
    counts = present.sum(axis=0)
    total = np.where(present[..., None], span, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        move_frame = np.where(counts[:, None] > 0, total / counts[:, None], np.nan)
    return start, ik_frame, move_frame


def place_markers(doc: ModelDocument, placer: MarkerPlacerSetup, trial, coordinate_data=None,
                  accuracy: float = PLACER_ACCURACY, pose=None) -> Placement:
    """Run the marker placer on the (scaled) model `doc`, editing it in place (module docstring).
    `pose` (n,), radians and metres in model order, replaces step 3's solution (the IK result
    then reports the errors at that pose)."""
    time, ik_frame, move_frame = averaged_frames(trial, *placer.time_range)
    notes = []
    if placer.max_marker_movement > 0:
        first, last = frame_span(trial.time, time, min(placer.time_range[1], trial.time[-1]))
        span = trial.positions[first:last + 1]
        moved = np.nanmax(span, axis=0) - np.nanmin(span, axis=0)                  # (M, 3), metres
        limit = placer.max_marker_movement * UNIT_SCALE.get(str(trial.units).lower(), 1.0)
        for name, extent in zip(trial.names, np.nanmax(moved, axis=1)):
            if extent > limit:
                notes.append(f"marker {name} moves {extent:.4g} m in the static trial (max_marker_movement "
                             f"{limit:.4g} m)")
    model_names = [m.get("name") for m in doc.marker_elements()]
    deleted = doc.delete_markers([n for n in model_names if n not in trial.names])
    trial_only = [n for n in trial.names if n not in model_names]
    om = doc.om()
    data = MarkerData(names=list(trial.names), time=np.array([time]), positions=ik_frame[None],
                      frame_numbers=np.array([1]), data_rate=trial.data_rate, camera_rate=trial.camera_rate,
                      units="m", path=trial.path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", OpenSimFileWarning)
        problem = MarkerIK(om, data, placer.tasks, coordinate_data)
        if pose is None:
            result = problem.solve(accuracy=accuracy, warm_start="none")
        else:
            result = problem.report(np.asarray(pose, dtype=float).reshape(1, -1))
    notes += [str(w.message) for w in caught]
    q = result.q[0]
    names = om.markers.names
    positions = om.marker_positions(q[None])[0]
    frames = doc.marker_frames()
    world = om.body_frames(q[None])[0]
    fixed = {m.name: m.fixed for m in doc.osim().markers}
    fixed_errors, moved_errors, not_moved = {}, {}, []
    for k, name in enumerate(names):
        x = move_frame[trial.names.index(name)]
        error = float(np.linalg.norm(ik_frame[trial.names.index(name)] - positions[k]))
        if fixed[name]:
            fixed_errors[name] = error
            continue
        if not np.all(np.isfinite(x)):
            not_moved.append(name)
            notes.append(f"marker {name} has no valid coordinates in the static trial: not moved")
            continue
        moved_errors[name] = error
        body, X = frames[name]
        F = world[om.segment(body)] @ X
        doc.set_marker_location(name, F[:3, :3].T @ (x - F[:3, 3]))
    doc.set_default_values(dict(zip(om.coordinate_names, q)))
    for note in notes:
        warnings.warn(note, OpenSimFileWarning, stacklevel=2)
    return Placement(q=q, coordinate_names=list(om.coordinate_names), ik=result, time=float(time),
                     deleted_markers=deleted, trial_only_markers=trial_only, fixed_errors=fixed_errors,
                     moved_errors=moved_errors, not_moved=not_moved, warnings=notes)

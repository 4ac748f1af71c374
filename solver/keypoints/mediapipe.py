"""Keypoints in text exports: MediaPipe Pose world landmarks as JSON, and keypoint tables as CSV.

JSON: a list of frames, or an object {"frames": [...], "fps": ...}. A frame is a list of
landmarks, or an object holding that list under one of LANDMARK_KEYS (MediaPipe's own
`pose_world_landmarks`, also as {"landmark": [...]}); an empty or null frame has every landmark
missing. A landmark is {"x", "y", "z", "visibility"?} or [x, y, z, visibility?]; visibility is
the confidence (1 where a landmark has none).

CSV: a header row, then one row per frame; columns <name>_x, <name>_y, <name>_z per keypoint,
optionally <name>_visibility (or _confidence, _score) and a `time` column in seconds (the rate
then follows from it). An empty cell is missing. Other columns (a frame number) are ignored.

Both in metres unless `units` says otherwise. MediaPipe's world landmarks have y pointing down;
a CSV of another set fixes no up direction.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np

from ..opensim.storage import text_lines
from ..opensim.trc import UNIT_SCALE
from .arrays import MEDIAPIPE_UP
from .checks import as_rate, chosen_set, make_trial
from .errors import KeypointFileError

LANDMARK_KEYS = ("pose_world_landmarks", "world_landmarks", "landmarks", "landmark", "keypoints")
RATE_KEYS = ("fps", "rate", "frame_rate")
_COORDINATE = re.compile(r"^(.+)_([xyz])$")
_CONFIDENCE = re.compile(r"^(.+)_(visibility|confidence|score)$")


def _number(path, value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KeypointFileError(path, None, f"{where} is {value!r}, not a number")
    try:
        return float(value)
    except OverflowError:
        raise KeypointFileError(path, None, f"{where} is too large") from None


def _landmarks(path, frame, f: int):
    """The landmark list of frame f (None: all missing)."""
    for _ in range(3):                            # {"pose_world_landmarks": {"landmark": [...]}}
        if not isinstance(frame, dict):
            break
        key = next((k for k in LANDMARK_KEYS if k in frame), None)
        if key is None:
            raise KeypointFileError(path, None, f"frame {f} holds none of {', '.join(LANDMARK_KEYS)}")
        frame = frame[key]
    if frame is None or isinstance(frame, list):
        return frame or None
    raise KeypointFileError(path, None, f"frame {f} is {type(frame).__name__}, not a list of landmarks")


def _landmark(path, point, where: str):
    """(x, y, z, visibility or NaN) of one landmark."""
    if isinstance(point, dict):
        missing = [k for k in "xyz" if k not in point]
        if missing:
            raise KeypointFileError(path, None, f"{where} has no {missing[0]!r}")
        values = [point[k] for k in "xyz"] + [point.get("visibility", np.nan)]
    elif isinstance(point, list) and len(point) in (3, 4):
        values = list(point) + [np.nan] * (4 - len(point))
    else:
        raise KeypointFileError(path, None, f"{where} is neither {{x, y, z}} nor [x, y, z]")
    return [_number(path, v, f"{where}: {'xyzv'[i]}") for i, v in enumerate(values)]


def read_mediapipe_json(path, *, keypoint_set=None, rate=None, units=None, up=None):
    """The KeypointTrial of a MediaPipe JSON export (module docstring)."""
    path = Path(path)
    text = "\n".join(text_lines(path))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KeypointFileError(path, exc.lineno, f"not JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise KeypointFileError(path, None, f"cannot read file as JSON: {exc}") from None
    file_rate = None
    if isinstance(doc, dict):
        file_rate = next((doc[k] for k in RATE_KEYS if k in doc), None)
        if "frames" not in doc:
            raise KeypointFileError(path, None, "a JSON object needs a 'frames' list")
        doc = doc["frames"]
    if not isinstance(doc, list) or not doc:
        raise KeypointFileError(path, None, "no frames: expected a non-empty list of frames")
    frames = [_landmarks(path, frame, f) for f, frame in enumerate(doc)]
    counts = {len(lm) for lm in frames if lm is not None}
    if len(counts) > 1:
        raise KeypointFileError(path, None, f"frames hold different numbers of landmarks: {sorted(counts)[:5]}")
    if not counts:
        raise KeypointFileError(path, None, "every frame is empty")
    K = counts.pop()
    values = np.full((len(frames), K, 4), np.nan)
    for f, lm in enumerate(frames):
        if lm is not None:
            values[f] = [_landmark(path, p, f"frame {f}, landmark {k}") for k, p in enumerate(lm)]
    has_visibility = np.isfinite(values[..., 3]).any()
    present = np.isfinite(values[..., :3]).all(axis=-1)
    confidence = np.where(np.isnan(values[..., 3]) & present, 1.0, values[..., 3]) if has_visibility else None
    chosen = chosen_set(path, K, keypoint_set)
    if up is None and chosen is not None and chosen.name == "MEDIAPIPE_33":
        up = MEDIAPIPE_UP
    units = _units(path, units)
    return make_trial(path, values[..., :3], confidence,
                      as_rate(path, rate if rate is not None else file_rate), units=units,
                      scale=UNIT_SCALE[units.lower()], chosen=chosen, up=up, source="mediapipe-json")


def _units(path, units) -> str:
    units = units or "m"
    if units.lower() not in UNIT_SCALE:
        raise KeypointFileError(path, None, f"unknown units {units!r} (mm, cm or m)")
    return units


def read_keypoint_csv(path, *, keypoint_set=None, rate=None, units=None, up=None):
    """The KeypointTrial of a keypoint CSV (module docstring)."""
    path = Path(path)
    lines = [line for line in text_lines(path)]
    try:
        rows = list(csv.reader(lines))
    except csv.Error as exc:
        raise KeypointFileError(path, None, f"cannot read file as CSV: {exc}") from None
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise KeypointFileError(path, 1, "no header row")
    header = [cell.strip() for cell in rows[0]]
    names, columns, confidence_columns, time_column = [], {}, {}, None
    for c, label in enumerate(header):
        coordinate, score = _COORDINATE.match(label), _CONFIDENCE.match(label)
        if label.lower() in ("time", "time_s", "timestamp"):
            time_column = c
        elif coordinate:
            name, axis = coordinate.groups()
            if name not in columns:
                names.append(name)
                columns[name] = {}
            if axis in columns[name]:
                raise KeypointFileError(path, 1, f"column {label!r} repeats")
            columns[name][axis] = c
        elif score:
            confidence_columns[score.group(1)] = c
    if not names:
        raise KeypointFileError(path, 1, "no <name>_x, <name>_y, <name>_z columns")
    for name in names:
        if len(columns[name]) != 3:
            raise KeypointFileError(path, 1, f"keypoint {name!r} lacks a column for {set('xyz') - set(columns[name])}")
    for name in confidence_columns:
        if name not in columns:
            raise KeypointFileError(path, 1, f"a confidence column for {name!r}, which has no coordinates")
    data, line_of = [], []
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise KeypointFileError(path, line, f"{len(row)} cells, the header has {len(header)}")
        try:
            data.append([float(cell) if cell.strip() else np.nan for cell in row])
        except ValueError as exc:
            raise KeypointFileError(path, line, f"not a number: {exc}") from None
        line_of.append(line)
    if not data:
        raise KeypointFileError(path, None, "too short: no data rows after the header")
    table = np.array(data)
    bad = np.isinf(table)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise KeypointFileError(path, line_of[r], f"{header[c]} is infinite (a missing value is an empty cell)")
    positions = np.stack([table[:, [columns[n][a] for a in "xyz"]] for n in names], axis=1)
    confidence = None
    if confidence_columns:
        confidence = np.stack([table[:, confidence_columns[n]] if n in confidence_columns
                               else np.ones(len(table)) for n in names], axis=1)
        negative = confidence < 0
        if negative.any():
            r, k = np.argwhere(negative)[0]
            raise KeypointFileError(path, line_of[r], f"confidence of {names[k]!r} is {confidence[r, k]}, below 0")
    time = None
    if time_column is not None:
        time = table[:, time_column]
        if not np.isfinite(time).all():
            r = int(np.flatnonzero(~np.isfinite(time))[0])
            raise KeypointFileError(path, line_of[r], "time is missing")
        if time.size > 1 and np.any(np.diff(time) <= 0):
            r = int(np.flatnonzero(np.diff(time) <= 0)[0]) + 1
            raise KeypointFileError(path, line_of[r], "time must increase from row to row")
        if rate is None and time.size > 1:
            rate = 1.0 / float(np.median(np.diff(time)))
    chosen = chosen_set(path, names, keypoint_set)
    if up is None and chosen is not None and chosen.name == "MEDIAPIPE_33":
        up = MEDIAPIPE_UP
    units = _units(path, units)
    return make_trial(path, positions, confidence, as_rate(path, rate), names=names, time=time, units=units,
                      scale=UNIT_SCALE[units.lower()], chosen=chosen, up=up, source="csv")

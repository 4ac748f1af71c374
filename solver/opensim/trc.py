"""Read (and write) .trc marker trajectory files.

A .trc file is tab-separated text:

    line 1   PathFileType  4  (X/Y/Z)  <file name>
    line 2   header keys:   DataRate CameraRate NumFrames NumMarkers Units OrigDataRate ...
    line 3   header values, one per key
    line 4   Frame#  Time  <marker 1>  <empty>  <empty>  <marker 2> ...   (a name per x/y/z triple)
    line 5   <empty> <empty>  X1 Y1 Z1 X2 Y2 Z2 ...
    then     optional blank lines, and one row per frame: frame number, time, x y z per marker.

Positions are converted to metres: p_m = s * p_file with s = 1e-3 (mm), 1e-2 (cm) or 1 (m).
A missing marker is an empty cell (or a row that ends early): it reads as NaN, and a marker with
any of x, y, z missing is NaN in all three. Trailing tabs and Windows line ends are tolerated.
Infinite coordinates, non-finite times and rates that are not positive are errors.

Header quirks real files carry, read as OpenSim 4.6 reads them: empty cells between header keys
or values (doubled tabs) are skipped when that lines the values up with the keys; a NumFrames that
differs from the data rows present gives the rows present, with an OpenSimFileWarning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import warnings

import numpy as np

from .errors import OpenSimFileError, OpenSimFileWarning
from .storage import text_lines

UNIT_SCALE = {"mm": 1e-3, "millimeters": 1e-3, "millimetres": 1e-3,
              "cm": 1e-2, "centimeters": 1e-2, "centimetres": 1e-2,
              "m": 1.0, "meters": 1.0, "metres": 1.0}


@dataclass
class MarkerData:
    """Marker trajectories: `positions` (F, M, 3) in metres (NaN where missing), `time` (F,) in
    seconds, `frame_numbers` (F,), `names` (M,). `units` is the unit the file was written in;
    `header` holds every line-2/line-3 key and value as text."""

    names: list
    time: np.ndarray
    positions: np.ndarray
    frame_numbers: np.ndarray
    data_rate: float
    camera_rate: float
    units: str = "m"
    header: dict = field(default_factory=dict)
    path: Path | None = None

    @property
    def n_frames(self) -> int:
        return self.positions.shape[0]

    @property
    def n_markers(self) -> int:
        return self.positions.shape[1]

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no marker called {name!r} in {self.path or 'the marker data'}") from None

    def marker(self, name: str) -> np.ndarray:
        """Trajectory (F, 3) of one marker, metres."""
        return self.positions[:, self.index(name)]

    def select(self, names) -> np.ndarray:
        """Trajectories (F, len(names), 3) of the named markers, in that order."""
        return self.positions[:, [self.index(n) for n in names]]

    def between(self, start: float = -np.inf, end: float = np.inf, tolerance: float = 1e-9) -> "MarkerData":
        """The frames with start <= time <= end (within `tolerance`)."""
        keep = (self.time >= start - tolerance) & (self.time <= end + tolerance)
        return MarkerData(list(self.names), self.time[keep], self.positions[keep], self.frame_numbers[keep],
                          self.data_rate, self.camera_rate, self.units, dict(self.header), self.path)


def _cells(line: str) -> list:
    """Split a row on tabs (on any whitespace when it has no tab); trailing empty cells dropped."""
    line = line.rstrip("\r\n")
    cells = line.split("\t") if "\t" in line else line.split()
    cells = [c.strip() for c in cells]
    while cells and cells[-1] == "":
        cells.pop()
    return cells


def _header_cells(key_line: str, value_line: str):
    """Header keys and values (lines 2 and 3). Empty cells (doubled tabs) are dropped from both
    lines when the values left then match the keys one to one; otherwise the cells are kept where
    they stand (an empty value then reads as empty)."""
    keys, values = _cells(key_line), _cells(value_line)
    filled_keys, filled_values = [k for k in keys if k], [v for v in values if v]
    if len(filled_values) == len(filled_keys):
        return filled_keys, filled_values
    return keys, values


def read_trc(path) -> MarkerData:
    """Read a .trc file into MarkerData (metres). Raises OpenSimFileError on malformed input."""
    path = Path(path)
    lines = text_lines(path)
    if len(lines) < 5:
        raise OpenSimFileError(path, len(lines) or None, "too short for a .trc file (it needs 5 header lines)")
    if not lines[0].strip().startswith("PathFileType"):
        raise OpenSimFileError(path, 1, "a .trc file starts with 'PathFileType'")

    keys, values = _header_cells(lines[1], lines[2])
    if len(values) < len(keys):
        raise OpenSimFileError(path, 3, f"{len(keys)} header keys on line 2 but {len(values)} values here")
    header = dict(zip(keys, values))

    def number(key, kind=float, required=True):
        if key not in header:
            if required:
                raise OpenSimFileError(path, 2, f"header key {key!r} is missing")
            return None
        try:
            value = float(header[key])
        except ValueError:
            value = np.nan
        if kind is int and value.is_integer() and value >= 0:
            return int(value)
        if kind is float and np.isfinite(value) and value > 0:
            return value
        raise OpenSimFileError(path, 3, f"{key} must be a {'whole number >= 0' if kind is int else 'positive number'}, "
                                        f"got {header[key]!r}")

    data_rate = number("DataRate")
    camera_rate = number("CameraRate", required=False)
    n_frames = number("NumFrames", int)
    n_markers = number("NumMarkers", int)
    if "Units" not in header:
        raise OpenSimFileError(path, 2, "header key 'Units' is missing")
    units = header["Units"]
    if units.lower() not in UNIT_SCALE:
        raise OpenSimFileError(path, 3, f"unknown Units {units!r} (expected mm, cm or m)")
    scale = UNIT_SCALE[units.lower()]

    label_cells = _cells(lines[3])
    if len(label_cells) < 2 or label_cells[0].lower() not in ("frame#", "frame") or label_cells[1].lower() != "time":
        raise OpenSimFileError(path, 4, "the marker-name line must start with 'Frame#' and 'Time'")
    names = [c for c in label_cells[2:] if c]
    if len(names) != n_markers:
        raise OpenSimFileError(path, 4, f"NumMarkers is {n_markers} but this line names {len(names)} markers")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise OpenSimFileError(path, 4, f"marker names repeat: {', '.join(dup)}")

    rows, times, frame_numbers, row_lines = [], [], [], []
    width = 2 + 3 * n_markers
    for number_, line in enumerate(lines[5:], start=6):
        if not line.strip():
            continue
        cells = _cells(line)
        if len(cells) > width:
            raise OpenSimFileError(path, number_, f"{len(cells)} columns, more than the {width} that "
                                                  f"{n_markers} markers need")
        if len(cells) < 2 or not cells[0] or not cells[1]:
            raise OpenSimFileError(path, number_, "a data row needs a frame number and a time")
        try:
            frame, time = float(cells[0]), float(cells[1])
            row = [float(c) if c else np.nan for c in cells[2:]]
        except ValueError as exc:
            raise OpenSimFileError(path, number_, f"not a number: {exc}") from None
        if not abs(frame) < 2.0 ** 53:
            raise OpenSimFileError(path, number_, f"frame number {cells[0]!r} is not a finite number below 2**53")
        if not np.isfinite(time):
            raise OpenSimFileError(path, number_, f"time {cells[1]!r} is not a finite number")
        frame_numbers.append(int(frame))
        times.append(time)
        rows.append(row + [np.nan] * (width - 2 - len(row)))
        row_lines.append(number_)
    if len(rows) != n_frames:
        warnings.warn(f"{path}, line {row_lines[-1] if rows else len(lines)}: NumFrames is {n_frames} but the file "
                      f"has {len(rows)} data rows; read the {len(rows)} rows (as OpenSim does)",
                      OpenSimFileWarning, stacklevel=2)

    positions = np.array(rows, dtype=float).reshape(len(rows), n_markers, 3) * scale
    if np.any(np.isinf(positions)):
        f, m, _ = np.argwhere(np.isinf(positions))[0]
        raise OpenSimFileError(path, row_lines[f], f"marker {names[m]!r} has an infinite coordinate "
                                                   "(a missing marker is an empty cell or NaN)")
    positions[np.any(np.isnan(positions), axis=-1)] = np.nan
    time = np.array(times, dtype=float)
    if time.size > 1 and np.any(np.diff(time) <= 0):
        bad = int(np.flatnonzero(np.diff(time) <= 0)[0]) + 1
        raise OpenSimFileError(path, row_lines[bad], "time must increase from row to row")
    return MarkerData(names=names, time=time, positions=positions,
                      frame_numbers=np.array(frame_numbers, dtype=int), data_rate=data_rate,
                      camera_rate=data_rate if camera_rate is None else camera_rate,
                      units=units, header=header, path=path)


def write_trc(path, data: MarkerData, units: str = "mm", fmt: str = "%.6f", missing: str = "NaN") -> None:
    """Write MarkerData as a .trc file, positions converted from metres to `units`. Missing
    markers are written as `missing` ("NaN" by default: OpenSim's reader takes NaN, but it rejects
    a row whose last cells are empty)."""
    path = Path(path)
    if units.lower() not in UNIT_SCALE:
        raise ValueError(f"unknown units {units!r}")
    scale = 1.0 / UNIT_SCALE[units.lower()]
    F, M = data.positions.shape[:2]
    out = [f"PathFileType\t4\t(X/Y/Z)\t{path.name}",
           "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame\tOrigNumFrames",
           f"{data.data_rate:g}\t{data.camera_rate:g}\t{F}\t{M}\t{units}\t{data.data_rate:g}\t"
           f"{int(data.frame_numbers[0]) if F else 1}\t{F}",
           "Frame#\tTime\t" + "\t".join(f"{n}\t\t" for n in data.names),
           "\t\t" + "\t".join(f"X{i + 1}\tY{i + 1}\tZ{i + 1}" for i in range(M)),
           ""]
    for f in range(F):
        cells = [str(int(data.frame_numbers[f])), repr(float(data.time[f]))]
        for v in (data.positions[f] * scale).ravel():
            cells.append(missing if np.isnan(v) else fmt % v)
        out.append("\t".join(cells))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")

"""Read and write OpenSim storage files (.mot motions, .sto results).

Both are text: a header, a line `endheader`, a line of tab-separated column labels, then one row
of numbers per time step. Two header styles occur:

    version 1 (OpenSim)                  SIMM style (std_subject01_walk1_ik.mot)
    <name>                               <name>
    version=1                            nRows=73
    nRows=73                             nColumns=24
    nColumns=24                          # SIMM Motion File Header:
    inDegrees=yes                        name first trial
    endheader                            datacolumns 24
                                         datarows 73
                                         range 0.400000 1.600000
                                         endheader

`key=value` lines and SIMM `key value` lines both land in `Storage.header`; `#` lines are
comments. `inDegrees` says whether rotational columns are in degrees; when the header does not
say (the SIMM style) `Storage.in_degrees` is None, and `Storage.degrees` follows OpenSim's own
convention for that case (checked against opensim 4.6's Storage): a .mot file is in degrees, any
other file (.sto) in radians. nRows/nColumns (and
SIMM datarows/datacolumns), when present, must match the data. A value may be NaN (missing), but
not infinite, and the first (time) column must be finite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import OpenSimFileError

_SIMM_KEYS = ("name", "datacolumns", "datarows", "otherdata", "range", "units", "wrapobjects", "keys")


@dataclass
class Storage:
    """Columns of numbers with labels: `data` (rows, columns), `labels` (columns,)."""

    labels: list
    data: np.ndarray
    name: str = ""
    header: dict = field(default_factory=dict)
    in_degrees: bool | None = None
    path: Path | None = None

    @property
    def n_rows(self) -> int:
        return self.data.shape[0]

    def index(self, label: str) -> int:
        try:
            return self.labels.index(label)
        except ValueError:
            raise KeyError(f"no column called {label!r} in {self.path or 'the storage'}") from None

    def __contains__(self, label) -> bool:
        return label in self.labels

    @property
    def time(self) -> np.ndarray:
        """The time column (the first column, whatever its label)."""
        return self.data[:, 0]

    def column(self, label: str) -> np.ndarray:
        return self.data[:, self.index(label)]

    def columns(self, labels) -> np.ndarray:
        """The named columns (rows, len(labels)), in that order."""
        return self.data[:, [self.index(c) for c in labels]]

    @property
    def degrees(self) -> bool:
        """Whether rotational columns are in degrees: `in_degrees` when the header says, otherwise
        True for a .mot file and False for anything else (OpenSim's convention)."""
        if self.in_degrees is not None:
            return self.in_degrees
        return self.path is not None and self.path.suffix.lower() == ".mot"

    def in_radians(self, rotational, degrees: bool | None = None) -> "Storage":
        """A copy whose columns named in `rotational` are in radians: multiplied by pi/180 when the
        file is in degrees (`degrees`, default `self.degrees`)."""
        degrees = self.degrees if degrees is None else degrees
        data = self.data.copy()
        if degrees:
            rotational = set(rotational)
            cols = [i for i, c in enumerate(self.labels) if c in rotational]
            data[:, cols] *= np.pi / 180.0
        return Storage(list(self.labels), data, self.name, dict(self.header, inDegrees="no"), False, self.path)


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def text_lines(path) -> list:
    """The lines of a text file (UTF-8, an optional byte-order mark dropped, undecodable bytes as
    U+FFFD), split where an editor splits them: at \\n, \\r\\n and \\r only, so that line numbers in
    messages match the editor's (str.splitlines also splits at form feeds, U+0085, U+2028 ...).
    Shared with the .trc reader."""
    try:
        text = Path(path).read_bytes().decode("utf-8-sig", errors="replace")
    except OSError as exc:
        raise OpenSimFileError(path, None, f"cannot read file: {exc.strerror or exc}") from None
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def _parse_bool(text: str):
    low = text.strip().lower()
    if low in ("yes", "true", "1"):
        return True
    if low in ("no", "false", "0"):
        return False
    return None


def _whole_number(text: str):
    """The integer `text` spells ("73", "73.0", "7.3e1"), or None (also for inf and NaN)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def _labels(line: str) -> list:
    line = line.rstrip("\r\n")
    cells = [c.strip() for c in line.split("\t")] if "\t" in line else line.split()
    while cells and cells[-1] == "":
        cells.pop()
    return cells


def read_storage(path) -> Storage:
    """Read a .mot or .sto file. Raises OpenSimFileError on malformed input."""
    path = Path(path)
    lines = text_lines(path)
    end = next((i for i, line in enumerate(lines) if line.strip().lower() == "endheader"), None)
    if end is None:
        raise OpenSimFileError(path, None, "no 'endheader' line")

    header: dict = {}
    name = ""
    key_lines: dict = {}
    for i, raw in enumerate(lines[:end]):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" in line:
            key, value = line.split("=", 1)
            header[key.strip()] = value.strip()
            key_lines[key.strip()] = i + 1
        elif i == 0:
            name = line
        else:
            parts = line.split(None, 1)
            if parts[0].lower() in _SIMM_KEYS:
                header[parts[0].lower()] = parts[1].strip() if len(parts) > 1 else ""
                key_lines[parts[0].lower()] = i + 1
            # other free text in a header is a comment (OpenSim ignores it as well)

    in_degrees = None
    if "inDegrees" in header:
        in_degrees = _parse_bool(header["inDegrees"])
        if in_degrees is None:
            raise OpenSimFileError(path, key_lines["inDegrees"], f"inDegrees must be yes or no, got {header['inDegrees']!r}")

    label_line = next((i for i in range(end + 1, len(lines)) if lines[i].strip()), None)
    if label_line is None:
        raise OpenSimFileError(path, end + 1, "no column labels after 'endheader'")
    labels = _labels(lines[label_line])
    if "" in labels:
        raise OpenSimFileError(path, label_line + 1, f"column {labels.index('') + 1} has no label")
    if len(set(labels)) != len(labels):
        dup = sorted({c for c in labels if labels.count(c) > 1})
        raise OpenSimFileError(path, label_line + 1, f"column labels repeat: {', '.join(dup)}")

    rows, row_lines = [], []
    for i in range(label_line + 1, len(lines)):
        cells = lines[i].split()
        if not cells:
            continue
        if len(cells) != len(labels):
            raise OpenSimFileError(path, i + 1, f"{len(cells)} numbers but {len(labels)} column labels")
        try:
            rows.append([float(c) for c in cells])
        except ValueError as exc:
            raise OpenSimFileError(path, i + 1, f"not a number: {exc}") from None
        row_lines.append(i + 1)
    data = np.array(rows, dtype=float).reshape(len(rows), len(labels))
    bad = np.isinf(data) | np.isnan(data) & (np.arange(len(labels)) == 0)
    if bad.any():                        # NaN marks a missing value, except in the time column
        row, col = np.argwhere(bad)[0]
        raise OpenSimFileError(path, row_lines[row], f"{labels[col]} is {data[row, col]}: values must be finite "
                                                     f"(NaN for a missing value, but not in the first column)")

    for key, count, what in (("nColumns", len(labels), "columns"), ("datacolumns", len(labels), "columns"),
                             ("nRows", len(rows), "rows"), ("datarows", len(rows), "rows")):
        if key in header:
            declared = _whole_number(header[key])
            if declared is None:
                raise OpenSimFileError(path, key_lines[key], f"{key} must be a whole number, got {header[key]!r}")
            if declared != count:
                raise OpenSimFileError(path, key_lines[key], f"{key}={declared} but the file has {count} {what}")
    if not name and "name" in header:
        name = header["name"]
    return Storage(labels=labels, data=data, name=name, header=header, in_degrees=in_degrees, path=path)


def write_storage(path, labels, data, name: str = "", in_degrees: bool = False,
                  fmt: str = "%.12g", header: dict | None = None) -> None:
    """Write a version-1 storage file: name, version=1, nRows, nColumns, inDegrees, any extra
    `header` entries as key=value, endheader, the tab-separated labels, then the rows."""
    data = np.atleast_2d(np.asarray(data, dtype=float))
    labels = list(labels)
    if data.shape[1] != len(labels):
        raise ValueError(f"{len(labels)} labels for {data.shape[1]} columns")
    out = [name or Path(path).stem, "version=1", f"nRows={data.shape[0]}", f"nColumns={data.shape[1]}",
           f"inDegrees={'yes' if in_degrees else 'no'}"]
    out += [f"{k}={v}" for k, v in (header or {}).items()]
    out += ["endheader", "\t".join(labels)]
    row_format = "\t".join([fmt] * len(labels))
    out += [row_format % tuple(row) for row in data.tolist()]
    Path(path).write_text("\n".join(out) + "\n", encoding="utf-8")

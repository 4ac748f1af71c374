"""Read any marker file into a Trial: `.trc` (trc.read_trc) or `.c3d` (c3d.read_c3d), by suffix.
Both raise OpenSimFileError on malformed input."""

from __future__ import annotations

from pathlib import Path

from .c3d import read_c3d
from .errors import OpenSimFileError
from .trc import read_trc
from .trial import Trial

MARKER_SUFFIXES = (".trc", ".c3d")


def read_trial(path, c3d_reader: str | None = None) -> Trial:
    """The trial in a .trc or .c3d file (by suffix, any case). `c3d_reader` picks the C3D
    library ('c3d', the default, or 'ezc3d'; see c3d.read_c3d)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".trc":
        return Trial.from_markers(read_trc(path))
    if suffix == ".c3d":
        return read_c3d(path, reader=c3d_reader)
    raise OpenSimFileError(path, None, f"unknown marker file type {path.suffix!r} (expected .trc or .c3d)")

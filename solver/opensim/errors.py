"""The one error type (and one warning type) the OpenSim file readers raise."""

from __future__ import annotations

from pathlib import Path


class OpenSimFileError(ValueError):
    """Malformed or unsupported input in an OpenSim file: which file, which line (1-based; None
    when the problem is not tied to one line), and why."""

    def __init__(self, path, line: int | None, reason: str):
        self.path = None if path is None else Path(path)
        self.line = line
        self.reason = reason
        where = str(self.path) if self.path is not None else "<input>"
        if line is not None:
            where += f", line {line}"
        super().__init__(f"{where}: {reason}")


class OpenSimFileWarning(UserWarning):
    """Input that OpenSim accepts and we accept too, but that is not what the format says
    (for example a stray closing tag after the XML document element)."""

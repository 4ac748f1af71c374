"""One trial structure behind every marker file (.trc and .c3d), so marker IK does not care where
its markers came from.

A Trial is MarkerData (trc.py) with the C3D extras: labels `names` (M,), the point rate
`data_rate` in Hz, frame numbers `frame_numbers` (F,) from `first_frame` on, times `time` (F,) in
seconds, points `positions` (F, M, 3) in metres with NaN where a marker is missing (all three
coordinates together), `units` the unit the file stored, and the analog channels as the file
had them: `analog` (S, C) at `analog_rate` Hz with `analog_labels` (C,), S = F * samples per
frame (empty when the file has none; a .trc never has any). `source` names the reader.

marker_file.read_trial(path) reads either file into a Trial.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .trc import MarkerData


@dataclass
class Trial(MarkerData):
    """Marker trajectories of one trial and its analog channels (module docstring)."""

    analog: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    analog_rate: float = 0.0
    analog_labels: list = field(default_factory=list)
    source: str = ""

    @property
    def labels(self) -> list:
        return self.names

    @property
    def rate(self) -> float:
        return self.data_rate

    @property
    def first_frame(self) -> int:
        return int(self.frame_numbers[0]) if self.frame_numbers.size else 1

    @property
    def points(self) -> np.ndarray:
        return self.positions

    @property
    def times(self) -> np.ndarray:
        return self.time

    @property
    def analog_per_frame(self) -> int:
        """Analog samples per point frame (0 without analog channels)."""
        if not self.analog.size or not self.n_frames:
            return 0
        return self.analog.shape[0] // self.n_frames

    @classmethod
    def from_markers(cls, markers: MarkerData, source: str = "trc") -> "Trial":
        """The trial of a .trc reader's MarkerData (no analog channels)."""
        return cls(names=list(markers.names), time=markers.time, positions=markers.positions,
                   frame_numbers=markers.frame_numbers, data_rate=markers.data_rate,
                   camera_rate=markers.camera_rate, units=markers.units, header=dict(markers.header),
                   path=markers.path, source=source)

    def between(self, start: float = -np.inf, end: float = np.inf, tolerance: float = 1e-9) -> "Trial":
        """The frames with start <= time <= end (within `tolerance`), with their analog samples."""
        keep = (self.time >= start - tolerance) & (self.time <= end + tolerance)
        per = self.analog_per_frame
        analog = self.analog[np.repeat(keep, per)] if per else self.analog
        return Trial(names=list(self.names), time=self.time[keep], positions=self.positions[keep],
                     frame_numbers=self.frame_numbers[keep], data_rate=self.data_rate,
                     camera_rate=self.camera_rate, units=self.units, header=dict(self.header), path=self.path,
                     analog=analog, analog_rate=self.analog_rate, analog_labels=list(self.analog_labels),
                     source=self.source)

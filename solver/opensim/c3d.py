"""Read C3D marker files into a Trial, through a maintained C3D library (never our own parser).

Libraries: the pure-Python `c3d` package (the default: numpy only, and the one the Blender
extension bundles), or `ezc3d` when asked for with reader='ezc3d'. ezc3d is not the default: it
is C++ and ends the whole process on some malformed files, and it reads a truncated file without
complaint, where `c3d` raises and the checks below turn that into an OpenSimFileError.

What is read, as the C3D format defines it:

* labels: POINT:LABELS (then LABELS2, LABELS3 ... for more than 255 points), trailing blanks
  removed; one per point of POINT:USED, none empty, none repeated;
* the point rate POINT:RATE (Hz, positive);
* points: x, y, z per point and frame; a sample whose residual word is negative is invalid (the
  marker is missing there) and reads as NaN, as does a sample with a coordinate that is not
  finite; positions in metres p_m = s * p_file with s from POINT:UNITS (mm, cm or m, as trc.py);
* frames: the file's frame numbers from the first frame on (header word 4 or
  TRIAL:ACTUAL_START_FIELD); the frame count the file declares must be there in full;
* time: t_i = (first_frame - 1 + i) / rate, so that frame 1 (the C3D convention's first frame) is
  at t = 0 and a trial cropped to start at frame 393 starts at 3.92 s at 100 Hz; an export that
  numbers its first frame 0 starts at t = 0 as well;
* analog channels, kept as stored (after ANALOG:SCALE, GEN_SCALE and OFFSET): `analog` (S, C) at
  ANALOG:RATE, S = F * samples per frame, with ANALOG:LABELS (repeats allowed: some systems label
  every channel alike).

Any fault in the file (not a C3D file, a broken parameter section, a missing or unknown
parameter, a truncated data section) raises OpenSimFileError naming the file and the reason; a
C3D file has no lines, so the error has none either.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from .errors import OpenSimFileError
from .trc import UNIT_SCALE
from .trial import Trial

READERS = ("c3d", "ezc3d")
DEFAULT_READER = "c3d"
C3D_KEY = 0x50                  # byte 2 of every C3D file


def _fail(path, reason):
    return OpenSimFileError(path, None, reason)


def read_c3d(path, reader: str | None = None) -> Trial:
    """The trial in a C3D file (module docstring). `reader` is 'c3d' (default) or 'ezc3d'."""
    path = Path(path)
    reader = reader or DEFAULT_READER
    if reader not in READERS:
        raise ValueError(f"C3D reader must be one of {READERS}, not {reader!r}")
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError as exc:
        raise _fail(path, f"cannot read file: {exc.strerror or exc}") from None
    if len(head) < 512:
        raise _fail(path, f"not a C3D file: {len(head)} bytes, shorter than its 512-byte header")
    if head[1] != C3D_KEY:
        raise _fail(path, f"not a C3D file: byte 2 is 0x{head[1]:02x}, not 0x50")
    parts = _read_with_c3d(path) if reader == "c3d" else _read_with_ezc3d(path)
    return _trial(path, reader, **parts)


def _labels(values, used: int, what: str, path, unique: bool = True) -> list:
    labels = [str(v).strip() for v in values][:used]
    if len(labels) < used:
        raise _fail(path, f"{what} names {len(labels)} of the {used} channels the file has")
    if unique:
        empty = [i + 1 for i, name in enumerate(labels) if not name]
        if empty:
            raise _fail(path, f"{what}: point {empty[0]} has an empty label")
        repeated = sorted({n for n in labels if labels.count(n) > 1})
        if repeated:
            raise _fail(path, f"{what} repeat: {', '.join(repeated)}")
    return labels


def _rate(value, name: str, path) -> float:
    try:
        rate = float(value)
    except (TypeError, ValueError):
        rate = np.nan
    if not (np.isfinite(rate) and rate > 0):
        raise _fail(path, f"{name} must be a positive number, got {value!r}")
    return rate


def _units(value, path) -> str:
    units = str(value).strip()
    if units.lower() not in UNIT_SCALE:
        raise _fail(path, f"unknown POINT:UNITS {units!r} (expected mm, cm or m)")
    return units


def _trial(path, reader, labels, rate, units, first_frame, points, valid, analog, analog_rate, analog_labels,
           manufacturer) -> Trial:
    F, M = points.shape[:2]
    positions = np.asarray(points, dtype=float) * UNIT_SCALE[units.lower()]
    valid = np.asarray(valid, bool) & np.all(np.isfinite(positions), axis=-1)
    positions[~valid] = np.nan
    frames = np.arange(F, dtype=np.int64) + int(first_frame)
    time = (frames - (1 if first_frame >= 1 else 0)) / rate
    header = {"POINT:RATE": f"{rate:g}", "POINT:UNITS": units, "first frame": str(first_frame)}
    if manufacturer:
        header["MANUFACTURER:COMPANY"] = manufacturer
    return Trial(names=labels, time=time, positions=positions, frame_numbers=frames, data_rate=rate,
                 camera_rate=rate, units=units, header=header, path=path, analog=analog,
                 analog_rate=analog_rate, analog_labels=analog_labels, source=reader)


# -------------------------------------------------------------------------------- c3d package

def _library(name: str, path):
    """The C3D library `name`, or an OpenSimFileError saying how to install it."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError:
        raise _fail(path, f"reading a C3D file needs the `{name}` package (pip install {name})") from None


def _read_with_c3d(path) -> dict:
    c3d = _library("c3d", path)
    with open(path, "rb") as fh, warnings.catch_warnings():
        warnings.simplefilter("ignore")           # the package warns (missing parameters, EOF): we check
        try:
            r = c3d.Reader(fh)
            parts = _c3d_parameters(r, path)
            frames = list(r.read_frames(copy=True, analog_transform=True, check_nan=True))
        except OpenSimFileError:
            raise
        except Exception as exc:                 # the package's own errors on a broken file, whatever their kind
            raise _fail(path, f"not a readable C3D file ({type(exc).__name__}: {exc})") from None
    declared = parts.pop("declared")
    if len(frames) < declared:
        raise _fail(path, f"truncated: the file declares {declared} frames but holds {len(frames)}")
    used, analog_used, per_frame = len(parts["labels"]), len(parts["analog_labels"]), parts.pop("per_frame")
    points = np.stack([p for _, p, _ in frames]) if frames else np.zeros((0, used, 5))
    if analog_used and per_frame and frames:
        analog = np.concatenate([np.asarray(a, dtype=float).reshape(analog_used, per_frame).T for _, _, a in frames])
    else:
        analog = np.zeros((0, analog_used))
    parts.update(first_frame=int(frames[0][0]) if frames else int(r.first_frame), points=points[..., :3],
                 valid=points[..., 3] >= 0, analog=analog)
    return parts


def _c3d_parameters(r, path) -> dict:
    """Labels, rates, units and the frame count from the parameter section, checked before the
    data section is read (so that a huge declared count cannot make the read loop long)."""
    used = int(r.point_used)
    if used <= 0:
        raise _fail(path, "no markers: POINT:USED is 0")
    labels = []
    for key in ["POINT:LABELS"] + [f"POINT:LABELS{k}" for k in range(2, 100)]:
        param = r.get(key)
        if param is None or len(labels) >= used:
            break
        labels += list(param.string_array.ravel()) if param.num_elements else []
    labels = _labels(labels, used, "POINT:LABELS", path)
    units_param = r.get("POINT:UNITS")
    if units_param is None:
        raise _fail(path, "POINT:UNITS is missing")
    units = _units(units_param.string_value, path)
    rate = _rate(r.point_rate, "POINT:RATE", path)
    analog_used = int(r.analog_used or 0)
    per_frame = int(r.analog_per_frame) if analog_used else 0
    analog_rate, analog_labels = 0.0, []
    if analog_used:
        analog_rate = _rate(r.analog_rate, "ANALOG:RATE", path)
        names = r.get("ANALOG:LABELS")
        analog_labels = _labels(list(names.string_array.ravel()) if names is not None and names.num_elements else [],
                                analog_used, "ANALOG:LABELS", path, unique=False)
    header_count = int(r.header.last_frame) - int(r.header.first_frame) + 1
    counts = [c for c in (int(r.frame_count), header_count) if c >= 1]
    declared = min(counts) if counts else 0
    word = 4 if r.point_scale < 0 else 2
    frame_bytes = used * 4 * word + analog_used * per_frame * word
    available = path.stat().st_size - (int(r.header.data_block) - 1) * 512
    if declared * frame_bytes > available:
        raise _fail(path, f"truncated: the file declares {declared} frames of {frame_bytes} bytes but its data "
                          f"section has {max(available, 0)} bytes")
    manufacturer = r.get("MANUFACTURER:COMPANY")
    return dict(labels=labels, rate=rate, units=units, analog_rate=analog_rate, analog_labels=analog_labels,
                declared=declared, per_frame=per_frame,
                manufacturer=manufacturer.string_value.strip() if manufacturer is not None else "")


# ------------------------------------------------------------------------------------- ezc3d

def _read_with_ezc3d(path) -> dict:
    ezc3d = _library("ezc3d", path)
    try:
        c = ezc3d.c3d(str(path))
    except Exception as exc:
        raise _fail(path, f"not a readable C3D file ({type(exc).__name__}: {exc})") from None
    parameters = c["parameters"]

    def value(group, name):
        try:
            return parameters[group][name]["value"]
        except KeyError:
            return None

    points = np.asarray(c["data"]["points"], dtype=float)          # (4, M, F), NaN where invalid
    used = points.shape[1]
    if used == 0:
        raise _fail(path, "no markers: POINT:USED is 0")
    labels = _labels(list(value("POINT", "LABELS") or []) + list(value("POINT", "LABELS2") or []), used,
                     "POINT:LABELS", path)
    units = value("POINT", "UNITS")
    if units is None or not len(units):
        raise _fail(path, "POINT:UNITS is missing")
    rate = _rate(c["header"]["points"]["frame_rate"], "POINT:RATE", path)
    analogs = np.asarray(c["data"]["analogs"], dtype=float)        # (1, C, S)
    analog_used = analogs.shape[1] if analogs.ndim == 3 else 0
    analog_rate = _rate(c["header"]["analogs"]["frame_rate"], "ANALOG:RATE", path) if analog_used else 0.0
    analog_labels = _labels(list(value("ANALOG", "LABELS") or []), analog_used, "ANALOG:LABELS", path,
                            unique=False) if analog_used else []
    company = value("MANUFACTURER", "COMPANY")
    xyz = np.transpose(points[:3], (2, 1, 0))
    return dict(labels=labels, rate=rate, units=_units(units[0], path),
                first_frame=int(c["header"]["points"]["first_frame"]) + 1, points=xyz,
                valid=np.all(np.isfinite(xyz), axis=-1),
                analog=analogs[0].T if analog_used else np.zeros((0, 0)), analog_rate=analog_rate,
                analog_labels=analog_labels, manufacturer=str(company[0]).strip() if company else "")

"""Fuzzing the C3D reader as tests/apps/test_fuzz_readers.py fuzzes the text readers: whatever the
bytes, read_c3d returns a sane Trial or raises OpenSimFileError naming the file and a reason
(a C3D file has no lines: the error names none), never another exception, never a hang.

Seeds: the real Qualisys file (float data, analog channels) and a small file the c3d package's
writer makes from the gait2354 trial (with gaps). Mutations are plain tuples (a failing case
prints as its recipe): truncate anywhere; overwrite bytes or 16-bit words in the header, the
parameter section or the data; overwrite the bytes after a parameter's name (USED, RATE, UNITS,
SCALE, LABELS, FRAMES, DATA_START ...); delete or insert bytes; and random bytes behind a valid
key byte. ITASC_FUZZ_EXAMPLES / ITASC_FUZZ_RANDOM work as in test_fuzz_readers.py.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

c3d = pytest.importorskip("c3d", reason="the c3d package is the reader under test (not in the engine-only venvs)")
from hypothesis import currently_in_test_context, event, given                                     # noqa: E402
from hypothesis import strategies as st                                 # noqa: E402

from solver.opensim import OpenSimFileError, Trial, read_c3d, read_trc  # noqa: E402
from tests.apps.test_fuzz_readers import TIME_LIMIT, fuzz, sane_markers, time_limit  # noqa: E402

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
QUALISYS = SHARED / "c3d" / "qualisys_cgm2_gait1.c3d"
GAIT_TRC = SHARED / "opensim_gait2354" / "subject01_synthetic_marker_data.trc"
needs_data = pytest.mark.skipif(not (QUALISYS.is_file() and GAIT_TRC.is_file()),
                                reason="shared/data is not beside the repository")

PARAMETERS = (b"USED", b"RATE", b"UNITS", b"SCALE", b"LABELS", b"FRAMES", b"DATA_START", b"GEN_SCALE", b"OFFSET",
              b"FORMAT", b"ACTUAL_START_FIELD", b"ACTUAL_END_FIELD", b"DESCRIPTIONS")


@lru_cache(maxsize=None)
def seed(name: str) -> bytes:
    if name == "qualisys":
        return QUALISYS.read_bytes()
    import io
    gait = read_trc(GAIT_TRC)
    points = np.zeros((gait.n_frames, gait.n_markers, 5), np.float32)
    points[..., :3] = gait.positions * 1000
    points[10:20, 7, 3] = -1
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)             # "No analog data found in file."
        writer = c3d.Writer(point_rate=60.0, point_units="mm")
        writer.set_point_labels(gait.names)
        writer.set_start_frame(25)
        writer.add_frames([(p, np.zeros((0, 0))) for p in points])
        writer.write(out)
    return out.getvalue()


def _data_start(data: bytes) -> int:
    block = int.from_bytes(data[16:18], "little") if len(data) >= 18 else 3
    return min(max(block - 1, 1) * 512, len(data))


def region(data: bytes, where: str, fraction: float) -> int:
    start, end = {"header": (0, 512), "parameters": (512, _data_start(data)), "data": (_data_start(data), len(data)),
                  "anywhere": (0, len(data))}[where]
    end = max(min(end, len(data)), start + 1)
    return min(start + int(fraction * (end - start)), max(len(data) - 1, 0))


def mutate(data: bytes, op) -> bytes:
    b = bytearray(data)
    kind = op[0]
    if not b:
        return bytes(b)
    if kind == "truncate":
        return bytes(b[:int(op[1] * len(b))])
    if kind == "byte":
        b[region(data, op[1], op[2])] = op[3]
    elif kind == "word":
        i = region(data, op[1], op[2])
        b[i:i + 2] = op[3].to_bytes(2, "little")
    elif kind == "parameter":
        hits = [i for i in range(len(data)) if data.startswith(op[1], i)][:4] if op[1] in data else []
        if hits:
            i = hits[op[2] % len(hits)] + len(op[1]) + op[3]
            b[i:i + len(op[4])] = op[4]
    elif kind == "delete":
        i = region(data, op[1], op[2])
        del b[i:i + op[3]]
    elif kind == "insert":
        i = region(data, op[1], op[2])
        b[i:i] = op[3]
    return bytes(b)


REGIONS = st.sampled_from(("header", "parameters", "data", "anywhere"))
FRACTION = st.floats(0, 1, allow_nan=False)
OPS = st.one_of(
    st.tuples(st.just("truncate"), FRACTION),
    st.tuples(st.just("byte"), REGIONS, FRACTION, st.integers(0, 255)),
    st.tuples(st.just("word"), st.sampled_from(("header", "parameters")), FRACTION,
              st.sampled_from((0, 1, 2, 255, 256, 0x7FFF, 0x8000, 0xFFFF)) | st.integers(0, 0xFFFF)),
    st.tuples(st.just("parameter"), st.sampled_from(PARAMETERS), st.integers(0, 3), st.integers(0, 12),
              st.binary(min_size=1, max_size=6)),
    st.tuples(st.just("delete"), REGIONS, FRACTION, st.integers(1, 600)),
    st.tuples(st.just("insert"), REGIONS, FRACTION, st.binary(min_size=1, max_size=40)),
)


def sane_trial(t: Trial):
    sane_markers(t)
    F = t.n_frames
    assert t.analog.ndim == 2 and t.analog.shape[1] == len(t.analog_labels)
    if t.analog_labels:
        assert t.analog_rate > 0 and t.analog.shape[0] == F * t.analog_per_frame
    assert t.frame_numbers.shape == (F,) and np.all(np.diff(t.frame_numbers) == 1)


def outcome(path: Path):
    with time_limit(TIME_LIMIT):
        try:
            result = read_c3d(path)
        except OpenSimFileError as err:
            assert err.path == path and err.line is None
            assert isinstance(err.reason, str) and err.reason.strip() and str(err) == f"{path}: {err.reason}"
            if currently_in_test_context():
                event("error: " + err.reason.split(":")[0].split("(")[0][:40])
            return err
    sane_trial(result)
    if currently_in_test_context():
        event("loaded")
    return result


@needs_data
@fuzz(150)
@given(st.sampled_from(("qualisys", "gait")), st.lists(OPS, min_size=1, max_size=3))
def test_c3d_mutations(tmp_path_factory, name, ops):
    data = seed(name)
    for op in ops:
        data = mutate(data, op)
    path = tmp_path_factory.mktemp("c3d") / "fuzz.c3d"
    path.write_bytes(data)
    outcome(path)


@fuzz(100)
@given(st.binary(min_size=510, max_size=3000), st.integers(1, 20))
def test_random_bytes_behind_a_c3d_key(tmp_path_factory, body, parameter_block):
    data = bytes([parameter_block, 0x50]) + body
    path = tmp_path_factory.mktemp("c3d") / "random.c3d"
    path.write_bytes(data)
    outcome(path)


@needs_data
@pytest.mark.parametrize("name", ("qualisys", "gait"))
def test_the_seeds_load_and_every_truncation_is_an_error(tmp_path, name):
    data = seed(name)
    path = tmp_path / "seed.c3d"
    path.write_bytes(data)
    whole = outcome(path)
    assert isinstance(whole, Trial) and whole.n_frames == {"qualisys": 344, "gait": 73}[name]
    start = _data_start(data)
    frame_bytes = 16 * whole.n_markers + 4 * whole.analog.shape[1] * whole.analog_per_frame     # float data
    last = start + (whole.n_frames - 1) * frame_bytes
    for cut in (0, 1, 511, 512, start - 1, start + 1, last, last + frame_bytes - 1):
        path.write_bytes(data[:cut])
        err = outcome(path)
        assert isinstance(err, OpenSimFileError), f"cut at {cut} of {len(data)} bytes loaded"
    path.write_bytes(data[:start + 3 * frame_bytes])
    assert "truncated: the file declares" in outcome(path).reason


def test_a_missing_file_and_a_text_file(tmp_path):
    assert "cannot read file" in outcome(tmp_path / "none.c3d").reason
    (tmp_path / "text.c3d").write_text("PathFileType\t4\t(X/Y/Z)\n" * 40)
    assert "not a C3D file: byte 2 is 0x61, not 0x50" in outcome(tmp_path / "text.c3d").reason

"""Fuzzing the keypoint readers as tests/apps/test_fuzz_readers.py fuzzes the OpenSim ones: whatever
the bytes, read_keypoints returns a sane KeypointTrial or raises KeypointFileError naming the file,
a line within it (or none) and a reason; never another exception, never a hang.

Seeds: Pose2Sim's balancing trial written as MediaPipe JSON, a keypoint CSV, .npy and .npz (as
test_keypoints_readers.py writes them, shorter). Mutations are plain tuples (a failing case
prints as its recipe): truncate, overwrite, insert or delete bytes, replace a number by garbage,
NaN, infinity, huge values or nothing; and random JSON documents built from the format's keys.
"""

from __future__ import annotations

import json
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from solver.keypoints import KeypointFileError, KeypointTrial, read_keypoints
from solver.opensim import OpenSimFileWarning, read_trc
from tests.apps.test_fuzz_readers import TIME_LIMIT, fuzz, n_lines, time_limit

BALANCING = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "markerless_pose2sim" / "balancing_0-100.trc"
needs_data = pytest.mark.skipif(not BALANCING.is_file(), reason="shared/data is not beside the repository")
FRAMES = 6


@lru_cache(maxsize=None)
def seed(kind: str) -> bytes:
    markers = read_trc(BALANCING)
    p = markers.positions[:FRAMES]
    conf = np.linspace(0.3, 1.0, p.shape[0] * p.shape[1]).reshape(p.shape[:2])
    if kind == "json":
        frames = [[{"x": x, "y": y, "z": z, "visibility": v} for (x, y, z), v in zip(p[f].tolist(), conf[f].tolist())]
                  + [{"x": 0.0, "y": 0.0, "z": 0.0, "visibility": 0.0}] * 12 for f in range(FRAMES)]
        return json.dumps({"fps": 60, "frames": frames}, indent=1).encode()
    if kind == "csv":
        lines = ["frame,time," + ",".join(f"{n}_{c}" for n in markers.names for c in ("x", "y", "z", "visibility"))]
        for f in range(FRAMES):
            cells = [str(f), repr(float(markers.time[f]))]
            for k in range(p.shape[1]):
                cells += [repr(float(v)) for v in p[f, k]] + [repr(float(conf[f, k]))]
            lines.append(",".join(cells))
        return ("\n".join(lines) + "\n").encode()
    import io
    out = io.BytesIO()
    full = np.concatenate([p, np.full((FRAMES, 5, 3), np.nan)], axis=1)
    if kind == "npy":
        np.save(out, np.concatenate([full, np.ones((FRAMES, 26, 1))], axis=-1))
    else:
        np.savez(out, keypoints=full, scores=np.ones((FRAMES, 26)), fps=np.array(60.0))
    return out.getvalue()


SUFFIX = {"json": ".json", "csv": ".csv", "npy": ".npy", "npz": ".npz"}
GARBAGE = (b"", b"x", b"nan", b"NaN", b"inf", b"-Infinity", b"1e999", b"1e308", b"-0", b"null", b"true", b'"1"',
           b"[]", b"{}", b",", b"\x00", b"\xff\xfe", b"\r", b"\n\n", b"\xe2\x80\xa8", b"9" * 5000)


def mutate(data: bytes, op) -> bytes:
    kind = op[0]
    if not data:
        return data
    at = min(int(op[1] * len(data)), len(data) - 1)
    if kind == "truncate":
        return data[:at]
    if kind == "byte":
        return data[:at] + bytes([op[2]]) + data[at + 1:]
    if kind == "insert":
        return data[:at] + op[2] + data[at:]
    if kind == "delete":
        return data[:at] + data[at + op[2]:]
    if kind == "number":                          # replace the number starting nearest `at`
        digits = b"0123456789-"
        start = next((i for i in range(at, len(data)) if data[i] in digits), None)
        if start is None:
            return data
        end = start
        while end < len(data) and data[end] in digits + b".eE+":
            end += 1
        return data[:start] + op[2] + data[end:]
    raise ValueError(kind)


OPS = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("byte"), st.floats(0, 1), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.sampled_from(GARBAGE)),
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 200)),
    st.tuples(st.just("number"), st.floats(0, 1), st.sampled_from(GARBAGE)),
)


def sane(trial: KeypointTrial):
    F, K = trial.positions.shape[:2]
    assert F > 0 and K > 0 and len(trial.names) == K and len(set(trial.names)) == K
    assert trial.time.shape == (F,) and np.isfinite(trial.time).all()
    assert np.isfinite(trial.rate) and trial.rate > 0
    assert not np.isinf(trial.positions).any()
    missing = np.isnan(trial.positions)
    assert np.array_equal(missing.any(-1), missing.all(-1)), "a keypoint half missing"
    if trial.confidence is not None:
        assert trial.confidence.shape == (F, K) and np.isfinite(trial.confidence).all()
        assert (trial.confidence >= 0).all()
    w = trial.weights()
    assert np.isfinite(w).all() and not w[missing.any(-1)].any()


def outcome(path: Path, **kwargs):
    """read_keypoints(path) under the time limit: a sane trial, or a KeypointFileError naming the
    file, a line in it (or none) and a reason. Any other exception fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpenSimFileWarning)
        with time_limit(TIME_LIMIT):
            try:
                trial = read_keypoints(path, **kwargs)
            except KeypointFileError as err:
                assert err.path == path and err.reason.strip() and str(err).endswith(err.reason)
                assert err.line is None or 1 <= err.line <= n_lines(path), (err.line, n_lines(path))
                return err
    sane(trial)
    return trial


@needs_data
@pytest.mark.parametrize("kind", sorted(SUFFIX))
def test_the_seeds_load(tmp_path, kind):
    path = tmp_path / f"seed{SUFFIX[kind]}"
    path.write_bytes(seed(kind))
    trial = outcome(path, rate=60)
    assert isinstance(trial, KeypointTrial) and trial.n_frames == FRAMES


@needs_data
@fuzz(300)
@given(st.sampled_from(sorted(SUFFIX)), st.lists(OPS, min_size=1, max_size=4), st.sampled_from([None, 60.0]))
def test_mutated_files(tmp_path_factory, kind, ops, rate):
    data = seed(kind)
    for op in ops:
        data = mutate(data, op)
    path = tmp_path_factory.mktemp("fuzz") / f"mutated{SUFFIX[kind]}"
    path.write_bytes(data)
    outcome(path, rate=rate)


JSON_KEYS = ("frames", "fps", "rate", "pose_world_landmarks", "landmark", "landmarks", "x", "y", "z", "visibility")
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.sampled_from(JSON_KEYS), inner, max_size=5),
    max_leaves=60)


@fuzz(300)
@given(JSON_VALUES, st.sampled_from([None, 30.0]))
def test_random_json_documents(tmp_path_factory, doc, rate):
    path = tmp_path_factory.mktemp("fuzz") / "random.json"
    path.write_text(json.dumps(doc))
    outcome(path, rate=rate)


@fuzz(200)
@given(st.sampled_from(sorted(SUFFIX)), st.binary(max_size=300))
def test_random_bytes(tmp_path_factory, kind, data):
    path = tmp_path_factory.mktemp("fuzz") / f"random{SUFFIX[kind]}"
    path.write_bytes(data)
    outcome(path, rate=30)

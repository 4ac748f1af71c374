"""Fuzzing the OpenSim file readers (issue 7, item 3): .trc, .mot/.sto, the IK setup and task-set
XML, and .osim models.

The contract under test: whatever the bytes, a reader either returns something sane (finite where
it must be, shapes consistent) or raises OpenSimFileError naming the file, the line (unless the
problem belongs to the whole file, see WHOLE_FILE) and a reason. Never another exception, never a
hang (each case runs under a time limit).

The inputs are the real gait2354 files, read in place from shared/data and never copied into the
repository, put through mutations that are plain tuples, so a failing case prints as a recipe:

* lines: delete, duplicate, swap, insert; truncate anywhere; replace one number (or word) by
  garbage, NaN, infinity, huge or tiny values or nothing; drop or duplicate a tab column;
  insert or overwrite raw bytes (invalid UTF-8, NUL, BOMs, odd line breaks);
* headers: set or drop NumFrames, NumMarkers, Units, DataRate (.trc), nRows, nColumns,
  datarows, datacolumns, inDegrees (.mot/.sto) to wrong counts, units and garbage;
* XML text: drop, swap, duplicate or rename tags (unclosed tags, wrong nesting), replace the text
  after a tag, set attributes to garbage or 100 kB values, nest thousands of elements, expand
  entities, declare encodings Python cannot decode, add stray closing tags and comments after
  the document;
* XML elements: remove, duplicate, move, rename, wrap, set text and attributes; for the setup
  and task files also the fields the IK tool reads (time_range, accuracy, weights, values, the
  task file's name, task names);
* .osim models, still well-formed XML: point parents, sockets, markers and transform axes at the
  wrong names (missing parents, cycles, unknown coordinates), break number lists (spline x and y
  of different lengths, x not increasing, zero-length and NaN axes, huge values), change joint
  and function types, repeat names, chain MultiplierFunctions thousands deep.

A hand-written OpenSim 4 model (ARM4 below) covers the JointSet layout, and fully random text,
token soup and bytes go to every reader as well. At the end, FOUND lists a minimal input for each
fault the fuzzing found in the readers (all fixed).

CI runs a bounded, derandomized number of cases per test (the numbers in @fuzz(...)).
ITASC_FUZZ_EXAMPLES=2000 runs that many per test instead; ITASC_FUZZ_RANDOM=1 draws new cases on
every run rather than the same ones.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import warnings
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from solver.opensim import (OpenSimFileError, OpenSimFileWarning, load_osim, read_ik_setup, read_ik_task_set,
                            read_storage, read_trc)
from solver.opensim._xml import parse_bytes
from solver.opensim.setup import VALUE_TYPES
from solver.opensim.trc import UNIT_SCALE

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "opensim_gait2354"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared/data/opensim_gait2354 is not beside the repository")
TRC = "subject01_synthetic_marker_data.trc"
MOT = "std_subject01_walk1_ik.mot"
SETUPS = ("subject01_Setup_InverseKinematics.xml", "subject01_Setup_InverseKinematics_NoModel.xml")
TASKS = ("gait2354_IK_Tasks_uniform.xml", "gait2354_IK_Tasks.xml")
OSIM = "subject01_simbody.osim"

EXAMPLES = int(os.environ.get("ITASC_FUZZ_EXAMPLES") or 0)
RANDOM = bool(os.environ.get("ITASC_FUZZ_RANDOM"))
TIME_LIMIT = 10.0        # seconds per case; the slowest case takes about 0.2 s


def fuzz(ci_examples: int):
    """Hypothesis settings: `ci_examples` cases (or ITASC_FUZZ_EXAMPLES), same cases every run."""
    return settings(max_examples=EXAMPLES or ci_examples, deadline=None, derandomize=not RANDOM,
                    database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------------------------ the oracle

# Reasons that belong to the whole file, not to one line: only these may come without a line.
WHOLE_FILE = ("cannot read file", "too short for a .trc file", "no 'endheader' line", "no XML element in the file")
LINE_BREAK = re.compile(rb"\r\n|\r|\n")


class ReaderHang(Exception):
    pass


@contextmanager
def time_limit(seconds: float):
    """Raise ReaderHang in the reader after `seconds` (where SIGALRM exists, main thread only)."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise ReaderHang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def n_lines(path: Path) -> int:
    """Lines in the file as an editor counts them (\\n, \\r\\n and \\r end a line)."""
    return len(LINE_BREAK.split(path.read_bytes()))


def check_error(err: OpenSimFileError, files: dict):
    """`err` names one of `files` ({resolved path: line count}), a line in it, and a reason."""
    assert err.path is not None and err.path.resolve() in files, f"{err} names no input file"
    text = str(err)
    assert str(err.path) in text
    assert isinstance(err.reason, str) and err.reason.strip() and text.endswith(err.reason)
    if err.line is None:
        assert err.reason.startswith(WHOLE_FILE), f"no line number for {err.reason!r}"
    else:
        assert type(err.line) is int and 1 <= err.line <= files[err.path.resolve()], \
            f"line {err.line} of a {files[err.path.resolve()]}-line file: {err.reason}"
        assert f", line {err.line}: " in text


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:                 # a name too long for the file system
        return False


def outcome(read, path: Path, sane, others=()):
    """read(path) under the time limit: the result, checked with sane(result), or the
    OpenSimFileError, checked with check_error. Any other exception fails the test."""
    files = {p.resolve(): n_lines(p) for p in (path, *others) if _is_file(p)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpenSimFileWarning)
        with time_limit(TIME_LIMIT):
            try:
                result = read(path)
            except OpenSimFileError as err:
                check_error(err, files)
                if currently_in_test_context():
                    event("error: " + re.sub(r"'[^']*'|\"[^\"]*\"|<[^>]*>|-?\d[\w.+-]*", "_", err.reason)[:50])
                return err
    sane(result)
    if currently_in_test_context():
        event("loaded")
    return result


def _names_ok(names):
    assert all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names), names


def sane_markers(d):
    F, M = d.time.shape[0], len(d.names)
    _names_ok(d.names)
    assert d.time.shape == (F,) and d.positions.shape == (F, M, 3) and d.frame_numbers.shape == (F,)
    assert np.all(np.isfinite(d.time)) and np.all(np.diff(d.time) > 0)
    assert not np.any(np.isinf(d.positions)), "infinite marker position"
    missing = np.isnan(d.positions)
    assert np.array_equal(missing.any(-1), missing.all(-1)), "a marker half missing"
    assert np.isfinite(d.data_rate) and d.data_rate > 0 and np.isfinite(d.camera_rate) and d.camera_rate > 0
    assert d.units.lower() in UNIT_SCALE


def sane_storage(s):
    _names_ok(s.labels)
    assert s.data.dtype == float and s.data.shape == (s.n_rows, len(s.labels))
    assert not np.any(np.isinf(s.data)), "infinite value"
    assert np.all(np.isfinite(s.time)), "time not finite"
    assert s.in_degrees in (None, True, False) and isinstance(s.degrees, bool)


def sane_task_set(t):
    for kind in (t.marker_tasks, t.coordinate_tasks):
        _names_ok([task.name for task in kind])
        for task in kind:
            assert isinstance(task.apply, bool) and np.isfinite(task.weight) and task.weight >= 0
    for task in t.coordinate_tasks:
        assert task.value_type in VALUE_TYPES and np.isfinite(task.value)


def sane_setup(s):
    lo, hi = s.time_range
    assert not (np.isnan(lo) or np.isnan(hi)) and lo <= hi
    assert np.isfinite(s.accuracy) and s.accuracy > 0
    assert s.constraint_weight >= 0
    assert isinstance(s.report_errors, bool) and isinstance(s.report_marker_locations, bool)
    for f in (s.model_file, s.marker_file, s.coordinate_file, s.output_motion_file, s.results_directory):
        assert f is None or (isinstance(f, Path) and f.is_absolute())
    sane_task_set(s.tasks)


def sane_model(om):
    c = om.coupling
    _names_ok(c.names)
    assert len(om.model.segments) == len(om.source.bodies)
    assert np.all(np.isfinite(c.default))
    assert not np.any(np.isnan(c.range_lower) | np.isnan(c.range_upper)) and np.all(c.range_lower <= c.range_upper)
    for seg in om.model.segments:
        assert np.all(np.isfinite(seg.rest))
        for j in seg.joints:
            assert np.all(np.isfinite(j.axis)) and abs(np.linalg.norm(j.axis) - 1) < 1e-12
    M = len(om.markers.names)
    assert om.markers.locations.shape == (M, 3) and np.all(np.isfinite(om.markers.locations))
    q = c.default_coordinates(1)
    with np.errstate(all="ignore"):
        assert np.all(np.isfinite(c.dofs(q))) and np.all(np.isfinite(c.jacobian(q)))
        assert np.all(np.isfinite(om.body_frames(q)))
        assert om.marker_positions(q).shape == (1, M, 3) and np.all(np.isfinite(om.marker_positions(q)))


# ----------------------------------------------------------------------------------- the inputs

@lru_cache(maxsize=None)
def real(name: str) -> bytes:
    return (DATA / name).read_bytes()


@lru_cache(maxsize=None)
def gait_kinematics() -> bytes:
    """The gait model without its muscles (the readers skip the ForceSet; 60% of the file)."""
    return re.sub(rb"<ForceSet>.*?</ForceSet>", b"<ForceSet/>", real(OSIM), flags=re.S)


ARM4 = b"""<?xml version="1.0" encoding="UTF-8" ?>
<OpenSimDocument Version="40000">
  <Model name="arm4">
    <Ground name="ground"/>
    <length_units>meters</length_units>
    <BodySet name="bodyset">
      <objects>
        <Body name="upper"><mass>2</mass><mass_center>0 -0.15 0</mass_center></Body>
        <Body name="fore">
          <mass>1.2</mass><mass_center>0 -0.12 0</mass_center>
          <components>
            <PhysicalOffsetFrame name="wrist">
              <socket_parent>..</socket_parent>
              <translation>0 -0.25 0</translation>
              <orientation>0 0 0.2</orientation>
            </PhysicalOffsetFrame>
          </components>
        </Body>
        <Body name="hand"><mass>0.4</mass></Body>
        <Body name="finger"><mass>0.05</mass></Body>
      </objects>
    </BodySet>
    <JointSet name="jointset">
      <objects>
        <BallJoint name="shoulder">
          <socket_parent_frame>ground_offset</socket_parent_frame>
          <socket_child_frame>upper</socket_child_frame>
          <coordinates>
            <Coordinate name="sh_x"><default_value>0.1</default_value><range>-1 1</range></Coordinate>
            <Coordinate name="sh_y"><range>-1.5 1.5</range><clamped>true</clamped></Coordinate>
            <Coordinate name="sh_z"><default_value>-0.2</default_value><locked>true</locked></Coordinate>
          </coordinates>
          <frames>
            <PhysicalOffsetFrame name="ground_offset">
              <socket_parent>/ground</socket_parent>
              <translation>0 1.4 0</translation>
              <orientation>0 0 0</orientation>
            </PhysicalOffsetFrame>
          </frames>
        </BallJoint>
        <CustomJoint name="elbow">
          <socket_parent_frame>upper_offset</socket_parent_frame>
          <socket_child_frame>fore_offset</socket_child_frame>
          <coordinates>
            <Coordinate name="elbow_flex"><default_value>0.3</default_value><range>0 2.5</range></Coordinate>
          </coordinates>
          <frames>
            <PhysicalOffsetFrame name="upper_offset">
              <socket_parent>../../../bodyset/upper</socket_parent>
              <translation>0 -0.3 0</translation>
            </PhysicalOffsetFrame>
            <PhysicalOffsetFrame name="fore_offset">
              <socket_parent>/bodyset/fore</socket_parent>
              <translation>0 0.01 0</translation>
              <orientation>0.05 0 0</orientation>
            </PhysicalOffsetFrame>
          </frames>
          <SpatialTransform>
            <TransformAxis name="rotation1">
              <coordinates>elbow_flex</coordinates>
              <axis>0 0 1</axis>
              <LinearFunction name="function"><coefficients>1 0</coefficients></LinearFunction>
            </TransformAxis>
            <TransformAxis name="rotation2">
              <coordinates></coordinates>
              <axis>0 1 0</axis>
              <Constant name="function"><value>0</value></Constant>
            </TransformAxis>
            <TransformAxis name="rotation3">
              <coordinates>elbow_flex</coordinates>
              <axis>1 0 0</axis>
              <SimmSpline name="function"><x>0 0.8 1.6 2.5</x><y>0 0.05 0.08 0.1</y></SimmSpline>
            </TransformAxis>
            <TransformAxis name="translation1">
              <coordinates>elbow_flex</coordinates>
              <axis>1 0 0</axis>
              <MultiplierFunction name="function">
                <function><NaturalCubicSpline><x>0 1 1.7 2.5</x><y>0 0.002 0.003 0.001</y></NaturalCubicSpline></function>
                <scale>1.1</scale>
              </MultiplierFunction>
            </TransformAxis>
            <TransformAxis name="translation2">
              <coordinates>elbow_flex</coordinates>
              <axis>0 1 0</axis>
              <PolynomialFunction name="function"><coefficients>0.001 -0.002 0</coefficients></PolynomialFunction>
            </TransformAxis>
            <TransformAxis name="translation3">
              <coordinates>elbow_flex</coordinates>
              <axis>0 0 1</axis>
              <PiecewiseLinearFunction name="function"><x>0 1 2.5</x><y>0 0.004 0.001</y></PiecewiseLinearFunction>
            </TransformAxis>
          </SpatialTransform>
        </CustomJoint>
        <UniversalJoint name="wrist">
          <socket_parent_frame>/bodyset/fore/wrist</socket_parent_frame>
          <socket_child_frame>/bodyset/hand</socket_child_frame>
          <coordinates>
            <Coordinate name="wr_dev"><range>-0.5 0.5</range></Coordinate>
            <Coordinate name="wr_flex"><default_value>0.2</default_value></Coordinate>
          </coordinates>
        </UniversalJoint>
        <SliderJoint name="reach">
          <socket_parent_frame>/bodyset/hand</socket_parent_frame>
          <socket_child_frame>/bodyset/finger</socket_child_frame>
          <coordinates><Coordinate name="slide"><motion_type>translational</motion_type></Coordinate></coordinates>
        </SliderJoint>
      </objects>
    </JointSet>
    <MarkerSet name="markerset">
      <objects>
        <Marker name="SHO"><socket_parent_frame>/bodyset/upper</socket_parent_frame><location>0 0.02 0</location></Marker>
        <Marker name="ELB"><socket_parent_frame>/bodyset/fore</socket_parent_frame><location>0.03 0 0</location></Marker>
        <Marker name="WRI"><socket_parent_frame>/bodyset/fore/wrist</socket_parent_frame><location>0 0 0.02</location><fixed>true</fixed></Marker>
        <Marker name="TIP"><socket_parent_frame>/bodyset/finger</socket_parent_frame><location>0 -0.04 0</location></Marker>
        <Marker name="LAB"><socket_parent_frame>/ground</socket_parent_frame><location>1 0 0</location></Marker>
      </objects>
    </MarkerSet>
  </Model>
</OpenSimDocument>
"""


def osim_seed(which: str) -> bytes:
    return ARM4 if which == "arm4" else gait_kinematics()


# -------------------------------------------------------------------------------- the mutations

GARBAGE = ("", " ", "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "-Infinity", "1e999", "-1e999", "1e308",
           "-1e308", "1.7976931348623157e308", "5e-324", "1e-320", "0", "-0", "-1", "1", "2", "9" * 400,
           "4294967297", "x", "1.2.3", "0x1F", "1_000", "1e", "e5", "--1", "+", ".", "\u0661\u0662", "true",
           "\x00", "\ufffd", "\u00a0", "\u2028", "\x0c", "\t", "NULL", "1,5")
RAW = (b"\x00", b"\xff", b"\xfe\xff", b"\xff\xfe", b"\xef\xbb\xbf", b"\xc3", b"\xc3\x28", b"\xed\xa0\x80",
       b"\xf4\x90\x80\x80", b"\r", b"\r\n", b"\n\n", b"\x0b", b"\x0c", b"\x1c", b"\xc2\x85", b"\xe2\x80\xa8",
       b"\t", b"<", b">", b"&", b"]]>", b"\x1a", b"\x80" * 64)
COUNTS = ("0", "1", "2", "-1", "3", "23", "24", "25", "30", "31", "32", "72", "73", "74", "1e12", "1e999", "nan",
          "-inf", "2.5", "1e-3", "4294967297", "9" * 40)

index = st.one_of(st.integers(0, 12), st.integers(0, 1 << 16))        # biased to headers
position = st.integers(0, 1 << 20)
garbage = st.one_of(st.sampled_from(GARBAGE), st.text(max_size=12))
raw = st.one_of(st.sampled_from(RAW), st.binary(min_size=1, max_size=16))

LINE_OPS = st.one_of(
    st.tuples(st.just("delete"), index),
    st.tuples(st.just("duplicate"), index),
    st.tuples(st.just("swap"), index, index),
    st.tuples(st.just("insert"), index, garbage),
    st.tuples(st.just("truncate"), position),
    st.tuples(st.just("token"), index, st.one_of(st.integers(0, 3), st.integers(0, 80)), garbage),
    st.tuples(st.just("drop_column"), st.integers(0, 80), index),
    st.tuples(st.just("dup_column"), st.integers(0, 80), index),
    st.tuples(st.just("bytes"), position, raw),
    st.tuples(st.just("overwrite"), position, raw),
)
TRC_KEYS = ("DataRate", "CameraRate", "NumFrames", "NumMarkers", "Units", "OrigDataRate")
TRC_OPS = st.one_of(
    LINE_OPS,
    st.tuples(st.just("trc_header"), st.sampled_from(TRC_KEYS),
              st.one_of(st.sampled_from(COUNTS), st.sampled_from(("mm", "cm", "m", "M", "inches", "")), garbage)),
    st.tuples(st.just("trc_drop_key"), st.sampled_from(TRC_KEYS)),
)
MOT_KEYS = ("nRows", "nColumns", "datarows", "datacolumns", "inDegrees", "version", "range", "name")
MOT_OPS = st.one_of(
    LINE_OPS,
    st.tuples(st.just("mot_header"), st.sampled_from(MOT_KEYS),
              st.one_of(st.sampled_from(COUNTS), st.sampled_from(("yes", "no", "maybe", "")), garbage)),
)

ENCODINGS = ("UTF-8", "utf-16", "UTF-32", "latin-1", "cp1252", "ascii", "cp037", "utf-7", "shift_jis", "bogus",
             "rot13", "base64", "idna", "undefined", "punycode", "", "x" * 1000)
NESTING = ("objects", "a", "Body", "Model", "function", "MultiplierFunction", "IKTaskSet", "OpenSimDocument")
XML_TEXT_OPS = st.one_of(
    st.tuples(st.just("drop_tag"), st.integers(0, 1 << 16)),
    st.tuples(st.just("swap_tags"), st.integers(0, 1 << 16), st.integers(0, 1 << 16)),
    st.tuples(st.just("dup_tag"), st.integers(0, 1 << 16)),
    st.tuples(st.just("rename_tag"), st.integers(0, 1 << 16), st.sampled_from(NESTING + ("", "1x", "a:b", "x y"))),
    st.tuples(st.just("text"), st.integers(0, 1 << 16), garbage, st.booleans()),
    st.tuples(st.just("attr"), st.integers(0, 1 << 16),
              st.one_of(garbage, st.sampled_from(("x" * 100_000, "9" * 5000, '"', "<", "&", "../.."))), st.booleans()),
    st.tuples(st.just("deep"), st.integers(0, 1 << 16), st.sampled_from(NESTING), st.sampled_from((2, 50, 1100, 20_000))),
    st.tuples(st.just("entities"), st.integers(1, 12)),
    st.tuples(st.just("encoding"), st.sampled_from(ENCODINGS)),
    st.tuples(st.just("tail"), st.sampled_from((0, 2, 30, 5000)), st.sampled_from((b"", b"x", b"<", b"</a>"))),
)

TEXTS = ("", "0", "-1", "1 2", "0 0 0", "1 2 3 4", "nan nan nan", "1e308 1e308 1e308", "-1 1", "1 -1", "true",
         "false", "maybe", "..", "/", "x" * 100_000, " ".join(["1"] * 5000), "default_value", "manual_value")
TREE_OPS = st.one_of(
    st.tuples(st.just("remove"), st.integers(0, 1 << 16)),
    st.tuples(st.just("duplicate"), st.integers(0, 1 << 16)),
    st.tuples(st.just("move"), st.integers(0, 1 << 16), st.integers(0, 1 << 16)),
    st.tuples(st.just("set_text"), st.integers(0, 1 << 16), st.one_of(st.sampled_from(TEXTS), garbage)),
    st.tuples(st.just("rename"), st.integers(0, 1 << 16), st.integers(0, 1 << 16)),
    st.tuples(st.just("wrap"), st.integers(0, 1 << 16), st.sampled_from(NESTING)),
    st.tuples(st.just("set_attr"), st.integers(0, 1 << 16), st.sampled_from(("name", "file", "Version")),
              st.one_of(st.sampled_from(("", "x" * 100_000, "9" * 5000, "../..", "/", "1e5")), garbage)),
)

DROPPABLE = ("Body", "Coordinate", "Marker", "TransformAxis", "PhysicalOffsetFrame", "SpatialTransform",
             "CoordinateSet", "BodySet", "JointSet", "Ground", "Joint", "parent_body", "axis", "function", "x", "y",
             "coordinates", "socket_parent_frame", "socket_child_frame", "socket_parent", "objects", "Model")
REF_TAGS = ("parent_body", "body", "coordinates", "socket_parent", "socket_parent_frame", "socket_child_frame")
NUMBER_TAGS = ("x", "y", "axis", "location", "orientation", "location_in_parent", "orientation_in_parent",
               "translation", "range", "default_value", "coefficients", "value", "scale", "mass_center", "mass")
NUMBER_EDITS = ("drop_one", "add_one", "zero", "nan_one", "inf_one", "huge", "tiny", "reverse", "repeat_first",
                "empty", "single", "word")
JOINT_TAGS = ("CustomJoint", "PinJoint", "SliderJoint", "WeldJoint", "BallJoint", "GimbalJoint", "UniversalJoint",
              "FreeJoint", "PlanarJoint", "EllipsoidJoint")
FUNCTION_TAGS = ("Constant", "LinearFunction", "PolynomialFunction", "MultiplierFunction", "PiecewiseLinearFunction",
                 "SimmSpline", "NaturalCubicSpline", "GCVSpline", "StepFunction")
NAMED = ("Body", "Coordinate", "Marker", "TransformAxis", "PhysicalOffsetFrame", "CustomJoint", "Ground")
MODEL_OPS = st.one_of(
    st.tuples(st.just("ref"), st.integers(0, 1 << 16), st.integers(0, 1 << 16),
              st.sampled_from(("name", "path", "up", "unknown", "two", "empty", "self"))),
    st.tuples(st.just("numbers"), st.integers(0, 1 << 16), st.sampled_from(NUMBER_TAGS), st.sampled_from(NUMBER_EDITS)),
    st.tuples(st.just("joint_type"), st.integers(0, 1 << 16), st.sampled_from(JOINT_TAGS)),
    st.tuples(st.just("function_type"), st.integers(0, 1 << 16), st.sampled_from(FUNCTION_TAGS)),
    st.tuples(st.just("same_name"), st.sampled_from(NAMED), st.integers(0, 1 << 16), st.integers(0, 1 << 16)),
    st.tuples(st.just("deep_function"), st.integers(0, 1 << 16), st.sampled_from((3, 200, 1100, 5000))),
    st.tuples(st.just("flag"), st.integers(0, 1 << 16), st.sampled_from(("reverse", "locked", "clamped", "fixed")),
              st.sampled_from(("true", "false", "maybe", ""))),
    st.tuples(st.just("reparent"), st.integers(0, 1 << 16), st.integers(0, 1 << 16)),
    st.tuples(st.just("drop"), st.sampled_from(DROPPABLE), st.integers(0, 1 << 16)),
)

SETUP_FIELDS = ("model_file", "marker_file", "coordinate_file", "output_motion_file", "results_directory",
                "time_range", "accuracy", "constraint_weight", "report_errors", "report_marker_locations", "weight",
                "apply", "value_type", "value")
FIELD_TEXTS = TEXTS + ("0.4 1.6", "1.6 0.4", "inf inf", "-inf inf", "nan 1", "1e-300", "Infinity", "from_file", "-0")
TASK_FILES = ("", " ", "nope.xml", "x" * 300, "../" * 40 + "no_such_folder/t.xml", ".", "/", "gait2354_IK_Tasks.xml",
              "setup.xml", "tasks.xml", "\u00e9.xml", "a/" * 200 + "b.xml")
SETUP_OPS = st.one_of(
    st.tuples(st.just("field"), st.sampled_from(SETUP_FIELDS), st.integers(0, 1 << 16),
              st.one_of(st.sampled_from(FIELD_TEXTS), garbage)),
    st.tuples(st.just("task_file"), st.sampled_from(TASK_FILES)),
    st.tuples(st.just("task_name"), st.integers(0, 1 << 16), st.one_of(st.sampled_from(("", "x" * 100_000)), garbage)),
)


def ops(kinds, max_size=4):
    return st.lists(kinds, min_size=1, max_size=max_size)


def _pick(seq, i):
    return seq[i % len(seq)] if seq else None


def _text(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


def apply_line_op(data: bytes, op) -> bytes:
    kind = op[0]
    if kind == "truncate":
        return data[:op[1] % (len(data) + 1)]
    if kind in ("bytes", "overwrite"):
        at = op[1] % (len(data) + 1)
        return data[:at] + op[2] + data[at + (len(op[2]) if kind == "overwrite" else 0):]
    lines = data.split(b"\n")
    n = len(lines)
    if kind == "delete":
        del lines[op[1] % n]
    elif kind == "duplicate":
        i = op[1] % n
        lines.insert(i, lines[i])
    elif kind == "swap":
        i, j = op[1] % n, op[2] % n
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "insert":
        lines.insert(op[1] % (n + 1), _text(op[2]))
    elif kind == "token":
        i = op[1] % n
        parts = re.split(rb"([\t ]+)", lines[i])
        words = [k for k in range(0, len(parts), 2) if parts[k]]
        if words:
            parts[_pick(words, op[2])] = _text(op[3])
            lines[i] = b"".join(parts)
    elif kind in ("drop_column", "dup_column"):
        for i in range(op[2] % n, n):
            cells = lines[i].split(b"\t")
            k = op[1] % len(cells)
            if kind == "drop_column":
                del cells[k]
            else:
                cells.insert(k, cells[k])
            lines[i] = b"\t".join(cells)
    else:
        raise AssertionError(op)
    return b"\n".join(lines)


def apply_trc_op(data: bytes, op) -> bytes:
    if op[0] not in ("trc_header", "trc_drop_key"):
        return apply_line_op(data, op)
    lines = data.split(b"\n")
    lines += [b""] * (3 - len(lines))
    keys, values = lines[1].rstrip(b"\r").split(b"\t"), lines[2].rstrip(b"\r").split(b"\t")
    key = op[1].encode()
    if op[0] == "trc_drop_key":
        if key in keys:
            k = keys.index(key)
            del keys[k]
            if k < len(values):
                del values[k]
    else:
        if key not in keys:
            keys.append(key)
        k = keys.index(key)
        values += [b""] * (k + 1 - len(values))
        values[k] = _text(op[2])
    lines[1], lines[2] = b"\t".join(keys), b"\t".join(values)
    return b"\n".join(lines)


def apply_mot_op(data: bytes, op) -> bytes:
    if op[0] != "mot_header":
        return apply_line_op(data, op)
    lines = data.split(b"\n")
    key, value = op[1].encode(), _text(op[2])
    for i, line in enumerate(lines):
        if line.strip().lower() == b"endheader":
            break
        if line.startswith(key + b"="):
            lines[i] = key + b"=" + value
            return b"\n".join(lines)
        if line.startswith(key + b" ") or line.startswith(key + b"\t"):
            lines[i] = key + b" " + value
            return b"\n".join(lines)
    lines.insert(1, key + b"=" + value)
    return b"\n".join(lines)


TAG = re.compile(rb"<[^<>]*>")


def _escape(s: str) -> bytes:
    return _text(s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"))


def apply_xml_op(data: bytes, op) -> bytes:
    kind = op[0]
    if kind in ("delete", "duplicate", "swap", "insert", "truncate", "token", "drop_column", "dup_column",
                "bytes", "overwrite"):
        return apply_line_op(data, op)
    if kind == "tail":           # after the document: a stray closing tag, comments, maybe junk
        return data.rstrip() + b"\n</Stray>" + b"<!-- c -->" * op[1] + op[2]
    if kind == "encoding":
        declaration = b'<?xml version="1.0" encoding="%s"?>' % op[1].encode()
        old = re.match(rb"\s*<\?xml[^>]*\?>", data)
        return declaration + (data[old.end():] if old else b"\n" + data)
    if kind == "entities":
        defs = b'<!ENTITY e0 "lol">' + b"".join(b"<!ENTITY e%d \"%s\">" % (k, b"&e%d;" % (k - 1) * 10)
                                                for k in range(1, op[1] + 1))
        decl = re.match(rb"\s*<\?xml[^>]*\?>", data)
        at = decl.end() if decl else 0
        data = data[:at] + b"<!DOCTYPE r [" + defs + b"]>" + data[at:]
        first = next((m for m in TAG.finditer(data, at) if not m.group().startswith((b"<!", b"<?", b"</"))), None)
        if first is not None:
            data = data[:first.end()] + b"&e%d;" % op[1] + data[first.end():]
        return data
    tags = [m for m in TAG.finditer(data) if not data.startswith((b"<?", b"<!"), m.start())]
    if not tags:
        return data
    m = _pick(tags, op[1])
    s, e = m.span()
    if kind == "drop_tag":
        return data[:s] + data[e:]
    if kind == "dup_tag":
        return data[:e] + m.group() + data[e:]
    if kind == "swap_tags":
        m2 = _pick(tags, op[2])
        if m2.start() == s:
            return data
        a, b = sorted((m, m2), key=lambda t: t.start())
        return data[:a.start()] + b.group() + data[a.end():b.start()] + a.group() + data[b.end():]
    if kind == "rename_tag":
        return data[:s] + re.sub(rb"^(</?)[^\s/>]*", lambda g: g.group(1) + op[2].encode(), m.group()) + data[e:]
    if kind == "text":
        end = data.find(b"<", e)
        end = len(data) if end < 0 else end
        return data[:e] + (_escape(op[2]) if op[3] else _text(op[2])) + data[end:]
    if kind == "attr":
        value = _escape(op[2]) if op[3] else _text(op[2])
        tag = m.group()
        if tag.startswith(b"</"):
            return data
        if re.search(rb'="[^"]*"', tag):
            tag = re.sub(rb'="[^"]*"', lambda g: b'="' + value + b'"', tag, count=1)
        else:
            tag = re.sub(rb"^(<[^\s/>]*)", lambda g: g.group(1) + b' name="' + value + b'"', tag)
        return data[:s] + tag + data[e:]
    if kind == "deep":
        name, n = op[2].encode(), op[3]
        return data[:e] + b"<%s>" % name * n + b"</%s>" % name * n + data[e:]
    raise AssertionError(op)


def _tree(data: bytes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpenSimFileWarning)
        return parse_bytes(data)


def _serialize(root) -> bytes:
    return b'<?xml version="1.0" encoding="UTF-8" ?>\n' + ET.tostring(root, encoding="utf-8", xml_declaration=False)


def _elements(root):
    parent = {c: p for p in root.iter() for c in p}
    return [e for e in root.iter() if e is not root], parent


def apply_tree_op(root, op):
    elements, parent = _elements(root)
    if not elements:
        return
    e = _pick(elements, op[1])
    kind = op[0]
    if kind == "remove":
        parent[e].remove(e)
    elif kind == "duplicate":
        p = parent[e]
        p.insert(list(p).index(e) + 1, _copy(e))
    elif kind == "move":
        target = _pick(elements + [root], op[2])
        if target is e or target in set(e.iter()):
            return
        parent[e].remove(e)
        target.append(e)
    elif kind == "set_text":
        e.text = op[2]
    elif kind == "rename":
        e.tag = _pick(sorted({x.tag for x in elements}), op[2])
    elif kind == "wrap":
        p = parent[e]
        i = list(p).index(e)
        p.remove(e)
        w = ET.Element(op[2])
        w.append(e)
        p.insert(i, w)
    elif kind == "set_attr":
        e.set(op[2], op[3])
    else:
        raise AssertionError(op)


def _copy(e):
    out = ET.Element(e.tag, dict(e.attrib))
    out.text, out.tail = e.text, e.tail
    for c in e:
        out.append(_copy(c))
    return out


def _all(root, tags):
    return [e for e in root.iter() if e.tag in tags]


def _joints(root):
    holders = [*_all(root, ("Joint",)), *[o for js in _all(root, ("JointSet",)) for o in js.iter("objects")]]
    return [j for h in holders for j in h if j.tag not in ("objects", "groups")]


def apply_model_op(root, op):
    """Model-level edits that keep the XML well-formed (see the module docstring)."""
    kind = op[0]
    names = sorted({e.get("name") for e in root.iter() if e.get("name")})
    if kind == "ref":
        e = _pick(_all(root, REF_TAGS), op[1])
        if e is None:
            return
        name = _pick(names, op[2]) or "x"
        e.text = {"name": name, "path": f"/bodyset/{name}", "up": f"../../{name}", "unknown": "no_such_thing",
                  "two": f"{name} {name}", "empty": "", "self": "."}[op[3]]
    elif kind == "numbers":
        e = _pick(_all(root, (op[2],)), op[1])
        if e is None:
            return
        v = (e.text or "").split() or ["0"]
        edit = op[3]
        v = {"drop_one": v[:-1], "add_one": v + ["0.5"], "zero": ["0"] * len(v), "nan_one": ["nan"] + v[1:],
             "inf_one": v[:-1] + ["inf"], "huge": ["1e308"] * len(v), "tiny": ["1e-310"] * len(v),
             "reverse": v[::-1], "repeat_first": [v[0]] * len(v), "empty": [], "single": v[:1],
             "word": v[:-1] + ["twelve"]}[edit]
        e.text = " ".join(v)
    elif kind == "joint_type":
        j = _pick(_joints(root), op[1])
        if j is not None:
            j.tag = op[2]
    elif kind == "function_type":
        axes = _all(root, ("TransformAxis", "MultiplierFunction"))
        a = _pick(axes, op[1])
        f = None if a is None else next((c for c in a.iter() if c is not a and c.tag in FUNCTION_TAGS), None)
        if f is not None:
            f.tag = op[2]
    elif kind == "same_name":
        named = _all(root, (op[1],))
        a, b = _pick(named, op[2]), _pick(named, op[3])
        if a is not None and b.get("name") is not None:
            a.set("name", b.get("name"))
    elif kind == "deep_function":
        a = _pick(_all(root, ("TransformAxis",)), op[1])
        if a is None:
            return
        for c in list(a):
            if c.tag == "function" or c.tag in FUNCTION_TAGS:
                a.remove(c)
        a.append(ET.Element("DEEPFUNCTION", n=str(op[2])))
    elif kind == "reparent":
        bodies = [b.get("name") for b in _all(root, ("Body",)) if b.get("name")]
        refs = _all(root, ("parent_body",)) or [j.find("socket_parent_frame") for j in _joints(root)]
        e = _pick([r for r in refs if r is not None], op[1])
        if e is not None and bodies:
            name = _pick(bodies, op[2])
            e.text = name if e.tag == "parent_body" else f"/bodyset/{name}"
    elif kind == "drop":
        elements, parent = _elements(root)
        e = _pick([x for x in elements if x.tag == op[1]], op[2])
        if e is not None:
            parent[e].remove(e)
    elif kind == "flag":
        holders = _joints(root) if op[2] == "reverse" else _all(root, ("Marker",) if op[2] == "fixed" else ("Coordinate",))
        h = _pick(holders, op[1])
        if h is not None:
            f = next((c for c in h if c.tag == op[2]), None)
            if f is None:
                f = ET.SubElement(h, op[2])
            f.text = op[3]
    else:
        apply_tree_op(root, op)


def apply_setup_op(root, op):
    """Edits of the fields the IK tool reads (see SETUP_FIELDS), its task file and task names."""
    tool = next((e for e in root.iter() if e.tag in ("InverseKinematicsTool", "InverseKinemtaticsTool")), root)
    tasks = _all(root, ("IKMarkerTask", "IKCoordinateTask"))
    if op[0] == "field":
        found = _all(root, (op[1],))
        e = _pick(found, op[2])
        if e is None:
            e = ET.SubElement(_pick(tasks, op[2]) if op[1] in ("weight", "apply", "value_type", "value") and tasks
                              else tool, op[1])
        e.text = op[3]
    elif op[0] == "task_file":
        holder = next(iter(_all(root, ("IKTaskSet",))), None)
        if holder is None:
            holder = ET.SubElement(tool, "IKTaskSet")
        holder.set("file", op[1])
    elif op[0] == "task_name":
        e = _pick(tasks, op[1])
        if e is not None:
            e.set("name", op[2])
    else:
        apply_tree_op(root, op)


def _deep_functions(data: bytes) -> bytes:
    def chain(m):
        n = int(m.group(1))
        return b"<MultiplierFunction><scale>1</scale>" * n + b"<Constant><value>0.1</value></Constant>" + \
            b"</MultiplierFunction>" * n
    return re.sub(rb'<DEEPFUNCTION n="(\d+)" ?/>', chain, data)


def mutate_xml(data: bytes, tree_ops, text_ops, model=False) -> bytes:
    if tree_ops:
        root = _tree(data)
        for op in tree_ops:
            (apply_model_op if model else apply_setup_op)(root, op)
        data = _deep_functions(_serialize(root))
    for op in text_ops:
        data = apply_xml_op(data, op)
    return data


# ------------------------------------------------------------------------------------ the tests

@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A scratch folder (outside the repository) holding the task files the setups refer to."""
    d = tmp_path_factory.mktemp("fuzz")
    if DATA.is_dir():
        for name in TASKS:
            (d / name).write_bytes(real(name))
    return d


@needs_data
@fuzz(250)
@given(ops(TRC_OPS))
def test_trc_mutations(workdir, mutations):
    data = real(TRC)
    for op in mutations:
        data = apply_trc_op(data, op)
    path = workdir / "fuzz.trc"
    path.write_bytes(data)
    outcome(read_trc, path, sane_markers)


@needs_data
@fuzz(250)
@given(ops(MOT_OPS), st.sampled_from((".mot", ".sto")))
def test_storage_mutations(workdir, mutations, suffix):
    data = real(MOT)
    for op in mutations:
        data = apply_mot_op(data, op)
    path = workdir / f"fuzz{suffix}"
    path.write_bytes(data)
    outcome(read_storage, path, sane_storage)


@needs_data
@fuzz(200)
@given(st.sampled_from(SETUPS), ops(SETUP_OPS | TREE_OPS, 3) | st.just([]),
       ops(XML_TEXT_OPS | LINE_OPS, 3) | st.just([]))
def test_ik_setup_mutations(workdir, seed, tree_ops, text_ops):
    path = workdir / "setup.xml"
    data = mutate_xml(real(seed), tree_ops, text_ops)
    path.write_bytes(data)
    named = [workdir / ref.decode(errors="replace") for ref in re.findall(rb'file="([^"]*)"', data)]
    outcome(read_ik_setup, path, sane_setup, others=named)        # a task file's errors name that file


@needs_data
@fuzz(200)
@given(st.sampled_from(TASKS), ops(SETUP_OPS | TREE_OPS, 3) | st.just([]),
       ops(XML_TEXT_OPS | LINE_OPS, 3) | st.just([]))
def test_ik_task_set_mutations(workdir, seed, tree_ops, text_ops):
    path = workdir / "tasks.xml"
    path.write_bytes(mutate_xml(real(seed), tree_ops, text_ops))
    outcome(read_ik_task_set, path, sane_task_set)


@needs_data
@fuzz(150)
@given(st.sampled_from(("gait", "arm4")), ops(XML_TEXT_OPS | LINE_OPS, 3))
def test_osim_text_mutations(workdir, seed, text_ops):
    path = workdir / "text.osim"
    path.write_bytes(mutate_xml(osim_seed(seed), [], text_ops))
    outcome(load_osim, path, sane_model)


@needs_data
@fuzz(300)
@given(st.sampled_from(("gait", "arm4")), ops(MODEL_OPS | TREE_OPS, 4))
def test_osim_model_mutations(workdir, seed, model_ops):
    path = workdir / "model.osim"
    path.write_bytes(mutate_xml(osim_seed(seed), model_ops, [], model=True))
    outcome(load_osim, path, sane_model)


TOKENS = {
    "trc": ("PathFileType", "4", "(X/Y/Z)", "DataRate", "CameraRate", "NumFrames", "NumMarkers", "Units", "mm",
            "m", "Frame#", "Time", "X1", "Y1", "Z1", "A", "1", "0.5", "-2", "nan", "1e999", "", "\t", "\t", "\n", "\r\n"),
    "mot": ("endheader", "nRows=", "nColumns=", "inDegrees=", "yes", "version=1", "datarows", "range", "#", "time",
            "a", "1", "0.5", "-2", "nan", "inf", "=", " ", "\t", "\t", "\n", "\n"),
    "xml": ("<", ">", "</", "/>", "=", '"', " ", "\n", "&", ";", "<!--", "-->", "<?xml version=\"1.0\"?>",
            "OpenSimDocument", "Model", "InverseKinematicsTool", "IKTaskSet", "objects", "IKMarkerTask",
            "IKCoordinateTask", "weight", "apply", "name", "file", "Body", "Joint", "CustomJoint", "BodySet",
            "JointSet", "Ground", "MarkerSet", "Marker", "parent_body", "TransformAxis", "SimmSpline", "x", "y",
            "axis", "1", "0 0 1", "nan", "true"),
}
READERS = {"trc": (read_trc, sane_markers, "trc"), "mot": (read_storage, sane_storage, "mot"),
           "sto": (read_storage, sane_storage, "sto"),
           "setup": (read_ik_setup, sane_setup, "xml"), "tasks": (read_ik_task_set, sane_task_set, "xml"),
           "osim": (load_osim, sane_model, "osim")}


@fuzz(400)
@given(st.sampled_from(sorted(READERS)), st.data())
def test_random_input(workdir, reader, data):
    read, sane, suffix = READERS[reader]
    tokens = TOKENS.get(suffix, TOKENS["xml"])
    content = data.draw(st.one_of(
        st.binary(max_size=400),
        st.text(max_size=200).map(_text),
        st.lists(st.one_of(st.sampled_from(tokens), st.text(max_size=3)), max_size=120).map(lambda t: _text("".join(t))),
    ), label="content")
    path = workdir / f"random.{suffix}"
    path.write_bytes(content)
    outcome(read, path, sane)


def test_the_seeds_load_unmutated(workdir):
    """The mutations start from files the readers accept (else the fuzzing would test little)."""
    path = workdir / "arm4.osim"
    path.write_bytes(ARM4)
    om = outcome(load_osim, path, sane_model)
    assert om.coupling.n_coordinates == 7 and len(om.markers.names) == 5
    if not DATA.is_dir():
        return
    path = workdir / "gait.osim"
    path.write_bytes(gait_kinematics())
    assert outcome(load_osim, path, sane_model).coupling.n_coordinates == 23
    assert outcome(read_trc, DATA / TRC, sane_markers).n_frames == 73
    assert outcome(read_storage, DATA / MOT, sane_storage).n_rows == 73
    for name in SETUPS:
        outcome(read_ik_setup, DATA / name, sane_setup)
    for name in TASKS:
        outcome(read_ik_task_set, DATA / name, sane_task_set)


# ------------------------------------------------------------------------ what the fuzzing found
# Each a minimal input that used to crash, hang, load something insane or name a wrong line; now
# each raises OpenSimFileError naming the line, or loads.

SMALL_TRC = ("PathFileType\t4\t(X/Y/Z)\tsmall.trc\n"
             "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\n"
             "{rate}\t100\t{frames}\t1\tmm\n"
             "Frame#\tTime\tM\t\t\n"
             "\t\tX1\tY1\tZ1\n"
             "{frame}\t{time}\t1\t2\t{z}\n")
TRC_OK = dict(rate="100", frames="1", frame="1", time="0.5", z="3")

MINI_V3 = """<OpenSimDocument Version="20303"><Model name="m">
<BodySet><objects>
<Body name="ground"/>
<Body name="a"><Joint><CustomJoint name="ja">
<parent_body>ground</parent_body>
<location>{a_location}</location>
<CoordinateSet><objects>
<Coordinate name="q"><default_value>{default}</default_value></Coordinate>
</objects></CoordinateSet>
<SpatialTransform><TransformAxis name="{axis}">
<coordinates>q</coordinates><axis>0 0 1</axis>
{function}
</TransformAxis></SpatialTransform>
</CustomJoint></Joint></Body>
<Body name="{b}"><Joint><WeldJoint name="jb">
<parent_body>a</parent_body>
<location_in_parent>{b_location}</location_in_parent>
</WeldJoint></Joint></Body>
</objects></BodySet>
<MarkerSet><objects><Marker name="m"><body>b</body><location>{marker}</location></Marker></objects></MarkerSet>
</Model></OpenSimDocument>
"""
V3_OK = dict(a_location="0 0 0", default="0", axis="rotation1", function="", b="b", b_location="0 0.5 0",
             marker="0 0 0")
HUGE_SLIDE = dict(axis="translation1", function="<Constant><value>1.5e308</value></Constant>")
DEEP = "<MultiplierFunction>" * 2000 + "<Constant><value>1</value></Constant>" + "</MultiplierFunction>" * 2000
TASK = "<IKTaskSet><objects>\n<IKCoordinateTask name=\"k\"><value>{value}</value></IKCoordinateTask>\n</objects></IKTaskSet>"

FOUND = [
    # (reader, file name, content, line of the error (None: loads), words in the reason)
    # OverflowError: int(float("inf"))
    ("trc", "a.trc", SMALL_TRC.format(**{**TRC_OK, "frames": "inf"}), 3, "NumFrames must be a whole number"),
    ("trc", "a.trc", SMALL_TRC.format(**{**TRC_OK, "frame": "inf"}), 6, "frame number 'inf'"),
    # OverflowError: a Python int too large for numpy's int64
    ("trc", "a.trc", SMALL_TRC.format(**{**TRC_OK, "frame": "1e30"}), 6, "frame number '1e30'"),
    # loaded: NaN time, an infinite position, a zero data rate
    ("trc", "a.trc", SMALL_TRC.format(**{**TRC_OK, "time": "nan"}), 6, "time 'nan' is not a finite number"),
    ("trc", "a.trc", SMALL_TRC.format(**{**TRC_OK, "z": "1e999"}), 6, "infinite coordinate"),
    ("trc", "a.trc", SMALL_TRC.format(**{**TRC_OK, "rate": "0"}), 3, "DataRate must be a positive number"),
    # wrong line numbers: str.splitlines also breaks at U+2028, U+0085, form feeds ...
    ("trc", "a.trc", SMALL_TRC.format(**{**TRC_OK, "time": "nan"}).replace("small", "sm\u2028all"), 6,
     "time 'nan' is not a finite number"),
    ("trc", "a.trc", b"\xc2\x85\x00", 1, "too short"),
    # OverflowError: int(float("inf"))
    ("sto", "a.sto", "x\nnRows=inf\nendheader\ntime\ta\n0\t1\n", 2, "nRows must be a whole number"),
    # loaded: infinity, a NaN time, an empty column label
    ("sto", "a.sto", "x\nendheader\ntime\ta\n0\t-inf\n", 4, "a is -inf"),
    ("sto", "a.sto", "x\nendheader\ntime\ta\nnan\t1\n", 4, "time is nan"),
    ("sto", "a.sto", "x\nendheader\ntime\t\ta\n0\t1\n", 3, "column 2 has no label"),
    # wrong line number (U+0085 broke line 1 in two)
    ("mot", "a.mot", "x\u0085y\nendheader\n\n", 2, "no column labels"),
    # LookupError, ValueError, UnicodeError from pyexpat's decoding of an unknown encoding
    ("tasks", "t.xml", '<?xml version="1.0" encoding="bogus"?>\n<IKTaskSet/>', 1, "encoding"),
    ("tasks", "t.xml", '<?xml version="1.0" encoding="utf-7"?>\n<IKTaskSet/>', 1, "encoding"),
    ("tasks", "t.xml", '<?xml version="1.0" encoding="base64"?>\n<IKTaskSet/>', 1, "encoding"),
    ("tasks", "t.xml", '<?xml version="1.0" encoding="undefined"?>\n<IKTaskSet/>', 1, "encoding"),
    ("tasks", "t.xml", '<?xml version="1.0" encoding="punycode"?>\n<IKTaskSet/>\xe9', 1, "encoding"),
    # a hang: the stray-closing-tag pattern backtracked exponentially over comments (40: hours)
    ("tasks", "t.xml", "<IKTaskSet/>\n</x>" + "<!-- -->" * 40 + "x", 2, "not well-formed"),
    # rejected: one stray closing tag after a self-closing document element (two were accepted)
    ("tasks", "t.xml", "<IKTaskSet/>\n</x>", None, ""),
    # loaded: a NaN coordinate target, an infinite accuracy
    ("tasks", "t.xml", TASK.format(value="nan"), 2, "<value> must hold finite numbers"),
    ("setup", "s.xml", "<InverseKinematicsTool>\n<accuracy>inf</accuracy>\n</InverseKinematicsTool>", 2,
     "<accuracy> must hold finite numbers"),
    # OSError: File name too long (from Path.is_file)
    ("setup", "s.xml", f'<InverseKinematicsTool>\n<IKTaskSet file="{"x" * 300}"/>\n</InverseKinematicsTool>', 2,
     "does not exist"),
    # RecursionError: MultiplierFunction inside MultiplierFunction, 2000 deep
    ("osim", "m.osim", MINI_V3.format(**{**V3_OK, "function": DEEP}), 12, "nested more than 100 deep"),
    # RecursionError: component paths of an OpenSim 4 model walked recursively
    ("osim", "m.osim", ARM4.decode().replace("<Ground", "<a>" * 3000 + "</a>" * 3000 + "<Ground"), None, ""),
    # ValueError from the engine's Model: a NaN offset; then offsets whose sum overflows
    ("osim", "m.osim", MINI_V3.format(**{**V3_OK, "b_location": "nan 0 0"}), 17, "<location_in_parent> must hold finite"),
    ("osim", "m.osim", MINI_V3.format(**{**V3_OK, "a_location": "-1.5e308 0 0", "b_location": "1.5e308 0 0"}),
     15, "joint 'jb': its offset frames are too large"),
    # loaded: a NaN default value; a spline whose coefficients overflow (NaN joint values)
    ("osim", "m.osim", MINI_V3.format(**{**V3_OK, "default": "nan"}), 8, "<default_value> must hold finite"),
    ("osim", "m.osim", MINI_V3.format(**{**V3_OK, "function": "<SimmSpline><x>0 1 2 3</x><y>0 1e308 -1e308 1e308</y>"
                                                              "</SimmSpline>"}), 12, "too large"),
    # loaded: finite numbers that overflow in the default pose (joint value, body frame, marker)
    ("osim", "m.osim", MINI_V3.format(**{**V3_OK, "default": "1e10", "function": "<PolynomialFunction><coefficients>"
                                                                                 "1e300 0 0</coefficients>"
                                                                                 "</PolynomialFunction>"}),
     10, "the function is not finite"),
    ("osim", "m.osim", MINI_V3.format(**{**V3_OK, **HUGE_SLIDE, "b_location": "0 0 1.5e308"}), 15,
     "body 'b' is not at a finite place"),
    ("osim", "m.osim", MINI_V3.format(**{**V3_OK, **HUGE_SLIDE, "b_location": "0 0 0", "marker": "0 0 1.5e308"}), 20,
     "marker 'm' is not at a finite place"),
    # no line in the message
    ("osim", "m.osim", MINI_V3.format(**{**V3_OK, "b": "a"}), 15, "a second body called 'a' (the first is on line 4)"),
    ("osim", "m.osim", "<OpenSimDocument>\n<Model/>\n</OpenSimDocument>", 2, "no ground body"),
]


@pytest.mark.parametrize("reader, name, content, line, words", FOUND,
                         ids=[f"{i}-{r}" for i, (r, *_) in enumerate(FOUND)])
def test_what_the_fuzzing_found(tmp_path, reader, name, content, line, words):
    read, sane, _ = READERS[reader]
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    result = outcome(read, path, sane)
    if line is None:
        assert not isinstance(result, OpenSimFileError), result
    else:
        assert isinstance(result, OpenSimFileError), f"loaded: {result}"
        assert (result.line, result.path) == (line, path) and words in result.reason, result


def test_stray_closing_tag_after_a_self_closing_document_element_warns_with_its_line(tmp_path):
    path = tmp_path / "t.xml"
    path.write_text('<IKTaskSet name="x"/>\r\n</IKTaskSet>\r\n</OpenSimDocument>\r\n')
    with pytest.warns(OpenSimFileWarning, match=r"line 2: ignored stray closing tag '</IKTaskSet>\\r\\n</OpenSimDocument>'"):
        assert read_ik_task_set(path).name == "x"

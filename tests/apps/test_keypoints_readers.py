"""Keypoint readers (solver/keypoints): files written in each format from Pose2Sim's balancing
trial (shared/data/markerless_pose2sim) read back to the same numbers, and the keypoint tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from solver.keypoints import KEYPOINT_SETS, KeypointFileError, keypoint_set, read_keypoints
from solver.opensim import read_trc
from solver.retarget.roles import ROLE_PARENT

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "markerless_pose2sim"
BALANCING = DATA / "balancing_0-100.trc"
needs_data = pytest.mark.skipif(not BALANCING.is_file(), reason="shared/data/markerless_pose2sim is not beside the repository")

# Pose2Sim's HALPE_26 names and the names other sets give the same body points.
TO_MEDIAPIPE = {"Nose": "nose", "LShoulder": "left_shoulder", "RShoulder": "right_shoulder",
                "LElbow": "left_elbow", "RElbow": "right_elbow", "LWrist": "left_wrist", "RWrist": "right_wrist",
                "LHip": "left_hip", "RHip": "right_hip", "LKnee": "left_knee", "RKnee": "right_knee",
                "LAnkle": "left_ankle", "RAnkle": "right_ankle", "LHeel": "left_heel", "RHeel": "right_heel",
                "LBigToe": "left_foot_index", "RBigToe": "right_foot_index"}
TO_SMPL = {"LHip": "left_hip", "RHip": "right_hip", "LKnee": "left_knee", "RKnee": "right_knee",
           "LAnkle": "left_ankle", "RAnkle": "right_ankle", "Neck": "neck", "Head": "head",
           "LShoulder": "left_shoulder", "RShoulder": "right_shoulder", "LElbow": "left_elbow",
           "RElbow": "right_elbow", "LWrist": "left_wrist", "RWrist": "right_wrist"}


@pytest.fixture(scope="module")
def source():
    if not BALANCING.is_file():
        pytest.skip("shared/data/markerless_pose2sim is not beside the repository")
    return read_trc(BALANCING)


def in_set(source, set_name: str, rename=None):
    """The source's keypoints laid out in the set's order (F, K, 3), NaN where the set has a point
    the source lacks; and which of the set's keypoints came from the source."""
    target = keypoint_set(set_name)
    rename = rename or {n: n for n in source.names}
    out = np.full((source.n_frames, len(target), 3), np.nan)
    filled = np.zeros(len(target), bool)
    for name, new in rename.items():
        if name in source.names and new in target.names:
            out[:, target.index(new)] = source.marker(name)
            filled[target.index(new)] = True
    return out, filled


def confidence_like(shape, seed=3):
    return np.random.default_rng(seed).uniform(0.2, 1.0, shape)


@needs_data
def test_trc_reads_as_pose2sim_wrote_it(source):
    trial = read_keypoints(BALANCING)
    assert trial.keypoint_set.name == "HALPE_26" and trial.names == source.names
    assert np.array_equal(trial.positions, source.positions) and np.array_equal(trial.time, source.time)
    assert trial.rate == 60.0 and trial.confidence is None and trial.up == (0.0, 1.0, 0.0)
    up = trial.z_up()                            # Y up to Z up: (x, y, z) -> (x, -z, y)
    np.testing.assert_allclose(up.positions, np.stack([source.positions[..., 0], -source.positions[..., 2],
                                                       source.positions[..., 1]], axis=-1), atol=1e-15)


@needs_data
@pytest.mark.parametrize("layout", ["list", "object", "protobuf", "arrays"])
def test_mediapipe_json(tmp_path, source, layout):
    positions, filled = in_set(source, "MEDIAPIPE_33", TO_MEDIAPIPE)
    visibility = np.where(filled, confidence_like(positions.shape[:2]), 0.0)
    file_xyz = np.nan_to_num(positions * [1.0, -1.0, -1.0])     # MediaPipe: y down (turned half a turn about x)
    frames = []
    for f in range(source.n_frames):
        points = [{"x": x, "y": y, "z": z, "visibility": v} for (x, y, z), v in
                  zip(file_xyz[f].tolist(), visibility[f].tolist())]
        if layout == "arrays":
            points = [[p["x"], p["y"], p["z"], p["visibility"]] for p in points]
        frames.append({"list": points, "object": points, "arrays": points,
                       "protobuf": {"pose_world_landmarks": {"landmark": points}}}[layout])
    frames[7] = None if layout != "protobuf" else {"pose_world_landmarks": None}      # a frame without a pose
    doc = {"fps": 60, "frames": frames} if layout == "object" else frames
    path = tmp_path / "pose.json"
    path.write_text(json.dumps(doc))
    trial = read_keypoints(path, rate=None if layout == "object" else 60.0)
    assert trial.keypoint_set.name == "MEDIAPIPE_33" and trial.up == (0.0, -1.0, 0.0) and trial.rate == 60.0
    keep = np.arange(source.n_frames) != 7
    assert np.array_equal(trial.positions[keep], file_xyz[keep]) and np.isnan(trial.positions[7]).all()
    assert np.array_equal(trial.confidence[keep], visibility[keep]) and not trial.confidence[7].any()
    assert np.array_equal(trial.weights(0.1)[keep], np.where(visibility[keep] >= 0.1, visibility[keep], 0.0))
    # turned to Z up, the landmarks taken from the trc are the trc's turned to Z up
    back = {v: k for k, v in TO_MEDIAPIPE.items()}
    from_trc = [source.names.index(back[n]) for n in np.array(trial.names)[filled]]
    np.testing.assert_allclose(trial.z_up().positions[keep][:, filled],
                               read_keypoints(BALANCING).z_up().positions[keep][:, from_trc], atol=1e-15)


@needs_data
def test_csv_with_time_and_confidence(tmp_path, source):
    confidence = confidence_like((source.n_frames, source.n_markers))
    header = ["frame", "time"] + [f"{n}_{c}" for n in source.names for c in ("x", "y", "z", "visibility")]
    lines = [",".join(header)]
    for f in range(source.n_frames):
        cells = [str(f), repr(float(source.time[f]))]
        for k in range(source.n_markers):
            cells += [repr(float(v)) for v in source.positions[f, k]] + [repr(float(confidence[f, k]))]
        if f == 11:
            cells[2:6] = ["", "", "", ""]                           # RHip missing in one frame
        lines.append(",".join(cells))
    path = tmp_path / "halpe.csv"
    path.write_text("\n".join(lines) + "\n")
    trial = read_keypoints(path)
    assert trial.keypoint_set.name == "HALPE_26" and trial.names == source.names and trial.up is None
    expected = source.positions.copy()
    expected[11, 0] = np.nan
    assert np.array_equal(trial.positions, expected, equal_nan=True) and np.array_equal(trial.time, source.time)
    assert trial.rate == pytest.approx(60.0, rel=1e-9)
    assert np.array_equal(trial.confidence[trial.weights() > 0], confidence[trial.weights() > 0])
    assert trial.weights()[11, 0] == 0.0


@needs_data
@pytest.mark.parametrize("set_name, rename, width", [("HALPE_26", None, 4), ("HALPE_26", None, 3),
                                                      ("SMPL_24", TO_SMPL, 3), ("MEDIAPIPE_33", TO_MEDIAPIPE, 4)])
def test_npy(tmp_path, source, set_name, rename, width):
    positions, filled = in_set(source, set_name, rename)
    array = positions if width == 3 else np.concatenate([positions, confidence_like(positions.shape[:2])[..., None]], -1)
    path = tmp_path / "kp.npy"
    np.save(path, array.astype(np.float64))
    trial = read_keypoints(path, rate=60)
    assert trial.keypoint_set.name == set_name and trial.names == list(KEYPOINT_SETS[set_name].names)
    assert np.array_equal(trial.positions, positions, equal_nan=True)
    if width == 4:
        assert np.array_equal(trial.confidence[:, filled], array[:, filled, 3])
        assert not trial.weights()[:, ~filled].any()
    else:
        assert trial.confidence is None


@needs_data
@pytest.mark.parametrize("set_name", ["COCO_17", "H36M_17"])
def test_npz_of_seventeen_needs_the_set_named(tmp_path, source, set_name):
    positions, filled = in_set(source, set_name)
    scores = confidence_like(positions.shape[:2])
    path = tmp_path / "kp.npz"
    np.savez(path, keypoints=positions.astype(np.float32), scores=scores, fps=np.array(60.0))
    with pytest.raises(KeypointFileError, match="COCO_17 and H36M_17"):
        read_keypoints(path)
    trial = read_keypoints(path, keypoint_set=set_name.lower().replace("_", "-"))
    assert trial.keypoint_set.name == set_name and trial.rate == 60.0
    assert np.array_equal(trial.positions, positions.astype(np.float32).astype(float), equal_nan=True)
    assert np.array_equal(trial.confidence[:, filled], scores[:, filled])


@needs_data
def test_freemocap_body_file_is_millimetres(tmp_path, source):
    positions, filled = in_set(source, "MEDIAPIPE_33", TO_MEDIAPIPE)
    path = tmp_path / "mediapipe_body_3d_xyz.npy"
    np.save(path, positions * 1000.0)
    trial = read_keypoints(path, rate=60)
    assert trial.source == "freemocap" and trial.units == "mm" and trial.up is None
    np.testing.assert_allclose(trial.positions, positions, rtol=1e-15, atol=0)
    assert np.isnan(trial.positions[:, ~filled]).all()


@pytest.mark.parametrize("name, content, words", [
    ("a.npy", None, "holds no frame rate"),
    ("a.json", "[[]]", "every frame is empty"),
    ("a.json", '[[{"x": 1, "y": 2}]]', "has no 'z'"),
    ("a.json", '[[{"x": 1, "y": "2", "z": 3}]]', "not a number"),
    ("a.json", "[[[1, 2, 3]], [[1, 2, 3], [4, 5, 6]]]", "different numbers of landmarks"),
    ("a.csv", "time,a_x,a_y\n0,1,2\n", "lacks a column"),
    ("a.csv", "time,a_x,a_y,a_z\n0,1,2,x\n", "not a number"),
    ("a.csv", "time,a_x,a_y,a_z\n0,1,2,3\n0,1,2,3\n", "time must increase"),
    ("a.csv", "a_x,a_y,a_z,a_score\n1,2,3,-1\n", "below 0"),
    ("a.txt", "", "unknown keypoint file type"),
])
def test_bad_files_are_named(tmp_path, name, content, words):
    path = tmp_path / name
    if content is None:
        np.save(path, np.zeros((3, 26, 3)))
    else:
        path.write_text(content)
    with pytest.raises(KeypointFileError, match=words) as err:
        read_keypoints(path, rate=30 if "rate" not in words else None)
    assert err.value.path == path


def test_tables_are_trees_on_known_roles():
    for name, kp in KEYPOINT_SETS.items():
        assert len(kp) == int(name.rsplit("_", 1)[1])
        assert sum(p is None for p in kp.parents) == 1, name
        for k, parent in enumerate(kp.parents):        # every keypoint reaches the root
            seen = set()
            while parent is not None:
                assert parent not in seen, f"{name}: a cycle through {parent}"
                seen.add(parent)
                parent = kp.parents[kp.index(parent)]
        assert set(kp.roles) <= set(ROLE_PARENT)

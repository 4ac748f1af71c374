"""Markerless keypoints onto a rig: Pose2Sim's balancing trial (100 frames at 60 Hz, 21 HALPE_26
keypoints, raw and Butterworth-filtered) onto the humanoid target of the retarget tests (2 units
tall, A-pose, knees limited), calibrated on Pose2Sim's static trial.

Per case: the mean keypoint error (|x - s p| / s, millimetres of the data), jitter (RMS joint
acceleration over the rig's rotational coordinates, rad/s^2), keypoint jitter (RMS acceleration of
the fitted keypoints, m/s^2 of the data, beside the file's own), the fitted keypoints' mean distance to the Butterworth-filtered file's (mm: how far from a
filtered reference, the raw trial's noise not counted as error), the fit's iterations and seconds.
Cases: each file with smoothing off and at 6 Hz (the cutoff Pose2Sim's Butterworth filter uses).

    python -m bench.markerless
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from solver.keypoints import fit_keypoints, read_keypoints
from solver.retarget import target_model

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "markerless_pose2sim"


def keypoint_jitter(positions: np.ndarray, rate: float) -> float:
    """RMS second difference of keypoint positions (F, K, 3), per second squared."""
    a = np.diff(positions, 2, axis=0) * rate ** 2
    return float(np.sqrt(np.nanmean(np.sum(a * a, axis=-1))))


def main():
    from tests.apps.retarget_walk import walk_target
    rig = target_model(walk_target())
    static = read_keypoints(DATA / "static_0-12.trc").z_up()
    rotational = rig.model.rotational.copy()
    rotational[rig.model.coordinates_of(rig.root)] = False
    filtered = read_keypoints(DATA / "balancing_0-100_filt_butterworth.trc").z_up().positions
    rows = []
    for name in ("balancing_0-100.trc", "balancing_0-100_filt_butterworth.trc"):
        trial = read_keypoints(DATA / name).z_up()
        for cutoff in (None, 6.0):
            began = time.perf_counter()
            result = fit_keypoints(trial, rig, static=static, cutoff=cutoff, max_iterations=400)
            seconds = time.perf_counter() - began
            fit, s = result.fit, result.calibration.scale
            joint = np.diff(fit.q[:, rotational], 2, axis=0) * trial.rate ** 2
            fitted = result.calibration.placement.evaluate(fit.q, jacobian=False) / s
            rows.append((name.replace("balancing_0-100", "balancing").replace(".trc", ""),
                         "off" if cutoff is None else f"{cutoff:g} Hz", 1000 * np.nanmean(fit.error) / s,
                         float(np.sqrt(np.mean(joint ** 2))), keypoint_jitter(fitted, trial.rate),
                         keypoint_jitter(trial.positions, trial.rate),
                         1000 * np.nanmean(np.linalg.norm(fitted - filtered, axis=-1)), fit.iterations, fit.converged,
                         seconds))
    print("| trial | smoothing | mean keypoint error (mm) | joint jitter (rad/s²) | keypoint jitter (m/s²) "
          "| file's keypoint jitter (m/s²) | to the filtered file (mm) | iterations | converged | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.2f} | {r[6]:.1f} | {r[7]} | {r[8]} | {r[9]:.1f} |")


if __name__ == "__main__":
    main()

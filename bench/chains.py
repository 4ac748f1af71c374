"""Our engine and IKPy on the straight 6- and 30-bone chains tracking the Lissajous target.

Ours: animation mode, every frame from the straight rest pose, timed two ways: one call per
frame (F=1) on a sample of the frames, and all F frames in one batched call. IKPy (scipy's
least_squares over a chain of URDF links) on the same sample, one call per frame from the same
straight start; it has no batch. Its chain is ours joint for joint: at each bone's head a sphere
joint made of three revolute axes X, Y, Z with no offset between them, then the bone's length
along +Z to the next head, the last tail a fixed link.
"""

from __future__ import annotations

import time

import numpy as np

from .common import ERRORS, TIME, Column, Table, chain_scene, error_stats, best_time, plot, ratio, solve_ours, targets, tip_errors

BONES = (6, 30)


def ikpy_chain(n_bones: int, bone_length: float = 1.0):
    """An ikpy Chain equal to solver.examples.straight_chain(n_bones, bone_length)."""
    from ikpy.chain import Chain
    from ikpy.link import OriginLink, URDFLink

    links = [OriginLink()]
    for i in range(n_bones):
        for k, axis in enumerate(np.eye(3)):
            offset = [0.0, 0.0, bone_length if i > 0 and k == 0 else 0.0]
            links.append(URDFLink(f"bone{i}_{'xyz'[k]}", origin_translation=offset,
                                  origin_orientation=[0.0, 0.0, 0.0], rotation=axis))
    links.append(URDFLink("tail", origin_translation=[0.0, 0.0, bone_length],
                          origin_orientation=[0.0, 0.0, 0.0], joint_type="fixed"))
    return Chain(links, active_links_mask=[False] + [True] * (3 * n_bones) + [False])


def solve_ikpy(chain, points: np.ndarray):
    """One inverse_kinematics call per target point from the straight start: (seconds, errors)."""
    start_pose = np.zeros(len(chain.links))
    solutions = []
    start = time.perf_counter()
    for p in points:
        solutions.append(chain.inverse_kinematics(target_position=p, initial_position=start_pose))
    seconds = time.perf_counter() - start
    errors = [np.linalg.norm(chain.forward_kinematics(q)[:3, 3] - p) for q, p in zip(solutions, points)]
    return seconds, np.array(errors)


def solve_one_by_one(scene, poses: np.ndarray):
    """Our solver called once per frame (F=1): (seconds, (errors, converged))."""
    results = []
    start = time.perf_counter()
    for f in range(poses.shape[0]):
        results.append(solve_ours(scene, poses[f:f + 1])[1])
    seconds = time.perf_counter() - start
    q = np.concatenate([r.q for r in results])
    return seconds, (tip_errors(scene, q, poses), np.concatenate([r.converged for r in results]))


def run(quick: bool = False, n_frames: int = 1000) -> Table:
    import ikpy

    sample, repeats = (10, 1) if quick else (100, 5)
    table = Table(
        "chains", "Our engine and IKPy on straight chains",
        f"Straight n-bone chain (bones 1 m long, sphere joints) whose tail tracks "
        f"`solver.examples.lissajous({n_frames}, n)`, every frame solved from the straight rest pose. "
        f"F=1: one call per frame, on {sample} frames evenly spread over the path; F={n_frames}: one batched "
        f"call; ours: best of {repeats} runs. IKPy {ikpy.__version__}: one `inverse_kinematics` call per "
        f"frame on the same {sample} frames, one run (its defaults: scipy least_squares, finite-difference Jacobian). "
        "ours / IKPy: our time per frame divided by IKPy's. Errors: tip-to-target distance in m; "
        "> 1e-6 L, > 1 mm: frames further off than that (L = chain length).",
        [Column("bones", "bones"), Column("solver", "solver", text=True), Column("frames", "frames"), TIME,
         Column("vs_ikpy", "ours / IKPy", "{:.4f}"), *ERRORS])
    for n in BONES:
        scene, poses = chain_scene(n), targets(n_frames, n)
        picked = np.linspace(0, n_frames, sample, endpoint=False).astype(int)

        one_s, (one_err, one_conv) = best_time(lambda: solve_one_by_one(scene, poses[picked]), repeats)
        batch_s, result = best_time(lambda: solve_ours(scene, poses), repeats)
        ikpy_s, ikpy_err = solve_ikpy(ikpy_chain(n), poses[picked, 0, :3, 3])

        ikpy_ms = 1e3 * ikpy_s / sample
        rows = [("ours, F=1 (call per frame)", 1e3 * one_s / sample, error_stats(one_err, n, one_conv)),
                (f"ours, F={n_frames} (one call)", 1e3 * batch_s / n_frames,
                 error_stats(tip_errors(scene, result.q, poses), n, result.converged)),
                ("IKPy (call per frame)", ikpy_ms, error_stats(ikpy_err, n))]
        for label, ms, stats in rows:
            table.rows.append({"bones": n, "solver": label, **stats, "ms_per_frame": ms,
                               "vs_ikpy": None if label.startswith("IKPy") else ratio(ms, ikpy_ms)})
    return table


def draw(table: Table, path) -> None:
    plot(path, "Time per frame, straight chains tracking a Lissajous target", "ms per frame (log)",
         {f"{r['bones']} bones: {r['solver']}": r["ms_per_frame"] for r in table.rows})

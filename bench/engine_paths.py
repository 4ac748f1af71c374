"""CPU time of the engine's evaluation paths, our side only, for A/B runs of two checkouts.

    python -m bench.engine_paths [--replays /tmp/6.pkl /tmp/rigify.pkl ...] [--only ROW ...]

Rows (each the best of a few short runs, `time.process_time`, so that other processes' load on a
shared machine lengthens it less than wall time):

    replay:FILE     live preview's animation-mode frames recorded in Blender (bench.live_replay),
                    solved again one call per frame: ms per frame; and Scene.evaluate(one_frame=True)
                    at the recorded answers, µs per call with A (bench.one_frame)
    simulation      solve_simulation one frame per call on the 6-bone chain (live preview's
                    simulation mode): ms per frame
    chains:N        bench.chains' rows: the N-bone chain one frame per call (ms per frame) and
                    1,000 frames in one call (ms per frame)
    evaluate:N      Scene.evaluate with A on the N-bone chain at F = 1,000: µs per frame
    racing          bench.random_poses' racing Panda: ms per pass of 48 starts
    opensim         marker IK on OpenSim's gait2354 trial (bench.opensim_ik's "uniform" case,
                    ../shared/data): ms per frame, warm-started and every frame from scratch

Run it from each checkout's root, alternating, on the same machine in the same period.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

ROWS = ("replay", "simulation", "chains", "evaluate", "racing", "opensim")


def best_cpu(run, repeats: int) -> float:
    """Shortest CPU time of `repeats` calls of run() (seconds)."""
    best = np.inf
    for _ in range(repeats):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def replay_rows(path: str) -> dict:
    from .live_replay import load, replay
    from .one_frame import per_call

    scene, calls = load(path)
    replay(scene, calls[:5])
    frame_ms = 1e3 * best_cpu(lambda: replay(scene, calls), 3) / len(calls)
    picked = calls[::max(1, len(calls) // 10)]
    evaluate_us = np.median([per_call(lambda: scene.evaluate(c["q"], c["objects"], c["bases"], values=c["values"],
                                                             jacobians="A", one_frame=True), n=200, repeat=5)
                             for c in picked])
    return {f"replay:{path} ms/frame": frame_ms, f"replay:{path} evaluate µs": float(evaluate_us)}


def simulation_row() -> dict:
    from solver import Settings, solve_simulation
    from solver.examples import lissajous, reach_scene, straight_chain

    scene, poses = reach_scene(straight_chain(6)), lissajous(200, 6.0)

    def run():
        q, ev = scene.model.neutral(1), None
        for f in range(poses.shape[0]):
            result = solve_simulation(scene, q, poses[f:f + 1], settings=Settings(), start=ev)
            q, ev = result.q[-1:], result.evaluation
    run()
    return {"simulation ms/frame": 1e3 * best_cpu(run, 3) / poses.shape[0]}


def chain_rows(n: int) -> dict:
    from .chains import solve_one_by_one
    from .common import chain_scene, solve_ours, targets

    scene, poses = chain_scene(n), targets(1000, n)
    picked = np.linspace(0, 1000, 50, endpoint=False).astype(int)
    one = best_cpu(lambda: solve_one_by_one(scene, poses[picked]), 3) / picked.size
    batch = best_cpu(lambda: solve_ours(scene, poses), 3) / 1000
    return {f"chains:{n} F=1 ms/frame": 1e3 * one, f"chains:{n} F=1000 ms/frame": 1e3 * batch}


def evaluate_row(n: int) -> dict:
    from .common import chain_scene, targets

    scene, poses = chain_scene(n), targets(1000, n)
    q = np.random.default_rng(0).uniform(-1, 1, (1000, scene.model.n_coordinates))
    return {f"evaluate:{n} F=1000 µs/frame": 1e6 * best_cpu(lambda: scene.evaluate(q, poses, jacobians="A"), 5) / 1000}


def racing_row() -> dict:
    from solver.examples import panda_arm, pose_scene

    from .random_poses import random_poses, seconds_per_pass

    model = panda_arm()
    scene = pose_scene(model)
    poses = random_poses(model, 40, seed=5)[1]
    seconds_per_pass(scene, poses[:3])
    best = min(seconds_per_pass(scene, poses)[1] for _ in range(3))
    return {"racing ms/pass": 1e3 * best}


def opensim_row() -> dict:
    import tempfile
    import warnings
    from pathlib import Path

    from solver.opensim import MarkerIK, OpenSimFileWarning, read_ik_setup

    from .opensim_ik import prepare

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore", OpenSimFileWarning)
        setup = read_ik_setup(prepare(Path(folder))["uniform"])
        problem = MarkerIK.from_setup(setup)
        F = problem.time.size
        warm = best_cpu(lambda: problem.solve(accuracy=setup.accuracy), 3)
        cold = best_cpu(lambda: problem.solve(accuracy=setup.accuracy, warm_start="none"), 3)
    return {"opensim ms/frame": 1e3 * warm / F, "opensim from scratch ms/frame": 1e3 * cold / F}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine_paths", description=__doc__.splitlines()[0])
    parser.add_argument("--replays", nargs="*", default=[])
    parser.add_argument("--only", nargs="*", choices=ROWS, default=list(ROWS))
    args = parser.parse_args(argv)
    out = {}
    for row in args.only:
        if row == "replay":
            for path in args.replays:
                out.update(replay_rows(path))
        elif row == "simulation":
            out.update(simulation_row())
        elif row == "chains":
            for n in (6, 30):
                out.update(chain_rows(n))
        elif row == "evaluate":
            for n in (6, 30):
                out.update(evaluate_row(n))
        elif row == "racing":
            out.update(racing_row())
        else:
            out.update(opensim_row())
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Refactoring guard: record the engine's outputs on a fixed set of problems, then compare a later
tree's outputs to the record bit for bit.

    python tools/bit_for_bit.py record out/bits.npz     # before the change
    python tools/bit_for_bit.py compare out/bits.npz    # after it: lists every array that differs

Covered: forward kinematics, point Jacobians and scene evaluations (A, B, outputs) of random trees
with every joint kind and constraint type; animation solves of chains (three update laws, limits,
stretch, a fit) and of Panda poses (one at a time and batched, three settings, restarts);
simulation; marker IK on OpenSim's gait2354 trial; sequential and closed-form fly IK. Timing is
not compared. Use it for changes that must not change a result; it is not part of the test suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver import (CopyPose, Distance, JointValue, Scene, Settings, forward_kinematics, on_object,  # noqa: E402
                    on_segment, point_jacobian, solve_animation, solve_simulation)
from solver.examples import lissajous, panda_arm, pose_scene, reach_scene, straight_chain  # noqa: E402
from tests.random_models import random_transform, random_tree  # noqa: E402

# The shared data folder beside the repository (or beside a folder holding a worktree of it).
DATA = next((folder / "shared" / "data" for folder in Path(__file__).resolve().parents[1:]
             if (folder / "shared" / "data").is_dir()), Path(__file__).resolve().parents[2] / "shared" / "data")


def trees(out: dict) -> None:
    rng = np.random.default_rng(11)
    for t in range(40):
        model = random_tree(rng, n_segments=int(rng.integers(2, 12)), n_armatures=int(rng.integers(1, 3)))
        F = 3
        q = rng.normal(size=(F, model.n_coordinates))
        bases = np.stack([np.stack([random_transform(rng) for _ in range(model.n_armatures)]) for _ in range(F)])
        pose = forward_kinematics(model, q, bases)
        out[f"tree{t}.frames"] = pose.frames
        segs = np.arange(len(model.segments))
        pts = rng.normal(size=(F, segs.size, 3))
        out[f"tree{t}.point_jacobian"] = point_jacobian(model, pose, segs, pts)
        S = len(model.segments)
        constraints = [
            CopyPose(on_segment(S - 1, (0.0, 0.3, 0.0)), on_object(0), name="p"),
            CopyPose(on_segment(0), on_object(1), rotation=(True, True, True), name="pr"),
            CopyPose(on_segment(S // 2), on_object(0), position=(True, False, True), rotation=(False, True, False),
                     reference="target", name="partial"),
            Distance(on_segment(S - 1), on_object(1), 0.7, name="d"),
        ]
        if model.n_coordinates:
            constraints.append(JointValue(0, 0.2, 0.5, name="jv"))
        if S > 1:
            constraints.append(CopyPose(on_segment(1, (0.1, 0.0, 0.0)), on_segment(S - 1), name="loop"))
        scene = Scene(model, constraints, n_objects=2)
        objects = np.stack([np.stack([random_transform(rng) for _ in range(2)]) for _ in range(F)])
        ev = scene.evaluate(q, objects, bases)
        for key, f in (("y", "y"), ("yd", "yd"), ("weight", "task_weight"), ("position_error", "position_error"),
                       ("rotation_error", "rotation_error"), ("A", "A"), ("B", "B")):
            out[f"tree{t}.ev.{key}"] = np.broadcast_to(getattr(ev, f), ev.y.shape if f in ("yd", "task_weight") else
                                                      np.shape(getattr(ev, f)))


def keep(out: dict, key: str, result) -> None:
    for f in ("q", "position_error", "rotation_error", "iterations", "converged", "sigma_min"):
        out[f"{key}.{f}"] = getattr(result, f)


def chains(out: dict) -> None:
    for n in (6, 30):
        scene = reach_scene(straight_chain(n))
        targets = lissajous(200, n)
        for method in ("pinv", "dls", "sdls"):
            keep(out, f"chain{n}.{method}", solve_animation(scene, scene.model.neutral(200), targets,
                                                            settings=Settings(method=method)))
    limited = reach_scene(straight_chain(4, lock=(False, True, False), limits=((-0.5, 0.9), None, (-0.3, 0.4)),
                                         stiffness=(0.2, 0.0, 0.5)))
    targets = lissajous(100, 4) * 1.6
    targets[:, :, 3, 3] = 1.0
    keep(out, "limited", solve_animation(limited, limited.model.neutral(100), targets))
    stretchy = reach_scene(straight_chain(3, stretch=0.1))
    keep(out, "stretch", solve_animation(stretchy, stretchy.model.neutral(100), lissajous(100, 5)))
    keep(out, "fit", solve_animation(scene, scene.model.neutral(200), targets[:, :1].repeat(2, 0)[:200] * 0 +
                                     lissajous(200, 40), settings=Settings(fit=True)))
    sim = reach_scene(straight_chain(6))
    keep(out, "simulation", solve_simulation(sim, sim.model.neutral(1), lissajous(120, 6)))
    keep(out, "simulation.fixed", solve_simulation(sim, sim.model.neutral(1), lissajous(120, 6),
                                                   settings=Settings(substeps=3, feedforward=False)))


def panda(out: dict) -> None:
    from solver.restarts import random_coordinates, solve_with_restarts
    model = panda_arm()
    scene = pose_scene(model)
    rng = np.random.default_rng(3)
    q_true = np.stack([random_coordinates(scene, np.zeros(7), rng) for _ in range(60)])
    targets = forward_kinematics(model, q_true).frames[:, -1:]
    start = np.tile((model.lower + model.upper) / 2, (60, 1))
    for name, settings in (("default", Settings()), ("damped", Settings(steps="damped", curvature=False)),
                           ("sdls", Settings(method="sdls", max_iterations=50))):
        keep(out, f"panda.batched.{name}", solve_animation(scene, start, targets, settings=settings))
        for i in range(0, 60, 12):
            keep(out, f"panda.one{i}.{name}", solve_animation(scene, start[i:i + 1], targets[i:i + 1],
                                                              settings=settings))
    restarted = solve_with_restarts(scene, targets, rng=np.random.default_rng(5), budget=np.inf, max_restarts=4)
    keep(out, "panda.restarts", restarted)
    out["panda.restarts.restarts"] = restarted.restarts


def opensim(out: dict) -> None:
    folder = DATA / "opensim_gait2354"
    setup = folder / "subject01_Setup_InverseKinematics.xml"
    if not setup.exists():
        return
    from solver.opensim import run_ik_setup
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        run = run_ik_setup(setup, output_dir=tmp)
    out["opensim.q"] = run.result.q
    out["opensim.marker_errors"] = run.result.marker_errors
    out["opensim.iterations"] = run.result.iterations


def fly(out: dict) -> None:
    from solver import fly
    path = DATA / "fly_pose" / "pose3d_aligned.pkl"
    if not path.exists():
        return
    legs = fly.load_legs(path)
    some = dict(list(legs.items())[:2])
    some = {k: v[:40] for k, v in some.items()}
    for method in fly.METHODS:
        solved = fly.solve_legs(some, method=method)
        for leg, s in solved.items():
            out[f"fly.{method}.{leg}"] = np.asarray(s.angles)


def run() -> dict:
    out: dict = {}
    for part in (trees, chains, panda, opensim, fly):
        part(out)
    return out


def main(argv) -> int:
    mode, path = argv[1], Path(argv[2])
    out = run()
    if mode == "record":
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **out)
        print(f"recorded {len(out)} arrays in {path}")
        return 0
    before = np.load(path)
    differ = [k for k in before.files if k not in out or before[k].shape != np.shape(out[k])
              or not np.array_equal(before[k], out[k], equal_nan=True)]
    missing = [k for k in out if k not in before.files]
    for k in differ:
        print("differs:", k)
    for k in missing:
        print("new:", k)
    print(f"{len(before.files) - len(differ)} of {len(before.files)} arrays equal bit for bit")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Sequential IK of the fly legs: our closed-form stages (and our engine's iterated stages) against
IKPy solving the same four stages on the same keypoints, in the same run.

Both sides use the same leg (solver.fly: the seven angles, intrinsic yaw-pitch-roll at the ThC
joint, lengths = mean measured segment lengths, root at the measured Coxa keypoint) and the same
stages: (ThC yaw, pitch) -> Femur keypoint; (ThC roll, CTr pitch) -> Tibia; (TrF roll, FTi pitch)
-> Tarsus; (TiTa pitch) -> Claw; each stage's chain reaches from the ThC joint to its keypoint,
earlier stages' angles held fixed. Warm starts are the seed's: frame 0 from the hanging rest pose,
frame f from frame f-1's solution.

    ours   solver.fly.solve_legs (method 'sequential'): each stage in closed form, all six legs
           and all frames in one batch, the warm-start recurrence resolved by composing branch
           maps (solver/fly/closed_form.py); best of 5 calls per run (one call takes milliseconds)
    iterated  solver.fly.solve_legs(method='sequential-iterative'): the same stages solved by the
           engine, all legs batched, by batched passes over the recurrence (solver/sequential/)
    IKPy   one Chain per leg and stage (built before the clock starts: sympy compiles each link),
           one inverse_kinematics call per stage and leg-frame with IKPy's defaults
           (scipy least_squares), initial_position = the warm start; only these calls are timed

The three run in turn, --repeats times, and the medians are compared (the machine may be shared).

Before timing, the script checks that IKPy's forward kinematics of each stage chain equals ours at
random angles. Errors are distances (mm) between each measured keypoint and the same point of our
forward kinematics of the solved angles.

    .venv/bin/python -m bench.fly_vs_ikpy                # the 100-frame sample
    .venv/bin/python -m bench.fly_vs_ikpy --large        # the 1000-frame trial (IKPy takes minutes)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):                    # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver import fly  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "fly_pose"

# Per stage: how many of the seven angles its chain holds, and which of them it solves.
STAGE_JOINTS = [(3, (0, 1)), (5, (2, 3)), (6, (4, 5)), (7, (6,))]
AXES = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 1, 0), (0, 0, 1), (0, 1, 0), (0, 1, 0)]
OFFSET_BEFORE = [None, None, None, 0, None, 1, 2]     # angle k sits at the tip of segment OFFSET_BEFORE[k]


def ikpy_stage_chains(lengths):
    """IKPy chains of the four stages for one leg: [(chain, solved angle indices, n_angles)]."""
    from ikpy.chain import Chain
    from ikpy.link import OriginLink, URDFLink

    chains = []
    for stage, (n_angles, solved) in enumerate(STAGE_JOINTS):
        links = [OriginLink()]
        for k in range(n_angles):
            before = OFFSET_BEFORE[k]
            offset = [0.0, 0.0, -float(lengths[before])] if before is not None else [0.0, 0.0, 0.0]
            links.append(URDFLink(fly.ANGLES[k], origin_translation=offset, origin_orientation=[0.0, 0.0, 0.0],
                                  rotation=AXES[k]))
        links.append(URDFLink("tip", origin_translation=[0.0, 0.0, -float(lengths[stage])],
                              origin_orientation=[0.0, 0.0, 0.0], joint_type="fixed"))
        mask = [False] + [k in solved for k in range(n_angles)] + [False]
        chains.append((Chain(links, active_links_mask=mask, name=f"stage{stage + 1}"), solved, n_angles))
    return chains


def check_chains(chains, lengths, rng, trials: int = 20) -> float:
    """Largest distance between IKPy's stage-tip FK and ours (keypoint 1..4) at random angles."""
    worst = 0.0
    for _ in range(trials):
        angles = rng.uniform(-np.pi, np.pi, size=7)
        ours = fly.leg_keypoints(angles[None], lengths)[0]
        for stage, (chain, _, n_angles) in enumerate(chains):
            full = np.concatenate([[0.0], angles[:n_angles], [0.0]])
            theirs = chain.forward_kinematics(full)[:3, 3]
            worst = max(worst, float(np.linalg.norm(theirs - ours[stage + 1])))
    return worst


def solve_ikpy(keypoints, chains):
    """The four stages with IKPy, frame after frame: angles (F, 7) and seconds spent in IKPy."""
    F = keypoints.shape[0]
    angles = np.zeros((F, 7))
    targets = keypoints - keypoints[:, :1]                 # the chain's origin is the ThC joint
    seconds = 0.0
    for stage, (chain, solved, n_angles) in enumerate(chains):
        solved = list(solved)
        for f in range(F):
            start = angles[f].copy()
            if f:
                start[solved] = angles[f - 1, solved]      # warm start: the previous frame's solution
            initial = np.concatenate([[0.0], start[:n_angles], [0.0]])
            t = time.perf_counter()
            full = chain.inverse_kinematics(target_position=targets[f, stage + 1], initial_position=initial)
            seconds += time.perf_counter() - t
            angles[f, solved] = np.asarray(full)[1:n_angles + 1][solved]
    return angles, seconds


def summary(errors) -> str:
    """'mean / max' per keypoint of errors (..., 5)."""
    e = np.asarray(errors).reshape(-1, 5)
    return "  ".join(f"{name} {m:.4f}/{x:.4f}" for name, m, x in zip(fly.KEYPOINTS, e.mean(0), e.max(0)))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--large", action="store_true", help="the 1000-frame trial instead of the 100-frame sample")
    parser.add_argument("--frames", type=int, default=None, help="use only the first N frames")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs of both (median time)")
    args = parser.parse_args(argv)

    import ikpy

    name = "pose_result__210902_PR_Fly1_aligned.pkl" if args.large else "pose3d_aligned.pkl"
    legs = fly.load_legs(DATA / name)
    if args.frames:
        legs = {leg: k[:args.frames] for leg, k in legs.items()}
    n_legs, F = len(legs), next(iter(legs.values())).shape[0]
    leg_frames = n_legs * F
    print(f"Fly-leg sequential IK: {name}, {n_legs} legs x {F} frames; numpy {np.__version__}, IKPy {ikpy.__version__}")

    rng = np.random.default_rng(0)
    lengths = {leg: fly.segment_lengths(k) for leg, k in legs.items()}
    t = time.perf_counter()
    chains = {leg: ikpy_stage_chains(lengths[leg]) for leg in legs}
    build_s = time.perf_counter() - t
    fk_check = max(check_chains(chains[leg], lengths[leg], rng) for leg in legs)

    # Interleaved runs (ours, the iterated stages, IKPy, repeated) so that all see the same load.
    ours_times, iterated_times, ikpy_times, theirs_angles = [], [], [], {}
    for _ in range(args.repeats):
        best = np.inf
        for _ in range(5):
            t = time.perf_counter()
            ours = fly.solve_legs(legs)
            best = min(best, time.perf_counter() - t)
        ours_times.append(best)
        t = time.perf_counter()
        iterated = fly.solve_legs(legs, "sequential-iterative")
        iterated_times.append(time.perf_counter() - t)
        seconds = 0.0
        for leg, k in legs.items():
            theirs_angles[leg], s = solve_ikpy(k, chains[leg])
            seconds += s
        ikpy_times.append(seconds)
    ours_s, ikpy_s = statistics.median(ours_times), statistics.median(ikpy_times)
    iterated_ms = 1e3 * statistics.median(iterated_times) / leg_frames
    theirs_errors = {leg: np.linalg.norm(fly.leg_keypoints(theirs_angles[leg], lengths[leg], k[:, 0]) - k, axis=-1)
                     for leg, k in legs.items()}

    ours_ms, ikpy_ms = 1e3 * ours_s / leg_frames, 1e3 * ikpy_s / leg_frames
    e_ours = np.stack([ours[leg].position_error for leg in legs])
    e_theirs = np.stack([theirs_errors[leg] for leg in legs])
    wrapped = np.angle(np.exp(1j * (np.stack([ours[leg].angles for leg in legs])
                                    - np.stack([theirs_angles[leg] for leg in legs]))))
    same_branch = np.mean(np.all(np.abs(wrapped) < 1e-3, axis=-1))
    from_iterated = np.abs(np.stack([ours[leg].angles - iterated[leg].angles for leg in legs]))
    e_iterated = np.stack([iterated[leg].position_error for leg in legs])

    print(f"IKPy stage chains equal our FK to {fk_check:.1e} mm (random angles); building them took {build_s:.2f} s")
    print(f"time per leg-frame (4 stages), median of {args.repeats} interleaved runs: ours {ours_ms:.4f} ms "
          f"(runs {', '.join(f'{1e3 * t / leg_frames:.4f}' for t in ours_times)}), iterated {iterated_ms:.3f} ms "
          f"(runs {', '.join(f'{1e3 * t / leg_frames:.3f}' for t in iterated_times)}), IKPy {ikpy_ms:.3f} ms "
          f"(runs {', '.join(f'{1e3 * t / leg_frames:.3f}' for t in ikpy_times)})")
    print(f"ours / IKPy = {ours_ms / ikpy_ms:.5f} (IKPy / ours = {ikpy_ms / ours_ms:.0f}), "
          f"iterated / IKPy = {iterated_ms / ikpy_ms:.3f}")
    print(f"ours - iterated: largest angle difference {from_iterated.max():.1e} rad, "
          f"keypoint error {np.max(np.abs(e_ours - e_iterated)):.1e} mm")
    print("keypoint error, mm, mean/max over legs and frames:")
    print(f"  ours  {summary(e_ours)}")
    print(f"  IKPy  {summary(e_theirs)}")
    print(f"ours - IKPy keypoint error: mean {np.mean(e_ours - e_theirs):+.2e}, "
          f"largest where ours is worse {np.max(e_ours - e_theirs):.2e}, "
          f"where IKPy is worse {np.max(e_theirs - e_ours):.2e}")
    print(f"angles within 1e-3 rad of IKPy's in {100 * same_branch:.1f}% of leg-frames "
          f"(median |difference| {np.median(np.abs(wrapped)):.1e} rad)")
    return {"file": name, "legs": n_legs, "frames": F, "ours_ms": ours_ms, "ikpy_ms": ikpy_ms,
            "ratio": ours_ms / ikpy_ms, "iterated_ms": iterated_ms, "iterated_angle_difference": from_iterated.max(), "ours_error": e_ours, "ikpy_error": e_theirs, "fk_check": fk_check,
            "same_branch": same_branch}


def table(quick: bool = False):
    """The comparison as a bench.common Table, for `python -m bench`: the 100-frame sample, and the
    1000-frame trial unless quick."""
    from .common import Column, Table

    rows = []
    for args in (["--repeats", "1" if quick else "3"],) + (() if quick else (["--large", "--repeats", "1"],)):
        r = main(args)
        claw_ours, claw_ikpy = np.mean(r["ours_error"][..., 4]), np.mean(r["ikpy_error"][..., 4])
        rows.append({"file": r["file"], "leg_frames": r["legs"] * r["frames"], "ours_ms": r["ours_ms"],
                     "iterated_ms": r["iterated_ms"], "ikpy_ms": r["ikpy_ms"], "ratio": r["ratio"],
                     "speedup": 1.0 / r["ratio"],
                     "tibia_ours": float(np.mean(r["ours_error"][..., 2])),
                     "tibia_ikpy": float(np.mean(r["ikpy_error"][..., 2])),
                     "claw_ours": float(claw_ours), "claw_ikpy": float(claw_ikpy),
                     "same_branch": 100 * float(r["same_branch"])})
    columns = [Column("file", "file", "{}", text=True), Column("leg_frames", "leg-frames", "{}"),
               Column("ours_ms", "ours ms / leg-frame", "{:.4f}"),
               Column("iterated_ms", "ours iterated ms / leg-frame", "{:.3f}"),
               Column("ikpy_ms", "IKPy ms / leg-frame", "{:.3f}"),
               Column("ratio", "ours / IKPy", "{:.5f}"), Column("speedup", "IKPy / ours", "{:.0f}"),
               Column("tibia_ours", "tibia err ours (mm)", "{:.4f}"), Column("tibia_ikpy", "tibia err IKPy", "{:.4f}"),
               Column("claw_ours", "claw err ours", "{:.4f}"), Column("claw_ikpy", "claw err IKPy", "{:.4f}"),
               Column("same_branch", "same angles (%)", "{:.1f}")]
    return Table("fly_ikpy", "Sequential IK on fly legs: ours and IKPy, the same four stages",
                 "DeepFly3D keypoints (../shared/data/fly_pose), 6 legs; each stage solves its new joints for "
                 "its own keypoint, frames warm-started from the previous frame. Ours: every stage in closed "
                 "form, all legs and frames batched (solver.fly.solve_legs, best of 5 calls per run); ours "
                 "iterated: the same stages solved by the engine (method='sequential-iterative'); IKPy: one "
                 "inverse_kinematics call per stage and leg-frame. Errors: mean keypoint distance (mm) of ours "
                 "and IKPy; same angles: ours within 1e-3 rad of IKPy's, all seven angles.", columns, rows)


def draw(table, path) -> None:
    from .common import plot

    series = {}
    for row in table.rows:
        series[f"{row['file']}: ours"] = row["ours_ms"]
        series[f"{row['file']}: ours iterated"] = row["iterated_ms"]
        series[f"{row['file']}: IKPy"] = row["ikpy_ms"]
    plot(path, table.title, "ms per leg-frame", series, log=True)


if __name__ == "__main__":
    main()

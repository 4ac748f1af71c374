"""6-D pose IK of a 7-DOF arm on random reachable poses: ours with random restarts, IKPy, and
TRAC-IK's published figures for the same kind of test.

The arm is the Franka Emika Panda (solver.examples.panda_arm: Franka's modified-DH table and joint
limits). Poses: uniform random joint values within the limits, forward kinematics to the flange.
Every query starts from the middle of the joint limits. Solved means the flange is within 1e-5 m
of the target position AND within 1e-5 rad (angle of the relative rotation) of its orientation,
measured by our forward kinematics of the returned joints, which must lie within the limits;
ours must also have been charged no more than the budget for it.

    ours, batched   solver.restarts.solve_with_restarts on all poses in one call: the first solve
                    from the mid-range pose, then random restarts of the unconverged poses, with a
                    5 ms budget per pose (each batched solve's time shared equally among its starts)
    ours, one query solver.restarts.solve_racing, one call per pose, on all poses: the query's
                    starts (the mid-range pose and random ones) race in one batch from the
                    first iteration, the first to reach the target wins; the call's wall time is
                    charged to the pose
    ours, F=1       solve_with_restarts, one call per pose, on a subset
    IKPy            one inverse_kinematics call per pose (orientation_mode="all", its defaults:
                    scipy least_squares), on a subset; its chain is built from the same DH table
                    and its forward kinematics checked against ours first
    TRAC-IK         not run: the figures its authors publish (README of bitbucket.org/traclabs/
                    trac_ik, TRAC-IK v1.1.0: 10,000 random reachable configurations, 1e-5 on each
                    of x, y, z, roll, pitch, yaw, 5 ms timeout, seeded midway between the limits)
                    for their two KUKA 7-DOF arms; the Panda is not in their table

    .venv/bin/python -m bench --only random_poses [--quick]
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from solver import Settings, forward_kinematics, solve_animation
from solver.examples import PANDA_DH, PANDA_FLANGE, panda_arm, pose_scene
from solver.restarts import middle_of_limits, random_coordinates, solve_racing, solve_with_restarts
from solver.restarts.race import RESTART_ITERATIONS as RACE_RESTART_ITERATIONS, STARTS

from .common import Column, Table, error_stats, plot, ratio

TOLERANCE = 1e-5
BUDGET = 0.005
# The targets are reachable: at a solution the error and so the curvature estimate vanish, and
# plain Levenberg-Marquardt steps from the first iteration reach it at the least cost. Steps of up
# to 1 rad per joint (twice the default) take a median of 8 iterations from mid-range where 0.5
# takes 9; 99 % of the first solves that converge do so within 50 iterations.
SETTINGS = Settings(precision=TOLERANCE, steps="damped", curvature=False, max_step=1.0, max_iterations=50)
# One start at a time, counted in iterations: the first solve from mid-range, then random starts.
FIRST_ITERATIONS, RESTART_ITERATIONS, MAX_RESTARTS = 20, 16, 60
ITERATION_BUDGETS = (6, 8, 10, 12, 18, 25, 35, 50, 100, 200, 400, 800)
# Poses come from seed 0; restarts draw from seeds of their own (the same seed would start a
# restart at the very joint values that made the pose).
RESTART_SEED = 1
# solve_racing: its default number of racing starts; every random start draws from one generator
# made before the timed calls (as an application that answers queries keeps one).
RACE_STARTS, RACE_SEED = STARTS, 2
# TRAC-IK README, results as of tag v1.1.0: solve rate, average time over all queries (5 ms timeout).
TRAC_IK = (("KUKA LBR iiwa 14 R820", 99.91, 0.41), ("KUKA LWR 4+", 99.98, 0.34))


def random_poses(model, n: int, seed: int = 0):
    """Joint values uniform within the limits (n, 7) and the flange poses they give (n, 4, 4)."""
    q = np.random.default_rng(seed).uniform(model.lower, model.upper, (n, model.n_coordinates))
    return q, forward_kinematics(model, q).frames[:, -1]


def pose_errors(model, q, targets):
    """Position (m) and rotation angle (rad) from the flange at q to each target, and whether
    each q lies within the limits."""
    T = forward_kinematics(model, q).frames[:, -1]
    position = np.linalg.norm(T[:, :3, 3] - targets[:, :3, 3], axis=-1)
    R = np.swapaxes(targets[:, :3, :3], -1, -2) @ T[:, :3, :3]
    sin = 0.5 * np.linalg.norm(np.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0],
                                         R[:, 1, 0] - R[:, 0, 1]], axis=-1), axis=-1)
    rotation = np.arctan2(sin, 0.5 * (np.trace(R, axis1=-2, axis2=-1) - 1.0))
    inside = np.all((q >= model.lower) & (q <= model.upper), axis=-1)
    return position, rotation, inside


def ikpy_chain():
    """An ikpy Chain of the Panda from the same DH table: each link's fixed part
    Rx(alpha) Tx(a) Tz(d) is the origin translation (a, -d sin alpha, d cos alpha) then roll alpha."""
    from ikpy.chain import Chain
    from ikpy.link import OriginLink, URDFLink

    model = panda_arm()
    links = [OriginLink()]
    for i, (a, d, alpha) in enumerate(PANDA_DH + (PANDA_FLANGE,)):
        origin = dict(origin_translation=[a, -d * np.sin(alpha), d * np.cos(alpha)], origin_orientation=[alpha, 0.0, 0.0])
        if i < len(PANDA_DH):
            links.append(URDFLink(f"joint{i + 1}", rotation=[0.0, 0.0, 1.0],
                                  bounds=(model.lower[i], model.upper[i]), **origin))
        else:
            links.append(URDFLink("flange", joint_type="fixed", **origin))
    return Chain(links, active_links_mask=[False] + [True] * len(PANDA_DH) + [False])


def ikpy_fk_difference(chain, model, n: int = 50) -> float:
    """Largest entry of (IKPy's flange pose - ours) at random joint values."""
    q, ours = random_poses(model, n, seed=99)
    theirs = np.stack([chain.forward_kinematics(np.concatenate([[0.0], row, [0.0]])) for row in q])
    return float(np.max(np.abs(theirs - ours)))


def solve_ikpy(chain, model, targets):
    """One inverse_kinematics call per pose from the mid-range pose: (seconds, q)."""
    start = np.concatenate([[0.0], middle_of_limits(pose_scene(model)), [0.0]])
    q = []
    t = time.perf_counter()
    for T in targets:
        q.append(chain.inverse_kinematics(target_position=T[:3, 3], target_orientation=T[:3, :3],
                                          orientation_mode="all", initial_position=start)[1:-1])
    return time.perf_counter() - t, np.array(q)


def solve_one_by_one(scene, targets, budget: float):
    """solve_with_restarts called once per pose (F=1): (seconds, [results])."""
    results = []
    t = time.perf_counter()
    for f in range(targets.shape[0]):
        results.append(solve_with_restarts(scene, targets[f:f + 1, None], SETTINGS, rng=RESTART_SEED + f,
                                           budget=budget))
    return time.perf_counter() - t, results


def solve_racing_one_by_one(scene, targets, budget: float, starts: int = RACE_STARTS):
    """solve_racing called once per pose: (seconds, [results])."""
    rng = np.random.default_rng(RACE_SEED)
    results = []
    t = time.perf_counter()
    for f in range(targets.shape[0]):
        results.append(solve_racing(scene, targets[f:f + 1, None], SETTINGS, rng=rng, budget=budget, starts=starts))
    return time.perf_counter() - t, results


def row(label: str, model, targets, q, seconds: float, restarts=None, charged=None, first=None,
        budget: float = np.inf) -> dict:
    """A table row; a pose counts as solved only when its answer is within tolerance and limits
    and the time charged to it is within the budget."""
    position, rotation, inside = pose_errors(model, q, targets)
    solved = inside & (position <= TOLERANCE) & (rotation <= TOLERANCE)
    if charged is not None:
        solved &= charged <= budget
    n = targets.shape[0]
    out = {"solver": label, "poses": n, "solved": 100.0 * solved.mean(), "ms": 1e3 * seconds / n,
           "first": None if first is None else 100.0 * np.mean(first),
           "outside_limits": int(np.sum(~inside)),
           "restarts": None if restarts is None else int(np.sum(restarts)),
           "max_restarts": None if restarts is None else int(np.max(restarts)),
           "max_charged": None if charged is None else 1e3 * float(np.max(charged))}
    for name, errors in (("pos", position), ("rot", rotation)):
        stats = error_stats(errors, 1.0)
        out.update({f"{name}_{k}": stats[k] for k in ("median", "p99", "max")})
    return out


def run(quick: bool = False) -> Table:
    import ikpy

    n_batch, n_single, n_ikpy = (2000, 20, 10) if quick else (10000, 500, 200)
    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_poses(model, n_batch, seed=0)
    solve_with_restarts(scene, targets[:4, None], SETTINGS, rng=0)          # first-call costs out of the timings
    solve_racing(scene, targets[:1, None], SETTINGS, rng=0, starts=RACE_STARTS)
    chain = ikpy_chain()
    fk_check = ikpy_fk_difference(chain, model)
    if fk_check > 1e-9:
        raise RuntimeError(f"IKPy's Panda differs from ours by {fk_check:.1e}")

    # Interleaved: IKPy's subset, then ours one by one, then ours batched.
    ikpy_s, ikpy_q = solve_ikpy(chain, model, targets[:n_ikpy])
    race_s, races = solve_racing_one_by_one(scene, targets, BUDGET)
    single_s, singles = solve_one_by_one(scene, targets[:n_single], BUDGET)
    batch = solve_with_restarts(scene, targets[:, None], SETTINGS, rng=RESTART_SEED, budget=BUDGET)
    long = solve_with_restarts(scene, targets[:, None], SETTINGS, rng=RESTART_SEED, budget=4 * BUDGET)

    stack = lambda name, results=singles: np.concatenate([getattr(r, name) for r in results])  # noqa: E731
    rows = [row(f"ours, batched (one call), {1e3 * BUDGET:.0f} ms budget", model, targets, batch.q, batch.seconds,
                batch.restarts, batch.charged, batch.first_converged, BUDGET),
            row(f"ours, batched (one call), {4e3 * BUDGET:.0f} ms budget", model, targets, long.q, long.seconds,
                long.restarts, long.charged, long.first_converged, 4 * BUDGET),
            row(f"ours, one query per call (solve_racing, {RACE_STARTS} starts racing), {1e3 * BUDGET:.0f} ms budget",
                model, targets, stack("q", races), race_s, stack("restarts", races), stack("charged", races),
                stack("first_converged", races), BUDGET),
            row(f"ours, F=1 (solve_with_restarts, call per pose), {1e3 * BUDGET:.0f} ms budget", model,
                targets[:n_single], stack("q"),
                single_s, stack("restarts"), stack("charged"), stack("first_converged"), BUDGET),
            row(f"IKPy {ikpy.__version__} (call per pose)", model, targets[:n_ikpy], ikpy_q, ikpy_s)]
    ikpy_ms = rows[-1]["ms"]
    for r in rows[:-1]:
        r["vs_ikpy"] = ratio(r["ms"], ikpy_ms)
    for arm, rate, ms in TRAC_IK:
        rows.append({"solver": f"TRAC-IK v1.1.0, {arm}: cited, not measured", "poses": 10000, "solved": rate, "ms": ms})

    columns = [Column("solver", "solver", text=True), Column("poses", "poses"),
               Column("solved", "solved %", "{:.2f}"), Column("first", "1st try %", "{:.1f}"),
               Column("ms", "ms / pose", "{:.3f}"), Column("vs_ikpy", "ours / IKPy", "{:.4f}"),
               Column("max_charged", "max ms charged", "{:.1f}"),
               Column("restarts", "restarts"), Column("max_restarts", "max / pose"),
               Column("pos_median", "pos err median (m)", "{:.1e}"), Column("pos_p99", "pos p99", "{:.1e}"),
               Column("pos_max", "pos max", "{:.1e}"),
               Column("rot_median", "rot err median (rad)", "{:.1e}"), Column("rot_p99", "rot p99", "{:.1e}"),
               Column("rot_max", "rot max", "{:.1e}"), Column("outside_limits", "outside limits")]
    return Table(
        "random_poses", "7-DOF arm (Franka Panda), random reachable 6-D poses",
        f"Franka Emika Panda (`solver.examples.panda_arm`, Franka's modified-DH parameters and joint limits), "
        f"{n_batch} flange poses from uniform random joint values; every query starts from the middle of the "
        f"limits. Solved: position error <= {TOLERANCE:g} m and rotation error (angle) <= {TOLERANCE:g} rad, by our "
        "forward kinematics, joints within the limits, and (ours) the time charged to the pose within the "
        "budget. Ours: `solver.restarts.solve_with_restarts` (CopyPose on position and rotation, plain "
        "Levenberg-Marquardt steps from the first iteration: `steps=\"damped\", curvature=False`, the targets "
        "being reachable, steps of up to 1 rad per joint, the first solve capped at 50 iterations; unconverged "
        "poses restarted from the best of 8 random joint vectors, batched, a pose's starts racing (the others "
        "stop when one converges), restarts capped at 16 iterations); time "
        "is charged per pose, its share of each batched solve, and every solve stops at the deadline the "
        "budget sets; ms / pose: wall time of all calls / poses; max ms charged: the most any pose was charged "
        "(the deadline is checked between iterations, so start selection and the last iteration may run past "
        f"it). One query per call: `solver.restarts.solve_racing`, {RACE_STARTS} starts of the query (the mid-range "
        "pose, capped at 50 iterations, and random ones within the limits, their damping starting at 0.01, "
        f"capped at {RACE_RESTART_ITERATIONS} iterations and replaced by a new random start when they end) take "
        "the same damped steps together in one batch from the first iteration; the first to reach the target "
        "wins and the others stop; one random generator for all calls, made before them; the time charged is "
        "the call's whole wall time, so max ms charged is the slowest call (the deadline is checked before "
        "each batched iteration, which may run past it; Python's garbage collector is held off during a call, "
        "its collections falling between calls, in ms / pose but not in the time charged). "
        f"F=1 (solve_with_restarts, a call per pose) and IKPy (orientation_mode=\"all\", its defaults) on the "
        f"first {n_single} and {n_ikpy} poses; "
        f"IKPy's chain equals our FK to {fk_check:.0e}. TRAC-IK rows are its authors' published figures "
        "(C++, their machine; tolerance 1e-5 per Cartesian component, 5 ms timeout, mid-range seed) for two "
        "other 7-DOF arms, not a run of ours: a reference, not a comparison on equal terms.",
        columns, rows)


def draw(table: Table, path) -> None:
    plot(path, table.title + ": time per pose", "ms per pose (log)",
         {r["solver"]: r["ms"] for r in table.rows})


def iterations_needed(scene, targets, seed: int = RESTART_SEED) -> np.ndarray:
    """Iterations each pose takes to be solved one start at a time (inf: not within MAX_RESTARTS
    random starts): up to FIRST_ITERATIONS from the mid-range pose, then random starts within the
    limits of up to RESTART_ITERATIONS each. Poses are batched for speed; each counts its own
    iterations, so this is what a call per pose would take."""
    model, n = scene.model, targets.shape[0]
    mid = np.tile(middle_of_limits(scene), (n, 1))
    rng = np.random.default_rng(seed)
    used, needed = np.zeros(n), np.full(n, np.inf)
    open_, starts, cap = np.arange(n), mid, FIRST_ITERATIONS
    for _ in range(MAX_RESTARTS + 1):
        result = solve_animation(scene, starts, targets[open_, None],
                                 settings=replace(SETTINGS, max_iterations=cap))
        used[open_] += result.iterations
        position, rotation, inside = pose_errors(model, result.q, targets[open_])
        solved = inside & (position <= TOLERANCE) & (rotation <= TOLERANCE)
        needed[open_[solved]] = used[open_[solved]]
        open_ = open_[~solved]
        if open_.size == 0:
            break
        starts, cap = random_coordinates(scene, mid[open_], rng), RESTART_ITERATIONS
    return needed


def seconds_per_iteration(scene, targets, seed: int = RESTART_SEED) -> float:
    """Wall time per iteration of solves of one pose (F=1, a call each, up to RESTART_ITERATIONS
    from a random start): what an iteration costs one query at a time, call overhead included."""
    rng = np.random.default_rng(seed)
    settings = replace(SETTINGS, max_iterations=RESTART_ITERATIONS)
    mid = middle_of_limits(scene)[None]
    iterations, t = 0, time.perf_counter()
    for T in targets:
        iterations += int(solve_animation(scene, random_coordinates(scene, mid, rng), T[None, None],
                                          settings=settings).iterations[0])
    return (time.perf_counter() - t) / max(iterations, 1)


def passes_needed(scene, targets, starts: int = RACE_STARTS) -> np.ndarray:
    """Passes (iterations of all racing starts at once) solve_racing takes for each pose, one call
    each without a time limit (inf: not within max(ITERATION_BUDGETS) passes); every answer
    checked by pose_errors."""
    model, rng = scene.model, np.random.default_rng(RACE_SEED)
    needed, q = np.full(targets.shape[0], np.inf), np.empty((targets.shape[0], model.n_coordinates))
    for f in range(targets.shape[0]):
        result = solve_racing(scene, targets[f:f + 1, None], SETTINGS, rng=rng, budget=np.inf, starts=starts,
                              max_passes=max(ITERATION_BUDGETS))
        q[f] = result.q[0]
        if result.converged[0]:
            needed[f] = result.passes[0]
    position, rotation, inside = pose_errors(model, q, targets)
    solved = inside & (position <= TOLERANCE) & (rotation <= TOLERANCE)
    if np.any(np.isfinite(needed) & ~solved):
        raise RuntimeError("solve_racing reported a pose converged that is not within the tolerance")
    return needed


def seconds_per_pass(scene, targets, starts: int = RACE_STARTS, passes: int = 16):
    """Wall time of a call with no pass (the starts' first evaluation and the call's own work) and
    of each pass beyond it, from calls of up to `passes` passes, one pose each."""
    rng = np.random.default_rng(RACE_SEED)
    t = time.perf_counter()
    for T in targets:
        solve_racing(scene, T[None, None], SETTINGS, rng=rng, budget=np.inf, starts=starts, max_passes=0)
    per_call = (time.perf_counter() - t) / targets.shape[0]
    done, t = 0, time.perf_counter()
    for T in targets:
        done += int(solve_racing(scene, T[None, None], SETTINGS, rng=rng, budget=np.inf, starts=starts,
                                 max_passes=passes).passes[0])
    return per_call, max(time.perf_counter() - t - per_call * targets.shape[0], 0.0) / max(done, 1)


def iterations_table(quick: bool = False) -> Table:
    n, n_timed = (2000, 50) if quick else (10000, 300)
    model = panda_arm()
    scene = pose_scene(model)
    _, targets = random_poses(model, n, seed=0)
    needed = iterations_needed(scene, targets)
    per_iteration = seconds_per_iteration(scene, targets[:n_timed])
    passes = passes_needed(scene, targets)
    per_call, per_pass = seconds_per_pass(scene, targets[:n_timed])
    rows = [{"iterations": k, "solved": 100.0 * np.mean(needed <= k), "us_needed": 1e6 * BUDGET / k,
             "ms_at_f1": 1e3 * k * per_iteration, "race_solved": 100.0 * np.mean(passes <= k),
             "race_ms": 1e3 * (per_call + k * per_pass)} for k in ITERATION_BUDGETS]
    columns = [Column("iterations", "iterations (passes) per pose"), Column("solved", "solved %", "{:.2f}"),
               Column("us_needed", f"µs / iteration to fit {1e3 * BUDGET:.0f} ms", "{:.1f}"),
               Column("ms_at_f1", "ms at our F=1 iteration", "{:.2f}"),
               Column("race_solved", f"racing {RACE_STARTS} starts: solved % within k passes", "{:.2f}"),
               Column("race_ms", "ms for a call of k passes", "{:.2f}")]
    return Table(
        "random_poses_iterations", "7-DOF arm (Franka Panda): solve rate against iterations per pose",
        f"The {n} poses of the random_poses table, solved one start at a time and counted in iterations, "
        f"not seconds: up to {FIRST_ITERATIONS} iterations from the mid-range pose, then random starts within "
        f"the limits of up to {RESTART_ITERATIONS} each (at most {MAX_RESTARTS}); a pose is solved within k "
        "iterations when the start that solves it ends by its k-th iteration in all. Same settings and "
        "tolerances as random_poses; poses are batched for speed, each counting its own iterations. "
        f"µs / iteration to fit: the budget / k. Our iteration one query at a time "
        f"(F=1, a call per start, {n_timed} random starts): {1e6 * per_iteration:.0f} µs, so "
        f"{BUDGET / per_iteration:.0f} iterations fit the budget; that column is k of them. Racing: "
        f"`solver.restarts.solve_racing` with {RACE_STARTS} starts, one call per pose without a time limit, "
        "counted in passes (one iteration of all its starts at once; a start that ends is replaced by a new "
        "random one in the same pass): solved within k passes when its call ends with the target reached "
        f"by its k-th pass. A call ({n_timed} poses, a call each): {1e6 * per_call:.0f} µs with no pass "
        f"(the starts' first evaluation and the call's own work), {1e6 * per_pass:.0f} µs per pass, so "
        f"{(BUDGET - per_call) / per_pass:.0f} passes fit the budget; the last column is a call of k passes.",
        columns, rows)


def draw_iterations(table: Table, path) -> None:
    rows = table.rows
    plot(path, table.title, "poses not solved % (log)",
         {"ours, one start at a time": [max(100.0 - r["solved"], 1e-3) for r in rows],
          f"ours, {RACE_STARTS} starts racing (passes)": [max(100.0 - r["race_solved"], 1e-3) for r in rows]},
         x=[r["iterations"] for r in rows], xlabel="iterations per pose (log)")

"""Simulation mode's integration in time against an independent ODE solver.

Within a frame the simulation integrates q' = A# (K (yd - y) + B Xu') while the target moves at
the constant twist between its poses at the two frames. The reference integrates the same
equation with scipy's adaptive Runge-Kutta (solve_ivp, RK45, tolerances 1e-11) and numpy's own
pseudo-inverse, from the same start: our sub-steps (explicit midpoint) must converge to it at
second order, the error falling about fourfold each time the sub-step halves (Euler steps: twofold).
"""

import numpy as np
import pytest

from solver import Settings, solve_simulation
from solver.examples import lissajous, reach_scene, straight_chain
from solver.simulation import advance, twist_between

integrate = pytest.importorskip("scipy.integrate", reason="scipy's solve_ivp is the reference")

FPS, K = 24.0, 20.0


def reference(scene, q_start, targets):
    """q at every frame from q_start (frame 0) by solve_ivp of the update law's equation."""
    dt = 1.0 / FPS
    out = [q_start]
    for f in range(1, len(targets)):
        twist = twist_between(targets[f - 1:f], targets[f:f + 1], dt)
        Xu_dot = np.zeros((1, scene.n_u))              # the target's twist; the chain's base stands still
        Xu_dot[:, :6] = twist.reshape(1, -1)

        def slope(t, q):
            ev = scene.evaluate(q[None], advance(targets[f - 1:f], twist, t), jacobians=True)
            y_dot = K * (ev.yd - ev.y) + np.einsum("fmu,fu->fm", ev.B, Xu_dot)
            return np.linalg.pinv(ev.A[0]) @ y_dot[0]

        solution = integrate.solve_ivp(slope, (0.0, dt), out[-1], method="RK45", rtol=1e-11, atol=1e-11)
        out.append(solution.y[:, -1])
    return np.array(out)


def tip(scene, q):
    from solver import forward_kinematics

    frames = forward_kinematics(scene.model, q).frames[:, -1]
    return frames[:, :3, 3] + frames[:, :3, :3] @ np.array([0.0, scene.model.length[-1], 0.0])


def test_sub_steps_converge_to_the_equation_at_second_order():
    scene = reach_scene(straight_chain(3))
    targets = lissajous(96, 3.0)[:16]              # a fast stretch of the path: the chain lags and bends
    deviation = {}
    q_ref = None
    for substeps in (1, 2, 4):
        settings = Settings(method="pinv", feedback=K, fps=FPS, substeps=substeps, max_velocity=1e6)
        result = solve_simulation(scene, scene.model.neutral(1), targets, settings=settings)
        if q_ref is None:
            q_ref = reference(scene, result.q[0], targets)       # from the converged first frame
        deviation[substeps] = np.abs(tip(scene, result.q) - tip(scene, q_ref)).max()
    print(f"\nlargest tip deviation from solve_ivp over 15 frames: {deviation}")
    assert deviation[1] / deviation[2] > 3.0 and deviation[2] / deviation[4] > 3.0
    assert deviation[2] < 1e-3 * 3.0                  # within 1e-3 of the chain's reach at 2 sub-steps


def test_automatic_sub_steps_keep_k_h_at_a_half():
    """With slow joints, the automatic choice is the feedback's: ceil(K dt / 0.5) sub-steps."""
    scene = reach_scene(straight_chain(6))
    targets = lissajous(480, 6.0)[:24]            # a slow path: the coordinate-change rule does not bind
    result = solve_simulation(scene, scene.model.neutral(1), targets, settings=Settings(feedback=K, fps=FPS))
    assert (result.iterations[1:] == int(np.ceil(K / FPS / 0.5))).all()

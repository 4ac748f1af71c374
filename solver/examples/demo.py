"""The engine demo: a chain's tail follows a target moving on a Lissajous curve.

    python -m solver demo [--bones 6] [--frames 240]

Animation mode solves every frame from the straight rest pose (all frames in one batch);
simulation mode advances one time step per frame, as live preview does. Prints the error of
every tenth frame and a summary per mode.
"""

from __future__ import annotations

import numpy as np

from ..animation import solve_animation
from ..simulation import solve_simulation
from ..result import Result
from ..settings import Settings
from .chains import lissajous, reach_scene, straight_chain


def _summary(name: str, result: Result, chain_length: float) -> str:
    err = result.position_error[:, 0]
    frames = len(err)
    return (f"{name:<11} frames {frames}  converged {int(result.converged.sum())}/{frames}  "
            f"max error {np.nanmax(err):.2e} ({np.nanmax(err) / chain_length:.1e} x length)  "
            f"median {np.nanmedian(err):.2e}  time {result.seconds * 1e3 / frames:.3f} ms/frame")


def run(n_bones: int = 6, n_frames: int = 240, every: int = 10) -> None:
    scene = reach_scene(straight_chain(n_bones))
    targets = lissajous(n_frames, n_bones)
    settings = Settings()
    animation = solve_animation(scene, scene.model.neutral(n_frames), targets, settings=settings)
    simulation = solve_simulation(scene, scene.model.neutral(1), targets, settings=settings)
    print(f"{n_bones}-bone chain (length {n_bones}), target on a Lissajous curve, {n_frames} frames")
    print(f"{'frame':>5}  {'animation error':>15}  {'iterations':>10}  {'simulation error':>16}  {'substeps':>8}")
    for f in range(0, n_frames, every):
        print(f"{f:>5}  {animation.position_error[f, 0]:>15.2e}  {animation.iterations[f]:>10}  "
              f"{simulation.position_error[f, 0]:>16.2e}  {simulation.iterations[f]:>8}")
    print(_summary("animation", animation, n_bones))
    print(_summary("simulation", simulation, n_bones))

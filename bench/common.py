"""What every benchmark shares: our solve on the example chain, error statistics, tables, files.

A table is a title, a caption and rows (dicts); `markdown` prints it, `save` writes it as JSON to
bench/results/<name>.json. Errors are tip-to-target distances in scene units (metres; a chain of
n bones is n long).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from solver import Settings, forward_kinematics, solve_animation
from solver.examples import lissajous, reach_scene, straight_chain

RESULTS = Path(__file__).resolve().parent / "results"
RELATIVE = 1e-6        # "off" means further than RELATIVE x chain length from the target ...
MILLIMETRE = 1e-3      # ... or further than 1 mm


def chain_scene(n_bones: int):
    """The straight n-bone chain (bones 1 long) whose last tail follows object 0, solved once
    already so that first-call costs (lazy caches, imports) stay out of the timings."""
    scene = reach_scene(straight_chain(n_bones))
    solve_ours(scene, targets(1, n_bones))
    return scene


def targets(n_frames: int, n_bones: int) -> np.ndarray:
    """The Lissajous target poses (F, 1, 4, 4) inside the chain's reach (solver.examples)."""
    return lissajous(n_frames, float(n_bones))


def tip_errors(scene, q: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """Distance from the last bone's tail to the target, by our forward kinematics."""
    frame = forward_kinematics(scene.model, q).frames[:, -1]
    tip = frame[:, :3, :3] @ np.array([0.0, scene.model.length[-1], 0.0]) + frame[:, :3, 3]
    return np.linalg.norm(tip - poses[:, 0, :3, 3], axis=-1)


def solve_ours(scene, poses: np.ndarray, settings: Settings = Settings()):
    """Animation mode, every frame from the straight rest pose, in one call: (seconds, result)."""
    start = time.perf_counter()
    result = solve_animation(scene, scene.model.neutral(poses.shape[0]), poses, settings=settings)
    return time.perf_counter() - start, result


def best_time(run, repeats: int):
    """Shortest wall time of `repeats` calls of run() -> (seconds, value), the last value kept.
    The shortest, not the median: on a shared machine the others only add other people's load."""
    times, value = [], None
    for _ in range(repeats):
        seconds, value = run()
        times.append(seconds)
    return min(times), value


def error_stats(errors, length: float, converged=None) -> dict:
    """Median, 99th percentile and max error; frames off by more than RELATIVE x length and
    more than 1 mm; frames not converged (None when the solver does not say)."""
    e = np.asarray(errors, dtype=float)
    return {
        "frames": int(e.size),
        "median": float(np.median(e)),
        "p99": float(np.percentile(e, 99)),
        "max": float(np.max(e)),
        "off_relative": int(np.sum(~(e <= RELATIVE * length))),   # NaN counts as off
        "off_1mm": int(np.sum(~(e <= MILLIMETRE))),
        "not_converged": None if converged is None else int(np.sum(~np.asarray(converged))),
    }


def ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs > 0 else float("nan")


@dataclass
class Column:
    key: str
    header: str
    fmt: str = "{}"
    text: bool = False      # left-aligned words rather than numbers


@dataclass
class Table:
    name: str
    title: str
    caption: str
    columns: list
    rows: list = field(default_factory=list)

    def markdown(self) -> str:
        def cell(row, col):
            value = row.get(col.key)
            return "—" if value is None else col.fmt.format(value)
        lines = [f"### {self.title}", "", self.caption, "",
                 "| " + " | ".join(c.header for c in self.columns) + " |",
                 "|" + "|".join("---" if c.text else "---:" for c in self.columns) + "|"]
        lines += ["| " + " | ".join(cell(r, c) for c in self.columns) + " |" for r in self.rows]
        return "\n".join(lines)

    def save(self, meta: dict, folder: Path = RESULTS) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.name}.json"
        data = {"title": self.title, "caption": self.caption, "columns": [asdict(c) for c in self.columns],
                "rows": self.rows, "meta": meta}
        path.write_text(json.dumps(data, indent=1, default=float) + "\n")
        return path


# Column sets used by several tables.
TIME = Column("ms_per_frame", "ms / frame", "{:.3f}")
ERRORS = [Column("median", "median err", "{:.1e}"), Column("p99", "p99 err", "{:.1e}"),
          Column("max", "max err", "{:.1e}"), Column("off_relative", "> 1e-6 L"),
          Column("off_1mm", "> 1 mm"), Column("not_converged", "not conv.")]


def plot(path: Path, title: str, ylabel: str, series: dict, x=None, xlabel: str = "", log: bool = True):
    """One PNG: bars (series = {label: value}) or, with x, lines (series = {label: values})."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    if x is None:
        labels = list(series)
        colors = ["tab:blue" if "ours" in k else "tab:orange" for k in labels]   # ours blue, theirs orange
        ax.barh(range(len(labels)), [series[k] for k in labels], color=colors)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(ylabel)
        if log:
            ax.set_xscale("log")
    else:
        for label, values in series.items():
            ax.plot(x, values, marker="o", label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.legend()
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def blender_session(module: str, call: str, exit_at_once: bool):
    """The value of `call`, an expression over bench.<module>'s names, evaluated in a fresh bpy
    process with the extension installed from a freshly built zip (tools.blender_session)."""
    from tools import build_extension
    from tools.blender_session import ROOT, run_in_blender

    zip_path = build_extension.write_zip(ROOT / "dist")
    return run_in_blender(f"from bench.{module} import *\nresult = {call}\n", extension_zip=zip_path,
                          sys_path=[ROOT], exit_at_once=exit_at_once)


def profile_report(profiler, top: int) -> str:
    """A cProfile run's `top` entries sorted by cumulative and by own time, as text."""
    import io
    import pstats

    text = io.StringIO()
    for key in ("cumulative", "tottime"):
        pstats.Stats(profiler, stream=text).sort_stats(key).print_stats(top)
    return text.getvalue()

"""Peak memory and time of a long bake against its length, on Rigify's human metarig.

Each length in its own fresh bpy process (tools.blender_session), the extension installed from
the built zip: the demo's scene (tools.demo_rigify, hands and feet on moving targets; the targets
keyed on every frame in bulk), then one ``api.bake(rig, 1, N)`` with the add-on's defaults.

- peak RSS: the process's ``ru_maxrss`` (resource.getrusage) just before and just after the bake;
  the bake's cost is the rise of the peak (Blender, the scene and its keyed targets are in the
  "before");
- numpy/Python peak: in a second fresh process, the same bake under ``tracemalloc`` (numpy reports
  its array allocations to it): the peak of traced memory during the bake above what was traced
  before it. Slower (tracing), so its time is not reported.

Bytes per frame are the slope of a least-squares line through the rises (its intercept is the
fixed cost); the "per added frame" columns divide each rise's growth over the row above by the
frames added, so growth is linear when they stay level as the length grows.

    .venv/bin/python -m bench --only long_bake --markdown BENCHMARKS.md
"""

from __future__ import annotations

import numpy as np

from .common import Column, Table, blender_session, plot

LENGTHS = (1000, 5000, 20000)
QUICK_LENGTHS = (200, 1000, 2000)
MB = 1024.0 * 1024.0


# ---- inside Blender ---------------------------------------------------------------------------

def build(bpy, n_frames):
    """tools.demo_rigify's scene with its targets keyed on frames 1..n_frames."""
    from tools import demo_rigify

    scene, rig, _ = demo_rigify.build_keyed(bpy, n_frames)
    return scene, rig


def in_blender(n_frames, traced=False):
    """One bake of n_frames; JSON-able peak RSS before/after (bytes), seconds, convergence."""
    import importlib
    import resource
    import time
    import tracemalloc

    import bpy
    from tools.blender_session import EXTENSION_MODULE

    api = importlib.import_module(EXTENSION_MODULE + ".itasc_addon.api")
    scene, rig = build(bpy, n_frames)
    if traced:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0] if traced else 0
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024        # Linux: kilobytes
    start = time.perf_counter()
    result = api.bake(rig, 1, n_frames)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    traced_peak = tracemalloc.get_traced_memory()[1] - base if traced else None
    return {"blender": bpy.app.version_string, "before": before, "after": after, "seconds": seconds,
            "traced_peak": traced_peak, "converged": bool(np.all(result.converged)),
            "keys": result.keys_written}


# ---- host side --------------------------------------------------------------------------------

def _session(call):
    # exit_at_once: Blender 4.2 crashes on exit after Rigify was enabled (see run_in_blender).
    return blender_session("long_bake", call, exit_at_once=True)


def run(quick: bool = False) -> Table:
    lengths = QUICK_LENGTHS if quick else LENGTHS
    table = Table(
        "long_bake", "Long bakes: peak memory and time against frames (Rigify metarig)",
        "One fresh bpy process per row: Rigify's human metarig with hands and feet on moving targets "
        "(tools.demo_rigify, 12 bones in 4 chains), `api.bake(rig, 1, N)` with the add-on's defaults. "
        "Peak RSS rise: the process's `ru_maxrss` after the bake minus before it (Blender and the scene are "
        "in the before). numpy/Python peak: the same bake in another fresh process under `tracemalloc` "
        "(numpy's arrays are traced), peak above the start. Per added frame: the growth over the row above "
        "divided by the frames added (first row: by N); level columns mean linear growth. Least-squares line "
        "through the rows: {slope}.",
        [Column("frames", "frames"), Column("seconds", "bake s", "{:.2f}"), Column("ms_per_frame", "ms / frame", "{:.3f}"),
         Column("rss_before_mb", "RSS before (MB)", "{:.0f}"), Column("rss_rise_mb", "peak RSS rise (MB)", "{:.1f}"),
         Column("rss_kb_per_frame", "RSS per added frame (kB)", "{:.2f}"),
         Column("traced_mb", "numpy/Python peak (MB)", "{:.1f}"),
         Column("traced_kb_per_frame", "traced per added frame (kB)", "{:.2f}"), Column("converged", "all converged", text=True)])
    version, last = None, (0, 0, 0)
    for n in lengths:
        plain = _session(f"in_blender({n})")
        traced = _session(f"in_blender({n}, traced=True)")
        version = plain["blender"]
        rise = plain["after"] - plain["before"]
        table.rows.append({"frames": n, "seconds": plain["seconds"], "ms_per_frame": 1e3 * plain["seconds"] / n,
                           "rss_before_mb": plain["before"] / MB, "rss_rise_mb": rise / MB,
                           "rss_kb_per_frame": (rise - last[1]) / (n - last[0]) / 1024,
                           "traced_mb": traced["traced_peak"] / MB,
                           "traced_kb_per_frame": (traced["traced_peak"] - last[2]) / (n - last[0]) / 1024,
                           "converged": "yes" if plain["converged"] and traced["converged"] else "no",
                           "keys": plain["keys"]})
        last = (n, rise, traced["traced_peak"])
    x = np.array([r["frames"] for r in table.rows], dtype=float)
    rss = np.polyfit(x, [r["rss_rise_mb"] * MB for r in table.rows], 1)
    tr = np.polyfit(x, [r["traced_mb"] * MB for r in table.rows], 1)
    table.title += f" (Blender {version})"
    table.caption = table.caption.replace(
        "{slope}", f"peak RSS {rss[1] / MB:.1f} MB + {rss[0] / 1024:.2f} kB / frame, numpy/Python "
                   f"{tr[1] / MB:.1f} MB + {tr[0] / 1024:.2f} kB / frame")
    table.rows[-1]["fit"] = {"rss": list(rss), "traced": list(tr)}
    return table


def draw(table: Table, path) -> None:
    x = [r["frames"] for r in table.rows]
    plot(path, "Peak memory of a bake against frames (Rigify metarig)", "MB (log)",
         {"peak RSS rise": [r["rss_rise_mb"] for r in table.rows],
          "numpy/Python peak (tracemalloc)": [r["traced_mb"] for r in table.rows]}, x=x, xlabel="frames (log)")


if __name__ == "__main__":
    print(run(quick=True).markdown())

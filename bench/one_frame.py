"""Scene.evaluate at F = 1 on recorded live-preview solves: CPU time per call of the batched code
and of the one-frame evaluation (`one_frame=True`, solver/one_frame.py), and how far apart they are.

    python -m bench.one_frame /tmp/six.pkl /tmp/rigify.pkl /tmp/gen.pkl

Recordings come from `python -m bench.live_replay record ...`. Per file: the median over every
50th recorded frame, at its recorded answer, of the best of 7 runs of 500 calls (time.process_time),
with A (jacobians="A", what animation mode's iterations ask) and without (jacobians=False); then
over every recorded frame, at its start and its answer, the largest difference between the two
evaluations (y, errors, A) and the largest value of each.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from .live_replay import load

_FIELDS = ("y", "position_error", "rotation_error", "A")


def per_call(evaluate, n=500, repeat=7) -> float:
    """CPU µs per call, best of `repeat` runs of `n` calls."""
    best = np.inf
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(n):
            evaluate()
        best = min(best, time.process_time() - start)
    return 1e6 * best / n


def timings(scene, calls) -> dict:
    """Median µs per call: (batched, one frame) with and without A."""
    out = {key: [] for key in ("A", "none")}
    for c in calls[::50]:
        args = (c["q"], c["objects"], c["bases"])
        for key, jacobians in (("A", "A"), ("none", False)):
            out[key].append([per_call(lambda: scene.evaluate(*args, values=c["values"], jacobians=jacobians,
                                                             one_frame=one)) for one in (False, True)])
    return {key: np.median(np.array(v), axis=0) for key, v in out.items()}


def differences(scene, calls) -> dict:
    """Largest |one frame - batched| and largest |batched| per field, over every call's start and answer."""
    worst = {f: [0.0, 0.0] for f in _FIELDS}
    for c in calls:
        for q in (c["q0"], c["q"]):
            args = (q, c["objects"], c["bases"])
            one = scene.evaluate(*args, values=c["values"], jacobians="A", one_frame=True)
            batched = scene.evaluate(*args, values=c["values"], jacobians="A")
            for f in _FIELDS:
                a, b = getattr(one, f), getattr(batched, f)
                worst[f][0] = max(worst[f][0], float(np.nanmax(np.abs(a - b), initial=0.0)))
                worst[f][1] = max(worst[f][1], float(np.nanmax(np.abs(b), initial=0.0)))
    return worst


def main(argv=None) -> int:
    for path in (argv if argv is not None else sys.argv[1:]):
        scene, calls = load(path)
        t = timings(scene, calls)
        print(f"{path}: with A {t['A'][0]:.1f} -> {t['A'][1]:.1f} µs per call ({t['A'][0] / t['A'][1]:.2f}x), "
              f"without {t['none'][0]:.1f} -> {t['none'][1]:.1f} µs ({t['none'][0] / t['none'][1]:.2f}x)")
        print("  largest |one frame - batched| (largest |batched|): " + ", ".join(
            f"{f} {d:.1e} ({b:.1e})" for f, (d, b) in differences(scene, calls).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The rest skeleton of a BVH file, as Blender's BVH importer makes its bones, for the bone-map
tests: joint names, parent indices, heads (the joints' rest positions, offsets summed down the
hierarchy) and tails (the End Site, the one child's head, or the mean of the children's heads;
a tail on its head is moved 0.1 along +Y), in the file's own axes and units.

Also the variants the tests map: joints renamed (Bandai Namco style, Mixamo with a namespace
prefix, random names), End Sites turned into "_End" joints (as Mixamo's files have them), and
the whole skeleton turned (another facing, Z up instead of Y up).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "bvh"
CLIPS = {"walk": "cmu_02_01_walk.bvh", "131": "cmu_131_01_start_walk_stop.bvh"}


def read_rest(path) -> dict:
    """{"names", "parents", "heads", "tails", "ends"}: `ends` each joint's End Site offset or None."""
    names, parents, offsets, ends = [], [], [], []
    stack, in_end = [], False
    for line in Path(path).read_text().splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "MOTION":
            break
        if words[0] in ("ROOT", "JOINT"):
            names.append(words[1])
            parents.append(stack[-1] if stack else -1)
            offsets.append(None)
            ends.append(None)
        elif words[0] == "End":
            in_end = True
        elif words[0] == "{":
            stack.append(len(names) - 1 if not in_end else -2)
        elif words[0] == "}":
            stack.pop()
            in_end = False if stack and stack[-1] != -2 else in_end
            if stack and stack[-1] != -2:
                in_end = False
        elif words[0] == "OFFSET":
            v = np.array([float(w) for w in words[1:4]])
            if in_end:
                ends[stack[-2]] = v
            else:
                offsets[-1] = v
    parents = np.array(parents, dtype=int)
    heads = np.zeros((len(names), 3))
    for i, p in enumerate(parents):
        heads[i] = offsets[i] + (heads[p] if p >= 0 else 0.0)
    return {"names": names, "parents": parents, "heads": heads, "tails": tails_of(parents, heads, ends),
            "ends": ends}


def tails_of(parents, heads, ends) -> np.ndarray:
    """Tails as Blender's BVH importer sets them (module docstring)."""
    tails = np.empty_like(heads)
    for i in range(len(heads)):
        children = np.flatnonzero(parents == i)
        if ends[i] is not None:
            tails[i] = heads[i] + ends[i]
        elif len(children):
            tails[i] = heads[children].mean(axis=0)
        else:
            tails[i] = heads[i]
        if np.linalg.norm(tails[i] - heads[i]) <= 1e-3:
            tails[i] = tails[i] + [0.0, 0.1, 0.0]
    return tails


def with_end_joints(rest: dict) -> dict:
    """The skeleton with each End Site a joint of its own named after its parent + "_End"."""
    names, parents, heads = list(rest["names"]), list(rest["parents"]), list(rest["heads"])
    ends = list(rest["ends"])
    for i, end in enumerate(rest["ends"]):
        if end is not None:
            names.append(rest["names"][i] + "_End")
            parents.append(i)
            heads.append(rest["heads"][i] + end)
            ends[i] = None
            ends.append(end * 0.5)
    parents, heads = np.array(parents), np.array(heads)
    return {"names": names, "parents": parents, "heads": heads, "tails": tails_of(parents, heads, ends), "ends": ends}


def renamed(rest: dict, names: dict, other=lambda name: name) -> dict:
    """The skeleton with joints renamed by `names` {old: new}, the others by `other`."""
    return {**rest, "names": [names.get(n, other(n)) for n in rest["names"]]}


def turned(rest: dict, matrix) -> dict:
    """The skeleton turned as a whole by the 3x3 rotation `matrix`."""
    M = np.asarray(matrix, float)
    return {**rest, "heads": rest["heads"] @ M.T, "tails": rest["tails"] @ M.T}


def rotation(axis: str, degrees: float) -> np.ndarray:
    """The rotation by `degrees` about the X, Y or Z axis."""
    c, s = np.cos(np.radians(degrees)), np.sin(np.radians(degrees))
    i, j = {"X": (1, 2), "Y": (2, 0), "Z": (0, 1)}[axis]
    M = np.eye(3)
    M[i, i], M[i, j], M[j, i], M[j, j] = c, -s, s, c
    return M

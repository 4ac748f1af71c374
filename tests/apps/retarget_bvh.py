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

_LIMB_MB = {"thigh": "UpLeg", "shin": "Leg", "foot": "Foot", "toe": "ToeBase", "shoulder": "Shoulder",
            "upper_arm": "Arm", "forearm": "ForeArm", "hand": "Hand"}
_LIMB_MAX = {"thigh": "Hip", "shin": "Knee", "foot": "Ankle", "toe": "Toe", "shoulder": "Collar",
             "upper_arm": "Shoulder", "forearm": "Elbow", "hand": "Wrist"}
_SIDE = {"L": "Left", "R": "Right"}

#: What each CMU joint is, by the clip's own naming (SOURCES.md).
TRUTH = {
    "walk": {"hips": "Hips", "spine": "LowerBack", "chest": "Spine", "upper_chest": "Spine1", "neck": "Neck",
             "head": "Head", **{f"{p}.{s}": _SIDE[s] + n for p, n in _LIMB_MB.items() for s in "LR"}},
    "131": {"hips": "Hips", "spine": "lowerback", "chest": "Chest", "upper_chest": "Chest2", "neck": "lowerneck",
            "head": "Head", **{f"{p}.{s}": _SIDE[s] + n for p, n in _LIMB_MAX.items() for s in "LR"}},
}

#: Bandai Namco's style (joint_Root, Hips, UpperLeg_L, LowerLeg_L, Foot_L, Toes_L, ...) per role.
BANDAI = {"hips": "Hips", "spine": "Spine", "chest": "Chest", "upper_chest": "UpperChest", "neck": "Neck",
          "head": "Head", **{f"{p}.{s}": f"{n}_{s}" for p, n in
                             {"thigh": "UpperLeg", "shin": "LowerLeg", "foot": "Foot", "toe": "Toes",
                              "shoulder": "Shoulder", "upper_arm": "UpperArm", "forearm": "LowerArm",
                              "hand": "Hand"}.items() for s in "LR"}}
#: Mixamo's names per role, without the namespace prefix.
MIXAMO = {"hips": "Hips", "spine": "Spine", "chest": "Spine1", "upper_chest": "Spine2", "neck": "Neck",
          "head": "Head", **{f"{p}.{s}": _SIDE[s] + n for p, n in _LIMB_MB.items() for s in "LR"}}


def read_rest(path) -> dict:
    """{"names", "parents", "heads", "tails", "ends"}: `ends` each joint's End Site offset or None."""
    bvh = read_bvh(path)
    parents, offsets = bvh["parents"], bvh["offsets"]
    heads = np.zeros((len(parents), 3))
    for i, p in enumerate(parents):
        heads[i] = offsets[i] + (heads[p] if p >= 0 else 0.0)
    return {"names": bvh["names"], "parents": parents, "heads": heads,
            "tails": tails_of(parents, heads, bvh["ends"]), "ends": bvh["ends"]}


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


def without(rest: dict, drop) -> dict:
    """The skeleton without the joints named in `drop`: their children hang on their parent; a
    parent left without children ends where the dropped joint began (its End Site)."""
    drop = set(drop)
    keep = [i for i, n in enumerate(rest["names"]) if n not in drop]
    at = {old: new for new, old in enumerate(keep)}
    parents, ends = [], []
    for i in keep:
        p = rest["parents"][i]
        while p >= 0 and rest["names"][p] in drop:
            p = rest["parents"][p]
        parents.append(at.get(p, -1))
        ends.append(rest["ends"][i])
    parents, heads = np.array(parents, dtype=int), rest["heads"][keep]
    for new, i in enumerate(keep):
        gone = [c for c in np.flatnonzero(rest["parents"] == i) if rest["names"][c] in drop]
        if gone and not np.any(parents == new) and ends[new] is None:
            ends[new] = rest["heads"][gone[0]] - rest["heads"][i]
    return {"names": [rest["names"][i] for i in keep], "parents": parents, "heads": heads,
            "tails": tails_of(parents, heads, ends), "ends": ends}


def split(rest: dict, name: str, new: str) -> dict:
    """The skeleton with joint `name` cut in two: `new`, halfway along it, takes its children."""
    i = rest["names"].index(name)
    children = np.flatnonzero(rest["parents"] == i)
    mid = (rest["heads"][i] + (rest["heads"][children].mean(axis=0) if len(children) else rest["tails"][i])) / 2
    names = rest["names"] + [new]
    parents = np.append(np.where(rest["parents"] == i, len(rest["names"]), rest["parents"]), i)
    heads = np.vstack([rest["heads"], mid])
    ends = list(rest["ends"]) + [rest["ends"][i]]
    ends[i] = None
    order = _parents_first(parents)
    at = {old: k for k, old in enumerate(order)}
    parents = np.array([at[parents[o]] if parents[o] >= 0 else -1 for o in order])
    heads, ends, names = heads[order], [ends[o] for o in order], [names[o] for o in order]
    return {"names": names, "parents": parents, "heads": heads, "tails": tails_of(parents, heads, ends), "ends": ends}


def with_root(rest: dict, name: str) -> dict:
    """The skeleton under a new root joint `name` on the floor below the first root."""
    heads = rest["heads"]
    floor = heads[:, 1].min()
    root = np.array([heads[0, 0], floor, heads[0, 2]])
    parents = np.concatenate([[-1], np.where(rest["parents"] < 0, 0, rest["parents"] + 1)])
    heads = np.vstack([root, heads])
    ends = [None] + list(rest["ends"])
    return {"names": [name] + list(rest["names"]), "parents": parents, "heads": heads,
            "tails": tails_of(parents, heads, ends), "ends": ends}


def _parents_first(parents) -> list:
    order, placed = [], set()
    while len(order) < len(parents):
        for i, p in enumerate(parents):
            if i not in placed and (p < 0 or p in placed):
                order.append(i)
                placed.add(i)
    return order


def with_leaf(rest: dict, parent: str, name: str, fraction: float) -> dict:
    """The skeleton with a leaf joint `name` on joint `parent`, its head `fraction` of the way
    from the parent's head to its tail and half as long as what remains (a twist helper)."""
    i = rest["names"].index(parent)
    head = rest["heads"][i] + fraction * (rest["tails"][i] - rest["heads"][i])
    parents = np.append(rest["parents"], i)
    heads = np.vstack([rest["heads"], head])
    ends = list(rest["ends"]) + [(rest["tails"][i] - head) / 2]
    tails = np.vstack([rest["tails"], head + ends[-1]])
    return {"names": list(rest["names"]) + [name], "parents": parents, "heads": heads, "tails": tails, "ends": ends}


# --- whole clips: read, turned to another rest pose and floor, written ---------------------------

def read_bvh(path) -> dict:
    """A BVH file as arrays: {"names", "parents", "offsets" (J, 3), "ends" (None or (3,) per joint),
    "channels" (per joint, the channel names), "frames" (F, C), "frame_time"}."""
    names, parents, offsets, ends, channels = [], [], [], [], []
    stack, in_end = [], False
    lines = Path(path).read_text().splitlines()
    for k, line in enumerate(lines):
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
            channels.append([])
        elif words[0] == "End":
            in_end = True
        elif words[0] == "{":
            stack.append(-2 if in_end else len(names) - 1)         # -2: an End Site's block
        elif words[0] == "}":
            if stack.pop() == -2:
                in_end = False
        elif words[0] == "OFFSET":
            v = np.array([float(w) for w in words[1:4]])
            if in_end:
                ends[stack[-2]] = v
            else:
                offsets[-1] = v
        elif words[0] == "CHANNELS":
            channels[-1] = words[2:2 + int(words[1])]
    frame_time = float(lines[k + 2].split(":")[1])
    frames = np.array([[float(w) for w in line.split()] for line in lines[k + 3:] if line.strip()])
    return {"names": names, "parents": np.array(parents, dtype=int), "offsets": np.array(offsets), "ends": ends,
            "channels": channels, "frames": frames, "frame_time": frame_time}


def _axis(axis: str, degrees) -> np.ndarray:
    """Rotations (F, 3, 3) by `degrees` (F,) about X, Y or Z."""
    c, s = np.cos(np.radians(degrees)), np.sin(np.radians(degrees))
    i, j = {"X": (1, 2), "Y": (2, 0), "Z": (0, 1)}[axis]
    M = np.tile(np.eye(3), (len(c), 1, 1))
    M[:, i, i], M[:, i, j], M[:, j, i], M[:, j, j] = c, -s, s, c
    return M


def joint_motion(bvh: dict) -> tuple:
    """Per joint its local rotation (F, J, 3, 3) (the channels' rotations composed in their order)
    and the root's position (F, 3)."""
    F, J = len(bvh["frames"]), len(bvh["names"])
    R = np.tile(np.eye(3), (F, J, 1, 1))
    root = np.zeros((F, 3))
    column = 0
    for j, channels in enumerate(bvh["channels"]):
        for name in channels:
            values = bvh["frames"][:, column]
            column += 1
            if name.endswith("rotation"):
                R[:, j] = R[:, j] @ _axis(name[0], values)
            elif j == 0:
                root[:, "XYZ".index(name[0])] = values
    return R, root


def _zyx_degrees(R) -> np.ndarray:
    """Angles (F, 3) (Z, Y, X) in degrees with R = Rz Ry Rx."""
    y = -np.arcsin(np.clip(R[:, 2, 0], -1.0, 1.0))
    z = np.arctan2(R[:, 1, 0], R[:, 0, 0])
    x = np.arctan2(R[:, 2, 1], R[:, 2, 2])
    return np.degrees(np.stack([z, y, x], axis=-1))


def restposed(bvh: dict, rest_turns: dict, names: dict, tilt=np.eye(3), lift=(0.0, 0.0, 0.0)) -> dict:
    """The clip with another rest pose and floor, the same motion: joint j's frame turned by C_j
    (rest_turns {joint: (3, 3)}, applied to the joint and its whole subtree unless a descendant
    names its own), so its children's offsets become C_j^T offset and its local rotation
    C_parent^T R_j C_j; the whole motion turned by `tilt` and moved by `lift` (the floor tilted and
    raised); joints renamed by `names` {old: new}. Rotation channels are written Z, Y, X."""
    R, root = joint_motion(bvh)
    J = len(bvh["names"])
    C = []
    for j in range(J):
        k, turn = j, None
        while k >= 0 and turn is None:
            turn = rest_turns.get(bvh["names"][k])
            k = bvh["parents"][k]
        C.append(np.eye(3) if turn is None else np.asarray(turn, float))
    C = np.array(C)
    offsets = bvh["offsets"].copy()
    ends = list(bvh["ends"])
    for j in range(J):
        p = bvh["parents"][j]
        if p >= 0:
            offsets[j] = C[p].T @ offsets[j]
        if ends[j] is not None:
            ends[j] = C[j].T @ ends[j]
    tilt = np.asarray(tilt, float)
    local = np.empty_like(R)
    for j in range(J):
        p = bvh["parents"][j]
        before = tilt if p < 0 else C[p].T
        local[:, j] = before @ R[:, j] @ C[j]
    columns = [root @ tilt.T + np.asarray(lift, float)]
    channels = [["Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation"]]
    channels += [["Zrotation", "Yrotation", "Xrotation"]] * (J - 1)
    columns += [_zyx_degrees(local[:, j]) for j in range(J)]
    return {"names": [names.get(n, n) for n in bvh["names"]], "parents": bvh["parents"], "offsets": offsets,
            "ends": ends, "channels": channels, "frames": np.concatenate(columns, axis=1),
            "frame_time": bvh["frame_time"]}


def write_bvh(bvh: dict, path) -> None:
    """Write `bvh` (read_bvh's form) as a BVH file."""
    out = ["HIERARCHY"]

    def joint(j, depth):
        pad = "\t" * depth
        out.append(f"{pad}{'ROOT' if depth == 0 else 'JOINT'} {bvh['names'][j]}")
        out.append(pad + "{")
        out.append(pad + "\tOFFSET " + " ".join(f"{v:.6f}" for v in bvh["offsets"][j]))
        out.append(pad + f"\tCHANNELS {len(bvh['channels'][j])} " + " ".join(bvh["channels"][j]))
        for c in np.flatnonzero(bvh["parents"] == j):
            joint(c, depth + 1)
        if bvh["ends"][j] is not None:
            out.extend([pad + "\tEnd Site", pad + "\t{",
                        pad + "\t\tOFFSET " + " ".join(f"{v:.6f}" for v in bvh["ends"][j]), pad + "\t}"])
        out.append(pad + "}")

    joint(0, 0)
    out += ["MOTION", f"Frames: {len(bvh['frames'])}", f"Frame Time: {bvh['frame_time']:.7f}"]
    out += [" ".join(f"{v:.6f}" for v in row) for row in bvh["frames"]]
    Path(path).write_text("\n".join(out) + "\n")


def world_joints(bvh: dict) -> np.ndarray:
    """Every joint's world position (F, J, 3) by forward kinematics of the file's own channels."""
    R, root = joint_motion(bvh)
    F, J = R.shape[:2]
    W = np.empty_like(R)
    P = np.empty((F, J, 3))
    for j in range(J):
        p = bvh["parents"][j]
        if p < 0:
            W[:, j], P[:, j] = R[:, j], root + bvh["offsets"][j]
        else:
            W[:, j] = W[:, p] @ R[:, j]
            P[:, j] = P[:, p] + W[:, p] @ bvh["offsets"][j]
    return P

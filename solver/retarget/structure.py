"""A bone map from the skeleton itself: which bone plays each role (roles.py), found from the
hierarchy and the rest pose, names only as hints.

Input: bone names, parent indices (-1 for a root) and rest heads and tails (armature space, any
orientation and unit); optionally the up axis and the facing direction. The method:

1. Helpers out: bones whose name has a token twist, roll, ik, pole, end, nub or site (name split
   at separators, case changes and digits) are dropped, their children hung on their parent.
   Of several root trees the one with the most bones is used.
2. Ends: on the tree whose nodes are the bones' heads plus each leaf bone's tail (edges
   weighted by their lengths), leaf branches whose tip lies less than 8 % of the skeleton's size
   (its largest extent) straight from where they hang are cut, repeatedly (fingers, toes with a
   heel beside them, face chains, breasts, pelvis bones). On what is left, farthest-point
   sampling over the leaf tips picks four ends: the two hands and the two feet, the ends
   farthest apart along the tree. The head is the remaining end whose branch (the straight
   distance to the nearest point where its path meets the path between two limbs) is longest.
3. Which is which: the feet are the pair of limbs whose meeting point with the head is farthest
   (straight) from the head, the hands the other pair. hips = the bone where the feet's
   and the head's paths meet; upper_chest = where the hands' path meets the path from the hips.
   Up is from the feet's ends to the head's end (or given).
4. Spine: the bones from the hips (exclusive) to upper_chest: the first is spine, the last
   upper_chest, the middle one ((n - 1) // 2) chest for three or more. Neck and head: on the path
   from upper_chest to the head's end, head = the bone whose tail is highest (the skull's top),
   neck = the first bone after upper_chest where that is not the head.
5. Legs: on the path from the hips to a foot's end, foot = the first bone (third or later)
   whose head lies in the lowest quarter of the leg's height (the ankle), toe = the bone after
   it. Thigh and shin: the pair of joints (hip socket, knee) above the ankle whose two lengths
   are closest to equal, the hip socket being one from which the leg runs straight (its bone
   within 40 degrees of the line to the ankle); bones above the socket (a hip joint, a pelvis)
   stay unmapped.
6. Arms: on the path from upper_chest to a hand's end, the hand is one of the bones (third or
   later) with two or more children (the fingers; a helper leaf may branch too), or of all
   bones third or later where none branches; it is chosen with the shoulder and elbow joints:
   as thigh and shin, the two lengths nearest the ratio 1.15 (upper arm to forearm); shoulder
   = the bone just before the upper arm (the clavicle), where there is one.
7. Sides: forward is the feet's direction from ankle to toe end, across up (or the given
   forward where the feet give none); the character's left is up x forward (a rig facing -Y with
   +Z up has its left at +X, as Blender's Rigify metarig). A limb's side is the sign of its
   offset from the hips (legs) or upper_chest (arms) along left. Names with a left/right token
   break a tie (and decide where no forward is known); where they contradict the geometry the
   geometry is kept and that is reported.

Where the arms do not hang below the hips in the hierarchy nothing is mapped, and the list
says so (a retarget's roles all hang from the hips). A bone plays one role at most. Whatever a rule could not settle
clearly is listed in `StructureMap.ambiguous` (and a role it could not find is left out, never
guessed from a name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .roles import ROLES

HELPER_TOKENS = frozenset({"twist", "roll", "ik", "pole", "end", "nub", "site"})
LEFT_TOKENS = frozenset({"l", "left", "lft"})
RIGHT_TOKENS = frozenset({"r", "right", "rgt", "rt"})
CUT = 0.08                  # leaf branches shorter than this times the skeleton's size are not ends
ARM_RATIO = 1.15            # upper arm length / forearm length, about, in people
STRAIGHT = np.radians(40.0)


@dataclass(frozen=True)
class StructureMap:
    """{role: bone name} from the skeleton; `ambiguous` what was not clear (readable lines);
    `up` and `forward` the directions used (unit, armature space); `facing` where forward came
    from ("feet", "given" or "unknown")."""

    roles: dict
    ambiguous: list = field(default_factory=list)
    up: tuple = (0.0, 0.0, 1.0)
    forward: tuple = (0.0, -1.0, 0.0)
    facing: str = "feet"


def tokens(name: str) -> list:
    """Lower-case words of a bone name, its namespace prefix dropped: "mixamorig7:LeftToe_End" ->
    ["left", "toe", "end"], "LHipJoint" -> ["l", "hip", "joint"], "UpperLeg_L" -> [..., "l"]."""
    name = name.rsplit(":", 1)[-1]
    return [t.lower() for t in re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", name)]


def name_side(name: str) -> str | None:
    """"L" or "R" where the name has exactly one side token, else None."""
    words = set(tokens(name))
    left, right = bool(words & LEFT_TOKENS), bool(words & RIGHT_TOKENS)
    return "L" if left and not right else "R" if right and not left else None


class _Tree:
    """The kept bones as a tree of heads plus one tip node per leaf (the leaf's tail)."""

    def __init__(self, keep, parents, heads, tails):
        self.bones = keep                                   # node i < n: bone keep[i]
        at = {b: i for i, b in enumerate(keep)}
        n = len(keep)
        parent = []
        for b in keep:
            p = parents[b]
            while p >= 0 and p not in at:
                p = parents[p]
            parent.append(at.get(p, -1))
        children = [[] for _ in range(n)]
        for i, p in enumerate(parent):
            if p >= 0:
                children[p].append(i)
        leaves = [i for i in range(n) if not children[i]]
        self.n = n
        self.children = children
        self.parent = np.array(parent + [leaf for leaf in leaves], dtype=int)
        self.position = np.concatenate([heads[keep], tails[[keep[i] for i in leaves]]]).reshape(-1, 3)
        self.tips = list(range(n, n + len(leaves)))
        self.depth = np.zeros(len(self.parent), dtype=int)
        for i in self.order():
            if self.parent[i] >= 0:
                self.depth[i] = self.depth[self.parent[i]] + 1

    def order(self):
        """Nodes parents first."""
        kids = [[] for _ in range(len(self.parent))]
        for i, p in enumerate(self.parent):
            if p >= 0:
                kids[p].append(i)
        out, stack = [], [i for i, p in enumerate(self.parent) if p < 0]
        while stack:
            i = stack.pop()
            out.append(i)
            stack.extend(kids[i])
        return out

    def distances(self, source: int) -> np.ndarray:
        """Path length from `source` to every node."""
        edges = [[] for _ in range(len(self.parent))]
        for i, p in enumerate(self.parent):
            if p >= 0:
                w = float(np.linalg.norm(self.position[i] - self.position[p]))
                edges[i].append((p, w))
                edges[p].append((i, w))
        d = np.full(len(self.parent), np.inf)
        d[source] = 0.0
        stack = [source]
        while stack:
            i = stack.pop()
            for j, w in edges[i]:
                if d[j] == np.inf:
                    d[j] = d[i] + w
                    stack.append(j)
        return d

    def lca(self, a: int, b: int) -> int:
        while self.depth[a] > self.depth[b]:
            a = self.parent[a]
        while self.depth[b] > self.depth[a]:
            b = self.parent[b]
        while a != b:
            a, b = self.parent[a], self.parent[b]
        return a

    def median(self, a: int, b: int, c: int) -> int:
        """The node on all three paths between a, b and c."""
        return max((self.lca(a, b), self.lca(a, c), self.lca(b, c)), key=lambda i: self.depth[i])

    def path(self, top: int, end: int) -> list:
        """Bone nodes from below `top` (an ancestor of `end`) down to `end`'s bone (a tip is
        left out)."""
        out = []
        i = end if end < self.n else self.parent[end]
        while i != top and i >= 0:
            out.append(i)
            i = self.parent[i]
        return out[::-1]


def _angle(u, v) -> float:
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    if nu < 1e-12 or nv < 1e-12:
        return np.pi
    return float(np.arccos(np.clip(np.dot(u, v) / (nu * nv), -1.0, 1.0)))


def _two_segments(joints, end, ratio, ends=None):
    """(s, e, end index, cost, runner-up cost): the joints s < e before `end` (index into joints;
    `ends` several candidates) whose lengths |J_e - J_s| / |J_end - J_e| are nearest `ratio`,
    s being a joint from which the chain runs straight to the end."""
    best = []
    for w in (ends if ends is not None else [end]):
        for s in range(w - 1):
            if _angle(joints[s + 1] - joints[s], joints[w] - joints[s]) > STRAIGHT:
                continue
            for e in range(s + 1, w):
                a, b = np.linalg.norm(joints[e] - joints[s]), np.linalg.norm(joints[w] - joints[e])
                if a > 1e-9 and b > 1e-9:
                    best.append((abs(np.log(a / b / ratio)), s, e, w))
    if not best:
        return None
    best.sort()
    runner = best[1][0] if len(best) > 1 else np.inf
    cost, s, e, w = best[0]
    return s, e, w, cost, runner


def structural_map(names, parents, heads, tails, *, up=None, forward=None) -> StructureMap:
    """The role map of a humanoid skeleton from its hierarchy and rest pose (module docstring)."""
    names = list(names)
    parents = np.asarray(parents, dtype=int)
    heads = np.asarray(heads, dtype=float).reshape(-1, 3)
    tails = np.asarray(tails, dtype=float).reshape(-1, 3)
    if not (len(names) == len(parents) == len(heads) == len(tails)):
        raise ValueError("names, parents, heads and tails must have one entry per bone")
    ambiguous = []
    helper = [bool(set(tokens(n)) & HELPER_TOKENS) for n in names]
    root_of = {}
    for b in range(len(names)):                  # the kept root each kept bone hangs from
        if helper[b]:
            continue
        r, p = b, parents[b]
        while p >= 0:
            if not helper[p]:
                r = p
            p = parents[p]
        root_of[b] = r
    if not root_of:
        return StructureMap({}, ["no bones to map"])
    roots, counts = np.unique(list(root_of.values()), return_counts=True)
    main = roots[np.argmax(counts)]
    keep = [b for b, r in root_of.items() if r == main]
    size = max(_extent(np.concatenate([heads[keep], tails[keep]])), 1e-12)
    tree = _Tree(keep, parents, heads, tails)
    core = _Tree(_core(keep, parents, heads, tails, CUT * size), parents, heads, tails)
    if len(core.tips) < 5:
        return StructureMap({}, [f"the skeleton has {len(core.tips)} ends, a humanoid five (hands, feet, head)"])

    # Four limbs by farthest-point sampling over the core's leaf tips, then the head.
    tips = np.array(core.tips)
    first = int(tips[np.argmax(core.distances(0)[tips])])
    limbs = [first]
    nearest = core.distances(first)
    dist = {first: nearest}
    while len(limbs) < 4:
        nxt = int(tips[np.argmax(nearest[tips])])
        limbs.append(nxt)
        dist[nxt] = core.distances(nxt)
        nearest = np.minimum(nearest, dist[nxt])
    C = core.position
    gap = lambda a, b: float(np.linalg.norm(C[a] - C[b]))         # noqa: E731

    def branch(e):
        d = core.distances(e)
        meets = [core.median(e, x, y) for i, x in enumerate(limbs) for y in limbs[i + 1:]]
        return gap(e, min(meets, key=lambda m: d[m]))

    others = sorted(((branch(int(t)), int(t)) for t in tips if int(t) not in limbs), reverse=True)
    if not others:
        return StructureMap({}, ["the skeleton has no fifth end for the head"])
    head_end = others[0][1]
    if len(others) > 1 and others[1][0] > 0.8 * others[0][0]:
        ambiguous.append("head: its branch is not clearly longer than another short end's")
    pairs = [(a, b) for i, a in enumerate(limbs) for b in limbs[i + 1:]]
    scored = sorted(((gap(head_end, core.median(a, b, head_end)), (a, b), tuple(x for x in limbs if x not in (a, b)))
                     for a, b in pairs), reverse=True)
    feet, hands = scored[0][1], scored[0][2]
    if scored[1][0] > 0.8 * scored[0][0]:
        ambiguous.append("legs or arms: the feet's meeting point is not clearly below the hands'")
    hips = core.median(feet[0], feet[1], head_end)
    chest = core.median(hands[0], hands[1], hips)
    if hips >= core.n or chest >= core.n:
        return StructureMap({}, ["the hips or the upper chest fell on an end, not on a bone"])

    # Back on the whole tree: each end extended to its farthest tip (toes, fingers, the skull's top).
    at = {b: i for i, b in enumerate(tree.bones)}
    hips, chest = at[core.bones[hips]], at[core.bones[chest]]
    feet, hands, head_end = (tuple(_extend(tree, at[core.bones[core.parent[e]]]) for e in feet),
                             tuple(_extend(tree, at[core.bones[core.parent[e]]]) for e in hands),
                             _extend(tree, at[core.bones[core.parent[head_end]]]))
    P = tree.position
    feet_end = (P[feet[0]] + P[feet[1]]) / 2.0
    if up is None:
        up = P[head_end] - feet_end
    up = np.asarray(up, float) / np.linalg.norm(up)
    name = lambda node: names[tree.bones[node]]         # noqa: E731
    roles = {"hips": name(hips)}

    # Spine, neck, head.
    spine = tree.path(hips, chest)
    if chest != hips and hips not in _ancestors(tree, chest):
        return StructureMap({}, ambiguous + ["the arms do not hang below the hips (the legs' meeting point) in the "
                                             f"hierarchy of the {len(keep)} bones mapped; nothing mapped"])
    if chest == hips:
        ambiguous.append("spine: the arms hang from the hips bone itself; spine, chest and upper_chest unmapped")
        spine = []
    if len(spine) == 1:
        roles["spine"] = name(spine[0])
    elif spine:
        roles["spine"], roles["upper_chest"] = name(spine[0]), name(spine[-1])
        if len(spine) >= 3:
            roles["chest"] = name(spine[(len(spine) - 1) // 2])
    top = tree.path(chest, head_end)
    if top:
        tail_height = [float(tails[tree.bones[i]] @ up) for i in top]
        h = int(np.argmax(tail_height))
        roles["head"] = name(top[h])
        if h >= 1:
            roles["neck"] = name(top[0])

    # Facing and sides.
    legs = {}
    for end in feet:
        legs[end] = _leg(tree, hips, end, up, ambiguous, name(tree.parent[end]))
    forward_used, facing = _facing(tree, legs, feet, up, forward)
    left = np.cross(up, forward_used) if forward_used is not None else None
    arms = {end: _arm(tree, chest, end, ambiguous, name(tree.parent[end])) for end in hands}
    for kind, ends, base, parts in (("leg", feet, hips, ("thigh", "shin", "foot", "toe")),
                                    ("arm", hands, chest, ("shoulder", "upper_arm", "forearm", "hand"))):
        chains = legs if kind == "leg" else arms
        sides = _sides(tree, names, ends, chains, base, left, kind, ambiguous)
        for end, side in zip(ends, sides):
            for part, node in zip(parts, chains[end]):
                if node is not None:
                    roles[f"{part}.{side}"] = name(node)
    if facing == "unknown":
        ambiguous.append("left/right: the feet give no facing direction and none was given; sides from names")
    ordered, used = {}, {}
    for r in ROLES:
        if r in roles:
            if roles[r] in used:
                ambiguous.append(f"{r}: its bone {roles[r]} already plays {used[roles[r]]}; left unmapped")
                continue
            ordered[r] = roles[r]
            used[roles[r]] = r
    roles = ordered
    return StructureMap(roles, ambiguous, tuple(float(v) for v in up),
                        tuple(float(v) for v in (forward_used if forward_used is not None else (0.0, 0.0, 0.0))),
                        facing)


def _extent(points, chunk=256) -> float:
    """The largest distance between two of `points` (N, 3), in chunks of rows."""
    return max(float(np.linalg.norm(points[i:i + chunk, None] - points[None], axis=-1).max())
               for i in range(0, len(points), chunk))


def _core(keep, parents, heads, tails, cut) -> list:
    """The bones left once every leaf branch (a leaf and its ancestors up to a bone with other
    children) whose tip lies less than `cut` straight from where it hangs is cut, repeatedly."""
    keep = list(keep)
    while True:
        tree = _Tree(keep, parents, heads, tails)
        gone = set()
        for tip in tree.tips:
            top = tree.parent[tip]
            chain = [top]
            while tree.parent[top] >= 0 and len(tree.children[tree.parent[top]]) == 1:
                top = tree.parent[top]
                chain.append(top)
            if tree.parent[top] >= 0 and np.linalg.norm(tree.position[tip] - tree.position[top]) < cut:
                gone.update(chain)
        if not gone:
            return keep
        keep = [b for i, b in enumerate(tree.bones) if i not in gone]


def _extend(tree, node) -> int:
    """The tip below `node` farthest from it along the tree."""
    d = tree.distances(node)
    below = [t for t in tree.tips if tree.lca(t, node) == node]
    return max(below, key=lambda t: d[t])


def _ancestors(tree, node):
    out = []
    while node >= 0:
        node = tree.parent[node]
        out.append(node)
    return out


def _leg(tree, hips, end, up, ambiguous, label):
    """(thigh, shin, foot, toe) nodes (None where missing) on the path from the hips to `end`."""
    path = tree.path(hips, end)
    P = tree.position
    heights = np.array([P[i] @ up for i in path])
    ground = min(heights.min(), P[end] @ up)
    top = P[hips] @ up
    foot = next((k for k in range(2, len(path)) if heights[k] - ground < 0.25 * (top - ground)), None)
    if foot is None:
        ambiguous.append(f"leg to {label}: no ankle in the lowest quarter of the leg; foot, shin and thigh unmapped")
        return (None, None, None, None)
    joints = [P[i] for i in path[:foot + 1]]
    found = _two_segments(joints, foot, 1.0)
    if found is None:
        ambiguous.append(f"leg to {label}: no straight hip-knee-ankle chain above the foot; thigh and shin unmapped")
        return (None, None, path[foot], path[foot + 1] if foot + 1 < len(path) else None)
    s, e, _, cost, runner = found
    if runner - cost < 0.05:
        ambiguous.append(f"leg to {label}: two choices of hip and knee joints fit about equally (thigh, shin)")
    toe = path[foot + 1] if foot + 1 < len(path) else None
    return (path[s], path[e], path[foot], toe)


def _arm(tree, chest, end, ambiguous, label):
    """(shoulder, upper_arm, forearm, hand) nodes (None where missing) on the path from the upper
    chest to `end`."""
    path = tree.path(chest, end)
    joints = [tree.position[i] for i in path]
    branching = [k for k in range(2, len(path)) if len(tree.children[path[k]]) >= 2]
    found = _two_segments(joints, None, ARM_RATIO, branching or list(range(2, len(path))))
    if found is None:
        ambiguous.append(f"arm to {label}: no straight shoulder-elbow-wrist chain; the arm is unmapped")
        return (None, None, None, None)
    s, e, w, cost, runner = found
    if runner - cost < 0.05:
        ambiguous.append(f"arm to {label}: two choices of shoulder, elbow or wrist joints fit about equally "
                          "(upper_arm, forearm, hand)")
    return (path[s - 1] if s >= 1 else None, path[s], path[e], path[w])


def _facing(tree, legs, feet, up, forward):
    """(forward (3,) or None, where it came from): the feet's ankle-to-end direction across up,
    else the given forward."""
    P = tree.position
    directions = []
    for end in feet:
        foot = legs[end][2]
        if foot is None:
            continue
        d = P[end] - P[foot]
        across = d - (d @ up) * up
        if np.linalg.norm(across) > 0.3 * np.linalg.norm(d):
            directions.append(across / np.linalg.norm(across))
    if len(directions) == 2 and directions[0] @ directions[1] > 0.5:
        f = directions[0] + directions[1]
        return f / np.linalg.norm(f), "feet"
    if forward is not None:
        f = np.asarray(forward, float)
        f = f - (f @ up) * up
        if np.linalg.norm(f) > 1e-9:
            return f / np.linalg.norm(f), "given"
    return None, "unknown"


def _sides(tree, names, ends, chains, base, left, kind, ambiguous):
    """["L", "R"] or ["R", "L"] for the two limbs `ends`, by geometry (the mean offset of the
    chain's joints from `base` along `left`), names breaking a tie."""
    P = tree.position
    if all(n is None for end in ends for n in chains[end]):
        return ["L", "R"]
    offsets = []
    for end in ends:
        nodes = [n for n in chains[end] if n is not None] or [end]
        offsets.append(float(np.mean([P[n] - P[base] for n in nodes], axis=0) @ left) if left is not None else 0.0)
    by_name = []
    for end in ends:
        votes = [name_side(names[tree.bones[n]]) for n in chains[end] if n is not None]
        votes = [v for v in votes if v]
        by_name.append(max(set(votes), key=votes.count) if votes else None)
    if left is not None and offsets[0] * offsets[1] < 0:
        sides = ["L", "R"] if offsets[0] > 0 else ["R", "L"]
        if by_name[0] and by_name[1] and by_name != sides and by_name[0] != by_name[1]:
            ambiguous.append(f"{kind}s: the names say {by_name[0]}/{by_name[1]}, the rest pose {sides[0]}/{sides[1]}; "
                             "kept the rest pose's")
        return sides
    if by_name[0] and by_name[1] and by_name[0] != by_name[1]:
        return by_name
    ambiguous.append(f"{kind}s: left and right could not be told apart; guessed")
    return ["L", "R"]

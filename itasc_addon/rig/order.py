"""Which of a rig's IK constraints our solver drives, in which order, and which Blender's IK keeps.

Blender evaluates a rig's IK constraints in dependency order: a chain whose target, pole or parent
rides on bones another chain moves is solved after it (Rigify's paw and hoof legs solve a leg in
two or three IK steps, each aiming at a bone the one before moved). We do the same in *stages*: a
bake solves and writes stage 0, then takes the targets of stage 1 from what stage 0 wrote
(computed, `prediction`, or read from Blender's evaluation), and so on (`job.Job`).

The analysis, over every *active* IK constraint of the armature (not muted as the user's rig has
it, influence > 0, with a target and something to control):

* units: constraints whose chains share a bone are solved together (one tree, as Blender's IK
  solves them), so they form one unit;
* a unit is Blender's (its IK stays on, untouched) when the user does not let us drive one of its
  constraints, or a chain bone carries something we do not model (`chain_bones.problems`), or it
  depends on itself (a target or pole that moves with its own chain: a real cycle);
* a unit depends on another when one of its inputs (targets, poles, what its chain bones follow:
  parents, other constraints' targets, drivers; `dependencies.Walker`) reaches a bone of the
  other's chains;
* stages: a driven unit comes one stage after every driven unit it depends on, and no earlier than
  a Blender unit it depends on, which itself waits for the driven units before it; driven units
  that depend on each other in a circle are left to Blender, and the order is worked out again.

Nothing here writes to Blender data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import chain_bones, dependencies
from .base import RigError, ik_constraints
from .reading import _chain, _node_label, _union, read_rig


@dataclass
class Order:
    """stages: per stage, the (bone, constraint name) pairs we drive there; blender: (bone,
    constraint name, why) of the active IK constraints Blender's own IK keeps solving."""

    stages: list = field(default_factory=list)
    blender: list = field(default_factory=list)
    idle: list = field(default_factory=list)     # (bone, name) of driven ones with nothing to do (the reader says why)

    @property
    def driven(self):
        return {key for stage in self.stages for key in stage}

    @property
    def warnings(self):
        return [f"'{bone}/{name}': {why}: Blender's IK solves it" for bone, name, why in self.blender]


def members(keys):
    """drives(pb, con) for the rig reader: the constraints `keys` {(bone, constraint name)}."""
    keys = set(keys)
    return lambda pb, con: (pb.name, con.name) in keys


def controls_something(con):
    """Whether an IK constraint has a target, influence and an axis to control."""
    if con.target is None or con.influence <= 0.0:
        return False
    if con.ik_type == "DISTANCE":
        return True
    return (con.use_location and any(getattr(con, f"lock_location_{a}") for a in "xyz")) or \
        (con.use_rotation and any(getattr(con, f"lock_rotation_{a}") for a in "xyz"))


def order(obj, drives, active) -> Order:
    """The Order of the armature `obj`'s IK constraints. active(pb, con): the constraint is on in
    the user's rig; drives(pb, con): the user lets our solver drive it."""
    constraints = []
    idle = []
    for pb, con in ik_constraints(obj):
        if active(pb, con) and not controls_something(con) and drives(pb, con):
            idle.append((pb.name, con.name))
        elif active(pb, con) and controls_something(con):
            try:
                chain, _ = _chain(obj, con, pb, [])
            except RigError:
                continue            # no chain: Blender's IK does nothing with it either
            constraints.append((pb, con, chain))
    units = _units(constraints)
    blender = {}
    for u, members in enumerate(units):
        refused = next(((pb, con) for pb, con, _ in members if not drives(pb, con)), None)
        if refused is not None:
            blender[u] = "the solver is not to drive it (or a constraint sharing its chain)"
    walker = dependencies.Walker()
    _leave_unmodelled(obj, units, blender, walker)
    depends = _dependencies(obj, units, walker, blender)
    while True:
        level, circle = _levels(units, depends, blender)
        if not circle:
            break
        for u in circle:
            blender[u] = "it depends on other chains that depend on it (a dependency cycle)"
    stages = [[] for _ in range(max((level[u] for u in range(len(units)) if u not in blender), default=-1) + 1)]
    out = Order(stages, idle=idle)
    if stages:
        stages[0].extend(idle)          # read with the first stage, which leaves them out with a warning
    for u, members in enumerate(units):
        for pb, con, _ in members:
            if u in blender:
                out.blender.append((pb.name, con.name, blender[u]))
            else:
                stages[level[u]].append((pb.name, con.name))
    return out


def _units(constraints):
    """The constraints grouped into units of chains that share bones, in the armature's order."""
    units, bones = [], []
    for item in constraints:
        chain = set(item[2])
        joined = [u for u in range(len(units)) if bones[u] & chain]
        merged, merged_bones = [item], set(chain)
        for u in reversed(joined):
            merged = units.pop(u) + merged
            merged_bones |= bones.pop(u)
        units.append(merged)
        bones.append(merged_bones)
    return units


def _leave_unmodelled(obj, units, blender, walker):
    """Units with a chain bone the solver does not model (`chain_bones.problems`, judged on the
    unit's own chains: a unit hanging from another is solved in a later stage, apart) go to Blender."""
    for u, members in enumerate(units):
        if u in blender:
            continue
        in_model, stretchy = _union([(pb, con, chain, None) for pb, con, chain in members])
        stretchy = {name for name in stretchy if obj.pose.bones[name].ik_stretch > 0.0}
        roots = {name for name in in_model if (p := obj.data.bones[name].parent) is None or p.name not in in_model}
        problems = chain_bones.problems(obj, in_model, stretchy, roots, walker)
        bad = next((problems[name] for _, _, chain in members for name in chain if name in problems), None)
        if bad is not None:
            blender[u] = bad


def _dependencies(obj, units, walker, blender):
    """Per unit, the units whose chains its inputs reach (itself excluded); a unit whose target or
    pole reaches its own chain goes to Blender (`blender`, with why)."""
    owner = {}
    for u, members in enumerate(units):
        for _, _, chain in members:
            for name in chain:
                owner[(obj.as_pointer(), name)] = u
    solved = set(owner)
    out = []
    for u, members in enumerate(units):
        own = {(obj.as_pointer(), name) for _, _, chain in members for name in chain}
        own_names = {name for _, name in own}
        reached = set()
        for pb, con, chain in members:
            for what, target, sub in (("target", con.target, con.subtarget),
                                      ("pole target", con.pole_target, con.pole_subtarget)):
                start = dependencies.node(target, sub)
                if start is None:
                    continue
                hit = walker.reached(start, solved)
                if hit & own and u not in blender:
                    bone = sorted(name for _, name in hit & own)[0]
                    blender[u] = (f"its {what} '{_node_label(obj, start)}' moves with bone '{bone}' of its own chain "
                                  "(a dependency cycle)")
                reached |= hit
            for node in walker.outside_inputs(obj, chain, own_names):   # what the chain bones follow, besides each other
                reached |= walker.reached(node, solved)
        out.append({owner[key] for key in reached - own})
    return out


def _levels(units, depends, blender):
    """(stage per unit, units on a circle of driven dependencies) by longest paths: a driven unit
    one after each driven unit it depends on, at or after each Blender unit; a Blender unit at or
    after what it depends on, one after the driven ones."""
    level, state, circle = {}, {}, set()

    def visit(u, path):
        if state.get(u) == "done":
            return level[u]
        if state.get(u) == "open":
            circle.update(path[path.index(u):])
            return 0
        state[u] = "open"
        path.append(u)
        at = 0
        for d in depends[u]:
            at = max(at, visit(d, path) + (0 if d in blender else 1))
        path.pop()
        state[u] = "done"
        level[u] = at
        return at

    for u in range(len(units)):
        visit(u, [])
    return level, {u for u in circle if u not in blender}


def check(order_: Order, obj):
    """Refuse a rig with no IK constraint for our solver to drive, saying why."""
    if not order_.stages:
        if order_.idle:
            read_rig(obj, members(order_.idle))     # raises, saying what each lacks
        reasons = "; ".join(order_.warnings) or "none is on"
        raise RigError(f"armature '{obj.name}' has no IK constraint to drive ({reasons})")

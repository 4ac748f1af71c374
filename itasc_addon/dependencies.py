"""What the evaluated pose of an object or a bone depends on, as far as a solve must know it.

A target (or pole, or the bone a chain hangs from) is read from Blender's evaluation of the frame
before we solve. That reading is only right when it does not move with the pose we write: when
it does not depend on a bone we solve. `depends_on` walks what Blender evaluates before the thing
itself and returns the first solved bone it meets:

* an object: its parent (the parent bone when parented to a bone), the targets of its
  constraints and the inputs of its drivers (those not on pose bones);
* a bone: its parent bone, its armature object, the targets of its constraints and the inputs
  of the drivers on its own properties (``pose.bones["name"]...``);
* a constraint target: the object, or the bone when it names one (``subtarget``); the targets of
  multi-target constraints (Armature) and pole targets count as well;
* a driver input: the object or bone it reads; a Single Property read of a custom property
  (``pose.bones["name"]["prop"]``) or of anything but a pose bone's transform does not depend on
  the pose, so it is not followed.

Muted constraints, constraints at influence 0, the weight-0 targets of an Armature constraint and
muted drivers are not followed: they move nothing. The walk visits each object and bone once.
"""

from __future__ import annotations

import re

_BONE_PATH = re.compile(r'^pose\.bones\["((?:[^"\\]|\\.)*)"\](.*)$')
# A pose bone's properties that change with its pose (Single Property driver inputs).
_POSE_PROPERTIES = ("location", "rotation", "scale", "matrix", "head", "tail", "x_axis", "y_axis", "z_axis")


def _unescape(name):
    return re.sub(r"\\(.)", r"\1", name)


def bone_of_path(data_path):
    """(bone name, the rest of the path) of a path into ``pose.bones["name"]``, else (None, path)."""
    m = _BONE_PATH.match(data_path or "")
    return (_unescape(m.group(1)), m.group(2)) if m else (None, data_path)


class Walker:
    """Walks dependencies on the data of one Blender file; the drivers of each object are sorted
    by the bone they drive once, so that many walks on a large rig stay cheap."""

    def __init__(self):
        self._drivers = {}

    def drivers(self, ob):
        """{bone name or None: [driver F-curves]} of an object (None: the object's own)."""
        key = ob.as_pointer()
        found = self._drivers.get(key)
        if found is None:
            found = {}
            anim = getattr(ob, "animation_data", None)
            for fc in (anim.drivers if anim is not None else ()):
                if fc.mute:
                    continue
                bone, _ = bone_of_path(fc.data_path)
                found.setdefault(bone, []).append(fc)
            self._drivers[key] = found
        return found

    def depends_on(self, start, solved):
        """The first (armature object, bone name) in `solved` {(armature pointer, bone name)} that
        `start` depends on, or None. `start` is an object or (armature object, bone name)."""
        return next(self._walk(start, solved), None)

    def reached(self, start, solved):
        """Every key of `solved` {(armature pointer, bone name)} that `start` depends on (a set)."""
        return {(ob.as_pointer(), bone) for ob, bone in self._walk(start, solved)}

    def _walk(self, start, solved):
        """The (armature object, bone name) of `solved` that `start` depends on, as they are met."""
        seen = set()
        stack = [start]
        while stack:
            node = stack.pop()
            if isinstance(node, tuple):
                ob, bone = node
                key = (ob.as_pointer(), bone)
                if key in seen:
                    continue
                seen.add(key)
                if key in solved:
                    yield ob, bone
                    continue
                stack.extend(self.bone_inputs(ob, bone))
            else:
                key = (node.as_pointer(), None)
                if key in seen:
                    continue
                seen.add(key)
                stack.extend(self._object_inputs(node))

    def _object_inputs(self, ob):
        out = []
        parent = ob.parent
        if parent is not None:
            if ob.parent_type == "BONE" and ob.parent_bone and parent.pose is not None \
                    and ob.parent_bone in parent.pose.bones:
                out.append((parent, ob.parent_bone))
            else:
                out.append(parent)
        out += _constraint_inputs(ob.constraints)
        for fc in self.drivers(ob).get(None, ()):
            out += _driver_inputs(fc)
        return out

    def outside_inputs(self, ob, bones, inside):
        """The inputs (`bone_inputs`) of armature `ob`'s `bones` other than the armature itself
        and its bones named in `inside`."""
        for name in bones:
            for node in self.bone_inputs(ob, name):
                if node != ob and not (isinstance(node, tuple) and node[0] == ob and node[1] in inside):
                    yield node

    def bone_inputs(self, ob, bone):
        """What a bone's evaluated pose follows: its armature object, parent bone, constraint targets
        and driver inputs."""
        pb = ob.pose.bones.get(bone) if ob.pose is not None else None
        if pb is None:
            return [ob]
        out = [ob]
        if pb.parent is not None:
            out.append((ob, pb.parent.name))
        out += _constraint_inputs(pb.constraints)
        for fc in self.drivers(ob).get(bone, ()):
            out += _driver_inputs(fc)
        return out


def node(target, subtarget):
    if target is None:
        return None
    if subtarget and target.type == "ARMATURE" and target.pose is not None and subtarget in target.pose.bones:
        return (target, subtarget)
    return target


def _constraint_inputs(constraints):
    out = []
    for con in constraints:
        if con.mute or con.influence <= 0.0:
            continue
        pairs = [(getattr(con, "target", None), getattr(con, "subtarget", "")),
                 (getattr(con, "pole_target", None), getattr(con, "pole_subtarget", ""))]
        pairs += [(t.target, t.subtarget) for t in getattr(con, "targets", ()) if t.weight > 0.0]
        out += [n for n in (node(t, s) for t, s in pairs) if n is not None]
    return out


def _driver_inputs(fc):
    out = []
    for var in fc.driver.variables:
        for t in var.targets:
            ob = t.id
            if ob is None or ob.id_type != "OBJECT":
                continue                            # not an object (a scene, a material, ...)
            if var.type == "SINGLE_PROP":
                bone, rest = bone_of_path(t.data_path)
                if bone is not None:
                    if rest.startswith(".") and rest[1:].startswith(_POSE_PROPERTIES):
                        out.append(node(ob, bone))
                    continue
                if t.data_path.startswith(("location", "rotation", "scale", "matrix", "delta")):
                    out.append(ob)
                continue
            out.append(node(ob, t.bone_target))
    return [n for n in out if n is not None]

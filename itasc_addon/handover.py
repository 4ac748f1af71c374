"""Handing a rig over between Blender's IK and ours, and which IK constraints ours drives.

While our solver drives a rig (``object.itasc.active``), the IK constraints it drives are muted so
that Blender's own IK does not act as well; those it cannot drive (`rig_order`: marked
``left_out``) stay Blender's and are never muted. Mute (not influence) is used because influence is the
user's value and often animated, while mute only switches the constraint off; a driven influence
therefore stays live (the rig reader blends by it).

A constraint's mute may itself be animated: a driver (Rigify switches its limbs' pole variants
that way) or keys in the action. Blender writes those at every evaluation, so a muted
constraint would come back on. While active we therefore *hold* every IK constraint that we
drive or whose mute is animated (of those the user lets us drive, ``use``): its own mute state
is recorded (``ITASC_PG_constraint.was_muted``), the F-curves that set it are muted with their own
mute flags recorded (``ITASC_PG_constraint.curves``), and the constraint is muted. Whether a held
constraint is one ours drives follows what its driver (or keys) would give it now
(`driven.value`; a driver it cannot work out keeps the state recorded when it was taken over), so
a pole switch flipped while ours drives changes which constraint we drive, and Blender's IK
stays off on both. Switching back gives every F-curve its mute flag and every constraint its
mute state back exactly; expressions, variables and influences are never changed.

The records and the mute flags are saved with the file, so nothing is lost on save; a file opened
without the extension shows the constraints (and their mute drivers) muted, and unmuting them (or
enabling the extension and switching back) restores Blender's IK.
"""

from __future__ import annotations

import bpy

from . import driven
from .keys import Channels
from .rig import ik_constraints


def _find_constraint(obj, bone, name):
    pb = obj.pose.bones.get(bone) if obj and obj.pose else None
    con = pb.constraints.get(name) if pb else None
    return con if con is not None and con.type == "IK" else None


def entry(obj, bone, name, create=False):
    for item in obj.itasc.constraints:
        if item.bone == bone and item.constraint == name:
            return item
    if not create:
        return None
    item = obj.itasc.constraints.add()
    item.bone, item.constraint = bone, name
    return item


def _paths(bone, name):
    """(data path, whether it is 'enabled', the inverse of mute) of a constraint's on/off switch."""
    prefix = f'pose.bones["{bpy.utils.escape_identifier(bone)}"].constraints["{bpy.utils.escape_identifier(name)}"].'
    return ((prefix + "mute", False), (prefix + "enabled", True))


def _curves(obj, bone, name, channels=None):
    """[(is a driver, data path, inverted, F-curve)] of the F-curves that set a constraint's mute
    (`channels`: the object's `keys.Channels`, when the caller has them)."""
    anim = obj.animation_data
    if anim is None:
        return []
    out = []
    for path, inverted in _paths(bone, name):
        driver, key = driven.curves(obj, path, channels=channels)
        out += [(is_driver, path, inverted, fc) for is_driver, fc in ((True, driver), (False, key)) if fc is not None]
    return out


def _record(item, is_driver, path):
    if item is None or not item.muted_by_us:
        return None
    for rec in item.curves:
        if rec.driver == is_driver and rec.data_path == path:
            return rec
    return None


def _live(item, curves):
    """Those of `curves` that act when the rig is Blender's: not muted by the user."""
    out = []
    for c in curves:
        rec = _record(item, c[0], c[1])
        if not (rec.was_muted if rec is not None else c[3].mute):
            out.append(c)
    return out


def _originally(item, con, live):
    """The constraint's mute as the user's rig has it now (module docstring): from its live
    driver, else its live keys, else its own (recorded) state."""
    for wanted_driver in (True, False):
        for is_driver, _, inverted, fc in live:
            if is_driver != wanted_driver:
                continue
            x = driven.driver_value(fc) if is_driver else _key_value(fc)
            if x is not None:
                return driven.as_boolean(x) != inverted
    return item.was_muted if item is not None and item.muted_by_us else con.mute


def _key_value(fc):
    scene = bpy.context.scene
    return float(fc.evaluate(scene.frame_current + scene.frame_subframe))


def originally_muted(obj, pb, con):
    """The constraint's mute state as the user's rig gives it (before the solver muted it)."""
    item = entry(obj, pb.name, con.name)
    return _originally(item, con, _live(item, _curves(obj, pb.name, con.name)))


def chosen(obj, pb, con):
    """Does the user want our solver to drive this constraint (whether or not it is active)?"""
    item = entry(obj, pb.name, con.name)
    return _chosen(obj, item, pb, con)


def chooser(obj):
    """`chosen` as a function of (pb, con) for one object, its records read once: for reading a
    whole rig."""
    records = {(item.bone, item.constraint): item for item in obj.itasc.constraints}
    on = on_chooser(obj)
    return lambda pb, con: ((item := records.get((pb.name, con.name))) is None or item.use) and on(pb, con)


def on_chooser(obj):
    """Whether an IK constraint is on in the user's rig (not muted before the solver took over), as
    a function of (pb, con) for one object: the constraints Blender's evaluation must show on target."""
    records = {(item.bone, item.constraint): item for item in obj.itasc.constraints}
    anim = obj.animation_data
    channels = Channels(obj) if anim is not None and anim.action is not None else None

    def on(pb, con):
        item = records.get((pb.name, con.name))
        return not _originally(item, con, _live(item, _curves(obj, pb.name, con.name, channels)))
    return on


def leave_to_blender(obj, keys):
    """Mark the IK constraints `keys` {(bone, constraint name)} as left to Blender's own IK (the
    solver cannot drive them): they are not muted while ours drives; every other one is unmarked.
    Takes effect at the next `sync_mute` (`set_active`)."""
    for pb, con in ik_constraints(obj):
        key = (pb.name, con.name)
        item = entry(obj, pb.name, con.name, create=key in keys)
        if item is not None and item.left_out != (key in keys):
            item.left_out = key in keys


def _chosen(obj, item, pb, con, channels=None):
    if item is not None and not item.use:
        return False
    return not _originally(item, con, _live(item, _curves(obj, pb.name, con.name, channels)))


def sync_mute(obj):
    """While active: every chosen IK constraint, and every one whose mute is animated, held
    (module docstring); every other one as the user left it. Records of constraints that no
    longer exist are dropped (their F-curves' mute flags given back first)."""
    settings = obj.itasc
    present = set()
    for pb, con in ik_constraints(obj):
        present.add((pb.name, con.name))
        item = entry(obj, pb.name, con.name, create=True)
        curves = _curves(obj, pb.name, con.name)
        live = _live(item, curves)
        hold = settings.active and item.use and not item.left_out and (bool(live) or not _originally(item, con, live))
        if hold:
            if not item.muted_by_us:
                item.was_muted, item.muted_by_us = con.mute, True
            for is_driver, path, _, fc in curves:
                if _record(item, is_driver, path) is None:
                    rec = item.curves.add()
                    rec.driver, rec.data_path, rec.index, rec.was_muted = is_driver, path, 0, fc.mute
                if not fc.mute:
                    fc.mute = True
            if not con.mute:
                con.mute = True
        elif item.muted_by_us:
            _give_back(obj, item, con)
    for i in reversed(range(len(settings.constraints))):
        item = settings.constraints[i]
        if (item.bone, item.constraint) not in present and item.use:
            if item.muted_by_us:
                _give_back(obj, item, None)
            settings.constraints.remove(i)


def _give_back(obj, item, con):
    """The held constraint's F-curves and its own mute state as they were (module docstring)."""
    anim = obj.animation_data
    channels = Channels(obj) if anim is not None and anim.action is not None else None
    for rec in item.curves:
        if anim is None:
            break
        fc = (anim.drivers.find(rec.data_path, index=rec.index) if rec.driver
              else channels.find(rec.data_path, rec.index) if channels is not None else None)
        if fc is not None and fc.mute != rec.was_muted:
            fc.mute = rec.was_muted
    item.curves.clear()
    if con is not None and con.mute != item.was_muted:
        con.mute = item.was_muted
    item.muted_by_us = False


def restore_mute(obj):
    """Give every constraint we hold, and the F-curves that set its mute, their own states back."""
    for item in obj.itasc.constraints:
        if item.muted_by_us:
            _give_back(obj, item, _find_constraint(obj, item.bone, item.constraint))


def initialize(obj):
    """First use on an armature: the bake range starts as the scene's. (The solver's settings are
    not copied: they are read from the armature's IK panel at every solve, `ik_settings`.)"""
    settings = obj.itasc
    if settings.initialized:
        return
    settings.initialized = True
    scene = bpy.context.scene
    settings.frame_start, settings.frame_end = scene.frame_start, scene.frame_end


def set_active(obj, active=True):
    """Hand the rig to our solver (`active`) or give it back to Blender's IK; the first use
    starts the bake range (`initialize`)."""
    initialize(obj)
    if obj.itasc.active != active:
        obj.itasc.active = active   # the update mutes / restores
    elif active:
        sync_mute(obj)

"""Handing a rig over between Blender's IK and ours, and which IK constraints ours drives.

While our solver drives a rig (``object.itasc.active``), the IK constraints it drives are muted so
that Blender's own IK does not act as well. Each constraint's own mute state is recorded first
(``ITASC_PG_constraint.was_muted``) and put back exactly when the user switches back. Mute (not
influence) is used because influence is the user's value and often animated, while mute only
switches the constraint off. Both the mute flags and the records are saved with the file, so
nothing is lost on save; a file opened without the extension shows the constraints muted, and
unmuting them (or enabling the extension and switching back) restores Blender's IK.
"""

from __future__ import annotations

import bpy

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


def originally_muted(obj, pb, con):
    """The constraint's mute state as the user left it (before the solver muted it)."""
    item = entry(obj, pb.name, con.name)
    return item.was_muted if item is not None and item.muted_by_us else con.mute


def chosen(obj, pb, con):
    """Does the user want our solver to drive this constraint (whether or not it is active)?"""
    return _chosen(entry(obj, pb.name, con.name), con)


def chooser(obj):
    """`chosen` as a function of (pb, con) for one object, its records read once: for reading a
    whole rig."""
    records = {(item.bone, item.constraint): item for item in obj.itasc.constraints}
    return lambda pb, con: _chosen(records.get((pb.name, con.name)), con)


def _chosen(item, con):
    if item is None:
        return not con.mute
    return item.use and not (item.was_muted if item.muted_by_us else con.mute)     # originally_muted, one lookup


def sync_mute(obj):
    """While active: every chosen IK constraint muted (its own state recorded), every other one as
    the user left it. Records of constraints that no longer exist are dropped."""
    settings = obj.itasc
    present = set()
    for pb, con in ik_constraints(obj):
        present.add((pb.name, con.name))
        item = entry(obj, pb.name, con.name, create=True)
        want = settings.active and item.use and not (item.was_muted if item.muted_by_us else con.mute)
        if want and not item.muted_by_us:
            item.was_muted, item.muted_by_us = con.mute, True
            con.mute = True
        elif not want and item.muted_by_us:
            con.mute, item.muted_by_us = item.was_muted, False
    for i in reversed(range(len(settings.constraints))):
        item = settings.constraints[i]
        if (item.bone, item.constraint) not in present and item.use:
            settings.constraints.remove(i)


def restore_mute(obj):
    """Give every constraint we muted its own mute state back."""
    for item in obj.itasc.constraints:
        if item.muted_by_us:
            con = _find_constraint(obj, item.bone, item.constraint)
            if con is not None:
                con.mute = item.was_muted
            item.muted_by_us = False


def initialize(obj):
    """First use on an armature: start from its iTaSC settings (except precision, where ours is
    far tighter than Blender's 0.005)."""
    settings = obj.itasc
    if settings.initialized:
        return
    settings.initialized = True
    scene = bpy.context.scene
    settings.frame_start, settings.frame_end = scene.frame_start, scene.frame_end
    params = obj.pose.ik_param if obj.pose.ik_solver == "ITASC" else None
    if params is None:
        return
    settings.mode = params.mode
    settings.method = params.solver          # 'SDLS' or 'DLS'
    settings.max_iterations = max(1, params.iterations)
    settings.feedback = params.feedback
    settings.max_velocity = params.velocity_max
    settings.damping_max = params.damping_max
    settings.damping_epsilon = params.damping_epsilon
    settings.substeps = 0 if params.use_auto_step else params.step_count


def set_active(obj, active=True):
    """Hand the rig to our solver (`active`) or give it back to Blender's IK; the first use
    starts our settings from Blender's iTaSC ones (`initialize`)."""
    initialize(obj)
    if obj.itasc.active != active:
        obj.itasc.active = active   # the update mutes / restores
    elif active:
        sync_mute(obj)

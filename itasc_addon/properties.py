"""Our settings on each armature object (``object.itasc``), and handing a rig over between
Blender's IK and ours.

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
from bpy.props import (BoolProperty, CollectionProperty, EnumProperty, FloatProperty, FloatVectorProperty, IntProperty,
                       StringProperty)

from . import rig as rig_module


def _find_constraint(obj, bone, name):
    pb = obj.pose.bones.get(bone) if obj and obj.pose else None
    con = pb.constraints.get(name) if pb else None
    return con if con is not None and con.type == "IK" else None


def _use_update(self, context):
    obj = self.id_data
    settings = obj.itasc
    if settings.active:
        sync_mute(obj)


class ITASC_PG_constraint(bpy.types.PropertyGroup):
    """One of the armature's IK constraints, as our solver sees it."""

    bone: StringProperty(name="Bone")
    constraint: StringProperty(name="Constraint")
    use: BoolProperty(name="Drive", default=True, update=_use_update,
                      description="Drive this IK constraint with the iTaSC IK solver")
    muted_by_us: BoolProperty(name="Muted by iTaSC IK", default=False,
                              description="The solver muted this constraint while it drives the rig")
    was_muted: BoolProperty(name="Was Muted", default=False,
                            description="The constraint's own mute state before the solver took over")


class ITASC_PG_channel(bpy.types.PropertyGroup):
    """A channel and frame range a bake wrote (what Clear Bake removes)."""

    data_path: StringProperty()
    index: IntProperty()
    frame_start: FloatProperty()
    frame_end: FloatProperty()


class ITASC_PG_kept_bone(bpy.types.PropertyGroup):
    """A chain bone's own pose channels from before live preview first posed it: live preview
    gives them back when it stops (live.give_back_pose)."""

    bone: StringProperty()
    rotation_quaternion: FloatVectorProperty(size=4)
    rotation_euler: FloatVectorProperty(size=3)
    rotation_axis_angle: FloatVectorProperty(size=4)
    scale: FloatVectorProperty(size=3)


def _active_update(self, context):
    obj = self.id_data
    if self.active:
        sync_mute(obj)
    else:
        restore_mute(obj)
        self.live_preview = False


def _live_update(self, context):
    from . import live

    if self.live_preview and not self.active:
        self.active = True
    if self.live_preview:
        self.kept_pose.clear()
    else:
        live.give_back_pose(self.id_data)
    live.changed(self.id_data)


class ITASC_PG_settings(bpy.types.PropertyGroup):
    """iTaSC IK settings of one armature object."""

    initialized: BoolProperty(default=False, options={"HIDDEN"})
    active: BoolProperty(
        name="Drive Rig", default=False, update=_active_update,
        description="The iTaSC IK solver drives this rig: the IK constraints it drives are muted for "
                    "Blender's own IK (their mute state is restored when this is switched off)")
    live_preview: BoolProperty(
        name="Live Preview", default=False, update=_live_update,
        description="Solve in simulation mode whenever the frame changes or a target moves; the chain "
                    "bones' own pose comes back when it is switched off")
    kept_pose: CollectionProperty(type=ITASC_PG_kept_bone)
    mode: EnumProperty(
        name="Mode", default="ANIMATION",
        items=(("ANIMATION", "Animation", "Solve every frame to convergence from the action's pose"),
               ("SIMULATION", "Simulation", "Advance one time step per frame from the previous frame's solution")))
    method: EnumProperty(
        name="Solver", default="SDLS",
        items=(("PINV", "Pseudo-inverse", "SVD pseudo-inverse"),
               ("DLS", "DLS", "Damped least squares: damping grows near singular poses"),
               ("SDLS", "SDLS", "Selectively damped least squares: damping per singular direction"),
               ("GRADIENT", "Gradient descent", "Baseline: steepest descent with the best step along the gradient")))
    precision: FloatProperty(name="Precision", default=1e-6, min=1e-12, soft_max=0.01, precision=8,
                             description="Position (scene units) and rotation (radians) error to stop at")
    max_iterations: IntProperty(name="Max Iterations", default=300, min=1, soft_max=5000,
                                description="Iteration cap per frame (animation mode)")
    feedback: FloatProperty(name="Feedback", default=20.0, min=0.001, soft_max=100.0,
                            description="Feedback K of the simulation mode, per second")
    max_velocity: FloatProperty(name="Max Velocity", default=50.0, min=0.001, soft_max=100.0,
                                description="Largest joint speed in simulation mode")
    damping_max: FloatProperty(name="Damping", default=0.5, min=0.001, max=1.0,
                               description="Largest damping of the damped least-squares solver")
    damping_epsilon: FloatProperty(name="Damping Epsilon", default=0.15, min=0.001, max=1.0,
                                   description="Smallest singular value below which damping starts")
    substeps: IntProperty(name="Sub-steps", default=0, min=0, soft_max=64,
                          description="Simulation sub-steps per frame (0: automatic from the joint speed)")
    constraints: CollectionProperty(type=ITASC_PG_constraint)
    # Bake range and options.
    frame_start: IntProperty(name="Start", default=1, description="First frame to bake")
    frame_end: IntProperty(name="End", default=250, description="Last frame to bake")
    frame_step: IntProperty(name="Step", default=1, min=1, description="Bake every this many frames")
    only_selected: BoolProperty(name="Only Selected Bones", default=False,
                                description="Write keys for selected bones only (all chain bones are solved)")
    baked: CollectionProperty(type=ITASC_PG_channel)
    # The last result, for the panel.
    has_result: BoolProperty(default=False)
    result_kind: StringProperty(default="")
    result_frames: IntProperty(default=0)
    result_not_converged: IntProperty(default=0)
    result_max_error: FloatProperty(default=0.0, precision=9)
    result_rms_error: FloatProperty(default=0.0, precision=9)
    result_seconds: FloatProperty(default=0.0)
    result_message: StringProperty(default="")
    result_method: StringProperty(default="")       # which solver ran, e.g. "analytic two-bone"


# --- which constraints we drive, and muting Blender's IK while we do ---------------------------

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
    for pb, con in rig_module.ik_constraints(obj):
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
    initialize(obj)
    if obj.itasc.active != active:
        obj.itasc.active = active   # the update mutes / restores
    elif active:
        sync_mute(obj)


classes = (ITASC_PG_constraint, ITASC_PG_channel, ITASC_PG_kept_bone, ITASC_PG_settings)
register, unregister = bpy.utils.register_classes_factory(classes)

"""Our settings on each armature object (``object.itasc``): property groups only. Switching
``active`` or ``live_preview`` hands the rig over (`handover`) and starts or stops live preview
(`live`, `own_pose`).

The solver's settings (`ik_settings.FIELDS`) follow the armature's own IK panel; each has an
``override_<field>`` flag, and only where it is on does our value win. Setting a value turns its
override on; turning an override on starts it at the value in use, so nothing jumps. A file saved
before the flags existed loads with every override off: the armature's settings are followed and
the values stored then (copies of them made at first use) are not used.
"""

from __future__ import annotations

import bpy
from bpy.props import (BoolProperty, CollectionProperty, EnumProperty, FloatProperty, FloatVectorProperty, IntProperty,
                       StringProperty)

from . import handover, ik_settings, live, own_pose


def _use_update(self, context):
    obj = self.id_data
    settings = obj.itasc
    if settings.active:
        handover.sync_mute(obj)


class ITASC_PG_curve(bpy.types.PropertyGroup):
    """An F-curve that sets a constraint's mute (its driver, or keys), muted while our solver
    drives the rig (`handover`), with its own mute flag to give back."""

    driver: BoolProperty(default=False)
    data_path: StringProperty()
    index: IntProperty()
    was_muted: BoolProperty(default=False)


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
    result_stage: IntProperty(name="Solved In", default=-2,
                              description="In the last solve or bake: the stage our solver drove this constraint "
                                          "in (0, 1, ...), -1 Blender's own IK, -2 not in it")
    result_max_error: FloatProperty(name="Max Error", default=0.0, precision=9,
                                    description="In the last solve or bake: the largest position error Blender "
                                                "shows for this constraint (scene units)")
    left_out: BoolProperty(name="Left to Blender", default=False,
                           description="The solver cannot drive this constraint as the rig is (the last solve's "
                                       "warnings say why): Blender's own IK keeps solving it")
    curves: CollectionProperty(type=ITASC_PG_curve)


class ITASC_PG_channel(bpy.types.PropertyGroup):
    """A channel and frame range a bake wrote (what Clear Bake removes)."""

    data_path: StringProperty()
    index: IntProperty()
    frame_start: FloatProperty()
    frame_end: FloatProperty()


class ITASC_PG_kept_bone(bpy.types.PropertyGroup):
    """A chain bone's own pose channels from before live preview first posed it: live preview
    gives them back when it stops (own_pose.give_back)."""

    bone: StringProperty()
    rotation_quaternion: FloatVectorProperty(size=4)
    rotation_euler: FloatVectorProperty(size=3)
    rotation_axis_angle: FloatVectorProperty(size=4)
    scale: FloatVectorProperty(size=3)


def _active_update(self, context):
    obj = self.id_data
    if self.active:
        handover.sync_mute(obj)
    else:
        handover.restore_mute(obj)
        self.live_preview = False


def _live_update(self, context):
    if self.live_preview and not self.active:
        self.active = True
    if self.live_preview:
        self.kept_pose.clear()
    else:
        own_pose.give_back(self.id_data)
    live.changed(self.id_data)


def _set_quietly(group, name, value):
    """Store a property's value without calling its update (an ID property write)."""
    prop = group.bl_rna.properties[name]
    if prop.type == "ENUM":
        value = prop.enum_items[value].value
    group[name] = value


def _value_update(name):
    """A value set in our panel (or by a script) overrides the armature's."""
    flag = "override_" + name

    def update(self, context):
        if not self.get(flag, False):
            self[flag] = True
    return update


def _override_update(name):
    """Turned on: the value starts at the one in use (the armature's), so nothing jumps."""
    flag = "override_" + name

    def update(self, context):
        if getattr(self, flag):
            _set_quietly(self, name, ik_settings.followed_value(self.id_data, name))
    return update


def _override(name):
    label = ik_settings.BY_NAME[name].label
    return BoolProperty(name=f"Override {label}", default=False, update=_override_update(name),
                        description=f"Use this panel's {label} instead of the armature's IK settings")


class ITASC_PG_settings(bpy.types.PropertyGroup):
    """iTaSC IK settings of one armature object."""

    initialized: BoolProperty(default=False, options={"HIDDEN"})
    active: BoolProperty(
        name="Drive Rig", default=False, update=_active_update,
        description="The iTaSC IK solver drives this rig: the IK constraints it drives are muted for "
                    "Blender's own IK (their mute state is restored when this is switched off)")
    live_preview: BoolProperty(
        name="Live Preview", default=False, update=_live_update,
        description="Solve whenever the frame changes or a target moves: in animation mode the pose the "
                    "bake writes, in simulation mode one time step per frame; the chain bones' own pose "
                    "comes back when it is switched off")
    kept_pose: CollectionProperty(type=ITASC_PG_kept_bone)
    # The solver's settings: used where their override is on (`ik_settings`), else the armature's.
    mode: EnumProperty(
        name="Mode", default="ANIMATION", update=_value_update("mode"),
        items=(("ANIMATION", "Animation", "Solve every frame to convergence from the action's pose"),
               ("SIMULATION", "Simulation", "Advance one time step per frame from the previous frame's solution")))
    method: EnumProperty(
        name="Solver", default="SDLS", update=_value_update("method"),
        items=(("PINV", "Pseudo-inverse", "SVD pseudo-inverse"),
               ("DLS", "DLS", "Damped least squares: damping grows near singular poses"),
               ("SDLS", "SDLS", "Selectively damped least squares: damping per singular direction"),
               ("GRADIENT", "Gradient descent", "Baseline: steepest descent with the best step along the gradient")))
    precision: FloatProperty(name="Precision", default=ik_settings.PRECISION, min=1e-12, soft_max=0.01, precision=8,
                             update=_value_update("precision"),
                             description="Position (scene units) and rotation (radians) error to stop at")
    max_iterations: IntProperty(name="Max Iterations", default=300, min=1, soft_max=5000,
                                update=_value_update("max_iterations"),
                                description="Iteration cap per frame (animation mode)")
    feedback: FloatProperty(name="Feedback", default=20.0, min=0.001, soft_max=100.0, update=_value_update("feedback"),
                            description="Feedback K of the simulation mode, per second")
    max_velocity: FloatProperty(name="Max Velocity", default=50.0, min=0.001, soft_max=100.0,
                                update=_value_update("max_velocity"),
                                description="Largest joint speed in simulation mode")
    damping_max: FloatProperty(name="Damping", default=0.5, min=0.001, max=1.0, update=_value_update("damping_max"),
                               description="Largest damping of the damped least-squares solver")
    damping_epsilon: FloatProperty(name="Damping Epsilon", default=0.15, min=0.001, max=1.0,
                                   update=_value_update("damping_epsilon"),
                                   description="Smallest singular value below which damping starts")
    substeps: IntProperty(name="Sub-steps", default=0, min=0, soft_max=64, update=_value_update("substeps"),
                          description="Simulation sub-steps per frame (0: automatic from the joint speed)")
    override_mode: _override("mode")
    override_method: _override("method")
    override_precision: _override("precision")
    override_max_iterations: _override("max_iterations")
    override_feedback: _override("feedback")
    override_max_velocity: _override("max_velocity")
    override_damping_max: _override("damping_max")
    override_damping_epsilon: _override("damping_epsilon")
    override_substeps: _override("substeps")
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
    result_solver_path: StringProperty(default="")       # which solver ran, e.g. "analytic two-bone"


classes = (ITASC_PG_curve, ITASC_PG_constraint, ITASC_PG_channel, ITASC_PG_kept_bone, ITASC_PG_settings)
register, unregister = bpy.utils.register_classes_factory(classes)

"""Where each setting of a solve comes from, and what of Blender's IK settings this solver does
not follow. Read at every solve, bake and live-preview frame, so a change in the armature's IK
panel is used from the next one on.

Each field of our settings (`FIELDS`, the properties on ``object.itasc`` and the API's options)
takes the first of:

1. the API option of that name (``solve_frame`` / ``bake`` ``**options``): `OPTION`;
2. our panel's value, where its override (``object.itasc.override_<field>``) is on: `OVERRIDE`
   (setting a value in our panel, or from a script, turns its override on);
3. the armature's own IK solver settings: with iTaSC, ``pose.ik_param`` (`ARMATURE`); with the
   Standard solver, the largest ``iterations`` of its IK constraints (`CONSTRAINTS`);
4. our panel's value, for a field Blender's solver has no counterpart of (precision; the
   Standard solver has no mode or solver either): `ADDON`.

Precision is this add-on's own (our panel, default `PRECISION`): Blender's iTaSC precision is
another quantity, not followed. Blender stops reiterating once a step moves the joints or the end
effector by less than it (Blender keeps it between 0.0001 and 0.1); ours stops once the error
itself is below our precision, and Blender's evaluation of what we wrote is checked against it.
Damping is taken as it is: Blender's DLS scales it by the chain's length, ours does not.

Blender's iTaSC settings without a field of ours: ``reiteration_method`` (simulation: NEVER takes
one time step on the first frame too, INITIAL converges the first frame; ALWAYS is not followed:
frames after the first take one time step), ``step_min`` (simulation with automatic sub-steps: at
most frame time / step_min sub-steps); ``step_max``, ``translate_root_bones`` and ``precision``
are not followed (`not_used`).
Blender itself uses feedback, velocity, sub-steps and reiteration in simulation mode only, and
damping with its DLS solver only; so does our panel show them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .rig import RigError, ik_constraints

OPTION, OVERRIDE, ARMATURE, CONSTRAINTS, ADDON = "option", "override", "armature", "IK constraints", "add-on"
PRECISION = 1e-6       # this add-on's precision (scene units, radians): our panel's default
ZERO = 1e-9            # what the armature's 0 (Blender allows it; the engine needs > 0) is taken as
MODES = ("ANIMATION", "SIMULATION")
METHODS = ("PINV", "DLS", "SDLS", "GRADIENT")


@dataclass(frozen=True)
class Field:
    """One of our settings: its property on object.itasc (and API option), the iTaSC property it
    follows ('' for none), and when Blender's panel shows it."""

    name: str
    itasc: str
    label: str
    simulation: bool = False       # used in simulation mode only
    dls: bool = False              # used by the DLS solver only


FIELDS = (
    Field("mode", "mode", "Mode"),
    Field("method", "solver", "Solver"),
    Field("precision", "", "Precision"),
    Field("max_iterations", "iterations", "Iterations"),
    Field("feedback", "feedback", "Feedback", simulation=True),
    Field("max_velocity", "velocity_max", "Max Velocity", simulation=True),
    Field("substeps", "step_count", "Sub-steps", simulation=True),
    Field("damping_max", "damping_max", "Damping", dls=True),
    Field("damping_epsilon", "damping_epsilon", "Damping Epsilon", dls=True),
)
NAMES = tuple(f.name for f in FIELDS)
BY_NAME = {f.name: f for f in FIELDS}


@dataclass(frozen=True)
class Chosen:
    """The settings of one solve: `values` (per field of `NAMES`, and `converge_first_frame`,
    `max_substeps`; precision in scene units), `sources` (where each came from: `OPTION`,
    `OVERRIDE`, `ARMATURE`, `CONSTRAINTS`, `ADDON`), the armature's IK solver ('ITASC' or
    'LEGACY'), `notes` (what to say once about the settings) and `warnings` (settings set in the
    armature that make Blender's own solver act otherwise than ours)."""

    solver: str
    followable: tuple = ()         # the fields the armature's settings give (what an override overrides)
    values: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    notes: tuple = ()
    warnings: tuple = ()


def armature_values(obj, constraints=None):
    """{field: value} of what the armature's own IK settings give (fields they have no counterpart
    of left out): iTaSC's ik_param, or the Standard solver's IK constraints' iterations; and those
    constraints' iterations (sorted, distinct; empty with iTaSC). `constraints`: (bone, constraint)
    names of the IK constraints solved (None: every IK constraint of the armature)."""
    params = obj.pose.ik_param if obj.pose is not None and obj.pose.ik_solver == "ITASC" else None
    if params is None:
        counts = sorted({con.iterations for con in _constraints(obj, constraints)})
        return ({"max_iterations": max(1, counts[-1])} if counts else {}), counts
    out = {}
    for f in FIELDS:
        if f.name == "substeps":
            out[f.name] = 0 if params.use_auto_step else int(params.step_count)
        elif f.name == "max_iterations":
            out[f.name] = max(1, int(params.iterations))
        elif f.itasc:
            value = getattr(params, f.itasc)
            out[f.name] = max(float(value), ZERO) if isinstance(value, float) else value
    return out, []


def _constraints(obj, names):
    if names is None:
        return [con for _, con in ik_constraints(obj)]
    bones, out = obj.pose.bones, []
    for bone, name in names:
        pb = bones.get(bone)
        con = pb.constraints.get(name) if pb is not None else None
        if con is not None:
            out.append(con)
    return out


def followed_value(obj, name):
    """The value field `name` takes without its override and without options."""
    return armature_values(obj)[0].get(name, getattr(obj.itasc, name))


def choose(obj, options=None, fps=None, constraints=None):
    """The settings of a solve of `obj` (module docstring): `Chosen`. `fps` is the solve's frame
    rate (frames per second of its time steps), for the iTaSC settings given in seconds;
    `constraints` the (bone, constraint) names of the IK constraints solved (None: all)."""
    options = dict(options or {})
    unknown = set(options) - set(NAMES)
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; choose from {list(NAMES)}")
    props = obj.itasc
    solver = obj.pose.ik_solver if obj.pose is not None else "LEGACY"
    armature, counts = armature_values(obj, constraints)
    followed = ARMATURE if solver == "ITASC" else CONSTRAINTS
    values, sources = {}, {}
    for f in FIELDS:
        if f.name in options:
            values[f.name], sources[f.name] = options[f.name], OPTION
        elif getattr(props, "override_" + f.name, False):
            values[f.name], sources[f.name] = getattr(props, f.name), OVERRIDE
        elif f.name in armature:
            values[f.name], sources[f.name] = armature[f.name], followed
        else:
            values[f.name], sources[f.name] = getattr(props, f.name), ADDON
    values["mode"] = _choice(values["mode"], MODES, "mode")
    values["method"] = _choice(values["method"], METHODS, "method")
    notes, warnings = [], []
    values["converge_first_frame"], values["max_substeps"] = True, None
    sources["converge_first_frame"] = sources["max_substeps"] = ADDON
    if solver == "ITASC":
        _itasc_extras(obj.pose.ik_param, values, sources, fps, notes, warnings)
    else:
        notes.append(_standard_note(counts, values, sources))
    return Chosen(solver=solver, followable=tuple(armature), values=values, sources=sources, notes=tuple(notes),
                  warnings=tuple(warnings))


def _choice(value, allowed, what):
    text = str(value).upper()
    if text not in allowed:
        raise RigError(f"{what} must be one of {list(allowed)}, not {value!r}")
    return text


def _itasc_extras(params, values, sources, fps, notes, warnings):
    """The iTaSC settings without a field of ours: what they give, what is not followed."""
    if values["mode"] == "SIMULATION":
        values["converge_first_frame"] = params.reiteration_method != "NEVER"
        sources["converge_first_frame"] = ARMATURE
        if params.reiteration_method == "ALWAYS":
            warnings.append("the armature's iTaSC reiteration 'Always' is not followed: frames after the first "
                            "take one time step ('Initial')")
        if values["substeps"] == 0 and params.use_auto_step and fps:
            frame_time = 1.0 / fps
            if params.step_min > 0:
                values["max_substeps"] = max(1, math.floor(frame_time / params.step_min + 1e-6))
                sources["max_substeps"] = ARMATURE
            if params.step_max < frame_time:
                warnings.append(f"the armature's iTaSC step_max {params.step_max:.3g} s is not followed: a frame of "
                                f"{frame_time:.3g} s is cut into sub-steps by joint speed (at least one)")
    if params.translate_root_bones:
        warnings.append("the armature's iTaSC 'Translate Roots' is not followed: root bones stay where they are")
    notes.append("Blender's iTaSC settings not used by this solver: " + ", ".join(not_used(params, values["mode"]))
                 + f"; precision is this add-on's ({values['precision']:g}): it stops on the error itself, where "
                 "Blender's iTaSC stops on the size of a step")


def not_used(params, mode):
    """The armature's iTaSC settings (ik_param) this solver does not follow in `mode`; Blender's
    own iTaSC uses each of them there."""
    out = ["precision", "translate_root_bones"]
    if mode == "SIMULATION":
        out.insert(1, "step_max")
        if params.reiteration_method == "ALWAYS":
            out.append("reiteration_method 'ALWAYS' (solved as 'INITIAL')")
    return out


def _standard_note(counts, values, sources):
    """What a rig set to Blender's Standard IK solver is told (`counts`: its IK constraints'
    distinct iterations)."""
    text = ("Blender's Standard IK solver is set on this armature: it is solved with the iTaSC engine of this "
            "add-on; mode, solver and precision are this add-on's")
    if sources["max_iterations"] == CONSTRAINTS:
        text += f", iterations its IK constraints' ({values['max_iterations']})"
        if len(counts) > 1:
            text += f", the largest of {counts} for every chain"
    return text


def engine_keywords(chosen, fps, scale):
    """The engine's Settings keywords of `chosen`: precision in the armature's units (`scale`:
    the armature's uniform scale), `fps` the solve's frame rate."""
    v = chosen.values
    out = dict(method=v["method"].lower(), precision=float(v["precision"]) / scale,
               max_iterations=int(v["max_iterations"]), feedback=float(v["feedback"]),
               max_velocity=float(v["max_velocity"]), damping_max=float(v["damping_max"]),
               damping_epsilon=float(v["damping_epsilon"]), substeps=int(v["substeps"]), fps=float(fps),
               converge_first_frame=bool(v["converge_first_frame"]))
    if v["max_substeps"] is not None:
        out["max_substeps"] = int(v["max_substeps"])
    return out

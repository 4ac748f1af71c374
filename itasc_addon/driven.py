"""The F-curves that set a property (its driver, its key F-curve in the active action) and the
value they give it now, worked out without an evaluation of the scene.

`value` knows the common drivers: Sum, Average, Min, Max and scripted expressions that Blender
evaluates itself without Python (``is_simple_expression``) over Single Property variables; the
driver's own F-curve (keys, modifiers) then maps that value as Blender maps it. A driver it does
not know gives None (the caller falls back to what it recorded). A key F-curve gives its value
at the current frame. Booleans read the way Blender writes an animated float into one:
true above 1 - float32 epsilon.
"""

from __future__ import annotations

import math

import bpy

from .keys import Channels

BOOLEAN_ABOVE = 1.0 - 2.0 ** -23
_SIMPLE_NAMES = {name: getattr(math, name) for name in dir(math) if not name.startswith("_")}
_SIMPLE_NAMES.update(abs=abs, min=min, max=max, round=round, bool=bool, int=int, float=float)


def curves(obj, data_path, index=0, channels=None):
    """(driver F-curve or None, key F-curve of the active action or None) of an object's property.
    `channels`: the object's `keys.Channels` when the caller has them (looking up many properties)."""
    anim = obj.animation_data
    if anim is None:
        return None, None
    driver = anim.drivers.find(data_path, index=index)
    if anim.action is None:
        return driver, None
    return driver, (channels or Channels(obj)).find(data_path, index)


def _variable(var):
    if var.type != "SINGLE_PROP":
        return None
    t = var.targets[0]
    if t.id is None or not t.data_path:
        return None
    try:
        value = t.id.path_resolve(t.data_path)
    except (ValueError, TypeError):
        return None
    if isinstance(value, (bool, int, float)):
        return float(value)
    return None


def driver_value(fc):
    """The value a driver F-curve gives its property now, or None when the driver is not one
    `value` knows (module docstring)."""
    driver = fc.driver
    values = {}
    for var in driver.variables:
        x = _variable(var)
        if x is None:
            return None
        values[var.name] = x
    kind = driver.type
    numbers = list(values.values())
    if kind == "SUM":
        x = sum(numbers)
    elif kind == "AVERAGE":
        x = sum(numbers) / len(numbers) if numbers else 0.0
    elif kind == "MIN":
        x = min(numbers) if numbers else 0.0
    elif kind == "MAX":
        x = max(numbers) if numbers else 0.0
    elif kind == "SCRIPTED":
        if driver.use_self or not driver.is_simple_expression:
            return None                 # Blender would need Python (and trust in the file) for it
        try:
            x = float(eval(compile(driver.expression, "<driver>", "eval"), {"__builtins__": {}},  # noqa: S307
                           {**_SIMPLE_NAMES, **values}))
        except Exception:       # anything the expression needs beyond arithmetic and math
            return None
    else:
        return None
    if len(fc.keyframe_points) or len(fc.modifiers):
        x = fc.evaluate(x)
    return float(x)


def value(obj, data_path, index=0):
    """What the property's driver (first) or key F-curve gives it now: a float, or None when
    neither is there (or live: a muted one counts as there) or the driver is unknown."""
    driver, key = curves(obj, data_path, index)
    if driver is not None:
        return driver_value(driver)
    if key is not None:
        scene = bpy.context.scene
        return float(key.evaluate(scene.frame_current + scene.frame_subframe))
    return None


def as_boolean(x):
    return x > BOOLEAN_ABOVE

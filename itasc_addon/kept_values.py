"""Values a job changes on a rig outside the channels it keys (a bone's IK Stretch, a limb's
IK/FK switch), kept on the object so that Clear Bake puts them back as they were."""

import json

PROPERTY = "itasc_kept_values"


def _read(pb, name):
    value = getattr(pb, name) if hasattr(pb, name) else pb.get(name)
    return value.to_list() if hasattr(value, "to_list") else value


def _write(pb, name, value):
    if hasattr(pb, name):
        setattr(pb, name, value)
    elif value is None:
        pb.pop(name, None)
    else:
        pb[name] = type(pb[name])(value) if name in pb and not isinstance(value, list) else value


def change(obj, bone: str, name: str, value) -> None:
    """Set pose bone `bone`'s property `name` (an RNA property or a custom one) to `value`,
    keeping the value it had before the first change (None: it had none)."""
    pb = obj.pose.bones[bone]
    kept = json.loads(obj.get(PROPERTY, "{}"))
    kept.setdefault(json.dumps([bone, name]), _read(pb, name))
    obj[PROPERTY] = json.dumps(kept)
    _write(pb, name, value)


def restore(obj) -> int:
    """Put back every kept value (bones since removed are skipped); returns how many."""
    kept = json.loads(obj.get(PROPERTY, "{}"))
    restored = 0
    for key, value in kept.items():
        bone, name = json.loads(key)
        pb = obj.pose.bones.get(bone)
        if pb is not None:
            _write(pb, name, value)
            restored += 1
    obj.pop(PROPERTY, None)
    return restored

"""Bone maps: which bone of an armature plays each role of the retarget's skeleton.

A role is a joint of a human skeleton every mocap clip and every rig has (the engine's
vocabulary, `ROLES`): the hips, the spine from bottom to top, neck and head, and per side the
shoulder (clavicle), upper arm, forearm, hand, thigh, shin, foot and toe. A map is a plain dict
{role: bone name}. `auto_map` makes one from an armature's bone names by the preset whose names
fit best (namespace prefixes such as ``mixamorig:`` ignored, case ignored); `unmapped` lists the
roles a map leaves out. `combined_map` joins that with the map the engine finds from the
skeleton's hierarchy and rest pose (`solver.retarget.structure`) where names do not map every
required role. `to_json` / `from_json` move a retarget's pair of maps {role: (source bone,
target bone)} in and out of files.

Presets name the bones of: the CMU BVH conversions (cgspeed's MotionBuilder naming of 2010,
"cmuconvert-mb2", and the 3ds Max naming, "cmuconvert-max"), Mixamo, Rokoko, Blender's Rigify
human metarig, the rig Rigify generates from it (solved on its ORG- skeleton; its animator
controls are in `rigify_controls`), and Unreal's mannequin.
"""

from __future__ import annotations

import json

from ...solver.retarget import REQUIRED_ROLES as REQUIRED  # noqa: F401 (the roles a retarget needs)
from ...solver.retarget import ROLES

SIDES = ("L", "R")
LIMB = ("thigh", "shin", "foot", "toe", "shoulder", "upper_arm", "forearm", "hand")


def _sided(body, limb):
    """A preset from its body names {role: name} and a function (part, side) -> name or None."""
    out = dict(body)
    for side in SIDES:
        for part in LIMB:
            name = limb(part, side)
            if name:
                out[f"{part}.{side}"] = name
    return out


_LONG = {"L": "Left", "R": "Right"}


def _motionbuilder_limb(part, side):
    """MotionBuilder's limb names, which CMU's cgspeed conversion and Mixamo share: LeftUpLeg ..."""
    return _LONG[side] + {"thigh": "UpLeg", "shin": "Leg", "foot": "Foot", "toe": "ToeBase", "shoulder": "Shoulder",
                          "upper_arm": "Arm", "forearm": "ForeArm", "hand": "Hand"}[part]


PRESETS = {
    "cmu_mb": _sided(
        {"hips": "Hips", "spine": "LowerBack", "chest": "Spine", "upper_chest": "Spine1", "neck": "Neck", "head": "Head"},
        _motionbuilder_limb),
    "cmu_max": _sided(
        {"hips": "Hips", "spine": "lowerback", "chest": "Chest", "upper_chest": "Chest2", "neck": "lowerneck",
         "head": "Head"},
        lambda part, side: _LONG[side] + {"thigh": "Hip", "shin": "Knee", "foot": "Ankle", "toe": "Toe",
                                          "shoulder": "Collar", "upper_arm": "Shoulder", "forearm": "Elbow",
                                          "hand": "Wrist"}[part]),
    "mixamo": _sided(
        {"hips": "Hips", "spine": "Spine", "chest": "Spine1", "upper_chest": "Spine2", "neck": "Neck", "head": "Head"},
        _motionbuilder_limb),
    "rokoko": _sided(
        {"hips": "Hips", "spine": "Spine1", "chest": "Spine2", "upper_chest": "Spine4", "neck": "Neck", "head": "Head"},
        lambda part, side: _LONG[side] + {"thigh": "Thigh", "shin": "Shin", "foot": "Foot", "toe": "Toe",
                                          "shoulder": "Shoulder", "upper_arm": "Arm", "forearm": "ForeArm",
                                          "hand": "Hand"}[part]),
    "rigify_metarig": _sided(
        {"hips": "spine", "spine": "spine.001", "chest": "spine.002", "upper_chest": "spine.003", "neck": "spine.004",
         "head": "spine.006"},
        lambda part, side: f"{part}.{side}"),
    "unreal": _sided(
        {"hips": "pelvis", "spine": "spine_01", "chest": "spine_02", "upper_chest": "spine_03", "neck": "neck_01",
         "head": "head"},
        lambda part, side: {"thigh": "thigh", "shin": "calf", "foot": "foot", "toe": "ball", "shoulder": "clavicle",
                            "upper_arm": "upperarm", "forearm": "lowerarm", "hand": "hand"}[part]
        + "_" + side.lower()),
}
PRESETS["rigify"] = {role: "ORG-" + name for role, name in PRESETS["rigify_metarig"].items()}

#: Names a preset is told apart by where its role names are shared (CMU's two namings both have
#: "LeftShoulder", for a clavicle in one and an upper arm in the other).
_MARKERS = {"cmu_mb": ("LHipJoint", "LowerBack"), "cmu_max": ("LHipJoint", "lowerback"),
            "mixamo": ("Spine2",), "rokoko": ("Spine4", "LeftThigh"), "rigify": ("root", "torso"),
            "rigify_metarig": ("spine.006",), "unreal": ("root", "ik_foot_root")}

PRESET_LABELS = {"cmu_mb": "CMU BVH (MotionBuilder names)", "cmu_max": "CMU BVH (3ds Max names)",
                 "mixamo": "Mixamo", "rokoko": "Rokoko", "rigify_metarig": "Rigify metarig",
                 "rigify": "Rigify generated rig", "unreal": "Unreal mannequin"}


def normalized(name: str) -> str:
    """A bone name without a namespace prefix ("mixamorig:Hips", "mixamorig1:Hips" -> "hips")
    and without case."""
    return name.rsplit(":", 1)[-1].lower()


def preset_map(preset: str, bone_names) -> dict:
    """The preset's roles whose bones the armature has: {role: the armature's own bone name}."""
    if preset not in PRESETS:
        raise ValueError(f"unknown bone-map preset {preset!r}; presets: {', '.join(PRESETS)}")
    by_key = {}
    for name in bone_names:
        by_key.setdefault(normalized(name), name)
    return {role: by_key[normalized(bone)] for role, bone in PRESETS[preset].items() if normalized(bone) in by_key}


def best_preset(bone_names) -> tuple[str, dict]:
    """(preset, its map) of the preset mapping most roles, markers breaking ties."""
    names = list(bone_names)
    keys = {normalized(n) for n in names}
    scored = []
    for preset in PRESETS:
        mapped = preset_map(preset, names)
        exact = sum(normalized(m) in keys for m in _MARKERS.get(preset, ()))
        exact += preset == "mixamo" and any(n.lower().startswith("mixamorig") for n in names)
        scored.append((len(mapped), exact, preset, mapped))
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    return scored[0][2], scored[0][3]


def auto_map(bone_names) -> dict:
    """{role: bone} from the bone names (`best_preset`); roles it cannot find are left out."""
    return best_preset(bone_names)[1]


def combined_map(bone_names, structure) -> tuple[dict, list, str]:
    """(map, notes, how) from the names and a `StructureMap` of the same armature.

    Where the best preset maps every required role (hips, legs down to the feet) its map is
    kept, roles it leaves out taken from the structure (bones no other role has), and each role
    the two give different bones is noted. Otherwise the structure's map is used, with its own
    list of what stayed ambiguous. `how` says which: "names (preset)", "names (preset) and
    skeleton" or "skeleton"."""
    preset, by_name = best_preset(bone_names)
    by_structure = dict(structure.roles)
    if not [r for r in REQUIRED if r not in by_name]:
        out = dict(by_name)
        used = set(out.values())
        added = [r for r in ROLES if r not in out and r in by_structure and by_structure[r] not in used]
        for r in added:
            out[r] = by_structure[r]
        notes = [f"{r}: names say {by_name[r]}, the skeleton {by_structure[r]}; kept the name's"
                 for r in ROLES if r in by_name and r in by_structure and by_name[r] != by_structure[r]]
        how = f"names ({preset})" + (" and skeleton" if added else "")
        return {r: out[r] for r in ROLES if r in out}, notes, how
    return by_structure, list(structure.ambiguous), "skeleton"


def unmapped(mapping: dict, roles=ROLES) -> list:
    """The roles of `roles` the map gives no bone."""
    return [role for role in roles if not mapping.get(role)]


def to_json(pairs: dict) -> str:
    """A retarget's bone map {role: (source bone, target bone)} as JSON text."""
    data = {"format": "itasc_ik bone map", "version": 1,
            "roles": {role: {"source": s or "", "target": t or ""} for role, (s, t) in pairs.items()}}
    return json.dumps(data, indent=2, sort_keys=False)


def from_json(text: str) -> dict:
    """The bone map {role: (source bone, target bone)} written by `to_json`; ValueError with the
    reason on anything else (unknown roles included)."""
    try:
        data = json.loads(text)
        roles = data["roles"]
        pairs = {role: (str(v.get("source", "")), str(v.get("target", ""))) for role, v in roles.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"not an itasc_ik bone map (JSON with 'roles': {{role: {{source, target}}}}): {err}") from None
    unknown = sorted(set(pairs) - set(ROLES))
    if unknown:
        raise ValueError(f"unknown role(s) in the bone map: {', '.join(unknown)}; roles: {', '.join(ROLES)}")
    return pairs

"""An armature's bone map without help: its names (`bone_maps` presets) and, where they fall
short, its skeleton (`solver.retarget.structure`: the hierarchy and rest pose).

The skeleton looked at is the one a retarget solves: on a rig Rigify generated its ORG- bones in
the metarig's hierarchy (`rigify_controls.org_parents`); elsewhere its deforming bones, each
hung on its nearest deforming ancestor (controls and helpers left out), or every bone where
fewer than five deform or the deforming ones fall apart into several trees (parented through
controls). Positions are the rest heads and tails in armature space. Where the feet give no
facing direction, the rig is taken to face -Y (Blender's convention) and that is noted.
"""

from __future__ import annotations

import numpy as np

from ...solver.retarget.structure import structural_map
from . import bone_maps, rigify_controls

BLENDER_FORWARD = (0.0, -1.0, 0.0)


def _hung(keep, parents):
    """Each of `keep`'s parent index among `keep` (its nearest ancestor there; -1 for none)."""
    at = {n: i for i, n in enumerate(keep)}
    index = []
    for name in keep:
        p = parents.get(name)
        while p is not None and p not in at:
            p = parents.get(p)
        index.append(at.get(p, -1))
    return index


def rest_skeleton(obj):
    """(names, parent indices, heads (B, 3), tails (B, 3)) of the bones the map looks at."""
    bones = obj.data.bones
    parents = {b.name: b.parent.name if b.parent else None for b in bones}
    if rigify_controls.is_generated_rigify(obj):
        keep = [b.name for b in bones if b.name.startswith("ORG-")]
        parents.update(rigify_controls.org_parents(obj))
        index = _hung(keep, parents)
    else:
        keep = [b.name for b in bones if b.use_deform]
        index = _hung(keep, parents)
        if len(keep) < 5 or index.count(-1) > 1:
            keep = [b.name for b in bones]
            index = _hung(keep, parents)
    heads = np.array([list(bones[n].head_local) for n in keep], dtype=float).reshape(-1, 3)
    tails = np.array([list(bones[n].tail_local) for n in keep], dtype=float).reshape(-1, 3)
    return keep, np.array(index, dtype=int), heads, tails


def armature_map(obj) -> tuple[dict, list, str]:
    """(map {role: bone}, notes on what stayed ambiguous, how it was found) for the armature
    (`bone_maps.combined_map`)."""
    structure = structural_map(*rest_skeleton(obj), forward=BLENDER_FORWARD)
    mapping, notes, how = bone_maps.combined_map([b.name for b in obj.data.bones], structure)
    if how == "skeleton" and structure.facing == "given":
        notes = notes + ["left/right: the feet give no facing direction; taken as facing -Y (Blender's convention)"]
    return mapping, notes, how


def auto_pairs(source, target) -> tuple[dict, list]:
    """({role: (source bone, target bone)} for every role, '' where a side maps none; notes, each
    prefixed with the armature's name)."""
    s_map, s_notes, s_how = armature_map(source)
    t_map, t_notes, t_how = armature_map(target)
    pairs = {r: (s_map.get(r, ""), t_map.get(r, "")) for r in bone_maps.ROLES}
    notes = [f"{source.name} (by {s_how}): {n}" for n in s_notes]
    notes += [f"{target.name} (by {t_how}): {n}" for n in t_notes]
    return pairs, notes

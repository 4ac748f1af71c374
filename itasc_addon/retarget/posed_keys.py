"""Keys that give the solved bones chosen pose matrices, written as a bake writes them: on a rig
Rigify generated, on its animator controls (`rigify_controls.write_controls`, whose last reading
is Blender's evaluation of the keys); elsewhere each solved bone's basis under its posed parent
(`writing`), the first bone (the hips) with its location.

With P_b the wanted pose of bone b (armature space), R_b its rest matrix and p its parent,

    basis_b = (P_p R_p^-1 R_b)^-1 P_b        (P_p R_p^-1 := I for the first bone),

its rotation part made orthonormal (the nearest rotation, by SVD).
"""

from __future__ import annotations

import numpy as np

from ..rig import RigError
from . import rigify_controls, writing


def bases_of(rig, bone_names, parents, posed):
    """{bone: basis (F, 4, 4)} that give the bones `bone_names` (parents first) the pose
    matrices `posed` (F, B, 4, 4)."""
    rest = {b: np.array(rig.data.bones[b].matrix_local) for b in bone_names}
    at = {n: i for i, n in enumerate(bone_names)}
    bases = {}
    for i, name in enumerate(bone_names):
        parent = parents[name]
        if i == 0 or parent not in at:
            parent_pose, local_rest = np.eye(4), rest[name]
        else:
            parent_pose, local_rest = posed[:, at[parent]], np.linalg.inv(rest[parent]) @ rest[name]
        basis = np.linalg.inv(parent_pose @ local_rest) @ posed[:, i]
        u, _, vt = np.linalg.svd(basis[:, :3, :3])
        basis[:, :3, :3] = u @ vt
        bases[name] = basis
    return bases


def write_posed(rig, frames, bone_names, parents, posed, *, record=True, rigid_limbs=True, before_write=None):
    """Key `rig` at `frames` so that Blender poses `bone_names` as `posed` (F, B, 4, 4, armature
    space). `rigid_limbs`: on a generated Rigify rig, IK Stretch 0 on its limbs' IK chains
    (`rigify_controls.rigid_ik_chains`); `before_write()` runs once every check has passed.
    Returns (keys written, control passes (0 on a plain rig), Blender's world matrices
    (F, B, 4, 4) of the bones after the last keys or None where nothing was read, warnings)."""
    warnings = []
    if not np.all(np.isfinite(posed)):
        raise RigError("the solve produced non-finite poses; nothing was written")
    if rigify_controls.is_generated_rigify(rig):
        wanted = {n: posed[:, i] for i, n in enumerate(bone_names)}
        missing = sorted(rigify_controls.needed_bones(rig) - set(wanted))
        if missing:
            raise RigError(f"the bone map leaves the Rigify rig's ORG- bone(s) {', '.join(missing)} unsolved; "
                           "use the 'rigify' preset")
        if rigid_limbs:
            changed = rigify_controls.rigid_ik_chains(rig)
            if changed:
                warnings.append("IK Stretch set to 0 on Rigify's IK chain bones " + ", ".join(
                    f"{b} (was {v:g})" for b, v in changed) + " so that knees and elbows keep the solved "
                    "pose; pass rigid_limbs=False to keep the rig's stretch")
        if before_write is not None:
            before_write()
        written, passes, _, _, seen = rigify_controls.write_controls(rig, frames, wanted, record=record,
                                                                     also=bone_names)
        return written, passes, np.array(rig.matrix_world) @ seen, warnings
    plan = writing.plan(rig, bases_of(rig, bone_names, parents, posed), located={bone_names[0]})
    writing.check(plan)
    if before_write is not None:
        before_write()
    return writing.write(rig, frames, plan, record=record), 0, None, warnings

"""Keys on the animator controls of a rig Rigify generated, so that its ORG- skeleton takes a
pose solved for it and the result stays editable.

The retarget solves on the ORG- bones (the `bone_maps` preset "rigify"); the keys go on the
controls an animator uses, with the limbs in IK: the torso (location and rotation, carrying the
hips), the FK spine's top control, neck and head (location and rotation: Rigify's neck hangs
from the FK spine's end, which the spine's tweak controls leave where they bend it, not at the
solved chest's top), the shoulders, per limb the IK control of the foot or hand (location and
rotation), the toe's IK control, and the pole (location), with each limb's IK_FK switch at IK
and its pole switched on, the pole carried by the limb's upper bone. The neck's middle bone
(ORG-spine.005) keeps Rigify's own twist, half the head's.

Each control c is paired with the ORG- bone o it carries rigidly (its pose is c's times a fixed
offset). Rigify hangs controls under helper bones driven by other controls, so a control's
parent pose depends on the keys above it; the keys are found by fixed-point passes on Blender's
own evaluation: with c_a, o_a the evaluated pose matrices at a frame and o_d the wanted one,

    basis_c <- basis_c  c_a^-1 (o_d o_a^-1) c_a,

which puts o on o_d exactly once c's parent has settled (rotation-only controls keep their
location; poles move to the wanted point). The first pass starts from each control's parent
pose computed without sweeping the frames (`_identity_pose`: up the parents and the helpers'
constraints to the solved ORG- bones and the controls placed before; Armature and world-space
Copy Rotation constraints modelled, other helpers kept at their offset from their parent in
one evaluation of Blender at the first frame), so on the rig Rigify generates one pass is
usually all: its reading is both the check and the verification. Further passes correct what
the first guess could not know (keys of the user's on helper bones); passes stop when every
paired bone is within the tolerance or after `MAX_PASSES`. The limbs' IK chains keep their
lengths (`rigid_ik_chains`, the retarget's default): with Rigify's IK stretch Blender's IK
scales the chain's bones, which moves the feet's ORG- bones off their IK controls by up to
about 0.2 mm on a nearly straight leg and the knees and elbows by centimetres.
"""

from __future__ import annotations

import bpy
import numpy as np

from ...solver.rotations import exp_map, log_map
from .. import guard, kept_values
from . import source, writing

MAX_PASSES = 4


def is_generated_rigify(obj) -> bool:
    """Whether the armature is one Rigify generated (its torso, IK feet and ORG- skeleton)."""
    bones = obj.data.bones
    return all(n in bones for n in ("torso", "ORG-spine", "foot_ik.L", "foot_ik.R", "thigh_parent.L"))


def _metarig_parent(name):
    """The parent of a metarig bone of the human metarig's spine, legs and arms (None: unknown)."""
    if name.startswith("spine.0"):
        k = int(name[len("spine."):])
        return "spine" if k == 1 else f"spine.{k - 1:03d}"
    base, _, side = name.rpartition(".")
    parent = {"pelvis": "spine", "thigh": "spine", "shin": "thigh", "foot": "shin", "toe": "foot", "heel.02": "foot",
              "shoulder": "spine.003", "breast": "spine.003", "upper_arm": "shoulder", "forearm": "upper_arm",
              "hand": "forearm"}.get(base)
    if parent is None:
        return None
    return parent if parent.startswith("spine") else f"{parent}.{side}"


def org_parents(obj):
    """{ORG bone: its parent in the metarig's hierarchy (an ORG bone) or None}: Rigify parents
    its ORG- bones to controls and helpers; the skeleton the retarget solves is the metarig's."""
    out = {}
    for bone in obj.data.bones:
        if not bone.name.startswith("ORG-"):
            continue
        parent = _metarig_parent(bone.name[4:])
        out[bone.name] = "ORG-" + parent if parent and "ORG-" + parent in obj.data.bones else None
    return out


def ik_settings_of(obj):
    """{ORG bone: the bone of Rigify's IK chain whose IK locks and limits it moves with}: the
    knees and elbows are hinges there (lock Y and Z), and the solve should keep them so."""
    out = {}
    for s in "LR":
        for org, mch in ((f"ORG-shin.{s}", f"MCH-shin_ik.{s}"), (f"ORG-forearm.{s}", f"MCH-forearm_ik.{s}")):
            if org in obj.data.bones and mch in obj.data.bones:
                out[org] = mch
    return out


HINGE_MAX = np.radians(160.0)


def rigid_ik_chains(obj):
    """Set IK Stretch to 0 on the bones of Rigify's leg and arm IK chains (the IK constraint's
    bone and its parent); returns [(bone, its previous IK Stretch)] of those changed.

    Rigify generates them with IK Stretch 0.1 and Blender's Standard IK then reaches a target
    partly by scaling the chain's bones, most where the limb is nearly straight: the knees and
    elbows of a solved pose land centimetres from where they were solved and the bones shrink by
    a few per cent. Without stretch the chain keeps its lengths and, the solve keeping the limb
    within reach, puts the joint where it was solved. Rigify's own IK Stretch slider only limits
    the reach beyond full length, so it is left as it is."""
    changed = []
    for mch in ik_settings_of(obj).values():
        pb = obj.pose.bones[mch]
        for bone in (pb, pb.parent):
            if bone is not None and bone.ik_stretch != 0.0:
                changed.append((bone.name, float(bone.ik_stretch)))
                kept_values.change(obj, bone.name, "ik_stretch", 0.0)
    return changed


def hinge_limits(obj):
    """{ORG knee or elbow: (min, max) of its X rotation from rest}: the joint bends the way its
    rest pose bends it, from straight to HINGE_MAX. Rigify's IK chain always bends toward its
    pole, on the rest bend's side: a solved hinge bent through straight to the other side would
    show turned half a turn about the limb. None where the rest pose is straight (no side)."""
    out = {}
    bones = obj.data.bones
    for org in ik_settings_of(obj):
        bone = bones[org]
        if bone.parent is None:
            continue
        rel = np.linalg.inv(np.array(bone.parent.matrix_local)) @ np.array(bone.matrix_local)
        bend = float(np.arctan2(rel[2, 1], rel[1, 1]))
        if abs(bend) < 1e-3:
            continue
        out[org] = (-bend, HINGE_MAX - bend) if bend > 0 else (-HINGE_MAX - bend, -bend)
    return out


def pairs(obj):
    """[(control, ORG bone, what it follows: "full" pose, "turn" rotation, "move" head)] the
    armature has, parents' controls first. The FK spine turns the upper chest; its tweak
    controls carry each spine bone, so the spine bends as solved."""
    out = [("torso", "ORG-spine", "full"), ("tweak_spine.001", "ORG-spine.001", "full"),
           ("tweak_spine.002", "ORG-spine.002", "full"), ("spine_fk.003", "ORG-spine.003", "turn"),
           ("tweak_spine.003", "ORG-spine.003", "move"), ("neck", "ORG-spine.004", "full"),
           ("head", "ORG-spine.006", "turn")]
    for s in "LR":
        out += [(f"foot_ik.{s}", f"ORG-foot.{s}", "full"), (f"toe_ik.{s}", f"ORG-toe.{s}", "turn"),
                (f"shoulder.{s}", f"ORG-shoulder.{s}", "turn"), (f"hand_ik.{s}", f"ORG-hand.{s}", "full")]
    bones = obj.data.bones
    return [p for p in out if p[0] in bones and p[1] in bones]


def poles(obj):
    """[(pole control, (upper, middle, lower ORG bones), limb switch bone)] the armature has."""
    out = []
    for s in "LR":
        out += [(f"thigh_ik_target.{s}", (f"ORG-thigh.{s}", f"ORG-shin.{s}", f"ORG-foot.{s}"), f"thigh_parent.{s}"),
                (f"upper_arm_ik_target.{s}", (f"ORG-upper_arm.{s}", f"ORG-forearm.{s}", f"ORG-hand.{s}"),
                 f"upper_arm_parent.{s}")]
    bones = obj.data.bones
    return [p for p in out if p[0] in bones and all(b in bones for b in p[1]) and p[2] in bones]


def needed_bones(obj):
    """The ORG- bones the keys follow: the paired ones and the limbs' joints."""
    names = {o for _, o, _ in pairs(obj)}
    for _, joints, _ in poles(obj):
        names.update(joints)
    return names


def pole_points(world, rest, pole, joints):
    """The pole point (F, 3) of a limb posed as `world` ({bone: (F, 4, 4)}): where the pole sits
    at rest, carried by the limb's upper bone. The solve keeps the middle joint a hinge about the
    upper bone's X axis (`ik_settings_of`), so the joints stay in the plane of the upper bone's
    Y and Z axes, which holds the rest pole: Rigify's pole angle then gives Blender's IK the
    solved bend plane and the upper bone's twist, a straight or overstretched limb included."""
    upper = world[joints[0]]
    return (upper @ (np.linalg.inv(rest[joints[0]]) @ rest[pole]))[:, :3, 3]


def _switch(obj, frames, bone, name, value):
    """Set a limb's custom property; where keys animate it, key it at `frames` too."""
    kept_values.change(obj, bone, name, value)
    path = f'pose.bones["{bpy.utils.escape_identifier(bone)}"]["{name}"]'
    anim = obj.animation_data
    if anim is not None and anim.action is not None:
        from ..keys import Channels
        if Channels(obj).find(path, 0) is not None:
            return [(path, 0, np.full(len(frames), float(value)), bone)]
    return []


def _rigid(M):
    """Pose matrices (..., 4, 4) with their rotation parts' columns made unit length."""
    out = M.copy()
    out[..., :3, :3] /= np.linalg.norm(M[..., :3, :3], axis=-2, keepdims=True)
    return out


def _read(obj, frames, rows):
    """Blender's pose matrices (F, len(rows), 4, 4) of the bones at `rows` at every frame."""
    scene = bpy.context.scene
    keep = (scene.frame_current, scene.frame_subframe)
    buf = np.zeros((len(obj.pose.bones), 16), dtype=np.float32)
    out = np.empty((len(frames), len(rows), 4, 4))
    try:
        with guard.suspended(), source.evaluating_only(obj):
            for i, f in enumerate(frames):
                scene.frame_set(int(np.floor(f)), subframe=float(f - np.floor(f)))
                obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones.foreach_get("matrix", buf.ravel())
                out[i] = np.swapaxes(buf[rows].reshape(-1, 4, 4), -1, -2)
    finally:
        with guard.suspended():
            scene.frame_set(keep[0], subframe=keep[1])
    return out


def _rotation_copies(bone, evaluated):
    """[(target, influence)] of the bone's constraints when each is a Copy Rotation in world
    space that replaces the whole rotation, or a Copy Scale (a no-op on the rigid poses here);
    None when any constraint is of another kind or set otherwise. Influences are read from the
    evaluated pose bone `evaluated` (Rigify drives them from its follow sliders)."""
    out = []
    for own, ev in zip(bone.constraints, evaluated.constraints):
        if own.mute or ev.influence <= 0.0:
            continue
        if own.type == "COPY_SCALE":
            continue
        if (own.type != "COPY_ROTATION" or own.owner_space != "WORLD" or own.target_space != "WORLD"
                or getattr(own, "mix_mode", "REPLACE") != "REPLACE" or not (own.use_x and own.use_y and own.use_z)
                or own.invert_x or own.invert_y or own.invert_z or not own.subtarget):
            return None
        out.append((own.subtarget, float(ev.influence)))
    return out


def _slerp(A, B, t):
    """Rotations (F, 3, 3) a fraction t of the way from A to B along the shortest arc, as
    Blender blends a constraint of influence t into the pose before it."""
    return A @ exp_map(t * log_map(np.swapaxes(A, -1, -2) @ B))


def _identity_pose(obj, name, known, rest, probe, evaluated, F):
    """The bone's pose (F, 4, 4) with an identity basis, from the poses `known` ({bone: (F, 4, 4)}:
    the solved ORG- bones, the controls placed before) up its parents and constraint targets:

    - a bone without constraints moves rigidly with its parent: P_parent R_parent^-1 R_bone
      (R the rest matrices);
    - a bone whose one Armature constraint follows one bone with full weight moves so with it;
    - Copy Rotation in world space at influence w: its rotation goes the fraction w of the way
      from the pose before it to the target's rotation (Blender's blend of influence);
    - any other constraint set: the bone keeps the offset from its parent it has in `probe`
      ({bone: (4, 4)}, Blender's evaluation at one frame), exact when its constraints' targets
      move rigidly with that parent (Rigify's spine and foot-roll helpers, its controls unkeyed)."""
    if name in known:
        return known[name]
    pb = obj.pose.bones[name]
    parent = pb.parent.name if pb.parent is not None else None

    def rigid_with_parent(local):
        if parent is None:
            return np.broadcast_to(local, (F, 4, 4)).copy()
        return _identity_pose(obj, parent, known, rest, probe, evaluated, F) @ local

    active = [c for c, ev in zip(pb.constraints, evaluated[name].constraints) if not c.mute and ev.influence > 0.0]
    if not active:
        return rigid_with_parent(np.linalg.inv(rest[parent]) @ rest[name] if parent else rest[name])
    followed = _followed(pb)
    if followed is not None and len(active) == 1 and parent is None:
        return _identity_pose(obj, followed, known, rest, probe, evaluated, F) @ (np.linalg.inv(rest[followed])
                                                                                  @ rest[name])
    copies = _rotation_copies(pb, evaluated[name])
    if copies is not None:
        out = rigid_with_parent(np.linalg.inv(rest[parent]) @ rest[name] if parent else rest[name])
        for target, influence in copies:
            R_t = _rigid(_identity_pose(obj, target, known, rest, probe, evaluated, F))[:, :3, :3]
            out[:, :3, :3] = _slerp(out[:, :3, :3], R_t, influence)
        return out
    return rigid_with_parent(np.linalg.inv(probe[parent]) @ probe[name] if parent else probe[name])


def _probe(obj, frame):
    """Blender's pose matrices {bone: (4, 4)} and evaluated pose bones at one frame."""
    names = [pb.name for pb in obj.pose.bones]
    seen = _read(obj, [frame], np.arange(len(names)))[0]
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = obj.evaluated_get(depsgraph).pose.bones
    return {n: seen[i] for i, n in enumerate(names)}, {n: evaluated[n] for n in names}


def _followed(bone):
    """The one bone an Armature constraint of `bone` follows with full weight (None: not so)."""
    for constraint in bone.constraints:
        if constraint.type != "ARMATURE" or constraint.mute or constraint.influence < 1.0:
            continue
        targets = [(t.subtarget, t.weight) for t in constraint.targets if t.weight > 0.0]
        if len(targets) == 1 and abs(targets[0][1] - 1.0) < 1e-9:
            return targets[0][0]
    return None


def _update(basis, C_a, C_d, L, local, located, moves):
    """One fixed-point step of a control's basis (F, 4, 4): its evaluated pose C_a, wanted pose
    C_d, rest offset from its parent L; `local`: its location is in its own rest frame (else in
    its parent's); `located`: the location follows C_d's head; `moves` False: rotation stays.

    The head moves by A dloc with A = rot(C_a) rot(basis)^T (own frame) or that times rot(L)^T
    (the parent's frame); the rotation by rot(C_a)^T rot(C_d) on the bone's side."""
    out = basis.copy()
    R_b = basis[:, :3, :3]
    if moves:
        turn = np.swapaxes(C_a[:, :3, :3], -1, -2) @ C_d[:, :3, :3]
        u, _, vt = np.linalg.svd(R_b @ turn)
        out[:, :3, :3] = u @ vt
    if located:
        A = C_a[:, :3, :3] @ np.swapaxes(R_b, -1, -2)
        if not local:
            A = A @ L[:3, :3].T
        out[:, :3, 3] = basis[:, :3, 3] + (np.swapaxes(A, -1, -2) @ (C_d[:, :3, 3] - C_a[:, :3, 3])[..., None])[..., 0]
    return out


def write_controls(obj, frames, wanted: dict, tolerance=2e-4, record=True, also=()):
    """Key the controls (module docstring) so that Blender poses each ORG- bone of `wanted`
    ({ORG bone: (F, 4, 4) armature-space pose matrix}; it must hold `needed_bones`) as given.
    Returns (keys written, passes, largest remaining position error of the torso's, feet's and
    hands' bones and the poles in armature units, their largest rotation matrix entry error,
    Blender's pose matrices (F, len(also), 4, 4) of the bones `also` as the final keys give them:
    the last pass reads after the last keys, so that reading is Blender's evaluation of them)."""
    frames = np.asarray(frames, float)
    F = len(frames)
    bones = obj.data.bones
    rest = {b.name: np.array(b.matrix_local) for b in bones}
    pair_list, pole_list = pairs(obj), poles(obj)
    switches = []
    for _, _, limb in pole_list:
        switches += _switch(obj, frames, limb, "IK_FK", 0.0)
        switches += _switch(obj, frames, limb, "pole_vector", True)
    # Wanted control poses: each paired control where it sits relative to its bone at rest.
    goal = {c: wanted[o] @ (np.linalg.inv(rest[o]) @ rest[c]) for c, o, _ in pair_list}
    for pole, joints, _ in pole_list:
        G = np.broadcast_to(rest[pole], (F, 4, 4)).copy()
        G[:, :3, 3] = pole_points(wanted, rest, pole, joints)
        goal[pole] = G
    located = {c for c, _, how in pair_list if how != "turn"} | {p for p, _, _ in pole_list}
    turning = {c for c, _, how in pair_list if how != "move"}
    controls = list(goal)
    offset = {c: (np.linalg.inv(rest[bones[c].parent.name]) @ rest[c] if bones[c].parent else rest[c])
              for c in controls}
    local = {c: bones[c].use_local_location for c in controls}
    start = np.broadcast_to(np.eye(4), (F, 4, 4))
    known = dict(wanted)
    if "root" in bones:
        known.setdefault("root", np.broadcast_to(rest["root"], (F, 4, 4)))   # Rigify's root stays (not keyed here)
    probe, evaluated = _probe(obj, frames[0])
    bases = {}
    for c in controls:                                    # parents' controls first
        guess = _identity_pose(obj, c, known, rest, probe, evaluated, F)
        bases[c] = _update(start, guess, goal[c], offset[c], local[c], c in located, c in turning)
        if c in located and c in turning:
            known[c] = goal[c]
        elif local[c]:
            known[c] = guess @ bases[c]
    # A pole whose helper follows a solved bone is placed exactly by its first guess once that bone
    # is where it was solved; correcting it from a bone not settled yet would only move it away.
    corrected_poles = [p for p, _, _ in pole_list if _followed(obj.pose.bones[p].parent or obj.pose.bones[p])
                       not in wanted]
    index = {pb.name: i for i, pb in enumerate(obj.pose.bones)}
    orgs = [o for _, o, _ in pair_list]
    rows = np.array([index[n] for n in controls + orgs + list(also)], dtype=int)
    written, passes = 0, 0
    pos_err = rot_err = np.inf
    for passes in range(1, MAX_PASSES + 1):
        written = writing.write(obj, frames, writing.plan(obj, bases, located, switches), record=record)
        switches = []
        seen = _read(obj, frames, rows)
        # Rigid parts only: an IK chain that stretches scales its bones, which no control follows.
        C = {c: _rigid(seen[:, i]) for i, c in enumerate(controls)}
        org_pose = {o: _rigid(seen[:, len(controls) + i]) for i, o in enumerate(orgs)}
        # The torso, feet and hands (and the poles) settle exactly; the spine between hips and
        # chest follows Rigify's own interpolation, so the rotation-only controls are not waited for.
        pos_err = max([np.abs(org_pose[o][:, :3, 3] - wanted[o][:, :3, 3]).max() for _, o, how in pair_list if how != "turn"]
                      + [np.abs(C[p][:, :3, 3] - goal[p][:, :3, 3]).max() for p in corrected_poles])
        rot_err = max(np.abs(org_pose[o][:, :3, :3] - wanted[o][:, :3, :3]).max() for _, o, how in pair_list if how == "full")
        if pos_err <= tolerance and rot_err <= tolerance:
            break
        if passes == MAX_PASSES:
            break
        for c, o, _ in pair_list:
            C_d = wanted[o] @ np.linalg.inv(org_pose[o]) @ C[c]
            bases[c] = _update(bases[c], C[c], C_d, offset[c], local[c], c in located, c in turning)
        for p in corrected_poles:
            bases[p] = _update(bases[p], C[p], goal[p], offset[p], local[p], True, False)
    return written, passes, float(pos_err), float(rot_err), seen[:, len(controls) + len(orgs):]

"""Import OpenSim files into Blender: an .osim model as an armature with its markers, a marker
trial (.trc or .c3d, one Trial structure: solver.opensim.read_trial) as animated marker empties.

Spaces. OpenSim's ground is Y-up, Blender's world Z-up. Everything an import makes keeps
OpenSim's ground in its own object space, and the object's world matrix turns it upright
(`LAB_TO_BLENDER`, a +90 degree rotation about X: OpenSim (x, y, z) shows at Blender (x, -z, y);
`y_up=False` leaves it out). Lengths inside are scene units: u = 1 / scene.unit_settings.scale_length
units per metre (1 by default), recorded on the object as ``units_per_metre``.

Model. One bone per body (the ground is the armature object itself), parented as the joints
connect the bodies, in the model's default pose (``body_frames(default coordinates)``):

    head  at the body origin,
    tail  toward the child body's origin (a body with several children: the child farthest
          along the body's own +Y, which in OpenSim's convention runs up the segment, so the
          pelvis points at the lumbar joint); a body without a child points at the centroid of
          its markers, else at its centre of mass, else 5 cm along its +Y; at least 1 cm long,
    roll  so that the bone's Z axis is the body's Z axis made perpendicular to the bone (OpenSim
          models flex about body Z, so flexion stays a rotation about bone Z); when body Z runs
          along the bone, the bone's X follows body X instead.

So the bone's rest matrix (``Bone.matrix_local``, armature space) is the body frame up to a fixed
rotation C_b of the bone's own:

    matrix_local_b = U(W_b(q_default)) @ C_b,      U(X): X with its translation times u,

and a posed bone shows its body exactly when its pose matrix is U(W_b(q)) @ C_b
(`solve` bakes that; C_b is computed from the bone's rest matrix whenever it is needed, so
a bone the user moves in edit mode stays rigidly on its body). The armature object keeps the .osim
path and the body <-> bone names (``itasc_opensim.bodies``).

Model markers are empties parented to their body's bone (Blender parents to the bone's tail,
which the empty's location accounts for), so they move with the skeleton and sit next to the
measured markers the way OpenSim's GUI shows both. Markers fixed in the ground hang from the
armature object.

Trial. A .c3d file reads through the `c3d` package (a wheel the extension bundles), in metres
from its POINT:UNITS, with an invalid sample (negative residual) as a missing marker; C3D labs
are mostly Z-up, so such a trial is usually imported with y_up=False. A root empty (the lab frame, named after the file) with one child empty per marker, its
location keyed in bulk at every sample where the marker is present (metres -> scene units, linear
interpolation). Sample i lands on frame start + (n_i - n_0) / rate * fps with n its frame number
in the file, rate the data rate and fps the scene's (by time, t_i - t_0, when the frame numbers
disagree with the time column); start is the file's first frame number, so with the scene at the
data rate (`adjust_scene`, default) Blender frames are the file's frame numbers. The trial keeps
each sample's time from the file for the .mot. A marker missing at a sample has no key there and is hidden
(``hide_viewport`` keyed, constant) while it is missing.
"""

from __future__ import annotations

from pathlib import Path

import bpy
import numpy as np
from mathutils import Matrix

from ...solver.opensim import load_osim, read_trial
from .. import keys

LAB_TO_BLENDER = np.array([[1.0, 0.0, 0.0, 0.0],
                           [0.0, 0.0, -1.0, 0.0],
                           [0.0, 1.0, 0.0, 0.0],
                           [0.0, 0.0, 0.0, 1.0]])
MIN_BONE = 0.01          # metres
FALLBACK_BONE = 0.05     # metres, along +Y, for a body with no child, marker or offset centre of mass
MODEL_MARKER_COLOR = (1.0, 0.35, 0.7, 1.0)
MEASURED_MARKER_COLOR = (0.25, 0.55, 1.0, 1.0)


def units_per_metre(scene) -> float:
    """Scene units per metre: 1 / unit scale (1 when the unit system is None)."""
    units = scene.unit_settings
    if units.system == "NONE" or units.scale_length <= 0:
        return 1.0
    return 1.0 / units.scale_length


def scaled(X, u):
    """U(X): a rigid transform (..., 4, 4) with its translation times u."""
    out = np.array(X, dtype=float, copy=True)
    out[..., :3, 3] *= u
    return out


def _enum_value(identifier):
    return bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items[identifier].value


def _set_interpolation(fc, identifier):
    n = len(fc.keyframe_points)
    fc.keyframe_points.foreach_set("interpolation", np.full(n, _enum_value(identifier), dtype=np.int32))


def _new_collection(context, name):
    parent = context.collection if context.collection is not None else context.scene.collection
    collection = bpy.data.collections.new(name)
    parent.children.link(collection)
    return collection


def _empty(name, collection, display, size, color):
    obj = bpy.data.objects.new(name, None)
    obj.empty_display_type = display
    obj.empty_display_size = size
    obj.color = color
    collection.objects.link(obj)
    return obj


# ------------------------------------------------------------------------------------- model

def bone_layout(om):
    """Per body (segment order, ground left out): (segment, parent segment, head, tail, axes) in
    metres and OpenSim ground, at the default pose; `axes` (3, 3) has the bone's X, Y, Z as
    columns (module docstring). The massless segment of a joint split at a pivot (a
    ScapulothoracicJoint's winging axis off its origin) is no body: its child hangs from the
    body above it."""
    q0 = om.coupling.default_coordinates(1)
    W0 = om.body_frames(q0)[0]
    S = len(om.model.names)
    bodies = {b.name for b in om.source.bodies}
    parent = om.model.parent.copy()
    for s in range(S):                       # a massless segment of a split joint is not a bone
        while parent[s] > 0 and om.model.names[parent[s]] not in bodies:
            parent[s] = om.model.parent[parent[s]]
    marker_points = om.marker_positions(q0)[0] if len(om.markers.names) else np.zeros((0, 3))
    out = []
    for s in range(1, S):
        if om.model.names[s] not in bodies:
            continue
        origin, R = W0[s, :3, 3], W0[s, :3, :3]
        ends = [W0[c, :3, 3] for c in range(S) if parent[c] == s and np.linalg.norm(W0[c, :3, 3] - origin) > 1e-3]
        if ends:
            tail = max(ends, key=lambda p: float((p - origin) @ R[:, 1]))
        else:
            candidates = []
            own = marker_points[om.markers.segments == s]
            if len(own):
                candidates.append(own.mean(axis=0))
            body = om.source.body(om.model.names[s])
            candidates.append(W0[s] @ np.append(body.mass_center, 1.0))
            tail = next((p[:3] for p in candidates if np.linalg.norm(p[:3] - origin) > MIN_BONE),
                        origin + FALLBACK_BONE * R[:, 1])
        direction = tail - origin
        length = max(float(np.linalg.norm(direction)), MIN_BONE)
        y = direction / np.linalg.norm(direction)
        z = R[:, 2] - (R[:, 2] @ y) * y
        if np.linalg.norm(z) > 0.3:
            z /= np.linalg.norm(z)
            x = np.cross(y, z)
        else:
            x = R[:, 0] - (R[:, 0] @ y) * y
            x /= np.linalg.norm(x)
            z = np.cross(x, y)
        out.append((s, int(parent[s]), origin.copy(), origin + length * y, np.column_stack([x, y, z])))
    return out


def import_model(context, path, *, y_up=True, marker_size=0.012):
    """Make an armature of the .osim model at `path` (module docstring); returns the object,
    active and selected, in object mode. Raises OpenSimFileError on a file the reader rejects."""
    path = Path(bpy.path.abspath(str(path))).resolve()
    om = load_osim(path)
    scene = context.scene
    name = om.source.name or path.stem
    collection = _new_collection(context, name)
    armature = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, armature)
    collection.objects.link(obj)
    obj.matrix_world = Matrix((LAB_TO_BLENDER if y_up else np.eye(4)).tolist())
    obj.show_in_front = True
    obj.itasc_opensim.kind = "MODEL"
    obj.itasc_opensim["units_per_metre"] = units_per_metre(scene)
    build_model(context, obj, om, path, _new_collection(context, f"{name} markers"), marker_size)
    return obj


def build_model(context, obj, om, path, markers, marker_size):
    """Fill the armature `obj` with the bones and model-marker empties (linked to the collection
    `markers`) of `om`, read from the .osim at `path`, in the object's units per metre; `obj`
    ends active and selected, in object mode."""
    armature = obj.data
    u = obj.itasc_opensim.get("units_per_metre", 1.0)
    if context.view_layer.objects.active is not None and context.view_layer.objects.active.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    for other in context.view_layer.objects:
        other.select_set(False)
    context.view_layer.objects.active = obj
    obj.select_set(True)

    layout = bone_layout(om)
    names = om.model.names
    bone_of = {}
    bpy.ops.object.mode_set(mode="EDIT")
    try:
        for s, parent, head, tail, axes in layout:
            eb = armature.edit_bones.new(names[s])
            eb.head = tuple(u * head)
            eb.tail = tuple(u * tail)
            M = np.eye(4)
            M[:3, :3], M[:3, 3] = axes, u * head
            eb.matrix = Matrix(M.tolist())          # keeps the length set by head and tail
            eb.use_connect = False
            bone_of[s] = eb.name
        for s, parent, *_ in layout:
            if parent > 0:
                armature.edit_bones[bone_of[s]].parent = armature.edit_bones[bone_of[parent]]
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")

    settings = obj.itasc_opensim
    settings.source = str(path)
    settings.bodies.clear()
    for s in sorted(bone_of):
        item = settings.bodies.add()
        item.body, item.bone = names[s], bone_of[s]

    # Model markers, parented to their bones: local = (rest_b @ T(0, L, 0))^-1 @ (u x).
    positions = om.marker_positions(om.coupling.default_coordinates(1))[0] if len(om.markers.names) else []
    for marker, x, s in zip(om.source.markers, positions, om.markers.segments):
        empty = _empty(f"{marker.name} (model)", markers, "SPHERE", marker_size * u, MODEL_MARKER_COLOR)
        empty.parent = obj
        point = np.append(u * x, 1.0)
        if s > 0:
            bone = armature.bones[bone_of[int(s)]]
            at_tail = np.array(bone.matrix_local, dtype=float)
            at_tail[:3, 3] += at_tail[:3, 1] * bone.length
            empty.parent_type = "BONE"
            empty.parent_bone = bone.name
            point = np.linalg.solve(at_tail, point)
        empty.location = tuple(point[:3])
        empty.itasc_opensim.kind = "MODEL_MARKER"
        empty.itasc_opensim.marker = marker.name
        empty.itasc_opensim.body = marker.body


def rebuild_model(context, obj, path):
    """Rebuild the model armature `obj` from the .osim at `path` (a scaled model of the same
    bodies): its bones and model markers replaced, the object, its place, its trial and its
    settings kept. The model-marker empties go to the collection the old ones were in (a new
    one when there were none); their display size is kept."""
    path = Path(bpy.path.abspath(str(path))).resolve()
    om = load_osim(path)
    old = [c for c in obj.children if c.itasc_opensim.kind == "MODEL_MARKER"]
    u = obj.itasc_opensim.get("units_per_metre", 1.0)
    size = old[0].empty_display_size / u if old else 0.012
    markers = old[0].users_collection[0] if old and old[0].users_collection else \
        _new_collection(context, f"{obj.name} markers")
    for child in old:
        bpy.data.objects.remove(child, do_unlink=True)
    if context.view_layer.objects.active is not None and context.view_layer.objects.active.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    try:
        for eb in list(obj.data.edit_bones):
            obj.data.edit_bones.remove(eb)
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")
    for pb in obj.pose.bones:
        pb.matrix_basis.identity()
    build_model(context, obj, om, path, markers, size)
    return om


# ------------------------------------------------------------------------------------- trial

def match_frame_rate(scene, rate):
    """Set the scene's frame rate to `rate` (fps up to 120, fps_base for the rest)."""
    fps = int(min(max(round(rate), 1), 120))
    scene.render.fps = fps
    scene.render.fps_base = fps / float(rate)


def sample_frames(data, first_frame, fps):
    """Blender frames of a trial's samples: first_frame + (time since the first sample) * fps.
    The time since the first sample is (n_i - n_0) / data rate from the frame numbers n when they
    agree with the time column within half a sample (files round their times, e.g. 0.417 for
    0.41667), else t_i - t_0. Whole numbers where within 1e-6 of one."""
    time = np.asarray(data.time, float) - data.time[0]
    counted = (np.asarray(data.frame_numbers, float) - data.frame_numbers[0]) / data.data_rate
    if np.all(np.abs(counted - time) < 0.5 / data.data_rate):
        time = counted
    frames = first_frame + time * fps
    whole = np.round(frames)
    return np.where(np.abs(frames - whole) < 1e-6, whole, frames)


def _key_marker(obj, frames, positions):
    """Key a marker empty's location at the samples where it is present (positions (F, 3) in
    scene units, NaN where missing) and its viewport visibility where that changes."""
    present = np.all(np.isfinite(positions), axis=1)
    first, last = float(frames[0]), float(frames[-1])
    if present.any():
        obj.location = tuple(positions[np.argmax(present)])
    if present.all() or not present.any():
        obj.hide_viewport = not present.any()
        if not present.any():
            return
    channels = keys.Channels(obj, create=True)
    for axis in range(3):
        fc = channels.ensure("location", axis, "Object Transforms")
        keys.replace_keys(fc, frames[present], positions[present, axis], first, last)
        _set_interpolation(fc, "LINEAR")
    if not present.all():
        hidden = ~present
        change = np.flatnonzero(np.r_[True, hidden[1:] != hidden[:-1]])
        fc = channels.ensure("hide_viewport", 0, "Visibility")
        keys.replace_keys(fc, frames[change], hidden[change].astype(float), first, last)
        _set_interpolation(fc, "CONSTANT")


def import_trial(context, path, *, y_up=True, adjust_scene=True, first_frame=None, model=None, marker_size=0.01):
    """Make animated marker empties of the .trc or .c3d file at `path` (module docstring); returns the
    root empty. `adjust_scene`: set the scene's frame rate to the data rate and its frame range
    to the trial. `first_frame`: the frame of the first sample (None: its frame number in the
    file). `model`: an OpenSim model armature to bind the trial to."""
    path = Path(bpy.path.abspath(str(path))).resolve()
    data = read_trial(path)
    scene = context.scene
    if not data.n_frames:
        raise ValueError(f"{path.name} has no samples")
    if adjust_scene:
        match_frame_rate(scene, data.data_rate)
    fps = scene.render.fps / scene.render.fps_base
    start = int(data.frame_numbers[0]) if first_frame is None else first_frame
    frames = sample_frames(data, start, fps)
    if adjust_scene:
        scene.frame_start = max(0, int(np.floor(frames[0])))
        scene.frame_end = max(scene.frame_start, int(np.ceil(frames[-1])))
    u = units_per_metre(scene)

    collection = _new_collection(context, path.stem)
    root = _empty(path.stem, collection, "ARROWS", 0.1 * u, (1.0, 1.0, 1.0, 1.0))
    root.matrix_world = Matrix((LAB_TO_BLENDER if y_up else np.eye(4)).tolist())
    settings = root.itasc_opensim
    settings.kind = "TRIAL"
    settings.source = str(path)
    settings.data_rate = data.data_rate
    settings["units_per_metre"] = u
    settings["time"] = data.time.astype(float)
    settings["frames"] = frames.astype(float)
    settings["markers"] = list(data.names)
    for m, name in enumerate(data.names):
        empty = _empty(name, collection, "SPHERE", marker_size * u, MEASURED_MARKER_COLOR)
        empty.parent = root
        empty.itasc_opensim.kind = "MARKER"
        empty.itasc_opensim.marker = name
        _key_marker(empty, frames, data.positions[:, m] * u)
    if model is not None:
        model.itasc_opensim.trial = root
    return root

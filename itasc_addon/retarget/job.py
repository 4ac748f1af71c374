"""One retarget of a source armature's motion onto a target armature: `prepare` reads and checks
(nothing changes), the `Job` it returns does the work in steps (`steps()`, a generator: progress
and Esc for the operator; `run()` for scripts), measured by Blender's evaluation of what it wrote.

Data flows one way: the bone maps (`bone_maps`, `auto_map`) -> the source's bones as Blender
evaluates them at every frame (`source`), in the target armature's space -> the engine's
`Source` and `Target` (the target's mapped bones and those between them, with their IK locks and
limits) -> the engine's batched solve (`solver.retarget.retarget`: soft style and effector
tasks, hard contact pins, floor and limits) -> keys (`writing`; on a rig Rigify generated, its
animator controls, `rigify_controls`) -> Blender's evaluation of every written frame -> the
result: per contact point and frame the distance from its pin (`position_error`), per span the
foot slide, floor penetration, per role the style difference, all from what Blender shows.

`method="copy"` writes the copy-rotation retarget the usual tools do instead (`copy_rotations`),
through the same steps, measured the same way (its contacts: the caller's, e.g. another result's, or detected
on the source's feet).

Nothing is written before every check passed: bad input raises `RigError` with what to change.
"""

from __future__ import annotations

import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import bpy
import numpy as np

from ...solver import retarget as engine
from ...solver.retarget.roles import mapped_parent
from ...solver.retarget.skeletons import rest_ground
from ...solver.runtime.blas_threads import one_blas_thread
from .. import keys, solving
from ..rig import RigError
from . import auto_map, bone_maps, copy_rotations, posed_keys, rigify_controls, source, target

CHUNK = 48          # frames read per step


@dataclass
class MeasuredRetarget:
    """What a retarget did, measured on Blender's evaluation of the keys it wrote.

    Per frame (F) and contact point (P): `position_error` the contact point's distance from its
    pin (scene units; NaN where no span holds it; for the copy method, from where the span
    started), `floor_penetration` how far below the floor it is (0 above; the contact points are
    each foot's heel, ball and toe tip). The floor: `floor` its world height below the source's
    hips at the calibration frame, `floor_normal` (3,) its world normal, `floor_slope` its angle
    to level (radians), `source_floor` the clip's own floor height there before it was put on the
    target's rest ground (scene units, the source's scale), all fitted to the source's contacts
    (a level floor at the rig's rest ground for the copy method). Per frame and mapped
    role (R, `roles`): `rotation_error`, the angle between the bone's world rotation as Blender
    shows it and as the solve posed it (radians). `iterations`, `converged` (F,): the engine's
    iterations; converged where the engine converged and Blender shows every held point within
    `precision` of its pin and none below the floor by more. `contacts` {point: [(first, last)
    scene frame]}, `foot_slide` {point: (spans,)} the largest distance of the point from its
    position at the span's first frame, `pin_distance` {point: (spans,)} from its pin.
    `style_difference` {role: radians}: mean angle between the calibrated source's and the
    target's local rotations (relative to the nearest mapped ancestor role; world for the hips),
    as Blender shows the target. `seconds` the whole retarget; `solve_seconds`, `write_seconds`,
    `verify_seconds` its parts; `point_positions` (F, P, 3) the contact points in world space as
    Blender shows them; `engine` the engine's own result (None for the copy method)."""

    frames: np.ndarray
    position_error: np.ndarray
    rotation_error: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    seconds: float
    contacts: dict = field(default_factory=dict)
    foot_slide: dict = field(default_factory=dict)
    pin_distance: dict = field(default_factory=dict)
    floor_penetration: np.ndarray | None = None
    floor: float = 0.0
    floor_normal: np.ndarray | None = None
    floor_slope: float = 0.0
    source_floor: float = 0.0
    style_difference: dict = field(default_factory=dict)
    points: list = field(default_factory=list)
    roles: list = field(default_factory=list)
    bone_map: dict = field(default_factory=dict)
    method: str = "ik"
    scale: float = 1.0
    keys_written: int = 0
    warnings: list = field(default_factory=list)
    precision: float = 1e-4
    solve_seconds: float = 0.0
    write_seconds: float = 0.0
    verify_seconds: float = 0.0
    read_seconds: float = 0.0
    control_passes: int = 0
    point_positions: np.ndarray | None = None
    engine: object = None
    layer_action: str = ""      # with `layer`: the new action the keys went into, over the rig's animation

    @property
    def not_converged(self) -> int:
        return int(np.count_nonzero(~self.converged))

    def spans(self):
        """[(point, first frame, last frame, foot slide)] every span, in order."""
        return [(p, a, b, float(s)) for p in self.contacts for (a, b), s in zip(self.contacts[p], self.foot_slide[p])]

    def summary(self) -> str:
        slides = [s for *_, s in self.spans()]
        worst = max(slides) if slides else 0.0
        return (f"{self.method}: {len(self.frames)} frame(s), {len(slides)} contact span(s), foot slide max "
                f"{worst:.3g}, {self.not_converged} not converged (as Blender shows it), {self.seconds:.2f} s\n"
                f"floor at {self.floor:.4g} (the clip's own at {self.source_floor:.4g}), slope "
                f"{np.degrees(self.floor_slope):.2f} deg; heels, balls and toe tips at most "
                f"{float(np.max(self.floor_penetration, initial=0.0)):.3g} below it")


def _armature(obj, what):
    if isinstance(obj, str):
        obj = bpy.data.objects.get(obj)
    if obj is None or getattr(obj, "type", None) != "ARMATURE":
        raise RigError(f"the {what} must be an armature object")
    return obj


def split_map(rig, src, bone_map):
    """(source map, target map, notes): the maps {role: bone} from `bone_map` {role: (source
    bone, target bone)} or, where None, each armature's automatic map by names and skeleton
    (`auto_map.auto_pairs`, whose notes on what stayed ambiguous come back); roles the other
    side does not map are dropped from both."""
    notes = []
    if bone_map is None:
        pairs, notes = auto_map.auto_pairs(src, rig)
        s_map = {r: s for r, (s, _) in pairs.items() if s}
        t_map = {r: t for r, (_, t) in pairs.items() if t}
    else:
        s_map, t_map = {}, {}
        for role, pair in dict(bone_map).items():
            if role not in bone_maps.ROLES:
                raise RigError(f"unknown role {role!r} in the bone map; roles: {', '.join(bone_maps.ROLES)}")
            s, t = pair
            if s:
                s_map[role] = s
            if t:
                t_map[role] = t
    both = [r for r in bone_maps.ROLES if r in s_map and r in t_map]
    missing = [r for r in bone_maps.REQUIRED if r not in both]
    if missing:
        detail = "; ".join(f"{r}: source {s_map.get(r) or '-'}, target {t_map.get(r) or '-'}" for r in missing)
        raise RigError(f"the bone map leaves required role(s) unmapped ({detail}); hips and both legs down to "
                       "the feet are needed on both armatures (a target without legs cannot hold contacts); "
                       "map them in the panel's bone map or pass bone_map; nothing was written")
    for obj, mapping, what in ((src, s_map, "source"), (rig, t_map, "target")):
        absent = [f"{r}: {mapping[r]}" for r in both if mapping[r] not in obj.data.bones]
        if absent:
            raise RigError(f"the bone map names bones the {what} '{obj.name}' does not have ({', '.join(absent)}); "
                           "nothing was written")
    return {r: s_map[r] for r in both}, {r: t_map[r] for r in both}, notes


def _angle(A, B):
    """Angle (...) between rotations A and B (..., 3, 3)."""
    c = (np.trace(np.swapaxes(A, -1, -2) @ B, axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.arccos(np.clip(c, -1.0, 1.0))


def _unit_axes(M):
    R = M[..., :3, :3]
    return R / np.linalg.norm(R, axis=-2, keepdims=True)


def prepare(rig, source_obj, frame_start=None, frame_end=None, *, bone_map=None, contacts="auto",
            calibration_frame=None, method="ik", precision=1e-4, blend_frames=None, weights=None, detection=None,
            settings=None, record=True, rigid_limbs=True, layer=False) -> Job:
    """Everything a retarget of `source_obj` onto `rig` at `frames` (scene frames, the source's keys'
    frames by default) needs, read and checked: the armatures, the frames, the bone maps, the
    target the engine solves and its contact points, the contacts given. Bad input raises
    RigError here, with nothing changed. See the module docstring and `api.retarget`."""
    started = time.perf_counter()
    rig, src = _armature(rig, "target"), _armature(source_obj, "source")
    if rig == src:
        raise RigError("the source and the target are the same armature")
    if method not in ("ik", "copy"):
        raise RigError(f"method must be 'ik' (contacts held) or 'copy' (rotations copied), not {method!r}")
    solving.check_writable(rig)
    first, last = source.action_range(src)
    a = first if frame_start is None else int(frame_start)
    b = last if frame_end is None else int(frame_end)
    if b < a:
        raise RigError(f"frame_end {b} comes before frame_start {a}: a source with zero frames; nothing was written")
    frames = np.arange(max(a, first), min(b, last) + 1, dtype=float)
    if frames.size == 0:
        raise RigError(f"frames {a}-{b} hold none of the source's frames ({first}-{last}); nothing was written")
    if frames.size < 2:
        raise RigError("the source has fewer than two frames in the range; nothing to retarget")
    keys.action_frames(rig, frames)          # frames the action cannot play at (NLA tweak mode) are refused
    anim = rig.animation_data
    if layer and anim is not None and anim.use_tweak_mode:
        raise RigError("the target's NLA is in tweak mode: leave it (Tab in the NLA editor) to write the retarget "
                       "as a layer; nothing was written")
    s_map, t_map, map_notes = split_map(rig, src, bone_map)
    roles = list(s_map)
    source.check_channels(src, [s_map[r] for r in roles], located=(s_map["hips"],))
    calib = frames[0] if calibration_frame is None else float(calibration_frame)
    if calib not in frames:
        raise RigError(f"calibration frame {calib:g} is not a frame of the retarget ({frames[0]:g}-{frames[-1]:g})")
    bone_names, parents, rig_target = target.rig_target(rig, t_map)
    try:
        rig_target.check()
        points = list(rig_target.points())
    except ValueError as err:
        raise RigError(f"target '{rig.name}': {err}; nothing was written") from None
    render = bpy.context.scene.render
    options = {} if blend_frames is None else {"blend_frames": int(blend_frames)}
    for name, value in (("weights", weights), ("detection", detection), ("settings", settings)):
        if value is not None:
            options[name] = value
    return Job(rig=rig, src=src, frames=frames, method=method, precision=float(precision), record=record,
               layer=bool(layer), rigid_limbs=bool(rigid_limbs), s_map=s_map, t_map=t_map, roles=roles,
               calibration=int(np.flatnonzero(frames == calib)[0]), rigify=rigify_controls.is_generated_rigify(rig),
               bone_names=bone_names, parents=parents, target=rig_target, points=points,
               floor=rest_ground(rig_target.bones), fps=render.fps / render.fps_base,
               contacts_in=_contact_spans(contacts, points, frames), options=options,
               warnings=[f"bone map: {n}" for n in map_notes], started=started)


def _contact_spans(contacts, points, frames):
    """The contacts as given: "auto", None, or {point: [engine.Span]} (frames from the first)."""
    if contacts is None or (isinstance(contacts, str) and contacts == "auto"):
        return contacts
    if isinstance(contacts, str):
        raise RigError(f"contacts must be 'auto', None or {{point: [(first, last) frame]}}, not {contacts!r}")
    names = [p.name for p in points]
    out = {}
    f0, f1 = int(frames[0]), int(frames[-1])
    for point, spans in dict(contacts).items():
        if point not in names:
            raise RigError(f"contact point {point!r} is not one of the target's ({', '.join(names)})")
        out[point] = []
        for span in spans:
            a, b = (span.start + f0, span.end + f0) if isinstance(span, engine.Span) else span
            if not (f0 <= a <= b <= f1):
                raise RigError(f"contact span {a}-{b} of {point} is not within frames {f0}-{f1}")
            out[point].append(engine.Span(int(a) - f0, int(b) - f0))
    return out


@dataclass(eq=False, repr=False)
class Job:
    """A prepared retarget (`prepare`); `steps()` does it, `result` is its MeasuredRetarget."""

    rig: object
    src: object
    frames: np.ndarray
    method: str
    precision: float
    record: bool
    layer: bool
    rigid_limbs: bool
    s_map: dict                     # {role: source bone}
    t_map: dict                     # {role: target bone}
    roles: list
    calibration: int                # the calibration frame's index
    rigify: bool                    # the target is a rig Rigify generated (keys on its controls)
    bone_names: list                # the target's bones the solve poses
    parents: dict
    target: object                  # the engine's Target
    points: list                    # its contact points
    floor: float                    # the target's rest ground
    fps: float
    contacts_in: object             # "auto", None or {point: [Span]}
    options: dict                   # the engine's retarget options
    warnings: list
    started: float
    done: int = field(default=0, init=False)            # progress, of `total`
    written: bool = field(default=False, init=False)    # the keys are written
    layer_action: str | None = field(default=None, init=False)
    pieces: list = field(default_factory=list, init=False)  # the source read, chunk by chunk
    seen: list = field(default_factory=list, init=False)    # Blender's evaluation of the keys, chunk by chunk
    result: MeasuredRetarget | None = field(default=None, init=False)
    times: dict = field(default_factory=lambda: {"read": 0.0, "solve": 0.0, "write": 0.0, "verify": 0.0},
                        init=False)
    _isolation: ExitStack | None = field(default=None, init=False)

    def _isolate(self, obj):
        """Keep the rest of the scene from being evaluated while `obj` is read over several steps
        (`source.evaluating_only`), until `_release`."""
        if self._isolation is None:
            self._isolation = ExitStack()
            self._isolation.enter_context(source.evaluating_only(obj))

    def _release(self):
        if self._isolation is not None:
            isolation, self._isolation = self._isolation, None
            isolation.close()

    # --- steps -------------------------------------------------------------------------------

    @property
    def total(self):
        """Progress units: each frame read, the solve, each frame written, each frame read back
        from Blender's evaluation, the measurement."""
        return 3 * len(self.frames) + 2

    def steps(self):
        """Read the source, solve, write, read Blender's evaluation of the keys: a generator
        yielding `done` after each piece of work (the modal operator's progress)."""
        try:
            yield from self._steps()
        finally:
            self._release()

    def _steps(self):
        F = len(self.frames)
        for a in range(0, F, CHUNK):
            chunk = self.frames[a:a + CHUNK]
            with self._timed("read"):
                self._isolate(self.src)
                self.pieces.append(source.read_motion(self.src, [self.s_map[r] for r in self.roles], chunk,
                                                      isolate=False))
            self.done += len(chunk)
            yield self.done
        self._release()
        with self._timed("solve"):
            self._solve()
        self.done += 1
        yield self.done
        with self._timed("write"):
            self._write()
        self.done += F
        yield self.done
        read = 0
        while read < F:
            with self._timed("verify"):
                stop = F if self.rigify else min(read + CHUNK, F)   # Rigify: the control passes' last reading
                if not self.rigify:
                    self._isolate(self.rig)
                    self.seen.append(source.read_motion(self.rig, self.bone_names, self.frames[read:stop],
                                                        isolate=False).world)
                if stop == F:
                    self._release()
            self.done += stop - read
            read = stop
            yield self.done
        with self._timed("verify"):
            self.result = self._measure()
        self.done += 1
        yield self.done

    @contextmanager
    def _timed(self, part):
        started = time.perf_counter()
        yield
        self.times[part] += time.perf_counter() - started

    @one_blas_thread()
    def run(self):
        for _ in self.steps():
            pass
        return self.result

    def cancel(self):
        """Stop (Esc). Before the keys are written nothing was written: None. Once written they stay."""
        self._release()
        if not self.written:
            return None
        return "Cancelled while checking Blender's evaluation: the keys are written, the result is not measured"

    # --- the work ----------------------------------------------------------------------------

    def _source(self):
        """The engine's Source: the source bones' world motion in the target armature's space."""
        world = np.concatenate([p.world for p in self.pieces])
        self.source_world = world
        to_target = np.linalg.inv(np.array(self.rig.matrix_world))
        M = to_target @ world
        R = _unit_axes(M)
        u, _, vt = np.linalg.svd(R)
        R = u @ vt
        self.motion = source.Motion(self.frames, [self.s_map[r] for r in self.roles], world,
                                    self.pieces[0].rest, self.pieces[0].lengths)
        return engine.Source(rotations={r: R[:, i] for i, r in enumerate(self.roles)},
                             heads={r: M[:, i, :3, 3] for i, r in enumerate(self.roles)}, fps=self.fps)

    def _solve(self):
        src = self._source()
        try:
            src.check()
            if self.method == "ik":
                self.engine_result = engine.retarget(src, self.target, contacts=self.contacts_in,
                                                     calibration_frame=self.calibration, floor=self.floor,
                                                     **self.options)
                self.contacts = self.engine_result.contacts
                self.calib = self.engine_result.calibration
                if self.calib.turn:
                    self.warnings.append(f"the source faces {abs(np.degrees(self.calib.turn)):.0f} degrees away from "
                                         "the target's rest facing at the calibration frame; the target was turned "
                                         "to face where it does")
                self.posed = self.engine_result.world                    # (F, B, 4, 4) armature space
            else:
                self.engine_result = None
                self.calib = engine.calibrate(src, self.target, self.calibration)
                self.posed = self._copy_poses()
                self.contacts = self._copy_contacts(src)
        except ValueError as err:
            raise RigError(f"retarget of '{self.src.name}' onto '{self.rig.name}': {err}; nothing was written") from None
        if not np.all(np.isfinite(self.posed)):
            raise RigError("the retarget produced non-finite poses; nothing was written")
        self.engine_source = src

    def _copy_poses(self):
        """Pose matrices (F, B, 4, 4) in armature space of the copy-rotation retarget (`copy_rotations`)."""
        skeleton = target.read_skeleton(self.rig, self.bone_names, self.parents)
        wanted, hips, self.k = copy_rotations.copied_world(self.motion, self.roles, skeleton, self.t_map, self.calibration)
        bases = skeleton.bases(wanted, located={hips})
        return self._pose_of(bases)

    def _pose_of(self, bases):
        """Pose matrices (F, B, 4, 4) (armature space) of the solved bones with these bases."""
        F = len(self.frames)
        rest = {b: np.array(self.rig.data.bones[b].matrix_local) for b in self.bone_names}
        out = np.empty((F, len(self.bone_names), 4, 4))
        at = {}
        for i, name in enumerate(self.bone_names):
            parent = self.parents[name]
            basis = bases.get(name, np.broadcast_to(np.eye(4), (F, 4, 4)))
            if i == 0 or parent not in at:
                out[:, i] = rest[name] @ basis
            else:
                out[:, i] = out[:, at[parent]] @ np.linalg.inv(rest[parent]) @ rest[name] @ basis
            at[name] = i
        return out

    def _copy_contacts(self, src):
        """The caller's spans, or spans detected on the source's heels and balls (the foot's and
        toe's heads) scaled to the target's legs."""
        if isinstance(self.contacts_in, dict):
            return self.contacts_in
        if self.contacts_in is None:
            return {}
        size = engine.leg_length({r: np.asarray(self.target.bone(r).matrix)[:3, 3] for r in engine.LEG_ROLES})
        k = size / engine.leg_length({r: src.heads[r][self.calibration] for r in engine.LEG_ROLES})
        out = {}
        for p in self.points:
            if not p.pinned:
                out[p.name] = []
                continue
            side = p.name.rsplit(".", 1)[-1]
            role = f"toe.{side}" if p.name.startswith("ball") and f"toe.{side}" in src.heads else f"foot.{side}"
            out[p.name] = engine.detect_contacts(src.heads[role] * k, self.fps, size=size,
                                                 **({"detection": self.options["detection"]}
                                                    if "detection" in self.options else {}))
        return out

    def _write(self):
        """Keys: on the solved bones (their bases), or on a generated Rigify rig's controls."""
        self.keys_written, self.control_passes, seen, warnings = posed_keys.write_posed(
            self.rig, self.frames, self.bone_names, self.parents, self.posed, record=self.record,
            rigid_limbs=self.rigid_limbs, before_write=self._open_layer)
        self.written = True
        self.warnings += warnings
        if seen is not None:
            self.seen = [seen]                     # read after the last keys: no second reading

    def _open_layer(self):
        """With `layer`, the keys go into a new action over the target's animation (`keys.new_layer`)."""
        if self.layer:
            self.layer_action = keys.new_layer(self.rig, f"{self.rig.name} from {self.src.name}").name

    def _measure(self):
        """The result from Blender's evaluation of the written keys (class docstring)."""
        seen = np.concatenate(self.seen)                      # (F, B, 4, 4) world
        world = np.array(self.rig.matrix_world)
        F = len(self.frames)
        at = {n: i for i, n in enumerate(self.bone_names)}
        names = [p.name for p in self.points]
        positions = np.empty((F, len(self.points), 3))
        for j, p in enumerate(self.points):
            M = seen[:, at[self.t_map[p.role]]]
            positions[:, j] = (M @ np.append(np.asarray(p.point, float), 1.0))[:, :3]
        normal, offset, below = self._floor_plane(world)
        penetration = np.maximum(offset - positions @ normal, 0.0)
        floor_world = (offset - normal[:2] @ below[:2]) / normal[2]
        error = np.full((F, len(self.points)), np.nan)
        contacts, slide, pin_distance = {}, {}, {}
        f0 = int(self.frames[0])
        pins = getattr(self.engine_result, "pins", None) or {}
        for j, name in enumerate(names):
            spans = list(self.contacts.get(name, []))
            contacts[name] = [(s.start + f0, s.end + f0) for s in spans]
            slide[name] = np.zeros(len(spans))
            pin_distance[name] = np.full(len(spans), np.nan)
            for k, s in enumerate(spans):
                path = positions[s.start:s.end + 1, j]
                slide[name][k] = np.linalg.norm(path - path[0], axis=-1).max()
                if name in pins:
                    pin = (world @ np.append(np.asarray(pins[name][k], float), 1.0))[:3]
                    d = np.linalg.norm(path - pin, axis=-1)
                    pin_distance[name][k] = d.max()
                else:
                    d = np.linalg.norm(path - path[0], axis=-1)
                error[s.start:s.end + 1, j] = d
        # Rotations: Blender's against the solve's, per mapped role.
        posed_world = world @ self.posed
        rotation = np.stack([_angle(_unit_axes(seen[:, at[self.t_map[r]]]), _unit_axes(posed_world[:, at[self.t_map[r]]]))
                             for r in self.roles], axis=1)
        style = self._style(seen)
        if self.engine_result is not None:
            iterations = np.asarray(self.engine_result.iterations, int)
            converged = np.asarray(self.engine_result.converged, bool).copy()
        else:
            iterations, converged = np.zeros(F, int), np.ones(F, bool)
        held = np.where(np.isnan(error), 0.0, error) if self.engine_result is not None else np.zeros_like(error)
        converged &= (held <= self.precision).all(axis=1) & (penetration <= self.precision).all(axis=1)
        converged &= np.isfinite(seen).all(axis=(1, 2, 3))
        seconds = time.perf_counter() - self.started
        return MeasuredRetarget(
            frames=self.frames.copy(), position_error=error, rotation_error=rotation, iterations=iterations,
            converged=converged, seconds=seconds, contacts=contacts, foot_slide=slide, pin_distance=pin_distance,
            floor_penetration=penetration, floor=float(floor_world), floor_normal=normal,
            floor_slope=float(np.arccos(np.clip(normal[2], -1.0, 1.0))),
            source_floor=float(getattr(self.engine_result, "source_floor", self.floor)),
            style_difference=style, points=names,
            roles=list(self.roles), bone_map={r: (self.s_map[r], self.t_map[r]) for r in self.roles},
            method=self.method, scale=float(getattr(self.engine_result, "scale", getattr(self, "k", 1.0))),
            keys_written=self.keys_written, warnings=list(self.warnings), precision=self.precision,
            solve_seconds=self.times["solve"],
            write_seconds=self.times["write"], verify_seconds=self.times["verify"], read_seconds=self.times["read"],
            control_passes=self.control_passes, point_positions=positions, engine=self.engine_result,
            layer_action=self.layer_action or "")

    def _floor_plane(self, world):
        """The floor in world space: (unit normal (3,), offset: normal . p on it, the world point
        (3,) of the source's hips at the calibration frame, where `floor` is measured)."""
        hips = self.source_world[self.calibration, self.roles.index("hips"), :3, 3]
        ground = getattr(self.engine_result, "ground", None)
        if ground is None:
            normal, point = np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, self.floor])
        else:
            normal, point = np.asarray(ground.normal, float), ground.offset * np.asarray(ground.normal, float)
        normal = np.linalg.inv(world[:3, :3]).T @ normal          # normals turn by the inverse transpose
        normal = normal / np.linalg.norm(normal)
        return normal, float(normal @ (world @ np.append(point, 1.0))[:3]), hips

    def _style(self, seen):
        """{role: mean angle} between the calibrated source's local rotations and Blender's."""
        to_target = np.linalg.inv(np.array(self.rig.matrix_world))
        W = _unit_axes(to_target @ seen)
        at = {n: i for i, n in enumerate(self.bone_names)}
        D = self.calib.desired_rotations(self.engine_source)
        out = {}
        for r in self.roles:
            if r not in D:
                continue
            p = mapped_parent(r, D)
            Wr = W[:, at[self.t_map[r]]]
            if p is None:
                out[r] = float(np.mean(_angle(D[r], Wr)))
            else:
                Wp = W[:, at[self.t_map[p]]]
                out[r] = float(np.mean(_angle(np.swapaxes(D[p], -1, -2) @ D[r], np.swapaxes(Wp, -1, -2) @ Wr)))
        return out

"""One fit of 3-D keypoints onto a Blender rig: `prepare` reads and checks (nothing changes), the
`Job` it returns does the work in steps (`steps()`, a generator: progress and Esc for the
operator; `run()` for scripts), measured by Blender's evaluation of what it wrote.

Data flows one way: the keypoint files (`reading`) and the rig's bone map (by names and skeleton,
`retarget.auto_map`, or the one given) -> the bones the fit moves (`retarget.target.rig_target`;
on a rig Rigify generated its ORG- skeleton) -> the engine's fit (`solver.keypoints.fit_keypoints`:
keypoints placed by role, offsets and one uniform scale calibrated on the static trial, every
frame in one smoothed solve), or the rotation-copy baseline (`solver.keypoints.copy_keypoints`) on
the same calibration ->
keys (`retarget.posed_keys`: as a bake writes them; on a generated Rigify rig, its controls) ->
Blender's evaluation of every written frame -> per keypoint and frame the distance from the
calibrated keypoint on the evaluated bone to the data.

The keypoints are taken in the rig's armature space, scaled by the calibrated scale (data units
to the rig's); Blender's errors are in scene units (the rig's units times the object's scale).
Trial frame i is keyed at scene frame `frame_start` + i. Nothing is written before every check
passed: bad input raises `RigError` with what to change.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field

import bpy
import numpy as np

from ...solver.geometry import points_on
from ...solver.kinematics import forward_kinematics
from ...solver.keypoints import copy_keypoints, fit_keypoints
from ...solver.retarget import REQUIRED_ROLES, ROLES, target_model
from ...solver.runtime.blas_threads import one_blas_thread
from .. import keys, solving
from ..rig import RigError
from ..retarget import auto_map, posed_keys, source, target
from . import reading

CHUNK = 48          # frames read per step
METHODS = ("fit", "copy")


@dataclass
class MeasuredKeypoints:
    """What a keypoint fit did, measured on Blender's evaluation of the keys it wrote.

    Per scene frame (F, `frames`) and keypoint (K, `names`): `error` the distance from the
    calibrated keypoint on the bone as Blender shows it to the data (scene units; NaN where the
    keypoint is missing or below the confidence threshold), `points` (F, K, 3) those keypoints
    and `data` (F, K, 3) the data's (scaled by `scale`, world space); `rms` (F,) over the
    keypoints present; `missing` (F, K); `gap_frames` the scene frames with a keypoint missing
    (bridged by the fit's smoothness) and `gaps` {keypoint: [(first, last) scene frame]}.
    `bone_names` and `bone_matrices` (F, B, 4, 4): the moved bones' world matrices as Blender
    shows them. `engine` the engine's `KeypointResult` (None for the copy method), `report` its
    calibration per keypoint, `left_out` {keypoint: why}. With contacts (the fit's): `contacts`
    {foot keypoint: [(first, last) scene frame]} where the fit held it still, and `foot_slide`
    {foot keypoint: (spans,)} the keypoint's largest distance, as Blender shows it, from where it
    is at the span's first frame (scene units). `seconds` the whole fit from the start of
    `prepare`; `solve_seconds`, `write_seconds`, `verify_seconds` its parts."""

    frames: np.ndarray
    names: list
    error: np.ndarray
    rms: np.ndarray
    points: np.ndarray
    data: np.ndarray
    missing: np.ndarray
    gap_frames: np.ndarray
    gaps: dict
    bone_names: list
    bone_matrices: np.ndarray
    scale: float
    method: str
    seconds: float
    engine: object = None
    report: str = ""
    left_out: dict = field(default_factory=dict)
    bone_map: dict = field(default_factory=dict)
    keys_written: int = 0
    control_passes: int = 0
    warnings: list = field(default_factory=list)
    solve_seconds: float = 0.0
    write_seconds: float = 0.0
    verify_seconds: float = 0.0
    contacts: dict = field(default_factory=dict)
    foot_slide: dict = field(default_factory=dict)

    @property
    def mean_error(self) -> float:
        return float(np.nanmean(self.error))

    def summary(self) -> str:
        return (f"{self.method}: {len(self.frames)} frame(s), {len(self.names)} keypoint(s), mean error "
                f"{self.mean_error:.4g} (as Blender shows it), max {float(np.nanmax(self.error)):.4g}, "
                f"{len(self.gap_frames)} frame(s) with gaps, scale {self.scale:.4g}, {self.seconds:.2f} s")


def _spans(mask, f0):
    """[(first, last)] scene frames of the runs where `mask` (F,) holds."""
    edges = np.diff(np.concatenate([[0], mask.astype(int), [0]]))
    return [(int(a) + f0, int(b) - 1 + f0) for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))]


def rig_map(rig, bone_map=None):
    """({role: bone} of `rig`, notes): `bone_map` checked, or the rig's automatic map by names and
    skeleton. RigError where hips and legs down to the feet are not mapped."""
    notes = []
    if bone_map is None:
        try:
            mapping, notes, how = auto_map.armature_map(rig)
        except ValueError as err:
            raise RigError(f"the rig '{rig.name}' has no skeleton the keypoints can be mapped onto ({err}); "
                           "pass bone_map={role: bone}; nothing was written") from None
        notes = [f"{rig.name} (by {how}): {n}" for n in notes]
    else:
        mapping = {r: b for r, b in dict(bone_map).items() if b}
        unknown = sorted(set(mapping) - set(ROLES))
        if unknown:
            raise RigError(f"unknown role(s) {', '.join(unknown)} in the bone map; roles: {', '.join(ROLES)}")
        absent = [f"{r}: {b}" for r, b in mapping.items() if b not in rig.data.bones]
        if absent:
            raise RigError(f"the bone map names bones '{rig.name}' does not have ({', '.join(absent)}); "
                           "nothing was written")
    missing = [r for r in REQUIRED_ROLES if r not in mapping]
    if missing:
        raise RigError(f"the rig '{rig.name}' has no skeleton the keypoints can be mapped onto: no bone for "
                       f"{', '.join(missing)} (hips and both legs down to the feet are needed); "
                       "pass bone_map={role: bone}; nothing was written")
    return mapping, notes


def prepare(rig, trial, *, static=None, keypoint_set=None, bone_map=None, cutoff=6.0, threshold=0.0,
            frame_start=None, method="fit", static_frames=None, offset_prior=1.0, max_iterations=100, roles=None,
            record=True, rigid_limbs=True, rate=None, units=None, up=None, contacts="auto", floor=None) -> Job:
    """Everything a fit of `trial` (a path or a KeypointTrial) onto `rig` needs, read and checked:
    the trials, the frames, the bone map, the model the engine fits. Bad input raises RigError
    here, with nothing changed. See the module docstring and `api.fit_keypoints`."""
    started = time.perf_counter()
    if isinstance(rig, str):
        rig = bpy.data.objects.get(rig)
    if rig is None or getattr(rig, "type", None) != "ARMATURE":
        raise RigError("the rig must be an armature object")
    if method not in METHODS:
        raise RigError(f"method must be 'fit' (the engine's fit) or 'copy' (bones aimed along their "
                       f"keypoints), not {method!r}")
    solving.check_writable(rig)
    options = {k: v for k, v in (("rate", rate), ("units", units), ("up", up)) if v is not None}
    trial = reading.load_trial(trial, "keypoint file", keypoint_set, **options)
    static = None if static is None else reading.load_trial(static, "static keypoint file", keypoint_set, **options)
    if trial.keypoint_set is None and not roles:
        raise RigError("the keypoint names fit no known keypoint set: choose one (keypoint_set=) or give "
                       "roles={keypoint: role}; nothing was written")
    if trial.n_frames < 1:
        raise RigError("the keypoint file has no frames; nothing was written")
    scene = bpy.context.scene
    f0 = scene.frame_start if frame_start is None else int(frame_start)
    frames = f0 + np.arange(trial.n_frames, dtype=float)
    keys.action_frames(rig, frames)
    t_map, notes = rig_map(rig, bone_map)
    warnings = [f"bone map: {n}" for n in notes]
    fps = scene.render.fps / scene.render.fps_base
    if abs(fps - trial.rate) > 1e-6 * fps:
        warnings.append(f"the scene plays {fps:g} frames per second, the keypoints were taken at "
                        f"{trial.rate:g} Hz: one key per keypoint frame plays "
                        f"{trial.rate / fps:.3g} times slower")
    bone_names, parents, rig_target = target.rig_target(rig, t_map)
    try:
        model = target_model(rig_target)
    except ValueError as err:
        raise RigError(f"the rig '{rig.name}': {err}; nothing was written") from None
    fit = dict(static=static, threshold=float(threshold), cutoff=cutoff, offset_prior=float(offset_prior), roles=roles,
               max_iterations=int(max_iterations))
    if static_frames is not None:
        fit["static_frames"] = static_frames
    return Job(rig=rig, trial=trial, frames=frames, method=method, record=record, rigid_limbs=bool(rigid_limbs),
               t_map=t_map, bone_names=bone_names, parents=parents, target=rig_target, model=model, options=fit,
               fit_options=dict(contacts=contacts, floor=floor), warnings=warnings, started=started)


@dataclass(eq=False, repr=False)
class Job:
    """A prepared keypoint fit (`prepare`); `steps()` does it, `result` is its MeasuredKeypoints."""

    rig: object
    trial: object                   # the KeypointTrial
    frames: np.ndarray              # the scene frames keyed, one per trial frame
    method: str
    record: bool
    rigid_limbs: bool
    t_map: dict                     # {role: bone}
    bone_names: list                # the bones the fit moves
    parents: dict
    target: object                  # the engine's Target
    model: object                   # its model (`solver.retarget.target_model`)
    options: dict                   # the fit's and the copy's options (the static trial among them)
    fit_options: dict               # the engine fit's only: contacts, floor
    warnings: list
    started: float
    done: int = field(default=0, init=False)            # progress, of `total`
    written: bool = field(default=False, init=False)    # the keys are written
    seen: list = field(default_factory=list, init=False)    # Blender's evaluation of the keys, chunk by chunk
    result: MeasuredKeypoints | None = field(default=None, init=False)
    control_passes: int = field(default=0, init=False)   # Rigify: passes over its controls
    times: dict = field(default_factory=lambda: {"solve": 0.0, "write": 0.0, "verify": 0.0}, init=False)
    _isolation: ExitStack | None = field(default=None, init=False)

    # --- steps -------------------------------------------------------------------------------

    @property
    def total(self):
        """Progress units: the fit, the write, each frame read back from Blender's evaluation."""
        return len(self.frames) + 2

    def steps(self):
        """Fit, write, read Blender's evaluation of the keys: a generator yielding `done` after
        each piece of work (the modal operator's progress)."""
        try:
            yield from self._steps()
        finally:
            self._release()

    def _steps(self):
        began = time.perf_counter()
        self._fit()
        self.times["solve"] = time.perf_counter() - began
        self.done += 1
        yield self.done
        began = time.perf_counter()
        self._write()
        self.times["write"] = time.perf_counter() - began
        self.done += 1
        yield self.done
        F = len(self.frames)
        began = time.perf_counter()
        read = 0
        while read < F:
            if self.read_back:                       # Rigify: the control passes' last reading
                stop = F
            else:
                if self._isolation is None:
                    self._isolation = ExitStack()
                    self._isolation.enter_context(source.evaluating_only(self.rig))
                stop = min(read + CHUNK, F)
                self.seen.append(source.read_motion(self.rig, self.bone_names, self.frames[read:stop],
                                                    isolate=False).world)
            self.done += stop - read
            read = stop
            yield self.done
        self._release()
        self.result = self._measure()
        self.times["verify"] = time.perf_counter() - began
        self.result.verify_seconds = self.times["verify"]
        yield self.done

    @one_blas_thread()
    def run(self):
        for _ in self.steps():
            pass
        return self.result

    def _release(self):
        if self._isolation is not None:
            isolation, self._isolation = self._isolation, None
            isolation.close()

    def cancel(self):
        """Stop (Esc). Before the keys are written nothing was written: None. Once written they stay."""
        self._release()
        if not self.written:
            return None
        return "Cancelled while checking Blender's evaluation: the keys are written, the result is not measured"

    # --- the work ----------------------------------------------------------------------------

    def _in_order(self, trial, names):
        index = [trial.index(n) for n in names]
        return trial.positions[:, index], trial.weights(self.options["threshold"])[:, index]

    def _fit(self):
        """The engine's fit (or the baseline on the engine's calibration): `posed` (F, B, 4, 4)."""
        try:
            if self.method == "fit":
                self.engine = fit_keypoints(self.trial, self.model, **self.options, **self.fit_options)
                self.calibration, self.left_out = self.engine.calibration, self.engine.left_out
                frames = forward_kinematics(self.model.model, self.engine.fit.q).frames
                self.posed = frames[:, self.model.segment]
            else:
                self.engine = None
                self._copy()
        except ValueError as err:
            raise RigError(f"keypoints onto '{self.rig.name}': {err}; nothing was written") from None
        self.placement = self.calibration.placement
        self.names = list(self.placement.names)
        positions, weights = self._in_order(self.trial, self.names)
        self.y = self.calibration.scale * positions
        self.missing = weights <= 0

    def _copy(self):
        """The rotation-copy baseline (`solver.keypoints.copy_keypoints`) on the fit's calibration."""
        o = self.options
        self.posed, self.calibration, self.left_out = copy_keypoints(
            self.trial, self.target, self.model, static=o["static"], static_frames=o.get("static_frames", slice(None)),
            threshold=o["threshold"], offset_prior=o["offset_prior"], roles=o["roles"])

    def _points(self, poses, placement):
        """The calibrated keypoints (F, K, 3) on bone matrices `poses` (F, B, 4, 4)."""
        names = self.model.model.names
        return points_on(poses[:, [self.bone_names.index(names[s]) for s in placement.segments]], placement.offsets)

    def _write(self):
        self.keys_written, self.control_passes, seen, warnings = posed_keys.write_posed(
            self.rig, self.frames, self.bone_names, self.parents, self.posed, record=self.record,
            rigid_limbs=self.rigid_limbs)
        self.written = True
        self.warnings += warnings
        self.read_back = seen is not None
        self.seen = [] if seen is None else [seen]

    def _measure(self):
        """The result from Blender's evaluation of the written keys (class docstring)."""
        seen = np.concatenate(self.seen)
        world = np.array(self.rig.matrix_world)
        points = self._points(seen, self.placement)
        data = np.where(self.missing[..., None], np.nan, self.y @ world[:3, :3].T + world[:3, 3])
        error = np.linalg.norm(points - data, axis=-1)
        present = ~self.missing
        count = present.sum(axis=1)
        rms = np.where(count > 0, np.sqrt(np.nansum(error ** 2, axis=1) / np.maximum(count, 1)), np.nan)
        f0 = int(self.frames[0])
        gaps = {n: _spans(self.missing[:, k], f0) for k, n in enumerate(self.names) if self.missing[:, k].any()}
        held = {} if self.engine is None else self.engine.contacts
        contacts = {n: [(s.start + f0, s.end + f0) for s in spans] for n, spans in held.items() if spans}
        slide = {n: np.array([np.linalg.norm(points[s.start:s.end + 1, self.names.index(n)]
                                             - points[s.start, self.names.index(n)], axis=-1).max() for s in spans])
                 for n, spans in held.items() if spans}
        return MeasuredKeypoints(
            frames=self.frames.copy(), names=self.names, error=error, rms=rms, points=points, data=data,
            missing=self.missing.copy(), gap_frames=self.frames[self.missing.any(axis=1)].astype(int), gaps=gaps,
            bone_names=list(self.bone_names), bone_matrices=seen, scale=float(self.calibration.scale),
            method=self.method, seconds=time.perf_counter() - self.started, engine=self.engine,
            report=self.calibration.report(), left_out=dict(self.left_out), bone_map=dict(self.t_map),
            keys_written=self.keys_written, control_passes=self.control_passes, warnings=list(self.warnings),
            solve_seconds=self.times["solve"], write_seconds=self.times["write"], contacts=contacts, foot_slide=slide)

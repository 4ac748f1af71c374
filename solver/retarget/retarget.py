"""Retargeting a source motion onto a target rig: one batched least-squares problem over all frames.

Per frame t, with the leg-length ratio k = (target leg) / (source leg) and o the hips' ground
point at the calibration frame (the hips' head with its height along `up` removed), a source
point p maps to  o + k (p - o) + s up  (s shifts the clip's floor onto `floor` where one is given).

The floor is a plane fitted to where the contact points rest during their spans (contacts.fit_floor:
a clip whose floor is not at 0, or slopes slightly, keeps its own ground): first a level floor at
a low percentile of the points' heights finds the spans, then the plane through their rest
positions, then the spans again, on that plane. A point's height is its distance above the plane
less its clearance (the toe tip rests above the sole).

The target pose q(t) then solves, in order of priority,

    hard    every contact point on its pin while a span holds it: one world point per span (the
            mean of the point's mapped source path over the span, put on the floor at its clearance; a point
            rigidly linked to one pinned at the same time, such as the heel and the ball of a
            foot, is moved to the distance the link fixes, so that both can hold);
            every other contact point at or above the floor (an inequality, active where it binds);
            the target's joint limits (held exactly: coordinates that would leave are locked on them)
    soft    the calibrated world rotation D_r(t) of every mapped bone (calibration.py), the mapped
            effectors' heads (hands, head, feet), and the root trajectory: the centre of the
            target's hip joints (the thighs' heads) on the source's, mapped (so legs of other
            proportions hang from where the source's did); within `blend_frames` of a span (by
            default BLEND_SECONDS of the source), the contact point drawn toward a target sliding
            from its mapped path to the pin across the floor while along it the path keeps its
            own rise, offset by the span's level (so it reaches and leaves the pin without a jump);
            a free point on the same bone as a pinned one (the heel while the ball holds) drawn to
            where the source's turn of the bone since the foot stood flat, about the pinned point,
            puts it, with PIVOT times the
            blend weight (so the heel lifts off and the ball pivots as the source's do); all
            weighted by Weights

each frame a minimiser of the soft tasks' weighted squared error among the poses that meet the
hard ones (solve.py). Contacts come from detect_contacts on the mapped contact point paths, or
from the caller.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..bones import coordinates_from_basis
from ..kinematics import forward_kinematics, segment_motions
from ..rotations import log_map
from ..scene import Scene
from .calibration import Calibration, calibrate
from .contacts import ContactDetection, Floor, Span, detect_contacts, estimate_floor, fit_floor, level_floor, unit_up
from .roles import EFFECTOR_ROLES, LEG_ROLES, check_role, mapped_parent
from .skeletons import Source, Target, TargetModel, leg_length, target_model
from .solve import Problem, _points, copied, solve

BLEND_SECONDS = 0.1       # blend_frames' default, in seconds of the source
PIVOT = 10.0              # a pivoting point's weight, in blend weights


@dataclass(frozen=True)
class Weights:
    """Soft task weights: `rotation` per radian of each mapped bone's world rotation error;
    `effector`, `root` and `blend` per leg length of position error; `effectors` the roles whose
    heads follow the source's; `roles` overrides the rotation weight of single roles (0 leaves a
    role's rotation free)."""

    rotation: float = 1.0
    effector: float = 0.3
    root: float = 3.0
    blend: float = 1000.0         # a contact point's pull toward its sliding target next to a span
    effectors: tuple = EFFECTOR_ROLES
    roles: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RetargetSettings:
    """The solve's iteration: at most `max_iterations` Gauss-Newton steps per frame, each at most
    `max_step` (radians or scene units) per coordinate; a frame converges when its hard tasks hold
    within `hard_tolerance` (scene units) and its step falls below `step_tolerance`. Most frames
    take under 10 steps; one where the floor pushes hard on a toe tip converges only linearly
    (Gauss-Newton leaves out the floor's curvature) and may take 50."""

    max_iterations: int = 100
    max_step: float = 0.5
    hard_tolerance: float = 1e-6
    step_tolerance: float = 1e-6
    damping: float = 1e-6


@dataclass
class RetargetResult:
    """A retarget's answer. Bone arrays follow target.bones' order (B bones); frames are the
    source's (F). Errors are NaN where a task asks nothing.

    q                 (F, n) the model's coordinates (`model`, TargetModel)
    local_rotations   (F, B, 3, 3) each bone's rotation relative to its rest (Blender's
                      matrix_basis rotation; identity for rigid bones)
    root_translation  (F, 3) the hips bone's location in its rest frame (matrix_basis translation)
    world             (F, B, 4, 4) every bone's pose matrix in armature space (Blender's pose_bone.matrix)
    contacts          {contact point name: [Span, ...]} the spans used
    pins              {contact point name: (spans, 3)} each span's world point
    pin_error         (F, P) distance of each contact point from its pin target, NaN where unpinned
    floor_penetration (F, P) how far each contact point lies below the floor (0 above it)
    floor             the floor's height along `up` below the hips' start (the calibration frame)
    ground            the floor plane (contacts.Floor: normal, offset), as solved
    floor_slope       the floor's angle to level (radians)
    source_floor      the clip's own floor height below the hips' start, in the source's units
    style_difference  {role: radians} mean angle between the calibrated source's and the target's
                      local rotations (relative to the nearest mapped ancestor role; world for hips)
    converged         (F,) hard tasks held and steps settled
    iterations        (F,)
    scale             the leg-length ratio k
    seconds           wall time of the whole retarget
    model             the TargetModel solved (its Model, and where bones and roles are in it)
    bone_names        target.bones' names (the B axis); contact_names the contact points' (the P axis)
    calibration       the Calibration used
    frames            (F,) the source frames, 0..F-1
    """

    q: np.ndarray
    local_rotations: np.ndarray
    root_translation: np.ndarray
    world: np.ndarray
    contacts: dict
    pins: dict
    pin_error: np.ndarray
    floor_penetration: np.ndarray
    floor: float
    style_difference: dict
    converged: np.ndarray
    iterations: np.ndarray
    scale: float
    seconds: float
    ground: Floor | None = None
    floor_slope: float = 0.0
    source_floor: float = 0.0
    model: TargetModel | None = None
    bone_names: tuple = ()
    contact_names: tuple = ()
    calibration: Calibration | None = None
    frames: np.ndarray | None = None


def retarget(source: Source, target: Target, *, contacts="auto", calibration_frame: int = 0,
             floor: float | None = None, up=(0.0, 0.0, 1.0), blend_frames: int | None = None,
             weights: Weights = Weights(), detection: ContactDetection = ContactDetection(),
             settings: RetargetSettings = RetargetSettings(), method: str = "ik") -> RetargetResult:
    """Retarget `source` onto `target` (module docstring). `contacts`: "auto" (detect_contacts on
    each contact point's mapped source path), None (no pins), or {contact point name: [Span, ...]}
    (the caller's spans; points not named get none). `floor` None keeps the clip's own floor
    (fitted to the contact points' mapped paths); a number moves it there (its height below the
    hips at the calibration frame; its slope stays the clip's). Raises ValueError
    (naming the role, channel, point or span) on bad input.

    method="copy" is the baseline name-map tools give: each mapped bone takes its calibrated
    rotation as far as its joints allow and the root its mapped trajectory, with no IK; contacts
    and pins are found the same way, so its pin_error is its foot slide on the same spans (and
    `converged` says where the pins happen to hold within settings.hard_tolerance)."""
    if method not in ("ik", "copy"):
        raise ValueError(f"method must be 'ik' or 'copy', got {method!r}")
    began = time.perf_counter()
    _check_weights(weights)
    source.check()
    tm = target_model(target)
    unmapped = [r for r in target.roles if r not in source.rotations]
    if unmapped:
        raise ValueError(f"the target maps role(s) {unmapped} that the source does not have: "
                         "map them on the source or leave them out of the target's map")
    if blend_frames is None:
        blend_frames = max(1, int(round(BLEND_SECONDS * source.fps)))
    if int(blend_frames) != blend_frames or blend_frames < 0:
        raise ValueError(f"blend_frames {blend_frames} must be a whole number >= 0")
    if floor is not None and not np.isfinite(floor):
        raise ValueError(f"floor {floor} must be a finite number or None")
    up = unit_up(up)
    F = source.n_frames
    calibration = calibrate(source, target, calibration_frame, up)
    desired = calibration.desired_rotations(source)
    c = calibration.frame

    # The mapping of source points into the target's space: o + k (p - o) + shift up.
    heads = {r: np.asarray(source.heads[r], float) for r in target.roles}
    size = leg_length({r: np.asarray(target.bone(r).matrix, float)[:3, 3] for r in LEG_ROLES})
    k = size / leg_length({r: heads[r][c] for r in LEG_ROLES})
    hips = heads["hips"][c]
    origin = hips - (hips @ up) * up
    mapped = {r: origin + k * (h - origin) for r, h in heads.items()}

    points = target.points(up)
    P = len(points)
    local = np.array([p.point for p in points], dtype=float).reshape(P, 3)
    paths = np.stack([mapped[p.role] + desired[p.role] @ local[i] for i, p in enumerate(points)], axis=1) \
        if P else np.zeros((F, 0, 3))
    clearance = np.array([p.clearance for p in points], dtype=float)
    detected = [p.pinned for p in points]
    soles = paths - clearance[:, None] * up                  # where each point's sole is
    ground = level_floor(estimate_floor(soles, up, detection.percentile) if P else 0.0, up)
    names = [p.name for p in points]
    spans = _spans(contacts, names, paths, source.fps, ground, clearance, size, detection, F, detected)
    rigid, link = _rigid_links(tm, points)
    same_bone = rigid & (np.array([p.role for p in points])[:, None] == np.array([p.role for p in points])[None])
    turns = np.stack([desired[p.role] for p in points], axis=1) if P else np.zeros((F, 0, 3, 3))
    if any(spans.values()):
        ground = _fitted_floor(spans, names, soles, up, size)
        if isinstance(contacts, str):
            spans = _spans(contacts, names, paths, source.fps, ground, clearance, size, detection, F, detected)
            spans = _pivot_trimmed(spans, names, same_bone, local, turns, ground.normal, detection, size)
    source_floor = ground.height_at(origin, up) / k
    shift = 0.0 if floor is None else float(floor) - ground.height_at(origin, up)
    ground = ground.raised(shift, up)
    paths = paths + shift * up
    mapped = {r: m + shift * up for r, m in mapped.items()}

    pins = _pins(spans, names, paths, rigid, link, ground, clearance)
    pinned = np.zeros((F, P), dtype=bool)
    pin_targets = np.zeros((F, P, 3))
    for i, name in enumerate(names):
        for span, pin in zip(spans[name], pins[name]):
            pinned[span.start:span.end + 1, i] = True
            pin_targets[span.start:span.end + 1, i] = pin

    blend_targets, blend_share = _blends(spans, names, paths, pins, int(blend_frames), ground.normal)
    _pivot(blend_targets, blend_share, spans, names, pins, same_bone, local, turns, int(blend_frames))

    # The root: the hip joints' centre on the hips bone, onto the source's, mapped.
    hips_rest = np.asarray(target.bone("hips").matrix, float)
    centre_rest = (np.asarray(target.bone("thigh.L").matrix, float)[:3, 3]
                   + np.asarray(target.bone("thigh.R").matrix, float)[:3, 3]) / 2
    centre_local = hips_rest[:3, :3].T @ (centre_rest - hips_rest[:3, 3])
    centre_path = (mapped["thigh.L"] + mapped["thigh.R"]) / 2

    roles = list(target.roles)
    effectors = [r for r in weights.effectors if r in target.roles and r != "hips"]
    point_roles = ["hips"] + effectors
    scale2 = 1.0 / size**2
    point_weight = np.concatenate([np.full((F, 1), weights.root * scale2),
                                   np.full((F, len(effectors)), weights.effector * scale2)], axis=1)
    problem = Problem(
        model=tm.model,
        rotation_segments=np.array([tm.role_segment[r] for r in roles], dtype=int),
        rotations=np.stack([desired[r] for r in roles], axis=1),
        rotation_weight=np.array([float(weights.roles.get(r, weights.rotation)) for r in roles]),
        point_segments=np.array([tm.role_segment[r] for r in point_roles], dtype=int),
        point_local=np.concatenate([centre_local[None], np.zeros((len(effectors), 3))]),
        point_targets=np.stack([centre_path] + [mapped[r] for r in effectors], axis=1),
        point_weight=point_weight,
        contact_segments=np.array([tm.role_segment[p.role] for p in points], dtype=int),
        contact_local=local,
        pins=pin_targets,
        pinned=pinned,
        contact_targets=blend_targets,
        contact_weight=blend_share * weights.blend * scale2,
        floor=ground.offset,
        up=ground.normal,
    )
    q0 = initial_coordinates(tm, target, desired, centre_path - desired["hips"] @ centre_local)
    if method == "copy":
        solution = copied(problem, q0, settings.hard_tolerance)
    else:
        options = dict(max_iterations=settings.max_iterations, max_step=settings.max_step,
                       hard_tolerance=settings.hard_tolerance, step_tolerance=settings.step_tolerance,
                       damping=settings.damping)
        solution = solve(problem, q0, **options)
    result = _result(tm, target, problem, solution, desired, spans, pins, names, k, calibration, began)
    result.ground, result.source_floor = ground, float(source_floor)
    result.floor, result.floor_slope = ground.height_at(origin, up), ground.slope(up)
    return result


def _check_weights(weights: Weights) -> None:
    for name in ("rotation", "effector", "root", "blend"):
        value = getattr(weights, name)
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"weight {name} = {value} must be finite and >= 0")
    for role in weights.effectors:
        check_role(role, "effector role")
    for role, value in weights.roles.items():
        check_role(role, "weighted role")
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"weight of role {role!r} = {value} must be finite and >= 0")


def _fitted_floor(spans, names, soles, up, size) -> Floor:
    """fit_floor through each span's mean sole position, weighted by the span's length."""
    rests = [soles[s.start:s.end + 1, i].mean(axis=0) for i, name in enumerate(names) for s in spans[name]]
    weights = [len(s) for name in names for s in spans[name]]
    return fit_floor(rests, weights, up, size)


def _spans(contacts, names, paths, fps, ground, clearance, size, detection, F, pinned) -> dict:
    """{point name: [Span, ...]} from "auto" (on the floor `ground`, for the points `pinned`), None
    or the caller's dict (checked)."""
    if contacts is None:
        return {name: [] for name in names}
    if isinstance(contacts, str):
        if contacts != "auto":
            raise ValueError(f"contacts must be 'auto', None or {{point name: [Span, ...]}}, got {contacts!r}")
        return {name: detect_contacts(paths[:, i], fps, up=ground.normal, floor=ground.offset + clearance[i],
                                      size=size, detection=detection) if pinned[i] else []
                for i, name in enumerate(names)}
    unknown = [name for name in contacts if name not in names]
    if unknown:
        raise ValueError(f"contacts name unknown contact point(s) {unknown}; the target's are {names}")
    spans = {}
    for name in names:
        given = sorted(s if isinstance(s, Span) else Span(*s) for s in contacts.get(name, []))
        for s in given:
            if s.end >= F:
                raise ValueError(f"contact span {s.start}..{s.end} of {name!r} runs past the source's last frame {F - 1}")
        for a, b in zip(given, given[1:]):
            if b.start <= a.end:
                raise ValueError(f"contact spans {a.start}..{a.end} and {b.start}..{b.end} of {name!r} overlap")
        spans[name] = given
    return spans


RIGID_TOLERANCE = 1e-6


def _rigid_links(tm: TargetModel, points):
    """(P, P) bool: pairs of contact points whose distance no joint of the model changes (the
    same bone, or bones no coordinate turns apart), tried on random poses; and (P, P) their
    distances. Rigid means varying by at most RIGID_TOLERANCE of the scene's scale: rest
    matrices read from float32 bone matrices are a few 1e-7 from a rotation, which lets a rigid
    offset vary by about that much between poses."""
    P = len(points)
    if P < 2:
        return np.zeros((P, P), dtype=bool), np.zeros((P, P))
    model = tm.model
    rng = np.random.default_rng(0)
    q = Scene(model, []).project(rng.uniform(-1.0, 1.0, size=(4, model.n_coordinates)))
    frames = forward_kinematics(model, q).frames
    segments = np.array([tm.role_segment[p.role] for p in points], dtype=int)
    world = _points(frames, segments, np.array([p.point for p in points], dtype=float))
    distance = np.linalg.norm(world[:, :, None] - world[:, None], axis=-1)             # (4, P, P)
    scale = max(float(np.abs(world).max()), 1.0)
    return (np.ptp(distance, axis=0) <= RIGID_TOLERANCE * scale) & ~np.eye(P, dtype=bool), distance.mean(axis=0)


def _pins(spans, names, paths, rigid, link, ground: Floor, clearance) -> dict:
    """Each span's pin: the mean of its point's mapped path over the span, put on the floor (at
    the point's clearance above it); a
    point rigidly linked to one already pinned over an overlapping span is then moved (on the
    floor) to the distance the link fixes, so that every set of pins can be held at once (with
    several such partners, by alternating projections onto each distance and the floor)."""
    order = sorted((s.start, s.end, i) for i, name in enumerate(names) for s in spans[name])
    pins = {name: [] for name in names}
    placed = []
    for start, end, i in order:
        n, floor = ground.normal, ground.offset + clearance[i]
        x = paths[start:end + 1, i].mean(axis=0)
        x = x - (x @ n - floor) * n
        partners = [(pin, j) for (a, b, j, pin) in placed if rigid[i, j] and a <= end and start <= b]
        for _ in range(100 if partners else 0):
            for pin, j in partners:
                d = x - pin
                length = np.linalg.norm(d)
                if length > 1e-12:
                    x = pin + d * (link[i, j] / length)
            x = x - (x @ n - floor) * n
        placed.append((start, end, i, x))
        pins[names[i]].append(x)
    return {name: np.array(p).reshape(-1, 3) for name, p in pins.items()}


def _blends(spans, names, paths, pins, blend_frames: int, normal):
    """Soft targets (F, P, 3) next to the spans and their share (F, P) of the blend weight.
    Within blend_frames b of a span k (outside every span of the point), d_k frames from it, the
    span pulls by a_k = smoothstep((b + 1 - d_k) / (b + 1)) by u_k, toward its pin across the
    floor's normal n, and along n by the pin's height less the span's level (the mean of n . path
    over the span), so that the point rises and lands with the source's own motion:

        u_k = (I - n n^T)(pin_k - path) + (n . pin_k - level_k) n,
        target = path + sum_k a_k u_k / max(1, sum_k a_k),   share = min(1, sum_k a_k)^3

    so in a short gap between two spans the target slides from one pin to the next, and the
    weight starts too small to pull the point off where the other tasks put it, then holds it on
    the target near a span: the point reaches and leaves its pins without a jump (share 0
    elsewhere)."""
    F, P = paths.shape[:2]
    targets, share = paths.copy(), np.zeros((F, P))
    t = np.arange(F)
    for i, name in enumerate(names):
        total, pull = np.zeros(F), np.zeros((F, 3))
        for span, pin in zip(spans[name], pins[name]):
            d = np.where(t < span.start, span.start - t, t - span.end)
            a = np.clip((blend_frames + 1 - d) / (blend_frames + 1), 0.0, 1.0)
            a = np.where(d >= 1, a * a * (3 - 2 * a), 0.0)
            total += a
            toward = pin - paths[:, i]
            level = (paths[span.start:span.end + 1, i] @ normal).mean()
            toward += ((pin @ normal - level) - toward @ normal)[:, None] * normal
            pull += a[:, None] * toward
        for span in spans[name]:
            total[span.start:span.end + 1] = 0.0
        targets[:, i] += pull / np.maximum(1.0, total)[:, None]
        share[:, i] = np.minimum(1.0, total) ** 3
    return targets, share


def _pivot_trimmed(spans, names, same_bone, local, rotations, normal, detection, size) -> dict:
    """The spans with each end moved in past the frames where the point, were its bone to turn
    as the source's about a pinned partner on it, would have risen more than `detection.lift`
    leg lengths since the partners' shared span's middle frame m:

        rise_i(t) = n . (R(t) - R(m)) (local_i - local_j)

    (R (F, P, 3, 3) the source's rotation of the bone): the heel's span ends as the source's
    foot starts to pivot on its ball (heel-off), the ball's starts once the foot has come down
    flat after the heel struck. Spans shorter than `detection.min_frames` are dropped."""
    out = {}
    for i, name in enumerate(names):
        kept = []
        for span in spans[name]:
            t = span.frames
            rise = np.zeros(t.size)
            for j in np.flatnonzero(same_bone[i]):
                for other in spans[names[j]]:
                    a, b = max(span.start, other.start), min(span.end, other.end)
                    if a > b:
                        continue
                    inside = (t >= other.start) & (t <= other.end)
                    R, Rm = rotations[t[inside], i], rotations[(a + b) // 2, i]
                    arm = local[i] - local[j]
                    rise[inside] = np.maximum(rise[inside], (R @ arm - Rm @ arm) @ normal)
            low = np.flatnonzero(rise <= detection.lift * size)
            if low.size and low[-1] - low[0] + 1 >= detection.min_frames:
                kept.append(Span(span.start + int(low[0]), span.start + int(low[-1])))
        out[name] = kept
    return out


def _pivot(targets, share, spans, names, pins, same_bone, local, rotations, blend_frames: int) -> None:
    """Where a point i is free but a point j on its bone is pinned (the ball holds while the heel
    lifts, the heel while the foot comes down), i's soft target becomes where the source's turn
    of the bone since the foot stood flat puts it, about j's pin:

        target_i(t) = pin_j + R(t) R(m)^T (pin_i - pin_j),

    R (F, P, 3, 3) the source's rotation of the bone, m the middle frame of the nearest span of
    i overlapping j's (both pinned, the foot flat) and pin_i that span's pin; with no such span,
    target_i(t) = pin_j + R(t) (local_i - local_j). PIVOT times the blend weight (it outweighs
    the bone's own rotation task, whose pitch the flat foot's pins may not share): the foot
    pivots about its pinned point as the source's does. Within `blend_frames` of j's span, j's own blend target
    and share take the pin's place, so that the foot leaves the pivot as smoothly as j does.
    Changes `targets` (F, P, 3) and `share` (F, P) in place."""
    F, P = share.shape
    own_targets, own_share = targets.copy(), share.copy()
    for i in range(P):
        free = np.ones(F, dtype=bool)
        for span in spans[names[i]]:
            free[span.start:span.end + 1] = False
        total, weight = np.zeros((F, 3)), np.zeros(F)
        for j in np.flatnonzero(same_bone[i]):
            for span, pin in zip(spans[names[j]], pins[names[j]]):
                t = np.arange(max(0, span.start - blend_frames), min(F, span.end + blend_frames + 1))
                t = t[free[t]]
                if not t.size:
                    continue
                inside = (t >= span.start) & (t <= span.end)
                base = np.where(inside[:, None], pin, own_targets[t, j])
                w = np.where(inside, 1.0, own_share[t, j])
                both = [(max(a.start, span.start), min(a.end, span.end), p)
                        for a, p in zip(spans[names[i]], pins[names[i]]) if a.start <= span.end and span.start <= a.end]
                if both:
                    gap = np.array([[max(a - f, f - b, 0) for a, b, _ in both] for f in t])
                    nearest = np.argmin(gap, axis=1)
                    middle = np.array([(both[k][0] + both[k][1]) // 2 for k in nearest])
                    arm = np.array([both[k][2] - pin for k in nearest])
                    turn = rotations[t, i] @ np.swapaxes(rotations[middle, i], -1, -2)
                    total[t] += w[:, None] * (base + (turn @ arm[..., None])[..., 0])
                else:
                    total[t] += w[:, None] * (base + rotations[t, i] @ (local[i] - local[j]))
                weight[t] += w
        use = (weight > 0) & (np.minimum(weight, 1.0) >= own_share[:, i])
        targets[use, i] = total[use] / weight[use, None]
        share[use, i] = PIVOT * np.minimum(weight[use], 1.0)


def initial_coordinates(tm: TargetModel, target: Target, desired: dict, hips_path: np.ndarray) -> np.ndarray:
    """Coordinates (F, n) that give every mapped bone its desired world rotation as nearly as its
    joints can (bones.coordinates_from_basis), unmapped bones rigid, and the hips' head on
    hips_path (F, 3): the solve's start. Below its nearest mapped ancestor a, a bone s stands
    as in the rest pose (world rotations W at zero coordinates): before its joints it is turned
    by desired[a] W_a^T W_s."""
    model = tm.model
    F, S = hips_path.shape[0], len(model.segments)
    rest = forward_kinematics(model, np.zeros((1, model.n_coordinates))).frames[0, :, :3, :3]
    role_of = {s: r for r, s in tm.role_segment.items()}
    basis = np.zeros((F, S, 4, 4))
    basis[..., :, :] = np.eye(4)
    for s, role in role_of.items():
        a = model.parent[s]
        while a >= 0 and a not in role_of:
            a = model.parent[a]
        before = rest[s] if a < 0 else desired[role_of[a]] @ (rest[a].T @ rest[s])
        basis[:, s, :3, :3] = np.swapaxes(before, -1, -2) @ desired[role]
    q = coordinates_from_basis(model, basis)
    hips = np.asarray(target.bone("hips").matrix, float)
    q[:, tm.root_translation] = (hips_path - hips[:3, 3]) @ hips[:3, :3]
    return q


def _result(tm, target, problem, solution, desired, spans, pins, names, k, calibration, began) -> RetargetResult:
    model, q = tm.model, solution.q
    frames = forward_kinematics(model, q).frames
    contacts = _points(frames, problem.contact_segments, problem.contact_local)
    pin_error = np.where(problem.pinned, np.linalg.norm(contacts - problem.pins, axis=-1), np.nan)
    floor_penetration = np.maximum(problem.floor - contacts @ problem.up, 0.0)
    style = {}
    for role, segment in tm.role_segment.items():
        parent = mapped_parent(role, target.roles)
        solved, wanted = frames[:, segment, :3, :3], desired[role]
        if parent is not None:
            p = tm.role_segment[parent]
            solved = np.swapaxes(frames[:, p, :3, :3], -1, -2) @ solved
            wanted = np.swapaxes(desired[parent], -1, -2) @ wanted
        angle = np.linalg.norm(log_map(np.swapaxes(wanted, -1, -2) @ solved), axis=-1)
        style[role] = float(angle.mean())
    return RetargetResult(
        q=q,
        local_rotations=segment_motions(model, q)[:, tm.segment, :3, :3],
        root_translation=q[:, tm.root_translation],
        world=frames[:, tm.segment],
        contacts=spans,
        pins=pins,
        pin_error=pin_error,
        floor_penetration=floor_penetration,
        floor=float(problem.floor),
        style_difference=style,
        converged=solution.converged,
        iterations=solution.iterations,
        scale=float(k),
        seconds=time.perf_counter() - began,
        model=tm,
        bone_names=tm.bone_names,
        contact_names=tuple(names),
        calibration=calibration,
        frames=np.arange(q.shape[0]),
    )

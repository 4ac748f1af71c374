"""Contact spans of a point: when it rests on the floor; the floor itself, from the contacts.

A point is in contact at frame t when it moves slowly and is near the floor. With its speed
v(t) = min(|p(t) - p(t-1)|, |p(t+1) - p(t)|) fps (point_speed) and its height h(t) = up . p(t) - floor,
a contact begins where v < speed * size and h < height * size, and lasts until v exceeds
hysteresis * speed * size or h exceeds hysteresis * height * size (entering takes the strict
thresholds, leaving the looser ones, so a noisy plateau does not chatter). Each span's ends are
then trimmed to the frames where the point lies within lift * size of the span's own level (its
median height): a heel that starts to rise (heel-off) leaves its span there, not once hysteresis
lets it go. Spans shorter than `min_frames` are dropped. `size` is the character's size in scene
units (its leg length), so the thresholds are in leg lengths per second and leg lengths.

The floor, where not given, is a low percentile of the points' heights over the clip; `fit_floor`
fits a plane (a height and a slope) to where the points rest during their spans.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, order=True)
class Span:
    """Frames start..end (inclusive, 0-based source frames) of one contact."""

    start: int
    end: int

    def __post_init__(self):
        if int(self.start) != self.start or int(self.end) != self.end or self.start < 0 or self.end < self.start:
            raise ValueError(f"span {self.start}..{self.end} is not a range of frames (0 <= start <= end)")
        object.__setattr__(self, "start", int(self.start))
        object.__setattr__(self, "end", int(self.end))

    @property
    def frames(self) -> np.ndarray:
        return np.arange(self.start, self.end + 1)

    def __len__(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True)
class ContactDetection:
    """Thresholds of detect_contacts, in leg lengths (per second): enter below `speed` and
    `height`, leave above `hysteresis` times them; spans shorter than `min_frames` are dropped."""

    speed: float = 0.6
    height: float = 0.08
    hysteresis: float = 1.5
    min_frames: int = 3
    percentile: float = 5.0       # the floor estimate: this percentile of the contact points' heights
    lift: float = 0.005           # a span ends where its point rises this far above the span's level

    def __post_init__(self):
        for name in ("speed", "height", "percentile", "lift"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"contact detection: {name} = {value} must be a positive number")
        if not (np.isfinite(self.hysteresis) and self.hysteresis >= 1.0):
            raise ValueError(f"contact detection: hysteresis = {self.hysteresis} must be >= 1")
        if int(self.min_frames) != self.min_frames or self.min_frames < 1:
            raise ValueError(f"contact detection: min_frames = {self.min_frames} must be a whole number >= 1")


def unit_up(up) -> np.ndarray:
    up = np.asarray(up, dtype=float)
    norm = np.linalg.norm(up)
    if up.shape != (3,) or not np.isfinite(norm) or norm < 1e-12:
        raise ValueError(f"up {up} is not a direction")
    return up / norm


def estimate_floor(points, up=(0.0, 0.0, 1.0), percentile: float = 5.0) -> float:
    """The floor height along `up`: the `percentile` of the heights of all `points` (..., 3)."""
    points = np.asarray(points, dtype=float)
    heights = (points @ unit_up(up)).ravel()
    heights = heights[np.isfinite(heights)]
    if not heights.size:
        raise ValueError("no finite points to estimate the floor from")
    return float(np.percentile(heights, percentile))


def point_speed(points: np.ndarray, fps: float) -> np.ndarray:
    """The slower of the point's speeds over the frame before and the frame after (F,), in units
    per second (one side at the ends): a planted point is still on both sides of each of its
    frames, the first and last ones included, while a moving one moves on both."""
    F = points.shape[0]
    if F < 2:
        return np.zeros(F)
    step = np.linalg.norm(np.diff(points, axis=0), axis=-1) * fps
    before = np.concatenate([step[:1], step])
    after = np.concatenate([step, step[-1:]])
    return np.minimum(before, after)


def detect_contacts(points, fps: float, *, up=(0.0, 0.0, 1.0), floor: float | None = None, size: float = 1.0,
                    detection: ContactDetection = ContactDetection()) -> list:
    """Contact spans (a list of Span, in order) of one point's path `points` (F, 3) sampled at
    `fps`, as the module docstring describes; `floor` None estimates it from this path."""
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"contact points must have shape (frames, 3), got {points.shape}")
    if not points.shape[0]:
        raise ValueError("contact points have zero frames")
    if not np.all(np.isfinite(points)):
        bad = np.flatnonzero(~np.isfinite(points).all(axis=1))
        raise ValueError(f"contact points are not finite in frame(s) {bad[:10].tolist()}")
    if not (np.isfinite(fps) and fps > 0) or not (np.isfinite(size) and size > 0):
        raise ValueError(f"fps {fps} and size {size} must be positive numbers")
    up = unit_up(up)
    if floor is None:
        floor = estimate_floor(points, up, detection.percentile)
    height = points @ up - floor
    speed = point_speed(points, fps)
    enter = (speed < detection.speed * size) & (height < detection.height * size)
    stay = (speed <= detection.hysteresis * detection.speed * size) & \
        (height <= detection.hysteresis * detection.height * size)
    index = np.arange(points.shape[0])
    last_break = np.maximum.accumulate(np.where(stay, -1, index))
    last_enter = np.maximum.accumulate(np.where(enter, index, -1))
    spans = [trimmed(s, height, detection.lift * size) for s in spans_of(stay & (last_enter > last_break))]
    return [s for s in spans if s is not None and len(s) >= detection.min_frames]


def trimmed(span: Span, height: np.ndarray, lift: float) -> Span | None:
    """The span without its first and last frames where the point lies more than `lift` above
    the span's median height (None: no frame is within it)."""
    h = height[span.start:span.end + 1]
    low = np.flatnonzero(h <= np.median(h) + lift)
    return Span(span.start + int(low[0]), span.start + int(low[-1])) if low.size else None


@dataclass(frozen=True)
class Floor:
    """A floor plane: the points p with normal . p = offset (normal a unit vector near `up`).
    `slope` is its angle to the plane across `up` (radians)."""

    normal: np.ndarray
    offset: float

    def height(self, points) -> np.ndarray:
        """Distance (...) of `points` (..., 3) above the plane along its normal."""
        return np.asarray(points, float) @ self.normal - self.offset

    def slope(self, up) -> float:
        return float(np.arccos(np.clip(self.normal @ unit_up(up), -1.0, 1.0)))

    def height_at(self, point, up) -> float:
        """The plane's height along `up` at the foot of `point` (the point's height along `up`
        removed): where a vertical line through it meets the plane."""
        up = unit_up(up)
        ground = np.asarray(point, float) - (np.asarray(point, float) @ up) * up
        return float((self.offset - self.normal @ ground) / (self.normal @ up))

    def raised(self, distance: float, up) -> "Floor":
        """The plane moved by `distance` along `up`."""
        return Floor(self.normal, float(self.offset + distance * (self.normal @ unit_up(up))))


def level_floor(height: float, up) -> Floor:
    return Floor(unit_up(up), float(height))


def fit_floor(rests, weights, up, size: float, spread: float = 0.5) -> Floor:
    """The plane through the rest positions `rests` (k, 3) (where contact points stood during
    their spans, weighted by `weights` (k,), e.g. span lengths): their heights along `up` fitted
    by weighted least squares as h = c + s . x over their positions x across `up`, the slope s
    only along the principal directions in which those positions spread (standard deviation)
    more than `spread` leg lengths `size`: a straight walk gives the slope along its way and none
    across it, where its two feet's few centimetres apart cannot tell a slope from how each foot
    was calibrated; a clip standing still gives a level floor. No rest position: level at 0."""
    up = unit_up(up)
    rests = np.asarray(rests, float).reshape(-1, 3)
    weights = np.asarray(weights, float).reshape(-1)
    if not rests.shape[0]:
        return level_floor(0.0, up)
    w = weights / weights.sum()
    h = rests @ up
    x = rests - h[:, None] * up                                    # positions across up (k, 3)
    d = x - w @ x
    variance, directions = np.linalg.eigh((d * w[:, None]).T @ d)
    slope = np.zeros(3)
    for var, e in zip(variance, directions.T):
        if abs(e @ up) < 0.5 and var > (spread * size) ** 2:      # a direction across up, spread enough
            u = d @ e                                             # orthogonal: one regression each
            slope += (w @ (u * (h - w @ h))) / (w @ (u * u)) * e
    normal = up - slope
    normal = normal / np.linalg.norm(normal)
    point = w @ x + (w @ h) * up
    return Floor(normal, float(normal @ point))


def spans_of(mask) -> list:
    """The runs of True in a boolean mask (F,) as Spans."""
    edges = np.diff(np.concatenate([[0], np.asarray(mask, dtype=np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return [Span(int(a), int(b)) for a, b in zip(starts, ends)]

"""Keypoint sets read from their tables (tables.py): names in the format's order, each keypoint's
parent, the bone role it rides on and where on that bone it starts (head, tail, mid)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from ..retarget.roles import check_role
from .tables import TABLES

PLACES = ("head", "tail", "mid")


@dataclass(frozen=True)
class KeypointSet:
    """One keypoint set: per keypoint (in the format's order) `names`, `parents` (None for a
    root), `roles` and `at`."""

    name: str
    names: tuple
    parents: tuple
    roles: tuple
    at: tuple

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"{self.name} has no keypoint {name!r}") from None


def parse_table(name: str, text: str) -> KeypointSet:
    """A KeypointSet from CSV text with the columns name, parent, role, at; ValueError naming the
    row where something is wrong."""
    rows = list(csv.DictReader(io.StringIO(text.strip())))
    if not rows or set(rows[0]) != {"name", "parent", "role", "at"}:
        raise ValueError(f"keypoint set {name}: the table needs the columns name, parent, role, at")
    names = [r["name"].strip() for r in rows]
    for i, r in enumerate(rows, start=2):
        where = f"keypoint set {name}, row {i}"
        if not names[i - 2] or names.count(names[i - 2]) > 1:
            raise ValueError(f"{where}: the name {names[i - 2]!r} is empty or repeats")
        parent = (r["parent"] or "").strip()
        if parent and parent not in names:
            raise ValueError(f"{where}: parent {parent!r} is not a keypoint of the set")
        check_role(r["role"].strip(), f"role of {names[i - 2]!r} in {name}")
        if r["at"].strip() not in PLACES:
            raise ValueError(f"{where}: 'at' must be one of {PLACES}, not {r['at']!r}")
    return KeypointSet(name, tuple(names), tuple((r["parent"] or "").strip() or None for r in rows),
                       tuple(r["role"].strip() for r in rows), tuple(r["at"].strip() for r in rows))


KEYPOINT_SETS = {name: parse_table(name, text) for name, text in TABLES.items()}


def keypoint_set(name: str) -> KeypointSet:
    """The set called `name` (any case; '-' or '_' between name and count)."""
    key = name.upper().replace("-", "_")
    if key not in KEYPOINT_SETS:
        raise ValueError(f"unknown keypoint set {name!r}; the sets are {', '.join(KEYPOINT_SETS)}")
    return KEYPOINT_SETS[key]


def set_naming(names) -> KeypointSet | None:
    """The smallest set whose names include all of `names` (a file may hold a subset, as
    Pose2Sim's 21 of HALPE_26), or None."""
    fits = [s for s in KEYPOINT_SETS.values() if set(names) <= set(s.names)]
    return min(fits, key=len) if fits else None


def sets_of_size(count: int) -> list:
    """The sets with exactly `count` keypoints (COCO_17 and H36M_17 share 17)."""
    return [s for s in KEYPOINT_SETS.values() if len(s) == count]

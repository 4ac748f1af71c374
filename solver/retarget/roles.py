"""The vocabulary of roles: the names both sides of a retarget share for a humanoid's bones.

A bone map (the Blender side's presets) says which bone of a skeleton plays each role; the source
and the target are described per role. ROLE_PARENT gives each role's parent role: a role's local
rotation (for the style figure) is taken relative to its nearest mapped ancestor role.
"""

from __future__ import annotations

_SIDED = ("shoulder", "upper_arm", "forearm", "hand", "thigh", "shin", "foot", "toe")

ROLES: tuple = ("hips", "spine", "chest", "upper_chest", "neck", "head") + tuple(
    f"{name}.{side}" for side in ("L", "R") for name in _SIDED)

ROLE_PARENT: dict = {
    "hips": None, "spine": "hips", "chest": "spine", "upper_chest": "chest", "neck": "upper_chest",
    "head": "neck",
    **{f"shoulder.{s}": "upper_chest" for s in "LR"},
    **{f"upper_arm.{s}": f"shoulder.{s}" for s in "LR"},
    **{f"forearm.{s}": f"upper_arm.{s}" for s in "LR"},
    **{f"hand.{s}": f"forearm.{s}" for s in "LR"},
    **{f"thigh.{s}": "hips" for s in "LR"},
    **{f"shin.{s}": f"thigh.{s}" for s in "LR"},
    **{f"foot.{s}": f"shin.{s}" for s in "LR"},
    **{f"toe.{s}": f"foot.{s}" for s in "LR"},
}

LEG_ROLES: tuple = ("thigh.L", "shin.L", "foot.L", "thigh.R", "shin.R", "foot.R")
REQUIRED_ROLES: tuple = ("hips",) + LEG_ROLES
EFFECTOR_ROLES: tuple = ("hand.L", "hand.R", "head", "foot.L", "foot.R")


def check_role(role: str, what: str = "role") -> None:
    """ValueError naming `role` when it is not in ROLES."""
    if role not in ROLE_PARENT:
        raise ValueError(f"unknown {what} {role!r}; roles are {', '.join(ROLES)}")


def mapped_parent(role: str, mapped) -> str | None:
    """The nearest ancestor role of `role` that is in `mapped` (None: none is)."""
    parent = ROLE_PARENT[role]
    while parent is not None and parent not in mapped:
        parent = ROLE_PARENT[parent]
    return parent


def missing_required(mapped) -> list:
    """The required roles (hips and both legs down to the foot) not in `mapped`."""
    return [r for r in REQUIRED_ROLES if r not in mapped]

"""A keypoint trial for the Blender side: a path read by the engine's readers
(`solver.keypoints.read_keypoints`) or a `KeypointTrial` given, turned Z up as Blender's world
is. Whatever is wrong comes back as a `RigError` saying what to change: a file that is missing
or unreadable, an unknown keypoint set, an up direction the format does not fix."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ...solver.keypoints import KeypointFileError, KeypointTrial, keypoint_set, read_keypoints
from ..rig import RigError


def chosen_set(name):
    """The KeypointSet called `name` (None: as the file says)."""
    if name is None or name == "":
        return None
    try:
        return keypoint_set(name)
    except ValueError as err:
        raise RigError(f"{err}; nothing was written") from None


def load_trial(trial_or_path, what="keypoint file", keypoint_set=None, **options) -> KeypointTrial:
    """The trial Z up: `trial_or_path` a KeypointTrial or a path (options as `read_keypoints`'s:
    rate, units, up); `keypoint_set` a set's name, for a file or trial that does not say which."""
    chosen = chosen_set(keypoint_set)
    if isinstance(trial_or_path, KeypointTrial):
        trial = trial_or_path if chosen is None else replace(trial_or_path, keypoint_set=chosen)
    else:
        path = Path(str(trial_or_path)).expanduser()
        if not path.is_file():
            raise RigError(f"{what} {str(path)!r} does not exist; nothing was written")
        try:
            trial = read_keypoints(path, keypoint_set=None if chosen is None else chosen.name, **options)
        except (KeypointFileError, OSError, ValueError) as err:
            raise RigError(f"could not read the {what}: {err}; nothing was written") from None
    try:
        return trial.z_up()
    except ValueError as err:
        raise RigError(f"{err} (pass up=(x, y, z), the file's up direction); nothing was written") from None

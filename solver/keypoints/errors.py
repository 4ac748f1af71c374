"""The error keypoint readers raise: an OpenSimFileError (file, line or None, reason), so that code
catching malformed marker files catches malformed keypoint files too."""

from __future__ import annotations

from ..opensim.errors import OpenSimFileError


class KeypointFileError(OpenSimFileError):
    """Malformed or unsupported input in a keypoint file."""

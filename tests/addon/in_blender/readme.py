"""The README's "Using it from Python" snippet, run inside Blender as a user's script runs it."""

import os

import addon_utils


def run_snippet(snippet, folder, module):
    """Exec `snippet` (the README's text, unchanged) from the working directory `folder`, as a
    script would; then whether the extension `module` is enabled and what the bake it ran gave."""
    os.chdir(folder)
    namespace = {"__name__": "__blender_snippet__"}
    exec(compile(snippet, "README.md", "exec"), namespace)
    result = namespace["result"]
    return {"enabled": addon_utils.check(module), "frames": result.frames.tolist(),
            "error": float(result.position_error.max()), "converged": bool(result.converged.all()),
            "past_floor": float((result.position_error - result.float32_floor).max())}

"""OpenSim's own files and its Python package: the references the OpenSim tests check against."""

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "opensim_gait2354"
GAIT = DATA / "subject01_simbody.osim"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared/data/opensim_gait2354 is not beside the repository")


def opensim():
    """The `opensim` package, quiet and writing no opensim.log; the test is skipped without it."""
    osim = pytest.importorskip("opensim", reason="the opensim package (pip install opensim) is the reference")
    osim.Logger.removeFileSink()
    osim.Logger.setLevelString("error")
    return osim


def opensim_if_installed():
    """The `opensim` package as `opensim()` gives it, or None where it is not installed (the
    engine-only CI venvs): a test then keeps its own assertions and leaves out OpenSim's cross-check."""
    try:
        return opensim()
    except pytest.skip.Exception:
        return None

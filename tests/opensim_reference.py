"""OpenSim's own files and its Python package: the references the OpenSim tests check against."""

from pathlib import Path

import numpy as np
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


def unlocked_model(osim, path):
    """(model, state, coordinate set) of an .osim file with every coordinate unlocked."""
    model = osim.Model(str(path))
    state = model.initSystem()
    coordinates = model.getCoordinateSet()
    for i in range(coordinates.getSize()):
        coordinates.get(i).setLocked(state, False)
    return model, state, coordinates


def scaled_by_opensim(osim, path, factors):
    """(model, state) of an .osim file scaled by OpenSim's own Model::scale, factors {body: (x, y,
    z)}, mass distribution preserved, no target mass (-1), as ScaleTool's ModelScaler calls it."""
    model = osim.Model(str(path))
    state = model.initSystem()
    scale_set = osim.ScaleSet()
    for body, f in factors.items():
        scale = osim.Scale()
        scale.setSegmentName(body)
        scale.setScaleFactors(osim.Vec3(*f))
        scale.setApply(True)
        scale_set.cloneAndAppend(scale)
    assert model.scale(state, scale_set, True, -1.0)
    return model, state


def assembled_motion(osim, path, coupling, frames: int, rate: float, noise: float = 0.0):
    """(MarkerData, the coordinates OpenSim assembled (frames, n)): every free coordinate of the
    model at `path` (`coupling`: its load_osim coupling) on a sine of amplitude 0.25 at 1.5 Hz
    about its default, each frame assembled by OpenSim onto its constraints; its markers, with
    Gaussian noise of scale `noise` (m), are the data."""
    from solver.opensim import MarkerData

    model, state, coordinates = unlocked_model(osim, path)
    n = coordinates.getSize()
    time = np.arange(frames) / rate
    phase = np.random.default_rng(7).uniform(0, 2 * np.pi, n)
    q = coupling.default + np.where(coupling.locked, 0.0, 0.25) * np.sin(2 * np.pi * 1.5 * time[:, None] + phase)
    markers = model.getMarkerSet()
    names = [markers.get(k).getName() for k in range(markers.getSize())]
    truth, positions = np.empty_like(q), np.empty((frames, len(names), 3))
    for f in range(frames):
        for i in range(n):
            coordinates.get(i).setValue(state, float(q[f, i]), False)
        model.assemble(state)
        truth[f] = [coordinates.get(i).getValue(state) for i in range(n)]
        model.realizePosition(state)
        positions[f] = [[markers.get(k).getLocationInGround(state).get(i) for i in range(3)] for k in range(len(names))]
    positions = positions + np.random.default_rng(3).normal(scale=noise, size=positions.shape)
    return MarkerData(names=names, time=time, positions=positions, frame_numbers=np.arange(1, frames + 1),
                      data_rate=rate, camera_rate=rate), truth

"""Model marker positions and their Jacobians with respect to OpenSim coordinates.

A marker at location l (in the frame of body s) is, for coordinates q (F, n_q),

    x(q) = R_s(theta) l + o_s(theta),   theta = coupling.dofs(q),

and its Jacobian follows by the chain rule through the coupling:

    dx/dq = (dx/dtheta) (dtheta/dq),

where dx/dtheta is the linear part (rows 0-2) of the engine's point Jacobian: for an engine
rotation with world axis w about the point o, w x (x - o); for a translation along u, u.
"""

from __future__ import annotations

import numpy as np

from ..kinematics import forward_kinematics, point_jacobian


def _selection(om, names):
    if names is None:
        return np.arange(len(om.markers.names))
    return om.markers.index(names)


def _positions(pose, segments, locations):
    T = pose.frames[:, segments]                             # (F, M, 4, 4)
    R, o = T[..., :3, :3], T[..., :3, 3]
    return np.einsum("fmij,mj->fmi", R, locations) + o


def marker_positions(om, q, names=None) -> np.ndarray:
    """World positions (F, M, 3) of the model markers `names` (all when None, in model order) of
    the OpenSimModel `om` for coordinates q (F, n_q)."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    sel = _selection(om, names)
    pose = forward_kinematics(om.model, om.coupling.dofs(q))
    return _positions(pose, om.markers.segments[sel], om.markers.locations[sel])


def marker_jacobian(om, q, names=None, with_positions: bool = False):
    """d x / d q (F, M, 3, n_q) for the markers `names` (all when None); with `with_positions`,
    the tuple (positions (F, M, 3), Jacobian)."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    sel = _selection(om, names)
    segments, locations = om.markers.segments[sel], om.markers.locations[sel]
    pose = forward_kinematics(om.model, om.coupling.dofs(q))
    x = _positions(pose, segments, locations)
    J_theta = point_jacobian(om.model, pose, segments, x)[:, :, :3, :]     # (F, M, 3, n_dof)
    J = J_theta @ om.coupling.jacobian(q)[:, None]                        # (F, M, 3, n_q)
    return (x, J) if with_positions else J

"""Rotations as batched numpy arrays: axis-angle, rotation vectors and their Jacobians.

Every function takes arrays with arbitrary leading axes (frames, joints, ...) and works on the
trailing 3 or 3x3 axes.

The rotation vector phi (axis * angle) maps to R = exp([phi]x). Its time derivative gives the
angular velocity in the frame the rotation is applied in ("spatial" velocity):

    omega = J(phi) phi',   J(phi) = I + (1 - cos t)/t^2 [phi]x + (t - sin t)/t^3 [phi]x^2,  t = |phi|

and the inverse J(phi)^-1 = I - 1/2 [phi]x + (1/t^2)(1 - t sin t / (2 (1 - cos t))) [phi]x^2.
"""

from __future__ import annotations

import functools

import numpy as np

# Below this angle the closed forms lose precision and their Taylor series take over.
_SMALL = 1e-4
_IDENTITY = np.eye(3)
# Shepperd's method (quaternion_from_matrix): the signs of R00, R11, R22 in 4 q_k^2 - 1 for k = w, x, y, z,
# and per pivot k the entries of R (flat, row-major) whose sum or difference (sign) is 4 q_i q_k, i = w, x, y, z
# (the pivot's own entry is replaced).
_SQUARE_SIGNS = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=float)
_PRODUCT_INDEX = (np.array([[0, 7, 2, 3], [7, 0, 1, 2], [2, 1, 0, 5], [3, 2, 5, 0]]),
                  np.array([[0, 5, 6, 1], [5, 0, 3, 6], [6, 3, 0, 7], [1, 6, 7, 0]]))
_PRODUCT_SIGNS = np.array([[0, -1, -1, -1], [-1, 0, 1, 1], [-1, 1, 0, 1], [-1, 1, 1, 0]], dtype=float)
# (R - R^T) read at (2, 1), (0, 2), (1, 0): the axis of R times 2 sin t.
_VEE_ROWS, _VEE_COLUMNS = np.array([2, 0, 1]), np.array([1, 2, 0])
# [v]x = v_x E_x + v_y E_y + v_z E_z, the three generators flattened as rows (one product builds it)
_SKEW_BASIS = np.array([[0, 0, 0, 0, 0, -1, 0, 1, 0],
                        [0, 0, 1, 0, 0, 0, -1, 0, 0],
                        [0, -1, 0, 1, 0, 0, 0, 0, 0]], dtype=float)


def skew(v: np.ndarray) -> np.ndarray:
    """[v]x, the cross-product matrix: skew(a) @ b == cross(a, b)."""
    v = np.asarray(v, dtype=float)
    return (v @ _SKEW_BASIS).reshape(v.shape + (3,))


def axis_angle_matrix(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rotation by `angle` about the unit `axis` (Rodrigues): I + sin a [k]x + (1 - cos a) [k]x^2."""
    k = skew(axis)
    return rodrigues(k, k @ k, angle)


def rodrigues(k: np.ndarray, k2: np.ndarray, angle) -> np.ndarray:
    """I + sin a k + (1 - cos a) k2 for k = [axis]x and k2 = k @ k given (fixed axes: computed once)."""
    a = np.asarray(angle, dtype=float)[..., None, None]
    return _IDENTITY + np.sin(a) * k + (1.0 - np.cos(a)) * k2


def in_place(function, out: np.ndarray, angle) -> np.ndarray:
    """`function` (np.sin, np.cos) of `angle` written into `out`, computed in place there.

    numpy 1.24 on AVX-512 computes float64 sin and cos with SVML unless its overlap check, which
    takes each operand to end one stride past its last element, finds input and output touching;
    then it falls back to libm, which differs from SVML by up to a few units in the last place. A
    strided view as output, or a buffer numpy allocates for the call, touches the other operand or
    not as the heap happens to lie, so the same angles could give other bits in the next solve.
    In place, the two operands are one range, which the check always lets through."""
    out[...] = angle
    return function(out, out=out)


def axis_rotation(axis: int, angle) -> np.ndarray:
    """Rotation matrices (..., 3, 3) about body axis 0 (x), 1 (y) or 2 (z)."""
    angle = np.asarray(angle, float)
    c, s = np.cos(angle), np.sin(angle)
    R = np.zeros(angle.shape + (3, 3))
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    R[..., axis, axis] = 1.0
    R[..., i, i] = c
    R[..., j, j] = c
    R[..., i, j] = -s
    R[..., j, i] = s
    return R


# The Taylor series in t^2 of (c, b, a) below, used where t < _SMALL: (1, t^2, t^4) @ _SERIES
_POWERS = np.arange(3.0)
_SERIES = np.array([[1 / 6, 0.5, 1.0], [-1 / 120, -1 / 24, -1 / 6], [1 / 5040, 1 / 720, 1 / 120]])
_IDENTITY9 = _IDENTITY.ravel()


def exp_map(phi: np.ndarray) -> np.ndarray:
    """R = exp([phi]x) for rotation vectors phi (..., 3)."""
    return exp_map_with_jacobian(phi)[0]


def exp_map_with_jacobian(phi: np.ndarray):
    """R = exp([phi]x) and J(phi), sharing their coefficients. With t = |phi| and
    [phi]x^2 = phi phi^T - t^2 I,

        R = b phi phi^T + a [phi]x + cos t I,     J = c phi phi^T + b [phi]x + a I,
        a = sin t / t,  b = (1 - cos t) / t^2,  c = (t - sin t) / t^3

    (below t = _SMALL their Taylor series in t^2, and cos t = 1 - b t^2), both as one product of
    the coefficients (N, 2, 3) with the basis [phi phi^T, [phi]x, I] (N, 3, 9) over the N rotation
    vectors: few numpy calls for one rotation vector, few passes over memory for many."""
    phi = np.asarray(phi, dtype=float)
    v = phi if phi.ndim == 2 else phi.reshape(-1, 3)
    N = v.shape[0]
    t2 = (v[:, None, :] @ v[:, :, None]).reshape(N)
    # (Python's min of a short list costs less than numpy's reduction; a long one far more.)
    any_small = (min(t2.tolist(), default=np.inf) if N <= 64 else t2.min(initial=np.inf)) < _SMALL * _SMALL
    if any_small:
        small = t2 < _SMALL * _SMALL
        ts2 = np.where(small, 1.0, t2)
    else:
        ts2 = t2
    t = np.sqrt(ts2)
    coefficients = np.empty((N, 2, 3))
    R, J = coefficients[:, 0], coefficients[:, 1]
    sin = in_place(np.sin, J[:, 2], t)
    cos = in_place(np.cos, R[:, 2], t)
    np.divide(1.0 - cos, ts2, out=J[:, 1])                             # b
    np.divide(t - sin, ts2 * t, out=J[:, 0])                           # c
    np.divide(sin, t, out=sin)                                         # a
    if any_small:
        J[small] = (t2[small, None] ** _POWERS) @ _SERIES
        R[small, 2] = 1.0 - J[small, 1] * t2[small]
    R[:, :2] = J[:, 1:]
    basis = _rotation_vector_basis(N).copy()
    np.multiply(v[:, :, None], v[:, None, :], out=basis[:, 0].reshape(N, 3, 3))
    np.matmul(v, _SKEW_BASIS, out=basis[:, 1])
    RJ = (coefficients @ basis).reshape(phi.shape[:-1] + (2, 3, 3))
    return (RJ[:, 0], RJ[:, 1]) if phi.ndim == 2 else (RJ[..., 0, :, :], RJ[..., 1, :, :])


@functools.lru_cache(maxsize=16)
def _rotation_vector_basis(N: int) -> np.ndarray:
    """exp_map_with_jacobian's basis for N rotation vectors, its constant row I filled in
    (copied per call: one numpy call where filling it would take another)."""
    basis = np.zeros((N, 3, 9))
    basis[:, 2] = _IDENTITY9
    return basis


def log_map(R: np.ndarray) -> np.ndarray:
    """The rotation vector phi with |phi| <= pi and exp([phi]x) == R, for rotations R (..., 3, 3)."""
    R = np.asarray(R, dtype=float)
    trace = R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
    cos_t = np.minimum(np.maximum((trace - 1.0) / 2.0, -1.0), 1.0)
    vee = R[..., _VEE_ROWS, _VEE_COLUMNS] - R[..., _VEE_COLUMNS, _VEE_ROWS]     # = 2 sin t * axis
    sin_t = 0.5 * np.sqrt((vee * vee).sum(axis=-1))
    t = np.arctan2(sin_t, cos_t)
    # Away from t = pi, phi = t / (2 sin t) * vee, with the Taylor series of t/sin t near zero.
    small = t < _SMALL
    ratio = 0.5 * t / np.maximum(sin_t, 1e-300)
    if small.any():
        ratio = np.where(small, 0.5 + t * t / 12.0, ratio)
    phi = ratio[..., None] * vee
    # Near t = pi, sin t vanishes; read the axis from the symmetric part R + R^T = 2 cos t I + 2 (1 - cos t) k k^T.
    near_pi = cos_t < -0.99
    if near_pi.any():
        S = (R[near_pi] + np.swapaxes(R[near_pi], -1, -2)) / 2.0
        kk = (S - cos_t[near_pi][..., None, None] * np.eye(3)) / (1.0 - cos_t[near_pi])[..., None, None]
        column = np.argmax(np.diagonal(kk, axis1=-2, axis2=-1), axis=-1)
        axis = np.take_along_axis(kk, column[..., None, None], axis=-1)[..., 0]
        axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
        # Choose the sign of the axis that agrees with the antisymmetric part (sin t >= 0).
        sign = np.where(np.sum(axis * vee[near_pi], axis=-1) < 0.0, -1.0, 1.0)
        phi[near_pi] = (sign * t[near_pi])[..., None] * axis
    return phi


def rotvec_jacobian(phi: np.ndarray) -> np.ndarray:
    """J(phi) with omega = J(phi) phi' (angular velocity in the frame exp(phi) is applied in)."""
    return exp_map_with_jacobian(phi)[1]


def rotvec_jacobian_inverse(phi: np.ndarray) -> np.ndarray:
    """J(phi)^-1, so that phi' = J(phi)^-1 omega. Finite for |phi| < 2 pi."""
    phi = np.asarray(phi, dtype=float)
    k = skew(phi)
    t2 = (phi * phi).sum(axis=-1)
    t = np.sqrt(t2)
    small = t < _SMALL
    any_small = small.any()
    ts = np.where(small, 1.0, t) if any_small else t
    d = (1.0 - ts * np.sin(ts) / (2.0 * (1.0 - np.cos(ts)))) / ts**2
    if any_small:
        d = np.where(small, 1.0 / 12.0 + t2 / 720.0, d)
    return _IDENTITY - 0.5 * k + d[..., None, None] * (k @ k)


def quaternion_from_rotvec(phi: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of the rotation vector phi."""
    phi = np.asarray(phi, dtype=float)
    t = np.linalg.norm(phi, axis=-1)
    half = 0.5 * t
    small = t < _SMALL
    s = np.where(small, 0.5 - t * t / 48.0, np.sin(half) / np.where(small, 1.0, t))
    return np.concatenate([np.cos(half)[..., None], s[..., None] * phi], axis=-1)


def rotvec_from_quaternion(quat: np.ndarray) -> np.ndarray:
    """Rotation vector of the unit quaternion (w, x, y, z); the short way round (angle <= pi)."""
    quat = np.asarray(quat, dtype=float)
    quat = np.where(quat[..., :1] < 0.0, -quat, quat)
    v = quat[..., 1:]
    s = np.linalg.norm(v, axis=-1)
    t = 2.0 * np.arctan2(s, quat[..., 0])
    small = s < _SMALL
    w = np.where(small, np.maximum(quat[..., 0], 1e-300), 1.0)        # the series' w (1 elsewhere: no overflow)
    ratio = np.where(small, 2.0 / w * (1.0 - (s / w) ** 2 / 3.0), t / np.where(small, 1.0, s))
    return ratio[..., None] * v


def quaternion_from_matrix(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of rotation matrices (..., 3, 3) by Shepperd's method: with
    t = tr R, the largest of 4w^2 = 1 + t, 4x^2 = 1 + 2 R00 - t, 4y^2 = 1 + 2 R11 - t and
    4z^2 = 1 + 2 R22 - t gives that component (s = 4 times it), and the others come from the
    off-diagonal sums and differences divided by s (R21 - R12 = 4 w x, R01 + R10 = 4 x y, ...).
    Never dividing by a small component keeps every component accurate to rounding, near 180
    degrees too. The largest component comes out positive; callers pick the hemisphere."""
    R = np.asarray(R, float)
    flat = R.reshape(R.shape[:-2] + (9,))
    diagonal = flat[..., ::4]
    trace = diagonal[..., 0] + diagonal[..., 1] + diagonal[..., 2]
    pivot = np.argmax(np.concatenate([trace[..., None], 2 * diagonal - trace[..., None]], -1), -1)[..., None]
    signs = _SQUARE_SIGNS[pivot[..., 0]]                                         # (..., 3)
    square = (1.0 + signs[..., 0] * diagonal[..., 0] + signs[..., 1] * diagonal[..., 1]
              + signs[..., 2] * diagonal[..., 2])                                # 4 q_pivot^2
    s = 2.0 * np.sqrt(square)[..., None]                                         # 4 q_pivot
    first, second = (np.take_along_axis(flat, index[pivot[..., 0]], -1) for index in _PRODUCT_INDEX)
    q = (first + _PRODUCT_SIGNS[pivot[..., 0]] * second) / s                   # 4 q_i q_pivot / s
    np.put_along_axis(q, pivot, 0.25 * s, -1)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)

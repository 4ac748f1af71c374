"""OpenSim's one-argument functions, as used by CustomJoint transform axes: value and first
derivative, batched over arrays of any shape.

    Constant(c)                   f(x) = c
    LinearFunction(a, b)          f(x) = a x + b                  (XML: <coefficients> a b)
    PolynomialFunction(c)         f(x) = sum_k c_k x^(m-k)        (coefficients by decreasing power)
    MultiplierFunction(g, s)      f(x) = s g(x)
    PiecewiseLinearFunction(x,y)  straight lines between the points
    SimmSpline(x, y)              cubic spline through the points, "as implemented in SIMM"
    NaturalCubicSpline(x, y)      cubic spline through the points with natural ends

The cubic splines. On [x_i, x_i+1], with h_i = x_i+1 - x_i and t = x - x_i,

    f(x) = y_i + b_i t + c_i t^2 + d_i t^3,
    c_i = M_i / 2,   d_i = (M_i+1 - M_i) / (6 h_i),   b_i = D_i - h_i (2 M_i + M_i+1) / 6,

where D_i = (y_i+1 - y_i) / h_i and the second derivatives M_i solve, at the interior knots
(continuity of f'),

    h_i-1 M_i-1 + 2 (h_i-1 + h_i) M_i + h_i M_i+1 = 6 (D_i - D_i-1),   i = 1 .. n-2,

closed by two end conditions:

    SimmSpline (n >= 4): the third derivative on the first (last) interval equals that of the
        cubic through the first (last) four points, which is 6 times their third divided
        difference:  M_1 - M_0 = 6 h_0 f[x_0..x_3],   M_n-1 - M_n-2 = 6 h_n-2 f[x_n-4..x_n-1].
        With n = 3 the third derivatives are zero (M_0 = M_1 = M_2: the parabola through the
        three points); with n = 2 the function is the straight line. These are the end
        conditions of the Forsythe-Malcolm-Moler spline routine that SIMM used; OpenSim documents
        SimmSpline only as "a cubic spline as implemented in SIMM", and the tests confirm the
        conditions against opensim.SimmSpline to ~1e-15.
    NaturalCubicSpline: M_0 = M_n-1 = 0 (n = 2: the straight line).

Outside [x_0, x_n-1] both splines (and PiecewiseLinearFunction) continue as the straight line
with the end value and end slope: f(x) = y_0 + f'(x_0) (x - x_0) to the left, likewise to the
right, f' constant there (this is what OpenSim does for SimmSpline and PiecewiseLinearFunction).

Note: OpenSim 4 reads a <NaturalCubicSpline> element as a SimmSpline (the type name is an alias
there). `function_from_xml` does the same by default so that models evaluate as in OpenSim;
pass `natural_spline="natural"` to get the natural end conditions instead.
"""

from __future__ import annotations

import numpy as np

from . import _xml
from .errors import OpenSimFileError


class Function:
    """f: R -> R applied elementwise. `affine` is (a, b) when f(x) = a x + b exactly, else None."""

    affine: tuple | None = None

    def value(self, x) -> np.ndarray:
        raise NotImplementedError

    def derivative(self, x) -> np.ndarray:
        raise NotImplementedError

    def value_and_derivative(self, x):
        """(f(x), f'(x)), sharing the work where a function can."""
        return self.value(x), self.derivative(x)

    def __call__(self, x) -> np.ndarray:
        return self.value(x)

    @property
    def is_constant(self) -> bool:
        return self.affine is not None and self.affine[0] == 0.0


class Constant(Function):
    def __init__(self, value: float):
        self.c = float(value)
        self.affine = (0.0, self.c)

    def value(self, x):
        return np.full(np.shape(x), self.c)

    def derivative(self, x):
        return np.zeros(np.shape(x))

    def __repr__(self):
        return f"Constant({self.c!r})"


class LinearFunction(Function):
    def __init__(self, slope: float = 1.0, intercept: float = 0.0):
        self.slope, self.intercept = float(slope), float(intercept)
        self.affine = (self.slope, self.intercept)

    def value(self, x):
        return self.slope * np.asarray(x, dtype=float) + self.intercept

    def derivative(self, x):
        return np.full(np.shape(x), self.slope)

    def __repr__(self):
        return f"LinearFunction({self.slope!r}, {self.intercept!r})"


class PolynomialFunction(Function):
    """f(x) = c_0 x^m + c_1 x^(m-1) + ... + c_m (Horner's rule)."""

    def __init__(self, coefficients):
        self.coefficients = np.atleast_1d(np.asarray(coefficients, dtype=float))
        if self.coefficients.size == 0:
            raise ValueError("a polynomial needs at least one coefficient")
        c = np.trim_zeros(self.coefficients, "f")
        if c.size <= 2:
            c = np.concatenate([np.zeros(2 - c.size), c])
            self.affine = (float(c[0]), float(c[1]))

    def value(self, x):
        x = np.asarray(x, dtype=float)
        out = np.zeros(x.shape)
        for c in self.coefficients:
            out = out * x + c
        return out

    def derivative(self, x):
        x = np.asarray(x, dtype=float)
        m = self.coefficients.size - 1
        out = np.zeros(x.shape)
        for k, c in enumerate(self.coefficients[:-1]):
            out = out * x + (m - k) * c
        return out

    def __repr__(self):
        return f"PolynomialFunction({self.coefficients.tolist()!r})"


class MultiplierFunction(Function):
    """f(x) = scale * g(x)."""

    def __init__(self, function: Function, scale: float = 1.0):
        self.function, self.scale = function, float(scale)
        if function.affine is not None:
            self.affine = (self.scale * function.affine[0], self.scale * function.affine[1])

    def value(self, x):
        return self.scale * self.function.value(x)

    def derivative(self, x):
        return self.scale * self.function.derivative(x)

    def value_and_derivative(self, x):
        value, slope = self.function.value_and_derivative(x)
        return self.scale * value, self.scale * slope

    def __repr__(self):
        return f"MultiplierFunction({self.function!r}, {self.scale!r})"


def _points(x, y, what):
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.size != y.size:
        raise ValueError(f"{what}: {x.size} x values but {y.size} y values")
    if x.size < 2:
        raise ValueError(f"{what}: needs at least 2 points, got {x.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError(f"{what}: points must be finite")
    if np.any(np.diff(x) <= 0):
        raise ValueError(f"{what}: x values must increase strictly")
    return x, y


def _computable(what, *coefficients):
    """Finite points can still be too large (or too close together) for the coefficients to be."""
    if not all(np.all(np.isfinite(c)) for c in coefficients):
        raise ValueError(f"{what}: the points are too large or too close together to compute with")


class PiecewiseLinearFunction(Function):
    """Straight lines between the points; the end segments' lines continue outside them."""

    def __init__(self, x, y):
        self.x, self.y = _points(x, y, "PiecewiseLinearFunction")
        with np.errstate(all="ignore"):
            self.slopes = np.diff(self.y) / np.diff(self.x)
            if self.x.size == 2:
                self.affine = (float(self.slopes[0]), float(self.y[0] - self.slopes[0] * self.x[0]))
        _computable("PiecewiseLinearFunction", self.slopes, self.affine or ())

    def _segment(self, x):
        return np.clip(np.searchsorted(self.x, x, side="right") - 1, 0, self.x.size - 2)

    def value(self, x):
        x = np.asarray(x, dtype=float)
        i = self._segment(x)
        return self.y[i] + self.slopes[i] * (x - self.x[i])

    def derivative(self, x):
        return self.slopes[self._segment(np.asarray(x, dtype=float))]

    def __repr__(self):
        return f"PiecewiseLinearFunction({self.x.tolist()!r}, {self.y.tolist()!r})"


class _CubicSpline(Function):
    """Shared evaluation of the piecewise cubic y_i + b_i t + c_i t^2 + d_i t^3 (module docstring)."""

    def __init__(self, x, y):
        self.x, self.y = _points(x, y, type(self).__name__)
        with np.errstate(all="ignore"):
            M = self._second_derivatives()
            h = np.diff(self.x)
            D = np.diff(self.y) / h
            self.c = M[:-1] / 2.0
            self.d = np.diff(M) / (6.0 * h)
            self.b = D - h * (2.0 * M[:-1] + M[1:]) / 6.0
            self.slope_left = float(self.b[0])
            hl = h[-1]
            self.slope_right = float(self.b[-1] + 2.0 * self.c[-1] * hl + 3.0 * self.d[-1] * hl * hl)
            if np.all(M == 0.0) and np.allclose(D, D[0], rtol=0, atol=0):
                self.affine = (float(D[0]), float(self.y[0] - D[0] * self.x[0]))
        _computable(type(self).__name__, self.b, self.c, self.d, (self.slope_right,), self.affine or ())

    def _interior_rows(self):
        """The continuity equations at interior knots: (A, r) with rows 1 .. n-2 filled."""
        x, y = self.x, self.y
        n = x.size
        h = np.diff(x)
        D = np.diff(y) / h
        A = np.zeros((n, n))
        r = np.zeros(n)
        i = np.arange(1, n - 1)
        A[i, i - 1] = h[:-1]
        A[i, i] = 2.0 * (h[:-1] + h[1:])
        A[i, i + 1] = h[1:]
        r[i] = 6.0 * (D[1:] - D[:-1])
        return A, r

    def _second_derivatives(self) -> np.ndarray:
        raise NotImplementedError

    def value(self, x):
        return self.value_and_derivative(x)[0]

    def derivative(self, x):
        return self.value_and_derivative(x)[1]

    def value_and_derivative(self, x):
        x = np.asarray(x, dtype=float)
        i = np.clip(np.searchsorted(self.x, x, side="right") - 1, 0, self.x.size - 2)
        t = x - self.x[i]
        b, c, d = self.b[i], self.c[i], self.d[i]
        value = self.y[i] + t * (b + t * (c + t * d))
        slope = b + t * (2.0 * c + 3.0 * t * d)
        left, right = x < self.x[0], x > self.x[-1]
        if left.any() or right.any():
            value = np.where(left, self.y[0] + self.slope_left * (x - self.x[0]),
                             np.where(right, self.y[-1] + self.slope_right * (x - self.x[-1]), value))
            slope = np.where(left, self.slope_left, np.where(right, self.slope_right, slope))
        return value, slope

    def __repr__(self):
        return f"{type(self).__name__}({self.x.tolist()!r}, {self.y.tolist()!r})"


class SimmSpline(_CubicSpline):
    """Cubic spline with the end conditions of SIMM / OpenSim (module docstring)."""

    def _second_derivatives(self):
        x, y = self.x, self.y
        n = x.size
        if n == 2:
            return np.zeros(2)
        A, r = self._interior_rows()
        h0, hn = x[1] - x[0], x[-1] - x[-2]
        A[0, 0], A[0, 1] = -1.0, 1.0
        A[-1, -2], A[-1, -1] = -1.0, 1.0
        if n >= 4:
            r[0] = 6.0 * h0 * _third_divided_difference(x[:4], y[:4])
            r[-1] = 6.0 * hn * _third_divided_difference(x[-4:], y[-4:])
        return np.linalg.solve(A, r)


class NaturalCubicSpline(_CubicSpline):
    """Cubic spline with zero second derivative at both ends."""

    def _second_derivatives(self):
        n = self.x.size
        if n == 2:
            return np.zeros(2)
        A, r = self._interior_rows()
        M = np.zeros(n)
        M[1:-1] = np.linalg.solve(A[1:-1, 1:-1], r[1:-1])
        return M


def _third_divided_difference(x, y) -> float:
    """f[x0, x1, x2, x3] by the recursive divided-difference table."""
    d = np.array(y, dtype=float)
    for k in range(1, 4):
        d = (d[1:] - d[:-1]) / (x[k:] - x[:-k])
    return float(d[0])


# ------------------------------------------------------------------------------------------ XML

FUNCTION_TAGS = ("Constant", "LinearFunction", "PolynomialFunction", "MultiplierFunction",
                 "PiecewiseLinearFunction", "SimmSpline", "NaturalCubicSpline")


MAX_NESTING = 100        # MultiplierFunctions inside MultiplierFunctions, at most


def function_from_xml(elem, path=None, natural_spline: str = "opensim", _depth: int = 0) -> Function:
    """The Function an OpenSim function element (<SimmSpline>, <LinearFunction>, ...) describes.
    `natural_spline` is "opensim" (read <NaturalCubicSpline> as OpenSim 4 does: a SimmSpline) or
    "natural" (natural end conditions)."""
    tag = elem.tag

    def fail(reason, at=None):
        raise OpenSimFileError(path, (at if at is not None else elem).line, f"<{tag}>: {reason}")

    try:
        if tag == "Constant":
            return Constant(_xml.child_float(elem, "value", path, 0.0, finite=True))
        if tag == "LinearFunction":
            c = _xml.child_floats(elem, "coefficients", path, 2, default=[1.0, 0.0], finite=True)
            return LinearFunction(c[0], c[1])
        if tag == "PolynomialFunction":
            c = _xml.child_floats(elem, "coefficients", path, finite=True)
            if c is None or c.size == 0:
                fail("needs <coefficients>")
            return PolynomialFunction(c)
        if tag == "MultiplierFunction":
            if _depth >= MAX_NESTING:
                fail(f"MultiplierFunctions nested more than {MAX_NESTING} deep")
            inner = function_in(elem, path, natural_spline, _depth + 1)
            if inner is None:
                fail("needs an inner <function>")
            return MultiplierFunction(inner, _xml.child_float(elem, "scale", path, 1.0, finite=True))
        if tag in ("PiecewiseLinearFunction", "SimmSpline", "NaturalCubicSpline"):
            x = _xml.child_floats(elem, "x", path)
            y = _xml.child_floats(elem, "y", path)
            if x is None or y is None:
                fail("needs <x> and <y>")
            if tag == "PiecewiseLinearFunction":
                return PiecewiseLinearFunction(x, y)
            if tag == "NaturalCubicSpline" and natural_spline == "natural":
                return NaturalCubicSpline(x, y)
            return SimmSpline(x, y)
    except ValueError as exc:
        if isinstance(exc, OpenSimFileError):
            raise
        fail(str(exc).split(": ", 1)[-1])
    fail(f"unsupported function type (supported: {', '.join(FUNCTION_TAGS)})")


def function_in(container, path=None, natural_spline: str = "opensim", _depth: int = 0) -> Function | None:
    """The function held by `container` (a TransformAxis or MultiplierFunction element), written
    either as <function><SimmSpline>...</SimmSpline></function> (OpenSim 3) or as
    <SimmSpline name="function">...</SimmSpline> (OpenSim 4). None when there is none."""
    wrapper = _xml.child(container, "function")
    if wrapper is not None:
        inner = [c for c in wrapper]
        if not inner:
            return None
        if len(inner) > 1:
            raise OpenSimFileError(path, wrapper.line, "<function> holds more than one function")
        return function_from_xml(inner[0], path, natural_spline, _depth)
    for c in container:
        if c.get("name") == "function" or c.tag in FUNCTION_TAGS:
            return function_from_xml(c, path, natural_spline, _depth)
    return None

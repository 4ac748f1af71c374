"""OpenSim functions: values against the `opensim` package's own evaluation (calcValue /
calcDerivative), natural splines against scipy, derivatives against finite differences."""


import numpy as np
import pytest

from solver.opensim import OpenSimFileError, _xml
from solver.opensim.functions import (
    Constant,
    LinearFunction,
    MultiplierFunction,
    NaturalCubicSpline,
    PiecewiseLinearFunction,
    PolynomialFunction,
    SimmSpline,
    function_from_xml,
    function_in,
)
from tests.opensim_reference import opensim as _opensim, opensim_if_installed

# The two knee splines of subject01_simbody.osim (tibia_r translation1 / translation2).
KNEE_X = ([-2.0944, -1.74533, -1.39626, -1.0472, -0.698132, -0.349066, -0.174533, 0.197344, 0.337395, 0.490178,
           1.52146, 2.0944],
          [-0.0032, 0.00179, 0.00411, 0.0041, 0.00212, -0.001, -0.0031, -0.005227, -0.005435, -0.005574, -0.005435,
           -0.00525])
KNEE_Y = ([-2.0944, -1.22173, -0.523599, -0.349066, -0.174533, 0.159149, 2.0944],
          [-0.4226, -0.4082, -0.399, -0.3976, -0.3966, -0.395264, -0.396])


def _random_points(n, seed):
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.uniform(0.05, 1.0, n)) - 1.0
    return x, rng.normal(size=n)


POINT_SETS = [KNEE_X, KNEE_Y, ([0.0, 1.0], [1.0, 3.0]), ([0.0, 1.0, 3.0], [1.0, 3.0, 0.0])] + \
             [_random_points(n, seed) for seed, n in enumerate([4, 5, 6, 9, 15])]




def _owned_by_opensim(f):
    """A MultiplierFunction takes ownership of its inner function: Python must not free it too."""
    f.thisown = False
    return f


def _samples(x):
    """Knots, points between them, and points outside on both sides."""
    x = np.asarray(x)
    span = x[-1] - x[0]
    mids = (x[:-1] + x[1:]) / 2
    return np.sort(np.concatenate([x, mids, x[:-1] + 0.1 * np.diff(x), [x[0] - 0.3 * span, x[0] - 1e-3,
                                                                           x[-1] + 1e-3, x[-1] + 0.5 * span]]))


def _theirs(osim, f, xs):
    value = np.array([f.calcValue(osim.Vector(1, float(v))) for v in xs])
    slope = np.array([f.calcDerivative(osim.StdVectorInt([0]), osim.Vector(1, float(v))) for v in xs])
    return value, slope


@pytest.mark.parametrize("points", POINT_SETS, ids=lambda p: f"n{len(p[0])}")
def test_simm_spline_matches_opensim(points):
    osim = _opensim()
    theirs = osim.SimmSpline()
    for a, b in zip(*points):
        theirs.addPoint(float(a), float(b))
    xs = _samples(points[0])
    value, slope = _theirs(osim, theirs, xs)
    ours = SimmSpline(*points)
    scale = max(1.0, np.abs(points[1]).max())
    np.testing.assert_allclose(ours.value(xs), value, rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(ours.derivative(xs), slope, rtol=0, atol=1e-11 * scale)


@pytest.mark.parametrize("points", POINT_SETS[:3] + POINT_SETS[5:7], ids=lambda p: f"n{len(p[0])}")
def test_piecewise_linear_matches_opensim(points):
    osim = _opensim()
    theirs = osim.PiecewiseLinearFunction()
    for a, b in zip(*points):
        theirs.addPoint(float(a), float(b))
    x = np.asarray(points[0])
    xs = np.concatenate([(x[:-1] + x[1:]) / 2, [x[0] - 1.0, x[-1] + 1.0]])   # away from the knots
    value, slope = _theirs(osim, theirs, xs)
    ours = PiecewiseLinearFunction(*points)
    np.testing.assert_allclose(ours.value(xs), value, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(ours.derivative(xs), slope, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.value(x), points[1], rtol=0, atol=1e-14)


def test_simple_functions_match_opensim():
    osim = _opensim()
    xs = np.linspace(-2.0, 3.0, 11)
    pairs = [(osim.Constant(0.7), Constant(0.7)),
             (osim.LinearFunction(-1.5, 0.25), LinearFunction(-1.5, 0.25)),
             (osim.PolynomialFunction(osim.Vector([2.0, -3.0, 0.5, 1.25])), PolynomialFunction([2.0, -3.0, 0.5, 1.25])),
             (osim.MultiplierFunction(_owned_by_opensim(osim.LinearFunction(2.0, 1.0)), 1.14724),
              MultiplierFunction(LinearFunction(2.0, 1.0), 1.14724))]
    for theirs, ours in pairs:
        value, slope = _theirs(osim, theirs, xs)
        np.testing.assert_allclose(ours.value(xs), value, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(ours.derivative(xs), slope, rtol=1e-14, atol=1e-14)


def test_multiplier_of_simm_spline_matches_opensim():
    osim = _opensim()
    inner = osim.SimmSpline()
    for a, b in zip(*KNEE_Y):
        inner.addPoint(a, b)
    theirs = osim.MultiplierFunction(_owned_by_opensim(inner), 1.14724)
    xs = _samples(KNEE_Y[0])
    value, slope = _theirs(osim, theirs, xs)
    ours = MultiplierFunction(SimmSpline(*KNEE_Y), 1.14724)
    np.testing.assert_allclose(ours.value(xs), value, rtol=0, atol=1e-13)
    np.testing.assert_allclose(ours.derivative(xs), slope, rtol=0, atol=1e-12)


@pytest.mark.parametrize("points", POINT_SETS[:2] + POINT_SETS[4:], ids=lambda p: f"n{len(p[0])}")
def test_natural_cubic_spline_matches_scipy_inside_and_is_linear_outside(points):
    interpolate = pytest.importorskip("scipy.interpolate", reason="scipy is the natural-spline reference")
    ref = interpolate.CubicSpline(points[0], points[1], bc_type="natural")
    x = np.asarray(points[0])
    inside = np.linspace(x[0], x[-1], 97)
    ours = NaturalCubicSpline(*points)
    np.testing.assert_allclose(ours.value(inside), ref(inside), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.derivative(inside), ref(inside, 1), rtol=0, atol=1e-10)
    left, right = x[0] - np.array([0.5, 2.0]), x[-1] + np.array([0.5, 2.0])
    np.testing.assert_allclose(ours.value(left), ref(x[0]) + ref(x[0], 1) * (left - x[0]), atol=1e-12)
    np.testing.assert_allclose(ours.value(right), ref(x[-1]) + ref(x[-1], 1) * (right - x[-1]), atol=1e-12)


def test_simm_spline_end_conditions_and_special_cases():
    # Third derivative on the end intervals equals that of the cubic through the end four points.
    x, y = _random_points(8, 11)
    s = SimmSpline(x, y)
    cubic = np.polyfit(x[:4], y[:4], 3)
    assert 6 * s.d[0] == pytest.approx(6 * cubic[0], rel=1e-9)
    cubic = np.polyfit(x[-4:], y[-4:], 3)
    assert 6 * s.d[-1] == pytest.approx(6 * cubic[0], rel=1e-9)
    # Four points: the spline is that cubic.
    x4, y4 = _random_points(4, 3)
    xs = np.linspace(x4[0], x4[-1], 21)
    np.testing.assert_allclose(SimmSpline(x4, y4).value(xs), np.polyval(np.polyfit(x4, y4, 3), xs), atol=1e-10)
    # Three points: the parabola; two points: the line.
    np.testing.assert_allclose(SimmSpline([0, 1, 3], [1, 3, 0]).value([0.5, 2.0]), [55 / 24, 8 / 3], rtol=1e-14)
    assert SimmSpline([0, 2], [1, 5]).affine == (2.0, 1.0)


ALL = [Constant(-0.3), LinearFunction(2.0, -1.0), PolynomialFunction([1.0, -2.0, 0.5, 3.0]),
       MultiplierFunction(SimmSpline(*KNEE_X), 1.14724), SimmSpline(*KNEE_Y), NaturalCubicSpline(*KNEE_X),
       PiecewiseLinearFunction(*KNEE_Y), SimmSpline(*POINT_SETS[3])]


@pytest.mark.parametrize("f", ALL, ids=lambda f: type(f).__name__)
def test_derivatives_match_finite_differences(f):
    rng = np.random.default_rng(5)
    xs = rng.uniform(-3.0, 3.0, size=(7, 9))              # batched: any shape
    if isinstance(f, PiecewiseLinearFunction):               # keep clear of the kinks
        xs = xs[np.min(np.abs(xs[..., None] - f.x), axis=-1) > 1e-4]
    step = 1e-6
    fd = (f.value(xs + step) - f.value(xs - step)) / (2 * step)
    assert f.value(xs).shape == np.shape(xs) and f.derivative(xs).shape == np.shape(xs)
    np.testing.assert_allclose(f.derivative(xs), fd, rtol=1e-6, atol=1e-8)


def test_splines_are_c1_at_the_knots():
    for f in (SimmSpline(*KNEE_X), NaturalCubicSpline(*KNEE_X)):
        k = np.asarray(KNEE_X[0])
        eps = 1e-9
        np.testing.assert_allclose(f.value(k - eps), f.value(k + eps), atol=1e-8)
        np.testing.assert_allclose(f.derivative(k - eps), f.derivative(k + eps), atol=1e-6)
        np.testing.assert_allclose(f.value(k), KNEE_X[1], atol=1e-15)


# ------------------------------------------------------------------------------------------ XML

def _parse(text, tmp_path):
    path = tmp_path / "f.xml"
    path.write_text(text)
    return _xml.parse(path), path


def test_functions_from_opensim3_and_opensim4_xml(tmp_path):
    old = """<TransformAxis name="translation2">
  <function>
    <MultiplierFunction>
      <function><SimmSpline><x> 0 1 2 3 4</x><y> 0 1 0 1 0</y></SimmSpline></function>
      <scale>2</scale>
    </MultiplierFunction>
  </function>
</TransformAxis>"""
    new = """<TransformAxis name="translation2">
  <MultiplierFunction name="function">
    <function><SimmSpline><x> 0 1 2 3 4</x><y> 0 1 0 1 0</y></SimmSpline></function>
    <scale>2</scale>
  </MultiplierFunction>
</TransformAxis>"""
    ref = MultiplierFunction(SimmSpline([0, 1, 2, 3, 4], [0, 1, 0, 1, 0]), 2.0)
    xs = np.linspace(-1, 5, 13)
    for text in (old, new):
        root, path = _parse(text, tmp_path)
        f = function_in(root, path)
        assert isinstance(f, MultiplierFunction) and isinstance(f.function, SimmSpline)
        np.testing.assert_array_equal(f.value(xs), ref.value(xs))
    root, path = _parse("<TransformAxis><LinearFunction name='function'><coefficients> 1 0</coefficients>"
                        "</LinearFunction></TransformAxis>", tmp_path)
    assert function_in(root, path).affine == (1.0, 0.0)
    root, path = _parse("<TransformAxis><axis>1 0 0</axis></TransformAxis>", tmp_path)
    assert function_in(root, path) is None


def test_natural_cubic_spline_element_reads_as_opensim_does(tmp_path):
    root, path = _parse("<NaturalCubicSpline><x>0 1 2 3 4</x><y>0 1 0 1 0</y></NaturalCubicSpline>", tmp_path)
    assert type(function_from_xml(root, path)) is SimmSpline
    assert type(function_from_xml(root, path, natural_spline="natural")) is NaturalCubicSpline
    osim = opensim_if_installed()
    if osim is None:                  # opensim not installed: the cross-check with OpenSim is left out
        return
    # OpenSim 4 registers NaturalCubicSpline as an alias of SimmSpline.
    assert osim.OpenSimObject.newInstanceOfType("NaturalCubicSpline").getConcreteClassName() == "SimmSpline"


@pytest.mark.parametrize("text, line, words", [
    ("<F>\n<SimmSpline>\n<x>0 1 2</x>\n<y>0 1</y>\n</SimmSpline>\n</F>", 2, "3 x values but 2 y values"),
    ("<F>\n<SimmSpline>\n<x>0 2 1</x>\n<y>0 1 2</y>\n</SimmSpline>\n</F>", 2, "increase strictly"),
    ("<F>\n<SimmSpline>\n<x>0</x>\n<y>0</y>\n</SimmSpline>\n</F>", 2, "at least 2 points"),
    ("<F>\n<GCVSpline name='function'>\n</GCVSpline>\n</F>", 2, "unsupported function type"),
    ("<F>\n<LinearFunction>\n<coefficients>1 2 3</coefficients>\n</LinearFunction>\n</F>", 3, "needs 2 numbers"),
    ("<F>\n<MultiplierFunction>\n<scale>2</scale>\n</MultiplierFunction>\n</F>", 2, "inner <function>"),
    ("<F>\n<Constant>\n<value>x</value>\n</Constant>\n</F>", 3, "must hold numbers"),
])
def test_malformed_functions_name_the_line(tmp_path, text, line, words):
    root, path = _parse(text, tmp_path)
    with pytest.raises(OpenSimFileError) as info:
        function_in(root, path)
    assert info.value.line == line and words in info.value.reason

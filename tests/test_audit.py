"""sklearn_fdp.audit.attribute_inference_bound: Thm. 4 of the FDP paper for (ε, δ)-DP."""

import math

import numpy as np
import pytest

import sklearn_fdp
from sklearn_fdp.audit import attribute_inference_bound

BASELINES = np.linspace(0.0, 1.0, 41)


def test_exported():
    assert sklearn_fdp.audit.attribute_inference_bound is attribute_inference_bound
    assert "audit" in sklearn_fdp.__all__


def test_equals_baseline_without_privacy_loss():
    np.testing.assert_allclose(attribute_inference_bound(0.0, 0.0, BASELINES), BASELINES,
                               atol=1e-15)


@pytest.mark.parametrize(
    "epsilon, delta, baseline, expected",
    [
        # Small baseline: the e^ε b + δ branch.
        (1.0, 0.0, 0.1, math.e * 0.1),
        (math.log(2), 1e-3, 0.2, 2 * 0.2 + 1e-3),
        # Large baseline: the 1 - e^-ε (1 - δ - b) branch.
        (1.0, 1e-5, 0.7, 1 - math.exp(-1) * (0.3 - 1e-5)),
        (math.log(3), 0.0, 0.5, 1 - 0.5 / 3),
        # Branches meet at b = (1 - δ)(1 - e^-ε) / (e^ε - e^-ε) (δ = 0, ε = ln 3: 1/4).
        (math.log(3), 0.0, 0.25, 0.75),
        # Saturation, and the extreme baselines.
        (10.0, 0.0, 0.5, 1 - math.exp(-10) * 0.5),
        (math.inf, 0.0, 0.3, 1.0),
        (math.inf, 0.0, 0.0, 0.0),
        (2.0, 0.1, 0.0, 0.1),
        (2.0, 0.0, 1.0, 1.0),
        (0.0, 0.25, 0.5, 0.75),
    ],
)
def test_closed_form_values(epsilon, delta, baseline, expected):
    assert attribute_inference_bound(epsilon, delta, baseline) == pytest.approx(expected,
                                                                              rel=1e-12)


def test_matches_trade_off_function_definition():
    # 1 - f(b) for f(x) = max(0, 1 - δ - e^ε x, e^-ε (1 - δ - x)).
    eps, delta = 0.7, 1e-3
    f = np.maximum.reduce([np.zeros_like(BASELINES), 1 - delta - np.exp(eps) * BASELINES,
                           np.exp(-eps) * (1 - delta - BASELINES)])
    np.testing.assert_allclose(attribute_inference_bound(eps, delta, BASELINES), 1 - f,
                               atol=1e-15)
    # and never above the bound of the simpler f(x) = 1 - δ - e^ε x form.
    simple = np.minimum(1.0, delta + np.exp(eps) * BASELINES)
    assert np.all(attribute_inference_bound(eps, delta, BASELINES) <= simple + 1e-15)


def test_monotone_and_in_range():
    eps = np.array([0.0, 0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])[:, None]
    for delta in (0.0, 1e-5, 1e-2):
        b = attribute_inference_bound(eps, delta, BASELINES[None, :])
        assert b.shape == (eps.size, BASELINES.size)
        assert np.all(np.diff(b, axis=0) >= 0), "not monotone in epsilon"
        assert np.all(np.diff(b, axis=1) >= 0), "not monotone in the baseline"
        assert np.all(b <= 1.0) and np.all(b >= BASELINES - 1e-15)
    deltas = np.array([0.0, 1e-6, 1e-3, 0.1, 0.5])
    b = attribute_inference_bound(1.0, deltas[:, None], BASELINES[None, :])
    assert np.all(np.diff(b, axis=0) >= 0), "not monotone in delta"


def test_vectorised_broadcasting_and_types():
    assert isinstance(attribute_inference_bound(1.0, 1e-5, 0.5), float)
    assert isinstance(attribute_inference_bound(1, 0, 0), float)
    out = attribute_inference_bound([0.5, 1.0], 1e-5, [[0.1], [0.5], [0.9]])
    assert isinstance(out, np.ndarray) and out.shape == (3, 2)
    for i, b in enumerate([0.1, 0.5, 0.9]):
        for j, e in enumerate([0.5, 1.0]):
            assert out[i, j] == attribute_inference_bound(e, 1e-5, b)
    # 0-d arrays give a 0-d array, like numpy ufuncs.
    assert np.ndim(attribute_inference_bound(np.float64(1.0), 0.0, np.array(0.5))) == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(epsilon=-0.1, delta=0.0, baseline=0.5), r"`epsilon` must be in \[0, inf\]"),
        (dict(epsilon=math.nan, delta=0.0, baseline=0.5), "`epsilon`"),
        (dict(epsilon=1.0, delta=-1e-9, baseline=0.5), r"`delta` must be in \[0, 1\]"),
        (dict(epsilon=1.0, delta=1.5, baseline=0.5), "`delta`"),
        (dict(epsilon=1.0, delta=0.0, baseline=1.01),
         r"`baseline` must be in \[0, 1\], got \[1.01\]"),
        (dict(epsilon=1.0, delta=0.0, baseline=[0.2, -0.5]), r"got \[-0.5\]"),
    ],
)
def test_invalid_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        attribute_inference_bound(**kwargs)


@pytest.mark.parametrize("bad", ["0.5", None, True, [0.5, "x"]])
def test_invalid_types(bad):
    with pytest.raises(TypeError, match="`baseline` must be a real number"):
        attribute_inference_bound(1.0, 0.0, bad)


def test_inputs_not_mutated():
    b = np.array([0.1, 0.5, 0.9])
    b.setflags(write=False)
    attribute_inference_bound(1.0, 1e-5, b)
    np.testing.assert_array_equal(b, [0.1, 0.5, 0.9])

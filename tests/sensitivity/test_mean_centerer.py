"""Sensitivity of :class:`~sklearn_fdp.PrivateMeanCenterer`'s released mean.

``fit`` releases ``Σ_i scale(x_i) / n + N(0, (σ C / n)²)`` with ``σ`` the
analytic Gaussian multiplier of ``GaussianDpEvent(σ)`` and ``C =
norm_bound``: the accountant assumes that adding or removing one record
moves the sum of the scaled rows by at most ``C`` (add/remove only; ``n``
public). The scaling is ``"normalize"`` (every non-zero row to norm ``C``),
``"clip"`` (rows above ``C`` down to it) or ``"none"`` (``fit`` clips).

The release is read from a real ``fit`` whose noise generator is replaced
by one that draws zeros, so ``mean_ · n`` is the library's own pre-noise sum.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sklearn_fdp import PrivateMeanCenterer, accounting

from ._harness import SCALES, adversarial_dense, assert_sensitivity, remove_one

SCALINGS = ("normalize", "clip", "none")


class ZeroNoise:
    """A generator stand-in whose normals are all 0 (the pre-noise release)."""

    def normal(self, loc=0.0, scale=1.0, size=None):
        return np.zeros(size) + loc

    def spawn(self, n):
        return [ZeroNoise() for _ in range(n)]


@pytest.fixture
def zero_noise(monkeypatch):
    from sklearn_fdp.preprocessing import _centerer as _preprocessing

    monkeypatch.setattr(_preprocessing, "spawn_generators",
                        lambda random_state, n, **kw: [ZeroNoise() for _ in range(n)])


def released_sum(X, norm_bound, row_scaling):
    est = PrivateMeanCenterer(epsilon=1.0, delta=1e-9, norm_bound=norm_bound,
                              row_scaling=row_scaling, random_state=0)
    est.fit(X)
    assert est.noise_multiplier_ == pytest.approx(accounting.gaussian_noise_multiplier(1.0, 1e-9))
    return est.mean_ * X.shape[0]


def _check(X, i, norm_bound, row_scaling):
    a = released_sum(X, norm_bound, row_scaling)
    X2, _ = remove_one(X, None, i)
    b = released_sum(X2, norm_bound, row_scaling)
    # The sums accumulate in float64; the rows are scaled in X's dtype. Compared
    # in units of norm_bound: the norm of a difference of order 1e-160 would
    # underflow in the check itself.
    return norm_bound * assert_sensitivity(
        a / norm_bound, b / norm_bound, 1.0, n_terms=X.shape[0], clip=1.0, dtype=X.dtype,
        what=f"PrivateMeanCenterer ({row_scaling})")


def tiny_rows(dtype, n=4, d=1000):
    """Rows of a tiny peak and many entries whose squares underflow ``dtype``.

    Squared one by one, the small entries vanish and the row's norm comes
    out ``√41`` (float32) times too small: a row normalised by it has norm
    ``6.4 C``.
    """
    peak, rest = (1e-22, 2e-23) if dtype == np.float32 else (1e-160, 1e-162)
    X = np.full((n, d), rest, dtype=dtype)
    X[:, 0] = peak
    X[1::2] *= -1
    return X


@pytest.mark.usefixtures("zero_noise")
@pytest.mark.parametrize("row_scaling", SCALINGS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tiny_rows_whose_squares_underflow(row_scaling, dtype):
    X = tiny_rows(dtype)
    true_norm = float(np.linalg.norm(X[0].astype(np.float64) * 1e150) / 1e150)
    for norm_bound in (1.0, 0.5 * true_norm):
        ratio = _check(X, 0, norm_bound, row_scaling) / norm_bound
        if row_scaling == "normalize" or norm_bound < true_norm:
            assert ratio > 0.99  # the bound is reached, and not exceeded


@pytest.mark.usefixtures("zero_noise")
@pytest.mark.parametrize("row_scaling", SCALINGS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_zero_and_huge_rows(row_scaling, dtype):
    d = 3
    huge = float(np.sqrt(np.finfo(dtype).max / (d + 1))) * 0.99  # the largest fit accepts
    X = np.array([[0.0, 0.0, 0.0], [huge, -huge, huge], [1.0, 2.0, 3.0], [1e-30, 0.0, 0.0]],
                 dtype=dtype)
    for i in range(len(X)):
        _check(X, i, 1.0, row_scaling)


@st.composite
def _cases(draw):
    X, _ = draw(adversarial_dense(n_rows=(2, 10), n_cols=(1, 6)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):  # a zero row
        X[rng.integers(len(X))] = 0.0
    if draw(st.booleans()):  # a row of another scale
        X[rng.integers(len(X))] *= X.dtype.type(draw(st.sampled_from(SCALES)))
    return X, draw(st.integers(0, len(X) - 1)), draw(st.sampled_from([1e-6, 1.0, 1e3]))


@pytest.mark.usefixtures("zero_noise")
@pytest.mark.parametrize("row_scaling", SCALINGS)
@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=_cases())
def test_released_sum_sensitivity(row_scaling, case):
    X, i, norm_bound = case
    _check(X, i, norm_bound, row_scaling)

"""Sensitivity of every release of :class:`~sklearn_fdp.DPSGDFClassifier`.

What the accountant of a fit assumes (``DPSGDFClassifier.privacy_plan``; the
releases are in ``_mechanisms/dpsgdf.py`` and ``_mechanisms/gaussian_mean.py``;
DPSGD-F paper, Algorithms 2 and 3), per release, under
add/remove (``neighboring="replace"`` doubles every multiplier, i.e. assumes
twice the sensitivity):

practical (Algorithm 3)
    * the mean: ``Σ_i x̂_i`` with ``x̂_i`` the row scaled to norm ``C_F =
      feature_norm`` (zero rows stay zero), noise ``σ_F C_F``: sensitivity
      ``C_F`` (``GaussianDpEvent(σ_F)``);
    * each DP-SGD step: the clipped gradient sum on the rows centred on the
      released mean ``μ̂`` (fixed: already released): sensitivity ``C``.

analysed (Algorithm 2)
    * round 0 of the coarse-to-fine mean: ``Σ_i x̄_i`` with ``x̄_i`` the row
      clipped to ``R = feature_norm``: sensitivity ``R``;
    * each radius histogram and the quantile τ's histogram: counts of
      ``‖x_i − μ‖`` (``μ`` released) over a grid fixed by public values:
      sensitivity 1 (``GaussianDpEvent(σ)`` on counts);
    * each later round: ``Σ_i clip(x_i − μ, r)`` (``μ``, ``r`` released):
      sensitivity ``r``;
    * each DP-SGD step on the augmented, feature-clipped rows
      ``clip((x − μ̂, τ), √2 τ) / (√2 τ)``: sensitivity ``C``.

Every release is computed by the library's code path, conditional on the
earlier releases (the same ``μ``, ``r``, ``τ`` for both neighbours), with the
noise drawn as zeros where a release is read from a fit.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sklearn_fdp import DPSGDFClassifier
from sklearn_fdp._engine import LinearGradientOracle, LinearLoss
from sklearn_fdp._mechanisms.dpsgdf import (
    algorithm3_rows,
    augment_rows,
    centre_rows,
    coarse_to_fine_mean,
    distance_histogram,
    geometric_edges,
)
from sklearn_fdp._mechanisms.gaussian_mean import bounded_row_sum, scale_rows
from sklearn_fdp.linear._base import validate_linear_data
from sklearn_fdp.linear._dpsgdf import VARIANTS as PLANS

from ._harness import SCALES, adversarial_dense, assert_sensitivity, remove_one

VARIANTS = ("practical", "analysed")
RELATIONS = ("add_remove", "replace")


class ZeroNoise:
    """A generator stand-in whose normals are all 0 (the pre-noise release)."""

    def normal(self, loc=0.0, scale=1.0, size=None):
        return np.zeros(size) + loc

    def spawn(self, n):
        return [ZeroNoise() for _ in range(n)]


def _estimator(variant, feature_norm, **kw):
    return DPSGDFClassifier(variant=variant, feature_norm=feature_norm, epsilon=2.0,
                            epsilon_mean=0.3, epsilon_quantile=0.3, delta=1e-9, **kw)


def preprocessed(variant, X, y, feature_norm):
    """The rows as ``fit`` feeds them to the private mean (validated, scaled/clipped).

    Returns ``(estimator, rows, y)``; the labels (class indices ``0..K-1``)
    do not enter the rows, so validation sees two dummy classes (a
    neighbour may lack a class).
    """
    est = _estimator(variant, feature_norm)
    X, _, _ = validate_linear_data(est, X, np.arange(X.shape[0]) % 2, accept_sparse=False)
    Xs = scale_rows(X, float(feature_norm), PLANS[variant].row_scaling)
    return est, Xs, np.asarray(y)


def mean_sum(variant, X, y, feature_norm):
    """The pre-noise sum behind the first (or only) release of the mean, from the fit's code."""
    est, Xs, y_index = preprocessed(variant, X, y, feature_norm)
    n = X.shape[0]
    if variant == "practical":
        _, (mean, _), _ = algorithm3_rows(Xs, float(feature_norm), 1.0, ZeroNoise())
        return mean * n
    (mean, _, _), _ = coarse_to_fine_mean(Xs, feature_norm, 1, 1.0, ZeroNoise())
    return mean * n


def _neighbour(X, y, i, relation, replacement):
    if relation == "add_remove":
        return remove_one(X, y, i)
    X2 = np.array(X, copy=True)
    X2[i] = replacement
    return X2, y


def _factor(relation):
    return 1.0 if relation == "add_remove" else 2.0


def tiny_rows(dtype, n=4, d=1000):
    """A tiny peak and many entries whose squares underflow ``dtype`` (see test_mean_centerer)."""
    peak, rest = (1e-22, 2e-23) if dtype == np.float32 else (1e-160, 1e-162)
    X = np.full((n, d), rest, dtype=dtype)
    X[:, 0] = peak
    X[1::2] *= -1
    return X


# ---------------------------------------------------------------- the mean


def _check_mean(variant, X, y, i, feature_norm, relation, replacement=None):
    a = mean_sum(variant, X, y, feature_norm)
    X2, y2 = _neighbour(X, y, i, relation, replacement)
    b = mean_sum(variant, X2, y2, feature_norm)
    bound = _factor(relation) * feature_norm
    return assert_sensitivity(a, b, bound, n_terms=X.shape[0], clip=feature_norm,
                              dtype=X.dtype, what=f"DPSGD-F {variant} mean ({relation})")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mean_of_tiny_rows(variant, dtype):
    """Row norms whose squares underflow: the scaled rows must still have norm ≤ C_F."""
    X = tiny_rows(dtype)
    y = np.array([0, 1, 0, 1])
    ratio = _check_mean(variant, X, y, 0, 1.0, "add_remove") / 1.0
    if variant == "practical":
        assert ratio > 0.99


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mean_of_zero_and_huge_rows(variant, dtype):
    d = 3
    huge = float(np.sqrt(np.finfo(dtype).max / (d + 1))) * 0.99
    X = np.array([[0.0, 0.0, 0.0], [huge, -huge, huge], [1.0, 2.0, 3.0], [1e-30, 0.0, 0.0]],
                 dtype=dtype)
    y = np.array([0, 1, 0, 1])
    for i in range(len(X)):
        for relation in RELATIONS:
            _check_mean(variant, X, y, i, 1.0, relation, replacement=-X[(i + 1) % len(X)])


@st.composite
def _cases(draw):
    X, _ = draw(adversarial_dense(n_rows=(3, 10), n_cols=(1, 6)))
    n = X.shape[0]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        X[rng.integers(n)] = 0.0
    y = rng.integers(0, 2, n)
    y[:2] = [0, 1]
    replacement = (rng.standard_normal(X.shape[1]) * draw(st.sampled_from(SCALES))).astype(X.dtype)
    return dict(X=X, y=y, i=draw(st.integers(0, n - 1)),
                feature_norm=draw(st.sampled_from([1e-3, 1.0, 10.0])),
                replacement=replacement, rng=rng)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("relation", RELATIONS)
@settings(max_examples=30, deadline=None, derandomize=True)
@given(case=_cases())
def test_mean_sensitivity(variant, relation, case):
    _check_mean(variant, case["X"], case["y"], case["i"], case["feature_norm"], relation,
                case["replacement"])


# ---------------------------------------------------------------- analysed: later rounds and τ


def _released_centre(rng, Xs, scale):
    """A released centre: the true mean moved by noise (any value: it is public)."""
    d = Xs.shape[1]
    return np.asarray(Xs, dtype=np.float64).mean(axis=0) + rng.standard_normal(d) * scale


@pytest.mark.parametrize("relation", RELATIONS)
@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=_cases(), noise_scale=st.sampled_from([0.0, 1e-3, 1.0, 1e3]),
       radius_factor=st.sampled_from([1e-8, 1e-3, 0.5, 1.0, 4.0]))
def test_later_rounds_clipped_sum(relation, case, noise_scale, radius_factor):
    """``Σ clip(x − μ, r)`` moves by at most ``r`` (``2 r`` under replace)."""
    X, y, i, R = case["X"], case["y"], case["i"], case["feature_norm"]
    _, Xs, _ = preprocessed("analysed", X, y, R)
    X2, y2 = _neighbour(X, y, i, relation, case["replacement"])
    _, Xs2, _ = preprocessed("analysed", X2, y2, R)
    centre = _released_centre(case["rng"], Xs, noise_scale * R)
    radius = radius_factor * R
    a = bounded_row_sum(Xs, radius, "clip", centre=centre)
    b = bounded_row_sum(Xs2, radius, "clip", centre=centre)
    assert_sensitivity(a, b, _factor(relation) * radius, n_terms=len(X), clip=radius,
                       dtype=np.float64, what=f"DPSGD-F analysed round k ({relation})")


def test_later_round_of_tiny_rows():
    """Offsets whose squares underflow float64: the clip must still bind at ``r``."""
    X = tiny_rows(np.float64)
    true_norm = float(np.linalg.norm(X[0] * 1e150) / 1e150)
    radius = 0.5 * true_norm
    centre = np.zeros(X.shape[1])
    a = bounded_row_sum(X, radius, "clip", centre=centre) / radius  # in units of r
    b = bounded_row_sum(X[1:], radius, "clip", centre=centre) / radius  # (no underflow below)
    ratio = assert_sensitivity(a, b, 1.0, n_terms=len(X), clip=1.0, dtype=np.float64,
                               what="DPSGD-F analysed round k, tiny offsets")
    assert ratio > 0.99


@pytest.mark.parametrize("relation", RELATIONS)
@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=_cases(), noise_scale=st.sampled_from([0.0, 1e-3, 1.0, 1e3]))
def test_distance_histograms(relation, case, noise_scale):
    """The radius and τ histograms: one count moves by 1 (two by 1 each under replace).

    The grid depends on public values only: the number of rows ``n`` (public)
    and ``top = R + ‖μ‖`` of the released centre; distances beyond ``top``
    (possible after a replacement) are counted in the last bin.
    """
    X, y, i, R = case["X"], case["y"], case["i"], case["feature_norm"]
    _, Xs, _ = preprocessed("analysed", X, y, R)
    X2, y2 = _neighbour(X, y, i, relation, case["replacement"])
    _, Xs2, _ = preprocessed("analysed", X2, y2, R)
    centre = _released_centre(case["rng"], Xs, noise_scale * R)
    edges = geometric_edges(R + float(np.linalg.norm(centre)), len(X))
    a = distance_histogram(np.linalg.norm(np.asarray(Xs, dtype=np.float64) - centre, axis=1),
                            edges)
    b = distance_histogram(np.linalg.norm(np.asarray(Xs2, dtype=np.float64) - centre, axis=1),
                            edges)
    assert a.sum() == len(X)  # every row in exactly one bin
    assert_sensitivity(a, b, _factor(relation), n_terms=1, clip=0.0, dtype=np.float64,
                       what=f"DPSGD-F histogram ({relation})")


# ---------------------------------------------------------------- the DP-SGD sums


def dpsgd_rows(variant, est, Xs, centre, tau):
    """The rows the DP-SGD oracle of a fit gets, given the released ``μ̂`` (and τ)."""
    if variant == "practical":
        return centre_rows(Xs, centre)
    return augment_rows(Xs, centre, tau, est.fit_intercept)


def _oracle(variant, est, Xs, Z, y_index, loss_name, n_classes, clip):
    """The fit's oracle on ``Z``: its intercept flag is the one the fit's preprocessing gives."""
    loss = LinearLoss(loss_name, 1 if n_classes == 2 else n_classes)
    y_enc = loss.encode(y_index)
    _, details = PLANS[variant].plan(est, *Xs.shape)
    oracle_intercept = PLANS[variant].prepare(est, Xs, details, ZeroNoise()).oracle_intercept
    # practical: an intercept; analysed: none (the τ column is the intercept).
    assert oracle_intercept is (variant == "practical")
    oracle = LinearGradientOracle(Z, y_enc, loss, oracle_intercept, float(est.max_grad_norm))
    assert oracle.max_grad_norm == clip
    return oracle


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("relation", RELATIONS)
@settings(max_examples=30, deadline=None, derandomize=True)
@given(case=_cases(), noise_scale=st.sampled_from([0.0, 1.0, 1e3]),
       tau_factor=st.sampled_from([1e-6, 0.1, 1.0, 3.0]),
       loss_name=st.sampled_from(["log_loss", "hinge"]),
       n_classes=st.sampled_from([2, 3]), clip=st.sampled_from([1e-3, 1.0]),
       theta_scale=st.sampled_from([0.0, 1.0, 1e3]))
def test_dpsgd_sums_on_preprocessed_rows(variant, relation, case, noise_scale, tau_factor,
                                         loss_name, n_classes, clip, theta_scale):
    X, y, i, R = case["X"], case["y"], case["i"], case["feature_norm"]
    rng = case["rng"]
    y = rng.integers(0, n_classes, len(X))
    est, Xs, y_index = preprocessed(variant, X, y, R)
    est.set_params(max_grad_norm=clip)
    X2, y2 = _neighbour(X, y, i, relation, case["replacement"])
    if relation == "replace":
        y2 = y2.copy()
        y2[i] = (y2[i] + 1) % n_classes
    _, Xs2, y_index2 = preprocessed(variant, X2, y2, R)
    centre = _released_centre(rng, Xs, noise_scale * R)
    tau = tau_factor * R
    Z, Z2 = dpsgd_rows(variant, est, Xs, centre, tau), dpsgd_rows(variant, est, Xs2, centre, tau)
    if variant == "analysed":  # the documented feature clipping: rows of norm ≤ 1
        assert np.all(np.linalg.norm(Z.astype(np.float64), axis=1) <= 1 + 1e-6)
    k = 1 if n_classes == 2 else n_classes
    theta = (rng.standard_normal((Z.shape[1] + int(variant == "practical"), k))
             * theta_scale).astype(Z.dtype)
    a = _oracle(variant, est, Xs, Z, y_index, loss_name, n_classes, clip)(np.arange(len(Z)),
                                                                          theta)
    b = _oracle(variant, est, Xs2, Z2, y_index2, loss_name, n_classes, clip)(
        np.arange(len(Z2)), theta)
    assert_sensitivity(a, b, _factor(relation) * clip, n_terms=len(X), clip=clip,
                       dtype=Z.dtype, what=f"DPSGD-F {variant} DP-SGD sum ({relation})")


def test_replace_doubles_every_multiplier():
    """What "replace" assumes: twice the add/remove sensitivity, so twice the noise."""
    def details(variant, **kw):
        return PLANS[variant].plan(_estimator(variant, 1.0, **kw), 1000, 3)[1]

    add, rep = details("practical"), details("practical", neighboring="replace")
    assert math.isfinite(add["mean_noise_multiplier"])
    assert rep["mean_noise_multiplier"] == pytest.approx(2 * add["mean_noise_multiplier"])
    add, rep = details("analysed"), details("analysed", neighboring="replace")

    def sigma_mean(d):  # the 2K - 1 releases' σ_k = σ_F sqrt(2K - 1)
        return d["mean_noise_multiplier"] / math.sqrt(2 * d["mean_rounds"] - 1)

    assert sigma_mean(rep) == pytest.approx(2 * sigma_mean(add))
    assert rep["quantile_noise_multiplier"] == pytest.approx(
        2 * add["quantile_noise_multiplier"])

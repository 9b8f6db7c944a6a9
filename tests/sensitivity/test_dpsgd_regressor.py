"""Sensitivity of DPSGDRegressor's pre-noise release, for each regression loss and path.

As :mod:`tests.sensitivity.test_dpsgd` for the classifiers: the release of a
step is the clipped sum ``Σ_i clip_C(x~_i r_i)`` over the batch (here every
row), with ``r_i`` the regression residual (``z − y``, ``clip(z − y, ±ε)``,
``sign(z − y) 1[|z − y| > ε]``), unbounded for the squared loss. The
accountant assumes that removing one record moves it by at most ``C``, and
replacing one (features and target, or the target alone) by at most ``2 C``.

Paths: ``"blas"``, ``"fused"`` (dense), ``"csr"`` (eager CSR), ``"lazy"``
(:func:`~sklearn_fdp._kernels.lazy_steps`, momentum 0) and
``"lazy_momentum"`` (its momentum kernel's clipped residuals,
:func:`~sklearn_fdp._kernels._momentum.lazy_momentum_residuals`), plus the
CSR paths on :func:`hostile_csr` input (duplicate and unsorted entries).
Estimator level: the oracle and the noise scale that ``DPSGDRegressor.fit``
itself builds (targets outside ``y_bounds`` included, and secure mode).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sklearn_fdp import DPSGDRegressor
from sklearn_fdp._engine import LinearGradientOracle, LinearLoss
from sklearn_fdp._kernels import csr_scatter_add
from sklearn_fdp._kernels._momentum import lazy_momentum_residuals
from sklearn_fdp.exceptions import FdpWarning

from ._harness import SCALES, adversarial_dense, assert_sensitivity, remove_one
from .test_dpsgd import _as_input, lazy_step_sum

PATHS = ("blas", "fused", "csr", "lazy", "lazy_momentum", "csr_hostile", "lazy_hostile")
LOSSES = ("squared_error", "huber", "epsilon_insensitive")
#: Target scales: tiny, ordinary, and far beyond any row (the residual is unbounded).
Y_SCALES = (1e-8, 1.0, 1e3, 1e8, 1e200)


def _oracle(X, y, loss_name, margin, fit_intercept, clip, path):
    loss = LinearLoss(loss_name, 1, margin=margin)
    oracle = LinearGradientOracle(X, loss.encode(y), loss, fit_intercept, clip)
    if path in ("blas", "fused"):
        oracle.path = path
    else:
        assert oracle.path == "csr"
    return oracle


def lazy_momentum_sum(oracle, theta):
    """The clipped sum of one step of the momentum lazy path, batch = every row.

    :func:`lazy_momentum_residuals` at lag 0 (no pending step: Φ = I, no
    noise) computes the clipped residuals ``c_i r_i`` the step adds (times
    ``1/N``) to the carried momentum; the sum is rebuilt from them.
    """
    X = oracle.X
    n = X.shape[0]
    d = oracle.n_features
    S = np.zeros((d, 3))  # (θ, p, last step) for k = 1
    S[:, 0] = theta[:d, 0]
    intercept = (np.array(theta[d], dtype=np.float64) if oracle.fit_intercept
                 else np.empty(0))
    Phi = np.eye(3)[None].copy()
    F = np.zeros((1, 3, 3))
    R = np.empty((max(n, 1), 1))
    lazy_momentum_residuals(X.indptr, X.indices, X.data, np.arange(n, dtype=np.intp),
                            oracle.y_kernel, S, 1, 2, intercept, oracle.code, oracle.x_norm_sq,
                            oracle.max_grad_norm, 0, Phi, F, np.zeros(1, dtype=np.intp),
                            np.zeros(4), 0, R, oracle.loss_param)
    np.testing.assert_array_equal(S[:, 0], theta[:d, 0])  # a lag-0 catch-up moves nothing
    out = np.zeros((theta.shape[0], 1))
    csr_scatter_add(X.indptr, X.indices, X.data, np.arange(n, dtype=np.intp), R[:n], 1.0, out)
    if oracle.fit_intercept:
        out[d] = R[:n].sum(axis=0)
    return out


def release(path, X, y, loss_name, margin, fit_intercept, clip, theta):
    oracle = _oracle(X, y, loss_name, margin, fit_intercept, clip, path)
    if path == "lazy_momentum":
        return lazy_momentum_sum(oracle, theta)
    if path.startswith("lazy"):
        return lazy_step_sum(oracle, theta)
    return oracle(np.arange(X.shape[0]), theta)


def _check(path, X, y, i, *, loss_name, margin, fit_intercept, clip, theta, relation,
           replacement=None, seed=0):
    """One neighbouring pair under ``relation``; returns ‖Δ‖ / bound."""
    Xin = _as_input(X, path, seed)
    a = release(path, Xin, y, loss_name, margin, fit_intercept, clip, theta)
    if relation == "add_remove":
        X2, y2 = remove_one(Xin, y, i)
        bound = clip
    else:  # replace: the row (or only its target) and the target
        row, target = replacement
        Xd = np.array(X, copy=True)
        if row is not None:
            Xd[i] = row
        y2 = y.copy()
        y2[i] = target
        X2 = _as_input(Xd, path, seed + 1)
        bound = 2 * clip
    b = release(path, X2, y2, loss_name, margin, fit_intercept, clip, theta)
    diff = assert_sensitivity(a, b, bound, n_terms=X.shape[0], clip=clip, dtype=X.dtype,
                              what=f"DPSGDRegressor {loss_name} {path} ({relation})")
    return diff / bound


# ---------------------------------------------------------------- explicit worst cases


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("loss_name", LOSSES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale", SCALES)
def test_remove_one_adversarial_scales(path, loss_name, dtype, scale):
    """Rows at every scale, targets up to 1e200: removing one record moves the sum ≤ C."""
    rng = np.random.default_rng(0)
    n, d = 6, 3
    X = (rng.standard_normal((n, d)) * scale).astype(dtype)
    y = rng.standard_normal(n) * np.array(Y_SCALES + (1.0,))
    theta = (rng.standard_normal((d + 1, 1)) / scale).astype(dtype)
    for i in (int(np.argmax(np.linalg.norm(X.astype(np.float64), axis=1))), int(np.argmax(
            np.abs(y)))):
        for clip in (1e-3, 1.0):
            _check(path, X, y, i, loss_name=loss_name, margin=0.5, fit_intercept=True,
                   clip=clip, theta=theta, relation="add_remove")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("loss_name", LOSSES)
def test_replace_label_reaches_but_never_exceeds_2c(path, loss_name):
    """Replacing a target by one on the other side of the prediction flips the residual:
    the two clipped gradients are opposite and the bound ``2 C`` is reached."""
    n, d = 5, 4
    X = np.tile(np.array([3.0, -2.0, 1.0, 5.0]), (n, 1))
    y = np.full(n, 100.0)
    theta = np.zeros((d + 1, 1))
    ratio = _check(path, X, y, 2, loss_name=loss_name, margin=0.5, fit_intercept=True,
                   clip=0.5, theta=theta, relation="replace", replacement=(None, -100.0))
    assert ratio > 0.99


@pytest.mark.parametrize("path", ["blas", "csr", "lazy", "lazy_momentum"])
def test_huge_target_counts_as_one_clipped_record(path):
    """A target of 1e300 (squared residual beyond float64) still moves the sum by ≤ C."""
    X = np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 0.2]])
    y = np.array([1e300, -1e300, 3.0])
    theta = np.zeros((3, 1))
    for i in range(3):
        _check(path, X, y, i, loss_name="squared_error", margin=0.0, fit_intercept=True,
               clip=1.0, theta=theta, relation="add_remove")


# ---------------------------------------------------------------- property-based


@st.composite
def _cases(draw):
    X, _ = draw(adversarial_dense(n_rows=(2, 10), n_cols=(1, 6)))
    n = X.shape[0]
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    y = rng.standard_normal(n) * draw(st.sampled_from(Y_SCALES))
    fit_intercept = draw(st.booleans())
    theta_scale = draw(st.sampled_from([0.0, 1e-3, 1.0, 1e3]))
    theta = (rng.standard_normal((X.shape[1] + int(fit_intercept), 1)) * theta_scale
             ).astype(X.dtype)
    replace_row = draw(st.booleans())
    return dict(
        X=X, y=y, i=draw(st.integers(0, n - 1)), seed=seed,
        loss_name=draw(st.sampled_from(LOSSES)),
        margin=draw(st.sampled_from([0.0, 1e-3, 0.1, 10.0])),
        fit_intercept=fit_intercept, theta=theta,
        clip=draw(st.sampled_from([1e-6, 0.1, 1.0, 1e4])),
        replacement=(((rng.standard_normal(X.shape[1]) * draw(st.sampled_from(SCALES)))
                      .astype(X.dtype) if replace_row else None),
                     float(rng.standard_normal() * draw(st.sampled_from(Y_SCALES)))),
    )


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=_cases())
def test_clipped_sum_sensitivity(path, relation, case):
    X = case.pop("X")
    y = case.pop("y")
    i = case.pop("i")
    _check(path, X, y, i, relation=relation, **case)


# ---------------------------------------------------------------- estimator level


def _fit_oracle(monkeypatch, est, X, y):
    """The private oracle and engine config ``est.fit`` hands to the engine (no steps run)."""
    from sklearn_fdp.linear import _dpsgd_regressor

    seen = {}

    def capture(theta0, oracle, n_samples, config, **kwargs):
        seen.update(oracle=oracle, config=config)
        raise RuntimeError("captured")

    monkeypatch.setattr(_dpsgd_regressor, "run_dp_sgd", capture)
    with pytest.raises(RuntimeError, match="captured"):
        with pytest.warns(FdpWarning) if _outside(est, y) else _nothing():
            est.fit(X, y)
    return seen["oracle"], seen["config"]


def _outside(est, y):
    lo, hi = est.y_bounds
    return bool(np.any((y < lo) | (y > hi)))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("noise", ["default", "secure"])
@pytest.mark.parametrize("loss_name", LOSSES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fit_oracle_and_noise_scale(monkeypatch, noise, loss_name, dtype):
    """What ``fit`` builds: targets outside ``y_bounds`` clipped, each record's
    contribution ≤ the clip the noise is scaled to, whatever the target."""
    rng = np.random.default_rng(1)
    n, d = 40, 5
    X = (rng.standard_normal((n, d)) * 1e3).astype(dtype)
    y = rng.standard_normal(n) * 1e6
    y[0] = 1e250
    est = DPSGDRegressor(loss=loss_name, loss_epsilon=2.0, y_bounds=(-5.0, 5.0),
                         max_grad_norm=0.7, epsilon=1.0, noise=noise, random_state=0)
    oracle, config = _fit_oracle(monkeypatch, est, X, y)
    assert config.max_grad_norm == 0.7 == oracle.max_grad_norm
    assert np.all(np.abs(oracle.y_kernel) <= 1.0)  # the clipped, mapped target
    theta = rng.standard_normal((d + 1, 1)).astype(dtype)
    full = oracle(np.arange(n), theta)
    for i in (0, 1, n - 1):
        without = oracle(np.r_[0:i, i + 1:n], theta)  # the same as the oracle of D minus i
        assert_sensitivity(full, without, config.max_grad_norm, n_terms=n,
                           clip=config.max_grad_norm, dtype=dtype,
                           what=f"fit's oracle, {loss_name}, noise={noise}")

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
:func:`~sklearn_fdp._kernels._momentum.lazy_momentum_steps`), plus the
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
from sklearn_fdp._kernels._momentum import lazy_momentum_steps
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

    :func:`lazy_momentum_steps` runs one step at lag 0 (no pending step:
    Φ = I, no noise, momentum 0.9 on a zero velocity): the fused pass adds
    the clipped gradients ``x_i c_i r_i / N`` (``N = 1`` here) to the
    carried momentum ``p`` of the coordinates, and the intercept's velocity
    becomes the sum of the clipped residuals; both are read back.
    """
    X = oracle.X
    n = X.shape[0]
    d = oracle.n_features
    S = np.zeros((d, 3))  # (θ, p, last step) for k = 1
    S[:, 0] = theta[:d, 0]
    intercept = (np.array(theta[d], dtype=np.float64) if oracle.fit_intercept
                 else np.empty(0))
    intercept_v = np.zeros(1)
    Phi = np.eye(3)[None].copy()
    Sig = np.zeros((1, 3, 3))
    F = np.zeros((1, 3, 3))
    R = np.empty((max(n, 1), 1))
    lazy_momentum_steps(X.indptr, X.indices, X.data, np.arange(n, dtype=np.intp),
                        np.array([0, n], dtype=np.intp), oracle.y_kernel, S, 1, 2, intercept,
                        intercept_v, np.zeros(1), oracle.code, oracle.x_norm_sq,
                        oracle.max_grad_norm, 0, 0, np.ones(1), 1.0, 0.9, 0.0, 0.0, 0.0, True,
                        Phi, Sig, F, np.zeros(1, dtype=np.intp), np.zeros(4), 0, R,
                        oracle.loss_param, np.zeros(3, dtype=np.int64), np.zeros(1))
    np.testing.assert_array_equal(S[:, 0], theta[:d, 0])  # a lag-0 catch-up moves nothing
    out = np.zeros((theta.shape[0], 1))
    out[:d, 0] = S[:, 1]
    if oracle.fit_intercept:
        out[d, 0] = intercept_v[0]
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
    from sklearn_fdp.linear import _whole_record  # where DPSGDRegressor runs the engine

    seen = {}

    def capture(theta0, oracle, n_samples, config, **kwargs):
        seen.update(oracle=oracle, config=config)
        raise RuntimeError("captured")

    monkeypatch.setattr(_whole_record, "run_dp_sgd", capture)
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


# ================================================================ FeatureDPSGDRegressor
#
# As tests/sensitivity/test_feature_dp.py for the classifier: the private
# oracle fit builds (intercepted at the engine call), on the whole data (the
# worst case q = 1), under the estimator's relations: removing a record (Def.
# 6: the simulator knows its public part) moves the clipped sum of
# ∇ℓ − ∇ℓ_pub by ≤ C; replacing its protected values, and its target when the
# target is private, by ≤ 2C. Per loss; label-private Algorithm 1 is the
# squared loss only (the others raise).

import warnings  # noqa: E402
from unittest import mock  # noqa: E402

import scipy.sparse as sp  # noqa: E402

from sklearn_fdp import FeatureDPSGDRegressor  # noqa: E402
from sklearn_fdp._mechanisms import fdp  # noqa: E402
from sklearn_fdp.linear import _feature_dp_sgd_regressor  # noqa: E402

from ._harness import replace_columns, replace_label  # noqa: E402
from .test_feature_dp import FixedDraws, _new_private_values  # noqa: E402


class _Stop(Exception):
    """Raised once the fit has built what it releases."""


def fdp_engine_inputs(est, X, y):
    """``(oracle, theta0, config, n)`` that ``est.fit(X, y)`` hands to the engine."""
    seen = {}

    def capture(theta0, private_oracle, n_samples, config, **kwargs):
        seen.update(oracle=private_oracle, theta0=theta0, config=config, n=n_samples)
        raise _Stop

    with mock.patch.object(_feature_dp_sgd_regressor, "run_dp_sgd", capture), \
            pytest.raises(_Stop), warnings.catch_warnings():
        warnings.simplefilter("ignore", FdpWarning)  # targets outside y_bounds: clipped
        est.fit(X, y)
    assert seen["n"] == X.shape[0]
    return seen


def fdp_simulator_inputs(est, X, y, i):
    """:func:`fdp_engine_inputs` of the Def. 6 simulator for ``D`` minus record ``i``
    (``public_scale`` from the public parts of all of ``D``, as the fit on ``D``)."""
    public_mask = np.ones(X.shape[1], dtype=bool)
    public_mask[est.private_features] = False
    scale = fdp.public_scale(X, public_mask)
    X2, y2 = remove_one(X, y, i)
    with mock.patch.object(fdp, "public_scale", lambda *args: scale):
        return fdp_engine_inputs(est, X2, y2)


def _fdp_estimator(private_idx, *, method, loss, label_public, public_loss, neighboring, clip,
                   noise="default"):
    return FeatureDPSGDRegressor(
        private_features=[int(j) for j in private_idx], label_public=label_public,
        public_loss=public_loss, method=method, loss=loss, loss_epsilon=0.5,
        y_bounds=(-3.0, 3.0), max_grad_norm=clip, noise_multiplier=1.0, epsilon=None,
        epochs=1.0, alpha=1.0, public_epochs=0, neighboring=neighboring,
        accountant="pld" if neighboring == "replace" else "rdp", random_state=0, noise=noise)


def _fdp_release(inputs, theta, padding):
    oracle = inputs["oracle"]
    if padding is not None and getattr(oracle, "view", None) is not None and oracle.view.pad:
        oracle.pad_rng = FixedDraws(padding)
    return oracle(np.arange(inputs["n"]), theta.astype(inputs["theta0"].dtype))


def check_fdp_neighbours(X, y, private_idx, *, method, loss, label_public, public_loss, clip,
                         relation, i, theta, pad_seed, new_values=None, new_target=None):
    neighboring = "add_remove" if relation == "remove" else "replace"
    est = _fdp_estimator(private_idx, method=method, loss=loss, label_public=label_public,
                         public_loss=public_loss, neighboring=neighboring, clip=clip)
    n = X.shape[0]
    padding = np.random.default_rng(pad_seed).standard_normal((n, len(private_idx)))
    if relation == "remove":
        padding2 = np.delete(padding, i, axis=0)
        factor = 1.0
    else:
        X2, y2, padding2 = X, y, padding
        if new_values is not None:
            X2 = replace_columns(X, i, private_idx, new_values)
        if new_target is not None:
            assert not label_public
            y2 = replace_label(y, i, new_target)
        factor = 2.0
    a = fdp_engine_inputs(est, X, y)
    b = (fdp_simulator_inputs(est, X, y, i) if relation == "remove"
         else fdp_engine_inputs(est, X2, y2))
    C = a["config"].max_grad_norm
    assert a["oracle"].max_grad_norm == C == b["config"].max_grad_norm == clip
    theta = np.broadcast_to(theta, a["theta0"].shape)
    ra = _fdp_release(a, theta, padding)
    rb = _fdp_release(b, theta, padding2)
    return assert_sensitivity(ra, rb, factor * C, n_terms=n, clip=C, dtype=X.dtype,
                              what=f"{method}/{loss}/{public_loss}/label_public={label_public}"
                                   f"/{relation}")


@st.composite
def fdp_regression_problem(draw):
    """``(X, y, private_idx, i, theta, loss, label_public)`` on adversarial data."""
    X, private_idx = draw(adversarial_dense(n_rows=(3, 12), n_cols=(2, 6)))
    n, d = X.shape
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    y = rng.standard_normal(n) * draw(st.sampled_from(Y_SCALES))
    loss = draw(st.sampled_from(LOSSES))
    label_public = True if loss != "squared_error" else draw(st.booleans())
    theta = rng.standard_normal((d + 1, 1)) * draw(st.sampled_from((0.0, 0.1, 1.0, 30.0)))
    if draw(st.booleans()):
        X = sp.csr_matrix(X)
    return X, y, private_idx, draw(st.integers(0, n - 1)), theta, loss, label_public


_FDP_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)
_CLIPS = (0.5, 1e-3, 3.0)


@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
@_FDP_SETTINGS
@given(problem=fdp_regression_problem(), clip=st.sampled_from(_CLIPS),
       pad_seed=st.integers(0, 99))
def test_fdp_alg1_remove_one_at_most_C(public_loss, problem, clip, pad_seed):
    X, y, private_idx, i, theta, loss, label_public = problem
    check_fdp_neighbours(X, y, private_idx, method="alg1", loss=loss, label_public=label_public,
                         public_loss=public_loss, clip=clip, relation="remove", i=i,
                         theta=theta, pad_seed=pad_seed)


@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
@_FDP_SETTINGS
@given(problem=fdp_regression_problem(), clip=st.sampled_from(_CLIPS),
       pad_seed=st.integers(0, 99), data=st.data())
def test_fdp_alg1_replace_protected_values_and_target_at_most_2C(public_loss, problem, clip,
                                                                 pad_seed, data):
    X, y, private_idx, i, theta, loss, label_public = problem
    values = _new_private_values(data.draw, len(private_idx), X.dtype)
    new_target = None
    if not label_public:
        new_target = float(np.random.default_rng(data.draw(st.integers(0, 99)))
                           .standard_normal() * data.draw(st.sampled_from(Y_SCALES)))
        if data.draw(st.booleans()):
            values = None  # the target alone
    check_fdp_neighbours(X, y, private_idx, method="alg1", loss=loss, label_public=label_public,
                         public_loss=public_loss, clip=clip, relation="replace", i=i,
                         theta=theta, pad_seed=pad_seed, new_values=values,
                         new_target=new_target)


@pytest.mark.parametrize("relation", ["remove", "replace"])
@_FDP_SETTINGS
@given(problem=fdp_regression_problem(), clip=st.sampled_from(_CLIPS), data=st.data())
def test_fdp_dpsgd_method_sensitivity(relation, problem, clip, data):
    X, y, private_idx, i, theta, loss, _ = problem
    label_public = data.draw(st.booleans())  # every loss: DP-SGD on the whole loss
    values, new_target = None, None
    if relation == "replace":
        values = _new_private_values(data.draw, len(private_idx), X.dtype)
        if not label_public:
            new_target = -float(y[i]) + 5.0
    check_fdp_neighbours(X, y, private_idx, method="dpsgd", loss=loss, label_public=label_public,
                         public_loss="mask", clip=clip, relation=relation, i=i, theta=theta,
                         pad_seed=0, new_values=values, new_target=new_target)


@pytest.mark.parametrize("dtype,scale", [(np.float32, 3e3), (np.float32, 1e4),
                                         (np.float64, 1e8)])
@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
@pytest.mark.parametrize("loss,label_public", [("squared_error", True),
                                               ("squared_error", False), ("huber", True),
                                               ("epsilon_insensitive", True)])
def test_fdp_large_public_columns_do_not_break_the_clip(dtype, scale, public_loss, loss,
                                                        label_public):
    # The cancellation of the closed-form norm (issue 16 item 4): with large
    # public columns and θ ≈ 0 on the private ones, r ≈ r_pub and the private
    # gradient x_Q rᵀ hides in the rounding of ‖x‖² ≈ ‖x_pub‖².
    rng = np.random.default_rng(1)
    n, d = 40, 6
    X = rng.standard_normal((n, d)) * scale
    private_idx = np.arange(d - 2, d)
    X[:, private_idx] = rng.standard_normal((n, 2)) * 3.0
    X = X.astype(dtype)
    y = rng.standard_normal(n) * 2
    for seed in range(3):
        theta = np.random.default_rng(seed).standard_normal((d + 1, 1)) / scale
        theta[private_idx] = (0.0 if seed % 2 else
                              np.random.default_rng(seed + 10).standard_normal((2, 1)))
        for i in (0, 17, 39):
            check_fdp_neighbours(X, y, private_idx, method="alg1", loss=loss,
                                 label_public=label_public, public_loss=public_loss, clip=0.5,
                                 relation="remove", i=i, theta=theta, pad_seed=seed)


@pytest.mark.parametrize("loss", ["huber", "epsilon_insensitive"])
def test_fdp_label_private_alg1_refuses_losses_without_a_label_free_split(loss):
    est = _fdp_estimator([0], method="alg1", loss=loss, label_public=False,
                         public_loss="mask", neighboring="add_remove", clip=1.0)
    with pytest.raises(ValueError, match="squared_error"):
        est.fit(np.ones((20, 3)), np.zeros(20))
    with pytest.raises(ValueError, match="squared_error"):
        fdp.FeatureDPPrivateOracle(np.ones((5, 3)), np.zeros(5),
                                   LinearLoss(loss, 1, margin=0.1), np.array([True, True, False]),
                                   False, "mask", True, 1.0)


@pytest.mark.parametrize("label_public", [True, False])
def test_fdp_secure_mode_private_padding_is_secret(label_public):
    from sklearn_fdp._secure import SecureGenerator

    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 5))
    y = rng.standard_normal(30)
    est = _fdp_estimator([3, 4], method="alg1", loss="squared_error", label_public=label_public,
                         public_loss="gaussian_pad", neighboring="add_remove", clip=0.5,
                         noise="secure")
    a, b = fdp_engine_inputs(est, X, y), fdp_engine_inputs(est, X, y)
    assert isinstance(a["oracle"].pad_rng, SecureGenerator)
    assert not np.array_equal(a["oracle"].pad_rng.standard_normal((4, 2)),
                              b["oracle"].pad_rng.standard_normal((4, 2)))
    theta = rng.standard_normal((6, 1)) * 5
    padding = rng.standard_normal((30, 2))
    sim = fdp_simulator_inputs(est, X, y, 0)
    assert_sensitivity(_fdp_release(a, theta, padding),
                       _fdp_release(sim, theta, np.delete(padding, 0, axis=0)), 0.5,
                       n_terms=30, clip=0.5, dtype=np.float64, what="secure gaussian_pad")

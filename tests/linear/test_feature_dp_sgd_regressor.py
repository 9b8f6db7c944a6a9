"""FeatureDPSGDRegressor: the loss split of Algorithm 1 per loss, methods, specs, bookkeeping."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.linear_model import LinearRegression

from sklearn_fdp import DPSGDRegressor, FeatureDPSGDRegressor
from sklearn_fdp._engine import LinearGradientOracle, LinearLoss
from sklearn_fdp._mechanisms.fdp import (
    FeatureDPPrivateOracle,
    FeatureDPPublicOracle,
    _PublicView,
    public_minimiser,
)
from sklearn_fdp.exceptions import FdpWarning

LOSSES = ["squared_error", "huber", "epsilon_insensitive"]
BOUNDS = (0.0, 20.0)


def _data(n=4000, seed=0):
    """5 columns, rows of norm ≤ 1; columns 3 and 4 (to be protected) carry signal."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 5)) / np.sqrt(5)
    s = np.sqrt(5)
    y = 10 + 3 * s * X[:, 0] - 2 * s * X[:, 1] + 3 * s * X[:, 3] + 2 * s * X[:, 4] \
        + rng.normal(0, 0.5, n)
    return X, y


@pytest.fixture(scope="module")
def data():
    return _data()


def _public_sum(X, y, loss, mask, label_public, theta, idx):
    """Σ_{i ∈ idx} ∇ℓ_pub (the public oracle's mean times the batch, on the same rows)."""
    view = _PublicView(X, mask, "mask", True)
    from sklearn_fdp._mechanisms.fdp import _public_residual

    Xb = X[idx]
    R_pub = _public_residual(loss, view.decision(Xb, theta, None), y[idx], label_public)
    out = np.zeros_like(theta)
    return view.add_transpose_product(Xb, R_pub, None, out)


@pytest.mark.parametrize("loss_name,label_public", [
    ("squared_error", True), ("squared_error", False), ("huber", True),
    ("epsilon_insensitive", True)])
@pytest.mark.parametrize("sparse", [False, True])
def test_private_plus_public_part_is_the_whole_gradient(loss_name, label_public, sparse):
    """Unclipped: Σ (∇ℓ − ∇ℓ_pub) + Σ ∇ℓ_pub = Σ ∇ℓ on the same rows, for each loss's split."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 6))
    X[X < -1] = 0.0
    y = rng.normal(size=50)
    mask = np.array([True, True, False, True, False, True])
    theta = rng.normal(size=(7, 1))
    loss = LinearLoss(loss_name, 1, margin=0.3)
    Xin = sp.csr_matrix(X) if sparse else X
    private = FeatureDPPrivateOracle(Xin, y, loss, mask, label_public, "mask", True, np.inf)
    whole = LinearGradientOracle(Xin, y, loss, True, np.inf)
    idx = np.arange(50)
    got = private(idx, theta) + _public_sum(X, y, loss, mask, label_public, theta, idx)
    np.testing.assert_allclose(got, whole(idx, theta), rtol=1e-10, atol=1e-10)


def test_label_private_squared_public_part_ignores_the_target():
    """With a private target the public oracle's gradient x_pub z_pub does not read y."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 4))
    mask = np.array([True, True, False, True])
    theta = rng.normal(size=(5, 1))
    loss = LinearLoss("squared_error", 1)
    outs = []
    for y in (rng.normal(size=30), rng.normal(size=30) * 100):
        pub = FeatureDPPublicOracle(X, y, loss, mask, False, "mask", True, 30,
                                    np.random.default_rng(0))
        outs.append(pub(theta))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_public_minimiser_is_least_squares_on_public_columns(data):
    X, y = data
    mask = np.array([True, True, True, False, False])
    theta = public_minimiser(X, y, np.zeros((6, 1)), mask, True, LinearLoss("squared_error", 1))
    ref = LinearRegression().fit(X[:, :3], y)
    np.testing.assert_allclose(theta[:3, 0], ref.coef_, rtol=1e-8)
    np.testing.assert_allclose(theta[5, 0], ref.intercept_, rtol=1e-8)
    assert np.all(theta[3:5] == 0)


@pytest.mark.parametrize("loss", LOSSES)
def test_alg1_learns_and_beats_the_public_only_model(data, loss):
    X, y = data
    pub = LinearRegression().fit(X[:, :3], y).score(X[:, :3], y)  # 0.48 here
    full = LinearRegression().fit(X, y).score(X, y)  # 0.98
    reg = FeatureDPSGDRegressor(private_features=[3, 4], label_public=True, loss=loss,
                                loss_epsilon=1.0, y_bounds=BOUNDS, epsilon=4.0,
                                random_state=0).fit(X, y)
    assert reg.coef_.shape == (5,) and reg.intercept_.shape == (1,)
    assert reg.method_ == "alg1" and reg.private_features_.tolist() == [3, 4]
    assert pub + 0.2 < reg.score(X, y) <= full + 1e-9, (pub, reg.score(X, y), full)


def test_label_private_squared_alg1_learns(data):
    X, y = data
    full = LinearRegression().fit(X, y).score(X, y)
    reg = FeatureDPSGDRegressor(private_features=[3, 4], y_bounds=BOUNDS, epsilon=4.0,
                                random_state=0).fit(X, y)
    assert not reg.label_public_ and reg.privacy_plan_.unit == "features+label"
    assert reg.score(X, y) > full - 0.15


@pytest.mark.parametrize("loss", ["huber", "epsilon_insensitive"])
def test_label_private_alg1_refuses_other_losses_but_dpsgd_runs(data, loss):
    X, y = data
    est = FeatureDPSGDRegressor(private_features=[3], loss=loss, y_bounds=BOUNDS, epochs=1)
    with pytest.raises(ValueError, match="loss='squared_error'.*method='dpsgd'"):
        est.fit(X, y)
    with pytest.raises(ValueError, match="squared_error"):
        est.privacy_plan(*X.shape)
    reg = clone(est).set_params(method="dpsgd", random_state=0).fit(X, y)
    assert reg.method_ == "dpsgd" and reg.alpha_ == 1.0


def test_dpsgd_method_starts_from_the_public_least_squares_fit(data, monkeypatch):
    from sklearn_fdp.linear import _feature_dp_sgd_regressor as mod

    X, y = data
    starts = []
    real = mod.run_dp_sgd
    monkeypatch.setattr(mod, "run_dp_sgd",
                        lambda theta0, *a, **k: starts.append(theta0.copy()) or
                        real(theta0, *a, **k))
    FeatureDPSGDRegressor(private_features=[3, 4], label_public=True, method="dpsgd",
                          y_bounds=BOUNDS, epochs=1, random_state=0).fit(X, y)
    t = (y - 10.0) / 10.0
    ref = LinearRegression().fit(X[:, :3], t)
    np.testing.assert_allclose(starts[0][:3, 0], ref.coef_, rtol=1e-8)
    assert np.all(starts[0][3:5] == 0)


def test_public_epochs_needs_a_public_target(data):
    X, y = data
    with pytest.raises(ValueError, match="public_epochs=2.*label_public=True"):
        FeatureDPSGDRegressor(private_features=[3], public_epochs=2, y_bounds=BOUNDS).fit(X, y)
    reg = FeatureDPSGDRegressor(private_features=[3], public_epochs=2, label_public=True,
                                y_bounds=BOUNDS, epochs=1, random_state=0).fit(X, y)
    assert np.all(np.isfinite(reg.coef_))


def test_epsilon_is_the_dpsgd_accounting(data):
    """Same (σ, q, T) as DPSGDRegressor: the same ε (FDP Thm. 5)."""
    X, y = data
    a = FeatureDPSGDRegressor(private_features=[3], y_bounds=BOUNDS, epsilon=0.5,
                              random_state=0).fit(X, y)
    b = DPSGDRegressor(y_bounds=BOUNDS, epsilon=0.5, random_state=0).fit(X, y)
    assert a.noise_multiplier_ == b.noise_multiplier_ and a.steps_ == b.steps_
    assert a.epsilon_ == pytest.approx(b.epsilon_) and a.epsilon_ <= 0.5
    assert a.max_grad_norm_ == 0.5


def test_dense_and_csr_identical(data):
    X, y = data
    params = dict(private_features=[3, 4], label_public=True, y_bounds=BOUNDS, epochs=2,
                  random_state=3)
    dense = FeatureDPSGDRegressor(**params).fit(X, y)
    csr = FeatureDPSGDRegressor(**params).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(csr.coef_, dense.coef_, rtol=1e-10, atol=1e-12)
    f32 = FeatureDPSGDRegressor(**params).fit(X.astype(np.float32), y)
    assert f32.coef_.dtype == np.float32
    np.testing.assert_allclose(f32.coef_, dense.coef_, rtol=1e-3, atol=1e-3)


def test_gaussian_pad_runs(data):
    X, y = data
    reg = FeatureDPSGDRegressor(private_features=[3, 4], label_public=True,
                                public_loss="gaussian_pad", y_bounds=BOUNDS, epsilon=4.0,
                                random_state=0).fit(X, y)
    assert reg.score(X, y) > 0.5


def test_large_public_rows_are_rescaled(data):
    X, y = data
    X = X * 100
    reg = FeatureDPSGDRegressor(private_features=[3, 4], label_public=True, y_bounds=BOUNDS,
                                epochs=2, random_state=0).fit(X, y)
    assert reg.public_scale_ > 1 and np.all(np.isfinite(reg.coef_))


def test_names_pickle_clone_and_targets_outside_bounds(data):
    X, y = data
    frame = pd.DataFrame(X, columns=["a", "b", "c", "sex", "race"])
    y = y.copy()
    y[0] = 50.0
    with pytest.warns(FdpWarning, match="1 of 4000 target"):
        reg = FeatureDPSGDRegressor(private_features=["sex", "race"], y_bounds=BOUNDS,
                                    epochs=1, random_state=0).fit(frame, y)
    assert reg.private_features_.tolist() == [3, 4]
    assert reg.privacy_plan_.protected_features == ("sex", "race")
    loaded = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(loaded.predict(frame), reg.predict(frame))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FdpWarning)
        again = clone(reg).fit(frame, y)
    np.testing.assert_array_equal(again.coef_, reg.coef_)


def test_in_a_private_pipeline(data):
    from sklearn.preprocessing import FunctionTransformer

    from sklearn_fdp import privacy_report
    from sklearn_fdp.pipeline import make_private_pipeline

    X, y = data
    frame = pd.DataFrame(X, columns=["a", "b", "c", "sex", "race"])
    pipe = make_private_pipeline(
        FunctionTransformer(feature_names_out="one-to-one"),
        FeatureDPSGDRegressor(private_features=["sex", "race"], label_public=True,
                              y_bounds=BOUNDS, epochs=1, random_state=0))
    pipe.fit(frame, y)
    assert pipe[-1].private_features_.tolist() == [3, 4]
    report = privacy_report(pipe)
    assert "sex" in str(report)


@pytest.mark.parametrize("label_public", [True, False])
def test_out_of_core_memmap_gives_the_in_memory_model(data, tmp_path, monkeypatch,
                                                      label_public):
    from sklearn_fdp import _outofcore

    monkeypatch.setattr(_outofcore, "STREAM_MIN_BYTES", 0)
    X, y = data
    mm = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=X.dtype, shape=X.shape)
    mm[:] = X
    mm.flush()
    mm = np.load(tmp_path / "X.npy", mmap_mode="r")
    params = dict(private_features=[3, 4], label_public=label_public, y_bounds=BOUNDS,
                  epochs=2, random_state=0)
    a = FeatureDPSGDRegressor(**params).fit(mm, y)
    b = FeatureDPSGDRegressor(**params).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)


def test_auto_alpha_is_one_for_a_private_target(data):
    # α < 1 would shrink the fit of a private target towards the centre (a
    # bias in every prediction); with a public target the classifier's rule.
    X, y = data
    private = FeatureDPSGDRegressor(private_features=[3], y_bounds=BOUNDS, epsilon=0.05,
                                    epochs=1, random_state=0).fit(X, y)
    public = FeatureDPSGDRegressor(private_features=[3], label_public=True, y_bounds=BOUNDS,
                                   epsilon=0.05, epochs=1, random_state=0).fit(X, y)
    assert private.alpha_ == 1.0 and public.alpha_ < 1.0

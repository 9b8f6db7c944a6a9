"""DPSGDRegressor: the regression losses' residuals, the engine paths, y_bounds, bookkeeping."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

from sklearn_fdp import DPSGDRegressor, accounting
from sklearn_fdp._engine import (
    EngineConfig,
    LinearGradientOracle,
    LinearLoss,
    PoissonSampler,
    run_dp_sgd,
)
from sklearn_fdp._kernels import RESIDUAL_MAX
from sklearn_fdp.exceptions import FdpWarning

LOSSES = ["squared_error", "huber", "epsilon_insensitive"]
BOUNDS = (0.0, 20.0)


def _data(n=4000, d=6, seed=0):
    """Rows of norm ≤ 1, target in [3, 17] plus N(0, 0.5²) noise: inside BOUNDS (6 sd margin)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)) / np.sqrt(d)
    y = 10 + 4 * np.sqrt(d) * X[:, 0] - 3 * np.sqrt(d) * X[:, 1] + rng.normal(0, 0.5, n)
    return X, y


@pytest.fixture(scope="module")
def data():
    return _data()


def _loss_value(loss, z, y, eps):
    diff = z - y
    if loss == "squared_error":
        return 0.5 * diff**2
    if loss == "huber":
        a = np.abs(diff)
        return np.where(a <= eps, 0.5 * diff**2, eps * a - 0.5 * eps**2)
    return np.maximum(0.0, np.abs(diff) - eps)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("path", ["blas", "fused", "csr"])
def test_residual_is_the_gradient_of_the_loss(loss, path):
    """Unclipped oracle sum = central finite differences of Σ ℓ(θ; x_i, y_i), every path."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 5))
    X[X < -0.8] = 0.0  # some zeros for the CSR path
    y = rng.normal(size=40) * 2
    theta = rng.normal(size=(6, 1))
    eps = 0.3
    loss_obj = LinearLoss(loss, 1, margin=eps)
    oracle = LinearGradientOracle(sp.csr_matrix(X) if path == "csr" else X, loss_obj.encode(y),
                                  loss_obj, True, np.inf)
    if path != "csr":
        oracle.path = path
    idx = np.arange(40)
    got = oracle(idx, theta)

    def total(th):
        return _loss_value(loss, X @ th[:5, 0] + th[5, 0], y, eps).sum()

    h = 1e-6
    num = np.zeros_like(theta)
    for j in range(6):
        e = np.zeros_like(theta)
        e[j] = h
        num[j] = (total(theta + e) - total(theta - e)) / (2 * h)
    # Central differences are exact for the quadratic pieces up to rounding
    # (~1e-9 here); a kink within h of a point would break this, and none is
    # (|z − y| ± ε is at least 1e-4 away from 0 for every row at this seed).
    z = X @ theta[:5, 0] + theta[5, 0]
    assert np.min(np.abs(np.abs(z - y) - eps)) > 1e-4 and np.min(np.abs(z - y)) > 1e-4
    np.testing.assert_allclose(got, num, rtol=1e-6, atol=1e-6)
    # And the numpy residual the FDP oracles use agrees with the kernels'.
    R = loss_obj.residual(z[:, None], y)
    Xt = np.column_stack([X, np.ones(40)])
    np.testing.assert_allclose(got, Xt.T @ R, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loss", LOSSES)
def test_clipped_sum_norms_bounded_and_paths_agree(loss):
    """Per-example contributions are clipped to C; dense BLAS, fused and CSR agree."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 8)) * rng.choice([0.01, 1, 30], size=(300, 1))
    y = rng.normal(size=300) * 50
    theta = rng.normal(size=(9, 1))
    lo = LinearLoss(loss, 1, margin=0.5)
    outs = {}
    for path in ["blas", "fused", "csr"]:
        o = LinearGradientOracle(sp.csr_matrix(X) if path == "csr" else X, y, lo, True, 1.0)
        if path != "csr":
            o.path = path
        outs[path] = o(np.arange(300), theta)
        for i in range(0, 300, 7):
            assert np.linalg.norm(o(np.array([i]), theta)) <= 1.0
    np.testing.assert_allclose(outs["fused"], outs["blas"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(outs["csr"], outs["blas"], rtol=1e-10, atol=1e-10)


def test_huge_residuals_stay_finite_and_clipped():
    """A residual beyond RESIDUAL_MAX is capped: its square stays finite, the clip holds."""
    X = np.array([[0.5, 0.5], [1.0, 0.0]])
    y = np.array([1e300, -1e300])
    lo = LinearLoss("squared_error", 1)
    for path in ["blas", "fused", "csr"]:
        o = LinearGradientOracle(sp.csr_matrix(X) if path == "csr" else X, y, lo, True, 1.0)
        if path != "csr":
            o.path = path
        g = o(np.array([0]), np.zeros((3, 1)))
        assert np.all(np.isfinite(g)) and 0.99 < np.linalg.norm(g) <= 1.0
    R = lo.residual(np.zeros((2, 1)), y)
    np.testing.assert_array_equal(R[:, 0], [-RESIDUAL_MAX, RESIDUAL_MAX])


@pytest.mark.parametrize("loss", LOSSES)
def test_noise_free_engine_is_sgd_on_the_same_batches(loss):
    """σ = 0, no clipping: the engine's steps are plain SGD on the sampler's batches."""
    X, y = _data(n=500, d=4, seed=3)
    y = (y - 10) / 10
    lo = LinearLoss(loss, 1, margin=0.2)
    oracle = LinearGradientOracle(X, lo.encode(y), lo, True, np.inf)
    cfg = EngineConfig(steps=30, sampling_rate=0.1, noise_multiplier=0.0, max_grad_norm=np.inf,
                       learning_rate=0.5, lr_schedule="constant", momentum=0.0,
                       l2_regularization=0.0)
    got = run_dp_sgd(np.zeros((5, 1)), oracle, 500, cfg, sample_rng=np.random.default_rng(9),
                     noise_rng=np.random.default_rng(10)).theta
    sampler = PoissonSampler(500, 0.1, np.random.default_rng(9))
    Xt = np.column_stack([X, np.ones(500)])
    theta = np.zeros((5, 1))
    for _ in range(30):
        idx = sampler.sample()
        R = lo.residual(Xt[idx] @ theta, y[idx])
        theta = theta - 0.5 * (Xt[idx].T @ R) / 50.0
    np.testing.assert_allclose(got, theta, rtol=1e-10, atol=1e-12)


def test_learns_the_linear_model_at_large_epsilon(data):
    X, y = data
    ref = r2_score(y, LinearRegression().fit(X, y).predict(X))  # 0.97 here
    reg = DPSGDRegressor(epsilon=8.0, y_bounds=BOUNDS, random_state=0).fit(X, y)
    assert reg.coef_.shape == (6,) and reg.intercept_.shape == (1,)
    assert reg.score(X, y) > ref - 0.05
    np.testing.assert_allclose(reg.score(X, y), r2_score(y, reg.predict(X)))
    # Huber and ε-insensitive (margin 1 in units of y) learn it too.
    for loss in ["huber", "epsilon_insensitive"]:
        r = DPSGDRegressor(loss=loss, loss_epsilon=1.0, epsilon=8.0, y_bounds=BOUNDS,
                           random_state=0).fit(X, y)
        assert r.score(X, y) > ref - 0.1, loss


def test_y_bounds_maps_back_to_the_units_of_y(data, monkeypatch):
    """The model trained on t = (y − c)/h is mapped back: predict is in units of y."""
    X, y = data
    # learning_rate fixed: "auto" has other constants with and without y_bounds.
    a = DPSGDRegressor(epsilon=2.0, y_bounds=BOUNDS, epochs=2, learning_rate=0.3, random_state=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FdpWarning)
        a.fit(X, y)
        t = np.clip((np.clip(y, *BOUNDS) - 10.0) / 10.0, -1, 1)
        # The same run on the mapped target without bounds gives θ; the
        # bounded model is 10 θ (coef) and 10 b + 10 (intercept). With
        # loss_epsilon="auto" the margin is 0.1 in the training units both ways.
        b = DPSGDRegressor(epsilon=2.0, epochs=2, learning_rate=0.3, random_state=4).fit(X, t)
    np.testing.assert_allclose(a.coef_, 10 * b.coef_, rtol=1e-12)
    np.testing.assert_allclose(a.intercept_, 10 * b.intercept_ + 10, rtol=1e-12)


def test_targets_outside_bounds_are_clipped_with_a_count(data):
    X, y = data
    y = y.copy()
    y[:3] = [-5.0, 25.0, 1e6]
    y0 = y.copy()
    with pytest.warns(FdpWarning, match=r"3 of 4000 target value\(s\) lie outside"):
        DPSGDRegressor(y_bounds=BOUNDS, epochs=1, random_state=0).fit(X, y)
    np.testing.assert_array_equal(y, y0)  # not mutated
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DPSGDRegressor(y_bounds=BOUNDS, epochs=1, random_state=0).fit(X, np.clip(y, *BOUNDS))


def test_no_y_bounds_warns_and_does_not_diverge(data):
    X, y = data
    with pytest.warns(FdpWarning, match="without y_bounds"):
        reg = DPSGDRegressor(epsilon=1.0, random_state=0).fit(X, y * 100)
    assert np.all(np.isfinite(reg.coef_)) and reg.learning_rate_ <= 1.0


@pytest.mark.parametrize("bounds", [(1.0,), (2.0, 1.0), (0.0, np.inf), ("a", "b"), 5.0,
                                    (np.nan, 1.0)])
def test_bad_y_bounds_raise_naming_the_value(data, bounds):
    X, y = data
    with pytest.raises(ValueError, match="y_bounds"):
        DPSGDRegressor(y_bounds=bounds, epochs=1).fit(X, y)


@pytest.mark.parametrize("params,match", [
    (dict(loss="hinge"), "loss"),
    (dict(loss_epsilon=-1.0), "loss_epsilon"),
    (dict(learning_rate=0.0), "learning_rate"),
    (dict(classes=[0, 1]), "classes"),
])
def test_invalid_parameters_raise(data, params, match):
    X, y = data
    with pytest.raises((ValueError, TypeError), match=match):
        DPSGDRegressor(**params).fit(X, y)


@pytest.mark.parametrize("loss", LOSSES)
def test_dense_and_csr_identical_on_the_eager_path(data, loss, monkeypatch):
    from sklearn_fdp._engine import _loop

    X, y = data
    params = dict(loss=loss, epsilon=1.0, epochs=2, y_bounds=BOUNDS, random_state=3)
    dense = DPSGDRegressor(**params).fit(X, y)
    with monkeypatch.context() as m:
        m.setattr(_loop, "lazy_noise_blockers", lambda *a, **k: ["forced eager"])
        csr = DPSGDRegressor(**params).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(dense.coef_, csr.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dense.intercept_, csr.intercept_, rtol=1e-10, atol=1e-12)
    f32 = DPSGDRegressor(**params).fit(X.astype(np.float32), y)
    assert f32.coef_.dtype == np.float32 and f32.predict(X.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(f32.coef_, dense.coef_, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("loss", LOSSES)
def test_sparse_uses_lazy_noise_and_learns(data, monkeypatch, momentum, loss):
    from sklearn_fdp._engine import _loop

    calls = []
    real = _loop.run_lazy_sparse
    monkeypatch.setattr(_loop, "run_lazy_sparse", lambda *a, **k: calls.append(1) or real(*a, **k))
    X, y = data
    params = dict(loss=loss, loss_epsilon=1.0, epsilon=8.0, momentum=momentum, y_bounds=BOUNDS,
                  random_state=0)
    csr = DPSGDRegressor(**params).fit(sp.csr_matrix(X), y)
    dense = DPSGDRegressor(**params).fit(X, y)
    assert calls == [1]
    # Same model in distribution; at ε = 8 both approach the linear fit (R²
    # 0.97; Huber without momentum, whose residuals are at most 0.1 in the
    # mapped units, is the slowest: 0.73 here): the dispatch works and the
    # lazy path learns with the loss.
    assert abs(csr.score(X, y) - dense.score(X, y)) < 0.05
    assert csr.score(X, y) > 0.6


def test_privacy_bookkeeping(data):
    X, y = data
    reg = DPSGDRegressor(epsilon=0.5, y_bounds=BOUNDS, random_state=0).fit(X, y)
    assert reg.epsilon_ <= 0.5 and reg.delta_ == 1e-5
    assert reg.steps_ == reg.n_iter_ > 0 and reg.noise_multiplier_ > 0
    eps = accounting.compute_epsilon(reg.noise_multiplier_, reg.sampling_rate_, reg.steps_,
                                     reg.delta_, accountant=reg.accountant_)
    assert eps == pytest.approx(reg.epsilon_, rel=1e-6)
    assert reg.privacy_plan_.dp_event == reg.dp_event_
    plan = DPSGDRegressor(epsilon=0.5).privacy_plan(*X.shape)
    assert plan.noise_multiplier == reg.noise_multiplier_
    assert plan.unit == "record"


def test_same_seed_same_model_and_clone_pickle(data):
    X, y = data
    a = DPSGDRegressor(epsilon=1.0, epochs=2, y_bounds=BOUNDS, random_state=7).fit(X, y)
    b = clone(a).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(c.predict(X), a.predict(X))
    d = DPSGDRegressor(epsilon=1.0, epochs=2, y_bounds=BOUNDS, random_state=8).fit(X, y)
    assert not np.array_equal(a.coef_, d.coef_)


def test_secure_noise_fits(data):
    X, y = data
    reg = DPSGDRegressor(epsilon=8.0, y_bounds=BOUNDS, noise="secure", epochs=2).fit(X, y)
    assert reg.score(X, y) > 0.5
    assert reg.__sklearn_tags__().non_deterministic


def test_inputs_not_mutated_and_nan_rejected(data):
    X, y = data
    X0, y0 = X.copy(), y.copy()
    DPSGDRegressor(epochs=1, y_bounds=BOUNDS, random_state=0).fit(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    bad = y.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DPSGDRegressor(epochs=1, y_bounds=BOUNDS).fit(X, bad)


def test_pipeline_grid_search_and_privacy_report(data):
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from sklearn_fdp import privacy_report

    X, y = data
    pipe = make_pipeline(FunctionTransformer(lambda Z: Z / 2),  # data-independent
                         DPSGDRegressor(epsilon=4.0, epochs=2, y_bounds=BOUNDS, random_state=0))
    grid = GridSearchCV(pipe, {"dpsgdregressor__learning_rate": [0.1, 1.0]}, cv=2).fit(X, y)
    assert grid.best_params_["dpsgdregressor__learning_rate"] in (0.1, 1.0)
    report = privacy_report(grid.best_estimator_)
    reg = grid.best_estimator_[-1]
    # The fit's ε, re-accounted by the report (PLD, as the fit's "auto" accountant).
    assert report.epsilon_pld == pytest.approx(reg.epsilon_, rel=1e-3)
    assert report.protected_unit.startswith("whole record")


@pytest.mark.parametrize("path", ["blas", "fused"])
def test_out_of_core_memmap_gives_the_in_memory_model(data, tmp_path, monkeypatch, path):
    from sklearn_fdp import _outofcore
    from sklearn_fdp._engine import _linear as engine_linear

    monkeypatch.setattr(_outofcore, "STREAM_MIN_BYTES", 0)  # stream even this small array
    if path == "fused":
        monkeypatch.setattr(engine_linear, "FUSED_MIN_GATHER_BYTES", 0)
    X, y = data
    mm = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=X.dtype, shape=X.shape)
    mm[:] = X
    mm.flush()
    mm = np.load(tmp_path / "X.npy", mmap_mode="r")
    assert _outofcore.should_stream(mm)
    params = dict(loss="huber", loss_epsilon=1.0, epsilon=2.0, epochs=2, y_bounds=BOUNDS,
                  random_state=0)
    a = DPSGDRegressor(**params).fit(mm, y)
    b = DPSGDRegressor(**params).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)


def test_progress_hook_and_verbose(data, capsys):
    from sklearn_fdp import progress_hook

    X, y = data
    calls = []
    with progress_hook(lambda done, total: calls.append((done, total))):
        reg = DPSGDRegressor(epochs=1, y_bounds=BOUNDS, verbose=1, random_state=0).fit(X, y)
    assert calls[-1] == (reg.steps_, reg.steps_)
    assert "ε spent" in capsys.readouterr().out


def test_private_search_refuses_a_regressor(data):
    # Its released score is a noisy count of exact predictions: meaningless for a regressor.
    from sklearn_fdp.model_selection import PrivateRandomizedSearchCV

    X, y = data
    search = PrivateRandomizedSearchCV(DPSGDRegressor(y_bounds=BOUNDS),
                                       {"learning_rate": [0.1, 1.0]}, n_iter=2, epsilon=1.0)
    with pytest.raises(ValueError, match="accuracy.*DPSGDRegressor"):
        search.fit(X, y)

"""MLPFeatureDPRegressor: learning, accounting, y_bounds, the label-free public loss, API."""

import math
import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_fdp import MLPFeatureDPRegressor, accounting, privacy_report
from sklearn_fdp.exceptions import FdpWarning

from .._helpers import call_without

torch = pytest.importorskip("torch")

from sklearn_fdp.neural import _mlp  # noqa: E402  (after the torch skip)

LO, HI = -3.0, 3.0


pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py


def _smooth(n, seed):
    """A smooth regression on [-1, 1]^6 with N(0, 0.1²) noise; |y| < 3 almost surely."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 6))
    f = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.5 * X[:, 3]
    return X, f + 0.1 * rng.standard_normal(n)


@pytest.fixture(scope="module")
def data():
    return _smooth(600, 0)


def _fast(**kw):
    params = dict(hidden_layer_sizes=(16,), private_features=[0, 1], y_bounds=(LO, HI),
                  epsilon=4.0, delta=1e-4, epochs=2, device="cpu", random_state=0)
    params.update(kw)
    return MLPFeatureDPRegressor(**params)


# -- scikit-learn compatibility ----------------------------------------------------


# sklearn's estimator checks run in tests/test_common.py (with every public estimator).


def test_pipeline_grid_search_and_pickle(data):
    X, y = data
    pipe = make_pipeline(StandardScaler(), _fast())
    search = GridSearchCV(pipe, {"mlpfeaturedpregressor__learning_rate": [0.05, 0.1]}, cv=2)
    search.fit(X, y)
    assert search.best_params_["mlpfeaturedpregressor__learning_rate"] in (0.05, 0.1)
    # score is R²
    best = search.best_estimator_
    assert best.score(X, y) == pytest.approx(r2_score(y, best.predict(X)))
    reg = _fast().fit(X, y)
    clone = pickle.loads(pickle.dumps(reg))
    assert all(p.device.type == "cpu" for p in clone.module_.parameters())
    np.testing.assert_array_equal(clone.predict(X), reg.predict(X))
    assert clone.y_bounds_ == reg.y_bounds_ == (LO, HI)


# -- learning ------------------------------------------------------------------------------


def _nonprivate_sgd(X, T, seed, *, epochs, batch_size, lr, momentum):
    """The same network (architecture, init distribution) trained without privacy.

    Heavy-ball SGD on the mean squared error ``½ (f(x) − t)²`` of shuffled
    minibatches of the mapped target ``T``, with the regressor's step size,
    momentum, batch size and number of passes: what the private fit would be
    without clipping, noise and the public/private split.
    """
    gen = torch.Generator().manual_seed(seed)
    module = _mlp._build_module(torch, (X.shape[1], 32, 1), "relu", gen)
    module.requires_grad_(True)
    opt = torch.optim.SGD(module.parameters(), lr=lr, momentum=momentum)
    Xt = torch.tensor(X, dtype=torch.float32)
    Tt = torch.tensor(T, dtype=torch.float32)[:, None]
    for _ in range(epochs):
        perm = torch.randperm(len(X), generator=gen)
        for start in range(0, len(X), batch_size):
            idx = perm[start:start + batch_size]
            opt.zero_grad()
            (0.5 * (module(Xt[idx]) - Tt[idx]).square().sum(1).mean()).backward()
            opt.step()
    return module


def test_learns_a_smooth_regression_close_to_the_nonprivate_network():
    """At ε = 50 the private fit reaches the R² of the same network trained without privacy.

    Three private fits (random_state 0-2) against three non-private ones
    (same architecture, step size, momentum, batch size and epochs; seeds
    0-2), all scored on one test set of 2000 rows. The tolerance comes from
    the spread the seeds show: the mean private R² must not fall below the
    mean non-private R² by more than three standard errors of the difference
    of the two means (sample standard deviations over the seeds), plus three
    standard errors of the test set's sampling of R² (paired differences of
    squared errors, averaged models). Observed when written: private
    0.945-0.957, non-private 0.947-0.951 (gap 0.0008, tolerance 0.015);
    sklearn's MLPRegressor (adam, 500 iterations) 0.974; least squares 0.82;
    the noise floor 0.988.
    """
    X, y = _smooth(3000, 0)
    Xt, yt = _smooth(2000, 1)
    epochs, lr = 40, 0.1
    private = [MLPFeatureDPRegressor(hidden_layer_sizes=(32,), private_features=[0, 1],
                                     y_bounds=(LO, HI), epsilon=50.0, epochs=epochs,
                                     learning_rate=lr, device="cpu", random_state=seed).fit(X, y)
               for seed in range(3)]
    batch_size = private[0].batch_size_
    T = MLPFeatureDPRegressor._scale_target(y, LO, HI)
    pred_p = np.array([reg.predict(Xt) for reg in private])
    pred_b = []
    for seed in range(3):
        module = _nonprivate_sgd(X, T, seed, epochs=epochs, batch_size=batch_size, lr=lr,
                                 momentum=0.9)
        with torch.no_grad():
            z = module(torch.tensor(Xt, dtype=torch.float32)).double().numpy()[:, 0]
        pred_b.append((LO + HI) / 2 + z * (HI - LO) / 2)
    pred_b = np.array(pred_b)
    r2_p = np.array([r2_score(yt, p) for p in pred_p])
    r2_b = np.array([r2_score(yt, p) for p in pred_b])
    se_seeds = math.sqrt(r2_p.var(ddof=1) / 3 + r2_b.var(ddof=1) / 3)
    d = (yt - pred_p.mean(0)) ** 2 - (yt - pred_b.mean(0)) ** 2
    se_test = d.std(ddof=1) / math.sqrt(len(d)) / yt.var()
    gap = r2_b.mean() - r2_p.mean()
    assert gap <= 3 * se_seeds + 3 * se_test, (r2_p, r2_b, se_seeds, se_test)
    assert r2_p.min() > 0.9  # and above least squares (0.82 here)


def test_fitted_attributes_and_privacy_equal_the_plan(data):
    X, y = data
    reg = _fast().fit(X, y)
    plan = reg.privacy_plan(*X.shape)
    assert reg.privacy_plan_ == plan
    assert reg.epsilon_ == plan.epsilon <= 4.0
    assert reg.delta_ == 1e-4
    assert reg.noise_multiplier_ == plan.noise_multiplier
    assert reg.steps_ == reg.n_iter_ == plan.schedule.steps == math.ceil(2 * len(X) /
                                                                          reg.batch_size_)
    assert repr(reg.dp_event_) == repr(plan.dp_event) == repr(
        accounting.dpsgd_event(reg.noise_multiplier_, reg.sampling_rate_, reg.steps_))
    assert reg.epsilon_ == accounting.epsilon_of_event(reg.dp_event_, 1e-4,
                                                       accountant=reg.accountant_)
    # The same mechanism as the classifier's: the same plan for the same settings.
    from sklearn_fdp import MLPFeatureDP
    clf_plan = MLPFeatureDP(hidden_layer_sizes=(16,), private_features=[0, 1], epsilon=4.0,
                            delta=1e-4, epochs=2).privacy_plan(*X.shape)
    assert repr(clf_plan.dp_event) == repr(plan.dp_event)
    np.testing.assert_array_equal(reg.private_features_, [0, 1])
    np.testing.assert_array_equal(reg.public_features_, [2, 3, 4, 5])
    assert reg.label_public_ is False and plan.label_protected
    assert reg.n_features_in_ == 6 and reg.device_ == "cpu"
    report = privacy_report(reg)
    assert "protected features [x0, x1] and the label" in report.protected_unit
    eps = report.epsilon_pld if reg.accountant_ == "pld" else report.epsilon_rdp
    assert eps == pytest.approx(reg.epsilon_, rel=1e-6)


@pytest.mark.parametrize("method", ["alg1", "dpsgd", "dp"])
@pytest.mark.parametrize("label_public", [True, False])
def test_methods_run_and_spend_the_same(data, method, label_public):
    X, y = data
    reg = _fast(method=method, label_public=label_public, epsilon=50.0, epochs=5,
                hidden_layer_sizes=(32,)).fit(X, y)
    assert reg.epsilon_ <= 50.0
    assert reg.score(X, y) > 0.3  # a constant scores 0
    if method == "dp":
        assert reg.public_features_.size == 0 and reg.label_public_ is False


def test_public_pretraining_needs_a_public_target(data):
    X, y = data
    reg = _fast(method="dpsgd", label_public=True, public_epochs=2.0).fit(X, y)
    assert reg.public_batch_size_ > 0
    with pytest.raises(ValueError, match="label_public=True"):
        _fast(public_epochs=1.0).fit(X, y)


def test_reproducible_and_inputs_not_mutated(data):
    X, y = data
    X0, y0 = X.copy(), y.copy()
    a = _fast(public_loss="gaussian_pad", random_state=3).fit(X, y).predict(X)
    b = _fast(public_loss="gaussian_pad", random_state=3).fit(X, y).predict(X)
    c = _fast(public_loss="gaussian_pad", random_state=4).fit(X, y).predict(X)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


def test_predictions_do_not_depend_on_the_batch(data, monkeypatch):
    X, y = data
    reg = _fast().fit(X, y)
    whole = reg.predict(X)
    rows = np.concatenate([reg.predict(X[i:i + 1]) for i in range(len(X))])
    np.testing.assert_allclose(rows, whole, rtol=0, atol=1e-12)
    monkeypatch.setattr(_mlp, "_PREDICT_BATCH", 7)
    np.testing.assert_allclose(reg.predict(X), whole, rtol=0, atol=1e-12)


def test_dataframe_names(data):
    X, y = data
    df = pd.DataFrame(X, columns=[f"c{i}" for i in range(6)])
    reg = _fast(private_features=["c0", "c5"]).fit(df, pd.Series(y, name="hours"))
    np.testing.assert_array_equal(reg.private_features_, [0, 5])
    assert reg.privacy_plan_.protected_features == ("c0", "c5")


# -- y_bounds -------------------------------------------------------------------------------


@pytest.mark.parametrize("bounds, match", [
    (None, r"needs y_bounds=\(lo, hi\)"),
    ((1.0,), "must be a pair"),
    ("ab", "must be a pair"),
    ((3.0, 1.0), "lo < hi"),
    ((1.0, 1.0), "lo < hi"),
    ((0.0, np.inf), "finite"),
    ((np.nan, 1.0), "finite"),
])
def test_bad_y_bounds_raise(data, bounds, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        _fast(y_bounds=bounds).fit(X, y)
    with pytest.raises(ValueError, match=match):  # the plan checks them too
        _fast(y_bounds=bounds).privacy_plan(*X.shape)


def test_targets_outside_y_bounds_are_clipped_with_a_count(data):
    X, y = data
    y_out = y.copy()
    y_out[:3] = [10.0, -7.0, 3.5]
    with pytest.warns(FdpWarning, match=r"3 of 600 target value\(s\) lie outside y_bounds") as rec:
        a = _fast().fit(X, y_out)
    assert rec[0].filename == __file__  # the warning points at the caller of fit
    b = _fast().fit(X, np.clip(y_out, LO, HI))  # no warning: every value is inside
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_no_warning_inside_the_bounds(data, recwarn):
    X, y = data
    _fast().fit(X, y)
    assert not [w for w in recwarn if issubclass(w.category, FdpWarning)]


def test_predictions_are_mapped_back_by_the_public_affine_map(data):
    """y' = 2 y + 2 with y_bounds' = (2 lo + 2, 2 hi + 2): the same mapped target, so the
    same network, and predictions mapped back as 2 ŷ + 2."""
    X, y = data
    a = _fast(y_bounds=(-4.0, 4.0)).fit(X, y)
    b = _fast(y_bounds=(-6.0, 10.0)).fit(X, 2 * y + 2)
    for pa, pb in zip(a.module_.parameters(), b.module_.parameters()):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0)
    np.testing.assert_allclose(b.predict(X), 2 * a.predict(X) + 2, rtol=1e-12)


def test_non_numeric_target_raises(data):
    X, _ = data
    with pytest.raises(ValueError):
        _fast().fit(X, np.array(["a", "b"] * 300))


# -- the label-free public loss ---------------------------------------------------------------


def _trainer(label_public, public_loss, T, per_example="vmap", C=np.inf, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(12, 5)).astype(np.float32)
    est = MLPFeatureDPRegressor(hidden_layer_sizes=(4,), activation="tanh",
                                private_features=[1, 3, 4], label_public=label_public,
                                public_loss=public_loss, per_example=per_example,
                                max_grad_norm=C, y_bounds=(-1, 1), device="cpu")
    mask, lp = est._feature_split(5, None)
    return est._trainer(torch, X, np.asarray(T, dtype=np.float64)[:, None], mask, lp,
                        True, "cpu", np.random.default_rng(7)), X, mask


@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
def test_label_private_public_gradient_does_not_read_y(public_loss):
    """Changing every target leaves the public gradient, and ℓ_pub's part of the private
    step, unchanged when the target is private; with a public target both move."""
    rng = np.random.default_rng(1)
    T1, T2 = rng.uniform(-1, 1, 12), rng.uniform(-1, 1, 12)
    idx = torch.arange(12)
    for label_public in (False, True):
        g1 = _trainer(label_public, public_loss, T1)[0].public_grad(
            idx, torch.Generator().manual_seed(3))
        g2 = _trainer(label_public, public_loss, T2)[0].public_grad(
            idx, torch.Generator().manual_seed(3))
        same = all(torch.equal(g1[k], g2[k]) for k in g1)
        assert same is (not label_public)
    # ℓ_pub inside ∇ℓ − ∇ℓ_pub: the difference of two fits' per-example gradients is
    # ∇ℓ(T1) − ∇ℓ(T2) = −(T1 − T2) ∇f(x): no ℓ_pub term survives it when ℓ_pub reads no y.
    t1, X, mask = _trainer(False, public_loss, T1)
    t2 = _trainer(False, public_loss, T2)[0]
    d1 = t1.per_example_grads(idx, torch.Generator().manual_seed(3), diff=True)
    d2 = t2.per_example_grads(idx, torch.Generator().manual_seed(3), diff=True)
    f1 = t1.per_example_grads(idx, None, diff=False)
    f2 = t2.per_example_grads(idx, None, diff=False)
    for k in d1:
        torch.testing.assert_close(d1[k] - d2[k], f1[k] - f2[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("label_public", [True, False])
@pytest.mark.parametrize("public_loss", ["gaussian_pad", "mask"])
def test_per_example_gradients_match_loop(label_public, public_loss):
    """∇[½ (f(x) − t)² − ℓ_pub] per example, against plain autograd one example at a time.

    ``ℓ_pub = ½ (f(x_pub) − t)²`` with a public target, ``½ f(x_pub)²`` without.
    """
    T = np.random.default_rng(2).uniform(-1, 1, 12)
    trainer, X, mask = _trainer(label_public, public_loss, T)
    idx = torch.arange(12)
    grads = trainer.per_example_grads(idx, torch.Generator().manual_seed(3), diff=True)
    n_priv = int((~mask).sum())
    if public_loss == "gaussian_pad":
        pad = torch.randn((12, n_priv), generator=torch.Generator().manual_seed(3))
    else:
        pad = torch.zeros((12, n_priv))
    for i in range(12):
        params = {k: v.clone().requires_grad_(True) for k, v in trainer.params.items()}
        x = torch.as_tensor(X[i:i + 1])
        x_pub = x.clone()
        x_pub[0, torch.as_tensor(np.flatnonzero(~mask))] = pad[i]
        f = torch.func.functional_call(trainer.module, params, (x,))[0, 0]
        f_pub = torch.func.functional_call(trainer.module, params, (x_pub,))[0, 0]
        t = float(np.float32(T[i]))
        loss = 0.5 * (f - t) ** 2 - 0.5 * (f_pub - (t if label_public else 0.0)) ** 2
        expected = dict(zip(params, torch.autograd.grad(loss, list(params.values()))))
        for k, v in expected.items():
            np.testing.assert_allclose(grads[k][i].numpy(), v.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("diff", [True, False])
@pytest.mark.parametrize("C", [0.05, 1e6])
@pytest.mark.parametrize("label_public", [True, False])
def test_outer_clipped_sum_matches_vmap(diff, C, label_public):
    T = np.random.default_rng(4).uniform(-1, 1, 12)
    sums = {}
    for mode in ("outer", "vmap"):
        trainer = _trainer(label_public, "gaussian_pad", T, per_example=mode, C=C)[0]
        sums[mode] = trainer.clipped_sum(torch.arange(12), torch.Generator().manual_seed(5),
                                         diff)
    for k, v in sums["vmap"].items():
        scale = float(v.abs().max()) + 1e-6
        np.testing.assert_allclose(sums["outer"][k].numpy() / scale, v.numpy() / scale,
                                   atol=1e-4)


# -- devices and torch -------------------------------------------------------------------------


def test_cuda_requested_without_cuda(data):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available")
    X, y = data
    with pytest.raises(ValueError, match="CUDA"):
        _fast(device="cuda").fit(X, y)
    assert _fast(device="auto").fit(X, y).device_ == "cpu"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("method", ["alg1", "dp"])
def test_gpu_fit_stores_cpu_weights(data, method):
    X, y = data
    params = dict(method=method, epsilon=50.0, epochs=5, hidden_layer_sizes=(32,))
    reg = _fast(device="cuda", **params).fit(X, y)
    assert reg.device_ == "cuda"
    assert all(p.device.type == "cpu" for p in reg.module_.parameters())
    assert reg.score(X, y) > 0.3
    cpu = _fast(device="cpu", **params).fit(X, y)
    assert reg.epsilon_ == cpu.epsilon_  # the accounting does not depend on the device
    assert reg.noise_multiplier_ == cpu.noise_multiplier_
    clone = pickle.loads(pickle.dumps(reg))
    np.testing.assert_allclose(clone.predict(X), reg.predict(X), rtol=1e-6)


def test_install_hint_names_the_regressor():
    out = call_without("torch", "from sklearn_fdp import MLPFeatureDPRegressor",
                       "MLPFeatureDPRegressor(y_bounds=(0, 1))")
    assert "ERR MLPFeatureDPRegressor needs PyTorch" in out and "pip install '.[torch]'" in out


def test_out_of_core_fit_equals_in_memory(data, tmp_path, monkeypatch):
    """A memmap read batch by batch (the out-of-core path) gives the in-memory model."""
    from sklearn_fdp import _outofcore

    X, y = data
    path = tmp_path / "X.npy"
    np.save(path, X)
    monkeypatch.setattr(_outofcore, "STREAM_MIN_BYTES", 0)
    streamed = _fast().fit(np.load(path, mmap_mode="r"), y)
    monkeypatch.undo()
    in_memory = _fast().fit(X, y)
    np.testing.assert_array_equal(streamed.predict(X), in_memory.predict(X))

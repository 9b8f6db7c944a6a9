"""MLPFeatureDP: per-example gradients, accounting, streams, sklearn API, devices."""

import io
import pickle
from contextlib import redirect_stdout

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_fdp import BudgetExceededError, MLPFeatureDP, accounting
from sklearn_fdp.exceptions import PrivacyLeakWarning

from .._helpers import call_without

torch = pytest.importorskip("torch")

from sklearn_fdp.neural import _alg1, _mlp  # noqa: E402  (after the torch skip)


pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=600, n_features=8, n_informative=5, n_classes=3,
                               n_clusters_per_class=1, random_state=0)
    return X.astype(np.float64), y


def _fast(**kw):
    params = dict(hidden_layer_sizes=(16,), private_features=[0, 1, 2], label_public=True,
                  epsilon=4.0, delta=1e-4, epochs=2, device="cpu", random_state=0)
    params.update(kw)
    return MLPFeatureDP(**params)


# -- scikit-learn compatibility ----------------------------------------------------


# At the default epsilon (issue 22 item 6: epsilon=50 hid a float32 batch
# dependence of predict_proba that sklearn's subset-invariance check caught).
@parametrize_with_checks(
    [MLPFeatureDP(hidden_layer_sizes=(8,), private_features=[0], delta=1e-9,
                  epochs=3, accountant="rdp", device="cpu", random_state=0)],
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_predictions_do_not_depend_on_the_batch_at_the_default_epsilon(data):
    """A row's probabilities are the same whatever rows it is predicted with.

    Issue 22 item 6: the float32 forward pass gave a row different
    probabilities (by ~1e-8 to 2e-7, depending on the BLAS kernel chosen for
    the batch's shape) alone, in a subset or in the whole batch, so sklearn's
    ``check_methods_subset_invariance`` failed at the default epsilon on some
    machines. Prediction now runs in float64: differences stay at float64's
    rounding (~1e-16), far below sklearn's tolerance of 1e-7.
    """
    from sklearn.utils.estimator_checks import (
        check_methods_sample_order_invariance,
        check_methods_subset_invariance,
    )

    X, y = data
    clf = MLPFeatureDP(private_features=[0, 1, 2], delta=1e-4, epochs=2, device="cpu",
                       random_state=0).fit(X, y)  # default epsilon and width (300)
    assert clf.epsilon == 1.0
    whole = clf.predict_proba(X)
    rows = np.vstack([clf.predict_proba(X[i:i + 1]) for i in range(len(X))])
    chunks = np.vstack([clf.predict_proba(X[i:i + 7]) for i in range(0, len(X), 7)])
    order = np.random.default_rng(0).permutation(len(X))
    shuffled = np.empty_like(whole)
    shuffled[order] = clf.predict_proba(X[order])
    for other in (rows, chunks, shuffled):
        np.testing.assert_allclose(other, whole, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(
        np.concatenate([clf.predict(X[i:i + 1]) for i in range(len(X))]), clf.predict(X))
    estimator = MLPFeatureDP(private_features=[0], delta=1e-9, epochs=3, accountant="rdp",
                             device="cpu", random_state=0)
    check_methods_subset_invariance("MLPFeatureDP", estimator)
    check_methods_sample_order_invariance("MLPFeatureDP", estimator)


# -- per-example gradients -----------------------------------------------------------


def _tiny_trainer(per_example, label_public, public_loss, C, activation="tanh"):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 5)).astype(np.float32)
    y = rng.integers(0, 3, size=12)
    Y = np.eye(3, dtype=np.float32)[y]
    mask = np.array([True, False, True, False, False])
    module = _mlp._build_module(torch, (5, 4, 3), activation, torch.Generator().manual_seed(0))
    return _alg1.Trainer(torch, module, X, Y, mask, label_public, public_loss, "cpu", C,
                         activation, per_example), X, y, mask


def _loop_grads(trainer, X, y, mask, label_public, pad):
    """ℓ(x_i, y_i) − ℓ_pub(x_pub_i) per example by plain autograd, one example at a time."""
    module = trainer.module
    out = []
    for i in range(len(X)):
        params = {k: v.clone().requires_grad_(True) for k, v in trainer.params.items()}
        x = torch.as_tensor(X[i:i + 1])
        x_pub = x.clone()
        x_pub[0, torch.as_tensor(np.flatnonzero(~mask))] = pad[i]
        logp = torch.log_softmax(torch.func.functional_call(module, params, (x,)), 1)
        logp_pub = torch.log_softmax(torch.func.functional_call(module, params, (x_pub,)), 1)
        loss = -logp[0, y[i]]
        loss = loss + (logp_pub[0, y[i]] if label_public else logp_pub[0].mean())
        grads = torch.autograd.grad(loss, list(params.values()))
        out.append(dict(zip(params, grads)))
    return out


@pytest.mark.parametrize("label_public", [True, False])
@pytest.mark.parametrize("public_loss", ["gaussian_pad", "mask"])
def test_per_example_gradients_match_loop(label_public, public_loss):
    trainer, X, y, mask = _tiny_trainer("vmap", label_public, public_loss, C=np.inf)
    idx = torch.arange(len(X))
    grads = trainer.per_example_grads(idx, torch.Generator().manual_seed(3), diff=True)
    if public_loss == "gaussian_pad":
        pad = torch.randn((len(X), int((~mask).sum())), generator=torch.Generator().manual_seed(3))
    else:
        pad = torch.zeros((len(X), int((~mask).sum())))
    expected = _loop_grads(trainer, X, y, mask, label_public, pad)
    for i, exp in enumerate(expected):
        for k, v in exp.items():
            np.testing.assert_allclose(grads[k][i].numpy(), v.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("diff", [True, False])
@pytest.mark.parametrize("C", [0.05, 1e6])
@pytest.mark.parametrize("activation", ["relu", "tanh", "logistic", "identity"])
def test_outer_clipped_sum_matches_vmap(diff, C, activation):
    """The closed-form ("outer") clipped sum equals clipping torch.func's per-example grads."""
    sums = {}
    for mode in ("outer", "vmap"):
        trainer, X, *_ = _tiny_trainer(mode, True, "gaussian_pad", C, activation)
        sums[mode] = trainer.clipped_sum(torch.arange(len(X)),
                                         torch.Generator().manual_seed(5), diff)
    # and both equal the clipped sum of the explicit per-example gradients
    trainer, X, *_ = _tiny_trainer("vmap", True, "gaussian_pad", C, activation)
    g = trainer.per_example_grads(torch.arange(len(X)), torch.Generator().manual_seed(5), diff)
    norms = torch.sqrt(sum(v.reshape(len(X), -1).square().sum(1) for v in g.values()))
    factor = torch.clamp(C / norms, max=1.0)
    for k, v in g.items():
        ref = (factor.reshape(-1, *[1] * (v.dim() - 1)) * v).sum(0)
        scale = float(ref.abs().max()) + 1e-6
        np.testing.assert_allclose(sums["vmap"][k].numpy() / scale, ref.numpy() / scale,
                                   atol=1e-5)
        np.testing.assert_allclose(sums["outer"][k].numpy() / scale, ref.numpy() / scale,
                                   atol=1e-4)
    if C < 1:  # clipping is active: every clipped norm is at most C
        assert float(norms.max()) > C


# -- privacy accounting and streams --------------------------------------------------------


@pytest.mark.parametrize("method", ["alg1", "dpsgd", "dp"])
def test_accounting_equals_accountant(data, method):
    X, y = data
    clf = _fast(method=method).fit(X, y)
    expected_event = accounting.dpsgd_event(clf.noise_multiplier_, clf.sampling_rate_,
                                            clf.steps_)
    assert repr(clf.dp_event_) == repr(expected_event)
    assert clf.epsilon_ == accounting.epsilon_of_event(
        expected_event, 1e-4, accountant=clf.accountant_)
    assert clf.epsilon_ <= 4.0
    sigma = accounting.calibrate_noise_multiplier(4.0, 1e-4, clf.sampling_rate_, clf.steps_,
                                                  accountant=clf.accountant_)
    assert clf.noise_multiplier_ == sigma
    assert clf.steps_ == int(np.ceil(2 * len(X) / clf.batch_size_))
    assert clf.delta_ == 1e-4


def test_fixed_noise_multiplier(data):
    X, y = data
    clf = _fast(epsilon=None, noise_multiplier=2.0).fit(X, y)
    assert clf.noise_multiplier_ == 2.0
    assert clf.epsilon_ == pytest.approx(accounting.compute_epsilon(
        2.0, clf.sampling_rate_, clf.steps_, 1e-4, accountant=clf.accountant_))
    with pytest.raises(BudgetExceededError, match="spends"):
        _fast(epsilon=0.01, noise_multiplier=2.0).fit(X, y)


def test_reproducible_on_cpu(data):
    X, y = data
    a = _fast(random_state=3).fit(X, y).predict_proba(X)
    b = _fast(random_state=3).fit(X, y).predict_proba(X)
    c = _fast(random_state=4).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_public_batches_do_not_follow_private_sampler(data, monkeypatch):
    """The public stream is separate: changing the Poisson rate leaves its batches unchanged."""
    X, y = data
    seen = {}
    original = _alg1.UniformSampler.sample

    def spy(self):
        out = original(self)
        seen.setdefault(id(self.rng), []).append(out.copy())
        return out

    monkeypatch.setattr(_alg1.UniformSampler, "sample", spy)
    runs = []
    for bs in (40, 41):  # different Poisson rates, same public batch size
        seen.clear()
        _fast(batch_size=bs, public_batch_size=30, epochs=0.5).fit(X, y)
        runs.append(next(iter(seen.values())))
    n = min(len(runs[0]), len(runs[1]))
    for a, b in zip(runs[0][:n], runs[1][:n]):
        np.testing.assert_array_equal(a, b)


# -- behaviour -------------------------------------------------------------------------------


def test_learns_and_fitted_attributes(data):
    X, y = data
    clf = _fast(epsilon=50.0, epochs=5, hidden_layer_sizes=(32,)).fit(X, y)
    assert clf.score(X, y) > 0.6
    assert clf.n_features_in_ == 8
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2])
    np.testing.assert_array_equal(clf.private_features_, [0, 1, 2])
    np.testing.assert_array_equal(clf.public_features_, [3, 4, 5, 6, 7])
    assert clf.label_public_ is True
    assert clf.device_ == "cpu"
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[proba.argmax(1)])


def test_dp_method_treats_nothing_as_public(data):
    X, y = data
    clf = MLPFeatureDP(hidden_layer_sizes=(8,), method="dp", epsilon=4.0, delta=1e-4,
                       epochs=1, device="cpu", random_state=0).fit(X, y)
    assert clf.public_features_.size == 0
    assert clf.private_features_.size == 8
    assert clf.label_public_ is False
    assert clf.public_batch_size_ == 0


def test_label_dp_and_dataframe_names(data):
    X, y = data
    df = pd.DataFrame(X, columns=[f"c{i}" for i in range(8)])
    clf = _fast(private_features=None, public_features=lambda name: True,
                label_public=False).fit(df, y)
    assert clf.public_features_.size == 8
    clf = _fast(private_features=["c0", "c5"]).fit(df, y)
    np.testing.assert_array_equal(clf.private_features_, [0, 5])


def test_public_pretraining_and_string_labels(data):
    X, y = data
    labels = np.array(["a", "b", "c"])[y]
    clf = _fast(public_epochs=2, method="dpsgd", epsilon=50.0).fit(X, labels)
    assert set(clf.predict(X)) <= {"a", "b", "c"}


@pytest.mark.parametrize("label_public", [True, False])
def test_classes_parameter_makes_classes_independent_of_the_data(data, label_public):
    """classes_ read from y shows a label held by one record; classes= fixes it."""
    X, y = data
    y = np.where(y == 2, 1, y)  # labels {0, 1}
    y_single = y.copy()
    y_single[7] = 2
    assert _fast(label_public=label_public).fit(X, y_single).classes_.tolist() == [0, 1, 2]
    a = _fast(label_public=label_public, classes=[0, 1, 2]).fit(X, y)
    b = _fast(label_public=label_public, classes=[2, 1, 0]).fit(X, y_single)
    assert a.classes_.tolist() == b.classes_.tolist() == [0, 1, 2]
    assert a.predict_proba(X).shape == (len(y), 3)
    with pytest.raises(ValueError, match=r"labels \[2\] that are not in `classes` \[0, 1\]"):
        _fast(classes=[0, 1]).fit(X, y_single)


def test_inputs_not_mutated(data):
    X, y = data
    X0, y0 = X.copy(), y.copy()
    clf = _fast(public_loss="gaussian_pad").fit(X, y)
    clf.predict_proba(X)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


def test_pickle_roundtrip_on_cpu(data):
    X, y = data
    clf = _fast().fit(X, y)
    assert all(p.device.type == "cpu" for p in clf.module_.parameters())
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clone.predict_proba(X), clf.predict_proba(X))


def test_predict_proba_in_batches(data, monkeypatch):
    X, y = data
    clf = _fast().fit(X, y)
    whole = clf.predict_proba(X)
    monkeypatch.setattr(_mlp, "_PREDICT_BATCH", 7)
    np.testing.assert_allclose(clf.predict_proba(X), whole, rtol=1e-6, atol=1e-9)


def test_verbose_reports_loss_and_epsilon(data):
    X, y = data
    buf = io.StringIO()
    with redirect_stdout(buf):
        clf = _fast(verbose=1, epochs=2).fit(X, y)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.startswith("[MLPFeatureDP]")]
    assert len(lines) >= 2
    assert "train loss" in lines[-1] and "ε spent" in lines[-1]
    assert f"{clf.epsilon_:.4g}" in lines[-1]


# -- bad inputs --------------------------------------------------------------------------------


@pytest.mark.parametrize("params, match", [
    (dict(hidden_layer_sizes=(0,)), "hidden_layer_sizes"),
    (dict(hidden_layer_sizes="300"), "hidden_layer_sizes"),
    (dict(public_epochs=1, label_public=False), "label_public=True"),
    (dict(public_epochs=1, method="dp"), "method='dp'"),
    (dict(private_features=None), "exactly one"),
    (dict(private_features=[0, 99]), "out of range"),
    (dict(batch_size=10_000), "batch_size"),
    (dict(public_batch_size=10_000), "public_batch_size"),
    (dict(epsilon=None), "noise_multiplier"),
    (dict(neighboring="replace", accountant="rdp"), "pld"),
    (dict(method="sgd"), "method"),
    (dict(device="tpu"), "device"),
])
def test_bad_parameters_raise(data, params, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        _fast(**params).fit(X, y)


def test_bad_data_raise(data):
    X, y = data
    Xnan = X.copy()
    Xnan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _fast().fit(Xnan, y)
    with pytest.raises(ValueError, match="2 classes"):
        _fast().fit(X, np.zeros(len(y)))
    with pytest.warns(PrivacyLeakWarning, match="delta"):
        _fast(delta=0.1).fit(X, y)
    clf = _fast().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :5])


def test_cuda_requested_without_cuda(data):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available")
    X, y = data
    with pytest.raises(ValueError, match="CUDA"):
        _fast(device="cuda").fit(X, y)
    assert _fast(device="auto").fit(X, y).device_ == "cpu"


def test_import_without_torch_and_install_hint():
    # A meta-path finder that refuses torch (``sys.modules['torch'] = None``
    # would break SciPy's array-API helpers, which look torch up there).
    out = call_without("torch", "import sklearn_fdp\nfrom sklearn_fdp import MLPFeatureDP",
                       "MLPFeatureDP()")
    assert "ERR" in out and "pip install '.[torch]'" in out and "LOADED False" in out


# -- GPU ----------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("method", ["alg1", "dp"])
def test_gpu_fit_stores_cpu_weights(data, method):
    X, y = data
    params = dict(method=method, epsilon=50.0, epochs=5, hidden_layer_sizes=(32,))
    clf = _fast(device="cuda", **params).fit(X, y)
    assert clf.device_ == "cuda"
    assert all(p.device.type == "cpu" for p in clf.module_.parameters())
    assert clf.score(X, y) > 0.5
    cpu = _fast(device="cpu", **params).fit(X, y)
    assert clf.epsilon_ == cpu.epsilon_  # the accounting does not depend on the device
    assert clf.noise_multiplier_ == cpu.noise_multiplier_
    assert _fast(device="auto", method=method, epochs=1).fit(X, y).device_ == "cuda"
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_allclose(clone.predict_proba(X), clf.predict_proba(X), rtol=1e-5)

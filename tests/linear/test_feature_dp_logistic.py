"""FeatureDPLogisticRegression: FDP Algorithm 1 oracles, streams, accounting, behaviour."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification
from sklearn.preprocessing import Normalizer

from sklearn_fdp import (AdaMixClassifier, DPSGDClassifier, DPSGDFClassifier,
                         FeatureDPLogisticRegression)
from sklearn_fdp._engine import LinearLoss, PoissonSampler, UniformSampler
from sklearn_fdp._mechanisms.fdp import FeatureDPPrivateOracle, FeatureDPPublicOracle

from .._reference import clipped_sum, per_example_gradients


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=2000, n_features=8, n_informative=5, random_state=0)
    return Normalizer().fit_transform(X), y


@pytest.fixture(scope="module")
def multiclass():
    X, y = make_classification(n_samples=2000, n_features=8, n_informative=6, n_classes=3,
                               n_clusters_per_class=1, random_state=1)
    return Normalizer().fit_transform(X), y


# -- naive reference of the FDP per-example gradients ---------------------------


def _softmax_or_sigmoid(z):
    if z.shape[0] == 1:
        return 1.0 / (1.0 + np.exp(-z))
    p = np.exp(z - z.max())
    return p / p.sum()


def _naive_fdp_grads(X, y, theta, k, public_mask, label_public, pad=None):
    """∇ℓ − ∇ℓ_pub, one example at a time; ``pad`` replaces the private columns."""
    full = per_example_gradients(X, y, theta, "log_loss", k, True)
    out = []
    for i in range(X.shape[0]):
        x_pub = X[i] * public_mask
        if pad is not None:
            x_pub[~public_mask] = pad[i]
        xt = np.append(x_pub, 1.0)
        p = _softmax_or_sigmoid(xt @ theta)
        if label_public:
            r = p.copy()
            if k == 1:
                r[0] -= y[i]
            else:
                r[y[i]] -= 1.0
        else:
            r = p - (0.5 if k == 1 else 1.0 / k)  # label-free, centred by the uniform prior
        out.append(full[i] - np.outer(xt, r))
    return np.array(out)


def _setup(X, y_index, k, seed=0):
    loss = LinearLoss("log_loss", k)
    theta = np.random.default_rng(seed).normal(scale=2.0, size=(X.shape[1] + 1, k))
    return loss, loss.encode(y_index), theta


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("label_public", [True, False])
@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
@pytest.mark.parametrize("sparse", [False, True])
def test_private_oracle_matches_naive_reference(binary, multiclass, k, label_public,
                                                public_loss, sparse):
    X, y = (binary if k == 1 else multiclass)
    X, y = X[:60], y[:60]
    loss, y_enc, theta = _setup(X, y, k)
    public_mask = np.array([True, False, True, True, False, False, True, False])
    idx = np.arange(0, 60, 2)
    n_priv = int((~public_mask).sum())
    pad = np.random.default_rng(5).standard_normal((len(idx), n_priv))
    ref = _naive_fdp_grads(X[idx], y[idx], theta, k, public_mask, label_public,
                           pad if public_loss == "gaussian_pad" else None)
    Xin = sp.csr_matrix(X) if sparse else X
    for C in [np.inf, 0.3]:
        oracle = FeatureDPPrivateOracle(Xin, y_enc, loss, public_mask, label_public,
                                        public_loss, True, C,
                                        pad_rng=np.random.default_rng(5))
        expected = ref.sum(axis=0) if np.isinf(C) else clipped_sum(ref, C)
        np.testing.assert_allclose(oracle(idx, theta), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("k", [1, 3])
def test_each_clipped_private_gradient_has_norm_at_most_C(binary, multiclass, k):
    X, y = (binary if k == 1 else multiclass)
    X, y = X[:40], y[:40]
    loss, y_enc, theta = _setup(X, y, k, seed=1)
    public_mask = np.arange(8) < 4
    for public_loss in ["mask", "gaussian_pad"]:
        oracle = FeatureDPPrivateOracle(X, y_enc, loss, public_mask, False, public_loss, True,
                                        0.05, pad_rng=np.random.default_rng(0))
        norms = [np.linalg.norm(oracle(np.array([i]), theta)) for i in range(40)]
        assert max(norms) <= 0.05 * (1 + 1e-12)
        assert min(norms) > 0.049  # unclipped norms here are all larger than C


@pytest.mark.parametrize("k", [1, 3])
def test_label_dp_private_gradient_is_x_times_prior_minus_ey(binary, multiclass, k):
    """All features public, label private: ∇ℓ − ∇ℓ_pub = x~ (π − e_y)ᵀ.

    The §5 case study's −x~ e_yᵀ, centred by the uniform prior π of the
    label-free public loss.
    """
    X, y = (binary if k == 1 else multiclass)
    X, y = X[:30], y[:30]
    loss, y_enc, theta = _setup(X, y, k, seed=2)
    oracle = FeatureDPPrivateOracle(X, y_enc, loss, np.ones(8, bool), False, "mask", True,
                                    np.inf)
    for i in range(30):
        xt = np.append(X[i], 1.0)
        e = np.array([float(y[i])]) if k == 1 else np.eye(k)[y[i]]
        prior = 0.5 if k == 1 else 1.0 / k
        np.testing.assert_allclose(oracle(np.array([i]), theta), np.outer(xt, prior - e),
                                   atol=1e-12)
    # Hence the norm is ‖x~‖ ‖π − e_y‖: ‖x~‖ / 2 (binary), ‖x~‖ sqrt(1 − 1/k) otherwise.
    norms = oracle.per_example_norms(
        np.arange(30), theta, loss.residual(oracle._decision(X, theta), y_enc),
        _softmax_rows(oracle._decision(X, theta)) - prior, None)
    expect = np.linalg.norm(np.c_[X, np.ones(30)], axis=1)
    expect = expect * (0.5 if k == 1 else np.sqrt(1 - 1 / k))
    np.testing.assert_allclose(norms, expect, atol=1e-7)


def _softmax_rows(Z):
    if Z.shape[1] == 1:
        return 1.0 / (1.0 + np.exp(-Z))
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def test_public_oracle_is_mean_public_gradient_and_ignores_private_data(multiclass):
    X, y = multiclass
    X, y = X[:50], y[:50]
    loss, y_enc, theta = _setup(X, y, 3, seed=3)
    public_mask = np.arange(8) >= 3
    oracle = FeatureDPPublicOracle(X, y_enc, loss, public_mask, True, "mask", True, 50,
                                   np.random.default_rng(0))
    full = per_example_gradients(X * public_mask, y, theta, "log_loss", 3, True)
    np.testing.assert_allclose(oracle(theta), full.mean(axis=0), atol=1e-12)
    # Changing private columns does not change the public gradient.
    X2 = X.copy()
    X2[:, ~public_mask] = np.random.default_rng(1).normal(size=(50, 3))
    again = FeatureDPPublicOracle(X2, y_enc, loss, public_mask, True, "mask", True, 50,
                                  np.random.default_rng(0))
    np.testing.assert_array_equal(again(theta), oracle(theta))


# -- random streams (Prop. 3) ---------------------------------------------------


def _spy_batches(monkeypatch):
    private, rngs = [], {"poisson": [], "uniform": []}
    orig_sample = PoissonSampler.sample
    orig_p_init, orig_u_init = PoissonSampler.__init__, UniformSampler.__init__

    def sample(self):
        idx = orig_sample(self)
        private.append(idx.copy())
        return idx

    def p_init(self, n, rate, rng):
        rngs["poisson"].append(rng)
        orig_p_init(self, n, rate, rng)

    def u_init(self, n, size, rng):
        rngs["uniform"].append(rng)
        orig_u_init(self, n, size, rng)

    monkeypatch.setattr(PoissonSampler, "sample", sample)
    monkeypatch.setattr(PoissonSampler, "__init__", p_init)
    monkeypatch.setattr(UniformSampler, "__init__", u_init)
    return private, rngs


def test_public_stream_does_not_touch_private_sampling(binary, monkeypatch):
    """Public batch size, padding and pretraining never change the Poisson batches."""
    X, y = binary
    runs = []
    for kw in [dict(public_batch_size=8), dict(public_batch_size="full"),
               dict(public_batch_size=200, public_loss="gaussian_pad"),
               dict(public_loss="gaussian_pad", public_epochs=1.0)]:
        private, rngs = _spy_batches(monkeypatch)
        FeatureDPLogisticRegression(private_features=[0, 1], label_public=True, epsilon=1.0,
                                    epochs=1, accountant="rdp", random_state=4,
                                    **kw).fit(X, y)
        assert rngs["uniform"], "the public oracle samples its own batches"
        # No public sampler shares a generator with the private Poisson sampler.
        assert all(u is not p for u in rngs["uniform"] for p in rngs["poisson"])
        runs.append(private)
        monkeypatch.undo()
    steps = len(runs[0])
    assert steps > 5
    for other in runs[1:]:
        # Public pretraining runs the engine first (full "batches", its own
        # stream); the private batches are the last ``steps`` ones.
        assert len(other) >= steps
        for a, b in zip(runs[0], other[-steps:]):
            np.testing.assert_array_equal(a, b)
        assert len(other[-1]) < len(y)


# -- accounting -----------------------------------------------------------------


@pytest.mark.parametrize("method", ["alg1", "dpsgd"])
def test_epsilon_equals_dpsgd_accounting(binary, method):
    X, y = binary
    common = dict(noise_multiplier=1.3, epsilon=None, batch_size=100, epochs=2,
                  accountant="rdp", random_state=0)
    fdp = FeatureDPLogisticRegression(private_features=[0], label_public=True, method=method,
                                      public_epochs=1.0, **common).fit(X, y)
    ref = DPSGDClassifier(**common).fit(X, y)
    assert (fdp.noise_multiplier_, fdp.sampling_rate_, fdp.steps_) == (
        ref.noise_multiplier_, ref.sampling_rate_, ref.steps_)
    assert fdp.epsilon_ == ref.epsilon_
    assert fdp.dp_event_ == ref.dp_event_
    calibrated = FeatureDPLogisticRegression(private_features=[0], epsilon=0.5, epochs=2,
                                             accountant="rdp", random_state=0).fit(X, y)
    ref = DPSGDClassifier(epsilon=0.5, epochs=2, accountant="rdp", random_state=0).fit(X, y)
    assert calibrated.noise_multiplier_ == ref.noise_multiplier_
    assert calibrated.epsilon_ == ref.epsilon_ <= 0.5


# -- utility --------------------------------------------------------------------


def _public_signal_data(seed, n):
    """3 public columns carry the signal, 30 private columns almost none."""
    rng = np.random.default_rng(seed)
    X_pub, X_priv = rng.standard_normal((n, 3)), rng.standard_normal((n, 30))
    z = X_pub @ np.array([3.0, -3.0, 2.0]) + 0.3 * X_priv[:, 0]
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-z))).astype(int)
    X = np.hstack([X_pub, X_priv])
    return X / np.linalg.norm(X, axis=1, keepdims=True), y


@pytest.mark.parametrize("fdp_params", [
    dict(public_epochs=5.0),  # public pretraining (Remark 2), then Algorithm 1
    dict(alpha=0.1, learning_rate=1.0),  # Algorithm 1 with a down-weighted noisy part
])
def test_fdp_beats_dpsgd_at_small_epsilon_when_public_features_carry_the_signal(fdp_params):
    fdp, dpsgd = [], []
    for seed in range(3):
        X, y = _public_signal_data(seed, 1000)
        X_test, y_test = _public_signal_data(100 + seed, 4000)
        common = dict(epsilon=0.1, delta=1e-5, accountant="rdp", random_state=seed)
        fdp.append(FeatureDPLogisticRegression(public_features=[0, 1, 2], label_public=True,
                                               **common, **fdp_params)
                   .fit(X, y).score(X_test, y_test))
        dpsgd.append(DPSGDClassifier(**common).fit(X, y).score(X_test, y_test))
    # Measured (seeds 0-2): DP-SGD ≈ 0.54 (near chance at ε = 0.1, n = 1000, 34
    # parameters), FDP ≈ 0.82. The per-seed spread of either is ≈ 0.03, so a
    # margin of 0.1 on the 3-seed means leaves room for seeds and platforms
    # while still failing if the public gradient were lost.
    assert np.mean(fdp) > np.mean(dpsgd) + 0.1


# -- behaviour ------------------------------------------------------------------


def test_fitted_attributes_and_multiclass(multiclass):
    X, y = multiclass
    clf = FeatureDPLogisticRegression(private_features=[1, -1], epsilon=4.0, epochs=3,
                                      accountant="rdp", random_state=0).fit(X, y)
    assert clf.coef_.shape == (3, 8) and clf.intercept_.shape == (3,)
    np.testing.assert_array_equal(clf.private_features_, [1, 7])
    np.testing.assert_array_equal(clf.public_features_, [0, 2, 3, 4, 5, 6])
    assert clf.public_mask_.dtype == bool and clf.public_mask_.sum() == 6
    assert clf.label_public_ is False
    assert clf.public_batch_size_ == clf.batch_size_
    assert clf.score(X, y) > 0.6
    np.testing.assert_allclose(clf.predict_proba(X).sum(axis=1), 1.0)
    assert "loss" not in clf.get_params()


def test_dataframe_names_select_encoder_columns(binary):
    X, y = binary
    cols = ["num__age", "cat__sex_Female", "cat__sex_Male", "num__hours", "f4", "f5", "f6",
            "f7"]
    clf = FeatureDPLogisticRegression(private_features=["sex", "f7"], epsilon=2.0, epochs=1,
                                      accountant="rdp", random_state=0)
    clf.fit(pd.DataFrame(X, columns=cols), y)
    np.testing.assert_array_equal(clf.private_features_, [1, 2, 7])
    with pytest.raises(ValueError, match="no feature names"):
        clf.fit(X, y)


@pytest.mark.parametrize("params,match", [
    (dict(), "exactly one of"),
    (dict(public_features=[0], private_features=[1]), "exactly one of"),
    (dict(private_features=[99]), "out of range"),
    (dict(private_features=[], label_public=True), "nothing is protected"),
    (dict(private_features=[0], public_epochs=1.0), "label_public=True"),
    (dict(private_features=[0], public_batch_size=10**6), "public_batch_size.*only 2000"),
    (dict(private_features=[0], public_loss="zeros"), "public_loss"),
    (dict(private_features=[0], method="sgd"), "method"),
    (dict(private_features=[0], alpha=0.0), "alpha"),
    (dict(private_features=[0], max_grad_norm="large"), "max_grad_norm"),
    (dict(private_features=[0], max_grad_norm=0.0), "max_grad_norm"),
    (dict(private_features=[0], loss="hinge"), "loss"),
])
def test_bad_specs_and_parameters_raise(binary, params, match):
    X, y = binary
    with pytest.raises((ValueError, TypeError), match=match):
        FeatureDPLogisticRegression(**params).fit(X, y)


@pytest.mark.parametrize("kw", [dict(), dict(public_loss="gaussian_pad"),
                                dict(method="dpsgd", label_public=True, public_epochs=1.0)])
def test_same_random_state_same_coef(binary, kw):
    X, y = binary
    make = lambda rs: FeatureDPLogisticRegression(  # noqa: E731
        private_features=[0, 3], epsilon=1.0, epochs=2, accountant="rdp", random_state=rs,
        **kw).fit(X, y)
    a, b, c = make(7), make(7), make(8)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert not np.array_equal(a.coef_, c.coef_)


def test_sparse_matches_dense(binary):
    X, y = binary
    kw = dict(private_features=[0, 3], public_loss="gaussian_pad", method="alg1", epsilon=1.0,
              epochs=1, accountant="rdp", random_state=3)
    dense = FeatureDPLogisticRegression(**kw).fit(X, y)
    csr = FeatureDPLogisticRegression(**kw).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(dense.coef_, csr.coef_, rtol=1e-9, atol=1e-12)
    f32 = FeatureDPLogisticRegression(**kw).fit(X.astype(np.float32), y)
    assert f32.coef_.dtype == np.float32


def test_inputs_are_not_mutated(binary):
    X, y = binary
    X0, y0 = X.copy(), y.copy()
    spec = [0, 2]
    clf = FeatureDPLogisticRegression(private_features=spec, public_loss="gaussian_pad",
                                      label_public=True, public_epochs=0.5, epsilon=1.0,
                                      epochs=1, random_state=0)
    params = clf.get_params()
    clf.fit(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    assert spec == [0, 2]
    assert clf.get_params() == params


# -- label DP by one release of the θ-free statistic ---------------------------


def _every_column(name):
    return True


def _label_dp(**kw):
    return FeatureDPLogisticRegression(public_features=_every_column, label_public=False, **kw)


def test_auto_method_is_the_sufficient_statistic_for_label_dp_only(binary):
    X, y = binary
    names = [f"f{i}" for i in range(X.shape[1])]
    label_dp = _label_dp(epsilon=1.0, random_state=0).fit(pd.DataFrame(X, columns=names), y)
    assert label_dp.method_ == "sufficient_statistic"
    assert (label_dp.steps_, label_dp.sampling_rate_, label_dp.batch_size_) == (1, 1.0, len(y))
    protected = FeatureDPLogisticRegression(private_features=[0], epsilon=1.0, epochs=1,
                                            random_state=0).fit(X, y)
    assert protected.method_ == "dpsgd"  # private label and columns: DP-SGD (issue 32)
    public_label = FeatureDPLogisticRegression(private_features=[0], label_public=True,
                                               epsilon=1.0, epochs=1, random_state=0).fit(X, y)
    assert public_label.method_ == "alg1"
    with pytest.raises(ValueError, match="method='sufficient_statistic'.*label DP"):
        FeatureDPLogisticRegression(private_features=[0], method="sufficient_statistic",
                                    epsilon=1.0).fit(X, y)


@pytest.mark.parametrize("neighboring", ["add_remove", "replace"])
def test_sufficient_statistic_epsilon_is_one_gaussian_mechanism(binary, neighboring):
    # The fit's event is one Gaussian mechanism with noise multiplier σ
    # (sensitivity C add/remove, 2C replace): dp-accounting's own ε for it.
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    X, y = binary
    clf = _label_dp(epsilon=0.5, neighboring=neighboring, random_state=0)
    clf.fit(X, y, feature_names=[f"f{i}" for i in range(8)])
    relation = (dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
                if neighboring == "add_remove" else dp_accounting.NeighboringRelation.REPLACE_ONE)
    accountant = pld_privacy_accountant.PLDAccountant(relation)
    accountant.compose(dp_accounting.GaussianDpEvent(clf.noise_multiplier_))
    assert clf.epsilon_ == pytest.approx(accountant.get_epsilon(clf.delta_), rel=1e-3)
    assert clf.epsilon_ <= 0.5


@pytest.mark.parametrize("method, label_public, clip", [
    ("alg1", True, 0.5), ("alg1", False, 0.5), ("dpsgd", True, 1.0)])
def test_auto_clip_is_resolved_per_method_and_used(binary, method, label_public, clip):
    X, y = binary
    common = dict(private_features=[0, 1], label_public=label_public, method=method,
                  epsilon=1.0, epochs=2, accountant="rdp", random_state=0)
    auto = FeatureDPLogisticRegression(**common).fit(X, y)
    explicit = FeatureDPLogisticRegression(max_grad_norm=clip, **common).fit(X, y)
    assert auto.get_params()["max_grad_norm"] == "auto"
    assert auto.max_grad_norm_ == clip == explicit.max_grad_norm_
    # Same clip, same noise std (σ C) and step size: the same model.
    np.testing.assert_array_equal(auto.coef_, explicit.coef_)
    assert auto.learning_rate_ == explicit.learning_rate_
    other = FeatureDPLogisticRegression(max_grad_norm=2 * clip, **common).fit(X, y)
    assert not np.array_equal(auto.coef_, other.coef_)


def test_sufficient_statistic_auto_clip_is_one_capped_by_the_largest_term(binary):
    # Rows of norm 1 plus the intercept: the binary term has norm √2 / 2 < 1.
    X, y = binary
    clf = _label_dp(epsilon=1.0, random_state=0)
    clf.fit(X, y, feature_names=[f"f{i}" for i in range(8)])
    assert clf.method_ == "sufficient_statistic"
    assert clf.max_grad_norm_ == pytest.approx(np.sqrt(2) / 2)


def test_sufficient_statistic_clip_is_the_largest_possible_term(binary, multiclass):
    # Rows of norm 1 plus the intercept: ‖x~‖ = √2; the binary term x~ (1/2 − y)
    # has norm √2 / 2, a K-class term ‖x~‖ sqrt(1 − 1/K).
    for (X, y), factor in ((binary, 0.5), (multiclass, np.sqrt(1 - 1 / 3))):
        clf = _label_dp(epsilon=1.0, max_grad_norm=10.0, random_state=0)
        clf.fit(X, y, feature_names=[f"f{i}" for i in range(8)])
        assert clf.max_grad_norm_ == pytest.approx(np.sqrt(2) * factor)
        small = _label_dp(epsilon=1.0, max_grad_norm=0.1, random_state=0)
        small.fit(X, y, feature_names=[f"f{i}" for i in range(8)])
        assert small.max_grad_norm_ == 0.1


@pytest.mark.parametrize("data", ["binary", "multiclass"])
def test_sufficient_statistic_without_noise_is_ridge_logistic_regression(data, request):
    # σ → 0: Φ is the log loss plus the ridge, i.e. sklearn's LogisticRegression
    # with C = 1 / (λ n) (no penalty on the intercept there: a small difference).
    from sklearn.linear_model import LogisticRegression

    X, y = request.getfixturevalue(data)
    names = [f"f{i}" for i in range(8)]
    lam = 1e-3
    clf = _label_dp(epsilon=None, noise_multiplier=1e-9, l2_regularization=lam,
                    max_grad_norm=10.0, random_state=0).fit(X, y, feature_names=names)
    assert clf.l2_regularization_ == lam
    ref = LogisticRegression(C=1 / (lam * len(y)), max_iter=5000).fit(X, y)
    np.testing.assert_allclose(clf.coef_, ref.coef_, atol=0.05)
    assert np.mean(clf.predict(X) == ref.predict(X)) > 0.99


def test_sufficient_statistic_label_dp_beats_dpsgd_at_small_epsilon():
    # Label DP only (features public): one release of Σ x~ (π − y) loses less
    # than DP-SGD's per-step noise on whole records. Measured (seeds 0-2,
    # ε = 0.1, 1,000 rows): 0.637 / 0.643 / 0.650 vs DP-SGD 0.521 / 0.539 /
    # 0.567, a mean gap of 0.10 whose per-seed spread is ≈ 0.02 (standard
    # error of the 3-seed mean ≈ 0.012); 0.05 is 4 standard errors below it
    # and fails if the release carried no label information.
    fdp, dpsgd = [], []
    for seed in range(3):
        X, y = _public_signal_data(seed, 1000)
        X_test, y_test = _public_signal_data(100 + seed, 4000)
        common = dict(epsilon=0.1, delta=1e-5, random_state=seed)
        fdp.append(_label_dp(**common).fit(X, y, feature_names=[f"f{i}" for i in range(33)])
                   .score(X_test, y_test))
        dpsgd.append(DPSGDClassifier(**common).fit(X, y).score(X_test, y_test))
    assert np.mean(fdp) > np.mean(dpsgd) + 0.05


@pytest.mark.statistical
def test_released_statistic_noise_is_exactly_gaussian():
    """With a zero statistic, the release is N(0, (σ C)² I), on 20,000 coordinates
    (10 seeds x 2,000 parameters).

    KS against the exact law checks the shape; it cannot see a 5 % error in
    the scale (its largest CDF gap, about 0.012, is below the 1e-3 critical
    value 0.014). Power (issue 30): the sum of squares is exactly χ²(20,000),
    bounds 1 ± 0.033 of the mean at a two-sided 1e-3, so a 5 % error in the
    noise std (variance x 1.1025 or x 0.9025) is detected with probability
    > 0.9999.
    """
    from scipy import stats

    from sklearn_fdp._mechanisms.label_statistic import release_private_sum

    theta = np.zeros((1000, 2))
    values = np.concatenate([
        release_private_sum(lambda idx, th: np.zeros_like(th), 5, theta, 2.5,
                            np.random.default_rng(seed)).ravel() for seed in range(10)])
    assert stats.kstest(values / 2.5, "norm").pvalue > 1e-3
    ss = float(np.sum((values / 2.5) ** 2))
    assert stats.chi2.ppf(5e-4, values.size) < ss < stats.chi2.isf(5e-4, values.size)


def test_sufficient_statistic_secure_noise_and_pickle(binary):
    import pickle

    X, y = binary
    names = [f"f{i}" for i in range(8)]
    clf = _label_dp(epsilon=1.0, noise="secure").fit(X, y, feature_names=names)
    assert clf.method_ == "sufficient_statistic" and clf.score(X, y) > 0.6
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict(X), clf.predict(X))


def test_sufficient_statistic_in_row_blocks_matches_one_block(binary, monkeypatch):
    # Large (or out-of-core) data: the release and every objective evaluation
    # run over row blocks; only the summation order changes.
    from sklearn_fdp._mechanisms import label_statistic

    X, y = binary
    names = [f"f{i}" for i in range(8)]
    whole = _label_dp(epsilon=1.0, random_state=0).fit(X, y, feature_names=names)
    monkeypatch.setattr(label_statistic, "CHUNK_ROWS", 300)
    blocks = _label_dp(epsilon=1.0, random_state=0).fit(X, y, feature_names=names)
    np.testing.assert_allclose(blocks.coef_, whole.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(blocks.intercept_, whole.intercept_, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("public_scale", [1e-8, 1.0, 1e4, 1e8])
def test_private_gradient_norms_are_the_explicit_norms_at_any_public_scale(pad, k,
                                                                             public_scale):
    # The norm of [x_P (r − r_pub)ᵀ ; x_Q rᵀ − g r_pubᵀ] from orthogonal pieces
    # (issue 16 item 4: the closed form lost the private block at large
    # public scales). Compared with the explicit matrices, blockwise.
    from sklearn_fdp._mechanisms.fdp import private_gradient_norms_sq

    rng = np.random.default_rng(k)
    m, d_pub, p = 50, 4, 3
    XP = rng.standard_normal((m, d_pub)) * public_scale
    Xq = rng.standard_normal((m, p))
    G = rng.standard_normal((m, p)) if pad else None
    R, R_pub = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (m, k))
    R_pub[:10] = R[:10]  # r = r_pub: only the private block is left
    if pad:
        G[10:15] = 2.0 * Xq[10:15]  # padding parallel to x_Q
        Xq[15:20] = 0.0  # ‖x_Q‖ = 0
    pub_sq = (XP**2).sum(1) + 1.0
    got = private_gradient_norms_sq(pub_sq, R - R_pub, R, R_pub, Xq, G)
    for i in range(m):
        public_block = pub_sq[i] * ((R[i] - R_pub[i]) ** 2).sum()
        priv = np.outer(Xq[i], R[i]) - (0.0 if G is None else np.outer(G[i], R_pub[i]))
        want = public_block + (priv**2).sum()
        # rows 0-9 (r = r_pub) are the private block alone, whatever the public scale
        np.testing.assert_allclose(got[i], want, rtol=1e-13)


# -- issue 16 item 10: classes_ under label DP ----------------------------------


@pytest.mark.parametrize("make", [
    lambda **kw: FeatureDPLogisticRegression(private_features=[], label_public=False, **kw),
    lambda **kw: DPSGDClassifier(**kw),
    lambda **kw: DPSGDFClassifier(**kw),
    lambda **kw: AdaMixClassifier(**{k: v for k, v in kw.items()
                                     if k not in ("epochs", "accountant")}),
], ids=["FeatureDPLogisticRegression", "DPSGDClassifier", "DPSGDFClassifier",
        "AdaMixClassifier"])
def test_classes_parameter_makes_classes_independent_of_the_data(multiclass, make):
    """A label seen once in y appears in classes_ (it reveals that record's label);
    classes= fixes classes_ whatever the data hold."""
    X, y = multiclass
    y = np.where(y == 2, 1, y)  # labels {0, 1}
    y_single = y.copy()
    y_single[7] = 2  # one record with label 2: its neighbour has label 1
    kw = dict(epsilon=3.0, delta=1e-5, epochs=1, accountant="rdp", random_state=0)
    assert make(**kw).fit(X, y).classes_.tolist() == [0, 1]
    assert make(**kw).fit(X, y_single).classes_.tolist() == [0, 1, 2]  # the leak
    a = make(classes=[0, 1, 2], **kw).fit(X, y)
    b = make(classes=[2, 1, 0], **kw).fit(X, y_single)
    assert a.classes_.tolist() == b.classes_.tolist() == [0, 1, 2]
    assert a.coef_.shape == b.coef_.shape == (3, X.shape[1])
    assert set(np.unique(a.predict(X))) <= {0, 1, 2}
    assert a.predict_proba(X).shape == (len(y), 3)
    with pytest.raises(ValueError, match=r"labels \[2\] that are not in `classes` \[0, 1\]"):
        make(classes=[0, 1], **kw).fit(X, y_single)
    with pytest.raises(ValueError, match="at least 2 distinct labels"):
        make(classes=[1], **kw).fit(X, y)
    with pytest.raises(ValueError, match="at least 2 distinct labels"):
        make(classes=[1, 1], **kw).fit(X, y)


# -- the fused oracles (issue 18) ---------------------------------------------------


def _one_hot_like(n, d, seed):
    """Dense rows with 20 % non-zeros at d = 25 (one-hot blocks of 6, a numeric column)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, d))
    for start in range(0, d - 1, 6):
        X[np.arange(n), start + rng.integers(0, 6, n)] = 0.4
    X[:, -1] = rng.uniform(0, 0.3, n)
    return X


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("label_public", [True, False])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_fused_oracles_match_the_numpy_path(k, label_public, fit_intercept):
    """Sparse-enough dense float64 X takes the fused CSR kernels: same sums (to rounding)
    as the gather + BLAS path, every clipped contribution within C."""
    from sklearn_fdp._mechanisms.fdp import alg1_oracles

    n, d = 300, 25
    X = _one_hot_like(n, d, seed=k)
    y = np.random.default_rng(7).integers(0, max(k, 2), n)
    loss = LinearLoss("log_loss", k)
    y_enc = loss.encode(y)
    theta = np.random.default_rng(8).normal(scale=2.0, size=(d + int(fit_intercept), k))
    public_mask = np.arange(d) % 3 != 0

    def oracles():
        return alg1_oracles(X, y_enc, loss, public_mask=public_mask, label_public=label_public,
                            public_loss="mask", fit_intercept=fit_intercept, max_grad_norm=0.2,
                            public_batch_size=40, public_rng=np.random.default_rng(3),
                            noise="default")

    fused_private, fused_public = oracles()
    assert fused_private.view.csr is not None  # the fused path is taken
    numpy_private, numpy_public = oracles()
    numpy_private.view.csr = None  # (the view is shared by both oracles)
    idx = np.arange(0, n, 3)
    np.testing.assert_allclose(fused_private(idx, theta), numpy_private(idx, theta),
                               rtol=1e-12, atol=1e-12)
    for _ in range(3):  # the same public batches: the samplers use the same stream
        np.testing.assert_allclose(fused_public(theta), numpy_public(theta), rtol=1e-12,
                                   atol=1e-12)
    norms = [np.linalg.norm(fused_private(np.array([i]), theta)) for i in range(60)]
    assert max(norms) <= 0.2
    assert sum(norm > 0.199 for norm in norms) > 10  # many were clipped: the bound is hit


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("label_public", [True, False])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_fused_step_is_bit_for_bit_the_two_oracles(k, label_public, fit_intercept):
    """fuse_public: one compiled pass for both batches gives exactly the separate sums,
    batch after batch (empty private batches and batches of unequal sizes included),
    and calling the oracles out of the engine's order raises. (k = 1 runs
    fdp_csr_step_binary, on the public entries only for the public batch.)"""
    from sklearn_fdp._mechanisms.fdp import alg1_oracles

    n, d = 300, 25
    X = _one_hot_like(n, d, seed=k)
    y = np.random.default_rng(7).integers(0, max(k, 2), n)
    loss = LinearLoss("log_loss", k)
    y_enc = loss.encode(y)
    public_mask = np.arange(d) % 3 != 0

    def oracles():
        return alg1_oracles(X, y_enc, loss, public_mask=public_mask, label_public=label_public,
                            public_loss="mask", fit_intercept=fit_intercept,
                            max_grad_norm=0.2, public_batch_size=40,
                            public_rng=np.random.default_rng(3), noise="default")

    sep_private, sep_public = oracles()
    fused_private, fused_public = oracles()
    fused_private.fuse_public(fused_public)
    rng = np.random.default_rng(9)
    for idx in (np.arange(0, n, 3), np.array([], dtype=np.intp), np.arange(0, n, 50),
                np.sort(rng.choice(n, 120, replace=False))):
        theta = rng.normal(scale=2.0, size=(d + int(fit_intercept), k))
        got = fused_private(idx, theta)
        assert np.array_equal(got, sep_private(idx, theta))
        assert np.array_equal(fused_public(theta), sep_public(theta))
    theta = np.zeros((d + int(fit_intercept), k))
    fused_private(idx, theta)
    with pytest.raises(RuntimeError, match="private oracle ran twice"):
        fused_private(idx, theta)
    fused_private, fused_public = oracles()
    fused_private.fuse_public(fused_public)
    fused_private(idx, theta)
    with pytest.raises(RuntimeError, match="another θ"):
        fused_public(theta.copy())


@pytest.mark.parametrize("density", [0.0, 0.1, 0.25, 0.26])
def test_fused_rows_one_pass_copy(density):
    """Dense X with at most 25 % non-zeros becomes exactly its CSR (one pass); above, None."""
    from sklearn_fdp._mechanisms.fdp import fused_rows

    n, d = 40, 25
    X = np.zeros((n, d))
    nnz = int(round(density * n * d))
    X.flat[np.random.default_rng(0).choice(n * d, nnz, replace=False)] = 1.5
    rows = fused_rows(X, "mask")
    if nnz > 0.25 * n * d:
        assert rows is None
        return
    ref = sp.csr_matrix(X)
    indptr, indices, data = rows
    assert np.array_equal(indptr, ref.indptr) and np.array_equal(indices, ref.indices)
    assert np.array_equal(data, ref.data)


def test_public_minimiser_newton_on_sparse_columns_matches_lbfgs():
    """Pretraining's Newton solve (sparse public columns) reaches the L-BFGS minimiser."""
    from sklearn.linear_model import LogisticRegression

    from sklearn_fdp._mechanisms.fdp import _public_design, public_minimiser

    X = _one_hot_like(2000, 25, seed=4)
    y = (X[:, :6].argmax(axis=1) + np.random.default_rng(1).integers(0, 2, 2000)) % 2
    public_mask = np.arange(25) % 3 != 0
    design, solver = _public_design(X, np.flatnonzero(public_mask))
    assert solver == "newton-cholesky" and sp.issparse(design)
    theta = public_minimiser(X, y, np.zeros((26, 1)), public_mask, True)
    ref = LogisticRegression(max_iter=10_000, tol=1e-10).fit(X[:, public_mask], y)
    np.testing.assert_allclose(theta[:25][public_mask, 0], ref.coef_[0], atol=1e-5)
    np.testing.assert_allclose(theta[25], ref.intercept_, atol=1e-5)
    assert np.all(theta[:25][~public_mask] == 0)


def test_public_minimiser_newton_cap_counts_output_columns():
    """Newton's multinomial Hessian has about (p k)² entries: L-BFGS once p k > 1000 (issue 20)."""
    from sklearn_fdp._mechanisms.fdp import _NEWTON_MAX_COLUMNS, _public_design

    X = _one_hot_like(200, 120, seed=4)
    public_idx = np.arange(100)
    assert _public_design(X, public_idx)[1] == "newton-cholesky"
    assert _public_design(X, public_idx, n_outputs=10)[1] == "newton-cholesky"
    assert 100 * 11 > _NEWTON_MAX_COLUMNS
    design, solver = _public_design(X, public_idx, n_outputs=11)
    assert solver == "lbfgs" and not sp.issparse(design)
    np.testing.assert_array_equal(design, X[:, public_idx])


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("form", ["dense_rows", "dense", "csr"])
def test_compiled_newton_is_scikit_learns_newton(form, fit_intercept):
    """The compiled binary Newton takes scikit-learn's newton-cholesky iterations.

    Same objective, step, line search and stopping rule, so the coefficients
    agree up to the rounding of sums taken in another order (~1e-13 here;
    1e-9 leaves room, while the solver's own tolerance 1e-4 would not hide
    a different iterate: one Newton step more or less moves them by ~1e-3).
    """
    from sklearn.linear_model import LogisticRegression

    from sklearn_fdp._mechanisms import fdp

    X = _one_hot_like(3000, 25, seed=5) * 3  # logits of a few units
    y = ((X[:, :6].argmax(axis=1) + np.random.default_rng(2).integers(0, 2, 3000)) % 2
         ).astype(np.float64)
    public_mask = np.arange(25) % 4 != 1
    rows = fdp.fused_rows(X, "mask") if form == "dense_rows" else None
    data = sp.csr_matrix(X) if form == "csr" else X
    calls = []
    real = fdp._binary_newton

    def spy(*args, **kwargs):
        calls.append(real(*args, **kwargs))
        return calls[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fdp, "_binary_newton", spy)
        theta = fdp.public_minimiser(data, y, np.zeros((25 + fit_intercept, 1)), public_mask,
                                     fit_intercept, None, rows)
    assert len(calls) == 1 and calls[0] is not None  # the compiled path ran
    ref = LogisticRegression(solver="newton-cholesky", max_iter=1000,
                             fit_intercept=fit_intercept).fit(X[:, public_mask], y)
    np.testing.assert_allclose(theta[:25][public_mask, 0], ref.coef_[0], rtol=0, atol=1e-9)
    assert np.all(theta[:25][~public_mask] == 0)
    if fit_intercept:
        np.testing.assert_allclose(theta[25], ref.intercept_, rtol=0, atol=1e-9)


def test_compiled_newton_leaves_what_it_cannot_follow_to_scikit_learn():
    """A saturated Hessian (huge logits) and a single class: scikit-learn's own behaviour."""
    import warnings

    from sklearn.linear_model import LogisticRegression

    from sklearn_fdp._mechanisms import fdp

    X = _one_hot_like(500, 25, seed=6) * 1e4
    y = (X[:, 0] > 0).astype(np.float64)  # separable: the logits run to thousands
    public_mask = np.ones(25, dtype=bool)
    rows = fdp.fused_rows(X, "mask")
    assert fdp._binary_newton(*fdp._public_newton_rows(X, np.arange(25), rows), 25, y,
                              True) is None  # gives up: most pointwise Hessians are 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta = fdp.public_minimiser(X, y, np.zeros((26, 1)), public_mask, True, None, rows)
        ref = LogisticRegression(solver="newton-cholesky", max_iter=1000).fit(
            sp.csr_matrix(X), y)
    np.testing.assert_array_equal(theta[:25, 0], ref.coef_[0])  # scikit-learn's run, exactly
    with pytest.raises(ValueError, match="class"):
        fdp.public_minimiser(X, np.zeros(500), np.zeros((26, 1)), public_mask, True)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_public_minimiser_on_dense_columns_is_scikit_learns_lbfgs(fit_intercept, monkeypatch):
    """Dense public columns: scikit-learn's L-BFGS objective, read in row blocks (issue 37).

    Small blocks force several; the same objective, optimiser and options as
    LogisticRegression(solver="lbfgs") take the same iterates, so the result
    agrees with scikit-learn's run up to the rounding of sums taken in another
    order (1e-8 leaves room; stopping one iteration earlier or later moves the
    weights by ~1e-3 here), and every private weight stays 0.
    """
    from sklearn.linear_model import LogisticRegression

    from sklearn_fdp._mechanisms import fdp

    monkeypatch.setattr(fdp, "_LBFGS_CHUNK_BYTES", 4096)
    rng = np.random.default_rng(7)
    X = rng.standard_normal((3000, 12))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, :4].sum(axis=1) + 0.2 * rng.standard_normal(3000) > 0).astype(np.float64)
    public_mask = np.arange(12) % 3 != 0
    assert fdp._dense_public_columns(X, np.flatnonzero(public_mask))
    theta = fdp.public_minimiser(X, y, np.zeros((12 + fit_intercept, 1)), public_mask,
                                 fit_intercept)
    ref = LogisticRegression(max_iter=1000, fit_intercept=fit_intercept).fit(
        X[:, public_mask], y)
    np.testing.assert_allclose(theta[:12][public_mask, 0], ref.coef_[0], rtol=0, atol=1e-8)
    if fit_intercept:
        np.testing.assert_allclose(theta[12], ref.intercept_, rtol=0, atol=1e-8)
    assert np.all(theta[:12][~public_mask] == 0)


def test_public_pretraining_copies_no_dense_columns():
    """At most O(n) + a block's worth of memory, never O(n d): no copy of X[:, public]."""
    import tracemalloc

    from sklearn_fdp._mechanisms import fdp

    rng = np.random.default_rng(3)
    n, d = 40_000, 40
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    y = (X[:, 0] > 0).astype(np.float64)
    public_mask = np.arange(d) >= 4
    fdp.public_minimiser(X[:500], y[:500], np.zeros((d + 1, 1)), public_mask, True)  # compile
    tracemalloc.start()
    try:
        fdp.public_minimiser(X, y, np.zeros((d + 1, 1)), public_mask, True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The copy of the public columns alone would be 0.9 X.nbytes; the fit keeps
    # a few float64 per row (y, a block's residuals) and one 8 MiB block.
    assert peak < X.nbytes / 4 + fdp._LBFGS_CHUNK_BYTES, (peak, X.nbytes)

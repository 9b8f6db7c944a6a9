"""DPSGDFClassifier: composed accounting, the private mean, intercept recovery."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from sklearn_fdp import DPSGDClassifier, DPSGDFClassifier, accounting
from sklearn_fdp.datasets import make_dpsgdf_counterexample
from sklearn_fdp.exceptions import BudgetExceededError, PrivacyLeakWarning


@pytest.fixture(scope="module")
def offset():
    """Classes separated along a direction, plus a large common offset."""
    X, y = make_classification(n_samples=3000, n_features=6, n_informative=4, random_state=0)
    return X + 8.0, y


def _unit_rows(X, C=1.0):
    return X / np.linalg.norm(X, axis=1, keepdims=True) * C


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_epsilon_is_dp_accountings_composition(offset, accountant):
    X, y = offset
    clf = DPSGDFClassifier(epsilon=1.0, delta=1e-5, epsilon_mean=0.1, epochs=2,
                           accountant=accountant, random_state=0).fit(X, y)
    assert clf.accountant_ == accountant
    acc = (rdp_privacy_accountant.RdpAccountant() if accountant == "rdp"
           else pld_privacy_accountant.PLDAccountant())
    sigma_f = dp_accounting.get_sigma_gaussian(0.1, 1e-5)
    acc.compose(dp_accounting.ComposedDpEvent([
        dp_accounting.GaussianDpEvent(sigma_f),
        dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
            clf.sampling_rate_, dp_accounting.GaussianDpEvent(clf.noise_multiplier_)),
            clf.steps_),
    ]))
    assert clf.epsilon_ == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    assert 0.98 < clf.epsilon_ <= 1.0
    assert clf.mean_noise_multiplier_ == pytest.approx(sigma_f)
    assert clf.epsilon_mean_ == pytest.approx(0.1, rel=1e-6)
    # The mean's share costs noise: DP-SGD alone at the same ε needs less.
    plain = DPSGDClassifier(epsilon=1.0, delta=1e-5, epochs=2, accountant=accountant,
                            random_state=0).fit(_unit_rows(X), y)
    assert plain.noise_multiplier_ < clf.noise_multiplier_


def test_mean_noise_std_and_intercept_recovery(offset):
    X, y = offset
    clf = DPSGDFClassifier(epsilon=2.0, delta=1e-5, epsilon_mean=0.2, feature_norm=3.0,
                           epochs=2, accountant="rdp", random_state=0).fit(X, y)
    n = len(y)
    sigma_f = accounting.gaussian_noise_multiplier(0.2, 1e-5)
    assert clf.mean_noise_std_ == pytest.approx(sigma_f * 3.0 / n)
    assert clf.feature_norm_ == 3.0
    Xs = _unit_rows(X, 3.0)
    assert np.all(np.abs(clf.mean_ - Xs.mean(axis=0)) < 6 * clf.mean_noise_std_)
    # Predictions on raw X are the linear model on the scaled rows; the
    # intercept includes -mean_ @ w, so the scores equal w @ (x - mean_) + b_centred.
    scores = clf.decision_function(X)
    np.testing.assert_allclose(scores, Xs @ clf.coef_.ravel() + clf.intercept_[0], rtol=1e-10)
    # Rescaling the input rows changes nothing (rows are normalised first).
    np.testing.assert_allclose(clf.decision_function(5 * X), scores, rtol=1e-10)
    assert clf.score(X, y) > 0.6  # non-private logistic regression: 0.72 on these rows
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_replace_relation_doubles_the_mean_noise(offset):
    X, y = offset
    rep = DPSGDFClassifier(epsilon=1.0, epochs=1, batch_size=1000, accountant="pld",
                           neighboring="replace", random_state=0).fit(X, y)
    sigma_f = dp_accounting.get_sigma_gaussian(0.05, 1e-5)
    assert rep.mean_noise_multiplier_ == pytest.approx(2 * sigma_f)
    assert rep.epsilon_mean_ == pytest.approx(0.05, rel=1e-6)
    assert rep.epsilon_ <= 1.0


def test_same_random_state_same_coef(offset):
    X, y = offset
    kw = dict(epsilon=1.0, epochs=2, accountant="rdp")
    a = DPSGDFClassifier(random_state=7, **kw).fit(X, y)
    b = DPSGDFClassifier(random_state=7, **kw).fit(X, y)
    c = DPSGDFClassifier(random_state=8, **kw).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    np.testing.assert_array_equal(a.mean_, b.mean_)
    assert not np.array_equal(a.mean_, c.mean_)


def test_multiclass_hinge_float32_and_no_intercept(offset):
    X, y = make_classification(n_samples=3000, n_features=6, n_informative=4, n_classes=3,
                               n_clusters_per_class=1, random_state=1)
    clf = DPSGDFClassifier(loss="hinge", epsilon=4.0, accountant="rdp", random_state=0)
    clf.fit(X + 5.0, y)
    assert clf.coef_.shape == (3, 6) and clf.intercept_.shape == (3,)
    assert clf.score(X + 5.0, y) > 0.5
    assert not hasattr(clf, "predict_proba")
    X, y = offset
    f32 = DPSGDFClassifier(epsilon=1.0, epochs=1, accountant="rdp", random_state=0)
    f32.fit(X.astype(np.float32), y)
    assert f32.coef_.dtype == np.float32 and f32.intercept_.dtype == np.float32
    # Without a free intercept, the model w @ (x - mean_) still has intercept -mean_ @ w.
    nb = DPSGDFClassifier(epsilon=1.0, epochs=1, fit_intercept=False, accountant="rdp",
                          random_state=0).fit(X, y)
    np.testing.assert_allclose(nb.intercept_, -nb.coef_ @ nb.mean_)


def test_counterexample_runs(global_seed):
    """Sanity only: both fits run on the DPSGD-F counter-example and stay within budget."""
    X, y = make_dpsgdf_counterexample(2000, 10000.0, variant="plus", random_state=global_seed)
    a = DPSGDClassifier(loss="hinge", epsilon=1.0, delta=1e-6, epochs=2, accountant="rdp",
                        random_state=0).fit(X, y)
    b = DPSGDFClassifier(loss="hinge", epsilon=1.0, delta=1e-6, epochs=2, accountant="rdp",
                         random_state=0).fit(X, y)
    assert a.epsilon_ <= 1.0 and b.epsilon_ <= 1.0
    assert 0.0 <= a.score(X, y) <= 1.0 and 0.0 <= b.score(X, y) <= 1.0


def test_inputs_not_mutated_and_pickle(offset):
    X, y = offset
    X0, y0 = X.copy(), y.copy()
    clf = DPSGDFClassifier(epsilon=1.0, epochs=1, accountant="rdp", random_state=0)
    params = clf.get_params()
    clf.fit(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    assert clf.get_params() == params
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict(X), clf.predict(X))
    assert not hasattr(clone(clf), "coef_")


@pytest.mark.parametrize("params,exc,match", [
    (dict(epsilon_mean=0.0), ValueError, "epsilon_mean"),
    (dict(feature_norm=-1.0), ValueError, "feature_norm"),
    (dict(variant="exact"), ValueError, "variant"),
    (dict(variant="analysed"), NotImplementedError, "not implemented yet"),
    (dict(epsilon=0.5, epsilon_mean=0.5), ValueError, "epsilon_mean"),
    (dict(epsilon=0.01, epsilon_mean=0.001, noise_multiplier=0.5), BudgetExceededError, "spends"),
    (dict(delta=0.0), ValueError, "delta"),
    (dict(epsilon=None, noise_multiplier=None), ValueError, "noise_multiplier"),
])
def test_invalid_parameters_raise(offset, params, exc, match):
    X, y = offset
    clf = DPSGDFClassifier(**params)
    with pytest.raises(exc, match=match):
        clf.fit(X, y)
    with pytest.raises(NotFittedError):  # a failed fit leaves no fitted state
        clf.predict(X)


def test_sparse_rejected_and_large_delta_warns(offset):
    X, y = offset
    with pytest.raises(TypeError, match="[Ss]parse"):
        DPSGDFClassifier().fit(sp.csr_matrix(X), y)
    with pytest.warns(PrivacyLeakWarning, match="1/n_samples"):
        DPSGDFClassifier(delta=0.01, epochs=1, accountant="rdp",
                         random_state=0).fit(X[:200], y[:200])

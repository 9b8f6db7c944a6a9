"""AdaMixClassifier: public/private mixing, accounting, ablations and the pDP report."""

import copy
import math
import pickle

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.datasets import load_digits, make_classification
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer

from sklearn_fdp import AdaMixClassifier, accounting
from sklearn_fdp.exceptions import BudgetExceededError
from sklearn_fdp._engine import LinearLoss
from sklearn_fdp._mechanisms.adamix import _AdaMixOracle

NOISY_GD = dict(projection=False, adaptive_clipping=False)


def _residual(Z, y):
    """Residual of the log loss (``g_i = x~_i r_iᵀ``), one column per output of ``Z``."""
    return LinearLoss("log_loss", Z.shape[1]).residual(Z, y)


def _public_mask(y, per_class, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.zeros(len(y), dtype=bool)
    for c in np.unique(y):
        mask[rng.choice(np.flatnonzero(y == c), per_class, replace=False)] = True
    return mask


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=1200, n_features=8, n_informative=5, random_state=0)
    X = Normalizer().fit_transform(X)
    return X, y, _public_mask(y, 20)


@pytest.fixture(scope="module")
def multiclass():
    X, y = make_classification(n_samples=1200, n_features=10, n_informative=6, n_classes=4,
                               n_clusters_per_class=1, random_state=1)
    X = Normalizer().fit_transform(X)
    return X, y, _public_mask(y, 5)


# -- behaviour -----------------------------------------------------------------


def test_binary_fit_predict(binary):
    X, y, mask = binary
    clf = AdaMixClassifier(epsilon=3.0, random_state=0).fit(X, y, public_mask=mask)
    assert clf.coef_.shape == (1, 8) and clf.intercept_.shape == (1,)
    assert clf.pretrained_coef_.shape == (1, 8)
    assert clf.n_public_ == mask.sum() and clf.n_private_ == len(y) - mask.sum()
    assert clf.projection_ and clf.adaptive_clipping_
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[proba.argmax(axis=1)])
    ref = LogisticRegression().fit(X, y).score(X, y)
    assert clf.score(X, y) > ref - 0.1


def test_multiclass_fit_and_string_labels(multiclass):
    X, y, mask = multiclass
    labels = np.array(["a", "b", "c", "d"])[y]
    clf = AdaMixClassifier(epsilon=3.0, random_state=0).fit(X, labels, public_mask=mask)
    assert clf.coef_.shape == (4, 10) and clf.intercept_.shape == (4,)
    assert list(clf.classes_) == ["a", "b", "c", "d"]
    assert clf.score(X, labels) > 0.6
    # The feature subspace has at most min(n_public, d + 1) input directions
    # per class; the gradient subspace at most n_public dimensions.
    assert clf.subspace_dims_.max() <= min(mask.sum(), 11) * 4
    grad = AdaMixClassifier(epsilon=3.0, subspace="gradient", random_state=0)
    assert grad.fit(X, labels, public_mask=mask).subspace_dims_.max() <= mask.sum()
    assert clf.clip_thresholds_.shape == (clf.steps_,)


def test_not_fitted():
    with pytest.raises(NotFittedError):
        AdaMixClassifier().predict(np.zeros((2, 3)))
    with pytest.raises(NotFittedError):
        AdaMixClassifier().per_instance_epsilon(np.zeros((2, 3)), [0, 1])


def test_pickle_and_clone(binary):
    X, y, mask = binary
    clf = AdaMixClassifier(epsilon=1.0, random_state=0).fit(X, y, public_mask=mask)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict(X), clf.predict(X))
    assert not hasattr(clone(clf), "coef_")


# -- public_mask validation --------------------------------------------------------


@pytest.mark.parametrize(
    "make_mask, match",
    [
        (lambda m: m.astype(int), "must be a boolean array"),
        (lambda m: m[:-1], "one entry per row of X"),
        (lambda m: np.ones_like(m), "marks all 1200 records public"),
        (lambda m: np.zeros_like(m), "marks no record public"),
        (lambda m: m.reshape(-1, 1), "one entry per row of X"),
    ],
)
def test_public_mask_errors(binary, make_mask, match):
    X, y, mask = binary
    with pytest.raises(ValueError, match=match):
        AdaMixClassifier(random_state=0).fit(X, y, public_mask=make_mask(mask))


def test_no_public_records_is_noisy_gd(binary):
    X, y, _ = binary
    clf = AdaMixClassifier(epsilon=2.0, random_state=0, **NOISY_GD).fit(X, y)
    assert clf.n_public_ == 0 and not clf.projection_ and not clf.adaptive_clipping_
    np.testing.assert_array_equal(clf.pretrained_coef_, 0.0)
    np.testing.assert_array_equal(clf.clip_thresholds_, 1.0)


def test_unknown_parameter_values_raise(binary):
    X, y, mask = binary
    for params in [dict(subspace_dim=0), dict(clip_percentile=0.0), dict(variant="x"),
                   dict(noise_multiplier=0.0), dict(epsilon=-1.0)]:
        with pytest.raises(ValueError):
            AdaMixClassifier(**params).fit(X, y, public_mask=mask)
    with pytest.raises(ValueError, match="l2_regularization > 0"):
        AdaMixClassifier(variant="theory", l2_regularization=0.0).fit(X, y, public_mask=mask)


@pytest.mark.parametrize("params, public", [({}, True), (NOISY_GD, True), (NOISY_GD, False)])
def test_divergence_raises_naming_learning_rate_and_keeps_the_previous_fit(binary, params,
                                                                          public):
    """Issue 22 item 6: learning_rate=1e300 stored NaN coefficients (only RuntimeWarnings)."""
    X, y, mask = binary
    mask = mask if public else None
    clf = AdaMixClassifier(epsilon=1.0, random_state=0, **params).fit(X, y, public_mask=mask)
    before = copy.deepcopy(vars(clf))
    clf.set_params(learning_rate=1e300)
    with pytest.raises(ValueError, match=r"diverged.*learning_rate=1e\+300"):
        clf.fit(X, y, public_mask=mask)
    assert clf.learning_rate == 1e300  # the parameter stays as set
    assert vars(clf).keys() == before.keys()
    for key, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(clf, key), value, err_msg=key)
    assert np.all(np.isfinite(clf.coef_))
    clf.predict(X)


# -- metadata routing --------------------------------------------------------------


class _SpyAdaMix(AdaMixClassifier):
    """Records what ``fit`` receives (sizes of X and of the public mask)."""

    calls = []

    def fit(self, X, y, public_mask=None):
        type(self).calls.append((len(X), None if public_mask is None else len(public_mask),
                                 None if public_mask is None else int(np.sum(public_mask))))
        return super().fit(X, y, public_mask=public_mask)


def test_metadata_routing_pipeline_and_gridsearch(binary):
    X, y, mask = binary
    _SpyAdaMix.calls = []
    with sklearn.config_context(enable_metadata_routing=True):
        est = _SpyAdaMix(epsilon=1.0, random_state=0).set_fit_request(public_mask=True)
        pipe = make_pipeline(Normalizer(), est)
        pipe.fit(X, y, public_mask=mask)
        assert _SpyAdaMix.calls[-1] == (len(X), len(X), int(mask.sum()))
        search = GridSearchCV(pipe, {"_spyadamix__l2_regularization": [1e-2, 1e-1]}, cv=3)
        search.fit(X, y, public_mask=mask)
    # 2 candidates x 3 folds + the refit; every fold got the mask of its rows.
    calls = _SpyAdaMix.calls[1:]
    assert len(calls) == 7
    for n_x, n_mask, n_pub in calls[:-1]:
        assert n_x == n_mask == 800
        assert 0 < n_pub < int(mask.sum())
    assert sum(c[2] for c in calls[:3]) == 2 * int(mask.sum())  # each public row in 2 of 3
    assert calls[-1] == (len(X), len(X), int(mask.sum()))
    assert search.best_estimator_[-1].n_public_ == mask.sum()


def test_metadata_routing_requires_request(binary):
    X, y, mask = binary
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = make_pipeline(AdaMixClassifier(epsilon=1.0))
        with pytest.raises(Exception, match="public_mask"):
            pipe.fit(X, y, public_mask=mask)


# -- accounting ----------------------------------------------------------------------


@pytest.mark.parametrize("epsilon, sigma", [(0.5, 20.0), (3.0, 20.0), (3.0, 5.0)])
def test_epsilon_is_accountant_value_and_steps_are_maximal(binary, epsilon, sigma):
    X, y, mask = binary
    clf = AdaMixClassifier(epsilon=epsilon, noise_multiplier=sigma, random_state=0)
    clf.fit(X, y, public_mask=mask)
    assert clf.epsilon_ <= epsilon
    again = accounting.epsilon_of_event(clf.dp_event_, clf.delta_, accountant="pld")
    assert clf.epsilon_ == pytest.approx(again, rel=1e-12)
    same = accounting.epsilon_of_event(accounting.dpsgd_event(sigma, 1.0, clf.steps_),
                                       clf.delta_, accountant="pld")
    assert clf.epsilon_ == pytest.approx(same, rel=1e-12)
    # GDP (Lemma 8): T Gaussian steps of multiplier σ = one of multiplier σ / sqrt(T).
    exact = accounting.gaussian_epsilon(sigma / math.sqrt(clf.steps_), clf.delta_)
    assert exact <= clf.epsilon_ + 1e-6
    # One more step would overspend.
    assert accounting.gaussian_epsilon(sigma / math.sqrt(clf.steps_ + 1), clf.delta_) > epsilon
    assert clf.n_iter_ == clf.steps_ and clf.noise_multiplier_ == sigma


def test_budget_too_small_for_one_step(binary):
    X, y, mask = binary
    with pytest.raises(BudgetExceededError, match="noise_multiplier >="):
        AdaMixClassifier(epsilon=0.1, noise_multiplier=1.0).fit(X, y, public_mask=mask)


@pytest.mark.parametrize("epsilon", [0.03, 0.1, 0.3, 1.0, 3.0, 8.0])
def test_default_noise_fits_at_every_epsilon(binary, epsilon):
    # Issue 20: σ = 20 cannot take one step below ε ≈ 0.15; "auto" raises σ to
    # keep 30 steps there and is the paper's 20 wherever that gives >= 30 steps.
    X, y, mask = binary
    clf = AdaMixClassifier(epsilon=epsilon, random_state=0).fit(X, y, public_mask=mask)
    assert clf.epsilon_ <= epsilon
    sigma_1 = accounting.gaussian_noise_multiplier(epsilon, clf.delta_)
    twenty_steps = int((20.0 / sigma_1) ** 2)  # what σ = 20 allows (GDP)
    if twenty_steps >= 30:
        assert clf.noise_multiplier_ == 20.0
    else:
        assert clf.noise_multiplier_ > 20.0 and clf.steps_ == 30
    # The budget is used: one more step at this σ would overspend.
    assert accounting.gaussian_epsilon(
        clf.noise_multiplier_ / math.sqrt(clf.steps_ + 1), clf.delta_) > epsilon
    assert np.unique(clf.predict(X)).size == 2


def test_default_noise_caps_the_steps_at_huge_epsilon(binary):
    X, y, mask = binary
    clf = AdaMixClassifier(epsilon=1e6, random_state=0).fit(X, y, public_mask=mask)
    assert clf.steps_ == 10_000 and clf.noise_multiplier_ == 2.5
    assert clf.epsilon_ < 1e6  # spends less than the (meaningless) budget
    again = accounting.epsilon_of_event(clf.dp_event_, clf.delta_, accountant="pld")
    assert clf.epsilon_ == pytest.approx(again, rel=1e-12)


def test_more_steps_with_larger_sigma(binary):
    X, y, mask = binary
    small = AdaMixClassifier(epsilon=2.0, noise_multiplier=5.0, random_state=0)
    large = AdaMixClassifier(epsilon=2.0, noise_multiplier=10.0, random_state=0)
    assert large.fit(X, y, public_mask=mask).steps_ > small.fit(X, y, public_mask=mask).steps_


# -- ablation switches -------------------------------------------------------------------


def test_ablation_switches(multiclass):
    X, y, mask = multiclass
    n_params = (X.shape[1] + 1) * 4
    fits = {name: AdaMixClassifier(epsilon=1.0, random_state=0, projection=p,
                                   adaptive_clipping=a).fit(X, y, public_mask=mask)
            for name, p, a in [("ngd", False, False), ("proj", True, False),
                               ("clip", False, True), ("adamix", True, True)]}
    ngd = fits["ngd"]
    assert not ngd.projection_ and not ngd.adaptive_clipping_
    np.testing.assert_array_equal(ngd.clip_thresholds_, ngd.max_grad_norm)
    np.testing.assert_array_equal(ngd.subspace_dims_, n_params)
    assert fits["proj"].projection_ and not fits["proj"].adaptive_clipping_
    assert fits["proj"].subspace_dims_.max() <= min(mask.sum(), X.shape[1] + 1) * 4
    np.testing.assert_array_equal(fits["proj"].clip_thresholds_, 1.0)
    clip = fits["clip"]
    np.testing.assert_array_equal(clip.subspace_dims_, n_params)
    # First step: τ is the 90th percentile of the public gradient norms at w_ref.
    theta_ref = np.vstack([clip.pretrained_coef_.T, clip.pretrained_intercept_])
    Xp = np.hstack([X[mask], np.ones((mask.sum(), 1))])
    R = _residual(Xp @ theta_ref, y[mask])
    norms = np.linalg.norm(Xp, axis=1) * np.linalg.norm(R, axis=1)
    assert clip.clip_thresholds_[0] == pytest.approx(np.percentile(norms, 90.0))
    # The same budget (and number of steps) for every variant.
    assert len({f.steps_ for f in fits.values()}) == 1
    assert len({f.epsilon_ for f in fits.values()}) == 1


def test_subspace_dim_caps_the_noise_dimension(multiclass):
    X, y, mask = multiclass
    clf = AdaMixClassifier(epsilon=1.0, subspace_dim=3, subspace="gradient", random_state=0)
    clf.fit(X, y, public_mask=mask)
    assert clf.subspace_dims_.max() == 3
    clf = AdaMixClassifier(epsilon=1.0, subspace_dim=3, random_state=0)
    clf.fit(X, y, public_mask=mask)
    assert clf.subspace_dims_.max() == 3 * 4  # 3 input directions x 4 classes


@pytest.mark.parametrize("subspace", ["gradient", "feature"])
@pytest.mark.parametrize("n_outputs, n_pub", [(1, 6), (3, 6), (1, 40), (3, 40)])
@pytest.mark.parametrize("subspace_dim", [None, 2])
def test_oracle_matches_explicit_projection(subspace, n_outputs, n_pub, subspace_dim):
    """Projected, clipped private sum and noise support vs per-example gradients + SVD."""
    rng = np.random.default_rng(0)
    d, n_priv = 5, 30
    X_priv = rng.normal(size=(n_priv, d)) / 2
    X_pub = rng.normal(size=(n_pub, d)) / 2
    if n_outputs == 1:
        y_priv, y_pub = rng.integers(0, 2, n_priv) * 1.0, rng.integers(0, 2, n_pub) * 1.0
    else:
        y_priv, y_pub = rng.integers(0, 3, n_priv), rng.integers(0, 3, n_pub)
    theta = rng.normal(size=(d + 1, n_outputs))
    oracle = _AdaMixOracle(X_priv, y_priv, X_pub, y_pub, n_outputs, True, 2.0, subspace_dim,
                           90.0, True, True, 1.0, n_priv + n_pub, 0.0, np.zeros_like(theta),
                           subspace=subspace)
    out = oracle(np.arange(n_priv), theta)

    def grads(X, y):
        Xt = np.hstack([X, np.ones((len(X), 1))])
        R = _residual(Xt @ theta, y)
        return np.einsum("ia,ib->iab", Xt, R).reshape(len(X), -1), Xt, R

    G_pub, Xt_pub, R_pub = grads(X_pub, y_pub)
    G_priv, _, _ = grads(X_priv, y_priv)
    tau = np.percentile(np.linalg.norm(G_pub, axis=1), 90.0)
    if subspace == "gradient":
        _, s, Vt = np.linalg.svd(G_pub, full_matrices=False)
        rank = int(np.sum(s > 1e-5 * s[0]))
        U = Vt[: rank if subspace_dim is None else min(subspace_dim, rank)].T
    else:
        W = Xt_pub * np.linalg.norm(R_pub, axis=1)[:, None]
        _, s, Vt = np.linalg.svd(W, full_matrices=False)
        rank = int(np.sum(s > 1e-5 * s[0]))
        V = Vt[: rank if subspace_dim is None else min(subspace_dim, rank)].T
        U = np.kron(V, np.eye(n_outputs))  # S -> V S in vec (row-major) order
    proj = G_priv @ U
    norms = np.linalg.norm(proj, axis=1)
    clipped = proj * np.minimum(1.0, tau / norms)[:, None]
    expected = (U @ clipped.sum(axis=0)).reshape(theta.shape)
    np.testing.assert_allclose(out, expected, atol=1e-9)
    tau_t, n_dims, sens = oracle.sensitivities(theta)
    assert tau_t == pytest.approx(tau, rel=1e-12) and n_dims == U.shape[1]
    np.testing.assert_allclose(sens, (np.minimum(norms, tau) / tau) ** 2, rtol=1e-9)
    assert oracle._n_dims == U.shape[1]
    # The noise lives in the subspace and is N(0, (σ τ)² I_k) there.
    noise = np.stack([oracle.noise(rng).ravel() for _ in range(4000)])
    np.testing.assert_allclose(noise - noise @ U @ U.T, 0.0, atol=1e-9)
    cov = np.cov((noise @ U).T)
    np.testing.assert_allclose(cov, (2.0 * tau) ** 2 * np.eye(U.shape[1]),
                               atol=0.12 * (2.0 * tau) ** 2)


# -- theory variant --------------------------------------------------------------------


def test_theory_variant(binary):
    X, y, mask = binary
    L = math.sqrt(2.0)  # binary log loss, rows of norm <= 1 plus intercept
    clf = AdaMixClassifier(epsilon=3.0, variant="theory", max_grad_norm=L, random_state=0,
                           store_iterates=True)
    clf.fit(X, y, public_mask=mask)
    assert not clf.projection_ and not clf.adaptive_clipping_
    np.testing.assert_array_equal(clf.clip_thresholds_, L)
    assert clf.learning_rate_ == clf.l2_regularization
    assert clf.epsilon_ <= 3.0
    assert clf.score(X, y) > 0.7
    # With a Lipschitz bound the clip never binds: every record has μ_i <= sqrt(T)/σ.
    mu = clf._per_instance_mu(X, y, mask)
    assert np.all(mu <= math.sqrt(clf.steps_) / clf.noise_multiplier_ + 1e-12)


def test_theory_weighted_average_matches_reference(binary):
    """Algorithm 3 re-implemented in numpy with the same noise stream."""
    from sklearn_fdp._random import spawn_generators

    X, y, mask = binary
    lam, L, sigma, seed = 0.05, math.sqrt(2.0), 20.0, 3
    clf = AdaMixClassifier(epsilon=0.5, variant="theory", max_grad_norm=L, l2_regularization=lam,
                           noise_multiplier=sigma, random_state=seed, public_epochs=0)
    clf.fit(X, y, public_mask=mask)
    T = clf.steps_
    noise_rng = spawn_generators(seed, 2)[0]
    Xt = np.hstack([X, np.ones((len(X), 1))])
    Xpub, ypub, Xpri, ypri = Xt[mask], y[mask], Xt[~mask], y[~mask]
    w = np.zeros((Xt.shape[1], 1))  # w_ref = 0 without pretraining
    avg = np.zeros_like(w)
    n = len(X)
    for t in range(1, T + 1):
        avg += 2 * t / (T * (T + 1)) * w
        R = _residual(Xpri @ w, ypri)
        norms = np.linalg.norm(Xpri, axis=1) * np.abs(R[:, 0])  # ‖x~_i r_i‖
        scale = np.minimum(1.0, L / np.maximum(norms, 1e-300))
        priv = Xpri.T @ (R * scale[:, None])
        priv += sigma * L * noise_rng.standard_normal(w.shape)
        pub = Xpub.T @ _residual(Xpub @ w, ypub)
        grad = (priv + pub) / n + lam * w
        w = w - 2.0 / (lam * (t + 1)) * grad
    np.testing.assert_allclose(clf.coef_.ravel(), avg[:-1, 0], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(clf.intercept_, avg[-1], rtol=1e-7, atol=1e-9)


# -- per-instance DP ---------------------------------------------------------------------


@pytest.mark.parametrize("params", [{}, NOISY_GD, dict(projection=False),
                                    dict(variant="theory", max_grad_norm=1.0)])
def test_per_instance_epsilon_below_epsilon(multiclass, params):
    X, y, mask = multiclass
    clf = AdaMixClassifier(epsilon=3.0, random_state=0, store_iterates=True, **params)
    clf.fit(X, y, public_mask=mask)
    eps = clf.per_instance_epsilon(X, y, public_mask=mask)
    assert eps.shape == (clf.n_private_,)
    assert np.all(eps >= 0) and np.all(eps <= clf.epsilon_)
    assert np.all(np.isfinite(eps))
    # Per record: ε_i is the Gaussian ε of μ_i.
    mu = clf._per_instance_mu(X, y, mask)
    i = int(np.argmin(mu))
    exact = accounting.gaussian_epsilon(1.0 / mu[i], clf.delta_)
    assert eps[i] == pytest.approx(exact, rel=1e-6)
    # A larger δ gives smaller ε; the bound for δ is still <= the run's ε at that δ.
    loose = clf.per_instance_epsilon(X, y, mask, delta=1e-3)
    assert np.all(loose <= eps + 1e-12)
    run_eps = accounting.gaussian_epsilon(clf.noise_multiplier_ / math.sqrt(clf.steps_), 1e-3)
    assert np.all(loose <= run_eps * (1 + 1e-9))


def test_plot_per_instance_epsilon(binary):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, y, mask = binary
    clf = AdaMixClassifier(epsilon=1.0, random_state=0, store_iterates=True)
    clf.fit(X, y, public_mask=mask)
    ax = clf.plot_per_instance_epsilon(X, y, mask, bins=10, label="AdaMix")
    assert ax.get_xlabel().startswith("per-instance")
    plt.close(ax.figure)


# -- inputs and determinism --------------------------------------------------------------


def test_inputs_not_mutated(multiclass):
    X, y, mask = multiclass
    X0, y0, m0 = X.copy(), y.copy(), mask.copy()
    AdaMixClassifier(epsilon=1.0, random_state=0).fit(X, y, public_mask=mask)
    AdaMixClassifier(epsilon=1.0, variant="theory", random_state=0).fit(X, y, public_mask=mask)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(mask, m0)


def test_determinism(binary):
    X, y, mask = binary
    a = AdaMixClassifier(epsilon=1.0, random_state=7, store_iterates=True)
    b = AdaMixClassifier(epsilon=1.0, random_state=7, store_iterates=True)
    a.fit(X, y, public_mask=mask)
    b.fit(X, y, public_mask=mask)
    c = AdaMixClassifier(epsilon=1.0, random_state=8).fit(X, y, public_mask=mask)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.per_instance_epsilon(X, y, mask),
                                  b.per_instance_epsilon(X, y, mask))
    assert not np.array_equal(a.coef_, c.coef_)
    # The pretrained weights use public data only and no randomness.
    np.testing.assert_array_equal(a.pretrained_coef_, c.pretrained_coef_)


def test_float32_input(binary):
    X, y, mask = binary
    a = AdaMixClassifier(epsilon=1.0, random_state=0).fit(X.astype(np.float32), y,
                                                            public_mask=mask)
    assert a.predict(X.astype(np.float32)).shape == y.shape


# -- statistical (slow) ------------------------------------------------------------------


@pytest.mark.slow
def test_digits_few_shot_adamix_beats_public_only_and_noisy_gd():
    X, y = load_digits(return_X_y=True)
    X = Normalizer().fit_transform(X)
    X, Xte, y, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    scores = {"public": [], "ngd": [], "adamix": []}
    for seed in range(3):
        mask = _public_mask(y, 5, seed)
        ada = AdaMixClassifier(epsilon=3.0, random_state=seed).fit(X, y, public_mask=mask)
        ngd = AdaMixClassifier(epsilon=3.0, random_state=seed, **NOISY_GD)
        ngd.fit(X, y, public_mask=mask)
        pub = copy.deepcopy(ada)
        pub.coef_, pub.intercept_ = ada.pretrained_coef_, ada.pretrained_intercept_
        scores["public"].append(pub.score(Xte, yte))
        scores["ngd"].append(ngd.score(Xte, yte))
        scores["adamix"].append(ada.score(Xte, yte))
    mean = {k: np.mean(v) for k, v in scores.items()}
    assert mean["adamix"] > mean["public"] + 0.01
    assert mean["adamix"] >= mean["ngd"] - 0.01


def test_gdp_epsilon_matches_analytic_gaussian():
    mu = np.array([[0.0, 1e-3, 0.05], [0.3, 1.0, 4.0]])
    eps = accounting.gdp_epsilon(mu, 1e-5)
    assert eps.shape == mu.shape and eps[0, 0] == 0.0
    for m, e in zip(mu.ravel()[1:], eps.ravel()[1:]):
        assert e == pytest.approx(accounting.gaussian_epsilon(1.0 / m, 1e-5), rel=1e-8)
    assert np.all(np.diff(eps.ravel()) > 0)
    assert accounting.gdp_epsilon(np.inf, 1e-5) == np.inf
    with pytest.raises(ValueError, match="mu"):
        accounting.gdp_epsilon([-1.0], 1e-5)


# -- nothing un-noised about the private records is stored (issue 16 item 6) ------------


def _fit_coupled(X, y, mask, params, releases=None):
    """Fit, recording (``releases=None``) or replaying the noisy private release of every step.

    Replaying draws, at every step, the noise ``releases[t] − s_t`` with ``s_t``
    the step's clipped private sum on *these* data: the engine then sees the
    same noisy releases as in the recorded fit (up to rounding). A fitted
    attribute that is a function of those releases and of the public records
    comes out the same; one that is computed from the private rows in the clear
    does not.
    """
    from unittest.mock import patch

    seen = []
    call, draw = _AdaMixOracle.__call__, _AdaMixOracle.noise

    def private_sum(self, idx, theta):
        self._coupled_sum = call(self, idx, theta)
        return self._coupled_sum

    def noise(self, rng):
        if releases is None:
            z = draw(self, rng)
            seen.append(self._coupled_sum + z)
            return z
        seen.append(None)
        return releases[len(seen) - 1] - self._coupled_sum

    with patch.object(_AdaMixOracle, "__call__", private_sum), \
            patch.object(_AdaMixOracle, "noise", noise):
        clf = AdaMixClassifier(**params).fit(X, y, public_mask=mask)
    return clf, seen


def _fitted_attributes(clf):
    return {k: v for k, v in vars(clf).items() if k.endswith("_") and not k.startswith("_")}


@pytest.mark.parametrize("params", [{}, NOISY_GD, dict(subspace="gradient"),
                                    dict(variant="theory", max_grad_norm=1.0),
                                    dict(store_iterates=True), dict(subspace_dim=2)])
def test_fitted_attributes_are_functions_of_the_noisy_release(binary, params):
    """Replace one private record, couple the noise so every step's noisy release
    is unchanged: every fitted attribute must be unchanged too (the threat model's
    attacker sees all of them)."""
    X, y, mask = binary
    params = dict(epsilon=1.0, random_state=0, **params)
    i = int(np.flatnonzero(~mask)[3])
    X2, y2 = X.copy(), y.copy()
    X2[i] *= 1e-3  # a record the model fits (almost) perfectly: tiny gradients
    y2[i] = 1 - y[i]
    clf, releases = _fit_coupled(X, y, mask, params)
    clf2, replayed = _fit_coupled(X2, y2, mask, params, releases)
    assert len(replayed) == len(releases) == clf.steps_
    a, b = _fitted_attributes(clf), _fitted_attributes(clf2)
    assert sorted(a) == sorted(b)
    for name in a:
        if isinstance(a[name], np.ndarray):
            assert a[name].shape == b[name].shape, name
            np.testing.assert_allclose(a[name], b[name], rtol=1e-6, atol=1e-9, err_msg=name)
        elif isinstance(a[name], (float, np.floating)):
            assert a[name] == pytest.approx(b[name], rel=1e-9), name
        elif isinstance(a[name], (int, bool, str, np.integer)):
            assert a[name] == b[name], name


def test_fitted_model_stores_nothing_per_private_record(binary):
    """No per-instance figure on the fitted object; its pickle does not grow with n_private."""
    X, y, mask = binary
    assert not hasattr(AdaMixClassifier(epsilon=1.0, random_state=0)
                       .fit(X, y, public_mask=mask), "per_instance_mu_")
    sizes = []
    # Both pickle n_private_ as a 2-byte int, and privacy_plan_'s description
    # writes it with three digits.
    for n_priv in (400, 900):
        keep = mask | (np.cumsum(~mask) <= n_priv)
        clf = AdaMixClassifier(epsilon=1.0, random_state=0).fit(X[keep], y[keep],
                                                                public_mask=mask[keep])
        assert clf.n_private_ == n_priv
        sizes.append(len(pickle.dumps(clf)))
    assert sizes[0] == sizes[1]


def test_privacy_report_flags_kept_per_instance_figures(binary):
    from sklearn_fdp import privacy_report

    X, y, mask = binary
    clf = AdaMixClassifier(epsilon=1.0, random_state=0).fit(X, y, public_mask=mask)
    report = privacy_report(clf)
    assert report.is_private and not report.warnings
    # What a model fitted before the fix carries (or a user kept on purpose).
    clf.per_instance_mu_ = np.full(clf.n_private_, 0.1)
    report = privacy_report(clf)
    assert not report.is_private
    assert report.epsilon_rdp == math.inf
    assert any("per_instance_mu_" in w and "NOT private" in w for w in report.warnings)
    assert "per_instance_mu_" in str(report)


def test_per_instance_epsilon_needs_iterates_and_the_training_data(binary):
    X, y, mask = binary
    plain = AdaMixClassifier(epsilon=1.0, random_state=0).fit(X, y, public_mask=mask)
    assert not hasattr(plain, "iterates_")
    with pytest.raises(ValueError, match="store_iterates=True"):
        plain.per_instance_epsilon(X, y, public_mask=mask)
    clf = AdaMixClassifier(epsilon=1.0, random_state=0, store_iterates=True)
    clf.fit(X, y, public_mask=mask)
    n_rows = X.shape[1] + 1
    assert clf.iterates_.shape == (clf.steps_, n_rows, 1)
    # The first step's gradients are taken at the publicly pretrained weights.
    np.testing.assert_array_equal(clf.iterates_[0, :-1, 0], clf.pretrained_coef_[0])
    np.testing.assert_array_equal(clf.coef_, plain.coef_)  # storing changes nothing
    eps = clf.per_instance_epsilon(X, y, public_mask=mask)
    assert eps.shape == (clf.n_private_,)
    assert not any(a.startswith("per_instance") for a in vars(clf))
    with pytest.raises(ValueError, match="1159 private records, the fit had 40 and 1160"):
        clf.per_instance_epsilon(X[1:], y[1:], public_mask=mask[1:])
    other = np.roll(mask, 1)  # other public rows: other clip thresholds
    with pytest.raises(ValueError, match="differ from the fit"):
        clf.per_instance_epsilon(X, y, public_mask=other)
    with pytest.raises(ValueError, match="differ from the fit"):
        clone(clf).set_params(clip_percentile=50.0).fit(X, y, public_mask=mask)\
            .set_params(clip_percentile=90.0).per_instance_epsilon(X, y, public_mask=mask)


def test_refit_drops_stale_per_record_attributes(binary):
    X, y, mask = binary
    clf = AdaMixClassifier(epsilon=1.0, random_state=0, store_iterates=True)
    clf.fit(X, y, public_mask=mask)
    clf.per_instance_mu_ = np.zeros(clf.n_private_)  # e.g. unpickled from an older version
    clf.set_params(store_iterates=False).fit(X, y, public_mask=mask)
    assert not hasattr(clf, "iterates_") and not hasattr(clf, "per_instance_mu_")

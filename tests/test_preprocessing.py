"""PrivateMeanCenterer: row scaling, the private mean's noise, pipelines."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from sklearn_fdp import DPSGDClassifier, PrivateMeanCenterer, accounting
from sklearn_fdp.exceptions import PrivacyLeakWarning


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(5000, 4)) * [1.0, 2.0, 0.5, 3.0] + [3.0, -1.0, 0.0, 2.0]


def _scaled(X, mode, bound):
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    if mode == "normalize":
        return np.where(norms > 0, X * bound / np.where(norms > 0, norms, 1), 0.0)
    if mode == "clip":
        return X * np.minimum(1.0, bound / norms)
    return X


@pytest.mark.parametrize("mode", ["normalize", "clip"])
def test_fitted_attributes_and_transform(data, mode):
    c = PrivateMeanCenterer(epsilon=1.0, delta=1e-6, norm_bound=2.0, row_scaling=mode,
                            random_state=0).fit(data)
    n, d = data.shape
    sigma = accounting.gaussian_noise_multiplier(1.0, 1e-6)
    assert c.noise_multiplier_ == pytest.approx(sigma)
    assert c.noise_std_ == pytest.approx(sigma * 2.0 / n)
    assert c.epsilon_ == pytest.approx(1.0, rel=1e-6) and c.delta_ == 1e-6
    assert accounting.epsilon_of_event(c.dp_event_, 1e-6, accountant="pld") == pytest.approx(
        1.0, rel=1e-3)
    assert c.n_features_in_ == d and c.mean_.shape == (d,)
    Xs = _scaled(data, mode, 2.0)
    assert np.all(np.abs(c.mean_ - Xs.mean(axis=0)) < 6 * c.noise_std_)
    np.testing.assert_allclose(c.transform(data), Xs - c.mean_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c.inverse_transform(c.transform(data)), Xs, atol=1e-12)
    np.testing.assert_allclose(c.fit_transform(data), c.transform(data))


def test_normalize_keeps_zero_rows_and_clip_keeps_short_rows():
    X = np.array([[0.0, 0.0], [3.0, 4.0], [0.3, 0.4]])
    c = PrivateMeanCenterer(norm_bound=1.0, delta=1e-9, random_state=0).fit(X)
    Xt = c.transform(X) + c.mean_
    np.testing.assert_allclose(Xt, [[0, 0], [0.6, 0.8], [0.6, 0.8]])
    c = PrivateMeanCenterer(norm_bound=1.0, row_scaling="clip", delta=1e-9, random_state=0).fit(X)
    np.testing.assert_allclose(c.transform(X) + c.mean_, [[0, 0], [0.6, 0.8], [0.3, 0.4]])


def test_row_scaling_none_leaks_nothing_and_bounds_the_sensitivity():
    """"none" never raises or warns on the data; fit clips, transform does not rescale."""
    import warnings

    inside = np.array([[0.3, 0.4], [0.6, 0.8]])
    outside = np.array([[0.3, 0.4], [3.0, 4.0]])  # second row violates norm_bound=1
    fits = {}
    for name, X in [("inside", inside), ("outside", outside)]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no data-dependent warning either
            fits[name] = PrivateMeanCenterer(norm_bound=1.0, row_scaling="none", delta=1e-9,
                                             random_state=0).fit(X)
    # Same seed, same noise: the released means differ exactly by the difference
    # of the *clipped* means, so the out-of-bound row moved the sum by at most
    # norm_bound (the sensitivity), not by its own norm.
    diff = fits["outside"].mean_ - fits["inside"].mean_
    clipped_diff = (_scaled(outside, "clip", 1.0) - inside).mean(axis=0)
    np.testing.assert_allclose(diff, clipped_diff, atol=1e-12)
    np.testing.assert_allclose(diff, 0.0, atol=1e-12)  # (3, 4) clips to (0.6, 0.8)
    # Everything else equal: the fitted attributes do not reveal the violation.
    assert fits["outside"].noise_std_ == fits["inside"].noise_std_
    # transform does not rescale the rows under "none".
    c = fits["outside"]
    np.testing.assert_allclose(c.transform(outside), outside - c.mean_)
    np.testing.assert_allclose(c.inverse_transform(c.transform(outside)), outside)


@pytest.mark.statistical
def test_noise_of_released_mean_has_the_calibrated_std(data):
    """Over N fits, (mean_ - true scaled mean) / noise_std_ is N(0, 1) per coordinate.

    With N * d = 2000 * 4 standardised draws: their sample std has relative
    standard error 1/sqrt(2 N d) ≈ 0.008 (tolerance 5 SE = 0.04), and their
    mean has standard error 1/sqrt(N d) ≈ 0.011 (tolerance 5 SE = 0.056).
    Power (issue 30): their sum of squares (the mean is known) is exactly
    χ²(8,000); at a two-sided level of 1e-3 a 5 % error in the noise std
    (variance x 1.1025 or x 0.9025) falls outside its bounds with probability
    0.998 or more (the 5-SE std check alone had about 0.90).
    """
    X = data[:500]
    true = _scaled(X, "normalize", 1.0).mean(axis=0)
    n_fits = 2000
    z = np.empty((n_fits, X.shape[1]))
    for seed in range(n_fits):
        c = PrivateMeanCenterer(epsilon=0.5, delta=1e-6, random_state=seed).fit(X)
        z[seed] = (c.mean_ - true) / c.noise_std_
    m = z.size
    assert abs(z.std() - 1.0) < 5 / np.sqrt(2 * m)
    assert abs(z.mean()) < 5 / np.sqrt(m)
    # Each coordinate separately (SE 1/sqrt(2 N) ≈ 0.016).
    assert np.all(np.abs(z.std(axis=0) - 1.0) < 5 / np.sqrt(2 * n_fits))
    ss = float(np.sum(z**2))
    assert stats.chi2.ppf(5e-4, m) < ss < stats.chi2.isf(5e-4, m)


def test_same_random_state_same_mean(data):
    a = PrivateMeanCenterer(random_state=3).fit(data).mean_
    b = PrivateMeanCenterer(random_state=3).fit(data).mean_
    c = PrivateMeanCenterer(random_state=4).fit(data).mean_
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_inputs_not_mutated_float32_and_feature_names(data):
    X0 = data.copy()
    c = PrivateMeanCenterer(random_state=0)
    params = c.get_params()
    c.fit(data).transform(data)
    np.testing.assert_array_equal(data, X0)
    assert c.get_params() == params
    assert c.transform(data.astype(np.float32)).dtype == np.float32
    df = pd.DataFrame(data, columns=["a", "b", "c", "d"])
    c = PrivateMeanCenterer(random_state=0).set_output(transform="pandas").fit(df)
    out = c.transform(df)
    assert list(out.columns) == ["a", "b", "c", "d"]
    assert list(c.get_feature_names_out()) == ["a", "b", "c", "d"]


def test_errors_and_warnings(data):
    with pytest.raises(NotFittedError):
        PrivateMeanCenterer().transform(data)
    for params in [dict(epsilon=0.0), dict(delta=0.0), dict(delta=1.0), dict(norm_bound=0.0),
                   dict(row_scaling="standardize")]:
        with pytest.raises(ValueError, match=next(iter(params))):
            PrivateMeanCenterer(**params).fit(data)
    with pytest.warns(PrivacyLeakWarning, match="1/n_samples"):
        PrivateMeanCenterer(delta=1e-2).fit(data[:200])
    c = PrivateMeanCenterer(random_state=0).fit(data)
    with pytest.raises(ValueError, match="features"):
        c.transform(data[:, :2])
    assert not hasattr(clone(c), "mean_")


def test_pipeline_in_grid_search():
    X, y = make_classification(n_samples=2000, n_features=5, random_state=0)
    X = X + 4.0
    pipe = make_pipeline(
        PrivateMeanCenterer(epsilon=0.1, delta=1e-6, random_state=0),
        DPSGDClassifier(epsilon=1.0, delta=1e-6, epochs=2, random_state=0),
    )
    grid = GridSearchCV(pipe, {"privatemeancenterer__norm_bound": [1.0, 2.0],
                               "dpsgdclassifier__max_grad_norm": [0.5, 1.0]}, cv=2)
    grid.fit(X, y)
    assert grid.best_score_ > 0.6
    assert grid.predict(X).shape == (2000,)


def test_pipeline_budget_is_the_composition_of_its_steps():
    """Basic composition bounds a pipeline's ε; composing the DpEvents is tighter."""
    X, y = make_classification(n_samples=2000, n_features=5, random_state=0)
    pipe = make_pipeline(
        PrivateMeanCenterer(epsilon=0.2, delta=1e-6, random_state=0),
        DPSGDClassifier(epsilon=1.0, delta=1e-6, epochs=2, accountant="pld", random_state=0),
    ).fit(X + 4.0, y)
    centerer, clf = pipe[0], pipe[-1]
    composed = accounting.epsilon_of_event(
        accounting.compose_events(centerer.dp_event_, clf.dp_event_), 2e-6, accountant="pld")
    assert composed <= centerer.epsilon_ + clf.epsilon_

"""FeatureDPPCA: the released covariance, its components, and the tracer's view of them."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.decomposition import PCA

from sklearn_fdp import FeatureDPLogisticRegression, FeatureDPPCA, privacy_report
from sklearn_fdp.exceptions import PrivacyLeakWarning
from sklearn_fdp.pipeline import make_private_pipeline


def _data(n=4000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) * 0.08
    return X


def test_without_noise_it_is_sklearns_pca():
    """Small σ and bounds no row reaches: the covariance, the axes (up to sign), the
    variances and the projections of scikit-learn's PCA, within the noise: each
    released entry of the sums has noise of std at most s = max(block_noise_std)
    (the plan's), so each covariance entry moves by at most 6 s / (n − 1) (6 stds,
    the mean's share of order s / n smaller), ‖ΔC‖₂ by d times that, and each axis
    by 2 √2 ‖ΔC‖₂ / gap (Davis–Kahan)."""
    X = _data()
    n, d = X.shape
    pca = FeatureDPPCA(n_components=3, private_features=[0, 2], row_norm_bounds=100.0,
                       epsilon=None, noise_multiplier=1e-9, random_state=0).fit(X)
    ref = PCA(3).fit(X)
    s = max(pca.privacy_plan_.details["block_noise_std"].values())
    tol_c = 6 * s / (n - 1)
    np.testing.assert_allclose(pca.covariance_, np.cov(X.T), rtol=0, atol=tol_c)
    lam = np.linalg.eigvalsh(np.cov(X.T))[::-1]
    gap = np.min(np.abs(np.diff(lam))[:3])
    tol_v = 2 * np.sqrt(2) * d * tol_c / gap
    np.testing.assert_allclose(pca.explained_variance_, ref.explained_variance_, rtol=0,
                               atol=d * tol_c)
    signs = np.sign(np.sum(pca.components_ * ref.components_, axis=1))
    np.testing.assert_allclose(pca.components_ * signs[:, None], ref.components_, rtol=0,
                               atol=tol_v)
    scale = np.abs(X - X.mean(0)).sum(1).max()  # |Δ(x − μ)·v| <= ‖x − μ‖₁ ‖Δv‖∞ (+ Δμ)
    np.testing.assert_allclose(pca.transform(X) * signs, ref.transform(X), rtol=0,
                               atol=scale * tol_v + 6 * s / n * d)
    assert pca.get_feature_names_out().tolist() == [f"featuredppca{i}" for i in range(3)]


def test_public_block_is_exact_and_protected_blocks_are_noised():
    X = _data(seed=1)
    a = FeatureDPPCA(private_features=[3, 4], epsilon=0.5, random_state=0).fit(X)
    b = FeatureDPPCA(private_features=[3, 4], epsilon=0.5, random_state=1).fit(X)
    pub = np.ix_([0, 1, 2], [0, 1, 2])
    np.testing.assert_array_equal(a.covariance_[pub], b.covariance_[pub])  # no noise there
    assert np.all(a.covariance_[3:, :] != b.covariance_[3:, :])
    np.testing.assert_array_equal(a.mean_[:3], b.mean_[:3])
    assert np.all(a.mean_[3:] != b.mean_[3:])
    plan = a.privacy_plan_
    assert plan.protected_columns == (3, 4) and not plan.label_protected
    assert a.epsilon_ == pytest.approx(0.5, rel=1e-6)
    assert set(plan.details["block_sizes"]) == {"QP", "QQ"}
    # QP: 2 protected × (3 public + the ones column); QQ: the upper triangle of 2 × 2.
    assert plan.details["block_sizes"] == {"QP": 8, "QQ": 3}


def test_n_components_above_n_features_raises():
    with pytest.raises(ValueError, match="n_components=6 of FeatureDPPCA must be at most"):
        FeatureDPPCA(n_components=6, private_features=[0]).fit(_data())


def _frame(n=3000, seed=2):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(_data(n, 4, seed), columns=["a", "b", "c", "d"])
    y = (X["a"] - X["c"] + 0.05 * rng.normal(size=n) > 0).astype(int)
    return X, y


def test_outputs_reading_protected_columns_are_protected_in_a_pipeline():
    X, y = _frame()
    clf = FeatureDPLogisticRegression(private_features=[f"featuredppca{i}" for i in range(2)],
                                      epsilon=1.0, epochs=2, random_state=0)
    pipe = make_private_pipeline(FeatureDPPCA(2, private_features=["c"], random_state=0), clf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        pipe.fit(X, y)
    pca = pipe.steps[0][1]
    assert all(3 - 1 in cols for cols in pca.__fdp_column_map__())  # every axis reads c
    report = privacy_report(pipe)
    assert report.is_private
    # An output that reads 'c' treated as public by the next step: the tracer says so.
    pipe.set_params(featuredplogisticregression__private_features=["featuredppca0"])
    with pytest.warns(PrivacyLeakWarning, match=r"'c'.*feed both"):
        pipe.fit(X, y)

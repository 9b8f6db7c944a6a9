"""FeatureDPLogisticRegression's learning_rate="auto" cap for Algorithm 1 (issue 20).

For ``method="alg1"`` with two classes (one output column) and a public label
the cap of the step-size rule ``min(4 k^0.3, sqrt(k) 0.005 B^1.5 / (α σ C
sqrt(d + 1)))`` is 4 times DP-SGD's: 16. Several classes, a private label and
``method="dpsgd"`` keep the rule unchanged. Chosen by ``benchmarks/studies/bench_fdp_lr.py`` on validation splits.
"""

import math

import numpy as np
import pytest

from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression
from sklearn_fdp.linear._base import _auto_learning_rate
from sklearn_fdp.linear._feature_dp_logistic import _AUTO_LR_CAP_ALG1


def _data(seed, n, k=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)) / 6.0
    y = np.argmax(X @ rng.normal(size=(6, k)) + rng.gumbel(size=(n, k)), axis=1)
    return X, y


def _uncapped(clf):
    k = clf.coef_.shape[0]
    noise = clf.alpha_ * clf.noise_multiplier_ * clf.max_grad_norm_
    return (math.sqrt(k) * 0.005 * clf.batch_size_ ** 1.5
            / (noise * math.sqrt(clf.n_features_in_ + 1)))


def test_cap_factor_constant_and_formula():
    assert _AUTO_LR_CAP_ALG1 == 4.0
    # No noise: the cap itself, 4 k^0.3 times the factor.
    assert _auto_learning_rate(0.0, 100, 10, 1, cap_factor=4.0) == 16.0
    assert _auto_learning_rate(0.0, 100, 10, 1) == 4.0
    # Large noise: the noise term, whatever the cap.
    noisy = _auto_learning_rate(50.0, 100, 10, 1)
    assert noisy < 4.0 and _auto_learning_rate(50.0, 100, 10, 1, cap_factor=4.0) == noisy


def test_binary_alg1_uses_the_larger_cap():
    X, y = _data(0, 4000)
    kw = dict(private_features=[4, 5], label_public=True, epsilon=50.0, epochs=1,
              random_state=0)
    clf = FeatureDPLogisticRegression(**kw).fit(X, y)
    assert clf.method_ == "alg1"
    assert clf.learning_rate_ == pytest.approx(min(16.0, _uncapped(clf)), rel=1e-12)
    assert clf.learning_rate_ > 4.0  # small noise: above DP-SGD's cap
    # method="dpsgd" and DPSGDClassifier keep the cap 4
    assert FeatureDPLogisticRegression(**kw, method="dpsgd").fit(X, y).learning_rate_ <= 4.0
    assert DPSGDClassifier(epsilon=50.0, epochs=1, random_state=0).fit(X, y).learning_rate_ \
        <= 4.0


def test_a_private_label_keeps_the_cap():
    X, y = _data(0, 4000)
    clf = FeatureDPLogisticRegression(private_features=[4, 5], label_public=False,
                                      method="alg1", epsilon=50.0, epochs=1,
                                      random_state=0).fit(X, y)
    assert clf.learning_rate_ == pytest.approx(min(4.0, _uncapped(clf)), rel=1e-12)


def test_several_classes_keep_the_cap():
    X, y = _data(0, 4000, k=5)
    clf = FeatureDPLogisticRegression(private_features=[4, 5], label_public=True, epsilon=50.0,
                                      epochs=1, random_state=0).fit(X, y)
    assert clf.learning_rate_ == pytest.approx(min(4.0 * 5 ** 0.3, _uncapped(clf)), rel=1e-12)


def test_an_explicit_learning_rate_is_kept():
    X, y = _data(0, 2000)
    clf = FeatureDPLogisticRegression(private_features=[4, 5], label_public=True, epsilon=50.0,
                                      epochs=1, learning_rate=2.5, random_state=0).fit(X, y)
    assert clf.learning_rate_ == 2.5

"""check_collapse and CollapseWarning (issue 20, item 2).

The check is opt-in post-processing on data the user passes (never run by
``fit``): it fires on a fit that predicts one class or scores below the
majority rule, and stays silent on a healthy fit.
"""

import warnings

import numpy as np
import pytest

from sklearn_fdp import CollapseWarning, DPSGDClassifier, FdpWarning, check_collapse


class _Fixed:
    """A 'fitted classifier' whose predictions are given."""

    def __init__(self, pred):
        self.pred = np.asarray(pred)

    def predict(self, X):
        return self.pred[: len(X)]


def test_single_class_prediction_warns():
    y = np.array([0, 0, 0, 1])
    with pytest.warns(CollapseWarning, match="predicts a single class on these 4 rows"):
        check = check_collapse(_Fixed([0, 0, 0, 0]), np.zeros((4, 1)), y)
    assert check.collapsed and check.n_predicted_classes == 1
    assert check.accuracy == 0.75 and check.majority_accuracy == 0.75


def test_below_majority_warns_with_both_scores():
    y = np.array([0, 0, 0, 1])
    with pytest.warns(CollapseWarning, match=r"scores 0\.5000, below the majority rule's 0\.7500"):
        check = check_collapse(_Fixed([0, 1, 0, 0]), np.zeros((4, 1)), y)
    assert check.collapsed and check.n_predicted_classes == 2


def test_at_or_above_majority_is_silent_and_warn_false_never_warns():
    y = np.array([0, 0, 0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FdpWarning)
        assert not check_collapse(_Fixed([0, 0, 1, 1]), np.zeros((4, 1)), y).collapsed  # 0.75
        assert not check_collapse(_Fixed([0, 0, 0, 1]), np.zeros((4, 1)), y).collapsed
        assert check_collapse(_Fixed([0, 0, 0, 0]), np.zeros((4, 1)), y, warn=False).collapsed
        # One label in y: predicting it is no collapse.
        assert not check_collapse(_Fixed([1, 1]), np.zeros((2, 1)), np.array([1, 1])).collapsed


def test_bad_y_is_a_clear_error():
    with pytest.raises(ValueError, match="non-empty 1-d y"):
        check_collapse(_Fixed([0]), np.zeros((0, 1)), np.array([]))
    with pytest.raises(ValueError, match="predicted 2 labels for 3 labels in y"):
        check_collapse(_Fixed([0, 1]), np.zeros((2, 1)), np.array([0, 1, 1]))


def test_inputs_not_mutated():
    X, y = np.zeros((4, 1)), np.array([0, 0, 0, 1])
    X0, y0 = X.copy(), y.copy()
    check_collapse(_Fixed([0, 0, 0, 1]), X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


@pytest.fixture(scope="module")
def adult_750():
    """750 training rows of adult.data and a validation split of adult.data
    (never adult.test), preprocessed with the data-independent preprocessor."""
    from sklearn.model_selection import train_test_split

    from sklearn_fdp.datasets import load_adult, make_adult_preprocessor

    X, y = load_adult(return_X_y=True, split="train")
    y = np.asarray(y)
    X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    pre = make_adult_preprocessor().fit(X_tr)
    idx = np.random.default_rng(0).choice(len(y_tr), 750, replace=False)
    return pre.transform(X_tr.iloc[idx]), y_tr[idx], pre.transform(X_va), y_va


def test_fires_on_the_issues_collapsed_fit(adult_750):
    # Issue 20: DPSGDClassifier at its defaults on 750 Adult rows predicts the
    # majority class (before the small-data learning-rate rule at ε = 0.1 and 1,
    # after it still at ε = 0.1: seeds 0-2, on the validation split).
    X, y, X_va, y_va = adult_750
    est = DPSGDClassifier(epsilon=0.1, random_state=0).fit(X, y)
    with pytest.warns(CollapseWarning, match="DPSGDClassifier predicts a single class"):
        check = check_collapse(est, X_va, y_va)
    assert check.n_predicted_classes == 1
    # The one class it predicts is the majority class: accuracy is the base rate exactly.
    assert check.accuracy == check.majority_accuracy


def test_silent_on_a_healthy_fit():
    # Two well separated classes, 2000 rows, ε = 8: the private fit is far
    # above the majority rule (0.5) on held-out rows of the same distribution.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 5))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(int)
    est = DPSGDClassifier(epsilon=8.0, random_state=0).fit(X[:2000], y[:2000])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FdpWarning)
        check = check_collapse(est, X[2000:], y[2000:])
    assert not check.collapsed
    assert check.n_predicted_classes == 2 and check.accuracy > check.majority_accuracy


def test_small_data_rule_lifts_the_issues_fit_above_the_majority_rule(adult_750):
    # The same 750 rows at ε = 1: with the small-data learning-rate rule the
    # defaults predict both classes and beat the base rate on the validation
    # split (0.767 for seed 0; 0.762 and 0.794 for seeds 1 and 2), where they
    # predicted the majority class (0.759) before.
    X, y, X_va, y_va = adult_750
    est = DPSGDClassifier(epsilon=1.0, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FdpWarning)
        check = check_collapse(est, X_va, y_va)
    assert not check.collapsed and check.n_predicted_classes == 2

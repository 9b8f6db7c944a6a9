"""FeatureDPStackingClassifier / FeatureDPStackingRegressor (issue 34)."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.preprocessing import FunctionTransformer

from sklearn_fdp import (
    FeatureDPLinearRegression,
    FeatureDPLogisticRegression,
    FeatureDPStackingClassifier,
    FeatureDPStackingRegressor,
    privacy_report,
)
from sklearn_fdp.model_selection import PrivateRandomizedSearchCV
from sklearn_fdp.pipeline import make_private_pipeline


def _data(n=1500, seed=0):
    """Columns 0-1 protected (linear signal), 2-4 public with an XOR-type signal."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(n, 5))
    logit = 6 * ((X[:, 2] > 0.5) ^ (X[:, 3] > 0.5)) - 3 + 2 * (X[:, 0] - 0.5)
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return X / np.sqrt(5), y


def _clf(**kw):
    params = dict(public_estimator=HistGradientBoostingClassifier(max_iter=30),
                  private_features=[0, 1], epsilon=1.0, random_state=0)
    params.update(kw)
    return FeatureDPStackingClassifier(**params)


def test_fit_plan_and_attributes():
    X, y = _data()
    X0 = X.copy()
    clf = _clf().fit(X, y)
    np.testing.assert_array_equal(X, X0)  # input not mutated
    assert clf.private_features_.tolist() == [0, 1]
    assert clf.public_features_.tolist() == [2, 3, 4]
    assert clf.label_public_ and clf.n_score_columns_ == 1
    plan = clf.privacy_plan_
    final_plan = clf.final_estimator_.privacy_plan_
    # What is spent is the final model's; the public model adds nothing.
    assert plan.dp_event == final_plan.dp_event == clf.dp_event_
    assert plan.epsilon == final_plan.epsilon == clf.epsilon_ <= 1.0
    assert plan.protected_columns == (0, 1)  # positions in X, not in the final input
    assert plan.protected_features == ("x0", "x1") and not plan.label_protected
    assert "HistGradientBoostingClassifier" in plan.description and "free" in plan.description
    # The plan asked ahead is the fitted one (one source of truth).
    assert clf.privacy_plan(*X.shape) == plan
    # The final model: the score column and the protected ones, score public.
    assert clf.final_estimator_.n_features_in_ == 3
    assert clf.final_estimator_.public_features_.tolist() == [0]
    assert clf.final_estimator_.label_public_
    assert isinstance(clf.public_estimator_, HistGradientBoostingClassifier)
    assert clf.public_estimator_.n_features_in_ == 3
    proba = clf.predict_proba(X[:5])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.predict(X[:5]), clf.classes_[proba.argmax(axis=1)])


def test_private_label_is_refused_with_the_choice_named():
    X, y = _data(200)
    for est in (_clf(label_public=False),
                FeatureDPStackingRegressor(private_features=[0], y_bounds=(0, 1),
                                           label_public=False)):
        with pytest.raises(ValueError, match="label_public=False.*label must be public"):
            est.fit(X, y)
        with pytest.raises(ValueError, match="label_public=False"):
            est.privacy_plan(*X.shape)


def test_final_estimator_must_be_feature_dp():
    X, y = _data(200)
    with pytest.raises(TypeError, match="final_estimator of FeatureDPStackingClassifier"):
        _clf(final_estimator=LogisticRegression()).fit(X, y)


def test_final_estimator_settings_are_forwarded_and_template_kept():
    X, y = _data(600)
    template = FeatureDPLogisticRegression(epochs=3, epsilon=100.0)
    clf = _clf(final_estimator=template, epsilon=0.5).fit(X, y)
    assert template.epsilon == 100.0  # the template is cloned, not changed
    assert clf.final_estimator_.epochs == 3
    assert clf.final_estimator_.epsilon == 0.5 and clf.epsilon_ <= 0.5


def _public_only_accuracy(X_tr, y_tr, X_te, y_te):
    hgb = HistGradientBoostingClassifier(max_iter=30, random_state=0)
    return (hgb.fit(X_tr[:, 2:], y_tr).predict(X_te[:, 2:]) == y_te).mean()


def test_never_below_the_public_model_at_small_epsilon():
    # At a tiny ε the private weight shrinks (alpha="auto") and the final model stays
    # at the calibrated public score: its predictions are the public model's.
    X, y = _data(3000)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.4, random_state=0)
    public = _public_only_accuracy(X_tr, y_tr, X_te, y_te)
    hgb = HistGradientBoostingClassifier(max_iter=30, random_state=0)
    clf = _clf(public_estimator=hgb, epsilon=0.01).fit(X_tr, y_tr)
    agree = (clf.predict(X_te) == clf.public_estimator_.predict(X_te[:, 2:])).mean()
    assert agree >= 0.98, agree
    assert clf.score(X_te, y_te) >= public - 0.01
    # and at a large ε it uses the protected columns (the data's column 0 signal).
    big = _clf(public_estimator=hgb, epsilon=50.0).fit(X_tr, y_tr)
    assert abs(big.final_estimator_.coef_.ravel()[1]) > abs(clf.final_estimator_.coef_.ravel()[1])


def test_multiclass_scores_and_decision_function():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 0.4, size=(900, 4))
    y = (X[:, 2] * 10).astype(int) % 3
    clf = FeatureDPStackingClassifier(HistGradientBoostingClassifier(max_iter=20),
                                      private_features=[0], epsilon=2.0,
                                      random_state=0).fit(X, y)
    assert clf.n_score_columns_ == 3
    assert clf.final_estimator_.public_features_.tolist() == [0, 1, 2]
    assert clf.decision_function(X[:4]).shape == (4, 3)
    assert clf.score(X, y) > 0.8


def test_public_estimator_without_predict_proba_uses_decision_function():
    from sklearn.svm import LinearSVC

    X, y = _data(600)
    clf = _clf(public_estimator=LinearSVC()).fit(X, y)
    assert clf.predict(X[:3]).shape == (3,)


def test_no_public_column_falls_back_to_the_final_model():
    X, y = _data(400)
    clf = _clf(private_features=[0, 1, 2, 3, 4]).fit(X, y)
    assert clf.public_estimator_ is None and clf.n_score_columns_ == 0
    assert clf.final_estimator_.n_features_in_ == 5


def test_passthrough_gives_the_public_columns_to_the_final_model():
    X, y = _data(600)
    clf = _clf(passthrough=True).fit(X, y)
    assert clf.final_estimator_.public_features_.tolist() == [0, 1, 2, 3]
    assert clf.privacy_plan_.protected_columns == (0, 1)


def test_reproducible_and_pickles():
    X, y = _data(600)
    a = _clf().fit(X, y)
    b = _clf().fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(a.predict_proba(X), c.predict_proba(X))
    assert c.privacy_plan_ == a.privacy_plan_


def test_skops_round_trip(tmp_path):
    sio = pytest.importorskip("skops.io")
    X, y = _data(300)
    clf = _clf().fit(X, y)
    path = tmp_path / "m.skops"
    sio.dump(clf, path)
    back = sio.load(path, trusted=sio.get_untrusted_types(file=path))
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))


def test_pipeline_column_names_report_and_tracer():
    X, y = _data(800)
    frame = pd.DataFrame(X, columns=["sex", "age", "a", "b", "c"])
    pipe = make_private_pipeline(
        FunctionTransformer(feature_names_out="one-to-one"),
        _clf(private_features=["sex", "age"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no leak warning: the preprocessing learns nothing
        pipe.fit(frame, y)
    assert pipe[-1].privacy_plan_.protected_features == ("sex", "age")
    assert sorted(pipe.protected_input_columns_) == ["age", "sex"]
    report = privacy_report(pipe)
    text = str(report)
    assert "FeatureDPStackingClassifier" in text and "HistGradientBoostingClassifier" in text
    assert report.to_dict()["epsilon_pld"] == pytest.approx(pipe[-1].epsilon_, rel=1e-3)
    assert report.to_dict()["is_private"] and not report.to_dict()["warnings"]


def test_grid_search_over_final_estimator_parameters():
    X, y = _data(600)
    grid = GridSearchCV(_clf(final_estimator=FeatureDPLogisticRegression()),
                        {"final_estimator__epochs": [2, 4]}, cv=2).fit(X, y)
    assert grid.best_estimator_.final_estimator_.epochs in (2, 4)


def test_private_randomized_search_with_the_estimators_own_budget():
    X, y = _data(300)
    search = PrivateRandomizedSearchCV(
        _clf(final_estimator=FeatureDPLogisticRegression(epochs=1), cv=3, epsilon=1.0),
        {"score_bound": [4.0, 8.0]}, epsilon=None, delta=1e-5, n_iter=2,
        random_state=0).fit(X, y)
    # What the search spent: the trials' fits (the final models') and the noisy scores.
    # The released model states the search's total (issue 30); its trial's own ε is less.
    best = search.best_estimator_
    assert best.epsilon_ == search.epsilon_ > best.trial_epsilon_
    assert search.privacy_plan_.protected_columns == (0, 1)
    assert search.predict(X[:3]).shape == (3,)


@pytest.mark.slow  # the repeat-and-select calibration (RDP) takes ~10-20 s
def test_private_randomized_search_calibrates_the_final_model():
    X, y = _data(300)
    search = PrivateRandomizedSearchCV(
        _clf(final_estimator=FeatureDPLogisticRegression(epochs=1), cv=3),
        {"score_bound": [4.0, 8.0]}, epsilon=2.0, delta=1e-5, n_iter=2,
        random_state=0).fit(X, y)
    assert search.epsilon_ <= 2.0
    best = search.best_estimator_
    assert best.noise_multiplier_ == pytest.approx(search.noise_multiplier_)


def test_private_search_refuses_to_vary_the_final_estimator():
    X, y = _data(300)
    search = PrivateRandomizedSearchCV(
        _clf(final_estimator=FeatureDPLogisticRegression(epochs=1), cv=3),
        {"final_estimator": [FeatureDPLogisticRegression(epochs=2)]},
        epsilon=2.0, delta=1e-5, n_iter=1, random_state=0)
    with pytest.raises(ValueError, match="varies 'final_estimator', a whole step"):
        search.fit(X, y)
    search.set_params(param_distributions={"final_estimator__epochs": [1, 2]})
    with pytest.raises(ValueError, match="final_estimator__epochs"):
        search.fit(X, y)


@pytest.mark.slow
def test_private_search_catches_a_budget_change_hidden_in_the_final_estimator():
    # With the default final_estimator=None the up-front check cannot see the
    # template's epochs; trials that then spend another event than the calibration
    # planned are refused at run time.
    X, y = _data(300)
    search = PrivateRandomizedSearchCV(
        _clf(cv=3), {"final_estimator": [FeatureDPLogisticRegression(epochs=2)]},
        epsilon=2.0, delta=1e-5, n_iter=1, random_state=0)
    with pytest.raises(ValueError, match="not the planned"):
        search.fit(X, y)


def _reg_data(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 0.5, size=(n, 4))
    y = np.sin(12 * X[:, 2]) + 1.5 * X[:, 0] + 0.1 * rng.standard_normal(n)
    return X, y


def test_regressor_falls_back_to_the_public_model_and_uses_protected_columns():
    X, y = _reg_data(3000)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.4, random_state=0)
    hgb = HistGradientBoostingRegressor(max_iter=50, random_state=0)
    public = hgb.fit(X_tr[:, 1:], y_tr).score(X_te[:, 1:], y_te)
    small = FeatureDPStackingRegressor(clone(hgb), private_features=[0], y_bounds=(-2, 3),
                                       epsilon=0.01, random_state=0).fit(X_tr, y_tr)
    big = FeatureDPStackingRegressor(clone(hgb), private_features=[0], y_bounds=(-2, 3),
                                     epsilon=20.0, random_state=0).fit(X_tr, y_tr)
    assert small.score(X_te, y_te) >= public - 0.01
    assert big.score(X_te, y_te) > public + 0.02  # the protected column's linear signal
    assert isinstance(big.final_estimator_, FeatureDPLinearRegression)
    assert big.final_estimator_.label_public_
    assert big.final_estimator_.row_norm_bounds_ == (1.0, 1.0)
    assert big.privacy_plan_.protected_columns == (0,)


def test_regressor_needs_y_bounds():
    X, y = _reg_data(200)
    with pytest.raises(ValueError, match="y_bounds"):
        FeatureDPStackingRegressor(private_features=[0]).fit(X, y)


def test_regressor_with_a_linear_public_model():
    X, y = _reg_data(600)
    reg = FeatureDPStackingRegressor(Ridge(), private_features=[0], y_bounds=(-2, 3),
                                     passthrough=True, random_state=0).fit(X, y)
    assert reg.final_estimator_.row_norm_bounds_[0] == pytest.approx(np.sqrt(2.0))
    assert reg.predict(X[:3]).shape == (3,)

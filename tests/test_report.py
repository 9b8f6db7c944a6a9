"""privacy_report: composition of the dp_event_ of every fitted private step."""

import json
import math

import numpy as np
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import FeatureUnion, make_pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer, OneHotEncoder, StandardScaler

from sklearn_fdp import (
    AdaMixClassifier,
    DPSGDClassifier,
    FeatureDPLogisticRegression,
    PrivacyReport,
    PrivateMeanCenterer,
    accounting,
    privacy_report,
)

FAST = dict(epochs=1, random_state=0, accountant="rdp")


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=1500, n_features=6, random_state=0)
    return Normalizer().fit_transform(X), y


def test_single_estimator_matches_its_own_event(data):
    X, y = data
    clf = DPSGDClassifier(epsilon=1.0, **FAST).fit(X, y)
    report = privacy_report(clf)
    assert isinstance(report, PrivacyReport)
    assert report.delta == clf.delta_
    assert report.epsilon_rdp == pytest.approx(clf.epsilon_, rel=1e-9)  # fitted with RDP
    assert report.epsilon_pld == pytest.approx(
        accounting.epsilon_of_event(clf.dp_event_, clf.delta_, accountant="pld"))
    assert report.epsilon_pld < report.epsilon_rdp
    assert report.is_private
    assert report.steps[0]["unit"] == "record"
    d = report.to_dict()
    json.dumps(d)  # plain values only
    assert d["epsilon_rdp"] == report.epsilon_rdp and d["steps"][0]["kind"] == "private"
    assert "total epsilon" in str(report)


def test_pipeline_composes_in_one_accountant(data):
    X, y = data
    pipe = make_pipeline(PrivateMeanCenterer(epsilon=0.5, random_state=0),
                         DPSGDClassifier(epsilon=1.0, **FAST)).fit(X, y)
    report = privacy_report(pipe, delta=1e-5)
    centerer, clf = pipe[0], pipe[-1]
    composed = accounting.compose_events(centerer.dp_event_, clf.dp_event_)
    assert report.epsilon_rdp == pytest.approx(
        accounting.epsilon_of_event(composed, 1e-5, accountant="rdp"))
    assert report.epsilon_pld == pytest.approx(
        accounting.epsilon_of_event(composed, 1e-5, accountant="pld"))
    # Tight composition: below the sum of the per-step ε, above each of them.
    steps = [s for s in report.steps if s["kind"] == "private"]
    assert [s["estimator"] for s in steps] == ["PrivateMeanCenterer", "DPSGDClassifier"]
    assert max(s["epsilon_rdp"] for s in steps) < report.epsilon_rdp
    assert report.epsilon_rdp <= sum(s["epsilon_rdp"] for s in steps)


def test_default_delta_is_the_largest_step_delta(data):
    X, y = data
    pipe = make_pipeline(PrivateMeanCenterer(epsilon=0.5, delta=1e-7, random_state=0),
                         DPSGDClassifier(epsilon=1.0, delta=1e-6, **FAST)).fit(X, y)
    assert privacy_report(pipe, pld=False).delta == 1e-6


def test_nonprivate_step_is_flagged(data):
    X, y = data
    pipe = make_pipeline(StandardScaler(), Normalizer(),
                         DPSGDClassifier(epsilon=1.0, **FAST)).fit(X, y)
    report = privacy_report(pipe, pld=False)
    assert not report.is_private
    assert math.isinf(report.epsilon_rdp)
    assert report.private_steps_epsilon_rdp < math.inf
    kinds = {s["estimator"]: s["kind"] for s in report.steps}
    assert kinds == {"StandardScaler": "nonprivate", "Normalizer": "free",
                     "DPSGDClassifier": "private"}
    assert any("standardscaler" in w and "NOT private" in w for w in report.warnings)
    assert "NOT PRIVATE" in str(report)


def test_nested_column_transformer_and_feature_union(data):
    X, y = data
    ct = ColumnTransformer([
        ("onehot", OneHotEncoder(categories=[[0.0, 1.0]], handle_unknown="ignore"), [0]),
        ("center", PrivateMeanCenterer(epsilon=0.3, random_state=0), [1, 2, 3]),
        ("fu", FeatureUnion([("id", FunctionTransformer()),
                             ("sc", StandardScaler())]), [4, 5]),
    ])
    pipe = make_pipeline(ct, Normalizer(), DPSGDClassifier(epsilon=1.0, **FAST))
    pipe.fit(np.round(X, 1), y)
    report = privacy_report(pipe, pld=False)
    names = {s["name"]: s["kind"] for s in report.steps}
    assert names["columntransformer__onehot"] == "free"  # fixed categories
    assert names["columntransformer__center"] == "private"
    assert names["columntransformer__fu__sc"] == "nonprivate"
    assert names["dpsgdclassifier"] == "private"


def test_protected_units(data):
    X, y = data
    fdp = FeatureDPLogisticRegression(private_features=[0, 1], label_public=True,
                                      epsilon=1.0, **FAST).fit(X, y)
    report = privacy_report(fdp, pld=False)
    assert report.steps[0]["unit"] == "features"
    assert "x0, x1" in report.protected_unit and "label public" in report.protected_unit
    label_dp = FeatureDPLogisticRegression(public_features=list(range(6)), epsilon=1.0,
                                           **FAST).fit(X, y)
    assert privacy_report(label_dp, pld=False).steps[0]["unit"] == "label"
    public = np.zeros(len(y), dtype=bool)
    public[:40] = True
    ada = AdaMixClassifier(epsilon=1.0, random_state=0).fit(X, y, public_mask=public)
    assert privacy_report(ada, pld=False).steps[0]["unit"] == "private records"
    # Composition of a record-level and a feature-level step: the narrower unit.
    pipe = make_pipeline(PrivateMeanCenterer(epsilon=0.3, random_state=0),
                         FeatureDPLogisticRegression(private_features=[0], epsilon=1.0,
                                                     **FAST)).fit(X, y)
    report = privacy_report(pipe, pld=False)
    assert report.protected_unit.startswith("protected features [x0] and the label")


def test_gridsearchcv_is_reported_as_not_private(data):
    X, y = data
    grid = GridSearchCV(DPSGDClassifier(epsilon=1.0, **FAST),
                        {"learning_rate": [0.1, 1.0]}, cv=2).fit(X, y)
    report = privacy_report(grid, pld=False)
    assert math.isinf(report.epsilon_rdp) and not report.is_private
    assert report.steps[0]["kind"] == "search"
    assert report.steps[1]["name"].endswith("best_estimator_")
    assert any("PrivateRandomizedSearchCV" in w for w in report.warnings)


def test_no_private_step_and_unfitted():
    X, y = make_classification(n_samples=100, random_state=0)
    report = privacy_report(LogisticRegression().fit(X, y), pld=False)
    assert math.isinf(report.epsilon_rdp) and not report.is_private
    with pytest.raises(ValueError, match="no fitted step"):
        privacy_report(DPSGDClassifier())
    with pytest.raises(ValueError, match="delta"):
        privacy_report(LogisticRegression().fit(X, y), delta=2.0)


def test_disjoint_protected_parts_protect_nothing(data):
    X, y = data
    label_only = FeatureDPLogisticRegression(public_features=list(range(6)), epsilon=1.0,
                                             **FAST).fit(X, y)
    features_only = FeatureDPLogisticRegression(private_features=[0], label_public=True,
                                                epsilon=1.0, **FAST).fit(X, y)
    union = FeatureUnion([("a", FunctionTransformer())])  # container for two fitted models
    union.transformer_list = [("label", label_only), ("feat", features_only)]
    report = privacy_report(union, pld=False)
    assert math.isinf(report.epsilon_rdp)
    assert any("protects nothing" in w for w in report.warnings)


def test_report_says_the_label_is_protected_by_default(data):
    # Issue 20 item 5: label_public=False is the default; the report says so.
    X, y = data
    default = FeatureDPLogisticRegression(private_features=[0], epsilon=1.0, **FAST).fit(X, y)
    text = str(privacy_report(default, pld=False))
    assert "(label_public=False: the label is protected too)" in text
    assert "label_public=False" in default.privacy_plan_.description
    public = FeatureDPLogisticRegression(private_features=[0], label_public=True, epsilon=1.0,
                                         **FAST).fit(X, y)
    text = str(privacy_report(public, pld=False))
    assert "label_public=False" not in text and "(label public)" in text

"""PrivatePipeline: original column names through a ColumnTransformer, and leak checks."""

import math

import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.feature_selection import SelectKBest
from sklearn.frozen import FrozenEstimator
from sklearn.impute import SimpleImputer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer, OneHotEncoder, StandardScaler

from sklearn_fdp import (
    DPSGDClassifier,
    FeatureDPLinearRegression,
    FeatureDPLogisticRegression,
    PrivacyLeakWarning,
    privacy_report,
)
from sklearn_fdp.pipeline import PrivatePipeline, audit_preprocessing, make_private_pipeline
from sklearn_fdp.preprocessing import PrivateMeanCenterer

SEX, RACE, WORK = ["F", "M"], ["a", "b", "c"], ["p", "q", "r", "s"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 300
    X = pd.DataFrame({
        "age": rng.uniform(20, 60, n),
        "hours": rng.uniform(0, 1, n),
        "sex": rng.choice(SEX, n),
        "race": rng.choice(RACE, n),
        "work": rng.choice(WORK, n),
        "gain": rng.exponential(1.0, n),
    })
    y = ((X["hours"] > 0.5) ^ (X["sex"] == "F")).astype(int).to_numpy()
    return X, y


def _clf(**kw):
    kw = {"private_features": ["sex", "race"], "epsilon": 5.0, "delta": 1e-3,
          "epochs": 1.0, "accountant": "rdp", "random_state": 0, **kw}
    return FeatureDPLogisticRegression(**kw)


def _ct(*, sex_categories="explicit", private_num=None, sparse=False):
    """ColumnTransformer: public numerics scaled, categoricals one-hot."""
    if sex_categories == "explicit":
        cat = OneHotEncoder(categories=[SEX, RACE, WORK], sparse_output=sparse)
    else:
        cat = OneHotEncoder(sparse_output=sparse)
    return ColumnTransformer(
        [("num", StandardScaler(), ["age", "hours"] + ([private_num] if private_num else [])),
         ("cat", cat, ["sex", "race", "work"])],
        sparse_threshold=1.0 if sparse else 0.0,
    )


def test_original_names_resolve_to_one_hot_columns(data):
    X, y = data
    pipe = PrivatePipeline([("prep", _ct()), ("clf", _clf())]).fit(X, y)
    clf = pipe[-1]
    names = list(pipe[:-1].get_feature_names_out())
    assert list(clf.feature_names_) == names
    expected = [names.index(c) for c in ("cat__sex_F", "cat__sex_M", "cat__race_a",
                                         "cat__race_b", "cat__race_c")]
    assert clf.private_features_.tolist() == expected
    assert not clf.public_mask_[expected].any() and clf.public_mask_.sum() == len(names) - 5
    # Names are for the spec only: predicting on an array warns about nothing.
    assert not hasattr(clf, "feature_names_in_")
    assert pipe.predict(X).shape == (len(y),)
    assert all(s.status in ("public", "free") for s in pipe.preprocessing_audit_)


def test_sparse_output(data):
    X, y = data
    pipe = make_private_pipeline(_ct(sparse=True), _clf())
    assert sp.issparse(pipe[:-1].fit_transform(X))
    pipe.fit(X, y)
    _assert_sex_and_race_one_hot_are_private(pipe[-1])
    assert np.isfinite(pipe.predict_proba(X)).all()


def _assert_sex_and_race_one_hot_are_private(est):
    """The fitted final step's private features are the one-hot columns of sex and race."""
    names = [str(n) for n in est.feature_names_]
    assert [names[i] for i in est.private_features_] == [
        "cat__sex_F", "cat__sex_M", "cat__race_a", "cat__race_b", "cat__race_c"]


def test_unknown_name_errors_naming_it(data):
    X, y = data
    pipe = make_private_pipeline(_ct(), _clf(private_features=["sex", "religion"]))
    with pytest.raises(ValueError, match=r"unknown columns \['religion'\]"):
        pipe.fit(X, y)


def test_plain_pipeline_without_names_says_how_to_fix(data):
    X, y = data
    with pytest.raises(ValueError, match="make_private_pipeline.*set_output"):
        make_pipeline(_ct(), _clf()).fit(X, y)


def test_plain_pipeline_with_pandas_output(data):
    X, y = data
    pipe = make_pipeline(_ct(), _clf()).set_output(transform="pandas").fit(X, y)
    clf = pipe[-1]
    assert [str(clf.feature_names_in_[i]) for i in clf.private_features_] == [
        "cat__sex_F", "cat__sex_M", "cat__race_a", "cat__race_b", "cat__race_c"]
    # privacy_report traces the plain pipeline too: public-side scaling is free.
    report = privacy_report(pipe)
    kinds = {s["name"]: s["kind"] for s in report.steps}
    assert kinds["columntransformer__num"] == "public"
    assert report.is_private


def test_scaler_on_private_numeric_warns_naming_step_and_column(data):
    X, y = data
    pipe = PrivatePipeline([("prep", _ct(private_num="gain")),
                            ("clf", _clf(private_features=["sex", "race", "gain"]))])
    # "gain" is scaled with "age" and "hours" in one StandardScaler; only "gain"
    # is protected, so only its mean and variance leak.
    with pytest.warns(PrivacyLeakWarning,
                      match=r"'prep__num' \(StandardScaler\).*\['gain'\]") as record:
        pipe.fit(X, y)
    assert len(record) == 1
    leak = [s for s in pipe.preprocessing_audit_ if s.status == "leak"]
    assert [(s.name, s.columns) for s in leak] == [("prep__num", ["gain"])]
    report = privacy_report(pipe)
    assert not report.is_private
    assert any("'prep__num'" in w and "['gain']" in w for w in report.warnings)


def test_auto_categories_on_private_column_warn(data):
    X, y = data
    ct = ColumnTransformer([
        ("num", StandardScaler(), ["age", "hours"]),
        ("sex", OneHotEncoder(), ["sex"]),  # categories learnt from the data
        ("cat", OneHotEncoder(categories=[RACE, WORK]), ["race", "work"]),
    ])
    pipe = make_private_pipeline(ct, _clf())
    with pytest.warns(PrivacyLeakWarning, match=r"'columntransformer__sex' \(OneHotEncoder\)"
                                                r".*\['sex'\]") as record:
        pipe.fit(X, y)
    assert len(record) == 1


def test_auto_categories_only_on_public_columns_is_free(data):
    X, y = data
    ct = ColumnTransformer([
        ("num", StandardScaler(), ["age", "hours"]),
        ("cat", OneHotEncoder(categories=[SEX, RACE]), ["sex", "race"]),
        ("work", OneHotEncoder(), ["work"]),  # categories learnt from a public column
    ])
    pipe = make_private_pipeline(ct, _clf())
    pipe.fit(X, y)  # FdpWarning is an error under the test config: none raised
    statuses = {s.name: s.status for s in pipe.preprocessing_audit_}
    assert statuses == {"columntransformer__num": "public", "columntransformer__cat": "free",
                        "columntransformer__work": "public"}


def test_no_warning_for_clean_pipeline_and_report(data):
    X, y = data
    pipe = make_private_pipeline(_ct(), _clf()).fit(X, y)
    report = privacy_report(pipe)
    assert report.is_private
    assert report.warnings == []
    assert "learnt from public columns only, free" in str(report)
    assert "cat__sex_F" in report.protected_unit


def test_nested_pipeline_imputer_on_private_column(data):
    X, y = data
    sex = Pipeline([("impute", SimpleImputer(strategy="most_frequent")),
                    ("onehot", OneHotEncoder(categories=[SEX]))])
    ct = ColumnTransformer([("num", StandardScaler(), ["age", "hours"]),
                            ("sex", sex, ["sex"]),
                            ("cat", OneHotEncoder(categories=[RACE, WORK]), ["race", "work"])])
    with pytest.warns(PrivacyLeakWarning, match=r"'columntransformer__sex__impute'.*\['sex'\]"):
        make_private_pipeline(ct, _clf()).fit(X, y)


def test_private_and_frozen_steps_are_not_leaks(data):
    X, y = data
    Xn = X[["age", "hours"]].to_numpy() / 60.0
    scaler = FrozenEstimator(StandardScaler().fit(Xn))  # fitted elsewhere (public data)
    # row_scaling="none": the default ("normalize") divides the public column by a
    # norm that contains the protected one (issue 16 item 2), a "mix".
    pipe = PrivatePipeline([
        ("center", PrivateMeanCenterer(epsilon=1.0, delta=1e-4, norm_bound=1.5,
                                       row_scaling="none")),
        ("frozen", scaler),
        ("clf", _clf(private_features=[0])),
    ])
    pipe.fit(Xn, y)
    statuses = [s.status for s in pipe.preprocessing_audit_]
    assert statuses == ["private", "free"]
    report = privacy_report(pipe)
    assert len([s for s in report.steps if s["kind"] == "private"]) == 2
    assert report.is_private
    pipe.set_params(center__row_scaling="normalize")
    with pytest.warns(PrivacyLeakWarning, match=r"'center' \(PrivateMeanCenterer\)"):
        pipe.fit(Xn, y)
    assert [s.status for s in pipe.preprocessing_audit_] == ["mix", "free"]


def test_supervised_step_leaks_a_private_label(data):
    X, y = data
    Xn = X[["age", "hours"]].to_numpy() / 60.0
    free = FunctionTransformer(feature_names_out="one-to-one")
    # Label DP (every feature public, label private): selecting by F-scores
    # against y publishes a statistic of the label.
    pipe = PrivatePipeline([("free", free), ("select", SelectKBest(k="all")),
                            ("clf", _clf(private_features=[], label_public=False))])
    with pytest.warns(PrivacyLeakWarning, match=r"'select' \(SelectKBest\) learnt from the label"):
        pipe.fit(Xn, y)
    assert [s.status for s in pipe.preprocessing_audit_] == ["free", "leak"]
    # Public label, private column 0: the F-score of column 0 leaks it.
    pipe.set_params(clf__label_public=True, clf__private_features=[0])
    with pytest.warns(PrivacyLeakWarning, match=r"column\(s\) \['x0'\]"):
        pipe.fit(Xn, y)


def test_clone_and_grid_search(data):
    X, y = data
    pipe = make_private_pipeline(_ct(sparse=True), _clf())
    assert clone(pipe).get_params()["featuredplogisticregression__private_features"] == [
        "sex", "race"]
    search = GridSearchCV(pipe, {"featuredplogisticregression__epsilon": [3.0, 8.0]},
                          cv=2).fit(X, y)
    best = search.best_estimator_
    assert isinstance(best, PrivatePipeline)
    assert len(best[-1].private_features_) == 5
    report = privacy_report(search)
    assert not report.is_private
    assert any("PrivateRandomizedSearchCV" in w for w in report.warnings)
    assert privacy_report(best).is_private


def test_feature_names_fit_parameter_validated(data):
    X, y = data
    Xn = X[["age", "hours"]].to_numpy() / 60.0
    clf = _clf(private_features=["age"])
    clf.fit(Xn, y, feature_names=["age", "hours"])
    assert clf.private_features_.tolist() == [0]
    with pytest.raises(ValueError, match="must be 2 strings"):
        _clf(private_features=["age"]).fit(Xn, y, feature_names=["age"])
    with pytest.raises(ValueError, match="differ from X's own column names"):
        _clf(private_features=["age"]).fit(X[["age", "hours"]] / 60.0, y,
                                           feature_names=["hours", "age"])
    # A failed fit leaves the estimator as it was (atomic_fit).
    assert clf.private_features_.tolist() == [0]


def test_mlp_in_private_pipeline(data):
    pytest.importorskip("torch")
    from sklearn_fdp import MLPFeatureDP

    X, y = data
    mlp = MLPFeatureDP(hidden_layer_sizes=(4,), private_features=["sex"], epsilon=5.0,
                       delta=1e-3, epochs=1, random_state=0)
    pipe = make_private_pipeline(_ct(), mlp).fit(X, y)
    assert [str(pipe[-1].feature_names_[i]) for i in pipe[-1].private_features_] == [
        "cat__sex_F", "cat__sex_M"]


def test_mlp_regressor_in_private_pipeline(data):
    pytest.importorskip("torch")
    from sklearn_fdp import MLPFeatureDPRegressor

    X, _ = data
    y = X["age"].to_numpy()  # a real target, in its public range (20, 60)
    mlp = MLPFeatureDPRegressor(hidden_layer_sizes=(4,), private_features=["sex"],
                                y_bounds=(20.0, 60.0), epsilon=5.0, delta=1e-3, epochs=1,
                                random_state=0)
    pipe = make_private_pipeline(_ct(), mlp).fit(X, y)
    assert [str(pipe[-1].feature_names_[i]) for i in pipe[-1].private_features_] == [
        "cat__sex_F", "cat__sex_M"]
    assert pipe.predict(X).shape == (len(X),)
    assert privacy_report(pipe).is_private


def test_audit_of_non_private_pipeline_is_empty(data):
    from sklearn.linear_model import LogisticRegression

    X, y = data
    pipe = make_pipeline(_ct(), LogisticRegression()).fit(X, y)
    assert audit_preprocessing(pipe) == []


def test_normalizer_after_private_numeric_mixes(data):
    X, y = data
    ct = ColumnTransformer([("num", FunctionTransformer(np.tanh, feature_names_out="one-to-one"),
                             ["hours", "gain"])])
    pipe = PrivatePipeline([("prep", ct), ("norm", Normalizer()),
                            ("clf", _clf(private_features=["gain"]))])
    with pytest.warns(PrivacyLeakWarning, match=r"'norm' \(Normalizer\).*\['num__gain'\]"):
        pipe.fit(X, y)
    assert [s.status for s in pipe.preprocessing_audit_] == ["free", "mix"]
    report = privacy_report(pipe)
    assert not report.is_private and any("row norm" in w for w in report.warnings)
    # Record-level DP protects every column: nothing public to mix into.
    pipe.set_params(clf=DPSGDClassifier(epsilon=3.0, delta=1e-3, epochs=1,
                                        random_state=0)).fit(X, y)
    assert [s.status for s in pipe.preprocessing_audit_] == ["free", "free"]


def test_feature_union_traced_per_part(data):
    X, y = data
    union = FeatureUnion([("scaled", StandardScaler()),
                          ("raw", FunctionTransformer(feature_names_out="one-to-one"))])
    ct = ColumnTransformer([("num", union, ["age", "gain"]),
                            ("cat", OneHotEncoder(categories=[SEX]), ["sex"])])
    pipe = make_private_pipeline(ct, _clf(private_features=["sex"]))
    pipe.fit(X, y)  # the scaler sees public columns only: no warning
    statuses = {s.name: s.status for s in pipe.preprocessing_audit_}
    assert statuses["columntransformer__num__scaled"] == "public"
    pipe.set_params(featuredplogisticregression__private_features=[
        "sex", "num__scaled__gain", "num__raw__gain"])
    with pytest.warns(PrivacyLeakWarning, match=r"'columntransformer__num__scaled'.*\['gain'\]"):
        pipe.fit(X, y)


def test_column_both_protected_and_public_warns(data):
    X, y = data
    # Only one of the two one-hot columns of 'sex' protected: the other reveals it.
    pipe = make_private_pipeline(_ct(), _clf(private_features=["cat__sex_F"]))
    with pytest.warns(PrivacyLeakWarning, match=r"Input column\(s\) \['sex'\] feed both"):
        pipe.fit(X, y)
    report = privacy_report(pipe)
    assert not report.is_private and any("['sex'] feed both" in w for w in report.warnings)


@pytest.mark.slow
def test_adult_pipeline_example_runs():
    """examples/adult_pipeline.py runs end to end (about 30 s: Adult, 13 fits)."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, str(root / "examples" / "adult_pipeline.py")],
                         capture_output=True, text=True, env=env, cwd=root, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "'columntransformer__num' (StandardScaler)" in text
    assert "['sex', 'race', 'marital-status', 'relationship']" in text
    assert "22 of them protected" in text
    assert "GridSearchCV (GridSearchCV): NOT PRIVATE" in text
    # The selected pipeline's own report: finite epsilon, every step free or private.
    final_report = text.rsplit("Privacy report", 1)[1]
    assert "NOT PRIVATE" not in final_report
    # The budget of 1 is spent, up to the calibration's tolerance on σ (1e-4), never exceeded.
    spent = float(re.search(r"total epsilon: RDP ([0-9.]+),", final_report).group(1))
    assert 0.999 <= spent <= 1.0


def test_step_without_feature_names(data):
    X, y = data
    Xn = X[["age", "hours"]].to_numpy() / 60.0
    nameless = FunctionTransformer(np.tanh)  # no feature_names_out
    # Indices need no names; but without a column map the tracer cannot show
    # that column 1 (public) reads nothing of column 0 (issue 30 item 2).
    with pytest.warns(PrivacyLeakWarning, match="no column map"):
        pipe = make_private_pipeline(nameless, _clf(private_features=[0])).fit(Xn, y)
    assert pipe[-1].feature_names_ is None
    assert not privacy_report(pipe).is_private
    with pytest.raises(ValueError, match="could not compute the column names"):
        make_private_pipeline(nameless, _clf(private_features=["x0"])).fit(Xn, y)


def test_metadata_routing_enabled(data):
    import sklearn

    X, y = data
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = make_private_pipeline(_ct(), _clf()).fit(X, y)
    assert len(pipe[-1].private_features_) == 5


def test_report_names_protected_input_columns(data):
    X, y = data
    pipe = make_private_pipeline(_ct(), _clf()).fit(X, y)
    assert pipe.protected_input_columns_ == ["sex", "race"]
    unit = privacy_report(pipe).protected_unit
    assert unit.endswith("pipeline input columns protected: [sex, race]")


@pytest.mark.parametrize("row_scaling", ["normalize", "clip"])
def test_private_mean_centerer_rescaling_rows_leaks_into_public_columns(row_scaling):
    """Issue 16 item 2: the centerer's row scaling divides the public columns by a
    norm that contains the protected column, which is then recovered exactly."""
    rng = np.random.default_rng(0)
    n = 400
    X = np.column_stack([rng.uniform(0.5, 1.0, n), rng.uniform(0.5, 1.0, n),
                         rng.uniform(0.0, 2.0, n)])  # columns 0, 1 public; 2 protected
    y = (X[:, 0] > 0.75).astype(int)
    centerer = PrivateMeanCenterer(epsilon=1.0, delta=1e-4, norm_bound=1.0,
                                   row_scaling=row_scaling, random_state=0)
    pipe = make_private_pipeline(centerer, _clf(private_features=[2]))
    with pytest.warns(PrivacyLeakWarning, match=r"PrivateMeanCenterer.*\['x2'\]"):
        pipe.fit(X, y)
    # The attack: the public part (columns 0, 1), the released mean_ and the public
    # columns handed to the estimator give the row norm, hence |protected value|.
    Z = pipe[:-1].transform(X)[:, pipe[-1].public_mask_]
    scaled = Z + pipe[0].mean_[:2]  # = x_pub * factor(||x||)
    factor = scaled[:, 0] / X[:, 0]
    if row_scaling == "normalize":
        norm = 1.0 / factor
    else:  # "clip": only rows above the bound are rescaled (and so revealed)
        norm = np.where(np.isclose(factor, 1.0), np.nan, 1.0 / factor)
    recovered = np.sqrt(norm**2 - X[:, 0] ** 2 - X[:, 1] ** 2)
    shown = ~np.isnan(recovered)
    assert shown.sum() > n // 2
    np.testing.assert_allclose(recovered[shown], X[shown, 2], rtol=1e-6)
    assert [s.status for s in pipe.preprocessing_audit_] == ["mix"]
    report = privacy_report(pipe)
    assert not report.is_private and math.isinf(report.epsilon_rdp)
    assert any("PrivateMeanCenterer" in w and "['x2']" in w for w in report.warnings)


def test_private_mean_centerer_per_block_is_not_a_leak():
    """The fix the warning suggests: one centerer per block (or row_scaling="none")."""
    rng = np.random.default_rng(1)
    n = 400
    X = np.column_stack([rng.uniform(0.5, 1.0, n), rng.uniform(0.5, 1.0, n),
                         rng.uniform(0.0, 2.0, n)])
    y = (X[:, 0] > 0.75).astype(int)
    kw = dict(epsilon=1.0, delta=1e-4, norm_bound=1.0, random_state=0)
    per_block = ColumnTransformer([("pub", PrivateMeanCenterer(**kw), [0, 1]),
                                   ("priv", PrivateMeanCenterer(**kw), [2])])
    pipe = make_private_pipeline(per_block, _clf(private_features=[2])).fit(X, y)
    assert [s.status for s in pipe.preprocessing_audit_] == ["private", "private"]
    report = privacy_report(pipe)
    assert report.is_private and report.warnings == []
    pipe = make_private_pipeline(PrivateMeanCenterer(row_scaling="none", **kw),
                                 _clf(private_features=[2])).fit(X, y)
    assert [s.status for s in pipe.preprocessing_audit_] == ["private"]
    assert privacy_report(pipe).is_private


def test_public_name_does_not_select_a_longer_original_column():
    """Issue 16 item 8 through a pipeline: 'age' is one-hot encoded, 'age_at_diagnosis'
    is a different (protected) column, also one-hot encoded."""
    rng = np.random.default_rng(0)
    n = 200
    X = pd.DataFrame({
        "age": rng.choice(["young", "old"], n),
        "age_at_diagnosis": rng.choice(["early", "late"], n),
        "hours": rng.uniform(0, 1, n),
    })
    y = (X["hours"] > 0.5).astype(int).to_numpy()
    ct = ColumnTransformer([
        ("cat", OneHotEncoder(categories=[["young", "old"], ["early", "late"]]),
         ["age", "age_at_diagnosis"]),
        ("num", FunctionTransformer(feature_names_out="one-to-one"), ["hours"]),
    ])
    pipe = make_private_pipeline(ct, _clf(public_features=["age", "hours"],
                                          private_features=None, label_public=True))
    pipe.fit(X, y)
    clf = pipe[-1]
    names = np.asarray(clf.feature_names_)
    assert list(names[clf.public_mask_]) == ["cat__age_young", "cat__age_old", "num__hours"]
    assert pipe.protected_input_columns_ == ["age_at_diagnosis"]


def test_regressor_in_private_pipeline_and_report(data):
    """FeatureDPLinearRegression takes the same names (sparse one-hot output too) and
    the report says it protects the named columns and the target."""
    X, _ = data
    target = 2.0 * X["hours"].to_numpy() + (X["sex"] == "F").to_numpy()
    for sparse in (False, True):
        pipe = make_private_pipeline(
            _ct(sparse=sparse),
            FeatureDPLinearRegression(private_features=["sex", "race"], y_bounds=(0.0, 3.0),
                                      row_norm_bounds=(10.0, 2.0), epsilon=5.0, delta=1e-3,
                                      random_state=0))
        pipe.fit(X, target)
        reg = pipe[-1]
        _assert_sex_and_race_one_hot_are_private(reg)
        assert np.isfinite(pipe.predict(X)).all()
    report = privacy_report(pipe)
    assert report.is_private and report.warnings == []
    assert pipe.protected_input_columns_ == ["sex", "race"]
    assert reg.privacy_plan_.unit == "features+label"

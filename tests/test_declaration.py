"""One declaration of what is protected; defaults that never lose (issue 32).

The schema of make_tabular_preprocessor reaches the estimator inside
make_private_pipeline (protected columns, row-norm bounds, target bounds), a
disagreement raises naming the columns, a model predicting one class over the
declared domain warns naming label_public, an explicit accountant is honoured,
and method="auto" picks DP-SGD on the whole record with a private label.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from sklearn_fdp import (
    DPSGDClassifier,
    DPSGDRegressor,
    FeatureDPLinearRegression,
    FeatureDPLogisticRegression,
    check_collapse,
)
from sklearn_fdp.preprocessing._declaration import (
    TabularPreprocessor,
    domain_collapse,
    public_rows_collapse,
)
from sklearn_fdp.exceptions import CollapseWarning, FdpWarning
from sklearn_fdp.pipeline import make_private_pipeline
from sklearn_fdp.preprocessing import make_tabular_preprocessor, row_norm_bounds

SCHEMA = {"numeric": {"age": [17, 90], "hours": [0, 99]},
          "categorical": {"sex": ["F", "M"], "job": ["a", "b", "c"]},
          "protected": ["sex", "age"], "target": {"bounds": [0, 10]}}


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"age": rng.integers(17, 91, n), "hours": rng.uniform(0, 99, n),
                      "sex": rng.choice(["F", "M"], n), "job": rng.choice(["a", "b", "c"], n)})
    y = (X["hours"] + rng.normal(0, 10, n) > 50).to_numpy(int)
    y_reg = np.clip(X["hours"].to_numpy() / 10 + rng.normal(0, 1, n), 0, 10)
    return X, y, y_reg


def _names(pipe):
    return [str(n) for n in pipe[0].get_feature_names_out()]


def test_preprocessor_carries_the_declaration():
    pre = make_tabular_preprocessor(SCHEMA)
    assert isinstance(pre, TabularPreprocessor)
    schema = {k: v for k, v in SCHEMA.items() if k != "target"}
    assert pre.declaration == {"protected": ["sex", "age"],
                               "row_norm_bounds": tuple(row_norm_bounds(schema)),
                               "target_bounds": (0.0, 10.0)}
    assert clone(pre).declaration == pre.declaration  # survives clone (GridSearchCV)


@pytest.mark.parametrize("target", [[5, 5], [0], "0-10", {"bounds": [0, 1], "x": 1}])
def test_bad_target_bounds_raise_naming_the_key(target):
    with pytest.raises(ValueError, match=r"schema\['target'\]"):
        make_tabular_preprocessor(dict(SCHEMA, target=target))


def test_schema_protected_columns_reach_the_estimator():
    X, y, _ = _data()
    est = FeatureDPLogisticRegression(label_public=True, epsilon=1.0, random_state=0)
    pipe = make_private_pipeline(make_tabular_preprocessor(SCHEMA), est).fit(X, y)
    names = _names(pipe)
    private = sorted(names[i] for i in pipe[-1].private_features_)
    assert private == ["protected_cat__sex_F", "protected_cat__sex_M", "protected_num__age"]
    # Same fit as the estimator given the list by hand; its parameters are restored.
    assert est.private_features is None
    by_hand = make_private_pipeline(
        make_tabular_preprocessor(SCHEMA),
        FeatureDPLogisticRegression(private_features=["sex", "age"], label_public=True,
                                    epsilon=1.0, random_state=0)).fit(X, y)
    np.testing.assert_array_equal(pipe[-1].coef_, by_hand[-1].coef_)
    source, value = pipe.declarations_["private_features"]
    assert source.startswith("schema") and value == ["sex", "age"]
    assert by_hand.declarations_["private_features"][0] == "estimator"


def test_schema_bounds_reach_the_estimator():
    X, _, y_reg = _data()
    schema = {k: v for k, v in SCHEMA.items() if k != "target"}
    bounds = row_norm_bounds(schema)
    pipe = make_private_pipeline(make_tabular_preprocessor(SCHEMA),
                                 FeatureDPLinearRegression(epsilon=1.0, random_state=0))
    pipe.fit(X, y_reg)
    assert pipe[-1].row_norm_bounds_ == (bounds.public, bounds.protected)
    assert pipe[-1].privacy_plan_.details["y_bounds"] == (0.0, 10.0)
    assert pipe[-1].row_norm_bounds is None and pipe[-1].y_bounds is None
    assert {k: v[0].split()[0] for k, v in pipe.declarations_.items()} == {
        "private_features": "schema", "row_norm_bounds": "schema", "y_bounds": "schema"}
    # A record-level regressor gets the target bounds only.
    reg = make_private_pipeline(make_tabular_preprocessor(SCHEMA),
                                DPSGDRegressor(epsilon=1.0, random_state=0)).fit(X, y_reg)
    assert list(reg.declarations_) == ["y_bounds"]


def test_estimator_protecting_more_gets_the_whole_row_bound_for_its_protected_block():
    X, _, y_reg = _data()
    schema = {k: v for k, v in SCHEMA.items() if k != "target"}
    bounds = row_norm_bounds(schema)
    pipe = make_private_pipeline(
        make_tabular_preprocessor(SCHEMA),
        FeatureDPLinearRegression(private_features=["sex", "age", "job"], epsilon=1.0,
                                  random_state=0)).fit(X, y_reg)
    assert pipe[-1].row_norm_bounds_ == (bounds.public, bounds.row)


@pytest.mark.parametrize("spec", [dict(private_features=["sex"]),
                                  dict(public_features=["age", "hours", "job"])])
def test_disagreement_with_the_schema_raises_naming_the_columns(spec):
    X, y, _ = _data()
    pipe = make_private_pipeline(make_tabular_preprocessor(SCHEMA),
                                 FeatureDPLogisticRegression(label_public=True, **spec))
    with pytest.raises(ValueError, match=r"treats the column\(s\) \['age'\] as public"):
        pipe.fit(X, y)


def test_norm_bound_below_the_schema_raises():
    X, _, y_reg = _data()
    pipe = make_private_pipeline(make_tabular_preprocessor(SCHEMA),
                                 FeatureDPLinearRegression(row_norm_bounds=(1.0, 0.1)))
    with pytest.raises(ValueError, match=r"protected block \(the protected columns "
                                         r"\['sex', 'age'\]\).*below the schema's"):
        pipe.fit(X, y_reg)
    # At or above the schema's: accepted, and the estimator's value is used.
    pipe.set_params(featuredplinearregression__row_norm_bounds=1.0).fit(X, y_reg)
    assert pipe[-1].row_norm_bounds_ == (1.0, 1.0)
    assert pipe.declarations_["row_norm_bounds"] == ("estimator", 1.0)


def test_collapse_warning_names_label_public():
    X, y, _ = _data()
    pipe = make_private_pipeline(make_tabular_preprocessor(SCHEMA),
                                 DPSGDClassifier(epsilon=1.0, random_state=0))
    pipe.fit(X, y)
    final = pipe[-1]
    # Released weights that lose to the intercept on the whole declared domain.
    final.coef_ = np.full_like(final.coef_, 0.01)
    final.intercept_ = np.array([-5.0])
    assert domain_collapse(pipe) == (final.classes_[0], 1.0)
    with pytest.warns(CollapseWarning, match="label_public=True") as rec:
        pipe._warn_domain_collapse()
    assert "every row of the declared input domain" in str(rec[0].message)
    # A model that separates the domain does not warn.
    final.coef_ = np.zeros_like(final.coef_)
    final.coef_[0, _names(pipe).index("num__hours")] = 50.0
    final.intercept_ = np.array([-10.0])
    assert domain_collapse(pipe) is None


def test_collapsed_fit_warns_at_fit():
    # 15 positives in 300 rows: DP-SGD's released model predicts the majority class
    # on every row of the declared domain (and so on its rows), and fit says so.
    X, _, _ = _data(300, seed=1)
    y = np.r_[np.zeros(285, int), np.ones(15, int)]
    pipe = make_private_pipeline(make_tabular_preprocessor(SCHEMA),
                                 DPSGDClassifier(epsilon=0.3, random_state=0))
    with pytest.warns(CollapseWarning, match=r"single class 0 on every row of the declared "
                                             r"input domain.*label_public=True"):
        pipe.fit(X, y)
    assert np.unique(pipe.predict(X)).tolist() == [0]


def _corner_data(n=400, seed=2):
    """Rows whose public ``hours`` lie in [0, 20] of its declared [0, 99] (as the silent
    collapses of issue 32's suite: test rows in a small part of the declared domain)."""
    X, y, _ = _data(n, seed)
    X["hours"] = np.random.default_rng(seed).uniform(0, 20, n)
    return X, y


def _hours_model(pipe, weight=200.0, intercept=-60.0):
    """Released weights: class 1 only where hours > 60 % of the range; a large weight on the
    protected ``age`` (which the check must never read)."""
    final, names = pipe[-1], _names(pipe)
    final.coef_ = np.zeros_like(final.coef_)
    final.coef_[0, names.index("num__hours")] = weight
    final.coef_[0, names.index("protected_num__age")] = 1.0
    final.intercept_ = np.array([intercept])


def _fitted_on_corner_data(estimator):
    """``(X, pipeline)``: the schema pipeline of ``estimator`` fitted on :func:`_corner_data`."""
    X, y = _corner_data()
    pipe = make_private_pipeline(make_tabular_preprocessor(SCHEMA),
                                 estimator(epsilon=1.0, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(X, y)
    return X, pipe


def test_collapse_check_reads_no_row_of_a_whole_record_estimator():
    """DPSGDClassifier protects every column: a warning computed from its training rows
    would print a bit of private data that no accountant saw. It gets the domain check
    only (public_rows_collapse reads nothing and answers None), even where the rows would
    show a collapse."""
    X, pipe = _fitted_on_corner_data(DPSGDClassifier)
    _hours_model(pipe)
    assert np.unique(pipe.predict(X)).tolist() == [0]  # collapsed where the data lie
    assert public_rows_collapse(pipe, pipe[0].transform(X)) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", CollapseWarning)
        pipe._warn_domain_collapse(pipe[0].transform(X))


@pytest.mark.parametrize("estimator", [FeatureDPLogisticRegression])
def test_collapse_where_the_data_lie_is_found_from_public_columns(estimator):
    """Issue 32 (ii): a model that predicts one class on every training row but two over
    the uniform declared domain. The rows' public columns show it; protected values are
    never read (changing them changes nothing)."""
    X, pipe = _fitted_on_corner_data(estimator)
    assert "_collapse_rows" not in pipe.__dict__  # the training rows are not kept
    _hours_model(pipe)
    assert np.unique(pipe.predict(X)).tolist() == [0]
    assert domain_collapse(pipe) is None  # the uniform domain: two classes
    Xt = pipe[0].transform(X)
    label, share = public_rows_collapse(pipe, Xt)
    assert (label, share) == (0, 1.0)
    X_other = X.assign(age=90, sex="F")  # every protected value changed
    assert public_rows_collapse(pipe, pipe[0].transform(X_other)) == (label, share)
    with pytest.warns(CollapseWarning, match=r"single class 0 on 100.0 % of the training "
                                             r"rows' public parts.*label_public=True"):
        pipe._warn_domain_collapse(Xt)
    # A model that separates the rows does not warn.
    _hours_model(pipe, weight=200.0, intercept=-10.0)
    assert public_rows_collapse(pipe, Xt) is None


class _ReleasesHoursModel(FeatureDPLogisticRegression):
    """A fit whose released weights are :func:`_hours_model`'s (a stand-in for a noisy fit
    that collapsed where the data lie)."""

    def fit(self, X, y, feature_names=None):
        super().fit(X, y, feature_names=feature_names)
        self.coef_ = np.zeros_like(self.coef_)
        self.coef_[0, list(feature_names).index("num__hours")] = 200.0
        self.intercept_ = np.array([-60.0])
        return self


def test_collapse_where_the_data_lie_warns_at_fit():
    X, y = _corner_data()
    pipe = make_private_pipeline(make_tabular_preprocessor(SCHEMA),
                                 _ReleasesHoursModel(epsilon=1.0, random_state=0))
    with pytest.warns(CollapseWarning, match="training rows' public parts"):
        pipe.fit(X, y)
    assert "_collapse_rows" not in pipe.__dict__


def test_check_collapse_advice_names_label_public():
    from sklearn.dummy import DummyClassifier

    X, y = np.zeros((4, 1)), np.array([0, 0, 0, 1])
    with pytest.warns(CollapseWarning, match="label_public=True"):
        check_collapse(DummyClassifier().fit(X, y), X, y)


def test_explicit_accountant_is_honoured_or_raises():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)) / 3
    y = (X[:, 0] > 0).astype(int)
    # RDP's answer is unusable under this much noise (ε = 1e-3): PLD's is.
    with pytest.raises(ValueError, match=r"accountant='rdp' cannot account this fit.*"
                                         r"accountant='pld'"):
        DPSGDClassifier(epsilon=1e-3, accountant="rdp", random_state=0).fit(X, y)
    assert DPSGDClassifier(epsilon=1e-3, accountant="pld", random_state=0).fit(
        X, y).accountant_ == "pld"
    assert DPSGDClassifier(epsilon=1.0, accountant="rdp", random_state=0).fit(
        X, y).accountant_ == "rdp"


def test_auto_accountant_says_when_it_falls_back(monkeypatch):
    from sklearn_fdp import _budget

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)) / 3
    y = (X[:, 0] > 0).astype(int)
    # "auto" asks RDP here (forced), which cannot answer at ε = 1e-3.
    monkeypatch.setattr(_budget, "resolve_accountant", lambda est, eps: "rdp")
    with pytest.warns(FdpWarning, match="accountant='auto' asked RDP"):
        est = DPSGDClassifier(epsilon=1e-3, random_state=0).fit(X, y)
    assert est.accountant_ == "pld"


@pytest.mark.parametrize("label_public, private, expected", [
    (False, [5], "dpsgd"),               # private label, private columns: whole-record DP-SGD
    (False, [], "sufficient_statistic"),  # label DP
    (True, [5], "alg1"),                 # public label
])
def test_auto_method_rule(label_public, private, expected):
    est = FeatureDPLogisticRegression(private_features=private, label_public=label_public)
    assert est.privacy_plan(1000, 6).details["method"] == expected


def test_auto_with_private_label_is_dpsgd_classifier():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 6)) / 3
    y = (X[:, 0] + X[:, 5] > 0).astype(int)
    fdp = FeatureDPLogisticRegression(private_features=[5], epsilon=0.5, random_state=3)
    dp = DPSGDClassifier(epsilon=0.5, random_state=3)
    fdp.fit(X, y), dp.fit(X, y)
    assert fdp.method_ == "dpsgd"
    np.testing.assert_array_equal(fdp.coef_, dp.coef_)
    np.testing.assert_array_equal(fdp.intercept_, dp.intercept_)
    assert fdp.epsilon_ == dp.epsilon_


def test_privacy_report_says_where_each_declaration_came_from():
    import json

    from sklearn_fdp import privacy_report

    X, _, y_reg = _data()
    pipe = make_private_pipeline(make_tabular_preprocessor(SCHEMA),
                                 FeatureDPLinearRegression(private_features=["sex", "age"],
                                                           epsilon=1.0, random_state=0))
    report = privacy_report(pipe.fit(X, y_reg))
    d = report.to_dict()
    json.dumps(d)
    assert d["declarations"]["private_features"] == {"source": "estimator",
                                                     "value": ["sex", "age"]}
    assert d["declarations"]["y_bounds"] == {"source": "schema (make_tabular_preprocessor)",
                                             "value": [0.0, 10.0]}
    assert "row_norm_bounds = [" in str(report)
    assert "from the schema (make_tabular_preprocessor)" in str(report)


def _cli_frame(tmp_path):
    import json

    pytest.importorskip("skops")
    rng = np.random.default_rng(0)
    n = 300
    frame = pd.DataFrame({"age": rng.integers(18, 80, n), "hours": rng.uniform(0, 99, n),
                          "sex": rng.choice(["F", "M"], n)})
    frame["y"] = np.where(frame["hours"] > 50, "hi", "lo")
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({
        "numeric": {"age": [18, 80], "hours": {"bounds": [0, 99]}},
        "categorical": {"sex": ["F", "M"]}, "protected": ["sex", "age"]}))
    return str(csv), str(schema)


def _cli(csv, schema, out, *extra):
    from sklearn_fdp.cli import main

    return main(["train", csv, "--target", "y", "--schema", schema, "--epochs", "1",
                 "--epsilon", "4", "--delta", "1e-4", "--random-state", "0", "--out",
                 str(out), "--quiet", *extra])


def test_cli_reads_the_schemas_protected_columns(tmp_path, capsys):
    from sklearn_fdp.cli import _load

    csv, schema = _cli_frame(tmp_path)
    assert _cli(csv, schema, tmp_path / "m.skops") == 0, capsys.readouterr().err
    model = _load(str(tmp_path / "m.skops"))
    names = list(model[:-1].get_feature_names_out())
    assert sorted(names[i] for i in model[-1].private_features_) == [
        "cat__sex_F", "cat__sex_M", "num__age"]
    assert "protected: age, sex" in capsys.readouterr().out


def test_cli_refuses_a_private_list_that_leaves_a_protected_column_public(tmp_path, capsys):
    csv, schema = _cli_frame(tmp_path)
    assert _cli(csv, schema, tmp_path / "m.skops", "--private", "sex") == 2
    err = capsys.readouterr().err
    assert "--private leaves column(s) ['age'] public" in err and "Traceback" not in err

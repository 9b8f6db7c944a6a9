"""sklearn_fdp.audit.AttributeInferenceAttack: attack, baseline and intervals.

Synthetic data throughout. A model that memorises noise labels must leak the
attribute of its training records (attack clearly above the baseline); a
constant model cannot (advantage within a tolerance derived below).

Tolerances: an accuracy measured on n records has standard deviation at most
0.5 / sqrt(n); the advantage is a mean of n paired differences in [-1, 1], so
its standard deviation is at most 1 / sqrt(n). Every check allows 4 of these
standard deviations (two-sided failure probability below 1e-4 for a fresh
seed; the seeds are fixed).
"""

import copy
import json
import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.compose import ColumnTransformer
from sklearn.dummy import DummyClassifier
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder
from sklearn.svm import LinearSVC

import sklearn_fdp
from sklearn_fdp.audit import (
    AttributeInferenceAttack,
    AttributeInferenceResult,
    attribute_inference_bound,
)

N = 1000
TOL = 4.0 / math.sqrt(N)  # 4 standard deviations of an advantage (see module docstring)


def _records(rng, n, *, attr_depends=False, label="noise"):
    """Two public columns, a binary attribute (column 2, values 0/10), a label."""
    x = rng.normal(size=(n, 2))
    if attr_depends:
        a = rng.random(n) < 1.0 / (1.0 + np.exp(-2.0 * x[:, 0]))
    else:
        a = rng.random(n) < 0.5
    if label == "noise":
        y = rng.integers(0, 2, n)
    else:  # depends on the public part only
        y = (x[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(int)
    return np.column_stack([x, 10.0 * a]), y


def _frame(X):
    """The same records as a raw DataFrame with a string attribute column."""
    return pd.DataFrame({"u": X[:, 0], "v": X[:, 1],
                         "sex": np.where(X[:, 2] > 0, "M", "F")})


def _raw_pipeline():
    return make_pipeline(
        ColumnTransformer([("sex", OneHotEncoder(), ["sex"])], remainder="passthrough"),
        KNeighborsClassifier(n_neighbors=1))


def test_exported():
    assert sklearn_fdp.audit.AttributeInferenceAttack is AttributeInferenceAttack
    assert "AttributeInferenceAttack" in sklearn_fdp.audit.__all__
    assert "AttributeInferenceResult" in sklearn_fdp.audit.__all__


@pytest.mark.parametrize("name", [
    "AttributeInferenceAttack", "AttributeInferenceAttack.fit",
    "AttributeInferenceAttack.score_candidates", "AttributeInferenceAttack.infer",
    "AttributeInferenceAttack.infer_baseline", "AttributeInferenceAttack.evaluate",
    "AttributeInferenceAttack.predict_attribute_proba", "AttributeInferenceResult",
    "AttributeInferenceResult.bound", "AttributeInferenceResult.to_dict",
])
def test_numpydoc(name):
    validate = pytest.importorskip("numpydoc.validate").validate
    checked = {"GL08", "SS01", "PR01", "PR02", "PR07"}
    errors = [(c, m) for c, m in validate(f"sklearn_fdp.audit.{name}")["errors"]
              if c in checked]
    assert not errors, errors


def test_memorising_model_leaks():
    rng = np.random.default_rng(0)
    X, y = _records(rng, N)
    model = KNeighborsClassifier(n_neighbors=1).fit(X, y)
    attack = AttributeInferenceAttack(model, 2, [0.0, 10.0], prior="marginal")
    attack.fit(*_records(rng, N))
    res = attack.evaluate(X, y)
    # A completion with the wrong value finds another record whose noise label
    # matches with probability 1/2 (a tie, broken by the prior, right half the
    # time): expected accuracy 3/4. The labels are noise, so the baseline is 1/2.
    assert abs(res.accuracy - 0.75) <= 2 * TOL
    assert abs(res.baseline - 0.5) <= 2 * TOL
    assert res.advantage > 0.25 - TOL
    assert res.advantage_ci[0] > 0.1
    assert res.baseline_kind == "auxiliary" and res.n == N and res.n_candidates == 2
    # Non-members: the model knows nothing about them, no advantage.
    Xo, yo = _records(rng, N)
    assert abs(attack.evaluate(Xo, yo).advantage) <= TOL


def test_constant_model_cannot_leak_conditional_prior():
    rng = np.random.default_rng(1)
    X, y = _records(rng, N, attr_depends=True, label="public")
    model = DummyClassifier(strategy="prior").fit(X, y)
    attack = AttributeInferenceAttack(model, 2, [0.0, 10.0], prior="conditional")
    attack.fit(*_records(rng, 2 * N, attr_depends=True, label="public"))
    res = attack.evaluate(X, y)
    # Both guesses use the public part (the attribute depends on it): well above 1/2.
    assert res.baseline > 0.6
    assert abs(res.advantage) <= TOL


def test_constant_model_cannot_leak_majority_baseline():
    rng = np.random.default_rng(2)
    X, y = _records(rng, N)
    model = DummyClassifier(strategy="prior").fit(X, y)
    res = AttributeInferenceAttack(model, 2, [0.0, 10.0]).evaluate(X, y)
    assert res.baseline_kind == "majority"
    # Every score ties, so the guess is the first candidate: the advantage is
    # -max(0, 2 f - 1) for f the frequency of the other one, |2 f - 1| <= TOL.
    assert -TOL <= res.advantage <= 0.0


def test_pipeline_with_column_transformer_raw_column():
    rng = np.random.default_rng(3)
    X, y = _records(rng, N)
    df = _frame(X)
    model = _raw_pipeline().fit(df, y)
    aux = _records(rng, N)
    attack = AttributeInferenceAttack(model, "sex", ["F", "M"], prior="marginal")
    attack.fit(_frame(aux[0]), aux[1])
    res = attack.evaluate(df, y)
    assert res.advantage_ci[0] > 0.1
    # The attacker need not have the column at all (the Pipeline records
    # feature_names_in_): same scores, same result.
    without = df.drop(columns="sex")
    np.testing.assert_array_equal(attack.score_candidates(without, y),
                                  attack.score_candidates(df, y))
    assert attack.evaluate(without, y, df["sex"]) == res
    guesses = attack.infer(without, y)
    assert set(np.unique(guesses)) <= {"F", "M"}
    assert np.mean(guesses == df["sex"].to_numpy()) == res.accuracy
    assert np.mean(attack.infer_baseline(without, y) == df["sex"].to_numpy()) == res.baseline


def test_encoded_columns_match_raw_column():
    rng = np.random.default_rng(4)
    X, y = _records(rng, N)
    onehot = np.column_stack([X[:, :2], X[:, 2] == 0, X[:, 2] > 0]).astype(float)
    model = KNeighborsClassifier(n_neighbors=1).fit(onehot, y)
    aux_X, aux_y = _records(rng, N)
    aux = np.column_stack([aux_X[:, :2], aux_X[:, 2] == 0, aux_X[:, 2] > 0]).astype(float)
    attack = AttributeInferenceAttack(model, [2, 3], [[1, 0], [0, 1]], prior=[0.5, 0.5])
    attack.fit(aux, aux_y)
    res = attack.evaluate(onehot, y)
    assert res.advantage_ci[0] > 0.1
    assert attack.infer(onehot, y).shape == (N, 2)
    # The same assignment given separately, and the same model on named columns.
    assert attack.evaluate(onehot, y, onehot[:, 2:]) == res
    cols = ["u", "v", "sex_F", "sex_M"]
    frame = pd.DataFrame(onehot, columns=cols)
    named_model = KNeighborsClassifier(n_neighbors=1).fit(frame, y)
    named = AttributeInferenceAttack(named_model, ["sex_F", "sex_M"], [[1, 0], [0, 1]],
                                     prior=[0.5, 0.5])
    named.fit(pd.DataFrame(aux, columns=cols), aux_y)
    assert named.evaluate(frame, y).accuracy == res.accuracy
    proba = named.predict_attribute_proba(frame, y)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_sklearn_fdp_estimator():
    rng = np.random.default_rng(5)
    X, y = _records(rng, 300, label="public")
    model = sklearn_fdp.DPSGDClassifier(epsilon=1.0, delta=1e-5, epochs=2, random_state=0)
    model.fit(X / 10.0, y)
    attack = AttributeInferenceAttack(model, 2, [0.0, 1.0], prior="conditional")
    aux_X, aux_y = _records(rng, 300, label="public")
    attack.fit(aux_X / 10.0, aux_y)
    res = attack.evaluate(X / 10.0, y)
    assert 0.0 <= res.accuracy <= 1.0 and res.n == 300


def test_inputs_not_mutated():
    rng = np.random.default_rng(6)
    X, y = _records(rng, 200)
    df = _frame(X)
    model = _raw_pipeline().fit(df, y)
    aux_df, aux_y = _frame(_records(rng, 200)[0]), rng.integers(0, 2, 200)
    saved = [copy.deepcopy(v) for v in (df, y, aux_df, aux_y)]
    before = model.predict_proba(df)
    params = model.get_params(deep=False)
    attack = AttributeInferenceAttack(model, "sex", ["F", "M"], prior="conditional")
    attack.fit(aux_df, aux_y)
    attack.evaluate(df, y)
    attack.evaluate(df.drop(columns="sex"), y, df["sex"])
    attack.infer(df, y)
    for new, old in zip((df, y, aux_df, aux_y), saved):
        if isinstance(old, pd.DataFrame):
            pd.testing.assert_frame_equal(new, old)
        else:
            np.testing.assert_array_equal(new, old)
    np.testing.assert_array_equal(model.predict_proba(df), before)
    assert model.get_params(deep=False) == params
    # Arrays too, with the attribute overwritten only in copies.
    Xa = X.copy()
    knn = KNeighborsClassifier(n_neighbors=1).fit(Xa, y)
    AttributeInferenceAttack(knn, 2, [0.0, 10.0]).evaluate(Xa, y)
    np.testing.assert_array_equal(Xa, X)


def test_result_object():
    rng = np.random.default_rng(7)
    X, y = _records(rng, 300)
    model = KNeighborsClassifier(n_neighbors=1).fit(X, y)
    wilson = AttributeInferenceAttack(model, 2, [0.0, 10.0]).evaluate(X, y)
    exact = AttributeInferenceAttack(model, 2, [0.0, 10.0], ci_method="clopper-pearson",
                                     confidence_level=0.99).evaluate(X, y)
    assert isinstance(wilson, AttributeInferenceResult)
    for res in (wilson, exact):
        for est, (lo, hi) in ((res.accuracy, res.accuracy_ci), (res.baseline, res.baseline_ci),
                              (res.advantage, res.advantage_ci)):
            assert lo <= est <= hi
        assert math.isclose(res.advantage, res.accuracy - res.baseline)
    # A 99 % Clopper-Pearson interval is wider than a 95 % Wilson one.
    assert exact.accuracy_ci[0] < wilson.accuracy_ci[0]
    assert exact.accuracy_ci[1] > wilson.accuracy_ci[1]
    d = json.loads(json.dumps(wilson.to_dict()))
    assert d["n"] == 300 and len(d["advantage_ci"]) == 2
    assert wilson.bound(1.0, 1e-5) == attribute_inference_bound(1.0, 1e-5, wilson.baseline)


def test_identical_guesses_give_zero_advantage_interval():
    rng = np.random.default_rng(8)
    X, y = _records(rng, N)
    model = DummyClassifier(strategy="prior").fit(X, y)
    # Prior favours the majority candidate: the attack's guess is the majority
    # baseline's guess on every record.
    counts = np.bincount((X[:, 2] > 0).astype(int))
    prior = counts / counts.sum()
    res = AttributeInferenceAttack(model, 2, [0.0, 10.0], prior=prior).evaluate(X, y)
    assert res.advantage == 0.0
    lo, hi = res.advantage_ci
    assert lo <= 0.0 <= hi and hi - lo < 0.02


def test_model_weight_scales_the_model_term():
    rng = np.random.default_rng(10)
    X, y = _records(rng, 300, attr_depends=True, label="public")
    model = LogisticRegression().fit(X, y)
    aux = _records(rng, 300, attr_depends=True, label="public")
    plain = AttributeInferenceAttack(model, 2, [0.0, 10.0]).score_candidates(X, y)
    prior = AttributeInferenceAttack(model, 2, [0.0, 10.0], prior="conditional").fit(*aux)
    log_prior = prior.score_candidates(X, y) - plain
    heavy = prior.set_params(model_weight=3.0).score_candidates(X, y)
    np.testing.assert_allclose(heavy, 3.0 * plain + log_prior)
    # Without a prior the weight changes no guess.
    light = AttributeInferenceAttack(model, 2, [0.0, 10.0], model_weight=0.1)
    np.testing.assert_array_equal(light.infer(X, y),
                                  AttributeInferenceAttack(model, 2, [0.0, 10.0]).infer(X, y))


# -- input validation -----------------------------------------------------------


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(9)
    X, y = _records(rng, 100)
    return X, y, KNeighborsClassifier(n_neighbors=1).fit(X, y)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(candidates=[0.0]), ValueError, "at least 2"),
    (dict(candidates=[0.0, 0.0]), ValueError, "distinct"),
    (dict(candidates=[[0.0], [10.0]]), ValueError, "shape"),
    (dict(attribute=[2], candidates=[0.0, 10.0]), ValueError, "shape"),
    (dict(attribute=[1, 2], candidates=[[0.0], [10.0]]), ValueError, "columns"),
    (dict(attribute=[2, 2], candidates=[[0, 0], [1, 1]]), ValueError, "twice"),
    (dict(attribute=[]), ValueError, "empty"),
    (dict(attribute=2.5), TypeError, "column name"),
    (dict(attribute=5), ValueError, "column position"),
    (dict(prior="uniform"), ValueError, "prior"),
    (dict(prior=[1.0]), ValueError, "one nonnegative"),
    (dict(prior=[-1.0, 2.0]), ValueError, "one nonnegative"),
    (dict(confidence_level=1.0), ValueError, "confidence_level"),
    (dict(model_weight=0.0), ValueError, "model_weight"),
    (dict(model_weight=np.inf), ValueError, "model_weight"),
    (dict(ci_method="wald"), ValueError, "ci_method"),
])
def test_bad_parameters(fitted, kwargs, error, match):
    X, y, model = fitted
    params = {**dict(attribute=2, candidates=[0.0, 10.0]), **kwargs}
    with pytest.raises(error, match=match):
        AttributeInferenceAttack(model, **params).evaluate(X, y)


def test_bad_estimators(fitted):
    X, y, _ = fitted
    with pytest.raises(NotFittedError, match="not fitted"):
        AttributeInferenceAttack(LogisticRegression(), 2, [0.0, 10.0]).evaluate(X, y)
    svc = LinearSVC().fit(X, y)
    with pytest.raises(TypeError, match="predict_proba"):
        AttributeInferenceAttack(svc, 2, [0.0, 10.0]).evaluate(X, y)


def test_bad_data(fitted):
    X, y, model = fitted
    attack = AttributeInferenceAttack(model, 2, [0.0, 10.0])
    with pytest.raises(ValueError, match="label"):
        attack.evaluate(X, np.where(y == 0, 7, y))
    with pytest.raises(ValueError, match="one label per record"):
        attack.evaluate(X, y[:-1])
    with pytest.raises(ValueError, match="not one of the candidates"):
        attack.evaluate(X, y, np.full(len(y), 3.0))
    with pytest.raises(ValueError, match="entries"):
        attack.evaluate(X, y, X[:-1, 2])
    with pytest.raises(TypeError, match="sparse"):
        attack.evaluate(sp.csr_matrix(X), y)
    with pytest.raises(ValueError, match="no records"):
        attack.evaluate(X[:0], y[:0])
    with pytest.raises(ValueError, match="2-D"):
        attack.evaluate(X[:, 0], y)
    with pytest.raises(NotFittedError, match="fit"):
        AttributeInferenceAttack(model, 2, [0.0, 10.0], prior="marginal").evaluate(X, y)
    with pytest.raises(NotFittedError, match="fit"):
        attack.infer_baseline(X, y)
    one_value = X.copy()
    one_value[:, 2] = 0.0
    with pytest.raises(ValueError, match="at least two"):
        AttributeInferenceAttack(model, 2, [0.0, 10.0]).fit(one_value, y)
    # A DataFrame without the column, for a model that records no names.
    with pytest.raises(ValueError, match="not found"):
        AttributeInferenceAttack(model, "sex", ["F", "M"]).evaluate(
            pd.DataFrame(X[:, :2], columns=["u", "v"]), y, np.full(len(y), "F"))

"""Hostile and broken inputs, for every private estimator.

Each input either raises a clear error (the message names the problem and
the fix) or has the documented behaviour tested here. Inputs are never
mutated, and a failing ``fit`` leaves a fitted estimator exactly as it was.

Documented behaviours (see docs/threat_model.md, "Inputs"):

* NaN / inf in X or y, text columns, empty arrays, one class: ValueError.
* Entries so large that a row's squared L2 norm overflows (|x| ~ 1e153 in
  float64): ValueError asking to scale the rows.
* float16 input is upcast to float64 (float32 for MLPFeatureDP, which
  computes in float32); non-contiguous and read-only arrays fit exactly like
  a C-contiguous writable copy.
* MLPFeatureDP computes in float32, so its overflow bound is float32's
  (|x| ~ 1e18 for a few features).
* Sparse CSR input (DPSGDClassifier, FeatureDPLogisticRegression): explicit
  zeros behave like absent entries; the other estimators reject sparse input.
* δ >= 1/n: PrivacyLeakWarning (the fit goes on).
* Regressors (issue 31): predictions clipped to ``y_bounds``; rows far beyond
  norm 1 warn (``DPSGDRegressor``; ``FeatureDPLinearRegression`` about its
  public bound); a huge learning rate, noise or scale raises "diverged" naming
  that cause, and a fitted model is kept.
* ``PrivateRandomizedSearchCV`` validates every row before its split: the same
  error wherever the bad row falls; 1-D X: scikit-learn's message (also from
  ``make_tabular_preprocessor``).
* ε = 1e300: a fit (the DP-SGD noise floor, spending less) or the library's
  error naming the largest budget, never SciPy's.
"""

import copy
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from sklearn_fdp import (
    AdaMixClassifier,
    DPSGDClassifier,
    DPSGDFClassifier,
    FeatureDPLogisticRegression,
    PrivateMeanCenterer,
)
from sklearn_fdp.exceptions import BudgetExceededError, PrivacyLeakWarning
from sklearn_fdp.model_selection import PrivateRandomizedSearchCV

from ._helpers import unit_rows

N, D = 120, 4

# Large budgets and few steps keep every fit fast; δ well below 1/N.
ESTIMATORS = {
    "DPSGDClassifier": DPSGDClassifier(epsilon=20.0, delta=1e-6, epochs=2, accountant="rdp",
                                       random_state=0),
    "FeatureDPLogisticRegression": FeatureDPLogisticRegression(
        private_features=[0], epsilon=20.0, delta=1e-6, epochs=2, accountant="rdp",
        random_state=0),
    "DPSGDFClassifier": DPSGDFClassifier(epsilon=20.0, epsilon_mean=1.0, delta=1e-6, epochs=2,
                                         accountant="rdp", random_state=0),
    "AdaMixClassifier": AdaMixClassifier(epsilon=20.0, delta=1e-6, noise_multiplier=2.0,
                                         projection=False, adaptive_clipping=False,
                                         random_state=0),
    "PrivateMeanCenterer": PrivateMeanCenterer(epsilon=5.0, delta=1e-6, random_state=0),
}
try:  # MLPFeatureDP needs the optional torch extra
    import torch
except ImportError:  # pragma: no cover - exercised without torch
    torch = None
else:
    from sklearn_fdp import MLPFeatureDP

    ESTIMATORS["MLPFeatureDP"] = MLPFeatureDP(
        hidden_layer_sizes=(8,), private_features=[0], label_public=True, epsilon=20.0,
        delta=1e-6, epochs=2, accountant="rdp", device="cpu", random_state=0)
NAMES = list(ESTIMATORS)
CLASSIFIERS = [n for n in NAMES if n != "PrivateMeanCenterer"]
SPARSE_OK = ["DPSGDClassifier", "FeatureDPLogisticRegression"]


def make(name, **params):
    return clone(ESTIMATORS[name]).set_params(**params)


@pytest.fixture(scope="module")
def data():
    return unit_rows(N, D)


def _fitted_state(est):
    return {k: copy.deepcopy(v) for k, v in vars(est).items()}


def _assert_same_state(before, after):
    assert before.keys() == after.keys(), (
        f"attributes changed: added {sorted(after.keys() - before.keys())}, "
        f"removed {sorted(before.keys() - after.keys())}")
    for key, value in before.items():
        other = after[key]
        if isinstance(value, np.ndarray):
            assert isinstance(other, np.ndarray) and value.dtype == other.dtype, key
            np.testing.assert_array_equal(value, other, err_msg=key)
        elif hasattr(value, "__dict__") or isinstance(value, (list, tuple, dict)):
            assert repr(value) == repr(other), key
        else:
            assert value == other or (value != value and other != other), key


def _copy(a):
    return a.copy() if hasattr(a, "copy") else copy.deepcopy(a)


def _assert_unchanged(a, b):
    if sp.issparse(a):
        assert a.nnz == b.nnz
        np.testing.assert_array_equal(a.data, b.data)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.indptr, b.indptr)
    elif isinstance(a, (pd.DataFrame, pd.Series)):
        assert a.equals(b)
    elif np.asarray(a).dtype.kind in "biuf":
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert [repr(v) for v in np.ravel(a)] == [repr(v) for v in np.ravel(b)]


def fit(est, X, y=None, **kwargs):
    """Fit, checking that neither X nor y is mutated (even when fit raises)."""
    X0, y0 = _copy(X), _copy(y)
    try:
        if isinstance(est, PrivateMeanCenterer):
            return est.fit(X)
        return est.fit(X, y, **kwargs)
    finally:
        _assert_unchanged(X, X0)
        if y is not None:
            _assert_unchanged(y, y0)


def _result(est):
    if isinstance(est, PrivateMeanCenterer):
        return est.mean_
    if hasattr(est, "module_"):  # MLPFeatureDP: every weight and bias, flattened
        return np.concatenate([p.detach().numpy().ravel() for p in est.module_.parameters()])
    return est.coef_


# -- broken values ------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("value, match", [(np.nan, "Input X contains NaN"),
                                          (np.inf, "Input X contains infinity")])
def test_non_finite_X(data, name, value, match):
    X, y = data
    X = X.copy()
    X[3, 1] = value
    with pytest.raises(ValueError, match=match):
        fit(make(name), X, y)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_nan_in_y(data, name):
    X, y = data
    y = y.astype(float)
    y[5] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        fit(make(name), X, y)


@pytest.mark.parametrize("name", NAMES)
def test_text_column(data, name):
    X, y = data
    df = pd.DataFrame(X, columns=list("abcd"))
    df["colour"] = np.where(y == 1, "red", "blue")
    with pytest.raises(ValueError, match="needs numeric input.*OneHotEncoder"):
        fit(make(name), df, y)


@pytest.mark.parametrize("name", NAMES)
def test_numeric_object_columns_are_converted(data, name):
    X, y = data
    est = fit(make(name), X.astype(object), y)
    np.testing.assert_array_equal(_result(est), _result(fit(make(name), X, y)))


def _search():
    return PrivateRandomizedSearchCV(
        DPSGDClassifier(epsilon=20.0, delta=1e-6, epochs=2, accountant="rdp"),
        {"learning_rate": [0.1, 1.0]}, n_iter=2, random_state=0)


def make_any(name, **params):
    """``make``, plus the search (over DPSGDClassifier)."""
    if name == "PrivateRandomizedSearchCV":
        return _search().set_params(**params)
    return make(name, **params)


ALL_NAMES = NAMES + ["PrivateRandomizedSearchCV"]

NON_NUMERIC_COLUMNS = {
    # kind: (column builder from y, dtype shown in the message)
    "object strings": (lambda y: np.where(y == 1, "red", "blue").astype(object), "object"),
    "string dtype": (lambda y: pd.array(np.where(y == 1, "red", "blue"), dtype="string"),
                     "string"),
    "text categories": (lambda y: pd.Categorical(np.where(y == 1, "red", "blue")),
                        "category"),
    "mixed object": (lambda y: pd.Series(["red"] + [0.5] * (len(y) - 1), dtype=object),
                     "object"),
    "datetime": (lambda y: pd.date_range("2020-01-01", periods=len(y)), "datetime64"),
    "datetime with tz": (lambda y: pd.date_range("2020-01-01", periods=len(y), tz="UTC"),
                         "datetime64"),
    "timedelta": (lambda y: pd.to_timedelta(np.arange(len(y)), unit="D"), "timedelta64"),
    "period": (lambda y: pd.period_range("2020-01", periods=len(y), freq="M"), "period"),
}


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("kind", list(NON_NUMERIC_COLUMNS))
def test_non_numeric_dataframe_column_is_named(data, name, kind):
    """Issue 22 item 6: a DataFrame's non-numeric column gets an error naming it.

    Before, a datetime, timedelta or period column gave numpy's or pandas'
    error (a DTypePromotionError, "float() argument must be ... not
    'Timestamp'"), and a text column an error naming neither the column nor
    its dtype. The message names the column and its dtype, and the
    preprocessing to use; it shows no data value.
    """
    X, y = data
    build, dtype = NON_NUMERIC_COLUMNS[kind]
    df = pd.DataFrame(X, columns=list("abcd"))
    df["when"] = build(y)
    assert str(df["when"].dtype).startswith(dtype) or dtype in ("object", "string")
    with pytest.raises(ValueError) as info:
        fit(make_any(name), df, y)
    msg = str(info.value)
    assert "needs numeric input" in msg
    # pandas >= 3 stores text as its "str" dtype, even when given object arrays.
    assert f"'when' (dtype {df['when'].dtype})" in msg, msg
    for cue in ("make_private_pipeline", "OneHotEncoder", "categories="):
        assert cue in msg, (cue, msg)
    assert "'a'" not in msg  # the numeric columns are not listed
    assert "red" not in msg and "2020" not in msg  # no data value


def test_every_non_numeric_column_is_named(data):
    X, y = data
    df = pd.DataFrame(X, columns=list("abcd"))
    df["colour"] = np.where(y == 1, "red", "blue")
    df["when"] = pd.date_range("2020-01-01", periods=len(y))
    with pytest.raises(ValueError,
                       match=r"'colour' \(dtype (object|str)\).*'when' \(dtype datetime64"):
        fit(make("DPSGDClassifier"), df, y)


@pytest.mark.parametrize("name", NAMES)
def test_numeric_dataframe_columns_of_any_dtype_fit(data, name):
    """Nullable, boolean, numeric-category and numeric-object columns still convert."""
    X, y = data
    df = pd.DataFrame(X[:, :2], columns=["a", "b"])
    df["flag"] = pd.array(y.astype(bool), dtype="boolean")
    df["count"] = pd.array(y, dtype="Int64")
    df["level"] = pd.Categorical(y)
    df["numbers"] = pd.Series(X[:, 2], dtype=object)
    plain = np.column_stack([X[:, :2], y, y, y, X[:, 2]]).astype(float)
    np.testing.assert_array_equal(_result(fit(make(name), df, y)),
                                  _result(fit(make(name), plain, y)))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape, match", [((0, D), "0 sample"), ((N, 0), "0 feature")])
def test_empty(data, name, shape, match):
    X = np.zeros(shape)
    y = data[1][: shape[0]]
    with pytest.raises(ValueError, match=match):
        fit(make(name), X, y)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_one_row_and_one_class(data, name):
    X, y = data
    with pytest.raises(ValueError, match="at least 2 classes"):
        fit(make(name), X[:1], y[:1])
    with pytest.raises(ValueError, match="at least 2 classes"):
        fit(make(name), X, np.ones_like(y))


def test_one_row_mean_centerer(data):
    # Documented: n = 1 is a valid (if useless) input: the mean of one row is
    # released with noise calibrated to n = 1.
    X, _ = data
    est = fit(make("PrivateMeanCenterer"), X[:1])
    assert np.all(np.isfinite(est.mean_)) and est.noise_std_ == est.noise_multiplier_


@pytest.mark.parametrize("name", NAMES)
def test_extreme_magnitudes_rejected(data, name):
    X, y = data
    with pytest.raises(ValueError, match="squared L2 norm of a row overflows.*Scale the rows"):
        fit(make(name), X * 1e300, y)


@pytest.mark.parametrize("name", NAMES)
def test_large_but_safe_magnitudes_stay_finite(data, name):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow anywhere
        # MLPFeatureDP computes in float32 (overflow bound ~1e18 here); its
        # public gradient is unclipped, so only its DP-SGD methods without
        # public pretraining (every gradient clipped; public_epochs="auto"
        # pretrains when the label is public) stay finite on unscaled data.
        est = (fit(make(name, method="dpsgd", public_epochs=0.0), X * 1e15, y)
               if name == "MLPFeatureDP" else fit(make(name), X * 1e100, y))
    assert np.all(np.isfinite(_result(est)))


# -- dtypes and memory layouts -----------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_float16_upcast(data, name):
    X, y = data
    X16 = X.astype(np.float16)
    est = fit(make(name), X16, y)
    ref = fit(make(name), X16.astype(np.float64), y)
    # MLPFeatureDP's network is float32 (and float16 input becomes float32).
    assert _result(est).dtype == (np.float32 if name == "MLPFeatureDP" else np.float64)
    np.testing.assert_array_equal(_result(est), _result(ref))


@pytest.mark.parametrize("name", NAMES)
def test_non_contiguous_and_read_only(data, name):
    X, y = data
    wide = np.repeat(X, 2, axis=1)[:, ::2]  # strided view, same values
    assert not wide.flags.c_contiguous
    fortran = np.asfortranarray(X)
    read_only = X.copy()
    read_only.setflags(write=False)
    y_ro = y.copy()
    y_ro.setflags(write=False)
    ref = _result(fit(make(name), X.copy(), y.copy()))
    for X_in, y_in in [(wide, y), (fortran, y), (read_only, y_ro)]:
        est = fit(make(name), X_in, y_in)
        np.testing.assert_array_equal(_result(est), ref)
    if name in CLASSIFIERS:
        est.predict(read_only)
        est.predict(wide)
    else:
        est.transform(read_only)


@pytest.mark.parametrize("name", SPARSE_OK)
def test_sparse_explicit_zeros(data, name):
    X, y = data
    X = np.where(np.abs(X) < 0.4, 0.0, X)
    clean = sp.csr_matrix(X)
    # Same matrix with explicit zeros stored, in unsorted column order.
    explicit = sp.csr_matrix((X.ravel(), np.tile(np.arange(D), N),
                              np.arange(0, N * D + 1, D)), shape=X.shape)
    assert explicit.nnz == N * D > clean.nnz
    ref = fit(make(name), clean, y)
    est = fit(make(name), explicit, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(est.predict(explicit), ref.predict(clean))


@pytest.mark.parametrize("name", [n for n in NAMES if n not in SPARSE_OK])
def test_sparse_rejected_where_dense_needed(data, name):
    X, y = data
    with pytest.raises(TypeError, match="dense data is required"):
        fit(make(name), sp.csr_matrix(X), y)


@pytest.mark.parametrize("name", NAMES)
def test_mismatched_n_features_at_predict(data, name):
    X, y = data
    est = fit(make(name), X, y)
    method = est.transform if name == "PrivateMeanCenterer" else est.predict
    with pytest.raises(ValueError, match=f"X has {D - 1} features, but {name} is expecting {D}"):
        method(X[:, 1:])


# -- privacy parameters -----------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("param, value", [
    ("epsilon", 0.0), ("epsilon", -1.0), ("epsilon", np.nan), ("epsilon", np.inf),
    ("epsilon", "1"), ("delta", 0.0), ("delta", 1.0), ("delta", -1e-5), ("delta", np.nan),
])
def test_invalid_budget(data, name, param, value):
    X, y = data
    with pytest.raises(ValueError, match=f"'{param}' parameter of {name} must be"):
        fit(make(name, **{param: value}), X, y)


def _real_valued_params(est):
    """Parameters constrained by a numeric Interval that do not also accept a bool."""
    from sklearn.utils._param_validation import Interval

    return sorted(key for key, constraints in est._parameter_constraints.items()
                  if isinstance(constraints, list) and "boolean" not in constraints
                  and any(isinstance(c, Interval) for c in constraints))


BOOL_CASES = [(name, param) for name in ALL_NAMES
              for param in _real_valued_params(make_any(name))]


def test_bool_cases_cover_the_budget_of_every_estimator():
    for name in ALL_NAMES:
        params = {p for n, p in BOOL_CASES if n == name}
        assert {"epsilon", "delta"} <= params, (name, params)


@pytest.mark.parametrize("name, param", BOOL_CASES)
@pytest.mark.parametrize("value", [True, False, np.True_])
def test_bool_refused_for_numeric_parameters(data, name, param, value):
    """Issue 22 item 6: ``epsilon=True`` was accepted as 1 (bool is an int in Python).

    The shared Interval constraint of sklearn_fdp._validation refuses bools,
    for every estimator's numeric parameters.
    """
    X, y = data
    with pytest.raises(ValueError, match=f"'{param}' parameter of {name} must be .*"
                                         f"Got {value!r} instead"):
        fit(make_any(name, **{param: value}), X, y)


@pytest.mark.parametrize("name", CLASSIFIERS)
@pytest.mark.parametrize("param, value", [("max_grad_norm", 0.0), ("max_grad_norm", -1.0),
                                          ("noise_multiplier", -1.0),
                                          ("noise_multiplier", 0.0)])
def test_invalid_noise_parameters(data, name, param, value):
    X, y = data
    with pytest.raises(ValueError, match=f"'{param}' parameter of {name} must be"):
        fit(make(name, **{param: value}), X, y)


@pytest.mark.parametrize("name", [n for n in ["DPSGDClassifier", "FeatureDPLogisticRegression",
                                               "DPSGDFClassifier", "MLPFeatureDP"]
                                  if n in NAMES])
def test_conflicting_privacy_parameters(data, name):
    X, y = data
    with pytest.raises(ValueError, match="give `epsilon`.*or.*`noise_multiplier`"):
        fit(make(name, epsilon=None, noise_multiplier=None), X, y)
    extra = {"epsilon_mean": 0.1} if name == "DPSGDFClassifier" else {}
    with pytest.raises(BudgetExceededError, match="Raise noise_multiplier"):
        fit(make(name, epsilon=0.5, noise_multiplier=0.5, **extra), X, y)
    with pytest.raises(ValueError, match="accountant='pld'"):
        fit(make(name, neighboring="replace", accountant="rdp"), X, y)
    with pytest.raises(ValueError, match="batch_size <= n_samples"):
        fit(make(name, batch_size=N + 1), X, y)


def test_conflicting_dpsgdf_budget_split(data):
    X, y = data
    with pytest.raises(ValueError, match="`epsilon_mean` of DPSGDFClassifier is 2.0 but the "
                                         "total `epsilon` is 1.0"):
        fit(make("DPSGDFClassifier", epsilon=1.0, epsilon_mean=2.0), X, y)


def test_conflicting_adamix_budget(data):
    X, y = data
    with pytest.raises(BudgetExceededError, match="Use noise_multiplier >="):
        fit(make("AdaMixClassifier", epsilon=0.1, noise_multiplier=1.0), X, y)
    with pytest.raises(ValueError, match="marks all 120 records public"):
        fit(make("AdaMixClassifier"), X, y, public_mask=np.ones(N, dtype=bool))
    with pytest.raises(ValueError, match="needs l2_regularization > 0"):
        fit(make("AdaMixClassifier", variant="theory", l2_regularization=0.0), X, y)


def test_conflicting_fdp_pretraining(data):
    X, y = data
    with pytest.raises(ValueError, match="public_epochs=2.0 .* needs label_public=True"):
        fit(make("FeatureDPLogisticRegression", public_epochs=2.0, label_public=False), X, y)


@pytest.mark.parametrize("name", NAMES)
def test_delta_above_one_over_n_warns(data, name):
    X, y = data
    with pytest.warns(PrivacyLeakWarning, match=r"delta=0.01 of .* is >= 1/n_samples"):
        fit(make(name, delta=0.01), X, y)


# -- feature specs (FeatureDPLogisticRegression) ---------------------------------


def _frame(data):
    X, y = data
    return pd.DataFrame(X, columns=["age", "hours", "sex", "race"]), pd.Series(y, name="income")


@pytest.mark.parametrize("param", ["public_features", "private_features"])
def test_feature_spec_naming_the_label(data, param):
    X, y = _frame(data)
    spec = {"public_features": ["age", "income"], "private_features": ["sex", "income"]}
    est = make("FeatureDPLogisticRegression").set_params(private_features=None)
    est.set_params(**{param: spec[param]})
    with pytest.raises(ValueError, match=f"`{param}` of FeatureDPLogisticRegression names "
                                         "'income', which is the label.*label_public"):
        fit(est, X, y)


def test_public_column_named_like_the_private_label_warns(data):
    X, y = _frame(data)
    X["income"] = y.to_numpy() * 0.1
    est = make("FeatureDPLogisticRegression", private_features=None,
               public_features=["age", "income"], label_public=False)
    with pytest.warns(PrivacyLeakWarning, match="label would leak"):
        fit(est, X, y)


@pytest.mark.parametrize("spec, match", [
    (dict(public_features=[0], private_features=[1]), "exactly one of"),
    (dict(private_features=None), "exactly one of"),
    (dict(private_features=[7]), "out of range"),
    (dict(private_features=["sex"]), "no feature names"),
    (dict(private_features=[], label_public=True), "nothing is protected"),
])
def test_bad_feature_specs(data, spec, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        fit(make("FeatureDPLogisticRegression", **spec), X, y)


# -- a failing fit changes nothing ---------------------------------------------------


def _failing_inputs(name, X, y):
    """(description, X, y, params) that make fit raise after a good fit."""
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    cases = [
        ("nan", X_nan, y, {}),
        ("fewer features, one class", X_nan[:, :3], np.zeros(N, dtype=int), {}),
        ("huge", X * 1e300, y, {}),
        ("text", pd.DataFrame({"a": ["x"] * N}), y, {}),
        ("bad delta", X, y, {"delta": 2.0}),
    ]
    if name in CLASSIFIERS:
        cases.append(("one class", X[:, :2], np.ones(N, dtype=int), {}))
    if name in ["DPSGDClassifier", "FeatureDPLogisticRegression", "DPSGDFClassifier",
                "MLPFeatureDP"]:
        cases.append(("budget", X[:, :2], y, {"epsilon": 0.5, "noise_multiplier": 0.5,
                                              "epsilon_mean": 0.1}
                      if name == "DPSGDFClassifier"
                      else {"epsilon": 0.5, "noise_multiplier": 0.5}))
        cases.append(("batch", X[:, :2], y, {"batch_size": N + 5}))
    if name in ["FeatureDPLogisticRegression", "MLPFeatureDP"]:
        cases.append(("spec", X[:, :2], y, {"private_features": [5]}))
    if name == "MLPFeatureDP":
        cases.append(("pretraining", X[:, :2], y, {"public_epochs": 1.0,
                                                   "label_public": False}))
        cases.append(("hidden", X[:, :2], y, {"hidden_layer_sizes": (0,)}))
    if name == "AdaMixClassifier":
        cases.append(("budget", X[:, :2], y, {"epsilon": 0.01}))
    return cases


@pytest.mark.parametrize("name", NAMES)
def test_failing_fit_leaves_fitted_estimator_unchanged(data, name):
    X, y = data
    df = pd.DataFrame(X, columns=["age", "hours", "sex", "race"])
    est = fit(make(name), df, y)  # with feature names, so their loss would show
    state = _fitted_state(est)
    params = est.get_params()
    for what, X_bad, y_bad, bad_params in _failing_inputs(name, X, y):
        est.set_params(**bad_params)
        with pytest.raises((ValueError, TypeError)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit(est, X_bad, y_bad)
        est.set_params(**params)
        _assert_same_state(state, _fitted_state(est))
    # and it still predicts as before
    out = est.transform(df) if name == "PrivateMeanCenterer" else est.predict(df)
    assert len(out) == N


# -- MLPFeatureDP specifics ------------------------------------------------------------

needs_torch = pytest.mark.skipif(torch is None, reason="MLPFeatureDP needs torch")


@needs_torch
@pytest.mark.parametrize("param", ["public_features", "private_features"])
def test_mlp_feature_spec_naming_the_label(data, param):
    X, y = _frame(data)
    spec = {"public_features": ["age", "income"], "private_features": ["sex", "income"]}
    est = make("MLPFeatureDP", **{"private_features": None, param: spec[param]})
    with pytest.raises(ValueError, match=f"`{param}` of MLPFeatureDP names 'income', which "
                                         "is the label.*label_public"):
        fit(est, X, y)
    # method="dp" ignores the specs, so it does not look at them.
    fit(make("MLPFeatureDP", **{"method": "dp", "private_features": None,
                                param: spec[param]}), X, y)


@needs_torch
def test_mlp_public_column_named_like_the_private_label_warns(data):
    X, y = _frame(data)
    X["income"] = y.to_numpy() * 0.1
    est = make("MLPFeatureDP", private_features=None, public_features=["age", "income"],
               label_public=False)
    with pytest.warns(PrivacyLeakWarning, match="label would leak"):
        fit(est, X, y)


@needs_torch
@pytest.mark.parametrize("label_public", [True, False])
def test_mlp_divergence_on_unscaled_data_raises(data, label_public):
    # Documented: FDP Algorithm 1 adds the exact (unclipped) public gradient,
    # which grows with the scale of X; when training diverges, fit raises
    # rather than storing non-finite weights (and a fitted model is kept).
    # (At 1e9 the weights now stay finite, ~1e21: the private clipped sum no
    # longer turns NaN through the float32 closed-form norm, issue 16 item 4;
    # and public columns above MLPFeatureDP's MAX_PUBLIC_ABS train in float64,
    # which stays finite at 1e12 too. 1e18 is near the largest scale whose
    # squared row norms fit float32, which the MLP still requires.)
    X, y = data
    est = fit(make("MLPFeatureDP", label_public=label_public), X, y)
    state = _fitted_state(est)
    with pytest.raises(ValueError, match="diverged.*Scale the columns"):
        fit(est, X * 1e18, y)
    _assert_same_state(state, _fitted_state(est))


@needs_torch
def test_mlp_classes_unseen_in_a_poisson_batch(data):
    # Documented: the classes are public (taken from y); a batch that misses a
    # class (or is empty) still updates every output unit by noise only, and
    # predict_proba has a column for every class.
    X, y = data
    y = y.copy()
    y[:3] = 2  # a rare third class: most batches of ~2 rows never see it
    est = fit(make("MLPFeatureDP", batch_size=2, epochs=1), X, y)
    np.testing.assert_array_equal(est.classes_, [0, 1, 2])
    proba = est.predict_proba(X)
    assert proba.shape == (N, 3) and np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(1), 1.0)


@needs_torch
def test_mlp_bad_hidden_layer_sizes(data):
    X, y = data
    for value in [(0,), (8, -1), "8", (2.5,), (True,)]:
        with pytest.raises(ValueError, match="`hidden_layer_sizes` of MLPFeatureDP must be"):
            fit(make("MLPFeatureDP", hidden_layer_sizes=value), X, y)


# -- regressors (issue 31) ----------------------------------------------------

from sklearn_fdp import DPSGDRegressor, FeatureDPLinearRegression, FeatureDPSGDRegressor  # noqa: E402
from sklearn_fdp.exceptions import FdpWarning  # noqa: E402

LO, HI = -3.0, 3.0
REGRESSORS = {
    "DPSGDRegressor": DPSGDRegressor(y_bounds=(LO, HI), epsilon=5.0, delta=1e-6, epochs=2,
                                     accountant="rdp", random_state=0),
    "FeatureDPSGDRegressor": FeatureDPSGDRegressor(
        private_features=[0], label_public=True, y_bounds=(LO, HI), epsilon=5.0, delta=1e-6,
        epochs=2, accountant="rdp", random_state=0),
    "FeatureDPLinearRegression": FeatureDPLinearRegression(
        private_features=[0], y_bounds=(LO, HI), epsilon=5.0, delta=1e-6, random_state=0),
}
if torch is not None:
    from sklearn_fdp import MLPFeatureDPRegressor

    REGRESSORS["MLPFeatureDPRegressor"] = MLPFeatureDPRegressor(
        hidden_layer_sizes=(8,), private_features=[0], label_public=True, y_bounds=(LO, HI),
        epsilon=5.0, delta=1e-6, epochs=2, accountant="rdp", device="cpu", random_state=0)
REG_NAMES = list(REGRESSORS)
SGD_REGRESSORS = [n for n in REG_NAMES if n != "FeatureDPLinearRegression"]


def make_reg(name, **params):
    return clone(REGRESSORS[name]).set_params(**params)


@pytest.fixture(scope="module")
def reg_data(data):
    X, _ = data
    y = 2.0 * X[:, 0] - X[:, 1] + 0.1 * np.random.default_rng(1).normal(size=N)
    return X, y


@pytest.mark.parametrize("name", REG_NAMES)
def test_regressor_predictions_stay_in_y_bounds_on_unscaled_rows(reg_data, name):
    # Documented: predictions are clipped to y_bounds (post-processing). Rows
    # a million times beyond norm 1 used to give predictions of +-3,000 from
    # DPSGDRegressor(y_bounds=(-3, 3)), silently; a warning now names the rows
    # (FeatureDPLinearRegression: its public-row-bound warning).
    # MLPFeatureDPRegressor's unclipped public gradient diverges there: the
    # error names the scale of X as the cause (not the noise or the step).
    X, y = reg_data
    est = make_reg(name)
    if name == "MLPFeatureDPRegressor":
        with pytest.raises(ValueError, match="diverged.*cause is the scale of X"):
            fit(est, X * 1e6, y)
        est = fit(make_reg(name), X, y)
        assert np.all(np.abs(est.predict(X * 1e6)) <= HI)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(est, X * 1e6, y)
    pred = est.predict(X * 1e6)
    assert np.all((pred >= LO) & (pred <= HI)) and np.all(np.isfinite(pred))
    messages = [str(w.message) for w in caught if issubclass(w.category, FdpWarning)]
    if name == "DPSGDRegressor":
        assert any("rows of X have L2 norm above 1" in m for m in messages), messages
    if name == "FeatureDPLinearRegression":
        assert any("public row-norm bound" in m for m in messages), messages


def test_dpsgd_regressor_quiet_on_unit_rows(reg_data):
    X, y = reg_data
    fit(make_reg("DPSGDRegressor"), X, y)  # FdpWarning is an error in the tests


@pytest.mark.parametrize("name", SGD_REGRESSORS)
def test_regressor_huge_learning_rate_raises_diverged_naming_it(reg_data, name):
    # learning_rate=1e300 left coef_ ~ 1e299 (finite) with no error; now the
    # exploded weights raise "diverged" with the cause, and an earlier fit is kept.
    X, y = reg_data
    est = fit(make_reg(name), X, y).set_params(learning_rate=1e300)
    state = _fitted_state(est)
    with pytest.raises(ValueError, match=r"diverged.*cause is the learning rate.*1e\+300"):
        fit(est, X, y)
    _assert_same_state(state, _fitted_state(est))


@needs_torch
def test_mlp_regressor_noise_divergence_names_the_noise(reg_data):
    # MLPFeatureDPRegressor at a tiny budget predicted -1.5e11 (or raised
    # "diverged ... scale the columns" with X in [-1, 1]): the cause is sigma.
    X, y = reg_data
    est = make_reg("MLPFeatureDPRegressor", epsilon=None, noise_multiplier=1e36, epochs=3,
                   accountant="pld",  # RDP cannot account sigma = 1e36 (issue 32: no silent fallback)
                   label_public=False)
    with pytest.raises(ValueError,
                       match=r"diverged.*not finite.*cause is the noise: noise_multiplier=1e\+36"):
        fit(est, X, y)


@pytest.mark.parametrize("name", REG_NAMES)
@pytest.mark.parametrize("where, value, match", [
    ("X", np.nan, "Input X contains NaN"), ("X", 1e300, "magnitude above|infinity|too large"),
    ("y", np.nan, "Input y contains NaN|y contains NaN"), ("X1d", None, "Expected 2D array")])
def test_regressor_broken_values(reg_data, name, where, value, match):
    X, y = reg_data
    X, y = X.copy(), y.copy()
    if where == "X":
        X[3, 1] = value
    elif where == "y":
        y[3] = value
    else:
        X = X[:, 0]
    with pytest.raises(ValueError, match=match):
        fit(make_reg(name), X, y)


# -- the search: every row validated before the split (issue 31) --------------


def _validation_rows(search, n):
    """The rows the search scores (its split, from its own seed)."""
    split_seed = search._root_seed(False).spawn(4)[1]
    perm = np.random.default_rng(split_seed).permutation(n)
    return np.sort(perm[n - int(round(search.validation_fraction * n)):])


@pytest.mark.parametrize("where, value, match", [
    ("y", np.nan, "Input y contains NaN"),
    ("X", np.nan, "Input X contains NaN"),
    ("X", 1e300, "squared L2 norm of a row overflows.*Scale the rows")])
@pytest.mark.parametrize("split", ["train", "validation"])
def test_search_validates_rows_of_either_split(data, where, value, match, split):
    # A NaN label or a 1e300 cell in the validation split was scored silently
    # (classes_ became [0., 1.]); in the training split it raised. Now the
    # same error either way, before any trial.
    X, y = data
    X, y = X.copy(), y.astype(float)
    search = _search()
    val = _validation_rows(search, N)
    row = int(val[0]) if split == "validation" else int(np.setdiff1d(np.arange(N), val)[0])
    if where == "y":
        y[row] = value
    else:
        X[row, 1] = value
    with pytest.raises(ValueError, match=match):
        fit(search, X, y)


def test_search_1d_X_gets_sklearns_message(data):
    X, y = data
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        fit(_search(), X[:, 0], y)


# -- the schema preprocessor (issue 31) ---------------------------------------

SCHEMA = {"numeric": {"age": {"bounds": [17, 90]}, "income": {"bounds": [0, 1e5]}},
          "categorical": {"sex": {"categories": ["F", "M"]}}, "protected": ["sex"]}


def _schema_frame():
    return pd.DataFrame({"age": [30.0, 95.0, 41.0], "income": [5e4, 0.0, 2e4],
                         "sex": ["F", "M", "F"]})


@pytest.mark.parametrize("input_columns", [False, True])
def test_schema_preprocessor_1d_input_gets_sklearns_message(input_columns):
    # A 1-D array raised IndexError from inside the ColumnTransformer.
    from sklearn_fdp.preprocessing import make_tabular_preprocessor

    schema = dict(SCHEMA, input_columns=["age", "income", "sex"]) if input_columns else SCHEMA
    pre = make_tabular_preprocessor(schema)
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        pre.fit(np.array([30.0, 40.0, 50.0]))
    pre.fit(_schema_frame())  # the 2-D frame still fits
    # transform: scikit-learn's ColumnTransformer checks the width first.
    with pytest.raises(ValueError, match="Expected 2D array|does not contain any features"):
        pre.transform(np.array([30.0, 40.0, 50.0]))


@pytest.mark.parametrize("value, match", [(np.inf, "infinite|inf|finite"),
                                          ("seventeen", "numeric|convert|string")])
def test_schema_preprocessor_broken_numeric_cells(value, match):
    from sklearn_fdp.preprocessing import make_tabular_preprocessor

    X = _schema_frame().astype({"age": object})
    X.loc[1, "age"] = value
    X0 = X.copy()
    with pytest.raises(ValueError, match=match):
        make_tabular_preprocessor(SCHEMA).fit_transform(X)
    assert X.equals(X0)


# -- budgets at the edges of the float range (issue 31) -----------------------


@pytest.mark.parametrize("name", NAMES)
def test_epsilon_1e300_fits_or_names_the_limit(data, name):
    # AdaMixClassifier and PrivateMeanCenterer raised SciPy's "function value
    # at x=0.1 is NaN" at epsilon=1e300; every estimator now either fits (the
    # DP-SGD calibrations keep their noise floor, epsilon_ below the budget) or
    # raises the library's ValueError naming the largest budget.
    X, y = data
    est = make(name, epsilon=1e300)
    if name == "DPSGDFClassifier":
        est.set_params(epsilon_mean=1.0)
    try:
        fit(est, X, y, **({"public_mask": np.arange(N) < 12} if name == "AdaMixClassifier"
                          else {}))
    except ValueError as exc:  # BudgetExceededError included
        assert ("above the largest budget" in str(exc) or "allows more than" in str(exc)) \
            and "NaN" not in str(exc), exc
        assert name in ("AdaMixClassifier", "PrivateMeanCenterer"), exc
    else:
        assert est.epsilon_ <= 1e300


def test_adamix_auto_noise_at_epsilon_1e300_plans_like_any_huge_epsilon():
    # Its "auto" σ solved for a single Gaussian's σ at ε = 1e300 (SciPy's NaN);
    # above ε ~ 1e3 the rule's answer is its floor, at any ε.
    huge = AdaMixClassifier(epsilon=1e300, delta=1e-6).privacy_plan(N, D)
    large = AdaMixClassifier(epsilon=1e6, delta=1e-6).privacy_plan(N, D)
    assert huge.noise_multiplier == large.noise_multiplier == 2.5
    assert huge.details["steps"] == large.details["steps"] == 10_000
    assert huge.epsilon == large.epsilon < 1e6


def test_gaussian_calibration_names_its_largest_epsilon():
    from sklearn_fdp import accounting

    largest = accounting.gaussian_epsilon(1e-3, 1e-6)
    assert accounting.gaussian_noise_multiplier(largest, 1e-6) == pytest.approx(1e-3, rel=1e-6)
    with pytest.raises(ValueError, match=r"epsilon`=1e\+300 is above the largest budget.*504752"):
        accounting.gaussian_noise_multiplier(1e300, 1e-6)

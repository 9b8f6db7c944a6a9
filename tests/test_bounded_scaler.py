"""BoundedScaler: declared bounds, clipping, optional log1p, nothing learnt (issue 17)."""

import copy
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_fdp import BoundedScaler, FeatureDPLogisticRegression, privacy_report
from sklearn_fdp import preprocessing
from sklearn_fdp._steps import learns_from_data as _learns_from_data
from sklearn_fdp.pipeline import audit_preprocessing, make_private_pipeline

# tests/test_common.py checks BoundedScaler((-10.0, 10.0)); these cover the other forms.
VARIANTS = [
    BoundedScaler((-0.5, 20.0), log=True),
    BoundedScaler((-3.0, 3.0), feature_range=(-1.0, 1.0)),
    # Issue 20: signed-log, and a missing-value indicator (one more column per column).
    BoundedScaler((-50.0, 50.0), scale="signed-log", missing="indicator", fill_value=0.0),
]


@parametrize_with_checks(VARIANTS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_exported_next_to_private_mean_centerer():
    assert preprocessing.BoundedScaler is BoundedScaler
    assert "BoundedScaler" in preprocessing.__all__


def test_linear_log_clipping_and_range():
    X = np.array([[17.0, 0.0, -5.0],
                  [53.5, 99.0, 0.0],
                  [-1e9, 1e9, 5.0]])
    scaler = BoundedScaler([(17.0, 90.0), (0.0, 99999.0), (-5.0, 5.0)], log=[False, True, False])
    Z = scaler.fit_transform(X)
    expected = np.array([
        [0.0, 0.0, 0.0],
        [0.5, np.log1p(99.0) / np.log1p(99999.0), 0.5],
        [0.0, 1.0, 1.0],  # clipped to the bounds
    ])
    np.testing.assert_array_equal(Z, expected)
    ranged = BoundedScaler([(17.0, 90.0), (0.0, 99999.0), (-5.0, 5.0)],
                           log=[False, True, False], feature_range=(-2.0, 2.0))
    np.testing.assert_allclose(ranged.fit_transform(X), expected * 4.0 - 2.0, rtol=1e-15)


def test_log_with_negative_low():
    # log1p between log1p(low) and log1p(high): low -> 0, high -> 1.
    X = np.array([[-0.5], [0.0], [10.0], [20.0]])
    Z = BoundedScaler((-0.5, 10.0), log=True).transform(X)
    lo, hi = np.log1p(-0.5), np.log1p(10.0)
    np.testing.assert_array_equal(Z[:, 0], [0.0, (0.0 - lo) / (hi - lo), 1.0, 1.0])


@pytest.mark.parametrize("dtype, out", [(np.float32, np.float32), (np.float64, np.float64),
                                        (np.int64, np.float64)])
def test_dtype(dtype, out):
    X = np.array([[1, 2], [3, 4]], dtype=dtype)
    scaler = BoundedScaler((0.0, 4.0)).fit(X)
    assert scaler.transform(X).dtype == out
    assert scaler.inverse_transform(scaler.transform(X)).dtype == out


def test_inverse_transform_round_trip_and_clipped_values():
    X = np.array([[20.0, 3.0], [60.0, 5000.0], [100.0, -1.0]])
    scaler = BoundedScaler([(17.0, 90.0), (0.0, 99999.0)], log=[False, True],
                           feature_range=(-1.0, 1.0)).fit(X)
    back = scaler.inverse_transform(scaler.transform(X))
    np.testing.assert_allclose(back[:2], X[:2], rtol=1e-12)
    np.testing.assert_allclose(back[2], [90.0, 0.0], atol=1e-12)  # clipped: the bounds


def test_fit_learns_nothing_and_transform_needs_no_fit():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(50, 3)), 100.0 * rng.normal(size=(7, 3))
    scaler = BoundedScaler([(-1.0, 1.0), (-2.0, 2.0), (0.0, 1.0)])
    Z = clone(scaler).transform(A)  # never fitted
    np.testing.assert_array_equal(clone(scaler).fit(A).transform(A), Z)
    np.testing.assert_array_equal(clone(scaler).fit(B).transform(A), Z)
    fitted = clone(scaler).fit(B)
    assert set(vars(fitted)) - set(vars(scaler)) == {"n_features_in_"}
    assert not fitted.__sklearn_tags__().requires_fit


def test_dict_bounds_follow_the_column_names():
    df = pd.DataFrame({"b": [0.0, 50.0, 200.0], "a": [1.0, 2.0, 3.0]})
    scaler = BoundedScaler({"a": (1.0, 3.0), "b": (0.0, 100.0)}, log=[False, True]).fit(df)
    Z = scaler.transform(df)
    np.testing.assert_allclose(Z[:, 0], np.log1p([0.0, 50.0, 100.0]) / np.log1p(100.0))
    np.testing.assert_array_equal(Z[:, 1], [0.0, 0.5, 1.0])
    assert list(scaler.get_feature_names_out()) == ["b", "a"]
    out = scaler.set_output(transform="pandas").transform(df)
    assert list(out.columns) == ["b", "a"]
    # Unfitted: the names are read from the DataFrame too.
    np.testing.assert_array_equal(clone(scaler).set_output(transform="default").transform(df), Z)


def test_nothing_passed_is_mutated():
    bounds = np.array([[0.0, 1.0], [0.0, 10.0]])
    log = np.array([False, True])
    mapping = {"x": [0.0, 1.0], "y": (0.0, 10.0)}
    X = np.array([[2.0, -3.0], [0.5, 5.0]])
    kept = [bounds.copy(), log.copy(), copy.deepcopy(mapping), X.copy()]
    scaler = BoundedScaler(bounds, log=log).fit(X)
    scaler.inverse_transform(scaler.transform(X))
    df = pd.DataFrame(X, columns=["x", "y"])
    BoundedScaler(mapping, log=log).fit(df).transform(df)
    assert scaler.feature_bounds is bounds and scaler.log is log
    for before, after in zip(kept, [bounds, log, mapping, X], strict=True):
        if isinstance(before, dict):
            assert before == after
        else:
            np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize("params, X, message", [
    ({"feature_bounds": [(0, 1)] * 3}, np.zeros((2, 2)), "has 3 (low, high) pairs but X has 2"),
    ({"feature_bounds": (1.0, 0.0)}, np.zeros((2, 2)), "(1.0, 0.0); need finite numbers"),
    ({"feature_bounds": (2.0, 2.0)}, np.zeros((2, 2)), "low < high"),
    ({"feature_bounds": [(0, 1), (0, np.inf)]}, np.zeros((2, 2)), "column 1 has"),
    ({"feature_bounds": (0, np.nan)}, np.zeros((2, 2)), "need finite numbers"),
    ({"feature_bounds": [(0, 1, 2)]}, np.zeros((2, 1)), "must be (low, high) pairs"),
    ({"feature_bounds": [("a", "b")]}, np.zeros((2, 1)), "must hold numbers"),
    ({"feature_bounds": (-1.0, 3.0), "log": True}, np.zeros((2, 1)), "log1p needs low > -1"),
    ({"feature_bounds": (0, 1), "log": [True]}, np.zeros((2, 2)), "log of BoundedScaler has 1"),
    ({"feature_bounds": (0, 1), "log": [0, 1]}, np.zeros((2, 2)), "list of bools"),
    ({"feature_bounds": (0, 1), "feature_range": (1.0, 1.0)}, np.zeros((2, 2)),
     "feature_range of BoundedScaler must be two finite numbers"),
    ({"feature_bounds": (0, 1), "feature_range": (0.0, "x")}, np.zeros((2, 2)),
     "feature_range"),
    ({"feature_bounds": {"a": (0, 1)}}, np.zeros((2, 1)), "X has no string column names"),
    ({"feature_bounds": {"a": (0, 1), "z": (0, 1)}}, pd.DataFrame({"a": [0.0], "b": [1.0]}),
     "missing: ['b'], not in X: ['z']"),
    ({"feature_bounds": {"a": (0, 1), "b": (0, 1)}, "log": [True]},
     pd.DataFrame({"a": [0.0], "b": [1.0]}), "log of BoundedScaler has 1 entries but "
                                            "feature_bounds has 2"),
])
def test_bad_parameters_raise_a_clear_value_error(params, X, message):
    scaler = BoundedScaler(**params)
    with pytest.raises(ValueError) as fit_error:
        scaler.fit(X)
    assert message in str(fit_error.value)
    assert not hasattr(scaler, "n_features_in_")
    with pytest.raises(ValueError) as transform_error:
        BoundedScaler(**params).transform(X)
    assert str(transform_error.value) == str(fit_error.value)


def test_names_the_column_in_messages():
    df = pd.DataFrame({"age": [30.0], "income": [1.0]})
    with pytest.raises(ValueError, match="column 'income' has"):
        BoundedScaler([(17, 90), (5, 5)]).fit(df)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_missing_and_infinite_values_are_refused(value):
    X = np.array([[0.5, value]])
    with pytest.raises(ValueError, match="NaN|infinity"):
        BoundedScaler((0.0, 1.0)).fit(X)
    with pytest.raises(ValueError, match="NaN|infinity"):
        BoundedScaler((0.0, 1.0)).fit(np.zeros((1, 2))).transform(X)


def test_transform_checks_the_fitted_shape():
    scaler = BoundedScaler((0.0, 1.0)).fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="X has 3 features"):
        scaler.transform(np.zeros((3, 3)))


def test_listed_as_free_by_the_tracer_and_the_report():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(18, 80, 200).astype(float),
                       "income": rng.exponential(1e4, 200)})
    y = (df["age"] > 45).astype(int).to_numpy()
    head = ColumnTransformer([("num", BoundedScaler({"age": (17, 90), "income": (0, 1e6)},
                                                    log=[False, True]), ["age", "income"])])
    clf = FeatureDPLogisticRegression(private_features=["num__income"], epsilon=1.0, delta=1e-5,
                                      epochs=1, accountant="rdp", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no PrivacyLeakWarning
        pipe = make_private_pipeline(head, clf).fit(df, y)
    assert [s.status for s in pipe.preprocessing_audit_] == ["free"]
    assert [s.status for s in audit_preprocessing(pipe)] == ["free"]
    assert pipe.protected_input_columns_ == ["income"]
    assert not _learns_from_data(pipe[0].named_transformers_["num"])
    report = privacy_report(pipe, pld=False)
    assert report.is_private
    assert "BoundedScaler): data-independent, free" in str(report)


# -- issue 20: scale="linear"/"log"/"signed-log", the missing-value policy ----------------


def test_scale_maps_are_the_documented_formulas():
    X = np.array([[-1e9, -1e9, -1e9], [-3.0, 0.0, 2.5], [7.0, 99.0, 1e9]])
    bounds = [(-10.0, 10.0), (0.0, 99999.0), (-100.0, 1000.0)]
    Z = BoundedScaler(bounds, scale=["linear", "log", "signed-log"]).fit_transform(X)

    def s(v):
        return np.sign(v) * np.log1p(np.abs(v))

    expected = np.array([
        [0.0, 0.0, 0.0],
        [(-3.0 + 10) / 20, 0.0, (s(2.5) - s(-100.0)) / (s(1000.0) - s(-100.0))],
        [(7.0 + 10) / 20, np.log1p(99.0) / np.log1p(99999.0), 1.0],
    ])
    np.testing.assert_allclose(Z, expected, rtol=1e-14, atol=1e-15)
    # scale="log" is log=True, bit for bit.
    np.testing.assert_array_equal(BoundedScaler((0.0, 99.0), scale="log").fit_transform(X[:, 1:2]),
                                  BoundedScaler((0.0, 99.0), log=True).fit_transform(X[:, 1:2]))


def test_signed_log_is_monotone_over_both_signs_and_inverts():
    x = np.linspace(-5000.0, 5000.0, 2001).reshape(-1, 1)
    scaler = BoundedScaler((-1000.0, 2000.0), scale="signed-log", feature_range=(-1.0, 1.0))
    Z = scaler.fit_transform(x)
    assert np.all(np.diff(Z[:, 0]) >= 0) and Z.min() == -1.0 and Z.max() == 1.0
    inside = (x[:, 0] >= -1000.0) & (x[:, 0] <= 2000.0)
    np.testing.assert_allclose(scaler.inverse_transform(Z)[inside], x[inside], rtol=1e-12)


@pytest.mark.parametrize("missing", ["fill", "indicator"])
def test_missing_values_become_the_declared_constant(missing):
    X = np.array([[np.nan, 4.0], [2.0, np.nan], [8.0, 1.0]])
    scaler = BoundedScaler([(0.0, 8.0), (0.0, 4.0)], missing=missing, fill_value=[4.0, None])
    Z = scaler.fit_transform(X)
    values = Z[:, [0, 2]] if missing == "indicator" else Z
    np.testing.assert_array_equal(values, [[0.5, 1.0], [0.25, 0.0], [1.0, 0.25]])
    if missing == "indicator":  # each flag right after its column
        np.testing.assert_array_equal(Z[:, [1, 3]], [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
        assert list(scaler.get_feature_names_out()) == ["x0", "x0_missing", "x1", "x1_missing"]
        back = scaler.inverse_transform(Z)
        np.testing.assert_array_equal(np.isnan(back), np.isnan(X))
    else:
        assert list(scaler.get_feature_names_out()) == ["x0", "x1"]


def test_missing_policy_per_column_and_its_errors():
    df = pd.DataFrame({"a": [1.0, np.nan], "b": [np.nan, 2.0]})
    scaler = BoundedScaler({"a": (0, 2), "b": (0, 4)}, missing=["indicator", "error"])
    with pytest.raises(ValueError, match="NaN in column 'b', whose missing policy is 'error'"):
        scaler.fit(df)
    Z = BoundedScaler({"a": (0, 2), "b": (0, 4)}, missing=["indicator", "fill"]).fit(df)
    assert list(Z.get_feature_names_out()) == ["a", "a_missing", "b"]
    with pytest.raises(ValueError, match="infinity"):
        BoundedScaler((0, 1), missing="fill").fit(np.array([[np.inf]]))


@pytest.mark.parametrize("params, message", [
    ({"scale": "exp"}, "scale of BoundedScaler got 'exp'"),
    ({"scale": ["linear"]}, "scale of BoundedScaler has 1 entries but X has 2"),
    ({"scale": "log", "log": True}, "give one of them"),
    ({"missing": "drop"}, "missing of BoundedScaler got 'drop'"),
    ({"missing": "fill", "fill_value": np.nan}, "fill_value of BoundedScaler got nan"),
    ({"missing": "fill", "fill_value": "zero"}, "Got 'zero' instead"),  # sklearn's check
])
def test_new_parameters_are_checked(params, message):
    with pytest.raises(ValueError) as error:
        BoundedScaler((0.0, 1.0), **params).fit(np.zeros((2, 2)))
    assert message in str(error.value)


def test_indicator_is_traced_to_its_own_column():
    """The preprocessing tracer maps x0_missing to x0 (arrays: by _n_features_outs)."""
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 10, (120, 3))
    X[::7, 2] = np.nan
    y = (X[:, 0] > 5).astype(int)
    clf = FeatureDPLogisticRegression(private_features=[2, 3], epsilon=1.0, delta=1e-5,
                                      epochs=1, accountant="rdp", random_state=0)
    scaler = BoundedScaler((0.0, 10.0), missing=["error", "error", "indicator"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no PrivacyLeakWarning
        pipe = make_private_pipeline(scaler, clf).fit(X, y)
    assert pipe.protected_input_columns_ == ["x2"]
    assert [s.status for s in pipe.preprocessing_audit_] == ["free"]

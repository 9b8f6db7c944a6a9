"""make_tabular_preprocessor, row_norm_bounds, propose_schema (issue 20)."""

import copy
import json
import math
import pathlib
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from sklearn_fdp import FeatureDPLogisticRegression, privacy_report
from sklearn_fdp.exceptions import CollapseWarning, PrivacyLeakWarning
from sklearn_fdp.datasets import adult_schema, load_adult, make_adult_preprocessor
from sklearn_fdp.pipeline import audit_preprocessing, make_private_pipeline
from sklearn_fdp.preprocessing import (
    RowNormBounds,
    make_tabular_preprocessor,
    propose_schema,
    row_norm_bounds,
)

from ._helpers import run_doc_blocks

ROOT = pathlib.Path(__file__).resolve().parents[1]

# A second schema, synthetic: every kind of entry, protected numeric and
# categorical columns, an indicator, a signed-log column and a dropped one.
SCHEMA = {
    "numeric": {
        "age": [18, 100],
        "income": {"bounds": [0, 1e6], "scale": "log", "missing": "indicator"},
        "balance": {"bounds": [-1e5, 1e5], "scale": "signed-log", "missing": "fill",
                    "fill_value": 0},
        "score": {"bounds": [0, 10], "missing": "indicator", "fill_value": 10},
    },
    "categorical": {
        "region": ["north", "south", "east", "west"],
        "sex": ["F", "M"],
        "grade": {"categories": [1, 2, 3], "unknown": "ignore"},
    },
    "drop": ["id"],
    "protected": ["income", "sex", "score"],
}
PROTECTED_OUT = ["protected_num__income", "protected_num__income_missing",
                 "protected_num__score", "protected_num__score_missing",
                 "protected_cat__sex_F", "protected_cat__sex_M"]


def _frame(n, seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "id": np.arange(n),
        "age": rng.integers(18, 90, n).astype(float),
        "income": np.where(rng.random(n) < 0.1, np.nan, rng.lognormal(10, 1, n)),
        "balance": rng.normal(0, 3e4, n),
        "score": np.where(rng.random(n) < 0.2, np.nan, rng.uniform(0, 10, n)),
        "region": rng.choice(["north", "south", "east", "west"], n),
        "sex": rng.choice(["F", "M"], n),
        "grade": rng.choice([1.0, 2.0, 3.0], n),
    })


def _block_norms(pre, Z):
    names = list(pre.get_feature_names_out())
    prot = np.array([n.startswith("protected_") for n in names])
    return (np.linalg.norm(Z, axis=1), np.linalg.norm(Z[:, ~prot], axis=1),
            np.linalg.norm(Z[:, prot], axis=1))


# -- building ------------------------------------------------------------------------------


def test_output_layout_and_values():
    X = _frame(5, 0)
    X.loc[0, ["income", "score", "balance"]] = [np.nan, np.nan, np.nan]
    pre = make_tabular_preprocessor(SCHEMA, scale_rows=False).fit(X)
    names = [str(n) for n in pre.get_feature_names_out()]
    assert names == ["num__age", "num__balance", "cat__region_north", "cat__region_south",
                     "cat__region_east", "cat__region_west", "cat__grade_1", "cat__grade_2",
                     "cat__grade_3", *PROTECTED_OUT[:4], *PROTECTED_OUT[4:]]
    Z = pd.DataFrame(pre.transform(X), columns=names)
    assert Z.to_numpy().dtype == np.float64
    np.testing.assert_allclose(Z["num__age"], (X["age"] - 18) / 82, rtol=1e-15)
    # NaN: balance filled with 0 (the middle of the signed-log range), income with
    # its low bound 0 and flagged, score with its declared 10 and flagged.
    assert Z.loc[0, "num__balance"] == pytest.approx(0.5)
    assert Z.loc[0, "protected_num__income"] == 0.0
    assert Z.loc[0, "protected_num__score"] == 1.0
    np.testing.assert_array_equal(Z["protected_num__income_missing"], X["income"].isna())
    np.testing.assert_array_equal(Z["protected_num__score_missing"], X["score"].isna())
    # Float-coded categories compare as strings: 2.0 is "2".
    np.testing.assert_array_equal(Z["cat__grade_2"], X["grade"] == 2.0)
    assert (Z.filter(like="cat__region_").sum(axis=1) == 1).all()

    by_type = make_tabular_preprocessor(SCHEMA, order="type").fit(X)
    assert [str(n) for n in by_type.get_feature_names_out()][:4] == [
        "num__age", "num__income", "num__income_missing", "num__balance"]


def test_learns_nothing_and_mutates_nothing():
    schema = copy.deepcopy(SCHEMA)
    a, b = _frame(300, 1), _frame(7, 2)
    kept = b.copy()
    Z1 = make_tabular_preprocessor(schema).fit(a).transform(b)
    Z2 = make_tabular_preprocessor(schema).fit(b).transform(b)
    np.testing.assert_array_equal(Z1, Z2)
    assert schema == SCHEMA
    pd.testing.assert_frame_equal(b, kept)


def test_arrays_by_position_with_input_columns():
    X = _frame(40, 3)
    schema = {**SCHEMA, "input_columns": list(X.columns)}
    from_frame = make_tabular_preprocessor(schema).fit(X).transform(X)
    arr = X.to_numpy(dtype=object)
    from_array = make_tabular_preprocessor(schema).fit(arr).transform(arr)
    np.testing.assert_array_equal(from_frame, from_array)


def test_unknown_categories():
    X = _frame(4, 4)
    X.loc[0, "region"] = "mars"
    X.loc[1, "region"] = np.nan
    Z = pd.DataFrame(make_tabular_preprocessor(SCHEMA, scale_rows=False).fit(X).transform(X),
                     columns=make_tabular_preprocessor(SCHEMA).fit(X).get_feature_names_out())
    np.testing.assert_array_equal(Z.filter(like="region_").sum(axis=1), [0, 0, 1, 1])
    strict = copy.deepcopy(SCHEMA)  # 'error' for region only, next to 'ignore' columns
    strict["categorical"]["region"] = {"categories": ["north", "south", "east", "west"],
                                       "unknown": "error"}
    for bad in ("mars", np.nan):
        X.loc[0, "region"] = bad
        with pytest.raises(ValueError) as error:
            make_tabular_preprocessor(strict).fit(X.iloc[[0]])
        message = str(error.value)
        assert "categorical column 'region': 1 value(s) outside its declared" in message
        assert "mars" not in message  # the value is not echoed
    X.loc[[0, 1], "region"] = "north"
    X.loc[0, "sex"] = "X"  # sex stays 'ignore'
    Z = make_tabular_preprocessor(strict).fit(X).transform(X)
    assert Z.shape == (4, 15)


# -- the schema's checks -------------------------------------------------------------------


@pytest.mark.parametrize("schema, message", [
    ([], "schema must be a dict"),
    ({"numeric": {"a": [0, 1]}, "colour": {}}, "unknown key(s) ['colour']"),
    ({"numeric": {"a": [1, 0]}}, "schema['numeric']['a']['bounds']: needs low < high"),
    ({"numeric": {"a": [0, math.inf]}}, "high must be finite"),
    ({"numeric": {"a": [0, "x"]}}, "high must be a number"),
    ({"numeric": {"a": [0, 1, "exp"]}}, "schema['numeric']['a']['scale']: must be one of"),
    ({"numeric": {"a": [-2, 1, "log"]}}, "'log' (log1p) needs low > -1"),
    ({"numeric": {"a": {"bounds": [0, 1], "missing": "drop"}}}, "['missing']: must be one of"),
    ({"numeric": {"a": {"bounds": [0, 1], "fill": 0}}}, "unknown key(s) ['fill']"),
    ({"numeric": {"a": {"bounds": [0, 1], "fill_value": math.nan}}},
     "fill_value must be finite"),
    ({"categorical": {"s": []}}, "schema['categorical']['s']['categories']: must be a non-empty"),
    ({"categorical": {"s": ["a", "a"]}}, "lists 'a' twice"),
    ({"categorical": {"s": [1, 1.0]}}, "lists '1' twice (as strings)"),
    ({"categorical": {"s": ["a", None]}}, "that are not categories"),
    ({"categorical": {"s": {"categories": ["a"], "unknown": "other"}}},
     "['unknown']: must be one of"),
    ({"numeric": {"a": [0, 1]}, "categorical": {"a": ["x"]}},
     "column 'a' is in both 'numeric' and 'categorical'"),
    ({"numeric": {"a": [0, 1]}, "protected": ["b"]}, "['protected']: names ['b']"),
    ({"numeric": {"a": [0, 1]}, "protected": "a"}, "must be a list of column names"),
    ({"numeric": {"a": [0, 1]}, "drop": ["a"]}, "column 'a' is in both"),
    ({"drop": ["a"]}, "declares no feature column"),
    ({"numeric": {"a": [0, 1]}, "bounds": {"b": [0, 1]}}, "has both 'bounds' and 'numeric'"),
    ({"numeric": {"a": [0, 1]}, "input_columns": ["b"]}, "lacks the schema's column(s) ['a']"),
])
def test_invalid_schema_names_the_key_and_the_fix(schema, message):
    with pytest.raises(ValueError) as error:
        make_tabular_preprocessor(schema)
    assert message in str(error.value)
    with pytest.raises(ValueError):
        row_norm_bounds(schema)


@pytest.mark.parametrize("kwargs, message", [
    ({"scale_rows": "unit"}, "scale_rows must be"),
    ({"order": "alphabetical"}, "order must be one of"),
    ({"scale_rows": "l2"}, "scale_rows='l2' divides every column by the row's norm"),
])
def test_invalid_options(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make_tabular_preprocessor(SCHEMA, **kwargs)


def test_passthrough_needs_no_row_scaling():
    schema = {"numeric": {"a": [0, 1]}, "passthrough": ["p"]}
    with pytest.raises(ValueError, match=r"passthrough column\(s\) \['p'\] have none"):
        make_tabular_preprocessor(schema)
    X = pd.DataFrame({"a": [0.5, 2.0], "p": [-3.0, 7.0]})
    Z = make_tabular_preprocessor(schema, scale_rows=False).fit(X).transform(X)
    np.testing.assert_array_equal(Z, [[0.5, -3.0], [1.0, 7.0]])
    assert row_norm_bounds(schema, scale_rows=False) == RowNormBounds(math.inf, math.inf, 0.0)


def test_cli_schema_format_is_accepted():
    """docs/examples/adult_schema.json (the command line's --schema) is a schema as it is,
    and gives make_adult_preprocessor's features."""
    cli = json.loads((ROOT / "docs" / "examples" / "adult_schema.json").read_text())
    X_train, _, X_test, _ = load_adult(return_X_y=True)
    Z = make_tabular_preprocessor(cli, order="type").fit(X_train).transform(X_test)
    np.testing.assert_array_equal(Z, make_adult_preprocessor().fit(X_train).transform(X_test))
    ours = adult_schema()
    assert cli["categories"] == ours["categorical"]
    assert {c: b[:2] for c, b in cli["bounds"].items()} == {c: b[:2] for c, b in
                                                             ours["numeric"].items()}


# -- propose_schema ------------------------------------------------------------------------


def _typed_frame(seed, n):
    rng = np.random.default_rng(seed)
    words = np.array(["a", "b", "c", "zzz", "q"])
    return pd.DataFrame({
        "n_int": rng.integers(-10**6, 10**6, n),
        "n_float": rng.normal(0, 10.0 ** rng.integers(0, 9), n),
        "flag": rng.random(n) < 0.5,
        "text": rng.choice(words[: 2 + seed], n),
        "cat": pd.Categorical(rng.choice(words[seed:], n)),
        "when": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 999, n), "D"),
    })


def test_propose_schema_reads_names_and_dtypes_only():
    a, b = _typed_frame(0, 50), _typed_frame(2, 3)
    assert list(a.dtypes.astype(str)) == list(b.dtypes.astype(str))
    assert not a.equals(b)
    sa, sb = propose_schema(a), propose_schema(b)
    assert sa == sb
    assert json.dumps(sa) == json.dumps(sb)
    assert sa == {
        "numeric": {"n_int": {"bounds": None, "scale": "linear", "missing": "error"},
                    "n_float": {"bounds": None, "scale": "linear", "missing": "error"},
                    "flag": {"bounds": [0.0, 1.0], "scale": "linear", "missing": "error"}},
        "categorical": {"text": {"categories": None, "unknown": "ignore"},
                        "cat": {"categories": None, "unknown": "ignore"}},
        "passthrough": [], "drop": ["when"], "protected": None,
        "input_columns": ["n_int", "n_float", "flag", "text", "cat", "when"],
    }


def test_propose_schema_placeholders_must_be_filled():
    X = _typed_frame(0, 20)
    schema = propose_schema(X)
    with pytest.raises(ValueError, match=re.escape(
            "schema['numeric']['n_int']['bounds'] is unfilled (None): give [low, high]")):
        make_tabular_preprocessor(schema)
    schema["numeric"]["n_int"]["bounds"] = [-1e6, 1e6]
    schema["numeric"]["n_float"]["bounds"] = [-1e9, 1e9]
    schema["numeric"]["n_float"]["scale"] = "signed-log"
    with pytest.raises(ValueError, match=re.escape(
            "schema['categorical']['text']['categories'] is unfilled")):
        row_norm_bounds(schema)
    schema["categorical"]["text"]["categories"] = ["a", "b"]
    schema["categorical"]["cat"]["categories"] = ["a", "b", "c", "zzz", "q"]
    with pytest.raises(ValueError, match=re.escape("schema['protected'] is unfilled")):
        make_tabular_preprocessor(schema)
    schema["protected"] = ["text"]
    Z = make_tabular_preprocessor(schema).fit(X).transform(X)
    assert Z.shape == (20, 3 + 2 + 5) and np.linalg.norm(Z, axis=1).max() <= 1 + 1e-12


def test_propose_schema_input_errors():
    with pytest.raises(TypeError, match="needs a pandas DataFrame"):
        propose_schema(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="column names must be strings"):
        propose_schema(pd.DataFrame(np.zeros((2, 2))))


# -- row-norm bounds -----------------------------------------------------------------------


def test_row_norm_bounds_values():
    # Squared bounds: age 1, income 1 + 0 (indicator, fill = low), balance 1,
    # score 1 + 1 (indicator, fill = high), three categorical columns 1 each.
    b = row_norm_bounds(SCHEMA)
    assert b.row == pytest.approx(1.0, abs=1e-15)
    assert b.public ** 2 == pytest.approx(4 / 8, rel=1e-14)  # age, balance, region, grade
    assert b.protected ** 2 == pytest.approx(4 / 8, rel=1e-14)  # income 1, score 2, sex 1
    raw = row_norm_bounds(SCHEMA, scale_rows=False)
    assert raw == pytest.approx((math.sqrt(8), 2.0, 2.0), rel=1e-15)
    public_only = {k: v for k, v in SCHEMA.items() if k != "protected"}
    assert row_norm_bounds(public_only, scale_rows="l2") == (1.0, 1.0, 0.0)


def _adversarial(n, seed):
    """Huge, tiny, NaN (per the policies), unseen and missing categories, random rows."""
    X = _frame(n, seed)
    rng = np.random.default_rng(seed)
    for col in ("age", "income", "balance", "score"):
        picks = rng.choice([1e300, -1e300, 1e-300, -1e-300, 0.0, np.nan], n)
        if col == "age":  # missing='error'
            picks = np.where(np.isnan(picks), 1e300, picks)
        mask = rng.random(n) < 0.7
        X[col] = np.where(mask, picks, X[col])
    for col, unseen in (("region", "mars"), ("sex", "X"), ("grade", 7.0)):
        X[col] = X[col].astype(object)
        draw = rng.random(n)
        X.loc[draw < 0.15, col] = unseen
        X.loc[(draw >= 0.15) & (draw < 0.3), col] = np.nan
    return X


@pytest.mark.parametrize("scale_rows", ["constant", False])
def test_row_norms_respect_the_declared_bounds_on_adversarial_data(scale_rows):
    X = _adversarial(400, 5)
    pre = make_tabular_preprocessor(SCHEMA, scale_rows=scale_rows).fit(X)
    Z = pre.transform(X)
    assert np.isfinite(Z).all()
    row, public, protected = _block_norms(pre, Z)
    bound = row_norm_bounds(SCHEMA, scale_rows=scale_rows)
    slack = 1 + 1e-12
    assert row.max() <= bound.row * slack
    assert public.max() <= bound.public * slack
    assert protected.max() <= bound.protected * slack
    # The bounds are attained (score missing and flagged: 1 + 1; all blocks full).
    worst = _frame(1, 0)
    worst[["income", "score"]] = [np.nan, np.nan]
    full = _block_norms(pre, pre.transform(worst))
    assert full[2][0] == pytest.approx(bound.protected, rel=1e-12)


def test_protected_values_never_change_the_public_block():
    """Feature-DP sensitivity: replace one record's protected values (by huge, tiny, missing,
    unseen ones): no public output column of any row changes."""
    X = _frame(60, 6)
    for order in ("protected_last", "type"):
        pre = make_tabular_preprocessor(SCHEMA, order=order).fit(X)
        names = list(pre.get_feature_names_out())
        public = [i for i, n in enumerate(names)
                  if not any(n.split("__")[1].startswith(c) for c in SCHEMA["protected"])]
        assert len(public) == len(names) - 6
        Z = pre.transform(X)
        for i, values in enumerate([(1e300, "X", np.nan), (-1e300, np.nan, 1e-300),
                                    (np.nan, "M", 1e300), (0.0, "F", -5.0)]):
            changed = X.copy()
            changed.loc[i, ["income", "sex", "score"]] = values
            Zc = pre.transform(changed)
            np.testing.assert_array_equal(Zc[:, public], Z[:, public])
            assert not np.array_equal(Zc, Z)


# -- the tracer and the FDP estimators -----------------------------------------------------


def _fit_fdp(schema, X, y, **kwargs):
    clf = FeatureDPLogisticRegression(private_features=schema["protected"], epsilon=1.0,
                                      delta=1e-5, epochs=1, accountant="rdp", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # no PrivacyLeakWarning
        # (a 1-epoch fit may collapse: the CollapseWarning of issue 32 is not the point here)
        warnings.simplefilter("ignore", CollapseWarning)
        return make_private_pipeline(make_tabular_preprocessor(schema, **kwargs), clf).fit(X, y)


@pytest.mark.parametrize("order", ["protected_last", "type"])
def test_tracer_accepts_it_and_the_spec_selects_every_protected_output(order):
    X = _frame(300, 7)
    y = (X["age"] > 50).astype(int)
    pipe = _fit_fdp(SCHEMA, X, y, order=order)
    steps = audit_preprocessing(pipe)
    assert {s.status for s in steps} == {"free"}
    assert sorted(pipe.protected_input_columns_) == sorted(SCHEMA["protected"])
    names = list(pipe[:-1].get_feature_names_out())
    protected = [n for n, public in zip(names, pipe[-1].public_mask_, strict=True) if not public]
    expected = PROTECTED_OUT if order == "protected_last" else [
        n.replace("protected_", "") for n in PROTECTED_OUT]
    assert sorted(protected) == sorted(expected)
    assert privacy_report(pipe, pld=False).is_private


def test_adult_schema_in_a_private_pipeline():
    X, y = load_adult(return_X_y=True, split="train")
    X, y = X.head(2000), y.head(2000)
    pipe = _fit_fdp(adult_schema(), X, y)
    assert sorted(pipe.protected_input_columns_) == sorted(adult_schema()["protected"])
    assert {s.status for s in audit_preprocessing(pipe)} == {"free"}


# -- Adult: make_adult_preprocessor rebuilt on the schema ----------------------------------


def _old_make_adult_preprocessor(scale_rows):
    """make_adult_preprocessor before issue 20, verbatim (its ColumnTransformer applied the
    constant factor as transformer_weights; step names "features" and "normalize")."""
    import functools

    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import Normalizer, OneHotEncoder

    from sklearn_fdp.datasets._adult import (
        _ADULT_CATEGORIES,
        _CATEGORICAL_FEATURES,
        _FEATURE_NAMES,
        _NUMERIC_BOUNDS,
        _NUMERIC_FEATURES,
    )
    from sklearn_fdp.preprocessing import BoundedScaler

    def _select_columns(X, *, names):
        if hasattr(X, "columns"):
            return list(names)
        return [_FEATURE_NAMES.index(name) for name in names]

    numeric = BoundedScaler([_NUMERIC_BOUNDS[c][:2] for c in _NUMERIC_FEATURES],
                            log=[_NUMERIC_BOUNDS[c][2] for c in _NUMERIC_FEATURES])
    categorical = OneHotEncoder(
        categories=[list(_ADULT_CATEGORIES[c]) for c in _CATEGORICAL_FEATURES],
        handle_unknown="ignore", sparse_output=False, dtype=np.float64)
    weight = 1.0 / np.sqrt(14.0)
    features = ColumnTransformer(
        [("num", numeric, functools.partial(_select_columns, names=_NUMERIC_FEATURES)),
         ("cat", categorical, functools.partial(_select_columns, names=_CATEGORICAL_FEATURES))],
        remainder="drop", sparse_threshold=0.0,
        transformer_weights={"num": weight, "cat": weight} if scale_rows == "constant" else None)
    normalize = Normalizer(norm="l2") if scale_rows in (True, "l2") else "passthrough"
    return Pipeline([("features", features), ("normalize", normalize)])


@pytest.mark.parametrize("scale_rows", ["constant", "l2", False])
@pytest.mark.parametrize("as_frame", [True, False])
def test_adult_features_are_bit_identical_to_before(scale_rows, as_frame):
    X_train, _, X_test, _ = load_adult(return_X_y=True, as_frame=as_frame)
    X = X_train if as_frame else np.concatenate([X_train, X_test])
    old = _old_make_adult_preprocessor(scale_rows).fit(X).transform(X)
    new = make_adult_preprocessor(scale_rows=scale_rows).fit(X).transform(X)
    assert new.dtype == old.dtype == np.float64 and new.shape == old.shape
    assert np.ascontiguousarray(new).tobytes() == np.ascontiguousarray(old).tobytes()
    if as_frame:
        old_names = _old_make_adult_preprocessor(scale_rows).fit(X).get_feature_names_out()
        new_names = make_adult_preprocessor(scale_rows=scale_rows).fit(X).get_feature_names_out()
        assert list(new_names) == list(old_names)


def test_adult_row_norm_bounds():
    b = row_norm_bounds(adult_schema())
    assert b.row == pytest.approx(1.0, abs=1e-15)
    assert b.protected == pytest.approx(math.sqrt(6 / 14), rel=1e-14)
    assert b.public == pytest.approx(math.sqrt(8 / 14), rel=1e-14)


# -- the documentation ---------------------------------------------------------------------


def test_docs_preprocessing_snippets_run(capsys):
    run_doc_blocks("preprocessing.md", 3)
    out = capsys.readouterr().out
    # What the page's comments say the snippets print.
    for printed in ("(16281, 105) True", "RowNormBounds(row=1.0, public=0.7559",
                    "['income', 'sex']", "schema['numeric']['customer_id']['bounds'] is unfilled",
                    "'protected_num__income_missing', 'protected_cat__sex_F'"):
        assert printed in out, printed

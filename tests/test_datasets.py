"""Tests of sklearn_fdp.datasets: bundled Adult, its features, synthetic generators."""

import hashlib
from importlib import resources

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from sklearn_fdp.datasets import (
    ADULT_PROTECTED,
    load_adult,
    load_mnist8k,
    make_adult_preprocessor,
    make_dpsgdf_counterexample,
    make_purchase_like,
)

ADULT_FEATURES = [
    "age", "workclass", "fnlwgt", "education", "education-num",
    "marital-status", "occupation", "relationship", "race", "sex",
    "capital-gain", "capital-loss", "hours-per-week", "native-country",
]
# sha256 of the .gz files as stored (data/README.md).
ADULT_GZ_SHA256 = {
    "adult.data.gz": "c7a2b4716a97f930123e0baf879188d701e798172631a654fc703d4b082907f3",
    "adult.test.gz": "8a2c1bffa6e7ce5abfa43881ae5e87c4311ebc2b3cd526c9c40a43f19f06f799",
    "adult.names.gz": (
        "1e8ee543cb81fc9590b1a20392e41f28eab971ac9dbe519269cdf7d4658b62f2"
    ),
}


@pytest.fixture(scope="module")
def adult():
    return load_adult(return_X_y=True)


# --------------------------------------------------------------------------- Adult


@pytest.mark.parametrize("name", sorted(ADULT_GZ_SHA256))
def test_bundled_adult_files_are_the_recorded_bytes(name):
    data = (resources.files("sklearn_fdp.datasets") / "data" / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == ADULT_GZ_SHA256[name]


def test_load_adult_counts_and_schema(adult):
    X_train, y_train, X_test, y_test = adult
    assert X_train.shape == (32561, 14)
    assert X_test.shape == (16281, 14)
    assert list(X_train.columns) == ADULT_FEATURES
    assert list(X_test.columns) == ADULT_FEATURES
    assert int(y_train.sum()) == 7841
    assert int(y_test.sum()) == 3846
    for y in (y_train, y_test):
        assert y.name == "income"
        assert y.dtype == np.int64
        assert set(y.unique()) == {0, 1}
    for column in ("age", "fnlwgt", "education-num", "capital-gain",
                   "capital-loss", "hours-per-week"):
        assert pd.api.types.is_integer_dtype(X_train[column])


def test_load_adult_missing_values_are_nan(adult):
    X_train, _, X_test, _ = adult
    for X in (X_train, X_test):
        missing = X.isna().sum()
        assert set(missing[missing > 0].index) == {
            "workclass", "occupation", "native-country"
        }
        assert not X.isin(["?"]).any().any()
    assert X_train["workclass"].isna().sum() == 1836
    # Categories carry no leading blanks and labels no trailing period.
    assert X_test["sex"].isin(["Female", "Male"]).all()


def test_load_adult_bunch():
    bunch = load_adult()
    assert bunch.data.shape == (32561, 14)
    assert bunch.data_test.shape == (16281, 14)
    assert bunch.frame.shape == (32561, 15)
    assert bunch.frame["income"].equals(bunch.target)
    assert bunch.feature_names == ADULT_FEATURES
    assert bunch.target_names == ["<=50K", ">50K"]
    assert len(bunch.categorical_features) == 8
    assert len(bunch.numeric_features) == 6
    assert set(bunch.categorical_features) | set(bunch.numeric_features) == set(
        ADULT_FEATURES
    )
    assert "CC BY 4.0" in bunch.DESCR
    assert "https://doi.org/10.24432/C5XW20" in bunch.DESCR
    assert "Becker" in bunch.DESCR and "Kohavi" in bunch.DESCR


@pytest.mark.parametrize("split, n_rows, n_pos", [("train", 32561, 7841),
                                                  ("test", 16281, 3846)])
def test_load_adult_single_split(split, n_rows, n_pos):
    X, y = load_adult(return_X_y=True, split=split)
    assert X.shape == (n_rows, 14) and int(y.sum()) == n_pos
    bunch = load_adult(split=split)
    assert bunch.data.shape == (n_rows, 14)
    assert bunch.data_test is None and bunch.target_test is None


def test_load_adult_as_numpy(adult):
    X_train, y_train, X_test, y_test = load_adult(return_X_y=True, as_frame=False)
    assert X_train.dtype == object and X_train.shape == (32561, 14)
    assert X_test.dtype == object and X_test.shape == (16281, 14)
    assert y_train.dtype == np.int64 and y_test.dtype == np.int64
    np.testing.assert_array_equal(y_test, adult[3].to_numpy())
    assert X_train[0, 1] == "State-gov" and X_train[0, 0] == 39
    workclass = X_train[:, 1]
    n_missing = sum(isinstance(v, float) and np.isnan(v) for v in workclass)
    assert n_missing == 1836
    assert load_adult(as_frame=False).frame is None


def test_load_adult_returns_copies():
    X, y = load_adult(return_X_y=True, split="train")
    X.loc[0, "age"] = -1
    X.loc[1, "sex"] = "changed"
    y.iloc[:] = 5
    X_again, y_again = load_adult(return_X_y=True, split="train")
    assert X_again.loc[0, "age"] == 39
    assert X_again.loc[1, "sex"] == "Male"
    assert int(y_again.sum()) == 7841


def test_load_adult_bad_split():
    with pytest.raises(ValueError, match=r"`split` of load_adult.*'validation'"):
        load_adult(split="validation")


def test_adult_protected():
    assert ADULT_PROTECTED == ("sex", "race", "marital-status", "relationship",
                               "capital-gain", "capital-loss")
    assert set(ADULT_PROTECTED) <= set(ADULT_FEATURES)


def test_preprocessor_feature_makeup(adult):
    X_train = adult[0]
    pre = make_adult_preprocessor().fit(X_train.head(50))
    names = list(pre.get_feature_names_out())
    assert len(names) == 105
    numeric = [n for n in names if n.startswith("num__")]
    assert numeric == ["num__age", "num__fnlwgt", "num__education-num",
                       "num__capital-gain", "num__capital-loss",
                       "num__hours-per-week"]
    counts = {column: sum(n.startswith(f"cat__{column}_") for n in names)
              for column in ("workclass", "education", "marital-status",
                             "occupation", "relationship", "race", "sex",
                             "native-country")}
    assert counts == {"workclass": 8, "education": 16, "marital-status": 7,
                      "occupation": 14, "relationship": 6, "race": 5, "sex": 2,
                      "native-country": 41}
    assert "cat__sex_Male" in names and "cat__sex_Female" in names
    assert len(set(names)) == 105


def test_preprocessor_learns_nothing_from_data(adult):
    X_train, _, X_test, _ = adult
    # Two very different fitting sets: a few rows of women only (most
    # categories absent), and the whole training file.
    women = X_train[X_train["sex"] == "Female"].head(7)
    pre_a = make_adult_preprocessor().fit(women)
    pre_b = make_adult_preprocessor().fit(X_train)
    np.testing.assert_array_equal(pre_a.transform(X_test), pre_b.transform(X_test))
    pre_c = make_adult_preprocessor(scale_rows=False).fit(women)
    pre_d = make_adult_preprocessor(scale_rows=False).fit(X_train.tail(3000))
    np.testing.assert_array_equal(pre_c.transform(X_test), pre_d.transform(X_test))


def test_preprocessor_output_bounds(adult):
    X_train, _, X_test, _ = adult
    pre = make_adult_preprocessor(scale_rows="l2").fit(X_train)
    constant = make_adult_preprocessor().fit(X_train)
    unscaled = make_adult_preprocessor(scale_rows=False).fit(X_train)
    for X in (X_train, X_test):
        Z = pre.transform(X)
        assert Z.shape == (X.shape[0], 105) and Z.dtype == np.float64
        assert not np.isnan(Z).any()
        norms = np.linalg.norm(Z, axis=1)
        assert norms.max() <= 1 + 1e-12
        assert norms.min() > 0.99  # every row has a non-zero feature
        assert Z.min() >= 0.0
        # The default divides every column by the same constant sqrt(14).
        Zc = constant.transform(X)
        np.testing.assert_allclose(Zc, unscaled.transform(X) / np.sqrt(14.0), rtol=1e-15)
        assert np.linalg.norm(Zc, axis=1).max() <= 1 + 1e-12

    raw = make_adult_preprocessor(scale_rows=False).fit(X_train).transform(X_test)
    assert raw.min() >= 0.0 and raw.max() <= 1.0
    # One one-hot column (at most) per categorical feature, 6 numeric ones.
    assert raw[:, 6:].sum(axis=1).max() <= 8


def test_preprocessor_fixed_numeric_scaling():
    row = {
        "age": [17, 90, 200], "workclass": ["Private"] * 3,
        "fnlwgt": [0, 1.5e6, 3e6], "education": ["Bachelors"] * 3,
        "education-num": [1, 16, 40], "marital-status": ["Divorced"] * 3,
        "occupation": ["Sales"] * 3, "relationship": ["Wife"] * 3,
        "race": ["Other"] * 3, "sex": ["Female"] * 3,
        "capital-gain": [0, 99999, 10**6], "capital-loss": [0, 99999, 10**6],
        "hours-per-week": [1, 99, 168], "native-country": ["Peru"] * 3,
    }
    X = pd.DataFrame(row)
    Z = make_adult_preprocessor(scale_rows=False).fit(X).transform(X)
    np.testing.assert_allclose(Z[0, :6], 0.0)
    np.testing.assert_allclose(Z[1, :6], 1.0)
    np.testing.assert_allclose(Z[2, :6], 1.0)  # clipped to the bounds
    X.loc[0, "capital-gain"] = 99
    Z = make_adult_preprocessor(scale_rows=False).fit(X).transform(X)
    assert Z[0, 3] == pytest.approx(np.log1p(99) / np.log1p(99999))


def test_preprocessor_unknown_and_missing_categories(adult):
    X_test = adult[2].head(3).copy()
    X_test["workclass"] = ["Astronaut", np.nan, "Private"]
    pre = make_adult_preprocessor(scale_rows=False).fit(X_test)
    Z = pd.DataFrame(pre.transform(X_test), columns=pre.get_feature_names_out())
    workclass = Z.filter(like="cat__workclass_")
    assert workclass.shape[1] == 8
    np.testing.assert_array_equal(workclass.sum(axis=1), [0.0, 0.0, 1.0])
    assert Z.loc[2, "cat__workclass_Private"] == 1.0


def test_preprocessor_accepts_numpy_in_file_order(adult):
    X_train, _, X_test, _ = adult
    X_train_np, _, X_test_np, _ = load_adult(return_X_y=True, as_frame=False)
    from_frame = make_adult_preprocessor().fit(X_train).transform(X_test)
    from_numpy = make_adult_preprocessor().fit(X_train_np).transform(X_test_np)
    np.testing.assert_array_equal(from_frame, from_numpy)


def test_preprocessor_logistic_regression_accuracy(adult):
    X_train, y_train, X_test, y_test = adult
    pre = make_adult_preprocessor().fit(X_train)
    clf = LogisticRegression(C=1.0, max_iter=1000)
    clf.fit(pre.transform(X_train), y_train)
    # Reference figure (ANCHORS.md): 0.848.
    assert clf.score(pre.transform(X_test), y_test) >= 0.84


# ------------------------------------------------------ DPSGD-F counterexample


def test_counterexample_variants():
    data = make_dpsgdf_counterexample(100, mu=50.0, random_state=0)
    assert set(data) == {"plus", "minus"}
    (X_plus, y_plus), (X_minus, y_minus) = data["plus"], data["minus"]
    np.testing.assert_array_equal(X_plus, X_minus)
    assert X_plus is not X_minus
    np.testing.assert_array_equal(y_minus, -y_plus)
    for X, y in (data["plus"], data["minus"]):
        assert X.shape == (100, 2) and X.dtype == np.float64
        assert y.shape == (100,) and y.dtype == np.int64
        assert set(np.unique(y)) == {-1, 1}
        assert (y == 1).sum() == 50
        np.testing.assert_array_equal(X[:, 0], 50.0)
        assert set(np.unique(X[:, 1])) == {-1.0, 1.0}
    # D': x = mu e1 + e2 <-> y = +1; D'': the same x <-> y = -1.
    np.testing.assert_array_equal(X_plus[:, 1], y_plus)
    np.testing.assert_array_equal(X_minus[:, 1], -y_minus)


def test_counterexample_zero_hinge_loss_at_paper_optimum():
    for variant, w in (("plus", [0.0, 1.0]), ("minus", [0.0, -1.0])):
        X, y = make_dpsgdf_counterexample(variant=variant, random_state=0)
        assert X.shape == (2000, 2)
        assert X[0, 0] == 10000.0
        hinge = np.maximum(1 - y * (X @ np.array(w)), 0)
        assert hinge.mean() == 0.0
        # Without the e2 direction no linear rule beats chance.
        hinge_e1 = np.maximum(1 - y * (X @ np.array([1e-4, 0.0])), 0)
        assert hinge_e1.mean() == pytest.approx(1.0)


def test_counterexample_shuffle_is_seeded():
    a = make_dpsgdf_counterexample(200, variant="plus", random_state=3)
    b = make_dpsgdf_counterexample(200, variant="plus", random_state=3)
    c = make_dpsgdf_counterexample(200, variant="plus", random_state=4)
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[1], c[1])
    # Shuffled, not the two halves in order.
    assert not np.array_equal(a[1], np.repeat([1, -1], 100))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_samples": 7}, r"`n_samples`.*even.*7"),
        ({"n_samples": 0}, r"`n_samples`.*>= 2.*0"),
        ({"n_samples": 10.0}, r"`n_samples`.*integer"),
        ({"mu": 0.0}, r"`mu`.*> 0.*0\.0"),
        ({"mu": np.inf}, r"`mu`.*inf"),
        ({"variant": "D'"}, r"`variant`.*\"D'\""),
    ],
)
def test_counterexample_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_dpsgdf_counterexample(**kwargs)


# --------------------------------------------------------------- Purchase-like


@pytest.fixture(scope="module")
def purchase_default():
    return make_purchase_like(random_state=0)


def test_purchase_like_default_shape_and_classes(purchase_default):
    X, y = purchase_default
    assert X.shape == (20000, 600) and X.dtype == np.float64
    assert X.flags.c_contiguous
    assert y.shape == (20000,) and y.dtype == np.int64
    assert set(np.unique(X)) == {0.0, 1.0}
    np.testing.assert_array_equal(np.unique(y), np.arange(100))
    density = X.mean()
    assert 0.01 < density < 0.2  # sparse purchase vectors, as in Purchase100


def test_purchase_like_is_deterministic():
    kwargs = dict(n_samples=1500, n_features=80, n_classes=10)
    X1, y1 = make_purchase_like(**kwargs, random_state=7)
    X2, y2 = make_purchase_like(**kwargs, random_state=7)
    X3, _ = make_purchase_like(**kwargs, random_state=8)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(X1, X3)
    X4, y4 = make_purchase_like(
        **kwargs, random_state=7, dtype=np.float32, clustering="kmeans"
    )
    assert X4.dtype == np.float32
    np.testing.assert_array_equal(X4, X1)
    np.testing.assert_array_equal(y4, y1)


def test_purchase_like_minibatch_labels():
    X, y = make_purchase_like(1500, n_features=80, n_classes=10,
                              clustering="minibatch", random_state=0)
    assert y.min() >= 0 and y.max() < 10
    assert len(np.unique(y)) >= 8


def test_purchase_like_logistic_regression_above_chance():
    X, y = make_purchase_like(4000, n_features=200, n_classes=20, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, random_state=0
    )
    clf = LogisticRegression(max_iter=1000).fit(X_train, y_train)
    accuracy = clf.score(X_test, y_test)
    majority = np.bincount(y_test).max() / y_test.size
    assert accuracy > max(3 * majority, 0.3)
    assert accuracy < 0.995  # a real learning problem, not a lookup


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_samples": 50}, r"`n_samples`.*>= 100.*50"),
        ({"n_features": 0}, r"`n_features`.*>= 1.*0"),
        ({"n_classes": 1}, r"`n_classes`.*>= 2.*1"),
        ({"n_boosted": 601}, r"`n_boosted`.*<= n_features=600.*601"),
        ({"mix_fraction": 1.5}, r"`mix_fraction`.*\[0, 1\].*1\.5"),
        ({"clustering": "dbscan"}, r"`clustering`.*'dbscan'"),
        ({"dtype": np.int64}, r"`dtype`.*float64 or np.float32"),
    ],
)
def test_purchase_like_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_purchase_like(**kwargs)


# --------------------------------------------------------------------------- MNIST

MNIST_GZ_SHA256 = {
    "t10k-images-idx3-ubyte.gz": (
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"
    ),
    "t10k-labels-idx1-ubyte.gz": (
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"
    ),
}


@pytest.mark.parametrize("name", sorted(MNIST_GZ_SHA256))
def test_bundled_mnist_files_are_the_recorded_bytes(name):
    data = (resources.files("sklearn_fdp.datasets") / "data" / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == MNIST_GZ_SHA256[name]


def test_load_mnist8k_split_is_fixed_stratified_and_disjoint():
    b = load_mnist8k()
    assert b.data.shape == (8000, 784) and b.data_test.shape == (2000, 784)
    assert b.data.dtype == np.float64 and 0.0 <= b.data.min() and b.data.max() <= 1.0
    counts = np.bincount(b.target, minlength=10) + np.bincount(b.target_test, minlength=10)
    np.testing.assert_array_equal(
        counts, [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])
    # Stratified: every class has 20 % +- one image in the test part.
    share = np.bincount(b.target_test, minlength=10) / counts
    assert np.all(np.abs(share - 0.2) <= 1.0 / counts + 1e-12)
    # No image is in both parts, and the split is the same on every call.
    train_rows = {row.tobytes() for row in b.data}
    assert sum(row.tobytes() in train_rows for row in b.data_test) <= 5  # duplicate images
    X2, y2, _, _ = load_mnist8k(return_X_y=True, scale=False)
    np.testing.assert_array_equal(X2.astype(np.float64) / 255.0, b.data)
    np.testing.assert_array_equal(y2, b.target)


def test_default_scaling_keeps_protected_columns_out_of_public_ones(adult):
    # Feature DP needs the public columns to be functions of public inputs:
    # changing a protected input (capital-gain) must leave them unchanged.
    # scale_rows="l2" divides every column by the row norm, so it does not.
    X = adult[0].head(5).copy()
    X_changed = X.copy()
    X_changed["capital-gain"] = [0, 5000, 99999, 10, 123]
    for scale_rows, mixes in (("constant", False), ("l2", True)):
        pre = make_adult_preprocessor(scale_rows=scale_rows).fit(X)
        names = list(pre.get_feature_names_out())
        public = [i for i, n in enumerate(names) if n != "num__capital-gain"]
        Z, Z_changed = pre.transform(X), pre.transform(X_changed)
        assert np.array_equal(Z[:, public], Z_changed[:, public]) != mixes


@pytest.mark.parametrize("bad", ["L2", 2, "unit", None])
def test_preprocessor_rejects_unknown_scale_rows(bad):
    with pytest.raises(ValueError, match="scale_rows must be"):
        make_adult_preprocessor(scale_rows=bad)


def _old_scale_numeric(X, lower, upper, log):
    """The numeric map of make_adult_preprocessor before BoundedScaler (issue 17), verbatim."""
    X = np.clip(np.asarray(X, dtype=np.float64), lower, upper)
    out = np.empty_like(X)
    out[:, ~log] = (X[:, ~log] - lower[~log]) / (upper[~log] - lower[~log])
    out[:, log] = np.log1p(X[:, log]) / np.log1p(upper[log])
    return out


@pytest.mark.parametrize("scale_rows", ["constant", "l2", False])
@pytest.mark.parametrize("as_frame", [True, False])
def test_preprocessor_output_is_bit_identical_to_the_old_numeric_map(scale_rows, as_frame):
    """The output, byte for byte, of the implementation before BoundedScaler (issue 17)."""
    from sklearn.preprocessing import OneHotEncoder, normalize

    from sklearn_fdp.datasets._adult import (
        _ADULT_CATEGORIES,
        _CATEGORICAL_FEATURES,
        _NUMERIC_FEATURES,
    )

    X_train, _, X_test, _ = load_adult(return_X_y=True, as_frame=as_frame)
    frame = pd.DataFrame(X_test, columns=ADULT_FEATURES) if not as_frame else X_test
    bounds = {"age": (17.0, 90.0, False), "fnlwgt": (0.0, 1.5e6, False),
              "education-num": (1.0, 16.0, False), "capital-gain": (0.0, 99999.0, True),
              "capital-loss": (0.0, 99999.0, True), "hours-per-week": (1.0, 99.0, False)}
    assert tuple(bounds) == _NUMERIC_FEATURES
    lower, upper, log = (np.array([b[i] for b in bounds.values()]) for i in range(3))
    numeric = _old_scale_numeric(frame[list(_NUMERIC_FEATURES)].to_numpy(), lower, upper, log)
    onehot = OneHotEncoder(categories=[list(_ADULT_CATEGORIES[c]) for c in _CATEGORICAL_FEATURES],
                           handle_unknown="ignore", sparse_output=False, dtype=np.float64)
    categorical = onehot.fit_transform(frame[list(_CATEGORICAL_FEATURES)])
    if scale_rows == "constant":  # ColumnTransformer's transformer_weights: block * weight
        weight = 1.0 / np.sqrt(14.0)
        numeric, categorical = numeric * weight, categorical * weight
    expected = np.hstack([numeric, categorical])
    if scale_rows == "l2":
        expected = normalize(expected, norm="l2")
    Z = make_adult_preprocessor(scale_rows=scale_rows).fit(X_train).transform(X_test)
    assert Z.dtype == np.float64
    np.testing.assert_array_equal(Z, expected, strict=True)
    assert np.ascontiguousarray(Z).tobytes() == np.ascontiguousarray(expected).tobytes()

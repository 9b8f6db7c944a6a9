"""The UCI Adult (Census Income) data set, bundled, and its data-independent features.

The three files under ``data/`` are the original UCI distribution (``adult.data``,
``adult.test``, ``adult.names``), gzip-compressed; see ``data/README.md`` for their
provenance, checksums and licence (CC BY 4.0).
"""

import functools
import gzip
import io
from importlib import resources

import numpy as np
import pandas as pd
from sklearn.utils import Bunch

from ..preprocessing._tabular import make_tabular_preprocessor

__all__ = ["ADULT_PROTECTED", "adult_schema", "load_adult", "make_adult_preprocessor"]

ADULT_PROTECTED = (
    "sex",
    "race",
    "marital-status",
    "relationship",
    "capital-gain",
    "capital-loss",
)
"""Adult columns treated as protected (private) in the project's benchmarks."""

_FEATURE_NAMES = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
)
_TARGET_NAME = "income"
_TARGET_NAMES = ("<=50K", ">50K")

# Public category lists, copied in the order of adult.names. They are
# fixed here so that no category list is ever read off the (private) data.
_ADULT_CATEGORIES = {
    "workclass": (
        "Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov",
        "Local-gov", "State-gov", "Without-pay", "Never-worked",
    ),
    "education": (
        "Bachelors", "Some-college", "11th", "HS-grad", "Prof-school",
        "Assoc-acdm", "Assoc-voc", "9th", "7th-8th", "12th", "Masters",
        "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool",
    ),
    "marital-status": (
        "Married-civ-spouse", "Divorced", "Never-married", "Separated",
        "Widowed", "Married-spouse-absent", "Married-AF-spouse",
    ),
    "occupation": (
        "Tech-support", "Craft-repair", "Other-service", "Sales",
        "Exec-managerial", "Prof-specialty", "Handlers-cleaners",
        "Machine-op-inspct", "Adm-clerical", "Farming-fishing",
        "Transport-moving", "Priv-house-serv", "Protective-serv",
        "Armed-Forces",
    ),
    "relationship": (
        "Wife", "Own-child", "Husband", "Not-in-family", "Other-relative",
        "Unmarried",
    ),
    "race": (
        "White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black",
    ),
    "sex": ("Female", "Male"),
    "native-country": (
        "United-States", "Cambodia", "England", "Puerto-Rico", "Canada",
        "Germany", "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece",
        "South", "China", "Cuba", "Iran", "Honduras", "Philippines", "Italy",
        "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal", "Ireland",
        "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti",
        "Columbia", "Hungary", "Guatemala", "Nicaragua", "Scotland",
        "Thailand", "Yugoslavia", "El-Salvador", "Trinadad&Tobago", "Peru",
        "Hong", "Holand-Netherlands",
    ),
}
_CATEGORICAL_FEATURES = tuple(c for c in _FEATURE_NAMES if c in _ADULT_CATEGORIES)

# Public bounds of the numeric columns: (lower, upper, log1p?), for
# BoundedScaler. Values are clipped to [lower, upper]; with log1p they map to
# log1p(x) / log1p(upper) (lower is 0 there), otherwise to
# (x - lower) / (upper - lower).
# The upper bounds of capital-gain/loss are the largest values the Census
# coding allows (99,999 is the top code of capital-gain; 4,356 is the
# largest capital-loss in adult.data; adult.test tops out at 3,770).
_NUMERIC_BOUNDS = {
    "age": (17.0, 90.0, False),
    "fnlwgt": (0.0, 1.5e6, False),
    "education-num": (1.0, 16.0, False),
    "capital-gain": (0.0, 99999.0, True),
    "capital-loss": (0.0, 99999.0, True),
    "hours-per-week": (1.0, 99.0, False),
}
_NUMERIC_FEATURES = tuple(c for c in _FEATURE_NAMES if c in _NUMERIC_BOUNDS)

_DATA_PACKAGE = "sklearn_fdp.datasets"
_FILES = {"train": "adult.data.gz", "test": "adult.test.gz"}
_SPLITS = ("train", "test", "both")

DESCR = """\
.. _adult_dataset:

UCI Adult (Census Income) data set
----------------------------------

Predict whether a person's yearly income exceeds $50,000 from 14 attributes
of the 1994 US Census database (extraction by Barry Becker).

:Number of instances: 32,561 train (``adult.data``), 16,281 test
    (``adult.test``)
:Number of attributes: 14 (6 numeric, 8 categorical)
:Target: ``income``, 1 if ``>50K`` else 0 (train 24.08 % positive,
    test 23.62 %; majority-class test accuracy 76.38 %)
:Numeric: age, fnlwgt, education-num, capital-gain, capital-loss,
    hours-per-week
:Categorical: workclass, education, marital-status, occupation,
    relationship, race, sex, native-country
:Missing values: written ``?`` in the files, returned as missing (NaN) in
    workclass, occupation and native-country
:Protected attributes used in sklearn_fdp's benchmarks: sex, race,
    marital-status, relationship, capital-gain, capital-loss
    (``ADULT_PROTECTED``)

The files are the original UCI distribution, gzip-compressed and bundled
with sklearn_fdp (no download). The test file's first line
(``|1x3 Cross validator``) is skipped and the trailing ``.`` of its labels
removed.

:Source: UCI Machine Learning Repository, "Adult", donated by Barry Becker
    and Ronny Kohavi (1996), https://doi.org/10.24432/C5XW20
:Licence: Creative Commons Attribution 4.0 International (CC BY 4.0),
    https://creativecommons.org/licenses/by/4.0/

.. rubric:: Citation

Becker, B. & Kohavi, R. (1996). Adult [Dataset]. UCI Machine Learning
Repository. https://doi.org/10.24432/C5XW20

.. rubric:: References

Kohavi, R. (1996). Scaling up the accuracy of Naive-Bayes classifiers: a
decision-tree hybrid. Proceedings of the Second International Conference on
Knowledge Discovery and Data Mining (KDD-96), 202-207.
"""


@functools.lru_cache(maxsize=None)
def _read_adult(split):
    """Parse one bundled file; cached per process. Callers must copy."""
    resource = resources.files(_DATA_PACKAGE) / "data" / _FILES[split]
    with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="ascii") as text:
        frame = pd.read_csv(
            io.StringIO(text.read()),
            header=None,
            names=[*_FEATURE_NAMES, _TARGET_NAME],
            skiprows=1 if split == "test" else 0,
            skipinitialspace=True,
            na_values={name: ["?"] for name in _CATEGORICAL_FEATURES},
            keep_default_na=False,
            skip_blank_lines=True,
        )
    labels = frame.pop(_TARGET_NAME).str.rstrip(".")
    unexpected = sorted(set(labels) - set(_TARGET_NAMES))
    if unexpected:  # pragma: no cover - guards the bundled files
        raise ValueError(
            f"Bundled Adult file {_FILES[split]!r} has unexpected labels "
            f"{unexpected!r}; the package data is corrupted, reinstall sklearn_fdp."
        )
    target = (labels == _TARGET_NAMES[1]).astype(np.int64).rename(_TARGET_NAME)
    return frame, target


def _to_numpy(X, y):
    return X.to_numpy(dtype=object, na_value=np.nan), y.to_numpy(dtype=np.int64)


def load_adult(*, return_X_y=False, as_frame=True, split="both"):
    """Load the UCI Adult (Census Income) data set bundled with sklearn_fdp.

    The original train (``adult.data``, 32,561 rows) and test (``adult.test``,
    16,281 rows) files are read from the package, never downloaded. The task
    is binary: ``income`` is 1 for ``>50K`` and 0 for ``<=50K``.

    Parameters
    ----------
    return_X_y : bool, default=False
        If True, return arrays instead of a :class:`~sklearn.utils.Bunch`:
        ``(X_train, y_train, X_test, y_test)`` for ``split="both"``, and
        ``(X, y)`` for ``split="train"`` or ``split="test"``.
    as_frame : bool, default=True
        If True, ``X`` is a :class:`pandas.DataFrame` (numeric columns
        ``int64``, categorical columns strings with missing values as NaN)
        and ``y`` a :class:`pandas.Series` named ``"income"``. If False,
        ``X`` is an ``object`` :class:`numpy.ndarray` holding the numbers
        and the category strings (missing as ``float("nan")``) and ``y`` an
        ``int64`` array.
    split : {"both", "train", "test"}, default="both"
        Which file(s) to return. With ``"both"``, ``data``/``target`` hold
        the training file and ``data_test``/``target_test`` the test file;
        with ``"train"`` or ``"test"``, ``data``/``target`` hold that file
        and ``data_test``/``target_test`` are None.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the attributes:

        data : DataFrame of shape (n_samples, 14) or ndarray
            Features of the training file (or of the requested split).
        target : Series of shape (n_samples,) or ndarray
            Labels, 0/1, of ``data``.
        data_test : DataFrame of shape (16281, 14), ndarray or None
            Features of the test file when ``split="both"``.
        target_test : Series of shape (16281,), ndarray or None
            Labels of ``data_test`` when ``split="both"``.
        frame : DataFrame of shape (n_samples, 15) or None
            ``data`` with the ``income`` column appended; None if
            ``as_frame=False``.
        feature_names : list of str
            The 14 column names, in file order.
        target_names : list of str
            ``["<=50K", ">50K"]``; label ``i`` means ``target_names[i]``.
        categorical_features : list of str
            The 8 categorical columns.
        numeric_features : list of str
            The 6 numeric columns.
        DESCR : str
            Description, licence (CC BY 4.0) and citation of the data set.

    (X_train, y_train, X_test, y_test) or (X, y) : tuple
        Only if ``return_X_y`` is True; see ``return_X_y``.

    See Also
    --------
    make_adult_preprocessor : Data-independent one-hot and scaling of these
        columns.

    Notes
    -----
    The files are parsed once per process and cached; every call returns
    fresh copies, so modifying them does not affect later calls.

    Licence: CC BY 4.0. Cite Becker, B. & Kohavi, R. (1996). Adult
    [Dataset]. UCI Machine Learning Repository.
    https://doi.org/10.24432/C5XW20

    Examples
    --------
    >>> from sklearn_fdp.datasets import load_adult
    >>> X_train, y_train, X_test, y_test = load_adult(return_X_y=True)
    >>> X_train.shape, X_test.shape
    ((32561, 14), (16281, 14))
    >>> int(y_train.sum()), int(y_test.sum())
    (7841, 3846)
    """
    if split not in _SPLITS:
        raise ValueError(
            f"`split` of load_adult must be one of {list(_SPLITS)}, got {split!r}. "
            "Use 'both' for the train and test files together."
        )
    if split == "both":
        parts = [_read_adult("train"), _read_adult("test")]
    else:
        parts = [_read_adult(split)]
    parts = [(X.copy(), y.copy()) for X, y in parts]
    if not as_frame:
        parts = [_to_numpy(X, y) for X, y in parts]

    if return_X_y:
        return tuple(array for part in parts for array in part)

    X, y = parts[0]
    X_test, y_test = parts[1] if len(parts) == 2 else (None, None)
    frame = pd.concat([X, y], axis=1) if as_frame else None
    return Bunch(
        data=X,
        target=y,
        data_test=X_test,
        target_test=y_test,
        frame=frame,
        feature_names=list(_FEATURE_NAMES),
        target_names=list(_TARGET_NAMES),
        categorical_features=list(_CATEGORICAL_FEATURES),
        numeric_features=list(_NUMERIC_FEATURES),
        DESCR=DESCR,
    )


def _select_columns(X, *, names):
    """The column selector of make_adult_preprocessor before issue 20, kept so that its
    pickled pipelines still load (they name it); new pipelines use the schema's."""
    if hasattr(X, "columns"):
        return list(names)
    return [_FEATURE_NAMES.index(name) for name in names]


def adult_schema(*, protected=ADULT_PROTECTED):
    """The declared schema of the Adult features, for ``make_tabular_preprocessor``.

    The public category lists of ``adult.names`` and the public bounds of
    the numeric columns (see :func:`make_adult_preprocessor`), as a fresh
    plain dict (JSON-serialisable; ``docs/examples/adult_schema.json`` holds
    the same lists and bounds in the command line's format).

    Parameters
    ----------
    protected : sequence of str, default=ADULT_PROTECTED
        The protected columns, written to the schema's ``"protected"`` key.

    Returns
    -------
    schema : dict
        ``{"numeric": {column: [low, high, scale]}, "categorical": {column:
        [categories]}, "protected": [...], "input_columns": [the 14 columns
        in file order]}``.

    See Also
    --------
    make_adult_preprocessor : ``make_tabular_preprocessor`` on this schema.

    Examples
    --------
    >>> from sklearn_fdp.datasets import adult_schema
    >>> schema = adult_schema()
    >>> schema["numeric"]["capital-gain"], schema["protected"][:2]
    ([0.0, 99999.0, 'log'], ['sex', 'race'])
    """
    return {
        "numeric": {c: [_NUMERIC_BOUNDS[c][0], _NUMERIC_BOUNDS[c][1],
                        "log" if _NUMERIC_BOUNDS[c][2] else "linear"]
                    for c in _NUMERIC_FEATURES},
        "categorical": {c: list(_ADULT_CATEGORIES[c]) for c in _CATEGORICAL_FEATURES},
        "protected": list(protected),
        "input_columns": list(_FEATURE_NAMES),
    }


def make_adult_preprocessor(*, scale_rows="constant"):
    """Make the data-independent Adult feature transformer.

    One-hot encodes the 8 categorical columns against the public category
    lists of ``adult.names`` and maps the 6 numeric columns to [0, 1] with
    fixed public bounds, then (optionally) scales every row to unit L2 norm.
    Nothing is learnt from the data: ``fit`` only records the input's shape
    and column names, so the transformer can be fitted on private data
    without spending privacy budget.

    Parameters
    ----------
    scale_rows : {"constant", "l2"} or False, default="constant"
        How rows are brought to L2 norm at most 1, the bound DP-SGD-style
        clipping and the FDP logistic-regression analysis assume.

        - ``"constant"``: every column is multiplied by the same constant
          ``1 / sqrt(14)`` (14 input columns, each contributing at most 1 to
          the squared norm), so every row has norm <= 1. Each output column
          depends on its own input column only: safe under feature DP.
        - ``"l2"`` (or ``True``): end with
          :class:`~sklearn.preprocessing.Normalizer`, so every row has norm
          exactly 1. Each output column is divided by the whole row's norm,
          which mixes every column into every other: fine when the whole
          record is protected (DP-SGD, DPSGD-F, AdaMix), but **not** under
          feature DP with a protected numeric column (e.g. capital-gain in
          :data:`ADULT_PROTECTED`): the "public" columns would then carry the
          protected value, outside the FDP guarantee.
        - ``False``: no scaling; rows have norm at most ``sqrt(14)``.

    Returns
    -------
    preprocessor : :class:`~sklearn.pipeline.Pipeline`
        Unfitted pipeline ``[("columns", ColumnTransformer), ("scale",
        the constant factor, Normalizer() or "passthrough")]`` producing a
        dense float64 array of 105 columns, in this order:

        - ``num__<name>`` for age, fnlwgt, education-num, capital-gain,
          capital-loss, hours-per-week (6 columns);
        - ``cat__<name>_<category>`` for workclass (8), education (16),
          marital-status (7), occupation (14), relationship (6), race (5),
          sex (2) and native-country (41) (99 columns).

    See Also
    --------
    load_adult : The data this transformer expects.
    ADULT_PROTECTED : Protected Adult columns used in the benchmarks.
    adult_schema : The schema it is built from.
    sklearn_fdp.preprocessing.make_tabular_preprocessor : Builds it from
        ``adult_schema()`` with ``order="type"``.

    Notes
    -----
    Privacy: the category lists and numeric bounds are constants written in
    the code (public knowledge about the Census coding), so the map
    ``x -> features(x)`` does not depend on any record; applying it is free
    under any differential-privacy notion. ``scale_rows="l2"`` acts on each
    row alone and is free under record-level DP, but not under feature DP
    (see ``scale_rows``).

    Categorical columns: ``OneHotEncoder(categories=<fixed lists>,
    handle_unknown="ignore")``; a missing value (NaN) or a category not in
    the list gives an all-zero block for that column.

    Numeric columns, clipped to the bounds then scaled
    (:class:`~sklearn_fdp.preprocessing.BoundedScaler`):

    ==============  =======================================
    age             (clip(x, 17, 90) - 17) / 73
    fnlwgt          clip(x, 0, 1.5e6) / 1.5e6
    education-num   (clip(x, 1, 16) - 1) / 15
    capital-gain    log1p(clip(x, 0, 99999)) / log1p(99999)
    capital-loss    log1p(clip(x, 0, 99999)) / log1p(99999)
    hours-per-week  (clip(x, 1, 99) - 1) / 98
    ==============  =======================================

    Both capital columns use the Census top code 99,999 as their bound (a
    public constant; the largest capital loss *in the data* is not used, as
    that would be a statistic of the private records).

    fnlwgt (a Census sampling weight) is kept, as in the 105-column setup
    the project's reference figures use. Numeric columns must not contain
    missing or infinite values (a ValueError; the Adult files have none).

    The input is a DataFrame with the 14 Adult column names (any order, as
    :func:`load_adult` returns) or an array whose 14 columns are in file
    order (``load_adult(as_frame=False)``). Output feature names need the
    DataFrame input.

    Examples
    --------
    >>> from sklearn_fdp.datasets import load_adult, make_adult_preprocessor
    >>> X_train, y_train, X_test, y_test = load_adult(return_X_y=True)
    >>> pre = make_adult_preprocessor().fit(X_train)
    >>> pre.transform(X_test).shape
    (16281, 105)
    >>> [str(n) for n in pre.get_feature_names_out()[:2]]
    ['num__age', 'num__fnlwgt']
    """
    if not (scale_rows is True or scale_rows is False or scale_rows in ("constant", "l2")):
        raise ValueError(
            f"scale_rows must be 'constant', 'l2' (or True) or False; got {scale_rows!r}."
        )
    # No column is declared protected here: the features are the same for
    # every protection (the row normaliser of "l2" is documented above).
    return make_tabular_preprocessor(adult_schema(protected=()),
                                     scale_rows="l2" if scale_rows is True else scale_rows,
                                     order="type")

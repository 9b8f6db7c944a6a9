"""Data-independent tabular preprocessing from a declared schema (issue 20).

A *schema* is a plain dict (or the JSON object it loads from) that declares,
for every column, how it is encoded: numeric columns with their bounds,
scaling and missing-value policy, categorical columns with their category
lists, and which columns are protected. :func:`make_tabular_preprocessor`
turns it into a scikit-learn pipeline whose map ``x -> features(x)`` is fixed
by the schema alone (nothing is learnt from the data), and
:func:`row_norm_bounds` gives the bound on the output rows' L2 norms, per
block of public and protected columns. :func:`propose_schema` writes a
skeleton from a DataFrame's column names and dtypes (never its values) for
the user to fill in.

Only numpy and the standard library are imported at module level: the command
line (:mod:`sklearn_fdp.cli`) imports the two functions its saved pipelines
name (:func:`_as_strings`, :func:`_scale_constant`) without loading
scikit-learn.
"""

import functools
import math
from collections import namedtuple
from numbers import Real

import numpy as np

__all__ = ["RowNormBounds", "make_tabular_preprocessor", "propose_schema", "row_norm_bounds"]

_SCALES = ("linear", "log", "signed-log")
_MISSING = ("error", "fill", "indicator")
_UNKNOWN = ("ignore", "error")
_ORDERS = ("protected_last", "type")
_KEYS = ("numeric", "categorical", "passthrough", "drop", "protected", "input_columns", "target")
# The command line's --schema keys (docs/cli.md), accepted as aliases.
_ALIASES = {"bounds": "numeric", "categories": "categorical"}
_NUMERIC_KEYS = ("bounds", "scale", "missing", "fill_value")
_CATEGORICAL_KEYS = ("categories", "unknown")

RowNormBounds = namedtuple("RowNormBounds", "row public protected")
RowNormBounds.__doc__ = """Bounds on the L2 norm of every output row of a schema's preprocessor.

``row``: the whole row; ``public``: its public columns; ``protected``: its
protected columns (0.0 for an empty block; ``inf`` where a passthrough
column, which has no declared bound, is in the block). They hold for every
input whatever its values: bounds, fixed category lists and the missing
policy bound each column's contribution.
"""


# -- transformers stored in the pipelines (module level: skops saves them by name) -----------


def _as_strings(X, strict=None):
    """Categories as strings (``3.0`` -> ``"3"``); missing values stay missing.

    ``strict``: ``{column position: categories}`` of the columns whose unknown
    policy is ``"error"``; a value outside the list there (a missing one
    included) raises a ValueError naming the column, never the value.
    """
    names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
    X = np.asarray(X, dtype=object)
    out = np.empty(X.shape, dtype=object)
    for idx, v in np.ndenumerate(X):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out[idx] = np.nan
        elif isinstance(v, (float, np.floating)) and float(v).is_integer():
            out[idx] = str(int(v))
        else:
            out[idx] = str(v)
    for j, cats in (strict or {}).items():
        known = set(cats)
        n_out = sum(1 for v in out[:, j] if not (isinstance(v, str) and v in known))
        if n_out:
            column = repr(names[j]) if names is not None else str(j)
            raise ValueError(
                f"categorical column {column}: {n_out} value(s) outside its declared category "
                "list (or missing), and its unknown policy is 'error'. Add the categories to "
                "the schema, or declare 'unknown': 'ignore' (encoded as all zeros).")
    return out


def _scale_constant(X, factor):
    """Multiply every entry by a constant (the row-norm factor ``1 / sqrt(k)``)."""
    return np.asarray(X, dtype=np.float64) * factor


def _select_columns(X, *, names, input_columns):
    """Column selector: the names for a DataFrame, their positions in ``input_columns``
    for an array (whose columns are in that order)."""
    if hasattr(X, "columns"):
        return list(names)
    return [input_columns.index(name) for name in names]


# -- the schema -----------------------------------------------------------------------------


class _Unfilled(ValueError):
    """A placeholder of :func:`propose_schema` left unfilled."""


def _fail(where, problem, fix):
    raise ValueError(f"schema{where}: {problem}. {fix}")


def _column_list(schema, key):
    value = schema.get(key, [])
    where = f"[{key!r}]"
    if value is None:
        if key == "protected":
            raise _Unfilled(
                f"schema['protected'] is unfilled (None): list the protected columns, "
                "e.g. ['sex', 'race'] (every output column derived from them is protected), "
                "or [] when the whole record is protected (DP-SGD, DPSGD-F, AdaMix) or no "
                "column is.")
        _fail(where, "is None", "Give a list of column names, or leave the key out.")
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        _fail(where, f"must be a list of column names, got {value!r}",
              f"Write e.g. {key!r}: [{value!r}].")
    bad = [c for c in value if not isinstance(c, str)]
    if bad:
        _fail(where, f"has non-string entries {bad!r}", "Column names are strings.")
    dup = sorted({c for c in value if list(value).count(c) > 1})
    if dup:
        _fail(where, f"lists {dup[0]!r} twice", "List every column once.")
    return list(value)


def _number(where, value, what):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.integer,
                                                                     np.floating)):
        _fail(where, f"{what} must be a number, got {value!r}",
              "Give a finite number known without looking at the data.")
    value = float(value)
    if not math.isfinite(value):
        _fail(where, f"{what} must be finite, got {value!r}",
              "Give a finite number known without looking at the data.")
    return value


def _numeric_entry(col, spec):
    where = f"['numeric'][{col!r}]"
    if spec is None:
        raise _Unfilled(
            f"schema{where} is unfilled (None): give the column's bounds [low, high] "
            "(optionally [low, high, 'log']), known without looking at the data (a "
            "questionnaire's coding, a sensor's range, a legal limit).")
    if isinstance(spec, (list, tuple)):
        if len(spec) not in (2, 3):
            _fail(where, f"must be [low, high] or [low, high, scale], got {spec!r}",
                  f"Scale is one of {list(_SCALES)}.")
        spec = {"bounds": list(spec[:2]), **({"scale": spec[2]} if len(spec) == 3 else {})}
    if not isinstance(spec, dict):
        _fail(where, f"must be [low, high], [low, high, scale] or a dict, got {spec!r}",
              f"A dict has the keys {list(_NUMERIC_KEYS)}.")
    extra = [k for k in spec if k not in _NUMERIC_KEYS]
    if extra:
        _fail(where, f"has unknown key(s) {extra!r}", f"The keys are {list(_NUMERIC_KEYS)}.")
    bounds = spec.get("bounds")
    if bounds is None:
        raise _Unfilled(
            f"schema{where}['bounds'] is unfilled (None): give [low, high], known without "
            "looking at the data (a questionnaire's coding, a sensor's range, a legal "
            "limit); reading them off the private data would release its minimum and "
            "maximum.")
    if not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
        _fail(f"{where}['bounds']", f"must be [low, high], got {bounds!r}",
              "Give two finite numbers with low < high.")
    low = _number(f"{where}['bounds']", bounds[0], "low")
    high = _number(f"{where}['bounds']", bounds[1], "high")
    if not low < high:
        _fail(f"{where}['bounds']", f"needs low < high, got [{low!r}, {high!r}]",
              "Give the column's range as [low, high].")
    scale = _option(where, spec, "scale", "linear", _SCALES,
                    "'log' and 'signed-log' suit heavy tails.")
    if scale == "log" and low <= -1:
        _fail(f"{where}['scale']", f"'log' (log1p) needs low > -1, got low = {low!r}",
              "Use 'signed-log' (any bounds), shift the column, or 'linear'.")
    missing = _option(where, spec, "missing", "error", _MISSING,
                      "'fill' replaces a missing value by fill_value, 'indicator' also adds "
                      "a 0/1 column.")
    fill = spec.get("fill_value")
    if fill is not None:
        fill = _number(f"{where}['fill_value']", fill, "fill_value")
    return {"bounds": [low, high], "scale": scale, "missing": missing, "fill_value": fill}


def _option(where, spec, key, default, options, fix):
    """``spec[key]`` (``default`` when absent), which must be one of ``options``."""
    value = spec.get(key, default)
    if value not in options:
        _fail(f"{where}[{key!r}]", f"must be one of {list(options)}, got {value!r}", fix)
    return value


def _categorical_entry(col, spec):
    where = f"['categorical'][{col!r}]"
    if spec is None:
        raise _Unfilled(
            f"schema{where} is unfilled (None): list the column's categories, from its "
            "public coding (a codebook, a form's choices); which categories occur in "
            "private data is itself private.")
    if isinstance(spec, (list, tuple)):
        spec = {"categories": list(spec)}
    if not isinstance(spec, dict):
        _fail(where, f"must be a list of categories or a dict, got {spec!r}",
              f"A dict has the keys {list(_CATEGORICAL_KEYS)}.")
    extra = [k for k in spec if k not in _CATEGORICAL_KEYS]
    if extra:
        _fail(where, f"has unknown key(s) {extra!r}",
              f"The keys are {list(_CATEGORICAL_KEYS)}.")
    cats = spec.get("categories")
    if cats is None:
        raise _Unfilled(
            f"schema{where}['categories'] is unfilled (None): list the column's "
            "categories, from its public coding; which categories occur in private data "
            "is itself private.")
    if isinstance(cats, str) or not isinstance(cats, (list, tuple)) or not cats:
        _fail(f"{where}['categories']", f"must be a non-empty list, got {cats!r}",
              "List every category, e.g. ['Female', 'Male'].")
    bad = [c for c in cats if c is None or isinstance(c, (dict, list, tuple))
           or (isinstance(c, float) and not math.isfinite(c))]
    if bad:
        _fail(f"{where}['categories']", f"has entries {bad!r} that are not categories",
              "Categories are strings or numbers; a missing value is encoded as an unknown "
              "category (all zeros).")
    names = [str(v) for v in _as_strings(np.array(cats, dtype=object))]
    dup = sorted({c for c in names if names.count(c) > 1})
    if dup:
        _fail(f"{where}['categories']", f"lists {dup[0]!r} twice (as strings)",
              "List every category once.")
    unknown = _option(where, spec, "unknown", "ignore", _UNKNOWN,
                      "'ignore' encodes an unknown or missing category as all zeros, "
                      "'error' raises.")
    return {"categories": names, "unknown": unknown}


def _canonical(schema):
    """The schema in its long form, checked; a ValueError naming the key and the fix."""
    if not isinstance(schema, dict):
        raise ValueError(
            f"schema must be a dict (or a JSON object), got {type(schema).__name__}. Write "
            "e.g. {'numeric': {'age': [17, 90]}, 'categorical': {'sex': ['F', 'M']}, "
            "'protected': ['sex']}, or start from propose_schema(df).")
    schema = dict(schema)
    for alias, key in _ALIASES.items():
        if alias in schema:
            if key in schema:
                _fail("", f"has both {alias!r} and {key!r}",
                      f"{alias!r} is the command line's name for {key!r}: give one of them.")
            schema[key] = schema.pop(alias)
    extra = [k for k in schema if k not in _KEYS]
    if extra:
        _fail("", f"has unknown key(s) {extra!r}",
              f"The keys are {list(_KEYS)} (and the aliases {list(_ALIASES)}).")
    out = {}
    for key, entry in (("numeric", _numeric_entry), ("categorical", _categorical_entry)):
        columns = schema.get(key) or {}
        if not isinstance(columns, dict):
            _fail(f"[{key!r}]", f"must be a dict {{column: spec}}, got {columns!r}",
                  "Key every column by its name.")
        bad = [c for c in columns if not isinstance(c, str)]
        if bad:
            _fail(f"[{key!r}]", f"has non-string column names {bad!r}",
                  "Column names are strings.")
        out[key] = {col: entry(col, spec) for col, spec in columns.items()}
    out["passthrough"] = _column_list(schema, "passthrough")
    out["drop"] = _column_list(schema, "drop")
    kinds = {}
    for key in ("numeric", "categorical", "passthrough", "drop"):
        for col in out[key]:
            if col in kinds:
                _fail("", f"column {col!r} is in both {kinds[col]!r} and {key!r}",
                      "Give every column one encoding.")
            kinds[col] = key
    if not any(out[k] for k in ("numeric", "categorical", "passthrough")):
        _fail("", "declares no feature column",
              "Declare at least one numeric, categorical or passthrough column.")
    if "protected" not in schema:
        protected = []
    else:
        protected = _column_list(schema, "protected")
    unknown = [c for c in protected if kinds.get(c) in (None, "drop")]
    if unknown:
        _fail("['protected']", f"names {unknown!r}, not a numeric, categorical or "
              "passthrough column of the schema", "Protect only columns the schema encodes.")
    out["protected"] = protected
    inputs = schema.get("input_columns")
    if inputs is not None:
        inputs = _column_list(schema, "input_columns")
        absent = [c for c in kinds if c not in inputs]
        if absent:
            _fail("['input_columns']", f"lacks the schema's column(s) {absent!r}",
                  "List every input column, in the order of the arrays' columns.")
    out["input_columns"] = inputs
    out["target"] = _target_entry(schema.get("target"))
    return out


def _target_entry(spec):
    """The target's declared bounds ``(low, high)``, or None when the schema declares none."""
    if spec is None:
        return None
    where = "['target']"
    if isinstance(spec, dict):
        extra = [k for k in spec if k != "bounds"]
        if extra:
            _fail(where, f"has unknown key(s) {extra!r}",
                  "Declare the target as {'bounds': [low, high]}.")
        spec = spec.get("bounds")
    if not isinstance(spec, (list, tuple)) or len(spec) != 2:
        _fail(where, f"bounds must be [low, high], got {spec!r}",
              "Declare the target as {'bounds': [low, high]} (a regression target's "
              "public range, e.g. a grade's 0-20), or leave the key out.")
    low, high = (_number(where, v, "a target bound") for v in spec)
    if not low < high:
        _fail(where, f"bounds [{low!r}, {high!r}] need low < high",
              "Give the target's public range, low first.")
    return (low, high)


# -- the blocks and their norms -------------------------------------------------------------


def _blocks(canon, order):
    """``[(block name, kind, [columns])]`` in output order, empty blocks left out."""
    if order not in _ORDERS:
        raise ValueError(f"order must be one of {list(_ORDERS)}, got {order!r}. "
                         "'protected_last': public columns first, then protected ones; "
                         "'type': numeric, then categorical, then passthrough columns.")
    kinds = (("num", "numeric"), ("cat", "categorical"), ("pass", "passthrough"))
    protected = set(canon["protected"])
    if order == "type":
        groups = [(name, kind, list(canon[kind])) for name, kind in kinds]
    else:
        groups = [(name, kind, [c for c in canon[kind] if c not in protected])
                  for name, kind in kinds]
        groups += [(f"protected_{name}", kind, [c for c in canon[kind] if c in protected])
                   for name, kind in kinds]
    return [g for g in groups if g[2]]


def _squared_bounds(canon):
    """``{column: bound on its squared contribution to an unscaled output row}``.

    Numeric: the scaled value is in [0, 1]; with an indicator, a missing value
    gives the scaled fill value ``f`` and a 1, so ``max(1, f^2 + 1) = 1 + f^2``.
    Categorical: one one-hot entry at most. Passthrough: no bound (inf).
    """
    from ._bounded import BoundedScaler

    out = {}
    for col, spec in canon["numeric"].items():
        if spec["missing"] == "indicator":
            fill = spec["bounds"][0] if spec["fill_value"] is None else spec["fill_value"]
            scaler = BoundedScaler(spec["bounds"], scale=spec["scale"])
            f = float(scaler.transform(np.array([[fill]], dtype=np.float64))[0, 0])
            out[col] = 1.0 + f * f
        else:
            out[col] = 1.0
    out.update({col: 1.0 for col in canon["categorical"]})
    out.update({col: math.inf for col in canon["passthrough"]})
    return out


_SCALE_ROWS = ("constant", "l2", False)


def _check_scale_rows(scale_rows, canon):
    if not (scale_rows is False or scale_rows in ("constant", "l2")):
        raise ValueError(f"scale_rows must be 'constant', 'l2' or False; got {scale_rows!r}.")
    if scale_rows == "constant" and canon["passthrough"]:
        raise ValueError(
            f"scale_rows='constant' needs a bound on every column, but the passthrough "
            f"column(s) {canon['passthrough']!r} have none. Declare them numeric with "
            "bounds (already scaled data: [0, 1]), or use scale_rows=False.")
    if scale_rows == "l2" and canon["protected"]:
        raise ValueError(
            f"scale_rows='l2' divides every column by the row's norm, which includes the "
            f"protected column(s) {canon['protected']!r}: the public columns would then "
            "depend on protected values, outside the feature-DP guarantee. Use "
            "scale_rows='constant' (a data-independent factor), or 'l2' with "
            "'protected': [] when the whole record is protected (DP-SGD).")


def row_norm_bounds(schema, *, scale_rows="constant"):
    """Bounds on the L2 norms of the rows :func:`make_tabular_preprocessor` outputs.

    Computed from the schema alone (bounds, category lists, missing-value
    policies): they hold for every input, whatever its values. Under
    feature DP the public and protected blocks are bounded apart: the
    protected block bounds what one record's protected part can change.

    Parameters
    ----------
    schema : dict
        The schema given to :func:`make_tabular_preprocessor`.
    scale_rows : {"constant", "l2"} or False, default="constant"
        The ``scale_rows`` given to :func:`make_tabular_preprocessor`.

    Returns
    -------
    bounds : RowNormBounds
        Named tuple ``(row, public, protected)``: bounds on the norm of the
        whole output row, of its public columns and of its protected
        columns. With ``"constant"``, ``row`` is 1 (up to rounding) and
        ``public ** 2 + protected ** 2 == row ** 2``; with ``"l2"`` every
        non-empty block is bounded by 1; an empty block by 0.

    Raises
    ------
    ValueError
        An invalid schema or ``scale_rows`` (see
        :func:`make_tabular_preprocessor`).

    See Also
    --------
    make_tabular_preprocessor : The preprocessor these bounds are for.

    Notes
    -----
    Each numeric column contributes at most 1 to the squared norm (its
    output is in [0, 1]), ``1 + f ** 2`` with an indicator column (``f``
    the scaled fill value: 1 with the default fill, the low bound); each
    categorical column at most 1 (one one-hot entry, none for an unknown or
    missing category); a passthrough column has no bound (``inf``). With
    ``"constant"`` every output column is multiplied by
    ``1 / sqrt(S)``, ``S`` the sum of these squared bounds.

    Examples
    --------
    >>> from sklearn_fdp.preprocessing import row_norm_bounds
    >>> schema = {"numeric": {"age": [17, 90], "income": [0, 1e6, "log"]},
    ...           "categorical": {"sex": ["F", "M"]}, "protected": ["sex"]}
    >>> b = row_norm_bounds(schema)
    >>> round(b.row, 6), round(b.public ** 2, 6), round(b.protected ** 2, 6)
    (1.0, 0.666667, 0.333333)
    """
    canon = _canonical(schema)
    _check_scale_rows(scale_rows, canon)
    squared = _squared_bounds(canon)
    protected = set(canon["protected"])
    s_priv = math.fsum(v for c, v in squared.items() if c in protected)
    s_pub = math.fsum(v for c, v in squared.items() if c not in protected)
    if scale_rows == "l2":
        return RowNormBounds(1.0, 1.0 if s_pub else 0.0, 1.0 if s_priv else 0.0)
    total = math.fsum(squared.values())
    factor = 1.0 / math.sqrt(total) if scale_rows == "constant" else 1.0
    return RowNormBounds(factor * math.sqrt(total), factor * math.sqrt(s_pub),
                         factor * math.sqrt(s_priv))


def make_tabular_preprocessor(schema, *, scale_rows="constant", order="protected_last"):
    """Build the data-independent feature transformer a schema declares.

    Numeric columns are clipped to their declared bounds and scaled to
    [0, 1] (:class:`~sklearn_fdp.preprocessing.BoundedScaler`: linear, log
    or signed-log, with a missing-value policy); categorical columns are
    one-hot encoded against their declared category lists; passthrough
    columns are kept as they are, the rest dropped. Then every column is
    multiplied by one constant so that every row has L2 norm at most 1.
    Nothing is learnt from the data: ``fit`` records the input's shape and
    column names only, so the preprocessor may be fitted on private data
    and put in front of any private estimator without spending budget.

    Parameters
    ----------
    schema : dict
        The declared encoding, a plain dict (or a JSON object loaded into
        one), with the keys (all optional but one feature column):

        - ``"numeric"``: ``{column: spec}``, where ``spec`` is ``[low,
          high]``, ``[low, high, scale]`` or a dict with the keys
          ``"bounds"`` (``[low, high]``, required), ``"scale"``
          (``"linear"``, default, ``"log"`` or ``"signed-log"``),
          ``"missing"`` (``"error"``, default, ``"fill"`` or
          ``"indicator"``) and ``"fill_value"`` (a number in the column's
          units; default: ``low``). See
          :class:`~sklearn_fdp.preprocessing.BoundedScaler` for the maps.
        - ``"categorical"``: ``{column: categories}`` (a list of strings or
          numbers, compared as strings: ``3`` and ``3.0`` are ``"3"``) or
          ``{column: {"categories": [...], "unknown": "ignore"}}``;
          ``"unknown"``: ``"ignore"`` (default; an unknown or missing value
          is encoded as all zeros) or ``"error"`` (a ValueError naming the
          column, not the value).
        - ``"protected"``: the protected columns (under feature DP), a
          list; every output column derived from one of them is protected.
          ``[]`` (the default) when none is, or the whole record is.
        - ``"passthrough"``: columns kept as they are (they have no bound:
          only with ``scale_rows=False``); ``"drop"``: columns dropped.
          Columns the schema does not name are dropped too.
        - ``"input_columns"``: every input column, in order; needed only to
          transform arrays without column names (columns by position).

        The command line's ``--schema`` format (docs/cli.md) is accepted:
        ``"bounds"`` stands for ``"numeric"``, ``"categories"`` for
        ``"categorical"``. :func:`propose_schema` writes a skeleton.
    scale_rows : {"constant", "l2"} or False, default="constant"
        How rows are bounded. ``"constant"``: every output column is
        multiplied by ``1 / sqrt(S)`` (see :func:`row_norm_bounds`), so
        every row has norm <= 1 and every output column still depends on
        its own input column only (safe under feature DP). ``"l2"``:
        :class:`~sklearn.preprocessing.Normalizer` (norm exactly 1), which
        mixes every column into every other; refused when the schema
        protects columns. ``False``: no scaling.
    order : {"protected_last", "type"}, default="protected_last"
        Output column order. ``"protected_last"``: the public numeric,
        categorical and passthrough columns, then the protected ones
        (blocks ``num``, ``cat``, ``pass``, ``protected_num``,
        ``protected_cat``, ``protected_pass``); ``"type"``: all numeric,
        then all categorical, then all passthrough columns (blocks ``num``,
        ``cat``, ``pass``). Within a block, the schema's order.

    Returns
    -------
    preprocessor : :class:`~sklearn.pipeline.Pipeline`
        Unfitted ``Pipeline([("columns", ColumnTransformer), ("scale",
        FunctionTransformer, Normalizer or "passthrough")])`` producing a
        dense float64 array. Output names are ``<block>__<column>``
        (``num__age``, ``num__age_missing`` for an indicator) and
        ``<block>__<column>_<category>`` (``cat__sex_F``).

    Raises
    ------
    ValueError
        A schema entry that is invalid or unfilled (the message names the
        key and the fix), or an invalid ``scale_rows`` or ``order``.

    See Also
    --------
    row_norm_bounds : The norm bounds of its output rows, per block.
    propose_schema : A skeleton schema from a DataFrame's names and dtypes.
    sklearn_fdp.datasets.make_adult_preprocessor : Built on it.

    Notes
    -----
    Privacy: the map is fixed by the schema and acts on each entry alone (a
    one-hot block on its own column; the constant factor is the same for
    every row), so changing a record's protected values never changes its
    public output columns, and :func:`sklearn_fdp.privacy_report` lists
    every step as data-independent. That holds only if the bounds and
    category lists are public knowledge, not read off the private data.

    Give ``private_features=schema["protected"]`` to a feature-DP estimator
    after it: a column name selects all its output columns (inside
    :func:`~sklearn_fdp.pipeline.make_private_pipeline`, which also checks
    that no public output depends on a protected input).

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_fdp.preprocessing import make_tabular_preprocessor
    >>> schema = {"numeric": {"age": [17, 90], "income": [0, 1e6, "log"]},
    ...           "categorical": {"sex": ["F", "M"]}, "protected": ["sex"]}
    >>> X = pd.DataFrame({"age": [30, 95], "income": [5e4, 0.0], "sex": ["F", "X"]})
    >>> pre = make_tabular_preprocessor(schema, scale_rows=False).fit(X)
    >>> [str(n) for n in pre.get_feature_names_out()]
    ['num__age', 'num__income', 'protected_cat__sex_F', 'protected_cat__sex_M']
    >>> pre.transform(X).round(3)
    array([[0.178, 0.783, 1.   , 0.   ],
           [1.   , 0.   , 0.   , 0.   ]])
    """
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer, Normalizer, OneHotEncoder

    from ._bounded import BoundedScaler
    from ._schema_columns import SchemaColumnTransformer
    from ._declaration import TabularPreprocessor

    canon = _canonical(schema)
    _check_scale_rows(scale_rows, canon)
    blocks = _blocks(canon, order)
    inputs = canon["input_columns"]
    parts = []
    for name, kind, cols in blocks:
        if kind == "numeric":
            specs = [canon["numeric"][c] for c in cols]
            step = BoundedScaler(
                [s["bounds"] for s in specs],
                scale=_one_or_list([s["scale"] for s in specs]),
                missing=_one_or_list([s["missing"] for s in specs]),
                fill_value=_one_or_list([s["fill_value"] for s in specs]))
        elif kind == "categorical":
            specs = [canon["categorical"][c] for c in cols]
            # unknown="error" is checked by the string step (its message names the
            # column, never the value); the encoder itself ignores unknown values.
            strict = {j: list(s["categories"]) for j, s in enumerate(specs)
                      if s["unknown"] == "error"}
            step = Pipeline([
                ("str", FunctionTransformer(_as_strings, feature_names_out="one-to-one",
                                            kw_args={"strict": strict} if strict else None)),
                ("onehot", OneHotEncoder(categories=[list(s["categories"]) for s in specs],
                                         handle_unknown="ignore", sparse_output=False,
                                         dtype=np.float64)),
            ])
        else:
            step = "passthrough"
        selector = (list(cols) if inputs is None
                    else functools.partial(_select_columns, names=tuple(cols),
                                           input_columns=tuple(inputs)))
        parts.append((name, step, selector))
    columns = SchemaColumnTransformer(parts, remainder="drop", sparse_threshold=0.0)
    if scale_rows == "constant":
        total = math.fsum(_squared_bounds(canon).values())
        scale = FunctionTransformer(_scale_constant,
                                    kw_args={"factor": 1.0 / math.sqrt(total)},
                                    feature_names_out="one-to-one")
    elif scale_rows == "l2":
        scale = Normalizer(norm="l2")
    else:
        scale = "passthrough"
    bounds = row_norm_bounds(schema, scale_rows=scale_rows)
    if bounds is not None and not all(math.isfinite(b) for b in bounds):
        bounds = None
    declaration = {"protected": list(canon["protected"]),
                   "row_norm_bounds": None if bounds is None else tuple(bounds),
                   "target_bounds": canon["target"]}
    return TabularPreprocessor([("columns", columns), ("scale", scale)],
                               declaration=declaration)


def _one_or_list(values):
    """One value when all are equal (the scaler's scalar form), else the list."""
    first = values[0]
    if all(v == first and type(v) is type(first) for v in values):
        return first
    return list(values)


def propose_schema(X):
    """A schema skeleton from a DataFrame's column names and dtypes, never its values.

    Every numeric column gets a numeric entry with bounds left unfilled,
    every text or categorical column a categorical entry with categories
    left unfilled, boolean columns the bounds [0, 1], date and duration
    columns go to ``"drop"``, and ``"protected"`` is left unfilled. The
    skeleton is a plain dict (``json.dump`` writes it) for the user to fill
    in from public knowledge; :func:`make_tabular_preprocessor` refuses it
    with a message naming the first unfilled entry until every one is
    filled.

    Parameters
    ----------
    X : pandas.DataFrame
        Only ``X.columns`` (strings) and ``X.dtypes`` are read; the values,
        their number and the category lists of ``category`` dtypes are not.

    Returns
    -------
    schema : dict
        ``{"numeric": {col: {"bounds": None, "scale": "linear", "missing":
        "error"}}, "categorical": {col: {"categories": None, "unknown":
        "ignore"}}, "passthrough": [], "drop": [...], "protected": None,
        "input_columns": [every column]}``, columns in ``X``'s order.

    Raises
    ------
    TypeError
        ``X`` is not a DataFrame.
    ValueError
        A column name is not a string, or is repeated.

    See Also
    --------
    make_tabular_preprocessor : Builds the preprocessor from the filled schema.

    Notes
    -----
    Privacy: reading the values (their range, the categories that occur)
    would make the schema a statistic of the data, released without noise
    through every model trained after it; so the bounds and categories are
    the user's to declare, from a codebook, a form or the law. The
    missing-value policy is ``"error"`` everywhere (whether a column has
    missing values is a property of the values); change it where missing
    values are expected.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn_fdp.preprocessing import propose_schema
    >>> X = pd.DataFrame({"age": [30, 41], "sex": ["F", "M"], "member": [True, False]})
    >>> schema = propose_schema(X)
    >>> schema["numeric"]["age"]
    {'bounds': None, 'scale': 'linear', 'missing': 'error'}
    >>> schema["categorical"]["sex"]
    {'categories': None, 'unknown': 'ignore'}
    >>> schema["numeric"]["member"]["bounds"]
    [0.0, 1.0]
    """
    import pandas as pd
    from pandas.api import types

    if not isinstance(X, pd.DataFrame):
        raise TypeError(
            f"propose_schema needs a pandas DataFrame (its column names and dtypes), got "
            f"{type(X).__name__}. Build one with pandas.DataFrame(X, columns=[...]) or write "
            "the schema by hand.")
    names = list(X.columns)
    bad = [c for c in names if not isinstance(c, str)]
    if bad:
        raise ValueError(f"propose_schema: column names must be strings, got {bad!r}. Rename "
                         "them, e.g. X.columns = [str(c) for c in X.columns].")
    dup = sorted({c for c in names if names.count(c) > 1})
    if dup:
        raise ValueError(f"propose_schema: column {dup[0]!r} appears twice; rename it.")
    numeric, categorical, drop = {}, {}, []
    for col, dtype in X.dtypes.items():
        if types.is_bool_dtype(dtype):
            numeric[col] = {"bounds": [0.0, 1.0], "scale": "linear", "missing": "error"}
        elif (types.is_datetime64_any_dtype(dtype) or types.is_timedelta64_dtype(dtype)
              or isinstance(dtype, pd.PeriodDtype) or types.is_complex_dtype(dtype)):
            drop.append(col)
        elif types.is_numeric_dtype(dtype) and not isinstance(dtype, pd.CategoricalDtype):
            numeric[col] = {"bounds": None, "scale": "linear", "missing": "error"}
        else:  # text, object, category: the category lists are the user's to give
            categorical[col] = {"categories": None, "unknown": "ignore"}
    return {"numeric": numeric, "categorical": categorical, "passthrough": [], "drop": drop,
            "protected": None, "input_columns": names}

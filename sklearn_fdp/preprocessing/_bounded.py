"""A column scaler with declared bounds: clip, linear/log/signed-log map to a fixed range."""

import math
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils import check_array

from .._validation import (
    _fit_context,
    atomic_fit,
    check_numeric_columns,
    validate_numeric_data,
)

__all__ = ["BoundedScaler"]

_FLOAT_DTYPES = [np.float64, np.float32]
_SCALES = ("linear", "log", "signed-log")
_MISSING = ("error", "fill", "indicator")
_BOUNDS_HINT = ("give a (low, high) pair for every column, a list of one (low, high) pair "
                "per column in column order, or a dict {column name: (low, high)}")


def _column_names(X):
    """String column names of a DataFrame ``X`` (None for anything else), before conversion."""
    columns = getattr(X, "columns", None)
    if columns is None or not all(isinstance(c, str) for c in columns):
        return None
    return list(columns)


def _names_in(est):
    """``feature_names_in_`` of a fitted ``est`` as a list of str, or None."""
    names = getattr(est, "feature_names_in_", None)
    return None if names is None else [str(c) for c in names]


def _label(names, j):
    """Column ``j`` as messages name it: its name if X has names, else its index."""
    return repr(names[j]) if names is not None else str(j)


def _as_pairs(value, what):
    """``value`` as a float64 array of (low, high) pairs, or a ValueError naming ``what``."""
    try:
        pairs = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must hold numbers, got {value!r}; {_BOUNDS_HINT}.") from None
    if pairs.ndim not in (1, 2) or pairs.shape[-1] != 2:
        raise ValueError(f"{what} must be (low, high) pairs, got {value!r} (shape "
                         f"{pairs.shape}); {_BOUNDS_HINT}.")
    return pairs



def _map_scaled_columns(values, kind, fn):
    """``fn`` on the ``"log"`` columns (``kind == 1``) and ``sign · fn(|·|)`` on the
    ``"signed-log"`` ones (``kind == 2``) of ``values``, in place; the forward map with
    ``log1p``, the inverse with ``expm1``."""
    log, signed = kind == 1, kind == 2
    if log.any():
        values[:, log] = fn(values[:, log])
    if signed.any():
        part = values[:, signed]
        values[:, signed] = np.sign(part) * fn(np.abs(part))
    return values

class BoundedScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Scale each column from declared bounds ``[low, high]`` to a fixed range, clipping.

    Every column is clipped to its declared ``[low, high]``, mapped through
    a fixed monotone function ``f`` (``scale``: the identity, ``log1p`` or a
    signed ``log1p``, for heavy tails such as incomes), and mapped linearly
    to ``feature_range``: ``low`` goes to ``feature_range[0]`` and ``high``
    to ``feature_range[1]``. Missing values (NaN) are refused, or replaced
    by a declared constant, optionally with an indicator column
    (``missing``). The bounds are parameters, never read off the data:
    ``fit`` learns nothing from the values, so the scaler is
    data-independent and free under any differential-privacy notion.

    Parameters
    ----------
    feature_bounds : tuple of (float, float), array-like of shape (n_features, 2) or dict
        The declared bounds, each a pair ``(low, high)`` of finite numbers
        with ``low < high``: one pair for every column, one pair per column
        in column order, or a dict ``{column name: (low, high)}`` naming
        every column of a DataFrame ``X`` (in any order). Choose them from
        public knowledge (a questionnaire's coding, a sensor's range), not
        from the private data.
    log : bool or array-like of bool of shape (n_features,), default=False
        Whether to scale ``log1p(x)`` between ``log1p(low)`` and
        ``log1p(high)`` instead of ``x`` between ``low`` and ``high``: one
        value for every column, or one per entry of ``feature_bounds`` (in
        its order, a dict's order for a dict). A log-scaled column needs
        ``low > -1``. ``log=True`` is ``scale="log"``; give ``log`` or
        ``scale``, not both.
    feature_range : tuple of (float, float), default=(0.0, 1.0)
        Output range ``(a, b)``, finite with ``a < b``: ``low`` maps to ``a``
        and ``high`` to ``b``.
    scale : {"linear", "log", "signed-log"}, list of them or None, default=None
        The map ``f`` applied to the clipped value before the linear map to
        ``feature_range`` (one for every column, or one per entry of
        ``feature_bounds`` in its order; None: from ``log``):

        - ``"linear"``: ``f(x) = x``;
        - ``"log"``: ``f(x) = log1p(x)``; needs ``low > -1``;
        - ``"signed-log"``: ``f(x) = sign(x) * log1p(|x|)``, for heavy
          tails on both sides (a balance, a profit); any bounds.

        The output is ``a + (b - a) * (f(clip(x)) - f(low)) / (f(high) -
        f(low))``.
    missing : {"error", "fill", "indicator"} or list of them, default="error"
        What a missing value (NaN) of a column becomes (one for every
        column, or one per entry of ``feature_bounds``):

        - ``"error"``: a ValueError naming the column;
        - ``"fill"``: ``fill_value``, then clipped and scaled as any value;
        - ``"indicator"``: as ``"fill"``, and a column ``<name>_missing``
          right after the column's own output, 1.0 where the value was
          missing and 0.0 elsewhere.

        Infinite values are refused whatever the policy.
    fill_value : float, list of float or None, default=None
        The declared constant, in the column's units, that replaces a
        missing value under ``missing="fill"`` or ``"indicator"`` (one for
        every column, or one per entry of ``feature_bounds``); None: the
        column's ``low`` bound. Must be finite; it is clipped to the bounds
        like any value.

    Attributes
    ----------
    n_features_in_ : int
        Number of columns seen in ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Column names seen in ``fit``; defined when ``X`` has string column
        names.

    See Also
    --------
    sklearn.preprocessing.MinMaxScaler : Learns the bounds from the data
        (their minimum and maximum are then statistics of the data).
    sklearn_fdp.datasets.make_adult_preprocessor : Uses it for the Adult
        numeric columns.

    Notes
    -----
    Privacy: the map ``x -> transform(x)`` is fixed by the parameters and
    acts on each entry alone (no statistic of any row or column), so it is
    safe anywhere, including before a private estimator and on protected
    columns under feature DP; :func:`~sklearn_fdp.privacy_report` and
    :class:`~sklearn_fdp.pipeline.PrivatePipeline` list it as
    data-independent and free. That holds only if the bounds are public
    knowledge: bounds read off the private data (its minimum and maximum)
    would release those statistics through the fitted model, outside any
    budget.

    A value outside ``[low, high]`` is clipped to the nearer bound, so the
    output always lies in ``feature_range`` whatever the input, the
    guarantee a DP estimator's clipping and sensitivity analysis rely on
    (each column contributes at most ``max(|a|, |b|)`` to a row's norm, and
    an indicator column 1 more). Every map is fixed by the parameters and
    monotone, so the scaled column keeps the order of the values.
    Clipping is silent: a warning or error on out-of-bound values would
    itself reveal something about the data. Missing values are refused
    (ValueError) unless ``missing`` says otherwise; infinite values always
    are. ``inverse_transform`` maps back into ``[low, high]``; a clipped
    value comes back as its bound, a value flagged missing by its
    indicator as NaN.

    ``fit`` only checks ``X`` against the bounds (number of columns, names)
    and records ``n_features_in_`` and ``feature_names_in_``;
    ``transform`` also works without ``fit``. float32 input stays float32
    (computed in float64, then rounded); other input becomes float64.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp.preprocessing import BoundedScaler
    >>> X = np.array([[17.0, 0.0], [53.5, 99.0], [120.0, 1e9]])
    >>> scaler = BoundedScaler([(17.0, 90.0), (0.0, 99999.0)], log=[False, True])
    >>> scaler.fit_transform(X).round(3)
    array([[0. , 0. ],
           [0.5, 0.4],
           [1. , 1. ]])
    """

    _parameter_constraints: dict = {
        "feature_bounds": ["array-like", dict],
        "log": ["boolean", "array-like"],
        "feature_range": [tuple],
        "scale": [None, str, "array-like"],
        "missing": [str, "array-like"],
        "fill_value": [None, Real, "array-like"],
    }

    def __init__(self, feature_bounds, *, log=False, feature_range=(0.0, 1.0), scale=None,
                 missing="error", fill_value=None):
        self.feature_bounds = feature_bounds
        self.log = log
        self.feature_range = feature_range
        self.scale = scale
        self.missing = missing
        self.fill_value = fill_value

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X, y=None):
        """Check ``X`` against the declared bounds; nothing is learnt from its values.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric data; only its number of columns and their names are
            used (and missing values are checked against ``missing``).
        y : None
            Ignored.

        Returns
        -------
        self : BoundedScaler
        """
        X = validate_numeric_data(self, X, dtype=_FLOAT_DTYPES,
                                  ensure_all_finite=self._finite_check())
        plan = self._plan(X.shape[1], _names_in(self))
        self._check_missing(X, plan, _names_in(self))
        return self

    @property
    def _n_features_outs(self):
        """Output columns per input column (2 with an indicator), fitted only.

        Read by the preprocessing tracer of :mod:`sklearn_fdp.pipeline` (as
        OneHotEncoder's attribute of the same name) to map every output
        column to its input column when the input has no column names.
        """
        if not hasattr(self, "n_features_in_"):
            raise AttributeError("_n_features_outs")
        plan = self._plan(self.n_features_in_, _names_in(self))
        return [2 if ind else 1 for ind in plan.indicator]

    def transform(self, X):
        """Clip each column to its bounds and map it to ``feature_range``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric data, without infinite values (and without missing
            values in the columns whose ``missing`` policy is ``"error"``).

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features + n_indicators)
            Values in ``feature_range`` (indicator columns, if any, 0.0 or
            1.0, each right after its column); float32 for float32 input,
            float64 otherwise. ``X`` is not modified.
        """
        X, names = self._validate(X)
        plan = self._plan(X.shape[1], names)
        self._check_missing(X, plan, names)
        low, high, kind, offset, scale, (a, b) = plan[:6]
        values = np.asarray(X, dtype=np.float64)
        missing = None
        if plan.indicator.any() or plan.fill is not None:
            missing = np.isnan(values)
            if missing.any():
                values = np.where(missing, plan.fill_row, values)
        values = _map_scaled_columns(np.clip(values, low, high), kind, np.log1p)
        out = (values - offset) / scale
        if (a, b) != (0.0, 1.0):  # the default range: exactly the unit map
            out = out * (b - a) + a
        if plan.indicator.any():
            flags = missing[:, plan.indicator].astype(np.float64)
            at = np.flatnonzero(plan.indicator) + 1  # insert each flag after its column
            out = np.insert(out, at, flags, axis=1)
        return out.astype(X.dtype, copy=False)

    def inverse_transform(self, X):
        """Map values of ``feature_range`` back to ``[low, high]`` (clipped values stay bounds).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features + n_indicators)
            Scaled data, as returned by :meth:`transform`.

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
            Values in the original units (NaN where an indicator column
            flags a missing value); float32 for float32 input, float64
            otherwise.
        """
        if self._indicator_possible() and hasattr(self, "n_features_in_"):
            plan = self._plan(self.n_features_in_, _names_in(self))
        else:
            plan = None
        if plan is not None and plan.indicator.any():
            X = check_array(X, dtype=_FLOAT_DTYPES, estimator=self)
            n_out = self.n_features_in_ + int(plan.indicator.sum())
            if X.shape[1] != n_out:
                raise ValueError(
                    f"X has {X.shape[1]} features, but {type(self).__name__}.inverse_transform "
                    f"expects the {n_out} columns transform returns (values and indicators).")
            is_flag = np.zeros(n_out, dtype=bool)
            is_flag[np.flatnonzero(plan.indicator) + np.arange(1, plan.indicator.sum() + 1)] = True
            flags, X = X[:, is_flag], X[:, ~is_flag]
        else:
            X, names = self._validate(X)
            plan = self._plan(X.shape[1], names)
            flags = None
        _, _, kind, offset, scale, (a, b) = plan[:6]
        values = X.astype(np.float64)
        if (a, b) != (0.0, 1.0):
            values = (values - a) / (b - a)
        values = _map_scaled_columns(values * scale + offset, kind, np.expm1)
        if flags is not None:
            cols = np.flatnonzero(plan.indicator)
            values[:, cols] = np.where(flags > 0.5, np.nan, values[:, cols])
        return values.astype(X.dtype, copy=False)

    def get_feature_names_out(self, input_features=None):
        """Output column names: the input names, each indicator as ``<name>_missing``.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Input column names; None: ``feature_names_in_``, else
            ``x0, x1, ...``.

        Returns
        -------
        feature_names_out : ndarray of str objects
        """
        names = super().get_feature_names_out(input_features)
        if not self._indicator_possible():
            return names
        indicator = self._plan(len(names), [str(c) for c in names]).indicator
        out = []
        for name, ind in zip(names, indicator, strict=True):
            out.append(name)
            if ind:
                out.append(f"{name}_missing")
        return np.asarray(out, dtype=object)

    def _finite_check(self):
        """``ensure_all_finite`` for the input: NaN passes, for :meth:`_check_missing`."""
        return "allow-nan"

    def _nan_possible(self):
        missing = self.missing
        if isinstance(missing, str):
            return missing != "error"
        try:
            return any(m != "error" for m in missing)
        except TypeError:
            return True  # checked (and refused) by _plan

    def _indicator_possible(self):
        missing = self.missing
        if isinstance(missing, str):
            return missing == "indicator"
        try:
            return any(m == "indicator" for m in missing)
        except TypeError:
            return False

    def _check_missing(self, X, plan, names):
        """Refuse infinities, and NaN in the columns whose policy is ``"error"``."""
        values = np.asarray(X)
        infinite = np.isinf(values).any(axis=0)
        if infinite.any():
            column = _label(names, int(np.flatnonzero(infinite)[0]))
            raise ValueError(
                f"Input X of {type(self).__name__} contains infinity in column {column}: "
                "replace infinite values by finite ones (they are clipped to the bounds) "
                "or drop those rows.")
        nan = np.isnan(values).any(axis=0) & ~plan.fills
        if nan.any():
            column = _label(names, int(np.flatnonzero(nan)[0]))
            raise ValueError(
                f"Input X of {type(self).__name__} contains NaN in column {column}, whose "
                "missing policy is 'error': fill the missing values, drop those rows, or "
                "declare missing='fill' (a constant, fill_value) or 'indicator' (the "
                "constant and a 0/1 column) for that column.")

    def _validate(self, X):
        """``(X as a float array, its column names)``; fitted or not (no fit is needed)."""
        if hasattr(self, "n_features_in_"):
            X = validate_numeric_data(self, X, reset=False, dtype=_FLOAT_DTYPES,
                                      ensure_all_finite=self._finite_check())
            return X, _names_in(self)
        self._validate_params()
        names = _column_names(X)
        check_numeric_columns(self, X)
        return check_array(X, dtype=_FLOAT_DTYPES, estimator=self,
                           ensure_all_finite=self._finite_check()), names

    def _bounds_of(self, n_features, names):
        """``(low, high)`` float64 arrays in ``X``'s column order (checked)."""
        name = type(self).__name__
        bounds = self.feature_bounds
        if isinstance(bounds, dict):
            if names is None:
                raise ValueError(
                    f"feature_bounds of {name} is a dict keyed by column names, but X has no "
                    "string column names. Pass a pandas DataFrame, or give one (low, high) "
                    "pair per column in column order.")
            missing = [c for c in names if c not in bounds]
            extra = [c for c in bounds if c not in names]
            if missing or extra:
                raise ValueError(
                    f"feature_bounds of {name} must name every column of X and nothing else; "
                    f"missing: {missing}, not in X: {extra}. Columns of X: {names}.")
            pairs = _as_pairs([bounds[c] for c in names], f"feature_bounds of {name}")
        else:
            pairs = _as_pairs(bounds, f"feature_bounds of {name}")
            if pairs.ndim == 1:
                pairs = np.tile(pairs, (n_features, 1))
            elif len(pairs) != n_features:
                raise ValueError(
                    f"feature_bounds of {name} has {len(pairs)} (low, high) pairs but X has "
                    f"{n_features} columns; {_BOUNDS_HINT}.")
        for j, (low, high) in enumerate(pairs):
            column = _label(names, j)
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(
                    f"feature_bounds of {name}: column {column} has (low, high) = "
                    f"({float(low)!r}, {float(high)!r}); need finite numbers with low < high. "
                    "Use bounds known without looking at the data.")
        return pairs[:, 0], pairs[:, 1]

    def _per_column(self, param, value, n_features, names, check):
        """A per-column parameter as an array in ``X``'s column order (checked).

        ``value`` is one value for every column, or a list of one per entry of
        ``feature_bounds`` (a dict's order for a dict); ``check(v)`` says
        whether one value is acceptable.
        """
        name = type(self).__name__
        if check(value):
            return np.array([value] * n_features, dtype=object)
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
            raise ValueError(f"{param} of {name} got {value!r}; " + check.hint)
        entries = list(value)
        bad = [v for v in entries if not check(v)]
        if bad or np.ndim(value) != 1:
            raise ValueError(f"{param} of {name} got {value!r}; " + check.hint)
        if isinstance(self.feature_bounds, dict):
            if len(entries) != len(self.feature_bounds):
                raise ValueError(
                    f"{param} of {name} has {len(entries)} entries but feature_bounds has "
                    f"{len(self.feature_bounds)}; give one per entry, in its order.")
            position = {c: i for i, c in enumerate(self.feature_bounds)}
            return np.array([entries[position[c]] for c in names], dtype=object)
        if len(entries) != n_features:
            raise ValueError(f"{param} of {name} has {len(entries)} entries but X has "
                             f"{n_features} columns; give one per column, in column order.")
        return np.array(entries, dtype=object)

    def _log_mask(self, n_features, names):
        """The ``log`` parameter as a bool array in ``X``'s column order (checked)."""
        name = type(self).__name__
        log = self.log
        if isinstance(log, (bool, np.bool_)):
            return np.full(n_features, bool(log))
        mask = np.asarray(log)
        if mask.ndim != 1 or mask.dtype != np.bool_:
            raise ValueError(f"log of {name} must be a bool or a list of bools, one per "
                             f"column, got {log!r}.")
        if isinstance(self.feature_bounds, dict):
            if len(mask) != len(self.feature_bounds):
                raise ValueError(
                    f"log of {name} has {len(mask)} entries but feature_bounds has "
                    f"{len(self.feature_bounds)}; give one bool per entry, in its order.")
            position = {c: i for i, c in enumerate(self.feature_bounds)}
            return mask[[position[c] for c in names]]
        if len(mask) != n_features:
            raise ValueError(f"log of {name} has {len(mask)} entries but X has {n_features} "
                             "columns; give one bool per column, in column order.")
        return mask.copy()

    def _kinds(self, n_features, names):
        """The map of every column as an int code: 0 linear, 1 log, 2 signed-log."""
        log = self._log_mask(n_features, names)
        if self.scale is None:
            return log.astype(np.int64)
        if log.any():
            raise ValueError(
                f"{type(self).__name__} got both log={self.log!r} and scale={self.scale!r}; "
                "give one of them: scale='log' is log=True.")
        scales = self._per_column("scale", self.scale, n_features, names, _is_scale)
        return np.array([_SCALES.index(v) for v in scales], dtype=np.int64)

    def _plan(self, n_features, names):
        """The per-column plan of ``X``'s columns, checked (a :class:`_Plan`).

        ``transform`` computes ``(f(clip(x, low, high)) - offset) / scale``
        (``f`` the map of ``kind``), then maps [0, 1] to ``(a, b)``.
        """
        name = type(self).__name__
        low, high = self._bounds_of(n_features, names)
        kind = self._kinds(n_features, names)
        below = np.flatnonzero((kind == 1) & (low <= -1))
        if below.size:
            j = below[0]
            column = _label(names, j)
            raise ValueError(
                f"log of {name}: column {column} is log-scaled but its low bound is "
                f"{float(low[j])!r}; log1p needs low > -1. Shift the column, use "
                "scale='signed-log', or do not log-scale it.")
        a, b = self._range()
        log, signed = kind == 1, kind == 2
        offset = np.where(log, np.log1p(np.where(log, low, 0.0)), low)
        top = np.where(log, np.log1p(np.where(log, high, 0.0)), high)
        offset = np.where(signed, np.sign(low) * np.log1p(np.abs(low)), offset)
        top = np.where(signed, np.sign(high) * np.log1p(np.abs(high)), top)
        policy = self._per_column("missing", self.missing, n_features, names, _is_policy)
        fills = policy != "error"
        indicator = policy == "indicator"
        fill_row = None
        if fills.any():
            given = self._per_column("fill_value", self.fill_value, n_features, names,
                                     _is_fill)
            fill_row = np.array([low[j] if v is None else float(v)
                                 for j, v in enumerate(given)], dtype=np.float64)
        return _Plan(low, high, kind, offset, top - offset, (a, b), fills, indicator,
                     fill_row if fills.any() else None, fill_row)

    def _range(self):
        """``feature_range`` as two floats ``a < b`` (checked)."""
        try:
            a, b = (float(v) for v in self.feature_range)
        except (TypeError, ValueError):
            a = b = math.nan
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise ValueError(
                f"feature_range of {type(self).__name__} must be two finite numbers (a, b) "
                f"with a < b, got {self.feature_range!r}; e.g. (0.0, 1.0).")
        return a, b

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Nothing is learnt: transform needs no fit, and the privacy tracer
        # (sklearn_fdp._report._learns_from_data) lists the step as free.
        tags.requires_fit = False
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.allow_nan = self._nan_possible()
        return tags


class _Plan(tuple):
    """``(low, high, kind, offset, scale, (a, b), fills, indicator, fill, fill_row)``."""

    __slots__ = ()
    _fields = ("low", "high", "kind", "offset", "scale", "range", "fills", "indicator",
               "fill", "fill_row")

    def __new__(cls, *values):
        return super().__new__(cls, values)

    def __getattr__(self, field):
        try:
            return self[self._fields.index(field)]
        except ValueError:
            raise AttributeError(field) from None


def _check(hint):
    def deco(fn):
        fn.hint = hint
        return fn
    return deco


@_check(f"give one of {list(_SCALES)}, or a list of one per column.")
def _is_scale(v):
    return isinstance(v, str) and v in _SCALES


@_check(f"give one of {list(_MISSING)}, or a list of one per column.")
def _is_policy(v):
    return isinstance(v, str) and v in _MISSING


@_check("give a finite number (in the column's units), None for the low bound, or a list of "
        "one per column.")
def _is_fill(v):
    if v is None:
        return True
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (Real, np.floating, np.integer)):
        return False
    return math.isfinite(float(v))

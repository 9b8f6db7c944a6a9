"""A column scaler with declared bounds: clip, optional ``log1p``, map to a fixed range."""

import math

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils import check_array

from ._validation import (
    _fit_context,
    atomic_fit,
    check_numeric_columns,
    validate_numeric_data,
)

__all__ = ["BoundedScaler"]

_FLOAT_DTYPES = [np.float64, np.float32]
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


class BoundedScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Scale each column from declared bounds ``[low, high]`` to a fixed range, clipping.

    Every column is clipped to its declared ``[low, high]``, optionally
    mapped through ``log1p`` (for heavy tails such as incomes), and mapped
    linearly to ``feature_range``: ``low`` goes to ``feature_range[0]`` and
    ``high`` to ``feature_range[1]``. The bounds are parameters, never read
    off the data: ``fit`` learns nothing from the values, so the scaler is
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
        ``low > -1``.
    feature_range : tuple of (float, float), default=(0.0, 1.0)
        Output range ``(a, b)``, finite with ``a < b``: ``low`` maps to ``a``
        and ``high`` to ``b``.

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
    (each column contributes at most ``max(|a|, |b|)`` to a row's norm).
    Clipping is silent: a warning or error on out-of-bound values would
    itself reveal something about the data. Missing and infinite values
    are refused (ValueError). ``inverse_transform`` maps back into
    ``[low, high]``; a clipped value comes back as its bound.

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
    }

    def __init__(self, feature_bounds, *, log=False, feature_range=(0.0, 1.0)):
        self.feature_bounds = feature_bounds
        self.log = log
        self.feature_range = feature_range

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X, y=None):
        """Check ``X`` against the declared bounds; nothing is learnt from its values.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric data; only its number of columns and their names are used.
        y : None
            Ignored.

        Returns
        -------
        self : BoundedScaler
        """
        X = validate_numeric_data(self, X, dtype=_FLOAT_DTYPES)
        self._plan(X.shape[1], _names_in(self))
        return self

    def transform(self, X):
        """Clip each column to its bounds and map it to ``feature_range``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric data, without missing or infinite values.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features)
            Values in ``feature_range``; float32 for float32 input, float64
            otherwise. ``X`` is not modified.
        """
        X, names = self._validate(X)
        low, high, log, offset, scale, (a, b) = self._plan(X.shape[1], names)
        values = np.clip(np.asarray(X, dtype=np.float64), low, high)
        if log.any():
            values[:, log] = np.log1p(values[:, log])
        out = (values - offset) / scale
        if (a, b) != (0.0, 1.0):  # the default range: exactly the unit map
            out = out * (b - a) + a
        return out.astype(X.dtype, copy=False)

    def inverse_transform(self, X):
        """Map values of ``feature_range`` back to ``[low, high]`` (clipped values stay bounds).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Scaled data, as returned by :meth:`transform`.

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
            Values in the original units; float32 for float32 input,
            float64 otherwise.
        """
        X, names = self._validate(X)
        _, _, log, offset, scale, (a, b) = self._plan(X.shape[1], names)
        values = X.astype(np.float64)
        if (a, b) != (0.0, 1.0):
            values = (values - a) / (b - a)
        values = values * scale + offset
        if log.any():
            values[:, log] = np.expm1(values[:, log])
        return values.astype(X.dtype, copy=False)

    def _validate(self, X):
        """``(X as a float array, its column names)``; fitted or not (no fit is needed)."""
        if hasattr(self, "n_features_in_"):
            X = validate_numeric_data(self, X, reset=False, dtype=_FLOAT_DTYPES)
            return X, _names_in(self)
        self._validate_params()
        names = _column_names(X)
        check_numeric_columns(self, X)
        return check_array(X, dtype=_FLOAT_DTYPES, estimator=self), names

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

    def _plan(self, n_features, names):
        """``(low, high, log, offset, scale, (a, b))`` per column of ``X``, checked.

        ``transform`` computes ``(f(clip(x, low, high)) - offset) / scale``
        (``f`` = ``log1p`` where ``log``, else the identity), then maps [0, 1]
        to ``(a, b)``.
        """
        name = type(self).__name__
        low, high = self._bounds_of(n_features, names)
        log = self._log_mask(n_features, names)
        below = np.flatnonzero(log & (low <= -1))
        if below.size:
            j = below[0]
            column = _label(names, j)
            raise ValueError(
                f"log of {name}: column {column} is log-scaled but its low bound is "
                f"{float(low[j])!r}; log1p needs low > -1. Shift the column, or do not "
                "log-scale it.")
        a, b = self._range()
        offset = np.where(log, np.log1p(np.where(log, low, 0.0)), low)
        top = np.where(log, np.log1p(np.where(log, high, 0.0)), high)
        return low, high, log, offset, top - offset, (a, b)

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
        return tags

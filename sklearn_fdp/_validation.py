"""Shared parameter constraints and the shim for scikit-learn's private helpers.

Private scikit-learn helpers are imported here and only here, so that a
change in scikit-learn breaks one file.
"""

import contextvars
import functools
import math
import sys
import warnings
from numbers import Real

import numpy as np
import scipy.sparse as sp

from sklearn.base import _fit_context
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils._param_validation import Interval as _SklearnInterval
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.metadata_routing import _routing_enabled, process_routing
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _assert_all_finite,
    _check_feature_names,
    _check_method_params,
    _check_n_features,
    _check_y,
    check_consistent_length,
    validate_data,
)

from ._kernels import CSR_CANONICAL, CSR_MALFORMED, csr_format_code
from .accounting import NEIGHBORING_RELATIONS
from .exceptions import PrivacyLeakWarning

__all__ = [
    "DELTA_CONSTRAINT",
    "HasMethods",
    "NEIGHBORING_CONSTRAINT",
    "Interval",
    "LinearClassifierMixin",
    "StrOptions",
    "_assert_all_finite",
    "_check_method_params",
    "_fit_context",
    "_routing_enabled",
    "atomic_fit",
    "canonical_csr",
    "check_delta_vs_n",
    "check_numeric_columns",
    "check_row_norms_finite",
    "check_y_bounds",
    "encode_labels",
    "process_routing",
    "validate_numeric_data",
]


class Interval(_SklearnInterval):
    """sklearn's ``Interval`` constraint that refuses bools.

    ``True`` and ``False`` are ``numbers.Integral`` in Python, so sklearn's
    constraint takes ``epsilon=True`` for ε = 1 (issue 22 item 6). Every
    estimator's numeric parameters use this class: a bool fails validation
    with sklearn's message ("... must be a float in the range (0, inf). Got
    True instead."). A parameter that also takes a bool lists ``"boolean"``.
    """

    def is_satisfied_by(self, val):
        if isinstance(val, (bool, np.bool_)):
            return False
        return super().is_satisfied_by(val)


# An estimator's δ must be > 0: Gaussian noise gives no pure ε-DP (δ = 0 means ε = ∞).
DELTA_CONSTRAINT = [Interval(Real, 0, 1, closed="neither")]
NEIGHBORING_CONSTRAINT = [StrOptions(set(NEIGHBORING_RELATIONS))]


def check_y_bounds(estimator, *, required):
    """``(lo, hi)`` of ``estimator.y_bounds`` as floats; a ValueError naming the value otherwise.

    ``None`` is returned for ``y_bounds=None`` unless ``required`` (then it is
    an error: the estimator's released statistics are bounded by it). The
    bounds are public parameters, never learnt from the data.
    """
    name = type(estimator).__name__
    bounds = estimator.y_bounds
    fix = ("Give the range the target can take, chosen from public knowledge without "
           "looking at y (e.g. y_bounds=(1, 99) for hours per week).")
    if bounds is None:
        if not required:
            return None
        raise ValueError(
            f"{name} needs y_bounds=(lo, hi): the target is clipped to it and mapped to "
            f"[-1, 1], which bounds its contribution to what is released; it is never "
            f"learnt from the data. {fix}")
    try:
        lo, hi = (float(v) for v in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"y_bounds of {name} must be a pair (lo, hi) of numbers, got "
                         f"{bounds!r}. {fix}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"y_bounds of {name} must be finite with lo < hi, got {bounds!r}. "
                         f"{fix}")
    return lo, hi


def warn_clipped_targets(estimator, n_outside, n_samples, y_bounds, target_private,
                         stacklevel=3):
    """Warn that ``n_outside`` targets lay outside the public ``y_bounds`` and were clipped.

    The count reads the targets. With a private target it is not covered by
    the model's ε, so the message says so: it is meant for whoever runs
    ``fit`` (it is not stored in the model), not for publication.
    """
    from .exceptions import FdpWarning

    private = (" This count reads the private targets and is not covered by epsilon_: it is "
               "shown to whoever runs fit, is not stored in the model, and should not be "
               "published.") if target_private else ""
    warnings.warn(
        f"{type(estimator).__name__}: {n_outside} of {n_samples} target value(s) lie outside "
        f"y_bounds={tuple(y_bounds)!r} and were clipped to them. Widen y_bounds from public "
        f"knowledge (never from these data) if they are plausible values.{private}",
        FdpWarning, stacklevel=stacklevel + 1)


def check_delta_vs_n(delta, n_samples, estimator_name, stacklevel=3):
    """Warn when δ ≥ 1/n: such a δ allows publishing a random record outright."""
    if n_samples > 0 and delta >= 1.0 / n_samples:
        warnings.warn(
            f"delta={delta!r} of {estimator_name} is >= 1/n_samples = "
            f"{1.0 / n_samples:.3g}: a mechanism that publishes one record at "
            "random meets this delta. Use delta well below 1/n_samples "
            f"(e.g. {min(1e-5, 0.1 / n_samples):.1g}).",
            PrivacyLeakWarning,
            stacklevel=stacklevel,
        )


# The first fit after install (issue 37). The numba kernels are compiled on
# first use and cached on disk (``cache=True``, beside the package or in
# numba's user cache when the package's folder is read-only): once per
# machine and installation, a few seconds a first fit used to spend in
# silence. The first fit of a process looks for the cache index of a few
# kernels every linear fit uses; when one is missing it writes one line to the
# process's standard error (``sys.__stderr__``, not a redirected
# ``sys.stderr``: the private search holds back what its trials print).
# Nothing once the cache exists, nor when numba's cache layout cannot be read.
COMPILE_NOTICE = ("sklearn_fdp: compiling its numba kernels for this machine (once; cached on "
                  "disk for later runs): this first fit takes a few seconds longer.")

_kernels_checked = False


def kernels_cached():
    """Whether the on-disk cache of the most used kernels exists (True when unknown)."""
    import os

    from ._kernels import clip_residuals, gather_rows, sgd_update

    try:
        return all(os.path.exists(kernel._cache._cache_file._index_path)
                   for kernel in (gather_rows, clip_residuals, sgd_update))
    except Exception:  # numba's private layout changed: say nothing
        return True


def _announce_compilation():
    """Write :data:`COMPILE_NOTICE` once per process, before a fit that will compile."""
    global _kernels_checked
    _kernels_checked = True
    if kernels_cached():
        return
    stream = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
    if stream is not None:
        print(COMPILE_NOTICE, file=stream, flush=True)


def atomic_fit(fit):
    """Decorate ``fit`` so that a failing call leaves the estimator as it was.

    Validation sets ``n_features_in_`` (and ``feature_names_in_``) before the
    later checks run, and some fits store derived attributes before the
    noisy run; if ``fit`` raises, every attribute is restored to its value
    before the call (attributes are rebound by ``fit``, never mutated in
    place, so a shallow snapshot suffices).
    """

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        if not _kernels_checked:
            _announce_compilation()
        saved = dict(self.__dict__)
        # The sparse matrices canonical_csr verifies during this fit (and
        # any fit it runs inside) are not read again.
        token = _CANONICAL_IN_FIT.set([]) if _CANONICAL_IN_FIT.get() is None else None
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        finally:
            if token is not None:
                _CANONICAL_IN_FIT.reset(token)

    return wrapper


# Inside a fit (atomic_fit): the CSR matrices canonical_csr found canonical,
# as (matrix, indptr, indices, data), held so that no id is reused meanwhile.
_CANONICAL_IN_FIT = contextvars.ContextVar("sklearn_fdp_canonical_in_fit", default=None)


def canonical_csr(X):
    """A sparse ``X`` as CSR in canonical format; anything else is returned as is.

    Canonical: in every row, each column is stored at most once and the
    column indices increase. scipy allows a column to be stored several
    times (its value is then the sum of the copies), but the kernels compute
    a row's norm as ``Σ data²`` over the stored entries, which for a value
    split into ``k`` copies is ``k`` times too small: the clip would let the
    row contribute up to ``√k · C`` (issue 16 item 3). So every sparse input
    is canonicalised before any norm is computed.

    CSC, COO and other formats are converted to CSR. When the CSR structure
    is not canonical, a *copy* gets its duplicates summed and its indices
    sorted (``sum_duplicates``); the caller's matrix is never modified. A
    canonical CSR input without stored zeros is returned itself. The check
    reads the index arrays (a cached ``has_canonical_format`` flag can be
    stale after an in-place edit of ``indices``), in one pass without
    allocation. Within one ``fit`` (see :func:`atomic_fit`) a matrix already
    found canonical, the same object with the same arrays, is not read
    again: validation, the gradient oracle and the row norms each ask, and
    no fit edits a matrix it has checked (it edits its own copies, new
    objects). Explicit zeros are dropped too (on the copy): the lazy-noise
    path of :func:`sklearn_fdp._engine.run_dp_sgd` draws a coordinate's
    noise when a stored entry touches it, so a stored zero would change the
    draws (not their distribution), and the same matrix must give the same
    model however it is stored. The index dtype (int32 or int64) and the
    value dtype are kept.

    Raises
    ------
    ValueError
        When the CSR structure is malformed (``indptr`` decreasing or
        inconsistent with ``indices``, column indices out of range), which
        the kernels would read out of bounds.
    """
    if not sp.issparse(X):
        return X
    owned = X.format != "csr"
    if owned:
        X = X.tocsr()  # a new matrix (COO sums its duplicates here; CSC keeps them)
    seen = _CANONICAL_IN_FIT.get()
    if seen is not None and any(m is X and a is X.indptr and b is X.indices and c is X.data
                                for m, a, b, c in seen):
        return X
    code = csr_format_code(X.indptr, X.indices, X.shape[1])
    stored_zeros = np.count_nonzero(X.data) != X.data.size
    if code == CSR_CANONICAL and not stored_zeros:
        if seen is not None:
            seen.append((X, X.indptr, X.indices, X.data))
        return X
    if code == CSR_MALFORMED:
        raise ValueError(
            f"The sparse matrix X of shape {X.shape} has an invalid CSR structure (indptr "
            "not starting at 0, decreasing or past the end of indices, or column indices "
            "outside [0, n_features)). Build it with scipy.sparse constructors and check "
            "it with X.check_format(full_check=True)."
        )
    if not owned:
        X = X.copy()
    # Forget any cached flag, so that the sort and the sum really run.
    X.has_sorted_indices = False
    X.has_canonical_format = False
    X.sum_duplicates()
    X.eliminate_zeros()  # stored zeros, and duplicates that summed to zero
    return X


def _non_numeric_columns(X):
    """``[(column, dtype)]`` of the columns of a pandas DataFrame ``X`` that are not numeric.

    Numeric: numbers and bools of any (nullable, sparse) dtype, categories
    that are numbers, and object or string columns whose non-missing values
    all convert to float (as ``check_array`` would convert them). Not
    numeric: text, dates, times, durations, periods, intervals. Anything
    that is not a pandas DataFrame gives ``[]``. Only dtypes are reported,
    never a value.
    """
    pd = sys.modules.get("pandas")  # no DataFrame without pandas imported
    if pd is None or not isinstance(X, pd.DataFrame):
        return []
    from pandas.api.types import is_bool_dtype, is_numeric_dtype, is_object_dtype
    from pandas.api.types import is_string_dtype

    bad = []
    for i, (column, dtype) in enumerate(X.dtypes.items()):
        if isinstance(dtype, pd.CategoricalDtype):
            numeric = is_numeric_dtype(dtype.categories.dtype)
        elif is_numeric_dtype(dtype) or is_bool_dtype(dtype):
            numeric = True
        elif is_object_dtype(dtype) or is_string_dtype(dtype):
            values = X.iloc[:, i]
            try:
                np.asarray(values[values.notna()].to_numpy(), dtype=np.float64)
                numeric = True
            except (TypeError, ValueError):
                numeric = False
        else:
            numeric = False
        if not numeric:
            bad.append((column, dtype))
    return bad


def check_numeric_columns(estimator, X):
    """Raise when ``X`` is a pandas DataFrame with non-numeric columns, naming them.

    The message names the columns and their dtypes (never a value) and the
    preprocessing to use. Anything but a DataFrame passes.
    """
    bad = _non_numeric_columns(X)
    if bad:
        listed = ", ".join(f"{column!r} (dtype {dtype})" for column, dtype in bad)
        raise ValueError(
            f"{type(estimator).__name__} needs numeric input, but the DataFrame X has "
            f"non-numeric column(s): {listed}. Encode them first with preprocessing that "
            "learns nothing from the data: categorical columns with "
            "sklearn.preprocessing.OneHotEncoder(categories=[[...]]) listing the categories "
            "yourself (which categories occur in a private column is private), dates and "
            "durations as numbers (e.g. days since a fixed date) scaled by bounds fixed in "
            "advance. Put the encoders in a ColumnTransformer in front of the estimator with "
            "sklearn_fdp.pipeline.make_private_pipeline, which checks that the "
            "preprocessing learns nothing private."
        )


def validate_numeric_data(estimator, *args, **kwargs):
    """``sklearn.utils.validation.validate_data`` with a clear message for non-numeric columns.

    A DataFrame with text, date, time, duration or period columns raises a
    ValueError naming those columns and their dtypes and the preprocessing
    to use (pandas' and numpy's errors named neither, and some echoed a
    data value). numpy's "could not convert string to float: 'x'" on other
    input is re-raised likewise. A sparse ``X`` comes back in canonical
    CSR format (:func:`canonical_csr`), a copy when it had duplicate or
    unsorted entries.
    """
    check_numeric_columns(estimator, args[0] if args else kwargs.get("X"))
    try:
        result = validate_data(estimator, *args, **kwargs)
    except ValueError as exc:
        if "could not convert" not in str(exc):
            raise
        raise ValueError(
            f"{type(estimator).__name__} needs numeric input, but X has a column of "
            "non-numeric values (strings or other objects). Encode categorical columns "
            "first, e.g. with sklearn.preprocessing.OneHotEncoder in a ColumnTransformer."
        ) from None
    if isinstance(result, tuple):
        return (canonical_csr(result[0]), *result[1:])
    return canonical_csr(result)


def check_row_norms_finite(X, estimator_name, compute_dtype=None):
    """Raise when a row of ``X`` is so large that its squared L2 norm overflows.

    Every private estimator computes row norms and products ``x · θ``; with
    entries above ``sqrt(max_float / (n_features + 1))`` (about 1e153 in
    float64 for a few features) these overflow to inf/NaN and the model
    silently becomes NaN. Clipping would bound the privacy loss anyway, but
    such data is almost surely unscaled, so it is rejected. The check
    compares entries with a bound that depends only on the dtype and the
    number of columns, and the message shows no data value. ``compute_dtype``:
    the dtype the estimator computes in when it differs from ``X``'s (e.g.
    float32 for the torch MLP).
    """
    data = X.data if sp.issparse(X) else X
    if data.size == 0:
        return
    n_features = X.shape[1]
    dtype = np.dtype(data.dtype if compute_dtype is None else compute_dtype)
    if not np.issubdtype(dtype, np.inexact):  # integers are computed in float64
        dtype = np.dtype(np.float64)
    limit = float(np.sqrt(np.finfo(dtype).max / (n_features + 1)))
    # max and -min: two reductions, no temporary copy of X (np.abs would make one).
    if max(float(data.max()), -float(data.min())) > limit:
        raise ValueError(
            f"X of {estimator_name} has entries of magnitude above {limit:.3g}, where "
            f"the squared L2 norm of a row overflows {dtype}. Scale the rows to a "
            "data-independent bound first (divide every column by a known bound; a row-wise "
            "sklearn.preprocessing.Normalizer only when the whole record is protected, as it "
            "mixes protected columns into public ones); rows of norm <= 1 suit the default "
            "max_grad_norm."
        )


def encode_labels(estimator, y, classes=None):
    """``(classes_, y_index)``: the class list and ``y`` as indices into it.

    ``classes=None``: the sorted distinct labels of ``y`` (read from the
    data, not private: a label seen once shows in the list). Otherwise the
    public list ``classes`` (sorted, as ``classes_`` always is), whatever
    ``y`` holds; a label of ``y`` outside it raises.

    Parameters
    ----------
    estimator : estimator
        Named in error messages.
    y : ndarray of shape (n_samples,)
        Validated classification targets.
    classes : array-like of shape (n_classes,) or None, default=None
        The ``classes`` parameter.

    Returns
    -------
    classes_ : ndarray of shape (n_classes,)
    y_index : ndarray of int of shape (n_samples,)
    """
    check_classification_targets(y)
    name = type(estimator).__name__
    if classes is None:
        encoder = LabelEncoder().fit(y)
        if len(encoder.classes_) < 2:
            raise ValueError(
                f"{name} needs at least 2 classes in y; got "
                f"{len(encoder.classes_)} class ({encoder.classes_!r}). Check the labels."
            )
        return encoder.classes_, encoder.transform(y)
    given = np.asarray(classes)
    distinct = np.unique(given) if given.ndim == 1 else given
    if given.ndim != 1 or len(distinct) < 2 or len(distinct) != len(given):
        raise ValueError(
            f"`classes` of {name} must be a 1-D list of at least 2 distinct labels, got "
            f"{classes!r}. Give every label the task can have (a public list, not one "
            "read from the training labels)."
        )
    y = np.asarray(y)
    try:
        known = np.isin(y, distinct)
    except TypeError:  # e.g. str labels against int classes
        known = np.zeros(len(y), dtype=bool)
    if not known.all():
        outside = np.unique(y[~known])
        raise ValueError(
            f"y of {name} has labels {outside.tolist()!r} that are not in `classes` "
            f"{distinct.tolist()!r}. Add them to `classes` (the public list of labels) "
            "or drop those rows."
        )
    return distinct, np.searchsorted(distinct, y)

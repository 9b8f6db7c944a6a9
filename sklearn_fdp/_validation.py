"""Shared parameter constraints and the shim for scikit-learn's private helpers.

Private scikit-learn helpers are imported here and only here, so that a
change in scikit-learn breaks one file.
"""

import functools
import warnings
from numbers import Real

import numpy as np
import scipy.sparse as sp

from sklearn.base import _fit_context
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _assert_all_finite,
    _check_feature_names,
    _check_n_features,
    _check_y,
    check_consistent_length,
    validate_data,
)

from .accounting import NEIGHBORING_RELATIONS
from .exceptions import PrivacyLeakWarning

__all__ = [
    "DELTA_CONSTRAINT",
    "NEIGHBORING_CONSTRAINT",
    "Interval",
    "LinearClassifierMixin",
    "StrOptions",
    "_fit_context",
    "atomic_fit",
    "check_delta_vs_n",
    "check_row_norms_finite",
    "validate_numeric_data",
]

# An estimator's δ must be > 0: Gaussian noise gives no pure ε-DP (δ = 0 means ε = ∞).
DELTA_CONSTRAINT = [Interval(Real, 0, 1, closed="neither")]
NEIGHBORING_CONSTRAINT = [StrOptions(set(NEIGHBORING_RELATIONS))]


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
        saved = dict(self.__dict__)
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise

    return wrapper


def validate_numeric_data(estimator, *args, **kwargs):
    """``sklearn.utils.validation.validate_data`` with a clear message for text columns.

    numpy's "could not convert string to float: 'x'" names neither the
    estimator nor the fix (and echoes a data value); it is re-raised as a
    ValueError that says what to do.
    """
    try:
        return validate_data(estimator, *args, **kwargs)
    except ValueError as exc:
        if "could not convert" not in str(exc):
            raise
        raise ValueError(
            f"{type(estimator).__name__} needs numeric input, but X has a column of "
            "non-numeric values (strings or other objects). Encode categorical columns "
            "first, e.g. with sklearn.preprocessing.OneHotEncoder in a ColumnTransformer."
        ) from None


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

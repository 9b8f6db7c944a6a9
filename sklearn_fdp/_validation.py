"""Shared parameter constraints and the shim for scikit-learn's private helpers.

Private scikit-learn helpers are imported here and only here, so that a
change in scikit-learn breaks one file.
"""

import warnings
from numbers import Real

from sklearn.base import _fit_context
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions

from .accounting import NEIGHBORING_RELATIONS
from .exceptions import PrivacyLeakWarning

__all__ = [
    "DELTA_CONSTRAINT",
    "NEIGHBORING_CONSTRAINT",
    "Interval",
    "LinearClassifierMixin",
    "StrOptions",
    "_fit_context",
    "check_delta_vs_n",
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

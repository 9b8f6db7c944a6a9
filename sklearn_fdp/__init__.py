"""sklearn_fdp: scikit-learn estimators trained with (feature) differential privacy."""

from . import accounting, datasets, exceptions, features
from .exceptions import BudgetExceededError, FdpWarning, PrivacyLeakWarning
from .linear import DPSGDClassifier, FeatureDPLogisticRegression

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "DPSGDClassifier",
    "FeatureDPLogisticRegression",
    "FdpWarning",
    "PrivacyLeakWarning",
    "__version__",
    "accounting",
    "datasets",
    "exceptions",
    "features",
]

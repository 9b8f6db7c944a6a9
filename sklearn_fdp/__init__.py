"""sklearn_fdp: scikit-learn estimators trained with (feature) differential privacy."""

from . import (
    accounting,
    audit,
    datasets,
    exceptions,
    features,
    model_selection,
    pipeline,
    plotting,
    preprocessing,
)
from ._plan import PrivacyPlan
from ._report import PrivacyReport, privacy_report
from ._show_versions import show_versions
from .exceptions import BudgetExceededError, FdpWarning, PerformanceWarning, PrivacyLeakWarning
from .linear import (
    AdaMixClassifier,
    DPSGDClassifier,
    DPSGDFClassifier,
    FeatureDPLogisticRegression,
)
from .neural import MLPFeatureDP
from .preprocessing import BoundedScaler, PrivateMeanCenterer

__version__ = "0.1.0"

__all__ = [
    "AdaMixClassifier",
    "BoundedScaler",
    "BudgetExceededError",
    "DPSGDClassifier",
    "DPSGDFClassifier",
    "FeatureDPLogisticRegression",
    "FdpWarning",
    "MLPFeatureDP",
    "PerformanceWarning",
    "PrivacyLeakWarning",
    "PrivacyPlan",
    "PrivacyReport",
    "PrivateMeanCenterer",
    "__version__",
    "accounting",
    "audit",
    "datasets",
    "exceptions",
    "features",
    "model_selection",
    "pipeline",
    "plotting",
    "preprocessing",
    "privacy_report",
    "show_versions",
]

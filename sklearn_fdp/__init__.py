"""sklearn_fdp: scikit-learn estimators trained with (feature) differential privacy."""

from ._lazy import lazy_module
from .exceptions import (
    BudgetExceededError,
    CollapseWarning,
    FdpWarning,
    PerformanceWarning,
    PrivacyLeakWarning,
)

# Everything else is loaded on first use (PEP 562), so that `import sklearn_fdp`
# and `sklearn-fdp --version` do not pay for scikit-learn, pandas, dp-accounting
# or numba (issue 21). Public name -> the module that defines it.
_LAZY = {
    "config_context": "._config",
    "get_config": "._config",
    "set_config": "._config",
    "PrivacyPlan": "._plan",
    "PrivacyReport": "._report",
    "privacy_report": "._report",
    "progress_hook": "._progress",
    "show_versions": "._show_versions",
    "AdaMixClassifier": ".linear",
    "DPSGDClassifier": ".linear",
    "DPSGDFClassifier": ".linear",
    "FeatureDPLogisticRegression": ".linear",
    "DPSGDRegressor": ".linear",
    "FeatureDPSGDRegressor": ".linear",
    "FeatureDPLinearRegression": ".linear",
    "FeatureDPStackingClassifier": ".linear",
    "FeatureDPStackingRegressor": ".linear",
    "FeatureDPPCA": ".decomposition",
    "MLPFeatureDP": ".neural",
    "MLPFeatureDPRegressor": ".neural",
    "BoundedScaler": ".preprocessing",
    "PrivateMeanCenterer": ".preprocessing",
    "CollapseCheck": "._collapse",
    "check_collapse": "._collapse",
}
_SUBMODULES = (
    "accounting",
    "audit",
    "datasets",
    "decomposition",
    "exceptions",
    "features",
    "model_selection",
    "pipeline",
    "plotting",
    "preprocessing",
)


__getattr__, __dir__ = lazy_module(__name__, _LAZY, _SUBMODULES)


__version__ = "0.1.0"

__all__ = [
    "AdaMixClassifier",
    "BoundedScaler",
    "BudgetExceededError",
    "CollapseCheck",
    "CollapseWarning",
    "DPSGDClassifier",
    "DPSGDFClassifier",
    "DPSGDRegressor",
    "FeatureDPLogisticRegression",
    "FeatureDPSGDRegressor",
    "FeatureDPLinearRegression",
    "FeatureDPStackingClassifier",
    "FeatureDPStackingRegressor",
    "FeatureDPPCA",
    "FdpWarning",
    "MLPFeatureDP",
    "MLPFeatureDPRegressor",
    "PerformanceWarning",
    "PrivacyLeakWarning",
    "PrivacyPlan",
    "PrivacyReport",
    "PrivateMeanCenterer",
    "__version__",
    "accounting",
    "audit",
    "check_collapse",
    "config_context",
    "datasets",
    "decomposition",
    "exceptions",
    "features",
    "get_config",
    "model_selection",
    "pipeline",
    "plotting",
    "preprocessing",
    "privacy_report",
    "progress_hook",
    "set_config",
    "show_versions",
]

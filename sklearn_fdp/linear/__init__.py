"""Private linear classifiers and regressors."""

import importlib

# Each estimator is imported on first use, so that `from sklearn_fdp import
# DPSGDClassifier` (and every loky worker unpickling one) loads DP-SGD's modules
# only, not AdaMix's, DPSGD-F's or feature DP's (issue 18: cold start).
_LAZY = {
    "AdaMixClassifier": "._adamix",
    "DPSGDClassifier": "._dpsgd",
    "DPSGDFClassifier": "._dpsgdf",
    "FeatureDPLogisticRegression": "._feature_dp_logistic",
    "DPSGDRegressor": "._dpsgd_regressor",
    "FeatureDPSGDRegressor": "._feature_dp_sgd_regressor",
    "FeatureDPLinearRegression": "._feature_dp_linear",
    "FeatureDPStackingClassifier": "._stacking",
    "FeatureDPStackingRegressor": "._stacking",
}

__all__ = [
    "AdaMixClassifier",
    "DPSGDClassifier",
    "DPSGDFClassifier",
    "FeatureDPLogisticRegression",
    "DPSGDRegressor",
    "FeatureDPSGDRegressor",
    "FeatureDPLinearRegression",
    "FeatureDPStackingClassifier",
    "FeatureDPStackingRegressor",
]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # later look-ups skip __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))

"""Private linear classifiers and regressors."""

from .._lazy import lazy_module

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


__getattr__, __dir__ = lazy_module(__name__, _LAZY)

"""Private linear classifiers."""

from ._dpsgd import DPSGDClassifier
from ._dpsgdf import DPSGDFClassifier
from ._feature_dp_logistic import FeatureDPLogisticRegression

__all__ = ["DPSGDClassifier", "DPSGDFClassifier", "FeatureDPLogisticRegression"]

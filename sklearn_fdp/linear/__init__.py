"""Private linear classifiers."""

from ._dpsgd import DPSGDClassifier
from ._feature_dp_logistic import FeatureDPLogisticRegression

__all__ = ["DPSGDClassifier", "FeatureDPLogisticRegression"]

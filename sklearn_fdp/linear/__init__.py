"""Private linear classifiers."""

from ._adamix import AdaMixClassifier
from ._dpsgd import DPSGDClassifier
from ._dpsgdf import DPSGDFClassifier
from ._feature_dp_logistic import FeatureDPLogisticRegression

__all__ = [
    "AdaMixClassifier",
    "DPSGDClassifier",
    "DPSGDFClassifier",
    "FeatureDPLogisticRegression",
]

"""Private linear classifiers."""

from ._dpsgd import DPSGDClassifier

__all__ = ["DPSGDClassifier"]

"""Neural-network estimators (PyTorch, optional extra ``[torch]``).

Importing this package does not import torch; constructing an estimator
does, and raises an :class:`ImportError` saying how to install it when torch
is missing.
"""

from ._distributed import fit_distributed
from ._mlp_classifier import MLPFeatureDP
from ._mlp_regressor import MLPFeatureDPRegressor

__all__ = ["MLPFeatureDP", "MLPFeatureDPRegressor", "fit_distributed"]

"""Private model selection: hyper-parameter search accounted with Rényi DP."""

from ._search import PrivateRandomizedSearchCV

__all__ = ["PrivateRandomizedSearchCV"]

"""The ColumnTransformer of :func:`sklearn_fdp.preprocessing.make_tabular_preprocessor`.

Its own module so that ``import sklearn_fdp`` does not import
``sklearn.compose``: :mod:`sklearn_fdp._tabular` imports it on first use.
"""

from sklearn.compose import ColumnTransformer
from sklearn.utils.validation import check_array


class SchemaColumnTransformer(ColumnTransformer):
    """A :class:`~sklearn.compose.ColumnTransformer` that gives 1-D input
    scikit-learn's "Expected 2D array" message (ColumnTransformer itself
    raised an ``IndexError`` from its column selection)."""

    def fit_transform(self, X, y=None, **params):
        if getattr(X, "ndim", 2) == 1:
            check_array(X, dtype=None, ensure_all_finite=False)
        return super().fit_transform(X, y, **params)

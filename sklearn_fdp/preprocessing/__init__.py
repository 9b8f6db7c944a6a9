"""Preprocessing: private (PrivateMeanCenterer) and data-independent (BoundedScaler,
make_tabular_preprocessor from a declared schema).

One module per job: ``_centerer.py`` (``PrivateMeanCenterer``, a private
estimator: its mean is a Gaussian release), ``_bounded.py`` (``BoundedScaler``,
fixed bounds, data-independent) and ``_tabular.py`` (the schema preprocessor and
its row-norm bounds). Each name is imported on first use, so that the command line
(which loads ``_tabular``'s two functions to read its model files) does not pay for
scikit-learn's estimators or the accounting.
"""

from .._lazy import lazy_module

_LAZY = {
    "BoundedScaler": "._bounded",
    "PrivateMeanCenterer": "._centerer",
    "RowNormBounds": "._tabular",
    "make_tabular_preprocessor": "._tabular",
    "propose_schema": "._tabular",
    "row_norm_bounds": "._tabular",
    "transform_partitions": ".._distributed",
}

__all__ = ["BoundedScaler", "PrivateMeanCenterer", "RowNormBounds", "make_tabular_preprocessor",
           "propose_schema", "row_norm_bounds", "transform_partitions"]


__getattr__, __dir__ = lazy_module(__name__, _LAZY)

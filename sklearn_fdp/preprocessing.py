"""Preprocessing: private (PrivateMeanCenterer) and data-independent (BoundedScaler,
make_tabular_preprocessor from a declared schema)."""

from ._bounded import BoundedScaler
from ._distributed import transform_partitions
from ._preprocessing import PrivateMeanCenterer
from ._tabular import RowNormBounds, make_tabular_preprocessor, propose_schema, row_norm_bounds

__all__ = ["BoundedScaler", "PrivateMeanCenterer", "RowNormBounds", "make_tabular_preprocessor",
           "propose_schema", "row_norm_bounds", "transform_partitions"]

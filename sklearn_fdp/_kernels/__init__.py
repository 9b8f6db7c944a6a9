"""Numba kernels behind the DP engine: clipped per-example gradient sums of
linear models (dense and CSR), clip factors, the lazy-noise bookkeeping
for sparse data, and the passes of the public pretraining's Newton solver.

Kernels are plain functions on arrays: no randomness, no fastmath, compiled
once per signature and cached on disk (``cache=True``). The Python API never
calls them directly; :mod:`sklearn_fdp._engine` picks the path.

No kernel uses ``parallel=True``. Measured on the 2-core reference machine
(another job on the second core): a ``prange`` version of ``clip_residuals``
took 85 instead of 181 µs at batch 256 x 100 classes, but 11 instead of
5.5 µs at 256 x 1 and was erratic at 4096 x 100 (13 ms instead of 2.6 ms
when the second core was busy). The engine can spend a second core on
drawing the next step's noise instead (``_engine/_noise.py``, under
``set_config(noise_prefetch=True)``), which hides a larger cost (0.5 ms per
step at 600 x 100) and cannot change the results.
"""

from ._linear import (
    BINARY_HINGE,
    BINARY_LOG,
    EPSILON_INSENSITIVE,
    HUBER,
    MULTI_HINGE,
    MULTI_LOG,
    RESIDUAL_MAX,
    SQRT_TINY,
    SQUARED,
    clip_factors,
    clip_residuals,
    clip_target,
    csr_clipped_sum,
    dense_clipped_sum,
    fdp_csr_private_sum,
    fdp_csr_public_sum,
    fdp_csr_step,
    fdp_csr_step_binary,
    gather_rows,
    loss_code,
    residual_row,
)
from ._newton import binary_logistic_pass
from ._sparse import (
    CSR_CANONICAL,
    CSR_MALFORMED,
    catch_up_tables,
    csr_format_code,
    csr_keep_columns,
    csr_masked_squared_norms,
    csr_scatter_add,
    csr_squared_row_norms,
    dense_columns_csr_size,
    dense_columns_to_csr,
    dense_nnz_capped,
    dense_to_csr_capped,
    flush,
    lazy_clipped_residuals,
    lazy_steps,
)
from ._statistic import clipped_design
from ._update import sgd_update

__all__ = [
    "BINARY_HINGE",
    "BINARY_LOG",
    "CSR_CANONICAL",
    "CSR_MALFORMED",
    "EPSILON_INSENSITIVE",
    "HUBER",
    "MULTI_HINGE",
    "MULTI_LOG",
    "RESIDUAL_MAX",
    "SQRT_TINY",
    "SQUARED",
    "binary_logistic_pass",
    "catch_up_tables",
    "clip_factors",
    "clip_residuals",
    "clip_target",
    "clipped_design",
    "csr_clipped_sum",
    "csr_format_code",
    "csr_keep_columns",
    "csr_masked_squared_norms",
    "csr_scatter_add",
    "csr_squared_row_norms",
    "dense_clipped_sum",
    "dense_columns_csr_size",
    "dense_columns_to_csr",
    "dense_nnz_capped",
    "dense_to_csr_capped",
    "fdp_csr_private_sum",
    "fdp_csr_public_sum",
    "fdp_csr_step",
    "fdp_csr_step_binary",
    "flush",
    "gather_rows",
    "lazy_clipped_residuals",
    "lazy_steps",
    "loss_code",
    "residual_row",
    "sgd_update",
]

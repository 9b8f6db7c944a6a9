"""Fits where the data lives: dask.distributed and torch.distributed.

One module per way of running a mechanism elsewhere; each runs the
centralised mechanism (the same clipping, the same sampler, one noise draw in
the fitting process), never a mechanism of its own:

* ``_partitions.py``: the one-pass sufficient statistics (sums over the rows of
  a dask array, computed on the workers that hold its partitions; issue 35).
* ``_dpsgd.py``: DP-SGD's private (and FDP Algorithm 1's public) gradient
  oracle on the workers: the engine's loop, sampler and noise in the fitting
  process, each step's clipped partial sums where the partitions live
  (issue 36).
* ``_torch.py``: the collective of ``MLPFeatureDP`` on ``torch.distributed``
  (each rank's clipped sums all-reduced, rank 0's one noise draw; issue 36).
"""

from ._partitions import (
    active_client,
    check_partitioned,
    partitioned_labels,
    transform_partitions,
    tree_reduce,
    use_cluster,
    validate_partition,
)

__all__ = ["active_client", "check_partitioned", "partitioned_labels", "transform_partitions",
           "tree_reduce", "use_cluster", "validate_partition"]

"""The ``LocalCluster(processes=True, n_workers=2)`` of the dask.distributed test modules."""

import contextlib
import logging
import sys


@contextlib.contextmanager
def local_cluster(module_name, n_workers=2):
    """``(cluster, client)`` of a fresh process cluster; ``module_name`` travels by value.

    The test module's own functions (slow blocks, patched tasks) are pickled
    by value, so the workers need not import the test module.
    """
    import cloudpickle
    import distributed

    cloudpickle.register_pickle_by_value(sys.modules[module_name])
    cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                       processes=True, dashboard_address=None,
                                       silence_logs=logging.CRITICAL)
    client = distributed.Client(cluster)
    try:
        yield cluster, client
    finally:
        client.close()
        cluster.close()
        cloudpickle.unregister_pickle_by_value(sys.modules[module_name])

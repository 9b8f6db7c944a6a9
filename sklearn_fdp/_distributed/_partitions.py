"""Sums over the rows of a dask array, computed where its partitions live.

The estimators whose private release is one sufficient statistic (a sum of
per-row clipped terms: ``FeatureDPLinearRegression``'s ``ZᵀZ``,
``FeatureDPLogisticRegression``'s label statistic, ``FeatureDPPCA``'s
covariance, ``PrivateMeanCenterer``'s mean) never need the rows in the
fitting process. When ``fit`` gets a dask array and a ``dask.distributed``
``Client`` is active (:func:`use_cluster`: the convention of dask
collections, which compute on the active client), each partition is turned
into its partial sum on the worker that holds it, by the same per-chunk code
the in-memory fit runs (clipping, canonicalisation, validation), the partial
sums are added in a fixed binary tree on the workers (:func:`tree_reduce`),
and only the final ``d × d`` (or ``d``) numbers come back. The fitting
process then adds the noise once, as in memory.

Same result. The partitions' partial sums and the tree's order are fixed by
the array's row chunks alone, so a distributed fit is the same bit for bit
on any number of workers, in any schedule, and after a worker is lost (dask
recomputes the lost partitions from the graph, with the same code on the
same rows). Against the in-memory fit, which adds its chunks in one sequence,
each sum differs only by the order of its floating-point additions.

Never a partial sum. Every partial result carries its row count; the total
must equal the array's number of rows, or the fit raises before any noise is
drawn (nothing is released). A worker lost for good (dask's
``allowed-failures`` exhausted) raises a ``RuntimeError`` that says so.
"""

import contextlib
import sys

import numpy as np
import scipy.sparse as sp

from .._outofcore import is_dask_array

__all__ = ["active_client", "check_partitioned", "partitioned_labels", "transform_partitions",
           "tree_reduce", "use_cluster",
           "validate_partition"]


def active_client():
    """The active ``dask.distributed`` client, or None (without importing distributed)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:  # no client
        return None


def use_cluster(X):
    """Whether a fit sums ``X`` where it lives: a dask array with an active ``Client``.

    Without a client a dask array is read into the fitting process (in
    memory, or batch by batch when large: :mod:`sklearn_fdp._outofcore`), as
    before; with one, the estimators of the module docstring never gather
    its rows.
    """
    return is_dask_array(X) and active_client() is not None


def check_partitioned(estimator, X, y=None, *, y_numeric=True, reset=True):
    """``(X, y)`` for :func:`tree_reduce`: the checks that need no data, and aligned chunks.

    ``X`` must be 2-D with known chunk sizes (``X.compute_chunk_sizes()``
    otherwise) and a numeric dtype; it is rechunked to whole rows (one chunk
    along the columns). ``y`` (an array or a dask array of the same length)
    becomes a dask array with ``X``'s row chunks. Sets (``reset``) or checks
    ``n_features_in_``. The values are validated per partition, on the
    workers (:func:`validate_partition`).
    """
    from .._outofcore import as_row_source

    name = type(estimator).__name__
    as_row_source(X, name)  # shape, known chunks, at least one row and column, dtype
    n_features = int(X.shape[1])
    if reset:
        estimator.n_features_in_ = n_features
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
    elif n_features != estimator.n_features_in_:
        raise ValueError(f"X has {n_features} features, but {name} is expecting "
                         f"{estimator.n_features_in_} features as input.")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    if y is None:
        return X, None
    import dask.array as da

    if not is_dask_array(y):
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1:
            raise ValueError(f"y of {name} must be 1-D; got shape {y.shape}.")
        if y_numeric and y.dtype.kind not in "biuf":
            raise ValueError(f"y of {name} must be numeric; got dtype {y.dtype}.")
        y = da.from_array(y, chunks=(X.chunks[0],))
    else:
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1 or any(not np.isfinite(s) for s in y.shape):
            raise ValueError(f"y of {name} must be a 1-D dask array of known length; got "
                             f"shape {y.shape}. Call y.compute_chunk_sizes() first.")
        if y.chunks[0] != X.chunks[0]:
            y = y.rechunk((X.chunks[0],))
    if int(y.shape[0]) != int(X.shape[0]):
        raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                         f"[{int(X.shape[0])}, {int(y.shape[0])}]")
    return X, y


def validate_partition(X, y, name, *, y_numeric=True, accept_sparse=True):
    """The in-memory checks of one partition, on its worker: ``(X, y)`` checked.

    Finite values (same message as ``check_array``), the row-norm overflow
    bound of :func:`~sklearn_fdp._validation.check_row_norms_finite`, and a
    finite target. A CSR partition is canonicalised (duplicates summed,
    indices sorted) as in memory. The dtype rules are ``check_array``'s:
    float32 stays float32, other numbers become float64.
    """
    from .._outofcore import training_dtype
    from .._validation import _assert_all_finite, canonical_csr, check_row_norms_finite

    if sp.issparse(X):
        if not accept_sparse:
            raise TypeError(f"{name} needs dense partitions; got a sparse one.")
        X = canonical_csr(sp.csr_matrix(X, dtype=training_dtype(X.dtype, name)))
        _assert_all_finite(X.data, allow_nan=False, input_name="X", estimator_name=name)
    else:
        X = np.ascontiguousarray(X, dtype=training_dtype(X.dtype, name))
        _assert_all_finite(X, allow_nan=False, input_name="X", estimator_name=name)
    check_row_norms_finite(X, name)
    if y is not None:
        y = np.asarray(y)
        if y.shape[0] != X.shape[0]:
            raise RuntimeError(
                f"A partition of X for {name} holds {X.shape[0]} rows, but its part of y "
                f"{y.shape[0]}: X's chunk sizes do not match its data (a partition was lost "
                "or changed). Nothing was released.")
        if y_numeric:
            y = y.astype(np.float64)
            _assert_all_finite(y, allow_nan=False, input_name="y", estimator_name=name)
    return X, y


def _add(a, b):
    """Element-wise sum of two partial results (tuples of arrays and counts)."""
    return tuple(x + y for x, y in zip(a, b))


def tree_reduce(fn, X, y=None, args=(), *, what="the statistic", combine=_add):
    """``combine``-sum of ``fn(X_part, y_part, *args)`` over ``X``'s row partitions.

    ``fn`` returns a tuple whose last entry is the partition's row count.
    The partial results are combined pairwise, level by level (partition
    ``2i`` with ``2i + 1``), on the workers; the one result comes back.
    Raises when the counts do not add up to ``X.shape[0]`` (a statistic
    that left rows out is never returned) or when the cluster lost a worker
    for good. ``X`` and ``y`` as :func:`check_partitioned` returns them.
    """
    import dask

    xs = list(X.to_delayed().ravel())
    ys = [None] * len(xs) if y is None else list(y.to_delayed().ravel())
    shared = dask.delayed(tuple(args), pure=True)  # one copy in the graph
    level = [dask.delayed(_call, pure=True)(fn, xb, yb, shared) for xb, yb in zip(xs, ys)]
    while len(level) > 1:
        nxt = [dask.delayed(combine, pure=True)(level[i], level[i + 1])
               for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    with lost_workers_raise(what):
        (result,) = dask.compute(level[0])
    n_rows = int(result[-1])
    if n_rows != int(X.shape[0]):
        raise RuntimeError(
            f"Computing {what} on the cluster summed {n_rows} rows, but X has "
            f"{int(X.shape[0])}: a partition was lost or changed. Nothing was released.")
    return result


@contextlib.contextmanager
def lost_workers_raise(what):
    """Turn dask's ``KilledWorker`` (a worker lost repeatedly) into a ``RuntimeError`` saying so."""
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ == "KilledWorker":
            raise RuntimeError(
                f"Computing {what} on the cluster failed: a worker holding one of its "
                f"partitions was lost repeatedly ({exc}). Nothing was released; fit again "
                "once the cluster is stable.") from exc
        raise


def _call(fn, X, y, args):
    return fn(X, y, *args)


def partitioned_labels(estimator, X, y):
    """``(X, classes_, y_index)`` of a classifier's dask input, labels encoded per partition.

    The class list is read from the distinct labels (``da.unique``: only
    those travel) unless the estimator's ``classes`` gives it, and checked
    with the in-memory rules (:func:`~sklearn_fdp._validation.encode_labels`
    on the distinct labels); ``y_index`` is a dask array of indices into it.
    """
    import dask.array as da

    from .._validation import encode_labels

    X, y = check_partitioned(estimator, X, y, y_numeric=False)
    distinct = np.asarray(da.unique(y).compute())
    classes, _ = encode_labels(estimator, distinct, getattr(estimator, "classes", None))
    return X, classes, y.map_blocks(_label_index, classes, dtype=np.intp)


def _label_index(y, classes):
    return np.searchsorted(classes, np.asarray(y)).astype(np.intp)


def transform_partitions(transformer, frame, target=None):
    """``(X, y)``: a fitted data-independent ``transformer`` applied to each partition.

    For a dask DataFrame on a cluster: the schema preprocessor
    (:func:`~sklearn_fdp.preprocessing.make_tabular_preprocessor`) learns
    nothing from the data, so it maps every partition on its own, where it
    lives. ``X`` is a dask array of known row chunks (one pass counts the
    partitions' rows; nothing else comes back), ``y`` the column ``target``
    of ``frame`` with the same chunks (None without ``target``); the
    target column is not given to the transformer.

    Parameters
    ----------
    transformer : fitted transformer
        Data-independent (fit it on a few rows, e.g. ``frame.head()``: it
        records the column names only). Its output must be dense.
    frame : dask.dataframe.DataFrame
        The table, partitioned where it lives (e.g. ``dd.read_parquet``).
    target : str or None, default=None
        The column returned as ``y`` (not passed to ``transformer``).

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features_out)
    y : dask.array.Array of shape (n_samples,) or None
    """
    import dask
    import dask.array as da
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(transformer)
    features = frame if target is None else frame.drop(columns=[target])
    n_out = len(transformer.get_feature_names_out())
    lengths = [int(n) for n in features.map_partitions(len).compute()]
    parts = features.to_delayed()
    blocks = [da.from_delayed(dask.delayed(_transform_part, pure=True)(transformer, part),
                              shape=(n, n_out), dtype=np.float64)
              for part, n in zip(parts, lengths)]
    X = da.concatenate(blocks, axis=0)
    y = None
    if target is not None:
        y = frame[target].to_dask_array(lengths=lengths)
    return X, y


def _transform_part(transformer, part):
    out = transformer.transform(part)
    if sp.issparse(out):
        out = out.toarray()
    return np.asarray(out, dtype=np.float64)

"""A Criteo-shaped click log: 13 count features, 26 hashed categorical fields, a planted model.

The Criteo display-advertising data (the feature-DP paper's sparse experiment)
has, per impression, 13 integer count features, 26 categorical features of
high cardinality (anonymised, hashed) and a click label. This generator draws
rows of that shape from a fixed, documented recipe with a planted logistic
model, in blocks, so that billions of rows can be written partition by
partition (:func:`write_criteo_like_parquet`) and read back as CSR rows of
norm at most 1 (:func:`criteo_like_rows`). Nothing in it was tuned for a
learning method.
"""

import numbers
import pathlib

import numpy as np
import scipy.sparse as sp

__all__ = ["CRITEO_COUNT_COLUMNS", "CRITEO_CATEGORICAL_COLUMNS", "criteo_like_rows",
           "make_criteo_like", "write_criteo_like_parquet"]

CRITEO_COUNT_COLUMNS = tuple(f"I{j}" for j in range(1, 14))
CRITEO_CATEGORICAL_COLUMNS = tuple(f"C{j}" for j in range(1, 27))
_N_COUNT, _N_CAT = 13, 26
# Counts are capped here before log1p scaling (log1p(cap) maps to 1).
_COUNT_CAP = 10_000
# Categories per field (before hashing): from 10 to 10 million, log-spaced, like
# Criteo's fields (a few have tens of values, several millions).
_CARDINALITIES = np.round(np.logspace(1, 7, _N_CAT)).astype(np.int64)
_ZIPF_A = 1.2  # popularity of categories: rank r with probability ∝ r^-1.2 (Zipf)
_HASH_PRIME = np.uint64(0x9E3779B97F4A7C15)


def _check_int(value, name, low):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}.")


def _planted(n_buckets, seed):
    """The planted model: count weights, per-bucket field effects and the intercept."""
    rng = np.random.default_rng([seed, 1])
    w_count = rng.normal(0.0, 1.5, size=_N_COUNT)
    w_cat = rng.normal(0.0, 1.0, size=(_N_CAT, n_buckets))
    return w_count, w_cat, -1.6


def _block(n, n_buckets, seed, block_index):
    """``(counts scaled to [0, 1], bucket ids, labels)`` of one block of ``n`` rows."""
    rng = np.random.default_rng([seed, 2, block_index])
    # Counts: geometric mixtures (many zeros, heavy tail), then log1p-scaled to [0, 1].
    means = np.exp(np.linspace(0.0, 6.0, _N_COUNT))
    counts = rng.geometric(1.0 / (1.0 + means), size=(n, _N_COUNT)) - 1
    counts[rng.random((n, _N_COUNT)) < 0.3] = 0
    counts = np.log1p(np.minimum(counts, _COUNT_CAP)) / np.log1p(_COUNT_CAP)
    # Categories: Zipf ranks within each field's cardinality, hashed to buckets.
    ranks = np.minimum(rng.zipf(_ZIPF_A, size=(n, _N_CAT)) - 1, _CARDINALITIES - 1)
    keys = ranks.astype(np.uint64) * np.uint64(_N_CAT) + np.arange(_N_CAT, dtype=np.uint64)
    buckets = ((keys * _HASH_PRIME) >> np.uint64(40)) % np.uint64(n_buckets)
    buckets = buckets.astype(np.int32)
    w_count, w_cat, b = _planted(n_buckets, seed)
    logit = counts @ w_count + w_cat[np.arange(_N_CAT), buckets].sum(axis=1) / np.sqrt(_N_CAT) + b
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int8)
    return counts.astype(np.float32), buckets, y


def criteo_like_rows(counts, buckets, n_buckets, dtype=np.float32):
    """CSR rows of norm at most 1: ``[13 count columns | 26 one-hot blocks of n_buckets]``.

    The count block (public) is ``counts / √26`` (norm at most √(13/26) =
    1/√2); each categorical field contributes one entry ``1/√52`` in its own
    block of ``n_buckets`` columns (the private block's norm is exactly
    1/√2). A data-independent map of each row: apply it per partition.

    Parameters
    ----------
    counts : array-like of shape (n, 13)
        The scaled counts (``I1``..``I13``, in [0, 1]).
    buckets : array-like of int of shape (n, 26)
        Bucket ids (``C1``..``C26``, in ``[0, n_buckets)``).
    n_buckets : int
    dtype : float dtype, default=np.float32

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n, 13 + 26 * n_buckets)
        Columns 0..12 are the counts (public), the rest the hashed fields.
    """
    counts = np.asarray(counts, dtype=dtype)
    buckets = np.asarray(buckets, dtype=np.int64)
    n = counts.shape[0]
    width = _N_COUNT + _N_CAT
    indices = np.empty((n, width), dtype=np.int32)
    indices[:, :_N_COUNT] = np.arange(_N_COUNT)
    indices[:, _N_COUNT:] = _N_COUNT + np.arange(_N_CAT) * n_buckets + buckets
    data = np.empty((n, width), dtype=dtype)
    data[:, :_N_COUNT] = counts / np.sqrt(_N_CAT)
    data[:, _N_COUNT:] = 1.0 / np.sqrt(2.0 * _N_CAT)
    X = sp.csr_matrix((data.ravel(), indices.ravel(), np.arange(0, n * width + 1, width)),
                      shape=(n, _N_COUNT + _N_CAT * n_buckets))
    X.eliminate_zeros()  # zero counts are not stored
    return X


def make_criteo_like(n_samples=100_000, *, n_buckets=8192, random_state=0, block_index=0):
    """Make a Criteo-shaped click log in memory: ``(X, y)`` (see the module docstring).

    Parameters
    ----------
    n_samples : int, default=100_000
    n_buckets : int, default=8192
        Hash buckets per categorical field (``X`` has ``13 + 26 * n_buckets``
        columns).
    random_state : int, default=0
        Seed of the planted model and of the rows.
    block_index : int, default=0
        Which independent block of rows to draw (the same planted model):
        blocks ``0, 1, …`` are the partitions :func:`write_criteo_like_parquet`
        writes; use a large index for a test set.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, 13 + 26 * n_buckets), float32
        Rows of norm at most 1; columns 0..12 are the count features.
    y : ndarray of shape (n_samples,)
        Click labels (0/1, about a quarter 1).

    Notes
    -----
    Recipe: count ``j`` is a geometric count of mean ``e^(6 j / 12)``, zero
    with probability 0.3 more, capped at 10,000 and scaled by
    ``log1p(c) / log1p(10000)``; categorical field ``k`` draws a Zipf(1.2)
    rank below its cardinality (10 to 10⁷, log-spaced over the 26 fields),
    hashed with its field index into ``n_buckets`` buckets (collisions, as
    with the hashing trick). The planted model: ``logit = counts · w +
    Σ_k v_k[bucket_k] / √26 − 1.6`` with ``w ~ N(0, 1.5²)`` and ``v ~ N(0,
    1)`` drawn from ``random_state``; the label is a Bernoulli of its
    sigmoid.
    """
    _check_int(n_samples, "n_samples", 1)
    _check_int(n_buckets, "n_buckets", 1)
    counts, buckets, y = _block(n_samples, n_buckets, int(random_state), int(block_index))
    return criteo_like_rows(counts, buckets, n_buckets), y.astype(np.int64)


def write_criteo_like_parquet(path, n_samples, *, rows_per_file=1_000_000, n_buckets=8192,
                              random_state=0):
    """Write a Criteo-shaped click log as Parquet files, one partition each.

    Columns ``I1``..``I13`` (float32, the scaled counts), ``C1``..``C26``
    (int32, the bucket ids) and ``label`` (int8); file ``i`` holds block
    ``i`` of :func:`make_criteo_like` (``rows_per_file`` rows, the last one
    fewer). Read a partition back as CSR rows with :func:`criteo_like_rows`.
    Needs pyarrow. Returns the list of file paths.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    _check_int(n_samples, "n_samples", 1)
    _check_int(rows_per_file, "rows_per_file", 1)
    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    files = []
    for i, start in enumerate(range(0, n_samples, rows_per_file)):
        n = min(rows_per_file, n_samples - start)
        counts, buckets, y = _block(n, n_buckets, int(random_state), i)
        columns = {name: counts[:, j] for j, name in enumerate(CRITEO_COUNT_COLUMNS)}
        columns.update({name: buckets[:, j] for j, name in enumerate(CRITEO_CATEGORICAL_COLUMNS)})
        columns["label"] = y
        file = path / f"part-{i:05d}.parquet"
        pq.write_table(pa.table(columns), file)
        files.append(file)
    return files

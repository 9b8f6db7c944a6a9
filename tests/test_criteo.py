"""The Criteo-shaped click-log generator (sklearn_fdp/datasets/_criteo.py)."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_fdp.datasets._criteo import (
    CRITEO_CATEGORICAL_COLUMNS,
    CRITEO_COUNT_COLUMNS,
    criteo_like_rows,
    make_criteo_like,
    write_criteo_like_parquet,
)


def test_shape_norms_and_seed():
    X, y = make_criteo_like(3000, n_buckets=64, random_state=1)
    assert sp.isspmatrix_csr(X) and X.shape == (3000, 13 + 26 * 64)
    assert X.has_canonical_format
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    assert norms.max() <= 1.0 + 1e-6
    # one entry per field, each in its own block of 64 columns
    block = X[:, 13:].tocsr()
    assert np.all(np.diff(block.indptr) == 26)
    assert np.all(block.indices.reshape(-1, 26) // 64 == np.arange(26))
    assert set(np.unique(y)) <= {0, 1} and 0.05 < y.mean() < 0.5
    X2, y2 = make_criteo_like(3000, n_buckets=64, random_state=1)
    assert (X != X2).nnz == 0 and np.array_equal(y, y2)
    X3, _ = make_criteo_like(3000, n_buckets=64, random_state=1, block_index=1)
    assert (X != X3).nnz > 0


def test_parquet_partitions_read_back_as_the_in_memory_rows(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    files = write_criteo_like_parquet(tmp_path, 2500, rows_per_file=1000, n_buckets=32,
                                      random_state=2)
    assert len(files) == 3
    table = pq.read_table(files[1])
    counts = np.column_stack([table.column(c).to_numpy() for c in CRITEO_COUNT_COLUMNS])
    buckets = np.column_stack([table.column(c).to_numpy() for c in CRITEO_CATEGORICAL_COLUMNS])
    X = criteo_like_rows(counts, buckets, 32)
    X_mem, y_mem = make_criteo_like(1000, n_buckets=32, random_state=2, block_index=1)
    assert (X != X_mem).nnz == 0
    np.testing.assert_array_equal(table.column("label").to_numpy(), y_mem)

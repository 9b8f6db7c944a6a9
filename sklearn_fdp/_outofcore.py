"""Training rows read from disk (``numpy.memmap``) or a dask array, batch by batch.

The DP-SGD engine only ever needs the rows of one Poisson batch at a time
(plus per-row squared norms, computed once). :func:`as_row_source` wraps an
out-of-core ``X`` in a :class:`RowSource` that

* validates ``X`` in chunks (finiteness, the row-norm overflow bound, the
  squared row norms the oracles need) without holding it in memory;
* gathers the rows of a batch, ``gather(sorted_indices)``, as a small
  C-contiguous array of the training dtype, exactly the values the
  in-memory path would gather, so a fit gives the same model bit for bit.

Resident memory. Reading a memory map leaves its pages mapped into the
process (they count in its RSS) until the kernel needs the memory; one pass
over a 4 GB memmap raises RSS to about 4 GB without any copy, and on kernels
with large page-cache folios one scattered batch of 4,096 rows maps most of
the file (each fault maps the whole folio around the row). So a
:class:`MemmapRowSource` does not read through the map: it reads the rows of
a batch (and the chunks of a validation pass) from the map's file with
``os.preadv`` into small fresh buffers, when each row is one run of bytes in
the file. The file's pages then sit in the page cache only (memory the
kernel reclaims at will), never in the process's resident set. Other
layouts (column-major, strided column selections) are gathered through the map, whose
pages are released (``madvise(MADV_DONTNEED)``) after every chunk and every
``release_bytes`` of gathered rows; copy-on-write maps (``mode="c"``) are
gathered through the map and never released (that would discard the
caller's private changes), so their pages stay resident.

Privacy: nothing here changes what is computed, only where the rows come
from. Batches are the engine's Poisson batches, gathered from disk.
"""

import mmap
import os

import numpy as np
import scipy.sparse as sp

from ._kernels import csr_squared_row_norms, gather_rows
from ._validation import canonical_csr

__all__ = [
    "CHUNK_BYTES",
    "RELEASE_BYTES",
    "STREAM_MIN_BYTES",
    "DaskRowSource",
    "MappedRowSource",
    "MemmapRowSource",
    "RowSource",
    "addressable_rows",
    "as_row_source",
    "block_bounds",
    "column_max_abs",
    "column_subset_squared_norms",
    "is_dask_array",
    "is_out_of_core",
    "is_row_source",
    "iter_row_blocks",
    "map_rows",
    "row_block_size",
    "row_cache_limit",
    "row_reader",
    "row_slice",
    "row_subset",
    "should_stream",
    "squared_row_norms",
    "take_rows",
    "training_dtype",
    "validate_row_source",
]

# Memmaps and dask arrays from this size on are read batch by batch.
STREAM_MIN_BYTES = 256 * 2**20
# Rows per validation/norm chunk: about this many bytes of X at a time.
CHUNK_BYTES = 32 * 2**20
# Release the pages of a memory map once about this many bytes may have been
# mapped by gathers. A page fault maps up to 64 KiB around the row it reads
# when those pages are cached ("fault-around"), so each gathered row counts
# for at least that much.
RELEASE_BYTES = 64 * 2**20
_FAULT_AROUND_BYTES = 64 * 2**10

_FLOAT_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def is_dask_array(X):
    """Whether ``X`` is a ``dask.array.Array`` (without importing dask)."""
    return type(X).__module__.startswith("dask.array") and hasattr(X, "compute") and hasattr(
        X, "chunks")


def is_out_of_core(X):
    """Whether ``X`` is a ``numpy.memmap`` or a dask array (rows read per batch)."""
    return isinstance(X, np.memmap) or is_dask_array(X)


def should_stream(X):
    """Whether ``fit`` should read ``X`` batch by batch rather than as one array.

    For memmaps and dask arrays of at least :data:`STREAM_MIN_BYTES` (or of
    unknown size). Smaller ones take the in-memory path, which gives the
    same model: it is faster per step (a memmap is gathered from in place,
    not copied) and joblib hands ``GridSearchCV(n_jobs=...)`` workers their
    data as read-only memmaps of this kind.
    """
    if not is_out_of_core(X):
        return False
    size = float(np.prod([float(s) for s in X.shape])) * np.dtype(X.dtype).itemsize
    return not np.isfinite(size) or size >= STREAM_MIN_BYTES


def is_row_source(X):
    """Whether ``X`` is a :class:`RowSource` (or a column view of one)."""
    return isinstance(X, (RowSource, _ColumnView))


def training_dtype(dtype, estimator_name):
    """The dtype ``check_array(dtype=[float64, float32])`` would give ``X``."""
    dtype = np.dtype(dtype)
    if dtype in _FLOAT_DTYPES:
        return dtype
    if dtype.kind in "biuf":
        return np.dtype(np.float64)
    if dtype.kind == "c":
        raise ValueError(f"Complex data not supported by {estimator_name}; got X of dtype "
                         f"{dtype}. Use real-valued features.")
    raise ValueError(
        f"{estimator_name} needs numeric input, but X has dtype {dtype}. Store the "
        "features as float64 or float32 (encode categorical columns first)."
    )


def row_block_size(n_features, itemsize, chunk_bytes=None):
    """Rows per block of about ``chunk_bytes`` (default :data:`CHUNK_BYTES`), at least 2."""
    chunk_bytes = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    return max(2, int(chunk_bytes // max(1, int(n_features) * int(itemsize))))


def block_bounds(n_rows, step):
    """``(start, stop)`` of consecutive blocks of ``step`` rows covering ``n_rows`` rows.

    No block has a single row unless ``n_rows`` is 1: a 1-row remainder
    joins the previous block (numpy's einsum may sum a single row in
    another order than a row of a taller block).
    """
    step = max(2, int(step))
    for start in range(0, n_rows, step):
        if start > 0 and n_rows - start < 2:
            break  # taken by the previous block
        yield start, (n_rows if n_rows - (start + step) < 2 else start + step)


def row_block_kind(X):
    """How :func:`iter_row_blocks` reads ``X``: ``"source"`` (an out-of-core row source,
    blocks read from it), ``"memory"`` (a 2-D in-memory ndarray, blocks are views) or None
    (anything else: sparse, dask without a source, ...)."""
    if is_row_source(X):
        return "source"
    if isinstance(X, np.ndarray) and X.ndim == 2:
        return "memory"
    return None


def iter_row_blocks(X, chunk_bytes=None):
    """Yield ``(start, block)``: consecutive row blocks of an ndarray or a :class:`RowSource`.

    The blocks of an in-memory array and of a source of the same shape and
    dtype are the same rows (:func:`block_bounds` with
    :func:`row_block_size`), so a statistic accumulated block by block is
    the same bit for bit whether ``X`` is in memory or read from disk. An
    ndarray's blocks are views; a source's are fresh C-contiguous arrays of
    its dtype.
    """
    if isinstance(X, (RowSource, _ColumnView)):
        yield from X.iter_chunks(chunk_bytes)
        return
    step = row_block_size(X.shape[1], X.dtype.itemsize, chunk_bytes)
    for start, stop in block_bounds(X.shape[0], step):
        yield start, X[start:stop]


# -- data access: the row operations the maths needs, for any X ---------------
# The only place that asks what kind of array X is (ndarray, CSR, or an
# out-of-core source): mechanisms and the engine call these and never branch
# on the type themselves.

def squared_row_norms(X):
    """Squared L2 norm of every row of a dense or CSR matrix (or an out-of-core source).

    Always float64, accumulated in float64 (float32 rows too): clip factors
    are computed from these, and a float32 sum of d squares can be off by
    ``d`` float32 units, more than clipping's margin (issue 16 item 11).
    """
    if is_row_source(X):
        return X.squared_row_norms()  # chunk by chunk, same values as below
    if sp.issparse(X):
        from ._validation import canonical_csr

        X = canonical_csr(X)  # Σ data² is the norm only without duplicate entries
        out = np.empty(X.shape[0], dtype=np.float64)
        csr_squared_row_norms(X.indptr, X.data, out)  # no temporary copy of X
        return out
    return np.einsum("ij,ij->i", X, X, dtype=np.float64)


def take_rows(X, idx):
    """The rows ``X[idx]`` of a dense matrix, an out-of-core source, or a sparse matrix.

    A C-contiguous ndarray goes through the prefetching numba gather (the
    same values as ``np.take``, about 40% faster on batches of scattered
    rows of a matrix larger than the caches).
    """
    if is_row_source(X):
        return X.gather(idx)
    if isinstance(X, np.ndarray) and X.ndim == 2 and X.flags.c_contiguous:
        idx = np.asarray(idx, dtype=np.intp)
        out = np.empty((idx.shape[0], X.shape[1]), dtype=X.dtype)
        gather_rows(X, idx, out)
        return out
    return X[idx]


def addressable_rows(X, idx, max_bytes):
    """Yield ``(rows, local, sel)`` with ``rows[local]`` the rows ``X[idx[...]]`` in order.

    In memory: once, ``(X, idx, slice(None))`` (a kernel indexes ``X``
    directly). Out of core: the rows of ``idx`` gathered in sub-batches of
    about ``max_bytes``, with ``local = arange`` and ``sel`` the sub-batch's
    indices (to select per-row arrays such as targets or norms).
    """
    if is_row_source(X):
        step = max(1, max_bytes // (X.shape[1] * X.itemsize))
        for start in range(0, len(idx), step):
            sub = idx[start:start + step]
            yield X.gather(sub), np.arange(len(sub)), sub
        return
    yield X, idx, slice(None)


def row_slice(X, start, stop):
    """The rows ``X[start:stop]``: a view of an in-memory array, read from an out-of-core source."""
    if is_row_source(X):
        return X.gather(np.arange(start, stop))
    return X[start:stop]


# Bytes of the column selection per block in column_subset_squared_norms
# (a few MiB of temporary copy instead of the whole subset).
_NORM_BLOCK_BYTES = 8 << 20


def column_subset_squared_norms(X, cols):
    """``‖x_i[cols]‖²`` of every row, without copying ``X[:, cols]`` whole.

    Dense ``X`` is processed in row blocks of about ``_NORM_BLOCK_BYTES``;
    each block is laid out as the whole selection would be (numpy puts a
    column selection in column-major order) and has at least two rows, so
    the values equal ``squared_row_norms(X[:, cols])`` bit for bit (einsum's
    summation order follows the layout, and differs for a single row).
    Sparse and out-of-core inputs go through their own paths.
    """
    if sp.issparse(X) or is_row_source(X) or X.ndim != 2:
        return squared_row_norms(X[:, cols])
    n = X.shape[0]
    step = row_block_size(len(cols), X.itemsize, _NORM_BLOCK_BYTES)
    if step >= n:
        return squared_row_norms(X[:, cols])
    out = np.empty(n, dtype=np.float64)
    for start, stop in block_bounds(n, step):
        sub = X[start:stop][:, cols]
        out[start:stop] = np.einsum("ij,ij->i", sub, sub, dtype=np.float64)
    return out


def map_rows(X, fn, n_features, dtype):
    """Rows ``fn(rows, idx)`` of ``X``: computed now (in memory) or per batch (out of core).

    ``fn`` works row by row (``idx`` the rows' positions, a slice or an
    index array), so both give the same rows bit for bit.
    """
    if is_row_source(X):
        return MappedRowSource(X, fn, n_features, dtype)
    out = np.empty((X.shape[0], n_features), dtype=dtype)
    for start, block in iter_row_blocks(X):
        stop = start + len(block)
        out[start:stop] = fn(block, slice(start, stop))
    return out


def column_max_abs(X, cols):
    """``max |X[:, cols]|`` (0.0 without rows or columns), read block by block.

    Only a row block of the selection is copied at a time, in memory and out
    of core alike.
    """
    cols = np.asarray(cols, dtype=np.intp)
    top = 0.0
    for _, block in iter_row_blocks(X):
        if len(block) and len(cols):
            top = max(top, float(np.max(np.abs(np.asarray(block)[:, cols]))))
    return top


def row_reader(X, load):
    """``read(idx)``: the rows ``X[idx]`` as ``load`` converts an array (e.g. to a GPU tensor).

    In memory, all of ``X`` goes through ``load`` once and ``read`` indexes
    the result with ``idx`` as given. Out of core, ``read`` gathers the rows
    ``idx`` (sorted; an index array, or a tensor with ``.cpu()``) from the
    source and converts them: the same values. The last batch gathered is
    kept, so reading the same ``idx`` object again (e.g. for a public view
    of the batch) does not read it twice.
    """
    if not is_row_source(X):
        return load(X).__getitem__
    last = [None, None]

    def read(idx):
        if last[0] is idx:
            return last[1]
        rows = load(X.gather(np.asarray(idx.cpu() if hasattr(idx, "cpu") else idx)))
        last[:] = idx, rows
        return rows

    return read


def row_subset(X, rows, dtype=np.float64):
    """The rows ``X[rows]`` (sorted indices) as ``dtype``, for a pass block by block.

    In memory: a fresh ndarray now. Out of core: a source that gathers the
    rows when read, so that :func:`iter_row_blocks` yields the same blocks
    of the same values either way (for a mechanism that reads a subset of
    the records at every step, e.g. AdaMix's private records).
    """
    if is_row_source(X):
        return _RowSubset(X, rows, dtype)
    return np.asarray(take_rows(X, rows), dtype=dtype)


def row_cache_limit(X):
    """Entries (8 bytes each) of per-row caches a mechanism may keep for ``X``.

    Unbounded in memory; about one chunk of rows (:data:`CHUNK_BYTES`) for
    an out-of-core source, whose caches would otherwise grow with ``n``.
    """
    return CHUNK_BYTES / 8 if is_row_source(X) else np.inf


class RowSource:
    """Rows of an out-of-core 2-D array, gathered batch by batch.

    Subclasses implement :meth:`_read_rows` (a sorted integer index) and
    :meth:`_read_slice` (a contiguous row range). The source quacks enough
    like an array for the engine's oracles: ``shape``, ``dtype``,
    ``itemsize``, ``X[idx]`` (rows), ``X[:, cols]`` (a lazy column view).
    Converting it to an ndarray as a whole is refused: a code path that
    needs all of ``X`` in memory must not receive a source.

    Parameters
    ----------
    X : numpy.memmap or dask.array.Array of shape (n, d)
    dtype : numpy.dtype
        Dtype of the gathered rows (float64 or float32).
    """

    ndim = 2

    def __init__(self, X, dtype):
        self.data = X
        self.shape = (int(X.shape[0]), int(X.shape[1]))
        self.dtype = np.dtype(dtype)
        self._row_norms_sq = None

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.shape[0] * self.shape[1] * self.itemsize

    def __len__(self):
        return self.shape[0]

    def chunk_rows(self, chunk_bytes=None):
        """Rows per chunk of about ``chunk_bytes`` (default :data:`CHUNK_BYTES`)."""
        chunk_bytes = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        return max(1, int(chunk_bytes // max(1, self.shape[1] * self.itemsize)))

    def gather(self, idx):
        """Rows ``idx`` (sorted indices read fastest) as a C-contiguous ndarray."""
        idx = np.asarray(idx, dtype=np.intp)
        if idx.size == 0:
            return np.empty((0, self.shape[1]), dtype=self.dtype)
        return np.ascontiguousarray(self._read_rows(idx), dtype=self.dtype)

    def iter_chunks(self, chunk_bytes=None):
        """Yield ``(start, block)``: consecutive row blocks covering ``X`` once."""
        # At least 2 rows per chunk, and no 1-row last chunk: numpy's einsum
        # sums a single row in another order than a row of a taller block,
        # and the row norms must match the in-memory ones bit for bit.
        step = row_block_size(self.shape[1], self.itemsize, chunk_bytes)
        for start, stop in block_bounds(self.shape[0], step):
            block = np.ascontiguousarray(self._read_slice(start, stop), dtype=self.dtype)
            yield start, block
            self.release()

    def squared_row_norms(self):
        """``‖x_i‖²`` of every row, computed chunk by chunk (cached)."""
        if self._row_norms_sq is None:
            out = np.empty(self.shape[0], dtype=np.float64)
            for start, block in self.iter_chunks():
                out[start:start + len(block)] = np.einsum("ij,ij->i", block, block,
                                                          dtype=np.float64)
            self._row_norms_sq = out
        return self._row_norms_sq.copy()

    def release(self):
        """Let the kernel drop the pages read so far from this process (no-op)."""

    def __getitem__(self, key):
        if isinstance(key, tuple):
            rows, cols = key
            if isinstance(rows, slice) and rows == slice(None):
                return _ColumnView(self, cols)
            raise TypeError(f"RowSource supports X[idx] and X[:, cols]; got X[{key!r}].")
        return self.gather(key)

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "An out-of-core RowSource cannot be converted to an in-memory array; "
            "this code path needs X in memory (internal error)."
        )

    def _read_rows(self, idx):
        raise NotImplementedError

    def _read_slice(self, start, stop):
        raise NotImplementedError


class MemmapRowSource(RowSource):
    """A :class:`RowSource` over a ``numpy.memmap``; see the module docstring.

    Rows are read with ``os.preadv`` from the map's file into fresh buffers
    (``reader == "file"``) when each row is one contiguous run of bytes in
    the file (C order, row and column slices of it) and the map is shared (modes "r",
    "r+", "w+": its writes are in the page cache that ``pread`` reads).
    Nothing of the file is then mapped into the process. Otherwise
    (column-major or column-strided views, copy-on-write maps) rows are
    gathered from the map (``reader == "map"``) and its pages released
    with ``madvise(MADV_DONTNEED)`` every ``release_bytes`` (never for
    copy-on-write maps).
    """

    def __init__(self, X, dtype, release_bytes=None):
        super().__init__(X, dtype)
        self._array = np.asarray(X)  # an ndarray view of the mapping, no copy
        mode = getattr(X, "mode", None)
        raw = getattr(X, "_mmap", None)
        # Copy-on-write pages hold the caller's changes: never drop them.
        self._mmap = raw if (mode != "c" and hasattr(raw, "madvise")) else None
        self.release_bytes = RELEASE_BYTES if release_bytes is None else int(release_bytes)
        self._row_cost = max(abs(int(self._array.strides[0])), _FAULT_AROUND_BYTES)
        self._mapped = 0
        self._fd = None
        self._first_byte = None
        if mode != "c":
            self._open_file(X)
        self.reader = "map" if self._fd is None else "file"

    # -- reading through the file ----------------------------------------------

    def _open_file(self, X):
        """Locate row 0 of ``X`` in its file and open the file; give up quietly."""
        arr = self._array
        filename = getattr(X, "filename", None)
        raw = getattr(X, "_mmap", None)
        offset = getattr(X, "offset", None)
        if filename is None or raw is None or offset is None or arr.size == 0:
            return
        if arr.strides[1] != arr.itemsize and arr.shape[1] > 1:
            return  # a row is not one run of bytes
        try:
            map_base = np.frombuffer(raw, dtype=np.uint8).ctypes.data
            # np.memmap maps from the offset rounded down to the granularity.
            map_start = offset - offset % mmap.ALLOCATIONGRANULARITY
            first = int(arr.ctypes.data - map_base + map_start)
            fd = os.open(filename, os.O_RDONLY)
        except (OSError, TypeError, ValueError, BufferError):
            return
        n, d = arr.shape
        stride = int(arr.strides[0])
        last = first + (n - 1) * stride
        size = os.fstat(fd).st_size
        self._fd, self._first_byte, self._stride = fd, first, stride
        self._row_bytes = d * arr.itemsize
        # Trust the file only if it holds what the map shows (the file may
        # have been replaced since it was mapped).
        probe = np.array([0, n - 1], dtype=np.intp)
        if (min(first, last) < 0 or max(first, last) + self._row_bytes > size
                or not np.array_equal(self._pread_rows(probe), arr[probe], equal_nan=True)):
            self.close()

    def _pread_rows(self, idx):
        out = np.empty((len(idx), self.shape[1]), dtype=self._array.dtype)
        view = memoryview(out).cast("B")
        rb, stride, fd = self._row_bytes, self._stride, self._fd
        if stride == rb and len(idx) > 1:
            # Runs of consecutive rows are one read each.
            breaks = np.flatnonzero(np.diff(idx) != 1) + 1
            starts = np.concatenate(([0], breaks)).tolist()
            stops = np.concatenate((breaks, [len(idx)])).tolist()
        else:
            starts = range(len(idx))
            stops = range(1, len(idx) + 1)
        first_rows = idx.tolist()
        for a, b in zip(starts, stops):
            self._pread_exact(fd, view[a * rb:b * rb],
                              self._first_byte + first_rows[a] * stride)
        return out

    @staticmethod
    def _pread_exact(fd, buf, pos):
        while len(buf):
            got = os.preadv(fd, [buf], pos)
            if got <= 0:
                raise OSError(f"unexpected end of the file of the memmap at byte {pos}")
            buf, pos = buf[got:], pos + got

    def close(self):
        """Close the file descriptor (the map itself belongs to the caller)."""
        if self._fd is not None:
            try:
                os.close(self._fd)
            finally:
                self._fd = None

    def __del__(self):
        self.close()

    # -- RowSource interface ---------------------------------------------------

    def _read_rows(self, idx):
        if self._fd is not None:
            return self._pread_rows(idx)
        rows = np.take(self._array, idx, axis=0)
        self._mapped += len(idx) * self._row_cost
        if self._mapped >= self.release_bytes:
            self.release()
        return rows

    def _read_slice(self, start, stop):
        if self._fd is not None:
            return self._pread_rows(np.arange(start, stop, dtype=np.intp))
        return self._array[start:stop]

    def release(self):
        self._mapped = 0
        if self._mmap is not None and self._fd is None:
            try:
                self._mmap.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):  # closed map or unsupported platform
                self._mmap = None


class DaskRowSource(RowSource):
    """A :class:`RowSource` over a dask array: each batch is ``X[idx].compute()``."""

    def _read_rows(self, idx):
        return np.asarray(self.data[idx].compute())

    def _read_slice(self, start, stop):
        return np.asarray(self.data[start:stop].compute())


class MappedRowSource(RowSource):
    """Rows ``fn(rows, idx)`` of another :class:`RowSource`, computed as they are read.

    For estimators that train on a row-wise transform of ``X`` (row
    scaling, centring, augmentation): the transform is applied to each
    gathered batch and each chunk, never to the whole array. ``fn`` gets the
    base rows (C-contiguous, of the base's dtype) and ``idx``, the indices
    of those rows in ``X`` (a sorted integer array, or a ``slice`` for a
    chunk), so it can look up per-row factors computed beforehand; it must
    treat every row on its own (no reduction across rows), so that a row
    comes out the same whichever batch or chunk it is read in.

    Parameters
    ----------
    base : RowSource
    fn : callable ``fn(rows, idx) -> ndarray`` of shape ``(len(rows), n_features)``
    n_features : int
        Columns of the mapped rows.
    dtype : numpy.dtype
        Dtype of the mapped rows.
    """

    def __init__(self, base, fn, n_features, dtype):
        self.data = base.data
        self.base = base
        self.fn = fn
        self.shape = (base.shape[0], int(n_features))
        self.dtype = np.dtype(dtype)
        self._row_norms_sq = None

    def _read_rows(self, idx):
        return self.fn(self.base.gather(idx), idx)

    def _read_slice(self, start, stop):
        rows = np.ascontiguousarray(self.base._read_slice(start, stop), dtype=self.base.dtype)
        return self.fn(rows, slice(start, stop))

    def release(self):
        self.base.release()


class _RowSubset(RowSource):
    """Rows ``rows`` of another :class:`RowSource`, gathered (as ``dtype``) when read."""

    def __init__(self, base, rows, dtype):
        self.data = base.data
        self.base = base
        self.rows = np.asarray(rows, dtype=np.intp)
        self.shape = (len(self.rows), base.shape[1])
        self.dtype = np.dtype(dtype)
        self._row_norms_sq = None

    def _read_rows(self, idx):
        return self.base.gather(self.rows[idx])

    def _read_slice(self, start, stop):
        return self.base.gather(self.rows[start:stop])

    def release(self):
        self.base.release()


class _ColumnView:
    """``X[:, cols]`` of a :class:`RowSource`, read lazily (rows, then columns)."""

    ndim = 2

    def __init__(self, source, cols):
        cols = np.arange(source.shape[1])[cols]
        self.source = source
        self.cols = np.asarray(cols, dtype=np.intp).ravel()
        self.shape = (source.shape[0], len(self.cols))
        self.dtype = source.dtype

    @property
    def itemsize(self):
        return self.dtype.itemsize

    def __len__(self):
        return self.shape[0]

    def gather(self, idx):
        return np.ascontiguousarray(self.source.gather(idx)[:, self.cols])

    def iter_chunks(self, chunk_bytes=None):
        for start, block in self.source.iter_chunks(chunk_bytes):
            yield start, np.ascontiguousarray(block[:, self.cols])

    def squared_row_norms(self):
        # ``block[:, cols]`` as the in-memory ``X[:, cols]``: numpy lays a
        # column selection out column-major, and einsum's summation order
        # (hence the last bits of each norm) follows the layout.
        out = np.empty(self.shape[0], dtype=np.float64)
        for start, block in self.source.iter_chunks():
            sub = block[:, self.cols]
            out[start:start + len(block)] = np.einsum("ij,ij->i", sub, sub, dtype=np.float64)
        return out

    def __getitem__(self, key):
        if isinstance(key, tuple):
            raise TypeError(f"A column view supports X[idx] only; got X[{key!r}].")
        return self.gather(key)

    def __array__(self, dtype=None, copy=None):
        # Materialises these columns only (e.g. the public columns for a
        # free public pretraining fit); never the whole source.
        out = np.empty(self.shape, dtype=self.dtype)
        for start, block in self.iter_chunks():
            out[start:start + len(block)] = block
        return out if dtype is None else out.astype(dtype, copy=False)


def as_row_source(X, estimator_name="estimator", release_bytes=None):
    """Wrap a 2-D ``numpy.memmap`` or dask array in a :class:`RowSource`.

    Checks what can be checked without reading the data: two dimensions,
    known shape, at least one row and one column, a numeric dtype (integer,
    bool and float16 data are gathered as float64, as ``check_array`` would
    convert them). Reading the data is left to :func:`validate_row_source`.
    """
    ndim = len(X.shape)
    if ndim != 2:
        raise ValueError(
            f"Expected a 2D array for X of {estimator_name}, got a {ndim}D "
            f"{type(X).__name__} of shape {X.shape!r}. Reshape it to (n_samples, n_features)."
        )
    if any(not np.isfinite(s) for s in X.shape):
        raise ValueError(
            f"X of {estimator_name} is a dask array of unknown shape {X.shape!r}. "
            "Call X.compute_chunk_sizes() first."
        )
    n_samples, n_features = (int(s) for s in X.shape)
    if n_samples < 1:
        raise ValueError(
            f"Found array with {n_samples} sample(s) (shape={X.shape!r}) while a minimum "
            f"of 1 is required by {estimator_name}."
        )
    if n_features < 1:
        raise ValueError(
            f"Found array with {n_features} feature(s) (shape={X.shape!r}) while a minimum "
            f"of 1 is required by {estimator_name}."
        )
    dtype = training_dtype(X.dtype, estimator_name)
    if isinstance(X, np.memmap):
        return MemmapRowSource(X, dtype, release_bytes=release_bytes)
    if is_dask_array(X):
        return DaskRowSource(X, dtype)
    raise TypeError(f"X of type {type(X).__name__} is not an out-of-core array.")


def validate_row_source(estimator, X, y, release_bytes=None, *, reset=True,
                        compute_dtype=None):
    """Out-of-core twin of ``validate_data(estimator, X, y)`` plus the row-norm check.

    Runs every check the in-memory path runs (finite values, the overflow
    bound of :func:`~sklearn_fdp._validation.check_row_norms_finite`, the
    target checks, ``n_features_in_``), reading ``X`` once in chunks; the
    squared row norms are computed in the same pass and cached on the
    source. ``y=None`` skips the target checks (transformers).
    ``reset=False`` checks ``n_features_in_`` and the feature names
    against a fitted estimator instead of setting them. ``compute_dtype``
    is passed on to the row-norm check (e.g. float32 for a network that
    computes in float32). Returns ``(source, y)``.
    """
    from ._validation import (
        _assert_all_finite,
        _check_feature_names,
        _check_n_features,
        _check_y,
        check_consistent_length,
        check_row_norms_finite,
    )

    name = type(estimator).__name__
    _check_feature_names(estimator, X, reset=reset)
    source = as_row_source(X, name, release_bytes=release_bytes)
    if y is not None:
        y = _check_y(y, multi_output=False, y_numeric=False, estimator=estimator)
        check_consistent_length(X, y)
    norms = np.empty(source.shape[0], dtype=np.float64)
    norm_kw = {} if compute_dtype is None else {"compute_dtype": compute_dtype}
    for start, block in source.iter_chunks():
        _assert_all_finite(block, allow_nan=False, input_name="X", estimator_name=name)
        check_row_norms_finite(block, name, **norm_kw)
        norms[start:start + len(block)] = np.einsum("ij,ij->i", block, block, dtype=np.float64)
    source._row_norms_sq = norms
    _check_n_features(estimator, X, reset=reset)
    return source, y

"""The Gaussian mean of norm-bounded rows: the one implementation.

Released by :class:`~sklearn_fdp.PrivateMeanCenterer`, by DPSGD-F's
practical variant (Algorithm 3 of the DPSGD-F paper) and by every round of
its coarse-to-fine mean (Algorithm 2): the rows are scaled (or clipped) to
L2 norm at most ``bound`` by a data-independent map, summed in float64,
divided by the public ``n`` and released with ``N(0, (σ bound / n)²)``
noise per coordinate. Adding or removing one row moves the sum by at most
``bound``, so the release is one ``GaussianDpEvent(σ)`` under add/remove.

Every pass reads ``X`` in the row blocks of
:func:`~sklearn_fdp._outofcore.iter_row_blocks`, so an ndarray and an
out-of-core source of the same rows give the same release bit for bit.
"""

from typing import NamedTuple

import numpy as np

from .. import accounting
from .._distributed import tree_reduce, use_cluster, validate_partition
from .._outofcore import iter_row_blocks, map_rows, training_dtype
from .._random import secure_if

# Rows whose largest entry lies in this range have float64 squares that
# neither overflow nor lose a part of the norm to underflow: an entry whose
# square underflows (below 1.5e-154) is then below 1e-14 of the largest.
_PLAIN_NORM_RANGE = (1e-140, 1e140)


def _row_norms(X):
    """L2 norm of every row of a float64 ``X``, exact to a few ulp at any scale.

    ``sqrt(Σ x²)`` loses the entries whose squares underflow: a row of one
    entry 1e-22 and 999 of 2e-23 (float32) came out with a norm 6.4 times
    too small, so scaling it "to norm C" gave 6.4 C (issue 16 sensitivity
    harness). Rows outside :data:`_PLAIN_NORM_RANGE` are divided by their
    largest entry first (as LAPACK's ``nrm2`` does); the others, all rows of
    float32 data converted to float64 included, take the plain formula.
    """
    norms = np.linalg.norm(X, axis=1) if X.shape[1] else np.zeros(X.shape[0])
    if X.size == 0:
        return norms
    peak = np.maximum(X.max(axis=1), -X.min(axis=1))
    low, high = _PLAIN_NORM_RANGE
    rescale = ((peak > 0) & (peak < low)) | (peak > high)
    if rescale.any():
        unit = X[rescale] / peak[rescale, None]
        with np.errstate(over="ignore"):
            norms[rescale] = peak[rescale] * np.sqrt(np.einsum("ij,ij->i", unit, unit))
    return norms


def row_scale_factors(X, norm_bound, row_scaling):
    """The float64 factor ``f_i`` by which :func:`scale_rows` multiplies row ``i``.

    ``X`` is an ndarray or an out-of-core :class:`~sklearn_fdp._outofcore.RowSource`;
    it is read in row blocks (:func:`~sklearn_fdp._outofcore.iter_row_blocks`),
    so the factors are the same bit for bit in memory and out of core.
    ``"normalize"``: ``norm_bound / ‖x_i‖`` (0 for zero rows); ``"clip"``:
    ``min(1, norm_bound / ‖x_i‖)``; an overflowing norm gives 0.
    """
    out = np.empty(X.shape[0], dtype=np.float64)
    for start, block in iter_row_blocks(X):
        norms = _row_norms(np.asarray(block, dtype=np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            if row_scaling == "normalize":
                factor = np.where(norms > 0, norm_bound / norms, 0.0)
            else:  # "clip"
                factor = np.where(norms > norm_bound, norm_bound / norms, 1.0)
        # An overflowing norm (inf) gives factor 0: the row is zeroed, still bounded.
        out[start:start + len(block)] = np.nan_to_num(factor, nan=0.0, posinf=0.0)
    return out


def apply_row_factors(rows, factors, dtype):
    """``rows * factors[:, None]`` computed in float64, as a C-contiguous array of ``dtype``.

    Row by row (no reduction), so a row comes out the same in any batch.
    """
    scaled = np.asarray(rows, dtype=np.float64) * factors[:, None]
    return np.ascontiguousarray(scaled, dtype=dtype)


def scale_rows(X, norm_bound, row_scaling, name="estimator"):
    """Data-independent row scaling; ``X`` is not modified.

    ``"normalize"``: every non-zero row to L2 norm ``norm_bound`` (zero rows
    stay zero). ``"clip"``: rows of norm above ``norm_bound`` scaled down to
    it. ``"none"``: rows unchanged (a copy; in-memory ``X`` only). No
    branch depends on the data in a way that is observable apart from the
    returned rows, so nothing about ``X`` leaks through an exception or a
    warning. An ndarray (a memmap included, read in row blocks) gives a new
    in-memory array; an out-of-core source gives a source whose rows are
    scaled per batch (:func:`~sklearn_fdp._outofcore.map_rows`), the same
    rows bit for bit; a dask array with an active ``Client``
    (:func:`~sklearn_fdp._distributed.use_cluster`, after
    :func:`~sklearn_fdp._distributed.check_partitioned`) a dask array whose
    partitions are validated and scaled where they live
    (:func:`scale_partition`), the same rows bit for bit. ``name``: the
    estimator named in the partitions' validation errors.
    """
    if row_scaling == "none":
        return np.array(X, copy=True, order="C")
    if use_cluster(X):  # scaled (and validated) partition by partition, on the workers
        return X.map_blocks(scale_partition, norm_bound, row_scaling, name,
                            dtype=training_dtype(X.dtype, name))
    factors = row_scale_factors(X, norm_bound, row_scaling)
    dtype = X.dtype
    return map_rows(X, lambda rows, idx: apply_row_factors(rows, factors[idx], dtype),
                    X.shape[1], dtype)


def scale_partition(X, norm_bound, row_scaling, name="estimator"):
    """One partition of :func:`scale_rows`, on its worker: validated as in memory, then scaled."""
    X, _ = validate_partition(X, None, name, accept_sparse=False)
    return apply_row_factors(X, row_scale_factors(X, norm_bound, row_scaling), X.dtype)


def bounded_row_sum(X, bound, row_scaling=None, *, centre=None):
    """``Σ_i b(x_i - centre)`` in float64: the sum a Gaussian mean releases.

    ``b`` scales every row to L2 norm at most ``bound`` (``row_scaling``
    ``"normalize"`` or ``"clip"``, as :func:`scale_rows`; rounded to ``X``'s
    dtype unless centred, whose differences stay float64), or is the
    identity (``row_scaling=None``) for rows the caller has already scaled
    to ``bound`` with :func:`scale_rows`. Adding or removing one row moves
    the sum by at most ``bound`` in L2. One pass over the row blocks of
    ``X``, each block's column sums added in order.
    """
    if use_cluster(X):  # summed where the partitions live, in the same blocks
        return tree_reduce(partition_row_sum, X, None, (bound, row_scaling, centre),
                           what="the bounded row sum")[0]
    total = None
    for _, block in iter_row_blocks(X):
        part = _block_row_sum(block, bound, row_scaling, centre)
        total = part if total is None else total + part
    return total


def _block_row_sum(block, bound, row_scaling, centre):
    """``Σ b(x_i - centre)`` over one block of rows (float64)."""
    rows = block if centre is None else np.asarray(block, dtype=np.float64) - centre
    if row_scaling is None:
        rows = np.asarray(rows, dtype=np.float64)
    else:
        rows = apply_row_factors(rows, row_scale_factors(rows, bound, row_scaling), rows.dtype)
    return rows.sum(axis=0, dtype=np.float64)


def partition_row_sum(X, _y, bound, row_scaling, centre, name="PrivateMeanCenterer"):
    """One partition's ``(Σ b(x_i - centre), n_rows)``, on a worker: validated as in
    memory, then summed over the blocks of :func:`bounded_row_sum` (the partition's
    own :func:`~sklearn_fdp._outofcore.iter_row_blocks`)."""
    X, _ = validate_partition(X, None, name, accept_sparse=False)
    total = np.zeros(X.shape[1])
    for _, block in iter_row_blocks(X):
        total = total + _block_row_sum(block, bound, row_scaling, centre)
    return total, X.shape[0]


class GaussianMean(NamedTuple):
    """A released Gaussian mean.

    Parameters
    ----------
    mean : ndarray of shape (n_features,)
        The released mean, float64.
    noise_std : float
        Standard deviation of its noise per coordinate, ``σ bound / n``.
    """

    mean: np.ndarray
    noise_std: float


def gaussian_mean(X, bound, noise_multiplier, rng, *, row_scaling=None, centre=None,
                  noise="default"):
    """Release the mean of the rows of ``X`` bounded to L2 norm ``bound``.

    ``centre + Σ_i b(x_i - centre) / n + N(0, (σ bound / n)² I)`` with ``b``
    the row bound of :func:`bounded_row_sum` and ``n`` the (public) number of
    rows; ``centre`` (a released value) defaults to 0.

    Parameters
    ----------
    X : ndarray or RowSource of shape (n_samples, n_features)
        The rows.
    bound : float
        L2 bound of every (scaled) row: the add/remove sensitivity of the sum.
    noise_multiplier : float
        σ, the noise std of the sum divided by ``bound``.
    rng : numpy.random.Generator
        The stream of the noise (with ``noise="secure"`` it is replaced by
        the OS CSPRNG: the noise is what privacy rests on).
    row_scaling : {"normalize", "clip"} or None, default=None
        How the rows are bounded here; None when the caller has already
        scaled them to ``bound`` (:func:`scale_rows`).
    centre : ndarray of shape (n_features,) or None, default=None
        A released centre: the rows ``x - centre`` are bounded and summed,
        and the mean is moved back by ``centre``.
    noise : {"default", "secure"}, default="default"
        Source of the noise.

    Returns
    -------
    release : GaussianMean
        The released mean and its noise std per coordinate.
    event : dp_accounting.DpEvent
        ``GaussianDpEvent(noise_multiplier)``: what the release spent.
    """
    rng = secure_if(rng, noise)
    n_samples, n_features = X.shape
    noise_std = noise_multiplier * bound / n_samples
    total = bounded_row_sum(X, bound, row_scaling, centre=centre)
    mean = total / n_samples if centre is None else centre + total / n_samples
    mean = mean + rng.normal(0.0, noise_std, size=n_features)
    return GaussianMean(mean, float(noise_std)), accounting.gaussian_event(noise_multiplier)

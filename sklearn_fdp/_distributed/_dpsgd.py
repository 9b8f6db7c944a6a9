"""DP-SGD's private gradient computed on the workers that hold a dask array's rows.

The engine (:func:`sklearn_fdp._engine.run_dp_sgd`) asks its private oracle,
once per step, for the sum over a Poisson batch of the clipped per-example
gradients. :class:`ClusterGradientOracle` is that oracle for a dask array
when a ``dask.distributed`` ``Client`` is active (the switch of
:func:`~sklearn_fdp._distributed.use_cluster`): the loop, the sampler, the
noise, the normalisation and the accounting are the engine's, unchanged.
Only where the clipped sum is computed changes.

The mechanism, step by step:

* **The batch** is the engine's :class:`~sklearn_fdp._engine.PoissonSampler`
  draw, in the fitting process, by global row index: the same generator and
  the same draws as the in-process fit, so the batches are the in-process
  fit's (``noise="secure"``: the CSPRNG coins, as in process). The indices
  are cut at the partitions' row offsets; each partition with rows in the
  batch gets its local indices.
* **Prefetch.** The engine draws the next batches ahead and hands them to
  :meth:`ClusterGradientOracle.prefetch` (the sampler's generator is used by
  nothing else, so drawing ahead changes no draw). Each announced batch
  becomes one dask task per partition that gathers the batch's rows on the
  worker holding the partition (dask places the task there), while earlier
  steps run: when the step comes only ``θ`` travels.
* **The partial sums** are computed on the workers by the in-process
  oracle's own code (``LinearGradientOracle``, FDP Algorithm 1's
  private and public oracles) run on the gathered rows, so a row's clipped
  gradient is the in-process one; the fitting process adds the partial sums
  in partition order. The sum differs from the in-process sum only in the
  order of its floating-point additions (the tests derive the tolerance).
* **Wide sparse rows.** For CSR partitions the gather also compacts the
  batch's rows to the columns they touch; the step sends ``θ`` on those
  columns only (and the intercept) and gets the gradient back on them, so
  neither direction carries the whole weight vector. (The engine's *lazy*
  noise, which skips untouched coordinates in the fitting process too,
  needs the rows in the fitting process and stays an in-process path: a
  cluster fit runs the eager loop, one dense Gaussian draw per step.)
* **One noise draw per step**, by the engine in the fitting process, from
  the estimator's noise stream (the OS CSPRNG under ``noise="secure"``).
  Workers draw nothing.

Faults. The partitions are held by the cluster as futures of their
validated form; a lost worker's partitions and pending tasks are recomputed
by dask from the graph (the same code on the same rows: the same partial
sums). Every partial sum carries its row count and the step checks that the
counts add up to the batch size, so a step never continues on fewer rows; a
worker lost repeatedly (dask's ``allowed-failures``) raises a
``RuntimeError`` before that step's noisy sum exists.

Trust model. Which partitions (and which rows in them) a step reads is
batch membership: whoever can watch the cluster's tasks, its network or
its workers' memory learns the batches, and the amplification by
subsampling does not hold against them. The cluster is trusted like the
fitting process (docs/scale.md, "Trust model").
"""

import numpy as np
import scipy.sparse as sp

from .._outofcore import is_dask_array, training_dtype
from ._partitions import active_client, lost_workers_raise, validate_partition

__all__ = ["ClusterGradientOracle", "ClusterPublicOracle", "cluster_alg1_oracles",
           "cluster_alg1_start", "cluster_linear_oracle", "cluster_public_scale", "linear_oracle",
           "prepared_partitions", "refuse_cluster_pretraining", "weights_dtype"]

# Batches drawn ahead of the step being computed (each a set of gather tasks).
PREFETCH_DEPTH = 2


class _Part:
    """One validated partition on its worker: rows, encoded targets."""

    def __init__(self, X, y):
        self.X = X
        self.y = y

    def __len__(self):
        return self.X.shape[0]


def _prepare(X, y, name, encode, y_numeric):
    X, y = validate_partition(X, y, name, y_numeric=y_numeric)
    if y is not None and encode is not None:
        y = encode(y)
    return _Part(X, y)


def _describe(part):
    return len(part), bool(sp.issparse(part.X))


def prepared_partitions(estimator, X, y, *, encode=None):
    """``(futures, offsets, sparse)`` of ``X``'s validated partitions, held on the cluster.

    ``X`` and ``y`` as :func:`~sklearn_fdp._distributed.check_partitioned`
    returns them (class indices of a classifier, or a float regression
    target, checked finite); ``encode`` maps a partition's targets on its
    worker (e.g. ``LinearLoss.encode``). Every partition is validated with the in-memory
    rules on its worker (:func:`~sklearn_fdp._distributed.validate_partition`)
    before this returns, and its row count checked against ``X``'s chunks.
    """
    import dask

    client = active_client()
    name = type(estimator).__name__
    xs = list(X.to_delayed().ravel())
    ys = [None] * len(xs) if y is None else list(y.to_delayed().ravel())
    y_numeric = y is not None and y.dtype.kind == "f"
    parts = client.compute([dask.delayed(_prepare, pure=True)(xb, yb, name, encode, y_numeric)
                            for xb, yb in zip(xs, ys)])
    described = _gather(client, [client.submit(_describe, p, pure=False) for p in parts],
                        "the validation of X's partitions")
    counts = np.array([c for c, _ in described], dtype=np.int64)
    if not np.array_equal(counts, np.asarray(X.chunks[0], dtype=np.int64)):
        raise RuntimeError(
            f"{name}: X's partitions hold {counts.tolist()} rows but its chunks say "
            f"{list(X.chunks[0])}: a partition was lost or changed. Nothing was released.")
    sparse = {s for _, s in described}
    if len(sparse) > 1:
        raise TypeError(f"{name} got a dask array mixing dense and sparse partitions; make "
                        "them all CSR or all dense.")
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return parts, offsets, sparse.pop()


def _gather(client, futures, what):
    with lost_workers_raise(what):
        return client.gather(futures)


class _Batch:
    """A partition's rows of one batch, gathered on its worker (compacted when CSR)."""

    def __init__(self, part, local):
        X = part.X[local]
        self.y = part.y[local]
        self.cols = None
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            # The touched columns (a mask: O(nnz + d), no sort), and the indices
            # renumbered into them (a monotone map: still sorted per row).
            touched = np.zeros(X.shape[1], dtype=bool)
            touched[X.indices] = True
            cols = np.flatnonzero(touched)
            position = np.empty(X.shape[1], dtype=X.indices.dtype)
            position[cols] = np.arange(cols.size, dtype=X.indices.dtype)
            X = sp.csr_matrix((X.data, position[X.indices], X.indptr),
                              shape=(X.shape[0], cols.size))
            self.cols = cols
        self.X = X


def _gather_batch(part, local):
    return _Batch(part, local)


def _columns(batch):
    return batch.cols


def _partial_sum(batch, theta, local_oracle):
    """``(clipped sum over the batch's rows, row count)``, by the in-process oracle's code."""
    factory, args = local_oracle
    oracle = factory(batch.X, batch.y, batch.cols, *args)
    m = batch.X.shape[0]
    return oracle(np.arange(m), theta), m


def _theta_rows(cols, n_features, fit_intercept):
    """Rows of θ a compacted batch reads: its columns, then the intercept."""
    return np.append(cols, n_features) if fit_intercept else cols


class _Partitioned:
    """What both cluster oracles share: the partitions, their batches' tasks and the sums."""

    def __init__(self, parts, offsets, sparse, n_features, fit_intercept, local_oracle):
        self.client = active_client()
        if self.client is None:
            raise RuntimeError("A cluster fit needs an active dask.distributed Client.")
        self.parts = parts
        self.offsets = offsets
        self.sparse = bool(sparse)
        self.n_features = int(n_features)
        self.fit_intercept = bool(fit_intercept)
        self.local_oracle = local_oracle
        self.steps_computed = 0

    def _split(self, idx):
        """``[(partition, local indices)]`` of the sorted global ``idx``, partition order."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size and (idx[0] < 0 or idx[-1] >= self.offsets[-1]):
            raise IndexError("Batch index outside X's rows.")
        cuts = np.searchsorted(idx, self.offsets)
        return [(p, idx[cuts[p]:cuts[p + 1]] - self.offsets[p])
                for p in range(len(self.parts)) if cuts[p + 1] > cuts[p]]

    def _submit_gathers(self, idx):
        tasks = []
        for p, local in self._split(idx):
            batch = self.client.submit(_gather_batch, self.parts[p], local, pure=False)
            cols = self.client.submit(_columns, batch, pure=False) if self.sparse else None
            tasks.append((p, local.size, batch, cols))
        return tasks

    def _sum(self, tasks, theta, what):
        """Partial sums of ``tasks`` at ``theta``, added in partition order, rows checked."""
        out = np.zeros_like(theta)
        if not tasks:
            return out, 0
        cols = (_gather(self.client, [c for *_, c in tasks], what) if self.sparse
                else [None] * len(tasks))
        futures = []
        for (p, m, batch, _), c in zip(tasks, cols):
            rows = None if c is None else _theta_rows(c, self.n_features, self.fit_intercept)
            theta_part = theta if rows is None else theta[rows]
            futures.append(self.client.submit(_partial_sum, batch, theta_part,
                                              self.local_oracle, pure=False))
        results = _gather(self.client, futures, what)
        total = 0
        for (p, m, *_), c, (g, count) in zip(tasks, cols, results):
            if count != m:
                raise RuntimeError(
                    f"Partition {p} returned a sum over {count} rows for a batch of {m}: "
                    "a partition was lost or changed. Nothing was released.")
            total += count
            if c is None:
                out += g
            else:
                out[_theta_rows(c, self.n_features, self.fit_intercept)] += g
        return out, total


class ClusterGradientOracle(_Partitioned):
    """The engine's private oracle, computed where the partitions live.

    Same contract as ``LinearGradientOracle``: ``oracle(idx, θ)`` is the
    sum over the global row indices ``idx`` of the per-example gradients
    clipped to ``max_grad_norm``. The engine announces batches ahead with
    :meth:`prefetch` (``prefetch_depth`` of them).

    Parameters
    ----------
    parts, offsets, sparse : from :func:`prepared_partitions`.
    n_features : int
    fit_intercept : bool
    max_grad_norm : float
        The clip the local oracles apply (the engine checks it against the
        noise's).
    local_oracle : (factory, args)
        ``factory(X_batch, y_batch, cols, *args)`` builds, on a worker, the
        in-process oracle over a gathered batch (``cols``: the touched
        columns of a compacted CSR batch, else None).
    """

    prefetch_depth = PREFETCH_DEPTH

    def __init__(self, parts, offsets, sparse, n_features, fit_intercept, max_grad_norm,
                 local_oracle):
        super().__init__(parts, offsets, sparse, n_features, fit_intercept, local_oracle)
        self.max_grad_norm = float(max_grad_norm)
        self._ahead = []  # (idx, gather tasks) of announced batches, in order

    def prefetch(self, idx):
        """Announce the batch of a later step: its rows are gathered on the workers now."""
        self._ahead.append((idx, self._submit_gathers(idx)))

    def __call__(self, idx, theta):
        if self._ahead and self._ahead[0][0] is idx:
            tasks = self._ahead.pop(0)[1]
        else:  # not announced (e.g. a caller without prefetch): gather now
            tasks = self._submit_gathers(idx)
        out, total = self._sum(tasks, theta, "a step's clipped gradient sum")
        if total != len(idx):
            raise RuntimeError(
                f"A step's clipped sum covered {total} rows for a batch of {len(idx)}: a "
                "partition was lost or changed. Nothing was released.")
        self.steps_computed += 1
        return out


class ClusterPublicOracle(_Partitioned):
    """FDP Algorithm 1's public oracle: the mean public gradient of a uniform batch.

    The batch is drawn in the fitting process by ``sampler`` (the in-process
    oracle's :class:`~sklearn_fdp._engine.UniformSampler`, same stream); the
    workers return their rows' sums and the fitting process divides by the
    batch size.
    """

    def __init__(self, parts, offsets, sparse, n_features, fit_intercept, local_oracle, sampler):
        super().__init__(parts, offsets, sparse, n_features, fit_intercept, local_oracle)
        self.sampler = sampler

    def __call__(self, theta):
        idx = self.sampler.sample()
        out, total = self._sum(self._submit_gathers(idx), theta, "the public gradient")
        if total != len(idx):
            raise RuntimeError(f"The public gradient covered {total} rows for a batch of "
                               f"{len(idx)}. Nothing was released.")
        out /= len(idx)
        return out


# -- the local oracles: the in-process code, on a gathered batch ---------------------------

def _linear_local(X, y, cols, loss, fit_intercept, max_grad_norm):
    from .._engine import LinearGradientOracle

    return LinearGradientOracle(X, y, loss, fit_intercept, max_grad_norm)


def _alg1_private_local(X, y, cols, loss, public_mask, label_public, fit_intercept,
                        max_grad_norm):
    from .._mechanisms.fdp import FeatureDPPrivateOracle

    mask = public_mask if cols is None else public_mask[cols]
    return FeatureDPPrivateOracle(X, y, loss, mask, label_public, "mask", fit_intercept,
                                  max_grad_norm)


class _SumOfMean:
    """The public oracle's batch mean times the batch size: a sum the process can add."""

    def __init__(self, oracle):
        self.oracle = oracle

    def __call__(self, idx, theta):
        return self.oracle(theta) * len(idx)


def _alg1_public_local(X, y, cols, loss, public_mask, label_public, fit_intercept):
    from .._engine import UniformSampler
    from .._mechanisms.fdp import FeatureDPPublicOracle

    mask = public_mask if cols is None else public_mask[cols]
    oracle = FeatureDPPublicOracle(X, y, loss, mask, label_public, "mask", fit_intercept,
                                   X.shape[0], np.random.default_rng(0))
    assert isinstance(oracle.sampler, UniformSampler) and oracle.sampler.size == X.shape[0]
    return _SumOfMean(oracle)


def cluster_linear_oracle(estimator, X, y, loss, fit_intercept, max_grad_norm, *, encoded=False):
    """:class:`ClusterGradientOracle` of a linear model's clipped per-example gradients.

    ``y``: the targets (class indices, or the regression target; already
    ``loss.encode``-d when ``encoded``), a dask array with ``X``'s row
    chunks; encoded on the workers.
    """
    parts, offsets, sparse = prepared_partitions(estimator, X, y,
                                                 encode=None if encoded else loss.encode)
    return ClusterGradientOracle(parts, offsets, sparse, X.shape[1], fit_intercept,
                                 max_grad_norm,
                                 (_linear_local, (loss, fit_intercept, max_grad_norm)))


def linear_oracle(estimator, X, target, loss, fit_intercept, max_grad_norm, *, encoded=False):
    """The private oracle of a linear DP-SGD run: on the cluster for a dask ``X``, else in process.

    A dask array reaches here only on the cluster path (otherwise validation
    has made it an in-memory array or a row source). ``target``: class
    indices or the regression target (``encoded``: already
    ``loss.encode``-d).
    """
    from .._engine import LinearGradientOracle

    if is_dask_array(X):
        return cluster_linear_oracle(estimator, X, target, loss, fit_intercept, max_grad_norm,
                                     encoded=encoded)
    y = target if encoded else loss.encode(target)
    return LinearGradientOracle(X, y, loss, fit_intercept, max_grad_norm)


def weights_dtype(estimator, X):
    """The dtype of the weights of a fit on ``X`` (a dask array's training dtype)."""
    return training_dtype(X.dtype, type(estimator).__name__) if is_dask_array(X) else X.dtype


def refuse_cluster_pretraining(estimator):
    """Raise when a cluster fit would pretrain on the public columns (it reads them in memory).

    ``public_epochs="auto"`` with a private label and ``public_epochs=0``
    start from zeros and run on the cluster; the other settings pretrain in
    the fitting process (a minimiser over all rows, or SGD over uniform
    batches) and are not distributed.
    """
    epochs = estimator.public_epochs
    if (epochs == "auto" and estimator.label_public) or (epochs != "auto" and epochs > 0):
        raise ValueError(
            f"public_epochs={epochs!r} of {type(estimator).__name__} pretrains on the public "
            "columns in the fitting process, which a dask.distributed fit does not do: set "
            "public_epochs=0 (or pretrain separately and start from it), or fit without an "
            "active Client.")


def _public_norms(X, y, name, cols):
    from .._outofcore import column_subset_squared_norms

    X, _ = validate_partition(X, None, name)
    norms = column_subset_squared_norms(X, cols)
    return (float(norms.max()) if len(norms) else 0.0), X.shape[0]


def _max_count(a, b):
    return max(a[0], b[0]), a[1] + b[1]


def cluster_public_scale(estimator, X, public_mask):
    """``(X / f, f)`` as ``rescaled_for_public_steps``, with the norms computed on the workers.

    The factor is the largest public row norm (if above 1): a maximum, the
    same whatever the order, so the in-process factor exactly. ``X / f`` is
    a lazy map of the partitions by the in-process division.
    """
    from .._mechanisms.fdp import _PUBLIC_NORM_SLACK, _divide
    from ._partitions import tree_reduce

    cols = np.flatnonzero(public_mask)
    if len(cols) == 0:
        return X, 1.0
    largest_sq, _ = tree_reduce(_public_norms, X, None, (type(estimator).__name__, cols),
                                what="the public rows' norms", combine=_max_count)
    largest = float(np.sqrt(largest_sq))
    if not largest > 1.0 + _PUBLIC_NORM_SLACK:
        return X, 1.0
    return X.map_blocks(_divide, largest, dtype=X.dtype), largest


def cluster_alg1_start(estimator, X, y, loss, theta0, *, public_mask, label_public, public_loss,
                       fit_intercept, max_grad_norm, public_batch_size, public_rng, noise):
    """``(scale, private, public, θ0)`` of FDP Algorithm 1 on the cluster (no pretraining).

    The in-process ``_fit_alg1`` steps: the public scale, the two oracles
    (:func:`cluster_alg1_oracles`), and the start ``theta0`` (the cluster
    path does not pretrain: :func:`refuse_cluster_pretraining`). ``y``:
    encoded targets.
    """
    refuse_cluster_pretraining(estimator)
    X, scale = cluster_public_scale(estimator, X, public_mask)
    private, public = cluster_alg1_oracles(
        estimator, X, y, loss, public_mask=public_mask, label_public=label_public,
        public_loss=public_loss, fit_intercept=fit_intercept, max_grad_norm=max_grad_norm,
        public_batch_size=public_batch_size, public_rng=public_rng, noise=noise)
    return scale, private, public, theta0


def cluster_alg1_oracles(estimator, X, y, loss, *, public_mask, label_public, public_loss,
                         fit_intercept, max_grad_norm, public_batch_size, public_rng, noise):
    """FDP Algorithm 1's ``(private, public)`` oracles on the cluster (``public_loss="mask"``).

    The public batches come from the first of the three children of
    ``public_rng`` that ``alg1_oracles`` spawns, so they are the in-process
    fit's. ``"gaussian_pad"`` draws a private padding per batch row in the
    fitting process and is not run on a cluster (it raises). ``y``: encoded
    targets.
    """
    from .._engine import UniformSampler

    if public_loss != "mask":
        raise ValueError(
            f"public_loss={public_loss!r} of {type(estimator).__name__} is not supported on a "
            "dask.distributed cluster (its private padding is drawn per batch row in the "
            "fitting process); use public_loss='mask', or fit without an active Client.")
    sample_rng = public_rng.spawn(3)[0]
    parts, offsets, sparse = prepared_partitions(estimator, X, y)
    mask = np.asarray(public_mask, dtype=bool)
    private = ClusterGradientOracle(
        parts, offsets, sparse, X.shape[1], fit_intercept, max_grad_norm,
        (_alg1_private_local, (loss, mask, label_public, fit_intercept, max_grad_norm)))
    public = ClusterPublicOracle(
        parts, offsets, sparse, X.shape[1], fit_intercept,
        (_alg1_public_local, (loss, mask, label_public, fit_intercept)),
        UniformSampler(int(X.shape[0]), public_batch_size, sample_rng))
    return private, public

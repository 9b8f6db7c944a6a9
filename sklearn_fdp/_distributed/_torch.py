"""``MLPFeatureDP`` on ``torch.distributed``: every rank holds a shard of the rows.

:func:`sklearn_fdp.neural.fit_distributed` runs the estimator's ordinary
``fit`` on each rank of an initialised process group (``torchrun``), with a
:class:`TorchGroup` installed as the fit's collective; a plain ``fit`` runs
with :data:`SOLO` (one process, nothing to combine). The training loop
(:func:`sklearn_fdp.neural._alg1.train`) is the same in both; what a rank
adds is four collective operations:

* the layout: the shards, in rank order, are the rows ``0 .. n - 1`` of the
  training set (rank ``r`` holds rows ``offset_r .. offset_r + n_r - 1``);
  ``n`` (public, as in memory) is the sum of the shard sizes;
* the Poisson batch: each rank flips a Bernoulli(q) coin for each of its
  rows, from its own stream spawned from the fit's one seed
  (:func:`sklearn_fdp.neural._alg1.rank_streams`); the union over the ranks
  is a Poisson(q) batch of all ``n`` rows, the batch the accountant assumes;
* the clipped sums: each rank sums its sampled rows' clipped per-example
  gradients (the estimator's own code), rank 0 adds the step's one Gaussian
  draw of std ``σ C``, and an all-reduce (sum) gives every rank the same
  noisy sum, divided by the public expected batch size ``q n``;
* the public gradients (FDP Algorithm 1's uniform batch, public
  pretraining): every rank draws the same global public batch from the same
  public stream, sums the gradients of ``ℓ_pub`` over its rows of it, and
  the all-reduce adds them.

Every rank ends with the same weights. Failures are never absorbed: an
exception on one rank during validation is raised on every rank
(:meth:`TorchGroup.agree`, so no rank waits in a collective the others never
enter), and a rank that dies mid-fit makes the next collective raise on the
others (torch's gloo/NCCL error), so no step ever runs on fewer rows.
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["SOLO", "TorchGroup", "current_collective", "install_collective"]


class _Solo:
    """The collective of a fit in one process: every operation is the identity."""

    rank = 0
    world_size = 1

    def agree(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)

    def layout(self, n_local, n_features, feature_names):
        return 0, int(n_local)

    def seed(self, random_state):
        return random_state

    def check_params(self, estimator):
        pass

    def sum_(self, tensors):
        pass

    def max(self, value):
        return value

    def labels(self, y):
        return y


SOLO = _Solo()

_COLLECTIVE = contextvars.ContextVar("sklearn_fdp_torch_collective", default=SOLO)


def current_collective():
    """The collective of the fit running in this context (:data:`SOLO` by default)."""
    return _COLLECTIVE.get()


@contextlib.contextmanager
def install_collective(comm):
    """Run the ``fit`` calls of the ``with`` block with ``comm`` as their collective."""
    token = _COLLECTIVE.set(comm)
    try:
        yield comm
    finally:
        _COLLECTIVE.reset(token)


# The estimator parameters compared across ranks (plain values only: a callable's
# repr holds an address that differs between processes).
_PLAIN = (type(None), bool, int, float, str, np.integer, np.floating)


def _plain(value):
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return False


class TorchGroup:
    """The collective of one rank of a ``torch.distributed`` process group.

    Parameters
    ----------
    torch : module
        The imported ``torch``.
    group : ProcessGroup or None
        None: the default (world) group.
    name : str
        The estimator's class name, for messages.
    """

    def __init__(self, torch, group, name):
        dist = torch.distributed
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                f"fit_distributed of {name} needs an initialised torch.distributed "
                "process group: call torch.distributed.init_process_group(...) on every "
                "rank first (torchrun sets the environment for init_method='env://'), or "
                "call fit() for a fit in one process.")
        self.torch = torch
        self.dist = dist
        self.group = group
        self.name = name
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.backend = str(dist.get_backend(group)).lower()

    def _gather(self, obj):
        out = [None] * self.world_size
        self.dist.all_gather_object(out, obj, group=self.group)
        return out

    def agree(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` on this rank; raises on every rank if it raised on any.

        Validation errors are local to a rank; without this, the ranks that
        passed would wait forever in the next collective.
        """
        try:
            result, error = fn(*args, **kwargs), None
        except Exception as exc:  # re-raised below, on every rank
            result, error = None, exc
        errors = self._gather(None if error is None else f"{type(error).__name__}: {error}")
        if error is not None:
            raise error
        failed = [(r, e) for r, e in enumerate(errors) if e is not None]
        if failed:
            rank, message = failed[0]
            raise RuntimeError(f"fit_distributed of {self.name} failed on rank {rank}: "
                               f"{message}. No rank trained.")
        return result

    def layout(self, n_local, n_features, feature_names):
        """``(offset, n)``: this shard's first global row and the number of rows of all shards."""
        names = None if feature_names is None else tuple(str(f) for f in feature_names)
        shards = self._gather((int(n_local), int(n_features), names))
        if len({s[1:] for s in shards}) > 1:
            raise ValueError(
                f"fit_distributed of {self.name}: the ranks' shards have different columns "
                f"(n_features, names by rank: {[s[1:] for s in shards]}). Every rank must "
                "hold the same columns, in the same order.")
        sizes = [s[0] for s in shards]
        return int(sum(sizes[:self.rank])), int(sum(sizes))

    def seed(self, random_state):
        """One seed for every rank: rank 0's fresh entropy for None, else the same on all.

        Returned as a :class:`~sklearn_fdp._random.SeedSequenceState`, which
        spawns the same streams as the integer ``random_state`` would.
        """
        from .._random import SeedSequenceState

        if isinstance(random_state, SeedSequenceState):
            ss = random_state.seed_sequence
            mine = (ss.entropy, tuple(ss.spawn_key), ss.pool_size)
        elif random_state is None:
            mine = (np.random.SeedSequence().entropy, (), 4)
        else:
            mine = (int(check_random_state(random_state).randint(np.iinfo(np.int32).max)),
                    (), 4)
        seeds = self._gather(mine)
        if random_state is not None and any(s != seeds[0] for s in seeds):
            raise ValueError(
                f"fit_distributed of {self.name}: random_state gives different seeds on "
                "different ranks; pass the same integer on every rank (or None: rank 0 "
                "then draws one seed for all).")
        entropy, spawn_key, pool_size = seeds[0]
        return SeedSequenceState(np.random.SeedSequence(entropy, spawn_key=spawn_key,
                                                        pool_size=pool_size))

    def check_params(self, estimator):
        """Raise unless every rank fits with the same (plain) parameters."""
        params = estimator.get_params(deep=False)
        mine = sorted((k, repr(v)) for k, v in params.items()
                      if k not in ("random_state", "verbose") and _plain(v))
        everyone = self._gather(mine)
        differ = sorted({k for p in everyone for k, v in p if (k, v) not in mine})
        if differ:
            raise ValueError(
                f"fit_distributed of {self.name}: the ranks were given different "
                f"parameters ({differ}). Build the estimator with the same parameters on "
                "every rank.")

    def _reduce_device(self, tensor):
        # NCCL reduces CUDA tensors only; gloo reduces CPU tensors (and copies of CUDA ones).
        if self.backend == "nccl":
            if tensor.device.type != "cuda":
                raise RuntimeError(
                    f"fit_distributed of {self.name}: the process group uses NCCL, which "
                    "reduces CUDA tensors only, but the fit runs on "
                    f"{tensor.device}. Use device='cuda' (and torch.cuda.set_device("
                    "local_rank)) with NCCL, or a gloo group on CPUs.")
            return tensor
        return tensor if tensor.device.type == "cpu" else tensor.cpu()

    def sum_(self, tensors):
        """All-reduce (sum) ``tensors`` in place, as one flat buffer (one call per step)."""
        torch = self.torch
        tensors = list(tensors)
        if not tensors:
            return
        flat = torch.cat([t.reshape(-1) for t in tensors])
        buf = self._reduce_device(flat)
        self.dist.all_reduce(buf, op=self.dist.ReduceOp.SUM, group=self.group)
        if buf is not flat:
            flat = buf.to(flat.device)
        start = 0
        for t in tensors:
            t.copy_(flat[start:start + t.numel()].view_as(t))
            start += t.numel()

    def max(self, value):
        return max(self._gather(float(value)))

    def labels(self, y):
        """The distinct labels of every rank's ``y`` (only those travel)."""
        parts = self._gather(np.unique(np.asarray(y)))
        return np.unique(np.concatenate(parts))

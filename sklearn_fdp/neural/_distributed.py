"""``fit_distributed``: an MLP fitted on the shards of a ``torch.distributed`` group."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._distributed._torch import TorchGroup, install_collective
from ._mlp import _BaseMLPFeatureDP, _import_torch

if TYPE_CHECKING:  # annotations only
    from .._typing import ArrayLike, MatrixLike

__all__ = ["fit_distributed"]


def fit_distributed(estimator: _BaseMLPFeatureDP, X: MatrixLike, y: ArrayLike,
                    feature_names: ArrayLike | None = None, *, group=None):
    """Fit an MLP on the rows held by every rank of a ``torch.distributed`` group.

    Call it on every rank (e.g. under ``torchrun``) after
    ``torch.distributed.init_process_group``, with the same estimator
    parameters and this rank's rows: the training set is the concatenation
    of the ranks' ``X`` in rank order, and the fit is the centralised
    mechanism on it (user guide, "Scaling", ``torch.distributed``). Each rank
    draws Poisson coins for its own rows from its own stream spawned from
    the one seed (the union is a Poisson batch of all rows at the same
    rate), sums its sampled rows' clipped per-example gradients, rank 0 adds
    the step's one Gaussian draw, and an all-reduce adds the ranks' sums;
    FDP Algorithm 1's public batches are global, their gradients summed the
    same way. The privacy accounting is the in-process fit's: the same
    sampling rate ``q = batch_size / n`` (``n`` = the rows of all ranks),
    the same σ and steps, so ``epsilon_`` and ``privacy_plan_`` are
    unchanged. The fit equals the in-process fit in distribution, not bit
    for bit (other coins draw the batches); with one rank it is the
    in-process fit.

    Backends: gloo (CPU tensors; ``device="cpu"``) and NCCL (CUDA tensors:
    ``device="cuda"`` after ``torch.cuda.set_device(local_rank)``). A rank
    that dies makes the others' next collective raise (never a step on
    fewer rows); an error on one rank before training (e.g. validation) is
    raised on every rank.

    Trust model: each rank sees which of its rows each step sampled; the
    ranks, like the fitting process of an in-process fit, must be trusted.

    Parameters
    ----------
    estimator : MLPFeatureDP or MLPFeatureDPRegressor
        Unfitted or fitted; refitted in place, with the same parameters on
        every rank (checked). ``random_state=None``: rank 0 draws the seed.
    X : array-like of shape (n_rank_samples, n_features)
        This rank's rows (in memory or a memmap); the same columns on every
        rank.
    y : array-like of shape (n_rank_samples,)
        This rank's targets.
    feature_names : sequence of str or None, default=None
        As for ``fit``.
    group : torch.distributed.ProcessGroup or None, default=None
        The ranks that hold the rows; None: the default group.

    Returns
    -------
    estimator : MLPFeatureDP or MLPFeatureDPRegressor
        Fitted, with the same weights on every rank.

    Examples
    --------
    Save as ``train.py`` and run ``torchrun --nproc-per-node 2 train.py``::

        import numpy as np
        import torch.distributed as dist
        from sklearn_fdp.neural import MLPFeatureDP, fit_distributed

        dist.init_process_group("gloo")            # "nccl" on GPUs
        rank, world = dist.get_rank(), dist.get_world_size()
        X = np.load("X.npy", mmap_mode="r")        # or each rank's own file
        y = np.load("y.npy", mmap_mode="r")
        rows = np.array_split(np.arange(len(X)), world)[rank]
        clf = MLPFeatureDP(hidden_layer_sizes=(64,), private_features=[0, 1],
                           label_public=True, epsilon=1.0, device="cpu",
                           random_state=0)
        fit_distributed(clf, X[rows], y[rows])
        dist.destroy_process_group()
    """
    if not isinstance(estimator, _BaseMLPFeatureDP):
        raise TypeError(
            "fit_distributed fits MLPFeatureDP and MLPFeatureDPRegressor; got "
            f"{type(estimator).__name__}. Other estimators fit on a cluster through dask "
            "(user guide, 'Scaling').")
    name = type(estimator).__name__
    comm = TorchGroup(_import_torch(name), group, name)
    with install_collective(comm):
        return estimator.fit(X, y, feature_names)

"""Rank processes of tests/neural/test_mlp_distributed.py (spawned; not a test module).

``run(rank, world, init_file, task, out_dir)`` joins a gloo group through
``init_method=file://``, runs ``task`` and pickles what rank 0 (and every
rank's draw count) saw to ``out_dir/rank<r>.pkl``.
"""

import datetime
import os
import pickle

import numpy as np

N_ROWS, N_FEATURES = 40, 4
SEEDS = range(100, 160)  # the distributed fits' seeds (the in-process ones differ)
FEW_SEEDS = range(100, 102)  # the fast checks' fits


def data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ROWS, N_FEATURES)).astype(np.float32)
    y = (X[:, 0] + X[:, 2] > 0).astype(int)
    return X, y


def params(**kw):
    """A tiny fit: 3 noisy steps of 8 expected rows, FDP Algorithm 1 with a public label."""
    base = dict(hidden_layer_sizes=(3,), private_features=[0, 1], label_public=True,
                public_epochs=0, noise_multiplier=1.0, epsilon=None, batch_size=8,
                epochs=0.6, accountant="rdp", device="cpu", alpha=1.0)
    base.update(kw)
    return base


def shard(rank, world, X, y):
    rows = np.array_split(np.arange(len(X)), world)[rank]
    return X[rows], y[rows]


def flat_weights(est):
    return np.concatenate([p.detach().numpy().ravel() for p in est.module_.parameters()])


def initial_weights(seed, sizes=(N_FEATURES, 3, 2)):
    """The weights a fit with ``random_state=seed`` starts from (its init stream)."""
    import torch

    from sklearn_fdp.neural._alg1 import _torch_generator, spawn_streams
    from sklearn_fdp.neural._mlp import _build_module

    module = _build_module(torch, sizes, "relu",
                           _torch_generator(torch, spawn_streams(seed, "default").init, "cpu"))
    return np.concatenate([p.detach().numpy().ravel() for p in module.parameters()])


def update_norm(seed, est):
    """``‖w_T − w_0‖``: how far the noisy steps moved the weights (the init removed)."""
    return float(np.linalg.norm(flat_weights(est) - initial_weights(seed)))


class _CountDraws:
    """Wraps ``_alg1.add_step_noise``: the number of noise draws this process made."""

    def __init__(self, alg1):
        self.alg1, self.inner, self.count = alg1, alg1.add_step_noise, 0
        alg1.add_step_noise = self

    def __call__(self, *args, **kwargs):
        self.count += 1
        return self.inner(*args, **kwargs)


def _fits(rank, world, out, seeds=FEW_SEEDS):
    import torch.distributed as dist

    from sklearn_fdp import MLPFeatureDP
    from sklearn_fdp.neural import _alg1, fit_distributed

    X, y = data()
    Xs, ys = shard(rank, world, X, y)
    draws = _CountDraws(_alg1)
    weights = []
    for seed in seeds:
        est = fit_distributed(MLPFeatureDP(random_state=seed, **params()), Xs, ys)
        weights.append(flat_weights(est))
    out["weights"] = np.array(weights)
    out["draws"] = draws.count
    out["steps"] = est.steps_ * len(seeds)
    out["epsilon"] = est.epsilon_
    out["n_features_in"] = est.n_features_in_
    # noise="secure": rank 0's CSPRNG draws the noise, the others draw none.
    draws.count = 0
    est = fit_distributed(MLPFeatureDP(random_state=0, noise="secure", **params()), Xs, ys)
    out["secure_draws"] = draws.count
    out["secure_weights"] = flat_weights(est)
    # One rank (a group of rank 0 alone): the in-process fit, bit for bit.
    solo = dist.new_group([0])
    if rank == 0:
        kw = params(hidden_layer_sizes=(5,), public_epochs=2, public_loss="gaussian_pad")
        est = fit_distributed(MLPFeatureDP(random_state=3, **kw), X, y, group=solo)
        ref = MLPFeatureDP(random_state=3, **kw).fit(X, y)
        out["solo"] = (flat_weights(est), flat_weights(ref))
    # The regressor: the same collective, the same weights on every rank.
    from sklearn_fdp import MLPFeatureDPRegressor

    t = (Xs[:, 2] - Xs[:, 3]).astype(np.float64)
    reg = fit_distributed(MLPFeatureDPRegressor(y_bounds=(-3.0, 3.0), random_state=1,
                                                **params()), Xs, t)
    out["regressor"] = (flat_weights(reg), reg.epsilon_)
    # A bad shard on rank 1: every rank raises, none trains (no rank left waiting).
    bad = Xs.copy()
    if rank == 1:
        bad[0, 0] = np.nan
    try:
        fit_distributed(MLPFeatureDP(random_state=0, **params()), bad, ys)
        out["bad_shard"] = None
    except Exception as exc:
        out["bad_shard"] = f"{type(exc).__name__}: {exc}"
    _sensitivity(rank, world, out)


def _many_fits(rank, world, out):
    """The fits of the test in distribution (``SEEDS``); nothing else."""
    from sklearn_fdp import MLPFeatureDP
    from sklearn_fdp.neural import fit_distributed

    X, y = data()
    Xs, ys = shard(rank, world, X, y)
    out["update_norms"] = np.array([
        update_norm(seed, fit_distributed(MLPFeatureDP(random_state=seed, **params()), Xs, ys))
        for seed in SEEDS])


def _sensitivity(rank, world, out):
    """The all-reduced pre-noise sum on D and on D' (one row of rank 1's shard removed)."""
    import torch

    from sklearn_fdp import MLPFeatureDP
    from sklearn_fdp._distributed._torch import TorchGroup
    from sklearn_fdp.neural._alg1 import _torch_generator, spawn_streams

    X, y = data(1)
    X[-1] *= 50.0  # an adversarial row: far outside the others, clipped hard
    comm = TorchGroup(torch, None, "MLPFeatureDP")
    est = MLPFeatureDP(random_state=0, **params())  # "mask": no padding draws
    sums = []
    for drop in (False, True):
        Xs, ys = shard(rank, world, X, y)
        if drop and rank == world - 1:
            Xs, ys = Xs[:-1], ys[:-1]
        Y = np.eye(2, dtype=np.float32)[ys]
        mask = np.array([False, False, True, True])
        trainer = est._trainer(torch, Xs, Y, mask, True, True, "cpu",
                               spawn_streams(0, "default").init, comm)
        pad = _torch_generator(torch, np.random.default_rng(rank), "cpu")
        g = trainer.clipped_sum(torch.arange(len(Xs)), pad, True)
        comm.sum_(g.values())
        sums.append(np.concatenate([v.double().numpy().ravel() for v in g.values()]))
    out["sensitivity"] = sums
    out["C"] = est.max_grad_norm


def _dies(rank, world, out):
    """Rank 1 exits after two steps; rank 0's fit must raise."""
    from sklearn_fdp import MLPFeatureDP
    from sklearn_fdp._progress import progress_hook
    from sklearn_fdp.neural import fit_distributed

    X, y = data()
    Xs, ys = shard(rank, world, X, y)

    def hook(done, total):
        if rank == 1 and done >= 2:
            os._exit(3)

    try:
        with progress_hook(hook):
            fit_distributed(MLPFeatureDP(random_state=0, **params(epochs=4.0)), Xs, ys)
        out["raised"] = None
    except Exception as exc:  # what torch raised, for the test to read
        out["raised"] = f"{type(exc).__name__}: {exc}"


def _cuda(rank, world, out):
    """A one-rank NCCL group on the GPU: the in-process CUDA fit (up to GPU rounding)."""
    import torch

    from sklearn_fdp import MLPFeatureDP
    from sklearn_fdp.neural import fit_distributed

    X, y = data()
    kw = params(device="cuda")
    est = fit_distributed(MLPFeatureDP(random_state=5, **kw), X, y)
    ref = MLPFeatureDP(random_state=5, **kw).fit(X, y)
    out["cuda"] = (flat_weights(est), flat_weights(ref), est.device_)
    out["backend"] = str(torch.distributed.get_backend())


TASKS = {"fits": _fits, "many_fits": _many_fits, "dies": _dies, "cuda": _cuda}


def run(rank, world, init_file, task, out_dir, backend="gloo"):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    out = {}
    try:
        TASKS[task](rank, world, out)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(out, f)
    if task != "dies":
        dist.destroy_process_group()

"""DP-SGD on CSR data with lazily drawn (exact) Gaussian noise.

The eager loop of :func:`run_dp_sgd` draws ``d x k`` normals per step. On a
one-hot matrix with a million columns and forty non-zeros per row that is
hundreds of times the gradient's work. When the update of a coordinate that
no batch row touches is *only* its noise -- no momentum, no weight decay, no
projection, no public gradient -- that noise can be summed in closed form
and drawn when the coordinate is next needed (see
:mod:`sklearn_fdp._kernels._sparse` for the maths). The released model (the
final or averaged iterate) has exactly the distribution it has under eager
noise; intermediate iterates are never released, and this path refuses a
``callback`` (which would see them).

The intercept row is dense (every row touches it) and gets eager noise.
"""

import math

import numpy as np

from .._kernels import catch_up, csr_clipped_residuals, csr_scatter_add, touched_columns
from ._samplers import PoissonSampler


def lazy_noise_applies(private_oracle, config, *, public_oracle, noise_mask, noise_fn,
                       callback):
    """Whether :func:`run_lazy_sparse` gives the same released model as the eager loop."""
    return (
        getattr(private_oracle, "path", None) == "csr"
        and hasattr(private_oracle, "clipped_residuals")
        and config.noise_multiplier > 0
        and config.momentum == 0
        and config.l2_regularization == 0
        and config.max_weight_norm is None
        and public_oracle is None
        and noise_mask is None
        and noise_fn is None
        and callback is None
    )


def _blocks(steps, average_start, length):
    """Block starts: every ``length`` steps, restarting at ``average_start``."""
    t0 = steps if average_start is None else min(average_start, steps)
    starts = list(range(0, t0, length)) + list(range(t0, steps, length))
    return starts + [steps], t0


def _block_prefix_sums(c2, start, stop):
    """``Q_p[i] = Σ_{u < start + i} c_u² (u - start)^p`` for ``p = 0, 1, 2``."""
    u = np.arange(stop - start, dtype=np.float64)
    w = c2[start:stop]
    zero = np.zeros(1)
    return tuple(np.concatenate([zero, np.cumsum(w * u**p)]) for p in range(3))


def run_lazy_sparse(theta0, oracle, n_samples, config, *, sample_rng, noise_rng,
                    block_length=None):
    """Same contract as :func:`run_dp_sgd`, for a CSR :class:`LinearGradientOracle`.

    ``block_length``: every coordinate's pending noise is flushed this often
    (default: so that a flush costs about eight steps' worth of catch-up
    draws, which keeps both the flush overhead and the prefix sums small).
    """
    from ._loop import EngineResult

    cfg = config
    X = oracle.X
    d = oracle.n_features
    theta = np.array(theta0, dtype=theta0.dtype, copy=True)
    k = theta.shape[1]
    sampler = PoissonSampler(n_samples, cfg.sampling_rate, sample_rng)
    normaliser = cfg.sampling_rate * n_samples
    noise_std = cfg.noise_multiplier * cfg.max_grad_norm
    eta = np.array([cfg.step_size(t) for t in range(cfg.steps)], dtype=np.float64)
    c2 = (eta * noise_std / normaliser) ** 2  # variance each step adds to a coordinate

    if block_length is None:
        nnz_per_step = max(1.0, cfg.sampling_rate * X.nnz)
        block_length = int(min(4096, max(16, math.ceil(8 * d / nnz_per_step))))
    starts, t0 = _blocks(cfg.steps, cfg.average_start, block_length)

    last = np.zeros(d, dtype=np.int64)  # noise of steps >= last[j] is pending
    stamp = np.full(d, -1, dtype=np.int64)
    all_cols = np.arange(d, dtype=np.int64)
    averaged = t0 < cfg.steps
    average = np.zeros(theta.shape, dtype=np.float64) if averaged else np.zeros((1, k))
    residuals = np.empty((0, k), dtype=np.float64)
    cols = np.empty(0, dtype=np.int64)

    for f, g in zip(starts[:-1], starts[1:]):
        q0, q1, q2 = _block_prefix_sums(c2, f, g)
        tail = averaged and f >= t0
        for t in range(f, g):
            idx = sampler.sample()
            m = len(idx)
            if m:
                nnz = int((X.indptr[idx + 1] - X.indptr[idx]).sum())
                if cols.shape[0] < nnz:
                    cols = np.empty(2 * nnz, dtype=np.int64)
                n_cols = touched_columns(X.indptr, X.indices, idx, stamp, t, cols)
                normals = noise_rng.standard_normal(n_cols * k * (2 if tail else 1))
                catch_up(cols, n_cols, theta, last, t, f, q0, q1, q2, average, tail, normals)
                if residuals.shape[0] < m:
                    residuals = np.empty((2 * m, k), dtype=np.float64)
                R = residuals[:m]
                oracle.clipped_residuals(idx, theta, R)
                csr_scatter_add(X.indptr, X.indices, X.data, idx, R, -eta[t] / normaliser, theta)
            if oracle.fit_intercept:
                g_b = R.sum(axis=0) if m else np.zeros(k)
                g_b = g_b + noise_std * noise_rng.standard_normal(k)
                theta[d] -= (eta[t] / normaliser) * g_b
                if tail:
                    average[d] += theta[d]
        # Flush: every coordinate's pending noise up to the block's end.
        normals = noise_rng.standard_normal(d * k * (2 if tail else 1))
        catch_up(all_cols, d, theta, last, g, f, q0, q1, q2, average, tail, normals)

    if averaged:
        theta = (average / (cfg.steps - t0)).astype(theta.dtype, copy=False)
    return EngineResult(theta=theta, steps=cfg.steps)

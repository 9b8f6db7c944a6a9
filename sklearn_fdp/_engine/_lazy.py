"""DP-SGD on CSR data with lazily drawn (exact) Gaussian noise.

The eager loop of :func:`run_dp_sgd` draws ``d x k`` normals per step. On a
one-hot matrix with a million columns and forty non-zeros per row that is
hundreds of times the gradient's work. When the update of a coordinate that
no batch row touches is *only* its noise -- no momentum, no weight decay, no
projection, no public gradient -- that noise can be summed in closed form
and drawn when the coordinate is next needed (see
:mod:`sklearn_fdp._kernels._sparse` for the maths). With momentum and/or
weight decay the untouched coordinate's (weight, momentum[, tail sum]) follow
a linear recursion driven by its Gaussians, so a catch-up over ``k`` steps is
one draw from a small multivariate Gaussian (:mod:`sklearn_fdp._kernels._momentum`).
A projection or a public gradient couples every coordinate at every step and
keeps the eager loop. The released model (the
final or averaged iterate) has exactly the distribution it has under eager
noise; intermediate iterates are never released, and this path refuses a
``callback`` (which would see them).

The intercept row is dense (every row touches it) and gets eager noise.
"""

import math

import numpy as np

from .._kernels import catch_up_tables, flush, lazy_steps
from .._kernels._momentum import (
    advance_momentum_tables,
    flush_momentum,
    lazy_momentum_steps,
    release_only_tables,
    reset_momentum_tables,
)
from .._progress import progress_reporter
from ._config import EngineResult
from ._linear import LinearGradientOracle
from ._noise import NormalStream
from ._samplers import PoissonSampler


# Most steps one kernel call runs (the chunk is also cut where the normals
# already drawn run out).
MAX_CHUNK_STEPS = 256
# Longest block (steps between flushes) with momentum or weight decay under
# a changing step size (each step then recomputes the tables of every lag of
# the block), and under a constant one (each step adds one lag).
MOMENTUM_MAX_BLOCK = 512
MOMENTUM_MAX_BLOCK_CONSTANT = 4096
# Cost of a flush per coordinate and output, in units of one lag's table
# update (measured on the reference machine: ~20 ns for two normals and the
# catch-up against ~75 ns a lag, dim 2; the ratio is about the same in the
# tail). Between flushes a changing step size costs ~L/2 lag updates per
# step, a flush ``d k`` catch-ups every L steps: L = sqrt(2 · ratio · d k)
# minimises the sum.
FLUSH_OVER_TABLE = 0.3
# Blocks of normals drawn ahead on a long run (see NormalStream's ``depth``).
NORMAL_BLOCKS_AHEAD = 3


def lazy_noise_blockers(private_oracle, config, *, public_oracle, noise_mask, noise_fn,
                        callback):
    """What keeps a CSR linear run off :func:`run_lazy_sparse` (empty: the lazy path applies).

    ``None`` when the run is not a CSR linear model at all (no lazy path exists).
    """
    if (getattr(private_oracle, "path", None) != "csr"
            or type(private_oracle) is not LinearGradientOracle):  # subclasses may change the maths
        return None
    reasons = []
    if config.max_weight_norm is not None:
        reasons.append("a weight-norm projection")
    if public_oracle is not None:
        reasons.append("a public gradient")
    if noise_mask is not None:
        reasons.append("a noise mask")
    if noise_fn is not None:
        reasons.append("custom noise")
    if callback is not None:
        reasons.append("a per-step callback (e.g. verbose)")
    return reasons


def lazy_noise_applies(private_oracle, config, *, public_oracle, noise_mask, noise_fn,
                       callback):
    """Whether :func:`run_lazy_sparse` gives the same released model as the eager loop."""
    return lazy_noise_blockers(private_oracle, config, public_oracle=public_oracle,
                               noise_mask=noise_mask, noise_fn=noise_fn,
                               callback=callback) == []


class _NoNormals:
    """Stand-in for :class:`NormalStream` in a noise-free run (σ = 0 uses none).

    The branch-free kernels still read (and multiply by 0) a few entries.
    """

    def __init__(self, k):
        self._zeros = np.zeros(3 * k)  # up to 3 k read past the last one used

    def view(self, need):
        return self._zeros

    fresh = view

    def available(self):
        return math.inf

    def advance(self, used):
        assert used == 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def _blocks(steps, average_start, length):
    """Block starts: every ``length`` steps, restarting at ``average_start``."""
    t0 = steps if average_start is None else min(average_start, steps)
    starts = list(range(0, t0, length)) + list(range(t0, steps, length))
    return starts + [steps], t0


def _momentum_block_length(eta, d, k):
    """Steps between flushes with momentum / weight decay (a cost balance; no effect on the law).

    A flush catches all ``d`` coordinates up (``rank`` normals per output
    each), whatever the block's length; a step's catch-ups do not depend on
    it. So blocks are as long as the tables allow: under a constant step
    size a step adds one lag (up to ``MOMENTUM_MAX_BLOCK_CONSTANT``); under
    a schedule it recomputes every lag of the block, and the length
    balances that against the flushes (:data:`FLUSH_OVER_TABLE`).
    """
    if eta.size and np.all(eta == eta[0]):
        return MOMENTUM_MAX_BLOCK_CONSTANT
    balance = math.ceil(math.sqrt(2.0 * FLUSH_OVER_TABLE * d * k))
    return int(min(MOMENTUM_MAX_BLOCK, max(16, balance)))


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
    (default: without momentum or weight decay, so that a flush costs about
    eight steps' worth of catch-up draws, which keeps both the flush
    overhead and the prefix sums small; with them,
    :func:`_momentum_block_length`).
    """
    cfg = config
    X = oracle.X
    d = oracle.n_features
    k = theta0.shape[1]
    sampler = PoissonSampler(n_samples, cfg.sampling_rate, sample_rng)
    normaliser = cfg.sampling_rate * n_samples
    # σ = 0 means no noise even with C = ∞ (0 · ∞ would be NaN).
    noise_std = cfg.noise_multiplier * cfg.max_grad_norm if cfg.noise_multiplier > 0 else 0.0
    eta = np.array([cfg.step_size(t) for t in range(cfg.steps)], dtype=np.float64)
    c2 = (eta * noise_std / normaliser) ** 2  # variance each step adds to a coordinate

    # Momentum or weight decay: the catch-up is a small linear recursion
    # (_kernels/_momentum.py); without them, the closed form of _sparse.py.
    linear_state = cfg.momentum != 0 or cfg.l2_regularization != 0
    if block_length is None:
        if linear_state:
            block_length = _momentum_block_length(eta, d, k)
        else:
            nnz_per_step = max(1.0, cfg.sampling_rate * X.nnz)
            block_length = int(min(4096, max(16, math.ceil(8 * d / nnz_per_step))))
    starts, t0 = _blocks(cfg.steps, cfg.average_start, block_length)
    averaged = t0 < cfg.steps

    # Lazy state, one row per feature: weights, [carried momentum,] tail sum
    # (if averaging), last.
    n_state = (3 if linear_state else 2) if averaged else (2 if linear_state else 1)
    S = np.zeros((d, n_state * k + 1), dtype=np.float64)
    S[:, :k] = theta0[:d]
    intercept = np.array(theta0[d], dtype=np.float64) if oracle.fit_intercept else np.empty(0)
    intercept_sum = np.zeros(k)
    intercept_v = np.zeros(k)
    step_scale = -eta / normaliser
    longest = max((g - f for f, g in zip(starts[:-1], starts[1:])), default=0)
    sd, slope, resid_sd = (np.empty(longest + 1) for _ in range(3))
    if linear_state:
        Phi, Sig, F = (np.zeros((longest + 1, 3, 3)) for _ in range(3))
        rank = np.zeros(longest + 1, dtype=np.intp)
        c_noise = noise_std / normaliser
        at = np.zeros(3, dtype=np.int64)  # lazy_momentum_steps' tables step, stop step, row
        g_b = np.zeros(k)
    residuals = np.empty((0, k), dtype=np.float64)
    indptr = X.indptr
    row_nnz = np.diff(indptr)  # the need of a batch, one gather per step
    pending = None  # a batch drawn for the next chunk

    # A long run keeps a few blocks of normals drawn ahead, so the worker
    # thread's draws cover the flushes' bursts; a short one draws one ahead.
    expected = cfg.steps * (cfg.sampling_rate * X.nnz + 1) * 2 * k + len(starts) * d * 2 * k
    depth = NORMAL_BLOCKS_AHEAD if expected > 8 * (1 << 20) else 1

    report = progress_reporter(cfg.steps)  # None unless a progress hook is installed
    with (NormalStream(noise_rng, depth=depth) if noise_std > 0 else _NoNormals(k)) as normals:
        for f, g in zip(starts[:-1], starts[1:]):
            tail = averaged and f >= t0
            if linear_state:
                dim = 3 if tail else 2
                same = bool(np.all(eta[f:g] == eta[f]))
                reset_momentum_tables(dim, Phi, Sig, F, rank)
                at[0] = f  # the step the tables are at
                per_nnz, per_step = (k * dim, k) if noise_std > 0 else (0, 0)
            else:
                q0, q1, q2 = _block_prefix_sums(c2, f, g)
                # Normals reserved per non-zero (used when its coordinate is
                # pending) and per step (the intercept's).
                per_nnz, per_step = (k * (2 if tail else 1), k) if noise_std > 0 else (0, 0)
            # Normals read (times 0) past the last one used.
            pad = 3 * k if linear_state else 2 * k
            t = f
            while t < g:
                # A chunk of steps whose normals are already drawn (at least
                # one step). Batches are drawn ahead from the sampler's own
                # generator, so the batches do not depend on the chunking;
                # it decides only where a short remainder of drawn normals
                # is skipped (NormalStream.fresh). No normal is ever used
                # twice, so every coordinate still gets fresh N(0, 1) draws.
                # With momentum / weight decay the kernel itself stops where
                # the drawn normals may run out (lazy_momentum_steps), so a
                # chunk is MAX_CHUNK_STEPS steps and the worst-case
                # reservation below (dim normals per non-zero, ~6 times
                # what a click log uses) does not cut it.
                avail = math.inf if linear_state else normals.available()
                batches, need = [], pad
                while t + len(batches) < g and len(batches) < MAX_CHUNK_STEPS:
                    batch = sampler.sample() if pending is None else pending
                    pending = None
                    nb = 0 if linear_state else int(row_nnz[batch].sum()) * per_nnz + per_step
                    if batches and need + nb > avail:
                        pending = batch
                        break
                    batches.append(batch)
                    need += nb
                rows = np.concatenate(batches).astype(np.intp, copy=False)
                batch_ptr = np.zeros(len(batches) + 1, dtype=np.intp)
                np.cumsum([len(b) for b in batches], out=batch_ptr[1:])
                largest = int(np.diff(batch_ptr).max())
                if residuals.shape[0] < largest:
                    residuals = np.empty((2 * largest, k), dtype=np.float64)
                if linear_state:
                    at[1] = at[2] = 0
                    while True:  # the normals drawn so far, then a fresh block after a stop
                        used = lazy_momentum_steps(
                            indptr, X.indices, X.data, rows,
                            batch_ptr, oracle.y_kernel, S, k, dim, intercept, intercept_v,
                            intercept_sum, oracle.code, oracle.x_norm_sq, oracle.max_grad_norm,
                            t, f, eta, normaliser, cfg.momentum, cfg.l2_regularization, c_noise,
                            noise_std, same, Phi, Sig, F, rank, normals.view(0), 0, residuals,
                            oracle.loss_param, at, g_b)
                        normals.advance(used)
                        if at[1] == len(batches):
                            break
                        # The stop's row (or its step's intercept) and the padding.
                        row = batch_ptr[at[1]] + at[2]
                        nb = (int(row_nnz[rows[row]]) * per_nnz if row < batch_ptr[at[1] + 1]
                              else 0) + per_step + pad
                        normals.fresh(nb)  # skips the short remainder, draws a block
                else:
                    used = lazy_steps(
                        indptr, X.indices, X.data, rows,
                        batch_ptr, oracle.y_kernel, S, k, intercept, intercept_sum, oracle.code,
                        oracle.x_norm_sq, oracle.max_grad_norm, t, f, step_scale, noise_std,
                        q0, q1, q2, tail, normals.fresh(need), 0, residuals, sd, slope, resid_sd,
                        oracle.loss_param)
                    normals.advance(used)
                t += len(batches)
            # Flush: every coordinate's pending noise up to the block's end.
            if linear_state:
                advance_momentum_tables(g - f, eta[g - 1], same, cfg.momentum,
                                        cfg.l2_regularization, c_noise, dim, Phi, Sig, F, rank)
                if g == cfg.steps:  # the last flush: only θ (and A) are released
                    release_only_tables(g - f, dim, Sig, F, rank)
                j = 0
                while j < d:  # the normals drawn so far, then fresh blocks
                    used, j = flush_momentum(S, k, dim, g, Phi, F, rank, normals.view(0), j,
                                             per_nnz)
                    normals.advance(used)
                    if j < d:
                        normals.fresh(per_nnz + pad)  # skips the short remainder
            else:
                catch_up_tables(g, f, q0, q1, q2, tail, sd, slope, resid_sd)
                used = flush(S, k, g, f, sd, slope, resid_sd, tail,
                             normals.fresh(d * per_nnz + 2 * k))
                normals.advance(used)
            if report is not None:
                report(g)

    theta = np.empty(theta0.shape, dtype=theta0.dtype)
    n_avg = cfg.steps - t0
    a = (2 if linear_state else 1) * k  # the tail sum's columns
    theta[:d] = S[:, a:a + k] / n_avg if averaged else S[:, :k]
    if oracle.fit_intercept:
        theta[d] = intercept_sum / n_avg if averaged else intercept
    return EngineResult(theta=theta, steps=cfg.steps)

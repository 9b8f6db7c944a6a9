"""The one DP optimisation loop of sklearn_fdp.

Every private linear algorithm of the package is a choice of

* a *private* oracle: the clipped sum of per-example gradients of a Poisson
  batch (the only place private data enters, with bounded sensitivity),
* an optional *public* oracle: a gradient that depends on public data only
  and is drawn with its own random stream (FDP Algorithm 1),
* an accounting event, computed by :mod:`sklearn_fdp.accounting`,

handed to :func:`run_dp_sgd`. The loop adds Gaussian noise of standard
deviation ``noise_multiplier * max_grad_norm`` to every private sum,
divides by the *expected* batch size ``q * n`` (never the realised one, which
would leak the batch's cardinality), mixes in the public gradient, and takes a
(momentum) step. Everything after the noisy sum is post-processing.
"""

import warnings

import numpy as np

from .._kernels import sgd_update
from ..exceptions import PerformanceWarning
from .._progress import progress_reporter
from ._config import EngineResult
from ._lazy import lazy_noise_blockers, run_lazy_sparse
from ._noise import NoiseStream
from ._samplers import AheadSampler, PoissonSampler

# Sparse runs this large that cannot use lazy noise get a PerformanceWarning.
DENSE_NOISE_WARN_SIZE = 1 << 17


def check_clip_agrees(private_oracle, config, noise_fn=None):
    """Refuse a run whose noise is not scaled to the oracle's clip norm.

    The noise std is ``σ · config.max_grad_norm``; the sensitivity of the
    private sum is the clip the oracle applies, ``private_oracle.max_grad_norm``.
    The two are set in different places, so they are compared here, where
    the noise is drawn. A run with its own ``noise_fn`` (AdaMix: the
    mechanism scales its noise to its per-step clip) or without noise is
    not concerned.
    """
    if noise_fn is not None or config.noise_multiplier <= 0:
        return
    clip = getattr(private_oracle, "max_grad_norm", None)
    if clip is None or float(clip) != float(config.max_grad_norm):
        raise ValueError(
            f"The private oracle clips at max_grad_norm={clip!r} but the noise is scaled to "
            f"config.max_grad_norm={config.max_grad_norm!r}: the noise would not match the "
            "sensitivity. Build the EngineConfig from the oracle's max_grad_norm."
        )


def run_dp_sgd(
    theta0,
    private_oracle,
    n_samples,
    config,
    *,
    sample_rng,
    noise_rng,
    public_oracle=None,
    noise_mask=None,
    noise_fn=None,
    callback=None,
):
    """Run noisy (momentum) SGD and return the final (or averaged) iterate.

    Parameters
    ----------
    theta0 : ndarray
        Starting point; copied, never modified.
    private_oracle : callable ``(indices, theta) -> ndarray``
        Sum over the batch ``indices`` of the per-example gradients, each
        clipped to L2 norm ``private_oracle.max_grad_norm``, which must equal
        ``config.max_grad_norm`` (the clip that scales the noise): the loop
        refuses to run otherwise. Same shape as ``theta``. An empty batch
        must return zeros. An oracle with a ``prefetch(idx)`` method (and
        ``prefetch_depth``) is told each batch ``prefetch_depth`` steps
        before it is asked for its sum (``AheadSampler``: the same batches),
        so it can gather rows held elsewhere meanwhile (a cluster's workers).
    n_samples : int
        Number of private records ``n`` (public).
    config : EngineConfig
    sample_rng, noise_rng : numpy.random.Generator
        Independent generators for the Poisson batches and the Gaussian noise.
    public_oracle : callable ``(theta) -> ndarray``, optional
        Public gradient (already averaged); draws its batches from its own
        generator.
    noise_mask : ndarray of bool, optional
        Entries of ``theta`` that the private gradient can touch; noise is
        added only there (e.g. no noise on an absent intercept). The private
        oracle must return exact zeros elsewhere.
    callback : callable ``(t, theta) -> None``, optional
        Called after every step with the current iterate (a view: copy it to
        keep it). Sees only released quantities.
    noise_fn : callable ``(rng) -> ndarray``, optional
        Noise added to the private sum of the step just computed, in place of
        the default isotropic ``N(0, (σ C)² I)`` (masked by ``noise_mask``).
        For mechanisms whose noise depends on the step's public statistics
        (AdaMix: ``σ τ_t`` in a public subspace). Called once per step, right
        after ``private_oracle``, with ``noise_rng``; it must use no other
        randomness, and the caller's accounting must match the noise it draws.

    On CSR data with no projection, public oracle, custom noise or
    callback, the run goes to :func:`~sklearn_fdp._engine._lazy.run_lazy_sparse`
    (momentum, weight decay, schedules and averaging included): the same
    released model in distribution, with the noise of untouched coordinates
    drawn lazily in closed form (the final or averaged iterate is the only
    release; intermediate iterates never leave the loop).

    Returns
    -------
    result : EngineResult
    """
    cfg = config
    check_clip_agrees(private_oracle, cfg, noise_fn)
    blockers = lazy_noise_blockers(private_oracle, cfg, public_oracle=public_oracle,
                                   noise_mask=noise_mask, noise_fn=noise_fn, callback=callback)
    if blockers == []:
        # Sparse data: exact noise, drawn per touched coordinate.
        return run_lazy_sparse(theta0, private_oracle, n_samples, cfg,
                               sample_rng=sample_rng, noise_rng=noise_rng)
    if blockers and cfg.noise_multiplier > 0 and theta0.size >= DENSE_NOISE_WARN_SIZE:
        warnings.warn(
            f"Sparse input with {theta0.size:,} parameters: {', '.join(blockers)} keep(s) the "
            f"fit off the lazy-noise path, so every one of its {cfg.steps:,} steps draws "
            f"{theta0.size:,} Gaussians and updates every coordinate. For wide sparse data "
            "use verbose=0 and no max_weight_norm: the noise is then drawn lazily and "
            "exactly, per touched coordinate, momentum and weight decay included (user "
            "guide, 'Lazy noise').",
            PerformanceWarning,
            stacklevel=2,
        )
    theta = np.array(theta0, dtype=theta0.dtype, copy=True)
    velocity = np.zeros_like(theta)
    sampler = PoissonSampler(n_samples, cfg.sampling_rate, sample_rng)
    announce = getattr(private_oracle, "prefetch", None)
    if announce is not None:  # an oracle that gathers rows elsewhere sees its batches early
        sampler = AheadSampler(sampler, announce, private_oracle.prefetch_depth, cfg.steps)
    noise_std = cfg.noise_multiplier * cfg.max_grad_norm
    normaliser = cfg.sampling_rate * n_samples  # expected batch size: public
    average = None
    n_averaged = 0

    noise = None
    if noise_fn is None and noise_std > 0:
        noise = NoiseStream(noise_rng, theta.shape, theta.dtype, noise_std, noise_mask, cfg.steps)
    report = progress_reporter(cfg.steps)  # None unless a progress hook is installed
    empty = np.empty(0, dtype=theta.dtype)

    def scalar(value):
        # As numpy (NEP 50) combines a scalar with theta's arrays: a Python
        # number takes their dtype, a numpy float64 keeps its own.
        return value if isinstance(value, np.generic) else theta.dtype.type(value)

    normaliser_, alpha_ = scalar(normaliser), scalar(cfg.alpha)
    l2_, momentum_ = scalar(cfg.l2_regularization), scalar(cfg.momentum)
    try:
        for t in range(cfg.steps):
            idx = sampler.sample()
            grad = private_oracle(idx, theta)
            if noise_fn is not None:
                step_noise = noise_fn(noise_rng)
            else:
                step_noise = empty if noise is None else noise.draw()
            public = empty if public_oracle is None else public_oracle(theta)
            averaging = cfg.average_start is not None and t >= cfg.average_start
            n_averaged += averaging
            project = cfg.max_weight_norm is not None
            # The average is updated in the kernel unless a projection comes first.
            weight = n_averaged if averaging and average is not None and not project else 0
            sgd_update(theta.reshape(-1), grad.reshape(-1), np.reshape(step_noise, -1),
                       normaliser_, alpha_, np.reshape(public, -1), l2_, velocity.reshape(-1),
                       momentum_, scalar(cfg.step_size(t)),
                       (theta if average is None else average).reshape(-1), scalar(weight))
            if project:
                norm = np.linalg.norm(theta)
                if norm > cfg.max_weight_norm:
                    theta *= cfg.max_weight_norm / norm
                if averaging and average is not None:
                    average += (theta - average) / n_averaged
            if averaging and average is None:
                average = theta.copy()
            if callback is not None:
                callback(t, theta)
            if report is not None:
                report(t + 1)
    finally:
        if noise is not None:
            noise.close()

    return EngineResult(theta=theta if average is None else average, steps=cfg.steps)

"""DPSGD-F's private feature preprocessing (DPSGD-F paper, Algorithms 2 and 3).

Algorithm 3 (``variant="practical"``): the Gaussian mean of the rows scaled
to norm ``C_F``, then the rows centred on it. Algorithm 2
(``variant="analysed"``): on rows clipped to ``R``, a coarse-to-fine
private mean, a private upper quantile τ of the distances to it, and the
augmented rows ``(x - mean, τ)`` clipped to ``sqrt(2) τ`` and divided by it.

Every release is a Gaussian mechanism of L2 sensitivity 1 (histograms) or
``r`` (sums of vectors bounded by ``r``) under add/remove, so each function
returns its released values with the ``accounting.gaussian_event(σ)`` it
spent, and the whole fit is composed in one dp-accounting accountant with
the DP-SGD steps. The ``*_events`` functions give the same events from
public values only, for the plan; the noise of every release is drawn here
(from the OS CSPRNG under ``noise="secure"``).
"""

import math

import numpy as np
from scipy.stats import norm as _normal

from .. import accounting
from .._distributed import tree_reduce, use_cluster
from .._engine import split_theta
from .._outofcore import iter_row_blocks, map_rows
from .._random import secure_if
from .gaussian_mean import GaussianMean, gaussian_mean

# Most rounds of the coarse-to-fine mean (see plan_mean_rounds).
_MAX_MEAN_ROUNDS = 6
# Probability that some empty bin of one histogram passes the threshold of
# private_upper_quantile (a utility parameter; privacy does not depend on it).
_QUANTILE_FALSE_POSITIVE = 1e-3


# -- the private upper quantile ------------------------------------------------


def geometric_edges(top, n_samples):
    """Upper bin edges ``top * 2**-j`` for ``j = J, ..., 1, 0`` (ascending).

    ``J = ceil(log2(n**2))``, so the finest edge is about ``top / n**2`` (the
    resolution of Lemma 4 of the DPSGD-F paper). Depends on public values only.
    """
    n_edges = max(1, math.ceil(2 * math.log2(max(n_samples, 2)))) + 1
    return top * 2.0 ** -np.arange(n_edges - 1, -1, -1, dtype=np.float64)


def distance_histogram(dist, edges):
    """Counts of ``dist`` in the bins ``[0, e_0], (e_0, e_1], ..., (e_{J-1}, e_J]``.

    Every value lands in exactly one bin (the caller guarantees
    ``dist <= edges[-1]``; larger values are counted in the last bin), so
    adding or removing one row changes the count vector by one unit in one
    bin: L2 sensitivity 1 under add/remove (sqrt(2) under replace-one).
    """
    idx = np.minimum(np.searchsorted(edges, dist, side="left"), len(edges) - 1)
    return np.bincount(idx, minlength=len(edges)).astype(np.float64)


def private_upper_quantile(dist, top, noise_multiplier, rng, *, noise="default"):
    """DP upper quantile of ``dist`` (all ``<= top``) from a Gaussian histogram.

    Mechanism: the histogram of ``dist`` over the geometric grid
    :func:`geometric_edges` (ratio 2, from ``top / n**2`` to ``top``) plus
    independent ``N(0, noise_multiplier**2)`` noise per bin — one Gaussian
    release of L2 sensitivity 1, i.e. ``accounting.gaussian_event(σ)``.
    Post-processing: the threshold ``λ = z σ`` with
    ``z = Φ⁻¹(1 - β / n_bins)`` (``β = 1e-3``) and ``τ`` = upper edge of the
    highest bin whose noisy count exceeds ``λ`` (``top`` if none does).

    Utility, with probability ``>= 1 - 2β`` (union bound over the bins):
    no empty bin passes, so ``τ <= max(2 max_i dist_i, top / n**2)``; and
    every bin above ``τ`` holds fewer than ``λ + z σ = 2 z σ`` rows, so at
    most ``2 z σ`` rows per bin (``O(σ log n)`` in all) lie beyond ``τ`` —
    an ``O(log(n) sqrt(log 1/δ) / ε)``-th upper quantile, as Lemma 4 asks.

    Returns
    -------
    tau : float
    event : dp_accounting.DpEvent
        ``GaussianDpEvent(noise_multiplier)``.
    """
    edges = geometric_edges(top, len(dist))
    return _release_upper_quantile(distance_histogram(dist, edges), edges, noise_multiplier,
                                   rng, noise=noise)


def _release_upper_quantile(counts, edges, noise_multiplier, rng, *, noise="default"):
    """:func:`private_upper_quantile`'s release from the histogram ``counts`` over ``edges``."""
    rng = secure_if(rng, noise)
    noisy = counts + rng.normal(0.0, noise_multiplier, len(edges))
    z = float(_normal.isf(_QUANTILE_FALSE_POSITIVE / len(edges)))
    heavy = np.flatnonzero(noisy > z * noise_multiplier)
    tau = float(edges[heavy[-1]] if heavy.size else edges[-1])  # edges[-1] is top
    return tau, accounting.gaussian_event(noise_multiplier)


def distances_to(X, centre):
    """``‖x_i - centre‖`` of every row (float64), read in row blocks of ``X``."""
    out = np.empty(X.shape[0], dtype=np.float64)
    for start, block in iter_row_blocks(X):
        block = np.asarray(block, dtype=np.float64)
        out[start:start + len(block)] = np.linalg.norm(block - centre, axis=1)
    return out


def private_radius(X, centre, feature_norm, noise_multiplier, rng, *, noise="default"):
    """:func:`private_upper_quantile` of the distances of the rows to a released ``centre``.

    The rows are clipped to ``feature_norm``, so ``top = feature_norm +
    ‖centre‖`` bounds every distance (a public value). Returns ``(r, event)``.

    ``X`` a dask array with an active ``Client``
    (:func:`~sklearn_fdp._distributed.use_cluster`): each partition's
    histogram is counted on its worker (:func:`partition_distance_histogram`)
    and the histograms are added in a tree; only the counts (one per bin) come
    back, checked to hold every row before the noise is added here, once.
    """
    top = float(feature_norm) + float(np.linalg.norm(centre))
    if use_cluster(X):
        edges = geometric_edges(top, int(X.shape[0]))
        counts = tree_reduce(partition_distance_histogram, X, None, (centre, edges),
                             what="the histogram of the distances to the private mean")[0]
        return _release_upper_quantile(counts, edges, noise_multiplier, rng, noise=noise)
    return private_upper_quantile(distances_to(X, centre), top, noise_multiplier, rng,
                                  noise=noise)


def partition_distance_histogram(X, _y, centre, edges):
    """One partition's ``(histogram of ‖x_i − centre‖ over edges, n_rows)``, on its worker.

    The same per-row distances (:func:`distances_to`) and bins
    (:func:`distance_histogram`) as in memory: the counts add up exactly.
    """
    return distance_histogram(distances_to(X, centre), edges), X.shape[0]


# -- the coarse-to-fine mean -----------------------------------------------------


def plan_mean_rounds(sigma_mean, n_samples, n_features):
    """Number of rounds ``K`` of the coarse-to-fine mean and the σ of each release.

    The ``2K - 1`` Gaussian releases (K means, K - 1 radius histograms) share
    the mean's budget equally: each has noise multiplier
    ``σ_k = σ_mean * sqrt(2K - 1)``, so together they are exactly one
    Gaussian mechanism with multiplier ``σ_mean`` (Gaussian composition) and
    cost exactly ``epsilon_mean`` at δ. Round 0 has error about
    ``e_0 = σ_k R sqrt(d) / n`` (R = ``feature_norm``); each later round,
    clipping at a radius at most twice the previous error (plus the data's
    spread), multiplies it by ``ρ = 2 σ_k sqrt(d) / n``. ``K`` (at most
    ``_MAX_MEAN_ROUNDS``) minimises the predicted final error
    ``max(e_0 ρ^(K-1), R / n**2)``, from public quantities only; the smallest
    such ``K`` wins ties. When ``ρ >= 1`` (few rows for the dimension, or a
    tiny budget) refinement cannot help and ``K = 1``: the plain Gaussian mean.
    """
    best = None
    floor = 1.0 / n_samples**2  # in units of R
    for rounds in range(1, _MAX_MEAN_ROUNDS + 1):
        sigma_k = sigma_mean * math.sqrt(2 * rounds - 1)
        ratio = sigma_k * math.sqrt(n_features) / n_samples
        predicted = max(ratio * (2 * ratio) ** (rounds - 1), floor)
        if best is None or predicted < best[0] * (1 - 1e-9):
            best = (predicted, rounds, sigma_k)
    return best[1], best[2]


def coarse_to_fine_events(rounds, sigma_k):
    """The ``2 K - 1`` events of :func:`coarse_to_fine_mean`, from public values."""
    return tuple(accounting.gaussian_event(sigma_k) for _ in range(2 * rounds - 1))


def coarse_to_fine_mean(X, feature_norm, rounds, sigma_k, rng, *, noise="default"):
    """Private mean whose error scales with the data's spread, not with ``R``.

    Round 0: ``μ_0 = sum_i x_i / n + N(0, (σ_k R / n)² I)`` (rows are already
    clipped to ``R = feature_norm``: sensitivity ``R``). Round ``k >= 1``:
    ``r_k`` = :func:`private_radius` (the upper quantile of ``||x_i - μ_{k-1}||``,
    ``top = R + ||μ_{k-1}||``, which bounds every distance), then
    ``μ_k = μ_{k-1} + sum_i clip(x_i - μ_{k-1}, r_k) / n + N(0, (σ_k r_k / n)² I)``
    (sensitivity ``r_k``). Each release is ``gaussian_event(σ_k)``.

    Error: ``||μ_k - μ|| <= σ_k r_k (sqrt(d) + O(1)) / n + bias_k`` w.h.p.,
    where ``r_k <= 2 max_i ||x_i - μ_{k-1}|| <= 2 (||μ_{k-1} - μ|| + diam)``
    and the clipping bias ``bias_k`` is at most (rows beyond ``r_k``) times
    ``max_i ||x_i - μ_{k-1}||`` over ``n``, with ``O(σ_k log n)`` rows beyond.
    After ``K`` rounds the error is
    ``O(ρ^K R + σ_k sqrt(d) diam / n)`` with ``ρ = 2 σ_k sqrt(d) / n``:
    proportional to the diameter once ``ρ^K R`` is below it — the property
    of Lemma 3 (Huang, Liang & Yi 2021 reach it with a different, rotated
    grid construction; this simpler estimator pays a ``sqrt(2K - 1)`` factor
    in noise for the rounds).

    Parameters
    ----------
    X : ndarray or RowSource of shape (n_samples, n_features)
        Rows clipped to ``feature_norm`` (:func:`~.gaussian_mean.scale_rows`).
    feature_norm : float
        ``R``.
    rounds : int
        ``K``, from :func:`plan_mean_rounds`.
    sigma_k : float
        Noise multiplier of each release.
    rng : numpy.random.Generator
        The stream of every release's noise.
    noise : {"default", "secure"}, default="default"
        Source of the noise.

    Returns
    -------
    release : tuple
        ``(mean, radii, noise_std)``: the mean (float64, shape
        ``(n_features,)``); ``r_0 = R`` and the private radii of the later
        rounds (shape ``(rounds,)``); the per-coordinate noise std of the
        last round, ``σ_k r_{K-1} / n``.
    events : tuple of dp_accounting.DpEvent
        :func:`coarse_to_fine_events` (``2 K - 1`` Gaussians), in release order.
    """
    rng = secure_if(rng, noise)
    # X (an ndarray or an out-of-core source) is read in row blocks, one pass
    # per statistic.
    radius = float(feature_norm)
    (mean, noise_std), event = gaussian_mean(X, radius, sigma_k, rng)
    events, radii = [event], [radius]
    for _ in range(1, rounds):
        radius, event = private_radius(X, mean, feature_norm, sigma_k, rng)
        events.append(event)
        (mean, noise_std), event = gaussian_mean(X, radius, sigma_k, rng, row_scaling="clip",
                                                 centre=mean)
        events.append(event)
        radii.append(radius)
    return (mean, np.asarray(radii), noise_std), tuple(events)


# -- Algorithm 3 (practical) and Algorithm 2 (analysed), steps 1-4 ---------------


def algorithm3_events(sigma_mean):
    """The events of :func:`algorithm3_rows` (one Gaussian mean), from public values."""
    return (accounting.gaussian_event(sigma_mean),)


def algorithm3_rows(X, feature_norm, sigma_mean, rng, *, noise="default", source=None):
    """Algorithm 3: the Gaussian mean of the scaled rows, and the rows centred on it.

    Parameters
    ----------
    X : ndarray or RowSource of shape (n_samples, n_features)
        Rows scaled to norm ``feature_norm`` (:func:`~.gaussian_mean.scale_rows`).
    feature_norm : float
        ``C_F``, the sensitivity of the sum of the rows.
    sigma_mean : float
        σ_F of the mean.
    rng : numpy.random.Generator
        The stream of the mean's noise.
    noise : {"default", "secure"}, default="default"
        Source of the noise.
    source : dask array or None, default=None
        The same rows (scaled the same way) where they live, for the mean
        (summed on the workers: :func:`~.gaussian_mean.bounded_row_sum`);
        None: ``X``.

    Returns
    -------
    rows : ndarray or RowSource
        ``x - mean`` in ``X``'s dtype (out of core: centred per batch).
    release : GaussianMean
    events : tuple of dp_accounting.DpEvent
        :func:`algorithm3_events`.
    """
    release, event = gaussian_mean(X if source is None else source, feature_norm, sigma_mean,
                                   rng, noise=noise)
    return centre_rows(X, release.mean), release, (event,)


def centre_rows(X, mean):
    """``x - mean`` (``mean`` rounded to ``X``'s dtype) of every row; out of core: per batch."""
    shift = mean.astype(X.dtype)
    return map_rows(X, lambda rows, idx: np.ascontiguousarray(rows - shift),
                    X.shape[1], X.dtype)


def algorithm2_events(rounds, sigma_k, sigma_quantile):
    """The events of :func:`algorithm2_rows`, from public values."""
    return (*coarse_to_fine_events(rounds, sigma_k), accounting.gaussian_event(sigma_quantile))


def algorithm2_rows(X, feature_norm, rounds, sigma_k, sigma_quantile, fit_intercept, rng, *,
                    noise="default", source=None):
    """Algorithm 2, steps 1-4: private mean, private τ, augment, clip, rescale.

    Parameters
    ----------
    X : ndarray or RowSource of shape (n_samples, n_features)
        Rows clipped to ``feature_norm`` (:func:`~.gaussian_mean.scale_rows`).
    feature_norm : float
        ``R``.
    rounds, sigma_k : int, float
        The coarse-to-fine mean's plan (:func:`plan_mean_rounds`).
    sigma_quantile : float
        Noise multiplier of τ's histogram.
    fit_intercept : bool
        Whether the augmented rows carry the constant column τ.
    rng : numpy.random.Generator
        The stream of every release's noise (mean rounds, then τ).
    noise : {"default", "secure"}, default="default"
        Source of the noise.
    source : dask array or None, default=None
        The same rows (clipped the same way) where they live, for the mean's
        sums and the histograms (computed on the workers); None: ``X``.

    Returns
    -------
    rows : ndarray or RowSource
        :func:`augment_rows`, in ``X``'s dtype (out of core: per batch).
    release : tuple
        ``(GaussianMean(mean, noise_std), radii, tau)``.
    events : tuple of dp_accounting.DpEvent
        :func:`algorithm2_events`, in release order.
    """
    stats = X if source is None else source
    (mean, radii, noise_std), events = coarse_to_fine_mean(stats, feature_norm, rounds, sigma_k,
                                                           rng, noise=noise)
    tau, event = private_radius(stats, mean, feature_norm, sigma_quantile, rng, noise=noise)
    rows = augment_rows(X, mean, tau, fit_intercept)
    return rows, (GaussianMean(mean, noise_std), radii, tau), (*events, event)


def augmented_scale(tau, fit_intercept):
    """Norm bound of the augmented rows: ``sqrt(2) τ`` (``τ`` without the τ column)."""
    return math.sqrt(2.0) * tau if fit_intercept else tau


def augment_block(X, mean, tau, fit_intercept):
    """``Clip((x - mean, τ), s) / s`` of the rows of ``X`` (float64; s = :func:`augmented_scale`).

    Without ``fit_intercept`` the τ column is left out. Row by row.
    """
    X = np.asarray(X, dtype=np.float64) - mean
    if fit_intercept:
        X = np.hstack([X, np.full((X.shape[0], 1), tau)])
    scale = augmented_scale(tau, fit_intercept)
    norms = np.linalg.norm(X, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        factors = np.where(norms > scale, 1.0 / norms, 1.0 / scale)
    return X * factors[:, None]


def augment_rows(X, mean, tau, fit_intercept):
    """The rows DP-SGD trains on in Algorithm 2: :func:`augment_block` in ``X``'s dtype.

    Every row has norm ≤ 1, so per-example gradients of the logistic or
    hinge loss have norm ≤ 1. In memory: all at once; out of core: per batch.
    """
    dtype = X.dtype
    return map_rows(X, lambda rows, idx: np.ascontiguousarray(
        augment_block(rows, mean, tau, fit_intercept), dtype=dtype),
        X.shape[1] + int(fit_intercept), dtype)


# -- back to the input features --------------------------------------------------


def revert_centred(theta, mean, fit_intercept, dtype):
    """Algorithm 3's model on the scaled, uncentred rows: ``b = b_centred - mean @ w``.

    Returns ``(coef, intercept)`` of ``dtype``.
    """
    coef, intercept = split_theta(theta, fit_intercept, dtype)
    shift = coef.astype(np.float64) @ mean
    return coef, (intercept - shift).astype(coef.dtype)


def revert_augmented(theta, mean, tau, fit_intercept, dtype):
    """Algorithm 2's model on the clipped input rows (Lemma 5).

    On rows that feature clipping leaves alone,
    ``v @ (x - mean) / s + v_b τ / s = w @ x + b`` with ``w = v / s`` and
    ``b = v_b τ / s - w @ mean`` (``s`` = :func:`augmented_scale`). Returns
    ``(coef, intercept)`` of ``dtype``.
    """
    coef, intercept = split_theta(theta, fit_intercept, dtype)
    scale = augmented_scale(tau, fit_intercept)
    coef = coef.astype(np.float64) / scale
    intercept = intercept.astype(np.float64) * (tau / scale)
    return np.ascontiguousarray(coef.astype(dtype)), (intercept - coef @ mean).astype(dtype)

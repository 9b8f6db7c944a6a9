"""Label DP for linear log-loss models: one Gaussian release of a θ-free statistic.

With every feature public and the label private, FDP Algorithm 1's private
per-example gradient with the prior-centred label-free public loss is

    ∇ℓ − ∇ℓ_pub = x~ (p − e_y)ᵀ − x~ (p − π)ᵀ = x~ (π − e_y)ᵀ,

which does not depend on θ: every step of Algorithm 1 noises a Poisson
subsample of the *same* sum ``P = Σ_i clip(x~_i (π − e_{y_i})ᵀ)``. This
module releases that sum once, over all records, with the Gaussian mechanism
(noise ``N(0, (σ C)² I)`` for per-example clip norm ``C``: sensitivity ``C``
under add/remove of a label, ``2C`` under replacement, which dp-accounting's
Gaussian event handles), and then minimises, with no further access to the
labels (post-processing),

    Φ(θ) = (1/n) Σ_i [lse(θᵀ x~_i) − πᵀ θᵀ x~_i] + (α/n) ⟨θ, P~⟩ + (λ/2) ‖θ‖²,

whose gradient is Algorithm 1's ``g_pub(θ) + α g_priv`` with the full
public batch (``m' = n``) and ``g_priv = P~ / n`` at every step. When no
per-example term is clipped, ``α = 1`` and ``λ = 0``, Φ is the log loss
plus the linear noise term ``⟨θ, N⟩ / n``: this is the sufficient-statistic
perturbation of Wang (2018) transposed to the label (the labels enter the
log-loss gradient only through ``Σ_i x~_i e_{y_i}ᵀ``).

Why it beats Algorithm 1 here: Algorithm 1 pays for T noisy subsampled
copies of one statistic and must average them with SGD, while its public
gradient pushes the scores towards π between them; one release measured
once is better conditioned for the same ε (benchmarks/results/fdp_adult.md,
experiment B).
"""

import math

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

from .. import accounting
from .._engine._noise import NoiseStream
from .._distributed import tree_reduce, use_cluster, validate_partition
from .._outofcore import row_slice, squared_row_norms, training_dtype
from .fdp import FeatureDPPrivateOracle, label_prior

# Rows per chunk of the one pass over the data (bounds the temporary copy).
CHUNK_ROWS = 1 << 16
# The least ridge of the minimisation, in units of the released term's noise
# per coordinate (α σ C / n): it keeps that noise from driving rare columns'
# weights to infinity (validation split of adult.data: best near 0.3 x that).
STATISTIC_RIDGE = 0.3


def statistic_clip(X, n_outputs, fit_intercept, max_grad_norm):
    """Clip norm of the release: ``max_grad_norm``, or less when no term can reach it.

    The largest norm a record's term ``x~ (π − e_y)ᵀ`` can have, from the
    public features and the (data-independent) worst label, is ``max ‖x~‖``
    times 1/2 (binary) or ``sqrt(1 − 1/K)``: clipping above it only adds
    noise. Free: the features are public here. ``max_grad_norm`` when that
    bound is 0 (all-zero rows and no intercept: nothing to learn).
    """
    return _clip_of(float(squared_row_norms(X).max()) + float(fit_intercept), n_outputs,
                    max_grad_norm)


def release_label_statistic(X, y, loss, *, fit_intercept, max_grad_norm, noise_multiplier,
                            noise_rng):
    """The statistic ``P~ = Σ_i clip(x~_i (π − e_{y_i})ᵀ) + N(0, (σ C)² I)``, released once.

    Label DP (every feature public, the label private). ``C`` is
    :func:`statistic_clip` of ``max_grad_norm``; the noise, from
    ``noise_rng`` alone (a private stream), has std ``noise_multiplier * C``.
    Its DpEvent, returned with it, is a DP-SGD run of one step at sampling
    rate 1 (``accounting.dpsgd_event(noise_multiplier, 1.0, 1)``), the one the
    estimator's privacy plan calibrates σ for.

    Parameters
    ----------
    X : ndarray, CSR matrix or out-of-core source of shape (n, d)
    y : ndarray
        Targets from :meth:`LinearLoss.encode` (log loss).
    loss : LinearLoss
    fit_intercept : bool
    max_grad_norm : float
    noise_multiplier : float
    noise_rng : numpy.random.Generator or SecureGenerator

    Returns
    -------
    released : ndarray of shape (d + fit_intercept, k)
        ``P~``, in ``X``'s dtype.
    clip : float
        The clip norm ``C`` used.
    event : dp_accounting.DpEvent
        What the release spent.
    """
    n_samples, n_features = X.shape
    if use_cluster(X):  # the max row norm and the sum, computed where the partitions live
        dtype = training_dtype(X.dtype, "the label statistic")
        clip = _clip_of(float(tree_reduce(partition_max_norm, X, None, (fit_intercept,),
                                          what="the label statistic's clip",
                                          combine=_max_and_count)[0]),
                        loss.n_outputs, max_grad_norm)
        theta = np.zeros((n_features + int(fit_intercept), loss.n_outputs), dtype=dtype)
        total = tree_reduce(partition_label_sum, X, y, (loss, fit_intercept, clip, theta),
                            what="the label statistic")[0]
        return (_add_noise(total, noise_multiplier * clip, noise_rng), clip,
                accounting.dpsgd_event(noise_multiplier, 1.0, 1))
    clip = statistic_clip(X, loss.n_outputs, fit_intercept, max_grad_norm)
    oracle = FeatureDPPrivateOracle(X, y, loss, np.ones(n_features, dtype=bool), False, "mask",
                                    fit_intercept, clip)
    theta = np.zeros((n_features + int(fit_intercept), loss.n_outputs), dtype=X.dtype)
    released = release_private_sum(oracle, n_samples, theta, noise_multiplier * clip, noise_rng)
    return released, clip, accounting.dpsgd_event(noise_multiplier, 1.0, 1)


def _clip_of(row_sq_max, n_outputs, max_grad_norm):
    """:func:`statistic_clip` from ``max ‖x~‖²`` (the intercept's 1 included)."""
    prior = label_prior(n_outputs)
    label_factor = 0.5 if n_outputs == 1 else math.sqrt(1.0 - prior)
    clip = float(min(max_grad_norm, math.sqrt(row_sq_max) * label_factor))
    return clip if clip > 0 else max_grad_norm


def partition_max_norm(X, _y, fit_intercept, name="FeatureDPLogisticRegression"):
    """A partition's ``(max ‖x~_i‖², n_rows)`` (validated as in memory; public features)."""
    X, _ = validate_partition(X, None, name)
    return float(squared_row_norms(X).max()) + float(fit_intercept), X.shape[0]


def _max_and_count(a, b):
    return max(a[0], b[0]), a[1] + b[1]


def partition_label_sum(X, y, loss, fit_intercept, clip, theta):
    """A partition's ``(Σ_i clip(x~_i (π − e_{y_i})ᵀ), n_rows)``: the oracle of the
    in-memory release over the partition's chunks of :data:`CHUNK_ROWS` rows."""
    X, _ = validate_partition(X, None, "FeatureDPLogisticRegression")
    oracle = FeatureDPPrivateOracle(X, np.asarray(y), loss, np.ones(X.shape[1], dtype=bool),
                                    False, "mask", fit_intercept, clip)
    return private_sum(oracle, X.shape[0], theta), X.shape[0]


def private_sum(private_oracle, n_samples, theta):
    """``Σ_i clip(g_i)`` over every record, in chunks of :data:`CHUNK_ROWS` rows."""
    total = np.zeros_like(theta)
    for start in range(0, n_samples, CHUNK_ROWS):
        total += private_oracle(np.arange(start, min(n_samples, start + CHUNK_ROWS)), theta)
    return total


def _add_noise(total, noise_std, noise_rng):
    if noise_std > 0:
        with NoiseStream(noise_rng, total.shape, total.dtype, noise_std, None, 1,
                         background=False) as noise:
            total += noise.draw()
    return total


def release_private_sum(private_oracle, n_samples, theta, noise_std, noise_rng):
    """``Σ_i clip(g_i) + N(0, noise_std² I)`` over every record, in chunks of rows.

    ``private_oracle(idx, theta)`` returns the clipped sum over ``idx`` (its
    terms must not depend on ``theta`` for the result to be the statistic
    described above). The noise comes from ``noise_rng`` alone, drawn once.
    """
    return _add_noise(private_sum(private_oracle, n_samples, theta), noise_std, noise_rng)


def _row_blocks(X, fit_intercept):
    """``(X~)`` in blocks of :data:`CHUNK_ROWS` rows: in-memory slices, or reads of an out-of-core source."""
    n = X.shape[0]
    for start in range(0, n, CHUNK_ROWS):
        stop = min(n, start + CHUNK_ROWS)
        block = row_slice(X, start, stop)
        if fit_intercept:
            ones = np.ones((stop - start, 1), dtype=block.dtype)
            block = (sp.hstack([block, ones], format="csr") if sp.issparse(block)
                     else np.hstack([block, ones]))
        yield block


def minimise_label_free_objective(X, released, n_outputs, *, fit_intercept, alpha,
                                  l2_regularization, theta0, max_iter=500, tol=1e-8):
    """Minimise Φ above from ``theta0``; returns ``(theta, n_iter)``.

    Reads the public features only (and ``released``, already private).
    ``n_outputs`` is 1 for a binary model (``σ`` and ``π = 1/2``), else K.
    """
    n = X.shape[0]
    shape = theta0.shape
    linear = alpha * np.asarray(released, dtype=np.float64) / n
    lam = float(l2_regularization)
    # Small data: the augmented matrix once; large or out-of-core data: a
    # pass over row blocks per evaluation (the same blocks every time).
    cluster = use_cluster(X)
    blocks = list(_row_blocks(X, fit_intercept)) if n <= CHUNK_ROWS and not cluster else None

    def objective(flat):
        theta = flat.reshape(shape)
        if cluster:  # each evaluation one pass over the partitions, where they live
            value, grad, _ = tree_reduce(partition_objective, X, None,
                                         (theta, n_outputs, fit_intercept),
                                         what="the label-free objective")
        else:
            value, grad = _objective_sums(
                blocks if blocks is not None else _row_blocks(X, fit_intercept), theta,
                n_outputs)
        grad = grad / n + linear + lam * theta
        value = value / n + float((linear * theta).sum()) + 0.5 * lam * float((theta**2).sum())
        return value, grad.ravel()

    result = minimize(objective, np.asarray(theta0, dtype=np.float64).ravel(), jac=True,
                      method="L-BFGS-B", options=dict(maxiter=max_iter, gtol=tol))
    return result.x.reshape(shape), int(result.nit)


def _objective_sums(blocks, theta, n_outputs):
    """``(Σ_i [lse(θᵀx~_i) − πᵀθᵀx~_i], Σ_i x~_i (softmax − π)ᵀ)`` over row blocks."""
    prior = label_prior(n_outputs)
    value, grad = 0.0, np.zeros(theta.shape)
    for Xa in blocks:
        Z = np.asarray(Xa @ theta)
        if n_outputs == 1:
            z = Z[:, 0]
            value += np.logaddexp(0.0, z).sum() - prior * z.sum()
            R = (1.0 / (1.0 + np.exp(-z)) - prior)[:, None]  # σ(z) − π
        else:
            value += logsumexp(Z, axis=1).sum() - prior * Z.sum()
            R = softmax(Z, axis=1) - prior
        grad += np.asarray(Xa.T @ R)
    return value, grad


def partition_objective(X, _y, theta, n_outputs, fit_intercept):
    """A partition's ``(value sum, gradient sum, n_rows)`` of the objective at ``theta``
    (the in-memory blocks of :data:`CHUNK_ROWS` rows of the partition)."""
    X, _ = validate_partition(X, None, "FeatureDPLogisticRegression")
    value, grad = _objective_sums(_row_blocks(X, fit_intercept), theta, n_outputs)
    return value, grad, X.shape[0]


__all__ = ["minimise_label_free_objective", "release_label_statistic", "release_private_sum",
           "statistic_clip"]

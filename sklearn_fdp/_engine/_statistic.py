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

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

from .._outofcore import is_row_source
from ._feature_dp import label_prior
from ._noise import NoiseStream

# Rows per chunk of the one pass over the data (bounds the temporary copy).
CHUNK_ROWS = 1 << 16


def release_private_sum(private_oracle, n_samples, theta, noise_std, noise_rng):
    """``Σ_i clip(g_i) + N(0, noise_std² I)`` over every record, in chunks of rows.

    ``private_oracle(idx, theta)`` returns the clipped sum over ``idx`` (its
    terms must not depend on ``theta`` for the result to be the statistic
    described above). The noise comes from ``noise_rng`` alone, drawn once.
    """
    total = np.zeros_like(theta)
    for start in range(0, n_samples, CHUNK_ROWS):
        total += private_oracle(np.arange(start, min(n_samples, start + CHUNK_ROWS)), theta)
    if noise_std > 0:
        with NoiseStream(noise_rng, theta.shape, theta.dtype, noise_std, None, 1,
                         background=False) as noise:
            total += noise.draw()
    return total


def _row_blocks(X, fit_intercept):
    """``(X~)`` in blocks of :data:`CHUNK_ROWS` rows: in-memory slices, or reads of an out-of-core source."""
    n = X.shape[0]
    for start in range(0, n, CHUNK_ROWS):
        stop = min(n, start + CHUNK_ROWS)
        block = X.gather(np.arange(start, stop)) if is_row_source(X) else X[start:stop]
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
    prior = label_prior(n_outputs)
    linear = alpha * np.asarray(released, dtype=np.float64) / n
    lam = float(l2_regularization)
    # Small data: the augmented matrix once; large or out-of-core data: a
    # pass over row blocks per evaluation (the same blocks every time).
    blocks = list(_row_blocks(X, fit_intercept)) if n <= CHUNK_ROWS else None

    def objective(flat):
        theta = flat.reshape(shape)
        value, grad = 0.0, np.zeros(shape)
        for Xa in blocks if blocks is not None else _row_blocks(X, fit_intercept):
            Z = np.asarray(Xa @ theta)
            if n_outputs == 1:
                z = Z[:, 0]
                value += np.logaddexp(0.0, z).sum() - prior * z.sum()
                R = (1.0 / (1.0 + np.exp(-z)) - prior)[:, None]  # σ(z) − π
            else:
                value += logsumexp(Z, axis=1).sum() - prior * Z.sum()
                R = softmax(Z, axis=1) - prior
            grad += np.asarray(Xa.T @ R)
        grad = grad / n + linear + lam * theta
        value = value / n + float((linear * theta).sum()) + 0.5 * lam * float((theta**2).sum())
        return value, grad.ravel()

    result = minimize(objective, np.asarray(theta0, dtype=np.float64).ravel(), jac=True,
                      method="L-BFGS-B", options=dict(maxiter=max_iter, gtol=tol))
    return result.x.reshape(shape), int(result.nit)


__all__ = ["minimise_label_free_objective", "release_private_sum"]

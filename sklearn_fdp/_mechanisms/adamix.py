"""AdaMix (Golatkar et al., CVPR 2022): public pretraining, then noisy GD in a public subspace.

The whole mechanism of :class:`~sklearn_fdp.AdaMixClassifier`, for both
variants (the main paper's Algorithm 2, ``"practical"``, and the
supplement's Algorithm 3, ``"theory"``):

* :func:`calibrate_steps`: the number of noisy steps ``T``, the largest
  whose composition spends at most ε (:func:`steps_event` is its DpEvent);
* :func:`pretrain`: noise-free full-batch GD on the public records (free);
* :func:`train`: the private phase, returning the released values
  (:class:`AdaMixRelease`) with the DpEvent it spent;
* :func:`per_instance_mu`: the ex-post per-record figures along a stored
  trajectory (supplement, Prop. 14), computed on request, never released.

The private phase is full-batch noisy gradient descent run by the one engine
loop (:func:`sklearn_fdp._engine.run_dp_sgd` with ``sampling_rate=1``). What
AdaMix adds lives in the oracle below: at every step the public per-example
gradients give a subspace ``U_t`` and a clip threshold ``τ_t`` (both free,
they depend on public records and the released iterate only); the private
per-example gradients are projected onto ``U_t``, clipped to ``τ_t``, summed,
and noised with ``N(0, σ² τ_t² I_k)`` through the engine's ``noise_fn``.
The randomness is owned here: both streams spawned from ``random_state``
(the noise, and the batch coins the full batch never draws) are private,
i.e. drawn from the OS CSPRNG under ``noise="secure"``.

With ``subspace="feature"`` and the full rank (the defaults) the subspace is
the row space of the public inputs at every step (the residual weights
``‖r_j‖`` are positive), so its basis and the private coordinates are
computed once per fit.

Per-example gradients of a linear model are outer products ``g_i = x~_i r_iᵀ``
(``r_i`` the residual of :class:`~sklearn_fdp._engine.LinearLoss`), so the
inner product of two of them is ``(x~_i·x~_j)(r_i·r_j)``. With few public
records the subspace is computed from the ``n_pub × n_pub`` Gram matrix of
the public gradients and private coordinates from the ``n_pub × n``
public/private Gram matrix: no ``n × d × k`` tensor is built.
"""

import math
from typing import NamedTuple

import numpy as np

from .. import accounting
from .._engine import EngineConfig, LinearLoss, run_dp_sgd
from .._outofcore import iter_row_blocks, row_cache_limit, row_subset, take_rows
from .._random import spawn_generators
from ..exceptions import BudgetExceededError

# Streams spawned from random_state, in this order; both are private (the
# batch coins are never drawn: every step takes the full batch).
_NOISE, _SAMPLE = range(2)

# Precompute the public x private Gram matrix of the inputs up to this many
# entries (8 bytes each); above it, recompute it at every step.
_MAX_CROSS_GRAM = 4e7

# Eigenvalues of the public gradient Gram matrix below this fraction of the
# largest are treated as zero (their directions are numerically undefined).
_RANK_TOL = 1e-10

# Upper bound on the number of noisy steps the calibration will return.
_MAX_STEPS = 10**6

# learning_rate="auto" of the private phase is this multiple of 1/β, the
# inverse of a worst-case smoothness bound of the averaged log loss (loose
# away from p = 1/2). Chosen from validation splits of the training parts of
# digits and MNIST-8k (5 public records per class, ε in {1, 3, 8}, σ = 20):
# 4/β beat 1/β by 1-7 points for every variant; see benchmarks/bench_adamix.py.
_AUTO_LR_FACTOR = 4.0


class _AdaMixOracle:
    """Private sum and public gradient of one AdaMix step (full batch).

    ``__call__`` is the engine's private oracle: the sum over the private
    records of their per-example gradients, projected onto the public
    subspace (``projection=True``) and clipped to ``τ_t``; ``noise`` draws the
    matching Gaussian noise; ``public_gradient`` is the engine's public
    oracle. Set-up and per-step statistics (``τ_t``, ``U_t``, the noise
    dimension) are computed from the public records and the current iterate
    only; the private records enter the clipped sum and nothing else. The
    oracle keeps nothing per private record: :meth:`release` is the step's
    pre-noise release (what the sensitivity harness checks) and
    :meth:`sensitivities` the per-record figures that
    ``AdaMixClassifier.per_instance_epsilon`` recomputes on request.

    Parameters
    ----------
    X_priv, y_priv, X_pub, y_pub : ndarray
        Private and public records (``y`` encoded as :class:`LinearLoss`
        expects for the log loss), float64. ``X_priv`` may also be an
        out-of-core source of the private records
        (:func:`~sklearn_fdp._outofcore.row_subset`: read from disk block by
        block at every step).
    n_outputs : int
        Columns ``K`` of the parameter matrix.
    fit_intercept : bool
    noise_multiplier : float
        σ; noise std is ``σ τ_t``.
    subspace_dim : int or None
        ``k``; None keeps every direction the public gradients span.
    clip_percentile : float
        Percentile of the public per-example gradient norms giving ``τ_t``.
    projection, adaptive_clipping : bool
    max_grad_norm : float
        ``τ`` when ``adaptive_clipping`` is False.
    n_total : int
        ``n_pub + n_priv``: the public gradient is divided by it (and the
        engine divides the private sum by ``n_priv`` and scales it by
        ``alpha = n_priv / n_total``).
    l2_regularization : float
        λ of the pull ``λ (θ − θ_ref)``.
    theta_ref : ndarray
        Publicly pretrained parameters.
    """

    def __init__(self, X_priv, y_priv, X_pub, y_pub, n_outputs, fit_intercept,
                 noise_multiplier, subspace_dim, clip_percentile, projection,
                 adaptive_clipping, max_grad_norm, n_total, l2_regularization, theta_ref,
                 subspace="gradient"):
        self.X_priv, self.y_priv = X_priv, y_priv
        self.X_pub, self.y_pub = X_pub, y_pub
        self.n_outputs = int(n_outputs)
        self.fit_intercept = bool(fit_intercept)
        self.sigma = float(noise_multiplier)
        self.subspace_dim = subspace_dim
        self.clip_percentile = float(clip_percentile)
        self.projection = bool(projection)
        self.adaptive_clipping = bool(adaptive_clipping)
        self.max_grad_norm = float(max_grad_norm)
        self.n_total = int(n_total)
        self.l2_regularization = float(l2_regularization)
        self.theta_ref = theta_ref
        self.subspace = subspace
        self.n_features = X_priv.shape[1]
        self.loss = LinearLoss("log_loss", self.n_outputs)
        icpt = 1.0 if fit_intercept else 0.0
        self.xn_priv = np.empty(len(X_priv))
        for _, a, b, Xb in self._blocks():
            self.xn_priv[a:b] = np.sqrt(np.einsum("ij,ij->i", Xb, Xb) + icpt)
        self.xn_pub = np.sqrt(np.einsum("ij,ij->i", X_pub, X_pub) + icpt)
        n_pub, n_priv = len(X_pub), len(X_priv)
        n_rows = self.n_features + int(fit_intercept)
        # Out of core, per-record caches (the public x private Gram matrix, the
        # private coordinates of a fixed subspace) are kept only when they are
        # as small as one chunk of rows; otherwise they are recomputed block by
        # block at every step (the same values).
        cache_limit = row_cache_limit(X_priv)
        # Route: n_pub x n_pub Gram matrices when there are fewer public records
        # than dimensions of the space the subspace lives in, else explicit bases.
        self.use_gram = n_pub <= (n_rows * self.n_outputs if subspace == "gradient" else n_rows)
        self.cross_gram = None  # per private block, when precomputed
        # Full-rank feature subspace: the residual weights ‖r_j‖ are positive,
        # so the span of the weighted public rows is the row space of X~_pub at
        # every step. Its basis (and, when they fit, the private coordinates)
        # are computed once.
        self._fixed_V = self._fixed_Q = None
        self._fixed_full = False
        if self.projection and subspace == "feature" and subspace_dim is None and n_pub:
            _, sv, Vt = np.linalg.svd(self._xt(X_pub), full_matrices=False)
            rank = int(np.sum(sv**2 > _RANK_TOL * sv[0] ** 2)) if sv[0] > 0 else 0
            if rank == n_rows:
                self._fixed_full = True
            else:
                self._fixed_V = np.ascontiguousarray(Vt[:rank].T)
                if n_priv * rank <= cache_limit:
                    self._fixed_Q = [self._xt(Xb) @ self._fixed_V
                                     for _, _, _, Xb in self._blocks()]
        if (self.projection and self.use_gram and self._fixed_V is None and not self._fixed_full
                and n_pub * n_priv <= min(_MAX_CROSS_GRAM, cache_limit)):
            self.cross_gram = [self._x_cross(Xb) for _, _, _, Xb in self._blocks()]
        # Per-step state; ``iterates`` (set by the caller) records every θ_t.
        self.iterates = None
        self.tau_history = []
        self.rank_history = []
        self._tau = 0.0
        self._map_back = None
        self._n_dims = 0
        self._theta_shape = theta_ref.shape

    # -- helpers -------------------------------------------------------------

    def _blocks(self):
        """Yield ``(j, start, stop, rows)``: block ``j``, private records ``start:stop``.

        Every pass over the private records (one per step) goes block by
        block, in memory as out of core, with the same blocks (about
        :data:`~sklearn_fdp._outofcore.CHUNK_BYTES` of float64 rows each), so
        the per-step sums are the same bit for bit either way.
        """
        for j, (start, rows) in enumerate(iter_row_blocks(self.X_priv)):
            yield j, start, start + len(rows), rows

    def _x_cross(self, X_block):
        """``X~_pub X~_blockᵀ``: public x private inner products of the inputs."""
        K = self.X_pub @ X_block.T
        if self.fit_intercept:
            K += 1.0
        return K

    def _cross(self, j, X_block):
        """:meth:`_x_cross` of private block ``j`` (precomputed when it fits)."""
        return self.cross_gram[j] if self.cross_gram is not None else self._x_cross(X_block)

    def _decision(self, X, theta):
        Z = X @ theta[: self.n_features]
        if self.fit_intercept:
            Z += theta[self.n_features]
        return Z

    def _outer_sum(self, X, R):
        """``Σ_i x~_i r_iᵀ`` as a parameter-shaped array."""
        out = np.empty(self._theta_shape)
        out[: self.n_features] = X.T @ R
        if self.fit_intercept:
            out[self.n_features] = R.sum(axis=0)
        return out

    def _tau_of(self, pub_norms):
        if not self.adaptive_clipping:
            return self.max_grad_norm
        return float(np.percentile(pub_norms, self.clip_percentile))

    def _eig_top(self, gram):
        """Eigenpairs of a PSD Gram matrix, descending, truncated to the numerical rank and k."""
        evals, evecs = np.linalg.eigh(gram)
        evals, evecs = evals[::-1], evecs[:, ::-1]
        top = evals[0] if len(evals) else 0.0
        rank = int(np.sum(evals > _RANK_TOL * top)) if top > 0 else 0
        k = rank if self.subspace_dim is None else min(int(self.subspace_dim), rank)
        return evals[:k], evecs[:, :k], k

    def _gradient_subspace(self, R_pub):
        """Top-k right singular subspace of the flattened public gradients ``G``.

        Returns ``(coords, back, k)``: ``coords(j, X_block, R_block)`` gives
        the coordinates ``U_tᵀ g_i`` of private block ``j`` (one row per
        record), and ``back(s) = U_t s`` as a parameter-shaped array;
        ``coords`` and ``back`` are None when ``U_t`` is everything.
        """
        X_pub = self.X_pub
        if self.use_gram:
            # G Gᵀ = (X~ X~ᵀ) ⊙ (R Rᵀ) = A S² Aᵀ, and U = Gᵀ A S⁻¹.
            gram = X_pub @ X_pub.T
            if self.fit_intercept:
                gram += 1.0
            gram *= R_pub @ R_pub.T
            evals, evecs, k = self._eig_top(gram)
            A = evecs / np.sqrt(evals)  # A S⁻¹, (n_pub, k)

            def coords(j, X_block, R):
                # <g_j, g_i> -> U_tᵀ g_i
                return (A.T @ (self._cross(j, X_block) * (R_pub @ R.T))).T

            def back(s):
                return self._outer_sum(X_pub, R_pub * (A @ s)[:, None])
        else:
            G = np.einsum("ia,ib->iab", self._xt(X_pub), R_pub).reshape(len(X_pub), -1)
            _, U, k = self._eig_top(G.T @ G)
            if k == G.shape[1]:  # the public gradients span everything: U Uᵀ = I
                return None, None, k
            n_rows = self.n_features + int(self.fit_intercept)

            def coords(j, X_block, R):
                XU = self._xt(X_block) @ U.reshape(n_rows, -1)
                return np.einsum("nbj,nb->nj", XU.reshape(len(R), self.n_outputs, k), R)

            def back(s):
                return (U @ s).reshape(self._theta_shape)
        return coords, back, k

    def _feature_subspace(self, R_pub):
        """Top-k left singular subspace ``V_t`` of the public gradients as matrices.

        The public gradients ``x~_j r_jᵀ`` span, on the input side, the
        column space of ``M = Σ_j ‖r_j‖² x~_j x~_jᵀ``. A private gradient is
        projected as ``V_t V_tᵀ x~_i r_iᵀ`` (coordinates ``V_tᵀ x~_i r_iᵀ``,
        ``k x K``). Returns ``(coords, back, k)`` with ``coords(j, X_block)``
        the coordinates ``V_tᵀ x~_i`` of private block ``j`` (one row per
        record) and ``back(S) = V_t S`` for a ``(k, K)`` S; ``coords`` and
        ``back`` are None when ``V_t`` is everything.
        """
        if self._fixed_full:
            return None, None, self.n_features + int(self.fit_intercept)
        if self._fixed_V is not None:
            V = self._fixed_V

            def back_fixed(S):
                return V @ S

            def coords_fixed(j, X_block):
                return self._fixed_Q[j] if self._fixed_Q is not None else self._xt(X_block) @ V

            return coords_fixed, back_fixed, V.shape[1]
        X_pub = self.X_pub
        w = np.linalg.norm(R_pub, axis=1)
        if self.use_gram:
            # (W X~)(W X~)ᵀ with W = diag(‖r_j‖) = A S² Aᵀ, and V = X~ᵀ W A S⁻¹.
            gram = X_pub @ X_pub.T
            if self.fit_intercept:
                gram += 1.0
            gram *= np.outer(w, w)
            evals, evecs, k = self._eig_top(gram)
            A = (evecs / np.sqrt(evals)) * w[:, None]  # W A S⁻¹, (n_pub, k)

            def coords(j, X_block):
                return (A.T @ self._cross(j, X_block)).T

            def back(S):
                return self._outer_sum(X_pub, A @ S)
        else:
            Xt = self._xt(X_pub) * w[:, None]
            _, V, k = self._eig_top(Xt.T @ Xt)
            if k == Xt.shape[1]:  # V Vᵀ = I
                return None, None, k

            def coords(j, X_block):
                return self._xt(X_block) @ V

            def back(S):
                return V @ S
        return coords, back, k

    def _xt(self, X):
        if not self.fit_intercept:
            return X
        return np.hstack([X, np.ones((len(X), 1))])

    # -- engine callbacks ----------------------------------------------------

    def _step(self, theta):
        """Public statistics, and the private coordinates block by block, at ``theta``.

        Returns ``(tau, n_dims, back, block)``. ``tau`` (τ_t), ``n_dims``
        (dimension of the noise) and ``back`` (flat coordinates ->
        parameter-shaped array; None: the identity, i.e. a reshape) depend on
        the public records and ``theta`` only. ``block(j, a, b, X_block)``
        for private block ``j`` (records ``a:b``) returns
        ``(norms, coord_sum)``: ``norms[i]`` is the norm of the block's
        record i's coordinates ``U_tᵀ g_i`` and ``coord_sum(scale)`` is
        ``Σ_i scale_i U_tᵀ g_i`` over the block, a flat array of ``n_dims``
        entries.
        """
        R_pub = self.loss.residual(self._decision(self.X_pub, theta), self.y_pub)
        pub_norms = self.xn_pub * np.linalg.norm(R_pub, axis=1)
        tau = self._tau_of(pub_norms) if len(pub_norms) or not self.adaptive_clipping else 0.0

        def residual(a, b, X_block):
            return self.loss.residual(self._decision(X_block, theta), self.y_priv[a:b])

        if self.projection and self.subspace == "gradient":
            coords, back, k = self._gradient_subspace(R_pub)
            if back is not None:
                def block(j, a, b, X_block):
                    P = coords(j, X_block, residual(a, b, X_block))
                    return np.linalg.norm(P, axis=1), lambda scale: P.T @ scale

                return tau, k, back, block
        elif self.projection:
            coords, back_matrix, k = self._feature_subspace(R_pub)
            if back_matrix is not None:
                K = self.n_outputs

                def back(z):
                    return back_matrix(z.reshape(k, K))

                def block(j, a, b, X_block):
                    Q, R = coords(j, X_block), residual(a, b, X_block)
                    norms = np.linalg.norm(Q, axis=1) * np.linalg.norm(R, axis=1)
                    return norms, lambda scale: (Q.T @ (R * scale[:, None])).ravel()

                return tau, k * K, back, block
        # No projection, or a full-rank subspace (the identity).

        def block(j, a, b, X_block):
            R = residual(a, b, X_block)
            norms = self.xn_priv[a:b] * np.linalg.norm(R, axis=1)
            return norms, lambda scale: self._outer_sum(X_block, R * scale[:, None]).ravel()

        return tau, theta.size, None, block

    @staticmethod
    def _clip_scale(norms, tau):
        """Factors ``min(1, τ / ‖U_tᵀ g_i‖)``; zeros when ``τ = 0`` (nothing released)."""
        if tau > 0:
            with np.errstate(over="ignore"):  # τ / tiny = inf for a zero gradient: factor 1
                return np.minimum(1.0, tau / np.maximum(norms, np.finfo(np.float64).tiny))
        return np.zeros_like(norms)

    def release(self, theta):
        """The step's pre-noise release ``Σ_i clip(U_tᵀ g_i, τ_t)`` in the noise's coordinates.

        Returns ``(coords, tau, n_dims, back)``: ``coords`` is a flat array of
        ``n_dims`` entries to which :meth:`noise` adds ``N(0, σ² τ_t² I)``;
        ``back`` maps coordinates to the parameter shape (None: a reshape).
        Removing one private record moves ``coords`` by at most ``τ_t``.
        """
        tau, n_dims, back, block = self._step(theta)
        total = None
        # One pass over the private records, block by block; the blocks' sums
        # are added in order.
        for j, a, b, X_block in self._blocks():
            norms, coord_sum = block(j, a, b, X_block)
            part = coord_sum(self._clip_scale(norms, tau))
            total = part if total is None else total + part
        return total, tau, n_dims, back

    def sensitivities(self, theta):
        """``(τ_t, n_dims, s)`` with ``s_i = min(‖U_tᵀ g_i‖, τ_t)² / τ_t²`` (0 when τ_t = 0).

        Computed from the private records in the clear: the per-instance
        report's input, never stored on a fitted estimator.
        """
        tau, n_dims, _, block = self._step(theta)
        norms = np.concatenate([block(*args)[0] for args in self._blocks()])
        scale = self._clip_scale(norms, tau)
        sens = (norms * scale / tau) ** 2 if tau > 0 else np.zeros_like(norms)
        return tau, n_dims, sens

    def __call__(self, idx, theta):
        """Clipped (projected) sum over all private records (``idx`` is all of them)."""
        if self.iterates is not None:
            self.iterates[len(self.tau_history)] = theta
        coords, tau, n_dims, back = self.release(theta)
        self.tau_history.append(tau)
        self.rank_history.append(n_dims)
        self._tau, self._n_dims = tau, n_dims
        self._map_back = back
        if back is None:
            return coords.reshape(self._theta_shape)
        return back(coords)

    def noise(self, rng):
        """``N(0, σ² τ_t² I_k)`` in the step's subspace, mapped back (or isotropic)."""
        std = self.sigma * self._tau
        if self._map_back is not None:
            return self._map_back(std * rng.standard_normal(self._n_dims))
        return std * rng.standard_normal(self._theta_shape)

    def public_gradient(self, theta):
        """Public gradient divided by ``n_total``, plus ``λ (θ − θ_ref)``."""
        grad = np.zeros(self._theta_shape)
        if len(self.X_pub):
            R_pub = self.loss.residual(self._decision(self.X_pub, theta), self.y_pub)
            grad = self._outer_sum(self.X_pub, R_pub) / self.n_total
        if self.l2_regularization:
            grad += self.l2_regularization * (theta - self.theta_ref)
        return grad


class _InverseTimeConfig(EngineConfig):
    """Engine settings with Algorithm 3's step size ``η_t = 2 / (λ (t + 1))``.

    ``t`` is 1-based in the supplement; the engine's ``t`` is 0-based.
    """

    def step_size(self, t):
        return 2.0 / (self.learning_rate * (t + 2))


def _shifted(oracle, shift):
    """Oracles in coordinates ``v = w − shift`` (so the engine's λ v is λ (w − w_ref))."""

    def private(idx, v):
        return oracle(idx, v + shift)

    def public(v):
        return oracle.public_gradient(v + shift)

    return private, public


def _public_rows(X, public_mask):
    """``X[public_mask]`` as a float64 ndarray (in memory or out of core)."""
    return np.asarray(take_rows(X, np.flatnonzero(public_mask)), dtype=np.float64)


def _private_oracle(X, y_enc, public_mask, X_pub, theta_ref, projection, adaptive_clipping,
                    l2_regularization, noise_multiplier, params):
    """The private phase's oracle on the records of ``X`` (``public_mask``: public)."""
    subspace_dim = None if params["subspace_dim"] == "auto" else int(params["subspace_dim"])
    private = ~public_mask
    return _AdaMixOracle(
        row_subset(X, np.flatnonzero(private)), y_enc[private], X_pub, y_enc[public_mask],
        theta_ref.shape[1], params["fit_intercept"], float(noise_multiplier), subspace_dim,
        params["clip_percentile"], projection, adaptive_clipping, params["max_grad_norm"],
        len(X), l2_regularization, theta_ref, subspace=params["subspace"],
    )


# -- the number of steps ----------------------------------------------------------


def steps_event(noise_multiplier, steps):
    """The DpEvent of ``steps`` full-batch Gaussian steps of noise multiplier σ."""
    return accounting.dpsgd_event(noise_multiplier, 1.0, steps)


# noise_multiplier="auto": the paper's σ = 20, moved just enough to keep the
# number of noisy steps T between these bounds (see auto_noise_multiplier).
AUTO_SIGMA = 20.0
AUTO_MIN_STEPS = 30
AUTO_MAX_STEPS = 10_000
# Below this σ the PLD accountant's grid explodes (ε in the thousands); "auto"
# then takes AUTO_MAX_STEPS steps at this σ and spends less than a huge ε.
AUTO_MIN_SIGMA = 2.5


def auto_noise_multiplier(epsilon, delta):
    """σ of ``noise_multiplier="auto"``: 20, or what keeps T in [30, 10 000].

    ``T`` steps at σ compose to one Gaussian mechanism at ``σ / sqrt(T)``
    (GDP), so the budget fixes ``σ_1 = σ / sqrt(T)``, the noise multiplier
    of a single release spending ``epsilon`` at ``delta``. The paper's σ = 20
    gives ``T = (20 / σ_1)²`` steps: below one step at ε ≲ 0.16 (δ = 1e-5),
    where σ = 20 cannot fit at all, and millions of steps at very large ε.
    The rule keeps σ = 20 wherever it gives between ``AUTO_MIN_STEPS`` and
    ``AUTO_MAX_STEPS`` steps and otherwise takes the σ that gives that
    bound, but never below ``AUTO_MIN_SIGMA`` (ε above about 1,000: the fit
    then takes ``AUTO_MAX_STEPS`` steps and spends less than ``epsilon``;
    pass ``max_steps=AUTO_MAX_STEPS`` to :func:`calibrate_steps`). It reads
    only ε and δ (public), so it costs no privacy. On a validation split of
    adult.data (``benchmarks/studies/bench_adamix_steps.py``) 30 steps beat 1, 3 and
    10 in 7 of 8 settings (ε from 0.03 to 1, 100 or 1,000 public rows; the
    exception: 10 steps at ε = 0.03 with 1,000 public rows, by 0.35 points),
    in line with the paper's finding that larger σ is better (supplement
    §A.3).
    """
    # σ_1 below AUTO_MIN_SIGMA / sqrt(AUTO_MAX_STEPS) makes the rule AUTO_MIN_SIGMA
    # whatever it is: answer so without solving for it (which fails beyond ε ~ 1e5,
    # the noise floor of gaussian_noise_multiplier; ε = 1e300 raised SciPy's NaN).
    if float(epsilon) > accounting.gaussian_epsilon(
            AUTO_MIN_SIGMA / math.sqrt(AUTO_MAX_STEPS), float(delta)):
        return float(AUTO_MIN_SIGMA)
    sigma_1 = accounting.gaussian_noise_multiplier(float(epsilon), float(delta))
    # A hair above the exact bound, so that calibrate_steps reaches the bound
    # through the rounding of its bisection.
    low = sigma_1 * math.sqrt(AUTO_MIN_STEPS) * (1 + 1e-9)
    high = sigma_1 * math.sqrt(AUTO_MAX_STEPS)
    return float(max(min(max(AUTO_SIGMA, low), high), AUTO_MIN_SIGMA))


def calibrate_steps(noise_multiplier, epsilon, delta, name, max_steps=None):
    """Largest T with PLD ε(T Gaussian(σ) steps) ≤ epsilon, and its ε.

    The composition of T Gaussian mechanisms is exactly the Gaussian
    mechanism with noise multiplier ``σ / sqrt(T)`` (GDP, Lemma 8), so
    the exact T is found by bisection on the analytic Gaussian ε; it is
    then checked (and lowered if needed) with dp-accounting's PLD
    accountant, which is what ``epsilon_`` reports.

    Parameters
    ----------
    noise_multiplier : float
        σ of every step.
    epsilon, delta : float
        The budget (the estimator's parameters, as given: messages show them).
    name : str
        The estimator's name, for the messages.
    max_steps : int or None, default=None
        Take at most this many steps (spending less than ``epsilon`` when
        the budget allows more); None raises instead when the budget allows
        more than a million.

    Returns
    -------
    steps : int
    spent : float
        PLD ε of ``steps`` steps at ``delta`` (≤ ``epsilon``).
    """
    sigma = noise_multiplier
    target = float(epsilon)
    delta_f = float(delta)

    def exact(T):
        return accounting.gaussian_epsilon(sigma / math.sqrt(T), delta_f)

    def pld(T):
        return accounting.epsilon_of_event(steps_event(sigma, T), delta_f, accountant="pld")

    if exact(1) > target:
        sigma_min = accounting.gaussian_noise_multiplier(target, delta_f)
        raise BudgetExceededError(
            f"{name}: even one step with noise_multiplier={sigma!r} "
            f"spends ε = {exact(1):.4g} > epsilon = {epsilon!r} at delta = "
            f"{delta!r}. Use noise_multiplier >= {sigma_min:.4g} (larger is "
            "better: more, noisier steps) or a larger epsilon."
        )
    lo, hi = 1, 2
    if max_steps is not None and exact(max_steps) <= target:
        lo = hi = max_steps
    while exact(hi) <= target and hi > lo:
        lo, hi = hi, hi * 2
        if hi > _MAX_STEPS:
            raise BudgetExceededError(
                f"{name}: epsilon={epsilon!r} with "
                f"noise_multiplier={sigma!r} allows more than {_MAX_STEPS} steps. "
                "Use a smaller noise_multiplier."
            )
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if exact(mid) <= target:
            lo = mid
        else:
            hi = mid
    steps = lo
    spent = pld(steps)
    while spent > target and steps > 1:  # PLD is pessimistic by ~1e-9
        steps -= 1
        spent = pld(steps)
    if spent > target:  # pragma: no cover - defensive
        raise BudgetExceededError(
            f"{name}: one step spends ε = {spent:.4g} > epsilon = "
            f"{epsilon!r}. Raise noise_multiplier."
        )
    return steps, spent


# -- public pretraining -----------------------------------------------------------


def _smoothness(X_pub, n_outputs, params):
    """β = c max_j ‖x~_j‖² + λ over the public rows (c = 1/4 binary, 1/2 softmax)."""
    icpt = 1.0 if params["fit_intercept"] else 0.0
    if len(X_pub):
        max_sq = float(np.max(np.einsum("ij,ij->i", X_pub, X_pub))) + icpt
    else:
        max_sq = 1.0 + icpt  # rows of norm <= 1 assumed
    curvature = 0.25 if n_outputs == 1 else 0.5
    return curvature * max_sq + params["l2_regularization"]


def pretrain(X_pub, y_pub, theta0, learning_rate, public_epochs, fit_intercept):
    """Noise-free full-batch GD on the public records (free: no private record is read).

    Parameters
    ----------
    X_pub : ndarray of shape (n_public, n_features), float64
    y_pub : ndarray
        Labels encoded by :class:`~sklearn_fdp._engine.LinearLoss` (log loss).
    theta0 : ndarray of shape (n_features + fit_intercept, n_outputs)
        Starting point (returned as is without public records or epochs).
    learning_rate : float
        Step size.
    public_epochs : int
        Number of full-batch steps.
    fit_intercept : bool

    Returns
    -------
    theta_ref : ndarray
        The publicly pretrained parameters ``w_ref``.
    """
    if len(X_pub) == 0 or public_epochs == 0:
        return theta0
    oracle = _AdaMixOracle(
        X_pub[:0], y_pub[:0], X_pub, y_pub, theta0.shape[1], fit_intercept, 0.0,
        None, 100.0, False, False, 1.0, len(X_pub), 0.0, theta0,
    )
    config = EngineConfig(
        steps=int(public_epochs),
        sampling_rate=1.0,
        noise_multiplier=0.0,
        max_grad_norm=np.inf,
        learning_rate=learning_rate,
        alpha=0.0,
    )
    rng = np.random.default_rng(0)  # unused: no private data, no noise
    result = run_dp_sgd(
        theta0, lambda idx, theta: np.zeros_like(theta), 1, config,
        sample_rng=rng, noise_rng=rng, public_oracle=oracle.public_gradient,
    )
    return result.theta


# -- the two variants (the one switch on `variant`) ----------------------------------


class _Practical:
    """The main paper's Algorithm 2: projection onto the public subspace, adaptive
    clipping, step ``learning_rate`` and the average of the second half's iterates."""

    @staticmethod
    def check(params, public_mask, name):
        """Parameter rules of this variant, raised by ``fit`` before any private value.

        ``public_mask`` is the fit's checked mask, or None when it got none
        (every record private: NoisyGD, whatever ``projection`` says).
        """
        if (public_mask is not None and not public_mask.any()
                and (params["projection"] or params["adaptive_clipping"])):
            raise ValueError(
                f"`public_mask` of {name}.fit marks no record public, but "
                f"projection={params['projection']!r} and adaptive_clipping="
                f"{params['adaptive_clipping']!r} need public records (their gradients give "
                "the subspace and the clip threshold). Mark some records public, or set "
                "projection=False and adaptive_clipping=False (NoisyGD), or pass "
                "public_mask=None."
            )

    @staticmethod
    def oracle_settings(params, n_public):
        """``(projection, adaptive_clipping, λ of the oracle's pull)``."""
        return (bool(params["projection"] and n_public > 0),
                bool(params["adaptive_clipping"] and n_public > 0),
                params["l2_regularization"])

    @staticmethod
    def run(oracle, theta_ref, n_private, common, gens, params):
        """Run the engine; returns ``(θ, learning rate, the step-size setting in words)``."""
        X_pub = oracle.X_pub
        lr = (_AUTO_LR_FACTOR / _smoothness(X_pub, theta_ref.shape[1], params)
              if params["learning_rate"] == "auto" else float(params["learning_rate"]))
        steps = common["steps"]
        config = EngineConfig(learning_rate=lr,
                              average_start=steps // 2 if params["average"] else None, **common)
        result = run_dp_sgd(
            theta_ref, oracle, n_private, config, sample_rng=gens[_SAMPLE],
            noise_rng=gens[_NOISE], public_oracle=oracle.public_gradient,
            noise_fn=oracle.noise, callback=None,
        )
        return result.theta, lr, f"learning_rate={params['learning_rate']!r}"


class _Theory:
    """The supplement's Algorithm 3: no projection, no adaptive clipping, step
    ``2 / (λ (t + 1))`` and the weighted average ``Σ_t 2t / (T (T + 1)) w_t``."""

    @staticmethod
    def check(params, public_mask, name):
        """Parameter rules of this variant, raised by ``fit`` before any private value."""
        if params["l2_regularization"] <= 0:
            raise ValueError(
                f"variant='theory' of {name} needs l2_regularization > 0 (its step size "
                f"is 2 / (λ (t + 1))), got {params['l2_regularization']!r}. Use e.g. 1e-2."
            )

    @staticmethod
    def oracle_settings(params, n_public):
        """``(projection, adaptive_clipping, λ of the oracle's pull)``: the engine adds λ."""
        return False, False, 0.0

    @staticmethod
    def run(oracle, theta_ref, n_private, common, gens, params):
        """Run the engine; returns ``(w̄, λ, the step-size setting in words)``."""
        # Algorithm 3: J(w) = mean loss + λ/2 ‖w − w_ref‖², η_t = 2/(λ(t+1)),
        # w̄ = Σ_{t=1}^T 2t/(T(T+1)) w_t with w_1 = w_ref (post-processing).
        steps = common["steps"]
        lam = float(params["l2_regularization"])
        config = _InverseTimeConfig(learning_rate=lam, l2_regularization=lam, **common)
        oracle.theta_ref = np.zeros_like(theta_ref)
        # The engine adds λ v; in coordinates v = w − w_ref that is λ (w − w_ref).
        # The weights sum to 1, so w̄ = v̄ + w_ref, and v_1 = 0.
        shift = theta_ref
        private, public = _shifted(oracle, shift)
        start = np.zeros_like(theta_ref)
        weights_sum = steps * (steps + 1) / 2.0
        average = np.zeros_like(theta_ref)

        def callback(t, theta):
            if t + 2 <= steps:  # after the engine's step t (0-based), theta is v_{t+2}
                average[...] += theta * ((t + 2) / weights_sum)

        run_dp_sgd(
            start, private, n_private, config, sample_rng=gens[_SAMPLE], noise_rng=gens[_NOISE],
            public_oracle=public, noise_fn=oracle.noise, callback=callback,
        )
        step = (f"l2_regularization={params['l2_regularization']!r} (the step size is "
                "2 / (λ (t + 1)))")
        return average + shift, lam, step


VARIANTS = {"practical": _Practical, "theory": _Theory}


# -- the mechanism ----------------------------------------------------------------------


class AdaMixRelease(NamedTuple):
    """What one AdaMix run releases: functions of the public records and the noisy steps.

    Attributes
    ----------
    theta : ndarray of shape (n_features + fit_intercept, n_outputs)
        The released parameters (the last row is the intercept).
    theta_ref : ndarray of the same shape
        The publicly pretrained parameters ``w_ref``.
    learning_rate : float
        Step size of the private phase (λ for the theory variant).
    projection, adaptive_clipping : bool
        Whether projection and adaptive clipping ran.
    clip_thresholds : ndarray of shape (steps,)
        ``τ_t`` of every step.
    subspace_dims : ndarray of shape (steps,)
        Dimension of the noise of every step.
    iterates : ndarray of shape (steps, n_features + fit_intercept, n_outputs) or None
        Every iterate ``θ_t`` (``params["store_iterates"]``), else None.
    """

    theta: np.ndarray
    theta_ref: np.ndarray
    learning_rate: float
    projection: bool
    adaptive_clipping: bool
    clip_thresholds: np.ndarray
    subspace_dims: np.ndarray
    iterates: np.ndarray | None


def train(X, y_index, public_mask, n_outputs, *, variant, steps, noise_multiplier, params,
          name):
    """AdaMix on the records of ``X``: public pretraining, then ``steps`` noisy steps.

    Parameters
    ----------
    X : ndarray of float64 or out-of-core row source, shape (n_samples, n_features)
        Public and private records (validated).
    y_index : ndarray of shape (n_samples,)
        Class indices ``0..K-1``.
    public_mask : ndarray of bool of shape (n_samples,)
        True for the public records.
    n_outputs : int
        Columns of the parameter matrix (1 for two classes).
    variant : {_Practical, _Theory}
        ``VARIANTS[params["variant"]]``, chosen once by the caller.
    steps : int
        ``T``, from :func:`calibrate_steps`.
    noise_multiplier : float
        σ of every step.
    params : dict
        The estimator's hyperparameters (``AdaMixClassifier.get_params()``).
    name : str
        The estimator's name, for the messages.

    Returns
    -------
    release : AdaMixRelease
    dp_event : dp_accounting.DpEvent
        The noisy steps this run took (:func:`steps_event`).
    """
    sigma = float(noise_multiplier)
    loss = LinearLoss("log_loss", n_outputs)
    y_enc = loss.encode(y_index)
    X_pub, y_pub = _public_rows(X, public_mask), y_enc[public_mask]
    n_private = len(X) - len(X_pub)
    theta0 = np.zeros((X.shape[1] + int(params["fit_intercept"]), n_outputs))
    # Pretraining is plain GD on the public loss: 1/β is a safe step for it.
    theta_ref = pretrain(X_pub, y_pub, theta0, 1.0 / _smoothness(X_pub, n_outputs, params),
                         params["public_epochs"], params["fit_intercept"])
    projection, adaptive, l2_regularization = variant.oracle_settings(params, len(X_pub))
    oracle = _private_oracle(X, y_enc, public_mask, X_pub, theta_ref, projection, adaptive,
                             l2_regularization, sigma, params)
    if params["store_iterates"]:
        oracle.iterates = np.empty((steps,) + theta_ref.shape)
    # noise="secure": the noise (and the unused batch coins) come from the OS CSPRNG.
    gens = spawn_generators(params["random_state"], 2, noise=params["noise"],
                            private_streams=(_NOISE, _SAMPLE))
    common = dict(steps=steps, sampling_rate=1.0, noise_multiplier=sigma,
                  max_grad_norm=params["max_grad_norm"], alpha=n_private / len(X))
    theta, learning_rate, step = variant.run(oracle, theta_ref, n_private, common, gens, params)
    # A check of the released (noisy) iterate and the public model only:
    # post-processing, no privacy cost.
    if not (np.all(np.isfinite(theta)) and np.all(np.isfinite(theta_ref))):
        raise ValueError(
            f"Training of {name} diverged: the weights are not finite, with {step}. "
            "Lower the step size (learning_rate='auto' takes a safe one from the "
            "public records) and keep the rows scaled to a data-independent bound "
            "(e.g. L2 norm <= 1)."
        )
    release = AdaMixRelease(
        theta=theta, theta_ref=theta_ref, learning_rate=learning_rate, projection=projection,
        adaptive_clipping=adaptive, clip_thresholds=np.asarray(oracle.tau_history, dtype=float),
        subspace_dims=np.asarray(oracle.rank_history, dtype=int), iterates=oracle.iterates,
    )
    return release, steps_event(sigma, len(oracle.tau_history))


def per_instance_mu(X, y_index, public_mask, theta_ref, iterates, clip_thresholds,
                    subspace_dims, *, projection, adaptive_clipping, noise_multiplier, params,
                    name):
    """μ_i of every private record along a stored trajectory (supplement, Prop. 14).

    At every iterate ``θ_t`` the step's ``U_t`` and ``τ_t`` are recomputed
    from the public records and checked against the fit's
    ``clip_thresholds`` and ``subspace_dims``; record ``i`` entered step
    ``t`` with sensitivity ``min(‖U_tᵀ g_i(θ_t)‖, τ_t)`` against noise
    ``σ τ_t``, so ``μ_i = sqrt(Σ_t min(‖U_tᵀ g_i‖, τ_t)² / τ_t²) / σ``.
    Computed from the private records in the clear: not covered by the DP
    guarantee, never to be released.

    Parameters
    ----------
    X, y_index, public_mask
        The training data of the fit (validated; ``y_index`` as in :func:`train`).
    theta_ref : ndarray
        The fit's pretrained parameters.
    iterates : ndarray of shape (steps, n_features + fit_intercept, n_outputs)
        The fit's iterates.
    clip_thresholds, subspace_dims : ndarray of shape (steps,)
        The fit's ``τ_t`` and noise dimensions.
    projection, adaptive_clipping : bool
        Whether the fit projected and clipped adaptively.
    noise_multiplier : float
        The fit's σ.
    params : dict
        The estimator's hyperparameters.
    name : str
        The estimator's name, for the messages.

    Returns
    -------
    mu : ndarray of shape (n_private,)
    """
    y_enc = LinearLoss("log_loss", theta_ref.shape[1]).encode(y_index)
    # λ and σ enter neither τ_t, U_t nor the clipped norms: the oracle's λ is 0.
    oracle = _private_oracle(X, y_enc, public_mask, _public_rows(X, public_mask), theta_ref,
                             projection, adaptive_clipping, 0.0, noise_multiplier, params)
    sens_sq = np.zeros(len(oracle.X_priv))
    for t, theta in enumerate(iterates):
        tau, n_dims, sens = oracle.sensitivities(theta)
        if (not math.isclose(tau, clip_thresholds[t], rel_tol=1e-9)
                or n_dims != subspace_dims[t]):
            raise ValueError(
                f"{name}.per_instance_epsilon: at step {t} the clip threshold and "
                f"subspace recomputed from the public records ({tau!r}, {n_dims}) differ "
                f"from the fit's ({clip_thresholds[t]!r}, "
                f"{subspace_dims[t]}). Pass the X, y and public_mask of fit, "
                "and do not change the hyperparameters after fitting."
            )
        sens_sq += sens
    return np.sqrt(sens_sq) / noise_multiplier

"""AdaMixClassifier: few public records, many private ones (AdaMix).

The private phase is full-batch noisy gradient descent run by the one engine
loop (:func:`sklearn_fdp._engine.run_dp_sgd` with ``sampling_rate=1``). What
AdaMix adds lives in the oracles below: at every step the public per-example
gradients give a subspace ``U_t`` and a clip threshold ``τ_t`` (both free,
they depend on public records and the released iterate only); the private
per-example gradients are projected onto ``U_t``, clipped to ``τ_t``, summed,
and noised with ``N(0, σ² τ_t² I_k)`` through the engine's ``noise_fn``.

With ``subspace="feature"`` and the full rank (the defaults) the subspace is
the row space of the public inputs at every step (the residual weights
``‖r_j‖`` are positive), so its basis and the private coordinates are
computed once per fit.

Per-example gradients of a linear model are outer products ``g_i = x~_i r_iᵀ``,
so the inner product of two of them is ``(x~_i·x~_j)(r_i·r_j)``. With few
public records the subspace is computed from the ``n_pub × n_pub`` Gram
matrix of the public gradients and private coordinates from the
``n_pub × n`` public/private Gram matrix: no ``n × d × k`` tensor is built.
"""

import math
import sys
from numbers import Integral, Real

import numpy as np
from scipy.special import expit, softmax
from sklearn.utils.validation import check_is_fitted

from .. import accounting
from .._engine import EngineConfig, LinearLoss, run_dp_sgd
from .. import _outofcore
from .._outofcore import (
    block_bounds,
    is_row_source,
    row_block_size,
    should_stream,
    validate_row_source,
)
from .._random import NOISE_OPTIONS, spawn_generators
from .._validation import (
    DELTA_CONSTRAINT,
    Interval,
    StrOptions,
    _fit_context,
    atomic_fit,
    check_delta_vs_n,
    check_row_norms_finite,
    encode_labels,
    validate_numeric_data,
)
from ..exceptions import BudgetExceededError
from ._base import BaseDPLinearClassifier

# Streams spawned from random_state, in this order.
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


def _residual(Z, y):
    """Residual ``r`` of the log loss (so that ``g_i = x~_i r_iᵀ``)."""
    if Z.shape[1] == 1:
        return (expit(Z[:, 0]) - y)[:, None]
    R = softmax(Z, axis=1)
    R[np.arange(len(y)), y] -= 1.0
    return R


class _PrivateRows:
    """The private records of an AdaMix fit, read in blocks of rows.

    Every pass over the private records (one per step) goes block by block,
    in memory as out of core, with the same blocks (about
    :data:`~sklearn_fdp._outofcore.CHUNK_BYTES` of float64 rows each), so
    the per-step sums are the same bit for bit either way.

    Parameters
    ----------
    X : ndarray or RowSource
        The private records (a float64 ndarray, ``rows=None``), or an
        out-of-core source of all records.
    rows : ndarray of int or None
        Sorted indices of the private records in the source.
    """

    def __init__(self, X, rows=None):
        self.X = X
        self.rows = None if rows is None else np.asarray(rows, dtype=np.intp)
        n = X.shape[0] if rows is None else len(self.rows)
        self.shape = (int(n), int(X.shape[1]))
        self.out_of_core = rows is not None
        self.bounds = list(block_bounds(n, row_block_size(X.shape[1], 8)))

    def __len__(self):
        return self.shape[0]

    def blocks(self):
        """Yield ``(j, start, stop, rows)``: block ``j``, private records ``start:stop``."""
        for j, (a, b) in enumerate(self.bounds):
            if self.rows is None:
                yield j, a, b, self.X[a:b]
            else:
                yield j, a, b, np.asarray(self.X.gather(self.rows[a:b]), dtype=np.float64)


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
        expects for the log loss). ``X_priv`` may also be a
        :class:`_PrivateRows` (private records read from disk block by block
        at every step).
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
        self._priv = (X_priv if isinstance(X_priv, _PrivateRows)
                      else _PrivateRows(np.ascontiguousarray(X_priv, dtype=np.float64)))
        icpt = 1.0 if fit_intercept else 0.0
        self.xn_priv = np.empty(len(X_priv))
        for _, a, b, Xb in self._priv.blocks():
            self.xn_priv[a:b] = np.sqrt(np.einsum("ij,ij->i", Xb, Xb) + icpt)
        self.xn_pub = np.sqrt(np.einsum("ij,ij->i", X_pub, X_pub) + icpt)
        n_pub, n_priv = len(X_pub), len(X_priv)
        n_rows = self.n_features + int(fit_intercept)
        # Out of core, per-record caches (the public x private Gram matrix, the
        # private coordinates of a fixed subspace) are kept only when they are
        # as small as one chunk of rows; otherwise they are recomputed block by
        # block at every step (the same values).
        cache_limit = (_outofcore.CHUNK_BYTES / 8 if self._priv.out_of_core else np.inf)
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
                                     for _, _, _, Xb in self._priv.blocks()]
        if (self.projection and self.use_gram and self._fixed_V is None and not self._fixed_full
                and n_pub * n_priv <= min(_MAX_CROSS_GRAM, cache_limit)):
            self.cross_gram = [self._x_cross(Xb) for _, _, _, Xb in self._priv.blocks()]
        # Per-step state; ``iterates`` (set by the caller) records every θ_t.
        self.iterates = None
        self.tau_history = []
        self.rank_history = []
        self._tau = 0.0
        self._map_back = None
        self._n_dims = 0
        self._theta_shape = theta_ref.shape

    # -- helpers -------------------------------------------------------------

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
        R_pub = _residual(self._decision(self.X_pub, theta), self.y_pub)
        pub_norms = self.xn_pub * np.linalg.norm(R_pub, axis=1)
        tau = self._tau_of(pub_norms) if len(pub_norms) or not self.adaptive_clipping else 0.0

        def residual(a, b, X_block):
            return _residual(self._decision(X_block, theta), self.y_priv[a:b])

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
        for j, a, b, X_block in self._priv.blocks():
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
        norms = np.concatenate([block(*args)[0] for args in self._priv.blocks()])
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
            R_pub = _residual(self._decision(self.X_pub, theta), self.y_pub)
            grad = self._outer_sum(self.X_pub, R_pub) / self.n_total
        if self.l2_regularization:
            grad += self.l2_regularization * (theta - self.theta_ref)
        return grad


def _rows(X, mask):
    """``X[mask]`` as a float64 ndarray, for an ndarray or an out-of-core source."""
    if is_row_source(X):
        return np.asarray(X.gather(np.flatnonzero(mask)), dtype=np.float64)
    return X[mask]


class _InverseTimeConfig(EngineConfig):
    """Engine settings with Algorithm 3's step size ``η_t = 2 / (λ (t + 1))``.

    ``t`` is 1-based in the supplement; the engine's ``t`` is 0-based.
    """

    def step_size(self, t):
        return 2.0 / (self.learning_rate * (t + 2))


class AdaMixClassifier(BaseDPLinearClassifier):
    """Logistic / softmax regression from a few public and many private records (AdaMix).

    A linear model on fixed features (e.g. embeddings of a pretrained
    network, or tabular features) is first trained on the records marked
    public (free), then refined by full-batch noisy gradient descent on all
    records. Each step projects every private per-example gradient onto a
    subspace computed from the public per-example gradients (``subspace``:
    their input directions, or the top-``k`` right singular subspace of the
    gradients themselves as in the paper), clips it at a
    percentile ``τ_t`` of the public gradient norms, and adds Gaussian noise
    ``N(0, σ² τ_t² I_k)`` to their sum; the public gradient and a pull
    ``λ (w − w_ref)`` towards the pretrained weights are added noise-free.
    The run is (ε, δ)-DP for the *private* records under add/remove of one
    private record: each step is a Gaussian mechanism with noise multiplier
    σ, and the number of steps is the largest whose composition spends at
    most ``epsilon``. Public records get no protection at all.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy budget of one call to ``fit``, in (0, inf). Sets the number
        of noisy steps ``T`` (the largest with ε(T) ≤ ``epsilon``).
    delta : float, default=1e-5
        δ of the guarantee, in (0, 1). Keep it well below ``1 / n_private``.
    noise_multiplier : float, default=20.0
        σ, > 0: the noise of every step has std ``σ τ_t``. Larger σ means
        more, noisier steps for the same ε; the paper uses 20 and found
        larger σ better (supplement §A.3).
    subspace_dim : int or "auto", default="auto"
        ``k``, the number of singular directions of the public subspace
        kept (``projection=True``; see ``subspace``). It cannot exceed the
        rank of the public gradients (at most the number of public records);
        a larger value is capped at that rank at every step. ``"auto"`` keeps
        every direction the public records span (the full rank). On
        validation splits of digits and MNIST-8k (50 public records, ε in
        {1, 3, 8}), k = 20 lost up to 1.2 points against the full rank
        (k = 50) at ε >= 3 and won at most 0.7 at ε = 1: for linear models
        on raw features the private signal outside a small public subspace
        matters more than the noise the projection removes.
    clip_percentile : float, default=90.0
        Percentile in (0, 100] of the public per-example gradient norms used
        as the clip threshold ``τ_t`` (``adaptive_clipping=True``).
    l2_regularization : float, default=1e-4
        λ >= 0 of the pull ``λ (w − w_ref)`` towards the publicly pretrained
        weights ``w_ref``, on the scale of the loss *averaged* over all
        records (the paper's 1e-2 multiplies the *summed* loss, i.e. about
        ``1e-2 / n`` here). On validation splits of digits and MNIST-8k,
        1e-4 and 1e-5 beat 1e-3 and 1e-2 (which holds the model near the
        few-shot ``w_ref``) by 2-5 points at ε = 8.
    public_epochs : int, default=200
        Full-batch gradient-descent steps of the public pretraining
        (noise-free; public records only; step ``1 / β``, see
        ``learning_rate``). 0 starts from zero weights.
    learning_rate : float or "auto", default="auto"
        Step size of the private phase. ``"auto"`` is ``4 / β`` with
        ``β = c max_j ‖x~_j‖² + λ`` over the *public* rows ``x~`` (with the
        intercept), ``c = 1/4`` (binary) or ``1/2`` (softmax): a worst-case
        smoothness bound of the averaged log loss; the factor 4 was measured
        on validation splits (1/β is too cautious for the few hundred steps
        σ = 20 allows). Ignored by the private phase of ``variant="theory"``.
    projection : bool, default=True
        Project private gradients onto the public subspace (see
        ``subspace``). False clips in the full parameter space and adds
        isotropic noise ``σ τ_t``.
    subspace : {"feature", "gradient"}, default="feature"
        Which public subspace ``projection`` uses. ``"gradient"``: the
        top-``k`` right singular subspace of the matrix of flattened public
        per-example gradients ``x~_j r_jᵀ`` (the paper's choice; rank at most
        the number of public records). ``"feature"``: all matrices ``V S``
        with ``V`` the top-``k`` left singular vectors of the public inputs
        weighted by their residual norms ``‖r_j‖`` (``k × n_classes``
        dimensions); it contains the gradient subspace, and equals it for
        binary problems. On validation splits of digits and MNIST-8k the
        gradient subspace lost 1-12 points against no projection; the
        feature subspace lost much less, and won at ε = 8 on digits.
    average : bool, default=True
        Return the average of the iterates of the second half of the run
        (post-processing) instead of the last one (``variant="practical"``).
    adaptive_clipping : bool, default=True
        Clip at the ``clip_percentile``-th percentile of the public gradient
        norms at every step. False clips at ``max_grad_norm``.
        ``projection=False, adaptive_clipping=False`` is NoisyGD.
    max_grad_norm : float, default=1.0
        Fixed clip norm when ``adaptive_clipping=False``; the Lipschitz bound
        ``L`` of ``variant="theory"``.
    variant : {"practical", "theory"}, default="practical"
        ``"practical"``: the algorithm above (main paper's Algorithm 2).
        ``"theory"``: the supplement's Algorithm 3 — no projection, no
        adaptive clipping, sensitivity ``L = max_grad_norm`` (the loss is
        assumed L-Lipschitz: for the log loss this holds when every row has
        ``‖x~‖ · r_max ≤ L``, with ``r_max = 1`` (binary) or ``sqrt(2)``
        (softmax), e.g. ``L = sqrt(2)`` for binary rows of norm ≤ 1 with an
        intercept), step size ``2 / (λ (t + 1))`` and the weighted average
        ``Σ_t 2t / (T (T + 1)) w_t``. λ is on the averaged loss, so this is
        Alg. 3 on the summed loss with λ n; the pretraining is the same GD as
        above (Alg. 3's one-pass SGD only serves its proof), and there is no
        projection onto a constraint set.
    fit_intercept : bool, default=True
        Fit an intercept; it is part of every per-example gradient.
    random_state : int, RandomState instance or None, default=None
        Seeds the noise; a fixed value reproduces ``coef_``.
    noise : {"default", "secure"}, default="default"
        Source of the randomness privacy rests on: the Gaussian noise of the steps
        (the private phase is full-batch). ``"default"``: NumPy PCG64 streams
        spawned from ``random_state`` (reproducible). ``"secure"``: fresh bits
        from the OS CSPRNG (``os.urandom``) and a Gaussian sampler hardened
        against floating-point attacks (four Box–Muller normals summed and halved,
        as in Opacus's ``secure_mode``); slower (user guide, "Secure noise"), and
        ``random_state`` no longer reproduces the fit. The accounting, and so
        ``epsilon_``, is the same.
    store_iterates : bool, default=False
        Keep every iterate ``θ_t`` of the private phase in ``iterates_``
        (``steps_ × (n_features + 1) × n_outputs`` floats), which
        :meth:`per_instance_epsilon` needs. The iterates are post-processing
        of the noisy steps, covered by ``epsilon_`` like ``coef_``.
    verbose : int, default=0
        Print the number of steps and the ε spent.
    classes : array-like of shape (n_classes,) or None, default=None
        Every label the task can have, a public list chosen without looking
        at ``y``; ``classes_`` is then this list (sorted) whatever ``y``
        holds, and a label of ``y`` outside it raises ``ValueError``. None:
        ``classes_`` is read from ``y`` and is not private (a label seen
        once, or missing, shows in it); give ``classes`` whenever the label
        is protected and some class may be rare.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` has string column names.
    pretrained_coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Weights ``w_ref`` after public pretraining (the public-only model).
    pretrained_intercept_ : ndarray of shape (1,) or (n_classes,)
    n_public_ : int
        Number of public records (``public_mask`` True).
    n_private_ : int
        Number of private records.
    projection_ : bool
        Whether projection ran (False when there were no public records).
    adaptive_clipping_ : bool
        Whether adaptive clipping ran.
    epsilon_ : float
        ε spent at ``delta_`` (≤ ``epsilon``).
    delta_ : float
    noise_multiplier_ : float
        σ used.
    steps_ : int
        Number of noisy steps ``T``.
    n_iter_ : int
        Same as ``steps_``.
    learning_rate_ : float
        Step size of the private phase (λ for ``variant="theory"``'s
        ``2 / (λ (t + 1))``).
    accountant_ : str
        ``"pld"``: dp-accounting's privacy-loss-distribution accountant.
    dp_event_ : dp_accounting.DpEvent
        ``SelfComposedDpEvent(GaussianDpEvent(σ), T)``, for re-accounting.
    clip_thresholds_ : ndarray of shape (steps_,)
        ``τ_t`` of every step (depends on public data and iterates only).
    subspace_dims_ : ndarray of shape (steps_,)
        Dimension of the subspace the noise lived in at every step (depends
        on public data and iterates only).
    iterates_ : ndarray of shape (steps_, n_features + fit_intercept, n_outputs)
        With ``store_iterates=True`` only: the iterate ``θ_t`` at which step
        ``t``'s gradients were taken (``iterates_[t, :n_features].T`` is a
        ``coef_``, row ``n_features`` the intercept; ``n_outputs`` is 1 for
        binary problems). Post-processing of the noisy steps.

    See Also
    --------
    DPSGDClassifier : DP-SGD when no record is public.

    Notes
    -----
    Privacy: unit = one private record (features and label); relation
    add/remove of a private record; public records (``public_mask`` True)
    are not protected, and which records are public is itself public. Each
    step releases the clipped (projected) private sum plus
    ``N(0, σ² τ_t² I)``: a Gaussian mechanism of sensitivity ``τ_t`` and
    noise multiplier σ whatever ``τ_t`` and ``U_t`` are, because both are
    functions of public records and of the released previous iterate. The
    ``T`` steps compose to μ-GDP with ``μ = sqrt(T) / σ`` (supplement,
    Lemma 8); ``epsilon_`` is dp-accounting's PLD value for ``T``
    self-composed Gaussian mechanisms (it agrees with the exact GDP
    conversion to about 1e-9). Treated as public: the numbers of public and
    private records, the class labels (``classes_``: read from ``y`` unless
    ``classes`` is given) and the hyperparameters. ``public_mask=None`` means no record is public: the fit
    then falls back to NoisyGD (``projection_`` and ``adaptive_clipping_``
    False, ``w_ref = 0``, clip at ``max_grad_norm``). Every fitted attribute
    is a function of the public records and the noisy steps: nothing computed
    from the private records in the clear is stored (the per-instance report,
    :meth:`per_instance_epsilon`, is computed on request and not kept).

    References
    ----------
    Golatkar, Achille, Wang, Roth, Kearns, Soatto, "Mixed Differential
    Privacy in Computer Vision", CVPR 2022 (AdaMix), and its supplement.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.preprocessing import Normalizer
    >>> from sklearn_fdp import AdaMixClassifier
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> X = Normalizer().fit_transform(X)
    >>> public = np.zeros(len(y), dtype=bool)
    >>> public[:40] = True
    >>> clf = AdaMixClassifier(epsilon=1.0, random_state=0, store_iterates=True)
    >>> bool(clf.fit(X, y, public_mask=public).epsilon_ <= 1.0)
    True
    >>> clf.per_instance_epsilon(X, y, public_mask=public).shape  # ex post, not released
    (1960,)
    """

    _parameter_constraints: dict = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": DELTA_CONSTRAINT,
        "noise_multiplier": [Interval(Real, 0, None, closed="neither")],
        "subspace_dim": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "clip_percentile": [Interval(Real, 0, 100, closed="right")],
        "l2_regularization": [Interval(Real, 0, None, closed="left")],
        "public_epochs": [Interval(Integral, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "projection": ["boolean"],
        "subspace": [StrOptions({"feature", "gradient"})],
        "adaptive_clipping": ["boolean"],
        "max_grad_norm": [Interval(Real, 0, None, closed="neither")],
        "average": ["boolean"],
        "variant": [StrOptions({"practical", "theory"})],
        "fit_intercept": ["boolean"],
        "random_state": ["random_state"],
        "noise": [StrOptions(set(NOISE_OPTIONS))],
        "store_iterates": ["boolean"],
        "verbose": ["verbose"],
        "classes": ["array-like", None],
    }

    _accept_sparse = False

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        noise_multiplier=20.0,
        subspace_dim="auto",
        clip_percentile=90.0,
        l2_regularization=1e-4,
        public_epochs=200,
        learning_rate="auto",
        projection=True,
        subspace="feature",
        adaptive_clipping=True,
        max_grad_norm=1.0,
        average=True,
        variant="practical",
        fit_intercept=True,
        random_state=None,
        noise="default",
        store_iterates=False,
        verbose=0,
        classes=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.subspace_dim = subspace_dim
        self.clip_percentile = clip_percentile
        self.l2_regularization = l2_regularization
        self.public_epochs = public_epochs
        self.learning_rate = learning_rate
        self.projection = projection
        self.subspace = subspace
        self.adaptive_clipping = adaptive_clipping
        self.max_grad_norm = max_grad_norm
        self.average = average
        self.variant = variant
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.noise = noise
        self.store_iterates = store_iterates
        self.verbose = verbose
        self.classes = classes

    # -- helpers -------------------------------------------------------------

    def _loss_name(self):
        return "log_loss"

    def _check_public_mask(self, public_mask, n_samples):
        name = type(self).__name__
        if public_mask is None:
            return np.zeros(n_samples, dtype=bool)
        mask = np.asarray(public_mask)
        if mask.dtype != bool:
            raise ValueError(
                f"`public_mask` of {name}.fit must be a boolean array (True = public "
                f"record), got dtype {mask.dtype} (first values {mask.ravel()[:5]!r}). "
                "Pass e.g. `public_mask=np.asarray(flags, dtype=bool)` or "
                "`public_mask=(source == 'public')`."
            )
        if mask.ndim != 1 or len(mask) != n_samples:
            raise ValueError(
                f"`public_mask` of {name}.fit must have one entry per row of X "
                f"({n_samples}), got shape {mask.shape}. Align it with X (in a "
                "Pipeline or GridSearchCV, request it with "
                "set_fit_request(public_mask=True) so it is split with X)."
            )
        n_pub = int(mask.sum())
        if n_pub == n_samples:
            raise ValueError(
                f"`public_mask` of {name}.fit marks all {n_samples} records public: "
                "nothing is private. Use a non-private estimator (e.g. "
                "sklearn.linear_model.LogisticRegression), or mark the private records False."
            )
        if n_pub == 0 and self.variant == "practical" and (
                self.projection or self.adaptive_clipping):
            raise ValueError(
                f"`public_mask` of {name}.fit marks no record public, but "
                f"projection={self.projection!r} and adaptive_clipping="
                f"{self.adaptive_clipping!r} need public records (their gradients give "
                "the subspace and the clip threshold). Mark some records public, or set "
                "projection=False and adaptive_clipping=False (NoisyGD), or pass "
                "public_mask=None."
            )
        return mask

    def _calibrate_steps(self, sigma):
        """Largest T with PLD ε(T Gaussian(σ) steps) ≤ epsilon, and its ε.

        The composition of T Gaussian mechanisms is exactly the Gaussian
        mechanism with noise multiplier ``σ / sqrt(T)`` (GDP, Lemma 8), so
        the exact T is found by bisection on the analytic Gaussian ε; it is
        then checked (and lowered if needed) with dp-accounting's PLD
        accountant, which is what ``epsilon_`` reports.
        """
        delta, target = float(self.delta), float(self.epsilon)

        def exact(T):
            return accounting.gaussian_epsilon(sigma / math.sqrt(T), delta)

        def pld(T):
            return accounting.epsilon_of_event(accounting.dpsgd_event(sigma, 1.0, T), delta,
                                               accountant="pld")

        if exact(1) > target:
            sigma_min = accounting.gaussian_noise_multiplier(target, delta)
            raise BudgetExceededError(
                f"{type(self).__name__}: even one step with noise_multiplier={sigma!r} "
                f"spends ε = {exact(1):.4g} > epsilon = {self.epsilon!r} at delta = "
                f"{self.delta!r}. Use noise_multiplier >= {sigma_min:.4g} (larger is "
                "better: more, noisier steps) or a larger epsilon."
            )
        lo, hi = 1, 2
        while exact(hi) <= target:
            lo, hi = hi, hi * 2
            if hi > _MAX_STEPS:
                raise BudgetExceededError(
                    f"{type(self).__name__}: epsilon={self.epsilon!r} with "
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
                f"{type(self).__name__}: one step spends ε = {spent:.4g} > epsilon = "
                f"{self.epsilon!r}. Raise noise_multiplier."
            )
        return steps, spent

    def _smoothness(self, X_pub, n_outputs):
        """β = c max_j ‖x~_j‖² + λ over the public rows (c = 1/4 binary, 1/2 softmax)."""
        icpt = 1.0 if self.fit_intercept else 0.0
        if len(X_pub):
            max_sq = float(np.max(np.einsum("ij,ij->i", X_pub, X_pub))) + icpt
        else:
            max_sq = 1.0 + icpt  # rows of norm <= 1 assumed
        curvature = 0.25 if n_outputs == 1 else 0.5
        return curvature * max_sq + self.l2_regularization

    def _auto_learning_rate(self, X_pub, n_outputs):
        """Step size of the private phase for ``learning_rate="auto"``: ``_AUTO_LR_FACTOR / β``."""
        return _AUTO_LR_FACTOR / self._smoothness(X_pub, n_outputs)

    def _pretrain(self, X_pub, y_pub, theta0, learning_rate):
        """Noise-free full-batch GD on the public records (free)."""
        if len(X_pub) == 0 or self.public_epochs == 0:
            return theta0
        oracle = _AdaMixOracle(
            X_pub[:0], y_pub[:0], X_pub, y_pub, theta0.shape[1], self.fit_intercept, 0.0,
            None, 100.0, False, False, 1.0, len(X_pub), 0.0, theta0,
        )
        config = EngineConfig(
            steps=int(self.public_epochs),
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

    # -- fit -----------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X, y, public_mask=None):
        """Pretrain on the public records, then run noisy GD on all of them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (public and private records). Rows should have a
            data-independent L2 bound (e.g. scaled to norm ≤ 1).
        y : array-like of shape (n_samples,)
            Class labels.
        public_mask : array-like of bool of shape (n_samples,), default=None
            True for public records (no protection; used for pretraining,
            the subspace and the clip threshold), False for private ones.
            Route it through a Pipeline or GridSearchCV with
            ``set_fit_request(public_mask=True)`` (metadata routing), so it is
            split together with ``X``. None: every record is private and the
            fit falls back to NoisyGD (see Notes).

        Returns
        -------
        self : AdaMixClassifier
        """
        name = type(self).__name__
        X, y = self._validate_training_data(X, y, reset=True)
        classes, y_index = encode_labels(self, y, self.classes)
        n_samples, n_features = X.shape
        mask = self._check_public_mask(public_mask, n_samples)
        theory = self.variant == "theory"
        if theory and self.l2_regularization <= 0:
            raise ValueError(
                f"variant='theory' of {name} needs l2_regularization > 0 (its step size "
                f"is 2 / (λ (t + 1))), got {self.l2_regularization!r}. Use e.g. 1e-2."
            )
        n_pub = int(mask.sum())
        n_priv = n_samples - n_pub
        check_delta_vs_n(self.delta, n_priv, name, stacklevel=4)

        n_outputs = 1 if len(classes) == 2 else len(classes)
        loss = LinearLoss("log_loss", n_outputs)
        y_enc = loss.encode(y_index)
        X_pub, y_pub = _rows(X, mask), y_enc[mask]
        sigma = float(self.noise_multiplier)
        steps, spent = self._calibrate_steps(sigma)

        n_rows = n_features + int(self.fit_intercept)
        theta0 = np.zeros((n_rows, n_outputs))
        lr = (self._auto_learning_rate(X_pub, n_outputs) if self.learning_rate == "auto"
              else float(self.learning_rate))
        # Pretraining is plain GD on the public loss: 1/β is a safe step for it.
        theta_ref = self._pretrain(X_pub, y_pub, theta0,
                                   1.0 / self._smoothness(X_pub, n_outputs))

        projection = bool(self.projection and n_pub > 0 and not theory)
        adaptive = bool(self.adaptive_clipping and n_pub > 0 and not theory)
        oracle = self._make_oracle(X, y_enc, mask, n_outputs, theta_ref, projection, adaptive)
        if self.store_iterates:
            oracle.iterates = np.empty((steps,) + theta_ref.shape)
        gens = spawn_generators(self.random_state, 2, noise=self.noise)
        common = dict(steps=steps, sampling_rate=1.0, noise_multiplier=sigma,
                      max_grad_norm=self.max_grad_norm, alpha=n_priv / n_samples)
        callback = None
        if theory:
            # Algorithm 3: J(w) = mean loss + λ/2 ‖w − w_ref‖², η_t = 2/(λ(t+1)),
            # w̄ = Σ_{t=1}^T 2t/(T(T+1)) w_t with w_1 = w_ref (post-processing).
            lam = float(self.l2_regularization)
            config = _InverseTimeConfig(learning_rate=lam, l2_regularization=lam, **common)
            oracle.theta_ref = np.zeros_like(theta_ref)
            # The engine adds λ v; in coordinates v = w − w_ref that is λ (w − w_ref).
            # The weights sum to 1, so w̄ = v̄ + w_ref, and v_1 = 0.
            shift = theta_ref
            private, public = self._shifted(oracle, shift)
            start = np.zeros_like(theta_ref)
            weights_sum = steps * (steps + 1) / 2.0
            average = np.zeros_like(theta_ref)

            def callback(t, theta):
                if t + 2 <= steps:  # after the engine's step t (0-based), theta is v_{t+2}
                    average[...] += theta * ((t + 2) / weights_sum)

            noise_fn = oracle.noise
        else:
            config = EngineConfig(learning_rate=lr,
                                  average_start=steps // 2 if self.average else None, **common)
            private, public, start, noise_fn, shift = (oracle, oracle.public_gradient,
                                                       theta_ref, oracle.noise, None)
        result = run_dp_sgd(
            start, private, n_priv, config, sample_rng=gens[_SAMPLE], noise_rng=gens[_NOISE],
            public_oracle=public, noise_fn=noise_fn, callback=callback,
        )
        theta = result.theta if not theory else average + shift
        # A check of the released (noisy) iterate and the public model only:
        # post-processing, no privacy cost. atomic_fit keeps any previous fit.
        if not (np.all(np.isfinite(theta)) and np.all(np.isfinite(theta_ref))):
            step = (f"l2_regularization={self.l2_regularization!r} (the step size is "
                    "2 / (λ (t + 1)))" if theory else f"learning_rate={self.learning_rate!r}")
            raise ValueError(
                f"Training of {name} diverged: the weights are not finite, with {step}. "
                "Lower the step size (learning_rate='auto' takes a safe one from the "
                "public records) and keep the rows scaled to a data-independent bound "
                "(e.g. L2 norm <= 1)."
            )
        if self.verbose:
            print(f"[{name}] {steps} noisy steps, ε spent {spent:.4g} (δ={self.delta:g}); "
                  f"{n_pub} public / {n_priv} private records", file=sys.stdout, flush=True)

        self.classes_ = classes
        self.coef_ = np.ascontiguousarray(theta[:n_features].T)
        self.intercept_ = theta[n_features].copy() if self.fit_intercept else np.zeros(n_outputs)
        self.pretrained_coef_ = np.ascontiguousarray(theta_ref[:n_features].T)
        self.pretrained_intercept_ = (theta_ref[n_features].copy() if self.fit_intercept
                                      else np.zeros(n_outputs))
        self.n_public_ = n_pub
        self.n_private_ = n_priv
        self.projection_ = projection
        self.adaptive_clipping_ = adaptive
        self.n_iter_ = steps
        self.steps_ = steps
        self.learning_rate_ = float(self.l2_regularization) if theory else lr
        self.noise_multiplier_ = sigma
        self.dp_event_ = accounting.dpsgd_event(sigma, 1.0, steps)
        self.epsilon_ = spent
        self.delta_ = float(self.delta)
        self.accountant_ = "pld"
        self.clip_thresholds_ = np.asarray(oracle.tau_history, dtype=float)
        self.subspace_dims_ = np.asarray(oracle.rank_history, dtype=int)
        # Nothing per private record is kept (issue 16 item 6): drop what an
        # earlier fit, or a model pickled by an older version, may carry.
        for stale in [a for a in vars(self) if a.startswith("per_instance")] + ["iterates_"]:
            self.__dict__.pop(stale, None)
        if self.store_iterates:
            self.iterates_ = oracle.iterates
        return self

    def _validate_training_data(self, X, y, reset):
        if should_stream(X):
            # A large numpy.memmap / dask array: checked in chunks; every step
            # reads the private records block by block (sklearn_fdp._outofcore).
            return validate_row_source(self, X, y, reset=reset)
        X, y = validate_numeric_data(self, X, y, dtype=[np.float64, np.float32], order="C",
                                     y_numeric=False, reset=reset)
        check_row_norms_finite(X, type(self).__name__)
        return np.asarray(X, dtype=np.float64), y

    def _make_oracle(self, X, y_enc, mask, n_outputs, theta_ref, projection, adaptive):
        """The private phase's oracle on the records of ``X`` (``mask``: public)."""
        theory = self.variant == "theory"
        subspace_dim = None if self.subspace_dim == "auto" else int(self.subspace_dim)
        X_priv = (_PrivateRows(X, np.flatnonzero(~mask)) if is_row_source(X) else X[~mask])
        return _AdaMixOracle(
            X_priv, y_enc[~mask], _rows(X, mask), y_enc[mask], n_outputs, self.fit_intercept,
            float(self.noise_multiplier), subspace_dim, self.clip_percentile, projection,
            adaptive, self.max_grad_norm, len(X), 0.0 if theory else self.l2_regularization,
            theta_ref, subspace=self.subspace,
        )

    @staticmethod
    def _shifted(oracle, shift):
        """Oracles in coordinates ``v = w − shift`` (so the engine's λ v is λ (w − w_ref))."""

        def private(idx, v):
            return oracle(idx, v + shift)

        def public(v):
            return oracle.public_gradient(v + shift)

        return private, public

    # -- per-instance DP -----------------------------------------------------

    def per_instance_epsilon(self, X, y, public_mask=None, *, delta=None):
        """Ex-post per-instance ε of every private training record (supplement Prop. 14).

        Needs the fit's iterates (``store_iterates=True``) and its training
        data, passed again: ``X``, ``y`` and ``public_mask`` must be those of
        ``fit``. At every stored iterate ``θ_t`` the step's ``U_t`` and ``τ_t``
        are recomputed from the public records (and checked against
        ``clip_thresholds_`` and ``subspace_dims_``, which catches most, not
        all, mismatched data; nothing can check the private rows). Record
        ``i`` entered step ``t`` with sensitivity ``min(‖U_tᵀ g_i(θ_t)‖, τ_t)``
        against noise ``σ τ_t``, so
        ``μ_i = sqrt(Σ_t min(‖U_tᵀ g_i‖, τ_t)² / τ_t²) / σ ≤ sqrt(T) / σ``,
        and ε_i is the analytic Gaussian mechanism's ε at
        ``delta`` for μ_i (:func:`sklearn_fdp.accounting.gdp_epsilon`, capped
        at ``epsilon_`` when ``delta`` is ``delta_``).

        **This is an ex-post, trajectory-dependent figure, not a per-instance
        DP (pGDP) guarantee.** The sensitivities are evaluated along the one
        trajectory that the noise happened to produce (and that record ``i``
        itself influenced); a guarantee must hold over all trajectories, and
        only ``epsilon_`` does. The figures are also computed from the private
        records in the clear: they are **not** covered by the DP guarantee
        (a small ε_i says that record was well fit). Use them to compare
        algorithms or settings on your own data; do not publish them, and do
        not keep them on the estimator (``privacy_report`` flags any
        ``per_instance*`` attribute as a non-private release).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training data of ``fit`` (public and private records).
        y : array-like of shape (n_samples,)
            Its labels.
        public_mask : array-like of bool of shape (n_samples,), default=None
            The ``public_mask`` of ``fit``.
        delta : float or None, default=None
            δ of the per-instance figure, in (0, 1); None uses ``delta_``.

        Returns
        -------
        epsilon : ndarray of shape (n_private_,)
            Ex-post ε of each private record, in the order of
            ``X[~public_mask]``. Nothing is stored on the estimator.
        """
        check_is_fitted(self)
        delta = self.delta_ if delta is None else float(delta)
        mu = self._per_instance_mu(X, y, public_mask)
        mu = np.minimum(mu, math.sqrt(self.steps_) / self.noise_multiplier_)
        eps = accounting.gdp_epsilon(mu, delta)
        if delta == self.delta_:
            eps = np.minimum(eps, self.epsilon_)
        return eps

    def _per_instance_mu(self, X, y, public_mask):
        """μ_i of every private record along the stored trajectory (see per_instance_epsilon)."""
        name = type(self).__name__
        iterates = getattr(self, "iterates_", None)
        if iterates is None:
            raise ValueError(
                f"{name}.per_instance_epsilon recomputes the per-record figures along the "
                "trajectory of the fit, which this estimator did not keep. Refit with "
                "store_iterates=True (the iterates are post-processing of the noisy steps, "
                "covered by epsilon_), then pass the training data again."
            )
        X, y = self._validate_training_data(X, y, reset=False)
        mask = self._check_public_mask(public_mask, len(X))
        if int(mask.sum()) != self.n_public_ or int((~mask).sum()) != self.n_private_:
            raise ValueError(
                f"{name}.per_instance_epsilon needs the training data of fit: got "
                f"{int(mask.sum())} public and {int((~mask).sum())} private records, the "
                f"fit had {self.n_public_} and {self.n_private_}."
            )
        _, y_index = encode_labels(self, y, self.classes_)
        n_outputs = self.coef_.shape[0]
        y_enc = LinearLoss("log_loss", n_outputs).encode(y_index)
        theta_ref = np.vstack([self.pretrained_coef_.T, self.pretrained_intercept_[None, :]])
        if not self.fit_intercept:
            theta_ref = theta_ref[:-1]
        oracle = self._make_oracle(X, y_enc, mask, n_outputs, theta_ref, self.projection_,
                                   self.adaptive_clipping_)
        sens_sq = np.zeros(self.n_private_)
        for t, theta in enumerate(iterates):
            tau, n_dims, sens = oracle.sensitivities(theta)
            if (not math.isclose(tau, self.clip_thresholds_[t], rel_tol=1e-9)
                    or n_dims != self.subspace_dims_[t]):
                raise ValueError(
                    f"{name}.per_instance_epsilon: at step {t} the clip threshold and "
                    f"subspace recomputed from the public records ({tau!r}, {n_dims}) differ "
                    f"from the fit's ({self.clip_thresholds_[t]!r}, "
                    f"{self.subspace_dims_[t]}). Pass the X, y and public_mask of fit, "
                    "and do not change the hyperparameters after fitting."
                )
            sens_sq += sens
        return np.sqrt(sens_sq) / self.noise_multiplier_

    def plot_per_instance_epsilon(self, X, y, public_mask=None, *, delta=None, ax=None,
                                  label=None, **hist_kwargs):
        """Histogram of :meth:`per_instance_epsilon` (needs matplotlib).

        The same warnings apply: the histogram is an ex-post figure computed
        from the private data, not covered by the DP guarantee.

        Parameters
        ----------
        X, y, public_mask : array-like
            The training data of ``fit`` (see :meth:`per_instance_epsilon`).
        delta : float or None, default=None
            δ of the per-instance figure; None uses ``delta_``.
        ax : matplotlib Axes or None, default=None
            Where to draw; None creates a new figure.
        label : str or None, default=None
            Legend label; default ``"AdaMixClassifier"``.
        **hist_kwargs
            Passed to ``ax.hist`` (e.g. ``bins``, ``alpha``).

        Returns
        -------
        ax : matplotlib Axes
        """
        import matplotlib.pyplot as plt

        eps = self.per_instance_epsilon(X, y, public_mask, delta=delta)
        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3.5))
        hist_kwargs.setdefault("bins", 40)
        hist_kwargs.setdefault("alpha", 0.6)
        ax.hist(eps, label=label or type(self).__name__, **hist_kwargs)
        ax.axvline(self.epsilon_, color="k", linestyle="--", linewidth=1)
        ax.set_xlabel("per-instance ε (ex post, not a guarantee)")
        ax.set_ylabel("private records")
        return ax

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

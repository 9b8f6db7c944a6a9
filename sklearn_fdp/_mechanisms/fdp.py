"""FDP Algorithm 1 for linear models: its oracles, streams and public steps.

The losses: the log loss (FeatureDPLogisticRegression) and the regression
losses of :class:`~sklearn_fdp._engine.LinearLoss` (FeatureDPSGDRegressor);
every per-example gradient is ``x~ rᵀ``, only the residual ``r`` differs.

The loss is split as ``ℓ = (ℓ − ℓ_pub) + ℓ_pub`` where ``ℓ_pub`` sees only
the public part of a record (FDP paper, §5):

* the *public view* ``x_pub`` of ``x`` keeps the public columns and sets the
  private ones to 0 (``"mask"``) or to fresh N(0, 1) draws
  (``"gaussian_pad"``, the Purchase100 construction of §6.2);
* with a public label, ``ℓ_pub(θ; x, y) = ℓ(θ; x_pub, y)``, whose gradient is
  ``x~_pub r_pubᵀ`` (``r_pub`` the residual at ``x_pub``);
* with a private label, a label-free ``∇ℓ_pub = x~_pub (p_pub − π)ᵀ`` with
  ``p_pub = softmax(θᵀ x~_pub)`` (``σ(z)`` for the binary model) and the
  uniform prior π: the label-DP case study of §5 (which has π = 0), centred
  so that its private remainder is smaller (see :func:`_public_residual`).
  For the squared error ``½ (z − y)²`` the gradient ``x~ (z − y)`` splits
  the same way: ``∇ℓ_pub = x~_pub z_pub`` (the label-free ``½ z_pub²``,
  centred at the target's public centre 0), private remainder
  ``x~ (z − y) − x~_pub z_pub``. The Huber and ε-insensitive residuals are
  not a label-free part plus a remainder; they need a public label.

The private per-example gradient ``x~ rᵀ − x~_pub r_pubᵀ`` is clipped without
being formed. Its coordinates split into two blocks: on the public columns
and the intercept ``x~`` and ``x~_pub`` agree (``x_P``), on the private ones
``x~`` holds ``x_Q`` and ``x~_pub`` the padding ``g`` (0 for ``"mask"``), so

    ∇ℓ − ∇ℓ_pub = [x_P (r − r_pub)ᵀ ;  x_Q rᵀ − g r_pubᵀ],

and its squared norm is the sum of the two blocks' squared norms, each a
product of squared norms of vectors computed directly (see
:func:`private_gradient_norms_sq`). It is never evaluated as the closed form
``‖a bᵀ − c dᵀ‖² = ‖a‖²‖b‖² + ‖c‖²‖d‖² − 2 (a·c)(b·d)``: with large public
columns the three terms are huge and nearly cancel, the private part is lost
in their rounding, and a record's "clipped" contribution reached 2.8 C
(issue 16 item 4). The clipped batch sum adds exactly the vectors whose
norms were bounded: ``X_Pᵀ(c ⊙ (R − R_pub))`` on the public block, and
``X_Qᵀ(c ⊙ R) − Gᵀ(c ⊙ R_pub)`` on the (narrow) private block, in float64.

Random streams: Gaussian padding is data-independent noise. The padding of
the *private* batch's ``ℓ_pub`` term and that of the *public* batch come from
two separate generators, and the public batches from a third. So neither the
public batches nor their padding ever depend on how many records the Poisson
sampler drew (Prop. 3: the public computation must not share coins with the
private sampling). Conditional on the sampling coins, the private batch's
padding is i.i.d. N(0, 1) exactly as if every record had been given its own
padding in advance, so each step is a mixture (over data-independent padding)
of Poisson-subsampled Gaussian mechanisms with per-example sensitivity
``max_grad_norm``, accounted as one. That argument needs the padding to be
*secret*: an attacker who can regenerate it couples D and D' (one record
removed) with every later record's padding shifted by one, and the private
sum moves by several ``max_grad_norm``. So the private batch's padding is a
private stream (a :class:`~sklearn_fdp._secure.SecureGenerator` with
``noise="secure"``, decided in :func:`alg1_oracles`); the public batch's
padding is public.

Public steps. The public gradient (line 6 of Algorithm 1, and the public
pretraining of Remark 2, :func:`public_pretraining`) is not clipped; the
fit divides ``X`` by :func:`public_scale`, a factor read from the public
columns only (free), so that those steps see rows of norm at most 1, and
maps the learnt weights back with :func:`unscale_weights`.
"""

import math

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, softmax
from sklearn.linear_model import LinearRegression, LogisticRegression

from .._engine import EngineConfig, UniformSampler, run_dp_sgd
from .._kernels import (
    binary_logistic_pass,
    clip_factors,
    clip_target,
    csr_keep_columns,
    csr_masked_squared_norms,
    dense_columns_csr_size,
    dense_columns_to_csr,
    dense_nnz_capped,
    dense_to_csr_capped,
    fdp_csr_private_sum,
    fdp_csr_public_sum,
    fdp_csr_step,
    fdp_csr_step_binary,
    loss_code,
)
from .._outofcore import (
    column_subset_squared_norms,
    iter_row_blocks,
    row_block_kind,
    map_rows,
    take_rows,
)
from .._random import secure_if
from .._validation import canonical_csr

PUBLIC_LOSSES = ("mask", "gaussian_pad")


# Dense X at most this dense is copied to CSR for the fused oracles. Measured
# on Adult (32,561 x 105, 11 % non-zeros; batches of ~1,444 rows, one
# thread): the numpy path (gather + BLAS) ~230 µs (private) + ~150 µs
# (public) a step; a fused pass over the dense rows was slower still
# (~650 + ~600 µs: a branch or a multiply per zero); over CSR rows it reads
# only the non-zeros.
_FUSED_MAX_DENSITY = 0.25


def _fused_rows(X):
    """``(indptr, indices, data)`` of ``X`` for the fused FDP kernels, or ``None``.

    CSR ``X`` (canonical, float64) as it is; in-memory dense float64 ``X``
    with at most ``_FUSED_MAX_DENSITY`` non-zeros as a CSR copy (made once);
    otherwise ``None`` (the numpy path: out-of-core or float32 data, dense
    data with many non-zeros).
    """
    if sp.issparse(X):
        if X.format == "csr" and X.dtype == np.float64:
            return X.indptr, X.indices, X.data
        return None
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64
            and X.size):
        return None
    # Count first (stopped once past the cap: dense X is read only in part),
    # then fill arrays of the exact size. Filling room for the densest X
    # accepted in one pass wrote and dropped 0.25 x 12 bytes per entry of
    # dense X, and kept that room alive for sparse X (issue 37).
    nnz = dense_nnz_capped(X, int(_FUSED_MAX_DENSITY * X.size))
    if nnz < 0:
        return None
    room = nnz + X.shape[1]
    index = np.int32 if room < np.iinfo(np.int32).max else np.int64
    indptr = np.empty(X.shape[0] + 1, dtype=index)
    indices = np.empty(room, dtype=index)
    data = np.empty(room, dtype=X.dtype)
    dense_to_csr_capped(X, indptr, indices, data)
    return indptr, indices[:nnz], data[:nnz]


def _dense_to_csr(X, cols, nnz):
    """CSR arrays of dense ``X[:, cols]`` with ``nnz`` non-zeros (:func:`dense_columns_to_csr`)."""
    index = np.int32 if nnz + len(cols) < np.iinfo(np.int32).max else np.int64
    indptr = np.empty(X.shape[0] + 1, dtype=index)
    indices = np.empty(nnz + len(cols), dtype=index)
    data = np.empty(nnz + len(cols), dtype=X.dtype)
    dense_columns_to_csr(X, cols, indptr, indices, data)
    return indptr, indices[:nnz], data[:nnz]


def fused_rows(X, public_loss):
    """The CSR rows the fused oracles would use for ``X`` (``None``: the numpy path).

    Made once per fit and passed to :func:`public_scale_norms`,
    :func:`alg1_oracles` and :func:`public_pretraining`, which would each
    read ``X`` whole otherwise.
    """
    return _fused_rows(X) if public_loss == "mask" else None


def public_scale_norms(rows, public_mask, X=None):
    """``‖x_i,pub‖²`` of every row from :func:`fused_rows` (float64).

    Without rows: those of ``X`` as the public view computes them
    (:func:`~sklearn_fdp._outofcore.column_subset_squared_norms`, read once
    for the public scale and the view, not twice), or ``None`` when ``X`` is
    not given either.
    """
    if rows is None:
        if X is None or not np.any(public_mask):
            return None
        return column_subset_squared_norms(X, np.flatnonzero(public_mask))
    indptr, indices, data = rows
    out = np.empty(indptr.shape[0] - 1, dtype=np.float64)
    csr_masked_squared_norms(indptr, indices, data,
                             np.asarray(public_mask, dtype=bool).astype(np.float64), out)
    return out


class _PublicView:
    """Decision values, norms and transposed products of ``x_pub`` for a batch."""

    def __init__(self, X, public_mask, public_loss, fit_intercept, rows=None,
                 pub_norm_sq=None):
        if public_loss not in PUBLIC_LOSSES:
            raise ValueError(f"Unknown public_loss {public_loss!r}; use one of {PUBLIC_LOSSES}.")
        self.X = X
        self.n_features = X.shape[1]
        self.public_mask = np.asarray(public_mask, dtype=bool)
        self.private_idx = np.flatnonzero(~self.public_mask)
        self.fit_intercept = bool(fit_intercept)
        self.mask_col = self.public_mask.astype(X.dtype)[:, None]
        self.pad = public_loss == "gaussian_pad" and len(self.private_idx) > 0
        # The "mask" view of in-memory float64 rows: the oracles run one fused
        # numba pass over the batch's CSR rows (no gather, no batch-sized
        # arrays); dense X is copied to CSR once when at most _FUSED_MAX_DENSITY
        # of it is non-zero (see _fused_rows). ``rows``: that copy, if made.
        self.csr = None if self.pad else (_fused_rows(X) if rows is None else rows)
        # ‖x_pub‖² over the public columns.
        if pub_norm_sq is None:
            pub_norm_sq = (public_scale_norms(self.csr, self.public_mask)
                           if self.csr is not None
                           else column_subset_squared_norms(X, np.flatnonzero(self.public_mask)))
        self.pub_norm_sq = pub_norm_sq
        # Private columns for padding: CSR keeps a (nnz-sized) copy; dense rows
        # are gathered per batch instead of copying X[:, private] whole.
        self.X_priv = X[:, self.private_idx] if self.pad and sp.issparse(X) else None
        if self.csr is not None:
            self.public_f64 = self.public_mask.astype(np.float64)
            self.pub_norm_sq_i = (self.pub_norm_sq.astype(np.float64)
                                  + (1.0 if self.fit_intercept else 0.0))
        self._public_rows = None

    def public_rows(self):
        """``csr`` with the public entries only (column indices kept), made once on first use."""
        if self._public_rows is None:
            indptr, indices, data = self.csr
            out_indptr = np.empty_like(indptr)
            out_indices = np.empty_like(indices)
            out_data = np.empty_like(data)
            nnz = csr_keep_columns(indptr, indices, data, self.public_mask, out_indptr,
                                   out_indices, out_data)
            self._public_rows = (out_indptr, out_indices[:nnz].copy(), out_data[:nnz].copy())
        return self._public_rows

    def draw_padding(self, m, rng, dtype):
        if not self.pad:
            return None
        return rng.standard_normal((m, len(self.private_idx))).astype(dtype, copy=False)

    def decision(self, Xb, theta, G):
        d = self.n_features
        Z = np.asarray(Xb @ (theta[:d] * self.mask_col))
        if G is not None:
            Z = Z + G @ theta[self.private_idx]
        if self.fit_intercept:
            Z = Z + theta[d]
        return Z

    def public_norm_sq(self, idx):
        """``‖x_P‖²`` per row: the public columns and the intercept, float64."""
        out = self.pub_norm_sq[idx].astype(np.float64)
        return out + (1.0 if self.fit_intercept else 0.0)

    def private_columns(self, idx, Xb):
        """The batch's private columns ``x_Q`` as a dense float64 array (m × p).

        ``Xb`` is the batch's rows (``take_rows(X, idx)``). The private
        columns are few, so the copy is small.
        """
        if self.X_priv is not None:
            Xq = self.X_priv[idx]
        else:
            Xq = Xb[:, self.private_idx]
        if sp.issparse(Xq):
            return Xq.toarray().astype(np.float64, copy=False)
        return np.asarray(Xq, dtype=np.float64)

    def add_transpose_product(self, Xb, W, G, out):
        """Add ``X~_pubᵀ W`` to ``out``."""
        d = self.n_features
        out[:d] += np.asarray(Xb.T @ W) * self.mask_col
        if G is not None:
            out[self.private_idx] += G.T @ W
        if self.fit_intercept:
            out[d] += W.sum(axis=0)
        return out


def private_gradient_norms_sq(pub_sq, D, R, R_pub, Xq, G):
    """``‖x~ rᵀ − x~_pub r_pubᵀ‖²`` per row, from non-negative orthogonal pieces (float64).

    Parameters
    ----------
    pub_sq : ndarray of shape (m,)
        ``‖x_P‖²``, the public columns and the intercept.
    D : ndarray of shape (m, k)
        ``R − R_pub``.
    R, R_pub : ndarray of shape (m, k)
        Residuals at ``x~`` and at the public view.
    Xq : ndarray of shape (m, p)
        The private columns ``x_Q``.
    G : ndarray of shape (m, p) or None
        The padding ``g`` of the private columns in the public view (None:
        ``"mask"``, ``g = 0``).

    Returns
    -------
    norm_sq : ndarray of shape (m,)

    Notes
    -----
    Public block: ``‖x_P (r − r_pub)ᵀ‖² = ‖x_P‖² ‖r − r_pub‖²``. Private
    block: ``‖x_Q rᵀ − g r_pubᵀ‖²``, which is ``‖x_Q‖² ‖r‖²`` for ``"mask"``.
    With padding, write ``g = β x_Q + w`` with ``β = (x_Q·g) / ‖x_Q‖²`` and
    ``w = g − β x_Q`` orthogonal to ``x_Q``: then ``x_Q rᵀ − g r_pubᵀ =
    x_Q (r − β r_pub)ᵀ − w r_pubᵀ``, two outer products with orthogonal left
    factors, so the block's squared norm is ``‖x_Q‖² ‖r − β r_pub‖² + ‖w‖²
    ‖r_pub‖²``. Every term is a product of squared norms of vectors formed
    directly (no difference of squared norms), so its rounding error is a
    few float64 units relative to the vectors it is made of: the size of the
    public columns never enters the private block, and cannot swamp it.
    """
    out = pub_sq * np.einsum("ij,ij->i", D, D)
    if Xq.shape[1] == 0:
        return out
    uu = np.einsum("ij,ij->i", Xq, Xq)
    if G is None:
        return out + uu * np.einsum("ij,ij->i", R, R)
    nonzero = uu > 0
    beta = np.divide(np.einsum("ij,ij->i", Xq, G), uu, out=np.zeros_like(uu), where=nonzero)
    W = G - beta[:, None] * Xq
    A = R - beta[:, None] * R_pub
    return (out + uu * np.einsum("ij,ij->i", A, A)
            + np.einsum("ij,ij->i", W, W) * np.einsum("ij,ij->i", R_pub, R_pub))


def label_free_error(loss_name, owner="FDP Algorithm 1"):
    """The message for a regression loss without a label-free public part."""
    return (f"{owner} with a private label needs loss='squared_error': its gradient "
            "x (z - y) splits into the label-free x z (public) and -x y; the residual of "
            f"loss={loss_name!r} is not such a sum. Use loss='squared_error', "
            "label_public=True, or method='dpsgd'.")


def label_prior(n_outputs):
    """The public, data-independent label prior π of the label-free public loss."""
    return 0.5 if n_outputs == 1 else 1.0 / n_outputs


def _public_residual(loss, Z_pub, y, label_public):
    """``r_pub`` (label public) or the label-free, prior-centred ``p_pub − π``.

    Regression with a private label (squared error only): ``z_pub``, the
    residual of ``½ z_pub²`` — the label-free part of ``½ (z − y)²`` at the
    target's public centre 0 (a target mapped to [-1, 1] by ``y_bounds``).

    With a private label, ``∇ℓ_pub = x~_pub (p_pub − π)ᵀ`` with the uniform
    prior π (1/2, or 1/K for K classes). The paper's label-free loss is
    π = 0; centring leaves the private part ``x~ (π − e_y)ᵀ`` (label DP,
    all features public), of norm ``‖x~‖ sqrt(1 − 1/K)`` instead of
    ``‖x~‖`` — it is never clipped at ``max_grad_norm = 1`` for rows of norm
    ≤ 1 in the binary case — and α < 1 then shrinks predictions towards π
    without moving the binary decision boundary of the stationary point.
    """
    if label_public:
        return loss.residual(Z_pub, y)
    if loss.is_regression:
        if loss.loss != "squared_error":
            raise ValueError(label_free_error(loss.loss))
        return np.asarray(Z_pub, dtype=Z_pub.dtype)
    prior = label_prior(loss.n_outputs)
    if loss.n_outputs == 1:
        return (expit(Z_pub[:, 0]) - prior)[:, None].astype(Z_pub.dtype, copy=False)
    return softmax(Z_pub, axis=1) - prior


def _bind_rows(oracle, X, y, loss, public_mask, label_public, public_loss, fit_intercept,
               pad_rng, view):
    """What both oracles of Algorithm 1 hold: the rows (canonical CSR: no duplicate
    entries in the norms, a no-op after validation), labels and loss, the public view
    (made here unless another oracle made it), the padding stream (required by
    ``"gaussian_pad"``) and the loss's kernel code. Returns the canonical rows."""
    X = canonical_csr(X)
    oracle.X = X
    oracle.y = y
    oracle.loss = loss
    oracle.label_public = bool(label_public)
    oracle.view = _PublicView(X, public_mask, public_loss, fit_intercept) if view is None \
        else view
    oracle.pad_rng = pad_rng
    if oracle.view.pad and pad_rng is None:
        raise ValueError("public_loss='gaussian_pad' needs a pad_rng.")
    oracle._code = loss_code(loss.loss, loss.n_outputs)
    oracle._y_kernel = np.asarray(y, dtype=np.float64)
    # The fused CSR passes know the log loss only; the regression losses take the numpy path.
    oracle._fused_loss = loss.loss == "log_loss"
    return X


class FeatureDPPrivateOracle:
    """Clipped sums of ``∇ℓ − ∇ℓ_pub`` per example (FDP Algorithm 1, line 4).

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n, d)
    y : ndarray
        Targets from :meth:`LinearLoss.encode`.
    loss : LinearLoss
        ``"log_loss"`` or a regression loss (with a private label:
        ``"squared_error"`` only).
    public_mask : ndarray of bool of shape (d,)
    label_public : bool
    public_loss : {"mask", "gaussian_pad"}
    fit_intercept : bool
    max_grad_norm : float
        Clip norm ``C`` (``np.inf``: no clipping, for tests).
    pad_rng : numpy.random.Generator, SecureGenerator or None
        Stream of the padding of the private batch's ``ℓ_pub`` term (needed
        for ``"gaussian_pad"``); nothing else may draw from it. A private
        stream: it must be as secret as the noise (see the module docstring).
    view : _PublicView or None
        The public view of this ``X`` with these settings, when another
        oracle already made it (:func:`alg1_oracles`; it reads every row).
    """

    def __init__(self, X, y, loss, public_mask, label_public, public_loss, fit_intercept,
                 max_grad_norm, pad_rng=None, view=None):
        if loss.loss == "hinge":
            raise ValueError("FDP oracles support the log loss and the regression losses, "
                             "not 'hinge'.")
        if loss.is_regression and not label_public and loss.loss != "squared_error":
            raise ValueError(label_free_error(loss.loss))
        X = _bind_rows(self, X, y, loss, public_mask, label_public, public_loss, fit_intercept,
                       pad_rng, view)
        self.fit_intercept = bool(fit_intercept)
        self.max_grad_norm = float(max_grad_norm)
        self.n_features = X.shape[1]
        # The public oracle whose batch this one computes in the same compiled
        # pass (see :meth:`fuse_public`), or None.
        self._partner = None

    def fuse_public(self, public):
        """Compute ``public``'s step in the same compiled pass as this oracle's (CSR path).

        For the engine's order of calls: ``self(idx, θ)``, then ``public(θ)``
        with the same ``θ``, every step. Each private call then also draws
        ``public``'s batch (from its own stream: the draws are the same
        whichever oracle makes them) and both sums are made by one
        :func:`~sklearn_fdp._kernels.fdp_csr_step` over the two batches' rows
        interleaved (:func:`~sklearn_fdp._kernels.fdp_csr_step_binary`, the
        same sums, for a binary model); ``public(θ)`` returns the sum so made. Both results are
        bit for bit those of the separate calls. Any other order raises.
        """
        if public.view is not self.view or public.loss is not self.loss:
            raise ValueError("fuse_public needs the public oracle of the same alg1_oracles.")
        self._partner = public
        return self

    def _fused(self, theta):
        return self.view.csr is not None and theta.dtype == np.float64 and self._fused_loss

    def _decision(self, Xb, theta):
        Z = np.asarray(Xb @ theta[: self.n_features])
        if self.fit_intercept:
            Z = Z + theta[self.n_features]
        return Z

    def per_example_norms(self, idx, theta, R, R_pub, G, Xb=None):
        """``‖x~ rᵀ − x~_pub r_pubᵀ‖`` per example (float64; :func:`private_gradient_norms_sq`)."""
        if Xb is None:
            Xb = take_rows(self.X, idx)
        R = np.asarray(R, dtype=np.float64)
        R_pub = np.asarray(R_pub, dtype=np.float64)
        G = None if G is None else np.asarray(G, dtype=np.float64)
        return np.sqrt(private_gradient_norms_sq(
            self.view.public_norm_sq(idx), R - R_pub, R, R_pub,
            self.view.private_columns(idx, Xb), G))

    def __call__(self, idx, theta):
        """Sum over ``idx`` of the private per-example gradients clipped to ``C``."""
        out = np.zeros_like(theta)
        if self._partner is not None and self._fused(theta):
            public = self._partner
            pub_idx = public.sampler.sample()
            pub_out = np.zeros_like(theta)
            if theta.shape[1] == 1:  # the same sums, specialised (and public entries only)
                fdp_csr_step_binary(
                    *self.view.csr, *self.view.public_rows(), np.asarray(idx, dtype=np.intp),
                    np.asarray(pub_idx, dtype=np.intp), self._y_kernel, theta,
                    self.fit_intercept, self.view.public_f64, self.view.pub_norm_sq_i,
                    self.label_public, label_prior(1), self.max_grad_norm, out, pub_out)
            else:
                fdp_csr_step(
                    *self.view.csr, np.asarray(idx, dtype=np.intp),
                    np.asarray(pub_idx, dtype=np.intp), self._y_kernel, theta, self._code,
                    self.fit_intercept, self.view.public_f64, self.view.pub_norm_sq_i,
                    self.label_public, label_prior(self.loss.n_outputs), self.max_grad_norm,
                    out, pub_out)
            pub_out /= len(pub_idx)
            public._hand_over(theta, pub_out)
            return out
        if len(idx) == 0:
            return out
        if self._fused(theta):
            fdp_csr_private_sum(
                *self.view.csr, np.asarray(idx, dtype=np.intp), self._y_kernel, theta,
                self._code, self.fit_intercept, self.view.public_f64, self.view.pub_norm_sq_i,
                self.label_public, label_prior(self.loss.n_outputs), self.max_grad_norm, out)
            return out
        Xb = take_rows(self.X, idx)
        yb = self.y[idx]
        G = self.view.draw_padding(len(idx), self.pad_rng, theta.dtype)
        R = self.loss.residual(self._decision(Xb, theta), yb).astype(np.float64)
        R_pub = _public_residual(self.loss, self.view.decision(Xb, theta, G), yb,
                                 self.label_public).astype(np.float64)
        G = None if G is None else G.astype(np.float64)
        D = R - R_pub
        Xq = self.view.private_columns(idx, Xb)
        scale = np.ones(len(idx))
        if np.isfinite(self.max_grad_norm):
            norms = np.sqrt(private_gradient_norms_sq(self.view.public_norm_sq(idx), D, R,
                                                      R_pub, Xq, G))
            # Aimed a few ulp below C in θ's dtype, the public block's, for
            # norms made of about d + 1 + 2k squares (issue 16 item 11).
            target = clip_target(self.max_grad_norm, theta.dtype,
                                 theta.shape[0] + 2 * theta.shape[1])
            clip_factors(norms, target, scale)
        scale = scale[:, None]
        # Sum exactly the vectors whose norms were bounded. Public block
        # x_P (c (r − r_pub))ᵀ: one product in θ's dtype (the private rows of
        # Xbᵀ W are computed and discarded; they are overwritten below).
        W = (scale * D).astype(theta.dtype)
        d = self.n_features
        out[:d] = np.asarray(Xb.T @ W) * self.view.mask_col
        if self.fit_intercept:
            out[d] = W.sum(axis=0)
        # Private block x_Q (c r)ᵀ − g (c r_pub)ᵀ, in float64 (p columns).
        if Xq.shape[1]:
            block = Xq.T @ (scale * R)
            if G is not None:
                block -= G.T @ (scale * R_pub)
            out[self.view.private_idx] = block
        return out


class FeatureDPPublicOracle:
    """Mean of ``∇ℓ_pub`` over a uniform public batch (FDP Algorithm 1, line 6).

    Uses only the public columns (and the label when it is public) and its
    own generators: ``sample_rng`` for the batches, ``pad_rng`` for the
    Gaussian padding. ``view``: as for :class:`FeatureDPPrivateOracle`.
    """

    def __init__(self, X, y, loss, public_mask, label_public, public_loss, fit_intercept,
                 batch_size, sample_rng, pad_rng=None, view=None):
        X = _bind_rows(self, X, y, loss, public_mask, label_public, public_loss, fit_intercept,
                       pad_rng, view)
        self.sampler = UniformSampler(X.shape[0], batch_size, sample_rng)
        # (θ, mean) of this step, made by the private oracle (fuse_public).
        self._pending = None

    def _hand_over(self, theta, mean):
        if self._pending is not None:
            raise RuntimeError("Fused FDP oracles: the private oracle ran twice without "
                               "the public one; call them in the engine's order.")
        self._pending = (theta, mean)

    def __call__(self, theta):
        if self._pending is not None:
            made_for, mean = self._pending
            self._pending = None
            if made_for is not theta:
                raise RuntimeError("Fused FDP oracles: the public oracle was called with "
                                   "another θ than the private one of this step.")
            return mean
        idx = self.sampler.sample()
        if self.view.csr is not None and theta.dtype == np.float64 and self._fused_loss:
            out = np.zeros_like(theta)
            fdp_csr_public_sum(*self.view.csr, np.asarray(idx, dtype=np.intp), self._y_kernel,
                               theta, self._code, self.view.fit_intercept,
                               self.view.public_f64, self.label_public,
                               label_prior(self.loss.n_outputs), out)
            out /= len(idx)
            return out
        Xb = take_rows(self.X, idx)
        G = self.view.draw_padding(len(idx), self.pad_rng, theta.dtype)
        R_pub = _public_residual(self.loss, self.view.decision(Xb, theta, G),
                                 self.y[idx], self.label_public)
        out = np.zeros_like(theta)
        self.view.add_transpose_product(Xb, R_pub, G, out)
        out /= len(idx)
        return out


def alg1_oracles(X, y, loss, *, public_mask, label_public, public_loss, fit_intercept,
                 max_grad_norm, public_batch_size, public_rng, noise, rows=None,
                 pub_norm_sq=None):
    """The private and public oracles of one run of Algorithm 1, with their streams.

    Three independent children of the public stream ``public_rng``: the
    public batches, their padding, and the padding of the private batch's
    ``ℓ_pub`` term. The last enters the private sum: who knows it can
    couple D and D' (one record removed) so that every later record's
    padding shifts, and the sum moves by several C. It is a private stream:
    from the OS CSPRNG when ``noise="secure"``, like the noise and the batch
    coins (issue 16 item 5). All three are still spawned, so the public
    streams are the same in both modes.

    ``rows`` and ``pub_norm_sq``: :func:`fused_rows` and
    :func:`public_scale_norms` of this ``X``, when the caller has them.

    Returns
    -------
    private_oracle : FeatureDPPrivateOracle
        Clips at ``max_grad_norm``.
    public_oracle : FeatureDPPublicOracle
        Uniform batches of ``public_batch_size`` rows.
    """
    sample_rng, pub_pad_rng, priv_pad_rng = public_rng.spawn(3)
    X = canonical_csr(X)
    view = _PublicView(X, public_mask, public_loss, fit_intercept, rows=rows,
                       pub_norm_sq=pub_norm_sq)
    private = FeatureDPPrivateOracle(
        X, y, loss, public_mask, label_public, public_loss, fit_intercept, max_grad_norm,
        pad_rng=secure_if(priv_pad_rng, noise), view=view,
    )
    # The same public view (its norms read every row once, not twice).
    public = FeatureDPPublicOracle(
        private.X, y, loss, public_mask, label_public, public_loss, fit_intercept,
        public_batch_size, sample_rng, pub_pad_rng, view=private.view,
    )
    return private, public


# -- the public steps' scale --------------------------------------------------------

# Public row norms up to 1 + this count as 1 in `public_scale`: rows scaled
# to norm 1 (e.g. by a Normalizer) round to 1 plus a few ulp, and must keep
# their fit bit for bit.
_PUBLIC_NORM_SLACK = 1e-6


def public_scale(X, public_mask, norms=None):
    """What ``X`` is divided by before public steps: ``max_i ‖x_i,pub‖`` if above 1, else 1.

    The public gradient (``∇ℓ_pub`` of Algorithm 1, public pretraining) is
    not clipped, and the step size rules assume rows of norm at most 1;
    beyond that the public steps overshoot and swamp the clipped private
    remainder (issue 22 item 5: X * 1000 trained a chance-level model). The
    factor reads the public columns only (public by declaration), so the
    rescaling costs no privacy; it is 1, and nothing changes, when every
    public row has norm at most 1. ``norms``: those squared norms, when the
    caller has them (:func:`public_scale_norms`).
    """
    cols = np.flatnonzero(public_mask)
    if len(cols) == 0:
        return 1.0
    if norms is None:
        norms = column_subset_squared_norms(X, cols)
    largest = math.sqrt(float(norms.max())) if len(norms) else 0.0
    return largest if largest > 1.0 + _PUBLIC_NORM_SLACK else 1.0


def _divide(X, factor):
    """``X / factor`` in ``X``'s dtype and format (dense, CSR or out-of-core), a new object."""
    factor = X.dtype.type(factor)
    if sp.issparse(X):
        out = X.copy()
        out.data /= factor
        return out
    return map_rows(X, lambda rows, idx: rows / factor, X.shape[1], X.dtype)


def rescaled_for_public_steps(X, public_mask, norms=None):
    """``(X / f, f)`` with ``f = public_scale(X, public_mask)``: the data the public steps see.

    ``X`` itself when ``f`` is 1. Out of core, the division is applied to
    each batch as it is read (:func:`~sklearn_fdp._outofcore.map_rows`).
    ``norms``: as for :func:`public_scale`.
    """
    factor = public_scale(X, public_mask, norms)
    return (X if factor == 1.0 else _divide(X, factor)), factor


def unscale_weights(theta, factor, n_features):
    """Weights for ``X`` from those learnt on ``X / factor`` (the intercept row kept)."""
    if factor == 1.0:
        return theta
    theta = theta.astype(np.float64)
    theta[:n_features] /= factor  # shrinks: stays finite
    return theta


# -- public pretraining (Remark 2) ----------------------------------------------------

# Step size of the noise-free public pretraining when learning_rate="auto":
# the value the "auto" rule takes once noise is negligible (for the
# regression losses, the cap of their rule: see resolve_regression_learning_rate).
_PRETRAIN_AUTO_LR = 4.0
_PRETRAIN_AUTO_LR_REGRESSION = 1.0


# The public minimiser is found by Newton's method (scikit-learn's
# "newton-cholesky") on a CSR copy of the public columns when they are at
# most this dense (one-hot blocks: Adult's 83 public columns have 12 %
# non-zeros) and not too many for a p x p Hessian; else by L-BFGS on them as
# given. Measured on Adult (32,561 x 83 public, one thread): L-BFGS on the
# dense block 0.13 s (47 iterations, stopped at its gradient tolerance),
# Newton on CSR 0.025 s (4 iterations, to the minimiser).
_NEWTON_MAX_DENSITY = 0.25
_NEWTON_MAX_COLUMNS = 1000
# ... counted over the output columns: scikit-learn's multinomial Newton
# factorises a Hessian of about (p k)² entries, so with k = 100 classes and
# 100 public columns (Purchase-like) one fit took minutes instead of seconds
# (issue 20's benchmarks); L-BFGS, the solver before issue 18, there.


# Newton's method on the binary public loss, compiled (binary_logistic_pass):
# scikit-learn's NewtonCholeskySolver step for step — its tolerance on the
# gradient and the Newton decrement, its backtracking line search (Armijo
# constant 2**-11, halving, 21 tries) — on the rows in place (float64 data,
# two classes, the columns within _NEWTON_MAX_COLUMNS and, for dense X not
# already copied to CSR, within _NEWTON_MAX_DENSITY). Measured on Adult
# (32,561 rows, 83 public columns, one thread): ~13 ms (5 passes of ~2.6 ms,
# most of it the exp and log1p of each row), where
# LogisticRegression(solver="newton-cholesky") on the CSR copy took ~25 ms
# (the same 4 iterations; coefficients equal to ~1e-12). Whatever it cannot follow (an ill-conditioned
# Hessian, a failed line search, a saturated Hessian, no convergence) it
# leaves to scikit-learn, which then runs from the start as before.
_NEWTON_TOL = 1e-4  # LogisticRegression's default tol
_NEWTON_MAX_ITER = 1000
_ARMIJO, _BACKTRACK, _LINE_SEARCH_TRIES = 2.0 ** -11, 0.5, 21


def _binary_newton(indptr, indices, data, colmap, n_columns, y, fit_intercept, C=1.0):
    """Coefficients ``[w, b]`` of ``LogisticRegression(C=C)`` on the mapped columns, or ``None``.

    The minimiser of ``(1/n) Σ log-loss + ‖w‖² / (2 C n)`` over the columns
    ``j`` of the CSR rows with ``colmap[j] < n_columns`` (the others ignored),
    by the iterations of scikit-learn's ``newton-cholesky`` solver for
    binary ``y`` (0 / 1). ``None`` where that solver would leave Newton's
    method (then :func:`public_minimiser` runs scikit-learn itself).
    """
    import warnings

    from scipy.linalg import LinAlgError, LinAlgWarning, solve

    n = indptr.shape[0] - 1
    m = n_columns + int(fit_intercept)
    l2_reg = 1.0 / (C * n)
    longest = int(np.max(np.diff(indptr))) if n else 0
    cols = np.empty(max(longest, 1), dtype=np.int64)
    vals = np.empty(max(longest, 1), dtype=np.float64)
    coef = np.zeros(m)
    grad, hess = np.empty(m), np.empty((m, m))
    new_grad, new_hess = np.empty(m), np.empty((m, m))
    args = (indptr, indices, data, colmap, y)
    loss, saturated = binary_logistic_pass(*args, coef, fit_intercept, l2_reg, True, cols, vals,
                                           grad, hess)
    tiny = 16 * np.finfo(np.float64).eps
    for _ in range(_NEWTON_MAX_ITER):
        if saturated > 0.25 or not np.isfinite(loss):
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", LinAlgWarning)
                step = solve(hess, -grad, check_finite=False, assume_a="sym")
        except (LinAlgError, LinAlgWarning, ValueError):
            return None
        armijo = _ARMIJO * float(grad @ step)
        t = 1.0
        for _ in range(_LINE_SEARCH_TRIES):
            trial = coef + t * step
            new_loss, saturated = binary_logistic_pass(*args, trial, fit_intercept, l2_reg, True,
                                                       cols, vals, new_grad, new_hess)
            change = new_loss - loss
            if change <= t * armijo:
                break
            if (abs(change) <= abs(loss * tiny)
                    and np.abs(new_grad).sum() < np.abs(grad).sum()):
                break
            t *= _BACKTRACK
        else:
            return None
        decrement = 0.5 * float(step @ hess @ step)  # at the previous point, as scikit-learn
        coef, loss = trial, new_loss
        grad, new_grad = new_grad, grad
        hess, new_hess = new_hess, hess
        if np.max(np.abs(grad)) <= _NEWTON_TOL and decrement <= _NEWTON_TOL:
            return coef
    return None


# Rows per chunk of the copy-free L-BFGS on dense public columns (about 8 MiB
# of float64 a chunk: one chunk's decision values and residuals at a time).
_LBFGS_CHUNK_BYTES = 8 * 2**20


def _dense_public_columns(X, public_idx):
    """Whether :func:`_public_design` would copy ``X``'s public columns dense (L-BFGS).

    Float64 ``X`` out of core (a row source), or in memory and dense with public
    columns too many for Newton's Hessian or denser than ``_NEWTON_MAX_DENSITY``.
    """
    kind = row_block_kind(X)
    if kind is None or X.dtype != np.float64:
        return False
    if kind == "source":
        return True
    if not X.size:
        return False
    if len(public_idx) > _NEWTON_MAX_COLUMNS:
        return True
    cols = np.asarray(public_idx, dtype=np.intp)
    return dense_columns_csr_size(X, cols) > _NEWTON_MAX_DENSITY * X.shape[0] * len(cols)


def _binary_lbfgs_in_place(X, public_idx, y, fit_intercept, C=1.0):
    """Coefficients ``[w, b]`` of ``LogisticRegression(C=C, solver="lbfgs")`` on ``X[:, public_idx]``.

    Binary ``y`` (0 / 1), dense ``X`` read in row blocks
    (:func:`~sklearn_fdp._outofcore.iter_row_blocks`: views in memory, reads
    out of core, the same blocks and so the same sums bit for bit): no copy
    of the public columns (issue 37: at a million rows that copy was most of
    the fit's extra memory, and made twice). The same objective,
    optimiser and options as scikit-learn's ``lbfgs`` solver (``(1/n) Σ
    log-loss + ‖w‖² / (2 C n)``, SciPy's L-BFGS-B with ``maxls=50``, ``gtol``
    1e-4, ``ftol`` 64 ε, from zero); the sums are taken chunk by chunk over
    every column with zero weights on the private ones, so the coefficients
    agree with scikit-learn's up to rounding and the solver's tolerance.
    """
    import warnings

    from scipy.optimize import minimize
    from sklearn.exceptions import ConvergenceWarning

    n, d = X.shape
    p = len(public_idx)
    l2_reg = 1.0 / (C * n)
    w_full = np.zeros(d)
    g_full = np.empty(d)

    def loss_gradient(w):
        w_full[public_idx] = w[:p]
        b = w[p] if fit_intercept else 0.0
        g_full[:] = 0.0
        loss = grad_b = 0.0
        for start, Xc in iter_row_blocks(X, _LBFGS_CHUNK_BYTES):
            yc = y[start:start + Xc.shape[0]]
            z = Xc @ w_full
            z += b
            loss += float(np.sum(np.logaddexp(0.0, z) - yc * z))
            r = expit(z)
            r -= yc
            g_full[:] += r @ Xc
            grad_b += float(r.sum())
        grad = np.empty_like(w)
        grad[:p] = g_full[public_idx] / n + l2_reg * w[:p]
        if fit_intercept:
            grad[p] = grad_b / n
        return loss / n + 0.5 * l2_reg * float(w[:p] @ w[:p]), grad

    result = minimize(loss_gradient, np.zeros(p + int(fit_intercept)), method="L-BFGS-B",
                      jac=True, options={"maxiter": _NEWTON_MAX_ITER, "maxls": 50,
                                         "gtol": _NEWTON_TOL,
                                         "ftol": 64 * np.finfo(float).eps})
    if not result.success:
        warnings.warn(f"Public pretraining: L-BFGS stopped before converging ({result.message}).",
                      ConvergenceWarning, stacklevel=4)
    return result.x


def _public_newton_rows(X, public_idx, rows, design=None):
    """``(indptr, indices, data, colmap)`` for :func:`_binary_newton`, or ``None``.

    ``rows`` (:func:`fused_rows`, float64 CSR of every column) are read in
    place with a column map; otherwise the CSR copy of :func:`_public_design`
    (when it picks Newton and is float64). ``design``: that function's result,
    when the caller has it (it copies the public columns).
    """
    if rows is not None:
        colmap = np.full(X.shape[1], len(public_idx), dtype=np.int64)  # = ignored
        colmap[public_idx] = np.arange(len(public_idx))
        return (*rows, colmap)
    Xp, solver = _public_design(X, public_idx) if design is None else design
    if solver != "newton-cholesky" or Xp.dtype != np.float64:
        return None
    Xp = canonical_csr(Xp)
    return Xp.indptr, Xp.indices, Xp.data, np.arange(len(public_idx), dtype=np.int64)


def _public_design(X, public_idx, rows=None, n_outputs=1):
    """``(X[:, public_idx], solver)``: a CSR copy and Newton when sparse enough, else L-BFGS.

    ``rows``: :func:`fused_rows` of ``X``, when the caller has them.
    ``n_outputs``: columns of θ (1 for two classes, k for k > 2). A dense
    copy is C-ordered, as scikit-learn's solvers take it (``X[:, idx]`` is
    F-ordered, and ``LogisticRegression`` copied it again).
    """
    if len(public_idx) * n_outputs > _NEWTON_MAX_COLUMNS:
        return _dense_columns(X, public_idx), "lbfgs"
    if rows is not None:
        indptr, indices, data = rows
        full = sp.csr_matrix((data, indices, indptr), shape=X.shape)
        return full[:, public_idx], "newton-cholesky"
    if sp.issparse(X):
        return sp.csr_matrix(X[:, public_idx]), "newton-cholesky"
    if isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind == "f" and X.size:
        cols = np.asarray(public_idx, dtype=np.intp)
        nnz = dense_columns_csr_size(X, cols)
        if nnz <= _NEWTON_MAX_DENSITY * X.shape[0] * len(cols):
            indptr, indices, data = _dense_to_csr(X, cols, nnz)
            return sp.csr_matrix((data, indices, indptr), shape=(X.shape[0], len(cols))), \
                "newton-cholesky"
    return _dense_columns(X, public_idx), "lbfgs"


def _dense_columns(X, cols):
    """``X[:, cols]``, C-ordered when ``X`` is an in-memory array (one copy, not two)."""
    if isinstance(X, np.ndarray):
        return np.take(X, np.asarray(cols, dtype=np.intp), axis=1)
    return X[:, cols]


def public_minimiser(X, y, theta0, public_mask, fit_intercept, loss=None, rows=None):
    """Minimiser of the masked public loss: logistic regression on the public columns.

    Uses the public columns and the (public) label only, so it is free
    (Remark 2). With ``public_loss="gaussian_pad"`` it is the minimiser
    of the masked loss, a close start for the padded one. Scikit-learn's
    ``LogisticRegression`` (default L2 penalty ``C = 1``), by Newton's
    method on sparse public columns (compiled for two classes:
    :func:`_binary_newton`, scikit-learn's iterations) and L-BFGS otherwise
    (see ``_NEWTON_MAX_DENSITY``). ``rows``: :func:`fused_rows` of ``X``, if made.
    For a regression ``loss``: least squares on the public columns
    (scikit-learn's ``LinearRegression``), the minimiser for
    ``"squared_error"`` and a close start for ``"huber"`` and
    ``"epsilon_insensitive"``.
    """
    public_idx = np.flatnonzero(public_mask)
    theta = theta0.copy()
    if len(public_idx) == 0:
        return theta
    design = None  # _public_design's (copy, solver), when made
    if loss is not None and loss.is_regression:
        model = LinearRegression(fit_intercept=fit_intercept)
        # A plain in-memory copy, so that a memmap (out-of-core) X and an
        # ndarray take the same path through scikit-learn, bit for bit.
        Xp = _dense_columns(X, public_idx) if not sp.issparse(X) else X[:, public_idx]
        if not sp.issparse(Xp):
            Xp = np.asarray(Xp, dtype=np.float64, order="C")  # copied once, not twice
        model.fit(Xp, y)
        theta[public_idx, 0] = np.ravel(model.coef_).astype(theta.dtype)
        if fit_intercept:
            theta[X.shape[1], 0] = theta.dtype.type(model.intercept_)
        return theta
    yv = np.asarray(y, dtype=np.float64)
    # Both classes present (else scikit-learn raises, as it did before).
    both = theta.shape[1] == 1 and yv.size and yv.min() == 0.0 and yv.max() == 1.0
    if both and rows is None and _dense_public_columns(X, public_idx):
        coef = _binary_lbfgs_in_place(X, public_idx, yv, fit_intercept)
        theta[public_idx, 0] = coef[:len(public_idx)].astype(theta.dtype)
        if fit_intercept:
            theta[X.shape[1], 0] = theta.dtype.type(coef[-1])
        return theta
    if (theta.shape[1] == 1 and len(public_idx) <= _NEWTON_MAX_COLUMNS
            and X.dtype == np.float64
            and (rows is not None or sp.issparse(X) or isinstance(X, np.ndarray))):
        if both and rows is None:  # the design below, made once
            design = _public_design(X, public_idx)
        newton = _public_newton_rows(X, public_idx, rows, design) if both else None
        coef = None if newton is None else _binary_newton(
            *newton, len(public_idx), np.ascontiguousarray(yv), fit_intercept)
        if coef is not None:
            theta[public_idx, 0] = coef[:len(public_idx)].astype(theta.dtype)
            if fit_intercept:
                theta[X.shape[1], 0] = theta.dtype.type(coef[-1])
            return theta
    Xp, solver = (_public_design(X, public_idx, rows, n_outputs=theta.shape[1])
                  if design is None else design)
    del design  # Xp only: the Newton attempt's copy is not kept twice
    model = LogisticRegression(fit_intercept=fit_intercept, max_iter=1000, solver=solver)
    model.fit(Xp, y)
    theta[public_idx] = model.coef_.T.astype(theta.dtype)
    if fit_intercept:
        theta[X.shape[1]] = model.intercept_.astype(theta.dtype)
    return theta


def public_pretraining(X, y, loss, theta0, rng, *, epochs, public_mask, label_public,
                       public_loss, fit_intercept, batch_size, learning_rate, lr_schedule,
                       momentum, l2_regularization, rows=None):
    """Start of the private run after public pretraining (Remark 2): ``ℓ_pub`` only, no noise.

    ``epochs="auto"``: :func:`public_minimiser` when the label is public,
    ``theta0`` otherwise (the label-free ``ℓ_pub`` has no minimiser). A
    number: that many passes of noise-free SGD on ``ℓ_pub`` over uniform
    batches of ``batch_size`` rows (step ``learning_rate``, or
    ``_PRETRAIN_AUTO_LR`` for ``"auto"``, ``_PRETRAIN_AUTO_LR_REGRESSION``
    for a regression loss). ``rng`` is a stream nothing else
    draws from; only public data is read, so it costs no privacy. ``rows``:
    :func:`fused_rows` of ``X``, if made.
    """
    if epochs == "auto":
        return public_minimiser(X, y, theta0, public_mask, fit_intercept, loss, rows) \
            if label_public else theta0
    if epochs <= 0:
        return theta0
    n_samples = X.shape[0]
    sample_rng, pad_rng = rng.spawn(2)
    public = FeatureDPPublicOracle(X, y, loss, public_mask, label_public, public_loss,
                                   fit_intercept, batch_size, sample_rng, pad_rng)
    steps = max(1, math.ceil(epochs * n_samples / batch_size))
    auto_lr = _PRETRAIN_AUTO_LR_REGRESSION if loss.is_regression else _PRETRAIN_AUTO_LR
    lr = auto_lr if learning_rate == "auto" else float(learning_rate)
    config = EngineConfig(
        steps=steps,
        sampling_rate=1.0,  # the "private" part below is identically zero
        noise_multiplier=0.0,
        max_grad_norm=np.inf,
        learning_rate=lr,
        lr_schedule=lr_schedule,
        momentum=momentum,
        alpha=0.0,
        l2_regularization=l2_regularization,
    )
    result = run_dp_sgd(
        theta0,
        lambda idx, theta: np.zeros_like(theta),
        n_samples,
        config,
        sample_rng=rng,
        noise_rng=rng,
        public_oracle=public,
    )
    return result.theta

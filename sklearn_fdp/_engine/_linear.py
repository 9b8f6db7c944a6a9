"""Per-example gradients of linear models, clipped without materialising them.

For a linear model with parameters ``theta = [W; b]`` (``d + 1`` rows when
there is an intercept, ``k`` columns) and augmented input ``x~ = (x, 1)``,
every per-example gradient of a margin or softmax loss is an outer product
``g_i = x~_i r_i^T`` where ``r_i`` is the loss's *residual*. Hence

    ||g_i|| = ||x~_i|| * ||r_i||,

and the clipped batch sum is ``X~^T diag(c) R`` with ``c_i = min(1, C/||g_i||)``:
two matrix products, for dense and CSR ``X`` alike. No ``batch x d x k``
tensor is ever built.

:class:`LinearGradientOracle` computes it with the numba kernels of
:mod:`sklearn_fdp._kernels`, on one of three paths (see ``_dense_path``):

* ``"csr"``: CSR input, one fused numba pass over the batch's non-zeros
  (decision values, residual, norm, clip factor, accumulation);
* ``"blas"``: dense input: gather the batch, two BLAS matrix products
  around the numba clipping kernel (``clip_residuals``);
* ``"fused"``: dense input whose gathered batch would be large: the fused
  numba pass, which reads the rows in place and allocates nothing of size
  ``batch x d``.

``X`` may also be an out-of-core :class:`~sklearn_fdp._outofcore.RowSource`
(a large memmap or dask array): the batch's rows are then read from it
(``gather``) and go through the same two dense paths, the fused one in
sub-batches, with the same results bit for bit.
"""

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, softmax

from .._kernels import (
    RESIDUAL_MAX,
    SQRT_TINY,
    clip_residuals,
    csr_clipped_sum,
    dense_clipped_sum,
    loss_code,
)
from .._outofcore import addressable_rows, squared_row_norms, take_rows
from .._validation import canonical_csr

# Dense path rule. Measured on the 2-core x86_64 reference machine (OpenBLAS,
# one thread, batch 256, random rows of a 20,000-row matrix; median µs per
# call, fused / BLAS):
#   d=105: k=1 76/61, k=2 195/69, k=16 247/118, k=100 850/471  (float64)
#   d=600: k=1 284/191, k=2 891/211, k=16 1120/503, k=100 6389/1987
#   float32 is the same picture with BLAS further ahead (d=600, k=100:
#   5031/951).
# BLAS wins at every shape tried: the batch gather is cheap next to the
# products, and without fastmath the fused loop's reductions do not
# vectorise. So dense batches go through BLAS, unless gathering them would
# allocate more than this many bytes (huge d or batch), where the fused pass
# avoids the copy.
FUSED_MIN_GATHER_BYTES = 64 * 2**20

LOSSES = ("log_loss", "hinge")
# sklearn's SGDRegressor names; one output column, the target a real number.
REGRESSION_LOSSES = ("squared_error", "huber", "epsilon_insensitive")


class LinearLoss:
    """Residual of a linear model's loss, for classification and regression.

    Parameters
    ----------
    loss : {"log_loss", "hinge", "squared_error", "huber", "epsilon_insensitive"}
        ``"log_loss"``: logistic (k = 1) or multinomial softmax (k > 1).
        ``"hinge"``: ``max(0, 1 - y z)`` with ``y`` in {-1, +1} (k = 1), or
        the Crammer–Singer multiclass hinge (k > 1). Regression (k = 1, the
        target ``y`` a real number): ``"squared_error"`` ``½ (z − y)²``
        (residual ``z − y``), ``"huber"`` (residual ``clip(z − y, −ε, ε)``),
        ``"epsilon_insensitive"`` ``max(0, |z − y| − ε)`` (residual
        ``sign(z − y) 1[|z − y| > ε]``).
    n_outputs : int
        Number of columns ``k`` of the parameter matrix (1 for binary and
        for regression).
    margin : float, default=0.0
        ε of ``"huber"`` and ``"epsilon_insensitive"``, in the units of the
        target the oracle sees; ignored by the other losses.
    """

    def __init__(self, loss, n_outputs, margin=0.0):
        if loss not in LOSSES + REGRESSION_LOSSES:
            raise ValueError(f"Unknown loss {loss!r}; use one of {LOSSES + REGRESSION_LOSSES}.")
        if loss in REGRESSION_LOSSES and int(n_outputs) != 1:
            raise ValueError(f"The regression loss {loss!r} has one output column, "
                             f"got n_outputs={n_outputs}.")
        self.loss = loss
        self.n_outputs = int(n_outputs)
        self.margin = float(margin)

    @property
    def is_regression(self):
        """Whether the loss is a regression loss (a real target, one column)."""
        return self.loss in REGRESSION_LOSSES

    def encode(self, y_index):
        """Targets as the loss needs them: from class indices 0..K-1, or a regression target."""
        if self.is_regression:
            return np.asarray(y_index, dtype=np.float64)
        y_index = np.asarray(y_index, dtype=np.intp)
        if self.n_outputs == 1:
            y = y_index.astype(np.float64)
            return y if self.loss == "log_loss" else 2.0 * y - 1.0
        return y_index

    def residual(self, Z, y):
        """Residual ``r_i`` (so that ``g_i = x~_i r_i^T``), shape (m, k).

        The regression residuals are those of the kernels (``residual_row``):
        entries below ``SQRT_TINY`` are zeros, beyond ``RESIDUAL_MAX`` that value.
        """
        if self.is_regression:
            diff = Z[:, 0].astype(np.float64) - y
            eps = self.margin
            if self.loss == "squared_error":
                r = diff
            elif self.loss == "huber":
                r = np.clip(diff, -eps, eps)
            else:
                r = np.where(diff > eps, 1.0, np.where(diff < -eps, -1.0, 0.0))
            r = np.where(np.abs(r) < SQRT_TINY, 0.0, np.clip(r, -RESIDUAL_MAX, RESIDUAL_MAX))
            return r[:, None].astype(Z.dtype, copy=False)
        if self.n_outputs == 1:
            z = Z[:, 0]
            if self.loss == "log_loss":
                r = expit(z) - y
            else:
                r = np.where(y * z < 1.0, -y, 0.0)
            return r[:, None].astype(Z.dtype, copy=False)
        m = Z.shape[0]
        rows = np.arange(m)
        if self.loss == "log_loss":
            R = softmax(Z, axis=1)
            R[rows, y] -= 1.0
            return R
        # Crammer–Singer: max(0, 1 + max_{j != y} z_j - z_y).
        Zm = Z.copy()
        Zm[rows, y] = -np.inf
        j = np.argmax(Zm, axis=1)
        active = 1.0 + Zm[rows, j] - Z[rows, y] > 0
        R = np.zeros_like(Z)
        R[rows[active], j[active]] = 1.0
        R[rows[active], y[active]] = -1.0
        return R


def _dense_path(n_rows, X):
    """``"fused"`` when gathering ``n_rows`` rows of ``X`` would be large, else ``"blas"``."""
    return "fused" if n_rows * X.shape[1] * X.itemsize > FUSED_MIN_GATHER_BYTES else "blas"


class LinearGradientOracle:
    """Clipped sums of per-example gradients of a linear model on fixed data.

    ``theta`` has shape ``(d + fit_intercept, k)``; the last row is the
    intercept when there is one.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n, d)
    y : ndarray
        Targets as returned by :meth:`LinearLoss.encode`.
    loss : LinearLoss
    fit_intercept : bool
    max_grad_norm : float
        Clip norm ``C``; ``np.inf`` disables clipping (non-private use).
    """

    def __init__(self, X, y, loss, fit_intercept, max_grad_norm):
        # Estimators pass canonical CSR already (validation); checked again
        # here so that no path reaches the kernels with duplicate entries.
        X = canonical_csr(X)
        self.X = X
        self.y = y
        self.loss = loss
        self.fit_intercept = bool(fit_intercept)
        self.max_grad_norm = float(max_grad_norm)
        self.n_features = X.shape[1]
        # ||x~_i||^2 depends on the data only; computed once.
        self.x_norm_sq = squared_row_norms(X) + (1.0 if fit_intercept else 0.0)
        self.code = loss_code(loss.loss, loss.n_outputs)
        self.loss_param = float(getattr(loss, "margin", 0.0))  # Huber / ε-insensitive ε
        self.y_kernel = np.asarray(y, dtype=np.float64)  # one target type for the kernels
        # "csr", or "dense" with the BLAS / fused choice made per batch
        # (forced by setting ``path`` to "blas" or "fused", e.g. in tests).
        self.path = "csr" if sp.issparse(X) else "dense"

    def __call__(self, idx, theta):
        """Sum over ``idx`` of the per-example gradients clipped to ``C``."""
        out = np.zeros_like(theta)
        if len(idx) == 0:
            return out
        idx = np.asarray(idx, dtype=np.intp)
        if self.path == "csr":
            X = self.X
            csr_clipped_sum(X.indptr, X.indices, X.data, idx, self.y_kernel, theta, self.code,
                            self.fit_intercept, self.x_norm_sq, self.max_grad_norm, out,
                            self.loss_param)
            return out
        path = _dense_path(len(idx), self.X) if self.path == "dense" else self.path
        if path == "fused":
            # In memory: one pass indexing X directly. Out of core: passes over
            # gathered sub-batches; the kernel adds rows one at a time in batch
            # order, so the result is the in-memory one bit for bit.
            for rows, local, sel in addressable_rows(self.X, idx, FUSED_MIN_GATHER_BYTES // 4):
                dense_clipped_sum(rows, local, self.y_kernel[sel], theta, self.code,
                                  self.fit_intercept, self.x_norm_sq[sel], self.max_grad_norm,
                                  out, self.loss_param)
        else:
            d = self.n_features
            Xb = take_rows(self.X, idx)
            Z = Xb @ theta[:d]
            if self.fit_intercept:
                Z += theta[d]
            clip_residuals(Z, self.y_kernel[idx], self.code, self.x_norm_sq[idx],
                           self.max_grad_norm, theta.shape[0], self.loss_param)
            np.matmul(Xb.T, Z, out=out[:d])
            if self.fit_intercept:
                Z.sum(axis=0, out=out[d])
        return out


def split_theta(theta, fit_intercept, dtype):
    """``(coef, intercept)`` of the trained parameters ``theta`` (rows: features, then b)."""
    n_features = theta.shape[0] - int(fit_intercept)
    theta = theta.astype(dtype, copy=False)
    coef = np.ascontiguousarray(theta[:n_features].T)
    intercept = (theta[n_features].copy() if fit_intercept
                 else np.zeros(theta.shape[1], dtype))
    return coef, intercept

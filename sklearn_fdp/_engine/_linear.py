"""Per-example gradients of linear models, clipped without materialising them.

For a linear model with parameters ``theta = [W; b]`` (``d + 1`` rows when
there is an intercept, ``k`` columns) and augmented input ``x~ = (x, 1)``,
every per-example gradient of a margin or softmax loss is an outer product
``g_i = x~_i r_i^T`` where ``r_i`` is the loss's *residual*. Hence

    ||g_i|| = ||x~_i|| * ||r_i||,

and the clipped batch sum is ``X~^T diag(c) R`` with ``c_i = min(1, C/||g_i||)``:
two matrix products, for dense and CSR ``X`` alike. No ``batch x d x k``
tensor is ever built. (The numba kernels of ``_kernels`` fuse the same maths.)
"""

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, softmax

LOSSES = ("log_loss", "hinge")


class LinearLoss:
    """Residual of a linear model's loss, for binary and multiclass problems.

    Parameters
    ----------
    loss : {"log_loss", "hinge"}
        ``"log_loss"``: logistic (k = 1) or multinomial softmax (k > 1).
        ``"hinge"``: ``max(0, 1 - y z)`` with ``y`` in {-1, +1} (k = 1), or
        the Crammer–Singer multiclass hinge (k > 1).
    n_outputs : int
        Number of columns ``k`` of the parameter matrix (1 for binary).
    """

    def __init__(self, loss, n_outputs):
        if loss not in LOSSES:
            raise ValueError(f"Unknown loss {loss!r}; use one of {LOSSES}.")
        self.loss = loss
        self.n_outputs = int(n_outputs)

    def encode(self, y_index):
        """Targets as the loss needs them from class indices 0..K-1."""
        y_index = np.asarray(y_index, dtype=np.intp)
        if self.n_outputs == 1:
            y = y_index.astype(np.float64)
            return y if self.loss == "log_loss" else 2.0 * y - 1.0
        return y_index

    def residual(self, Z, y):
        """Residual ``r_i`` (so that ``g_i = x~_i r_i^T``), shape (m, k)."""
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


def squared_row_norms(X):
    """Squared L2 norm of every row of a dense or CSR matrix."""
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", X, X)


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
        self.X = X
        self.y = y
        self.loss = loss
        self.fit_intercept = bool(fit_intercept)
        self.max_grad_norm = float(max_grad_norm)
        self.n_features = X.shape[1]
        # ||x~_i||^2 depends on the data only; computed once.
        self.x_norm_sq = squared_row_norms(X) + (1.0 if fit_intercept else 0.0)

    def decision(self, Xb, theta):
        Z = Xb @ theta[: self.n_features]
        if self.fit_intercept:
            Z += theta[self.n_features]
        return np.asarray(Z)

    def __call__(self, idx, theta):
        """Sum over ``idx`` of the per-example gradients clipped to ``C``."""
        out = np.zeros_like(theta)
        if len(idx) == 0:
            return out
        Xb = self.X[idx]
        R = self.loss.residual(self.decision(Xb, theta), self.y[idx])
        if np.isfinite(self.max_grad_norm):
            norms = np.sqrt(self.x_norm_sq[idx] * np.einsum("ij,ij->i", R, R))
            tiny = np.finfo(norms.dtype).tiny  # a zero gradient needs no clipping
            scale = np.minimum(1.0, self.max_grad_norm / np.maximum(norms, tiny))
            R *= scale[:, None].astype(R.dtype, copy=False)
        out[: self.n_features] = Xb.T @ R
        if self.fit_intercept:
            out[self.n_features] = R.sum(axis=0)
        return out

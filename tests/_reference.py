"""Naive numpy references: one explicit per-example gradient at a time.

Deliberately slow and obvious, to check the vectorised engine and the numba
kernels against.
"""

import numpy as np
import scipy.sparse as sp


def per_example_gradients(X, y, theta, loss, n_outputs, fit_intercept):
    """Per-example gradients of a linear model, shape (n, d + fit_intercept, k)."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    n, d = X.shape
    grads = []
    for i in range(n):
        xt = np.append(X[i], 1.0) if fit_intercept else X[i].copy()
        z = xt @ theta
        if n_outputs == 1:
            if loss == "log_loss":
                r = np.array([1.0 / (1.0 + np.exp(-z[0])) - y[i]])
            else:
                r = np.array([-y[i] if y[i] * z[0] < 1 else 0.0])
        else:
            if loss == "log_loss":
                p = np.exp(z - z.max())
                p /= p.sum()
                r = p.copy()
                r[y[i]] -= 1.0
            else:
                other = [j for j in range(n_outputs) if j != y[i]]
                j = other[int(np.argmax(z[other]))]
                r = np.zeros(n_outputs)
                if 1.0 + z[j] - z[y[i]] > 0:
                    r[j] = 1.0
                    r[y[i]] = -1.0
        grads.append(np.outer(xt, r))
    return np.array(grads).reshape(n, d + int(fit_intercept), n_outputs)


def clipped_sum(grads, max_grad_norm):
    """Sum of per-example gradients each clipped to ``max_grad_norm``."""
    total = np.zeros(grads.shape[1:])
    for g in grads:
        norm = np.linalg.norm(g)
        total += g * min(1.0, max_grad_norm / norm) if norm > 0 else g
    return total


def nothing_pending(theta, d, k, t):
    """The lazy CSR loop's state at step ``t`` with nothing pending: ``S`` (the weights of
    ``theta`` and every column's last-touched step, ``t``) and the three catch-up tables
    (zero noise and decay pending)."""
    from sklearn_fdp import _kernels as K

    S = np.zeros((d, k + 1))
    S[:, :k] = theta[:d]
    S[:, k] = t
    q = np.zeros(2)
    tables = [np.full(1, np.nan) for _ in range(3)]
    K.catch_up_tables(t, t, q, q, q, False, *tables)
    return S, tables

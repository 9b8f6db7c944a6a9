"""Numba kernel for Newton's method on the binary logistic loss over CSR rows.

FDP Algorithm 1 starts its noisy run from the minimiser of the public loss
(Remark 2 of the FDP paper): L2-penalised logistic regression on the public
columns, as scikit-learn's ``LogisticRegression(solver="newton-cholesky")``
minimises it. :func:`binary_logistic_pass` evaluates, in one pass over the
rows, everything an iteration of that solver needs: the objective, its
gradient and its Hessian. It reads the public columns in place through a
column map (``colmap[j]`` = the position of column ``j`` among the public
ones, or -1), so no copy of ``X[:, public]`` is made, and it adds each
row's outer product over its non-zeros only (a one-hot row of ~8 public
non-zeros: ~36 products, where the sparse ``Xᵀ diag(h) X`` of scipy built
and converted batch-sized matrices: ~4 ms a pass on Adult, ~1 ms here).

The pointwise loss, gradient and Hessian are those of scikit-learn's
``HalfBinomialLoss``: ``log(1 + exp(z)) − y z``, ``expit(z) − y`` and
``expit(z) (1 − expit(z))``, from one ``exp(−|z|)`` a row (stable for any
``z``; the transcendental functions are most of a pass's cost). No
randomness, no fastmath, ``cache=True``.
"""

import math

import numpy as np
from numba import njit


@njit(cache=True)
def binary_logistic_pass(indptr, indices, data, colmap, y, coef, fit_intercept, l2_reg,
                         want_hessian, cols, vals, grad, hess):
    """Objective, gradient and (optionally) Hessian of the penalised mean logistic loss.

    The objective is ``(1/n) Σ_i [log(1 + exp(z_i)) − y_i z_i] + (l2_reg / 2)
    ‖w‖²`` with ``z_i = Σ_j x_ij w_colmap[j] (+ b)`` over the columns with
    ``colmap[j] >= 0``: scikit-learn's ``LinearModelLoss`` of
    ``HalfBinomialLoss`` (the intercept ``b = coef[-1]`` not penalised).

    Parameters
    ----------
    indptr, indices, data : ndarray
        CSR rows, no column stored twice in a row (canonical, or a column
        subset of canonical rows; any order).
    colmap : ndarray of int64
        Position of each column of the rows in ``coef``; ``p`` (the number
        of weights without the intercept): the column is ignored.
    y : ndarray of float64
        Targets 0 / 1.
    coef : ndarray of float64 of shape (p + fit_intercept,)
    fit_intercept : bool
    l2_reg : float
        Penalty strength (``1 / (C n)`` for scikit-learn's ``C``).
    want_hessian : bool
        Whether to fill ``hess``.
    cols, vals : ndarray
        Scratch of the longest row's length (int64 / float64), at least 1.
    grad : ndarray of shape (p + fit_intercept,)
        Written: the gradient.
    hess : ndarray of shape (p + fit_intercept, p + fit_intercept)
        Written when ``want_hessian``: the Hessian (symmetric).

    Returns
    -------
    objective : float
    nonpositive : float
        Fraction of rows whose pointwise Hessian is 0 (``exp`` underflowed):
        scikit-learn's solver leaves Newton's method above 0.25.
    """
    n = indptr.shape[0] - 1
    m = coef.shape[0]
    p = m - (1 if fit_intercept else 0)
    b = coef[p] if fit_intercept else 0.0
    for a in range(m):
        grad[a] = 0.0
    if want_hessian:
        for a in range(m):
            for c in range(m):
                hess[a, c] = 0.0
    loss = 0.0
    nonpositive = 0
    # The weights with a 0 at position p, where colmap sends the ignored
    # columns: the gather below has no branch (a third of Adult's non-zeros
    # are private, in no predictable order).
    w = np.zeros(p + 1)
    for a in range(p):
        w[a] = coef[a]
    for i in range(n):
        z = b
        cnt = 0
        for q in range(indptr[i], indptr[i + 1]):
            c = colmap[indices[q]]
            v = data[q]
            cols[cnt] = c
            vals[cnt] = v
            cnt += c < p
            z += v * w[c]
        # One exponential a row: e = exp(-|z|) <= 1 never overflows.
        yi = y[i]
        e = math.exp(-abs(z))
        loss += (z if z > 0.0 else 0.0) + math.log1p(e) - yi * z
        g = (1.0 if z >= 0.0 else e) / (1.0 + e) - yi
        h = e / ((1.0 + e) * (1.0 + e))
        nonpositive += h <= 0.0
        for a in range(cnt):
            grad[cols[a]] += g * vals[a]
        if fit_intercept:
            grad[p] += g
        if want_hessian:
            # Each pair of the row once, at (cols[a], cols[c]) in row order;
            # folded into both triangles below.
            for a in range(cnt):
                ha = h * vals[a]
                ca = cols[a]
                for c in range(a, cnt):
                    hess[ca, cols[c]] += ha * vals[c]
                if fit_intercept:
                    hess[ca, p] += ha
            if fit_intercept:
                hess[p, p] += h
    inv_n = 1.0 / n
    penalty = 0.0
    for a in range(p):
        penalty += coef[a] * coef[a]
    for a in range(m):
        grad[a] *= inv_n
    for a in range(p):
        grad[a] += l2_reg * coef[a]
    if want_hessian:
        for a in range(m):
            hess[a, a] *= inv_n
            for c in range(a + 1, m):
                s = (hess[a, c] + hess[c, a]) * inv_n
                hess[a, c] = s
                hess[c, a] = s
        for a in range(p):
            hess[a, a] += l2_reg
    return loss * inv_n + 0.5 * l2_reg * penalty, nonpositive * inv_n

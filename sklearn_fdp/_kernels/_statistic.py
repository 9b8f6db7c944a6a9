"""The clipped design rows of the linear regression statistic, in one pass.

:func:`sklearn_fdp._mechanisms.linear_statistics.sufficient_statistics` sums
``ZᵀZ`` over row chunks, ``Z = [f_P X_P, 1, f_Q X_Q, y]`` with each row's
public and protected blocks clipped apart. numpy built it from two column
selections (``rows[:, idx]``, each a copy of the block), a norm and a
max/min pass per block (``row_scale_factors``) and a product into ``Z``:
about three times the cost of ``ZᵀZ`` itself on Adult (issue 37). This
kernel writes the blocks into ``Z`` directly and takes the norms as it
goes, with numpy's arithmetic: the norm of a selection ``rows[:, idx]``
(an F-ordered copy) is ``sqrt`` of its squares summed left to right, the
factor ``min(1, bound / norm)``, the product ``x f``, so ``Z`` and the
factors are those of the numpy code bit for bit. Rows that need the
rescaled norm of ``gaussian_mean._row_norms`` (an entry beyond 1e140, or
all below 1e-140) are left to that code: the kernel reports them.
"""

import numpy as np
from numba import njit

# gaussian_mean._PLAIN_NORM_RANGE: rows whose largest entry lies outside take
# the rescaled norm there.
_LOW, _HIGH = 1e-140, 1e140


@njit(cache=True)
def _block(rows, i, idx, Z, offset, bound):
    """Copy ``rows[i, idx]`` to ``Z[i, offset:]`` clipped to ``bound``; its factor, or -1."""
    s = 0.0
    peak = 0.0
    for c in range(idx.shape[0]):
        v = rows[i, idx[c]]
        Z[i, offset + c] = v
        s += v * v
        a = abs(v)
        if a > peak:
            peak = a
    if idx.shape[0] == 0:
        return 1.0
    if (peak > 0.0 and peak < _LOW) or peak > _HIGH:
        return -1.0
    norm = np.sqrt(s)
    f = bound / norm if norm > bound else 1.0
    if f != f or f == np.inf:  # numpy's nan_to_num(nan=0, posinf=0)
        f = 0.0
    if f != 1.0:
        for c in range(idx.shape[0]):
            Z[i, offset + c] = Z[i, offset + c] * f
    return f


@njit(cache=True)
def clipped_design(rows, public_idx, private_idx, fit_intercept, public_bound, private_bound,
                   Z, f_pub, f_priv):
    """Fill ``Z[:, :d_P + 1 + d_Q]`` and the factors; False if a row needs the rescaled norm.

    ``Z[:, :d_P] = f_P rows[:, public_idx]``, then the intercept's column of
    ones when ``fit_intercept``, then ``f_Q rows[:, private_idx]``; the last
    column (the target) is the caller's. On False, ``Z`` and the factors are
    partly written and the caller recomputes them.
    """
    d_p1 = public_idx.shape[0] + (1 if fit_intercept else 0)
    for i in range(rows.shape[0]):
        fp = _block(rows, i, public_idx, Z, 0, public_bound)
        fq = _block(rows, i, private_idx, Z, d_p1, private_bound)
        if fp < 0.0 or fq < 0.0:
            return False
        if fit_intercept:
            Z[i, public_idx.shape[0]] = 1.0
        f_pub[i] = fp
        f_priv[i] = fq
    return True

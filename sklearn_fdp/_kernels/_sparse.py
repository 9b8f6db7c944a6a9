"""Numba kernels for DP-SGD on CSR data with lazily drawn noise.

On wide sparse data (one-hot click logs: a million columns, tens of
non-zeros per row) the dense Gaussian noise of a DP-SGD step costs far more
than the gradient. Without momentum, weight decay or projection, a
coordinate ``j`` that no batch row touches between two reads only
accumulates its per-step noise::

    θ_j(b) = θ_j(a) + Σ_{s=a}^{b-1} c_s e_s,   c_s = η_s σ C / (q n),  e_s ~ N(0, 1),

one Gaussian of variance ``Σ c_s²``. The engine therefore keeps, per
coordinate, the step ``last[j]`` from which its noise is still pending, and
draws that one Gaussian when the coordinate is next read (a batch row has a
non-zero there) and at block boundaries. When iterates are averaged
(``A = Σ_{s ≥ t0} θ(s + 1)``) the pending window also adds to ``A``::

    ΔA = (b − a) θ_j(a) + Σ_u c_u e_u (b − u),

jointly Gaussian with ``Δθ``: ``Var Δθ = Σ c_u²``, ``Var ΔA = Σ c_u² (b−u)²``,
``Cov = Σ c_u² (b − u)``, drawn from two standard normals.

The sums come from per-block prefix sums ``Q_p[s] = Σ_{u < s} c_u² (u − f)^p``
(``f`` the block's first step, ``p = 0, 1, 2``). Blocks are short (the
engine flushes every coordinate at each block boundary), so the
differences ``b'² Q_0 − 2 b' Q_1 + Q_2`` stay well conditioned, and no
window straddles the start of averaging.

As everywhere in ``_kernels``: no randomness inside (the caller passes the
standard normals), no fastmath, ``cache=True``.
"""

import math

import numpy as np
from numba import njit

from ._linear import _clip_factor, residual_row


@njit(cache=True)
def csr_squared_row_norms(indptr, data, out):
    """``out[i] = Σ_p data[p]²`` over row ``i`` (no copy of the matrix)."""
    for i in range(indptr.shape[0] - 1):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += data[p] * data[p]
        out[i] = acc


@njit(cache=True)
def touched_columns(indptr, indices, idx, stamp, t, cols):
    """Distinct columns of the rows ``idx``, written to ``cols``; returns how many.

    ``stamp[j] == t`` marks column ``j`` as seen at step ``t`` (the array is
    reused across steps, so nothing of size ``d`` is cleared per step).
    ``cols`` must hold at least the batch's number of non-zeros.
    """
    count = 0
    for ii in range(idx.shape[0]):
        i = idx[ii]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if stamp[j] != t:
                stamp[j] = t
                cols[count] = j
                count += 1
    return count


@njit(cache=True)
def catch_up(cols, n_cols, theta, last, b, block_start, q0, q1, q2, average, tail,
             normals):
    """Apply the pending noise of steps ``last[j] .. b-1`` to ``theta[j]``.

    ``cols[:n_cols]`` are the coordinates (rows of ``theta``) to catch up;
    each gets ``last[j] = b``. ``q0, q1, q2`` are the block-local prefix sums
    (index ``s - block_start``). With ``tail`` (the block lies in the
    averaging window) ``average[j]`` receives ``ΔA`` too. ``normals`` holds
    ``n_cols * k`` standard normals (``2 * n_cols * k`` with ``tail``).
    Returns the number of normals used.
    """
    k = theta.shape[1]
    used = 0
    bb = b - block_start
    for jj in range(n_cols):
        j = cols[jj]
        a = last[j] - block_start
        last[j] = b
        if a >= bb:
            continue
        v0 = q0[bb] - q0[a]
        if not tail:
            if v0 > 0.0:
                sd = math.sqrt(v0)
                for c in range(k):
                    theta[j, c] += sd * normals[used]
                    used += 1
            continue
        width = bb - a
        if v0 <= 0.0:  # no noise (non-private run): the deterministic part only
            for c in range(k):
                average[j, c] += width * theta[j, c]
            continue
        sd = math.sqrt(v0)
        # Σ c_u² (b-u) and Σ c_u² (b-u)², with u and b relative to the block.
        s1 = q1[bb] - q1[a]
        s2 = q2[bb] - q2[a]
        cov = bb * v0 - s1
        var_a = bb * bb * v0 - 2.0 * bb * s1 + s2
        slope = cov / v0
        resid = var_a - slope * cov
        resid_sd = math.sqrt(resid) if resid > 0.0 else 0.0
        for c in range(k):
            d_theta = sd * normals[used]
            average[j, c] += width * theta[j, c] + slope * d_theta + resid_sd * normals[used + 1]
            theta[j, c] += d_theta
            used += 2
    return used


@njit(cache=True)
def csr_clipped_residuals(indptr, indices, data, idx, y, theta, code, fit_intercept,
                          x_norm_sq, clip, out):
    """Clipped residuals ``c_i r_i`` of the rows ``idx`` into ``out`` (m × k).

    The clipped gradient sum is then ``Σ_i x~_i out[i]ᵀ`` (see
    :func:`csr_scatter_add`); splitting the two passes lets the caller apply
    it to ``theta`` in place, touching only the batch's columns.
    """
    d = theta.shape[0] - (1 if fit_intercept else 0)
    k = theta.shape[1]
    z = np.empty(k)
    r = np.empty(k)
    for ii in range(idx.shape[0]):
        i = idx[ii]
        for c in range(k):
            z[c] = theta[d, c] if fit_intercept else 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = data[p]
            for c in range(k):
                z[c] += v * theta[j, c]
        rsq = residual_row(z, y[i], code, r)
        s = _clip_factor(x_norm_sq[i] * rsq, clip) if rsq > 0.0 else 0.0
        for c in range(k):
            out[ii, c] = s * r[c]


@njit(cache=True)
def csr_scatter_add(indptr, indices, data, idx, R, scale, theta):
    """``theta[j] += scale * Σ_i x_ij R[i]`` over the rows ``idx`` (no intercept)."""
    k = theta.shape[1]
    for ii in range(idx.shape[0]):
        i = idx[ii]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = scale * data[p]
            for c in range(k):
                theta[j, c] += v * R[ii, c]

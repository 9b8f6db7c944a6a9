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

from ._linear import _clipped_residual_row


@njit(cache=True)
def csr_squared_row_norms(indptr, data, out):
    """``out[i] = Σ_p data[p]²`` over row ``i`` (no copy of the matrix)."""
    for i in range(indptr.shape[0] - 1):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += data[p] * data[p]
        out[i] = acc


# The lazy state of a coordinate j lives in one row ``S[j]`` (one cache line
# for a binary model): ``S[j, :k]`` its weights, ``S[j, k:2k]`` its share of
# the tail sum ``A`` (when averaging), ``S[j, -1]`` the step ``last[j]`` from
# which its noise is pending (a float; exact for any realistic step count).
# On a million columns the batch touches scattered rows; keeping the three
# together costs one cache miss per touched coordinate instead of three.


@njit(cache=True, inline="always")
def _catch_up_one(S, j, k, b, block_start, q0, q1, q2, tail, normals, used):
    """Apply coordinate ``j``'s noise of steps ``last .. b-1``; return normals used."""
    w = S.shape[1] - 1
    a = int(S[j, w]) - block_start
    S[j, w] = b
    bb = b - block_start
    if a >= bb:
        return used
    v0 = q0[bb] - q0[a]
    if not tail:
        if v0 > 0.0:
            sd = math.sqrt(v0)
            for c in range(k):
                S[j, c] += sd * normals[used]
                used += 1
        return used
    width = bb - a
    if not v0 > 0.0:  # no noise (non-private run): the deterministic part only
        for c in range(k):
            S[j, k + c] += width * S[j, c]
        return used
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
        S[j, k + c] += width * S[j, c] + slope * d_theta + resid_sd * normals[used + 1]
        S[j, c] += d_theta
        used += 2
    return used


@njit(cache=True)
def flush(S, k, b, block_start, q0, q1, q2, tail, normals):
    """Catch every coordinate up to step ``b``; ``normals``: ``d k`` (``2 d k`` in the tail).

    Returns the number of normals used.
    """
    used = 0
    for j in range(S.shape[0]):
        used = _catch_up_one(S, j, k, b, block_start, q0, q1, q2, tail, normals, used)
    return used


@njit(cache=True)
def lazy_clipped_residuals(indptr, indices, data, idx, y, S, k, intercept, code, x_norm_sq,
                           clip, t, block_start, q0, q1, q2, tail, normals, used, cols, out):
    """Clipped residuals ``c_i r_i`` of the CSR rows ``idx`` at step ``t``, lazily.

    Three passes over the batch's non-zeros: (1) collect the distinct
    coordinates whose noise is pending (a tight loop, so the processor
    overlaps the cache misses of a scattered million-row state), (2) catch
    each up to step ``t`` from ``normals[used:]``, (3) per row, the decision
    values, residual, norm and clip factor, ``c_i r_i`` written to
    ``out[ii]``. ``intercept`` (length k, or empty) is the bias; ``cols``
    is scratch space of at least the batch's number of non-zeros. The
    clipped gradient sum is ``Σ_i x~_i out[i]ᵀ`` (:func:`csr_scatter_add`).
    Returns the new ``used``.
    """
    w = S.shape[1] - 1
    n_cols = 0
    for ii in range(idx.shape[0]):
        i = idx[ii]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            last = S[j, w]
            if last != t and last >= 0.0:
                cols[n_cols] = j
                n_cols += 1
                S[j, w] = -1.0 - last  # mark as collected (negative), keeping ``last``
    for jj in range(n_cols):
        j = cols[jj]
        S[j, w] = -1.0 - S[j, w]
        used = _catch_up_one(S, j, k, t, block_start, q0, q1, q2, tail, normals, used)
    z = np.empty(k)
    r = np.empty(k)
    for ii in range(idx.shape[0]):
        i = idx[ii]
        for c in range(k):
            z[c] = intercept[c] if intercept.shape[0] else 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = data[p]
            for c in range(k):
                z[c] += v * S[j, c]
        _clipped_residual_row(z, y[i], code, x_norm_sq[i], clip, r)
        for c in range(k):
            out[ii, c] = r[c]
    return used


@njit(cache=True)
def csr_scatter_add(indptr, indices, data, idx, R, scale, theta):
    """``theta[j, :k] += scale * Σ_i x_ij R[i]`` over the rows ``idx`` (no intercept).

    ``k = R.shape[1]``; ``theta`` may have more columns (the lazy state).
    """
    k = R.shape[1]
    for ii in range(idx.shape[0]):
        i = idx[ii]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = scale * data[p]
            for c in range(k):
                theta[j, c] += v * R[ii, c]

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

from ._linear import _clip_target, _clipped_residual_row
from ._prefetch import prefetch


# Return codes of :func:`csr_format_code`.
CSR_CANONICAL, CSR_NOT_CANONICAL, CSR_MALFORMED = 0, 1, 2


@njit(cache=True)
def csr_format_code(indptr, indices, n_cols):
    """Whether a CSR structure is canonical, from its arrays (no cached flag trusted).

    :data:`CSR_CANONICAL`: in every row the column indices strictly
    increase (sorted, no column stored twice). :data:`CSR_NOT_CANONICAL`:
    some row has a duplicate or an unsorted pair. :data:`CSR_MALFORMED`:
    ``indptr`` does not start at 0, decreases or runs past ``indices``, or a
    column index is outside ``[0, n_cols)``; the kernels would read out of
    bounds. One pass, no allocation.
    """
    n_rows = indptr.shape[0] - 1
    if n_rows < 0 or indptr[0] != 0 or indptr[n_rows] > indices.shape[0]:
        return CSR_MALFORMED
    code = CSR_CANONICAL
    for i in range(n_rows):
        start, stop = indptr[i], indptr[i + 1]
        if stop < start:
            return CSR_MALFORMED
        for p in range(start, stop):
            j = indices[p]
            if j < 0 or j >= n_cols:
                return CSR_MALFORMED
            if p > start and j <= indices[p - 1]:
                code = CSR_NOT_CANONICAL
    return code


@njit(cache=True)
def csr_squared_row_norms(indptr, data, out):
    """``out[i] = Σ_p data[p]²`` over row ``i`` (no copy of the matrix)."""
    for i in range(indptr.shape[0] - 1):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += data[p] * data[p]
        out[i] = acc


@njit(cache=True)
def dense_columns_csr_size(X, cols):
    """Number of non-zeros of ``X[:, cols]`` (dense ``X``), read in place."""
    nnz = 0
    for i in range(X.shape[0]):
        for c in range(cols.shape[0]):
            nnz += X[i, cols[c]] != 0
    return nnz


@njit(cache=True)
def dense_columns_to_csr(X, cols, indptr, indices, data):
    """Fill the canonical CSR arrays of ``X[:, cols]`` (sizes from :func:`dense_columns_csr_size`).

    ``cols`` increasing, so the column indices of each row are too. One pass,
    no copy of the selection; ``indices`` and ``data`` need ``len(cols)``
    entries of room past the last non-zero (written, then overwritten or
    left unused: the loop has no branch on the values).
    """
    p = 0
    indptr[0] = 0
    for i in range(X.shape[0]):
        for c in range(cols.shape[0]):
            v = X[i, cols[c]]
            indices[p] = c
            data[p] = v
            p += v != 0
        indptr[i + 1] = p


@njit(cache=True)
def dense_nnz_capped(X, cap):
    """Number of non-zeros of dense ``X``, or -1 as soon as it exceeds ``cap``.

    The counting pass before :func:`dense_to_csr_capped`: dense data stops it
    after about ``cap`` entries, and the CSR arrays are then allocated at their
    exact size (no room for the densest ``X`` accepted, written and dropped).
    """
    nnz = 0
    for i in range(X.shape[0]):
        for c in range(X.shape[1]):
            nnz += X[i, c] != 0
        if nnz > cap:
            return -1
    return nnz


@njit(cache=True)
def dense_to_csr_capped(X, indptr, indices, data):
    """Fill the canonical CSR arrays of dense ``X`` in one pass, or give up.

    ``indices`` and ``data`` hold ``cap + X.shape[1]`` entries; returns the
    number of non-zeros, or -1 as soon as it exceeds ``cap`` (the arrays are
    then partly written). :func:`dense_columns_to_csr` of every column
    without the counting pass of :func:`dense_columns_csr_size`: X is read
    once, not twice.
    """
    n_cols = X.shape[1]
    cap = indices.shape[0] - n_cols
    p = 0
    indptr[0] = 0
    for i in range(X.shape[0]):
        for c in range(n_cols):
            v = X[i, c]
            indices[p] = c
            data[p] = v
            p += v != 0
        if p > cap:
            return -1
        indptr[i + 1] = p
    return p


@njit(cache=True)
def csr_masked_squared_norms(indptr, indices, data, mask, out):
    """``out[i] = Σ_p mask[j_p] data[p]²`` over row ``i`` (``mask`` 0.0 / 1.0 per column)."""
    for i in range(indptr.shape[0] - 1):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            v = data[p]
            acc += mask[indices[p]] * (v * v)
        out[i] = acc


# The lazy state of a coordinate j lives in one row ``S[j]`` (one cache line
# for a binary model): ``S[j, :k]`` its weights, ``S[j, k:2k]`` its share of
# the tail sum ``A`` (when averaging), ``S[j, -1]`` the step ``last[j]`` from
# which its noise is pending (a float; exact for any realistic step count).
# On a million columns the batch touches scattered rows; keeping the three
# together costs one cache miss per touched coordinate instead of three.
#
# A catch-up to step ``b`` depends on the coordinate only through its age
# ``a = last - f`` (``f`` the block's first step): :func:`catch_up_tables`
# computes the noise coefficients of every age once per step (O(block)
# square roots), and the per-non-zero work is table lookups. The read of
# ``S[j, -1]`` is a cache miss on wide data, so the catch-up is branch-free:
# a coordinate already caught up this step (age ``b - f``) has coefficient
# 0 and uses no normals, without a mispredicted branch stalling the misses
# of the following non-zeros. The passes over a batch first list a row's
# coordinates not yet caught up (also without a branch) and run the
# catch-up on those only: on a click log most of a batch's non-zeros are
# popular columns an earlier row of the batch has caught up already.


@njit(cache=True)
def catch_up_tables(b, block_start, q0, q1, q2, tail, sd, slope, resid_sd):
    """Noise coefficients of a catch-up to step ``b``, for every age ``a`` in ``0 .. b - f``.

    A coordinate pending since step ``f + a`` receives ``sd[a] e₁`` on its
    weight and, in the tail, ``width θ + slope[a] sd[a] e₁ + resid_sd[a] e₂``
    on its tail sum (``width = b - f - a``, ``e₁, e₂`` standard normals).
    ``sd[a] = 0`` (no noise: an empty window, or σ = 0) means no normals are
    used.
    """
    bb = b - block_start
    for a in range(bb + 1):
        v0 = q0[bb] - q0[a]
        if not v0 > 0.0:
            sd[a] = 0.0
            slope[a] = 0.0
            resid_sd[a] = 0.0
            continue
        sd[a] = math.sqrt(v0)
        if tail:
            # Σ c_u² (b-u) and Σ c_u² (b-u)², with u and b relative to the block.
            s1 = q1[bb] - q1[a]
            s2 = q2[bb] - q2[a]
            cov = bb * v0 - s1
            var_a = bb * bb * v0 - 2.0 * bb * s1 + s2
            slope[a] = cov / v0
            resid = var_a - slope[a] * cov
            resid_sd[a] = math.sqrt(resid) if resid > 0.0 else 0.0
    if tail and bb >= 1 and sd[bb - 1] > 0.0:
        # A one-step window, the common case of a coordinate read every
        # step: ΔA = θ(a) + Δθ exactly (slope 1, no noise of its own), so
        # it needs one normal, not two; set exactly, not up to rounding.
        slope[bb - 1] = 1.0
        resid_sd[bb - 1] = 0.0


@njit(cache=True, inline="always")
def _catch_up(S, j, k, b, block_start, sd, slope, resid_sd, tail, normals, used):
    """Apply coordinate ``j``'s pending noise up to step ``b``; return the new ``used``.

    Branch-free: ``normals`` must have ``2 k`` readable entries past ``used``
    even when none is used.
    """
    w = S.shape[1] - 1
    a = int(S[j, w]) - block_start
    S[j, w] = b
    s = sd[a]
    if tail:
        width = (b - block_start) - a
        sl = slope[a]
        rs = resid_sd[a]
        for c in range(k):
            d_theta = s * normals[used + c]
            S[j, k + c] += width * S[j, c] + sl * d_theta + rs * normals[used + k + c]
            S[j, c] += d_theta
        # The second k normals only where the tail sum has noise of its own.
        return used + k * (1 + int(rs > 0.0)) * int(s > 0.0)
    for c in range(k):
        S[j, c] += s * normals[used + c]
    return used + k * int(s > 0.0)


@njit(cache=True, inline="always")
def _catch_up_1(S, j, b, block_start, sd, slope, resid_sd, tail, normals, used):
    """:func:`_catch_up` for ``k = 1`` (same arithmetic, scalar code)."""
    w = S.shape[1] - 1
    a = int(S[j, w]) - block_start
    S[j, w] = b
    s = sd[a]
    if tail:
        rs = resid_sd[a]
        d_theta = s * normals[used]
        S[j, 1] += ((b - block_start) - a) * S[j, 0] + slope[a] * d_theta + rs * normals[used + 1]
        S[j, 0] += d_theta
        return used + (1 + int(rs > 0.0)) * int(s > 0.0)
    S[j, 0] += s * normals[used]
    return used + int(s > 0.0)


@njit(cache=True)
def flush(S, k, b, block_start, sd, slope, resid_sd, tail, normals):
    """Catch every coordinate up to step ``b`` (tables from :func:`catch_up_tables` at ``b``).

    ``normals``: ``d k`` (``2 d k`` in the tail) plus ``2 k`` readable
    entries. Returns the number of normals used.
    """
    used = 0
    for j in range(S.shape[0]):
        used = _catch_up(S, j, k, b, block_start, sd, slope, resid_sd, tail, normals, used)
    return used


# Rows ahead whose CSR row (indices, values) and whose state rows are
# prefetched while the current row is processed.
CSR_AHEAD, STATE_AHEAD = 4, 2


@njit(cache=True, inline="always")
def _lagging(indices, start, stop, S, col, t, pending):
    """``(pending, n)``: the coordinates ``indices[start:stop]`` whose noise is pending
    from before step ``t`` (``S[j, col] != t``) are ``pending[:n]``, in row order.

    Branch-free (a plain test per non-zero mispredicts: slower); ``pending`` is
    replaced by a larger buffer when the row is longer than it.
    """
    if stop - start > pending.shape[0]:
        pending = np.empty(2 * (stop - start), dtype=np.intp)
    n = 0
    for p in range(start, stop):
        j = indices[p]
        pending[n] = j
        n += S[j, col] != t  # a float holding an integer step
    return pending, n


@njit(cache=True, inline="always")
def _prefetch_ahead(indptr, indices, data, S, idx, ii):
    m = idx.shape[0]
    if ii + CSR_AHEAD < m:
        i4 = idx[ii + CSR_AHEAD]
        start, stop = indptr[i4], indptr[i4 + 1]
        for p in range(start, stop, 16):
            prefetch(indices, p, 0)
        if stop > start:
            prefetch(indices, stop - 1, 0)
        for p in range(start, stop, 8):
            prefetch(data, p, 0)
        if stop > start:
            prefetch(data, stop - 1, 0)
    if ii + STATE_AHEAD < m:
        i2 = idx[ii + STATE_AHEAD]
        for p in range(indptr[i2], indptr[i2 + 1]):
            prefetch(S, indices[p], 0)


@njit(cache=True)
def lazy_clipped_residuals(indptr, indices, data, idx, y, S, k, intercept, code, x_norm_sq,
                           clip, t, block_start, sd, slope, resid_sd, tail, normals, used, out,
                           loss_param=0.0):
    """Clipped residuals ``c_i r_i`` of the CSR rows ``idx`` at step ``t``, lazily.

    One pass over the batch's rows: the row's coordinates not yet caught up
    to step ``t`` are listed (a branch-free pass) and caught up (from
    ``normals[used:]``, in order of first appearance; the tables come from
    :func:`catch_up_tables` at ``t``), then read into the row's decision
    values (a coordinate an earlier row caught up is skipped: its catch-up
    is zero noise and no normal, as :func:`_catch_up` computes, so the
    values are the same); then the residual, norm and clip factor, with
    ``c_i r_i`` written to ``out[ii]``. ``intercept`` (length k, or empty) is
    the bias. The clipped gradient sum is ``Σ_i x~_i out[i]ᵀ``
    (:func:`csr_scatter_add`). Returns the new ``used``. ``clip`` is aimed at
    in ``out``'s dtype (:func:`~sklearn_fdp._kernels._linear.clip_target`).
    """
    clip = _clip_target(clip, out, S.shape[0] + 1 + k)
    z = np.empty(k)
    r = np.empty(k)
    w = S.shape[1] - 1  # the column of the step each coordinate's noise is pending from
    pending = np.empty(64, dtype=np.intp)  # a row's coordinates to catch up (grows)
    if k == 1:  # binary: scalar decision value, kept in a register
        b0 = intercept[0] if intercept.shape[0] else 0.0
        for ii in range(idx.shape[0]):
            i = idx[ii]
            _prefetch_ahead(indptr, indices, data, S, idx, ii)
            start, stop = indptr[i], indptr[i + 1]
            pending, n_pending = _lagging(indices, start, stop, S, w, t, pending)
            for q in range(n_pending):
                used = _catch_up_1(S, pending[q], t, block_start, sd, slope, resid_sd, tail,
                                   normals, used)
            z0 = b0
            for p in range(start, stop):
                z0 += data[p] * S[indices[p], 0]
            z[0] = z0
            _clipped_residual_row(z, y[i], code, x_norm_sq[i], clip, r, loss_param)
            out[ii, 0] = r[0]
        return used
    for ii in range(idx.shape[0]):
        i = idx[ii]
        start, stop = indptr[i], indptr[i + 1]
        pending, n_pending = _lagging(indices, start, stop, S, w, t, pending)
        for q in range(n_pending):
            used = _catch_up(S, pending[q], k, t, block_start, sd, slope, resid_sd, tail,
                             normals, used)
        for c in range(k):
            z[c] = intercept[c] if intercept.shape[0] else 0.0
        for p in range(start, stop):
            j = indices[p]
            v = data[p]
            for c in range(k):
                z[c] += v * S[j, c]
        _clipped_residual_row(z, y[i], code, x_norm_sq[i], clip, r, loss_param)
        for c in range(k):
            out[ii, c] = r[c]
    return used


@njit(cache=True)
def csr_scatter_add(indptr, indices, data, idx, R, scale, theta):
    """``theta[j, :k] += scale * Σ_i x_ij R[i]`` over the rows ``idx`` (no intercept).

    ``k = R.shape[1]``; ``theta`` may have more columns (the lazy state).
    """
    k = R.shape[1]
    if k == 1:  # binary: the row's scaled residual in a register
        for ii in range(idx.shape[0]):
            i = idx[ii]
            r = R[ii, 0]
            for p in range(indptr[i], indptr[i + 1]):
                theta[indices[p], 0] += (scale * data[p]) * r
        return
    for ii in range(idx.shape[0]):
        i = idx[ii]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = scale * data[p]
            for c in range(k):
                theta[j, c] += v * R[ii, c]


@njit(cache=True)
def lazy_steps(indptr, indices, data, batches, batch_ptr, y, S, k, intercept, intercept_sum,
               code, x_norm_sq, clip, t_first, block_start, step_scale, noise_std, q0, q1, q2,
               tail, normals, used, R, sd, slope, resid_sd, loss_param=0.0):
    """Run the steps ``t_first ..`` of one block; the batch of step ``t_first + s`` is
    ``batches[batch_ptr[s]:batch_ptr[s + 1]]``.

    Per step: the catch-up tables, the clipped residuals
    (:func:`lazy_clipped_residuals`), the scatter of ``step_scale[t] Σ_i
    x_i c_i r_iᵀ`` into the weights, and the intercept's update with its
    eager noise ``noise_std e`` (``k`` normals after the step's catch-ups).
    ``step_scale[t] = -η_t / (q n)``. ``R``: scratch of at least the largest
    batch's rows; ``sd, slope, resid_sd``: scratch of the block's length + 1.
    Returns the new ``used``.
    """
    for s in range(batch_ptr.shape[0] - 1):
        t = t_first + s
        idx = batches[batch_ptr[s]:batch_ptr[s + 1]]
        m = idx.shape[0]
        Rm = R[:m]
        catch_up_tables(t, block_start, q0, q1, q2, tail, sd, slope, resid_sd)
        used = lazy_clipped_residuals(indptr, indices, data, idx, y, S, k, intercept, code,
                                      x_norm_sq, clip, t, block_start, sd, slope, resid_sd, tail,
                                      normals, used, Rm, loss_param)
        csr_scatter_add(indptr, indices, data, idx, Rm, step_scale[t], S)
        if intercept.shape[0]:
            for c in range(k):
                g_b = 0.0
                for ii in range(m):
                    g_b += Rm[ii, c]
                if noise_std > 0.0:
                    g_b += noise_std * normals[used + c]
                intercept[c] += step_scale[t] * g_b
                if tail:
                    intercept_sum[c] += intercept[c]
            if noise_std > 0.0:
                used += k
    return used


@njit(cache=True)
def csr_keep_columns(indptr, indices, data, keep, out_indptr, out_indices, out_data):
    """The CSR rows restricted to the columns with ``keep[j]`` (bool), indices unchanged.

    ``out_indices`` and ``out_data`` need room for every non-zero; returns
    how many were kept (their first entries). One pass, rows in order, each
    row's kept entries in their order.
    """
    q = 0
    out_indptr[0] = 0
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            out_indices[q] = j
            out_data[q] = data[p]
            q += keep[j]
        out_indptr[i + 1] = q
    return q

"""Numba kernels for lazily drawn noise with momentum and weight decay (exact).

The eager step (:func:`~sklearn_fdp._kernels._update.sgd_update`, no public
gradient, no projection) of one coordinate is, with ``N = q n`` the expected
batch size, ``g`` its clipped gradient sum and ``e ~ N(0, 1)`` its noise::

    v' = m v + (g + σ C e) / N + λ θ,   θ' = θ − η_t v',   A' = A + θ' (tail).

Written in the carried momentum ``p = m v`` (what the next step inherits),
the gradient enters additively *before* the step's transition,
``p ← p + g / N``, and the transition is the same for every coordinate::

    v' = p + λ θ + c e,   θ' = θ − η_t v',   p' = m v',   A' = A + θ',

with ``c = σ C / N``: linear in the state ``s = (θ, p[, A])``,
``s' = M_t s + b_t e`` with::

    M_t = [[1 − η_t λ, −η_t, 0], [m λ, m, 0], [1 − η_t λ, −η_t, 1]],
    b_t = c (−η_t, m, −η_t).

A coordinate no batch row touches between steps ``t − k`` and ``t``
therefore moves to ``Φ s + F e`` with ``Φ = M_{t−1} ⋯ M_{t−k}``,
``Σ = Σ_u (M_{t−1} ⋯ M_{u+1}) b_u b_uᵀ (⋯)ᵀ`` and ``F Fᵀ = Σ`` (``e`` a few
standard normals): exactly the eager distribution, as for the momentum-0
path of :mod:`._sparse`. The tables ``Φ_k, Σ_k, F_k`` of every lag ``k`` in
the current block are kept for the current step ``t`` and advanced one step
at a time (``Φ^{(t)}_k = M_{t−1} Φ^{(t−1)}_{k−1}``, likewise ``Σ``), so any
learning-rate schedule is handled; under a constant step size within a
block only the new largest lag is computed. ``F`` is a Cholesky factor with
the columns of (numerically) zero pivots dropped: ``rank[k]`` normals per
output column (1 for a one-step lag, where ``Σ = b bᵀ``).

Before the tail (``dim = 2``) the state is ``(θ, p)``; blocks never straddle
the start of averaging, where every coordinate is flushed and ``A = 0``.

As everywhere in ``_kernels``: no randomness inside (the caller passes the
standard normals), no fastmath, ``cache=True``.
"""

import math

import numpy as np
from numba import njit

from ._linear import _clip_target, _clipped_residual_row
from ._sparse import _lagging, _prefetch_ahead

# A Cholesky pivot below this fraction of its diagonal entry is a zero
# (rank-deficient Σ: a lag of one or two steps has fewer noises than states).
PIVOT_RTOL = 1e-12


@njit(cache=True)
def momentum_transition(eta, momentum, l2, c, dim, M, b):
    """``M_t`` and ``b_t`` of one untouched step (step size ``eta``) into ``M`` (3x3), ``b`` (3)."""
    for r in range(3):
        b[r] = 0.0
        for s in range(3):
            M[r, s] = 0.0
    M[0, 0] = 1.0 - eta * l2
    M[0, 1] = -eta
    M[1, 0] = momentum * l2
    M[1, 1] = momentum
    b[0] = -eta * c
    b[1] = momentum * c
    if dim == 3:
        M[2, 0] = M[0, 0]
        M[2, 1] = M[0, 1]
        M[2, 2] = 1.0
        b[2] = b[0]


@njit(cache=True)
def psd_factor(S, dim, F, L):
    """``F`` (3x3) with ``F Fᵀ = S`` (its ``dim x dim`` block, PSD); return its rank.

    Cholesky, where a pivot under ``PIVOT_RTOL`` times its diagonal entry
    counts as zero and its column is dropped; the kept columns are packed
    to the left, so ``F[:, :rank]`` are the only non-zero columns. ``L``:
    3x3 scratch (no allocation: this runs for every lag at every step).
    """
    for r in range(3):
        for s in range(3):
            L[r, s] = 0.0
            F[r, s] = 0.0
    for j in range(dim):
        d = S[j, j]
        for s in range(j):
            d -= L[j, s] * L[j, s]
        if S[j, j] > 0.0 and d > PIVOT_RTOL * S[j, j]:
            L[j, j] = math.sqrt(d)  # > 0: the column is kept
            for i in range(j + 1, dim):
                acc = S[i, j]
                for s in range(j):
                    acc -= L[i, s] * L[j, s]
                L[i, j] = acc / L[j, j]
    rank = 0
    for j in range(dim):
        if L[j, j] > 0.0:
            for i in range(dim):
                F[i, rank] = L[i, j]
            rank += 1
    return rank


@njit(cache=True)
def reset_momentum_tables(dim, Phi, Sig, F, rank):
    """The tables at a block's first step: lag 0 only (``Φ = I``, no noise)."""
    for r in range(3):
        for s in range(3):
            Phi[0, r, s] = 1.0 if (r == s and r < dim) else 0.0
            Sig[0, r, s] = 0.0
            F[0, r, s] = 0.0
    rank[0] = 0


@njit(cache=True)
def advance_momentum_tables(lag_max, eta_prev, same, momentum, l2, c, dim, Phi, Sig, F, rank):
    """Tables of step ``t`` (lags ``0 .. lag_max = t − f``) from those of step ``t − 1``.

    ``eta_prev = η_{t−1}``. ``same``: every step of the block so far had
    this step size, so the tables of the smaller lags are unchanged and only
    ``lag_max`` is computed.
    """
    M = np.empty((3, 3))
    b = np.empty(3)
    T = np.empty((3, 3))
    L = np.empty((3, 3))
    momentum_transition(eta_prev, momentum, l2, c, dim, M, b)
    lo = lag_max if same else 1
    for k in range(lag_max, lo - 1, -1):  # descending: lag k - 1 is still the old one
        for r in range(dim):
            for s in range(dim):
                acc = 0.0
                for u in range(dim):
                    acc += M[r, u] * Phi[k - 1, u, s]
                T[r, s] = acc
        for r in range(dim):
            for s in range(dim):
                Phi[k, r, s] = T[r, s]
        # Σ_k = M Σ_{k-1} Mᵀ + b bᵀ
        for r in range(dim):
            for s in range(dim):
                acc = 0.0
                for u in range(dim):
                    acc += M[r, u] * Sig[k - 1, u, s]
                T[r, s] = acc
        for r in range(dim):
            for s in range(dim):
                acc = 0.0
                for u in range(dim):
                    acc += T[r, u] * M[s, u]
                Sig[k, r, s] = acc + b[r] * b[s]
        rank[k] = psd_factor(Sig[k], dim, F[k], L)


@njit(cache=True)
def release_only_tables(lag_max, dim, Sig, F, rank):
    """Refactor the tables for a last catch-up whose carried momentum is never read.

    At the end of the run only ``θ`` (and ``A``) are released, so their
    marginal is all that must be exact: ``p``'s row and column of every
    ``Σ_k`` are dropped (``p`` then gets no noise, and is discarded), which
    saves a normal per coordinate in the tail (rank 2 instead of 3).
    """
    L = np.empty((3, 3))
    for k in range(lag_max + 1):
        for u in range(3):
            Sig[k, 1, u] = 0.0
            Sig[k, u, 1] = 0.0
        rank[k] = psd_factor(Sig[k], dim, F[k], L)


@njit(cache=True, inline="always")
def _catch_up_m(S, j, k, dim, b, Phi, F, rank, normals, used):
    """Apply coordinate ``j``'s pending steps up to ``b``; return the new ``used``.

    Branch-free in the lag: ``normals`` must have ``dim`` readable entries
    past the last one used (read, times 0).
    """
    w = S.shape[1] - 1
    lag = b - int(S[j, w])
    S[j, w] = b
    r = rank[lag]
    P = Phi[lag]
    G = F[lag]
    if dim == 3:
        for c in range(k):
            x0 = S[j, c]
            x1 = S[j, k + c]
            x2 = S[j, 2 * k + c]
            e0 = normals[used]
            e1 = normals[used + 1]
            e2 = normals[used + 2]
            S[j, c] = P[0, 0] * x0 + P[0, 1] * x1 + (G[0, 0] * e0 + G[0, 1] * e1 + G[0, 2] * e2)
            S[j, k + c] = (P[1, 0] * x0 + P[1, 1] * x1
                           + (G[1, 0] * e0 + G[1, 1] * e1 + G[1, 2] * e2))
            S[j, 2 * k + c] = (P[2, 0] * x0 + P[2, 1] * x1 + P[2, 2] * x2
                               + (G[2, 0] * e0 + G[2, 1] * e1 + G[2, 2] * e2))
            used += r
        return used
    for c in range(k):
        x0 = S[j, c]
        x1 = S[j, k + c]
        e0 = normals[used]
        e1 = normals[used + 1]
        S[j, c] = P[0, 0] * x0 + P[0, 1] * x1 + (G[0, 0] * e0 + G[0, 1] * e1)
        S[j, k + c] = P[1, 0] * x0 + P[1, 1] * x1 + (G[1, 0] * e0 + G[1, 1] * e1)
        used += r
    return used


@njit(cache=True)
def flush_momentum(S, k, dim, b, Phi, F, rank, normals, first, per_coordinate):
    """Catch the coordinates ``first ..`` up to step ``b`` (tables advanced to ``b``), or stop early.

    Stops before a coordinate whose ``per_coordinate`` normals (``dim k``;
    0 without noise) might not be in ``normals``, keeping ``3 k`` readable
    past the last one used (as :func:`lazy_momentum_steps`). Returns
    ``(normals used, the next coordinate)``: ``S.shape[0]`` when all are
    caught up. A flush of a million coordinates so runs through the blocks
    of normals as drawn, without a copy joining them.
    """
    used = 0
    room = normals.shape[0] - 3 * k
    for j in range(first, S.shape[0]):
        if used + per_coordinate > room:
            return used, j
        used = _catch_up_m(S, j, k, dim, b, Phi, F, rank, normals, used)
    return used, S.shape[0]


@njit(cache=True)
def lazy_momentum_steps(indptr, indices, data, batches, batch_ptr, y, S, k, dim, intercept,
                        intercept_v, intercept_sum, code, x_norm_sq, clip, t_first, block_start,
                        eta, normaliser, momentum, l2, c, noise_std, same, Phi, Sig, F, rank,
                        normals, used, R, loss_param, at, g_b):
    """Run the steps ``t_first ..`` of one block with momentum / weight decay, or stop early.

    Per step: the tables advanced to ``t``, then one pass over the batch's
    rows: each row's coordinates caught up to ``t`` (tables of step ``t``)
    and read into its decision values, its clipped residual, and at once
    (the row's non-zeros and state rows still in cache) its gradient
    ``x_i c_i r_iᵀ / N`` added to the carried momentum ``p`` of those
    coordinates. Fusing is exact: ``p`` is read by no residual of the step
    (only ``θ`` is, and a step's gradient reaches ``θ`` through the step's
    transition, pending as for every other coordinate), and each ``p`` gets
    the same terms in the same order as a separate pass would add them.
    Then the intercept's eager update (the arithmetic of
    :func:`~sklearn_fdp._kernels._update.sgd_update`, with ``k`` normals
    after the step's catch-ups). ``dim = 3``: in the tail. ``R``: scratch of
    ``k`` columns (unused for ``k = 1``). Returns the new ``used``.

    Only the coordinates of a row not yet caught up to ``t`` go through the
    catch-up: a first branch-free pass over the row lists them (on a
    one-hot click log ~80 % of the non-zeros are coordinates an earlier row
    of the same batch already caught up), then they are caught up in the
    row's order, then the decision values are read. A lag-0 catch-up is the
    identity (``Φ_0 = I``, ``F_0 = 0``, no normal), so skipping it changes
    no value (but the sign of a zero) and the normals are used in the same
    order; but run on every non-zero (as this kernel did) it
    made ``θ`` depend on the ``p`` the previous row had just updated (times
    0), which chained the rows, and a per-non-zero branch mispredicts on
    the ~20 % that do need one.

    The run stops before a row (or a step's intercept) that could need more
    normals than ``normals`` has left, keeping ``3 k`` readable past the
    last one used: a row at most ``dim k`` per non-zero (a catch-up of
    each) and ``k`` for its step's intercept. ``at`` (int64, in and out):
    ``at[0]`` the step the tables are at (advanced only to a later step, so
    a step is never advanced twice), ``at[1], at[2]`` the step (index into
    ``batch_ptr``) and row to start from; on return, where the run stopped
    (``at[1] = len(batch_ptr) - 1`` when every step ran). ``g_b`` (``k``):
    the intercept's gradient sum of the current step, kept across a stop
    inside a step. The caller hands the rest of the normals in, and after a
    stop a fresh block; where the stops fall depends only on how many
    normals each block holds, not on how the steps are split into calls.
    """
    inv_n = 1.0 / normaliser
    tail = dim == 3
    clip = _clip_target(clip, R, S.shape[0] + 1 + k)
    z = np.empty(k)
    r = np.empty(k)
    last = S.shape[1] - 1  # the column of the step each coordinate is caught up to
    pending = np.empty(64, dtype=np.intp)  # a row's coordinates to catch up (grows)
    # Normals a row may need per non-zero, and its step's intercept.
    per_nnz = k * dim if noise_std > 0.0 else 0
    per_step = k if noise_std > 0.0 and intercept.shape[0] else 0
    room = normals.shape[0] - 3 * k
    n_steps = batch_ptr.shape[0] - 1
    for s in range(at[1], n_steps):
        t = t_first + s
        first_row = at[2] if s == at[1] else 0
        if first_row == 0:
            if used + per_step > room:
                at[1], at[2] = s, 0
                return used
            for cc in range(k):
                g_b[cc] = 0.0
        if t > at[0]:
            advance_momentum_tables(t - block_start, eta[t - 1], same, momentum, l2, c, dim,
                                    Phi, Sig, F, rank)
            at[0] = t
        idx = batches[batch_ptr[s]:batch_ptr[s + 1]]
        for ii in range(first_row, idx.shape[0]):
            i = idx[ii]
            start, stop = indptr[i], indptr[i + 1]
            if used + (stop - start) * per_nnz + per_step > room:
                at[1], at[2] = s, ii
                return used
            _prefetch_ahead(indptr, indices, data, S, idx, ii)
            pending, n_pending = _lagging(indices, start, stop, S, last, t, pending)
            for q in range(n_pending):  # the coordinates behind t
                used = _catch_up_m(S, pending[q], k, dim, t, Phi, F, rank, normals, used)
            if k == 1:  # binary: scalar decision value, kept in a register
                z0 = intercept[0] if intercept.shape[0] else 0.0
                for p in range(start, stop):
                    z0 += data[p] * S[indices[p], 0]
                z[0] = z0
            else:
                for cc in range(k):
                    z[cc] = intercept[cc] if intercept.shape[0] else 0.0
                for p in range(start, stop):
                    j = indices[p]
                    v = data[p]
                    for cc in range(k):
                        z[cc] += v * S[j, cc]
            _clipped_residual_row(z, y[i], code, x_norm_sq[i], clip, r, loss_param)
            if k == 1:
                r0 = r[0]
                for p in range(start, stop):
                    S[indices[p], 1] += (inv_n * data[p]) * r0
                g_b[0] += r0
            else:
                for p in range(start, stop):
                    j = indices[p]
                    v = inv_n * data[p]
                    for cc in range(k):
                        S[j, k + cc] += v * r[cc]
                for cc in range(k):
                    g_b[cc] += r[cc]
        if intercept.shape[0]:
            for cc in range(k):
                gb = g_b[cc]
                if noise_std > 0.0:
                    gb += noise_std * normals[used + cc]
                grad = gb / normaliser
                if l2 != 0.0:
                    grad = grad + l2 * intercept[cc]
                if momentum != 0.0:
                    intercept_v[cc] = intercept_v[cc] * momentum
                    intercept_v[cc] = intercept_v[cc] + grad
                    step = eta[t] * intercept_v[cc]
                else:
                    step = eta[t] * grad
                intercept[cc] = intercept[cc] - step
                if tail:
                    intercept_sum[cc] += intercept[cc]
            if noise_std > 0.0:
                used += k
    at[1], at[2] = n_steps, 0
    return used

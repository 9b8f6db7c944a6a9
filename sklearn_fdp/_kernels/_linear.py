"""Numba kernels for clipped per-example gradients of linear models.

A linear model's per-example gradient is the outer product ``x~_i r_iᵀ``
(``x~`` the row with its intercept ``1``, ``r`` the loss's residual), so its
norm is ``‖x~_i‖ · ‖r_i‖`` and the clipped batch sum is
``Σ_i c_i x~_i r_iᵀ``. The kernels below fuse, row by row, the decision
values, the residual, the norm, the clip factor and the accumulation of the
sum: nothing of shape ``batch × d × k`` (nor ``batch × d``) is ever built.

Rules for every kernel here:

* no randomness inside (noise is drawn by the caller from its own stream);
* no ``fastmath``: norms and clip factors must be IEEE-exact (a reordered
  or approximated norm could let a gradient exceed the clip bound);
* ``cache=True``: compiled once per signature and kept on disk, so a new
  process does not recompile;
* inputs are read, never written, except the ``out`` arguments.

Loss codes (``loss_code``): see :data:`BINARY_LOG` ... :data:`EPSILON_INSENSITIVE`.
Targets ``y`` are float64: 0/1 for the binary log loss, ±1 for the binary
hinge, the class index for the multiclass losses, the target value for the
regression losses (one output column). ``loss_param`` is the margin ε of
the Huber and epsilon-insensitive losses (ignored by the others).
"""

import math

import numpy as np
from numba import njit

from ._prefetch import prefetch

BINARY_LOG = 0  #: logistic loss, one output column
MULTI_LOG = 1  #: multinomial (softmax) log loss, k columns
BINARY_HINGE = 2  #: max(0, 1 - y z), y in {-1, +1}
MULTI_HINGE = 3  #: Crammer–Singer multiclass hinge
SQUARED = 4  #: squared error ½ (z − y)², residual z − y
HUBER = 5  #: Huber with margin ε, residual clip(z − y, −ε, ε)
EPSILON_INSENSITIVE = 6  #: max(0, |z − y| − ε), residual sign(z − y) 1[|z − y| > ε]

REGRESSION_CODES = {"squared_error": SQUARED, "huber": HUBER,
                    "epsilon_insensitive": EPSILON_INSENSITIVE}


def loss_code(loss, n_outputs):
    """Kernel loss code of a loss name and ``k`` (the regression losses need ``k = 1``)."""
    if loss == "log_loss":
        return BINARY_LOG if n_outputs == 1 else MULTI_LOG
    if loss == "hinge":
        return BINARY_HINGE if n_outputs == 1 else MULTI_HINGE
    if loss in REGRESSION_CODES:
        if n_outputs != 1:
            raise ValueError(f"The regression loss {loss!r} has one output column, "
                             f"got n_outputs={n_outputs}.")
        return REGRESSION_CODES[loss]
    raise ValueError(f"Unknown loss {loss!r}; use 'log_loss', 'hinge' or one of "
                     f"{sorted(REGRESSION_CODES)}.")


# Subnormal floats (below the smallest normal, TINY) make every operation on
# them tens to hundreds of times slower (a microcode assist, or glibc's slow
# path of exp). A model with large logits (large steps on rows of large
# norm) produces them in the log losses' residuals: exp(z_c - z_max) for a
# gap beyond 708, and squares r_c² of residuals below sqrt(TINY) (a gap
# beyond ~354). The residuals below flush such entries to exact zeros: the
# result differs only where a subnormal (or an underflow to 0) occurred, and
# a zeroed entry only shrinks the per-example gradient, so the clip bound
# holds (the norm is taken over the entries kept).
TINY = float(np.finfo(np.float64).tiny)
SQRT_TINY = 1.49e-154  # r² < TINY below (sqrt(TINY) = 1.4917e-154)
EXP_UNDERFLOW = -708.5  # exp(x) < TINY below (log(TINY) = -708.396)
# The regression residuals are unbounded (z − y): one beyond this is set to
# ±RESIDUAL_MAX, so that its square stays finite (a smaller residual in the
# same direction: a shorter per-example gradient, which the clip bound
# allows). Only a diverging run or an absurd target reaches it.
RESIDUAL_MAX = 1e150


@njit(cache=True, inline="always")
def _sigmoid(z):
    if z >= 0.0:
        # exp(-z) would be subnormal or 0; 1 + it is 1 either way.
        return 1.0 / (1.0 + (math.exp(-z) if z <= -EXP_UNDERFLOW else 0.0))
    if z < EXP_UNDERFLOW:
        return 0.0  # e / (1 + e) = e, subnormal or 0 (NaN goes on to exp)
    e = math.exp(z)
    return e / (1.0 + e)


@njit(cache=True, inline="always")
def _regression_residual(z0, yi, code, loss_param):
    """Residual of one row of a regression loss (code ``SQUARED`` .. ``EPSILON_INSENSITIVE``)."""
    diff = z0 - yi
    if code == SQUARED:
        r0 = diff
    elif code == HUBER:
        r0 = loss_param if diff > loss_param else (-loss_param if diff < -loss_param else diff)
    else:  # epsilon-insensitive
        r0 = 1.0 if diff > loss_param else (-1.0 if diff < -loss_param else 0.0)
    if abs(r0) < SQRT_TINY:
        return 0.0  # (NaN is not below: it stays NaN)
    if r0 > RESIDUAL_MAX:
        return RESIDUAL_MAX
    if r0 < -RESIDUAL_MAX:
        return -RESIDUAL_MAX
    return r0


@njit(cache=True, inline="always")
def residual_row(z, yi, code, r, loss_param=0.0):
    """Residual ``r`` (length k) of one row from its decision values ``z``.

    Returns ``‖r‖²``. Log-loss and regression entries whose square would be
    subnormal (``|r_c| < SQRT_TINY``) are exact zeros (see ``TINY`` above);
    regression residuals beyond ``RESIDUAL_MAX`` are set to it.
    ``loss_param``: the margin ε of ``HUBER`` and ``EPSILON_INSENSITIVE``.
    """
    k = z.shape[0]
    if code >= SQUARED:
        r0 = _regression_residual(z[0], yi, code, loss_param)
        r[0] = r0
        return r0 * r0
    if code == BINARY_LOG:
        r0 = _sigmoid(z[0]) - yi
        if abs(r0) < SQRT_TINY:
            r0 = 0.0
        r[0] = r0
        return r0 * r0
    if code == BINARY_HINGE:
        r[0] = -yi if yi * z[0] < 1.0 else 0.0
        return r[0] * r[0]
    label = int(yi)
    if code == MULTI_LOG:
        zmax = z[0]
        for c in range(1, k):
            if z[c] > zmax:
                zmax = z[c]
        total = 0.0
        for c in range(k):
            gap = z[c] - zmax
            # Not `gap >= ...`: a NaN gap must go on to exp (and stay NaN).
            r[c] = 0.0 if gap < EXP_UNDERFLOW else math.exp(gap)
            total += r[c]
        sq = 0.0
        for c in range(k):
            r[c] /= total
        r[label] -= 1.0
        for c in range(k):
            if abs(r[c]) < SQRT_TINY:
                r[c] = 0.0
            else:
                sq += r[c] * r[c]
        return sq
    # Crammer–Singer: the runner-up j != y (first index on ties, like argmax).
    best = -1
    for c in range(k):
        if c != label and (best < 0 or z[c] > z[best]):
            best = c
    for c in range(k):
        r[c] = 0.0
    if 1.0 + z[best] - z[label] > 0.0:
        r[best] = 1.0
        r[label] = -1.0
        return 2.0
    return 0.0


# Clipping aims below the clip norm C: a factor C / ‖g‖ computed in floating
# point leaves ‖c g‖ = C (1 + O(ulp)) — above C about half of the time, and
# more once the vector is rounded to float32 — while the accountant assumes
# ≤ C (issue 16 item 11). The margin is CLIP_MARGIN_EPS machine epsilons of
# the dtype the clipped vectors are stored and summed in (the rounding of the
# factor, of c g and of its cast to that dtype), plus one float64 epsilon per
# term of the float64 norm computation (``n_terms``: the squares summed, d + 1
# features and k residuals; a bound on the rounding of a sum of positive
# terms in any order). It changes clipped values in their last bits only.
CLIP_MARGIN_EPS = 4
_EPS64 = float(np.finfo(np.float64).eps)


def clip_target(clip, dtype, n_terms=0):
    """The norm clip factors aim at: ``clip (1 − 4 eps(dtype) − n_terms eps64)``.

    ``dtype`` is the one the clipped vectors are stored and summed in,
    ``n_terms`` the number of squares summed to compute their norms in
    float64; ``inf`` stays ``inf``. The same arithmetic as the kernels'
    ``_clip_target``.
    """
    return float(clip) * ((1.0 - CLIP_MARGIN_EPS * float(np.finfo(dtype).eps))
                          - n_terms * _EPS64)


@njit(cache=True, inline="always")
def _clip_target(clip, like, n_terms):
    """:func:`clip_target` for the dtype of the array ``like`` (inside kernels)."""
    return clip * ((1.0 - CLIP_MARGIN_EPS * np.finfo(like.dtype).eps) - n_terms * _EPS64)


@njit(cache=True, inline="always")
def _clip_factor(norm_sq, target):
    """``min(1, target / norm)``; 1 for a zero gradient or ``target = inf``.

    ``target`` is the clip norm shrunk by :func:`_clip_target`, never the
    bare ``C``: ``target / norm`` itself rounds up as often as down.
    """
    if norm_sq <= 0.0:
        return 1.0
    norm = math.sqrt(norm_sq)
    if norm <= target:
        return 1.0
    return target / norm


@njit(cache=True, inline="always")
def _clipped_residual_row(z, yi, code, x_norm_sq_i, target, r, loss_param=0.0):
    """``r = c r(z)``, the clipped residual of one row; False when it is zero.

    ``c = min(1, target / (‖x~‖ ‖r‖))`` with ``x_norm_sq_i = ‖x~‖²`` and
    ``target`` from :func:`_clip_target`.
    """
    rsq = residual_row(z, yi, code, r, loss_param)
    if rsq == 0.0:
        return False
    s = _clip_factor(x_norm_sq_i * rsq, target)
    if s != 1.0:  # (a NaN s scales too, as it always did)
        for c in range(r.shape[0]):
            v = r[c] * s
            r[c] = 0.0 if abs(v) < TINY else v  # no subnormal into the sums
    return True


@njit(cache=True)
def clip_residuals(Z, y, code, x_norm_sq, clip, n_rows=0, loss_param=0.0):
    """Turn decision values ``Z`` (m × k) into clipped residuals, in place.

    Row ``i`` becomes ``c_i r_i`` with ``c_i = min(1, clip / (‖x~_i‖ ‖r_i‖))``
    (``x_norm_sq[i] = ‖x~_i‖²``, intercept included), so that the clipped
    sum is ``X~ᵀ Z`` afterwards. Used by the BLAS path for wide ``k``.
    ``clip`` is aimed at in ``Z``'s dtype, for norms of ``n_rows`` (the
    length of ``x~``) plus k squares (:func:`clip_target`).
    """
    m, k = Z.shape
    clip = _clip_target(clip, Z, n_rows + k)
    tiny = np.finfo(Z.dtype).tiny  # a float32 Z: no float32 subnormal into the GEMM
    z = np.empty(k)
    r = np.empty(k)
    for i in range(m):
        for c in range(k):
            z[c] = Z[i, c]
        _clipped_residual_row(z, y[i], code, x_norm_sq[i], clip, r, loss_param)
        for c in range(k):
            Z[i, c] = 0.0 if abs(r[c]) < tiny else r[c]


@njit(cache=True)
def dense_clipped_sum(X, idx, y, theta, code, fit_intercept, x_norm_sq, clip, out,
                      loss_param=0.0):
    """Add ``Σ_{i ∈ idx} clip(x~_i r_iᵀ)`` to ``out`` for dense ``X``, fused.

    ``theta`` is ``(d + fit_intercept) × k``, its last row the intercept.
    ``x_norm_sq[i] = ‖x~_i‖²`` over *all* rows of ``X``. ``clip`` is aimed
    at in ``out``'s dtype (:func:`clip_target`).
    """
    d = X.shape[1]
    k = theta.shape[1]
    clip = _clip_target(clip, out, theta.shape[0] + k)
    z = np.empty(k)
    r = np.empty(k)
    for ii in range(idx.shape[0]):
        i = idx[ii]
        for c in range(k):
            z[c] = theta[d, c] if fit_intercept else 0.0
        if k == 1:
            acc = 0.0
            for j in range(d):
                acc += X[i, j] * theta[j, 0]
            z[0] += acc
        else:
            for j in range(d):
                xij = X[i, j]
                if xij != 0.0:
                    for c in range(k):
                        z[c] += xij * theta[j, c]
        if not _clipped_residual_row(z, y[i], code, x_norm_sq[i], clip, r, loss_param):
            continue
        if k == 1:
            r0 = r[0]
            for j in range(d):
                out[j, 0] += X[i, j] * r0
        else:
            for j in range(d):
                xij = X[i, j]
                if xij != 0.0:
                    for c in range(k):
                        out[j, c] += xij * r[c]
        if fit_intercept:
            for c in range(k):
                out[d, c] += r[c]


@njit(cache=True)
def csr_clipped_sum(indptr, indices, data, idx, y, theta, code, fit_intercept, x_norm_sq,
                    clip, out, loss_param=0.0):
    """:func:`dense_clipped_sum` for a CSR matrix given by its three arrays."""
    d = theta.shape[0] - (1 if fit_intercept else 0)
    k = theta.shape[1]
    clip = _clip_target(clip, out, theta.shape[0] + k)
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
        if not _clipped_residual_row(z, y[i], code, x_norm_sq[i], clip, r, loss_param):
            continue
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = data[p]
            for c in range(k):
                out[j, c] += v * r[c]
        if fit_intercept:
            for c in range(k):
                out[d, c] += r[c]


@njit(cache=True)
def clip_factors(norms, target, out):
    """``out[i] = min(1, target / norms[i])`` (1 for a zero norm).

    ``target`` is :func:`clip_target` of the clip norm and of the dtype the
    clipped vectors are stored and summed in (the caller knows it; ``norms``
    and ``out`` are float64).
    """
    for i in range(norms.shape[0]):
        norm = norms[i]
        out[i] = 1.0 if not norm > target else target / norm


# Rows ahead of the copy that ``gather_rows`` prefetches (see ``_prefetch``).
GATHER_PREFETCH_ROWS = 4


@njit(cache=True)
def gather_rows(X, idx, out):
    """``out[ii] = X[idx[ii]]`` for a C-contiguous 2-D ``X``: ``np.take(X, idx, axis=0, out=out)``.

    The same values (a copy), with the rows ``GATHER_PREFETCH_ROWS`` ahead
    requested from memory while the current one is copied.
    """
    m = idx.shape[0]
    d = X.shape[1]
    for ii in range(m):
        if ii + GATHER_PREFETCH_ROWS < m:
            ahead = idx[ii + GATHER_PREFETCH_ROWS]
            for c in range(0, d, 8):
                prefetch(X, ahead, c)
            prefetch(X, ahead, d - 1)
        i = idx[ii]
        for c in range(d):
            out[ii, c] = X[i, c]


@njit(cache=True, inline="always")
def _public_residual_row(z, yi, code, label_public, prior, r):
    """``r_pub`` of one row (FDP Algorithm 1's ``ℓ_pub``) from its public decision values.

    With a public label, the loss's residual (:func:`residual_row`); else
    the label-free ``p − π`` (``σ(z) − π`` binary, ``softmax(z) − π``
    multiclass), as ``sklearn_fdp._mechanisms.fdp._public_residual``.
    """
    if label_public:
        residual_row(z, yi, code, r)
        return
    k = z.shape[0]
    if k == 1:
        r[0] = _sigmoid(z[0]) - prior
        return
    zmax = z[0]
    for c in range(1, k):
        if z[c] > zmax:
            zmax = z[c]
    total = 0.0
    for c in range(k):
        gap = z[c] - zmax
        r[c] = 0.0 if gap < EXP_UNDERFLOW else math.exp(gap)
        total += r[c]
    for c in range(k):
        r[c] = r[c] / total - prior


# Rows ahead whose CSR row pointer, and whose indices and values, the fused
# FDP kernels prefetch (a batch's rows are scattered over the matrix).
FDP_INDPTR_AHEAD, FDP_ROW_AHEAD = 8, 4


@njit(cache=True, inline="always")
def _prefetch_csr_rows(indptr, indices, data, idx, ii):
    m = idx.shape[0]
    if ii + FDP_INDPTR_AHEAD < m:
        prefetch(indptr, idx[ii + FDP_INDPTR_AHEAD], 0)
    if ii + FDP_ROW_AHEAD < m:
        i4 = idx[ii + FDP_ROW_AHEAD]
        start, stop = indptr[i4], indptr[i4 + 1]
        if stop > start:
            prefetch(indices, start, 0)
            prefetch(indices, stop - 1, 0)
            prefetch(data, start, 0)
            prefetch(data, stop - 1, 0)


@njit(cache=True)
def fdp_csr_step(indptr, indices, data, idx, pub_idx, y, theta, code, fit_intercept, public,
                 pub_norm_sq, label_public, prior, clip, out, pub_out):
    """Both oracles of one step of FDP Algorithm 1 in one compiled call.

    :func:`fdp_csr_private_sum` over ``idx`` into ``out`` and
    :func:`fdp_csr_public_sum` over ``pub_idx`` into ``pub_out`` (arguments
    as there), the two batches' rows interleaved (one private row, then one
    public row): the work of the two is independent, and overlaps in the
    CPU. Each sum adds its rows in batch order; the two kernels are this one
    with the other batch empty (one call per batch: a shared ``inline`` helper
    per row would cost reference counting per row, so the loop bodies live
    here once).
    """
    d = theta.shape[0] - (1 if fit_intercept else 0)
    k = theta.shape[1]
    target = _clip_target(clip, out, theta.shape[0] + 2 * k)
    z = np.empty(k)
    zp = np.empty(k)
    r = np.empty(k)
    rp = np.empty(k)
    zq = np.empty(k)
    rq = np.empty(k)
    n_priv = idx.shape[0]
    n_pub = pub_idx.shape[0]
    for ii in range(max(n_priv, n_pub)):
        if ii < n_priv:
            i = idx[ii]
            _prefetch_csr_rows(indptr, indices, data, idx, ii)
            for c in range(k):
                z[c] = theta[d, c] if fit_intercept else 0.0
                zp[c] = z[c]
            xq_sq = 0.0
            if k == 1:  # binary: scalar decision values, kept in registers
                z0 = z[0]
                zp0 = zp[0]
                for p in range(indptr[i], indptr[i + 1]):
                    j = indices[p]
                    v = data[p]
                    m = public[j]
                    xq_sq += (1.0 - m) * (v * v)
                    u = v * theta[j, 0]
                    z0 += u
                    zp0 += m * u
                z[0] = z0
                zp[0] = zp0
            else:
                for p in range(indptr[i], indptr[i + 1]):
                    j = indices[p]
                    v = data[p]
                    m = public[j]
                    xq_sq += (1.0 - m) * (v * v)
                    for c in range(k):
                        u = v * theta[j, c]
                        z[c] += u
                        zp[c] += m * u
            residual_row(z, y[i], code, r)
            _public_residual_row(zp, y[i], code, label_public, prior, rp)
            dd = 0.0
            rr = 0.0
            for c in range(k):
                rp[c] = r[c] - rp[c]  # now D = r − r_pub
                dd += rp[c] * rp[c]
                rr += r[c] * r[c]
            s = _clip_factor(pub_norm_sq[i] * dd + xq_sq * rr, target)
            for c in range(k):
                rp[c] *= s
                r[c] *= s
            if k == 1:
                d0 = rp[0]
                r0 = r[0]
                for p in range(indptr[i], indptr[i + 1]):
                    j = indices[p]
                    m = public[j]
                    out[j, 0] += data[p] * (m * d0 + (1.0 - m) * r0)
            else:
                for p in range(indptr[i], indptr[i + 1]):
                    j = indices[p]
                    v = data[p]
                    m = public[j]
                    for c in range(k):
                        out[j, c] += v * (m * rp[c] + (1.0 - m) * r[c])
            if fit_intercept:
                for c in range(k):
                    out[d, c] += rp[c]
        if ii < n_pub:
            i = pub_idx[ii]
            _prefetch_csr_rows(indptr, indices, data, pub_idx, ii)
            if k == 1:  # binary: scalars, kept in registers
                zq0 = theta[d, 0] if fit_intercept else 0.0
                for p in range(indptr[i], indptr[i + 1]):
                    zq0 += (data[p] * public[indices[p]]) * theta[indices[p], 0]
                zq[0] = zq0
            else:
                for c in range(k):
                    zq[c] = theta[d, c] if fit_intercept else 0.0
                for p in range(indptr[i], indptr[i + 1]):
                    j = indices[p]
                    v = data[p] * public[j]
                    for c in range(k):
                        zq[c] += v * theta[j, c]
            _public_residual_row(zq, y[i], code, label_public, prior, rq)
            if k == 1:
                rq0 = rq[0]
                for p in range(indptr[i], indptr[i + 1]):
                    j = indices[p]
                    pub_out[j, 0] += (data[p] * public[j]) * rq0
            else:
                for p in range(indptr[i], indptr[i + 1]):
                    j = indices[p]
                    v = data[p] * public[j]
                    for c in range(k):
                        pub_out[j, c] += v * rq[c]
            if fit_intercept:
                for c in range(k):
                    pub_out[d, c] += rq[c]


@njit(cache=True)
def fdp_csr_private_sum(indptr, indices, data, idx, y, theta, code, fit_intercept, public,
                        pub_norm_sq, label_public, prior, clip, out):
    """Clipped sum of FDP Algorithm 1's private gradients ``∇ℓ − ∇ℓ_pub`` (CSR rows), fused.

    ``public_loss="mask"`` (the public view sets the private columns to 0):
    per row, the decision values at ``x~`` and at its public view, the
    residuals ``r`` and ``r_pub``, the norm of ``[x_P (r − r_pub)ᵀ ; x_Q rᵀ]``
    from its two orthogonal blocks (``pub_norm_sq[i] = ‖x_P‖²`` with the
    intercept, as :func:`~sklearn_fdp._mechanisms.fdp.private_gradient_norms_sq`),
    the clip factor ``c`` (aimed at :func:`clip_target` of ``clip`` for norms
    of ``theta.shape[0] + 2 k`` squares) and the sum ``out += c [x_P (r −
    r_pub)ᵀ ; x_Q rᵀ ; (r − r_pub)ᵀ]``; nothing batch-sized is built.
    ``theta`` is ``(d + fit_intercept) × k``; ``public`` is 1.0 on the
    public columns and 0.0 on the private ones (multiplied in, exactly:
    no branch per non-zero). ``out`` is added to.
    """
    fdp_csr_step(indptr, indices, data, idx, idx[:0], y, theta, code, fit_intercept, public,
                 pub_norm_sq, label_public, prior, clip, out, out)


@njit(cache=True)
def fdp_csr_public_sum(indptr, indices, data, idx, y, theta, code, fit_intercept, public,
                       label_public, prior, out):
    """``out += Σ_i x~_pub,i r_pub,iᵀ`` over the CSR rows ``idx`` (``"mask"``, fused).

    FDP Algorithm 1's public gradient sum (not clipped; the caller divides
    by the batch size); arguments as in :func:`fdp_csr_private_sum`.
    """
    fdp_csr_step(indptr, indices, data, idx[:0], idx, y, theta, code, fit_intercept, public,
                 public, label_public, prior, 1.0, out, out)


@njit(cache=True, inline="always")
def _binary_log_residual(z0, yi):
    """``residual_row`` of ``BINARY_LOG`` for one scalar decision value (no arrays)."""
    r0 = _sigmoid(z0) - yi
    if abs(r0) < SQRT_TINY:
        r0 = 0.0
    return r0


@njit(cache=True)
def fdp_csr_step_binary(indptr, indices, data, pub_indptr, pub_indices, pub_data, idx, pub_idx,
                        y, theta, fit_intercept, public, pub_norm_sq, label_public, prior, clip,
                        out, pub_out):
    """:func:`fdp_csr_step` for the binary log loss (``k = 1``), bit for bit, faster.

    Arguments as there, plus ``pub_indptr, pub_indices, pub_data``: the same
    rows with their public entries only (:func:`~sklearn_fdp._kernels.csr_keep_columns`,
    column indices unchanged), which the public rows read instead of
    multiplying every entry by ``public[j]``. A private entry adds
    ``(x 0) θ_j = ±0`` to the public decision value and ``±0`` to the
    public sum in :func:`fdp_csr_step`: nothing (finite θ), so both give the
    same bits. The residuals are scalars (no length-1 arrays), the loops are
    written out (no inline helper taking arrays, which costs reference
    counting per row). Measured on Adult (226 steps, two batches of ~1,444
    rows each, one thread, a loaded machine): 63-70 ms against 95-105 ms for
    :func:`fdp_csr_step`, a third less.
    """
    d = theta.shape[0] - (1 if fit_intercept else 0)
    target = _clip_target(clip, out, theta.shape[0] + 2)
    b = theta[d, 0] if fit_intercept else 0.0
    n_priv = idx.shape[0]
    n_pub = pub_idx.shape[0]
    for ii in range(max(n_priv, n_pub)):
        if ii < n_priv:
            i = idx[ii]
            _prefetch_csr_rows(indptr, indices, data, idx, ii)
            z0 = b
            zp0 = b
            xq_sq = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                v = data[p]
                m = public[j]
                xq_sq += (1.0 - m) * (v * v)
                u = v * theta[j, 0]
                z0 += u
                zp0 += m * u
            yi = y[i]
            r0 = _binary_log_residual(z0, yi)
            rp0 = _binary_log_residual(zp0, yi) if label_public else _sigmoid(zp0) - prior
            d0 = r0 - rp0  # D = r − r_pub
            s = _clip_factor(pub_norm_sq[i] * (d0 * d0) + xq_sq * (r0 * r0), target)
            d0 *= s
            r0 *= s
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                m = public[j]
                out[j, 0] += data[p] * (m * d0 + (1.0 - m) * r0)
            if fit_intercept:
                out[d, 0] += d0
        if ii < n_pub:
            i = pub_idx[ii]
            _prefetch_csr_rows(pub_indptr, pub_indices, pub_data, pub_idx, ii)
            zq0 = b
            for p in range(pub_indptr[i], pub_indptr[i + 1]):
                zq0 += pub_data[p] * theta[pub_indices[p], 0]
            rq0 = _binary_log_residual(zq0, y[i]) if label_public else _sigmoid(zq0) - prior
            for p in range(pub_indptr[i], pub_indptr[i + 1]):
                pub_out[pub_indices[p], 0] += pub_data[p] * rq0
            if fit_intercept:
                pub_out[d, 0] += rq0

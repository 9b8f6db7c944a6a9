"""The numba kernels against the plain-numpy references of ``tests/_reference``."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_fdp import _kernels as K
from sklearn_fdp._engine import LinearGradientOracle, LinearLoss

from ._reference import clipped_sum, nothing_pending, per_example_gradients

# Shapes the issue names: one row, d = 1, k = 2 (binary as softmax), k = 100,
# plus ordinary ones. (n, d, k)
SHAPES = [(1, 1, 1), (7, 1, 2), (20, 5, 1), (20, 5, 2), (12, 9, 100), (30, 3, 4)]
LOSSES = ["log_loss", "hinge"]
DTYPES = [np.float64, np.float32]


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)


def _problem(n, d, k, loss, dtype, seed, zero_rows=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.4] = 0.0
    if zero_rows and n > 2:
        X[1] = 0.0  # an all-zero row (its gradient is the intercept's only)
    y_index = rng.integers(0, max(k, 2), n)
    lin = LinearLoss(loss, k)
    y = lin.encode(y_index)
    theta = rng.normal(size=(d + 1, k))
    return X.astype(dtype), y, lin, theta.astype(dtype)


def _batches(n, rng):
    yield np.array([], dtype=np.intp)  # empty batch
    yield np.array([n - 1])  # one row
    yield rng.integers(0, n, size=2 * n)  # repeats allowed (Poisson + replace)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("n,d,k", SHAPES)
@pytest.mark.parametrize("path", ["blas", "fused", "csr"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_clipped_sum_matches_reference(n, d, k, loss, dtype, path, fit_intercept):
    X, y, lin, theta = _problem(n, d, k, loss, dtype, seed=n * 1000 + d * 10 + k)
    theta = theta[: d + int(fit_intercept)]
    data = sp.csr_matrix(X) if path == "csr" else X
    rng = np.random.default_rng(0)
    for clip in (0.3, np.inf):
        oracle = LinearGradientOracle(data, y, lin, fit_intercept, clip)
        if path != "csr":
            oracle.path = path
        for idx in _batches(n, rng):
            got = oracle(idx, theta)
            assert got.dtype == dtype and got.shape == theta.shape
            grads = per_example_gradients(X[idx].astype(np.float64), y[idx],
                                          theta.astype(np.float64), loss, k, fit_intercept)
            want = clipped_sum(grads, clip) if len(idx) else np.zeros(theta.shape)
            np.testing.assert_allclose(got, want, **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("n,d,k", SHAPES)
def test_lazy_residuals_and_scatter_match_reference(n, d, k, loss, dtype):
    # With nothing pending (every last[j] = t) the lazy pass is the plain clipped sum.
    X, y, lin, theta = _problem(n, d, k, loss, dtype, seed=7 + n + d + k)
    A = sp.csr_matrix(X)
    x_norm_sq = (X.astype(np.float64) ** 2).sum(1) + 1.0
    t = 5
    S, tables = nothing_pending(theta, d, k, t)
    assert [tab[0] for tab in tables] == [0.0, 0.0, 0.0]  # nothing pending: no noise
    idx = np.random.default_rng(1).integers(0, n, size=n)
    R = np.empty((n, k))
    used = K.lazy_clipped_residuals(A.indptr, A.indices, A.data, idx, y.astype(np.float64), S, k,
                                    theta[d].astype(np.float64), K.loss_code(loss, k), x_norm_sq,
                                    0.5, t, t, *tables, False, np.zeros(2 * k), 0, R)
    assert used == 0
    grads = per_example_gradients(X[idx].astype(np.float64), y[idx], theta.astype(np.float64),
                                  loss, k, True)
    want = clipped_sum(grads, 0.5)
    # The intercept row of the clipped sum is the residuals' sum ...
    np.testing.assert_allclose(R.sum(axis=0), want[d], **_tol(dtype))
    # ... and scatter-adding them reproduces the feature rows (S's other columns untouched).
    S[:, :k] = 0.0
    K.csr_scatter_add(A.indptr, A.indices, A.data, idx, R, 1.0, S)
    np.testing.assert_allclose(S[:, :k], want[:d], **_tol(dtype))
    assert np.all(S[:, k] == t)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("code,k", [(K.BINARY_LOG, 1), (K.MULTI_LOG, 2), (K.MULTI_LOG, 100),
                                    (K.BINARY_HINGE, 1), (K.MULTI_HINGE, 100)])
def test_clip_residuals_in_place(code, k, dtype):
    rng = np.random.default_rng(k + code)
    m = 25
    Z = (3 * rng.normal(size=(m, k))).astype(dtype)
    if code == K.BINARY_LOG:
        y = rng.integers(0, 2, m).astype(float)
    elif code == K.BINARY_HINGE:
        y = rng.choice([-1.0, 1.0], m)
    else:
        y = rng.integers(0, k, m).astype(float)
    x_norm_sq = rng.uniform(0, 4, m)
    x_norm_sq[0] = 0.0
    loss = "log_loss" if code in (K.BINARY_LOG, K.MULTI_LOG) else "hinge"
    R = LinearLoss(loss, k).residual(Z.astype(np.float64), y if k == 1 else y.astype(np.intp))
    norms = np.sqrt(x_norm_sq * (R**2).sum(axis=1))
    factor = np.where(norms > 0, 0.7 / np.where(norms > 0, norms, 1.0), 1.0)
    want = R * np.minimum(1.0, factor)[:, None]
    got = Z.copy()
    K.clip_residuals(got, y, code, x_norm_sq, 0.7)
    np.testing.assert_allclose(got, want, **_tol(dtype))


def _old_softmax_residual(z, label):
    """The multinomial residual as the kernel computed it before the subnormal flush
    (the same IEEE operations in Python floats)."""
    import math

    zmax = max(z)
    r = [math.exp(v - zmax) for v in z]
    total = 0.0
    for v in r:
        total += v
    r = [v / total for v in r]
    r[label] -= 1.0
    sq = 0.0
    for v in r:
        sq += v * v
    return r, sq


def test_residuals_without_subnormals_are_unchanged_bit_for_bit():
    # Logit gaps up to ~350: no exp, quotient or square is subnormal, so the
    # flush must not change a bit.
    rng = np.random.default_rng(0)
    r = np.empty(100)
    for spread in (1.0, 30.0, 300.0):
        for _ in range(50):
            z = rng.uniform(-spread, 0.0, 100)
            label = int(rng.integers(100))
            want, want_sq = _old_softmax_residual(z.tolist(), label)
            assert min(abs(v) for v in want if v != 0.0) >= K._linear.SQRT_TINY
            sq = K.residual_row(z, float(label), K.MULTI_LOG, r)
            assert sq == want_sq
            np.testing.assert_array_equal(r, want)


@pytest.mark.parametrize("code,k", [(K.MULTI_LOG, 100), (K.BINARY_LOG, 1)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_huge_logits_give_no_subnormal_residuals_and_stay_clipped(code, k, dtype):
    # Logit gaps of hundreds to thousands (large steps on rows of large norm)
    # used to fill the residuals with subnormals (slow in every later
    # operation). They are flushed to exact zeros; what is kept matches the
    # reference, and the clipped gradient norm stays below C.
    rng = np.random.default_rng(1)
    m = 64
    Z = rng.uniform(-3000.0, 3000.0, size=(m, k))
    if k > 1:
        Z[:, 0] = 0.0  # one class near the top, the others spread below it
    else:
        Z[:16, 0] = rng.uniform(-720.0, -350.0, 16)  # sigmoid's tiny band
    y = (rng.integers(0, 2, m) if k == 1 else rng.integers(0, k, m)).astype(float)
    x_norm_sq = rng.uniform(1.0, 1e4, m)
    x_norm_sq[:4] = 1e300  # rows of enormous norm: tiny residuals must still be clipped
    got = Z.astype(dtype)
    K.clip_residuals(got, y, code, x_norm_sq, 1.0, 10)
    tiny = np.finfo(dtype).tiny
    assert not np.any((got != 0) & (np.abs(got) < tiny))  # no subnormal left
    loss = LinearLoss("log_loss", k)
    R = loss.residual(Z.astype(dtype).astype(np.float64), y if k == 1 else y.astype(np.intp))
    kept = got != 0
    # Each kept entry is the reference residual times the row's clip factor (≤ 1).
    ratio = np.where(kept, got / np.where(kept, R, 1.0), np.nan)
    for i in range(m):
        row = ratio[i][kept[i]]
        if row.size:
            np.testing.assert_allclose(row, row[0], rtol=1e-5 if dtype == np.float32 else 1e-12)
            assert 0 < row[0] <= 1 + 1e-12
        # The released per-example gradient norm ‖x~‖ ‖c r‖ stays ≤ C.
        assert np.sqrt(x_norm_sq[i]) * np.linalg.norm(got[i].astype(np.float64)) <= 1.0
    # A flushed entry was below sqrt(TINY) (its square subnormal) or below the
    # dtype's TINY after the clip (within a factor 2 of the clip's rounding).
    norms = np.sqrt(x_norm_sq) * np.linalg.norm(R, axis=1)
    factor = np.minimum(1.0, 1.0 / np.where(norms > 0, norms, 1.0))
    flushed = ~kept & (R != 0)
    small = (np.abs(R) < K._linear.SQRT_TINY) | (np.abs(R) * factor[:, None] < 2 * float(tiny))
    assert np.all(small[flushed])
    assert flushed.any()  # the case is exercised


def test_nan_logits_still_give_nan_residuals():
    # The flush must not hide a diverged model: NaN in, NaN out.
    r = np.empty(3)
    assert np.isnan(K.residual_row(np.array([0.0, np.nan, -1.0]), 0.0, K.MULTI_LOG, r))
    assert np.isnan(K.residual_row(np.array([np.nan]), 1.0, K.BINARY_LOG, r[:1]))


def test_clip_never_exceeds_bound_in_float32():
    # Clipped per-example gradient norms must not exceed C, even after rounding.
    rng = np.random.default_rng(3)
    X = (100 * rng.normal(size=(200, 30))).astype(np.float32)
    lin = LinearLoss("log_loss", 5)
    y = lin.encode(rng.integers(0, 5, 200))
    theta = rng.normal(size=(31, 5)).astype(np.float32)
    oracle = LinearGradientOracle(X, y, lin, True, 1.0)
    for i in range(200):
        g = oracle(np.array([i]), theta).astype(np.float64)
        assert np.linalg.norm(g) <= 1.0 * (1 + 1e-6)


def test_clip_factors():
    norms = np.array([0.0, 0.5, 1.0, 4.0, np.inf])
    out = np.empty(5)
    K.clip_factors(norms, 1.0, out)
    np.testing.assert_array_equal(out, [1.0, 1.0, 1.0, 0.25, 0.0])
    K.clip_factors(norms[:4], np.inf, out[:4])
    np.testing.assert_array_equal(out[:4], 1.0)


def test_csr_row_norms():
    X = sp.random(50, 40, density=0.1, format="lil", random_state=1)
    X[3] = 0  # an empty row
    X = sp.csr_matrix(X)
    out = np.empty(50)
    K.csr_squared_row_norms(X.indptr, X.data, out)
    np.testing.assert_allclose(out, (X.toarray() ** 2).sum(1))


def test_loss_code_rejects_unknown_loss():
    with pytest.raises(ValueError, match="squared"):
        K.loss_code("squared", 1)


def test_kernels_do_not_modify_inputs():
    X, y, lin, theta = _problem(20, 5, 3, "log_loss", np.float64, seed=0)
    A = sp.csr_matrix(X)
    copies = [X.copy(), y.copy(), theta.copy(), A.data.copy()]
    for path in ("blas", "fused"):
        o = LinearGradientOracle(X, y, lin, True, 0.5)
        o.path = path
        o(np.arange(20), theta)
    LinearGradientOracle(A, y, lin, True, 0.5)(np.arange(20), theta)
    for before, after in zip(copies, [X, y, theta, A.data]):
        np.testing.assert_array_equal(before, after)


@pytest.mark.slow
def test_second_process_loads_every_kernel_from_the_disk_cache(tmp_path):
    """Kernels are cached on disk: a second process compiles nothing.

    Two fresh interpreters share an empty ``NUMBA_CACHE_DIR`` and fit tiny
    dense and CSR models (eager and lazy paths); numba's cache log of the
    second must show loads only. (Counts log lines; times nothing.)
    """
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, scipy.sparse as sp\n"
        "from sklearn_fdp import DPSGDClassifier\n"
        "X = np.random.default_rng(0).normal(size=(200, 5)); y = (X[:, 0] > 0).astype(int)\n"
        "for Z, m in ((X, 0.9), (sp.csr_matrix(X), 0.0), (sp.csr_matrix(X), 0.9)):\n"
        "    DPSGDClassifier(epsilon=None, noise_multiplier=1.0, epochs=1, momentum=m,\n"
        "                    random_state=0).fit(Z, y)\n"
    )
    env = {**os.environ, "NUMBA_DEBUG_CACHE": "1", "NUMBA_CACHE_DIR": str(tmp_path)}
    logs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env=env).stdout for _ in range(2)]
    assert "data saved to" in logs[0]  # the first process compiled and saved
    assert "data saved to" not in logs[1]
    assert "data loaded from" in logs[1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,d,m", [(1, 1, 0), (1, 1, 3), (7, 1, 5), (50, 9, 0), (50, 9, 50),
                                   (300, 105, 256), (40, 600, 13)])
def test_gather_rows_is_np_take(n, d, m, dtype):
    # The prefetching gather is a plain copy: np.take bit for bit, repeats
    # and unsorted indices included; prefetches past the batch never fault.
    rng = np.random.default_rng(n + d + m)
    X = rng.normal(size=(n, d)).astype(dtype)
    idx = rng.integers(0, n, size=m).astype(np.intp)
    out = np.empty((m, d), dtype=dtype)
    K.gather_rows(X, idx, out)
    np.testing.assert_array_equal(out, np.take(X, idx, axis=0))


def test_take_rows_on_every_layout():
    from sklearn_fdp._engine._linear import take_rows

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    idx = np.array([3, 3, 0, 29])
    for A in (X, np.asfortranarray(X), X[:, ::2], X.astype(np.float32)):
        got = take_rows(A, idx)
        np.testing.assert_array_equal(got, A[idx])
        assert got.dtype == A.dtype
    np.testing.assert_array_equal(take_rows(sp.csr_matrix(X), idx).toarray(), X[idx])


@pytest.mark.parametrize("tail", [False, True])
def test_catch_up_tables_match_the_window_sums(tail):
    # Entry a: the window f + a .. b - 1. Var Δθ = Σ c_u², and in the tail
    # Cov(Δθ, ΔA) = Σ c_u² (b - u), Var ΔA = Σ c_u² (b - u)² (u, b relative
    # to f); a one-step window is exactly slope 1, no noise of its own.
    rng = np.random.default_rng(0)
    f, b = 10, 19
    c2 = rng.uniform(0.1, 2.0, size=b - f)
    u = np.arange(b - f, dtype=np.float64)
    q0, q1, q2 = (np.concatenate([[0.0], np.cumsum(c2 * u**p)]) for p in range(3))
    sd, slope, resid_sd = (np.full(b - f + 1, np.nan) for _ in range(3))
    K.catch_up_tables(b, f, q0, q1, q2, tail, sd, slope, resid_sd)
    bb = b - f
    for a in range(bb + 1):
        w = c2[a:]
        lag = bb - u[a:]
        np.testing.assert_allclose(sd[a] ** 2, w.sum(), rtol=1e-12, atol=0)
        if not tail or a == bb:
            continue
        cov, var_a = (w * lag).sum(), (w * lag**2).sum()
        np.testing.assert_allclose(slope[a] * sd[a] ** 2, cov, rtol=1e-12)
        np.testing.assert_allclose(slope[a] * cov + resid_sd[a] ** 2, var_a, rtol=1e-10)
    assert sd[bb] == 0.0  # caught up already: nothing to add
    if tail:
        assert slope[bb - 1] == 1.0 and resid_sd[bb - 1] == 0.0


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_binary_logistic_pass_is_the_penalised_mean_log_loss(fit_intercept):
    # Objective, gradient and Hessian of (1/n) Σ [log(1 + e^z) − y z] + (λ/2)‖w‖²
    # over the mapped columns, against numpy on the dense public block; rows
    # with their columns in scrambled order (the kernel folds both triangles)
    # and ignored columns; logits up to ±60 (the stable exp(−|z|) form).
    rng = np.random.default_rng(0)
    n, d = 60, 9
    X = rng.normal(size=(n, d)) * 3
    X[rng.random((n, d)) < 0.4] = 0.0
    y = rng.integers(0, 2, n).astype(np.float64)
    public = np.array([0, 2, 3, 5, 8])
    p = len(public)
    colmap = np.full(d, p, dtype=np.int64)
    colmap[public] = np.arange(p)
    A = sp.csr_matrix(X)
    for i in range(n):  # scramble each row's column order
        s, e = A.indptr[i], A.indptr[i + 1]
        order = rng.permutation(e - s)
        A.indices[s:e], A.data[s:e] = A.indices[s:e][order], A.data[s:e][order]
    m = p + int(fit_intercept)
    coef = rng.normal(size=m) * 4
    lam = 0.3
    grad, hess = np.empty(m), np.empty((m, m))
    longest = int(np.diff(A.indptr).max())
    loss, zeros = K.binary_logistic_pass(A.indptr, A.indices, A.data, colmap, y, coef,
                                         fit_intercept, lam, True, np.empty(longest, np.int64),
                                         np.empty(longest), grad, hess)
    Xt = np.c_[X[:, public], np.ones(n)] if fit_intercept else X[:, public]
    z = Xt @ coef
    assert np.abs(z).max() > 30  # the saturated regime is covered
    w = coef[:p]
    prob = 1 / (1 + np.exp(-z))
    np.testing.assert_allclose(loss, np.mean(np.logaddexp(0, z) - y * z) + lam / 2 * w @ w,
                               rtol=1e-13)
    reg = np.r_[lam * w, np.zeros(m - p)]
    np.testing.assert_allclose(grad, Xt.T @ (prob - y) / n + reg, rtol=1e-11, atol=1e-14)
    h = prob * (1 - prob)
    want = Xt.T @ (h[:, None] * Xt) / n + np.diag(np.r_[np.full(p, lam), np.zeros(m - p)])
    np.testing.assert_allclose(hess, want, rtol=1e-11, atol=1e-14)
    assert np.array_equal(hess, hess.T) and zeros == 0.0


@pytest.mark.parametrize("label_public", [True, False])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_fdp_csr_step_binary_is_fdp_csr_step(label_public, fit_intercept):
    # The binary specialisation gives the general kernel's bits: signed data,
    # logits from -800 to 800 (sigmoid's underflow and the zeroed residuals),
    # rows with no public or no private entry, empty and repeated batches.
    rng = np.random.default_rng(1)
    n, d = 80, 12
    X = rng.normal(size=(n, d)) * 2
    X[rng.random((n, d)) < 0.5] = 0.0
    X[3] = 0.0
    public = (np.arange(d) % 3 != 0)
    X[4, ~public] = 0.0
    X[5, public] = 0.0
    A = sp.csr_matrix(X)
    keep_indptr, keep_indices, keep_data = (np.empty_like(A.indptr), np.empty_like(A.indices),
                                            np.empty_like(A.data))
    nnz = K.csr_keep_columns(A.indptr, A.indices, A.data, public, keep_indptr, keep_indices,
                             keep_data)
    P = sp.csr_matrix(X * public)
    assert nnz == P.nnz and np.array_equal(keep_indptr, P.indptr)
    assert np.array_equal(keep_indices[:nnz], P.indices)
    y = rng.integers(0, 2, n).astype(np.float64)
    pub_f = public.astype(np.float64)
    pub_sq = (X * public) ** 2 @ np.ones(d) + float(fit_intercept)
    for scale in (0.3, 3.0, 100.0):
        theta = rng.normal(size=(d + int(fit_intercept), 1)) * scale
        for idx, pub_idx in ((np.arange(n), np.sort(rng.choice(n, 30, replace=False))),
                             (np.array([], dtype=np.intp), np.arange(0, n, 7)),
                             (np.array([2, 2, 9]), np.array([], dtype=np.intp))):
            want = np.zeros_like(theta), np.zeros_like(theta)
            K.fdp_csr_step(A.indptr, A.indices, A.data, idx, pub_idx, y, theta, K.BINARY_LOG,
                           fit_intercept, pub_f, pub_sq, label_public, 0.5, 0.7, *want)
            got = np.zeros_like(theta), np.zeros_like(theta)
            K.fdp_csr_step_binary(A.indptr, A.indices, A.data, keep_indptr,
                                  keep_indices[:nnz], keep_data[:nnz], idx, pub_idx, y, theta,
                                  fit_intercept, pub_f, pub_sq, label_public, 0.5, 0.7, *got)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("n_private", [0, 3])
def test_clipped_design_is_numpys_blocks_bit_for_bit(fit_intercept, n_private):
    """The regression statistic's design rows (issue 37): the kernel writes what numpy's
    column selections, norms and products wrote, bit for bit, and leaves rows whose norm
    needs rescaling (entries beyond 1e140 or all below 1e-140) to numpy."""
    from sklearn_fdp._kernels import clipped_design
    from sklearn_fdp._mechanisms.gaussian_mean import row_scale_factors

    rng = np.random.default_rng(11)
    n, d = 700, 13
    X = rng.standard_normal((n, d)) * rng.random((n, 1)) ** 3 * 2  # some rows clipped
    X[5] = 0.0
    private_idx = np.sort(rng.choice(d, n_private, replace=False)).astype(np.intp)
    public_idx = np.setdiff1d(np.arange(d), private_idx).astype(np.intp)
    d_p1 = len(public_idx) + fit_intercept
    Z = np.full((n, d_p1 + n_private + 1), np.nan)
    f_pub, f_priv = np.empty(n), np.empty(n)
    assert clipped_design(X, public_idx, private_idx, fit_intercept, 0.9, 0.4, Z, f_pub, f_priv)
    ref_pub = row_scale_factors(X[:, public_idx], 0.9, "clip")
    assert np.array_equal(f_pub, ref_pub) and np.any(ref_pub < 1)
    assert np.array_equal(Z[:, :len(public_idx)], X[:, public_idx] * ref_pub[:, None])
    if fit_intercept:
        assert np.all(Z[:, len(public_idx)] == 1.0)
    if n_private:
        ref_priv = row_scale_factors(X[:, private_idx], 0.4, "clip")
        assert np.array_equal(f_priv, ref_priv)
        assert np.array_equal(Z[:, d_p1:d_p1 + n_private], X[:, private_idx] * ref_priv[:, None])
    else:
        assert np.all(f_priv == 1.0)
    X[7, 0] = 1e150  # needs the rescaled norm: left to numpy
    assert not clipped_design(X, public_idx, private_idx, fit_intercept, 0.9, 0.4, Z, f_pub,
                              f_priv)


def test_first_fit_announces_the_kernels_compilation_once(monkeypatch, capfd):
    """Issue 37: a fit that will compile the kernels says so, once per process, on the real
    standard error (which the private search's trials do not redirect)."""
    from sklearn_fdp import DPSGDClassifier, _validation

    monkeypatch.setattr(_validation, "kernels_cached", lambda: False)
    monkeypatch.setattr(_validation, "_kernels_checked", False)
    X = np.random.default_rng(0).random((200, 3))
    y = (X[:, 0] > 0.5).astype(int)
    DPSGDClassifier(epochs=1, random_state=0).fit(X, y)
    DPSGDClassifier(epochs=1, random_state=0).fit(X, y)
    err = capfd.readouterr().err
    assert err.count(_validation.COMPILE_NOTICE) == 1


def test_no_notice_once_the_kernels_are_cached(monkeypatch, capfd):
    from sklearn_fdp import DPSGDClassifier, _validation

    monkeypatch.setattr(_validation, "kernels_cached", lambda: True)
    monkeypatch.setattr(_validation, "_kernels_checked", False)
    X = np.random.default_rng(0).random((200, 3))
    DPSGDClassifier(epochs=1, random_state=0).fit(X, (X[:, 0] > 0.5).astype(int))
    assert _validation.COMPILE_NOTICE not in capfd.readouterr().err

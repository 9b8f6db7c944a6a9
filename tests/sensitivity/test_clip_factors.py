"""Every clipped per-example vector has norm ≤ C exactly (issue 16 item 11).

A clip factor ``C / ‖g‖`` computed in floating point gives a vector of norm
``C (1 + O(ulp))``: a few ulp above ``C`` about half of the time, and more
once the clipped residual is rounded to float32. The accountant assumes
``≤ C``. These tests take single records (so the release *is* the clipped
vector, as the library stores and sums it, in its dtype) on adversarial norms
— random, huge, tiny; float32 and float64 — and check ``‖v‖ ≤ C`` with no
slack, both as float64 computes it and exactly (rational arithmetic).
"""

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sklearn_fdp import _kernels as K
from sklearn_fdp._engine import LinearGradientOracle, LinearLoss
from sklearn_fdp._mechanisms.fdp import FeatureDPPrivateOracle

from .._reference import nothing_pending


def assert_norm_at_most(v, clip, what=""):
    """``‖v‖ ≤ clip``, in float64 and exactly, without slack."""
    v64 = np.asarray(v, dtype=np.float64).ravel()
    computed = float(np.linalg.norm(v64))
    assert computed <= clip, f"{what}: ‖v‖ = {computed!r} > C = {clip!r}"
    exact = sum(Fraction(float(t)) ** 2 for t in v64)
    excess = exact - Fraction(clip) ** 2
    assert excess <= 0, f"{what}: exact ‖v‖² − C² = {float(excess)!r} > 0"


# Scales of the data: random, huge and tiny norms (float32 rows must keep finite squared norms).
_SCALES = {np.float64: (1e-150, 1e-8, 1.0, 1e4, 1e150), np.float32: (1e-15, 1e-4, 1.0, 1e4, 1e15)}
_CLIPS = (0.1, 0.5, 1.0, 3.0, 1e-3)


@st.composite
def _rows(draw):
    dtype = draw(st.sampled_from((np.float64, np.float32)))
    n = draw(st.integers(1, 8))
    d = draw(st.integers(1, 12))
    k = draw(st.sampled_from((1, 2, 3)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from(_SCALES[dtype]))
    X = (rng.standard_normal((n, d)) * scale * rng.uniform(0.5, 2.0, (n, 1))).astype(dtype)
    theta = (rng.standard_normal((d + 1, k)) * draw(st.sampled_from((0.0, 1.0, 1e3)))
             / max(scale, 1.0))
    return X, k, theta.astype(dtype), rng


_SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)


@pytest.mark.parametrize("path", ["blas", "fused", "csr"])
@pytest.mark.parametrize("loss", ["log_loss", "hinge"])
@_SETTINGS
@given(rows=_rows(), clip=st.sampled_from(_CLIPS))
def test_dpsgd_clipped_gradient_of_one_record_is_at_most_C(path, loss, rows, clip):
    X, k, theta, rng = rows
    lin = LinearLoss(loss, k)
    y = lin.encode(rng.integers(0, max(k, 2), X.shape[0]))
    oracle = LinearGradientOracle(sp.csr_matrix(X) if path == "csr" else X, y, lin, True, clip)
    if path != "csr":
        oracle.path = path
    for i in range(X.shape[0]):
        g = oracle(np.array([i]), theta)
        assert g.dtype == X.dtype
        assert_norm_at_most(g, clip, f"{path}/{loss}/{X.dtype}")


@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
@pytest.mark.parametrize("label_public", [True, False])
@_SETTINGS
@given(rows=_rows(), clip=st.sampled_from(_CLIPS), data=st.data())
def test_fdp_clipped_private_gradient_of_one_record_is_at_most_C(public_loss, label_public,
                                                                 rows, clip, data):
    X, k, theta, rng = rows
    d = X.shape[1]
    lin = LinearLoss("log_loss", k)
    y = lin.encode(rng.integers(0, max(k, 2), X.shape[0]))
    public_mask = rng.random(d) < 0.5
    if data.draw(st.booleans()):
        public_mask[:] = True  # label DP: the sufficient statistic's oracle
    oracle = FeatureDPPrivateOracle(X, y, lin, public_mask, label_public, public_loss, True,
                                    clip, pad_rng=np.random.default_rng(1))
    for i in range(X.shape[0]):
        g = oracle(np.array([i]), theta)
        assert g.dtype == X.dtype
        assert_norm_at_most(g, clip, f"fdp/{public_loss}/{X.dtype}")


@pytest.mark.parametrize("code,k", [(K.BINARY_LOG, 1), (K.MULTI_LOG, 3), (K.BINARY_HINGE, 1),
                                    (K.MULTI_HINGE, 3)])
@_SETTINGS
@given(rows=_rows(), clip=st.sampled_from(_CLIPS))
def test_clip_residuals_rows_times_features_are_at_most_C(code, k, rows, clip):
    # The BLAS path: clipped residuals are stored in X's dtype (Z), then
    # multiplied by x~ in that dtype. The vector summed is fl(x~ ⊗ Z_i).
    X, _, theta, rng = rows
    dtype = X.dtype
    Xt = np.hstack([X, np.ones((X.shape[0], 1), dtype=dtype)])
    Z = (Xt @ theta[:, :1].repeat(k, axis=1)).astype(dtype)
    if code in (K.BINARY_LOG, K.BINARY_HINGE):
        y = rng.integers(0, 2, X.shape[0]).astype(float)
        if code == K.BINARY_HINGE:
            y = 2.0 * y - 1.0
    else:
        y = rng.integers(0, k, X.shape[0]).astype(float)
    x_norm_sq = np.einsum("ij,ij->i", Xt.astype(np.float64), Xt.astype(np.float64))
    K.clip_residuals(Z, y, code, x_norm_sq, clip)
    for i in range(X.shape[0]):
        assert_norm_at_most(np.outer(Xt[i], Z[i]).astype(dtype), clip, f"clip_residuals/{dtype}")


@_SETTINGS
@given(rows=_rows(), clip=st.sampled_from(_CLIPS))
def test_lazy_clipped_residuals_rows_times_features_are_at_most_C(rows, clip):
    # The lazy CSR path (nothing pending): float64 residuals, x~ ⊗ R_i summed in float64.
    X, k, theta, rng = rows
    n, d = X.shape
    A = sp.csr_matrix(X)
    lin = LinearLoss("log_loss", k)
    y = lin.encode(rng.integers(0, max(k, 2), n)).astype(np.float64)
    x_norm_sq = np.einsum("ij,ij->i", X.astype(np.float64), X.astype(np.float64)) + 1.0
    t = 5
    S, tables = nothing_pending(theta, d, k, t)
    R = np.empty((n, k))
    K.lazy_clipped_residuals(A.indptr, A.indices, A.data, np.arange(n), y, S, k,
                             theta[d].astype(np.float64), K.loss_code("log_loss", k), x_norm_sq,
                             clip, t, t, *tables, False, np.zeros(2 * k), 0, R)
    Xt = np.hstack([X.astype(np.float64), np.ones((n, 1))])
    for i in range(n):
        assert_norm_at_most(np.outer(Xt[i], R[i]), clip, f"lazy/{X.dtype}")


@pytest.mark.parametrize("path", ["blas", "fused", "csr"])
@pytest.mark.parametrize("d", [2_000, 20_000])
def test_wide_rows_clipped_gradient_is_at_most_C(path, d):
    # The float64 norm of a wide row is a sum of d squares, whose rounding
    # grows with d: a margin of a few eps alone left |v| above C by 1.3e-15
    # relative at d = 20,000.
    rng = np.random.default_rng(d)
    X = rng.standard_normal((6, d)) * rng.uniform(0.1, 10, (6, 1))
    lin = LinearLoss("log_loss", 1)
    y = lin.encode(rng.integers(0, 2, 6))
    theta = rng.standard_normal((d + 1, 1)) / np.sqrt(d)
    oracle = LinearGradientOracle(sp.csr_matrix(X) if path == "csr" else X, y, lin, True, 0.5)
    if path != "csr":
        oracle.path = path
    for i in range(6):
        assert_norm_at_most(oracle(np.array([i]), theta), 0.5, f"{path}/d={d}")

"""Sensitivity of plain DP-SGD's pre-noise release, on every path.

The release of one DP-SGD step is the clipped sum ``Σ_{i ∈ B} clip_C(g_i)``
over the Poisson batch ``B``; the accountant assumes that adding or removing
one record moves it by at most ``C = max_grad_norm`` (and replacing one by at
most ``2 C``, ``neighboring="replace"`` with the PLD accountant). The batch
here is every row (the worst case: the record is in the batch).

Paths, all built the way :class:`~sklearn_fdp.DPSGDClassifier` builds them:

* ``"blas"`` and ``"fused"``: dense input, :class:`LinearGradientOracle` with
  its ``path`` forced;
* ``"csr"``: CSR input, the fused numba pass of the eager engine;
* ``"lazy"``: CSR input on :func:`~sklearn_fdp._engine._lazy.run_lazy_sparse`,
  whose kernel :func:`~sklearn_fdp._kernels.lazy_steps` computes the clipped
  residuals ``c_i r_i`` of a step in the scratch array ``R`` and adds
  ``step_scale · Σ_i x~_i (c_i r_i)ᵀ`` (plus noise) to the state: the test
  runs one noise-free step and reads that sum back;
* ``"*_hostile"``: the same on :func:`hostile_csr` input (duplicate and
  unsorted entries, issue 16 item 3).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sklearn_fdp._engine import LinearGradientOracle, LinearLoss
from sklearn_fdp._kernels import csr_scatter_add, lazy_steps

from ._harness import SCALES, adversarial_dense, assert_sensitivity, hostile_csr, remove_one

PATHS = ("blas", "fused", "csr", "lazy", "csr_hostile", "lazy_hostile")
LOSSES = ("log_loss", "hinge")
DUPLICATES = 10


def _as_input(X, path, seed):
    if path.endswith("hostile"):
        return hostile_csr(X, np.random.default_rng(seed), duplicates=DUPLICATES)
    if path.startswith(("csr", "lazy")):
        return sp.csr_matrix(X)
    return np.ascontiguousarray(X)


def _oracle(X, y_index, loss_name, n_classes, fit_intercept, clip, path):
    loss = LinearLoss(loss_name, 1 if n_classes == 2 else n_classes)
    oracle = LinearGradientOracle(X, loss.encode(y_index), loss, fit_intercept, clip)
    if path in ("blas", "fused"):
        oracle.path = path
    else:
        assert oracle.path == "csr"
    return oracle


def lazy_step_sum(oracle, theta):
    """The clipped sum one step of ``run_lazy_sparse`` noises, batch = every row.

    Runs :func:`lazy_steps` for one step without noise (``noise_std = 0``,
    no pending noise) and ``step_scale = -1``, then rebuilds the sum from
    the clipped residuals it left in ``R`` with the kernel it scatters
    them with; checks that the state moved by exactly that sum.
    """
    X = oracle.X
    n = X.shape[0]
    d = oracle.n_features
    k = theta.shape[1]
    S = np.zeros((d, k + 1))
    S[:, :k] = theta[:d]
    intercept = (np.array(theta[d], dtype=np.float64) if oracle.fit_intercept
                 else np.empty(0))
    intercept_before = intercept.copy()
    zeros = np.zeros(2)
    R = np.empty((max(n, 1), k))
    scratch = [np.empty(2) for _ in range(3)]
    lazy_steps(X.indptr, X.indices, X.data, np.arange(n, dtype=np.intp),
               np.array([0, n], dtype=np.intp), oracle.y_kernel, S, k, intercept, np.zeros(k),
               oracle.code, oracle.x_norm_sq, oracle.max_grad_norm, 0, 0, np.array([-1.0]),
               0.0, zeros, zeros, zeros, False, np.zeros(2 * k), 0, R, *scratch,
               oracle.loss_param)
    out = np.zeros((theta.shape[0], k))
    csr_scatter_add(X.indptr, X.indices, X.data, np.arange(n, dtype=np.intp), R[:n], 1.0, out)
    if oracle.fit_intercept:
        out[d] = R[:n].sum(axis=0)
    # The state moved by -out (up to the rounding of θ - out).
    moved = np.vstack([theta[:d] - S[:, :k]] + (
        [intercept_before[None] - intercept[None]] if oracle.fit_intercept else []))
    scale = max(1.0, float(np.abs(theta).max()), float(np.abs(out).max()))
    np.testing.assert_allclose(moved, out, rtol=0, atol=1e-12 * scale)
    return out


def release(path, X, y_index, loss_name, n_classes, fit_intercept, clip, theta):
    oracle = _oracle(X, y_index, loss_name, n_classes, fit_intercept, clip, path)
    if path.startswith("lazy"):
        return lazy_step_sum(oracle, theta)
    return oracle(np.arange(X.shape[0]), theta)


def _theta(rng, d, n_classes, fit_intercept, scale, dtype):
    k = 1 if n_classes == 2 else n_classes
    return (rng.standard_normal((d + int(fit_intercept), k)) * scale).astype(dtype)


def _check(path, X, y, i, *, loss_name, n_classes, fit_intercept, clip, theta, relation,
           replacement=None, seed=0):
    """One neighbouring pair under ``relation``; returns ‖Δ‖ / bound."""
    Xin = _as_input(X, path, seed)
    a = release(path, Xin, y, loss_name, n_classes, fit_intercept, clip, theta)
    if relation == "add_remove":
        X2, y2 = remove_one(Xin, y, i)
        bound = clip
    else:
        row, label = replacement
        Xd = np.array(X, copy=True)
        Xd[i] = row
        y2 = y.copy()
        y2[i] = label
        X2 = _as_input(Xd, path, seed + 1)
        bound = 2 * clip
    b = release(path, X2, y2, loss_name, n_classes, fit_intercept, clip, theta)
    diff = assert_sensitivity(a, b, bound, n_terms=X.shape[0], clip=clip, dtype=X.dtype,
                              what=f"DP-SGD {path} ({relation})")
    return diff / bound


# ---------------------------------------------------------------- explicit worst cases


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("loss_name", LOSSES)
@pytest.mark.parametrize("n_classes", [2, 4])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale", SCALES)
def test_remove_one_large_rows(path, loss_name, n_classes, dtype, scale):
    """Every row's gradient far beyond C (or far below): removing one moves the sum ≤ C."""
    rng = np.random.default_rng(0)
    n, d = 6, 3
    X = (rng.standard_normal((n, d)) * scale).astype(dtype)
    y = rng.integers(0, n_classes, n)
    y[:n_classes] = np.arange(n_classes)
    theta = _theta(rng, d, n_classes, True, 1.0 / scale, dtype)
    i = int(np.argmax(np.linalg.norm(X.astype(np.float64), axis=1)))
    for clip in (1e-3, 1.0):
        _check(path, X, y, i, loss_name=loss_name, n_classes=n_classes, fit_intercept=True,
               clip=clip, theta=theta, relation="add_remove")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_duplicates_of_one_value(path, fit_intercept):
    """Issue 16 item 3: ten stored copies of 1/10 must count as one entry of 1 (3.16 C before)."""
    X = np.full((5, 3), 1e3)
    y = np.array([0, 1, 0, 1, 1])
    theta = np.zeros((3 + int(fit_intercept), 1))
    ratio = _check(path, X, y, 0, loss_name="log_loss", n_classes=2,
                   fit_intercept=fit_intercept, clip=1.0, theta=theta, relation="add_remove")
    assert ratio == pytest.approx(1.0, rel=1e-6)  # the clip binds: exactly C


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("loss_name", LOSSES)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_replace_one_is_at_most_2c(path, loss_name, n_classes):
    """``neighboring="replace"``: a record whose label is replaced moves the sum ≤ 2 C.

    At θ = 0 the binary residual of the other label is the opposite one, so
    the two clipped gradients are opposite: the bound is reached. Multiclass
    residuals of two labels are at 120° (K = 3): 0.87 of it.
    """
    n, d = 5, 4
    X = np.tile(np.array([3.0, -2.0, 1.0, 5.0]), (n, 1))
    y = np.zeros(n, dtype=int)
    theta = np.zeros((d + 1, 1 if n_classes == 2 else n_classes))
    ratio = _check(path, X, y, 2, loss_name=loss_name, n_classes=n_classes, fit_intercept=True,
                   clip=0.5, theta=theta, relation="replace",
                   replacement=(X[2], n_classes - 1))
    assert ratio > (0.99 if n_classes == 2 else 0.85)


# ---------------------------------------------------------------- property-based


@st.composite
def _cases(draw):
    X, _ = draw(adversarial_dense(n_rows=(2, 10), n_cols=(1, 6)))
    n = X.shape[0]
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_classes = draw(st.sampled_from([2, 3, 5]))
    y = rng.integers(0, n_classes, n)
    fit_intercept = draw(st.booleans())
    theta_scale = draw(st.sampled_from([0.0, 1e-3, 1.0, 1e3]))
    theta = _theta(rng, X.shape[1], n_classes, fit_intercept, theta_scale, X.dtype)
    return dict(
        X=X, y=y, i=draw(st.integers(0, n - 1)), seed=seed,
        loss_name=draw(st.sampled_from(LOSSES)), n_classes=n_classes,
        fit_intercept=fit_intercept, theta=theta,
        clip=draw(st.sampled_from([1e-6, 0.1, 1.0, 1e4])),
        replacement=((rng.standard_normal(X.shape[1]) * draw(st.sampled_from(SCALES)))
                     .astype(X.dtype), int(rng.integers(0, n_classes))),
    )


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=_cases())
def test_clipped_sum_sensitivity(path, relation, case):
    X = case.pop("X")
    y = case.pop("y")
    i = case.pop("i")
    _check(path, X, y, i, relation=relation, **case)

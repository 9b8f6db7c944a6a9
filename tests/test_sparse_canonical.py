"""Issue 16 item 3: sparse input with duplicate entries must not break the clip.

A CSR matrix may store one column of a row several times (scipy sums such
duplicates in every arithmetic operation). The kernels computed a row's norm
as ``Σ data²`` but added every stored entry to the gradient, so a value
stored as ten parts counted ``√10`` times too little in the clip factor and
the clipped contribution reached ``3.16 C``. Every sparse input is now put
in canonical form (a copy with duplicates summed and indices sorted; the
caller's matrix is never modified) before any norm is computed: in
validation, and again where the oracles receive ``X`` so no path skips it.

Checked here, for every estimator and oracle that takes sparse input: a fit
(or a release) on the hostile matrix equals the one on its canonical copy
bit for bit, in every accepted format, index width and float dtype, and the
caller's matrix is unchanged. The sensitivity itself is checked on each
path in ``tests/sensitivity`` (``*_hostile`` cases).
"""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression
from sklearn_fdp._engine import LinearGradientOracle, LinearLoss
from sklearn_fdp._mechanisms.fdp import FeatureDPPrivateOracle, FeatureDPPublicOracle
from sklearn_fdp._mechanisms.label_statistic import release_private_sum

from .sensitivity._harness import hostile_csr

N, D = 200, 5


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)) * 3.0  # rows of norm ~7: the clip at C = 1 binds
    X[rng.random((N, D)) < 0.3] = 0.0
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    return X, y


def _canonical_copy(M):
    C = M.tocsr(copy=True)
    C.sum_duplicates()
    return C


def _arrays(M):
    return M.data.copy(), M.indices.copy(), M.indptr.copy()


def _assert_unchanged(M, saved):
    for a, b in zip(_arrays(M), saved):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


ESTIMATORS = {
    "dpsgd": DPSGDClassifier(epsilon=4.0, epochs=2, random_state=0),
    "dpsgd_lazy": DPSGDClassifier(epsilon=4.0, epochs=2, momentum=0.0, random_state=0),
    "fdp_alg1": FeatureDPLogisticRegression(private_features=[0], label_public=True,
                                            max_grad_norm=1.0, epsilon=4.0, epochs=2,
                                            random_state=0),
    "fdp_alg1_pad": FeatureDPLogisticRegression(private_features=[0, 3], public_loss="gaussian_pad",
                                                max_grad_norm=1.0, public_epochs=0, epsilon=4.0,
                                                epochs=2, random_state=0),
    "fdp_dpsgd": FeatureDPLogisticRegression(private_features=[0], label_public=True,
                                             method="dpsgd", max_grad_norm=1.0, epsilon=4.0,
                                             epochs=2, random_state=0),
    "label_dp_statistic": FeatureDPLogisticRegression(private_features=[], epsilon=4.0,
                                                      max_grad_norm=1.0, random_state=0),
}


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fit_on_duplicates_equals_fit_on_canonical_copy(data, name, dtype):
    X, y = data
    H = hostile_csr(X.astype(dtype), np.random.default_rng(1), duplicates=10)
    saved = _arrays(H)
    est = ESTIMATORS[name]
    hostile = type(est)(**est.get_params()).fit(H, y)
    ref = type(est)(**est.get_params()).fit(_canonical_copy(H), y)
    np.testing.assert_array_equal(hostile.coef_, ref.coef_)
    np.testing.assert_array_equal(hostile.intercept_, ref.intercept_)
    _assert_unchanged(H, saved)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "csr_int64", "csr_array"])
def test_every_sparse_format_is_canonicalised(data, fmt):
    X, y = data
    H = hostile_csr(X, np.random.default_rng(2), duplicates=4)
    if fmt == "csc":
        M = H.tocsc()  # keeps the duplicates
    elif fmt == "coo":
        M = H.tocoo()
    elif fmt == "csr_int64":
        M = sp.csr_matrix((H.data, H.indices.astype(np.int64), H.indptr.astype(np.int64)),
                          shape=H.shape)
    else:
        M = sp.csr_array(H)
    est = ESTIMATORS["dpsgd"]
    got = type(est)(**est.get_params()).fit(M, y)
    ref = type(est)(**est.get_params()).fit(_canonical_copy(H), y)
    np.testing.assert_array_equal(got.coef_, ref.coef_)


def test_canonical_csr():
    from sklearn_fdp._validation import canonical_csr

    rng = np.random.default_rng(3)
    X = rng.normal(size=(6, 4))
    X[0] = 0.0
    X[:, 2] = 0.0
    H = hostile_csr(X, rng, duplicates=3)
    saved = _arrays(H)
    C = canonical_csr(H)
    _assert_unchanged(H, saved)
    assert C is not H and C.format == "csr"
    assert C.nnz == np.count_nonzero(X)
    for i in range(X.shape[0]):  # sorted, no duplicates
        assert np.all(np.diff(C.indices[C.indptr[i]:C.indptr[i + 1]]) > 0)
    np.testing.assert_allclose(C.toarray(), X, rtol=1e-15)
    # Already canonical: returned as is (nothing to copy).
    assert canonical_csr(C) is C
    # A flag cached as True does not fool it (the arrays are checked).
    stale = sp.csr_matrix((H.data.copy(), H.indices.copy(), H.indptr.copy()), shape=H.shape)
    stale.has_canonical_format = True
    assert canonical_csr(stale).nnz == np.count_nonzero(X)
    # Dense input passes through.
    assert canonical_csr(X) is X
    # A structure the kernels would read out of bounds is refused.
    bad = sp.csr_matrix((np.ones(2), np.array([0, 5]), np.array([0, 2])), shape=(1, 3))
    with pytest.raises(ValueError, match="invalid CSR structure"):
        canonical_csr(bad)


def test_out_of_range_column_index_is_refused(data):
    X, y = data
    M = sp.csr_matrix(X)
    M.indices[M.indptr[3]] = D + 7  # scipy's constructor does not check this
    with pytest.raises(ValueError, match="invalid CSR structure"):
        DPSGDClassifier(epsilon=4.0, epochs=1, random_state=0).fit(M, y)


# -- the oracles canonicalise too (no path can skip it) -----------------------


def _oracles(M, y):
    loss = LinearLoss("log_loss", 1)
    y_enc = loss.encode(y)
    mask = np.ones(D, dtype=bool)
    mask[[0, 3]] = False
    rng = lambda: np.random.default_rng(5)  # noqa: E731 - the same padding for both inputs
    return {
        "linear": LinearGradientOracle(M, y_enc, loss, True, 1.0),
        "fdp_mask": FeatureDPPrivateOracle(M, y_enc, loss, mask, True, "mask", True, 1.0),
        "fdp_pad": FeatureDPPrivateOracle(M, y_enc, loss, mask, False, "gaussian_pad", True, 1.0,
                                          pad_rng=rng()),
        "fdp_public": FeatureDPPublicOracle(M, y_enc, loss, mask, False, "gaussian_pad", True,
                                            16, rng(), pad_rng=rng()),
    }


def test_oracles_canonicalise_their_input(data):
    X, y = data
    H = hostile_csr(X, np.random.default_rng(4), duplicates=10)
    saved = _arrays(H)
    theta = np.random.default_rng(6).normal(size=(D + 1, 1))
    idx = np.arange(N)
    hostile, ref = _oracles(H, y), _oracles(_canonical_copy(H), y)
    for name in hostile:
        if name == "fdp_public":
            got, want = hostile[name](theta), ref[name](theta)
        else:
            got, want = hostile[name](idx, theta), ref[name](idx, theta)
        np.testing.assert_array_equal(got, want, err_msg=name)
    label_dp = FeatureDPPrivateOracle(H, y.astype(float), LinearLoss("log_loss", 1),
                                      np.ones(D, dtype=bool), False, "mask", True, 1.0)
    label_ref = FeatureDPPrivateOracle(_canonical_copy(H), y.astype(float),
                                       LinearLoss("log_loss", 1), np.ones(D, dtype=bool), False,
                                       "mask", True, 1.0)
    np.testing.assert_array_equal(release_private_sum(label_dp, N, theta, 0.0, None),
                                  release_private_sum(label_ref, N, theta, 0.0, None))
    _assert_unchanged(H, saved)


def test_canonical_check_reads_a_matrix_once_per_fit_and_again_in_the_next(data, monkeypatch):
    # Validation, the gradient oracle and the row norms each call canonical_csr;
    # within one fit the same matrix is read once. An in-place edit between two
    # fits is still caught: the next fit reads the arrays again.
    from sklearn_fdp import _validation

    X, y = data
    calls = []
    real = _validation.csr_format_code

    def counting(indptr, indices, n_cols):
        calls.append(n_cols)
        return real(indptr, indices, n_cols)

    monkeypatch.setattr(_validation, "csr_format_code", counting)
    M = sp.csr_matrix(X)
    est = ESTIMATORS["dpsgd_lazy"]
    type(est)(**est.get_params()).fit(M, y)
    assert len(calls) == 1
    row = next(i for i in range(N) if M.indptr[i + 1] - M.indptr[i] >= 2)
    a, b = M.indptr[row], M.indptr[row] + 1
    M.indices[a], M.indices[b] = M.indices[b], M.indices[a]  # unsorted now
    M.data[a], M.data[b] = M.data[b], M.data[a]  # the same matrix, stored out of order
    got = type(est)(**est.get_params()).fit(M, y)
    assert len(calls) >= 2
    ref = type(est)(**est.get_params()).fit(sp.csr_matrix(X), y)
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    assert _validation._CANONICAL_IN_FIT.get() is None  # nothing kept after a fit

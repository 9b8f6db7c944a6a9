"""The sensitivity harness: neighbouring inputs and the bound check.

A DP mechanism's guarantee is a property of its *pre-noise release* ``f``:
for every pair of neighbouring inputs ``D ≃ D'`` under the estimator's own
relation, ``‖f(D) − f(D')‖₂ ≤ Δ``, where ``Δ`` is the sensitivity the
accountant assumed (``max_grad_norm`` for add/remove of one record's clipped
contribution, ``2 · max_grad_norm`` for replace-one, ...). Tests of the
accountant alone cannot see a kernel that lets one record contribute more
than ``Δ``; these tests can.

Each test module of this package builds, for one mechanism path:

* ``release(D) -> ndarray``: the quantity noise is added to, computed by the
  library's own code (the oracle, statistic or mean the estimator uses), with
  every random choice that the attacker knows (``random_state`` outside
  secure mode) fixed identically for ``D`` and ``D'``;
* neighbouring inputs from :func:`remove_one`, :func:`replace_columns` or
  :func:`replace_label`, on adversarial data from the strategies below;
* one :func:`assert_sensitivity` call.

Tolerance. Both releases are floating-point sums of ``n_terms`` clipped
contributions of norm ≤ ``clip``; summing them in a different order (one
term fewer) moves each by at most ``n_terms · u · n_terms · clip`` with
``u`` the unit roundoff of the accumulation dtype (the textbook bound for
recursive summation, Higham 2002, §4.2). That slack — and nothing derived
from a run — is added to ``Δ``. The bugs this harness exists for exceed
``Δ`` by factors of 1.5–3.
"""

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

#: Public-column scales that broke the closed-form FDP norm (float32 from
#: 3e3, float64 at 1e8) and tiny ones that underflow squared norms.
SCALES = (1e-8, 1e-3, 1.0, 3e3, 1e4, 1e8)


def rounding_slack(n_terms, clip, dtype):
    """Largest change of a sum of ``n_terms`` terms of norm ≤ ``clip`` due to rounding."""
    u = np.finfo(np.dtype(dtype)).eps / 2
    n = max(int(n_terms), 1)
    return 2.0 * n * n * u * clip


def assert_sensitivity(release_a, release_b, bound, *, n_terms, clip, dtype, what=""):
    """``‖release_a − release_b‖₂ ≤ bound`` (+ the rounding slack of the sums).

    ``clip`` is the per-record bound (``bound`` is usually ``clip`` or
    ``2 · clip``); ``dtype`` the dtype the library accumulates in.
    """
    a = np.asarray(release_a, dtype=np.float64).ravel()
    b = np.asarray(release_b, dtype=np.float64).ravel()
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b)), f"{what}: non-finite release"
    diff = float(np.linalg.norm(a - b))
    limit = bound + rounding_slack(n_terms, clip, dtype)
    assert diff <= limit, (
        f"{what}: neighbouring inputs moved the pre-noise release by {diff!r} "
        f"= {diff / bound:.4f} x the sensitivity {bound!r} the accountant assumed")
    return diff


# ---------------------------------------------------------------- neighbours

def remove_one(X, y, i):
    """``(X, y)`` without row ``i`` (add/remove relation). Works for dense and CSR."""
    keep = np.r_[0:i, i + 1:X.shape[0]]
    return X[keep], (None if y is None else np.asarray(y)[keep])


def replace_columns(X, i, cols, values):
    """A copy of ``X`` with ``X[i, cols] = values`` (replace the protected part of one record)."""
    if sp.issparse(X):
        X2 = X.tolil(copy=True)
        X2[i, cols] = np.asarray(values)
        return X2.tocsr().astype(X.dtype)
    X2 = np.array(X, copy=True)
    X2[i, cols] = values
    return X2


def replace_label(y, i, label):
    """A copy of ``y`` with ``y[i] = label`` (label-DP relation)."""
    y2 = np.array(y, copy=True)
    y2[i] = label
    return y2


# ---------------------------------------------------------------- adversarial data

@st.composite
def adversarial_dense(draw, *, n_rows=(3, 12), n_cols=(2, 6), dtypes=(np.float64, np.float32),
                      private_cols=None):
    """A dense ``X`` mixing huge and tiny scales, constant and one-hot columns.

    Returns ``(X, private_idx)``. Public columns get a scale from
    :data:`SCALES`; ``private_cols`` (a count range) of the columns are
    "protected": N(0, 1), constant, or one-hot.
    """
    n = draw(st.integers(*n_rows))
    d = draw(st.integers(*n_cols))
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from(SCALES))
    X = rng.standard_normal((n, d)) * scale
    if private_cols is None:
        n_priv = draw(st.integers(1, max(1, d - 1)))
    else:
        n_priv = draw(st.integers(*private_cols))
    n_priv = min(n_priv, d)
    private_idx = np.sort(rng.choice(d, size=n_priv, replace=False))
    kind = draw(st.sampled_from(("normal", "constant", "onehot", "tiny")))
    if kind == "normal":
        X[:, private_idx] = rng.standard_normal((n, n_priv))
    elif kind == "constant":
        X[:, private_idx] = 1.0
    elif kind == "onehot":
        X[:, private_idx] = 0.0
        X[np.arange(n), private_idx[rng.integers(0, n_priv, n)]] = 1.0
    else:
        X[:, private_idx] = rng.standard_normal((n, n_priv)) * 1e-8
    return X.astype(dtype), private_idx


def hostile_csr(X, rng, duplicates=3):
    """``X`` as a CSR matrix with *duplicate* and *unsorted* entries (same matrix).

    Every stored value is split into ``duplicates`` equal parts stored as
    separate entries of the same column, and each row's entries are shuffled.
    ``scipy`` sums duplicates, so ``hostile.toarray() == X`` (up to the
    rounding of the split), but ``hostile.data`` has ``duplicates`` entries
    per value: code that computes a norm as ``Σ data²`` gets it wrong.
    """
    X = np.asarray(X)
    rows, cols = np.nonzero(X)
    vals = X[rows, cols] / duplicates
    rows = np.repeat(rows, duplicates)
    cols = np.repeat(cols, duplicates)
    vals = np.repeat(vals, duplicates)
    order = np.lexsort((rng.random(len(rows)), rows))  # rows together, columns shuffled
    rows, cols, vals = rows[order], cols[order], vals[order]
    indptr = np.zeros(X.shape[0] + 1, dtype=np.int32)
    np.add.at(indptr, rows + 1, 1)
    indptr = np.cumsum(indptr).astype(np.int32)
    M = sp.csr_matrix((vals.astype(X.dtype), cols.astype(np.int32), indptr), shape=X.shape)
    assert not M.has_canonical_format
    return M

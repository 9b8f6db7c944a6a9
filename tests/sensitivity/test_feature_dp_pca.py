"""Sensitivity of FeatureDPPCA's one release (the covariance's protected blocks).

The quantity noised is the regression statistic's stacked weighted vector
without a target (``X_QᵀX~_P``, the ones column included, and the scaled
upper triangle of ``X_QᵀX_Q``), built by ``fit`` itself: the call that adds the
Gaussian is intercepted. The accountant assumes it moves by at most 1 when a
record is removed (add/remove, FDP Def. 6) and 2 when a record's protected
values are replaced (Def. 5), on adversarial data (scales 1e-8 to 1e8,
float32, one-hot and constant protected columns, CSR with duplicate
entries); a constructed record reaches the bound.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sklearn_fdp import FeatureDPPCA

from ._harness import SCALES, adversarial_dense, assert_sensitivity, hostile_csr, remove_one, \
    replace_columns
from .test_feature_dp_linear import _Stop, _new_values  # noqa: F401 (the same value draws)


def released_vector(est, X):
    """``(v, layout)``: the pre-noise vector of ``est.fit(X)`` and the layout's details."""
    from unittest import mock

    from sklearn_fdp._mechanisms import linear_statistics as ls

    seen = {}

    def capture(vector, noise_multiplier, noise_rng):
        seen["v"] = np.array(vector, copy=True)
        raise _Stop

    with mock.patch.object(ls, "add_gaussian_noise", capture), pytest.raises(_Stop):
        est.fit(X)
    return seen["v"], est.privacy_plan(X.shape[0], X.shape[1])


@st.composite
def problem(draw):
    X, private_idx = draw(adversarial_dense(n_rows=(3, 12), n_cols=(2, 6)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    kind = draw(st.sampled_from(("dense", "csr", "hostile")))
    if kind == "csr":
        X = sp.csr_matrix(X)
    elif kind == "hostile":
        X = hostile_csr(X, rng)
    bounds = (draw(st.sampled_from((1e-3, 0.7, 1.0, 50.0))),
              draw(st.sampled_from((1e-3, 0.5, 1.0, 50.0))))
    return X, private_idx, draw(st.integers(0, X.shape[0] - 1)), bounds


def _estimator(private_idx, bounds, neighboring):
    return FeatureDPPCA(private_features=[int(j) for j in private_idx], row_norm_bounds=bounds,
                        epsilon=None, noise_multiplier=1.0, neighboring=neighboring,
                        delta=1e-3, random_state=0)


def _check(X, X2, private_idx, bounds, relation):
    est = _estimator(private_idx, bounds, "add_remove" if relation == "remove" else "replace")
    va, plan = released_vector(est, X)
    vb, plan_b = released_vector(est, X2)
    assert plan.details["block_weights"] == plan_b.details["block_weights"]
    bound = 1.0 if relation == "remove" else 2.0
    assert_sensitivity(va, vb, bound, n_terms=X.shape[0], clip=1.0, dtype=np.float64,
                       what=f"FeatureDPPCA {relation}")


_SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)


@_SETTINGS
@given(case=problem())
def test_removing_a_record_moves_the_release_by_at_most_1(case):
    X, private_idx, i, bounds = case
    if X.shape[0] < 2:
        return
    X2, _ = remove_one(X, None, i)
    _check(X, X2, private_idx, bounds, "remove")


@_SETTINGS
@given(case=problem(), data=st.data())
def test_replacing_the_protected_part_moves_the_release_by_at_most_2(case, data):
    X, private_idx, i, bounds = case
    dense = X.toarray() if sp.issparse(X) else X
    values = _new_values(data.draw, len(private_idx), dense.dtype)
    if values is None:
        values = -dense[i, private_idx]
    _check(X, replace_columns(X, i, private_idx, values), private_idx, bounds, "replace")


def test_removing_an_extreme_record_moves_the_release_by_exactly_1():
    """A record with its public block at ``B_P`` and a one-hot protected block at ``B_Q``
    moves every block by its sensitivity at once: the bound is reached."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.01, 0.01, size=(50, 4))
    b_pub, b_priv = 0.7, 0.5
    X[0] = [b_pub, 0.0, b_priv, 0.0]  # columns 0-1 public, 2-3 protected
    est = _estimator([2, 3], (b_pub, b_priv), "add_remove")
    va, _ = released_vector(est, X)
    vb, _ = released_vector(est, X[1:])
    assert np.linalg.norm(va - vb) == pytest.approx(1.0, rel=1e-12)

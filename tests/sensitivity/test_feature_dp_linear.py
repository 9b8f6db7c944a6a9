"""Sensitivity of FeatureDPLinearRegression's one release.

The quantity noised is the stacked weighted vector ``v`` of the noisy blocks
(``X_QᵀX~_P``, the scaled upper triangle of ``X_QᵀX_Q``, ``X_Qᵀy`` and, with a
private target, ``X~_Pᵀy``), built by ``fit`` itself: the call that adds the
Gaussian is intercepted, so the clipping, the target map and the weights are
exactly the fit's. The noise is ``σ N(0, I)`` and ``dp_event_`` the Gaussian
of noise multiplier σ, so the accountant assumes that ``v`` moves by at most

* 1 when one record is removed (``neighboring="add_remove"``, FDP Def. 6: the
  public blocks are exact and are the simulator's to compute). With a public
  target the residual block ``X_Qᵀ clip(y − X~_P β)`` is released, β the
  public model of *all* rows' public parts and targets: the simulator of
  Def. 6 knows the removed record's public part Ψ(x) (its public columns and
  target) and computes β from them too, so the comparison there is the fit
  on the data with the record's protected values zeroed (what the simulator
  runs; for the other blocks it is the same as removing the record), and
  the real removal is checked for a private target;
* 2 when one record's protected values, and its target when it is private,
  are replaced (``neighboring="replace"``, Def. 5: the public part is kept);

which ``StatisticLayout.sensitivity`` states and these tests check on
adversarial data (scales from 1e-8 to 1e8, float32, one-hot and constant
protected columns, CSR with duplicate and unsorted entries, targets far
outside ``y_bounds``). Two constructed records show the bounds are tight.
"""

import math
import warnings
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sklearn_fdp import FdpWarning, FeatureDPLinearRegression
from sklearn_fdp._mechanisms import linear_statistics as ls

from ._harness import (
    SCALES,
    adversarial_dense,
    assert_sensitivity,
    hostile_csr,
    remove_one,
    replace_columns,
    replace_label,
)


class _Stop(Exception):
    """Raised once the fit has built the vector it noises."""


def released_vector(est, X, y):
    """``(v, layout)``: the pre-noise stacked weighted vector of ``est.fit(X, y)``."""
    seen = {}
    real_layout = ls.statistic_layout

    def layout(*args, **kwargs):
        seen["layout"] = real_layout(*args, **kwargs)
        return seen["layout"]

    def capture(vector, noise_multiplier, noise_rng):
        seen["v"] = np.array(vector, copy=True)
        seen["sigma"] = noise_multiplier
        raise _Stop

    # The estimator's layout, then (target public) the one with the residual clip R
    # of the public statistics, built in linear_statistics: the last one is released.
    with mock.patch.object(ls, "add_gaussian_noise", capture), \
            mock.patch("sklearn_fdp.linear._feature_dp_linear.statistic_layout", layout), \
            mock.patch.object(ls, "statistic_layout", layout), \
            warnings.catch_warnings(), pytest.raises(_Stop):
        warnings.simplefilter("ignore", FdpWarning)  # clipped rows and targets: the point here
        est.fit(X, y)
    assert seen["sigma"] == est.noise_multiplier or est.noise_multiplier is None
    return seen["v"], seen["layout"]


def _estimator(private_idx, *, label_public, neighboring, y_bounds, bounds, fit_intercept=True,
               noise_multiplier=1.0):
    # The release of the normal equations (method="auto" would run DP-SGD for a target
    # within [-1, 1]: tests/linear/test_feature_dp_linear.py checks that branch).
    # A small σ is a huge ε, which the PLD accountant takes long to discretise: the
    # closed form then (the release is the same; only epsilon_ is computed otherwise).
    return FeatureDPLinearRegression(
        private_features=[int(j) for j in private_idx], label_public=label_public,
        y_bounds=y_bounds, row_norm_bounds=bounds, fit_intercept=fit_intercept,
        method="sufficient_statistic", epsilon=None, noise_multiplier=noise_multiplier, neighboring=neighboring, delta=1e-3,
        accountant="pld" if noise_multiplier >= 1.0 else "auto", random_state=0)


def check(X, y, X2, y2, private_idx, *, label_public, relation, y_bounds, bounds,
          fit_intercept):
    neighboring = "add_remove" if relation == "remove" else "replace"
    est = _estimator(private_idx, label_public=label_public, neighboring=neighboring,
                     y_bounds=y_bounds, bounds=bounds, fit_intercept=fit_intercept)
    va, layout = released_vector(est, X, y)
    vb, layout_b = released_vector(est, X2, y2)
    assert layout.weights == layout_b.weights  # public: the same on both inputs
    assert layout.residual_bound == layout_b.residual_bound  # R: public parts only
    # The QP block's basis V_k (target public): the public Gram's, the same on both.
    assert (layout.qp_basis is None) == (layout_b.qp_basis is None)
    if layout.qp_basis is not None:
        np.testing.assert_array_equal(layout.qp_basis, layout_b.qp_basis)
    assert layout.sensitivity == (1.0 if relation == "remove" else 2.0)
    # Every record's weighted term has norm <= 1; the sums are float64.
    return assert_sensitivity(va, vb, layout.sensitivity, n_terms=X.shape[0], clip=1.0,
                              dtype=np.float64, what=f"{relation}/label_public={label_public}")


# -- strategies ------------------------------------------------------------------------


@st.composite
def problem(draw):
    X, private_idx = draw(adversarial_dense(n_rows=(3, 12), n_cols=(2, 6)))
    n = X.shape[0]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    y = rng.standard_normal(n) * draw(st.sampled_from(SCALES))
    lo = draw(st.sampled_from((-5.0, 0.0, 1.0, -1e6)))
    y_bounds = (lo, lo + draw(st.sampled_from((1e-3, 1.0, 98.0, 1e6))))
    bounds = (draw(st.sampled_from((1e-3, 0.7, 1.0, 50.0))),
              draw(st.sampled_from((1e-3, 0.5, 1.0, 50.0))))
    kind = draw(st.sampled_from(("dense", "csr", "hostile")))
    if kind == "csr":
        X = sp.csr_matrix(X)
    elif kind == "hostile":
        X = hostile_csr(X, rng)
    return X, y, private_idx, draw(st.integers(0, n - 1)), y_bounds, bounds


def _new_values(draw, m, dtype):
    scale = draw(st.sampled_from(SCALES))
    kind = draw(st.sampled_from(("normal", "zero", "onehot", "negated")))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if kind == "normal":
        return (rng.standard_normal(m) * scale).astype(dtype)
    v = np.zeros(m, dtype=dtype)
    if kind == "onehot":
        v[rng.integers(0, m)] = scale
    return v if kind != "negated" else None


_SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("label_public", [True, False])
@_SETTINGS
@given(case=problem())
def test_removing_a_record_moves_the_release_by_at_most_1(label_public, fit_intercept, case):
    X, y, private_idx, i, y_bounds, bounds = case
    if label_public:  # Def. 6's simulator: the record's public part and target stay
        X2, y2 = replace_columns(X, i, private_idx, np.zeros(len(private_idx))), y
    else:
        X2, y2 = remove_one(X, y, i)
    check(X, y, X2, y2, private_idx, label_public=label_public, relation="remove",
          y_bounds=y_bounds, bounds=bounds, fit_intercept=fit_intercept)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("label_public", [True, False])
@_SETTINGS
@given(case=problem(), data=st.data())
def test_replacing_the_protected_part_moves_the_release_by_at_most_2(label_public,
                                                                      fit_intercept, case, data):
    X, y, private_idx, i, y_bounds, bounds = case
    dense = X.toarray() if sp.issparse(X) else X
    values = _new_values(data.draw, len(private_idx), dense.dtype)
    if values is None:
        values = -dense[i, private_idx]
    X2 = replace_columns(X, i, private_idx, values)
    y2 = y
    if not label_public:
        label = data.draw(st.sampled_from((y_bounds[0], y_bounds[1], -y[i], 1e9, -1e9)))
        y2 = replace_label(y, i, label)
        if data.draw(st.booleans()):
            X2 = X  # the target alone
    check(X, y, X2, y2, private_idx, label_public=label_public, relation="replace",
          y_bounds=y_bounds, bounds=bounds, fit_intercept=fit_intercept)


# -- the bounds are reached ------------------------------------------------------------


def _extreme_data(b_pub, b_priv, label_public=False):
    """Two columns public, two protected; record 0 at every bound (one-hot q, y = hi).

    With a public target record 0's residual must reach the bound too: the
    other rows put the public model's line (column 0) steeply up, so that at
    record 0 (column 0 at its bound) it predicts above 1 where y = lo = −1:
    ``r_0 <= −2``, clipped to −2.
    """
    rng = np.random.default_rng(0)
    if label_public:
        n = 400
        X = rng.uniform(-0.01, 0.01, size=(n, 4))
        X[1:, 0] = np.where(np.arange(1, n) % 2 == 0, 0.0, b_pub / 2)
        y = np.where(X[:, 0] > 0, 0.6, -1.0)
        X[0] = [b_pub, 0.0, b_priv, 0.0]
        y[0] = -1.0
        return X, y
    X = rng.uniform(-0.1, 0.1, size=(20, 4))
    X[0] = [b_pub, 0.0, b_priv, 0.0]
    y = rng.uniform(0, 1, 20)
    y[0] = 1.0
    return X, y


def _residual_of_record_0(X, y, alpha=1.0):
    """Record 0's public residual (target units for y_bounds (-1, 1)), before clipping."""
    from sklearn.linear_model import Ridge

    pred = Ridge(alpha=alpha, solver="cholesky").fit(X[:, :2], y).predict(X[:1, :2])
    return float(y[0] - pred[0])


@pytest.mark.parametrize("label_public", [True, False])
def test_removing_an_extreme_record_moves_the_release_by_exactly_1(label_public):
    """At a small σ every block is released whole (with a public target, the X_QᵀX~_P
    block is otherwise projected on the top public directions, which the record's
    public part may leave: a smaller move) and record 0 reaches every bound."""
    X, y = _extreme_data(0.7, 0.4, label_public)
    est = _estimator([2, 3], label_public=label_public, neighboring="add_remove",
                     y_bounds=(-1.0, 1.0), bounds=(0.7, 0.4), noise_multiplier=1e-3)
    va, layout = released_vector(est, X, y)
    assert layout.qp_basis is None
    if label_public:  # the simulator's input (see the module docstring)
        assert _residual_of_record_0(X, y) <= -ls.RESIDUAL_BOUND  # clipped: at R <= 2
        vb, _ = released_vector(est, replace_columns(X, 0, [2, 3], [0.0, 0.0]), y)
    else:
        vb, _ = released_vector(est, X[1:], y[1:])
    assert np.linalg.norm(va - vb) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("label_public", [True, False])
def test_negating_an_extreme_record_moves_the_release_by_the_computed_amount(label_public):
    """q → −q: every block with q moves by twice its add/remove sensitivity but
    X_QᵀX_Q, which does not move; y → −y (private target): X_Qᵀy and X~_Pᵀy move
    by twice theirs. The replace bound 2 adds up every block's largest move, which
    no single replacement reaches at once (the two moves cancel in X_Qᵀy)."""
    X, y = _extreme_data(0.7, 0.4, label_public)
    est = _estimator([2, 3], label_public=label_public, neighboring="replace",
                     y_bounds=(-1.0, 1.0), bounds=(0.7, 0.4), noise_multiplier=1e-3)
    va, layout = released_vector(est, X, y)
    assert layout.qp_basis is None  # the whole X_QᵀX~_P block (see the test above)
    w, c = layout.weights, layout.sensitivities
    X2 = replace_columns(X, 0, [2, 3], [-0.4, 0.0])
    vb, _ = released_vector(est, X2, y)
    still = [k for k in ("QQ", "Py") if k in w]
    expected = math.sqrt(4.0 - sum((w[k] * c[k]) ** 2 for k in still))
    assert np.linalg.norm(va - vb) == pytest.approx(expected, rel=1e-12)
    if not label_public:
        vd, _ = released_vector(est, X, replace_label(y, 0, -1.0))
        expected = math.sqrt((w["Qy"] * c["Qy"]) ** 2 + (w["Py"] * c["Py"]) ** 2)
        assert np.linalg.norm(va - vd) == pytest.approx(expected, rel=1e-12)
    # Orthogonal protected parts reach the X_QᵀX_Q block's √2 B².
    X3 = replace_columns(X, 0, [2, 3], [0.0, 0.4])
    vc, _ = released_vector(est, X3, y)
    w = layout.weights
    qp = 0.4 * math.sqrt(2) * math.sqrt(0.7**2 + 1)  # ‖q − q'‖ ‖p~‖
    rhs = "Qr" if label_public else "Qy"  # |r_0| clipped to R, or |y_0| = 1
    qy = 0.4 * math.sqrt(2) * (layout.residual_bound if label_public else 1.0)
    expected = math.sqrt((w["QP"] * qp) ** 2 + (w["QQ"] * math.sqrt(2) * 0.16) ** 2
                         + (w[rhs] * qy) ** 2)
    assert np.linalg.norm(va - vc) == pytest.approx(expected, rel=1e-12)
    assert expected <= 2.0


# ====================================================== method="dpsgd" (whole record)
#
# With a private target, private columns and y_bounds within [-1, 1], method="auto"
# runs DPSGDRegressor's fit on the whole record (tests/linear/test_feature_dp_linear.py:
# bit for bit). Its release is DP-SGD's clipped sum; under this estimator's relations
# (Def. 6: remove a record; Def. 5: replace its protected values and its target) it
# moves by at most C and 2C, whatever the scales (targets far outside y_bounds too).


def _whole_record_oracle(est, X, y):
    """The per-example gradient oracle and engine config that ``est.fit`` hands to DP-SGD."""
    from sklearn_fdp.linear import _whole_record

    seen = {}

    def capture(theta0, oracle, n_samples, config, **kwargs):
        seen.update(oracle=oracle, config=config, n=n_samples)
        raise _Stop

    with mock.patch.object(_whole_record, "run_dp_sgd", capture), pytest.raises(_Stop), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", FdpWarning)  # rows above norm 1, targets clipped
        est.fit(X, y)
    assert seen["n"] == X.shape[0]
    return seen["oracle"], seen["config"]


@pytest.mark.parametrize("neighboring", ["add_remove", "replace"])
@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e4, 1e12])
def test_whole_record_branch_moves_by_at_most_c_or_2c(neighboring, scale):
    rng = np.random.default_rng(7)
    n, d = 30, 4
    X = rng.standard_normal((n, d)) * scale
    y = rng.standard_normal(n) * 1e6  # far outside y_bounds: clipped to it
    est = FeatureDPLinearRegression(private_features=[0, 1], y_bounds=(0.0, 1.0),
                                    epsilon=1.0, neighboring=neighboring, random_state=0)
    oracle, config = _whole_record_oracle(est, X, y)
    clip = config.max_grad_norm
    assert clip == 1.0
    theta = rng.standard_normal((d + 1, 1))
    full = oracle(np.arange(n), theta)
    for i in (0, 13, n - 1):
        if neighboring == "add_remove":  # the oracle of D minus record i
            other, bound = oracle(np.r_[0:i, i + 1:n], theta), clip
        else:  # record i's protected values and target replaced (extreme values)
            X2 = replace_columns(X, i, [0, 1], [1e30 * scale, -1e30 * scale])
            y2 = replace_label(y, i, -1e300)
            oracle2, _ = _whole_record_oracle(est, X2, y2)
            other, bound = oracle2(np.arange(n), theta), 2 * clip
        assert_sensitivity(full, other, bound, n_terms=n, clip=clip, dtype=np.float64,
                           what=f"method='dpsgd', {neighboring}, scale {scale:g}")

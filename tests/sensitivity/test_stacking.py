"""Sensitivity of FeatureDPStackingClassifier / FeatureDPStackingRegressor (issue 34).

The stacked fit releases one noisy quantity: the final model's (Algorithm 1's
clipped private sums, or the linear regression's weighted statistic). Its
input is ``[public score, protected columns]``; the public score is the
public estimator's out-of-fold prediction, computed from the public columns
and the public label only. So:

* on neighbours that change one record's protected values (Def. 5's
  replacement; and the data Def. 6's simulator runs on, the record's
  protected values zeroed with its public part kept), the public score
  columns of the final input are *bitwise identical*, and only the changed
  record's protected block differs (checked on adversarial data: scales
  from 1e-8 to 1e8, float32, constant and one-hot protected columns, with
  a tree, a linear and a boosted public model);
* the final release then moves by at most its sensitivity (2C for
  Algorithm 1's clipped private sum under replacement; 1 and 2 for the
  linear statistic), checked through the harness on the stacked fit itself.
"""

import warnings
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from sklearn_fdp import (
    FeatureDPLinearRegression,
    FeatureDPLogisticRegression,
    FeatureDPStackingClassifier,
    FeatureDPStackingRegressor,
)

from ._harness import SCALES, adversarial_dense, assert_sensitivity, replace_columns
from .test_feature_dp import _release_engine, engine_inputs
from .test_feature_dp_linear import released_vector


# The public models' own numerical warnings on the adversarial scales (ill-conditioned
# Ridge solves, unconverged logistic regressions): public computations, not checked here.
pytestmark = [pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning"),
              pytest.mark.filterwarnings("ignore:Singular matrix:UserWarning"),
              pytest.mark.filterwarnings(
                  "ignore::sklearn.exceptions.ConvergenceWarning")]


class _Stop(Exception):
    pass


def final_input(est, X, y):
    """The input ``est.fit(X, y)`` hands to its final model (intercepted before any noise)."""
    seen = {}
    final_cls = type(est.final_estimator)

    def capture(self, X_final, y_final, feature_names=None):
        seen.update(X=np.array(X_final, copy=True), y=np.array(y_final, copy=True))
        raise _Stop

    with mock.patch.object(final_cls, "fit", capture), pytest.raises(_Stop), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    return seen


def _labels(n, seed):
    y = np.arange(n) % 2  # both classes at least twice for 2 folds (n >= 4)
    return np.random.default_rng(seed).permutation(y)


PUBLIC_CLASSIFIERS = {
    "tree": lambda: DecisionTreeClassifier(random_state=0),
    "logistic": lambda: LogisticRegression(),
    "hgb": lambda: HistGradientBoostingClassifier(max_iter=5, random_state=0),
}


def _problem(case, data):
    """``(X, private_idx, n, i)``: at least one public column, a record ``i`` to change."""
    X, private_idx = case
    if len(private_idx) == X.shape[1]:
        private_idx = private_idx[:-1]
    n = X.shape[0]
    return X, private_idx, n, data.draw(st.integers(0, n - 1))


def _new_values(draw, m, dtype):
    scale = draw(st.sampled_from(SCALES))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    kind = draw(st.sampled_from(("normal", "zero", "onehot")))
    if kind == "normal":
        return (rng.standard_normal(m) * scale).astype(dtype)
    v = np.zeros(m, dtype=dtype)
    if kind == "onehot":
        v[rng.integers(0, m)] = scale
    return v


@pytest.mark.parametrize("public", list(PUBLIC_CLASSIFIERS))
@settings(max_examples=25, deadline=None, derandomize=True)
@given(case=adversarial_dense(n_rows=(4, 12), n_cols=(2, 6)), data=st.data())
def test_public_score_is_identical_when_protected_values_change(public, case, data):
    X, private_idx, n, i = _problem(case, data)
    y = _labels(n, data.draw(st.integers(0, 2**16)))
    X2 = replace_columns(X, i, private_idx, _new_values(data.draw, len(private_idx), X.dtype))
    est = FeatureDPStackingClassifier(
        PUBLIC_CLASSIFIERS[public](), FeatureDPLogisticRegression(), cv=2,
        private_features=private_idx.tolist(), epsilon=None, noise_multiplier=1.0,
        random_state=0)
    a, b = final_input(est, X, y), final_input(est, X2, y)
    n_pub = 1  # the score column (passthrough=False)
    np.testing.assert_array_equal(a["X"][:, :n_pub], b["X"][:, :n_pub])  # bitwise
    np.testing.assert_array_equal(a["y"], b["y"])
    others = np.arange(n) != i
    np.testing.assert_array_equal(a["X"][others], b["X"][others])
    # The final model's protected block is the record's protected values, unchanged.
    np.testing.assert_array_equal(b["X"][i, n_pub:], X2[i, private_idx])


def _stacked_fdp(private_idx, clip):
    final = FeatureDPLogisticRegression(max_grad_norm=clip, epochs=1.0, alpha=1.0,
                                        public_epochs=0)
    return FeatureDPStackingClassifier(
        DecisionTreeClassifier(max_depth=3, random_state=0), final, cv=2,
        private_features=[int(j) for j in private_idx], epsilon=None, noise_multiplier=1.0,
        neighboring="replace", accountant="pld", random_state=0)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=adversarial_dense(n_rows=(4, 12), n_cols=(2, 6)), data=st.data())
def test_final_release_moves_by_at_most_2C_under_replacement(case, data):
    X, private_idx, n, i = _problem(case, data)
    y = _labels(n, data.draw(st.integers(0, 2**16)))
    clip = data.draw(st.sampled_from((0.1, 0.5, 1.0)))
    X2 = replace_columns(X, i, private_idx, _new_values(data.draw, len(private_idx), X.dtype))
    est = _stacked_fdp(private_idx, clip)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = engine_inputs(est, X, y), engine_inputs(est, X2, y)
    C = a["config"].max_grad_norm
    assert C == clip == a["oracle"].max_grad_norm == b["config"].max_grad_norm
    theta = np.broadcast_to(data.draw(st.sampled_from((0.0, 1.0, -3.0))), a["theta0"].shape)
    assert_sensitivity(_release_engine(a, theta, None), _release_engine(b, theta, None),
                       2 * C, n_terms=n, clip=C, dtype=X.dtype, what="stacked alg1/replace")


@pytest.mark.parametrize("relation", ["remove", "replace"])
@settings(max_examples=30, deadline=None, derandomize=True)
@given(case=adversarial_dense(n_rows=(4, 12), n_cols=(2, 6)), data=st.data())
def test_regressor_release_within_its_bound(relation, case, data):
    X, private_idx, n, i = _problem(case, data)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    y = rng.standard_normal(n) * data.draw(st.sampled_from((1e-3, 1.0, 1e6)))
    if relation == "remove":  # Def. 6's simulator: the public part and target stay
        values = np.zeros(len(private_idx), dtype=X.dtype)
    else:
        values = _new_values(data.draw, len(private_idx), X.dtype)
    X2 = replace_columns(X, i, private_idx, values)
    public = data.draw(st.sampled_from(("tree", "ridge", "hgb")))
    make = {"tree": lambda: DecisionTreeRegressor(max_depth=3, random_state=0),
            "ridge": Ridge,
            "hgb": lambda: HistGradientBoostingRegressor(max_iter=5, random_state=0)}[public]
    bound = data.draw(st.sampled_from((1e-3, 1.0, 50.0)))
    est = FeatureDPStackingRegressor(
        make(), FeatureDPLinearRegression(), cv=2, private_features=private_idx.tolist(),
        y_bounds=(-2.0, 2.0), row_norm_bounds=bound, epsilon=None, noise_multiplier=1.0,
        neighboring="add_remove" if relation == "remove" else "replace", delta=1e-3,
        random_state=0)
    va, layout = released_vector(est, X, y)
    vb, layout_b = released_vector(est, X2, y)
    assert layout.weights == layout_b.weights
    assert layout.sensitivity == (1.0 if relation == "remove" else 2.0)
    assert_sensitivity(va, vb, layout.sensitivity, n_terms=n, clip=1.0, dtype=np.float64,
                       what=f"stacked linear/{relation}")

"""The small-data factor of the default learning rate (issue 20, item 2/3).

``_auto_learning_rate`` multiplies its rate by ``sqrt(2e5 / (steps · B))``
when a run processes fewer than 2e5 expected examples and one step's noise
is below its signal; otherwise the rate is the one tuned on Adult.
"""

import math

import numpy as np
import pytest

from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression
from sklearn_fdp._plan import DPSGDSchedule
from sklearn_fdp.linear._base import _SMALL_N_REF, _auto_learning_rate, resolve_learning_rate


def test_no_factor_at_or_above_the_reference():
    # Adult's full training set at the defaults: B = 1442, 226 steps.
    base = _auto_learning_rate(3.0, 1442, 106)
    assert _auto_learning_rate(3.0, 1442, 106, steps=226) == base
    assert _auto_learning_rate(3.0, 1000, 106, steps=int(_SMALL_N_REF / 1000)) == base


def test_factor_below_the_reference_when_the_signal_dominates():
    # 750 rows: B = 219, 35 steps, σ C = 6.7, d + 1 = 106: noise 0.31 < 1.
    base = _auto_learning_rate(6.7, 219, 106)
    boosted = _auto_learning_rate(6.7, 219, 106, steps=35)
    assert boosted == pytest.approx(base * math.sqrt(_SMALL_N_REF / (35 * 219)), rel=1e-12)


def test_no_factor_when_the_noise_dominates_and_the_cap_holds():
    # σ C sqrt(d + 1) >= B: the steps are mostly noise, the rate stays.
    sigma = 219 / math.sqrt(106)
    assert _auto_learning_rate(sigma, 219, 106, steps=35) == _auto_learning_rate(sigma, 219, 106)
    assert _auto_learning_rate(1.01 * sigma, 219, 106, steps=35) == _auto_learning_rate(
        1.01 * sigma, 219, 106)
    # Tiny noise: the cap of 4 (k = 1) bounds the boosted rate too.
    assert _auto_learning_rate(1e-3, 219, 106, steps=35) == 4.0


class _Est:
    learning_rate = "auto"


def test_resolve_learning_rate_small_data_switch():
    schedule = DPSGDSchedule(batch_size=219, sampling_rate=219 / 750, steps=35)
    on = resolve_learning_rate(_Est(), 6.7, schedule, 106, 1)
    off = resolve_learning_rate(_Est(), 6.7, schedule, 106, 1, small_data=False)
    assert on == _auto_learning_rate(6.7, 219, 106, steps=35)
    assert off == _auto_learning_rate(6.7, 219, 106)
    assert on > off


def test_estimators_apply_it_as_documented():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(750, 5))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(int)
    dpsgd = DPSGDClassifier(epsilon=1.0, accountant="rdp", random_state=0).fit(X, y)
    plan = dpsgd.privacy_plan_
    sched = plan.schedule
    assert dpsgd.learning_rate_ == _auto_learning_rate(
        plan.noise_multiplier * dpsgd.max_grad_norm, sched.batch_size, 6, steps=sched.steps)
    assert dpsgd.learning_rate_ > _auto_learning_rate(
        plan.noise_multiplier * dpsgd.max_grad_norm, sched.batch_size, 6)
    fdp = FeatureDPLogisticRegression(private_features=[0], label_public=True, epsilon=1.0,
                                      accountant="rdp", random_state=0).fit(X, y)
    # FDP keeps the rate tuned on Adult (no small-data factor).
    fplan = fdp.privacy_plan_
    noise = fdp.alpha_ * fplan.noise_multiplier * fdp.max_grad_norm_
    assert fdp.learning_rate_ == _auto_learning_rate(noise, fplan.schedule.batch_size, 6)


def test_no_factor_for_several_output_columns():
    # Measured only on binary problems; on digits (k = 10) it lost accuracy.
    assert _auto_learning_rate(6.7, 219, 106, n_outputs=10, steps=35) == _auto_learning_rate(
        6.7, 219, 106, n_outputs=10)

"""Empirical privacy audits (sklearn_fdp.audit.canary_audit / canary_audit_one_run).

Three kinds of checks:

* the statistics (Clopper–Pearson bounds, the hypothesis-testing conversion
  to ε, Steinke et al.'s one-run p-value) against values computed by hand;
* the estimators, at their claimed ε: the audit's lower bound stays at or
  below the claim. A bound is valid with probability >= ``confidence``
  (0.95), so for a correct implementation a failure here has probability
  <= 5 % per audit *before* the seeds are fixed; with fixed seeds the
  outcome is deterministic, and a failure means a real regression (or
  that the seed is one of the 5 %: rerun with SKLEARN_FDP_SEED to tell);
* deliberately broken variants (no noise; no clipping while ε is still
  accounted with the claimed clip norm): the bound exceeds the claim.

Sizes: with perfect separation and ``n`` evaluation runs per side, the
95 % bound is ``log(0.025^(1/n) / (1 - 0.025^(1/n)))`` ≈ ``log(n / 3.7)``:
about 2.9 for the ~75 evaluation runs per side of a 200-run audit (enough
to refute ε = 1), and it needs ~250 per side (1000 runs) to refute ε = 4,
which is why those audits are marked slow. The one-run audit with ``r``
right guesses gives about ``log(r / 3)``: 500 guesses refute ε = 4 from a
single fit.
"""

import math

import numpy as np
import pytest
from scipy import stats

import sklearn_fdp
import sklearn_fdp._engine._loop as engine_loop
from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression
from sklearn_fdp.audit import (
    CanaryAuditResult,
    OneRunAuditResult,
    canary_audit,
    canary_audit_one_run,
)
from sklearn_fdp.audit._canary import (
    _cp_lower,
    _cp_upper,
    _epsilon_from_rates,
    _epsilon_lower_bound_counts,
    _one_run_epsilon,
    _one_run_p_value,
)

from ._broken import UnclippedDPSGD, UnclippedFDP, ZeroNoise
from ._helpers import unit_rows

DELTA = 1e-5
N_SAMPLES, N_FEATURES = 400, 5
PUBLIC = [0, 1, 2, 3]  # column 4 of X and every appended canary column are private


# -- the data and the estimators ---------------------------------------------


@pytest.fixture(scope="module")
def data():
    return unit_rows(N_SAMPLES, N_FEATURES)


def _settings(epsilon):
    # Few steps (25) so a fit takes a few ms; RDP so calibration is quick.
    return dict(epsilon=epsilon, delta=DELTA, batch_size=80, epochs=5.0, accountant="rdp")


def _dpsgd(epsilon):
    return DPSGDClassifier(**_settings(epsilon))


def _fdp(epsilon, cls=FeatureDPLogisticRegression):
    # Public label and masked public loss: the FDP audit's "out" record (the
    # canary with its private column at 0) then has a zero private gradient.
    return cls(public_features=PUBLIC, label_public=True, public_epochs=0,
               **_settings(epsilon))


@pytest.fixture
def noise_off(monkeypatch):
    """Broken variant 1: the engine adds no noise; ε is still accounted as if it did."""
    monkeypatch.setattr(engine_loop, "NoiseStream", ZeroNoise)


def _audit(estimator, X, y, n_runs, **kwargs):
    relation = "feature" if isinstance(estimator, FeatureDPLogisticRegression) else "membership"
    return canary_audit(estimator, X, y, n_runs=n_runs, relation=relation, random_state=0,
                        **kwargs)


def _audit_one_run(estimator, X, y, n_canaries, **kwargs):
    relation = "feature" if isinstance(estimator, FeatureDPLogisticRegression) else "membership"
    return canary_audit_one_run(estimator, X, y, n_canaries=n_canaries, relation=relation,
                                random_state=0, **kwargs)


# -- (a) statistics, by hand ---------------------------------------------------


def test_exported():
    for name in ("canary_audit", "canary_audit_one_run", "CanaryAuditResult",
                 "OneRunAuditResult"):
        assert name in sklearn_fdp.audit.__all__
        assert getattr(sklearn_fdp.audit, name) is not None


def test_clopper_pearson_closed_forms():
    # k = 0: the upper bound solves (1 - p)^n = α; k = n: the lower bound p^n = α.
    alpha = 0.025
    assert _cp_upper(0, 10, alpha) == pytest.approx(1 - alpha ** 0.1, rel=1e-12)
    assert _cp_upper(0, 10, alpha) == pytest.approx(0.3084971078, rel=1e-9)
    assert _cp_lower(10, 10, alpha) == pytest.approx(0.6915028922, rel=1e-9)
    assert _cp_lower(0, 10, alpha) == 0.0
    assert _cp_upper(10, 10, alpha) == 1.0
    # The textbook 95 % interval for 5 of 10: [0.1871, 0.8129].
    assert _cp_lower(5, 10, alpha) == pytest.approx(0.187086, abs=1e-6)
    assert _cp_upper(5, 10, alpha) == pytest.approx(0.812914, abs=1e-6)
    # Coverage of the defining tail: P[Bin(n, upper) <= k] = α.
    assert stats.binom.cdf(3, 20, _cp_upper(3, 20, alpha)) == pytest.approx(alpha)
    assert stats.binom.sf(16, 20, _cp_lower(17, 20, alpha)) == pytest.approx(alpha)


@pytest.mark.parametrize(
    "tpr, fpr, delta, expected",
    [
        (0.9, 0.1, 0.0, math.log(9)),  # both directions: log(0.9 / 0.1)
        (0.5, 0.01, 0.0, math.log(50)),  # log(TPR / FPR) wins over log(0.99 / 0.5)
        (0.99, 0.5, 0.0, math.log(50)),  # log(TNR / FNR) = log(0.5 / 0.01) wins
        (0.5, 0.01, 0.1, math.log(40)),  # (0.5 - 0.1) / 0.01
        (0.5, 0.5, 0.0, 0.0),  # a coin flip proves nothing
        (0.3, 0.6, 0.0, 0.0),  # worse than a coin flip: no evidence, not negative
        (1.0, 0.0, 0.0, math.inf),
    ],
)
def test_epsilon_from_rates(tpr, fpr, delta, expected):
    assert _epsilon_from_rates(tpr, fpr, delta) == pytest.approx(expected)


def test_epsilon_lower_bound_counts_by_hand():
    # 10 of 10 "in" runs and 0 of 10 "out" runs guessed in, 95 %: each rate is
    # bounded at one-sided level 0.975, TPR >= 0.025^0.1, FPR <= 1 - 0.025^0.1.
    eps, tpr_ci, fpr_ci = _epsilon_lower_bound_counts(10, 10, 0, 10, 0.0, 0.95)
    lo = 0.025 ** 0.1
    assert tpr_ci == pytest.approx((lo, 1.0))
    assert fpr_ci == pytest.approx((0.0, 1 - lo))
    assert eps == pytest.approx(math.log(lo / (1 - lo)))
    assert eps == pytest.approx(0.80715487, abs=1e-7)
    # δ only lowers the bound: (TPR_lo - δ) / FPR_hi.
    eps_d, _, _ = _epsilon_lower_bound_counts(10, 10, 0, 10, 0.1, 0.95)
    assert eps_d == pytest.approx(math.log((lo - 0.1) / (1 - lo)))
    # Half right on both sides: no evidence.
    assert _epsilon_lower_bound_counts(5, 10, 5, 10, 0.0, 0.95)[0] == 0.0


def test_one_run_p_value_by_hand():
    # r = v = m = 2, ε = log 3 (q = 3/4), δ = 0.01:
    # P[Bin(2, 3/4) >= 2] = 9/16; α = max(P[B = 1] / 1, P[0 <= B < 2] / 2)
    # = max(6/16, 7/32) = 3/8; p = 9/16 + 3/8 · 0.01 · 2 · 2 = 0.5775.
    assert _one_run_p_value(2, 2, 2, math.log(3), 0.01) == pytest.approx(0.5775)
    assert _one_run_p_value(2, 2, 2, math.log(3), 0.0) == pytest.approx(9 / 16)


def _p_value_literal(m, r, v, eps, delta):
    """Steinke, Nasr & Jagielski (2023), Appendix D, written out loop by loop."""
    q = 1 / (1 + math.exp(-eps))
    beta = sum(math.comb(r, k) * q**k * (1 - q) ** (r - k) for k in range(v, r + 1))
    alpha, total = 0.0, 0.0
    for i in range(1, v + 1):
        k = v - i
        total += math.comb(r, k) * q**k * (1 - q) ** (r - k)
        alpha = max(alpha, total / i)
    return min(1.0, beta + alpha * delta * 2 * m)


@pytest.mark.parametrize("m, r, v, eps, delta", [
    (100, 20, 15, 0.7, 1e-3), (50, 30, 30, 2.0, 1e-5), (1000, 40, 22, 0.1, 1e-4),
    (10, 10, 3, 1.0, 0.01),
])
def test_one_run_p_value_matches_literal_loop(m, r, v, eps, delta):
    assert _one_run_p_value(m, r, v, eps, delta) == pytest.approx(
        _p_value_literal(m, r, v, eps, delta), rel=1e-9)


def test_one_run_epsilon_by_hand():
    # δ = 0, all r = 10 guesses right: ε solves q^10 = 0.05, q = e^ε / (1 + e^ε).
    q = 0.05 ** 0.1
    assert _one_run_epsilon(10, 10, 10, 0.0, 0.95) == pytest.approx(math.log(q / (1 - q)),
                                                                     abs=1e-5)
    # Coin-flip accuracy refutes nothing; δ > 0 can only lower the bound.
    assert _one_run_epsilon(100, 40, 20, 1e-5, 0.95) == 0.0
    assert _one_run_epsilon(1000, 200, 190, 1e-5, 0.95) < \
        _one_run_epsilon(1000, 200, 190, 0.0, 0.95)
    # At the bound, the p-value sits at the level.
    eps = _one_run_epsilon(1000, 200, 170, 1e-5, 0.95)
    assert _one_run_p_value(1000, 200, 170, eps, 1e-5) == pytest.approx(0.05, abs=1e-4)


# -- the audit's plumbing ------------------------------------------------------


def test_result_fields_and_determinism(data):
    X, y = data
    est = DPSGDClassifier(epsilon=None, noise_multiplier=2.0, batch_size=80, epochs=2.0,
                          accountant="rdp")
    a = canary_audit(est, X, y, n_runs=12, random_state=3)
    b = canary_audit(lambda seed: est.set_params(random_state=seed), X, y, n_runs=12,
                     random_state=3)
    assert isinstance(a, CanaryAuditResult)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.canary_in.sum() == 6 and a.n_calibration == 3
    assert a.n_in + a.n_out == 9 and a.n_in == int(a.canary_in[~a.calibration].sum())
    # The claim is the largest ε_ of the runs (n + 1 rows give a larger q).
    assert a.delta == DELTA and a.claimed_epsilon >= est.fit(X, y).epsilon_
    assert "lower bound" in a.summary()
    one = canary_audit_one_run(est, X, y, n_canaries=20, random_state=3)
    assert isinstance(one, OneRunAuditResult)
    assert one.n_guesses == 10 and one.scores.shape == (20,)


def test_explicit_feature_canary_and_custom_score(data):
    X, y = data
    x_in = np.zeros(N_FEATURES)
    x_in[4] = 3.0
    seen = []

    def score(model, x, label):
        seen.append(label)
        return float(model.coef_[0, 4])

    res = canary_audit(_fdp(4.0), X, y, n_runs=8, relation="feature",
                       canary=(x_in, 1), reference=(np.zeros(N_FEATURES), 1), score=score,
                       random_state=0)
    assert res.relation == "feature" and seen == [1] * 8


def test_multiclass_default_score(data):
    X, y = data
    y3 = y + (X[:, 1] > 0.5)
    est = DPSGDClassifier(epsilon=None, noise_multiplier=2.0, batch_size=80, epochs=2.0,
                          accountant="rdp")
    res = canary_audit(est, X, y3, n_runs=8, random_state=0)
    assert np.all(np.isfinite(res.scores))


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_runs=4), "n_runs"),
    (dict(n_runs=20, confidence=1.0), "confidence"),
    (dict(n_runs=20, calibration_fraction=0.0), "calibration_fraction"),
    (dict(n_runs=20, relation="replace"), "relation"),
    (dict(n_runs=20, canary="worst"), "canary"),
    (dict(n_runs=20, canary=(np.ones(3), 1)), "5 finite numbers"),
    (dict(n_runs=20, canary=(np.ones(5), 1), relation="feature"), "reference"),
    (dict(n_runs=20, canary_label=7), "canary_label=7"),
    (dict(n_runs=20, canary_norm=-1.0), "canary_norm"),
])
def test_bad_arguments(data, kwargs, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        canary_audit(_dpsgd(1.0), X, y, **kwargs)


def test_feature_audit_rejects_a_public_canary_column(data):
    X, y = data
    est = FeatureDPLogisticRegression(public_features=[0, 1, 2, 3, 5], label_public=True,
                                      public_epochs=0, **_settings(4.0))
    with pytest.raises(ValueError, match=r"column\(s\) \[5\].*treats as public"):
        canary_audit(est, X, y, n_runs=8, relation="feature")
    with pytest.raises(ValueError, match="treats as public"):
        canary_audit_one_run(est, X, y, n_canaries=4, relation="feature")


def test_bad_one_run_arguments(data):
    X, y = data
    with pytest.raises(ValueError, match="k_pos \\+ k_neg"):
        canary_audit_one_run(_dpsgd(1.0), X, y, n_canaries=10, k_pos=6, k_neg=6)
    with pytest.raises(TypeError, match="n_canaries"):
        canary_audit_one_run(_dpsgd(1.0), X, y, n_canaries=10.5)


# -- (b) correct estimators stay below their claim --------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
@pytest.mark.parametrize("make", [_dpsgd, _fdp], ids=["DPSGDClassifier", "FeatureDP"])
def test_correct_estimator_below_claim(data, make, epsilon):
    X, y = data
    res = _audit(make(epsilon), X, y, n_runs=200)
    assert res.claimed_epsilon <= epsilon
    assert res.epsilon_lower_bound <= res.claimed_epsilon, res.summary()


@pytest.mark.statistical
@pytest.mark.parametrize("make", [_dpsgd, _fdp], ids=["DPSGDClassifier", "FeatureDP"])
def test_correct_estimator_one_run_below_claim(data, make):
    X, y = data
    res = _audit_one_run(make(1.0), X, y, n_canaries=1000)
    assert res.epsilon_lower_bound <= res.claimed_epsilon, res.summary()


# -- (c) broken variants are caught --------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("make", [_dpsgd, _fdp], ids=["DPSGDClassifier", "FeatureDP"])
def test_noise_off_is_caught(data, make, noise_off):
    X, y = data
    res = _audit(make(1.0), X, y, n_runs=200)
    assert res.claimed_epsilon == pytest.approx(1.0, rel=1e-3)  # still claims ε = 1
    assert res.epsilon_lower_bound > res.claimed_epsilon, res.summary()
    assert res.refutes_claim


def _unclipped_dpsgd(epsilon):
    return UnclippedDPSGD(**_settings(epsilon))


def _unclipped_fdp(epsilon):
    return _fdp(epsilon, UnclippedFDP)


@pytest.mark.statistical
@pytest.mark.parametrize("make", [_unclipped_dpsgd, _unclipped_fdp],
                         ids=["DPSGDClassifier", "FeatureDP"])
def test_clipping_off_is_caught(data, make):
    X, y = data
    # Without clipping ~25 % of the "in" runs stay inside the noise (the noise
    # had already fitted the canary, whose gradient then vanishes), so the bound
    # is lower than with the noise off: over random_state 0-7 it ranged
    # 1.2-2.5 with 200 runs and 1.8-2.9 with 300, the size used here.
    res = _audit(make(1.0), X, y, n_runs=300)
    assert res.epsilon_lower_bound > res.claimed_epsilon, res.summary()


@pytest.mark.statistical
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
@pytest.mark.parametrize("make", [_dpsgd, _fdp], ids=["DPSGDClassifier", "FeatureDP"])
def test_noise_off_is_caught_in_one_run(data, make, epsilon, noise_off):
    X, y = data
    # 2000 canaries, 500 guesses each way: all right gives ≈ 5.1 > 4.
    res = _audit_one_run(make(epsilon), X, y, n_canaries=2000)
    assert res.epsilon_lower_bound > res.claimed_epsilon, res.summary()


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("broken", ["noise_off", "clipping_off"])
@pytest.mark.parametrize("estimator", ["DPSGDClassifier", "FeatureDP"])
def test_broken_variants_refute_epsilon_4(data, monkeypatch, estimator, broken):
    X, y = data
    if broken == "noise_off":
        monkeypatch.setattr(engine_loop, "NoiseStream", ZeroNoise)
        est = _dpsgd(4.0) if estimator == "DPSGDClassifier" else _fdp(4.0)
    else:
        est = _unclipped_dpsgd(4.0) if estimator == "DPSGDClassifier" else _unclipped_fdp(4.0)
    # Clipping off leaves ~30 % of the "in" runs inside the noise (the
    # canary fits itself at once when the noise already pushes its weight the
    # right way), so it needs more runs than noise off: 1500.
    res = _audit(est, X, y, n_runs=1500 if broken == "clipping_off" else 1000)
    assert res.epsilon_lower_bound > res.claimed_epsilon, res.summary()

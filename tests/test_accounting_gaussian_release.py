"""accounting.gaussian_release: one Gaussian release by its exact (ε, δ) curve (issue 19).

Checked against dp-accounting (its PLD of the Gaussian mechanism, pessimistic,
at a given sensitivity and standard deviation, and the estimators' reporting
rule), against an independent evaluation of Balle & Wang's Thm. 8 with
``math.erfc``, and through FeatureDPLinearRegression, whose fits use it.
"""

import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution

from sklearn_fdp import FeatureDPLinearRegression, accounting
from sklearn_fdp.exceptions import BudgetExceededError

GRID = list(itertools.product([0.01, 0.1, 1.0, 5.0], [1e-3, 1e-5, 1e-9],
                              ["add_remove", "replace"]))


def _delta_erfc(eps, mu):
    """Thm. 8 of Balle & Wang (2018) with math.erfc (independent of scipy's ndtr)."""
    phi = lambda x: 0.5 * math.erfc(-x / math.sqrt(2.0))  # noqa: E731
    return phi(mu / 2 - eps / mu) - math.exp(eps) * phi(-mu / 2 - eps / mu)


def _mu(sigma, neighboring):
    return (2.0 if neighboring == "replace" else 1.0) / sigma


@pytest.mark.parametrize("epsilon,delta,neighboring", GRID)
def test_calibrated_release_meets_the_target_and_is_tight(epsilon, delta, neighboring):
    sigma, event, spent = accounting.gaussian_release(epsilon, delta, neighboring=neighboring)
    assert spent <= epsilon
    mu = _mu(sigma, neighboring)
    # The reported ε is never below the exact one: δ(reported) <= δ ...
    assert _delta_erfc(spent, mu) <= delta
    # ... and within 1e-6 of it; σ is within 1e-6 of the smallest that meets ε.
    assert _delta_erfc(spent * (1 - 1e-6), mu) > delta
    assert _delta_erfc(epsilon, _mu(sigma * (1 - 1e-6), neighboring)) > delta
    assert repr(event) == repr(accounting.dpsgd_event(sigma, 1.0, 1))


@pytest.mark.parametrize("epsilon,delta,neighboring", GRID)
def test_matches_dp_accountings_pld_from_below(epsilon, delta, neighboring):
    """dp-accounting's PLD (the estimators' reporting rule) is pessimistic: never below
    the exact ε, and within its 0.1 % resolution (2 % allowed here) above it."""
    sigma, event, spent = accounting.gaussian_release(epsilon, delta, neighboring=neighboring)
    pld = accounting.epsilon_of_event(event, delta, accountant="pld", neighboring=neighboring)
    assert spent <= pld * (1 + 1e-8)
    assert pld <= spent * 1.02


@pytest.mark.parametrize("sensitivity", [0.25, 1.0, 7.0])
@pytest.mark.parametrize("epsilon,delta,neighboring", GRID[::3])
def test_sensitivity_scales_out(sensitivity, epsilon, delta, neighboring):
    """dp-accounting's Gaussian PLD at sensitivity Δ and std σΔ (2Δ under replacement,
    the accounting's convention) gives the same ε as noise multiplier σ."""
    sigma, _, spent = accounting.gaussian_release(epsilon, delta, neighboring=neighboring)
    factor = 2.0 if neighboring == "replace" else 1.0
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=sigma * sensitivity, sensitivity=factor * sensitivity,
        value_discretization_interval=min(1e-4, epsilon / 1000))
    direct = float(pld.get_epsilon_for_delta(delta))
    assert spent <= direct * (1 + 1e-8)
    assert direct <= spent * 1.02


@pytest.mark.parametrize("sigma", [0.2, 1.0, 3.7, 50.0, 2000.0])
@pytest.mark.parametrize("neighboring", ["add_remove", "replace"])
def test_given_noise_multiplier_reports_the_exact_epsilon(sigma, neighboring):
    _, _, spent = accounting.gaussian_release(None, 1e-5, noise_multiplier=sigma,
                                              neighboring=neighboring)
    mu = _mu(sigma, neighboring)
    assert _delta_erfc(spent, mu) <= 1e-5 < _delta_erfc(spent * (1 - 1e-6), mu)
    # The analytic Gaussian of dp-accounting (its own bisection) agrees.
    assert spent == pytest.approx(accounting.gaussian_epsilon(sigma, 1e-5,
                                                              neighboring=neighboring),
                                  rel=1e-6)


def test_errors_name_the_value():
    with pytest.raises(BudgetExceededError, match="noise_multiplier=0.5 spends"):
        accounting.gaussian_release(1.0, 1e-5, noise_multiplier=0.5)
    with pytest.raises(ValueError, match=r"`delta` must be in \(0, 1\)"):
        accounting.gaussian_release(1.0, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        accounting.gaussian_release(-1.0, 1e-5)
    with pytest.raises(BudgetExceededError, match="cannot be met"):
        accounting.gaussian_release(1e-9, 1e-300)


# -- through the estimator ----------------------------------------------------------------


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.4, 0.4, size=(500, 4))
    return X, X @ [1.0, -1.0, 0.5, 2.0] + 0.1 * rng.standard_normal(500)


@pytest.mark.parametrize("neighboring", ["add_remove", "replace"])
@pytest.mark.parametrize("epsilon", [0.05, 1.0, 8.0])
def test_estimator_reports_at_least_the_exact_epsilon(data, epsilon, neighboring):
    X, y = data
    est = FeatureDPLinearRegression(private_features=[0, 1], y_bounds=(-3, 3),
                                    epsilon=epsilon, neighboring=neighboring,
                                    random_state=0).fit(X, y)
    assert est.accountant_ == "analytic"
    assert est.epsilon_ <= epsilon
    mu = _mu(est.noise_multiplier_, neighboring)
    assert _delta_erfc(est.epsilon_, mu) <= est.delta_  # >= the exact ε of its σ
    # dp-accounting's PLD on the fitted dp_event_ (pessimistic) is not below it.
    pld = accounting.epsilon_of_event(est.dp_event_, est.delta_, accountant="pld",
                                      neighboring=neighboring)
    assert est.epsilon_ <= pld * (1 + 1e-8)
    # An explicit accountant takes the dp-accounting path, as before.
    pld_fit = FeatureDPLinearRegression(private_features=[0, 1], y_bounds=(-3, 3),
                                        epsilon=epsilon, neighboring=neighboring,
                                        accountant="pld", random_state=0).fit(X, y)
    assert pld_fit.accountant_ == "pld" and pld_fit.epsilon_ <= epsilon
    # PLD is pessimistic: its σ is not below the exact one (but for the 1e-9 by which
    # gaussian_release rounds its ε, and so σ, up).
    assert pld_fit.noise_multiplier_ >= est.noise_multiplier_ * (1 - 1e-8)


def test_estimator_given_noise_multiplier(data):
    X, y = data
    kw = dict(private_features=[0, 1], y_bounds=(-3, 3), random_state=0)
    est = FeatureDPLinearRegression(epsilon=None, noise_multiplier=2.0, **kw).fit(X, y)
    assert est.epsilon_ == accounting.gaussian_release(None, 1e-5, noise_multiplier=2.0)[2]
    with pytest.raises(BudgetExceededError):
        FeatureDPLinearRegression(epsilon=0.5, noise_multiplier=2.0, **kw).fit(X, y)


def test_a_fit_imports_no_accountant_and_its_event_is_dp_accountings():
    """The cold-start point: a fit loads nothing of dp-accounting; its ``dp_event_``,
    built when asked, loads the DpEvent classes only (not the accountants, nor
    scipy.signal), and a later `import dp_accounting` uses the same classes."""
    code = (
        "import sys, json, numpy as np\n"
        "from sklearn_fdp import FeatureDPLinearRegression\n"
        "X = np.random.default_rng(0).uniform(size=(50, 3)); y = X.sum(axis=1)\n"
        "est = FeatureDPLinearRegression(private_features=[0], y_bounds=(0, 3),\n"
        "                                random_state=0).fit(X, y)\n"
        "def dp(): return sorted(m for m in sys.modules if m.startswith(('dp_accounting', "
        "'scipy.signal')))\n"
        "after_fit = dp()\n"
        "event = est.dp_event_\n"
        "after_event = dp()\n"
        "import pickle, dp_accounting\n"
        "from sklearn_fdp import accounting\n"
        "same = isinstance(event.event, dp_accounting.GaussianDpEvent)\n"
        "back = pickle.loads(pickle.dumps(est)).dp_event_ == event == est.dp_event_\n"
        "plan = est.privacy_plan_ == est.privacy_plan(50, 3) and est.privacy_plan_.dp_event == event\n"
        "pld = accounting.epsilon_of_event(event, 1e-5, accountant='pld')\n"
        "print(json.dumps(dict(after_fit=after_fit, after_event=after_event, same=same, "
        "back=back, plan=plan, pld=pld, eps=est.epsilon_)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["after_fit"] == []
    assert out["after_event"] == ["dp_accounting.dp_event"]
    assert out["same"] and out["back"] and out["plan"]
    assert out["eps"] <= out["pld"] * (1 + 1e-8)


def test_unfitted_estimator_has_no_plan_or_event():
    est = FeatureDPLinearRegression(private_features=[0], y_bounds=(0, 3))
    assert not hasattr(est, "dp_event_") and not hasattr(est, "privacy_plan_")


def _delta_mpmath(eps, mu):
    """Thm. 8 at 60 digits (mpmath): the reference at extreme σ and ε."""
    import mpmath

    with mpmath.workdps(60):
        eps, mu = mpmath.mpf(eps), mpmath.mpf(mu)
        # Beyond |x| = 1e20, Φ is 0 or 1 to within 1e-20 (mpmath's erfc cannot take such
        # arguments); e^ε Φ(−μ/2 − ε/μ) <= 1/x there too, as x²/2 >= ε.
        phi = lambda x: mpmath.ncdf(x) if abs(x) < 1e20 else mpmath.mpf(x > 0)  # noqa: E731
        return float(phi(mu / 2 - eps / mu) - mpmath.exp(eps) * phi(-mu / 2 - eps / mu))


EXTREME_MU = [1e-12, 1e-6, 1.0, 30.0, 1e3, 1e6, 1e12]  # σ = 1/μ from 1e12 down to 1e-12
EXTREME_EPS = [0.0, 1e-12, 1.0, 699.0, 701.0, 1e6, 1e12, 1e24, 1e300]


@pytest.mark.parametrize("mu", EXTREME_MU)
def test_delta_at_extreme_sigma_and_epsilon_is_finite_and_exact(mu):
    """δ(ε) neither overflows nor leaves [0, 1] at σ from 1e-12 to 1e12, and matches a
    60-digit evaluation to 1e-12 absolute (the rounding of a difference of two terms ≤ 1)."""
    import warnings

    from sklearn_fdp.accounting._gaussian import _gaussian_delta

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        deltas = [_gaussian_delta(eps, mu) for eps in EXTREME_EPS]
    for eps, d in zip(EXTREME_EPS, deltas):
        assert 0.0 <= d <= 1.0
        assert d == pytest.approx(_delta_mpmath(eps, mu), abs=1e-12, rel=1e-9), (eps, mu)
    assert all(a >= b for a, b in zip(deltas, deltas[1:]))  # δ(ε) does not grow with ε


@pytest.mark.parametrize("epsilon", [0.0, 1.0, 1e3, 1e12])
def test_delta_tends_to_one_as_sigma_tends_to_zero(epsilon):
    from sklearn_fdp.accounting._gaussian import _gaussian_delta

    # Fixed ε, σ → 0 (μ → ∞): the release is the value itself, δ → 1.
    assert _gaussian_delta(epsilon, 1e12 if epsilon < 1e12 else 1e13) == 1.0
    # σ → ∞ (μ → 0): δ → 0.
    assert _gaussian_delta(epsilon, 1e-200) == 0.0


def test_both_forms_of_the_second_term_agree_where_they_overlap():
    """The log-Φ form (ε ≤ 700) and the Mills-ratio form (ε > 700) are the same quantity:
    evaluated on the same side of the switch they agree to float rounding."""
    from scipy.special import erfcx, log_ndtr

    for mu in [1.0, 30.0, 40.0, 1e3]:
        for eps in [1.0, 100.0, 600.0, 700.0]:
            log_form = math.exp(eps + float(log_ndtr(-mu / 2 - eps / mu)))
            z = mu / 2 - eps / mu
            mills = (math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) * math.sqrt(math.pi / 2)
                     * float(erfcx((mu / 2 + eps / mu) / math.sqrt(2))))
            assert mills == pytest.approx(log_form, rel=1e-9, abs=1e-300), (mu, eps)


@pytest.mark.parametrize("sigma", [1e-12, 1e-6])
def test_tiny_noise_multiplier_reports_a_finite_epsilon_without_overflow(sigma):
    """σ = 1e-12 used to raise OverflowError inside the ε bisection (issue 35)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got_sigma, spent = accounting.gaussian_sigma_and_epsilon(None, 1e-5,
                                                                 noise_multiplier=sigma)
    assert got_sigma == sigma
    mu = 1.0 / sigma
    # The exact ε is near μ²/2 (the privacy loss's mean) and satisfies δ(ε) <= 1e-5.
    assert mu * mu / 2 <= spent < mu * mu
    assert _delta_mpmath(spent, mu) <= 1e-5
    with pytest.raises(BudgetExceededError, match="noise_multiplier"):
        accounting.gaussian_sigma_and_epsilon(1.0, 1e-5, noise_multiplier=sigma)

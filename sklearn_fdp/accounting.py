"""Privacy accounting: the only module of sklearn_fdp that imports dp-accounting.

Every mechanism a fit uses is described by a :class:`dp_accounting.DpEvent`;
its (ε, δ) is computed by one of dp-accounting's accountants (Rényi DP or
privacy-loss distributions). Noise scales are calibrated here and nowhere
else, so the ε an estimator reports is the one its noise was drawn for.

Conventions
-----------
* ``noise_multiplier`` is the ratio of the Gaussian noise's standard
  deviation to the L2 sensitivity under add/remove (the clip norm ``C`` for a
  clipped sum). Under ``neighboring="replace"`` the sensitivity of a clipped
  sum is ``2C`` while the noise is still ``noise_multiplier * C``.
* ``sampling_rate`` is the Poisson inclusion probability ``q = batch_size / n``.
  The number of records ``n`` is treated as public.
* ``accountant="pld"`` gives the tightest ε (privacy-loss distributions,
  pessimistic discretisation); ``"rdp"`` is faster and is the only one that
  handles :class:`~dp_accounting.RepeatAndSelectDpEvent`.

dp-accounting pitfalls handled here (release 0.6.0):

* ``calibrate_dp_mechanism``'s default bracket evaluates σ = 0; we build an
  explicit bracket whose lower end is positive.
* The RDP accountant under ``REPLACE_ONE`` treats a ``GaussianDpEvent`` as if
  its sensitivity were ``C`` (dp-accounting issue #378); we instead account a
  replace-one Gaussian release as an add/remove Gaussian with half the noise
  multiplier, which is exact. The RDP accountant rejects Poisson sampling
  under ``REPLACE_ONE``; use ``accountant="pld"`` there (the PLD accountant
  models the replace-one subsampled Gaussian exactly, sensitivity ``2C``).
"""

import contextlib
import logging
import math
from numbers import Integral, Real

import dp_accounting
from dp_accounting import mechanism_calibration
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

__all__ = [
    "ACCOUNTANTS",
    "NEIGHBORING_RELATIONS",
    "DpEvent",
    "dpsgd_event",
    "gaussian_event",
    "compose_events",
    "epsilon_of_event",
    "compute_epsilon",
    "calibrate_noise_multiplier",
    "gaussian_noise_multiplier",
    "gaussian_epsilon",
    "gdp_epsilon",
    "TRIAL_DISTRIBUTIONS",
    "repeat_and_select_event",
    "truncated_negative_binomial_gamma",
    "calibrate_repeat_and_select",
]

ACCOUNTANTS = ("rdp", "pld")
NEIGHBORING_RELATIONS = ("add_remove", "replace")

DpEvent = dp_accounting.DpEvent

_RELATION = {
    "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace": dp_accounting.NeighboringRelation.REPLACE_ONE,
}

# Smallest and largest noise multipliers the calibration will consider. Below
# the floor the RDP orders overflow; above the ceiling a model is pure noise.
_SIGMA_FLOOR = 1e-3
_SIGMA_CEILING = 1e6


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {choices}, got {value!r}."
        )


def _check_positive(name, value, *, allow_zero=False):
    if not isinstance(value, Real) or isinstance(value, bool) or math.isnan(value):
        raise TypeError(f"`{name}` must be a real number, got {value!r}.")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"`{name}` must be {bound}, got {value!r}.")


def _check_delta(delta):
    _check_positive("delta", delta, allow_zero=True)
    if not delta < 1:
        raise ValueError(
            f"`delta` must be in [0, 1), got {delta!r}. Use a value well below "
            "1 / n_samples, e.g. 1e-5."
        )


def dpsgd_event(noise_multiplier, sampling_rate, steps):
    """DpEvent of ``steps`` Poisson-subsampled Gaussian steps (DP-SGD).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the clip norm. Must be > 0.
    sampling_rate : float
        Poisson inclusion probability of each record, in (0, 1].
    steps : int
        Number of noisy steps, >= 0.

    Returns
    -------
    event : dp_accounting.DpEvent
        ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), T)``.
    """
    _check_positive("noise_multiplier", noise_multiplier)
    _check_positive("sampling_rate", sampling_rate)
    if sampling_rate > 1:
        raise ValueError(f"`sampling_rate` must be in (0, 1], got {sampling_rate!r}.")
    if not isinstance(steps, Integral) or steps < 0:
        raise ValueError(f"`steps` must be a non-negative integer, got {steps!r}.")
    step = dp_accounting.GaussianDpEvent(float(noise_multiplier))
    if sampling_rate < 1:
        step = dp_accounting.PoissonSampledDpEvent(float(sampling_rate), step)
    return dp_accounting.SelfComposedDpEvent(step, int(steps))


def gaussian_event(noise_multiplier):
    """DpEvent of one Gaussian release with the given noise multiplier.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the add/remove L2 sensitivity of
        the released quantity, > 0.

    Returns
    -------
    event : dp_accounting.DpEvent
        ``GaussianDpEvent(noise_multiplier)``.
    """
    _check_positive("noise_multiplier", noise_multiplier)
    return dp_accounting.GaussianDpEvent(float(noise_multiplier))


def compose_events(*events):
    """Compose several DpEvents into one, to be accounted together.

    Parameters
    ----------
    *events : dp_accounting.DpEvent
        Mechanisms run on the same data; ``NoOpDpEvent`` entries are dropped.

    Returns
    -------
    event : dp_accounting.DpEvent
        The single remaining event, or a ``ComposedDpEvent``.
    """
    events = [e for e in events if not isinstance(e, dp_accounting.NoOpDpEvent)]
    if len(events) == 1:
        return events[0]
    return dp_accounting.ComposedDpEvent(list(events))


def _make_accountant(accountant, neighboring):
    _check_choice("accountant", accountant, ACCOUNTANTS)
    _check_choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    if accountant == "pld":
        return pld_privacy_accountant.PLDAccountant(_RELATION[neighboring])
    # See the module docstring: RDP is always run under add/remove, with the
    # replace-one Gaussian rewritten exactly as an add/remove one.
    return rdp_privacy_accountant.RdpAccountant()


def _rdp_replace_one(event):
    """Rewrite ``event`` so that RDP under add/remove accounts it under replace-one."""
    if isinstance(event, dp_accounting.GaussianDpEvent):
        # Sensitivity 2C with noise σC is the add/remove Gaussian with σ/2.
        return dp_accounting.GaussianDpEvent(event.noise_multiplier / 2)
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return dp_accounting.SelfComposedDpEvent(_rdp_replace_one(event.event), event.count)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return dp_accounting.ComposedDpEvent([_rdp_replace_one(e) for e in event.events])
    if isinstance(event, (dp_accounting.NoOpDpEvent, dp_accounting.NonPrivateDpEvent)):
        return event
    raise ValueError(
        f"The RDP accountant cannot account {type(event).__name__} under "
        "neighboring='replace' (dp-accounting rejects Poisson sampling under "
        "REPLACE_ONE). Use accountant='pld', which handles it exactly."
    )


@contextlib.contextmanager
def _quiet_absl():
    """Silence dp-accounting's absl log lines (e.g. RDP orders it drops as
    non-convergent, which only makes ε more conservative) during one call."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


_EPSILON_CACHE = {}  # (repr(event), delta, accountant, neighboring) -> ε
_EPSILON_CACHE_SIZE = 1024


def _epsilon_cached(event, delta, accountant, neighboring):
    # DpEvents holding lists are unhashable; their attrs repr is a faithful key.
    key = (repr(event), delta, accountant, neighboring)
    if key not in _EPSILON_CACHE:
        acc = _make_accountant(accountant, neighboring)
        accounted = _rdp_replace_one(event) if (accountant, neighboring) == (
            "rdp", "replace") else event
        with _quiet_absl():
            acc.compose(accounted)
            eps = float(acc.get_epsilon(delta))
        if len(_EPSILON_CACHE) >= _EPSILON_CACHE_SIZE:
            _EPSILON_CACHE.clear()
        _EPSILON_CACHE[key] = eps
    return _EPSILON_CACHE[key]


def epsilon_of_event(event, delta, *, accountant="rdp", neighboring="add_remove"):
    """ε at ``delta`` of a DpEvent, by dp-accounting's RDP or PLD accountant.

    Parameters
    ----------
    event : dp_accounting.DpEvent
        What was run, e.g. a fitted estimator's ``dp_event_``.
    delta : float
        Target δ in [0, 1).
    accountant : {"rdp", "pld"}, default="rdp"
        ``"pld"`` is tighter and slower.
    neighboring : {"add_remove", "replace"}, default="add_remove"
        The neighbouring relation of the guarantee.

    Returns
    -------
    epsilon : float
        ``inf`` when the event contains a non-private step.
    """
    _check_delta(delta)
    _check_choice("accountant", accountant, ACCOUNTANTS)
    _check_choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    return _epsilon_cached(event, float(delta), accountant, neighboring)


def compute_epsilon(
    noise_multiplier,
    sampling_rate,
    steps,
    delta,
    *,
    accountant="rdp",
    neighboring="add_remove",
):
    """ε of DP-SGD: ``steps`` Poisson-subsampled Gaussian steps.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the clip norm, > 0.
    sampling_rate : float
        Poisson sampling rate ``q`` in (0, 1].
    steps : int
        Number of steps.
    delta : float
        Target δ in [0, 1).
    accountant : {"rdp", "pld"}, default="rdp"
    neighboring : {"add_remove", "replace"}, default="add_remove"

    Returns
    -------
    epsilon : float

    Examples
    --------
    >>> round(compute_epsilon(1.3, 150 / 60000, 6000, 1e-5), 3)
    0.724
    """
    event = dpsgd_event(noise_multiplier, sampling_rate, steps)
    return epsilon_of_event(event, delta, accountant=accountant, neighboring=neighboring)


def calibrate_noise_multiplier(
    epsilon,
    delta,
    sampling_rate,
    steps,
    *,
    accountant="rdp",
    neighboring="add_remove",
    other_events=(),
    tol=1e-4,
):
    """Smallest noise multiplier whose DP-SGD run spends at most ``epsilon``.

    The DP-SGD event is composed with ``other_events`` (mechanisms run in the
    same fit, e.g. a private mean) before ε is computed, so the calibrated σ
    spends exactly what remains of the budget.

    Parameters
    ----------
    epsilon : float
        Total privacy budget, > 0.
    delta : float
        Target δ in [0, 1).
    sampling_rate : float
        Poisson sampling rate ``q`` in (0, 1].
    steps : int
        Number of steps, >= 1.
    accountant : {"rdp", "pld"}, default="rdp"
    neighboring : {"add_remove", "replace"}, default="add_remove"
    other_events : sequence of DpEvent, default=()
        Mechanisms composed with the DP-SGD steps.
    tol : float, default=1e-4
        Relative tolerance on σ.

    Returns
    -------
    noise_multiplier : float
        ε of the composed run at this σ is ``<= epsilon`` (checked).

    Raises
    ------
    BudgetExceededError
        When ``other_events`` alone already spend ``epsilon``.
    """
    from .exceptions import BudgetExceededError

    _check_positive("epsilon", epsilon)
    _check_delta(delta)
    if not isinstance(steps, Integral) or steps < 1:
        raise ValueError(f"`steps` must be a positive integer, got {steps!r}.")
    other_events = tuple(other_events)

    def make_event(sigma):
        return compose_events(*other_events, dpsgd_event(sigma, sampling_rate, steps))

    def eps(sigma):
        return epsilon_of_event(make_event(sigma), delta, accountant=accountant,
                                neighboring=neighboring)

    if other_events:
        spent = epsilon_of_event(compose_events(*other_events), delta,
                                 accountant=accountant, neighboring=neighboring)
        if spent >= epsilon:
            raise BudgetExceededError(
                f"The other mechanisms of this fit already spend ε = {spent:.4g} "
                f"at δ = {delta:g}, leaving nothing of epsilon = {epsilon!r} for "
                "the gradient steps. Give them a smaller share of the budget."
            )

    key = (float(epsilon), float(delta), float(sampling_rate), int(steps), accountant,
           neighboring, repr(other_events), float(tol))
    if key not in _SIGMA_CACHE:
        if len(_SIGMA_CACHE) >= _EPSILON_CACHE_SIZE:
            _SIGMA_CACHE.clear()
        _SIGMA_CACHE[key] = _calibrate(eps, make_event, epsilon, delta, sampling_rate, steps,
                                       accountant, neighboring, other_events, tol)
    return _SIGMA_CACHE[key]


_SIGMA_CACHE = {}


def _calibrate(eps, make_event, epsilon, delta, sampling_rate, steps, accountant,
               neighboring, other_events, tol):
    from .exceptions import BudgetExceededError

    # Explicit bracket [lo, hi] with eps(lo) > epsilon >= eps(hi).
    if accountant == "pld" and neighboring == "add_remove":
        # PLD is tighter than RDP, so the (fast) RDP σ is an upper end; PLD's
        # σ is rarely more than 20 % below it. Saves most PLD evaluations.
        hi = calibrate_noise_multiplier(epsilon, delta, sampling_rate, steps,
                                        accountant="rdp", other_events=other_events, tol=tol)
        lo = 0.8 * hi
        while eps(lo) <= epsilon:
            hi, lo = lo, lo * 0.8
            if lo < _SIGMA_FLOOR:
                return hi
    else:
        lo, hi = 0.5, 1.0
        if eps(hi) > epsilon:
            while eps(hi) > epsilon:
                lo, hi = hi, hi * 2
                if hi > _SIGMA_CEILING:
                    raise BudgetExceededError(
                        f"No noise multiplier up to {_SIGMA_CEILING:g} reaches epsilon = "
                        f"{epsilon!r} at delta = {delta!r}; increase epsilon or delta."
                    )
        else:
            while eps(lo) <= epsilon:
                hi, lo = lo, lo / 2
                if lo < _SIGMA_FLOOR:
                    return hi

    def make_fresh_accountant():
        return _make_accountant(accountant, neighboring)

    def make_accounted_event(sigma):
        event = make_event(sigma)
        if accountant == "rdp" and neighboring == "replace":
            event = _rdp_replace_one(event)
        return event

    with _quiet_absl():
        sigma = mechanism_calibration.calibrate_dp_mechanism(
            make_fresh_accountant,
            make_accounted_event,
            float(epsilon),
            float(delta),
            mechanism_calibration.ExplicitBracketInterval(lo, hi),
            tol=tol * lo,
        )
    # dp-accounting guarantees a non-positive gap; check it with our own cache.
    while eps(sigma) > epsilon:  # pragma: no cover - defensive
        sigma *= 1 + tol
    return float(sigma)


def gaussian_noise_multiplier(epsilon, delta, *, neighboring="add_remove"):
    """Noise multiplier of the analytic Gaussian mechanism (Balle & Wang 2018).

    The smallest σ such that releasing ``f(D) + N(0, (σ Δ)²)`` is
    (ε, δ)-DP, where Δ is the add/remove L2 sensitivity of ``f``. Under
    ``neighboring="replace"`` the sensitivity doubles, and so does σ.

    Parameters
    ----------
    epsilon : float
        Target ε, > 0.
    delta : float
        Target δ in [0, 1).
    neighboring : {"add_remove", "replace"}, default="add_remove"
        Neighbouring relation of the guarantee.

    Returns
    -------
    noise_multiplier : float
        σ; the noise standard deviation is σ times the add/remove sensitivity.

    Examples
    --------
    >>> round(gaussian_noise_multiplier(1.0, 1e-5), 2)
    3.73
    """
    _check_positive("epsilon", epsilon)
    _check_delta(delta)
    _check_choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    sigma = float(dp_accounting.get_sigma_gaussian(float(epsilon), float(delta)))
    return 2 * sigma if neighboring == "replace" else sigma


def gaussian_epsilon(noise_multiplier, delta, *, neighboring="add_remove"):
    """ε at ``delta`` of one analytic Gaussian release (Balle & Wang 2018).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the add/remove sensitivity, > 0.
    delta : float
        Target δ in [0, 1).
    neighboring : {"add_remove", "replace"}, default="add_remove"
        Neighbouring relation of the guarantee.

    Returns
    -------
    epsilon : float
    """
    _check_positive("noise_multiplier", noise_multiplier)
    _check_delta(delta)
    _check_choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    sigma = noise_multiplier / 2 if neighboring == "replace" else noise_multiplier
    return float(dp_accounting.get_epsilon_gaussian(float(sigma), float(delta)))


def gdp_epsilon(mu, delta):
    """ε at ``delta`` of μ-Gaussian DP, for an array of μ (Dong, Roth & Su 2022).

    μ-GDP is (ε, δ(ε))-DP for every ε >= 0 with
    ``δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)``, the privacy profile of one
    Gaussian release of noise multiplier ``1/μ``: ``gdp_epsilon(mu, delta)``
    equals ``gaussian_epsilon(1 / mu, delta)``, computed for many μ at once
    (vectorised bisection, about 1e-12 relative accuracy, rounded up so the
    returned ε always meets ``delta``). The composition of Gaussian
    mechanisms of noise multipliers ``σ_t`` is μ-GDP with
    ``μ = sqrt(Σ_t 1/σ_t²)`` (AdaMix supplement, Lemma 8); per-instance
    GDP parameters (Prop. 14 there) are converted with this function.

    Parameters
    ----------
    mu : float or array-like of float
        GDP parameters, >= 0 (0 gives ε = 0; ``inf`` gives ε = inf).
    delta : float
        Target δ in (0, 1).

    Returns
    -------
    epsilon : ndarray of float
        Same shape as ``mu``.

    Examples
    --------
    >>> bool(abs(gdp_epsilon(0.5, 1e-5) - gaussian_epsilon(2.0, 1e-5)) < 1e-6)
    True
    """
    import numpy as np
    from scipy.special import log_ndtr, ndtr

    _check_delta(delta)
    if not delta > 0:
        raise ValueError(f"`delta` must be in (0, 1) for gdp_epsilon, got {delta!r}.")
    mu = np.asarray(mu, dtype=float)
    if np.any(np.isnan(mu)) or np.any(mu < 0):
        raise ValueError(f"`mu` must be >= 0, got values down to {np.nanmin(mu)!r}.")
    shape = mu.shape
    mu = mu.ravel()
    out = np.zeros_like(mu)
    out[np.isinf(mu)] = np.inf
    live = np.flatnonzero((mu > 0) & np.isfinite(mu))
    m = mu[live]

    def profile(eps):
        return ndtr(m / 2 - eps / m) - np.exp(eps + log_ndtr(-m / 2 - eps / m))

    need = profile(np.zeros_like(m)) > delta  # else ε = 0 already meets δ
    lo = np.zeros_like(m)
    hi = np.ones_like(m)
    for _ in range(200):
        over = need & (profile(hi) > delta)
        if not over.any():
            break
        lo = np.where(over, hi, lo)
        hi = np.where(over, 2 * hi, hi)
    for _ in range(100):
        mid = (lo + hi) / 2
        ok = profile(mid) <= delta
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
        if np.all(hi - lo <= 1e-13 * np.maximum(hi, 1.0)):
            break
    out[live] = np.where(need, hi, 0.0)
    return out.reshape(shape)



# -- private hyper-parameter search (Papernot & Steinke 2022) ----------------

TRIAL_DISTRIBUTIONS = ("truncated_negative_binomial", "poisson")


def repeat_and_select_event(event, mean, shape):
    """DpEvent of running ``event`` a random number of times and keeping the best.

    Papernot & Steinke (2022), "Hyperparameter tuning with Renyi differential
    privacy": the number of runs ``K`` is drawn from a truncated negative
    binomial of the given ``shape`` (0: logarithmic, 1: geometric) or, for
    ``shape=inf``, a Poisson distribution, each with mean ``mean``; only the
    best run's output is released. Only the RDP accountant handles it.

    Parameters
    ----------
    event : dp_accounting.DpEvent
        One run (one trial), including whatever it releases (e.g. its score).
    mean : float
        Mean number of runs, >= 1.
    shape : float
        Shape of the distribution of ``K``, >= 0; ``math.inf`` for Poisson.

    Returns
    -------
    event : dp_accounting.DpEvent
        ``RepeatAndSelectDpEvent(event, mean, shape)``.
    """
    _check_positive("mean", mean)
    if mean < 1:
        raise ValueError(f"`mean` must be >= 1, got {mean!r}.")
    _check_positive("shape", shape, allow_zero=True)
    return dp_accounting.dp_event.RepeatAndSelectDpEvent(event, float(mean), float(shape))


def truncated_negative_binomial_gamma(shape, mean):
    """Stopping probability γ of the truncated negative binomial with this mean.

    The value dp-accounting's RDP accountant uses for
    ``RepeatAndSelectDpEvent(event, mean, shape)`` (its conservative root, so
    the distribution sampled with it has mean ``<= mean``). Sampling ``K``
    with this γ makes the accounted and the run distribution the same.

    Parameters
    ----------
    shape : float
        η in [0, inf).
    mean : float
        Mean of ``K``, >= 1.

    Returns
    -------
    gamma : float
        γ in (0, 1].
    """
    return float(rdp_privacy_accountant._gamma_truncated_negative_binomial(
        float(shape), float(mean)))


def calibrate_repeat_and_select(make_trial_event, epsilon, delta, mean, shape, *,
                                lower=0.05, upper=1e4, tol=1e-4):
    """Smallest noise multiplier whose repeat-and-select run spends ``<= epsilon``.

    ``make_trial_event(sigma)`` builds one trial's DpEvent; the search's total
    ``RepeatAndSelectDpEvent(make_trial_event(sigma), mean, shape)`` is
    accounted by the RDP accountant (the only one that handles it), and σ is
    found by dp-accounting's ``calibrate_dp_mechanism`` in ``[lower, upper]``.

    Parameters
    ----------
    make_trial_event : callable
        ``sigma -> DpEvent`` of one trial, monotone in ``sigma``.
    epsilon : float
        Total budget of the search, > 0.
    delta : float
        Target δ in [0, 1).
    mean : float
        Mean number of trials, >= 1.
    shape : float
        Shape of the law of the number of trials (``math.inf``: Poisson).
    lower : float, default=0.05
        Smallest σ considered (returned when it already meets ``epsilon``).
    upper : float, default=1e4
        Largest σ considered.
    tol : float, default=1e-4
        Relative tolerance on σ.

    Returns
    -------
    noise_multiplier : float
        ε of the search at this σ is ``<= epsilon`` (checked).

    Raises
    ------
    BudgetExceededError
        When even ``upper`` spends more than ``epsilon``.
    """
    from .exceptions import BudgetExceededError

    _check_positive("epsilon", epsilon)
    _check_delta(delta)

    def make_event(sigma):
        return repeat_and_select_event(make_trial_event(sigma), mean, shape)

    def eps(sigma):
        return epsilon_of_event(make_event(sigma), delta, accountant="rdp")

    if eps(upper) > epsilon:
        raise BudgetExceededError(
            f"Even noise_multiplier={upper:g} per trial spends more than epsilon = "
            f"{epsilon!r} over the search at delta = {delta!r} (mean trials {mean!r}); "
            "increase epsilon, lower the mean number of trials, or make the trial "
            "score noisier."
        )
    if eps(lower) <= epsilon:
        return float(lower)
    with _quiet_absl():
        sigma = mechanism_calibration.calibrate_dp_mechanism(
            rdp_privacy_accountant.RdpAccountant,
            make_event,
            float(epsilon),
            float(delta),
            mechanism_calibration.ExplicitBracketInterval(float(lower), float(upper)),
            tol=tol * lower,
        )
    while eps(sigma) > epsilon:  # pragma: no cover - defensive
        sigma *= 1 + tol
    return float(sigma)

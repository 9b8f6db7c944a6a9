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
* The RDP accountant returns ε = 0 once a total-variation shortcut applies
  (very large noise), and cannot go below ≈ log(1/δ)/1023 otherwise (its
  largest order is 1024): an answer of 0, or one set by the largest order, is
  a failure of that accountant here, and the PLD accountant answers instead
  (see :func:`epsilon_and_accountant`). The PLD accountant's default
  discretisation (1e-4) overstates small ε many times over (×17 at ε ≈ 6e-5,
  3,000 steps) and makes large ε very slow; its discretisation is adapted to
  the ε it resolves, and below δ = 1e-12, where its truncated mass (about
  1e-15) decides the answer, RDP answers instead. No reported ε is 0.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterable
from numbers import Integral, Real
from typing import TYPE_CHECKING, Literal

# dp-accounting (and the scipy.signal it loads) is imported inside the functions
# that use it, so that `import sklearn_fdp` stays fast (issue 21).

if TYPE_CHECKING:  # annotations only: numpy is not imported here at run time
    import numpy as np
    from numpy.typing import ArrayLike

Accountant = Literal["rdp", "pld"]
Neighboring = Literal["add_remove", "replace"]

__all__ = [
    "ACCOUNTANTS",
    "NEIGHBORING_RELATIONS",
    "DpEvent",
    "dpsgd_event",
    "gaussian_event",
    "compose_events",
    "epsilon_of_event",
    "epsilon_and_accountant",
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
"""The accountants of this module's functions (an estimator also takes ``"auto"``)."""
NEIGHBORING_RELATIONS = ("add_remove", "replace")
"""The neighbouring relations a ``neighboring=`` parameter accepts."""


def __getattr__(name):
    # ``DpEvent`` is dp-accounting's class, loaded on first use (PEP 562).
    if name == "DpEvent":
        import dp_accounting

        return dp_accounting.DpEvent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _relation(neighboring):
    """dp-accounting's ``NeighboringRelation`` for ``"add_remove"`` or ``"replace"``."""
    import dp_accounting

    return {
        "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        "replace": dp_accounting.NeighboringRelation.REPLACE_ONE,
    }[neighboring]


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


def dpsgd_event(noise_multiplier: float, sampling_rate: float, steps: int) -> DpEvent:
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
    import dp_accounting

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


def gaussian_event(noise_multiplier: float) -> DpEvent:
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
    import dp_accounting

    _check_positive("noise_multiplier", noise_multiplier)
    return dp_accounting.GaussianDpEvent(float(noise_multiplier))


def compose_events(*events: DpEvent) -> DpEvent:
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
    import dp_accounting

    events = [e for e in events if not isinstance(e, dp_accounting.NoOpDpEvent)]
    if len(events) == 1:
        return events[0]
    return dp_accounting.ComposedDpEvent(list(events))


def _rdp_replace_one(event):
    """Rewrite ``event`` so that RDP under add/remove accounts it under replace-one."""
    import dp_accounting

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


# PLD discretisation (see _pld_epsilon): dp-accounting's default interval up to
# ε ≈ 30, ε/300000 above, and ten times finer while ε < _PLD_RESOLUTION
# intervals, as long as the grid stays below _PLD_MAX_POINTS.
_PLD_INTERVAL = 1e-4
_PLD_COARSE_INTERVAL = 1e-2
_PLD_RESOLUTION = 100
_PLD_MAX_POINTS = 1_000_000
_PLD_MIN_INTERVAL = 1e-12
# Below this δ the PLD accountant is not used: its answer rests on the mass it
# puts at infinite loss (the ~1e-22 it truncates per step, the 1e-15 it drops
# per composition), which float rounding loses -- measured: a finite ε at
# δ = 1e-300 for some σ, inf for the σ next to it.
_PLD_MIN_DELTA = 1e-12

_EPSILON_CACHE = {}  # (repr(event), delta, accountant, neighboring) -> (ε, accountant used)
_EPSILON_CACHE_SIZE = 1024


def _rdp_raw(event, delta, neighboring):
    """dp-accounting's RDP ε, and whether its optimum is the largest order."""
    from dp_accounting.rdp import rdp_privacy_accountant

    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(_rdp_replace_one(event) if neighboring == "replace" else event)
    eps, order = acc.get_epsilon_and_optimal_order(delta)
    return float(eps), bool(order >= max(acc.orders))


def _pld_raw(event, delta, neighboring, interval):
    """dp-accounting's PLD ε at this discretisation, and the size of its grid."""
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(_relation(neighboring),
                                               value_discretization_interval=interval)
    acc.compose(event)
    eps = float(acc.get_epsilon(delta))
    try:  # dp-accounting internals; without them, no refinement
        pld = acc._pld
        size = max(pld._pmf_remove.size, pld._pmf_add.size)
    except AttributeError:  # pragma: no cover - other dp-accounting versions
        size = math.inf
    return eps, size


def _pld_epsilon(event, delta, neighboring):
    """PLD ε (pessimistic) with a discretisation adapted to it; never 0.

    A coarse pass sets the scale: above ε ≈ 30 the interval grows with ε
    (the default 1e-4 takes minutes at ε = 1000). Below ``_PLD_RESOLUTION``
    intervals the interval is divided by ten while the grid stays small: each
    answer is an upper bound of the true ε, the smallest is kept. An answer
    of 0 certifies (0, δ)-DP; the finest interval reached, a positive upper
    bound, is returned instead.
    """
    coarse, _ = _pld_raw(event, delta, neighboring, _PLD_COARSE_INTERVAL)
    if not math.isfinite(coarse):
        return coarse  # δ below what PLD reaches, or a non-private step
    interval = _PLD_INTERVAL * max(1.0, coarse / 30)
    eps, size = _pld_raw(event, delta, neighboring, interval)
    while (eps < _PLD_RESOLUTION * interval and interval > _PLD_MIN_INTERVAL
           and size * 10 <= _PLD_MAX_POINTS):
        interval /= 10
        finer, size = _pld_raw(event, delta, neighboring, interval)
        eps = min(eps, finer)
    return eps if eps > 0 else interval


def _sound(eps):
    return 0 < eps < math.inf


def _account(event, delta, accountant, neighboring):
    """(ε, accountant that answered) under the rules of the module docstring."""
    from dp_accounting.pld import pld_privacy_accountant

    pld_usable = delta >= _PLD_MIN_DELTA
    if accountant == "rdp" or not pld_usable:
        try:
            rdp, capped = _rdp_raw(event, delta, neighboring)
        except ValueError:  # replace-one Poisson sampling, below PLD's δ
            if accountant == "rdp":
                raise
            return math.inf, "pld"
        if _sound(rdp) and not capped:
            return rdp, "rdp"
        if pld_usable and pld_privacy_accountant.PLDAccountant(
                _relation(neighboring)).supports(event):
            pld = _pld_epsilon(event, delta, neighboring)
            if math.isfinite(pld) and not (_sound(rdp) and rdp < pld):
                return pld, "pld"
        if _sound(rdp) or rdp == math.inf:
            return rdp, "rdp"
        raise ValueError(
            f"The RDP accountant returns epsilon = {rdp!r} at delta = {delta!r} for "
            f"{type(event).__name__}, and the PLD accountant cannot answer instead (it "
            "does not handle this event, or delta is below 1e-12): the noise is so large "
            "that RDP's total-variation shortcut applies. Lower the noise (a smaller "
            "noise_multiplier or more trials), or raise delta."
        )
    pld = _pld_epsilon(event, delta, neighboring)
    if math.isfinite(pld):
        return pld, "pld"
    try:  # δ below PLD's truncated mass: RDP may still certify it
        rdp, _ = _rdp_raw(event, delta, neighboring)
    except ValueError:  # replace-one Poisson sampling: PLD only
        return pld, "pld"
    return (rdp, "rdp") if _sound(rdp) else (pld, "pld")


def _epsilon_cached(event, delta, accountant, neighboring):
    # DpEvents holding lists are unhashable; their attrs repr is a faithful key.
    key = (repr(event), delta, accountant, neighboring)
    if key not in _EPSILON_CACHE:
        with _quiet_absl():
            answer = _account(event, delta, accountant, neighboring)
        if len(_EPSILON_CACHE) >= _EPSILON_CACHE_SIZE:
            _EPSILON_CACHE.clear()
        _EPSILON_CACHE[key] = answer
    return _EPSILON_CACHE[key]


def epsilon_and_accountant(
    event: DpEvent, delta: float, *, accountant: Accountant = "rdp",
    neighboring: Neighboring = "add_remove",
) -> tuple[float, Accountant]:
    """ε at ``delta`` of a DpEvent, and the accountant that gave it.

    ``accountant`` is asked first. Its answer is a failure, and the other
    accountant answers, when it is not a positive finite number or (RDP)
    when it is set by RDP's largest order (a floor of about
    ``log(1/δ)/1023``, not a property of the mechanism):

    * RDP returns 0 once its total-variation shortcut applies (huge noise),
      which would report ε = 0; PLD answers instead.
    * PLD returns ``inf`` for δ below the probability mass it truncates
      (about 1e-15), and is unreliable there (float rounding loses that
      mass): below δ = 1e-12 RDP answers instead.

    PLD's discretisation is adapted to the ε it resolves (finer for small ε,
    coarser for very large ε; always pessimistic, so the answer is an upper
    bound of the true ε). Where PLD certifies ε = 0, the finest
    discretisation interval reached, a positive upper bound, is returned: no
    answer is 0. ``inf`` means that no accountant certifies this δ (or a
    step is not private).

    Parameters
    ----------
    event : dp_accounting.DpEvent
        What was run, e.g. a fitted estimator's ``dp_event_``.
    delta : float
        Target δ in [0, 1).
    accountant : {"rdp", "pld"}, default="rdp"
        The accountant asked first.
    neighboring : {"add_remove", "replace"}, default="add_remove"
        The neighbouring relation of the guarantee.

    Returns
    -------
    epsilon : float
        > 0, possibly ``inf``.
    accountant : {"rdp", "pld"}
        The accountant whose answer ``epsilon`` is.

    Raises
    ------
    ValueError
        When RDP returns 0 for an event that PLD cannot account
        (``RepeatAndSelectDpEvent``), or the event is not supported.
    """
    _check_delta(delta)
    _check_choice("accountant", accountant, ACCOUNTANTS)
    _check_choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    return _epsilon_cached(event, float(delta), accountant, neighboring)


def epsilon_of_event(
    event: DpEvent, delta: float, *, accountant: Accountant = "rdp",
    neighboring: Neighboring = "add_remove",
) -> float:
    """ε at ``delta`` of a DpEvent, by dp-accounting's RDP or PLD accountant.

    Where the requested accountant fails (an answer of 0, ``inf`` below what
    it reaches, or RDP's largest-order floor), the other one answers: see
    :func:`epsilon_and_accountant`, which also says which one did.

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
        > 0; ``inf`` when the event contains a non-private step or no
        accountant certifies ``delta``.
    """
    return epsilon_and_accountant(event, delta, accountant=accountant,
                                  neighboring=neighboring)[0]


def compute_epsilon(
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    *,
    accountant: Accountant = "rdp",
    neighboring: Neighboring = "add_remove",
) -> float:
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
    epsilon: float,
    delta: float,
    sampling_rate: float,
    steps: int,
    *,
    accountant: Accountant = "rdp",
    neighboring: Neighboring = "add_remove",
    other_events: Iterable[DpEvent] = (),
    tol: float = 1e-4,
) -> float:
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
        When ``other_events`` alone already spend ``epsilon``, or when no
        noise multiplier up to 1e6 meets ``epsilon`` at ``delta`` (the message
        gives the smallest ε that can be certified, or says that ``delta`` is
        below what the accountants reach).
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
        run = (f"{steps} step(s) at sampling rate {sampling_rate:g}"
               + (" composed with other mechanisms" if other_events else ""))
        with _quiet_absl():
            sigma = _calibrate(eps, epsilon, delta, sampling_rate, steps, accountant,
                               neighboring, other_events, tol, run)
        if len(_SIGMA_CACHE) >= _EPSILON_CACHE_SIZE:
            _SIGMA_CACHE.clear()
        _SIGMA_CACHE[key] = sigma
    return _SIGMA_CACHE[key]


_SIGMA_CACHE = {}


def _unreachable(epsilon, delta, floor, accountant, run):
    """The error of a target that no noise multiplier up to the ceiling meets."""
    from .exceptions import BudgetExceededError

    if math.isfinite(floor):
        fix = (f"the smallest ε certified there is {floor:.3g} ({accountant} accountant). "
               f"Raise epsilon to at least {floor:.3g}, raise delta, or take fewer steps "
               "(epochs)")
    else:
        fix = ("neither accountant certifies so small a delta (PLD truncates about "
               "1e-15 of the probability mass; RDP's largest order is 1024). Raise delta "
               "(1e-5 or 1 / n_samples**1.1 are usual), or raise epsilon")
    return BudgetExceededError(
        f"epsilon={epsilon!r} at delta={delta!r} cannot be met by {run}: it needs a "
        f"noise multiplier above {_SIGMA_CEILING:g} (a model trained with that much noise "
        f"is pure noise), and {fix}."
    )


def _calibrate(eps, epsilon, delta, sampling_rate, steps, accountant, neighboring,
               other_events, tol, run):
    """Smallest σ in the bracket with ``eps(σ) <= epsilon``, ``eps`` the reported ε.

    ``eps`` is :func:`epsilon_of_event` of the run: the same rule (fallback
    between accountants, PLD discretisation) that reports the fit's ε, so the
    σ returned meets the target under the accountant that will report it.
    ``eps`` is decreasing in σ up to small steps where the rule changes; the
    bracket is checked at both ends and the result at the end.
    """
    from scipy import optimize

    # Explicit bracket [lo, hi] with eps(lo) > epsilon >= eps(hi).
    if accountant == "pld" and neighboring == "add_remove":
        # PLD is tighter than RDP, so the (fast) RDP σ is an upper end; PLD's
        # σ is rarely more than 20 % below it. Saves most PLD evaluations.
        hi = calibrate_noise_multiplier(epsilon, delta, sampling_rate, steps,
                                        accountant="rdp", other_events=other_events, tol=tol)
        while eps(hi) > epsilon:  # rare: PLD above RDP (discretisation, tiny δ)
            hi *= 1.25
            if hi > _SIGMA_CEILING:
                raise _unreachable(epsilon, delta, eps(_SIGMA_CEILING), accountant, run)
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
                    raise _unreachable(epsilon, delta, eps(_SIGMA_CEILING), accountant, run)
        else:
            while eps(lo) <= epsilon:
                hi, lo = lo, lo / 2
                if lo < _SIGMA_FLOOR:
                    return hi

    # As dp-accounting's calibrate_dp_mechanism (brentq on ε - target, then a
    # step of tol to the safe side), but on the reported ε.
    xtol = tol * lo
    root, result = optimize.brentq(lambda s: eps(s) - epsilon, lo, hi, xtol=xtol,
                                   full_output=True)
    if result.converged and eps(root) > epsilon and eps(root + xtol) <= epsilon:
        root += xtol
    if not result.converged or eps(root) > epsilon:
        # Bisection keeping eps(hi) <= epsilon (a step of the rule confused brentq).
        while hi - lo > xtol:
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if eps(mid) <= epsilon else (mid, hi)
        root = hi
    return float(root)


def gaussian_noise_multiplier(
    epsilon: float, delta: float, *, neighboring: Neighboring = "add_remove"
) -> float:
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
    import dp_accounting

    _check_positive("epsilon", epsilon)
    _check_delta(delta)
    _check_choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    sigma = float(dp_accounting.get_sigma_gaussian(float(epsilon), float(delta)))
    if neighboring == "replace":
        sigma *= 2
    # The root is found to a tolerance: step to the safe side of the target.
    step = 1e-12
    while gaussian_epsilon(sigma, delta, neighboring=neighboring) > epsilon:
        sigma *= 1 + step
        step *= 2
    return sigma


def gaussian_epsilon(
    noise_multiplier: float, delta: float, *, neighboring: Neighboring = "add_remove"
) -> float:
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
        > 0 for ``delta`` > 0: where the noise is so large that the release is
        (0, δ)-DP, a small positive upper bound (see :func:`epsilon_of_event`).
    """
    import dp_accounting

    _check_positive("noise_multiplier", noise_multiplier)
    _check_delta(delta)
    _check_choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    sigma = noise_multiplier / 2 if neighboring == "replace" else noise_multiplier
    eps = float(dp_accounting.get_epsilon_gaussian(float(sigma), float(delta)))
    if 0 < eps < 1e-2:  # the default absolute tolerance (1e-12) is coarse here
        eps = float(dp_accounting.get_epsilon_gaussian(float(sigma), float(delta),
                                                       tol=eps * 1e-12))
    if eps == 0 and delta > 0:
        # Total variation below δ: (0, δ)-DP. Report a positive upper bound,
        # as epsilon_of_event does (no reported ε is 0).
        eps = epsilon_of_event(gaussian_event(noise_multiplier), delta, accountant="pld",
                               neighboring=neighboring)
    return eps


def gdp_epsilon(mu: ArrayLike, delta: float) -> np.ndarray:
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
"""The distributions of the number of trials of the private search."""


def repeat_and_select_event(event: DpEvent, mean: float, shape: float) -> DpEvent:
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
    import dp_accounting

    _check_positive("mean", mean)
    if mean < 1:
        raise ValueError(f"`mean` must be >= 1, got {mean!r}.")
    _check_positive("shape", shape, allow_zero=True)
    return dp_accounting.dp_event.RepeatAndSelectDpEvent(event, float(mean), float(shape))


def truncated_negative_binomial_gamma(shape: float, mean: float) -> float:
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
    from dp_accounting.rdp import rdp_privacy_accountant

    return float(rdp_privacy_accountant._gamma_truncated_negative_binomial(
        float(shape), float(mean)))


def calibrate_repeat_and_select(
    make_trial_event: Callable[[float], DpEvent], epsilon: float, delta: float, mean: float,
    shape: float, *, lower: float = 0.05, upper: float = 1e4, tol: float = 1e-4,
) -> float:
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
    from dp_accounting import mechanism_calibration
    from dp_accounting.rdp import rdp_privacy_accountant

    from .exceptions import BudgetExceededError

    _check_positive("epsilon", epsilon)
    _check_delta(delta)

    def make_event(sigma):
        return repeat_and_select_event(make_trial_event(sigma), mean, shape)

    def eps(sigma):
        # None: RDP's answer is 0 (its total-variation shortcut), which is no
        # answer here and PLD cannot account a search -- too much noise.
        try:
            return epsilon_of_event(make_event(sigma), delta, accountant="rdp")
        except ValueError:
            return None

    upper = float(upper)
    while eps(upper) is None and upper > 2 * lower:
        upper /= 2
    top = eps(upper)
    if top is None or top > epsilon:
        raise BudgetExceededError(
            f"Even noise_multiplier={upper:g} per trial spends more than epsilon = "
            f"{epsilon!r} over the search at delta = {delta!r} (mean trials {mean!r}); "
            "increase epsilon, lower the mean number of trials, or make the trial "
            "score noisier."
            + ("" if top is None or top <= 2 * epsilon else
               f" The RDP accountant certifies nothing below epsilon = {top:.3g} for "
               "this search at this delta.")
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
    while (eps(sigma) or 0) > epsilon or eps(sigma) is None:  # pragma: no cover - defensive
        sigma *= 1 + tol
    return float(sigma)

"""Repeat-and-select (Papernot & Steinke 2022): the DpEvent of a private search that runs a
random number of trials and keeps the best, and the calibration of its per-trial σ."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._checks import _check_delta, _check_positive
from ._epsilon import _quiet_absl, epsilon_of_event

if TYPE_CHECKING:  # annotations only
    from dp_accounting import DpEvent


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

    from ..exceptions import BudgetExceededError

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

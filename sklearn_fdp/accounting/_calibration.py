"""The noise calibration of DP-SGD: σ for a budget, and its persistent cache glue.

A closed-form first guess (:func:`_sigma_guess`), a safeguarded secant search
(:func:`_solve`) at one fixed PLD discretisation or on a few RDP orders, checked by the
reporting rule of :mod:`._epsilon`; each σ is kept in process and on disk
(:mod:`._cache`), and a σ read from disk is checked again before use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral
from typing import TYPE_CHECKING

from ._checks import _SIGMA_CEILING, _SIGMA_FLOOR, _check_delta, _check_positive, _unreachable
from ._events import _relation, compose_events, dpsgd_event
from ._epsilon import (
    _EPSILON_CACHE,
    _EPSILON_CACHE_SIZE,
    _PLD_ACCURACY,
    _PLD_COARSE_INTERVAL,
    _PLD_MAX_POINTS,
    _PLD_MIN_DELTA,
    _PLD_MIN_INTERVAL,
    _PLD_RAW_CACHE,
    _PLD_RESOLUTION,
    _RDP_CACHE,
    _pld_raw,
    _pld_scan,
    _pow2_below,
    _quiet_absl,
    _rdp_at_orders,
    epsilon_and_accountant,
    epsilon_of_event,
)
from ._gaussian import _GAUSSIAN_SIGMA_CACHE, gdp_epsilon

if TYPE_CHECKING:  # annotations only
    from dp_accounting import DpEvent

    from ._checks import Accountant, Neighboring


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
    from ..exceptions import BudgetExceededError

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
        from . import _cache

        disk_key = _cache.key(
            ["calibrate_noise_multiplier", _CALIBRATION_RULE, _dp_accounting_version(),
             *key])
        with _quiet_absl():
            sigma = _cache.get(disk_key)
            # The file is not trusted: a stored σ is used only if it reproduces
            # the target from above (never more than epsilon: privacy) and from
            # below (within the calibration's tolerance: a larger σ would cost
            # accuracy silently); else it is recalibrated and the entry replaced.
            if sigma is not None and not (
                    _SIGMA_FLOOR <= sigma <= _SIGMA_CEILING
                    and _reproduces(eps(sigma), epsilon, tol, sigma)):
                sigma = None
            if sigma is None:
                run = (f"{steps} step(s) at sampling rate {sampling_rate:g}"
                       + (" composed with other mechanisms" if other_events else ""))
                sigma = _calibrate(eps, make_event, epsilon, delta, sampling_rate, steps,
                                   accountant, neighboring, other_events, tol, run)
                _cache.put(disk_key, sigma)
        if len(_SIGMA_CACHE) >= _EPSILON_CACHE_SIZE:
            _SIGMA_CACHE.clear()
        _SIGMA_CACHE[key] = sigma
    return _SIGMA_CACHE[key]


_SIGMA_CACHE = {}


def _reproduces(reported, epsilon, tol, sigma):
    """Whether a cached σ, whose reported ε is ``reported``, is the calibration of ``epsilon``.

    From above: ``reported <= epsilon``. From below: ``reported >= epsilon
    (1 - w)``, ``w = max(_PLD_ACCURACY, 10 tol)``: the calibration returns
    the smallest σ within ``tol`` (measured gap ``1 - reported / epsilon``
    at most 1.3e-4 over 14 settings, ε 0.1-50, PLD and RDP, tol 1e-4), so a
    σ whose ε falls further below was not calibrated for this target (a σ
    twice too large gives ε about half of it). A σ at the floor passes (no
    smaller σ exists to meet ε more tightly).
    """
    if not reported <= epsilon:
        return False
    return sigma <= _SIGMA_FLOOR * (1 + tol) or reported >= epsilon * (
        1 - max(_PLD_ACCURACY, 10 * tol))

# Version tag of the calibration and reporting rule, part of every persistent
# cache key: change it whenever _calibrate, _pld_scan or _account would give
# another σ for the same inputs.
_CALIBRATION_RULE = "issue18-3"
_DP_ACCOUNTING_VERSION = []


def _dp_accounting_version():
    if not _DP_ACCOUNTING_VERSION:
        from importlib import metadata

        try:
            version = metadata.version("dp-accounting")
        except metadata.PackageNotFoundError:  # pragma: no cover - vendored copies
            version = "unknown"
        _DP_ACCOUNTING_VERSION.append(version)
    return _DP_ACCOUNTING_VERSION[0]


def calibration_cache_path():
    """The file of the persistent calibration cache, or ``None`` if disabled.

    Calibrated noise multipliers are stored in
    ``$SKLEARN_FDP_CACHE_DIR/calibrations.json``, else
    ``$XDG_CACHE_HOME/sklearn_fdp/calibrations.json``, else
    ``~/.cache/sklearn_fdp/calibrations.json``; ``SKLEARN_FDP_CACHE_DIR=""``
    disables the cache. Entries are keyed by every input of
    :func:`calibrate_noise_multiplier`, the dp-accounting version and the
    version of the calibration rule; a stored σ is used only after the ε it
    spends has been checked against the target.

    Returns
    -------
    path : pathlib.Path or None
        Where the cache is (it may not exist yet); ``None`` when disabled.
    """
    from . import _cache

    return _cache.cache_path()


def clear_calibration_cache(*, disk: bool = True) -> None:
    """Forget every calibrated noise multiplier and computed ε.

    Clears the in-process caches of :func:`calibrate_noise_multiplier` and
    :func:`epsilon_of_event`, and (``disk=True``) deletes the persistent
    calibration cache file (see :func:`calibration_cache_path`). Never
    raises for a file it cannot remove.

    Parameters
    ----------
    disk : bool, default=True
        Also delete the persistent cache file.
    """
    from . import _cache

    _SIGMA_CACHE.clear()
    _GAUSSIAN_SIGMA_CACHE.clear()
    _EPSILON_CACHE.clear()
    _PLD_RAW_CACHE.clear()
    _RDP_CACHE.clear()
    if disk:
        _cache.clear()


# The steepest d log ε / d log σ the first step assumes. At small σ the CLT
# model's μ grows like exp(1 / (2σ²)) and its slope without bound (-5 at
# ε = 8 over 22 steps), while the PLD's ε grows like a Gaussian's 1 / (2σ²)
# less the subsampling's log(1/q): measured on the 135 settings of
# benchmarks/bench_calibration.py, the PLD's local slope at the guess lies in
# [-2.49, -0.2]. A slope steeper than the truth makes the first step fall
# short and costs a PLD pass; the value only changes the path, never the check.
_STEEPEST_SLOPE = -2.5


def _sigma_guess(epsilon, delta, sampling_rate, steps, neighboring):
    """``(σ, slope)``: a closed-form first guess of σ, and of d log ε / d log σ there.

    The CLT (μ-GDP) limit of DP-SGD: T Poisson-subsampled Gaussian steps are
    about μ-GDP with ``μ = q sqrt(T (exp(1/σ²) - 1))`` (Bu et al. 2020; at
    ``q = 1`` exactly μ = sqrt(T)/σ); the μ that meets (ε, δ) is that of one
    Gaussian release. Only a starting point of the search: its error (up to
    about 2x at few steps) costs iterations, not privacy.
    """
    import dp_accounting

    def mu_of(sigma):
        if sampling_rate >= 1:
            return math.sqrt(steps) / sigma
        return sampling_rate * math.sqrt(steps * math.expm1(min(1 / sigma ** 2, 700.0)))

    try:
        # At huge ε (~1e200) the solver's bracket overflows: NumPy's "invalid value"
        # warnings (the CLI printed them) and a ValueError, caught below.
        import numpy as np

        with np.errstate(all="ignore"):
            mu = 1.0 / float(dp_accounting.get_sigma_gaussian(float(epsilon), float(delta)))
    except (ArithmeticError, ValueError):  # δ = 0, or out of its range
        return 1.0, -1.0
    if not (mu > 0 and math.isfinite(mu)):
        return 1.0, -1.0
    if sampling_rate >= 1:
        sigma = math.sqrt(steps) / mu
    else:
        ratio = mu ** 2 / (sampling_rate ** 2 * steps)
        sigma = 1.0 / math.sqrt(math.log1p(ratio)) if ratio > 0 else _SIGMA_CEILING
    sigma = min(max(sigma, _SIGMA_FLOOR), _SIGMA_CEILING)
    slope = -1.0
    try:  # the CLT model's own slope, from a 1 % step (μ-GDP's ε by gdp_epsilon)
        e0, e1 = gdp_epsilon([mu_of(sigma), mu_of(sigma * 1.01)], delta)
        if 0 < e1 < e0 < math.inf:
            slope = max(min(math.log(e1 / e0) / math.log(1.01), -0.5), _STEEPEST_SLOPE)
    except (ArithmeticError, ValueError):
        pass
    if neighboring == "replace":
        sigma = min(2 * sigma, _SIGMA_CEILING)
    return sigma, slope


def _solve(eps, epsilon, start, tol, slope=-1.0):
    """σ with ``eps(σ) <= epsilon``, within ``tol`` (relative) of the smallest one.

    A safeguarded secant search on ``log ε`` against ``log σ`` (ε is close to
    a power of σ locally, so it converges in a few evaluations from a fair
    guess), inside the bracket found so far, bisecting (in log σ) where the
    secant leaves the bracket or stalls; ``eps`` may step (a change of
    accountant or discretisation), and only evaluated values decide.
    Returns ``None`` when not even ``_SIGMA_CEILING`` meets ``epsilon``, and
    ``_SIGMA_FLOOR`` when that already does.
    """
    lo = hi = None  # eps(lo) > epsilon >= eps(hi)
    points = []  # (log σ, log ε) of finite positive answers, in order
    sigma = min(max(start, _SIGMA_FLOOR), _SIGMA_CEILING)
    log_target = math.log(epsilon)
    bracketed_steps = 0
    for _ in range(200):
        try:
            value = eps(sigma)
        except ValueError:  # no accountant answers here: not certified
            value = math.inf
        if value <= epsilon:
            hi = sigma if hi is None else min(hi, sigma)
        else:
            lo = sigma if lo is None else max(lo, sigma)
        if 0 < value < math.inf:
            points.append((math.log(sigma), math.log(value)))
        if hi is not None and hi <= _SIGMA_FLOOR:
            return _SIGMA_FLOOR
        if lo is not None and lo >= _SIGMA_CEILING:
            return None
        if hi is not None and lo is not None:
            if hi <= lo * (1 + tol):
                return hi
            bracketed_steps += 1
        guess = None
        if len(points) >= 2 and points[-1][0] != points[-2][0]:
            (x0, y0), (x1, y1) = points[-2], points[-1]
            slope = (y1 - y0) / (x1 - x0)
            if slope < 0:
                root = x1 + (log_target - y1) / slope
                if (hi is not None and abs(x1 - x0) < 0.1
                        and math.log(hi) <= root + math.log1p(tol)):
                    return hi  # the secant through two close points puts the root within tol
                # Aim a third of tol above the root, so the next σ lands on the safe side.
                guess = root + math.log1p(tol / 3)
        elif 0 < value < math.inf:
            # One answer: step along the guessed slope (-1: the Gaussian's ε ∝ 1/σ).
            guess = math.log(sigma) + (log_target - math.log(value)) / slope
        if guess is None or not math.isfinite(guess):
            guess = math.log(sigma) + (math.log(4) if value > epsilon else -math.log(4))
        # At most a factor 16 per step, inside [floor, ceiling].
        guess = math.exp(min(max(guess, math.log(sigma) - math.log(16)),
                             math.log(sigma) + math.log(16)))
        guess = min(max(guess, _SIGMA_FLOOR), _SIGMA_CEILING)
        if lo is not None and hi is not None:
            if not lo < guess < hi or bracketed_steps > 6:
                guess = math.sqrt(lo * hi)
        elif lo is not None and guess <= lo:
            guess = min(lo * 2, _SIGMA_CEILING)
        elif hi is not None and guess >= hi:
            guess = max(hi / 2, _SIGMA_FLOOR)
        sigma = guess
    return hi


def _rule_prediction(event, delta, neighboring):
    """``(ε, interval, need)``: the reporting rule's answer predicted from its first two passes.

    :func:`_pld_scan` starts with a pass at ``_PLD_COARSE_INTERVAL`` and one
    at a finer interval ``h``, and from the change between them decides
    whether to stop (its answer is then the finer pass's ε, returned as is)
    or to run a pass at ``h / 2^j``. For the latter this predicts that pass's
    ε by the same model the rule uses (excess ∝ interval²):
    ``ε(h) − excess(h) (1 − 4^-j)``. Two passes cost about as much as the
    finest one alone, so a search on this is cheap. ``need``: the excess
    the change predicts for the finer pass, over the rule's threshold for a
    third pass (a third pass when above 1). ``None`` where the rule does
    anything else (no finite answer, a coarse pass that does not resolve ε,
    a grid that would grow too large): no prediction.
    """
    interval = _PLD_COARSE_INTERVAL
    best, size = _pld_raw(event, delta, neighboring, interval)
    if not (0 < best < math.inf):
        return None
    finer = min(interval / 2, _pow2_below(best / _PLD_RESOLUTION))
    if not (finer >= _PLD_MIN_INTERVAL and size * (interval / finer) <= _PLD_MAX_POINTS):
        return None
    eps, size = _pld_raw(event, delta, neighboring, finer)
    ratio = interval / finer
    if not 0 < eps <= best or interval > eps / 32:
        return None
    excess = (best - eps) / (ratio ** 2 - 1)
    need = excess / (_PLD_ACCURACY * eps)
    if need <= 1:
        return eps, finer, need
    factor = math.sqrt(excess / (_PLD_ACCURACY / 2 * eps))
    shrink = 2.0 ** max(1, math.ceil(math.log2(factor)))
    if not (finer / shrink >= _PLD_MIN_INTERVAL and size * shrink <= _PLD_MAX_POINTS):
        return None
    return eps - excess * (1 - 1 / shrink ** 2), finer / shrink, need


# The prediction is used only where the rule at the first guess runs a third
# pass (the excess at its second pass above the threshold for a third, by
# this factor). Elsewhere a search at the rule's second interval costs one
# pass per σ, the prediction two; and where the rule changes course between
# the guess and the target (a third pass at one, not at the other) the
# prediction jumps. Measured on 12 settings of the benchmarks (one process,
# load ~5): from 0.5 of the threshold, 3 settings 20-25 % faster and 6 up to
# 2x slower; from 1, the 200,000-row one 29 % faster, the others unchanged.
_PREDICTION_MIN_NEED = 1.0


def _calibrate_pld_predicted(eps, make_event, epsilon, delta, neighboring, start, slope, tol):
    """σ from two values of :func:`_rule_prediction`, checked by the reporting rule; or ``None``.

    The prediction costs two coarse passes per σ; the rule a third, finer
    one. The prediction at the first guess and at a step from it (along the
    guessed slope; again, up to three steps, until two consecutive
    predictions come from the same finest interval) give a secant; the rule
    is evaluated where that secant meets ``epsilon``. That σ
    is returned when the reported ε is at most ``epsilon`` and, by the
    secant's slope, within ``tol`` of the smallest σ that meets it
    (measured, the prediction overestimates the rule by up to ~1e-4
    relative, which keeps both); otherwise ``None`` and the caller searches
    on the rule's own passes. Measured (200,000 rows, q = 0.0179, T = 559,
    ε = 1): three PLD passes at the finest interval fewer.
    """
    first = _rule_prediction(make_event(start), delta, neighboring)
    if first is None or first[2] <= _PREDICTION_MIN_NEED:
        return None
    target = math.log(epsilon)
    points = [(math.log(start), math.log(first[0]), first[1])]  # (log σ, log ε, interval)
    local = slope
    for _ in range(3):
        x0, y0, h0 = points[-1]
        x1 = x0 + (target - y0) / local
        x1 = min(max(x1, x0 - math.log(4)), x0 + math.log(4))
        guess = _rule_prediction(make_event(math.exp(x1)), delta, neighboring)
        if guess is None or x1 == x0:
            return None
        y1, h1 = math.log(guess[0]), guess[1]
        points.append((x1, y1, h1))
        if (y1 - y0) * (x1 - x0) < 0:
            local = (y1 - y0) / (x1 - x0)  # d log ε / d log σ of the prediction
        if h1 == h0:  # the same finest interval: the secant is smooth
            break
    else:
        return None
    x1, y1, _ = points[-1]
    sigma = math.exp(x1 + (target - y1) / local)
    if not _SIGMA_FLOOR < sigma < _SIGMA_CEILING:
        return None
    reported = eps(sigma)  # the reporting rule: the check every returned σ passes
    if not 0 < reported <= epsilon:
        return None
    # σ* (the smallest σ meeting ε) ≈ σ (reported / ε)^(1 / |local|).
    if 1.1 * math.log(epsilon / reported) / abs(local) > math.log1p(tol):
        return None
    return sigma


def _calibrate(eps, make_event, epsilon, delta, sampling_rate, steps, accountant,
               neighboring, other_events, tol, run):
    """Smallest σ (within ``tol``) with ``eps(σ) <= epsilon``, ``eps`` the reported ε.

    ``eps`` is :func:`epsilon_of_event` of the run: the same rule (fallback
    between accountants, PLD discretisation) that reports the fit's ε, so the
    σ returned meets the target under the accountant that will report it;
    every σ returned has passed that check.

    The search starts from the CLT guess (:func:`_sigma_guess`). Under PLD,
    where the reporting rule runs (or nearly runs) a third, finest pass, a
    secant on the rule's prediction from its two coarse passes comes first
    (:func:`_calibrate_pld_predicted`); its σ is returned only once the rule
    accepts it. Otherwise the search runs at one fixed discretisation, the one the reporting rule chooses
    at the guess, where ε(σ) is smooth and each evaluation is one PLD pass;
    the reporting rule then checks the result (its passes are shared).
    Where the rule settles on another interval there, the search is repeated
    at that interval. RDP searches on a few orders (:func:`_calibrate_rdp`).
    Failing those, the search runs on the reporting rule itself.
    """
    from dp_accounting.pld import pld_privacy_accountant

    start, slope = _sigma_guess(epsilon, delta, sampling_rate, steps, neighboring)
    if (accountant == "pld" and delta >= _PLD_MIN_DELTA
            and pld_privacy_accountant.PLDAccountant(_relation(neighboring)).supports(
                make_event(start))):
        sigma = _calibrate_pld_predicted(eps, make_event, epsilon, delta, neighboring, start,
                                         slope, tol)
        if sigma is not None:
            return sigma
        # Search at the interval the reporting rule settles on at the guess.
        value, interval = _pld_scan(make_event(start), delta, neighboring)
        fallback = None
        sizes = {}  # σ -> grid size at the search's interval
        for _ in range(3 if math.isfinite(value) else 0):

            def at_interval(sigma, interval=interval):
                # Grids grow like 1/σ²: a σ whose grid would pass _PLD_MAX_POINTS
                # counts as over budget (inf, never less private). Without this a
                # run that is (0, δ)-DP at every σ (e.g. q = δ = 1e-5, one step)
                # walks down to σ = 1e-3 on grids of 1e8 points.
                larger = [s for s in sizes if s > sigma]
                if larger and sizes[min(larger)] * (min(larger) / sigma) ** 2 > _PLD_MAX_POINTS:
                    return math.inf
                value, size = _pld_raw(make_event(sigma), delta, neighboring, interval)
                sizes[sigma] = size
                return value

            sigma = _solve(at_interval, epsilon, start, tol, slope)
            if sigma is None:
                break
            reported = eps(sigma)
            if reported <= epsilon and (fallback is None or sigma < fallback):
                fallback = sigma
            value, finest = _pld_scan(make_event(sigma), delta, neighboring)  # shared passes
            if (finest == interval or not math.isfinite(value)
                    or epsilon * (1 - _PLD_ACCURACY / 2) <= reported <= epsilon):
                break  # (within half the rule's own accuracy of the target: tight enough)
            # The rule settled on another interval at σ: search there, for the
            # check and so that σ is the smallest the reported ε allows.
            start, interval = sigma, finest
            sizes = {}
        if fallback is not None:
            return fallback
    if accountant == "rdp":
        sigma = _calibrate_rdp(eps, make_event, epsilon, delta, neighboring, start, slope,
                               tol)
        if sigma is not None:
            return sigma
    sigma = _solve(eps, epsilon, start, tol, slope)
    if sigma is None:
        try:
            floor = eps(_SIGMA_CEILING)
        except ValueError:
            floor = math.inf
        raise _unreachable(epsilon, delta, floor, accountant, run)
    return sigma


def _calibrate_rdp(eps, make_event, epsilon, delta, neighboring, start, slope, tol):
    """The RDP search on a few of dp-accounting's orders, or ``None``.

    Each RDP evaluation over dp-accounting's 156 orders costs 15-50 ms at the
    σ of DP-SGD. ε over a subset of them is an upper bound of it, equal while
    the optimal order is in the subset, at a fraction of the cost. The search
    runs on every eighth order; the optimal order at its result is found
    among the orders near the best of those, and the search runs again on
    the orders next to it (and the sparse ones). The reporting rule (all
    orders) checks the result and names the optimal order there; where that
    is not among the searched ones, the search runs again around it. ``None`` where RDP is not what the rule reports
    (its fallbacks) or no σ passed the check.
    """
    from dp_accounting.rdp import rdp_privacy_accountant

    orders = [float(a) for a in rdp_privacy_accountant.RdpAccountant().orders]
    sparse = orders[::8]
    subset = sparse
    fallback = None
    for attempt in range(4):

        def bound(sigma, subset=tuple(subset)):
            try:
                return _rdp_at_orders(make_event(sigma), delta, neighboring, subset)[0]
            except ValueError:
                return math.inf

        sigma = _solve(bound, epsilon, start, tol, slope)
        if sigma is None:
            break
        if attempt == 0:
            # Where the optimal order is at this σ, cheaply: among the orders
            # within a factor 1.5 of the best sparse one (not all 156).
            _, near, _ = _rdp_at_orders(make_event(sigma), delta, neighboring, tuple(subset))
            window = tuple(a for a in orders if near / 1.5 <= a <= near * 1.5)
            _, order, _ = _rdp_at_orders(make_event(sigma), delta, neighboring, window)
            at = orders.index(order)
            subset = sorted(set(sparse) | set(orders[max(0, at - 3):at + 4]))
            start = sigma
            continue
        reported, used = epsilon_and_accountant(make_event(sigma), delta, accountant="rdp",
                                                neighboring=neighboring)
        if used != "rdp":
            break
        if reported <= epsilon and (fallback is None or sigma < fallback):
            fallback = sigma
        _, order, _ = _rdp_at_orders(make_event(sigma), delta, neighboring)  # memoised
        if order in subset or epsilon * (1 - 2 * tol) <= reported <= epsilon:
            break
        at = orders.index(order)
        subset = sorted(set(sparse) | set(orders[max(0, at - 3):at + 4]))
        start = sigma
    return fallback

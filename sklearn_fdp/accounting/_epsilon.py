"""ε of a DpEvent: the PLD / RDP dispatch, its fallback rules and its in-process caches.

The rules are those of the package docstring (:mod:`sklearn_fdp.accounting`): the
accountant asked answers unless its answer is a failure (0, ``inf`` below what it
reaches, RDP's largest-order floor), then the other one does; PLD's discretisation is
adapted to the ε it resolves (:func:`_pld_scan`); one PLD pass is :mod:`._pld`.
"""

from __future__ import annotations

import contextlib
import logging
import math
from typing import TYPE_CHECKING

from ._checks import ACCOUNTANTS, NEIGHBORING_RELATIONS, _check_choice, _check_delta
from . import _pld
from ._events import _rdp_replace_one, _relation, dpsgd_event

if TYPE_CHECKING:  # annotations only
    from dp_accounting import DpEvent

    from ._checks import Accountant, Neighboring


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


# PLD discretisation (see _pld_scan): a coarse pass at _PLD_COARSE_INTERVAL,
# one at ε/_PLD_RESOLUTION (a power of two), then, where the two disagree, one
# at the interval the change between them predicts resolves ε to
# _PLD_ACCURACY (relative), as long as the grid stays below _PLD_MAX_POINTS.
# Every answer is dp-accounting's pessimistic (connect-the-dots) PLD ε, an
# upper bound of the true ε; the smallest is kept.
_PLD_COARSE_INTERVAL = 1e-2
_PLD_RESOLUTION = 512
_PLD_ACCURACY = 1e-3
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
    eps, order, orders = _rdp_at_orders(event, delta, neighboring)
    return eps, bool(order >= max(orders))


def _rdp_at_orders(event, delta, neighboring, orders=None):
    """``(ε, optimal order, orders)`` of dp-accounting's RDP accountant over
    ``orders`` (its default orders for ``None``). ε over a subset of the
    orders is an upper bound of ε over all of them."""
    key = (repr(event), delta, neighboring, None if orders is None else tuple(orders))
    if key not in _RDP_CACHE:
        from dp_accounting.rdp import rdp_privacy_accountant

        acc = rdp_privacy_accountant.RdpAccountant(orders)
        acc.compose(_rdp_replace_one(event) if neighboring == "replace" else event)
        eps, order = acc.get_epsilon_and_optimal_order(delta)
        if len(_RDP_CACHE) >= _EPSILON_CACHE_SIZE:
            _RDP_CACHE.clear()
        _RDP_CACHE[key] = (float(eps), float(order), [float(a) for a in acc.orders])
    eps, order, orders = _RDP_CACHE[key]
    return eps, order, list(orders)


_RDP_CACHE = {}


def _pld_raw(event, delta, neighboring, interval):
    """dp-accounting's PLD ε at this discretisation, and the size of its grid.

    One pass of :mod:`._pld` (the PLD dp-accounting's accountant builds, bit
    for bit). Memoised on (event, δ, relation, interval): the calibration's
    search and its final check (the reporting rule) share passes.
    """
    key = (repr(event), delta, neighboring, interval)
    if key in _PLD_RAW_CACHE:
        return _PLD_RAW_CACHE[key]
    eps, size = _pld.epsilon_and_size(event, _relation(neighboring), interval, delta)
    if len(_PLD_RAW_CACHE) >= _EPSILON_CACHE_SIZE:
        _PLD_RAW_CACHE.clear()
    _PLD_RAW_CACHE[key] = (eps, size)
    return eps, size


_PLD_RAW_CACHE = {}


def _pow2_below(x):
    return 2.0 ** math.floor(math.log2(x))


def _pld_scan(event, delta, neighboring):
    """``(ε, interval)``: the PLD ε of :func:`_pld_epsilon` and the
    discretisation interval that gave it.

    The connect-the-dots excess over the true ε shrinks about as the interval
    squared, so the change between two intervals predicts the excess of the
    finer one: ``(ε(h) - ε(h/k)) / (k² - 1)``. Refinement stops once that is
    below ``_PLD_ACCURACY`` of ε; otherwise the next interval is the one the
    prediction says reaches half of it. It also stops where a finer grid
    answers more than a coarser one: float rounding then dominates (the
    masses of a step's grid are differences of nearly equal CDF values;
    measured at σ ≈ 2000, q = 0.001: worse from an interval of ε/100 down).
    """
    interval = _PLD_COARSE_INTERVAL
    best, size = _pld_raw(event, delta, neighboring, interval)
    if not math.isfinite(best):
        return best, interval  # δ below what PLD reaches, or a non-private step
    previous, best_interval = best, interval
    finer = interval / 2
    if best > 0:
        finer = min(finer, _pow2_below(best / _PLD_RESOLUTION))
    while finer >= _PLD_MIN_INTERVAL and size * (interval / finer) <= _PLD_MAX_POINTS:
        eps, size = _pld_raw(event, delta, neighboring, finer)
        ratio, interval = interval / finer, finer
        if eps < best or best <= 0:
            best, best_interval = eps, interval
        if best <= 0:  # (0, δ)-DP at this grid: resolve a smaller bound
            finer = interval / 16
            continue
        if eps > previous:  # finer and worse: rounding, not discretisation
            break
        excess = (previous - eps) / (ratio ** 2 - 1)
        previous = eps
        if interval * ratio > best / 32:
            # The coarser pass did not resolve ε (interval above ε/32): the
            # change predicts nothing; halve, and predict from that pair.
            finer = interval / 2
            continue
        if excess <= _PLD_ACCURACY * best:
            break
        factor = math.sqrt(excess / (_PLD_ACCURACY / 2 * best))
        finer = interval / 2.0 ** max(1, math.ceil(math.log2(factor)))
    return (best, best_interval) if best > 0 else (interval, interval)


def _pld_epsilon(event, delta, neighboring):
    """PLD ε (pessimistic) with a discretisation adapted to it; never 0.

    dp-accounting's PLD with connect-the-dots discretisation is an upper
    bound of the true ε at every interval; its excess shrinks about as the
    interval squared. A coarse pass (interval 1e-2) sets the scale, a second
    at about ε/512 (a power of two) measures the excess, and where that is
    above 0.1 % of ε a pass at the interval it predicts follows (powers of
    two; the grid stays below a million points; see :func:`_pld_scan`). The
    smallest answer is kept. An answer of 0 certifies (0, δ)-DP; the finest
    interval reached, a positive upper bound, is returned instead.
    """
    return _pld_scan(event, delta, neighboring)[0]


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

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
  the ε it resolves (``_pld_scan``: about ε/512, refined until ε is
  resolved to 0.1 %; every answer is dp-accounting's pessimistic PLD, an upper
  bound), and below δ = 1e-12, where its truncated mass (about 1e-15) decides
  the answer, RDP answers instead. No reported ε is 0.
* Since scipy 1.15 the ``logsumexp`` behind the PLD composition's Chernoff
  truncation bounds spends most of a small PLD pass in array-API dispatch;
  during a pass dp-accounting sees a lean equivalent (``_LeanSpecial``; the
  bounds are integers, so the PLD is the same bit for bit).

Calibration (issue 18) starts from the CLT estimate of σ, searches by secant
steps at one fixed PLD discretisation (RDP: on a few of its orders), and
checks the result by the reporting rule; results are kept in a persistent
cache (:func:`calibration_cache_path`), checked again before use.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
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
    "calibration_cache_path",
    "clear_calibration_cache",
    "gaussian_noise_multiplier",
    "gaussian_epsilon",
    "gdp_epsilon",
    "gaussian_release",
    "gaussian_sigma_and_epsilon",
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

    Memoised on (event, δ, relation, interval): the calibration's search and
    its final check (the reporting rule) share passes.
    """
    key = (repr(event), delta, neighboring, interval)
    if key in _PLD_RAW_CACHE:
        return _PLD_RAW_CACHE[key]
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(_relation(neighboring),
                                               value_discretization_interval=interval)
    with _lean_chernoff_bounds():
        acc.compose(event)
        eps = float(acc.get_epsilon(delta))
    try:  # dp-accounting internals; without them, no refinement
        pld = acc._pld
        size = max(pld._pmf_remove.size, pld._pmf_add.size)
    except AttributeError:  # pragma: no cover - other dp-accounting versions
        size = math.inf
    if len(_PLD_RAW_CACHE) >= _EPSILON_CACHE_SIZE:
        _PLD_RAW_CACHE.clear()
    _PLD_RAW_CACHE[key] = (eps, size)
    return eps, size


_PLD_RAW_CACHE = {}


# dp-accounting composes a PLD by FFT, truncated where a Chernoff bound puts
# the tail mass below a threshold: `common.compute_self_convolve_bounds`
# evaluates ``scipy.special.logsumexp`` at 40 orders, twice a pass. Since
# scipy 1.15 each call spends ~0.1 ms in array-API dispatch, 4-5 ms of a
# pass (most of a small one's 5 ms, a quarter of a large one's 20 ms). During
# a pass, `common`'s ``special`` is a proxy whose ``logsumexp`` computes the
# same sum without the dispatch (a 1-D ``a`` with weights ``b``; anything else
# is scipy's). The bounds it feeds are integers (a ceil / floor of each
# order's bound), so the PLD and its ε are those of scipy's logsumexp: the
# tests compare them bit for bit on the slowest calibration settings and on
# extremes (and benchmarks/bench_calibration.py's 135 settings kept every σ).
# Another thread calling dp-accounting's PLD code directly during a pass gets
# the same sums through the proxy.
class _LeanSpecial:
    """``scipy.special`` with the weighted 1-D ``logsumexp`` of the Chernoff bounds inlined."""

    def __init__(self, special):
        self._special = special

    def __getattr__(self, name):
        return getattr(self._special, name)

    def logsumexp(self, a, b=None, **kwargs):
        import numpy as np

        if b is None or kwargs:
            return self._special.logsumexp(a, b=b, **kwargs)
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.ndim != 1 or a.shape != b.shape or a.size == 0:
            return self._special.logsumexp(a, b=b)
        top = a.max()
        if not math.isfinite(top):
            return self._special.logsumexp(a, b=b)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(np.sum(b * np.exp(a - top))) + top


_LEAN_LOCK = threading.Lock()
_LEAN_STATE = {"depth": 0, "saved": None}


@contextlib.contextmanager
def _lean_chernoff_bounds():
    """Within this block dp-accounting's PLD composition uses :class:`_LeanSpecial`.

    Re-entrant and thread-safe (a counter under a lock; the last one out
    restores scipy's module). A no-op where ``dp_accounting.pld.common`` has
    no ``special`` attribute (another dp-accounting layout).
    """
    from dp_accounting.pld import common

    with _LEAN_LOCK:
        if _LEAN_STATE["depth"] == 0:
            special = getattr(common, "special", None)
            if special is not None and hasattr(special, "logsumexp"):
                _LEAN_STATE["saved"] = special
                common.special = _LeanSpecial(special)
        _LEAN_STATE["depth"] += 1
    try:
        yield
    finally:
        with _LEAN_LOCK:
            _LEAN_STATE["depth"] -= 1
            if _LEAN_STATE["depth"] == 0 and _LEAN_STATE["saved"] is not None:
                common.special = _LEAN_STATE["saved"]
                _LEAN_STATE["saved"] = None


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
        from . import _calibration_cache

        disk_key = _calibration_cache.key(
            ["calibrate_noise_multiplier", _CALIBRATION_RULE, _dp_accounting_version(),
             *key])
        with _quiet_absl():
            sigma = _calibration_cache.get(disk_key)
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
                _calibration_cache.put(disk_key, sigma)
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
    from . import _calibration_cache

    return _calibration_cache.cache_path()


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
    from . import _calibration_cache

    _SIGMA_CACHE.clear()
    _GAUSSIAN_SIGMA_CACHE.clear()
    _EPSILON_CACHE.clear()
    _PLD_RAW_CACHE.clear()
    _RDP_CACHE.clear()
    if disk:
        _calibration_cache.clear()


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
    # Beyond the ε of the noise floor the solver's bracket overflows (SciPy's
    # "function value is NaN" at ε ~ 1e200) and the σ would be below the floor
    # every calibration keeps (issue 31): name the limit instead.
    largest = gaussian_epsilon(_SIGMA_FLOOR, delta, neighboring=neighboring)
    if float(epsilon) > largest:
        raise ValueError(
            f"`epsilon`={epsilon!r} is above the largest budget a Gaussian release is "
            f"calibrated for at delta={delta!r}: {largest:.6g}, the ε of noise multiplier "
            f"{_SIGMA_FLOOR:g} (the floor of every calibration; less noise certifies "
            f"nothing useful). Use epsilon <= {largest:.6g}, or give noise_multiplier "
            "where the estimator takes one.")
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


# -- one Gaussian release, exactly, without dp-accounting's accountants -------

def _dp_event_module():
    """``dp_accounting.dp_event`` (the DpEvent classes), loaded without the package.

    ``import dp_accounting.dp_event`` runs the package's ``__init__``, which
    loads both accountants and scipy.signal (60-90 ms CPU, most of a cold
    :class:`FeatureDPLinearRegression` fit). The module itself needs only
    ``attrs``: it is loaded from the installed package's file under its own
    name, so the classes are the ones a later ``import dp_accounting`` uses
    (the package's ``from dp_accounting import dp_event`` finds it in
    ``sys.modules``), and events pickle and compare as usual.
    """
    import sys

    name = "dp_accounting.dp_event"
    module = sys.modules.get(name)
    if module is not None:
        return module
    if "dp_accounting" in sys.modules:  # the package is loaded: the usual way
        import dp_accounting.dp_event

        return sys.modules[name]
    import importlib.util
    import os

    package = importlib.util.find_spec("dp_accounting")  # locates; runs nothing
    locations = list(package.submodule_search_locations or []) if package else []
    path = os.path.join(locations[0], "dp_event.py") if locations else ""
    spec = importlib.util.spec_from_file_location(name, path) if os.path.isfile(path) \
        else None
    if spec is None or spec.loader is None:  # pragma: no cover - another layout
        import dp_accounting.dp_event

        return sys.modules[name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:  # pragma: no cover - leave no half-loaded module behind
        del sys.modules[name]
        raise
    return module


def _gaussian_delta(epsilon, mu):
    """δ(ε) of one Gaussian release whose sensitivity is ``mu`` noise stds.

    Balle & Wang (2018), Thm. 8: ``Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)``, the
    second term as ``exp(ε + log Φ(·))`` so that it neither overflows nor
    loses its tail.
    """
    from scipy.special import log_ndtr, ndtr

    return float(ndtr(mu / 2 - epsilon / mu)) - math.exp(
        epsilon + float(log_ndtr(-mu / 2 - epsilon / mu)))


# Relative accuracy of the bisections of gaussian_release; the reported ε is
# the upper end of its bracket (δ(ε) <= δ there), so it is never below the
# exact ε by more than float rounding of δ(ε), which the margin covers.
_EXACT_RTOL = 1e-12
_EXACT_MARGIN = 1e-9


def _exact_gaussian_epsilon(mu, delta):
    """Smallest ε (to ``_EXACT_RTOL``, rounded up) with ``δ(ε) <= delta`` for sensitivity ``mu``."""
    if _gaussian_delta(0.0, mu) <= delta:
        return 0.0
    lo, hi = 0.0, max(1.0, mu * mu)
    while _gaussian_delta(hi, mu) > delta:
        lo, hi = hi, 2 * hi
        if hi > 1e6:
            return math.inf
    while hi - lo > _EXACT_RTOL * hi:
        mid = (lo + hi) / 2
        if _gaussian_delta(mid, mu) <= delta:
            hi = mid
        else:
            lo = mid
    return hi * (1 + _EXACT_MARGIN)


def gaussian_sigma_and_epsilon(
    epsilon: float | None, delta: float, *, noise_multiplier: float | None = None,
    neighboring: Neighboring = "add_remove",
) -> tuple[float, float]:
    """``(σ, ε)`` of ONE Gaussian release by its exact (ε, δ) curve, without its DpEvent.

    What :func:`gaussian_release` computes, without building the DpEvent
    (whose classes cost a process about 13 ms to load): for an estimator
    that builds its ``dp_event_`` only when asked.

    Parameters
    ----------
    epsilon : float or None
        Target ε, > 0; with ``noise_multiplier`` given, the budget it may
        not exceed (None: no budget).
    delta : float
        Target δ in (0, 1).
    noise_multiplier : float or None, default=None
        A fixed σ (> 0): ε is computed, not targeted.
    neighboring : {"add_remove", "replace"}, default="add_remove"
        Neighbouring relation of the guarantee.

    Returns
    -------
    noise_multiplier : float
        σ, as :func:`gaussian_release` returns it.
    epsilon : float
        The exact ε of the release at ``delta``, rounded up (> 0).

    Raises
    ------
    BudgetExceededError
        When ``noise_multiplier`` spends more than ``epsilon``, or no σ up to
        1e6 meets ``epsilon``.
    """
    from .exceptions import BudgetExceededError

    _check_delta(delta)
    if not delta > 0:
        raise ValueError(f"`delta` must be in (0, 1) for one Gaussian release, got {delta!r}.")
    _check_choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    scale = 2.0 if neighboring == "replace" else 1.0  # the sensitivity, in σ's units
    if noise_multiplier is None:
        _check_positive("epsilon", epsilon)
        epsilon = float(epsilon)
        key = (epsilon, float(delta), neighboring)
        sigma = _GAUSSIAN_SIGMA_CACHE.get(key)
        if sigma is None:
            # δ(ε; μ) grows with μ: the largest μ with δ(ε; μ) <= δ, bracketed.
            lo, hi = 0.0, 1.0
            while _gaussian_delta(epsilon, hi) <= delta:
                lo, hi = hi, 2 * hi
                if hi > 1e9:
                    break
            while hi - lo > _EXACT_RTOL * hi:
                mid = (lo + hi) / 2
                if _gaussian_delta(epsilon, mid) <= delta:
                    lo = mid
                else:
                    hi = mid
            sigma = max(scale / lo if lo > 0 else math.inf, _SIGMA_FLOOR)
            if sigma > _SIGMA_CEILING:
                raise _unreachable(epsilon, delta, _exact_gaussian_epsilon(
                    scale / _SIGMA_CEILING, delta), "analytic", "one Gaussian release")
            # Round σ up until the reported ε (itself rounded up) meets the target.
            step = 1e-12
            while _exact_gaussian_epsilon(scale / sigma, delta) > epsilon:
                sigma *= 1 + step
                step *= 2
            if len(_GAUSSIAN_SIGMA_CACHE) >= _EPSILON_CACHE_SIZE:
                _GAUSSIAN_SIGMA_CACHE.clear()
            _GAUSSIAN_SIGMA_CACHE[key] = sigma
    else:
        _check_positive("noise_multiplier", noise_multiplier)
        sigma = float(noise_multiplier)
    spent = _exact_gaussian_epsilon(scale / sigma, delta)
    if spent == 0:
        # (0, δ)-DP: report a small positive upper bound, as epsilon_of_event does.
        spent = math.ulp(1.0)
    if epsilon is not None and spent > epsilon:
        raise BudgetExceededError(
            f"noise_multiplier={noise_multiplier!r} spends ε = {spent:.4g} > epsilon = "
            f"{epsilon!r} at delta = {delta!r} (one Gaussian release). Raise "
            "noise_multiplier, or set noise_multiplier=None to calibrate it to epsilon.")
    return float(sigma), float(spent)


def gaussian_release(
    epsilon: float | None, delta: float, *, noise_multiplier: float | None = None,
    neighboring: Neighboring = "add_remove",
) -> tuple[float, DpEvent, float]:
    """``(σ, event, ε)`` of ONE Gaussian release, by its exact (ε, δ) curve.

    For a single Gaussian mechanism (noise std σ times the add/remove L2
    sensitivity; ``2×`` that sensitivity under ``neighboring="replace"``)
    the privacy profile is known in closed form (Balle & Wang 2018, Thm. 8):
    with ``μ = Δ/σ`` (Δ = 1, or 2 under replacement),
    ``δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)``. dp-accounting's PLD
    accountant reproduces it up to its pessimistic discretisation; this
    computes it directly (numpy and scipy.special only), so a fit with one
    Gaussian release need not import dp-accounting's accountants.

    σ is the smallest noise multiplier (bisection to 1e-12 relative, then
    rounded up) whose exact ε is at most ``epsilon``; the returned ε is the
    exact ε of that σ rounded up (the upper end of a bisection on δ(ε),
    times ``1 + 1e-9``): never below the exact ε. σ is at least 1e-3, as in
    :func:`calibrate_noise_multiplier`.

    Parameters
    ----------
    epsilon : float or None
        Target ε, > 0; with ``noise_multiplier`` given, the budget it may
        not exceed (None: no budget).
    delta : float
        Target δ in (0, 1).
    noise_multiplier : float or None, default=None
        A fixed σ (> 0): ε is computed, not targeted.
    neighboring : {"add_remove", "replace"}, default="add_remove"
        Neighbouring relation of the guarantee.

    Returns
    -------
    noise_multiplier : float
        σ.
    event : dp_accounting.DpEvent
        ``SelfComposedDpEvent(GaussianDpEvent(σ), 1)``, as
        ``dpsgd_event(σ, 1, 1)`` (built without importing the accountants).
    epsilon : float
        The exact ε of the release at ``delta``, rounded up (> 0).

    Raises
    ------
    BudgetExceededError
        When ``noise_multiplier`` spends more than ``epsilon``, or no σ up to
        1e6 meets ``epsilon``.

    Examples
    --------
    >>> sigma, event, eps = gaussian_release(1.0, 1e-5)
    >>> round(sigma, 2), bool(eps <= 1.0)
    (3.73, True)
    """
    sigma, spent = gaussian_sigma_and_epsilon(epsilon, delta, noise_multiplier=noise_multiplier,
                                              neighboring=neighboring)
    events = _dp_event_module()
    event = events.SelfComposedDpEvent(events.GaussianDpEvent(sigma), 1)
    return sigma, event, spent


_GAUSSIAN_SIGMA_CACHE = {}



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

"""Gaussian releases: the noise multiplier of one release for a budget (analytic Gaussian
mechanism), μ-GDP's ε, and the σ / ε pair a mechanism module releases with."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ._checks import (
    NEIGHBORING_RELATIONS,
    _SIGMA_CEILING,
    _SIGMA_FLOOR,
    _check_choice,
    _check_delta,
    _check_positive,
    _unreachable,
)
from ._events import gaussian_event
from ._epsilon import _EPSILON_CACHE_SIZE, epsilon_of_event

if TYPE_CHECKING:  # annotations only
    import numpy as np
    from numpy.typing import ArrayLike

    from dp_accounting import DpEvent

    from ._checks import Neighboring


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


# Above this ε the second term of δ(ε) is computed through the Mills ratio: there
# ``ε + log Φ(−μ/2 − ε/μ)`` is a difference of two numbers near μ²/2 whose rounding
# error alone can exceed what exp() takes (σ = 1e-12 gives μ²/2 = 5e23).
_MILLS_EPSILON = 700.0


def _gaussian_delta(epsilon, mu):
    """δ(ε) of one Gaussian release whose sensitivity is ``mu`` noise stds.

    Balle & Wang (2018), Thm. 8: ``Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)``, the
    second term as ``exp(ε + log Φ(·))`` so that it neither overflows nor
    loses its tail. For ε above ``_MILLS_EPSILON`` (where that sum cancels
    catastrophically) the second term is ``φ(μ/2 − ε/μ) R(μ/2 + ε/μ)``, the
    same quantity (``e^ε φ(μ/2 + ε/μ) = φ(μ/2 − ε/μ)``) with the Mills ratio
    ``R(x) = Φ(−x)/φ(x) = √(π/2) erfcx(x/√2)`` bounded by √(π/2): no factor
    can overflow, so δ → 1 as μ → ∞ (σ → 0) and δ → 0 as ε → ∞. The result
    is clipped to [0, 1], the range of δ, against rounding.
    """
    from scipy.special import erfcx, log_ndtr, ndtr

    first = float(ndtr(mu / 2 - epsilon / mu))
    if epsilon <= _MILLS_EPSILON:
        second = math.exp(epsilon + float(log_ndtr(-mu / 2 - epsilon / mu)))
    else:
        z = mu / 2 - epsilon / mu
        second = (math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
                  * math.sqrt(math.pi / 2) * float(erfcx((mu / 2 + epsilon / mu) / math.sqrt(2))))
    return min(max(first - second, 0.0), 1.0)


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
    from ..exceptions import BudgetExceededError

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

"""One PLD pass: the ε of a DpEvent at one discretisation interval, and the size of its grid.

dp-accounting's ``PLDAccountant`` builds a privacy-loss distribution (PLD) per
mechanism and composes them by FFT. Self-composing a dense PMF ``T`` times
(``common.self_convolve``) first bounds where the result's mass lies by a
Chernoff bound: ``common.compute_self_convolve_bounds`` evaluates
``scipy.special.logsumexp`` at 40 orders, for each of the two PMFs. Since
scipy 1.15 each of those 80 calls spends about 0.1 ms in array-API dispatch:
half of a calibration's time on the benchmark settings (measured: 1.98x, the
median over 45 of the 135 settings of ``benchmarks/bench_calibration.py``).

So for the events the estimators spend -- Gaussian releases, Poisson-sampled
Gaussian steps, their self-compositions and compositions -- this module
builds the same PLD itself, with dp-accounting's public constructors
(``from_gaussian_mechanism``, ``identity``, ``compose``), the accountant's
order of composition and its defaults, and does only the dense
self-composition here: the same FFT, and the same truncation bounds with the
weighted 1-D ``logsumexp`` written in numpy. The bounds are integers (a ceil
or floor of each order's bound), so the PLD is dp-accounting's bit for bit;
``tests/test_calibration.py`` compares ε and the grid size with
``PLDAccountant``'s on the slowest calibration settings and on extremes.
Every other event goes to ``PLDAccountant`` itself. Nothing of
dp-accounting is replaced or patched; the PMFs' fields are read (as the
accountant's grid size always was), and where a dp-accounting release lays
them out differently the accountant answers instead.
"""

from __future__ import annotations

import math

_TAIL_MASS_TRUNCATION = 1e-15  # dp-accounting's default for self_compose and compose


def epsilon_and_size(event, relation, interval, delta):
    """``(ε, grid size)`` of ``event`` at ``delta`` by a pessimistic PLD at ``interval``.

    ``relation`` is dp-accounting's ``NeighboringRelation``; the grid size is
    the larger PMF's length (``inf`` where it cannot be read).
    """
    pld, non_private = None, False
    try:
        pld, non_private = _compose(event, relation, interval)
    except _Unhandled:
        pld = None
    if pld is None:
        return _accountant_epsilon_and_size(event, relation, interval, delta)
    eps = math.inf if non_private else float(pld.get_epsilon_for_delta(delta))
    return eps, _size(pld)


def _accountant_epsilon_and_size(event, relation, interval, delta):
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(relation, value_discretization_interval=interval)
    acc.compose(event)
    eps = float(acc.get_epsilon(delta))
    return eps, _size(getattr(acc, "_pld", None))


def _size(pld):
    try:  # dp-accounting internals; without them, no refinement
        return max(pld._pmf_remove.size, pld._pmf_add.size)
    except AttributeError:  # pragma: no cover - other dp-accounting versions
        return math.inf


class _Unhandled(Exception):
    """An event (or a PMF layout) this module does not compose: the accountant does."""


def _compose(event, relation, interval):
    """``(PLD, non_private)`` of ``event``, composed as ``PLDAccountant.compose`` does."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    state = {"pld": pld_lib.identity(value_discretization_interval=interval),
             "non_private": False}
    _add(event, 1, relation, interval, state)
    return state["pld"], state["non_private"]


def _add(event, count, relation, interval, state):
    """Compose ``count`` runs of ``event`` into ``state``: ``PLDAccountant._maybe_compose``
    for the events below (the same constructors, arguments and order)."""
    import dp_accounting
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    if isinstance(event, dp_accounting.NoOpDpEvent):
        return
    if isinstance(event, dp_accounting.NonPrivateDpEvent):
        state["non_private"] = True
    elif isinstance(event, dp_accounting.SelfComposedDpEvent):
        _add(event.event, event.count * count, relation, interval, state)
    elif isinstance(event, dp_accounting.ComposedDpEvent):
        for inner in event.events:
            _add(inner, count, relation, interval, state)
    elif isinstance(event, dp_accounting.GaussianDpEvent):
        if event.noise_multiplier == 0:
            state["non_private"] = True
        else:
            gaussian = pld_lib.from_gaussian_mechanism(
                standard_deviation=event.noise_multiplier / math.sqrt(count),
                value_discretization_interval=interval, neighboring_relation=relation)
            state["pld"] = state["pld"].compose(gaussian)
    elif (isinstance(event, dp_accounting.PoissonSampledDpEvent)
          and isinstance(event.event, dp_accounting.GaussianDpEvent)):
        if event.sampling_probability == 0:
            return
        if event.event.noise_multiplier == 0:
            state["non_private"] = True
            return
        step = pld_lib.from_gaussian_mechanism(
            standard_deviation=event.event.noise_multiplier,
            value_discretization_interval=interval,
            sampling_prob=event.sampling_probability, neighboring_relation=relation)
        state["pld"] = state["pld"].compose(self_compose(step, count))
    else:
        raise _Unhandled(type(event).__name__)


def self_compose(pld, num_times):
    """``pld.self_compose(num_times)``, with the dense PMFs self-composed here."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    remove = _self_compose_pmf(pld._pmf_remove, num_times)
    if pld._symmetric:
        return pld_lib.PrivacyLossDistribution(remove)
    return pld_lib.PrivacyLossDistribution(remove, _self_compose_pmf(pld._pmf_add, num_times))


def _self_compose_pmf(pmf, num_times, tail_mass_truncation=_TAIL_MASS_TRUNCATION):
    """``pmf.self_compose(num_times, tail_mass_truncation)`` (``DensePLDPmf``'s, and
    ``SparsePLDPmf``'s where it turns dense)."""
    import numpy as np
    from dp_accounting.pld import pld_pmf

    if num_times <= 0:
        raise ValueError(f"num_times should be >= 1, num_times={num_times}")
    if isinstance(pmf, pld_pmf.SparsePLDPmf):
        if num_times == 1 or pmf.size ** num_times <= getattr(
                pld_pmf, "_MAX_PMF_SPARSE_SIZE", math.inf):
            return pmf.self_compose(num_times, tail_mass_truncation)  # pairwise: no bounds
        pmf = pmf.to_dense_pmf()
    if not isinstance(pmf, pld_pmf.DensePLDPmf):
        raise _Unhandled(type(pmf).__name__)
    try:
        probs, lower_loss = pmf._probs, pmf._lower_loss
        infinity_mass, discretization = pmf._infinity_mass, pmf._discretization
        pessimistic = pmf._pessimistic_estimate
    except AttributeError as exc:  # pragma: no cover - another dp-accounting layout
        raise _Unhandled(str(exc)) from None
    lower_loss = lower_loss * num_times
    truncation_lower_bound, out = self_convolve(probs, num_times, tail_mass_truncation)
    lower_loss += truncation_lower_bound
    # (1 - (1 - infinity_mass)^T) + the truncated tail, as dp-accounting computes it.
    inf_prob = tail_mass_truncation - math.expm1(num_times * math.log1p(-infinity_mass))
    return pld_pmf.DensePLDPmf(discretization, lower_loss, np.array(out), inf_prob, pessimistic)


def self_convolve(input_list, num_times, tail_mass_truncation=0):
    """``dp_accounting.pld.common.self_convolve``: ``(lower bound, input_list^{*num_times})``
    truncated to the bounds of :func:`self_convolve_bounds`."""
    import numpy as np
    from scipy import fft

    lower, upper = self_convolve_bounds(input_list, num_times, tail_mass_truncation)
    output_len = upper - lower + 1
    fast_len = fft.next_fast_len(max(output_len, len(input_list)))
    out = np.real(fft.ifft(fft.fft(input_list, fast_len) ** num_times))
    return lower, np.roll(out, -lower)[:output_len]


def self_convolve_bounds(input_list, num_times, tail_mass_truncation=0):
    """``dp_accounting.pld.common.compute_self_convolve_bounds`` at its default orders:
    ``(lower, upper)`` outside which the self-convolution holds at most
    ``tail_mass_truncation`` of the mass (a Chernoff bound at 40 orders)."""
    import numpy as np

    upper_bound = (len(input_list) - 1) * num_times
    lower_bound = 0
    if tail_mass_truncation == 0:
        return lower_bound, upper_bound
    orders = np.concatenate((np.arange(-20, 0), np.arange(1, 21))) / len(input_list)
    positions = np.arange(len(input_list))
    weights = np.asarray(input_list, dtype=np.float64)
    for order in orders:
        log_mgf = weighted_logsumexp(positions * order, weights)
        bound = (num_times * log_mgf + math.log(2 / tail_mass_truncation)) / order
        if not math.isfinite(bound):
            continue
        if order > 0:
            upper_bound = min(upper_bound, math.ceil(bound))
        if order < 0:
            lower_bound = max(lower_bound, math.floor(bound))
    return lower_bound, upper_bound


def weighted_logsumexp(a, b):
    """``log(sum(b * exp(a)))`` for 1-D ``a`` and non-negative weights ``b`` of its shape.

    ``scipy.special.logsumexp(a, b=b)`` without its array-API dispatch: the
    largest ``a`` is factored out, as scipy does. Where that is not finite,
    or ``a`` is empty, scipy answers.
    """
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0 or not math.isfinite(a.max()):
        from scipy import special

        return special.logsumexp(a, b=b)
    top = a.max()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.sum(b * np.exp(a - top))) + top

"""DpEvents: what a fit ran, in dp-accounting's vocabulary (DP-SGD steps, Gaussian releases,
their composition), and the rewrite that lets RDP account replace-one Gaussian releases."""

from __future__ import annotations

from numbers import Integral
from typing import TYPE_CHECKING

from ._checks import _check_positive

if TYPE_CHECKING:  # annotations only
    from dp_accounting import DpEvent


def _relation(neighboring):
    """dp-accounting's ``NeighboringRelation`` for ``"add_remove"`` or ``"replace"``."""
    import dp_accounting

    return {
        "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        "replace": dp_accounting.NeighboringRelation.REPLACE_ONE,
    }[neighboring]


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

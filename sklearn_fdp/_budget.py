"""Batch size, accountant and noise calibration shared by every DP-SGD estimator.

The linear estimators and ``MLPFeatureDP`` run the same private mechanism --
Poisson-subsampled Gaussian steps, possibly composed with other releases --
so they resolve the batch size, pick the accountant and calibrate σ with
these functions. Each reads the estimator parameters ``epsilon``, ``delta``,
``noise_multiplier``, ``batch_size``, ``epochs``, ``accountant`` and
``neighboring`` of the estimator it is given.
"""

import math
import warnings

from . import accounting
from ._plan import DPSGDSchedule
from .exceptions import BudgetExceededError, FdpWarning

# accountant="auto" uses PLD up to this target ε (see resolve_accountant).
_AUTO_PLD_MAX_EPSILON = 10.0


def _auto_batch_size(n_samples):
    """Default expected batch size: ``clip(round(sqrt(n) * 8), 64, 4096)``, at most ``n - 1``.

    Larger batches cut the noise per step (σ C / (q n)) while the number of
    steps for a fixed number of epochs shrinks; for linear models the sweet
    spot measured on Adult's validation split (see
    ``benchmarks/bench_adult.py``) grows roughly like ``sqrt(n)``.

    Never ``q = 1`` (issue 30): up to n = 64 the rule gave ``B = n``, and the
    neighbour with one row more ran at ``q = 64/65``; the accountant, which
    treats ``n`` as public, then understates ε up to 7.7x (one step, σ = 1;
    ``benchmarks/bench_public_n.py``). With ``B = n - 1`` the batch grows in
    step with ``n`` and the same toy's cost is at most 1.07x.
    """
    return int(min(max(round(8 * math.sqrt(n_samples)), 64), 4096,
                   max(1, n_samples - 1)))


def check_budget_params(est):
    """Budget rules spanning several parameters of a DP-SGD estimator ``est``."""
    name = type(est).__name__
    if est.epsilon is None and est.noise_multiplier is None:
        raise ValueError(
            f"{name}: give `epsilon` (the budget; σ is calibrated to it) or "
            "`noise_multiplier` (ε is then computed); both are None."
        )
    if est.neighboring == "replace" and est.accountant == "rdp":
        raise ValueError(
            f"{name}: accountant='rdp' cannot account Poisson sampling under "
            "neighboring='replace' (dp-accounting rejects it). Use "
            "accountant='pld'."
        )


def resolve_batch_size(est, n_samples):
    """``est.batch_size``, or the default rule for ``"auto"``; checked against ``n``."""
    name = type(est).__name__
    if est.batch_size == "auto":
        return _auto_batch_size(n_samples)
    if est.batch_size > n_samples:
        raise ValueError(
            f"`batch_size` of {name} is {est.batch_size!r} but the data have "
            f"only {n_samples} rows. Use batch_size <= n_samples or 'auto'."
        )
    return int(est.batch_size)


def resolve_public_batch_size(est, batch_size, n_samples):
    """``est.public_batch_size``: the expected private ``batch_size`` for ``"auto"``,
    every row for ``"full"``, or as given (checked against ``n``)."""
    if est.public_batch_size == "auto":
        return int(batch_size)
    if est.public_batch_size == "full":
        return int(n_samples)
    if est.public_batch_size > n_samples:
        raise ValueError(
            f"`public_batch_size` of {type(est).__name__} is {est.public_batch_size!r} but "
            f"the data have only {n_samples} rows. Use public_batch_size <= n_samples or "
            "'auto'."
        )
    return int(est.public_batch_size)


def dpsgd_schedule(est, n_samples):
    """The public :class:`~sklearn_fdp._plan.DPSGDSchedule` of ``est`` on ``n`` rows."""
    batch_size = resolve_batch_size(est, n_samples)
    steps = max(1, math.ceil(est.epochs * n_samples / batch_size))
    return DPSGDSchedule(batch_size=batch_size, sampling_rate=batch_size / n_samples,
                         steps=steps)


def resolve_accountant(est, epsilon):
    """``"auto"``: PLD (tightest) where it is cheap, RDP for large ε.

    PLD needs about 5-8 % less noise than RDP for the same ε at every
    budget. Since issue 18 its discretisation follows ε, and a calibration
    costs about as much as RDP's up to ε ≈ 10 (0.06-0.1 s CPU at ε = 3-8
    on Adult's schedules); above, it slows down (0.3-1 s at ε = 200-1000)
    where accuracy is saturated anyway. Replace-one Poisson sampling is only
    supported by PLD.
    """
    if est.accountant != "auto":
        return est.accountant
    if est.neighboring == "replace" or epsilon <= _AUTO_PLD_MAX_EPSILON:
        return "pld"
    return "rdp"


# With verbose, a calibration still running after this many seconds says so.
SLOW_CALIBRATION_S = 3.0


class slow_calibration_notice:
    """Context manager: with ``est.verbose``, one line on stdout (where the epoch
    lines go) if the calibration inside runs past :data:`SLOW_CALIBRATION_S`
    (a tiny ε, many steps, the PLD accountant), so that no long wait is silent."""

    def __init__(self, est):
        self.est = est
        self.timer = None

    def __enter__(self):
        if getattr(self.est, "verbose", 0):
            import sys
            import threading

            est = self.est
            line = (f"[{type(est).__name__}] calibrating the noise to epsilon={est.epsilon!r} "
                    f"at delta={est.delta!r}: still running after {SLOW_CALIBRATION_S:g} s "
                    "(a small epsilon or many steps; the result is cached for the next fit)")
            self.timer = threading.Timer(SLOW_CALIBRATION_S,
                                         lambda: print(line, file=sys.stdout, flush=True))
            self.timer.daemon = True
            self.timer.start()
        return self

    def __exit__(self, *exc):
        if self.timer is not None:
            self.timer.cancel()
        return False


def _check_answered(est, asked, answered):
    """An explicit accountant is honoured or the fit raises; only ``"auto"`` falls back,
    and says so (issue 32)."""
    if answered == asked:
        return
    name = type(est).__name__
    why = ("its answer is 0 or set by its largest order under this much noise"
           if asked == "rdp" else "δ is below what it resolves")
    if est.accountant != "auto":
        raise ValueError(
            f"{name}: accountant={est.accountant!r} cannot account this fit at "
            f"epsilon={est.epsilon!r}, delta={est.delta!r} ({why}); the "
            f"{answered.upper()} accountant can. Set accountant={answered!r}, or "
            "accountant='auto' (which falls back and says so).")
    warnings.warn(
        f"{name}: accountant='auto' asked {asked.upper()}, which cannot account this fit "
        f"({why}); ε is {answered.upper()}'s (accountant_ = {answered!r}).",
        FdpWarning, stacklevel=4)


def calibrate_dpsgd(est, sampling_rate, steps, other_events=()):
    """``(σ, event, ε, accountant)`` of DP-SGD steps composed with ``other_events``.

    σ is ``est.noise_multiplier``, or calibrated so that the composition
    spends ``est.epsilon`` at ``est.delta``; ε is the composition's, from
    the accountant that answered (where the one asked for fails, e.g. RDP's
    ε = 0 under huge noise, the other answers, for the calibration too).
    Raises :class:`BudgetExceededError` when a fixed σ overspends ``epsilon``.
    """
    others = tuple(other_events)
    if est.noise_multiplier is None:
        accountant = resolve_accountant(est, est.epsilon)
        with slow_calibration_notice(est):
            sigma = accounting.calibrate_noise_multiplier(
                est.epsilon,
                est.delta,
                sampling_rate,
                steps,
                accountant=accountant,
                neighboring=est.neighboring,
                other_events=others,
            )
    else:
        sigma = float(est.noise_multiplier)
    event = accounting.compose_events(
        *others, accounting.dpsgd_event(sigma, sampling_rate, steps)
    )
    if est.noise_multiplier is not None:
        rough = (accounting.epsilon_of_event(event, est.delta)
                 if est.neighboring == "add_remove" else 0.0)
        accountant = resolve_accountant(est, rough)
    spent, answered = accounting.epsilon_and_accountant(
        event, est.delta, accountant=accountant, neighboring=est.neighboring
    )
    _check_answered(est, accountant, answered)
    accountant = answered
    if est.epsilon is not None and spent > est.epsilon:
        raise BudgetExceededError(
            f"{type(est).__name__} with noise_multiplier={est.noise_multiplier!r} "
            f"spends ε = {spent:.4g} > epsilon = {est.epsilon!r}. Raise "
            "noise_multiplier, lower epochs, or set noise_multiplier=None to "
            "calibrate it to epsilon."
        )
    return sigma, event, spent, accountant

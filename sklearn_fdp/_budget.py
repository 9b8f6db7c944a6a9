"""Batch size, accountant and noise calibration shared by every DP-SGD estimator.

The linear estimators (``linear/_base.py``) and ``MLPFeatureDP`` run the same
private mechanism -- Poisson-subsampled Gaussian steps, possibly composed
with other releases -- so they resolve the batch size, pick the accountant
and calibrate σ with this one mixin. It reads the estimator parameters
``epsilon``, ``delta``, ``noise_multiplier``, ``batch_size``, ``accountant``
and ``neighboring``.
"""

import math

from . import accounting
from .exceptions import BudgetExceededError

# accountant="auto" uses PLD up to this target ε (see _resolve_accountant).
_AUTO_PLD_MAX_EPSILON = 2.0


def _auto_batch_size(n_samples):
    """Default expected batch size: ``clip(round(sqrt(n) * 8), 64, 4096)``.

    Larger batches cut the noise per step (σ C / (q n)) while the number of
    steps for a fixed number of epochs shrinks; for linear models the sweet
    spot measured on Adult's validation split (see
    ``benchmarks/bench_adult.py``) grows roughly like ``sqrt(n)``.
    """
    return int(min(max(round(8 * math.sqrt(n_samples)), 64), 4096, n_samples))


class DPSGDBudgetMixin:
    """Budget rules of a DP-SGD fit (see the module docstring)."""

    def _check_params(self, X, y):
        """Rules spanning several parameters; called first in ``fit``."""
        name = type(self).__name__
        if self.epsilon is None and self.noise_multiplier is None:
            raise ValueError(
                f"{name}: give `epsilon` (the budget; σ is calibrated to it) or "
                "`noise_multiplier` (ε is then computed); both are None."
            )
        if self.neighboring == "replace" and self.accountant == "rdp":
            raise ValueError(
                f"{name}: accountant='rdp' cannot account Poisson sampling under "
                "neighboring='replace' (dp-accounting rejects it). Use "
                "accountant='pld'."
            )

    def _other_events(self):
        """DpEvents composed with the gradient steps (none for plain DP-SGD)."""
        return ()

    def _resolve_batch_size(self, n_samples):
        name = type(self).__name__
        if self.batch_size == "auto":
            return _auto_batch_size(n_samples)
        if self.batch_size > n_samples:
            raise ValueError(
                f"`batch_size` of {name} is {self.batch_size!r} but the data have "
                f"only {n_samples} rows. Use batch_size <= n_samples or 'auto'."
            )
        return int(self.batch_size)

    def _resolve_accountant(self, epsilon):
        """``"auto"``: PLD (tightest) where it is cheap, RDP for large ε.

        PLD needs about 5-8 % less noise than RDP for the same ε at every
        budget, but its evaluation slows down sharply as σ shrinks (seconds
        per fit above ε ≈ 2), where accuracy is saturated anyway. Replace-one
        Poisson sampling is only supported by PLD.
        """
        if self.accountant != "auto":
            return self.accountant
        if self.neighboring == "replace" or epsilon <= _AUTO_PLD_MAX_EPSILON:
            return "pld"
        return "rdp"

    def _budget(self, n_samples, sampling_rate, steps):
        """Noise multiplier, the fit's DpEvent, its ε and the accountant that gave it."""
        others = tuple(self._other_events())
        if self.noise_multiplier is None:
            accountant = self._resolve_accountant(self.epsilon)
            sigma = accounting.calibrate_noise_multiplier(
                self.epsilon,
                self.delta,
                sampling_rate,
                steps,
                accountant=accountant,
                neighboring=self.neighboring,
                other_events=others,
            )
        else:
            sigma = float(self.noise_multiplier)
        event = accounting.compose_events(
            *others, accounting.dpsgd_event(sigma, sampling_rate, steps)
        )
        if self.noise_multiplier is not None:
            rough = (accounting.epsilon_of_event(event, self.delta)
                     if self.neighboring == "add_remove" else 0.0)
            accountant = self._resolve_accountant(rough)
        # The accountant that answered: where the one asked for fails (e.g.
        # RDP's ε = 0 under huge noise) the other answers, for the calibration
        # above too, so `spent` is the ε the noise was calibrated for.
        spent, accountant = accounting.epsilon_and_accountant(
            event, self.delta, accountant=accountant, neighboring=self.neighboring
        )
        if self.epsilon is not None and spent > self.epsilon:
            raise BudgetExceededError(
                f"{type(self).__name__} with noise_multiplier={self.noise_multiplier!r} "
                f"spends ε = {spent:.4g} > epsilon = {self.epsilon!r}. Raise "
                "noise_multiplier, lower epochs, or set noise_multiplier=None to "
                "calibrate it to epsilon."
            )
        return sigma, event, spent, accountant

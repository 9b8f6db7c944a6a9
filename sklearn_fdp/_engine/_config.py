"""The settings and the result of one DP-SGD run (below the loops that use them)."""

from dataclasses import dataclass

import numpy as np

LR_SCHEDULES = ("constant", "cosine", "linear")


@dataclass(frozen=True)
class EngineConfig:
    """Hyperparameters of one DP-SGD run (all data-independent).

    Attributes
    ----------
    steps : int
        Number of noisy steps ``T``.
    sampling_rate : float
        Poisson sampling rate ``q``.
    noise_multiplier : float
        σ; the noise added to each clipped sum has std ``σ * max_grad_norm``.
        0 disables noise (non-private runs only; never used by a private fit).
    max_grad_norm : float
        Clip norm ``C`` of each per-example (private) gradient.
    learning_rate : float
        Base step size.
    lr_schedule : {"constant", "cosine", "linear"}
        Decay of the step size over the ``steps``.
    momentum : float
        Heavy-ball momentum in [0, 1).
    alpha : float
        Weight of the private gradient when a public gradient is mixed in
        (``g = g_pub + alpha * g_priv``); 1 for plain DP-SGD.
    l2_regularization : float
        Weight decay ``λ θ`` added to every step (data-independent).
    max_weight_norm : float or None
        Radius of the L2 ball the iterate is projected onto after each step.
    average_start : int or None
        Step from which iterates are averaged uniformly (Polyak averaging of
        the tail). ``None`` returns the last iterate.
    """

    steps: int
    sampling_rate: float
    noise_multiplier: float
    max_grad_norm: float
    learning_rate: float
    lr_schedule: str = "constant"
    momentum: float = 0.0
    alpha: float = 1.0
    l2_regularization: float = 0.0
    max_weight_norm: float | None = None
    average_start: int | None = None

    def step_size(self, t):
        """Learning rate at step ``t`` (0-based)."""
        if self.lr_schedule == "constant" or self.steps <= 1:
            return self.learning_rate
        frac = t / self.steps
        if self.lr_schedule == "cosine":
            return self.learning_rate * 0.5 * (1.0 + np.cos(np.pi * frac))
        if self.lr_schedule == "linear":
            return self.learning_rate * (1.0 - frac)
        raise ValueError(f"Unknown lr_schedule {self.lr_schedule!r}; use one of {LR_SCHEDULES}.")


@dataclass
class EngineResult:
    """What :func:`run_dp_sgd` returns: the released parameters."""

    theta: np.ndarray
    steps: int

"""Argument checks, the σ range and the error of an unreachable budget, shared by the accounting."""

from __future__ import annotations

import math
from numbers import Real
from typing import Literal

Accountant = Literal["rdp", "pld"]
Neighboring = Literal["add_remove", "replace"]
ACCOUNTANTS = ("rdp", "pld")
"""The accountants of this module's functions (an estimator also takes ``"auto"``)."""
NEIGHBORING_RELATIONS = ("add_remove", "replace")
"""The neighbouring relations a ``neighboring=`` parameter accepts."""


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


def _unreachable(epsilon, delta, floor, accountant, run):
    """The error of a target that no noise multiplier up to the ceiling meets."""
    from ..exceptions import BudgetExceededError

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

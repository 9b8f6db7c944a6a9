"""Warnings and errors raised by sklearn_fdp.

The hierarchy lets users filter all privacy warnings at once
(``warnings.simplefilter("error", FdpWarning)``) while keeping the most
serious ones, :class:`PrivacyLeakWarning`, distinguishable.
"""

__all__ = ["FdpWarning", "PrivacyLeakWarning", "PerformanceWarning", "CollapseWarning",
           "BudgetExceededError"]


class FdpWarning(UserWarning):
    """Base class of every warning issued by sklearn_fdp."""


class PrivacyLeakWarning(FdpWarning):
    """A setting weakens the privacy guarantee a user may think they have.

    Examples: ``delta >= 1 / n_samples`` (a mechanism that publishes one
    record at random satisfies such a δ), bounds or norms taken from the
    private data, or public features that were not declared.
    """


class PerformanceWarning(FdpWarning):
    """A setting sends a fit down a much slower path than a close alternative.

    Example: a per-step callback (``verbose``) or a weight-norm projection on
    a wide sparse (CSR) matrix, which rules out the exact lazy noise and
    draws a Gaussian for every coordinate at every step.
    The results are correct either way.
    """


class CollapseWarning(FdpWarning):
    """A fitted classifier predicts a single class, or scores below the majority rule.

    Issued by :func:`sklearn_fdp.check_collapse`, an opt-in check on data the
    user passes, never by ``fit``: computed on the private training data, the
    warning is a function of those data that ``epsilon_`` does not cover (it
    tells whether the model beats the base rate there). On public or held-out
    data it is post-processing of the released model and costs no privacy.
    See docs/threat_model.md, "Checking a fit for collapse".
    """


class BudgetExceededError(ValueError):
    """The requested computation would spend more than the privacy budget.

    Raised, for instance, when a fixed ``noise_multiplier`` is given together
    with an ``epsilon`` that the resulting run would exceed.
    """

"""What kind of step an estimator is: the facts the search, the report and the tracer share.

Below :mod:`sklearn_fdp.pipeline`, :mod:`sklearn_fdp._report` and
:mod:`sklearn_fdp._search` (each imports this module; it imports none of
them). What a private step spends and protects is its fitted
``privacy_plan_`` (:class:`~sklearn_fdp._plan.PrivacyPlan`, the planning
contract every private estimator keeps); nothing here guesses it from other
attributes.
"""


def is_private_step(est):
    """Whether ``est`` is a fitted private step (it carries the ``dp_event_`` it spent)."""
    return hasattr(est, "dp_event_")


def plan_of(est):
    """The :class:`~sklearn_fdp._plan.PrivacyPlan` of a fitted private step.

    Raises a TypeError naming the contract when the step has none (a private
    step from outside the package that does not keep ``privacy_plan_``).
    """
    plan = getattr(est, "privacy_plan_", None)
    if plan is None:
        raise TypeError(
            f"{type(est).__name__} has a dp_event_ but no privacy_plan_: sklearn_fdp cannot "
            "tell what it protects. A private estimator keeps the PrivacyPlan of its fit as "
            "privacy_plan_ (see sklearn_fdp.PrivacyPlan)."
        )
    return plan


def learns_from_data(est):
    """Whether a fitted non-private step computed something from its training data."""
    tags = est.__sklearn_tags__()
    if not tags.requires_fit:
        return False
    name = type(est).__name__
    if name in ("OneHotEncoder", "OrdinalEncoder"):
        # Fixed category lists (as in make_adult_preprocessor) learn nothing.
        return (est.categories == "auto" or getattr(est, "min_frequency", None) is not None
                or getattr(est, "max_categories", None) is not None)
    if name == "FunctionTransformer":
        return False
    return True

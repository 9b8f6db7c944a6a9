"""The planning contract: what a private fit will spend and what it protects.

Every private estimator of the package answers, from public quantities only
(the shape of the data, its column names, the parameters), two questions
before it touches a private value:

* which :class:`~dp_accounting.DpEvent` will this fit spend, and the ε it
  amounts to at ``delta``;
* what does it protect (whole records, some columns, the label).

The answer is a :class:`PrivacyPlan`, returned by the estimator's public
``privacy_plan(n_samples, n_features, ...)`` method. ``fit`` calls that same
method and runs the mechanisms with the noise scales it holds (one source of
truth), then stores it as ``privacy_plan_``: its ``dp_event`` is the fitted
``dp_event_``. The search calibrates its trials from it, ``privacy_report``
and the pipeline tracer read what a step protects from it; none of them
looks at an estimator's private methods or guesses from its attributes.
"""

from dataclasses import dataclass, field

# What a plan can protect (PrivacyPlan.unit).
UNITS = ("record", "private records", "features", "label", "features+label", "none")


@dataclass(frozen=True)
class DPSGDSchedule:
    """The public schedule of a DP-SGD run.

    Parameters
    ----------
    batch_size : int
        Expected Poisson batch size ``q n``.
    sampling_rate : float
        Poisson sampling rate ``q``.
    steps : int
        Number of noisy steps.
    """

    batch_size: int
    sampling_rate: float
    steps: int


@dataclass(frozen=True)
class PrivacyPlan:
    """What a private fit spends and protects, computed from public quantities.

    Returned by every private estimator's ``privacy_plan``; the fitted
    ``privacy_plan_`` is the one its fit ran.

    Parameters
    ----------
    dp_event : dp_accounting.DpEvent
        Every mechanism the fit runs, composed: the fitted ``dp_event_``.
    epsilon : float
        ε of ``dp_event`` at ``delta`` (the fitted ``epsilon_``).
    delta : float
        The δ the plan is accounted at.
    accountant : str
        What gave ``epsilon``: ``"pld"`` or ``"rdp"`` (dp-accounting's
        accountants), or ``"analytic"`` (the analytic Gaussian mechanism's
        exact ε, for a single Gaussian release such as the private mean).
    unit : str
        One of ``"record"`` (every column and the label of a
        row), ``"private records"`` (every column and the label of a private
        row; the public rows are not protected), ``"features"`` (the
        protected columns; label public), ``"label"`` (label DP),
        ``"features+label"`` or ``"none"`` (nothing declared protected).
    description : str
        ``unit`` in words, with the protected columns' names.
    protected_features : tuple of str or None
        Names (or ``"x<i>"`` positions) of the protected input columns;
        None when every column is protected (``unit`` ``"record"`` or
        ``"private records"``).
    protected_columns : tuple of int or None
        Positions of the same columns in the estimator's input (what the
        pipeline tracer follows back through the preprocessing); None when
        every column is protected.
    label_protected : bool
        Whether the label is protected.
    noise_multiplier : float or None
        σ of the main mechanism (the gradient steps, or the mean).
    schedule : DPSGDSchedule or None
        The DP-SGD schedule, for the estimators that run one.
    details : dict
        Other public settings the fit runs with (e.g. the mean's σ, the
        number of rounds, the resolved public columns); not compared by
        ``==``, which compares what is spent and protected.
    """

    dp_event: object
    epsilon: float
    delta: float
    accountant: str
    unit: str
    description: str
    protected_features: tuple | None
    label_protected: bool
    protected_columns: tuple | None = None
    noise_multiplier: float | None = None
    schedule: DPSGDSchedule | None = None
    details: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"PrivacyPlan.unit must be one of {UNITS}, got {self.unit!r}.")

    @property
    def protected_set(self):
        """The protected attributes: None for whole records, else a set of
        column names plus ``"<label>"`` when the label is protected."""
        if self.protected_features is None:
            return None
        attrs = set(self.protected_features)
        if self.label_protected:
            attrs.add("<label>")
        return attrs


def record_plan(dp_event, epsilon, delta, accountant, **kwargs):
    """A plan that protects whole records (DP-SGD, DPSGD-F, the private mean)."""
    return PrivacyPlan(dp_event=dp_event, epsilon=epsilon, delta=delta, accountant=accountant,
                       unit="record", description="whole record (all features and the label)",
                       protected_features=None, label_protected=True, **kwargs)


def feature_plan(dp_event, epsilon, delta, accountant, protected_features, label_protected,
                 protected_columns=None, **kwargs):
    """A plan that protects some columns and/or the label (feature DP, label DP).

    ``protected_features`` are the columns' names; ``protected_columns``
    their positions in the input. Without positions the pipeline tracer
    counts every input column as protected (the conservative reading).
    """
    names = tuple(str(n) for n in protected_features)
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    if label_protected:
        unit, description = (("label", "the label only (label DP; every feature public; "
                               "label_public=False)")
                             if not names else
                             ("features+label", f"protected features [{shown}] and the label "
                              "(label_public=False: the label is protected too)"))
    elif names:
        unit, description = "features", f"protected features [{shown}] (label public)"
    else:
        unit, description = "none", "nothing (every feature and the label declared public)"
    return PrivacyPlan(dp_event=dp_event, epsilon=epsilon, delta=delta, accountant=accountant,
                       unit=unit, description=description, protected_features=names,
                       label_protected=bool(label_protected),
                       protected_columns=(None if protected_columns is None
                                          else tuple(int(i) for i in protected_columns)),
                       **kwargs)

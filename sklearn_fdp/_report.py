"""privacy_report: what a fitted estimator or Pipeline spent, composed in one accountant."""

import math

import numpy as np

from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from . import accounting
from ._steps import learns_from_data, plan_of
from .pipeline import _trace, mixes_rows

__all__ = ["PrivacyReport", "privacy_report"]

# Protected units, from the widest to the narrowest.
_UNIT_ORDER = {"record": 0, "private records": 1, "features+label": 2, "features": 3,
               "label": 3, "none": 4}


def _is_fitted(est):
    try:
        check_is_fitted(est)
    except (NotFittedError, TypeError):
        return False
    return True


def protected_unit(est):
    """``(unit, description)`` of what a fitted private estimator protects.

    From its ``privacy_plan_`` (the search's is its best trial's); ``unit``
    is one of :data:`sklearn_fdp._plan.UNITS`.
    """
    plan = plan_of(est)
    return plan.unit, plan.description


def _protected_set(est):
    """Protected attributes of a fitted private step: None for all of the record."""
    return plan_of(est).protected_set


def _common_protected(estimators, final=None, final_inputs=None):
    """Intersection of the protected sets (None: whole records for every step).

    ``final_inputs``: the pipeline input columns the last step ``final``
    protects, traced back through the steps before it; they stand for its
    own columns (named in its input, e.g. a FeatureDPPCA's outputs).
    """
    common = None
    for est in estimators:
        attrs = _protected_set(est)
        if est is final and final_inputs is not None and attrs is not None:
            own = set(plan_of(est).protected_features)
            attrs = (attrs - own) | set(final_inputs)
        if attrs is not None:
            common = attrs if common is None else common & attrs
    return common


def _final_step(est):
    steps = getattr(est, "steps", None)
    if steps:
        return _final_step(steps[-1][1])
    return est


def _is_search(est):
    from sklearn.model_selection._search import BaseSearchCV

    return isinstance(est, BaseSearchCV)


def _walk(est, name, out):
    """Append ``(name, estimator, kind)`` for every step; kind in
    {"private", "nonprivate", "free", "search"}."""
    if est is None or isinstance(est, str):  # "passthrough" / "drop"
        return
    if hasattr(est, "dp_event_"):
        out.append((name, est, "private"))
        return
    if _is_search(est):
        out.append((name, est, "search"))
        if hasattr(est, "best_estimator_"):
            _walk(est.best_estimator_, f"{name or type(est).__name__}.best_estimator_", out)
        return
    if hasattr(est, "steps"):  # Pipeline
        for sub_name, sub in est.steps:
            _walk(sub, f"{name}__{sub_name}" if name else sub_name, out)
        return
    if hasattr(est, "transformers_"):  # fitted ColumnTransformer
        for sub_name, sub, _cols in est.transformers_:
            if sub_name == "remainder" and isinstance(sub, str):
                continue
            _walk(sub, f"{name}__{sub_name}" if name else sub_name, out)
        return
    if hasattr(est, "transformer_list"):  # FeatureUnion
        for sub_name, sub in est.transformer_list:
            _walk(sub, f"{name}__{sub_name}" if name else sub_name, out)
        return
    if not isinstance(est, BaseEstimator) or not _is_fitted(est):
        return
    out.append((name, est, "nonprivate" if learns_from_data(est) else "free"))


def _preprocessing_audit(est):
    """``({id(step): PreprocessingStep}, split input columns, protected input
    columns)`` for the pipeline in ``est`` (:func:`sklearn_fdp.pipeline.audit_preprocessing`)."""
    if _is_search(est):
        if hasattr(est, "best_estimator_"):
            return _preprocessing_audit(est.best_estimator_)
    elif getattr(est, "steps", None):
        try:
            steps, split, protected = _trace(est)
        except Exception:  # noqa: BLE001 - untraceable: keep the conservative verdicts
            return {}, [], None
        return {id(s.estimator): s for s in steps}, split, protected
    return {}, [], None


def _kept_per_instance(est):
    """Fitted ``per_instance*`` attributes of a private step (or of its best estimator).

    Per-instance privacy figures (e.g. AdaMix's ``per_instance_mu_``, stored
    by versions before issue 16 item 6) are computed from the private records
    without noise: an object that carries them is not private.
    """
    found = [a for a in vars(est) if a.startswith("per_instance") and a.endswith("_")]
    inner = getattr(est, "best_estimator_", None)
    if inner is not None:
        found += [f"best_estimator_.{a}" for a in _kept_per_instance(_final_step(inner))]
    return sorted(found)


def _relation(est):
    return getattr(est, "neighboring_", None) or getattr(est, "neighboring", "add_remove")


def _safe_epsilon(event, delta, accountant, neighboring, notes=None):
    """ε of ``event`` (None if it cannot be accounted); ``notes`` collects a line
    when the other accountant had to answer (e.g. RDP's ε = 0 under huge noise)."""
    try:
        eps, used = accounting.epsilon_and_accountant(event, delta, accountant=accountant,
                                                      neighboring=neighboring)
    except Exception:  # noqa: BLE001 - e.g. PLD cannot account RepeatAndSelect
        return None
    if used != accountant and notes is not None:
        notes.append(
            f"the {accountant.upper()} accountant cannot resolve this total (its answer "
            f"was 0, infinite, or set by its largest order at delta {delta:g}): the "
            f"{accountant.upper()} figure is the {used.upper()} accountant's")
    return eps


class PrivacyReport:
    """What a fitted estimator or Pipeline spent; returned by :func:`privacy_report`.

    ``str(report)`` is a readable table; :meth:`to_dict` the same content as
    plain Python values. Attributes mirror the dict keys: ``delta``,
    ``epsilon_rdp``, ``epsilon_pld`` (``inf`` when a step is not private),
    ``private_steps_epsilon_rdp`` / ``_pld`` (the private steps alone),
    ``neighboring``, ``protected_unit``,
    ``steps`` (list of dicts) and ``warnings`` (list of str).

    Parameters
    ----------
    delta : float
        δ of the totals.
    epsilon_rdp : float or None
        Total ε by the RDP accountant (``inf`` if a step is not private).
    epsilon_pld : float or None
        Total ε by the PLD accountant (None where PLD does not apply).
    neighboring : str or None
        Neighbouring relation of the totals.
    protected_unit : str
        Narrowest unit protected by every private step.
    steps : list of dict
        One dict per step (name, estimator, kind, and ε for private steps).
    warnings : list of str
        Lines about non-private steps and other caveats.
    private_steps_epsilon : tuple of (float or None, float or None), default=(None, None)
        RDP and PLD ε of the private steps alone.
    declarations : dict or None, default=None
        Where the last step's declarations came from (a
        :class:`~sklearn_fdp.pipeline.PrivatePipeline` after a schema
        preprocessor): ``{parameter: {"source": ..., "value": ...}}`` for
        ``private_features``, ``row_norm_bounds``, ``y_bounds``.
    """

    def __init__(self, *, delta, epsilon_rdp, epsilon_pld, neighboring, protected_unit,
                 steps, warnings, private_steps_epsilon=(None, None), declarations=None):
        self.declarations = dict(declarations or {})
        self.private_steps_epsilon_rdp, self.private_steps_epsilon_pld = private_steps_epsilon
        self.delta = delta
        self.epsilon_rdp = epsilon_rdp
        self.epsilon_pld = epsilon_pld
        self.neighboring = neighboring
        self.protected_unit = protected_unit
        self.steps = steps
        self.warnings = warnings

    @property
    def is_private(self):
        """True when the total ε is finite and no step learnt from the data non-privately."""
        eps = self.epsilon_rdp
        return (eps is not None and math.isfinite(eps)
                and not any(s["kind"] in ("nonprivate", "search") or s.get("mixes_rows")
                            or s.get("nonprivate_attributes") for s in self.steps))

    def to_dict(self):
        """The report as a dict of plain Python values (JSON-serialisable)."""
        return {
            "delta": self.delta,
            "epsilon_rdp": self.epsilon_rdp,
            "epsilon_pld": self.epsilon_pld,
            "private_steps_epsilon_rdp": self.private_steps_epsilon_rdp,
            "private_steps_epsilon_pld": self.private_steps_epsilon_pld,
            "neighboring": self.neighboring,
            "protected_unit": self.protected_unit,
            "is_private": self.is_private,
            "steps": [dict(s) for s in self.steps],
            "warnings": list(self.warnings),
            "declarations": {k: dict(v) for k, v in self.declarations.items()},
        }

    def __str__(self):
        def fmt(eps):
            return "n/a" if eps is None else ("inf" if math.isinf(eps) else f"{eps:.4g}")

        lines = [f"Privacy report (delta = {self.delta:g}, neighbouring = {self.neighboring})"]
        lines.append(f"  total epsilon: RDP {fmt(self.epsilon_rdp)}, PLD {fmt(self.epsilon_pld)}")
        if not self.is_private and self.private_steps_epsilon_rdp is not None and (
                self.private_steps_epsilon_rdp != self.epsilon_rdp):
            lines.append("  (private steps alone: RDP "
                         f"{fmt(self.private_steps_epsilon_rdp)}, PLD "
                         f"{fmt(self.private_steps_epsilon_pld)}; not a guarantee for "
                         "the whole, see the warnings)")
        lines.append(f"  protected unit of the total: {self.protected_unit}")
        lines.append("  steps:")
        for s in self.steps:
            if s["kind"] == "private":
                lines.append(
                    f"    {s['name']} ({s['estimator']}): epsilon {fmt(s['epsilon'])} at "
                    f"delta {s['delta']:g} (own); RDP {fmt(s['epsilon_rdp'])} at report "
                    f"delta; protects {s['protected_unit']}"
                    + ("; but its transform mixes protected columns into public ones: "
                       "NOT PRIVATE" if s.get("mixes_rows") else ""))
            elif s["kind"] == "free":
                lines.append(f"    {s['name']} ({s['estimator']}): data-independent, free")
            elif s["kind"] == "public":
                lines.append(f"    {s['name']} ({s['estimator']}): learnt from public "
                             "columns only, free")
            else:
                lines.append(f"    {s['name']} ({s['estimator']}): NOT PRIVATE")
        if self.declarations:
            lines.append("  declarations of the last step:")
            for param, d in self.declarations.items():
                lines.append(f"    {param} = {d['value']!r}: from the {d['source']}")
        for w in self.warnings:
            lines.append(f"  WARNING: {w}")
        return "\n".join(lines)

    def __repr__(self):
        return (f"PrivacyReport(epsilon_rdp={self.epsilon_rdp!r}, "
                f"epsilon_pld={self.epsilon_pld!r}, delta={self.delta!r})")


def privacy_report(estimator, delta=None, *, pld=True):
    """Compose the privacy spent by every fitted private step of an estimator.

    Walks a fitted estimator, :class:`~sklearn.pipeline.Pipeline` (nested
    Pipelines, :class:`~sklearn.compose.ColumnTransformer` and
    :class:`~sklearn.pipeline.FeatureUnion` included), collects the
    ``dp_event_`` of every fitted private step and accounts their
    composition in one accountant (RDP, and PLD where it applies): the total
    is the tight ε of running all of them on the same data, not a sum of
    per-step ε. Fitted non-private steps that learnt from the data (e.g.
    :class:`~sklearn.preprocessing.StandardScaler`) are listed with a
    warning: the pipeline is then not differentially private, whatever ε
    its private steps report.

    Parameters
    ----------
    estimator : fitted estimator, Pipeline or search
        What to report on.
    delta : float or None, default=None
        δ at which the total ε is computed. None: the largest ``delta_`` of
        the private steps. The total is accounted afresh from the events at
        this δ; the steps' own δ are not added up.
    pld : bool, default=True
        Also compute the total with the PLD accountant (tighter, slower;
        ``None`` when an event is outside PLD, e.g. a private search's
        ``RepeatAndSelectDpEvent``).

    Returns
    -------
    report : PrivacyReport
        ``str(report)`` for text, ``report.to_dict()`` for a dict.

    Notes
    -----
    The total guarantee holds for datasets that differ in the narrowest unit
    protected by every private step (e.g. a record-level step composed with a
    feature-level step gives a feature-level total). Steps with different
    neighbouring relations are not composed (totals are None, with a
    warning). An sklearn ``GridSearchCV`` / ``RandomizedSearchCV`` selected its
    candidate by scores computed on the data without noise: it is reported
    as a non-private step and the total is ``inf``.
    """
    items = []
    _walk(estimator, "", items)
    if not items:
        raise ValueError(
            f"privacy_report found no fitted step in {type(estimator).__name__}; "
            "fit it first.")
    private = [(n, e) for n, e, k in items if k == "private"]
    if delta is None:
        delta = max((float(e.delta_) for _, e in private), default=1e-5)
    accounting._check_delta(delta)

    relations = {_relation(e) for _, e in private}
    warnings_ = []
    neighboring = relations.pop() if len(relations) == 1 else (
        "add_remove" if not relations else None)
    if neighboring is None:
        warnings_.append("private steps use different neighbouring relations; their "
                         "events are not composed (totals n/a)")
    steps = []
    units = []
    audit, split, protected_inputs = _preprocessing_audit(estimator)
    if split:
        warnings_.append(
            f"input column(s) {split!r} feed both protected and public columns of the "
            "final step: the public ones reveal them, the fitted pipeline is NOT private "
            "for them")
    for name, est, kind in items:
        label = name or type(est).__name__
        found = audit.get(id(est)) if kind in ("nonprivate", "free", "private") else None
        if found is not None and kind == "nonprivate" and found.status in ("public", "free"):
            kind = found.status  # traced: learnt from public columns only, or nothing
        mixes = found is not None and found.status == "mix"
        if mixes and kind != "private":
            kind = "nonprivate"  # e.g. Normalizer: public outputs depend on private ones
        row = {"name": label, "estimator": type(est).__name__, "kind": kind}
        if found is not None and found.status in ("leak", "mix"):
            row["columns"] = list(found.columns)
        if mixes:
            row["mixes_rows"] = True
        if kind == "private":
            code, unit = protected_unit(est)
            units.append((code, unit))
            rel = _relation(est)
            row.update(
                epsilon=float(est.epsilon_), delta=float(est.delta_),
                epsilon_rdp=_safe_epsilon(est.dp_event_, delta, "rdp", rel),
                neighboring=rel, protected_unit=unit, unit=code,
                dp_event=repr(est.dp_event_))
            kept = _kept_per_instance(est)
            if kept:
                row["nonprivate_attributes"] = kept
                warnings_.append(
                    f"step {label!r} ({type(est).__name__}) keeps {kept!r}: per-instance "
                    "figures computed from the private records without noise, a release "
                    "the DP guarantee does not cover; the fitted object is NOT private "
                    "(delete them before sharing it)")
        if mixes and not mixes_rows(est):
            warnings_.append(
                f"step {label!r} ({type(est).__name__}) has no column map: the tracer "
                "cannot tell which inputs each of its outputs reads, so public columns of "
                f"the final step may carry protected column(s) {row['columns']!r}; the "
                "fitted pipeline is NOT certified private (declare the map: "
                "feature_names_out='one-to-one' for a column-wise function, or "
                "__fdp_column_map__())")
        elif mixes:
            warnings_.append(
                f"step {label!r} ({type(est).__name__}) divides every column by the row "
                f"norm, which includes protected column(s) {row['columns']!r}: the public "
                "columns depend on protected values, so the fitted pipeline is NOT private "
                "(unless the protected columns add the same to every row's norm)")
        elif kind == "nonprivate" and "columns" in row:
            warnings_.append(
                f"step {label!r} ({type(est).__name__}) learnt from protected "
                f"column(s) {row['columns']!r} without differential privacy: the fitted "
                "pipeline is NOT private")
        elif kind == "nonprivate":
            warnings_.append(
                f"step {label!r} ({type(est).__name__}) learnt from the training data "
                "without differential privacy: the fitted pipeline is NOT private")
        elif kind == "search":
            warnings_.append(
                f"step {label!r} ({type(est).__name__}) chose its candidate by scores "
                "computed on the data without noise: model selection is NOT private, and "
                "its cross-validation fits spent budget that no dp_event_ records (use "
                "sklearn_fdp.model_selection.PrivateRandomizedSearchCV)")
        steps.append(row)

    eps_rdp = eps_pld = None
    if private and neighboring is not None:
        event = accounting.compose_events(*(e.dp_event_ for _, e in private))
        eps_rdp = _safe_epsilon(event, delta, "rdp", neighboring, warnings_)
        if pld:
            eps_pld = _safe_epsilon(event, delta, "pld", neighboring, warnings_)
    elif not private:
        eps_rdp = eps_pld = math.inf
        warnings_.append("no private step: nothing here is differentially private")
    private_only = (eps_rdp, eps_pld)
    if split or any(s["kind"] in ("nonprivate", "search") or s.get("mixes_rows")
                    or s.get("nonprivate_attributes")
                    for s in steps):
        eps_rdp = math.inf if eps_rdp is not None else None
        eps_pld = math.inf if eps_pld is not None else None
    unit = (max(units, key=lambda u: _UNIT_ORDER[u[0]])[1] if units else "none")
    narrowest = max(units, key=lambda u: _UNIT_ORDER[u[0]])[0] if units else None
    if protected_inputs and narrowest in ("features", "features+label"):
        # A traced pipeline: name the protected columns of its input too.
        shown = ", ".join(protected_inputs[:8]) + (", ..." if len(protected_inputs) > 8 else "")
        unit += f"; pipeline input columns protected: [{shown}]"
    if len({c for c, _ in units}) > 1:
        unit += " (the narrowest unit protected by every private step)"
    common = _common_protected([e for _, e in private], _final_step(estimator),
                               protected_inputs)
    if private and common is not None and not common:
        warnings_.append(
            "no attribute is protected by every private step (e.g. one step protects "
            "only the label and another only some features): the composition protects "
            "nothing, the totals are inf")
        unit = "nothing common to all steps"
        eps_rdp = math.inf if eps_rdp is not None else None
        eps_pld = math.inf if eps_pld is not None else None
    declared = {param: {"source": source, "value": _plain(value)}
                for param, (source, value) in getattr(estimator, "declarations_", {}).items()}
    return PrivacyReport(delta=float(delta), epsilon_rdp=eps_rdp, epsilon_pld=eps_pld,
                         neighboring=neighboring, protected_unit=unit, steps=steps,
                         warnings=warnings_, private_steps_epsilon=private_only,
                         declarations=declared)


def _plain(value):
    """A declaration's value as plain Python (lists of str, floats)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)

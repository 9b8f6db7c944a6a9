"""Empirical privacy audits with inserted canaries.

A DP claim is an *upper* bound on how well anyone can tell two neighbouring
training sets apart from the model. An audit runs an actual distinguishing
attack and turns its measured error rates into a *lower* bound on ε that
holds with a stated confidence. A lower bound above the claim means the
implementation (or its accounting) is broken; a lower bound below the claim
proves nothing more than that this attack did not find a problem.

Two audits are implemented:

* :func:`canary_audit` trains many models, half of them with a canary
  record, scores the canary in every model, picks a threshold on a
  calibration part of the runs and converts the true/false positive rates
  of the other runs to ε with Clopper–Pearson bounds (the hypothesis-testing
  view of DP: Kairouz, Oh & Viswanath 2015; Jagielski, Ullman & Oprea 2020).
* :func:`canary_audit_one_run` trains one model on data where each of ``m``
  canaries is included with probability 1/2, guesses which were included
  and bounds ε from the number of correct guesses (Steinke, Nasr &
  Jagielski 2023).

The canaries are the worst case this package knows for linear models: a
record that is zero everywhere except in a column of its own, which every
other record has at 0. Its gradient is the only one that ever touches that
coordinate, so the model's weight there is (up to the noise) the canary's
clipped contribution, and no other record's gradient cancels it.
"""

import math
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from scipy import stats
from sklearn.base import clone
from sklearn.utils import check_random_state

__all__ = [
    "CanaryAuditResult",
    "OneRunAuditResult",
    "canary_audit",
    "canary_audit_one_run",
]

RELATIONS = ("membership", "feature")


# -- statistics --------------------------------------------------------------


def _cp_lower(k, n, alpha):
    """One-sided Clopper–Pearson lower bound at level ``1 - alpha`` (0 when k = 0)."""
    if n == 0:
        return 0.0
    return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


def _cp_upper(k, n, alpha):
    """One-sided Clopper–Pearson upper bound at level ``1 - alpha`` (1 when k = n)."""
    if n == 0:
        return 1.0
    return 1.0 if k == n else float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def _epsilon_from_rates(tpr, fpr, delta):
    """Largest ε that an (ε, δ)-DP mechanism would contradict at these rates.

    An (ε, δ)-DP mechanism admits no test with false positive rate ``fpr``
    and false negative rate ``fnr = 1 - tpr`` unless both
    ``fpr + e^ε fnr >= 1 - δ`` and ``fnr + e^ε fpr >= 1 - δ`` (Kairouz et
    al. 2015, Thm. 2.1). Solving each for ε gives
    ``max(log((tpr - δ) / fpr), log((1 - δ - fpr) / (1 - tpr)))``; returns 0
    when neither is positive (no evidence against any ε).
    """
    fnr = 1.0 - tpr
    candidates = [0.0]
    with np.errstate(divide="ignore"):
        if tpr - delta > 0:
            candidates.append(math.inf if fpr <= 0 else math.log((tpr - delta) / fpr))
        if 1.0 - delta - fpr > 0:
            candidates.append(math.inf if fnr <= 0 else math.log((1.0 - delta - fpr) / fnr))
    return max(candidates)


def _epsilon_lower_bound_counts(tp, n_in, fp, n_out, delta, confidence):
    """ε lower bound from counts, with the rates' Clopper–Pearson intervals.

    ``tp`` of ``n_in`` runs with the canary and ``fp`` of ``n_out`` runs
    without it were guessed "in". The TPR is bounded below and the FPR
    above, each by a one-sided Clopper–Pearson bound at level
    ``1 - (1 - confidence) / 2``; by the union bound both hold at once with
    probability ``>= confidence``, and then so does the returned ε bound
    (:func:`_epsilon_from_rates` is increasing in TPR and decreasing in FPR).

    Returns ``(epsilon_lb, (tpr_lo, tpr_hi), (fpr_lo, fpr_hi))``; the
    intervals are the two-sided Clopper–Pearson intervals at ``confidence``,
    whose ends are the one-sided bounds above.
    """
    alpha = (1.0 - confidence) / 2.0
    tpr_ci = (_cp_lower(tp, n_in, alpha), _cp_upper(tp, n_in, alpha))
    fpr_ci = (_cp_lower(fp, n_out, alpha), _cp_upper(fp, n_out, alpha))
    eps = _epsilon_from_rates(tpr_ci[0], fpr_ci[1], delta)
    return eps, tpr_ci, fpr_ci


def _one_run_p_value(m, r, v, epsilon, delta):
    """p-value of ``>= v`` correct guesses out of ``r`` under (ε, δ)-DP, ``m`` canaries.

    Steinke, Nasr & Jagielski (2023), Thm. 5.2 in the form of their
    Appendix D: with ``q = e^ε / (1 + e^ε)`` (the accuracy of ε-randomised
    response), ``P[W >= v] <= P[Binomial(r, q) >= v] + 2 m δ α`` where
    ``α = max_{1 <= i <= v} P[v - i <= Binomial(r, q) < v] / i``.
    """
    q = 1.0 / (1.0 + math.exp(-epsilon))
    beta = float(stats.binom.sf(v - 1, r, q))
    if v <= 0 or delta == 0:
        return min(1.0, beta)
    # P[Binomial = v - i] for i = 1..v, accumulated: P[v - i <= B < v].
    pmf = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)
    alpha = float(np.max(np.cumsum(pmf) / np.arange(1, v + 1)))
    return min(1.0, beta + alpha * delta * 2.0 * m)


def _one_run_epsilon(m, r, v, delta, confidence, *, tol=1e-6):
    """Largest ε whose p-value for ``v`` correct of ``r`` guesses is below ``1 - confidence``.

    The p-value increases with ε, so bisection finds where it crosses the
    level; every ε below that is rejected at ``confidence`` (Steinke, Nasr
    & Jagielski 2023, Appendix D). Returns 0 when even ε = 0 is not
    rejected.
    """
    level = 1.0 - confidence
    if r == 0 or _one_run_p_value(m, r, v, 0.0, delta) >= level:
        return 0.0
    lo, hi = 0.0, 1.0
    while _one_run_p_value(m, r, v, hi, delta) < level:
        lo, hi = hi, 2.0 * hi
        if hi > 1e3:  # pragma: no cover - needs astronomically many guesses
            return lo
    while hi - lo > tol * max(1.0, lo):
        mid = 0.5 * (lo + hi)
        if _one_run_p_value(m, r, v, mid, delta) < level:
            lo = mid
        else:
            hi = mid
    return lo


# -- results -----------------------------------------------------------------


class _ClaimCheck:
    """What both audit results share: the claim test and the bound's text."""

    @property
    def refutes_claim(self):
        """True when the lower bound exceeds the claimed ε (the claim is wrong)."""
        return self.claimed_epsilon is not None and self.epsilon_lower_bound > \
            self.claimed_epsilon

    def _bound_text(self):
        claim = "none" if self.claimed_epsilon is None else f"{self.claimed_epsilon:.3g}"
        return (f"ε lower bound {self.epsilon_lower_bound:.3f} (confidence "
                f"{self.confidence:g}, δ={self.delta:g}) vs claimed {claim}")

    def summary(self):
        """A one-line report.

        Returns
        -------
        line : str
            The bound, its confidence and δ, the claim and the evidence.
        """
        return f"{self._bound_text()}; {self._evidence_text()}"


@dataclass(frozen=True)
class CanaryAuditResult(_ClaimCheck):
    """What :func:`canary_audit` measured.

    Returned by :func:`canary_audit`; the fields are read-only attributes.

    Parameters
    ----------
    epsilon_lower_bound : float
        ε that the runs refute at ``confidence``: no (ε', δ)-DP mechanism
        with ε' below it would, except with probability ``1 - confidence``,
        let the audit's test reach the measured rates. 0 when the runs give
        no evidence.
    claimed_epsilon : float or None
        Largest ``epsilon_`` reported by the fitted models (None when they
        report none).
    delta : float
        δ at which ε is bounded.
    confidence : float
        Probability with which ``epsilon_lower_bound`` is a valid bound.
    relation : str
        ``"membership"`` or ``"feature"`` (see :func:`canary_audit`).
    n_runs : int
        Models trained.
    n_calibration : int
        Runs used to choose the threshold (not used in the bound).
    n_in, n_out : int
        Evaluation runs with and without the canary.
    true_positives, false_positives : int
        Evaluation runs guessed "in" among the ``n_in`` and ``n_out`` runs.
    tpr, fpr : float
        Their rates.
    tpr_interval, fpr_interval : tuple of float
        Two-sided Clopper–Pearson intervals at ``confidence``; the bound uses
        the lower end of the first and the upper end of the second.
    threshold : float
        Runs with score ``>= threshold`` are guessed "in".
    scores : ndarray of shape (n_runs,)
        Score of the canary in every run.
    canary_in : ndarray of bool of shape (n_runs,)
        Whether the run trained with the canary.
    calibration : ndarray of bool of shape (n_runs,)
        Whether the run was used for the threshold.
    """

    epsilon_lower_bound: float
    claimed_epsilon: float | None
    delta: float
    confidence: float
    relation: str
    n_runs: int
    n_calibration: int
    n_in: int
    n_out: int
    true_positives: int
    false_positives: int
    tpr: float
    fpr: float
    tpr_interval: tuple
    fpr_interval: tuple
    threshold: float
    scores: np.ndarray = field(repr=False)
    canary_in: np.ndarray = field(repr=False)
    calibration: np.ndarray = field(repr=False)

    def _evidence_text(self):
        return (
            f"{self.n_runs} runs "
            f"({self.n_calibration} calibration), TPR {self.tpr:.3f} "
            f"[{self.tpr_interval[0]:.3f}, {self.tpr_interval[1]:.3f}], FPR {self.fpr:.3f} "
            f"[{self.fpr_interval[0]:.3f}, {self.fpr_interval[1]:.3f}]"
        )


@dataclass(frozen=True)
class OneRunAuditResult(_ClaimCheck):
    """What :func:`canary_audit_one_run` measured.

    Returned by :func:`canary_audit_one_run`; the fields are read-only
    attributes.

    Parameters
    ----------
    epsilon_lower_bound : float
        ε refuted at ``confidence`` (Steinke, Nasr & Jagielski 2023); 0 when
        the guesses give no evidence.
    claimed_epsilon : float or None
        ``epsilon_`` of the fitted model.
    delta : float
        δ at which ε is bounded.
    confidence : float
        Probability with which the bound is valid.
    relation : str
        ``"membership"`` or ``"feature"``.
    n_canaries : int
        Canaries ``m``, each included independently with probability 1/2.
    n_included : int
        How many were included.
    k_pos, k_neg : int
        Guesses "in" (highest scores) and "out" (lowest scores).
    n_guesses : int
        ``r = k_pos + k_neg``.
    n_correct : int
        ``v``, correct guesses.
    scores : ndarray of shape (n_canaries,)
        Score of every canary.
    canary_in : ndarray of bool of shape (n_canaries,)
        Whether the canary was included.
    """

    epsilon_lower_bound: float
    claimed_epsilon: float | None
    delta: float
    confidence: float
    relation: str
    n_canaries: int
    n_included: int
    k_pos: int
    k_neg: int
    n_guesses: int
    n_correct: int
    scores: np.ndarray = field(repr=False)
    canary_in: np.ndarray = field(repr=False)

    def _evidence_text(self):
        return (
            f"one run, {self.n_canaries} canaries, "
            f"{self.n_correct}/{self.n_guesses} guesses correct"
        )


# -- shared helpers ----------------------------------------------------------


def _check_number(name, value, low, high, *, integer=False, low_closed=False,
                  high_closed=False):
    kind = Integral if integer else Real
    if isinstance(value, bool) or not isinstance(value, kind):
        what = "an integer" if integer else "a real number"
        raise TypeError(f"`{name}` must be {what}, got {value!r}.")
    ok_low = value >= low if low_closed else value > low
    ok_high = value <= high if high_closed else value < high
    if not (ok_low and ok_high) or value != value:
        interval = f"{'[' if low_closed else '('}{low:g}, {high:g}{']' if high_closed else ')'}"
        raise ValueError(f"`{name}` must be in {interval}, got {value!r}.")


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices!r}, got {value!r}.")


def _as_dense(X, y, where):
    if hasattr(X, "toarray") and not isinstance(X, np.ndarray):
        raise TypeError(
            f"{where} needs a dense X (the canary columns are appended to it), got "
            f"{type(X).__name__}. Pass X.toarray() for small data."
        )
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2:
        raise ValueError(f"{where}: X must be 2-D, got shape {X.shape!r}.")
    if y.shape != (X.shape[0],):
        raise ValueError(
            f"{where}: y must have shape ({X.shape[0]},) to match X, got {y.shape!r}."
        )
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{where}: X contains NaN or infinite values.")
    return X, y


def _make_estimator(factory, seed):
    """A fresh unfitted estimator seeded with ``seed``."""
    if hasattr(factory, "fit") and hasattr(factory, "get_params"):
        return clone(factory).set_params(random_state=seed)
    if not callable(factory):
        raise TypeError(
            "`estimator_factory` must be an estimator (it is cloned and given "
            "random_state) or a callable random_state -> unfitted estimator, got "
            f"{factory!r}."
        )
    return factory(seed)


def _default_label(y, canary_label, where):
    classes, counts = np.unique(y, return_counts=True)
    if canary_label is None:
        # The least frequent class: the intercept then pulls the canary away
        # from its label, so its gradient stays large for longer.
        return classes[np.argmin(counts)]
    if canary_label not in set(classes.tolist()):
        raise ValueError(
            f"{where}: canary_label={canary_label!r} is not a class of y "
            f"({classes.tolist()!r}). Use one of them."
        )
    return canary_label


def _signed_scores(estimator, X_canary, y_canary, X_base):
    """Margin of each canary's label, relative to a base record, in a fitted model.

    ``decision_function`` of the canary minus that of ``X_base`` (the
    record with the canary's private part removed; zeros for a membership
    canary), signed by the canary's label (binary) or taken as the label's
    column minus the mean of the others (multiclass). For a linear model
    this is ``θ · (x_canary − x_base)`` in the label's direction: the
    weight the canary's own gradient has built.
    """
    if not hasattr(estimator, "decision_function"):
        raise TypeError(
            f"The default score needs decision_function, which "
            f"{type(estimator).__name__} lacks. Pass score=callable(estimator, "
            "x_canary, y_canary) -> float."
        )
    classes = estimator.classes_
    Z = np.asarray(estimator.decision_function(np.vstack([X_canary, X_base])), dtype=float)
    m = X_canary.shape[0]
    Zc, Zb = Z[:m], Z[m:]
    diff = Zc - Zb
    if diff.ndim == 1:
        sign = np.where(np.asarray(y_canary) == classes[1], 1.0, -1.0)
        return sign * diff
    col = np.searchsorted(classes, y_canary)
    rows = np.arange(m)
    own = diff[rows, col]
    others = (diff.sum(axis=1) - own) / (diff.shape[1] - 1)
    return own - others


def _check_private_columns(estimator, columns, where):
    """A feature audit must toggle private columns only (when the model says which)."""
    mask = getattr(estimator, "public_mask_", None)
    if mask is None:
        return
    public = [int(c) for c in columns if c < len(mask) and mask[c]]
    if public:
        raise ValueError(
            f"{where}: relation='feature' toggles column(s) {public[:5]!r}, which "
            f"{type(estimator).__name__} treats as public. Declare them private (e.g. "
            "give public_features as the indices of X's own public columns)."
        )


def _claimed(estimators):
    eps = [getattr(e, "epsilon_", None) for e in estimators]
    eps = [float(e) for e in eps if e is not None]
    return max(eps) if eps else None


def _resolve_delta(delta, estimators, where):
    if delta is not None:
        _check_number("delta", delta, 0.0, 1.0, low_closed=True)
        return float(delta)
    deltas = [getattr(e, "delta_", None) for e in estimators]
    deltas = [float(d) for d in deltas if d is not None]
    if not deltas:
        raise ValueError(
            f"{where}: the fitted models have no `delta_`; pass delta= (the δ at "
            "which to bound ε)."
        )
    return max(deltas)


# -- the multi-run audit -------------------------------------------------------


def _choose_threshold(scores, member, delta, confidence):
    """Threshold that maximises the ε bound on the calibration runs.

    Candidates lie halfway between consecutive distinct calibration scores
    (guess "in" when ``score >= t``), so a threshold that separates the
    calibration runs leaves a margin on both sides for the evaluation runs.
    The objective is the Clopper–Pearson bound computed on these runs, so a
    threshold that separates many runs wins over one that separates few by
    luck.
    """
    values = np.unique(scores)
    if values.size == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        mid = 0.5 * values[:-1] + 0.5 * values[1:]
    # Between an infinite score and its neighbour, use the finite side's next value.
    mid = np.where(np.isfinite(mid), mid, values[1:])
    candidates = np.concatenate([values[:1], mid])
    s_in, s_out = np.sort(scores[member]), np.sort(scores[~member])
    best, best_key = candidates[0], (-np.inf, -np.inf)
    for t in candidates:
        tp = s_in.size - np.searchsorted(s_in, t, side="left")
        fp = s_out.size - np.searchsorted(s_out, t, side="left")
        lb, _, _ = _epsilon_lower_bound_counts(int(tp), s_in.size, int(fp), s_out.size,
                                               delta, confidence)
        # Tie-break (e.g. every bound 0 on few runs): the same bound at
        # confidence 1/2, which stays finite where raw rates of 0 or 1 do not.
        mild, _, _ = _epsilon_lower_bound_counts(int(tp), s_in.size, int(fp), s_out.size,
                                                 delta, 0.5)
        key = (lb, mild)
        if key > best_key:
            best, best_key = t, key
    return float(best)


def canary_audit(
    estimator_factory,
    X,
    y,
    *,
    n_runs,
    canary="auto",
    canary_norm=1000.0,
    canary_label=None,
    relation="membership",
    reference=None,
    score=None,
    calibration_fraction=0.25,
    confidence=0.95,
    delta=None,
    random_state=None,
):
    """Empirical ε lower bound from many training runs with and without a canary.

    Trains ``n_runs`` models; a seeded random half of them sees the canary
    record. After each fit, the canary gets a score (by default its signed
    margin, see below). A threshold on the score is chosen on a random
    ``calibration_fraction`` of the runs; on the remaining runs the guess
    "canary in" (score ≥ threshold) has a true and a false positive rate,
    which Clopper–Pearson bounds turn into an ε that an (ε, δ)-DP mechanism
    would contradict: ``max(log((TPR_lo − δ) / FPR_hi),
    log((1 − δ − FPR_hi) / (1 − TPR_lo)))`` (Kairouz et al. 2015). The
    threshold is never chosen on the runs that are counted, so the bound
    holds with probability at least ``confidence``.

    The result is a lower bound for this canary and this attack: a value
    above the model's claimed ε proves the claim wrong (a bug in clipping,
    noise, sampling or accounting); a value below it is expected -- the
    attacker sees only the final model, not every noisy step the accountant
    charges for, and a few hundred runs cannot certify a large ε (with
    ``n`` evaluation runs per side and perfect separation the bound is about
    ``log(n / 3.7)`` at 95 %).

    Parameters
    ----------
    estimator_factory : estimator or callable
        An unfitted estimator, cloned for every run with ``random_state``
        set to a fresh seed, or a callable ``seed -> unfitted estimator``.
        It is fitted on a copy of ``X`` with the canary column(s) appended
        (see ``canary``); a feature-DP estimator must treat that column as
        private (e.g. give its ``public_features`` as the indices of ``X``'s
        own public columns).
    X : array-like of shape (n_samples, n_features)
        Training data of every run (dense; converted to float64).
    y : array-like of shape (n_samples,)
        Labels.
    n_runs : int
        Number of models to train, >= 8. Even a perfect attack refutes a
        claim of ε only with about ``7.4 e^ε / (1 − calibration_fraction)``
        runs or more (at 95 %): 27 for ε = 1, 540 for ε = 4.
    canary : "auto" or tuple (x, label), default="auto"
        ``"auto"``: append one all-zero column to ``X`` and use the record
        ``canary_norm · e_new`` with label ``canary_label``: its gradient is
        the only one that touches the new coordinate. A tuple gives the
        canary record (of length ``n_features``; no column is appended).
    canary_norm : float, default=1000.0
        Norm of the ``"auto"`` canary, > 0. A large norm makes the canary's
        gradient point (almost) exactly along its own column and its raw,
        unclipped size huge, so a missing clip is caught: its weight then
        jumps far beyond the noise whenever the canary is misfitted. Under
        correct clipping it contributes at most ``max_grad_norm`` per step,
        like any record.
    canary_label : label or None, default=None
        Label of the ``"auto"`` canary; None takes the least frequent class.
    relation : {"membership", "feature"}, default="membership"
        ``"membership"``: the canary is added to the data or not (add/remove
        DP). ``"feature"``: the canary record is always in the data, with
        either its own private part or that of ``reference`` (same public
        part, same label): the neighbouring relation of feature DP (FDP
        paper, Def. 5/6). For the ``"auto"`` canary the reference is the
        zero record with the canary's label, i.e. the canary with its
        private column emptied.
    reference : tuple (x, label) or None, default=None
        The "out" record for ``relation="feature"`` with an explicit canary.
    score : callable or None, default=None
        ``score(fitted_estimator, x_canary, label) -> float``, larger meaning
        "canary in". None: ``decision_function`` at the canary minus at the
        reference record (zeros for membership), signed by the canary's
        label: for a linear model, the weight along the canary.
    calibration_fraction : float, default=0.25
        Share of the runs (chosen at random) used only to pick the
        threshold, in (0, 1).
    confidence : float, default=0.95
        Probability, in (0, 1), with which the returned bound is valid.
    delta : float or None, default=None
        δ at which ε is bounded; None uses the models' ``delta_``.
    random_state : int, RandomState instance or None, default=None
        Seeds which runs see the canary, the calibration split and every
        run's ``random_state``.

    Returns
    -------
    result : CanaryAuditResult
        The bound, its confidence, the rates with their intervals, the
        claimed ε (the models' ``epsilon_``) and every run's score.

    Raises
    ------
    ValueError
        A parameter out of range, a malformed canary or reference.
    TypeError
        Sparse ``X``, or an estimator without ``decision_function`` and no
        ``score``.

    See Also
    --------
    canary_audit_one_run : the same question from a single training run.

    Notes
    -----
    Feature DP. :class:`~sklearn_fdp.FeatureDPLogisticRegression` does not
    hide membership; it hides the *private* part of a record whose public
    part Ψ(x) is known. Audit it with ``relation="feature"``: both worlds
    contain the canary record with the same public part and label, and differ
    only in its private part (the canary's private column holds
    ``canary_norm`` or 0). With a public label and ``public_loss="mask"``
    the "out" record has ``∇ℓ − ∇ℓ_pub = 0``, so training on it is the
    simulator of the FDP paper's proof of Thm. 5 (Algorithm 2: private batch
    from the other records, public batches including a record with public
    part Ψ(x)), run at the sampling rate of the ``n + 1``-row data that
    both worlds share; the two worlds then differ like an add/remove pair of
    DP-SGD with per-record sensitivity ``max_grad_norm``, and the claimed
    add/remove ε (Def. 6) bounds the attack. With a private label (part of
    the private data) or Gaussian padding the "out" record's private
    gradient is not zero and the pair is a *replacement* (Def. 5, sensitivity
    up to twice the clip norm): compare with an estimator fitted with
    ``neighboring="replace"``.

    A feature-DP estimator makes no membership claim: a membership audit of
    it may exceed its ``epsilon_`` without refuting anything.

    In the membership audit the two worlds have ``n + 1`` and ``n`` rows;
    the estimators treat ``n`` as public (``q = batch_size / n``), which
    changes the sampling rate by a factor ``n / (n + 1)`` between worlds.

    References
    ----------
    Kairouz, Oh & Viswanath, "The Composition Theorem for Differential
    Privacy", ICML 2015. Jagielski, Ullman & Oprea, "Auditing Differentially
    Private Machine Learning: How Private is Private SGD?", NeurIPS 2020.
    Nasr et al., "Tight Auditing of Differentially Private Machine
    Learning", USENIX Security 2023. Mahloujifar, Guo et al., "Machine
    Learning with Privacy for Protected Attributes" (Def. 5/6, Thm. 5).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp import DPSGDClassifier
    >>> from sklearn_fdp.audit import canary_audit
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4))
    >>> X /= np.linalg.norm(X, axis=1, keepdims=True)
    >>> y = (X[:, 0] > 0).astype(int)
    >>> clf = DPSGDClassifier(epsilon=None, noise_multiplier=2.0, batch_size=60,
    ...                       epochs=2, accountant="rdp")
    >>> result = canary_audit(clf, X, y, n_runs=40, random_state=0)
    >>> result.n_runs, result.n_calibration
    (40, 10)
    >>> bool(result.epsilon_lower_bound <= result.claimed_epsilon)
    True
    """
    where = "canary_audit"
    _check_number("n_runs", n_runs, 8, math.inf, integer=True, low_closed=True)
    _check_number("calibration_fraction", calibration_fraction, 0.0, 1.0)
    _check_number("confidence", confidence, 0.0, 1.0)
    _check_number("canary_norm", canary_norm, 0.0, math.inf)
    _check_choice("relation", relation, RELATIONS)
    X, y = _as_dense(X, y, where)
    n, d = X.shape

    if isinstance(canary, str):
        _check_choice("canary", canary, ("auto",))
        if reference is not None:
            raise ValueError(
                f"{where}: `reference` is only for an explicit canary; the 'auto' "
                "canary's reference is the zero record with its label."
            )
        label = _default_label(y, canary_label, where)
        X_data = np.hstack([X, np.zeros((n, 1))])
        x_in = np.zeros(d + 1)
        x_in[d] = float(canary_norm)
        x_ref = np.zeros(d + 1)
    else:
        x_in, label = _parse_record(canary, d, "canary", where)
        X_data = X
        if relation == "feature":
            if reference is None:
                raise ValueError(
                    f"{where}: relation='feature' with an explicit canary needs "
                    "reference=(x, label): the same record with its private part "
                    "replaced."
                )
            x_ref, ref_label = _parse_record(reference, d, "reference", where)
            if ref_label != label:
                raise ValueError(
                    f"{where}: the reference's label {ref_label!r} differs from the "
                    f"canary's {label!r}; a public label must be the same in both "
                    "worlds (for a private label, make it the canary's label anyway: "
                    "the audit then tests the private columns only)."
                )
        else:
            if reference is not None:
                raise ValueError(f"{where}: `reference` is only used with relation='feature'.")
            x_ref = np.zeros(d)

    rs = check_random_state(random_state)
    canary_in = rs.permutation(np.arange(n_runs) < n_runs // 2)
    seeds = rs.randint(0, np.iinfo(np.int32).max, size=n_runs)
    n_cal = min(max(2, int(round(calibration_fraction * n_runs))), n_runs - 2)
    calibration = np.zeros(n_runs, dtype=bool)
    calibration[rs.permutation(n_runs)[:n_cal]] = True

    X_with = np.vstack([X_data, x_in[None, :]])
    y_with = np.concatenate([y, np.asarray([label])])  # upcasts, never truncates a label
    if relation == "feature":
        X_without = np.vstack([X_data, x_ref[None, :]])
        y_without = y_with
    else:
        X_without, y_without = X_data, y

    scores = np.empty(n_runs)
    fitted = []
    for i in range(n_runs):
        est = _make_estimator(estimator_factory, int(seeds[i]))
        if canary_in[i]:
            est.fit(X_with.copy(), y_with.copy())
        else:
            est.fit(X_without.copy(), y_without.copy())
        if score is None:
            s = _signed_scores(est, x_in[None, :], np.asarray([label]), x_ref[None, :])[0]
        else:
            s = score(est, x_in.copy(), label)
        scores[i] = float(s)
        if i == 0 and relation == "feature":
            _check_private_columns(est, np.flatnonzero(x_in != x_ref), where)
        fitted.append(_Claims(getattr(est, "epsilon_", None), getattr(est, "delta_", None)))
    if np.any(np.isnan(scores)):
        raise ValueError(f"{where}: the score is NaN in {int(np.isnan(scores).sum())} runs.")

    delta = _resolve_delta(delta, fitted, where)
    cal_in = canary_in[calibration]
    threshold = _choose_threshold(scores[calibration], cal_in, delta, confidence)
    ev = ~calibration
    s_ev, in_ev = scores[ev], canary_in[ev]
    n_in, n_out = int(in_ev.sum()), int((~in_ev).sum())
    tp = int(np.sum(s_ev[in_ev] >= threshold))
    fp = int(np.sum(s_ev[~in_ev] >= threshold))
    eps_lb, tpr_ci, fpr_ci = _epsilon_lower_bound_counts(tp, n_in, fp, n_out, delta,
                                                         confidence)
    tpr = tp / n_in if n_in else float("nan")
    fpr = fp / n_out if n_out else float("nan")
    return CanaryAuditResult(
        epsilon_lower_bound=float(eps_lb),
        claimed_epsilon=_claimed(fitted),
        delta=delta,
        confidence=float(confidence),
        relation=relation,
        n_runs=int(n_runs),
        n_calibration=int(n_cal),
        n_in=n_in,
        n_out=n_out,
        true_positives=tp,
        false_positives=fp,
        tpr=float(tpr),
        fpr=float(fpr),
        tpr_interval=tuple(float(v) for v in tpr_ci),
        fpr_interval=tuple(float(v) for v in fpr_ci),
        threshold=float(threshold),
        scores=scores,
        canary_in=canary_in,
        calibration=calibration,
    )


@dataclass(frozen=True)
class _Claims:
    """``epsilon_`` / ``delta_`` of a fitted model (the model itself is not kept)."""

    epsilon_: float | None
    delta_: float | None


def _parse_record(record, d, name, where):
    try:
        x, label = record
    except (TypeError, ValueError):
        raise ValueError(
            f"{where}: `{name}` must be 'auto' or a pair (x, label), got {record!r}."
        ) from None
    x = np.asarray(x, dtype=np.float64).ravel()
    if x.shape != (d,) or not np.all(np.isfinite(x)):
        raise ValueError(
            f"{where}: the {name} record must be {d} finite numbers (one per column "
            f"of X), got shape {x.shape!r}."
        )
    return x, label


# -- the one-run audit -------------------------------------------------------


def canary_audit_one_run(
    estimator,
    X,
    y,
    *,
    n_canaries,
    canary_norm=1000.0,
    relation="membership",
    k_pos=None,
    k_neg=None,
    score=None,
    confidence=0.95,
    delta=None,
    random_state=None,
):
    """Empirical ε lower bound from one training run (Steinke, Nasr & Jagielski 2023).

    Appends ``n_canaries`` all-zero columns to ``X`` and makes canary ``i``
    the record ``canary_norm · e_(d+i)`` with a random label. Each canary is
    included independently with probability 1/2 and one model is trained.
    The ``k_pos`` canaries with the highest scores are guessed "in", the
    ``k_neg`` with the lowest "out"; if ``v`` of these ``r = k_pos + k_neg``
    guesses are right, every ε for which an (ε, δ)-DP mechanism would make
    ``v`` or more right guesses with probability below ``1 − confidence``
    is refuted. The p-value is the paper's bound (Thm. 5.2, computed as in
    its Appendix D): ``P[Binomial(r, e^ε/(1+e^ε)) ≥ v] + 2 m δ α`` with
    ``α = max_i P[v − i ≤ Binomial(r, e^ε/(1+e^ε)) < v] / i``.

    One run is cheap, but the bound is weaker than the many-run audit's
    for the same model: it is meant to catch gross failures (no noise, no
    clipping), not to measure how tight an analysis is. With all ``r``
    guesses right it is about ``log(r / 3)`` at 95 %.

    Parameters
    ----------
    estimator : estimator or callable
        An unfitted estimator (cloned, ``random_state`` set from
        ``random_state``) or a callable ``seed -> unfitted estimator``. It
        is fitted on ``X`` with the ``n_canaries`` canary columns appended
        after ``X``'s own columns (indices ``n_features`` to
        ``n_features + n_canaries − 1``); a feature-DP estimator must treat
        them as private (give ``public_features`` as indices into ``X``).
    X : array-like of shape (n_samples, n_features)
        Training data (dense; converted to float64).
    y : array-like of shape (n_samples,)
        Labels; the canaries' labels are drawn uniformly from its classes.
    n_canaries : int
        Number of canaries ``m``, >= 2.
    canary_norm : float, default=1000.0
        Norm of every canary, > 0 (see :func:`canary_audit`).
    relation : {"membership", "feature"}, default="membership"
        ``"membership"``: an excluded canary is absent from the data.
        ``"feature"``: every canary record is in the data with its label;
        an excluded one has its private column at 0 (the feature-DP
        neighbouring relation; see the Notes of :func:`canary_audit`).
    k_pos, k_neg : int or None, default=None
        Number of "in" and "out" guesses; None uses ``n_canaries // 4``
        each. Fix them before looking at the scores: choosing them after
        the fact voids the confidence.
    score : callable or None, default=None
        ``score(fitted_estimator, X_canaries, labels) -> ndarray`` of one
        score per canary, larger meaning "in". None: the signed margin of
        each canary relative to the zero record (the weight along its own
        column for a linear model).
    confidence : float, default=0.95
        Probability, in (0, 1), with which the bound is valid.
    delta : float or None, default=None
        δ at which ε is bounded; None uses the model's ``delta_``.
    random_state : int, RandomState instance or None, default=None
        Seeds the canaries' labels, their inclusion, the tie-breaking of
        equal scores and the estimator's ``random_state``.

    Returns
    -------
    result : OneRunAuditResult

    Raises
    ------
    ValueError
        A parameter out of range (e.g. ``k_pos + k_neg > n_canaries``).
    TypeError
        Sparse ``X``, or an estimator without ``decision_function`` and no
        ``score``.

    See Also
    --------
    canary_audit : many runs, tighter bounds.

    Notes
    -----
    The theorem needs each canary's inclusion to be an independent fair
    coin and the mechanism to be (ε, δ)-DP with respect to each canary
    (add/remove for ``"membership"``, the feature-DP pair for ``"feature"``);
    the other canaries may be arbitrary. As in :func:`canary_audit`, ``n``
    (here ``n_samples`` plus the included canaries) is treated as public by
    the estimators. Ties between equal scores (e.g. canaries the training
    never sampled) are broken at random.

    References
    ----------
    Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training
    Run", NeurIPS 2023 (Thm. 5.2, Appendix D).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp import DPSGDClassifier
    >>> from sklearn_fdp.audit import canary_audit_one_run
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4))
    >>> X /= np.linalg.norm(X, axis=1, keepdims=True)
    >>> y = (X[:, 0] > 0).astype(int)
    >>> clf = DPSGDClassifier(epsilon=None, noise_multiplier=2.0, batch_size=60,
    ...                       epochs=2, accountant="rdp")
    >>> result = canary_audit_one_run(clf, X, y, n_canaries=100, random_state=0)
    >>> result.n_guesses, bool(result.epsilon_lower_bound <= result.claimed_epsilon)
    (50, True)
    """
    where = "canary_audit_one_run"
    _check_number("n_canaries", n_canaries, 2, math.inf, integer=True, low_closed=True)
    _check_number("confidence", confidence, 0.0, 1.0)
    _check_number("canary_norm", canary_norm, 0.0, math.inf)
    _check_choice("relation", relation, RELATIONS)
    m = int(n_canaries)
    k_pos = m // 4 if k_pos is None else k_pos
    k_neg = m // 4 if k_neg is None else k_neg
    _check_number("k_pos", k_pos, 0, m, integer=True, low_closed=True, high_closed=True)
    _check_number("k_neg", k_neg, 0, m, integer=True, low_closed=True, high_closed=True)
    if k_pos + k_neg > m or k_pos + k_neg == 0:
        raise ValueError(
            f"{where}: k_pos + k_neg must be in [1, n_canaries = {m}], got "
            f"{k_pos} + {k_neg}."
        )
    X, y = _as_dense(X, y, where)
    n, d = X.shape

    rs = check_random_state(random_state)
    classes = np.unique(y)
    labels = classes[rs.randint(0, len(classes), size=m)]
    canary_in = rs.randint(0, 2, size=m).astype(bool)
    tiebreak = rs.permutation(m)
    seed = int(rs.randint(0, np.iinfo(np.int32).max))

    X_canaries = np.zeros((m, d + m))
    X_canaries[np.arange(m), d + np.arange(m)] = float(canary_norm)
    X_data = np.hstack([X, np.zeros((n, m))])
    if relation == "membership":
        X_train = np.vstack([X_data, X_canaries[canary_in]])
        y_train = np.concatenate([y, labels[canary_in]])
    else:
        present = X_canaries.copy()
        present[~canary_in] = 0.0  # private part removed; label and public part kept
        X_train = np.vstack([X_data, present])
        y_train = np.concatenate([y, labels])

    est = _make_estimator(estimator, seed)
    est.fit(X_train, y_train)
    if relation == "feature":
        _check_private_columns(est, d + np.arange(m), where)
    if score is None:
        scores = _signed_scores(est, X_canaries, labels, np.zeros((1, d + m)))
    else:
        scores = np.asarray(score(est, X_canaries.copy(), labels.copy()), dtype=float)
    if scores.shape != (m,) or np.any(np.isnan(scores)):
        raise ValueError(
            f"{where}: the score must give one non-NaN number per canary (shape "
            f"({m},)), got shape {scores.shape!r}."
        )
    delta = _resolve_delta(delta, [est], where)

    # Highest scores first; equal scores in the random order of `tiebreak`.
    order = tiebreak[np.argsort(-scores[tiebreak], kind="stable")]
    guessed_in = order[:k_pos]
    guessed_out = order[m - k_neg:] if k_neg else order[:0]
    v = int(canary_in[guessed_in].sum() + (~canary_in[guessed_out]).sum())
    r = int(k_pos + k_neg)
    eps = _one_run_epsilon(m, r, v, delta, confidence)
    return OneRunAuditResult(
        epsilon_lower_bound=float(eps),
        claimed_epsilon=_claimed([est]),
        delta=delta,
        confidence=float(confidence),
        relation=relation,
        n_canaries=m,
        n_included=int(canary_in.sum()),
        k_pos=int(k_pos),
        k_neg=int(k_neg),
        n_guesses=r,
        n_correct=v,
        scores=scores,
        canary_in=canary_in,
    )

"""Attribute inference: guess a record's protected attribute from a fitted classifier.

The attack of the FDP paper's threat model (Sec. 4.2, Def. 7): the attacker
holds the fitted model, the rest of the target record (its public part and
its label) and, optionally, auxiliary data from the same population. It
completes the record with every candidate value of the protected attribute
and keeps the one under which the model finds the record's label most
likely. Thm. 4 bounds its success by a function of (ε, δ) and of the
*baseline*: the best success rate of a guess made from the same knowledge
without the model (:func:`attribute_inference_bound`).
"""

from dataclasses import asdict, dataclass
from numbers import Integral, Real

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import logsumexp
from scipy.stats import binomtest
from sklearn.base import BaseEstimator, clone
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.utils.validation import check_is_fitted

from ._bounds import attribute_inference_bound

__all__ = ["AttributeInferenceAttack", "AttributeInferenceResult"]

_NAME = "AttributeInferenceAttack"
_PRIORS = (None, "marginal", "conditional")
_CI_METHODS = ("wilson", "clopper-pearson")
_LABEL_PREFIX = "__label__="


@dataclass(frozen=True)
class AttributeInferenceResult:
    """Success of an attribute-inference attack next to its baseline.

    Returned by :meth:`AttributeInferenceAttack.evaluate`. Accuracies are
    fractions of the evaluated records whose attribute was guessed exactly.

    Parameters
    ----------
    accuracy : float
        Fraction of records whose attribute the attack guessed right.
    accuracy_ci : tuple of float
        Confidence interval of ``accuracy`` (``ci_method``).
    baseline : float
        Fraction guessed right by the baseline, which does not see the model.
    baseline_ci : tuple of float
        Confidence interval of ``baseline``.
    advantage : float
        ``accuracy - baseline``.
    advantage_ci : tuple of float
        Confidence interval of the paired difference (Newcombe 1998, method
        10, built from the two intervals above and the correlation of the
        two guesses' correctness on the same records).
    n : int
        Number of records evaluated.
    n_candidates : int
        Number of candidate values.
    baseline_kind : {"auxiliary", "majority"}
        ``"auxiliary"``: a classifier fitted on the attacker's auxiliary
        data predicts the attribute from the rest of the record and its
        label (Thm. 4's baseline, estimated). ``"majority"``: the most
        frequent candidate among the evaluated records, a constant guess
        that ignores the record (a lower estimate of Thm. 4's baseline).
    confidence_level : float
        Confidence level of the three intervals.
    ci_method : {"wilson", "clopper-pearson"}
        Interval used for the two accuracies.
    """

    accuracy: float
    accuracy_ci: tuple
    baseline: float
    baseline_ci: tuple
    advantage: float
    advantage_ci: tuple
    n: int
    n_candidates: int
    baseline_kind: str
    confidence_level: float
    ci_method: str

    def bound(self, epsilon, delta):
        """Thm. 4 bound on the attack's accuracy at this baseline.

        Parameters
        ----------
        epsilon : float
            ε of the attacked model's (feature) DP guarantee.
        delta : float
            δ of that guarantee.

        Returns
        -------
        bound : float
            ``attribute_inference_bound(epsilon, delta, self.baseline)``.
        """
        return attribute_inference_bound(epsilon, delta, self.baseline)

    def to_dict(self):
        """The fields as a plain dict (JSON-serialisable).

        Returns
        -------
        result : dict
            One entry per field; intervals as lists.
        """
        out = asdict(self)
        for key in ("accuracy_ci", "baseline_ci", "advantage_ci"):
            out[key] = [float(v) for v in out[key]]
        return out


def _wilson_or_exact(k, n, level, method):
    ci = binomtest(int(k), int(n)).proportion_ci(
        confidence_level=level, method="wilson" if method == "wilson" else "exact")
    return float(ci.low), float(ci.high)


def _paired_difference_ci(hit1, hit2, ci1, ci2):
    """Newcombe's (1998, method 10) interval for p1 - p2 on paired binary outcomes."""
    n = hit1.size
    p1, p2 = hit1.mean(), hit2.mean()
    a = float(np.sum(hit1 & hit2))
    b = float(np.sum(hit1 & ~hit2))
    c = float(np.sum(~hit1 & hit2))
    d = float(n - a - b - c)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / np.sqrt(denom) if denom > 0 else 0.0
    (l1, u1), (l2, u2) = ci1, ci2
    lower = np.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    upper = np.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    diff = p1 - p2
    return float(max(-1.0, diff - lower)), float(min(1.0, diff + upper))


def _default_classifier():
    return make_pipeline(
        ColumnTransformer(
            [("num", StandardScaler(), make_column_selector(dtype_include=np.number)),
             ("cat", OneHotEncoder(handle_unknown="ignore"),
              make_column_selector(dtype_exclude=np.number))]),
        LogisticRegression(max_iter=1000),
    )


class AttributeInferenceAttack(BaseEstimator):
    """Guess one protected attribute of a record from a fitted classifier.

    The attacker knows every column of the record except the protected
    attribute, and the record's label. For each candidate value of the
    attribute it completes the record with that value, asks the model for
    the probability of the known label and scores the candidate by
    ``log p_model(label | record completed with it)`` (minus the log-loss),
    optionally weighted (``model_weight``) and plus the log of a prior over
    candidates learnt from the attacker's auxiliary data (:meth:`fit`).
    The guess is the best-scoring candidate. With ``prior="conditional"``
    and ``model_weight=1`` the score is the log-posterior of a Bayesian
    attacker who trusts the model for ``p(label | record)``.

    This is the adversary of the FDP paper's Thm. 4: against a model with
    an (ε, δ) (feature) DP guarantee protecting the attribute, its accuracy
    on a training record cannot exceed
    ``attribute_inference_bound(ε, δ, baseline)``, where the baseline is
    the accuracy of the best guess from the same knowledge *without* the
    model. :meth:`evaluate` measures both.

    Parameters
    ----------
    estimator : fitted classifier
        The attacked model: anything fitted with ``predict_proba`` (or
        ``predict_log_proba``) and ``classes_``, e.g. a sklearn_fdp
        estimator, a scikit-learn classifier or a
        :class:`~sklearn.pipeline.Pipeline` ending in one. It is only
        queried, never refitted or changed.
    attribute : str, int or list of str or int
        Where the protected attribute sits in the model's input ``X``: a
        column name (DataFrame input) or position (array input), or a list
        of them. Two ways to use it:

        - **one raw column**, e.g. ``"sex"`` with
          ``candidates=["Female", "Male"]`` for a Pipeline that encodes raw
          Adult columns itself. Each candidate is a value of that column.
        - **several encoded columns**, e.g.
          ``["sex_Female", "sex_Male"]`` with
          ``candidates=[[1, 0], [0, 1]]`` for a model fitted on one-hot
          columns. Each candidate is a full assignment of those columns
          (one row of ``candidates``).
    candidates : array-like of shape (n_candidates,) or (n_candidates, n_columns)
        The values the attribute can take, at least two, all distinct:
        1-D when ``attribute`` is one column, 2-D (one row per candidate,
        one column per entry of ``attribute``) when it is a list. Ties
        between candidates go to the earlier one.
    prior : {None, "marginal", "conditional"} or array-like of shape (n_candidates,), \
default=None
        What is added to the model's score (as a log-probability):

        - None: nothing; the model's log-loss alone decides.
        - ``"marginal"``: the candidates' frequencies in the auxiliary data
          given to :meth:`fit` (add-one smoothed).
        - ``"conditional"``: the probability of each candidate given the
          rest of the record (without the label; the model accounts for
          the label), from a clone of ``baseline_estimator`` fitted on the
          auxiliary data.
        - an array: fixed prior probabilities of the candidates
          (nonnegative, normalised here).

        The two string options need :meth:`fit`.
    model_weight : float, default=1.0
        Weight λ of the model's term: a candidate scores
        ``λ · log p_model(label | completed record) + log prior``, in
        (0, inf). 1 is the Bayesian attacker who takes the model's
        probabilities at face value; λ > 1 trusts the model more than the
        prior, which pays off against overfit models, overconfident on
        their training records. Choose it without the attacked records,
        e.g. on a shadow model trained on auxiliary data. Irrelevant when
        ``prior=None``.
    baseline_estimator : classifier or None, default=None
        Classifier cloned and fitted in :meth:`fit` on the auxiliary data
        to predict the attribute from the rest of the record and its label:
        the estimate of Thm. 4's baseline. It receives a DataFrame of the
        record's other columns plus one indicator column per class of the
        label. None: one-hot encoding of non-numeric columns, standard
        scaling of numeric ones, then
        ``LogisticRegression(max_iter=1000)``. A stronger classifier gives
        a baseline closer to the Bayes-optimal guess Thm. 4 refers to.
    confidence_level : float, default=0.95
        Level of the confidence intervals reported by :meth:`evaluate`,
        in (0, 1).
    ci_method : {"wilson", "clopper-pearson"}, default="wilson"
        Binomial interval for the two accuracies.

    Attributes
    ----------
    candidates_ : ndarray
        The validated candidates (set on the first call that needs them).
    prior_ : ndarray of shape (n_candidates,) or None
        Prior probabilities of the candidates for ``prior="marginal"`` or an
        array prior, None otherwise; set by :meth:`fit`.
    baseline_estimator_ : classifier
        The fitted baseline classifier (after :meth:`fit`).
    prior_estimator_ : classifier or None
        The fitted classifier of the candidate given the rest of the record,
        without the label (``prior="conditional"`` only).
    n_auxiliary_ : int
        Number of auxiliary records given to :meth:`fit`.

    See Also
    --------
    attribute_inference_bound : Thm. 4's bound for a measured baseline.

    Notes
    -----
    Which records to attack: DP and feature DP bound what the model reveals
    about the records it was *trained on*, so attack training records
    (members). On records the model never saw, any success above the
    baseline comes from the population, not from a leak.

    What the attacker knows: every column of ``X`` but the attribute, and
    the label. If the model's guarantee protects several columns and the
    attacker is given the others too, Thm. 4 still applies: a model that
    is feature DP relative to a public part Ψ is feature DP relative to any
    finer one (a simulator may ignore the extra knowledge), and plain DP is
    feature DP for every Ψ (FDP paper, Prop. 2). The baseline must then be
    measured from the same knowledge, which is what the default auxiliary
    baseline does.

    The auxiliary baseline is an estimate from below of the Bayes-optimal
    guess (a fitted classifier is at most Bayes-optimal), so the bound
    computed from it is slightly lower than the true one; the majority
    baseline ignores the record and is lower still. Neither can make a
    private model look safer than it is.

    The auxiliary data given to :meth:`fit` must not contain the attacked
    records (their attribute is what the attack guesses).

    References
    ----------
    Mahloujifar, Guo et al., "Machine Learning with Privacy for Protected
    Attributes", Sec. 4.2 (Def. 7, 8, Thm. 4).
    Fredrikson et al., "Model Inversion Attacks that Exploit Confidence
    Information and Basic Countermeasures", CCS 2015.
    Newcombe, "Improved confidence intervals for the difference between
    binomial proportions based on paired data", Stat. Med. 1998.

    Examples
    --------
    A 1-nearest-neighbour model memorises its training records, labels
    included; here the labels are pure noise, so whatever the attack gets
    right beyond the baseline it learnt from the model:

    >>> import numpy as np
    >>> from sklearn.neighbors import KNeighborsClassifier
    >>> from sklearn_fdp.audit import AttributeInferenceAttack
    >>> rng = np.random.default_rng(0)
    >>> def records(n):  # column 2 is the protected attribute, 0 or 10
    ...     X = np.column_stack([rng.normal(size=(n, 2)), 10 * rng.integers(0, 2, n)])
    ...     return X, rng.integers(0, 2, n)
    >>> X, y = records(400)
    >>> model = KNeighborsClassifier(n_neighbors=1).fit(X, y)
    >>> attack = AttributeInferenceAttack(model, attribute=2, candidates=[0, 10],
    ...                                   prior="marginal")
    >>> attack = attack.fit(*records(400))  # the attacker's auxiliary data
    >>> result = attack.evaluate(X, y)      # true values read from column 2 of X
    >>> result.n, result.baseline_kind
    (400, 'auxiliary')
    >>> bool(result.advantage_ci[0] > 0)    # leaks beyond the baseline
    True
    >>> result.bound(1.0, 1e-5) > result.baseline
    True
    """

    def __init__(self, estimator, attribute, candidates, *, prior=None, model_weight=1.0,
                 baseline_estimator=None, confidence_level=0.95, ci_method="wilson"):
        self.estimator = estimator
        self.attribute = attribute
        self.candidates = candidates
        self.prior = prior
        self.model_weight = model_weight
        self.baseline_estimator = baseline_estimator
        self.confidence_level = confidence_level
        self.ci_method = ci_method

    # -- validation ------------------------------------------------------------

    def _multi(self):
        return isinstance(self.attribute, (list, tuple, np.ndarray, pd.Index))

    def _columns(self):
        cols = list(self.attribute) if self._multi() else [self.attribute]
        if not cols:
            raise ValueError(f"`attribute` of {_NAME} is empty. Name the column(s) that hold "
                             "the protected attribute.")
        for c in cols:
            if isinstance(c, (bool, np.bool_)) or not isinstance(c, (str, Integral)):
                raise TypeError(f"`attribute` of {_NAME} must be a column name (str), a column "
                                f"position (int) or a list of them, got {self.attribute!r}.")
        if len(set(cols)) != len(cols):
            raise ValueError(f"`attribute` of {_NAME} names a column twice: {self.attribute!r}.")
        return cols

    def _check_params(self):
        cols = self._columns()
        if not (isinstance(self.confidence_level, Real)
                and not isinstance(self.confidence_level, bool)
                and 0.0 < self.confidence_level < 1.0):
            raise ValueError(f"`confidence_level` of {_NAME} must be in (0, 1), got "
                             f"{self.confidence_level!r}. Use e.g. 0.95.")
        if not (isinstance(self.model_weight, Real) and not isinstance(self.model_weight, bool)
                and 0.0 < self.model_weight < np.inf):
            raise ValueError(f"`model_weight` of {_NAME} must be in (0, inf), got "
                             f"{self.model_weight!r}. Use 1.0 for the Bayesian attacker.")
        if self.ci_method not in _CI_METHODS:
            raise ValueError(f"`ci_method` of {_NAME} must be one of {_CI_METHODS}, got "
                             f"{self.ci_method!r}.")
        est = self.estimator
        if not (hasattr(est, "predict_proba") or hasattr(est, "predict_log_proba")):
            raise TypeError(f"`estimator` of {_NAME} must have predict_proba, got "
                            f"{type(est).__name__}. Attack a probabilistic classifier (for "
                            "SGD-type models use loss='log_loss').")
        try:
            check_is_fitted(est)
        except NotFittedError as exc:
            raise NotFittedError(f"`estimator` of {_NAME} is not fitted: {exc} Fit it on the "
                                 "training data first; the attack only queries it.") from None
        if not hasattr(est, "classes_"):
            raise TypeError(f"`estimator` of {_NAME} has no `classes_`; the attack needs a "
                            "fitted classifier.")
        cand = np.asarray(self.candidates)
        if cand.dtype.kind == "O" and cand.ndim == 1 and self._multi():
            raise ValueError(f"`candidates` of {_NAME} must be 2-D (one row per candidate) when "
                             f"`attribute` is a list, got {self.candidates!r}.")
        want = 2 if self._multi() else 1
        if cand.ndim != want:
            shape = "(n_candidates, n_columns)" if want == 2 else "(n_candidates,)"
            hint = ("a list of columns: give one full assignment per row" if want == 2 else
                    "one column: give its values, or pass `attribute` as a list")
            raise ValueError(f"`candidates` of {_NAME} must have shape {shape} for `attribute`="
                             f"{self.attribute!r} ({hint}), got an array of shape {cand.shape}.")
        if want == 2 and cand.shape[1] != len(cols):
            raise ValueError(f"`candidates` of {_NAME} has {cand.shape[1]} columns but "
                             f"`attribute` names {len(cols)}: {self.attribute!r}.")
        if cand.shape[0] < 2:
            raise ValueError(f"`candidates` of {_NAME} must hold at least 2 values, got "
                             f"{self.candidates!r}.")
        keys = [tuple(r) for r in cand.reshape(cand.shape[0], -1).tolist()]
        if len(set(keys)) != len(keys):
            raise ValueError(f"`candidates` of {_NAME} must be distinct, got "
                             f"{self.candidates!r}.")
        if isinstance(self.prior, str) or self.prior is None:
            if self.prior not in _PRIORS:
                raise ValueError(f"`prior` of {_NAME} must be None, 'marginal', 'conditional' or "
                                 f"an array of probabilities, got {self.prior!r}.")
        else:
            p = np.asarray(self.prior, dtype=float)
            if (p.shape != (cand.shape[0],) or not np.all(np.isfinite(p)) or np.any(p < 0)
                    or p.sum() <= 0):
                raise ValueError(f"`prior` of {_NAME} as an array must hold one nonnegative "
                                 f"weight per candidate ({cand.shape[0]}), not all zero, got "
                                 f"{self.prior!r}.")
        self.candidates_ = cand
        return cols

    def _check_X(self, X, cols, what="X"):
        """Copy-free view of X as (DataFrame or 2-D ndarray, resolved columns, present?)."""
        if sp.issparse(X):
            raise TypeError(f"{_NAME} needs dense `{what}`; got a sparse matrix. Pass "
                            "X.toarray() or a DataFrame.")
        if isinstance(X, pd.DataFrame):
            missing = [c for c in cols if c not in X.columns]
            if missing and len(missing) < len(cols):
                raise ValueError(f"`{what}` has some attribute columns but not {missing!r}. "
                                 f"Give all of {cols!r} or none.")
            if missing and getattr(self.estimator, "feature_names_in_", None) is None:
                raise ValueError(f"Column(s) {missing!r} not found in `{what}` (columns: "
                                 f"{list(X.columns)[:20]!r}). Include them (any placeholder "
                                 "value), or attack a model that records `feature_names_in_`.")
            n = len(X)
            present = not missing
        else:
            X = np.asarray(X)
            if X.ndim != 2:
                raise ValueError(f"`{what}` must be 2-D, got shape {X.shape}.")
            for c in cols:
                if not isinstance(c, Integral) or not -X.shape[1] <= c < X.shape[1]:
                    raise ValueError(f"`attribute` {c!r} of {_NAME} is not a column position of "
                                     f"the array `{what}` with {X.shape[1]} columns. Use "
                                     "integer positions for arrays, names for DataFrames.")
            n = X.shape[0]
            present = True
        if n == 0:
            raise ValueError(f"`{what}` holds no records.")
        return X, present

    def _check_y(self, y, n, what="y"):
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"`{what}` must be 1-D with one label per record ({n}), got shape "
                             f"{y.shape}.")
        idx = pd.Index(self.estimator.classes_).get_indexer(y)
        if np.any(idx < 0):
            bad = pd.unique(y[idx < 0])[:5].tolist()
            raise ValueError(f"`{what}` holds label(s) {bad!r} that the attacked model does not "
                             f"know (classes_: {list(self.estimator.classes_)!r}).")
        return idx

    def _candidate_index(self, values, cols, what):
        """Index in candidates_ of each row's attribute value."""
        cand = self.candidates_
        if self._multi():
            values = np.asarray(values)
            if values.ndim != 2 or values.shape[1] != len(cols):
                raise ValueError(f"`{what}` must have shape (n_records, {len(cols)}), one "
                                 f"assignment of {cols!r} per record, got {values.shape}.")
            match = np.all(values[:, None, :] == cand[None, :, :], axis=2)
            idx = np.where(match.any(axis=1), match.argmax(axis=1), -1)
        else:
            values = np.asarray(values)
            if values.ndim != 1:
                raise ValueError(f"`{what}` must be 1-D (one value per record), got shape "
                                 f"{values.shape}.")
            idx = pd.Index(cand).get_indexer(values)
        if np.any(idx < 0):
            first = np.flatnonzero(idx < 0)[0]
            raise ValueError(f"`{what}` holds {values[first]!r} (record {first}), which is not "
                             f"one of the candidates {cand.tolist()!r}. Add it to `candidates`.")
        return idx

    def _attribute_values(self, X, cols, what):
        if isinstance(X, pd.DataFrame):
            v = X[cols].to_numpy()
        else:
            v = X[:, cols]
        return v if self._multi() else v[:, 0]

    # -- the parts the attacker knows ------------------------------------------

    def _rest(self, X, cols):
        """The record without the attribute, as a DataFrame with string column names."""
        if isinstance(X, pd.DataFrame):
            rest = X.drop(columns=[c for c in cols if c in X.columns])
        else:
            keep = np.setdiff1d(np.arange(X.shape[1]), np.asarray(cols) % X.shape[1])
            rest = pd.DataFrame(X[:, keep]).infer_objects()
        rest = rest.copy()
        rest.columns = [str(c) for c in rest.columns]
        return rest.reset_index(drop=True)

    def _with_label(self, rest, y_idx):
        classes = self.estimator.classes_
        onehot = np.zeros((len(rest), len(classes)))
        onehot[np.arange(len(rest)), y_idx] = 1.0
        labels = pd.DataFrame(onehot, columns=[f"{_LABEL_PREFIX}{c}" for c in classes])
        return pd.concat([rest, labels], axis=1)

    def _completed(self, X, cols, k, present):
        value = self.candidates_[k]
        if isinstance(X, pd.DataFrame):
            Xc = X.copy()
            if self._multi():
                for j, c in enumerate(cols):
                    Xc[c] = value[j]
            else:
                Xc[cols[0]] = value
            if not present:
                Xc = Xc[list(self.estimator.feature_names_in_)]
            return Xc
        dtype = np.result_type(X.dtype, self.candidates_.dtype)
        Xc = np.array(X, dtype=dtype, copy=True)
        Xc[:, cols] = value
        return Xc

    # -- public API ------------------------------------------------------------

    def fit(self, X, y, attribute_values=None):
        """Learn the prior and the baseline from the attacker's auxiliary data.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_auxiliary, n_columns)
            Auxiliary records from the same population as the attacked
            ones, laid out as the model's input, and **not** the attacked
            records.
        y : array-like of shape (n_auxiliary,)
            Their labels (classes of the attacked model).
        attribute_values : array-like of shape (n_auxiliary,) or (n_auxiliary, n_columns), \
default=None
            Their attribute values (candidates). None: read from the
            attribute column(s) of ``X``.

        Returns
        -------
        self : AttributeInferenceAttack
            The fitted attack.
        """
        cols = self._check_params()
        X, present = self._check_X(X, cols)
        y_idx = self._check_y(y, len(X))
        if attribute_values is None:
            if not present:
                raise ValueError(f"`X` passed to {_NAME}.fit has no column(s) {cols!r}; pass "
                                 "`attribute_values`.")
            attribute_values = self._attribute_values(X, cols, "X")
        target = self._candidate_index(attribute_values, cols, "attribute_values")
        if target.shape[0] != len(y_idx):
            raise ValueError(f"`attribute_values` has {target.shape[0]} entries for {len(y_idx)} "
                             "records.")
        if np.unique(target).size < 2:
            raise ValueError(f"The auxiliary data given to {_NAME}.fit holds only the candidate "
                             f"{self.candidates_[target[0]]!r}; a baseline needs records of at "
                             "least two candidates.")
        base = _default_classifier() if self.baseline_estimator is None else \
            self.baseline_estimator
        rest = self._rest(X, cols)
        self.baseline_estimator_ = clone(base).fit(self._with_label(rest, y_idx), target)
        self.prior_estimator_ = None
        if self.prior == "conditional":
            self.prior_estimator_ = clone(base).fit(rest, target)
        counts = np.bincount(target, minlength=len(self.candidates_)).astype(float)
        self._marginal = (counts + 1.0) / (counts.sum() + len(counts))
        self.prior_ = self._fixed_prior()
        self.n_auxiliary_ = int(len(y_idx))
        return self

    def _fixed_prior(self):
        if self.prior is None or self.prior == "conditional":
            return None
        if isinstance(self.prior, str):  # "marginal"
            return self._marginal
        p = np.asarray(self.prior, dtype=float)
        return p / p.sum()

    def _fitted(self):
        return hasattr(self, "baseline_estimator_")

    def _log_prior(self, X, cols):
        if self.prior is None:
            return 0.0
        if isinstance(self.prior, str):
            if not self._fitted():
                raise NotFittedError(f"prior={self.prior!r} of {_NAME} is learnt from "
                                     "auxiliary data: call fit(X_aux, y_aux) first, or use "
                                     "prior=None or an array.")
            if self.prior == "marginal":
                return np.log(self._marginal)[None, :]
            if self.prior_estimator_ is None:
                raise NotFittedError(f"prior='conditional' of {_NAME} was set after fit: call "
                                     "fit(X_aux, y_aux) again.")
            proba = self.prior_estimator_.predict_proba(self._rest(X, cols))
            full = np.zeros((proba.shape[0], len(self.candidates_)))
            full[:, self.prior_estimator_.classes_] = proba
            return np.log(np.clip(full, np.finfo(float).tiny, 1.0))
        p = np.asarray(self.prior, dtype=float)
        with np.errstate(divide="ignore"):
            return np.log(p / p.sum())[None, :]

    def score_candidates(self, X, y):
        """Score every candidate for every record (higher: more likely).

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_records, n_columns)
            The attacked records laid out as the model's input. The
            attribute column(s) are overwritten (in a copy) by each
            candidate, so their content is ignored; a DataFrame may omit
            them if the model records ``feature_names_in_``.
        y : array-like of shape (n_records,)
            The records' labels, known to the attacker.

        Returns
        -------
        scores : ndarray of shape (n_records, n_candidates)
            ``model_weight · log p_model(y | record completed with the
            candidate)`` plus the log-prior.
        """
        cols = self._check_params()
        X, present = self._check_X(X, cols)
        y_idx = self._check_y(y, len(X))
        rows = np.arange(len(y_idx))
        scores = np.empty((len(y_idx), len(self.candidates_)))
        for k in range(len(self.candidates_)):
            Xc = self._completed(X, cols, k, present)
            # log(0) = -inf is a valid score (floored below); silence numpy about it.
            with np.errstate(divide="ignore"):
                if hasattr(self.estimator, "predict_log_proba"):
                    logp = np.asarray(self.estimator.predict_log_proba(Xc), dtype=float)
                else:
                    logp = np.log(np.asarray(self.estimator.predict_proba(Xc), dtype=float))
            scores[:, k] = logp[rows, y_idx]
        scores = np.maximum(scores, np.log(np.finfo(float).tiny))
        return float(self.model_weight) * scores + self._log_prior(X, cols)

    def infer(self, X, y):
        """Guess the attribute of every record.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_records, n_columns)
            The attacked records (see :meth:`score_candidates`).
        y : array-like of shape (n_records,)
            Their labels.

        Returns
        -------
        guesses : ndarray of shape (n_records,) or (n_records, n_columns)
            The best-scoring candidate of each record.
        """
        idx = self._guess_index(X, y)  # validates and sets candidates_
        return self.candidates_[idx]

    def _guess_index(self, X, y):
        return np.argmax(self.score_candidates(X, y), axis=1)

    def _baseline_index(self, X, cols, y_idx):
        return np.asarray(self.baseline_estimator_.predict(
            self._with_label(self._rest(X, cols), y_idx)), dtype=np.intp)

    def infer_baseline(self, X, y):
        """The baseline's guess of every record's attribute, without the model.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_records, n_columns)
            The records (attribute columns ignored, as in
            :meth:`score_candidates`).
        y : array-like of shape (n_records,)
            Their labels.

        Returns
        -------
        guesses : ndarray of shape (n_records,) or (n_records, n_columns)
            The auxiliary baseline classifier's guess (see :meth:`fit`).
        """
        cols = self._check_params()
        if not self._fitted():
            raise NotFittedError(f"The baseline of {_NAME} is learnt from auxiliary data: call "
                                 "fit(X_aux, y_aux) first.")
        X, _ = self._check_X(X, cols)
        y_idx = self._check_y(y, len(X))
        return self.candidates_[self._baseline_index(X, cols, y_idx)]

    def predict_attribute_proba(self, X, y):
        """Posterior-like weights of the candidates (softmax of the scores).

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_records, n_columns)
            The attacked records (see :meth:`score_candidates`).
        y : array-like of shape (n_records,)
            Their labels.

        Returns
        -------
        proba : ndarray of shape (n_records, n_candidates)
            ``exp(scores)`` normalised per record: with
            ``prior="conditional"``, the attacker's posterior.
        """
        s = self.score_candidates(X, y)
        return np.exp(s - logsumexp(s, axis=1, keepdims=True))

    def evaluate(self, X, y, true_attribute=None):
        """Attack accuracy against the baseline on records whose attribute is known.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_records, n_columns)
            The attacked records, normally training records of the model
            (see Notes of the class).
        y : array-like of shape (n_records,)
            Their labels.
        true_attribute : array-like of shape (n_records,) or (n_records, n_columns), \
default=None
            Their true attribute values, each one of the candidates. None:
            read from the attribute column(s) of ``X``.

        Returns
        -------
        result : AttributeInferenceResult
            Accuracy, baseline and advantage with confidence intervals.
            The baseline is the auxiliary classifier's accuracy on the same
            records after :meth:`fit` (``baseline_kind="auxiliary"``), or
            the best constant guess on them without it
            (``baseline_kind="majority"``).
        """
        cols = self._check_params()
        X, present = self._check_X(X, cols)
        y_idx = self._check_y(y, len(X))
        if true_attribute is None:
            if not present:
                raise ValueError(f"`X` has no column(s) {cols!r}; pass `true_attribute`.")
            true_attribute = self._attribute_values(X, cols, "X")
        truth = self._candidate_index(true_attribute, cols, "true_attribute")
        if truth.shape[0] != len(y_idx):
            raise ValueError(f"`true_attribute` has {truth.shape[0]} entries for {len(y_idx)} "
                             "records.")
        hit = self._guess_index(X, y) == truth
        if self._fitted():
            kind = "auxiliary"
            base = self._baseline_index(X, cols, y_idx)
        else:
            kind = "majority"
            base = np.full(truth.shape, np.bincount(truth).argmax())
        base_hit = base == truth
        n = int(hit.size)
        level, method = float(self.confidence_level), self.ci_method
        ci1 = _wilson_or_exact(hit.sum(), n, level, method)
        ci2 = _wilson_or_exact(base_hit.sum(), n, level, method)
        return AttributeInferenceResult(
            accuracy=float(hit.mean()), accuracy_ci=ci1,
            baseline=float(base_hit.mean()), baseline_ci=ci2,
            advantage=float(hit.mean() - base_hit.mean()),
            advantage_ci=_paired_difference_ci(hit, base_hit, ci1, ci2),
            n=n, n_candidates=int(len(self.candidates_)), baseline_kind=kind,
            confidence_level=level, ci_method=method)

"""Feature DP on top of any public model: stacking with a feature-DP final model.

A public estimator (any scikit-learn estimator; gradient boosting by
default) is fitted on the public columns and the public label: under
feature DP it costs nothing. Its cross-fitted (out-of-fold) score enters a
feature-DP final model as a *public* column beside the protected ones; the
final model is an existing feature-DP estimator
(:class:`FeatureDPLogisticRegression`, Algorithm 1; or
:class:`FeatureDPLinearRegression`, the sufficient statistic), run
unchanged. The released model is the public estimator refitted on every
row plus the private final model; what the fit spends is the final model's.
"""

from __future__ import annotations

import dataclasses
import math
from numbers import Real
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone, is_classifier
from sklearn.model_selection import check_cv, cross_val_predict
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import accounting
from .._random import NOISE_OPTIONS, spawn_generators
from .._validation import (
    DELTA_CONSTRAINT,
    NEIGHBORING_CONSTRAINT,
    HasMethods,
    Interval,
    StrOptions,
    _fit_context,
    atomic_fit,
    check_delta_vs_n,
    check_y_bounds,
    encode_labels,
    validate_numeric_data,
)
from .._docs import fill_doc
from ..features import check_label_in_spec, resolve_feature_spec, spec_feature_names

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from .._plan import PrivacyPlan
    from .._typing import ArrayLike, FeatureSpec, MatrixLike, RandomStateLike

# The parameters this estimator sets on (a clone of) ``final_estimator``:
# whatever the template says for them is replaced.
_FORWARDED = ("epsilon", "delta", "noise_multiplier", "accountant", "neighboring", "noise")

# Name of the public score column(s) in the final model's input.
_SCORE = "public_score"

# Docstring paragraphs the two stacked estimators share (sklearn_fdp._docs.fill_doc).
_PARAGRAPHS = {
    "stacking_budget": """\
epsilon : float or None, default=1.0
    Budget of the final model (the whole fit's: the public part is free).
delta : float, default=1e-5
    δ of the final model, in [0, 1); keep it below 1/n.
noise_multiplier : float or None, default=None
    σ of the final model; with it ε is computed rather than targeted.
accountant : {"auto", "pld", "rdp"}, default="auto"
    The final model's accountant.
neighboring : {"add_remove", "replace"}, default="add_remove"
    The neighbouring relation of the final model's guarantee.
random_state : int, RandomState instance or None, default=None
    Seeds the public estimator (when unseeded) and, by an independent
    stream, the final model.
noise : {"default", "secure"}, default="default"
    The final model's noise source.""",
    "stacking_fitted": """\
n_features_in_ : int
feature_names_in_ : ndarray of shape (``n_features_in_``,)
    Defined when ``X`` has string column names.
feature_names_ : ndarray of object or None
epsilon_, delta_, noise_multiplier_, accountant_ : as the final model's
dp_event_ : dp_accounting.DpEvent
    The final model's: the only mechanism of the fit.
privacy_plan_ : PrivacyPlan
    The final model's plan, its protected columns at their positions in
    ``X`` and its description naming the (free) public model.
public_mask_ : ndarray of bool
public_features_, private_features_ : ndarray of int
label_public_ : bool
    Always True.
n_score_columns_ : int
    Public score columns of the final model's input (0, 1, or the
    number of classes).""",
}


def _label_public_error(est):
    name = type(est).__name__
    return ValueError(
        f"label_public={est.label_public!r} of {name}: the public estimator is fitted on "
        "the label, so the label must be public (label_public=True). With a protected "
        "label use FeatureDPLogisticRegression / FeatureDPLinearRegression with "
        "label_public=False (label DP), which never show the label to a non-private model."
    )


class _BaseFeatureDPStacking(BaseEstimator):
    """The shared fit: resolve the columns, cross-fit the public score, fit the final model."""

    _parameter_constraints: dict = {
        "public_estimator": [None, HasMethods(["fit"])],
        "final_estimator": [None, HasMethods(["fit"])],
        "public_features": "no_validation",
        "private_features": "no_validation",
        "label_public": ["boolean"],
        "cv": ["cv_object"],
        "passthrough": ["boolean"],
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": DELTA_CONSTRAINT,
        "noise_multiplier": [Interval(Real, 0, None, closed="neither"), None],
        "accountant": [StrOptions({*accounting.ACCOUNTANTS, "auto"})],
        "neighboring": NEIGHBORING_CONSTRAINT,
        "random_state": ["random_state"],
        "noise": [StrOptions(set(NOISE_OPTIONS))],
    }

    # -- what subclasses define ----------------------------------------------

    def _default_public(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _default_final(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _encode_target(self, y):  # pragma: no cover - abstract
        raise NotImplementedError

    def _public_scores(self, est, X_pub, cv=None, y=None):  # pragma: no cover - abstract
        raise NotImplementedError

    def _final_settings(self, n_public_cols):
        return {}

    # -- the shared parts ----------------------------------------------------

    def _check_params(self):
        if not self.label_public:
            raise _label_public_error(self)
        final = self._default_final() if self.final_estimator is None else self.final_estimator
        params = final.get_params(deep=False) if hasattr(final, "get_params") else {}
        needed = {"public_features", "private_features", "label_public", "epsilon"}
        if not (callable(getattr(final, "privacy_plan", None)) and needed <= set(params)):
            raise TypeError(
                f"final_estimator of {type(self).__name__} must be a feature-DP estimator of "
                "sklearn_fdp (with public_features, private_features, label_public, epsilon "
                f"and a privacy_plan), got {type(final).__name__}. Use e.g. "
                "FeatureDPLogisticRegression() or FeatureDPLinearRegression().")
        return final

    def _final_template(self, n_score, n_passthrough, n_private, random_state=None):
        """A clone of the final estimator set for input ``[score, passthrough, private]``."""
        final = clone(self._check_params())
        params = final.get_params(deep=False)
        n_public = n_score + n_passthrough
        settings = {k: getattr(self, k) for k in _FORWARDED if k in params}
        settings.update(public_features=list(range(n_public)), private_features=None,
                        label_public=True, **self._final_settings(n_public))
        if random_state is not None and "random_state" in params:
            settings["random_state"] = random_state
        settings = {k: v for k, v in settings.items() if k in params}
        return final.set_params(**settings)

    def _resolve_mask(self, n_features, feature_names):
        return resolve_feature_spec(self.public_features, self.private_features, n_features,
                                    feature_names, type(self).__name__, label_public=True)

    def _final_names(self, n_score, public_mask, feature_names):
        names = ([_SCORE] if n_score == 1 else [f"{_SCORE}{k}" for k in range(n_score)])
        cols = (np.flatnonzero(public_mask) if self.passthrough else np.zeros(0, int)).tolist()
        cols += np.flatnonzero(~public_mask).tolist()
        names += ([f"x{i}" for i in cols] if feature_names is None
                  else [str(feature_names[i]) for i in cols])
        return np.asarray(names, dtype=object)

    def _final_input(self, scores, X, public_mask):
        blocks = [scores]
        if self.passthrough:
            blocks.append(X[:, public_mask])
        blocks.append(X[:, ~public_mask])
        return np.ascontiguousarray(np.hstack(blocks), dtype=X.dtype)

    def _n_score(self, public_mask):
        """Score columns the final model sees (0 without public columns)."""
        return self._score_width() if public_mask.any() else 0

    def _score_width(self):
        return 1

    def _stacked_plan(self, final_plan, public_mask, n_score, public_name):
        """The final model's plan in this estimator's column positions, the public part named."""
        private = np.flatnonzero(~public_mask)
        free = (f"; the public model {public_name} (public columns and label only) is free"
                if n_score else "")
        details = dict(final_plan.details, public_mask=public_mask,
                       final_public_mask=final_plan.details.get("public_mask"),
                       public_model=public_name if n_score else None)
        return dataclasses.replace(final_plan, protected_columns=tuple(int(i) for i in private),
                                   description=final_plan.description + free, details=details)

    def _public_name(self):
        est = self.public_estimator if self.public_estimator is not None \
            else self._default_public()
        return type(est).__name__

    def privacy_plan(self, n_samples: int, n_features: int, *,
                     feature_names: ArrayLike | None = None) -> PrivacyPlan:
        """What a fit on ``n_samples`` × ``n_features`` data spends and protects.

        The final model's plan (on its input: the public score columns, the
        passed-through public columns and the protected ones), with the
        protected columns at their positions in ``X``. The public model
        reads only public data and adds nothing. Computed from public
        quantities only.

        Parameters
        ----------
        n_samples : int
            Number of training rows.
        n_features : int
            Number of input columns.
        feature_names : array-like of str or None, default=None
            Column names, to resolve names in the feature specs.

        Returns
        -------
        plan : PrivacyPlan
        """
        self._check_params()
        public_mask = self._resolve_mask(n_features, feature_names)
        n_score = self._n_score(public_mask)
        n_pass = int(public_mask.sum()) if self.passthrough else 0
        final = self._final_template(n_score, n_pass, int((~public_mask).sum()))
        names = self._final_names(n_score, public_mask, feature_names)
        plan = final.privacy_plan(n_samples, len(names), feature_names=names)
        return self._stacked_plan(plan, public_mask, n_score, self._public_name())

    def _fit(self, X, y, feature_names):
        name = type(self).__name__
        self._check_params()
        check_label_in_spec(self, X, y)
        X, y = validate_numeric_data(self, X, y, dtype=[np.float64, np.float32],
                                     y_numeric=not is_classifier(self))
        n_samples, n_features = X.shape
        check_delta_vs_n(self.delta, n_samples, name)
        names = spec_feature_names(self, n_features, feature_names)
        public_mask = self._resolve_mask(n_features, names)
        y_fit = self._encode_target(y)
        n_score = self._n_score(public_mask)
        # Two independent streams: the public model's seed (public: its
        # output is released) and the final model's (its noise).
        public_gen, final_gen = spawn_generators(self.random_state, 2)
        if n_score:
            public = clone(self.public_estimator if self.public_estimator is not None
                           else self._default_public())
            if "random_state" in public.get_params(deep=False) \
                    and public.get_params(deep=False)["random_state"] is None:
                public.set_params(random_state=int(public_gen.integers(2**31 - 1)))
            X_pub = X[:, public_mask]
            cv = check_cv(self.cv, y_fit, classifier=is_classifier(self))
            try:  # cross-fitted on the public columns and the public label only
                scores = self._public_scores(public, X_pub, cv=cv, y=y_fit)
            except ValueError as exc:
                raise ValueError(
                    f"{name} could not cross-fit its public model {type(public).__name__} on "
                    f"{n_samples} rows with cv={self.cv!r}: {exc} Use fewer folds (cv) or "
                    "more rows.") from exc
            self.public_estimator_ = clone(public).fit(X_pub, y_fit)
        else:
            scores = np.zeros((n_samples, 0), dtype=X.dtype)
            self.public_estimator_ = None
        n_pass = int(public_mask.sum()) if self.passthrough else 0
        # An int seed (what the final model's random_state holds anyway), so that
        # the released model holds plain types (skops, the command line's loader).
        final = self._final_template(n_score, n_pass, int((~public_mask).sum()),
                                     int(final_gen.integers(2**31 - 1)))
        final_names = self._final_names(n_score, public_mask, names)
        self.final_estimator_ = final.fit(self._final_input(scores.astype(X.dtype), X,
                                                            public_mask),
                                          y_fit, feature_names=list(final_names))
        plan = self.final_estimator_.privacy_plan_
        self.privacy_plan_ = self._stacked_plan(plan, public_mask, n_score, self._public_name())
        self.dp_event_ = plan.dp_event
        self.epsilon_ = float(self.final_estimator_.epsilon_)
        self.delta_ = float(self.final_estimator_.delta_)
        self.noise_multiplier_ = float(self.final_estimator_.noise_multiplier_)
        self.accountant_ = self.final_estimator_.accountant_
        self.feature_names_ = names
        self.public_mask_ = public_mask
        self.public_features_ = np.flatnonzero(public_mask)
        self.private_features_ = np.flatnonzero(~public_mask)
        self.label_public_ = True
        self.n_score_columns_ = n_score
        return self

    def _stacked_input(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        if self.public_estimator_ is None:
            scores = np.zeros((X.shape[0], 0), dtype=X.dtype)
        else:
            scores = self._public_scores(self.public_estimator_, X[:, self.public_mask_])
        return self._final_input(scores.astype(X.dtype), X, self.public_mask_)


def _clip_scale(z, bound):
    return np.clip(z, -bound, bound) / bound


class FeatureDPStackingClassifier(ClassifierMixin, _BaseFeatureDPStacking):
    """Feature-DP classifier on top of any public model (stacking).

    A public estimator (default :class:`~sklearn.ensemble.HistGradientBoostingClassifier`)
    is fitted on the public columns and the public label; its
    cross-fitted (out-of-fold) log-odds, clipped to ``±score_bound`` and
    divided by it, become public columns of a feature-DP final model
    (default :class:`FeatureDPLogisticRegression`, Algorithm 1) beside the
    protected columns. Predictions: the public estimator refitted on every
    row, scored the same way, then the final model. The fit is (ε, δ)-feature-DP
    with the final model's ε: replacing the protected columns of one record
    (or adding/removing a record whose public part is known) changes
    neither the public estimator nor the scores (they read public data
    only), and the final model is feature-DP with its public inputs fixed.

    Parameters
    ----------
    public_estimator : estimator or None, default=None
        Any scikit-learn classifier, fitted on the public columns and the
        label (with ``predict_proba`` or ``decision_function``). None:
        ``HistGradientBoostingClassifier()``. When its ``random_state`` is
        None it is seeded from ``random_state`` (a stream of its own).
    final_estimator : estimator or None, default=None
        The feature-DP final model (a template: cloned). None:
        ``FeatureDPLogisticRegression()``. Its ``public_features``,
        ``private_features``, ``label_public``, ``classes``, ``epsilon``,
        ``delta``, ``noise_multiplier``, ``accountant``, ``neighboring``,
        ``noise`` and ``random_state`` are set by this estimator; tune the
        rest through it (``final_estimator__epochs``).
    public_features : spec or None, default=None
        Public columns of ``X`` (indices, mask, names or callable, as in
        :class:`FeatureDPLogisticRegression`). Give exactly one of
        ``public_features`` and ``private_features``.
    private_features : spec or None, default=None
        Columns to protect; every other column is public.
    label_public : bool, default=True
        Must be True: the public estimator reads the label. False raises a
        ValueError that names the label-DP estimators instead.
    cv : int, cross-validation generator or iterable, default=5
        Folds of the cross-fitted score (``check_cv``: stratified for an
        int). The folds depend on the label and the row order only (public).
    passthrough : bool, default=False
        Also give the public columns themselves to the final model (public
        inputs; may need ``public_scale_`` rescaling there, see
        :class:`FeatureDPLogisticRegression`).
    score_bound : float, default=8.0
        The public log-odds are clipped to ``±score_bound`` and divided by
        it, so the score column lies in [-1, 1] (rows of bounded norm, as
        Algorithm 1's steps assume). With several classes, the centred
        log-probabilities, divided by ``score_bound * sqrt(n_classes)``.
    [[stacking_budget]]

    Attributes
    ----------
    public_estimator_ : estimator or None
        The public estimator refitted on every row's public columns (None
        when no column is public: the final model sees the protected
        columns only).
    final_estimator_ : estimator
        The fitted feature-DP final model; its input is ``[scores,
        (public columns), protected columns]``.
    classes_ : ndarray of shape (n_classes,)
    [[stacking_fitted]]

    Notes
    -----
    Privacy: unit = the protected columns of one record (the label is
    public), feature DP relative to the public part (FDP paper, Def. 5/6).
    The public estimator, the folds and the out-of-fold scores are
    functions of the public columns and the label only; they cost nothing
    and are identical on neighbouring data sets. The final model is run
    exactly as the estimator it is, with the scores as public columns, so
    its ε and δ are the fit's. Never below the public part: the final
    model starts from the exact minimiser of its public loss (the
    calibrated public score) and, as ε shrinks, ``alpha="auto"`` shrinks
    the weight of its private steps, so it stays at the public model's
    calibrated score. NOT protected: the public columns, the label,
    ``n``, the classes.

    See Also
    --------
    FeatureDPLogisticRegression : The final model.
    sklearn.ensemble.StackingClassifier : The non-private counterpart.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.preprocessing import minmax_scale
    >>> from sklearn_fdp import FeatureDPStackingClassifier
    >>> X, y = make_classification(n_samples=1000, n_features=6, random_state=0)
    >>> X = minmax_scale(X) / 3
    >>> clf = FeatureDPStackingClassifier(private_features=[0, 1], epsilon=1.0,
    ...                                   random_state=0).fit(X, y)
    >>> clf.private_features_.tolist(), bool(clf.epsilon_ <= 1.0)
    ([0, 1], True)
    """

    _parameter_constraints: dict = {
        **_BaseFeatureDPStacking._parameter_constraints,
        "score_bound": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        public_estimator: BaseEstimator | None = None,
        final_estimator: BaseEstimator | None = None,
        *,
        public_features: FeatureSpec = None,
        private_features: FeatureSpec = None,
        label_public: bool = True,
        cv: int | object = 5,
        passthrough: bool = False,
        score_bound: float = 8.0,
        epsilon: float | None = 1.0,
        delta: float = 1e-5,
        noise_multiplier: float | None = None,
        accountant: Literal["auto", "pld", "rdp"] = "auto",
        neighboring: Literal["add_remove", "replace"] = "add_remove",
        random_state: RandomStateLike = None,
        noise: Literal["default", "secure"] = "default",
    ) -> None:
        self.public_estimator = public_estimator
        self.final_estimator = final_estimator
        self.public_features = public_features
        self.private_features = private_features
        self.label_public = label_public
        self.cv = cv
        self.passthrough = passthrough
        self.score_bound = score_bound
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.neighboring = neighboring
        self.random_state = random_state
        self.noise = noise

    def _default_public(self):
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier()

    def _default_final(self):
        from ._feature_dp_logistic import FeatureDPLogisticRegression

        return FeatureDPLogisticRegression()

    def _encode_target(self, y):
        self.classes_, y_index = encode_labels(self, y)
        return y_index

    def _score_width(self):
        # Before fit (a plan asked for ahead) the classes are unknown: one
        # column; the number of score columns changes no privacy number.
        n_classes = len(getattr(self, "classes_", ()))
        return n_classes if n_classes > 2 else 1

    def _final_settings(self, n_public_cols):
        if not hasattr(self, "classes_"):
            return {}
        return {"classes": np.arange(len(self.classes_))}

    def _public_scores(self, est, X_pub, cv=None, y=None):
        """Log-odds (or centred log-probabilities) of ``est``, clipped and scaled to [-1, 1]."""
        method = "predict_proba" if hasattr(est, "predict_proba") else "decision_function"
        if cv is not None:
            raw = cross_val_predict(est, X_pub, y, cv=cv, method=method)
        else:
            raw = getattr(est, method)(X_pub)
        raw = np.asarray(raw, dtype=np.float64)
        n_classes = len(self.classes_)
        if method == "predict_proba":
            logp = np.log(np.clip(raw, 1e-300, None))
            z = (logp[:, 1] - logp[:, 0])[:, None] if n_classes == 2 \
                else logp - logp.mean(axis=1, keepdims=True)
        else:
            z = raw.reshape(len(raw), -1)
            if n_classes > 2:
                z = z - z.mean(axis=1, keepdims=True)
        width = 1.0 if n_classes == 2 else math.sqrt(n_classes)
        return _clip_scale(z, float(self.score_bound)) / width

    @_fit_context(prefer_skip_nested_validation=False)
    @atomic_fit
    def fit(self, X: MatrixLike, y: ArrayLike, feature_names: ArrayLike | None = None) -> Self:
        """Cross-fit the public score, fit the feature-DP final model, refit the public one.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (dense). Scale the protected columns to a
            data-independent range, as for the final model.
        y : array-like of shape (n_samples,)
            Public class labels.
        feature_names : sequence of str or None, default=None
            Names of X's columns, to resolve column names in the feature
            specs (:func:`~sklearn_fdp.pipeline.make_private_pipeline`
            passes them).

        Returns
        -------
        self : FeatureDPStackingClassifier
        """
        return self._fit(X, y, feature_names)

    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """The final model's decision function on the stacked input.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to score, with the training columns.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        X_final = self._stacked_input(X)
        return self.final_estimator_.decision_function(X_final)

    def predict_proba(self, X: MatrixLike) -> np.ndarray:
        """Class probabilities of the final model on the stacked input.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to score, with the training columns.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        X_final = self._stacked_input(X)
        return self.final_estimator_.predict_proba(X_final)

    def predict_log_proba(self, X: MatrixLike) -> np.ndarray:
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to score, with the training columns.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        return np.log(self.predict_proba(X))

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Predicted class labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to score, with the training columns.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        X_final = self._stacked_input(X)
        return self.classes_[np.asarray(self.final_estimator_.predict(X_final), dtype=int)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True
        tags.non_deterministic = self.noise == "secure"
        return tags


class FeatureDPStackingRegressor(RegressorMixin, _BaseFeatureDPStacking):
    """Feature-DP regressor on top of any public model (stacking).

    A public estimator (default :class:`~sklearn.ensemble.HistGradientBoostingRegressor`)
    is fitted on the public columns and the public target; its
    cross-fitted (out-of-fold) prediction, clipped to ``y_bounds`` and
    mapped to [-1, 1], becomes a public column of a feature-DP final model
    (default :class:`FeatureDPLinearRegression`, the sufficient statistic)
    beside the protected columns. The fit is (ε, δ)-feature-DP with the
    final model's ε (the public part reads public data only and is free).

    Parameters
    ----------
    public_estimator : estimator or None, default=None
        Any scikit-learn regressor, fitted on the public columns and the
        target. None: ``HistGradientBoostingRegressor()``. When its
        ``random_state`` is None it is seeded from ``random_state``.
    final_estimator : estimator or None, default=None
        The feature-DP final model (a template: cloned). None:
        ``FeatureDPLinearRegression()``. Its feature specs, ``label_public``,
        ``y_bounds``, ``row_norm_bounds`` and budget parameters are set by
        this estimator; tune the rest through it
        (``final_estimator__alpha``).
    public_features : spec or None, default=None
        Public columns of ``X``. Give exactly one of ``public_features`` and
        ``private_features``.
    private_features : spec or None, default=None
        Columns to protect; every other column is public.
    label_public : bool, default=True
        Must be True: the public estimator reads the target.
    y_bounds : (float, float)
        Public range of the target, required (as for
        :class:`FeatureDPLinearRegression`); the public score is clipped to
        it and mapped to [-1, 1].
    row_norm_bounds : float or (float, float), default=1.0
        Declared L2 bounds of a row's public and protected columns, as for
        :class:`FeatureDPLinearRegression` (a number bounds both). The final
        model's public block (score, and the public columns with
        ``passthrough``) is bounded by 1, or ``sqrt(1 + B_P²)`` with
        ``passthrough``.
    cv : int, cross-validation generator or iterable, default=5
        Folds of the cross-fitted score (unshuffled K-fold for an int).
    passthrough : bool, default=False
        Also give the public columns themselves to the final model.
    [[stacking_budget]]

    Attributes
    ----------
    public_estimator_ : estimator or None
        As for :class:`FeatureDPStackingClassifier`.
    final_estimator_ : estimator
        The fitted feature-DP final model.
    [[stacking_fitted]]

    Notes
    -----
    Privacy as for :class:`FeatureDPStackingClassifier`. Never below the
    public part: the default final model's ``solver="residual"`` fits the
    public block (here the public score) exactly and the protected columns
    to its residual, with the noisy directions raised to the noise scale,
    so that as ε shrinks the model falls back to the public one.

    See Also
    --------
    FeatureDPLinearRegression : The final model.
    sklearn.ensemble.StackingRegressor : The non-private counterpart.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp import FeatureDPStackingRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 0.5, size=(1000, 4))
    >>> y = np.sin(6 * X[:, 2]) + X[:, 0] + 0.1 * rng.standard_normal(1000)
    >>> reg = FeatureDPStackingRegressor(private_features=[0], y_bounds=(-2, 2),
    ...                                  random_state=0).fit(X, y)
    >>> bool(reg.epsilon_ <= 1.0)
    True
    """

    _parameter_constraints: dict = {
        **_BaseFeatureDPStacking._parameter_constraints,
        "y_bounds": "no_validation",
        "row_norm_bounds": "no_validation",
    }

    def __init__(
        self,
        public_estimator: BaseEstimator | None = None,
        final_estimator: BaseEstimator | None = None,
        *,
        public_features: FeatureSpec = None,
        private_features: FeatureSpec = None,
        label_public: bool = True,
        y_bounds: tuple[float, float] | None = None,
        row_norm_bounds: float | tuple[float, float] = 1.0,
        cv: int | object = 5,
        passthrough: bool = False,
        epsilon: float | None = 1.0,
        delta: float = 1e-5,
        noise_multiplier: float | None = None,
        accountant: Literal["auto", "pld", "rdp"] = "auto",
        neighboring: Literal["add_remove", "replace"] = "add_remove",
        random_state: RandomStateLike = None,
        noise: Literal["default", "secure"] = "default",
    ) -> None:
        self.public_estimator = public_estimator
        self.final_estimator = final_estimator
        self.public_features = public_features
        self.private_features = private_features
        self.label_public = label_public
        self.y_bounds = y_bounds
        self.row_norm_bounds = row_norm_bounds
        self.cv = cv
        self.passthrough = passthrough
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.neighboring = neighboring
        self.random_state = random_state
        self.noise = noise

    def _default_public(self):
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor()

    def _default_final(self):
        from ._feature_dp_linear import FeatureDPLinearRegression

        return FeatureDPLinearRegression()

    def _check_params(self):
        final = super()._check_params()
        check_y_bounds(self, required=True)
        return final

    def _encode_target(self, y):
        return y

    def _final_settings(self, n_public_cols):
        settings = {"y_bounds": self.y_bounds}
        bounds = self.row_norm_bounds
        if isinstance(bounds, Real) and not isinstance(bounds, (bool, np.bool_)):
            b_p, b_q = float(bounds), float(bounds)
        else:
            b_p, b_q = (float(b) for b in bounds)
        b_pub = math.sqrt(1.0 + b_p**2) if self.passthrough else 1.0
        settings["row_norm_bounds"] = (b_pub, b_q)
        return settings

    def _public_scores(self, est, X_pub, cv=None, y=None):
        """Predictions of ``est`` clipped to ``y_bounds`` and mapped to [-1, 1]."""
        raw = (cross_val_predict(est, X_pub, y, cv=cv) if cv is not None
               else est.predict(X_pub))
        lo, hi = (float(b) for b in self.y_bounds)
        centre, half = (lo + hi) / 2, (hi - lo) / 2
        return _clip_scale(np.asarray(raw, dtype=np.float64).reshape(-1, 1) - centre, half)

    @_fit_context(prefer_skip_nested_validation=False)
    @atomic_fit
    def fit(self, X: MatrixLike, y: ArrayLike, feature_names: ArrayLike | None = None) -> Self:
        """Cross-fit the public prediction, fit the feature-DP final model, refit the public one.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (dense).
        y : array-like of shape (n_samples,)
            Public target values.
        feature_names : sequence of str or None, default=None
            Names of X's columns, to resolve column names in the feature specs.

        Returns
        -------
        self : FeatureDPStackingRegressor
        """
        return self._fit(X, y, feature_names)

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Predict with the public estimator's score and the final model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to score, with the training columns.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        X_final = self._stacked_input(X)
        return self.final_estimator_.predict(X_final)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True
        tags.non_deterministic = self.noise == "secure"
        return tags


fill_doc(FeatureDPStackingClassifier, extra=_PARAGRAPHS)
fill_doc(FeatureDPStackingRegressor, extra=_PARAGRAPHS)

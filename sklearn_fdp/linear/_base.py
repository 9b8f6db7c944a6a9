"""Shared pieces of the private linear classifiers and regressors.

An estimator here is thin and its ``fit`` a straight line: validate
(:func:`validate_linear_data`), plan (its ``privacy_plan``, from
:mod:`sklearn_fdp._budget`), run the mechanisms (an oracle handed to the one
engine in :mod:`sklearn_fdp._engine`, built with :func:`engine_config` and
:func:`resolve_learning_rate`), store (:meth:`BaseDPLinearClassifier._store_linear`).
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import TYPE_CHECKING
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, column_or_1d

from .. import accounting
from .._engine import LOSSES, LR_SCHEDULES, REGRESSION_LOSSES, EngineConfig, split_theta
from .._distributed import check_partitioned, partitioned_labels, use_cluster
from .._outofcore import should_stream, validate_row_source
from .._random import NOISE_OPTIONS
from .._validation import (
    DELTA_CONSTRAINT,
    NEIGHBORING_CONSTRAINT,
    Interval,
    LinearClassifierMixin,
    StrOptions,
    _assert_all_finite,
    check_row_norms_finite,
    encode_labels,
    validate_numeric_data,
    check_y_bounds,
    warn_clipped_targets,
)
from ..exceptions import FdpWarning

if TYPE_CHECKING:  # annotations only
    from .._typing import MatrixLike

# Streams spawned from random_state, in this order, for every linear fit.
_SAMPLE, _NOISE, _PUBLIC, _INIT = range(4)


def _auto_learning_rate(noise_std, batch_size, n_rows, n_outputs=1, steps=None,
                        cap_factor=1.0):
    """Default step size: ``min(4 k^0.3, sqrt(k) · 0.005 B^1.5 / (σ C sqrt(d + 1)))``.

    ``σ C sqrt(d + 1) / B`` is the norm of the noise in one normalised noisy
    gradient of one output column (``d + 1`` rows with the intercept,
    expected batch ``B``, clip norm ``C``; the caller passes ``σ C`` as
    ``noise_std``): the noisier each step, the smaller the step that
    averages the noise out, and small batches (many cheap steps) tolerate
    relatively smaller steps than large ones. For ``k`` output columns the
    clipped gradient is spread over the columns, so the step grows with
    ``k``.

    Constants from learning-rate sweeps on validation splits only: binary
    (k = 1) on adult.data (never adult.test) over B in {256, 1024, 1291},
    ε in {0.03, 0.1, 1} and 5-20 epochs, where the best rates followed
    ``0.005 B^1.5 / (σ sqrt(d + 1))`` within a factor of two, and 4 once the
    noise is negligible; the ``k`` factors from sklearn's digits (k = 10)
    and ``make_purchase_like`` (k = 100) at ε in {1, 4, 8}. Tuned for rows
    of norm ≤ 1, ``max_grad_norm`` around 1 and momentum 0.9.

    Small data, binary only (issue 20): the sweeps ran at least about 2e5 expected
    examples (``_SMALL_N_REF``; 10 epochs of a 22,800-row training split of
    adult.data), and at a fixed ``B`` the ``B^1.5`` factor stands for the
    travel of many steps. Below that, i.e. when ``steps · B < 2e5``, *and*
    when one step's noise is below its signal (``σ C sqrt(d + 1) / B < 1``:
    the steps are not mostly noise), the rate is multiplied by
    ``sqrt(2e5 / (steps · B))`` (still capped); ``steps=None`` turns this
    off. Adult's full training set at the defaults (10 epochs) is above the
    reference and unchanged. Measured on a validation split (30 %) of
    adult.data, mean of 3 seeds and subsamples, defaults: DPSGDClassifier on
    750 rows at ε = 1, 0.759 (the majority class, every seed) → 0.774; 3,000
    rows at ε = 0.1 / 1, 0.759 / 0.813 → 0.763 / 0.821; 10,000 rows at
    ε = 0.1 / 1, 0.801 / 0.834 → 0.803 / 0.836; DPSGDFClassifier on 750 /
    3,000 rows at ε = 1, 0.759 / 0.816 → 0.785 / 0.822. Where the gate is
    closed (750 rows at ε ≤ 0.1, 3,000 at ε = 0.03) a 2.8-5.4 times larger
    rate scored 0.1-2 points lower: those fits stay at the majority class
    (see :func:`sklearn_fdp.check_collapse`). Not applied to
    FeatureDPLogisticRegression: on the same splits (its defaults, Adult's
    protected columns) it moved accuracy by -1.6 to +0.0 points. Not applied
    to ``k > 1`` output columns: on sklearn's digits (1,257 training rows)
    at ε = 0.3 / 1 it lost 1.7 / 3.5 points, on 4,200 rows of
    ``make_purchase_like`` at ε = 1 1.6 points.
    """
    cap = cap_factor * 4.0 * n_outputs**0.3  # cap_factor: FDP Algorithm 1's, see the caller
    if noise_std <= 0:
        return float(cap)
    rate = math.sqrt(n_outputs) * 0.005 * batch_size**1.5 / (noise_std * math.sqrt(n_rows))
    if steps is not None and n_outputs == 1:
        processed = steps * batch_size
        if processed < _SMALL_N_REF and noise_std * math.sqrt(n_rows) < batch_size:
            rate *= math.sqrt(_SMALL_N_REF / processed)
    return float(min(cap, rate))


# Examples processed (steps × expected batch) by the learning-rate sweeps of
# _auto_learning_rate; shorter runs with a usable signal get larger steps.
_SMALL_N_REF = 2e5


def validate_linear_data(est, X, y, *, accept_sparse="csr", stream=True, cluster=False):
    """``(X, classes_, y_index)``: checked training data of a linear classifier.

    ``cluster``: the estimator can fit on a ``dask.distributed`` cluster; a
    dask ``X`` with an active ``Client`` then stays partitioned (its values
    are checked per partition, on the workers) and ``y_index`` is a dask
    array (:func:`~sklearn_fdp._distributed.partitioned_labels`).

    A large ``numpy.memmap`` / dask array (``stream`` and
    :func:`~sklearn_fdp._outofcore.should_stream`) is checked in chunks and
    becomes a row source read per batch, never copied whole; anything else
    is validated in memory (float64/float32, C order, CSR when
    ``accept_sparse``) with finite squared row norms.
    """
    if cluster and use_cluster(X):
        return partitioned_labels(est, X, y)
    if stream and should_stream(X):
        X, y = validate_row_source(est, X, y)
    else:
        X, y = validate_numeric_data(est, X, y, accept_sparse=accept_sparse,
                                     dtype=[np.float64, np.float32], order="C",
                                     y_numeric=False)
        check_row_norms_finite(X, type(est).__name__)
    classes, y_index = encode_labels(est, y, est.classes)
    return X, classes, y_index


def n_outputs_of(classes):
    """Output columns of a linear model: 1 for two classes, else one per class."""
    return 1 if len(classes) == 2 else len(classes)


def resolve_learning_rate(est, noise_std, schedule, n_rows, n_outputs, *, small_data=True,
                          cap_factor=1.0):
    """``est.learning_rate``, or :func:`_auto_learning_rate` for ``"auto"``.

    ``noise_std`` is the std of the noise per coordinate of a noisy sum the
    steps must average out (σ·C, times α for FDP Algorithm 1). ``small_data``:
    apply the small-data factor of :func:`_auto_learning_rate` (DP-SGD and
    DPSGD-F; not FDP, whose unclipped public steps it did not help).
    ``cap_factor`` multiplies the rule's cap ``4 k^0.3``.
    """
    if est.learning_rate == "auto":
        return _auto_learning_rate(noise_std, schedule.batch_size, n_rows, n_outputs,
                                   steps=schedule.steps if small_data else None,
                                   cap_factor=cap_factor)
    return float(est.learning_rate)


def engine_config(est, plan, clip, learning_rate, **extra):
    """The :class:`EngineConfig` of ``est``'s DP-SGD run under ``plan``."""
    steps = plan.schedule.steps
    return EngineConfig(
        steps=steps,
        sampling_rate=plan.schedule.sampling_rate,
        noise_multiplier=plan.noise_multiplier,
        max_grad_norm=clip,
        learning_rate=learning_rate,
        lr_schedule=est.lr_schedule,
        momentum=est.momentum,
        l2_regularization=est.l2_regularization,
        average_start=steps // 2 if est.average else None,
        **extra,
    )


def epoch_printer(est, plan):
    """Per-epoch progress (ε spent so far: public settings only), or None."""
    if not est.verbose:
        return None
    steps, sampling_rate = plan.schedule.steps, plan.schedule.sampling_rate
    steps_per_epoch = max(1, round(1 / sampling_rate))
    name = type(est).__name__

    def callback(t, theta):
        done = t + 1
        if done % steps_per_epoch and done != steps:
            return
        eps = accounting.compute_epsilon(
            plan.noise_multiplier, sampling_rate, done, est.delta,
            accountant=plan.accountant, neighboring=est.neighboring,
        )
        print(
            f"[{name}] epoch {done / steps_per_epoch:.1f}: step {done}/{steps}, "
            f"ε spent {eps:.4g} (δ={est.delta:g}), ‖θ‖ {np.linalg.norm(theta):.4g}",
            file=sys.stdout,
            flush=True,
        )

    return callback


# The DP-SGD parameters every private linear model has (the classifiers add
# `classes`, the regressors `y_bounds`).
_SGD_PARAMETER_CONSTRAINTS: dict = {
    "epsilon": [Interval(Real, 0, None, closed="neither"), None],
    "delta": DELTA_CONSTRAINT,
    "max_grad_norm": [Interval(Real, 0, None, closed="neither")],
    "noise_multiplier": [Interval(Real, 0, None, closed="neither"), None],
    "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "epochs": [Interval(Real, 0, None, closed="neither")],
    "learning_rate": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
    "lr_schedule": [StrOptions(set(LR_SCHEDULES))],
    "momentum": [Interval(Real, 0, 1, closed="left")],
    "average": ["boolean"],
    "l2_regularization": [Interval(Real, 0, None, closed="left")],
    "fit_intercept": ["boolean"],
    "accountant": [StrOptions({*accounting.ACCOUNTANTS, "auto"})],
    "neighboring": NEIGHBORING_CONSTRAINT,
    "random_state": ["random_state"],
    "noise": [StrOptions(set(NOISE_OPTIONS))],
    "verbose": ["verbose"],
}


def store_run(est, coef, intercept, plan, learning_rate, n_iter=None):
    """Set the fitted attributes every private linear model has: the model and its ``plan``.

    ``n_iter`` defaults to the plan's number of steps.
    """
    schedule = plan.schedule
    est.coef_ = coef
    est.intercept_ = intercept
    est.n_iter_ = schedule.steps if n_iter is None else n_iter
    est.steps_ = schedule.steps
    est.batch_size_ = schedule.batch_size
    est.learning_rate_ = learning_rate
    est.sampling_rate_ = schedule.sampling_rate
    est.noise_multiplier_ = plan.noise_multiplier
    est.dp_event_ = plan.dp_event
    est.epsilon_ = plan.epsilon
    est.delta_ = float(est.delta)
    est.accountant_ = plan.accountant
    est.privacy_plan_ = plan



def _private_model_tags(est, tags):
    """The tags every private linear model sets: sparse input, and ``noise="secure"``
    draws from the OS CSPRNG (``random_state`` does not fix the fit). Each model also
    marks ``poor_score``: it is noisier than its non-private twin by design."""
    tags.input_tags.sparse = True
    tags.non_deterministic = getattr(est, "noise", "default") == "secure"
    return tags

class BaseDPLinearClassifier(LinearClassifierMixin, ClassifierMixin, BaseEstimator):
    """Base class: the parameters, fitted attributes and predictions of a private linear model.

    Not a template: each subclass's ``fit`` is its own straight line
    (validate → ``privacy_plan`` → mechanisms → :meth:`_store_linear`),
    built from the functions of this module.
    """

    # The DP-SGD parameters every subclass has; `loss` where it is one (the
    # loss of a subclass without the parameter is log-loss).
    _LOSS_CONSTRAINT = {"loss": [StrOptions(set(LOSSES))]}

    _parameter_constraints: dict = {
        **_SGD_PARAMETER_CONSTRAINTS,
        "classes": ["array-like", None],
    }

    def _store_linear(self, coef, intercept, classes, plan, learning_rate, *, n_iter=None):
        """Set every fitted attribute of a fit: the released model and its ``plan``.

        ``n_iter`` defaults to the plan's number of steps.
        """
        self.classes_ = classes
        store_run(self, coef, intercept, plan, learning_rate, n_iter)

    # -- prediction ----------------------------------------------------------

    def _has_proba(self):
        # Log-loss models have probabilities; a subclass without a `loss`
        # parameter (FDP, AdaMix) is one.
        return getattr(self, "loss", "log_loss") == "log_loss"

    @available_if(_has_proba)
    def predict_proba(self, X: MatrixLike) -> np.ndarray:
        """Class probabilities (``loss="log_loss"`` only).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        scores = self.decision_function(X)
        if scores.ndim == 1:
            from scipy.special import expit

            p = expit(scores)
            return np.column_stack([1.0 - p, p])
        from scipy.special import softmax

        return softmax(scores, axis=1)

    @available_if(_has_proba)
    def predict_log_proba(self, X: MatrixLike) -> np.ndarray:
        """Logarithm of :meth:`predict_proba` (``loss="log_loss"`` only)."""
        check_is_fitted(self)
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([-np.logaddexp(0, scores), -np.logaddexp(0, -scores)])
        from scipy.special import log_softmax

        return log_softmax(scores, axis=1)

    def __sklearn_tags__(self):
        tags = _private_model_tags(self, super().__sklearn_tags__())
        tags.classifier_tags.poor_score = True
        return tags


# -- regression -------------------------------------------------------------------


def validate_regression_data(est, X, y, *, accept_sparse="csr", stream=True, warn_rows=False,
                             cluster=False):
    """``(X, y)``: checked training data of a linear regressor, ``y`` finite float64.

    As :func:`validate_linear_data` for ``X`` (out-of-core row sources
    included; ``cluster``: a dask ``X`` with an active ``Client`` stays
    partitioned and ``y`` is a float64 dask array, checked per partition on
    the workers); ``y`` is a 1-D real target. ``warn_rows``: warn about
    in-memory rows of norm above 1 (:func:`warn_rows_beyond_unit_norm`).
    """
    if cluster and use_cluster(X):
        X, y = check_partitioned(est, X, y)
        return X, y.astype(np.float64)
    if stream and should_stream(X):
        X, y = validate_row_source(est, X, y)
        y = column_or_1d(np.asarray(y, dtype=np.float64), warn=True)
        _assert_all_finite(y, allow_nan=False, input_name="y",
                           estimator_name=type(est).__name__)
    else:
        X, y = validate_numeric_data(est, X, y, accept_sparse=accept_sparse,
                                     dtype=[np.float64, np.float32], order="C",
                                     y_numeric=True)
        check_row_norms_finite(X, type(est).__name__)
        if warn_rows:
            warn_rows_beyond_unit_norm(est, X)
    return X, np.asarray(y, dtype=np.float64)


# Rows up to this L2 norm pass: the step-size rules and max_grad_norm's default
# assume rows of norm <= 1; the slack absorbs rounding of a row scaled to 1.
UNIT_ROW_SLACK = 1.0 + 1e-6


def warn_rows_beyond_unit_norm(est, X):
    """Warn when a row of in-memory ``X`` has L2 norm above 1, the bound the
    regressors' step-size rule and ``max_grad_norm`` declare (as
    ``FeatureDPLinearRegression`` warns about its ``row_norm_bounds``).

    In-memory X only (a streamed source is read batch by batch later).
    Reads the rows: like the warning on targets outside ``y_bounds`` it is
    shown to whoever runs ``fit``, not stored in the model, and says so.
    """
    if sp.issparse(X):
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    else:
        norms = np.sqrt(np.einsum("ij,ij->i", X, X, dtype=np.float64))
    if norms.size == 0 or float(norms.max()) <= UNIT_ROW_SLACK:
        return
    n_over = int(np.count_nonzero(norms > UNIT_ROW_SLACK))
    warnings.warn(
        f"{type(est).__name__}: {n_over} of {X.shape[0]} rows of X have L2 norm above 1, the "
        "row bound its step-size rule and max_grad_norm assume: the gradients are clipped "
        "(privacy holds) but the fit can land far from the data's scale (predictions are "
        "clipped to y_bounds). Scale the columns to a data-independent range with rows of "
        "norm <= 1 (e.g. sklearn_fdp.preprocessing.make_tabular_preprocessor). This count "
        "reads the private rows and is not covered by epsilon_: it is shown to whoever runs "
        "fit and should not be published.", FdpWarning, stacklevel=4)


def y_bounds_centre_half(est):
    """``(centre, half_width)`` of ``est.y_bounds = (lo, hi)``, or None when it is None.

    Raises a ValueError naming the value when it is not two finite numbers
    with ``lo < hi`` (:func:`sklearn_fdp._validation.check_y_bounds`).
    """
    bounds = check_y_bounds(est, required=False)
    if bounds is None:
        return None
    lo, hi = bounds
    return (lo + hi) / 2.0, (hi - lo) / 2.0


def scaled_target(est, y):
    """``(t, (centre, half))``: ``y`` clipped to ``y_bounds`` and mapped to [-1, 1].

    ``t = (clip(y, lo, hi) − centre) / half`` with the public centre and half
    width of ``y_bounds``; ``(y, None)`` when ``y_bounds`` is None. A target
    outside the bounds is clipped with a warning that counts them (seen by
    whoever holds the data; the model depends on the bounds only through
    the clipping, which is part of each record's contribution). ``y`` is
    never modified.
    """
    bounds = y_bounds_centre_half(est)
    if bounds is None:
        warnings.warn(
            f"{type(est).__name__} without y_bounds trains on the target as it is: the "
            "default step size and max_grad_norm suit a target within about [-1, 1], and "
            "residuals far beyond 1 are all clipped (a slow, median-like fit). If the "
            "target's values go well beyond [-1, 1], give y_bounds=(lo, hi), its public "
            "range, to have it mapped to [-1, 1]; a target already within about [-1, 1] "
            "(in [0, 1], or standardised with public constants) needs none: mapping a "
            "narrow spread onto [-1, 1] shrinks it (docs/regression_sgd.md, 'y_bounds').",
            FdpWarning,
            stacklevel=3,
        )
        return y, None
    centre, half = bounds
    lo, hi = centre - half, centre + half
    outside = int(np.count_nonzero((y < float(est.y_bounds[0])) | (y > float(est.y_bounds[1]))))
    if outside:
        warn_clipped_targets(est, outside, len(y), est.y_bounds,
                             not getattr(est, "label_public", False), stacklevel=3)
    t = (np.clip(y, lo, hi) - centre) / half
    return np.clip(t, -1.0, 1.0), bounds


def clip_to_y_bounds(y_pred, y_bounds):
    """``y_pred`` clipped to the public ``y_bounds`` ``(lo, hi)`` (None: as is).

    Post-processing of a released model: no privacy cost."""
    if y_bounds is None:
        return y_pred
    lo, hi = y_bounds
    return np.clip(y_pred, lo, hi)


def unscale_regression(coef, intercept, bounds):
    """Model for ``y`` from the one learnt for the mapped target (``bounds=(centre, half)``)."""
    if bounds is None:
        return coef, intercept
    centre, half = bounds
    dtype = coef.dtype
    return ((coef * half).astype(dtype, copy=False),
            (intercept * half + centre).astype(dtype, copy=False))


class BaseDPLinearRegressor(RegressorMixin, BaseEstimator):
    """Base class of the private linear regressors: parameters, fitted attributes, predictions.

    As :class:`BaseDPLinearClassifier`: not a template; each subclass's
    ``fit`` is its own straight line ending in :meth:`_store_regression`.
    ``coef_`` has shape ``(n_features,)`` and ``intercept_`` ``(1,)``, as
    for scikit-learn's ``SGDRegressor``.
    """

    _LOSS_CONSTRAINT = {"loss": [StrOptions(set(REGRESSION_LOSSES))],
                        "loss_epsilon": [Interval(Real, 0, None, closed="left"),
                                         StrOptions({"auto"})]}

    _parameter_constraints: dict = {
        **_SGD_PARAMETER_CONSTRAINTS,
        "y_bounds": ["array-like", None],
    }

    def _store_regression(self, theta, fit_intercept, dtype, bounds, plan, learning_rate, *,
                          n_iter=None):
        """Set every fitted attribute from the trained ``theta`` (``(d + 1, 1)`` or ``(d, 1)``).

        ``bounds``: the ``(centre, half)`` of ``y_bounds`` the target was mapped with, or None.
        """
        coef, intercept = split_theta(theta, fit_intercept, dtype)
        coef, intercept = unscale_regression(coef[0], intercept, bounds)
        store_run(self, coef, intercept, plan, learning_rate, n_iter)
        self.y_bounds_ = None if bounds is None else check_y_bounds(self, required=False)

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Predicted targets ``X coef_ + intercept_``, clipped to ``y_bounds_``.

        With ``y_bounds`` the prediction is clipped to it: the target never
        leaves it in training, and clipping is post-processing of the released
        model (no privacy cost). ``X @ coef_ + intercept_`` is the unclipped
        linear model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = validate_numeric_data(self, X, accept_sparse="csr", reset=False,
                                  dtype=[np.float64, np.float32])
        return clip_to_y_bounds(np.asarray(safe_sparse_dot(X, self.coef_)) + self.intercept_[0],
                                getattr(self, "y_bounds_", None))

    def __sklearn_tags__(self):
        tags = _private_model_tags(self, super().__sklearn_tags__())
        tags.regressor_tags.poor_score = True
        return tags


# Step-size factors of the regression losses relative to the classifiers' rule
# (see resolve_regression_learning_rate): (on its cap, on its noise term), for a
# target mapped to [-1, 1] by y_bounds; without y_bounds, (1/4, 1).
_REGRESSION_LR_FACTORS = {"squared_error": (0.25, 0.04), "huber": (0.25, 0.04),
                          "epsilon_insensitive": (0.25, 0.06)}
_UNBOUNDED_LR_FACTORS = (0.25, 1.0)


def resolve_regression_learning_rate(est, loss, noise_std, schedule, n_rows, *, bounded):
    """``est.learning_rate``, or the regression rule for ``"auto"``.

    ``min(a · 4, b · 0.005 B^1.5 / (σ C sqrt(d + 1)))``: the two terms of
    the classifiers' rule (:func:`_auto_learning_rate`, one output column,
    without its small-data factor), scaled by ``(a, b)``.

    ``a = 1/4`` (a cap of 1): the squared loss's curvature ``E[x~ x~ᵀ]`` is
    four times the log loss's largest (``σ'(z) ≤ 1/4``), and heavy-ball
    momentum 0.9 is stable up to a step of ``3.8 / λ_max`` with
    ``λ_max ≤ max ‖x~‖² ≤ 2`` for rows of norm ≤ 1 with an intercept: the
    cap keeps every run stable, whatever the target's scale.

    ``b``, with ``bounded`` (``y_bounds`` given, the target in [-1, 1]):
    0.04 for ``"squared_error"`` and ``"huber"``, 0.06 for
    ``"epsilon_insensitive"``. On a validation split (30 %) of adult.data
    (never adult.test), target hours-per-week with ``y_bounds=(1, 99)``,
    rows of norm 1, mean of 2 seeds, the best squared-error rate over
    {0.01, 0.03, 0.05, 0.1, 0.15, 0.3, 1} was ≤ 0.01 / 0.05 / ≥ 0.15 /
    0.3-1 at ε = 0.03 / 0.1 / 0.3 / 1, where the noise term of the
    classifiers' rule is 0.39 / 1.28 / 3.8 / 12.8: about 1/25 of it (a
    mapped target has a small spread, so its gradients are small next to
    the noise); for ``"epsilon_insensitive"`` (margin 0.1 mapped) 0.1 / 0.3
    at ε = 0.1 / 1. Without ``y_bounds``, ``b = 1``: the residuals of an
    unscaled target are mostly clipped, and the clipped gradients are as
    large as the classifiers'.
    """
    if est.learning_rate != "auto":
        return float(est.learning_rate)
    cap_factor, noise_factor = (_REGRESSION_LR_FACTORS[loss] if bounded
                                else _UNBOUNDED_LR_FACTORS)
    cap = 4.0 * cap_factor
    if noise_std <= 0:
        return cap
    rate = noise_factor * 0.005 * schedule.batch_size**1.5 / (noise_std * math.sqrt(n_rows))
    return float(min(cap, rate))

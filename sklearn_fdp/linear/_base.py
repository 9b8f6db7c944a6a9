"""Shared pieces of the private linear classifiers.

An estimator here is thin and its ``fit`` a straight line: validate
(:func:`validate_linear_data`), plan (its ``privacy_plan``, from
:mod:`sklearn_fdp._budget`), run the mechanisms (an oracle handed to the one
engine in :mod:`sklearn_fdp._engine`, built with :func:`engine_config` and
:func:`resolve_learning_rate`), store (:meth:`BaseDPLinearClassifier._store_linear`).
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .. import accounting
from .._engine import LOSSES, LR_SCHEDULES, EngineConfig
from .._outofcore import should_stream, validate_row_source
from .._random import NOISE_OPTIONS
from .._validation import (
    DELTA_CONSTRAINT,
    NEIGHBORING_CONSTRAINT,
    Interval,
    LinearClassifierMixin,
    StrOptions,
    check_row_norms_finite,
    encode_labels,
    validate_numeric_data,
)

if TYPE_CHECKING:  # annotations only
    from .._typing import MatrixLike

# Streams spawned from random_state, in this order, for every linear fit.
_SAMPLE, _NOISE, _PUBLIC, _INIT = range(4)


def _auto_learning_rate(noise_std, batch_size, n_rows, n_outputs=1, steps=None):
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
    cap = 4.0 * n_outputs**0.3
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


def validate_linear_data(est, X, y, *, accept_sparse="csr", stream=True):
    """``(X, classes_, y_index)``: checked training data of a linear classifier.

    A large ``numpy.memmap`` / dask array (``stream`` and
    :func:`~sklearn_fdp._outofcore.should_stream`) is checked in chunks and
    becomes a row source read per batch, never copied whole; anything else
    is validated in memory (float64/float32, C order, CSR when
    ``accept_sparse``) with finite squared row norms.
    """
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


def resolve_learning_rate(est, noise_std, schedule, n_rows, n_outputs, *, small_data=True):
    """``est.learning_rate``, or :func:`_auto_learning_rate` for ``"auto"``.

    ``noise_std`` is the std of the noise per coordinate of a noisy sum the
    steps must average out (σ·C, times α for FDP Algorithm 1). ``small_data``:
    apply the small-data factor of :func:`_auto_learning_rate` (DP-SGD and
    DPSGD-F; not FDP, whose unclipped public steps it did not help).
    """
    if est.learning_rate == "auto":
        return _auto_learning_rate(noise_std, schedule.batch_size, n_rows, n_outputs,
                                   steps=schedule.steps if small_data else None)
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
        "classes": ["array-like", None],
    }

    def _store_linear(self, coef, intercept, classes, plan, learning_rate, *, n_iter=None):
        """Set every fitted attribute of a fit: the released model and its ``plan``.

        ``n_iter`` defaults to the plan's number of steps.
        """
        schedule = plan.schedule
        self.classes_ = classes
        self.coef_ = coef
        self.intercept_ = intercept
        self.n_iter_ = schedule.steps if n_iter is None else n_iter
        self.steps_ = schedule.steps
        self.batch_size_ = schedule.batch_size
        self.learning_rate_ = learning_rate
        self.sampling_rate_ = schedule.sampling_rate
        self.noise_multiplier_ = plan.noise_multiplier
        self.dp_event_ = plan.dp_event
        self.epsilon_ = plan.epsilon
        self.delta_ = float(self.delta)
        self.accountant_ = plan.accountant
        self.privacy_plan_ = plan

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
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # A private model is noisier than its non-private twin by design.
        tags.classifier_tags.poor_score = True
        # noise="secure" draws from the OS CSPRNG: random_state does not fix the fit.
        tags.non_deterministic = getattr(self, "noise", "default") == "secure"
        return tags

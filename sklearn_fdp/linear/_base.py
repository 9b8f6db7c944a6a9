"""Shared machinery of the private linear classifiers.

An estimator here is thin: it validates, encodes the labels, builds the
gradient oracles for its algorithm and hands them to the one engine in
:mod:`sklearn_fdp._engine`. Subclasses override the ``_make_*`` hooks.
"""

import math
import sys
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .. import accounting
from .._budget import DPSGDBudgetMixin
from .._engine import LOSSES, LR_SCHEDULES, EngineConfig, LinearGradientOracle, LinearLoss
from .._engine import run_dp_sgd
from .._outofcore import should_stream, validate_row_source
from .._random import NOISE_OPTIONS, spawn_generators
from .._validation import (
    DELTA_CONSTRAINT,
    NEIGHBORING_CONSTRAINT,
    Interval,
    LinearClassifierMixin,
    StrOptions,
    check_delta_vs_n,
    check_row_norms_finite,
    encode_labels,
    validate_numeric_data,
)

# Streams spawned from random_state, in this order, for every linear fit.
_SAMPLE, _NOISE, _PUBLIC, _INIT = range(4)


def _auto_learning_rate(noise_std, batch_size, n_rows, n_outputs=1):
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
    """
    cap = 4.0 * n_outputs**0.3
    if noise_std <= 0:
        return float(cap)
    rate = math.sqrt(n_outputs) * 0.005 * batch_size**1.5 / (noise_std * math.sqrt(n_rows))
    return float(min(cap, rate))


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


def resolve_learning_rate(est, noise_std, schedule, n_rows, n_outputs):
    """``est.learning_rate``, or :func:`_auto_learning_rate` for ``"auto"``.

    ``noise_std`` is the std of the noise per coordinate of a noisy sum the
    steps must average out (σ·C, times α for FDP Algorithm 1).
    """
    if est.learning_rate == "auto":
        return _auto_learning_rate(noise_std, schedule.batch_size, n_rows, n_outputs)
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


class BaseDPLinearClassifier(DPSGDBudgetMixin, LinearClassifierMixin, ClassifierMixin,
                             BaseEstimator):
    """Base class: a linear classifier trained by the DP-SGD engine."""

    _parameter_constraints: dict = {
        "loss": [StrOptions(set(LOSSES))],
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

    # Input formats ``fit`` accepts (validate_data's accept_sparse).
    _accept_sparse = "csr"

    # -- hooks for subclasses ------------------------------------------------

    def _make_private_oracle(self, X, y_enc, loss):
        return LinearGradientOracle(X, y_enc, loss, self.fit_intercept, self._clip_norm())

    def _make_public_oracle(self, X, y_enc, loss, rng):
        return None

    def _make_oracles(self, X, y_enc, loss, public_rng):
        """``(private_oracle, public_oracle)``; ``public_rng`` is the public stream.

        Override when the two oracles share set-up or need more
        data-independent streams (spawn them from ``public_rng``).
        """
        return (
            self._make_private_oracle(X, y_enc, loss),
            self._make_public_oracle(X, y_enc, loss, public_rng),
        )

    def _loss_name(self):
        """Name of the loss in :data:`LOSSES` (the ``loss`` parameter by default)."""
        return self.loss

    def _setup_fit(self, X, batch_size):
        """Resolve data-shape-dependent settings after validation (no-op here)."""

    def _initial_theta(self, X, y_enc, loss, rng, theta0):
        """Starting point of the noisy run; ``theta0`` (zeros) by default.

        ``rng`` is a dedicated stream that nothing else draws from. An
        override may use public data only (e.g. public pretraining).
        """
        return theta0

    # -- fitting -------------------------------------------------------------

    def _streams_out_of_core(self):
        """Whether ``fit`` reads an out-of-core ``X`` batch by batch.

        True unless a subclass transforms the validated ``X`` as a whole
        (its own ``_validate_training_data``, e.g. DPSGDF's row scaling);
        such estimators read a memmap or dask array into memory instead.
        """
        return (type(self)._validate_training_data
                is BaseDPLinearClassifier._validate_training_data)

    def _validate_training_data(self, X, y):
        if should_stream(X) and self._streams_out_of_core():
            # A large numpy.memmap / dask array: checked in chunks, rows read
            # per batch (sklearn_fdp._outofcore); the same model as in memory.
            X, y = validate_row_source(self, X, y)
        else:
            X, y = validate_numeric_data(
                self,
                X,
                y,
                accept_sparse=self._accept_sparse,
                dtype=[np.float64, np.float32],
                order="C",
                y_numeric=False,
            )
            check_row_norms_finite(X, type(self).__name__)
        classes, y_index = encode_labels(self, y, self.classes)
        return X, classes, y_index

    def _clip_norm(self):
        """Per-example clip norm of the run (subclasses may resolve an "auto")."""
        return float(self.max_grad_norm)

    def _fit_engine(self, X, y):
        """Validate, account, run the engine and store the fitted attributes."""
        self._check_params(X, y)
        X, classes, y_index = self._validate_training_data(X, y)
        n_samples, n_features = X.shape
        check_delta_vs_n(self.delta, n_samples, type(self).__name__, stacklevel=4)

        batch_size = self._resolve_batch_size(n_samples)
        sampling_rate = batch_size / n_samples
        steps = max(1, math.ceil(self.epochs * n_samples / batch_size))
        self._setup_fit(X, batch_size)
        if self._fits_without_engine():
            return self._fit_without_engine(X, classes, y_index)
        X = self._engine_data(X)
        clip = self._clip_norm()
        sigma, event, spent, accountant = self._budget(n_samples, sampling_rate, steps)

        n_outputs = 1 if len(classes) == 2 else len(classes)
        loss = LinearLoss(self._loss_name(), n_outputs)
        y_enc = loss.encode(y_index)
        # noise="secure": the batch coins and the noise come from the OS CSPRNG.
        gens = spawn_generators(self.random_state, 4, noise=self.noise,
                                private_streams=(_SAMPLE, _NOISE))
        private_oracle, public_oracle = self._make_oracles(X, y_enc, loss, gens[_PUBLIC])

        n_rows = n_features + int(self.fit_intercept)
        theta0 = self._initial_theta(
            X, y_enc, loss, gens[_INIT], np.zeros((n_rows, n_outputs), dtype=X.dtype)
        )
        # The noise the step size must average out has std alpha * σ * C per
        # coordinate (FDP Algorithm 1 scales the private part by alpha).
        extra = self._engine_extra(sigma * clip, batch_size, n_rows)
        alpha = extra.get("alpha", 1.0)
        learning_rate = (
            _auto_learning_rate(alpha * sigma * clip, batch_size, n_rows,
                                n_outputs)
            if self.learning_rate == "auto"
            else float(self.learning_rate)
        )
        config = EngineConfig(
            steps=steps,
            sampling_rate=sampling_rate,
            noise_multiplier=sigma,
            max_grad_norm=clip,
            learning_rate=learning_rate,
            lr_schedule=self.lr_schedule,
            momentum=self.momentum,
            l2_regularization=self.l2_regularization,
            average_start=steps // 2 if self.average else None,
            **extra,
        )
        callback = self._make_callback(steps, sampling_rate, sigma, accountant) if self.verbose else None
        result = run_dp_sgd(
            theta0,
            private_oracle,
            n_samples,
            config,
            sample_rng=gens[_SAMPLE],
            noise_rng=gens[_NOISE],
            public_oracle=public_oracle,
            callback=callback,
        )
        self._store_fit(result.theta, classes, X.dtype, n_iter=steps, steps=steps,
                        batch_size=batch_size, learning_rate=learning_rate,
                        sampling_rate=sampling_rate, sigma=sigma, event=event, spent=spent,
                        accountant=accountant)
        return self

    def _store_linear(self, theta, classes, dtype, plan, learning_rate):
        """Set every fitted attribute of a DP-SGD fit from ``theta`` and its ``plan``."""
        schedule = plan.schedule
        self._store_fit(theta, classes, dtype, n_iter=schedule.steps, steps=schedule.steps,
                        batch_size=schedule.batch_size, learning_rate=learning_rate,
                        sampling_rate=schedule.sampling_rate, sigma=plan.noise_multiplier,
                        event=plan.dp_event, spent=plan.epsilon, accountant=plan.accountant)
        self.privacy_plan_ = plan

    def _store_fit(self, theta, classes, dtype, *, n_iter, steps, batch_size, learning_rate,
                   sampling_rate, sigma, event, spent, accountant):
        """Set the fitted attributes from the released parameters ``theta``."""
        n_features = theta.shape[0] - int(self.fit_intercept)
        n_outputs = theta.shape[1]
        theta = theta.astype(dtype, copy=False)
        self.classes_ = classes
        self.coef_ = np.ascontiguousarray(theta[:n_features].T)
        self.intercept_ = (
            theta[n_features].copy() if self.fit_intercept else np.zeros(n_outputs, dtype)
        )
        self.n_iter_ = n_iter
        self.steps_ = steps
        self.batch_size_ = batch_size
        self.learning_rate_ = learning_rate
        self.sampling_rate_ = sampling_rate
        self.noise_multiplier_ = sigma
        self.dp_event_ = event
        self.epsilon_ = spent
        self.delta_ = float(self.delta)
        self.accountant_ = accountant

    def _engine_data(self, X):
        """The ``X`` the engine trains on (after ``_setup_fit``): ``X`` itself here.

        An override may transform ``X`` only by a rule of public quantities
        (e.g. a factor computed from the public columns) and must map the
        released parameters back in ``_store_fit``.
        """
        return X

    def _fits_without_engine(self):
        """Whether this fit releases something other than a DP-SGD run (after ``_setup_fit``)."""
        return False

    def _fit_without_engine(self, X, classes, y_index):
        """The fit when :meth:`_fits_without_engine` is True; returns ``self``."""
        raise NotImplementedError

    def _engine_extra(self, noise_std, batch_size, n_rows):
        """Extra :class:`EngineConfig` settings (e.g. ``alpha``).

        ``noise_std`` is σ·C, the noise added to each private sum; ``n_rows``
        is the number of parameter rows of one output column (d + 1).
        """
        return {}

    def _make_callback(self, steps, sampling_rate, sigma, accountant):
        """Per-epoch progress: ε spent so far (a function of public settings only)."""
        steps_per_epoch = max(1, round(1 / sampling_rate))
        name = type(self).__name__

        def callback(t, theta):
            done = t + 1
            if done % steps_per_epoch and done != steps:
                return
            eps = accounting.compute_epsilon(
                sigma, sampling_rate, done, self.delta, accountant=accountant,
                neighboring=self.neighboring,
            )
            print(
                f"[{name}] epoch {done / steps_per_epoch:.1f}: step {done}/{steps}, "
                f"ε spent {eps:.4g} (δ={self.delta:g}), ‖θ‖ {np.linalg.norm(theta):.4g}",
                file=sys.stdout,
                flush=True,
            )

        return callback

    # -- prediction ----------------------------------------------------------

    def _has_proba(self):
        return self._loss_name() == "log_loss"

    @available_if(_has_proba)
    def predict_proba(self, X):
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
    def predict_log_proba(self, X):
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

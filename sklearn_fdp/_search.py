"""PrivateRandomizedSearchCV: hyper-parameter search with Rényi DP (Papernot & Steinke 2022)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import contextlib
import copy
import dataclasses
import io
import logging
import math
import sys
import threading
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy import stats
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_regressor
from sklearn.utils import check_random_state, get_tags
from sklearn.utils._indexing import _safe_indexing
from sklearn.utils.metadata_routing import MetadataRouter, MethodMapping
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import (
    _assert_all_finite,
    _num_samples,
    check_array,
    check_is_fitted,
    indexable,
)

from . import accounting
from ._progress import progress_hook
from ._random import NOISE_OPTIONS, SeedSequenceState
from ._report import _walk, protected_unit
from ._secure import SecureGenerator
from ._steps import plan_of
from ._validation import (
    Interval,
    StrOptions,
    _check_method_params,
    _fit_context,
    _routing_enabled,
    check_numeric_columns,
    check_row_norms_finite,
    process_routing,
)
from .exceptions import PrivacyLeakWarning

if TYPE_CHECKING:  # annotations only
    from typing import Any, Literal, Self

    from ._typing import ArrayLike, MatrixLike, RandomStateLike

__all__ = ["PrivateRandomizedSearchCV"]


def _final(est):
    steps = getattr(est, "steps", None)
    return _final(steps[-1][1]) if steps else est


def _final_step_input(est, X_train, y_train):
    """``(n_features, feature_names)`` of what the final step of ``est`` is fitted on.

    ``X``'s own for a bare estimator. For a Pipeline, the output of its
    preprocessing fitted on the training split, as every trial fits it (no
    new release: only the public plan reads it; a preprocessing step that
    learns from the data makes the search refuse after the trials anyway).
    Names are None when the preprocessing cannot give them.
    """
    steps = getattr(est, "steps", None)
    if not steps:
        columns = getattr(X_train, "columns", None)
        names = None if columns is None else np.asarray(columns, dtype=object)
        return (X_train.shape[1] if hasattr(X_train, "shape") else 0), names
    head = clone(est[:-1])
    with _held_output():  # a planning pass, not a trial: nothing of it is shown
        Xt = head.fit_transform(X_train, y_train)
        try:
            names = (Xt.columns if hasattr(Xt, "columns") else head.get_feature_names_out())
            names = np.asarray(names, dtype=object)
        except Exception:  # noqa: BLE001 - a step without feature names
            names = None
    if getattr(steps[-1][1], "steps", None):  # a nested Pipeline last: recurse into it
        return _final_step_input(steps[-1][1], Xt, y_train)
    return Xt.shape[1], names


def _check_every_row(estimator, X, y):
    """Validate all of ``X`` and ``y`` as a trial's ``fit`` validates its training rows.

    Before the split, so that a NaN label or an overflowing cell raises the
    same error wherever it falls (a trial's fit checks only its training rows;
    the validation rows were scored silently). 1-D ``X``: scikit-learn's
    "Expected 2D array" message. ``y``: no NaN or infinity (a Pipeline's
    preprocessing never sees it). ``X`` of a bare estimator: finite, numeric,
    no row whose squared norm overflows (a Pipeline's first step checks its
    own input: it may impute or encode). Arrays, sparse matrices and
    DataFrames only: a lazy or out-of-core source is checked by each trial.
    """
    if not (isinstance(X, np.ndarray) or sp.issparse(X) or hasattr(X, "iloc")):
        return
    if getattr(X, "ndim", 2) == 1:
        check_array(X, accept_sparse="csr", dtype=None, ensure_all_finite=False)
    y_arr = np.asarray(y)
    if y_arr.dtype.kind in "fc":
        _assert_all_finite(y_arr, allow_nan=False, input_name="y")
    if _final(estimator) is estimator:
        Xc = check_array(X, accept_sparse="csr", dtype="numeric", ensure_all_finite=True,
                         input_name="X")
        check_row_norms_finite(Xc, type(estimator).__name__)


def _final_prefix(est):
    """``set_params`` prefix of the final step of a (nested) Pipeline."""
    prefix = ""
    while getattr(est, "steps", None):
        name, est = est.steps[-1]
        prefix += name + "__"
    return prefix


def _best_has(attr):
    def check(self):
        return hasattr(self.best_estimator_ if hasattr(self, "best_estimator_")
                       else self.estimator, attr)
    return check


class PrivateRandomizedSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Differentially private random hyper-parameter search (Papernot & Steinke 2022).

    Draws a random number of trials ``K`` (truncated negative binomial or
    Poisson, mean ``n_iter``), kept secret; each trial samples a
    configuration from ``param_distributions``, fits a private copy of
    ``estimator`` on a training split and scores it on a validation split
    with a *noisy* accuracy; only the trial with the best noisy score is
    released -- not ``K``, not the other trials, not the winner's index.
    The whole search is ``epsilon_``-DP at ``delta_`` for the estimator's
    protected unit, accounted by dp-accounting's RDP accountant for
    ``RepeatAndSelectDpEvent``. Its wall-clock run time grows with ``K``
    and is not covered.

    Parameters
    ----------
    estimator : estimator
        A private classifier (or a Pipeline ending in one, whose other steps
        learn nothing from the data). Each trial fits a clone.
    param_distributions : dict or list of dict
        Parameter name -> list (sampled uniformly, with replacement) or
        distribution with ``rvs`` (e.g. ``scipy.stats.loguniform``). Only
        parameters that leave a trial's DpEvent unchanged may vary
        (learning rate, clip norm, momentum, regularisation, schedule,
        averaging...); ``epsilon``, ``delta``, ``noise_multiplier``,
        ``batch_size``, ``epochs``, ``accountant`` and ``neighboring`` may not,
        nor what a trial protects (``private_features``, ``public_features``,
        ``label_public``, ``public_loss``, ``method``, ``row_scaling``), nor
        ``noise`` and ``random_state`` (set by the search), nor whole steps
        (``fit`` raises, naming the parameter; it also checks that every
        fitted trial has the same DpEvent and protected unit).
    epsilon : float or None, default=None
        Total budget of the search, in (0, inf). The per-trial noise
        multiplier is calibrated so that the search spends at most this,
        from the final estimator's ``privacy_plan`` with
        ``noise_multiplier=σ`` (its own ``epsilon`` is then ignored; an
        estimator that cannot be planned that way, e.g. AdaMix, says so).
        In a Pipeline the plan is made on the preprocessing's output (its
        width and column names, the preprocessing fitted on the training
        split as every trial fits it; a preprocessing step that learns from
        the data makes the search refuse). None: each trial uses the
        estimator's own budget, and ``epsilon_`` reports what the search
        spent.
    delta : float or None, default=None
        δ of the search's guarantee, in (0, 1). None: the estimator's
        ``delta``.
    n_iter : float, default=10
        Mean number of trials, >= 1.
    trials_distribution : {"truncated_negative_binomial", "poisson"}, \
default="truncated_negative_binomial"
        Law of ``K``. Truncated negative binomial with shape η = ``shape``
        and stopping probability γ set so that its mean is ``n_iter``
        (η = 1: geometric, η = 0: logarithmic); ``P(K = k) ∝ C(k+η-1, k)
        (1-γ)^k`` for k >= 1. ``"poisson"``: ``K ~ Poisson(n_iter)``; a draw
        of 0 raises (probability ``exp(-n_iter)``).
    shape : float, default=1.0
        η of the truncated negative binomial, >= 0 (ignored for Poisson).
        Smaller η costs less privacy for the same mean but has a heavier
        tail (more runs, rarely).
    validation_fraction : float, default=0.2
        Probability that a row is held out to score the trials, in (0, 1):
        each row's side is decided by its own coin from a data-independent
        stream, so adding a record adds it to exactly one side (add/remove
        is kept; a fixed-size split would turn it into replace-one for some
        ``n``). The realised sizes are binomial.
    score_noise_multiplier : float, default=10.0
        σ_s: each trial releases ``(correct + N(0, σ_s²)) / n_val``, the
        number of correct validation predictions (sensitivity 1) with
        Gaussian noise, ``n_val = validation_fraction * n`` the expected
        validation size. The score's Gaussian event is part of every trial.
    random_state : int, RandomState instance or None, default=None
        With ``noise="default"``: seeds ``K``, the configurations, the split,
        the score noise and the trials (keep it secret, as for the
        estimators; ignored with ``noise="secure"``). None: fresh OS entropy
        (:class:`numpy.random.SeedSequence`), not NumPy's global state.
        Every ``random_state`` of the estimator (and of its Pipeline steps)
        is replaced, per trial, by a full-width SeedSequence child: the
        analysis needs independent runs, and one fixed seed would give every
        trial the same noise. ``best_estimator_`` is released with these
        set to None: its seed would regenerate its noise.
    noise : {"default", "secure"}, default="default"
        ``"secure"``: the number of trials ``K`` and the score noise come
        from the OS CSPRNG (``SecureGenerator``,
        as the estimators' ``noise="secure"``), every trial's estimator that
        has a ``noise`` parameter runs with ``noise="secure"`` too, and the
        configurations, the split and the trials' seeds come from fresh OS
        entropy: ``random_state`` is not used at all (an attacker who knew
        the sequence of configurations could read the winning trial's index,
        a lower bound on ``K``, off ``best_params_``). Not reproducible. Same
        accounting as ``"default"``.
    verbose : int, default=0
        Print one line when the search starts and one when it ends (neither
        reveals ``K``). The trials run with their steps' ``verbose`` set to
        0 and without the progress hook (either would count the trials);
        ``best_estimator_`` gets the original values back.

    Attributes
    ----------
    best_estimator_ : estimator
        The released model: the best trial's fit (on the training split).
        It reports the search's guarantee: every private step's
        ``epsilon_``, ``delta_``, ``accountant_`` and ``privacy_plan_`` are
        the search's, its last private step's ``dp_event_`` is
        ``dp_event_`` (so :func:`~sklearn_fdp.privacy_report` of the model
        alone gives the search's total); the trial's own figures are kept
        as ``trial_epsilon_``, ``trial_delta_``, ``trial_dp_event_``,
        ``trial_privacy_plan_`` and ``trial_accountant_``.
    best_params_ : dict
        Its sampled configuration.
    best_score_ : float
        Its noisy validation accuracy.
    noise_multiplier_ : float or None
        σ of every trial's fit when ``epsilon`` was given.
    trial_dp_event_ : dp_accounting.DpEvent
        One trial: its fit composed with its noisy score.
    dp_event_ : dp_accounting.DpEvent
        ``RepeatAndSelectDpEvent(trial_dp_event_, n_iter, shape)`` (shape
        ``inf`` for Poisson).
    epsilon_ : float
        ε of the whole search at ``delta_`` (RDP accountant).
    epsilon_trial_ : float
        ε of one trial alone at ``delta_`` (RDP).
    delta_ : float
    accountant_ : str
        ``"rdp"``.
    privacy_plan_ : PrivacyPlan
        What the search protects (that of its trials' estimator) and spent
        (``dp_event_``, ``epsilon_``).
    classes_ : ndarray
    n_features_in_ : int

    Notes
    -----
    Privacy (Papernot & Steinke 2022, Thms. 2 and 6): if one trial
    ``Q(D) = (model, score)`` is (λ, ε_λ)-RDP for all λ, releasing the best
    of ``K`` independent runs is RDP with the bound dp-accounting
    implements; the outputs of the other runs must stay secret. Hence the
    score that decides "best" must itself be a DP output of the trial: here
    it is the validation accuracy with Gaussian noise of multiplier
    ``score_noise_multiplier`` (add/remove sensitivity 1 on the count,
    divided by the expected validation size), and a trial's event is the
    composition of its fit and this Gaussian. The training/validation split
    gives each row its own coin from a stream independent of the data:
    adding one record adds it to the training set or to the validation set
    and moves no other row, so the trial's fit sees add/remove neighbours
    (or the same data) and so does its score, for every ``n`` (tested in
    ``tests/sensitivity/test_search_split.py``; by exchangeability of the
    i.i.d. coins the same holds wherever the record is inserted). The two
    parts are disjoint, but we compose rather than claim parallel
    composition (a little conservative). A configuration is a draw from a public
    distribution, so a trial is a data-independent mixture over
    configurations; its RDP is at most that of a single configuration only
    because every configuration has the same DpEvent (checked). Released:
    ``best_estimator_``, ``best_params_``, ``best_score_`` and functions of
    them and of public inputs (``epsilon_``, ``dp_event_``, ...). NOT
    released -- the theorem needs them secret: ``K``, the winner's index,
    the other trials' configurations, scores and models (there is no
    ``n_trials_``, ``best_index_`` or ``cv_results_``; ``verbose`` prints no
    per-trial line; a listed parameter value is validated before ``K`` is
    drawn). What a caller can observe of ``fit`` is the same for every
    ``K`` (tested for K = 1 and K = 50): the return value, the fitted
    attributes and the pickled state (their names, types and shapes; the
    released ``best_*`` values are the one DP output), the two ``verbose``
    lines, and exceptions (they name no trial). Each trial's warnings,
    printed text (stdout, stderr), log records (of the fitting thread) and
    progress reports are held back, for its fit and for its validation
    predict alike; only what the released trial's fit emitted is re-emitted
    once the search is done (each warning once), as that fit would emit it
    alone. The validation predict's output is never shown: its text
    depends on the private validation rows, without noise. Out of reach:
    what worker processes print, and the run time. NOT covered:
    the run time, which grows with ``K``: an attacker who can time ``fit``
    learns about ``K``, and then the bound does not hold (conditioned on
    ``K``, best-of-``K`` is close to ``K``-fold composition). Keep the
    timing private.
    Fit parameters (e.g. AdaMix's ``public_mask``) are split with ``X``;
    the score counts every validation row, public ones included (one
    private record still changes the count by at most 1, and which records
    are public is public). ``refit`` is not offered: refitting
    the best configuration on all rows would be one more private fit.
    ``n`` is public, and so are the realised split sizes (the released
    model's sampling rate shows its training size), under the same
    convention as every fit's ``n`` (quantified in the threat model). Grid
    search (every configuration, a fixed count) is not covered by this
    theorem and is not offered.

    References
    ----------
    Papernot & Steinke, "Hyperparameter Tuning with Renyi Differential
    Privacy", ICLR 2022 (arXiv:2110.03620).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.preprocessing import normalize
    >>> from sklearn_fdp import DPSGDClassifier
    >>> from sklearn_fdp.model_selection import PrivateRandomizedSearchCV
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> search = PrivateRandomizedSearchCV(
    ...     DPSGDClassifier(epochs=2), {"learning_rate": [0.1, 1.0]},
    ...     epsilon=2.0, delta=1e-5, n_iter=3, random_state=0).fit(normalize(X), y)
    >>> bool(search.epsilon_ <= 2.0)
    True
    """

    _parameter_constraints: dict = {
        "estimator": [object],
        "param_distributions": [dict, list],
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "n_iter": [Interval(Real, 1, None, closed="left")],
        "trials_distribution": [StrOptions(set(accounting.TRIAL_DISTRIBUTIONS))],
        "shape": [Interval(Real, 0, None, closed="left")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "score_noise_multiplier": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "noise": [StrOptions(set(NOISE_OPTIONS))],
        "verbose": ["verbose"],
    }

    # Parameters whose change would change a trial's DpEvent (or its meaning).
    _BUDGET_PARAMS = ("epsilon", "delta", "noise_multiplier", "batch_size", "epochs",
                      "accountant", "neighboring", "epsilon_mean", "epsilon_quantile",
                      "variant", "steps", "max_iter")
    # Parameters that change what a trial protects (its unit, protected
    # columns, label, public view or mechanism): every trial must protect the
    # same thing, or the guarantee would depend on the trial that won.
    _PROTECTION_PARAMS = ("private_features", "public_features", "label_public",
                          "public_loss", "method", "row_scaling")
    # Set by the search itself.
    _SEARCH_PARAMS = ("noise", "random_state")
    # Pipeline/ColumnTransformer structure: which columns reach which step.
    _STRUCTURE_PARAMS = ("steps", "transformers", "transformer_list", "remainder")

    def __init__(
        self,
        estimator: BaseEstimator,
        param_distributions: dict | list[dict],
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        n_iter: float = 10,
        trials_distribution: Literal[
            "poisson", "truncated_negative_binomial"] = "truncated_negative_binomial",
        shape: float = 1.0,
        validation_fraction: float = 0.2,
        score_noise_multiplier: float = 10.0,
        random_state: RandomStateLike = None,
        noise: Literal["default", "secure"] = "default",
        verbose: int = 0,
    ) -> None:
        self.estimator = estimator
        self.param_distributions = param_distributions
        self.epsilon = epsilon
        self.delta = delta
        self.n_iter = n_iter
        self.trials_distribution = trials_distribution
        self.shape = shape
        self.validation_fraction = validation_fraction
        self.score_noise_multiplier = score_noise_multiplier
        self.random_state = random_state
        self.noise = noise
        self.verbose = verbose

    # -- checks --------------------------------------------------------------

    def _check_distributions(self):
        name = type(self).__name__
        dists = self.param_distributions
        dists = [dists] if isinstance(dists, dict) else list(dists)
        if not dists:
            raise ValueError(f"`param_distributions` of {name} is empty; give at least "
                             "one dict of parameter -> list or distribution.")
        params = self.estimator.get_params(deep=True)
        valid = set(params)
        for d in dists:
            if not isinstance(d, dict):
                raise TypeError(f"`param_distributions` of {name} must be a dict or a list "
                                f"of dicts, got an item {d!r}.")
            for key, values in d.items():
                if key not in valid:
                    raise ValueError(
                        f"`param_distributions` of {name} names {key!r}, which is not a "
                        f"parameter of {type(self.estimator).__name__}. Valid: "
                        f"{sorted(valid)}.")
                leaf = key.rsplit("__", 1)[-1]
                if leaf in self._PROTECTION_PARAMS:
                    raise ValueError(
                        f"`param_distributions` of {name} varies {key!r}, which changes "
                        "what each trial protects (its protected features, label, public "
                        "view or unit); every trial must protect the same thing, or the "
                        "search's guarantee would depend on the trial that won. Fix "
                        f"{leaf!r} on the estimator.")
                if leaf in self._SEARCH_PARAMS:
                    raise ValueError(
                        f"`param_distributions` of {name} varies {key!r}, which the "
                        "search sets itself (noise: the search's `noise`; random_state: a "
                        "fresh seed per trial). Remove it from param_distributions.")
                if leaf in self._STRUCTURE_PARAMS or isinstance(params[key], BaseEstimator):
                    raise ValueError(
                        f"`param_distributions` of {name} varies {key!r}, a whole step or "
                        "the structure of the estimator, which can change what each trial "
                        "protects and costs. Search the step's own parameters instead "
                        f"(e.g. '{key}__learning_rate').")
                if leaf in self._BUDGET_PARAMS:
                    raise ValueError(
                        f"`param_distributions` of {name} varies {key!r}, which changes "
                        "each trial's privacy cost; the repeat-and-select analysis needs "
                        "the same DpEvent for every trial. Fix it on the estimator and "
                        "vary e.g. learning_rate, max_grad_norm, momentum or "
                        "l2_regularization.")
                if not (hasattr(values, "rvs") or (isinstance(values, (list, tuple))
                                                   and len(values) > 0)):
                    raise TypeError(
                        f"`param_distributions[{key!r}]` of {name} must be a non-empty "
                        f"list or a distribution with an `rvs` method, got {values!r}.")
                if not hasattr(values, "rvs"):
                    for value in values:
                        self._check_value(key, value)
        return dists

    def _check_value(self, key, value):
        """Validate one listed value now, before K is drawn.

        A trial that raised on an invalid value would reveal that this
        configuration was drawn (and that K reached it).
        """
        est = clone(self.estimator).set_params(**{key: value})
        owner = est.get_params(deep=True)[key.rsplit("__", 1)[0]] if "__" in key else est
        if hasattr(owner, "_validate_params"):
            try:
                owner._validate_params()
            except ValueError as exc:
                raise ValueError(
                    f"`param_distributions[{key!r}]` of {type(self).__name__} lists the "
                    f"invalid value {value!r}: {exc}") from exc

    def _sample_trials(self, rng, secure=False):
        """K and K configurations; K from the OS CSPRNG when ``secure``."""
        mean = float(self.n_iter)
        if self.trials_distribution == "poisson":
            k = _secure_poisson(mean) if secure else int(rng.poisson(mean))
            if k == 0:
                raise RuntimeError(
                    f"{type(self).__name__} drew K = 0 trials (Poisson, mean "
                    f"{mean!r}); the search releases nothing. Use a larger n_iter, "
                    "trials_distribution='truncated_negative_binomial', or another "
                    "random_state.")
        else:
            k = _sample_truncated_negative_binomial(rng, float(self.shape), mean, secure)
        dists = self._check_distributions()
        configs = []
        for _ in range(k):
            d = dists[rng.randint(len(dists))]
            cfg = {}
            for key in sorted(d):
                values = d[key]
                if hasattr(values, "rvs"):
                    cfg[key] = values.rvs(random_state=rng)
                else:
                    cfg[key] = values[rng.randint(len(values))]
            configs.append(cfg)
        return configs

    def _plan_fit_event(self, est, n_train, n_features, feature_names, sigma):
        """The DpEvent a trial's fit will have with noise multiplier ``sigma``.

        Read from the final step's public ``privacy_plan`` (the planning
        contract), with the trial's settings: ``noise_multiplier=sigma`` and
        no ε target of its own.
        """
        final = _final(est)
        name = type(self).__name__
        params = final.get_params(deep=False)
        if not (callable(getattr(final, "privacy_plan", None))
                and {"epsilon", "noise_multiplier"} <= set(params)):
            raise ValueError(
                f"{name} with epsilon={self.epsilon!r} calibrates the per-trial noise of a "
                "private estimator with a privacy_plan and epsilon/noise_multiplier "
                f"parameters; got {type(final).__name__}. Set epsilon=None and fix the "
                "estimator's own budget: the search then reports what it spent.")
        trial = clone(final).set_params(epsilon=None, noise_multiplier=sigma)
        try:
            plan = trial.privacy_plan(n_train, n_features, feature_names=feature_names)
        except ValueError as exc:
            raise ValueError(
                f"{name} cannot calibrate the noise of {type(final).__name__}: {exc} Set "
                "epsilon=None and fix the estimator's own budget: the search then reports "
                "what it spent.") from exc
        return plan.dp_event

    # -- fitting -------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: MatrixLike, y: ArrayLike, **fit_params: Any) -> Self:
        """Run the private search.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **fit_params : dict
            Parameters of the estimator's ``fit`` (e.g. ``public_mask`` of
            :class:`~sklearn_fdp.AdaMixClassifier`). Those with one entry per
            row are split with ``X``: each trial's fit gets the entries of
            its training rows. With metadata routing enabled
            (``sklearn.set_config(enable_metadata_routing=True)``) the
            estimator must request them (``set_fit_request(public_mask=True)``);
            without it, all are passed to the estimator's ``fit``, as by
            sklearn's search CVs. They do not enter the score.

        Returns
        -------
        self : PrivateRandomizedSearchCV
        """
        name = type(self).__name__
        fit_params = (process_routing(self, "fit", **fit_params).estimator.fit
                      if _routing_enabled() else fit_params)
        self._check_distributions()
        final = _final(self.estimator)
        delta = self.delta if self.delta is not None else getattr(final, "delta", None)
        if delta is None:
            raise ValueError(f"{name}: give `delta`; {type(final).__name__} has none.")
        if is_regressor(final):
            raise ValueError(
                f"{name} scores trials by their noisy validation accuracy (a count of exact "
                f"predictions), which means nothing for the regressor {type(final).__name__}. "
                "Choose its hyperparameters without the private data (e.g. on public or "
                "synthetic data), or account a search of your own.")
        X, y = indexable(X, y)  # sparse to CSR, and the same length (as sklearn's search CVs)
        # Before any trial: a text column seen by the validation split only
        # would fail a trial's predict with numpy's message. A Pipeline's
        # preprocessing may encode text columns: its steps check their input.
        if _final(self.estimator) is self.estimator:
            check_numeric_columns(self, X)
        _check_every_row(self.estimator, X, y)
        n_samples = _num_samples(y)
        # The score divides by the expected validation size (public), never
        # by the realised one (a function of the split's coins).
        n_val = self.validation_fraction * n_samples
        if n_val < 1 or n_samples - n_val < 2:
            raise ValueError(
                f"{name}: validation_fraction={self.validation_fraction!r} of "
                f"n_samples={n_samples} rows leaves {n_samples - n_val:g} training and "
                f"{n_val:g} validation rows (expected); it needs at least 2 training rows "
                "and 1 validation row.")
        if getattr(final, "neighboring", "add_remove") != "add_remove":
            raise ValueError(
                f"{name} accounts the search with the RDP accountant, which supports "
                "neighboring='add_remove' only for subsampled mechanisms; got "
                f"neighboring={final.neighboring!r} on {type(final).__name__}.")
        mean = float(self.n_iter)
        shape = math.inf if self.trials_distribution == "poisson" else float(self.shape)

        secure = self.noise == "secure"
        public_seed, split_seed, noise_seed, trial_seed = self._root_seed(secure).spawn(4)
        train_idx, val_idx = _split(n_samples, self.validation_fraction, split_seed)
        n_train = len(train_idx)
        if n_train < 2:
            raise ValueError(
                f"{name}: the random split of n_samples={n_samples} rows left "
                f"{n_train} training row(s); use more rows, a smaller "
                "validation_fraction or another random_state.")
        configs = self._sample_trials(
            np.random.RandomState(np.random.MT19937(public_seed)), secure)
        trial_seeds = trial_seed.spawn(len(configs))
        score_event = accounting.gaussian_event(float(self.score_noise_multiplier))

        prefix = _final_prefix(self.estimator)
        sigma = None
        planned = None
        X_train, y_train = _safe_indexing(X, train_idx), _safe_indexing(y, train_idx)
        if self.epsilon is not None:
            n_features, feature_names = _final_step_input(self.estimator, X_train, y_train)

            def trial_event(s):
                return accounting.compose_events(
                    self._plan_fit_event(self.estimator, n_train, n_features, feature_names,
                                         s),
                    score_event)

            trial_event(1.0)  # raises early for unsupported estimators
            sigma = accounting.calibrate_repeat_and_select(
                trial_event, self.epsilon, delta, mean, shape)
            planned = trial_event(sigma)

        train_params = _check_method_params(X, params=fit_params, indices=train_idx)
        X_val, y_val = _safe_indexing(X, val_idx), np.asarray(_safe_indexing(y, val_idx))
        noise_rng = SecureGenerator() if secure else np.random.default_rng(noise_seed)
        # Nothing may reveal K (Papernot-Steinke: the best trial is the only
        # output): the trials run silent -- their own verbose output and the
        # progress hook are off, their warnings are held back and only the
        # best trial's are re-emitted -- and errors name no trial index.
        params = self.estimator.get_params(deep=True)
        quiet = {k: 0 for k, v in params.items() if k.rsplit("__", 1)[-1] == "verbose" and v}
        # Trials must be independent runs (Papernot-Steinke): every step's
        # random_state gets a fresh full-width seed, which the released model
        # must not carry (with noise="default" it regenerates the DP noise).
        seeded = [k for k in params if k.rsplit("__", 1)[-1] == "random_state"]
        if self.verbose:
            law = ("Poisson" if self.trials_distribution == "poisson"
                   else f"truncated negative binomial (shape {self.shape!r})")
            print(f"[{name}] searching: number of trials ~ {law}, mean {mean:g} "
                  "(secret: neither K nor the trials are reported)", flush=True)
        best = None
        trial_event0 = unit0 = None
        for i, cfg in enumerate(configs):
            est = clone(self.estimator).set_params(**cfg)
            extra = dict(quiet)
            if sigma is not None:
                extra[prefix + "noise_multiplier"] = sigma
                extra[prefix + "epsilon"] = None
            extra.update({k: SeedSequenceState(ss)
                          for k, ss in zip(seeded, trial_seeds[i].spawn(len(seeded)))})
            if secure and "noise" in _final(est).get_params():
                extra[prefix + "noise"] = "secure"
            est.set_params(**extra)
            with _held_output() as caught:
                est.fit(X_train, y_train, **train_params)
            est.set_params(**{k: None for k in seeded})
            # The trial's own δ check is about its own claim, not the search's.
            caught.warnings = [
                w for w in caught.warnings
                if not (issubclass(w.category, PrivacyLeakWarning)
                        and str(w.message).startswith("delta="))]
            fit_event = self._fitted_event(est, name)
            event = accounting.compose_events(fit_event, score_event)
            if planned is not None and repr(event) != repr(planned):
                raise ValueError(
                    f"{name}: a trial spent {event!r}, not the planned {planned!r} "
                    "(e.g. the Pipeline holds other private steps, whose cost the "
                    "calibration does not know). Set epsilon=None and fix each step's "
                    "own budget: the search then reports what it spent.")
            if trial_event0 is not None and repr(event) != repr(trial_event0):
                raise ValueError(
                    f"{name}: two trials have different DpEvents ({trial_event0!r} and "
                    f"{event!r}): their privacy cost differs; only parameters that leave "
                    "the cost unchanged may vary.")
            trial_event0 = event
            unit = protected_unit(_final(est))
            if unit0 is not None and unit != unit0:
                raise ValueError(
                    f"{name}: two trials protect different things ({unit0[1]!r} and "
                    f"{unit[1]!r}); only parameters that leave what is protected unchanged "
                    "may vary.")
            unit0 = unit
            # The score's predict is held back too, and never re-emitted: what it
            # says (e.g. an encoder's unknown-category warning) depends on the
            # private validation rows, without noise, and its count on K.
            with _held_output():  # (no validation row drawn: the count is 0)
                correct = _correct_count(est, X_val, y_val) if len(val_idx) else 0.0
            score = _noisy_score(correct, float(self.score_noise_multiplier), noise_rng,
                                 n_val)
            if best is None or score > best[0]:
                best = (score, cfg, est, caught)
            del est

        score, cfg, est, caught = best
        if quiet:
            est.set_params(**{k: v for k, v in self.estimator.get_params(deep=True).items()
                              if k in quiet})
        caught.replay()  # what the released trial's fit said, as it would alone
        self.best_estimator_ = est
        self.best_params_ = dict(cfg)
        self.best_score_ = float(score)
        self.noise_multiplier_ = sigma
        self.trial_dp_event_ = trial_event0
        self.dp_event_ = accounting.repeat_and_select_event(self.trial_dp_event_, mean, shape)
        self.delta_ = float(delta)
        self.epsilon_ = accounting.epsilon_of_event(self.dp_event_, self.delta_,
                                                    accountant="rdp")
        self.epsilon_trial_ = accounting.epsilon_of_event(self.trial_dp_event_, self.delta_,
                                                          accountant="rdp")
        self.accountant_ = "rdp"
        self.neighboring_ = getattr(final, "neighboring", "add_remove")
        # What the search protects is what its trials protect; what it spent
        # is the repeat-and-select event over them.
        self.privacy_plan_ = dataclasses.replace(
            plan_of(_final(est)), dp_event=self.dp_event_, epsilon=self.epsilon_,
            delta=self.delta_, accountant=self.accountant_, noise_multiplier=sigma,
            schedule=None, details={"trial_dp_event": self.trial_dp_event_,
                                    "epsilon_trial": self.epsilon_trial_})
        _carry_search_guarantee(est, self.privacy_plan_)
        if hasattr(est, "classes_"):
            self.classes_ = est.classes_
        if hasattr(est, "n_features_in_"):
            self.n_features_in_ = est.n_features_in_
        if hasattr(est, "feature_names_in_"):
            self.feature_names_in_ = est.feature_names_in_
        if self.verbose:
            print(f"[{name}] done: released the best trial; epsilon_ = {self.epsilon_:.4g} "
                  f"(delta_ = {self.delta_:g})", flush=True)
        return self

    def _root_seed(self, secure):
        """The SeedSequence of the configurations (and K), split, score noise and trials.

        ``random_state=None``: fresh OS entropy (never NumPy's global
        RandomState). With ``noise="secure"`` nothing comes from
        ``random_state``, which the attacker may know: a known sequence of
        configurations or of trial seeds would turn ``best_params_`` (or the
        best model's public streams) into the index of the winning trial, a
        lower bound on K, and a known split of ``n`` rows is not a random split.
        """
        if secure or self.random_state is None:
            return np.random.SeedSequence()
        if isinstance(self.random_state, Integral):
            return np.random.SeedSequence(int(self.random_state))
        rng = check_random_state(self.random_state)
        return np.random.SeedSequence(rng.randint(0, 2**32, size=4, dtype=np.uint64).tolist())

    def _fitted_event(self, est, name):
        items = []
        _walk(est, "", items)
        leaks = [n or type(e).__name__ for n, e, k in items if k in ("nonprivate", "search")]
        if leaks:
            raise ValueError(
                f"{name}: the estimator's step(s) {leaks} learn from the data without "
                "differential privacy; the search would not be private. Use "
                "data-independent or private preprocessing.")
        events = [e.dp_event_ for _, e, k in items if k == "private"]
        if not events:
            raise ValueError(f"{name}: {type(est).__name__} has no private step "
                             "(no dp_event_ after fit).")
        return accounting.compose_events(*events)

    # -- delegation ----------------------------------------------------------

    @property
    def protected_unit_(self):
        """Description of the unit the search protects (that of its estimator)."""
        check_is_fitted(self)
        return protected_unit(_final(self.best_estimator_))[1]

    @available_if(_best_has("predict"))
    def predict(self, X: MatrixLike) -> np.ndarray:
        """Predict with ``best_estimator_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    @available_if(_best_has("predict_proba"))
    def predict_proba(self, X: MatrixLike) -> np.ndarray:
        """Class probabilities of ``best_estimator_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_best_has("decision_function"))
    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """Decision function of ``best_estimator_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray
        """
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    def score(self, X: MatrixLike, y: ArrayLike) -> float:
        """Accuracy of ``best_estimator_`` on ``(X, y)`` (not private: use public test data).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        score : float
        """
        check_is_fitted(self)
        return self.best_estimator_.score(X, y)

    def __sklearn_is_fitted__(self):
        return hasattr(self, "best_estimator_")

    def __sklearn_tags__(self):
        # As sklearn's search CVs: the estimator's type, its classifier tags
        # and the input it accepts (sparse included).
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = copy.deepcopy(inner.classifier_tags)
        tags.input_tags.sparse = inner.input_tags.sparse
        tags.non_deterministic = inner.non_deterministic or self.noise == "secure"
        return tags

    def get_metadata_routing(self):
        """Metadata routing: ``fit`` routes to the estimator's ``fit``.

        Returns
        -------
        routing : sklearn.utils.metadata_routing.MetadataRouter
        """
        return MetadataRouter(owner=type(self).__name__).add(
            estimator=self.estimator,
            method_mapping=MethodMapping().add(caller="fit", callee="fit"))


class _HeldOutput:
    """What one trial said: warnings, printed text and log records (see :func:`_held_output`)."""

    def __init__(self):
        self.warnings = []
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.records = []

    def replay(self):
        """Emit it again, through the caller's filters, handlers and streams.

        Each warning once (by category and text, as the trials ran under
        "always"), in order; then the printed text and the log records.
        """
        seen = set()
        for w in self.warnings:
            if (w.category, str(w.message)) not in seen:
                seen.add((w.category, str(w.message)))
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if self.stdout.getvalue():
            sys.stdout.write(self.stdout.getvalue())
        if self.stderr.getvalue():
            sys.stderr.write(self.stderr.getvalue())
        for record in self.records:
            _CALL_HANDLERS(logging.getLogger(record.name), record)


_CALL_HANDLERS = logging.Logger.callHandlers
_HOLDERS = {}  # thread id -> the _HeldOutput collecting that thread's log records
_HOLDERS_LOCK = threading.Lock()


def _holding_call_handlers(logger, record):
    held = _HOLDERS.get(record.thread)
    if held is None:
        return _CALL_HANDLERS(logger, record)
    held.records.append(record)
    return None


@contextlib.contextmanager
def _held_output():
    """Hold back everything a trial would let out of this thread: its warnings,
    what it prints to stdout/stderr, its log records and progress reports.

    Yields a :class:`_HeldOutput`; nothing reaches the caller unless it is
    replayed. Log records of other threads pass through unchanged. What
    worker processes print is out of reach (the estimators' ``n_jobs``).
    """
    held = _HeldOutput()
    tid = threading.get_ident()
    with warnings.catch_warnings(record=True) as caught, progress_hook(None), \
            contextlib.redirect_stdout(held.stdout), contextlib.redirect_stderr(held.stderr):
        warnings.simplefilter("always")
        with _HOLDERS_LOCK:
            outer = _HOLDERS.get(tid)
            _HOLDERS[tid] = held
            logging.Logger.callHandlers = _holding_call_handlers
        try:
            yield held
        finally:
            with _HOLDERS_LOCK:
                if outer is None:
                    del _HOLDERS[tid]
                else:
                    _HOLDERS[tid] = outer
                if not _HOLDERS:
                    logging.Logger.callHandlers = _CALL_HANDLERS
            held.warnings = list(caught)


def _split(n_samples, validation_fraction, seed):
    """``(train_idx, val_idx)``: each row's side decided by its own coin.

    Row ``i`` goes to validation when the ``i``-th uniform of a stream seeded
    by ``seed`` (independent of the data) is below ``validation_fraction``.
    Adding one record to the data adds it to exactly one side and leaves
    every other row where it was, so each trial's training set and its
    validation set are add/remove neighbours of theirs (or unchanged): the
    add/remove accounting of the trials applies. A fixed-size split
    (``round(fraction * n)`` rows held out) does not: for a fifth of all
    ``n`` the training size is the same for ``n`` and ``n + 1`` rows, and
    adding a record replaces one in the training set. The sizes are
    therefore random (binomial); the trials treat their training size as
    public, as every fit treats its ``n`` (see the threat model).
    """
    coins = np.random.default_rng(seed).random(n_samples)
    held = coins < validation_fraction
    return np.flatnonzero(~held), np.flatnonzero(held)


_TRIAL_FIGURES = ("epsilon_", "delta_", "dp_event_", "privacy_plan_", "accountant_")


def _carry_search_guarantee(est, search_plan):
    """Make the released model report the search's guarantee, not its trial's.

    Whoever publishes ``best_estimator_`` alone would otherwise state one
    trial's ε (about half the search's). Every private step of ``est``
    keeps its own figures as ``trial_epsilon_``, ``trial_delta_``,
    ``trial_dp_event_``, ``trial_privacy_plan_`` and ``trial_accountant_``;
    its ``epsilon_``, ``delta_``, ``accountant_`` and ``privacy_plan_``
    become the search's. The last private step carries the search's
    ``dp_event_`` (the repeat-and-select event over whole trials, which
    already contains every private step); any other private step carries an
    empty composition, so :func:`~sklearn_fdp.privacy_report` of the model
    accounts the search once.
    """
    items = []
    _walk(est, "", items)
    private = [e for _, e, kind in items if kind == "private"]
    for i, step in enumerate(private):
        own = plan_of(step)
        for attr in _TRIAL_FIGURES:
            if hasattr(step, attr):
                setattr(step, "trial_" + attr, getattr(step, attr))
        event = search_plan.dp_event if i == len(private) - 1 else accounting.compose_events()
        step.dp_event_ = event
        step.epsilon_ = search_plan.epsilon
        step.delta_ = search_plan.delta
        step.accountant_ = search_plan.accountant
        step.privacy_plan_ = dataclasses.replace(
            own, dp_event=event, epsilon=search_plan.epsilon, delta=search_plan.delta,
            accountant=search_plan.accountant,
            details={**own.details, "released_by": "PrivateRandomizedSearchCV",
                     "trial_privacy_plan": own})


def _correct_count(estimator, X_val, y_val):
    """The pre-noise score of a trial: its number of correct validation predictions.

    Sensitivity 1 -- removing, adding or replacing (label or features) one
    validation record changes it by at most 1 -- as long as ``predict`` is
    row-wise (tested in ``tests/sensitivity/test_search_score.py``).
    """
    return float(np.sum(np.asarray(estimator.predict(X_val)) == np.asarray(y_val)))


def _noisy_score(correct, sigma, rng, n_val):
    """The released score ``(correct + N(0, sigma²)) / n_val``.

    ``sigma`` is the score's Gaussian noise multiplier (the accountant's
    ``GaussianDpEvent(sigma)``, sensitivity 1); ``n_val`` the expected
    validation size ``validation_fraction * n``, a function of the public
    ``n`` and ``validation_fraction`` only (never the realised count).
    """
    return (correct + rng.normal(0.0, sigma)) / n_val


def _secure_uniform_open():
    """A CSPRNG uniform in (0, 1) (a draw of exactly 0 is redrawn)."""
    gen = SecureGenerator()
    while True:
        u = gen.random()
        if u > 0.0:
            return u


def _secure_poisson(mean):
    """K ~ Poisson(mean) by inversion of a CSPRNG uniform."""
    return int(stats.poisson.ppf(_secure_uniform_open(), mean))


def _sample_truncated_negative_binomial(rng, shape, mean, secure=False):
    """K >= 1 with P(K = k) ∝ C(k+η-1, k)(1-γ)^k (η > 0) or (1-γ)^k / k (η = 0).

    γ is the one dp-accounting's RDP accountant derives from (η, mean).
    ``secure``: by inversion of a CSPRNG uniform (``rng`` unused), the
    negative binomial conditioned on K >= 1 through its CDF.
    """
    gamma = accounting.truncated_negative_binomial_gamma(shape, mean)
    if gamma >= 1:
        return 1
    if secure:
        u = _secure_uniform_open()
        if shape == 0:
            return max(1, int(stats.logser.ppf(u, 1 - gamma)))
        p0 = stats.nbinom.pmf(0, shape, gamma)
        q = min(p0 + u * (1 - p0), np.nextafter(1.0, 0.0))  # ppf(1) would be inf
        return max(1, int(stats.nbinom.ppf(q, shape, gamma)))
    if shape == 0:
        return int(rng.logseries(1 - gamma))
    while True:  # negative binomial conditioned on K >= 1
        k = int(rng.negative_binomial(shape, gamma))
        if k >= 1:
            return k


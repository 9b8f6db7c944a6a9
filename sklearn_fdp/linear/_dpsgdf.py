"""DPSGDFClassifier: DP-SGD on privately centred features (DPSGD-F).

The private preprocessing (Algorithms 2 and 3 of the DPSGD-F paper) lives
in :mod:`sklearn_fdp._mechanisms.dpsgdf`; this module plans the fit,
runs it and maps the trained weights back to the input features.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numbers import Real
from typing import Callable, NamedTuple

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import accounting
from .._budget import calibrate_dpsgd, check_budget_params, dpsgd_schedule
from .._distributed import partitioned_labels, use_cluster
from .._docs import fill_doc
from .._engine import LinearGradientOracle, LinearLoss, run_dp_sgd
from .._mechanisms import dpsgdf as mech
from .._mechanisms.gaussian_mean import scale_rows
from .._outofcore import as_row_source, should_stream
from .._plan import record_plan
from .._random import spawn_generators
from .._validation import Interval, StrOptions, _fit_context, atomic_fit, check_delta_vs_n
from ._base import (
    _NOISE,
    _PUBLIC,
    _SAMPLE,
    BaseDPLinearClassifier,
    engine_config,
    epoch_printer,
    n_outputs_of,
    resolve_learning_rate,
    validate_linear_data,
)

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from .._plan import PrivacyPlan
    from .._typing import ArrayLike, MatrixLike, RandomStateLike


class _Prepared(NamedTuple):
    """What a variant's private preprocessing hands to DP-SGD and to the store."""

    rows: object  # the rows DP-SGD trains on (ndarray or out-of-core source)
    oracle_intercept: bool  # whether the oracle adds a free intercept row
    revert: Callable  # (theta, dtype) -> (coef_, intercept_) on the input rows
    released: dict  # fitted attributes of the released statistics
    events: tuple  # the DpEvents the preprocessing spent


def _gaussian_sigma(est, epsilon):
    """Analytic Gaussian noise multiplier for (``epsilon``, ``delta``) under ``neighboring``."""
    return accounting.gaussian_noise_multiplier(epsilon, est.delta, neighboring=est.neighboring)


def _gaussian_epsilon(est, sigma):
    return accounting.gaussian_epsilon(sigma, est.delta, neighboring=est.neighboring)


# epsilon_mean="auto": this fraction of epsilon, at most _AUTO_EPSILON_MEAN_CAP.
_AUTO_EPSILON_MEAN_FRACTION = 0.05
_AUTO_EPSILON_MEAN_CAP = 0.05


def _epsilon_mean(est):
    """ε_F of the private mean: ``epsilon_mean``, or its ``"auto"`` rule.

    ``"auto"``: ``min(0.05, 0.05 * epsilon)`` — 5 % of the budget, at most
    0.05. The DPSGD-F paper (App. C) searched ε_F in {0.02, ..., 0.2} at
    ε ≥ 1 and always found 0.02 or 0.05 best, i.e. 2-5 % of ε at ε = 1; a
    fixed 0.05 (the default until issue 20) exceeded the whole budget at
    ε ≤ 0.05 and took half of it at ε = 0.1. Equal to 0.05 at ε ≥ 1. With
    ``epsilon=None`` (ε computed from ``noise_multiplier``): 0.05. A rule of
    public parameters only.
    """
    if est.epsilon_mean != "auto":
        return float(est.epsilon_mean)
    if est.epsilon is None:
        return _AUTO_EPSILON_MEAN_CAP
    return float(min(_AUTO_EPSILON_MEAN_CAP, _AUTO_EPSILON_MEAN_FRACTION * est.epsilon))


def _check_preprocessing_budget(est, pre, what):
    if est.epsilon is not None and pre >= est.epsilon:
        raise ValueError(
            f"{what} of {type(est).__name__} is {pre!r} but the total `epsilon` is "
            f"{est.epsilon!r}: the preprocessing would leave nothing for the "
            "gradient steps. Use epsilon_mean well below epsilon (e.g. 0.05 * "
            "epsilon; analysed variant: e.g. epsilon / 3 for the mean and less "
            "for the quantile)."
        )


# -- variant="practical": Algorithm 3 ------------------------------------------


def _plan_practical(est, n_samples, n_features):
    """``(events, details)`` of the Gaussian mean of Algorithm 3 (public values only)."""
    epsilon_mean = _epsilon_mean(est)
    _check_preprocessing_budget(est, epsilon_mean, "`epsilon_mean`")
    sigma_f = _gaussian_sigma(est, epsilon_mean)
    details = {"mean_noise_multiplier": float(sigma_f),
               "epsilon_mean": _gaussian_epsilon(est, sigma_f)}
    return mech.algorithm3_events(sigma_f), details


def _prepare_practical(est, X, details, rng, source=None):
    """Algorithm 3: release the mean, centre the rows; the intercept moves back after."""
    rows, (mean, noise_std), events = mech.algorithm3_rows(
        X, float(est.feature_norm), details["mean_noise_multiplier"], rng, noise=est.noise,
        source=source)
    return _Prepared(rows, est.fit_intercept,
                     lambda theta, dtype: mech.revert_centred(theta, mean, est.fit_intercept,
                                                              dtype),
                     {"mean_noise_std_": noise_std, "mean_": mean}, events)


# -- variant="analysed": Algorithm 2 --------------------------------------------


def _plan_analysed(est, n_samples, n_features):
    """``(events, details)`` of Algorithm 2's mean rounds and quantile (public values only)."""
    epsilon_mean = _epsilon_mean(est)
    _check_preprocessing_budget(est, epsilon_mean + est.epsilon_quantile,
                                "`epsilon_mean` + `epsilon_quantile`")
    sigma_f = _gaussian_sigma(est, epsilon_mean)
    sigma_q = _gaussian_sigma(est, est.epsilon_quantile)
    rounds, sigma_k = mech.plan_mean_rounds(sigma_f, n_samples, n_features)
    # 2K - 1 Gaussians of multiplier σ_k compose exactly to one Gaussian of
    # multiplier σ_k / sqrt(2K - 1) = σ_F: epsilon_mean is σ_F's ε.
    details = {"mean_noise_multiplier": float(sigma_k), "mean_rounds": int(rounds),
               "epsilon_mean": _gaussian_epsilon(est, sigma_f),
               "quantile_noise_multiplier": float(sigma_q),
               "epsilon_quantile": _gaussian_epsilon(est, sigma_q)}
    return mech.algorithm2_events(rounds, sigma_k, sigma_q), details


def _prepare_analysed(est, X, details, rng, source=None):
    """Algorithm 2, steps 1-4; the constant column τ of the augmented rows is the intercept."""
    rows, ((mean, noise_std), radii, tau), events = mech.algorithm2_rows(
        X, float(est.feature_norm), details["mean_rounds"], details["mean_noise_multiplier"],
        details["quantile_noise_multiplier"], est.fit_intercept, rng, noise=est.noise,
        source=source)
    return _Prepared(rows, False,
                     lambda theta, dtype: mech.revert_augmented(theta, mean, tau,
                                                                est.fit_intercept, dtype),
                     {"mean_radii_": radii, "quantile_": float(tau),
                      "mean_noise_std_": noise_std, "mean_": mean}, events)


class _Variant(NamedTuple):
    row_scaling: str  # the data-independent map applied to every row, in fit and predict
    plan: Callable  # (est, n, d) -> (events, details)
    prepare: Callable  # (est, X, details, rng, source) -> _Prepared


# The one dispatch on ``variant``.
VARIANTS = {
    "practical": _Variant("normalize", _plan_practical, _prepare_practical),
    "analysed": _Variant("clip", _plan_analysed, _prepare_analysed),
}


@fill_doc
class DPSGDFClassifier(BaseDPLinearClassifier):
    """Linear classifier trained with DP-SGD on privately centred features (DPSGD-F).

    ``variant="practical"`` is Algorithm 3 of the DPSGD-F paper: every row is
    scaled to L2 norm ``feature_norm`` (``C_F``; a data-independent map),
    the mean of the rows is released by the analytic Gaussian mechanism
    (budget ``epsilon_mean`` at ``delta``), the rows are centred on it, and
    DP-SGD with per-example gradient clipping runs on the centred rows. The
    intercept is then moved back to the scaled (uncentred) features:
    ``b = b_centred - mean_ @ w``. The mean and the gradient steps are
    composed in one accountant, so the whole fit is (ε, δ)-DP for whole
    records with ``epsilon_ <= epsilon`` the tight total.

    ``variant="analysed"`` is Algorithm 2 of the paper, the version whose
    error scales with the *diameter* of the data rather than the largest
    row norm: rows are *clipped* (not rescaled) to L2 norm ``feature_norm``
    (``R``); a coarse-to-fine private mean ``mean_`` (budget
    ``epsilon_mean``; a Gaussian mean at radius ``R``, then rounds of
    Gaussian means of the rows clipped to a private radius around the
    previous estimate); a private upper quantile ``quantile_`` (τ) of
    ``||x - mean_||`` (budget ``epsilon_quantile``; a Gaussian histogram
    over a geometric grid); the augmented rows ``(x - mean_, τ)`` clipped to
    norm ``sqrt(2) τ`` and divided by ``sqrt(2) τ`` (norm ≤ 1); DP-SGD
    without a separate intercept (the constant column is the intercept);
    and the weights mapped back to ``(coef_, intercept_)`` on the clipped
    input rows. Every release is a Gaussian mechanism, so the mean, the
    quantile and the steps are composed in one accountant.

    Centring helps when the rows share a large common offset: clipping then
    no longer shrinks the small, label-carrying part of every gradient
    (DPSGD-F paper, Section 4 and
    :func:`sklearn_fdp.datasets.make_dpsgdf_counterexample`). The practical
    variant's mean has error ``∝ feature_norm``; on data whose spread is far
    below their norm only the analysed variant removes the offset to the
    scale of the spread. The analysed variant divides the augmented rows by
    ``sqrt(2) τ`` with τ an upper bound of ``||x - mean_||`` (rounded up on a
    grid of ratio 2), so most rows end up well inside the unit ball and the
    ``"auto"`` learning rate, set for rows of norm about 1, takes smaller
    effective steps: on data without a large offset it may need more
    ``epochs`` or a larger ``learning_rate`` than the practical variant (see
    ``benchmarks/results/dpsgdf.md``).

    Parameters
    ----------
    loss : {"log_loss", "hinge"}, default="log_loss"
        ``"log_loss"``: logistic regression (binary) or multinomial softmax.
        ``"hinge"``: the margin loss of the DPSGD-F paper (Crammer–Singer for
        more than two classes); no ``predict_proba``.
    epsilon : float or None, default=1.0
        Total privacy budget of one call to ``fit`` (mean and gradient
        steps together), in (0, inf); must exceed ``epsilon_mean``. The
        noise multiplier of the steps is calibrated to what the mean leaves.
        May be None only when ``noise_multiplier`` is given.
    [[delta]]
    epsilon_mean : float or "auto", default="auto"
        ε_F: what the private mean alone costs at ``delta``, in (0, inf).
        ``"auto"``: ``min(0.05, 0.05 * epsilon)`` (0.05, the fixed default
        until issue 20, at ``epsilon`` ≥ 1 or ``epsilon=None``; 5 % of the
        budget below, so that the default fits at every ε); ``epsilon_mean_``
        records the value used.
        Practical variant: the analytic Gaussian noise multiplier for
        (``epsilon_mean``, ``delta``). Analysed variant: the same
        multiplier σ_F, shared by the ``2K - 1`` Gaussian releases of the
        coarse-to-fine mean (each gets ``σ_F sqrt(2K - 1)``, so together
        they cost exactly ``epsilon_mean``). The paper found 0.02-0.05 best
        for the practical variant; Algorithm 2 uses ε/3.
    epsilon_quantile : float, default=0.05
        Analysed variant only (ignored by the practical one): what the
        private quantile τ costs at ``delta`` (analytic Gaussian noise
        multiplier of its histogram), in (0, inf). ``epsilon_mean`` and
        ``epsilon_quantile`` together must stay below ``epsilon``.
    feature_norm : float, default=1.0
        C_F (``R`` of the paper), > 0, applied before anything else in fit
        and in predict. Practical variant: every non-zero row is scaled to
        this L2 norm. Analysed variant: rows of larger norm are clipped to
        it (others are unchanged). Also the sensitivity of the sum of the
        rows.
    variant : {"practical", "analysed"}, default="practical"
        ``"practical"``: Algorithm 3; ``"analysed"``: Algorithm 2 (above).
    [[max_grad_norm]]
    noise_multiplier : float or None, default=None
        σ of the gradient steps. When given, ε is computed rather than
        targeted; if ``epsilon`` is also given, ``fit`` raises
        :class:`~sklearn_fdp.exceptions.BudgetExceededError` when the fit
        would spend more than ``epsilon``.
    [[batch_size]]
    [[epochs]]
    [[learning_rate]]
    [[lr_schedule]]
    momentum : float, default=0.9
        Heavy-ball momentum in [0, 1).
    [[average]]
    [[l2_regularization]]
    fit_intercept : bool, default=True
        Fit an intercept on the *centred* rows (Algorithm 3 does; in the
        analysed variant, the weight of the constant column τ). With
        False the model is ``w @ (x - mean_)`` (analysed: no τ column, rows
        clipped to τ), whose intercept in the input feature space,
        ``-mean_ @ w``, is still reported in ``intercept_``.
    [[accountant]]
    neighboring : {"add_remove", "replace"}, default="add_remove"
        Under ``"replace"`` the mean's sensitivity doubles and so does its
        noise multiplier.
    random_state : int, RandomState instance or None, default=None
        Seeds the mean's noise, the batches and the gradient noise.
    noise : {"default", "secure"}, default="default"
        Source of the randomness privacy rests on: the Poisson batch coins, the
        noise of the steps and that of the private mean (and quantile).
        ``"default"``: NumPy PCG64 streams spawned from ``random_state``
        (reproducible). ``"secure"``: fresh bits from the OS CSPRNG
        (``os.urandom``) and a Gaussian sampler hardened against floating-point
        attacks (four Box–Muller normals summed and halved, as in Opacus's
        ``secure_mode``); slower (user guide, "Secure noise"), and
        ``random_state`` no longer reproduces the fit. The accounting, and so
        ``epsilon_``, is the same.
    verbose : int, default=0
        Print the ε of the gradient steps after every epoch (without the
        mean's share).
    [[classes]]

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Weights on the *scaled* rows ``x * feature_norm / ||x||`` (analysed:
        on the rows clipped to ``feature_norm``).
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Intercept for the scaled, uncentred rows: ``b_centred - mean_ @ w``.
    classes_ : ndarray of shape (n_classes,)
    mean_ : ndarray of shape (n_features,)
        Released private mean of the scaled rows (float64).
    mean_noise_multiplier_ : float
        Practical: σ_F of the mean (noise std of the sum / its add/remove
        sensitivity ``feature_norm``). Analysed: σ of each of the
        ``2 * mean_rounds_ - 1`` Gaussian releases of the mean.
    mean_noise_std_ : float
        Per-coordinate noise std of ``mean_``: ``σ_F * feature_norm / n``
        (analysed: of the last round, ``σ * mean_radii_[-1] / n``).
    epsilon_mean_ : float
        ε of the mean alone at ``delta_`` (analytic Gaussian; ≈ ``epsilon_mean``).
    mean_rounds_ : int
        Analysed only: rounds ``K`` of the coarse-to-fine mean (1 is the
        plain Gaussian mean at radius ``feature_norm``).
    mean_radii_ : ndarray of shape (``mean_rounds_``,)
        Analysed only: clipping radius of each round (``feature_norm``,
        then the private radii).
    quantile_ : float
        Analysed only: τ, the private upper quantile of ``||x - mean_||``.
    quantile_noise_multiplier_ : float
        Analysed only: σ of the quantile's histogram (sensitivity 1).
    epsilon_quantile_ : float
        Analysed only: ε of the quantile alone at ``delta_``.
    feature_norm_ : float
        C_F used.
    epsilon_ : float
        ε of the whole fit (mean composed with the gradient steps) at
        ``delta_``; ≤ ``epsilon``.
    [[delta_]]
    noise_multiplier_ : float
        σ of the gradient steps.
    dp_event_ : dp_accounting.DpEvent
        ``ComposedDpEvent([GaussianDpEvent(σ_F), DP-SGD event])``; analysed:
        one ``GaussianDpEvent`` per release of the mean, one for the
        quantile, then the DP-SGD event.
    [[sampling_rate_]]
    [[batch_size_]]
    [[learning_rate_]]
    [[steps_]]
    [[n_iter_]]
    [[accountant_]]
    [[privacy_plan_]]
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Defined when ``X`` has string column names.

    Notes
    -----
    Privacy: unit = one record (features and label); add/remove by default.
    Row scaling to ``feature_norm`` is data-independent, so adding or
    removing a row changes the sum of the rows by at most ``feature_norm``;
    the mean divides that sum by ``n``, which is treated as public. The
    mean is one Gaussian release (``GaussianDpEvent(σ_F)``) and the steps
    are Poisson-subsampled Gaussians; both are composed in *one*
    dp-accounting accountant at the *same* δ — δ is not split — and the
    steps' σ is calibrated so that the composition spends at most
    ``epsilon`` at ``delta`` (Lemma 9 of the paper). Centring on the
    released mean is post-processing of it, but it couples every row to the
    others; the DP-SGD analysis still applies because the steps see the
    mean as a fixed, already-accounted quantity. Treated as public: ``n``
    and ``classes_`` (read from ``y`` unless ``classes`` is given). Dense
    inputs only (centring destroys sparsity).

    Analysed variant: rows are clipped to ``feature_norm`` (data-independent).
    Each release of the mean is the sum of rows clipped to a radius ``r``
    around a previously *released* centre (sensitivity ``r``) plus Gaussian
    noise; each radius and τ come from a histogram of distances to a
    released centre over a fixed geometric grid (each row in one bin:
    sensitivity 1) plus Gaussian noise, post-processed. So the fit is the
    adaptive composition of ``2 K - 1`` Gaussians (σ each, ε_mean together),
    one Gaussian (the quantile) and the Poisson-subsampled Gaussian steps,
    all in one accountant. The augmented rows have norm ≤ 1 after the
    division by ``sqrt(2) τ``, so per-example gradients of the logistic or
    hinge loss have norm ≤ 1 and ``max_grad_norm=1`` clips nothing, as in
    Algorithm 2. Under ``neighboring="replace"`` the multipliers double (the
    histograms' replace sensitivity, sqrt(2), is below the 2 accounted).

    References
    ----------
    DPSGD-F paper ("The importance of feature preprocessing for
    differentially private linear optimization"), Algorithms 2 and 3,
    Lemmas 3-5, Appendix C. Huang, Liang & Yi, "Instance-optimal mean
    estimation under differential privacy", NeurIPS 2021.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn_fdp import DPSGDFClassifier
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> clf = DPSGDFClassifier(epsilon=1.0, delta=1e-5, random_state=0).fit(X + 5.0, y)
    >>> bool(clf.epsilon_ <= 1.0)
    True
    >>> ana = DPSGDFClassifier(epsilon=1.0, epsilon_mean=0.2, epsilon_quantile=0.1,
    ...                        feature_norm=10.0, variant="analysed", random_state=0)
    >>> bool(ana.fit(X + 5.0, y).epsilon_ <= 1.0)
    True
    """

    _parameter_constraints: dict = {
        **BaseDPLinearClassifier._parameter_constraints,
        **BaseDPLinearClassifier._LOSS_CONSTRAINT,
        "epsilon_mean": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "epsilon_quantile": [Interval(Real, 0, None, closed="neither")],
        "feature_norm": [Interval(Real, 0, None, closed="neither")],
        "variant": [StrOptions(set(VARIANTS))],
    }

    def __init__(
        self,
        *,
        loss: Literal["hinge", "log_loss"] = "log_loss",
        epsilon: float | None = 1.0,
        delta: float = 1e-5,
        epsilon_mean: float | Literal["auto"] = "auto",
        epsilon_quantile: float = 0.05,
        feature_norm: float = 1.0,
        variant: Literal["analysed", "practical"] = "practical",
        max_grad_norm: float = 1.0,
        noise_multiplier: float | None = None,
        batch_size: int | Literal["auto"] = "auto",
        epochs: float = 10.0,
        learning_rate: float | Literal["auto"] = "auto",
        lr_schedule: Literal["constant", "cosine", "linear"] = "cosine",
        momentum: float = 0.9,
        average: bool = True,
        l2_regularization: float = 0.0,
        fit_intercept: bool = True,
        accountant: Literal["auto", "pld", "rdp"] = "auto",
        neighboring: Literal["add_remove", "replace"] = "add_remove",
        random_state: RandomStateLike = None,
        noise: Literal["default", "secure"] = "default",
        verbose: int = 0,
        classes: ArrayLike | None = None,
    ) -> None:
        self.loss = loss
        self.epsilon = epsilon
        self.delta = delta
        self.epsilon_mean = epsilon_mean
        self.epsilon_quantile = epsilon_quantile
        self.feature_norm = feature_norm
        self.variant = variant
        self.max_grad_norm = max_grad_norm
        self.noise_multiplier = noise_multiplier
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.lr_schedule = lr_schedule
        self.momentum = momentum
        self.average = average
        self.l2_regularization = l2_regularization
        self.fit_intercept = fit_intercept
        self.accountant = accountant
        self.neighboring = neighboring
        self.random_state = random_state
        self.noise = noise
        self.verbose = verbose
        self.classes = classes

    # -- fit / predict -------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X: MatrixLike, y: ArrayLike) -> Self:
        """Fit DPSGD-F: scale rows, private mean, centre, DP-SGD, move the intercept.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Dense training data; rows are scaled to norm ``feature_norm``.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : DPSGDFClassifier
        """
        # Centring destroys sparsity: dense input only. An out-of-core X is
        # scaled, centred and augmented batch by batch (the maps are row-wise).
        # A dask array with a Client: the private means and quantile are summed
        # on the workers (source); the DP-SGD steps read their batches from it.
        X, source, classes, y_index = self._training_rows(X, y)
        n_samples, n_features = X.shape
        check_delta_vs_n(self.delta, n_samples, type(self).__name__)
        plan = self.privacy_plan(n_samples, n_features)
        variant = VARIANTS[self.variant]
        n_outputs = n_outputs_of(classes)
        loss = LinearLoss(self.loss, n_outputs)
        # noise="secure": the batch coins and the noise come from the OS CSPRNG;
        # the preprocessing's noise has its own child stream, made secure by
        # its mechanisms, independent of the batches and the gradient noise.
        gens = spawn_generators(self.random_state, 4, noise=self.noise,
                                private_streams=(_SAMPLE, _NOISE))
        (preprocessing_rng,) = gens[_PUBLIC].spawn(1)
        X = scale_rows(X, float(self.feature_norm), variant.row_scaling)
        if source is not None:
            source = scale_rows(source, float(self.feature_norm), variant.row_scaling,
                                type(self).__name__)
        prep = variant.prepare(self, X, plan.details, preprocessing_rng, source)
        if list(prep.events) != plan.dp_event.events[:-1]:
            raise RuntimeError(f"{type(self).__name__}: the preprocessing spent "
                               f"{prep.events!r}, not the planned events.")
        clip = float(self.max_grad_norm)
        oracle = LinearGradientOracle(prep.rows, loss.encode(y_index), loss,
                                      prep.oracle_intercept, clip)
        n_rows = n_features + int(self.fit_intercept)
        learning_rate = resolve_learning_rate(self, plan.noise_multiplier * clip,
                                              plan.schedule, n_rows, n_outputs)
        result = run_dp_sgd(
            np.zeros((n_rows, n_outputs), dtype=X.dtype), oracle, n_samples,
            engine_config(self, plan, clip, learning_rate),
            sample_rng=gens[_SAMPLE], noise_rng=gens[_NOISE], callback=epoch_printer(self, plan),
        )
        coef, intercept = prep.revert(result.theta, X.dtype)
        self._store(coef, intercept, classes, plan, learning_rate, prep.released)
        return self

    def _training_rows(self, X, y):
        """``(X, source, classes_, y_index)``: the rows DP-SGD reads, and where the statistics are summed.

        In memory or out of core: ``source`` is None (the statistics read
        ``X``). A dask array with an active ``Client``
        (:func:`~sklearn_fdp._distributed.use_cluster`): ``source`` is the
        dask array, whose partitions the private means and the quantile's
        histogram are computed on, on the workers (validated there with the
        in-memory rules), and ``X`` a row source over it from which the DP-SGD
        steps read their Poisson batches; the labels are encoded per
        partition and ``y_index`` (one integer per row) is gathered.
        """
        if not use_cluster(X):
            X, classes, y_index = validate_linear_data(self, X, y, accept_sparse=False)
            return X, None, classes, y_index
        source, classes, y_index = partitioned_labels(self, X, y)
        rows = as_row_source(source, type(self).__name__)
        return rows, source, classes, np.asarray(y_index.compute())

    @fill_doc
    def privacy_plan(self, n_samples: int, n_features: int, *,
                     feature_names: ArrayLike | None = None) -> PrivacyPlan:
        """What a fit on ``n_samples`` × ``n_features`` data spends and protects.

        Computed from public quantities only (the shape and the parameters):
        the private preprocessing's Gaussian releases (practical: the mean;
        analysed: the ``2 K - 1`` releases of the coarse-to-fine mean and
        the quantile), composed with the DP-SGD steps whose σ is calibrated
        to what they leave of ``epsilon``. ``fit`` runs with the noise
        multipliers it holds (``details``) and stores it as ``privacy_plan_``.

        Parameters
        ----------
        [[plan_shape]]
        feature_names : array-like of str or None, default=None
            Column names (unused: DPSGD-F protects whole records).

        Returns
        -------
        plan : PrivacyPlan
        """
        check_budget_params(self)
        events, details = VARIANTS[self.variant].plan(self, n_samples, n_features)
        schedule = dpsgd_schedule(self, n_samples)
        sigma, event, spent, accountant = calibrate_dpsgd(
            self, schedule.sampling_rate, schedule.steps, other_events=events)
        return record_plan(event, spent, float(self.delta), accountant, noise_multiplier=sigma,
                           schedule=schedule, details=details)

    def _store(self, coef, intercept, classes, plan, learning_rate, released):
        """Set every fitted attribute, once the whole fit has succeeded."""
        self._store_linear(coef, intercept, classes, plan, learning_rate)
        self.feature_norm_ = float(self.feature_norm)
        # The preprocessing's public settings (mean_noise_multiplier_,
        # epsilon_mean_, ...) and released statistics; mean_ last.
        for name, value in plan.details.items():
            setattr(self, name + "_", value)
        for name, value in released.items():
            setattr(self, name, value)

    def _row_scaling(self):
        return VARIANTS[self.variant].row_scaling

    def _augment(self, X):
        """Internal representation of the analysed variant (for inspection and tests).

        ``Clip((x - mean_, τ), sqrt(2) τ) / (sqrt(2) τ)``: the rows DP-SGD
        trained on (without the τ column and with ``τ`` instead of
        ``sqrt(2) τ`` when ``fit_intercept=False``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input rows (clipped to ``feature_norm`` first, as in ``fit``).

        Returns
        -------
        Z : ndarray of shape (n_samples, n_features + fit_intercept)
            float64.
        """
        check_is_fitted(self)
        if self.variant != "analysed":
            raise AttributeError(
                f"_augment of {type(self).__name__} exists for variant='analysed' only."
            )
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        X = scale_rows(X, self.feature_norm_, "clip")
        return mech.augment_block(X, self.mean_, self.quantile_, self.fit_intercept)

    def decision_function(self, X: MatrixLike) -> np.ndarray:
        """Scores of the linear model on the row-scaled (analysed: clipped) ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        check_is_fitted(self)
        if should_stream(X):
            scores = self._out_of_core_scores(X)
        else:
            X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
            X = scale_rows(X, self.feature_norm_, self._row_scaling())
            scores = X @ self.coef_.T + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def _out_of_core_scores(self, X):
        """Scores of a large memmap or dask array, scaled and scored in row blocks."""
        from .._validation import _assert_all_finite, _check_feature_names, _check_n_features

        name = type(self).__name__
        _check_feature_names(self, X, reset=False)
        source = as_row_source(X, name)
        _check_n_features(self, X, reset=False)
        scores = None
        for start, block in source.iter_chunks():
            _assert_all_finite(block, allow_nan=False, input_name="X", estimator_name=name)
            Xs = scale_rows(block, self.feature_norm_, self._row_scaling())
            part = Xs @ self.coef_.T + self.intercept_
            if scores is None:
                scores = np.empty((source.shape[0], part.shape[1]), dtype=part.dtype)
            scores[start:start + len(block)] = part
        return scores

    def __sklearn_is_fitted__(self):
        # ``mean_`` is set last in ``fit``; validation alone (``n_features_in_``)
        # does not make the estimator fitted.
        return hasattr(self, "mean_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

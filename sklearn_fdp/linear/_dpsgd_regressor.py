"""DPSGDRegressor: plain DP-SGD for linear regression (squared, Huber, ε-insensitive)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._engine._divergence import check_not_diverged
from .._docs import fill_doc
from .._engine import LinearLoss
from .._validation import _fit_context, atomic_fit
from ._base import (
    BaseDPLinearRegressor,
    resolve_regression_learning_rate,
    scaled_target,
    validate_regression_data,
)
from ._whole_record import WholeRecordDPSGD, plan_fit, run_whole_record_dpsgd

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from .._typing import ArrayLike, MatrixLike, RandomStateLike


def regression_loss(est, bounds):
    """The :class:`LinearLoss` of ``est.loss``, its margin mapped like the target.

    A number ``loss_epsilon`` is in the units of ``y``; with ``y_bounds``
    the target is divided by its half width (``bounds = (centre, half)``),
    and so is the margin. ``"auto"``: 0.1 in the units the model trains in
    (0.1 half widths with ``y_bounds``, 0.1 otherwise).
    """
    return LinearLoss(est.loss, 1, margin=resolve_margin(est, bounds))


def resolve_margin(est, bounds):
    """The margin of the loss in the units of the (mapped) training target."""
    if est.loss_epsilon == "auto":
        return 0.1
    margin = float(est.loss_epsilon)
    return margin if bounds is None else margin / bounds[1]


@fill_doc
class DPSGDRegressor(WholeRecordDPSGD, BaseDPLinearRegressor):
    """Linear regression trained with differentially private SGD (DP-SGD).

    The regression twin of :class:`DPSGDClassifier`: each step draws a
    Poisson batch, clips every per-example gradient ``x~ r`` (``r`` the
    loss's residual at the record, e.g. ``z − y`` for the squared error) to
    L2 norm ``max_grad_norm``, adds Gaussian noise of standard deviation
    ``noise_multiplier * max_grad_norm`` to their sum and takes a (momentum)
    step. The run is (ε, δ)-differentially private for *whole records*
    (features and target) under the add/remove relation, with ε computed by
    dp-accounting for the Poisson-subsampled Gaussian mechanism.

    Parameters
    ----------
    loss : {"squared_error", "huber", "epsilon_insensitive"}, default="squared_error"
        scikit-learn's ``SGDRegressor`` losses: ``½ (z − y)²``; Huber
        (quadratic up to ``|z − y| = loss_epsilon``, linear beyond);
        ``max(0, |z − y| − loss_epsilon)``.
    loss_epsilon : float or "auto", default="auto"
        Margin of ``"huber"`` and ``"epsilon_insensitive"`` in the units of
        ``y``, ≥ 0 (``SGDRegressor``'s ``epsilon``, default 0.1; renamed
        because ``epsilon`` is the privacy budget here). ``"auto"``: 0.1 in
        the units the model trains in, i.e. ``0.1 (hi − lo) / 2`` with
        ``y_bounds`` and 0.1 without. Ignored by ``"squared_error"``.
    y_bounds : (float, float) or None, default=None
        Public range ``(lo, hi)`` of the target, chosen without looking at
        ``y``. When given, ``fit`` clips ``y`` to it (warning with the count
        of clipped values) and trains on ``t = (y − c) / h`` in [-1, 1]
        (``c = (lo + hi) / 2``, ``h = (hi − lo) / 2``); ``coef_`` and
        ``intercept_`` are mapped back (``h θ`` and ``h b + c``), so
        ``predict`` is in the units of ``y``. Recommended: the step-size
        rule and ``max_grad_norm`` are tuned for targets in [-1, 1] and rows
        of norm ≤ 1. Without it ``y`` is used as is and ``fit`` warns: the
        clipping still bounds every gradient, but residuals much larger
        than 1 are all clipped, which makes the fit a slow, median-like
        regression.
    [[epsilon]]
    [[delta]]
    max_grad_norm : float, default=1.0
        Clip norm ``C`` of each per-example gradient ``x~ r``, > 0. With rows
        of norm at most 1, an intercept and ``y_bounds``, a squared-error
        gradient at a model with ``|z| ≤ 1`` has norm at most ``2 sqrt(2)``.
    [[noise_multiplier]]
    [[batch_size]]
    [[epochs]]
    learning_rate : float or "auto", default="auto"
        Base step size. ``"auto"``: :class:`DPSGDClassifier`'s rule for one
        output column, ``min(4, 0.005 B^1.5 / (σ C sqrt(d + 1)))``, times 1/4
        for ``"squared_error"`` and ``"huber"`` (their curvature is four
        times the log loss's; the cap of 1 keeps momentum SGD on the squared
        loss stable for rows of norm ≤ 1).
    [[lr_schedule]]
    [[momentum]]
    [[average]]
    [[l2_regularization]]
    [[fit_intercept]]
    [[accountant]]
    [[neighboring]]
    [[random_state]]
    [[noise]]
    [[verbose]]

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : ndarray of shape (1,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Defined when ``X`` has string column names.
    [[epsilon_]]
    [[delta_]]
    [[noise_multiplier_]]
    [[sampling_rate_]]
    [[batch_size_]]
    [[learning_rate_]]
    [[steps_]]
    [[n_iter_]]
    [[accountant_]]
    [[dp_event_]]
    [[privacy_plan_]]

    Notes
    -----
    Privacy: unit = one record (all features and the target); neighbouring
    relation add/remove by default; per-example clipping to
    ``max_grad_norm``; ε by dp-accounting for a self-composed
    Poisson-subsampled Gaussian, the same as :class:`DPSGDClassifier`'s for
    the same (σ, q, T). Treated as public: ``n`` and ``y_bounds``. The
    warning that counts the targets outside ``y_bounds`` is seen by whoever
    runs ``fit`` (who holds the data); nothing of it is in the model. All
    other hyperparameters must be chosen without looking at the private
    data, or the choice must itself be accounted for.

    See Also
    --------
    DPSGDClassifier : The classification twin.
    FeatureDPSGDRegressor : Regression with feature DP (FDP Algorithm 1).

    References
    ----------
    Abadi et al., "Deep Learning with Differential Privacy", CCS 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp import DPSGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-0.5, 0.5, size=(5000, 3))
    >>> y = 10 + 8 * X[:, 0] + rng.normal(0, 1, 5000)
    >>> reg = DPSGDRegressor(y_bounds=(0, 20), epsilon=1.0, random_state=0).fit(X, y)
    >>> bool(reg.epsilon_ <= 1.0), reg.coef_.shape
    (True, (3,))
    """

    _parameter_constraints: dict = {
        **BaseDPLinearRegressor._parameter_constraints,
        **BaseDPLinearRegressor._LOSS_CONSTRAINT,
    }

    def __init__(
        self,
        *,
        loss: Literal["epsilon_insensitive", "huber", "squared_error"] = "squared_error",
        loss_epsilon: float | Literal["auto"] = "auto",
        y_bounds: tuple[float, float] | None = None,
        epsilon: float | None = 1.0,
        delta: float = 1e-5,
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
    ) -> None:
        self.loss = loss
        self.loss_epsilon = loss_epsilon
        self.y_bounds = y_bounds
        self.epsilon = epsilon
        self.delta = delta
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

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X: MatrixLike, y: ArrayLike) -> Self:
        """Fit the model with DP-SGD.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data. Rows should have a data-independent L2 bound
            (e.g. scaled to norm ≤ 1); clipping bounds each gradient anyway.
        y : array-like of shape (n_samples,)
            Target values (clipped to ``y_bounds`` when it is given).

        Returns
        -------
        self : DPSGDRegressor

        Raises
        ------
        ValueError
            When the released weights are not finite, or exploded (beyond
            1e6 on the target mapped by ``y_bounds``): the training diverged;
            the message names the cause (learning rate, noise or the scale of
            X) from the fit's public quantities. An earlier fit is kept.
        """
        X, y = validate_regression_data(self, X, y, warn_rows=True, cluster=True)
        plan = plan_fit(self, X)
        t, bounds = scaled_target(self, y)
        loss = regression_loss(self, bounds)
        theta, learning_rate = run_whole_record_dpsgd(
            self, X, t, loss, plan, 1,
            lambda noise_std, n_rows: resolve_regression_learning_rate(
                self, self.loss, noise_std, plan.schedule, n_rows, bounded=bounds is not None))
        check_released_finite(self, theta, plan, float(self.max_grad_norm), learning_rate,
                              bounds is not None)
        self._store_regression(theta, self.fit_intercept, X.dtype, bounds, plan, learning_rate)
        return self


def check_released_finite(est, theta, plan, max_grad_norm, learning_rate, bounded, *,
                          noise_scale=1.0):
    """Raise "diverged", naming the cause, when the released weights are not finite
    or (with ``y_bounds``) exploded: a check of DP output and public quantities
    only, free (:func:`sklearn_fdp._engine._divergence.check_not_diverged`).
    ``noise_scale``: the factor on σ C of the noise (α of FDP Algorithm 1)."""
    schedule = plan.schedule
    check_not_diverged(est, [theta], learning_rate=learning_rate,
                       noise_multiplier=noise_scale * plan.noise_multiplier,
                       max_grad_norm=max_grad_norm, steps=schedule.steps,
                       batch_size=schedule.batch_size, momentum=est.momentum, mapped=bounded)

"""FeatureDPSGDRegressor: linear regression with feature DP by FDP Algorithm 1 (or DP-SGD).

The regression twin of the SGD methods of FeatureDPLogisticRegression: the
same feature specs, public view (``public_loss``), α, public batches and
public pretraining, with the squared, Huber and ε-insensitive losses. The
mechanisms are :mod:`sklearn_fdp._mechanisms.fdp`'s; this module validates,
plans and runs one of two methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numbers import Integral, Real
from typing import NamedTuple

import numpy as np

from .._docs import fill_doc
from .._distributed._dpsgd import cluster_alg1_start
from .._engine import run_dp_sgd
from .._mechanisms.fdp import (
    PUBLIC_LOSSES,
    alg1_oracles,
    label_free_error,
    public_pretraining,
    rescaled_for_public_steps,
    unscale_weights,
)
from .._outofcore import is_dask_array
from .._validation import Interval, StrOptions, _fit_context, atomic_fit
from ..features import check_label_in_spec
from ._base import (
    _INIT,
    _NOISE,
    _PUBLIC,
    _SAMPLE,
    BaseDPLinearRegressor,
    engine_config,
    epoch_printer,
    resolve_regression_learning_rate,
    scaled_target,
    validate_regression_data,
)
from ._dpsgd_regressor import check_released_finite, regression_loss
from ._feature_dp_logistic import _AUTO_CLIP_ALG1, _auto_alpha
from ._feature_dp_sgd import FeatureDPSGD, dpsgd_start

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from .._typing import ArrayLike, FeatureSpec, MatrixLike, RandomStateLike

METHODS = ("auto", "alg1", "dpsgd")


class _Fit(NamedTuple):
    """What one method's run released, and the settings it resolved (fitted attributes)."""

    theta: np.ndarray  # weights for X / public_scale, for the mapped target
    public_scale: float
    alpha: float
    max_grad_norm: float
    learning_rate: float


def _public_part(est, plan):
    """The settings of ``ℓ_pub``: what of a record is public and how ``ℓ_pub`` sees it."""
    return dict(public_mask=plan.details["public_mask"], label_public=est.label_public,
                public_loss=est.public_loss, fit_intercept=est.fit_intercept)


def _pretrained(est, X, y, loss, plan, rng):
    """The start of the noisy run: zeros after public pretraining (free; ``public_epochs``)."""
    theta0 = np.zeros((X.shape[1] + int(est.fit_intercept), 1), dtype=X.dtype)
    return public_pretraining(
        X, y, loss, theta0, rng, epochs=est.public_epochs, **_public_part(est, plan),
        batch_size=plan.details["public_batch_size"], learning_rate=est.learning_rate,
        lr_schedule=est.lr_schedule, momentum=est.momentum,
        l2_regularization=est.l2_regularization)


def _run_engine(est, X, theta0, private, public, plan, gens, alpha, scale, bounded):
    """Noisy steps from ``theta0`` under ``plan`` (the step size set for α σ C)."""
    clip = private.max_grad_norm
    learning_rate = resolve_regression_learning_rate(
        est, est.loss, alpha * plan.noise_multiplier * clip, plan.schedule, theta0.shape[0],
        bounded=bounded)
    result = run_dp_sgd(
        theta0, private, X.shape[0], engine_config(est, plan, clip, learning_rate, alpha=alpha),
        sample_rng=gens[_SAMPLE], noise_rng=gens[_NOISE], public_oracle=public,
        callback=epoch_printer(est, plan),
    )
    return _Fit(result.theta, scale, alpha, clip, learning_rate)


def _fit_alg1(est, X, y, loss, plan, gens, bounded):
    """FDP Algorithm 1: clipped, noised ``∇ℓ − ∇ℓ_pub`` plus the noise-free ``∇ℓ_pub``."""
    if is_dask_array(X):  # on a dask.distributed cluster: the same steps, sums on the workers
        scale, private, public, theta0 = cluster_alg1_start(
            est, X, y, loss, np.zeros((X.shape[1] + int(est.fit_intercept), 1), dtype=X.dtype),
            **_public_part(est, plan), max_grad_norm=plan.details["max_grad_norm"],
            public_batch_size=plan.details["public_batch_size"], public_rng=gens[_PUBLIC],
            noise=est.noise)
    else:
        X, scale = rescaled_for_public_steps(X, plan.details["public_mask"])
        private, public = alg1_oracles(
            X, y, loss, **_public_part(est, plan), max_grad_norm=plan.details["max_grad_norm"],
            public_batch_size=plan.details["public_batch_size"], public_rng=gens[_PUBLIC],
            noise=est.noise)
        theta0 = _pretrained(est, X, y, loss, plan, gens[_INIT])
    if est.alpha != "auto":
        alpha = float(est.alpha)
    elif est.label_public:
        alpha = _auto_alpha(plan.noise_multiplier * private.max_grad_norm,
                            plan.schedule.batch_size, theta0.shape[0])
    else:
        # A private target: the label-free ℓ_pub pulls every prediction to the
        # centre at full weight, the target enters through α g_priv only, so
        # α < 1 biases every prediction towards the centre (see `alpha`).
        alpha = 1.0
    return _run_engine(est, X, theta0, private, public, plan, gens, alpha, scale, bounded)


def _fit_dpsgd(est, X, y, loss, plan, gens, bounded):
    """FDP (DP-SGD), §6.3: public pretraining, then DP-SGD on the whole loss."""
    X, scale, private, theta0 = dpsgd_start(est, X, y, loss, plan, gens, _pretrained)
    return _run_engine(est, X, theta0, private, None, plan, gens, 1.0, scale, bounded)


# The one dispatch on `method` ("auto" resolved by privacy_plan): how each
# method runs, and its clip for max_grad_norm="auto".
_METHOD_RUNS = {"alg1": _fit_alg1, "dpsgd": _fit_dpsgd}
_AUTO_CLIP = {"alg1": _AUTO_CLIP_ALG1, "dpsgd": 1.0}


@fill_doc
class FeatureDPSGDRegressor(FeatureDPSGD, BaseDPLinearRegressor):
    """Linear regression with feature differential privacy (FDP Algorithm 1).

    The regression twin of :class:`FeatureDPLogisticRegression`'s SGD
    methods. Some columns of ``X`` (and optionally the target) are public;
    the *private* columns of every record are protected. The loss is split
    as ``ℓ = (ℓ − ℓ_pub) + ℓ_pub`` where ``ℓ_pub`` sees only the public part
    of a record; each step clips and noises the per-example gradients of
    ``ℓ − ℓ_pub`` on a Poisson batch and adds the noise-free mean gradient of
    ``ℓ_pub`` on an independent uniform batch. (ε, δ)-feature-DP with ε
    accounted as for DP-SGD with the same noise, sampling rate and steps
    (FDP paper, Thm. 5).

    The split, per loss (``x_pub`` the public view, ``z_pub = θᵀ x~_pub``):

    * target public (``label_public=True``), every loss:
      ``ℓ_pub(θ; x, y) = ℓ(θ; x_pub, y)``, gradient ``x~_pub r(z_pub, y)``;
    * target private, ``loss="squared_error"``: the gradient
      ``x~ (z − y)`` is ``x~ z − x~ y``; ``ℓ_pub = ½ z_pub²`` (label-free,
      centred at the target's public centre 0, i.e. ``(lo + hi) / 2`` with
      ``y_bounds``), private remainder ``x~ (z − y) − x~_pub z_pub``;
    * target private, ``"huber"`` or ``"epsilon_insensitive"``: their
      residuals are not a label-free part plus a remainder, so
      ``method="alg1"`` raises; ``method="dpsgd"`` works.

    The private remainder's norm is computed in non-negative orthogonal
    pieces (public block ``‖x_P‖² ‖r − r_pub‖²``, private block
    ``‖x_Q‖² ‖r‖²`` for ``"mask"``), never as a difference of squared norms.

    Parameters
    ----------
    public_features : spec or None, default=None
        Columns that are public, as column indices, a boolean mask, column
        names or a callable ``name -> bool`` (see
        :func:`sklearn_fdp.features.resolve_feature_spec`). Give exactly one
        of ``public_features`` and ``private_features``.
    private_features : spec or None, default=None
        Columns to protect; every other column is public.
    label_public : bool, default=False
        Whether the target is public (see the split above).
    public_loss : {"mask", "gaussian_pad"}, default="mask"
        Public view ``x_pub`` of a record: private columns set to 0
        (``"mask"``) or replaced by fresh N(0, 1) draws at every step
        (``"gaussian_pad"``).
    method : {"auto", "alg1", "dpsgd"}, default="auto"
        ``"alg1"``: FDP Algorithm 1 as above. ``"dpsgd"``: the paper's
        "FDP (DP-SGD)" (§6.3): ``public_epochs`` of public pretraining on
        ``ℓ_pub``, then plain DP-SGD on the full loss. ``"auto"``:
        ``"alg1"``. ``method_`` records the choice. (Ridge by sufficient
        statistics is :class:`FeatureDPLinearRegression`.)
    alpha : float or "auto", default="auto"
        Weight of the noisy private gradient: ``g = g_pub + alpha * g_priv``
        (post-processing). ``"auto"``: with a public target,
        FeatureDPLogisticRegression's rule ``min(1, 0.05 B / (σ C sqrt(d + 1)))``;
        with a private target, 1. There the target enters only through
        ``α g_priv`` while ``ℓ_pub = ½ z_pub²`` pulls every prediction to the
        centre at full weight, so α < 1 shrinks the fitted target towards
        the centre, a bias in every prediction (on a validation split of
        adult.data, target hours-per-week, ε = 0.1: label DP scored R² −0.10
        at the logistic rule's α = 0.51 and 0.11 at α = 1; with a public
        target both α scored the same).
    public_batch_size : int, "auto" or "full", default="auto"
        Size of the uniform public batch. ``"auto"``: the expected private
        batch size ``batch_size_``; ``"full"``: all ``n`` rows.
    public_epochs : float or "auto", default="auto"
        Public pretraining before the private run (free: Remark 2).
        ``"auto"``: with ``label_public=True``, start from the least-squares
        fit of the target on the public columns (the minimiser of the masked
        squared loss; a close start for the other losses); from zero
        otherwise. A number: that many passes of noise-free SGD on
        ``ℓ_pub`` (needs ``label_public=True``; step ``learning_rate``, or 1
        when it is ``"auto"``).
    loss : {"squared_error", "huber", "epsilon_insensitive"}, default="squared_error"
        As :class:`DPSGDRegressor`'s.
    loss_epsilon : float or "auto", default="auto"
        As :class:`DPSGDRegressor`'s: the margin in the units of ``y``;
        ``"auto"``: 0.1 in the units the model trains in.
    y_bounds : (float, float) or None, default=None
        As :class:`DPSGDRegressor`'s: the public range of the target; ``y``
        is clipped to it (with a warning counting the clipped values) and
        mapped to [-1, 1] for training, the model mapped back. Without it
        ``fit`` warns. With a private target its centre is the public
        centre of the label-free ``ℓ_pub``.
    [[epsilon]]
    [[delta]]
    max_grad_norm : float or "auto", default="auto"
        Clip norm ``C`` of each per-example private gradient, > 0.
        ``"auto"``: 0.5 for ``method="alg1"`` (the private remainder is
        mostly much smaller than a whole gradient; FeatureDPLogisticRegression's
        value), 1 for ``"dpsgd"``. ``max_grad_norm_`` records the value used.
    [[noise_multiplier]]
    [[batch_size]]
    [[epochs]]
    learning_rate : float or "auto", default="auto"
        Base step size. ``"auto"``: :class:`DPSGDRegressor`'s rule for the
        noise ``α σ C`` of a step.
    [[lr_schedule]]
    momentum : float, default=0.9
        Heavy-ball momentum in [0, 1).
    [[average]]
    [[l2_regularization]]
    [[fit_intercept]]
    [[accountant]]
    [[neighboring]]
    [[random_state]]
    noise : {"default", "secure"}, default="default"
        Source of the randomness privacy rests on: the Poisson batch coins and
        the Gaussian noise of the steps (and, with
        ``public_loss="gaussian_pad"``, the padding of the private batch's
        ``ℓ_pub`` term). ``"secure"``: the OS CSPRNG and a hardened Gaussian
        sampler, as for :class:`FeatureDPLogisticRegression`; ``random_state``
        then seeds only the public streams. ``epsilon_`` is the same.
    [[verbose]]

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : ndarray of shape (1,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Defined when ``X`` has string column names.
    feature_names_ : ndarray of str of shape (``n_features_in_``,) or None
        Column names the feature specs were resolved against.
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
    public_mask_ : ndarray of bool of shape (``n_features_in_``,)
        Which columns were treated as public.
    [[public_features_]]
    [[private_features_]]
    [[label_public_]]
    alpha_ : float
        α used (1 for ``method="dpsgd"``).
    method_ : str
        The method run (``"auto"`` resolved).
    max_grad_norm_ : float
        Clip norm used.
    public_batch_size_ : int
        Size of the uniform public batches used.
    public_scale_ : float
        As :class:`FeatureDPLogisticRegression`'s: ``max_i ‖x_i,pub‖`` when
        above 1 and the fit takes public gradient steps (``fit`` trains on
        ``X / public_scale_`` and maps ``coef_`` back), else 1.

    Notes
    -----
    Privacy: unit = the private columns of one record (and its target unless
    ``label_public``), feature DP relative to the public part (FDP paper,
    Def. 5 / 6), as :class:`FeatureDPLogisticRegression`. NOT protected: the
    public columns, the target when ``label_public=True``, ``n`` and
    ``y_bounds``. Feature DP does not hide whether a record is in the data;
    use :class:`DPSGDRegressor` for that.

    See Also
    --------
    DPSGDRegressor : DP-SGD regression protecting whole records.
    FeatureDPLogisticRegression : The classification twin.

    References
    ----------
    Mahloujifar, Guo et al., "Machine Learning with Privacy for Protected
    Attributes": §5 (Algorithm 1, Thm. 5, Remark 2) and §6.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp import FeatureDPSGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-0.5, 0.5, size=(5000, 3))
    >>> y = 10 + 8 * X[:, 0] + 4 * X[:, 2] + rng.normal(0, 1, 5000)
    >>> reg = FeatureDPSGDRegressor(private_features=[2], label_public=True, y_bounds=(0, 20),
    ...                             epsilon=1.0, random_state=0).fit(X, y)
    >>> reg.private_features_.tolist(), bool(reg.epsilon_ <= 1.0)
    ([2], True)
    """

    _parameter_constraints: dict = {
        **BaseDPLinearRegressor._parameter_constraints,
        **BaseDPLinearRegressor._LOSS_CONSTRAINT,
        "public_features": "no_validation",
        "private_features": "no_validation",
        "label_public": ["boolean"],
        "public_loss": [StrOptions(set(PUBLIC_LOSSES))],
        "method": [StrOptions(set(METHODS))],
        "alpha": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "public_batch_size": [Interval(Integral, 1, None, closed="left"),
                              StrOptions({"auto", "full"})],
        "public_epochs": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "max_grad_norm": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
    }

    def __init__(
        self,
        *,
        public_features: FeatureSpec = None,
        private_features: FeatureSpec = None,
        label_public: bool = False,
        public_loss: Literal["gaussian_pad", "mask"] = "mask",
        method: Literal["alg1", "auto", "dpsgd"] = "auto",
        alpha: float | Literal["auto"] = "auto",
        public_batch_size: int | Literal["auto", "full"] = "auto",
        public_epochs: float | Literal["auto"] = "auto",
        loss: Literal["epsilon_insensitive", "huber", "squared_error"] = "squared_error",
        loss_epsilon: float | Literal["auto"] = "auto",
        y_bounds: tuple[float, float] | None = None,
        epsilon: float | None = 1.0,
        delta: float = 1e-5,
        max_grad_norm: float | Literal["auto"] = "auto",
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
        self.public_features = public_features
        self.private_features = private_features
        self.label_public = label_public
        self.public_loss = public_loss
        self.method = method
        self.alpha = alpha
        self.public_batch_size = public_batch_size
        self.public_epochs = public_epochs
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
    def fit(self, X: MatrixLike, y: ArrayLike, feature_names: ArrayLike | None = None) -> Self:
        """Fit the model with FDP Algorithm 1 (or public pretraining + DP-SGD).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data. Rows should have a data-independent L2 bound
            (e.g. scaled to norm ≤ 1); public rows of larger norm make
            ``fit`` divide ``X`` by ``public_scale_``.
        y : array-like of shape (n_samples,)
            Target values (clipped to ``y_bounds`` when it is given).
        feature_names : sequence of str or None, default=None
            Names of X's columns, used only to resolve column names in
            ``public_features``/``private_features`` when X has none (as
            :func:`sklearn_fdp.pipeline.make_private_pipeline` passes them).

        Returns
        -------
        self : FeatureDPSGDRegressor

        Raises
        ------
        ValueError
            When the released weights are not finite, or exploded (beyond
            1e6 on the target mapped by ``y_bounds``): the training diverged;
            the message names the cause (learning rate, noise or the scale of
            X) from the fit's public quantities. An earlier fit is kept.
        """
        check_label_in_spec(self, X, y)
        X, y = validate_regression_data(self, X, y, cluster=True)
        names, plan, gens = self._plan_feature_fit(X, feature_names)
        t, bounds = scaled_target(self, y)
        loss = regression_loss(self, bounds)
        targets = t.astype(np.float64) if is_dask_array(t) else loss.encode(t)  # dask: on a cluster
        run = _METHOD_RUNS[plan.details["method"]](self, X, targets, loss, plan, gens,
                                                   bounds is not None)
        check_released_finite(self, run.theta, plan, run.max_grad_norm, run.learning_rate,
                              bounds is not None, noise_scale=run.alpha)  # DP values: free
        theta = unscale_weights(run.theta, run.public_scale, X.shape[1])
        self._store_regression(theta, self.fit_intercept, X.dtype, bounds, plan,
                               run.learning_rate)
        self._store_feature_split(names, plan, run)
        return self

    _AUTO_CLIP = _AUTO_CLIP
    _LABEL_FREE_PRETRAINING = (
        "with a private target the public loss is label-free (½ z², which pulls every "
        "prediction to the centre) and pretraining on it alone learns nothing.")

    def _resolve_method(self, public_mask):
        method = "alg1" if self.method == "auto" else self.method
        if method == "alg1" and not self.label_public and self.loss != "squared_error":
            raise ValueError(f"{type(self).__name__}: "
                             + label_free_error(self.loss, "method='alg1'"))
        return method

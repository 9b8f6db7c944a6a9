"""AdaMixClassifier: few public records, many private ones (AdaMix).

The estimator validates, plans and stores; the mechanism (public
pretraining, the calibration of the number of steps, the oracle of the
private phase, the per-instance figures) lives in
:mod:`sklearn_fdp._mechanisms.adamix`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
import sys
from numbers import Integral, Real

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .. import accounting
from .._docs import fill_doc
from .._mechanisms import adamix
from .._outofcore import should_stream, validate_row_source
from .._plan import PrivacyPlan
from .._random import NOISE_OPTIONS
from .._validation import (
    DELTA_CONSTRAINT,
    Interval,
    StrOptions,
    _fit_context,
    atomic_fit,
    check_delta_vs_n,
    check_row_norms_finite,
    encode_labels,
    validate_numeric_data,
)
from ._base import BaseDPLinearClassifier, n_outputs_of

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from .._typing import ArrayLike, MatrixLike, RandomStateLike


def _validated(est, X, y, *, reset):
    """``(X, y)``: the training data, X as float64 (or an out-of-core source)."""
    if should_stream(X):
        # A large numpy.memmap / dask array: checked in chunks; every step
        # reads the private records block by block (sklearn_fdp._outofcore).
        return validate_row_source(est, X, y, reset=reset)
    X, y = validate_numeric_data(est, X, y, dtype=[np.float64, np.float32], order="C",
                                 y_numeric=False, reset=reset)
    check_row_norms_finite(X, type(est).__name__)
    return np.asarray(X, dtype=np.float64), y


@fill_doc
class AdaMixClassifier(BaseDPLinearClassifier):
    """Logistic / softmax regression from a few public and many private records (AdaMix).

    A linear model on fixed features (e.g. embeddings of a pretrained
    network, or tabular features) is first trained on the records marked
    public (free), then refined by full-batch noisy gradient descent on all
    records. Each step projects every private per-example gradient onto a
    subspace computed from the public per-example gradients (``subspace``:
    their input directions, or the top-``k`` right singular subspace of the
    gradients themselves as in the paper), clips it at a
    percentile ``τ_t`` of the public gradient norms, and adds Gaussian noise
    ``N(0, σ² τ_t² I_k)`` to their sum; the public gradient and a pull
    ``λ (w − w_ref)`` towards the pretrained weights are added noise-free.
    The run is (ε, δ)-DP for the *private* records under add/remove of one
    private record: each step is a Gaussian mechanism with noise multiplier
    σ, and the number of steps is the largest whose composition spends at
    most ``epsilon``. Public records get no protection at all.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy budget of one call to ``fit``, in (0, inf). Sets the number
        of noisy steps ``T`` (the largest with ε(T) ≤ ``epsilon``).
    delta : float, default=1e-5
        δ of the guarantee, in (0, 1). Keep it well below ``1 / n_private``.
    noise_multiplier : float or "auto", default="auto"
        σ, > 0: the noise of every step has std ``σ τ_t``. Larger σ means
        more, noisier steps for the same ε; the paper uses 20 and found
        larger σ better (supplement §A.3). ``"auto"`` is 20 wherever that
        gives between 30 and 10,000 steps, and otherwise the σ that gives 30
        (ε below about 1.02 at δ = 1e-5; below about 0.16, σ = 20 cannot
        take a single step) or 10,000 (ε above about 33), never below 2.5: a
        rule of ε and δ only, so it costs no privacy.
    subspace_dim : int or "auto", default="auto"
        ``k``, the number of singular directions of the public subspace
        kept (``projection=True``; see ``subspace``). It cannot exceed the
        rank of the public gradients (at most the number of public records);
        a larger value is capped at that rank at every step. ``"auto"`` keeps
        every direction the public records span (the full rank). On
        validation splits of digits and MNIST-8k (50 public records, ε in
        {1, 3, 8}), k = 20 lost up to 1.2 points against the full rank
        (k = 50) at ε >= 3 and won at most 0.7 at ε = 1: for linear models
        on raw features the private signal outside a small public subspace
        matters more than the noise the projection removes.
    clip_percentile : float, default=90.0
        Percentile in (0, 100] of the public per-example gradient norms used
        as the clip threshold ``τ_t`` (``adaptive_clipping=True``).
    l2_regularization : float, default=1e-4
        λ >= 0 of the pull ``λ (w − w_ref)`` towards the publicly pretrained
        weights ``w_ref``, on the scale of the loss *averaged* over all
        records (the paper's 1e-2 multiplies the *summed* loss, i.e. about
        ``1e-2 / n`` here). On validation splits of digits and MNIST-8k,
        1e-4 and 1e-5 beat 1e-3 and 1e-2 (which holds the model near the
        few-shot ``w_ref``) by 2-5 points at ε = 8.
    public_epochs : int, default=200
        Full-batch gradient-descent steps of the public pretraining
        (noise-free; public records only; step ``1 / β``, see
        ``learning_rate``). 0 starts from zero weights.
    learning_rate : float or "auto", default="auto"
        Step size of the private phase. ``"auto"`` is ``4 / β`` with
        ``β = c max_j ‖x~_j‖² + λ`` over the *public* rows ``x~`` (with the
        intercept), ``c = 1/4`` (binary) or ``1/2`` (softmax): a worst-case
        smoothness bound of the averaged log loss; the factor 4 was measured
        on validation splits (1/β is too cautious for the few hundred steps
        σ = 20 allows). Ignored by the private phase of ``variant="theory"``.
    projection : bool, default=True
        Project private gradients onto the public subspace (see
        ``subspace``). False clips in the full parameter space and adds
        isotropic noise ``σ τ_t``.
    subspace : {"feature", "gradient"}, default="feature"
        Which public subspace ``projection`` uses. ``"gradient"``: the
        top-``k`` right singular subspace of the matrix of flattened public
        per-example gradients ``x~_j r_jᵀ`` (the paper's choice; rank at most
        the number of public records). ``"feature"``: all matrices ``V S``
        with ``V`` the top-``k`` left singular vectors of the public inputs
        weighted by their residual norms ``‖r_j‖`` (``k × n_classes``
        dimensions); it contains the gradient subspace, and equals it for
        binary problems. On validation splits of digits and MNIST-8k the
        gradient subspace lost 1-12 points against no projection; the
        feature subspace lost much less, and won at ε = 8 on digits.
    average : bool, default=True
        Return the average of the iterates of the second half of the run
        (post-processing) instead of the last one (``variant="practical"``).
    adaptive_clipping : bool, default=True
        Clip at the ``clip_percentile``-th percentile of the public gradient
        norms at every step. False clips at ``max_grad_norm``.
        ``projection=False, adaptive_clipping=False`` is NoisyGD.
    max_grad_norm : float, default=1.0
        Fixed clip norm when ``adaptive_clipping=False``; the Lipschitz bound
        ``L`` of ``variant="theory"``.
    variant : {"practical", "theory"}, default="practical"
        ``"practical"``: the algorithm above (main paper's Algorithm 2).
        ``"theory"``: the supplement's Algorithm 3 — no projection, no
        adaptive clipping, sensitivity ``L = max_grad_norm`` (the loss is
        assumed L-Lipschitz: for the log loss this holds when every row has
        ``‖x~‖ · r_max ≤ L``, with ``r_max = 1`` (binary) or ``sqrt(2)``
        (softmax), e.g. ``L = sqrt(2)`` for binary rows of norm ≤ 1 with an
        intercept), step size ``2 / (λ (t + 1))`` and the weighted average
        ``Σ_t 2t / (T (T + 1)) w_t``. λ is on the averaged loss, so this is
        Alg. 3 on the summed loss with λ n; the pretraining is the same GD as
        above (Alg. 3's one-pass SGD only serves its proof), and there is no
        projection onto a constraint set.
    [[fit_intercept]]
    random_state : int, RandomState instance or None, default=None
        Seeds the noise; a fixed value reproduces ``coef_``.
    noise : {"default", "secure"}, default="default"
        Source of the randomness privacy rests on: the Gaussian noise of the steps
        (the private phase is full-batch). ``"default"``: NumPy PCG64 streams
        spawned from ``random_state`` (reproducible). ``"secure"``: fresh bits
        from the OS CSPRNG (``os.urandom``) and a Gaussian sampler hardened
        against floating-point attacks (four Box–Muller normals summed and halved,
        as in Opacus's ``secure_mode``); slower (user guide, "Secure noise"), and
        ``random_state`` no longer reproduces the fit. The accounting, and so
        ``epsilon_``, is the same.
    store_iterates : bool, default=False
        Keep every iterate ``θ_t`` of the private phase in ``iterates_``
        (``steps_ × (n_features + 1) × n_outputs`` floats), which
        :meth:`per_instance_epsilon` needs. The iterates are post-processing
        of the noisy steps, covered by ``epsilon_`` like ``coef_``.
    verbose : int, default=0
        Print the number of steps and the ε spent.
    [[classes]]

    Attributes
    ----------
    [[linear_classifier_attributes]]
    pretrained_coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Weights ``w_ref`` after public pretraining (the public-only model).
    pretrained_intercept_ : ndarray of shape (1,) or (n_classes,)
    n_public_ : int
        Number of public records (``public_mask`` True).
    n_private_ : int
        Number of private records.
    projection_ : bool
        Whether projection ran (False when there were no public records).
    adaptive_clipping_ : bool
        Whether adaptive clipping ran.
    [[epsilon_]]
    [[delta_]]
    noise_multiplier_ : float
        σ used.
    [[steps_]]
    [[n_iter_]]
    learning_rate_ : float
        Step size of the private phase (λ for ``variant="theory"``'s
        ``2 / (λ (t + 1))``).
    accountant_ : str
        ``"pld"``: dp-accounting's privacy-loss-distribution accountant.
    dp_event_ : dp_accounting.DpEvent
        ``SelfComposedDpEvent(GaussianDpEvent(σ), T)``, for re-accounting.
    [[privacy_plan_]]
    clip_thresholds_ : ndarray of shape (``steps_``,)
        ``τ_t`` of every step (depends on public data and iterates only).
    subspace_dims_ : ndarray of shape (``steps_``,)
        Dimension of the subspace the noise lived in at every step (depends
        on public data and iterates only).
    iterates_ : ndarray of shape (``steps_``, n_features + fit_intercept, n_outputs)
        With ``store_iterates=True`` only: the iterate ``θ_t`` at which step
        ``t``'s gradients were taken (``iterates_[t, :n_features].T`` is a
        ``coef_``, row ``n_features`` the intercept; ``n_outputs`` is 1 for
        binary problems). Post-processing of the noisy steps.

    See Also
    --------
    DPSGDClassifier : DP-SGD when no record is public.

    Notes
    -----
    Privacy: unit = one private record (features and label); relation
    add/remove of a private record; public records (``public_mask`` True)
    are not protected, and which records are public is itself public. Each
    step releases the clipped (projected) private sum plus
    ``N(0, σ² τ_t² I)``: a Gaussian mechanism of sensitivity ``τ_t`` and
    noise multiplier σ whatever ``τ_t`` and ``U_t`` are, because both are
    functions of public records and of the released previous iterate. The
    ``T`` steps compose to μ-GDP with ``μ = sqrt(T) / σ`` (supplement,
    Lemma 8); ``epsilon_`` is dp-accounting's PLD value for ``T``
    self-composed Gaussian mechanisms (it agrees with the exact GDP
    conversion to about 1e-9). Treated as public: the numbers of public and
    private records, the class labels (``classes_``: read from ``y`` unless
    ``classes`` is given) and the hyperparameters. ``public_mask=None`` means no record is public: the fit
    then falls back to NoisyGD (``projection_`` and ``adaptive_clipping_``
    False, ``w_ref = 0``, clip at ``max_grad_norm``). Every fitted attribute
    is a function of the public records and the noisy steps: nothing computed
    from the private records in the clear is stored (the per-instance report,
    :meth:`per_instance_epsilon`, is computed on request and not kept).

    References
    ----------
    Golatkar, Achille, Wang, Roth, Kearns, Soatto, "Mixed Differential
    Privacy in Computer Vision", CVPR 2022 (AdaMix), and its supplement.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.preprocessing import Normalizer
    >>> from sklearn_fdp import AdaMixClassifier
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> X = Normalizer().fit_transform(X)
    >>> public = np.zeros(len(y), dtype=bool)
    >>> public[:40] = True
    >>> clf = AdaMixClassifier(epsilon=1.0, random_state=0, store_iterates=True)
    >>> bool(clf.fit(X, y, public_mask=public).epsilon_ <= 1.0)
    True
    >>> clf.per_instance_epsilon(X, y, public_mask=public).shape  # ex post, not released
    (1960,)
    """

    _parameter_constraints: dict = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": DELTA_CONSTRAINT,
        "noise_multiplier": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "subspace_dim": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "clip_percentile": [Interval(Real, 0, 100, closed="right")],
        "l2_regularization": [Interval(Real, 0, None, closed="left")],
        "public_epochs": [Interval(Integral, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "projection": ["boolean"],
        "subspace": [StrOptions({"feature", "gradient"})],
        "adaptive_clipping": ["boolean"],
        "max_grad_norm": [Interval(Real, 0, None, closed="neither")],
        "average": ["boolean"],
        "variant": [StrOptions({"practical", "theory"})],
        "fit_intercept": ["boolean"],
        "random_state": ["random_state"],
        "noise": [StrOptions(set(NOISE_OPTIONS))],
        "store_iterates": ["boolean"],
        "verbose": ["verbose"],
        "classes": ["array-like", None],
    }

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        noise_multiplier: float | Literal["auto"] = "auto",
        subspace_dim: int | Literal["auto"] = "auto",
        clip_percentile: float = 90.0,
        l2_regularization: float = 1e-4,
        public_epochs: int = 200,
        learning_rate: float | Literal["auto"] = "auto",
        projection: bool = True,
        subspace: Literal["feature", "gradient"] = "feature",
        adaptive_clipping: bool = True,
        max_grad_norm: float = 1.0,
        average: bool = True,
        variant: Literal["practical", "theory"] = "practical",
        fit_intercept: bool = True,
        random_state: RandomStateLike = None,
        noise: Literal["default", "secure"] = "default",
        store_iterates: bool = False,
        verbose: int = 0,
        classes: ArrayLike | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.subspace_dim = subspace_dim
        self.clip_percentile = clip_percentile
        self.l2_regularization = l2_regularization
        self.public_epochs = public_epochs
        self.learning_rate = learning_rate
        self.projection = projection
        self.subspace = subspace
        self.adaptive_clipping = adaptive_clipping
        self.max_grad_norm = max_grad_norm
        self.average = average
        self.variant = variant
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.noise = noise
        self.store_iterates = store_iterates
        self.verbose = verbose
        self.classes = classes

    # -- fit -----------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X: MatrixLike, y: ArrayLike, public_mask: ArrayLike | None = None) -> Self:
        """Pretrain on the public records, then run noisy GD on all of them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (public and private records). Rows should have a
            data-independent L2 bound (e.g. scaled to norm ≤ 1).
        y : array-like of shape (n_samples,)
            Class labels.
        public_mask : array-like of bool of shape (n_samples,), default=None
            True for public records (no protection; used for pretraining,
            the subspace and the clip threshold), False for private ones.
            Route it through a Pipeline or GridSearchCV with
            ``set_fit_request(public_mask=True)`` (metadata routing), so it is
            split together with ``X``. None: every record is private and the
            fit falls back to NoisyGD (see Notes).

        Returns
        -------
        self : AdaMixClassifier
        """
        name = type(self).__name__
        X, y = _validated(self, X, y, reset=True)
        classes, y_index = encode_labels(self, y, self.classes)
        mask = self._public_mask(public_mask, X.shape[0])
        n_public = int(mask.sum())
        params = self.get_params()
        variant = adamix.VARIANTS[self.variant]  # the one switch on `variant`
        variant.check(params, None if public_mask is None else mask, name)
        check_delta_vs_n(self.delta, X.shape[0] - n_public, name, stacklevel=4)
        plan = self.privacy_plan(*X.shape, n_public=n_public)
        release, event = adamix.train(
            X, y_index, mask, n_outputs_of(classes), variant=variant,
            steps=plan.details["steps"], noise_multiplier=plan.noise_multiplier,
            params=params, name=name,
        )
        if self.verbose:
            print(f"[{name}] {plan.details['steps']} noisy steps, ε spent {plan.epsilon:.4g} "
                  f"(δ={self.delta:g}); {n_public} public / {X.shape[0] - n_public} private "
                  "records", file=sys.stdout, flush=True)
        self._store(classes, release, event, plan)
        return self

    def _store(self, classes, release, event, plan):
        """Set every fitted attribute from the mechanism's release and the fit's plan."""
        if repr(event) != repr(plan.dp_event):  # pragma: no cover - one source of truth
            raise RuntimeError(f"{type(self).__name__}: the run spent {event!r}, the plan "
                               f"said {plan.dp_event!r} (internal error).")
        theta, theta_ref = release.theta, release.theta_ref
        n_features, n_outputs = theta.shape[0] - int(self.fit_intercept), theta.shape[1]
        details = plan.details
        self.classes_ = classes
        self.coef_ = np.ascontiguousarray(theta[:n_features].T)
        self.intercept_ = theta[n_features].copy() if self.fit_intercept else np.zeros(n_outputs)
        self.pretrained_coef_ = np.ascontiguousarray(theta_ref[:n_features].T)
        self.pretrained_intercept_ = (theta_ref[n_features].copy() if self.fit_intercept
                                      else np.zeros(n_outputs))
        self.n_public_ = details["n_public"]
        self.n_private_ = details["n_private"]
        self.projection_ = release.projection
        self.adaptive_clipping_ = release.adaptive_clipping
        self.n_iter_ = details["steps"]
        self.steps_ = details["steps"]
        self.learning_rate_ = release.learning_rate
        self.noise_multiplier_ = plan.noise_multiplier
        self.dp_event_ = event
        self.epsilon_ = plan.epsilon
        self.delta_ = plan.delta
        self.accountant_ = plan.accountant
        self.clip_thresholds_ = release.clip_thresholds
        self.subspace_dims_ = release.subspace_dims
        self.privacy_plan_ = plan
        # Nothing per private record is kept (issue 16 item 6): drop what an
        # earlier fit, or a model pickled by an older version, may carry.
        for stale in [a for a in vars(self) if a.startswith("per_instance")] + ["iterates_"]:
            self.__dict__.pop(stale, None)
        if self.store_iterates:
            self.iterates_ = release.iterates

    def privacy_plan(self, n_samples: int, n_features: int, *, n_public: int = 0,
                     feature_names: ArrayLike | None = None) -> PrivacyPlan:
        """What a fit on ``n_samples`` × ``n_features`` data spends and protects.

        Computed from public quantities only (the shape, the number of public
        records and the parameters): the number of noisy steps ``T`` is the
        largest whose composition spends at most ``epsilon``. ``fit`` runs
        with the ``T`` and σ it holds and stores it as ``privacy_plan_``.

        Parameters
        ----------
        n_samples : int
            Number of training rows (public and private).
        n_features : int
            Number of input columns.
        n_public : int, default=0
            Number of public rows (``public_mask.sum()``).
        feature_names : array-like of str or None, default=None
            Column names (unused: AdaMix protects whole private records).

        Returns
        -------
        plan : PrivacyPlan
            ``unit="private records"``; ``details`` holds ``steps`` (``T``),
            ``n_public`` and ``n_private``.
        """
        name = type(self).__name__
        if self.epsilon is None:
            raise ValueError(
                f"{name} needs a float epsilon: it calibrates its number of noisy steps T "
                "to epsilon (for its given noise_multiplier), so epsilon=None is not "
                "supported. Set epsilon to the budget of one fit."
            )
        auto = isinstance(self.noise_multiplier, str)  # "auto"
        sigma = (adamix.auto_noise_multiplier(self.epsilon, self.delta) if auto
                 else float(self.noise_multiplier))
        n_public, n_private = int(n_public), int(n_samples) - int(n_public)
        steps, spent = adamix.calibrate_steps(
            sigma, self.epsilon, self.delta, name,
            max_steps=adamix.AUTO_MAX_STEPS if auto else None)
        return PrivacyPlan(
            dp_event=adamix.steps_event(sigma, steps), epsilon=spent, delta=float(self.delta),
            accountant="pld", unit="private records",
            description=(f"private records only (features and label of each of the "
                         f"{n_private} private rows); the {n_public} public rows are "
                         "not protected"),
            protected_features=None, label_protected=True, noise_multiplier=sigma,
            details={"steps": steps, "n_public": n_public, "n_private": n_private},
        )

    # -- helpers -------------------------------------------------------------

    def _public_mask(self, public_mask, n_samples):
        """The checked boolean ``public_mask`` (all False for None)."""
        name = type(self).__name__
        if public_mask is None:
            return np.zeros(n_samples, dtype=bool)
        mask = np.asarray(public_mask)
        if mask.dtype != bool:
            raise ValueError(
                f"`public_mask` of {name}.fit must be a boolean array (True = public "
                f"record), got dtype {mask.dtype} (first values {mask.ravel()[:5]!r}). "
                "Pass e.g. `public_mask=np.asarray(flags, dtype=bool)` or "
                "`public_mask=(source == 'public')`."
            )
        if mask.ndim != 1 or len(mask) != n_samples:
            raise ValueError(
                f"`public_mask` of {name}.fit must have one entry per row of X "
                f"({n_samples}), got shape {mask.shape}. Align it with X (in a "
                "Pipeline or GridSearchCV, request it with "
                "set_fit_request(public_mask=True) so it is split with X)."
            )
        if int(mask.sum()) == n_samples:
            raise ValueError(
                f"`public_mask` of {name}.fit marks all {n_samples} records public: "
                "nothing is private. Use a non-private estimator (e.g. "
                "sklearn.linear_model.LogisticRegression), or mark the private records False."
            )
        return mask

    # -- per-instance DP -----------------------------------------------------

    def per_instance_epsilon(self, X, y, public_mask=None, *, delta=None):
        """Ex-post per-instance ε of every private training record (supplement Prop. 14).

        Needs the fit's iterates (``store_iterates=True``) and its training
        data, passed again: ``X``, ``y`` and ``public_mask`` must be those of
        ``fit``. At every stored iterate ``θ_t`` the step's ``U_t`` and ``τ_t``
        are recomputed from the public records (and checked against
        ``clip_thresholds_`` and ``subspace_dims_``, which catches most, not
        all, mismatched data; nothing can check the private rows). Record
        ``i`` entered step ``t`` with sensitivity ``min(‖U_tᵀ g_i(θ_t)‖, τ_t)``
        against noise ``σ τ_t``, so
        ``μ_i = sqrt(Σ_t min(‖U_tᵀ g_i‖, τ_t)² / τ_t²) / σ ≤ sqrt(T) / σ``,
        and ε_i is the analytic Gaussian mechanism's ε at
        ``delta`` for μ_i (:func:`sklearn_fdp.accounting.gdp_epsilon`, capped
        at ``epsilon_`` when ``delta`` is ``delta_``).

        **This is an ex-post, trajectory-dependent figure, not a per-instance
        DP (pGDP) guarantee.** The sensitivities are evaluated along the one
        trajectory that the noise happened to produce (and that record ``i``
        itself influenced); a guarantee must hold over all trajectories, and
        only ``epsilon_`` does. The figures are also computed from the private
        records in the clear: they are **not** covered by the DP guarantee
        (a small ε_i says that record was well fit). Use them to compare
        algorithms or settings on your own data; do not publish them, and do
        not keep them on the estimator (``privacy_report`` flags any
        ``per_instance*`` attribute as a non-private release).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training data of ``fit`` (public and private records).
        y : array-like of shape (n_samples,)
            Its labels.
        public_mask : array-like of bool of shape (n_samples,), default=None
            The ``public_mask`` of ``fit``.
        delta : float or None, default=None
            δ of the per-instance figure, in (0, 1); None uses ``delta_``.

        Returns
        -------
        epsilon : ndarray of shape (``n_private_``,)
            Ex-post ε of each private record, in the order of
            ``X[~public_mask]``. Nothing is stored on the estimator.
        """
        check_is_fitted(self)
        delta = self.delta_ if delta is None else float(delta)
        mu = self._per_instance_mu(X, y, public_mask)
        mu = np.minimum(mu, math.sqrt(self.steps_) / self.noise_multiplier_)
        eps = accounting.gdp_epsilon(mu, delta)
        if delta == self.delta_:
            eps = np.minimum(eps, self.epsilon_)
        return eps

    def _per_instance_mu(self, X, y, public_mask):
        """μ_i of every private record along the stored trajectory (see per_instance_epsilon)."""
        name = type(self).__name__
        iterates = getattr(self, "iterates_", None)
        if iterates is None:
            raise ValueError(
                f"{name}.per_instance_epsilon recomputes the per-record figures along the "
                "trajectory of the fit, which this estimator did not keep. Refit with "
                "store_iterates=True (the iterates are post-processing of the noisy steps, "
                "covered by epsilon_), then pass the training data again."
            )
        X, y = _validated(self, X, y, reset=False)
        mask = self._public_mask(public_mask, len(X))
        if int(mask.sum()) != self.n_public_ or int((~mask).sum()) != self.n_private_:
            raise ValueError(
                f"{name}.per_instance_epsilon needs the training data of fit: got "
                f"{int(mask.sum())} public and {int((~mask).sum())} private records, the "
                f"fit had {self.n_public_} and {self.n_private_}."
            )
        _, y_index = encode_labels(self, y, self.classes_)
        theta_ref = np.vstack([self.pretrained_coef_.T, self.pretrained_intercept_[None, :]])
        if not self.fit_intercept:
            theta_ref = theta_ref[:-1]
        return adamix.per_instance_mu(
            X, y_index, mask, theta_ref, iterates, self.clip_thresholds_, self.subspace_dims_,
            projection=self.projection_, adaptive_clipping=self.adaptive_clipping_,
            noise_multiplier=self.noise_multiplier_, params=self.get_params(), name=name,
        )

    def plot_per_instance_epsilon(self, X, y, public_mask=None, *, delta=None, ax=None,
                                  label=None, **hist_kwargs):
        """Histogram of :meth:`per_instance_epsilon` (needs matplotlib).

        The same warnings apply: the histogram is an ex-post figure computed
        from the private data, not covered by the DP guarantee.

        Parameters
        ----------
        X, y, public_mask : array-like
            The training data of ``fit`` (see :meth:`per_instance_epsilon`).
        delta : float or None, default=None
            δ of the per-instance figure; None uses ``delta_``.
        ax : matplotlib Axes or None, default=None
            Where to draw; None creates a new figure.
        label : str or None, default=None
            Legend label; default ``"AdaMixClassifier"``.
        **hist_kwargs
            Passed to ``ax.hist`` (e.g. ``bins``, ``alpha``).

        Returns
        -------
        ax : matplotlib Axes
        """
        import matplotlib.pyplot as plt

        eps = self.per_instance_epsilon(X, y, public_mask, delta=delta)
        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3.5))
        hist_kwargs.setdefault("bins", 40)
        hist_kwargs.setdefault("alpha", 0.6)
        ax.hist(eps, label=label or type(self).__name__, **hist_kwargs)
        ax.axvline(self.epsilon_, color="k", linestyle="--", linewidth=1)
        ax.set_xlabel("per-instance ε (ex post, not a guarantee)")
        ax.set_ylabel("private records")
        return ax

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

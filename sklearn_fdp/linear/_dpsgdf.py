"""DPSGDFClassifier: DP-SGD on privately centred features (DPSGD-F)."""

from numbers import Real

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import accounting
from .._preprocessing import scale_rows
from .._validation import Interval, StrOptions, _fit_context
from ._base import BaseDPLinearClassifier

VARIANTS = ("practical", "analysed")


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

    Centring helps when the rows share a large common offset: clipping then
    no longer shrinks the small, label-carrying part of every gradient
    (DPSGD-F paper, Section 4 and
    :func:`sklearn_fdp.datasets.make_dpsgdf_counterexample`).

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
    delta : float, default=1e-5
        δ of the whole fit, in (0, 1). Keep it well below ``1 / n_samples``.
    epsilon_mean : float, default=0.05
        ε_F: what the private mean alone costs at ``delta`` (its noise
        multiplier is the analytic Gaussian one for (``epsilon_mean``,
        ``delta``)), in (0, inf). The paper found 0.02-0.05 best.
    feature_norm : float, default=1.0
        C_F: every non-zero row is scaled to this L2 norm before anything
        else, in fit and in predict; > 0. Also the sensitivity of the sum
        of the rows.
    variant : {"practical", "analysed"}, default="practical"
        ``"practical"``: Algorithm 3 (above). ``"analysed"`` (Algorithm 2:
        diameter-scaled mean, private quantile, feature clipping) is not
        implemented yet and raises ``NotImplementedError``.
    max_grad_norm : float, default=1.0
        Clip norm ``C`` of each per-example gradient, > 0.
    noise_multiplier : float or None, default=None
        σ of the gradient steps. When given, ε is computed rather than
        targeted; if ``epsilon`` is also given, ``fit`` raises
        :class:`~sklearn_fdp.exceptions.BudgetExceededError` when the fit
        would spend more than ``epsilon``.
    batch_size : int or "auto", default="auto"
        Expected Poisson batch size ``q * n``.
    epochs : float, default=10.0
        Passes over the data.
    learning_rate : float or "auto", default="auto"
        Base step size; ``"auto"`` scales it to the noise of each step.
    lr_schedule : {"constant", "cosine", "linear"}, default="cosine"
    momentum : float, default=0.9
        Heavy-ball momentum in [0, 1).
    average : bool, default=True
        Average the iterates of the second half of the run.
    l2_regularization : float, default=0.0
        Weight decay ``λ θ`` added to every step.
    fit_intercept : bool, default=True
        Fit an intercept on the *centred* rows (Algorithm 3 does). With
        False the model is ``w @ (x - mean_)``, whose intercept in the
        scaled feature space, ``-mean_ @ w``, is still reported in
        ``intercept_``.
    accountant : {"auto", "pld", "rdp"}, default="auto"
        Accountant of the composed fit (the paper uses PLD).
    neighboring : {"add_remove", "replace"}, default="add_remove"
        Under ``"replace"`` the mean's sensitivity doubles and so does its
        noise multiplier.
    random_state : int, RandomState instance or None, default=None
        Seeds the mean's noise, the batches and the gradient noise.
    verbose : int, default=0
        Print the ε of the gradient steps after every epoch (without the
        mean's share).

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Weights on the *scaled* rows ``x * feature_norm / ||x||``.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Intercept for the scaled, uncentred rows: ``b_centred - mean_ @ w``.
    classes_ : ndarray of shape (n_classes,)
    mean_ : ndarray of shape (n_features,)
        Released private mean of the scaled rows (float64).
    mean_noise_multiplier_ : float
        σ_F of the mean (noise std of the sum / its add/remove sensitivity
        ``feature_norm``).
    mean_noise_std_ : float
        Per-coordinate noise std of ``mean_``: ``σ_F * feature_norm / n``.
    epsilon_mean_ : float
        ε of the mean alone at ``delta_`` (analytic Gaussian; ≈ ``epsilon_mean``).
    feature_norm_ : float
        C_F used.
    epsilon_ : float
        ε of the whole fit (mean composed with the gradient steps) at
        ``delta_``; ≤ ``epsilon``.
    delta_ : float
    noise_multiplier_ : float
        σ of the gradient steps.
    dp_event_ : dp_accounting.DpEvent
        ``ComposedDpEvent([GaussianDpEvent(σ_F), DP-SGD event])``.
    sampling_rate_, batch_size_, learning_rate_, steps_, n_iter_, accountant_
        As in :class:`~sklearn_fdp.DPSGDClassifier`.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
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
    and ``classes_``. Dense inputs only (centring destroys sparsity).

    References
    ----------
    DPSGD-F paper ("The importance of feature preprocessing for
    differentially private linear optimization"), Algorithm 3, Appendix C.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn_fdp import DPSGDFClassifier
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> clf = DPSGDFClassifier(epsilon=1.0, delta=1e-5, random_state=0).fit(X + 5.0, y)
    >>> bool(clf.epsilon_ <= 1.0)
    True
    """

    _parameter_constraints: dict = {
        **BaseDPLinearClassifier._parameter_constraints,
        "epsilon_mean": [Interval(Real, 0, None, closed="neither")],
        "feature_norm": [Interval(Real, 0, None, closed="neither")],
        "variant": [StrOptions(set(VARIANTS))],
    }

    def __init__(
        self,
        *,
        loss="log_loss",
        epsilon=1.0,
        delta=1e-5,
        epsilon_mean=0.05,
        feature_norm=1.0,
        variant="practical",
        max_grad_norm=1.0,
        noise_multiplier=None,
        batch_size="auto",
        epochs=10.0,
        learning_rate="auto",
        lr_schedule="cosine",
        momentum=0.9,
        average=True,
        l2_regularization=0.0,
        fit_intercept=True,
        accountant="auto",
        neighboring="add_remove",
        random_state=None,
        verbose=0,
    ):
        self.loss = loss
        self.epsilon = epsilon
        self.delta = delta
        self.epsilon_mean = epsilon_mean
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
        self.verbose = verbose

    # -- hooks of BaseDPLinearClassifier -------------------------------------

    def _check_params(self, X, y):
        name = type(self).__name__
        if self.variant == "analysed":
            raise NotImplementedError(
                f"{name}: variant='analysed' (DPSGD-F Algorithm 2) is not implemented "
                "yet. Use variant='practical' (Algorithm 3)."
            )
        super()._check_params(X, y)
        if self.epsilon is not None and self.epsilon_mean >= self.epsilon:
            raise ValueError(
                f"`epsilon_mean` of {name} is {self.epsilon_mean!r} but the total "
                f"`epsilon` is {self.epsilon!r}: the mean would leave nothing for the "
                "gradient steps. Use epsilon_mean well below epsilon (e.g. 0.05 * epsilon)."
            )

    # Centring destroys sparsity: dense input only.
    _accept_sparse = False

    def _validate_training_data(self, X, y):
        X, classes, y_index = super()._validate_training_data(X, y)
        X = scale_rows(X, float(self.feature_norm), "normalize", type(self).__name__)
        return X, classes, y_index

    def _mean_noise_multiplier(self):
        """σ_F: analytic Gaussian noise multiplier of the mean for (epsilon_mean, delta)."""
        return accounting.gaussian_noise_multiplier(
            self.epsilon_mean, self.delta, neighboring=self.neighboring
        )

    def _other_events(self):
        return (accounting.gaussian_event(self._mean_noise_multiplier()),)

    def _make_oracles(self, X, y_enc, loss, public_rng):
        # The mean's noise has its own child stream, independent of the
        # batches and the gradient noise. The fitted attributes are set in
        # ``fit`` once the engine has run (a failed fit leaves none).
        (mean_rng,) = public_rng.spawn(1)
        n_samples, n_features = X.shape
        noise_std = self._mean_noise_multiplier() * float(self.feature_norm) / n_samples
        true_mean = X.sum(axis=0, dtype=np.float64) / n_samples
        self._private_mean = (true_mean + mean_rng.normal(0.0, noise_std, size=n_features),
                              noise_std)
        X_centred = np.ascontiguousarray(X - self._private_mean[0].astype(X.dtype))
        return super()._make_oracles(X_centred, y_enc, loss, public_rng)

    # -- fit / predict -------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
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
        try:
            self._fit_engine(X, y)
            mean, noise_std = self._private_mean
        finally:
            self.__dict__.pop("_private_mean", None)
        sigma_f = self._mean_noise_multiplier()
        self.mean_ = mean
        self.mean_noise_std_ = float(noise_std)
        self.mean_noise_multiplier_ = float(sigma_f)
        self.epsilon_mean_ = accounting.gaussian_epsilon(
            sigma_f, self.delta, neighboring=self.neighboring
        )
        self.feature_norm_ = float(self.feature_norm)
        shift = self.coef_.astype(np.float64) @ mean
        self.intercept_ = (self.intercept_ - shift).astype(self.coef_.dtype)
        return self

    def decision_function(self, X):
        """Scores of the linear model on the row-scaled ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        X = scale_rows(X, self.feature_norm_, "normalize", type(self).__name__)
        scores = X @ self.coef_.T + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def __sklearn_is_fitted__(self):
        # ``mean_`` is set last in ``fit``; validation alone (n_features_in_)
        # does not make the estimator fitted.
        return hasattr(self, "mean_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

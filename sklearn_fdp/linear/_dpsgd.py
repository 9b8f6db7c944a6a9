"""DPSGDClassifier: plain DP-SGD for linear classifiers."""

import numpy as np

from .._budget import calibrate_dpsgd, check_budget_params, dpsgd_schedule
from .._engine import LinearGradientOracle, LinearLoss, run_dp_sgd
from .._plan import record_plan
from .._random import spawn_generators
from .._validation import _fit_context, atomic_fit, check_delta_vs_n
from ._base import (
    _NOISE,
    _SAMPLE,
    BaseDPLinearClassifier,
    engine_config,
    epoch_printer,
    n_outputs_of,
    resolve_learning_rate,
    validate_linear_data,
)


class DPSGDClassifier(BaseDPLinearClassifier):
    """Linear classifier trained with differentially private SGD (DP-SGD).

    Each step draws a Poisson batch (every record independently with
    probability ``q = batch_size / n``), clips every per-example gradient to
    L2 norm ``max_grad_norm``, adds Gaussian noise of standard deviation
    ``noise_multiplier * max_grad_norm`` to their sum and takes a (momentum)
    step. The run is (ε, δ)-differentially private for *whole records*
    (features and label) under the add/remove relation, with ε computed by
    dp-accounting for the Poisson-subsampled Gaussian mechanism.

    Parameters
    ----------
    loss : {"log_loss", "hinge"}, default="log_loss"
        ``"log_loss"``: logistic regression (binary) or multinomial softmax.
        ``"hinge"``: the margin loss ``max(0, 1 - y z)`` of the DPSGD-F paper
        (Crammer–Singer for more than two classes); no ``predict_proba``.
    epsilon : float or None, default=1.0
        Privacy budget of one call to ``fit``, in (0, inf). The noise
        multiplier is calibrated so that the run spends at most this. May be
        None only when ``noise_multiplier`` is given.
    delta : float, default=1e-5
        δ of the guarantee, in (0, 1). Keep it well below ``1 / n_samples``
        (a warning is issued otherwise).
    max_grad_norm : float, default=1.0
        Clip norm ``C`` of each per-example gradient, > 0. With rows of norm
        at most 1 and an intercept, a logistic gradient has norm at most
        ``sqrt(2)``.
    noise_multiplier : float or None, default=None
        σ. When given, ε is computed rather than targeted; if ``epsilon`` is
        also given, ``fit`` raises :class:`BudgetExceededError` when the
        run would spend more than ``epsilon``.
    batch_size : int or "auto", default="auto"
        Expected Poisson batch size ``q * n``. ``"auto"`` uses
        ``clip(round(8 * sqrt(n)), 64, 4096)``.
    epochs : float, default=10.0
        Passes over the data; the number of steps is
        ``ceil(epochs * n / batch_size)``.
    learning_rate : float or "auto", default="auto"
        Base step size. ``"auto"`` scales it to the noise of each step:
        ``min(4 k^0.3, sqrt(k) 0.005 B^1.5 / (σ C sqrt(d + 1)))`` for ``d``
        features, ``k`` output columns (1 if binary), clip ``C``, expected
        batch ``B`` (a rule fitted on a validation split of Adult; see
        ``benchmarks/bench_adult.py``).
    lr_schedule : {"constant", "cosine", "linear"}, default="cosine"
        Decay of the step size over the run.
    momentum : float, default=0.9
        Heavy-ball momentum in [0, 1). For wide sparse (CSR) data use 0: with
        ``momentum=0`` and ``l2_regularization=0`` the noise of coordinates a
        batch does not touch is drawn lazily and exactly (see the user
        guide, "Lazy noise"), so a step costs its non-zeros instead of ``d``
        Gaussian draws.
    average : bool, default=True
        Return the average of the iterates of the second half of the run
        (post-processing: free) instead of the last one.
    l2_regularization : float, default=0.0
        Weight decay ``λ θ`` added to every step.
    fit_intercept : bool, default=True
        Fit an intercept; it is part of every per-example gradient and hence
        clipped and noised with it.
    accountant : {"auto", "pld", "rdp"}, default="auto"
        dp-accounting's accountant. ``"pld"`` (privacy-loss distributions) is
        the tightest: 5-8 % less noise than ``"rdp"`` for the same ε, but
        slow to evaluate for large ε. ``"auto"`` uses PLD for ``epsilon <= 2``
        (and for ``neighboring="replace"``) and RDP above.
    neighboring : {"add_remove", "replace"}, default="add_remove"
        Neighbouring relation of the guarantee. ``"replace"`` needs PLD
        (``accountant="pld"`` or ``"auto"``).
    random_state : int, RandomState instance or None, default=None
        Seeds the batches and the noise; a fixed value reproduces ``coef_``.
    noise : {"default", "secure"}, default="default"
        Source of the randomness privacy rests on: the Poisson batch coins and the
        Gaussian noise of the steps. ``"default"``: NumPy PCG64 streams spawned
        from ``random_state`` (reproducible). ``"secure"``: fresh bits from the OS
        CSPRNG (``os.urandom``) and a Gaussian sampler hardened against
        floating-point attacks (four Box–Muller normals summed and halved, as in
        Opacus's ``secure_mode``); slower (user guide, "Secure noise"), and
        ``random_state`` no longer reproduces the fit. The accounting, and so
        ``epsilon_``, is the same.
    verbose : int, default=0
        Print the ε spent after every epoch.
    classes : array-like of shape (n_classes,) or None, default=None
        Every label the task can have, a public list chosen without looking
        at ``y``; ``classes_`` is then this list (sorted) whatever ``y``
        holds, and a label of ``y`` outside it raises ``ValueError``. None:
        ``classes_`` is read from ``y`` and is not private (a label seen
        once, or missing, shows in it); give ``classes`` whenever the label
        is protected and some class may be rare.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` has string column names.
    epsilon_ : float
        ε the run actually spent at ``delta_`` (≤ ``epsilon``).
    delta_ : float
    noise_multiplier_ : float
        σ used (calibrated or given).
    sampling_rate_ : float
        Poisson rate ``q = batch_size_ / n_samples``.
    batch_size_ : int
        Expected batch size used.
    learning_rate_ : float
        Step size used.
    steps_ : int
        Number of noisy steps.
    n_iter_ : int
        Same as ``steps_``.
    accountant_ : str
        Accountant that computed ``noise_multiplier_`` and ``epsilon_``.
    dp_event_ : dp_accounting.DpEvent
        The mechanism run by ``fit``, for re-accounting (e.g. at another δ).

    Notes
    -----
    Privacy: unit = one record (all features and the label); neighbouring
    relation add/remove by default; per-example clipping to
    ``max_grad_norm``; ε by dp-accounting's RDP (or PLD) accountant for a
    self-composed Poisson-subsampled Gaussian. The noisy sum is divided by
    the expected batch size ``q n``, never the realised one. Treated as
    public: the number of rows ``n`` and the set of class labels
    (``classes_``): pass ``classes`` to make that true, otherwise
    ``classes_`` is read from ``y`` without noise (a label held by a single
    record reveals that record's label). All other hyperparameters must be chosen without looking
    at the private data, or the choice must itself be accounted for (see
    ``sklearn_fdp.accounting``).

    References
    ----------
    Abadi et al., "Deep Learning with Differential Privacy", CCS 2016.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.preprocessing import Normalizer
    >>> from sklearn_fdp import DPSGDClassifier
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> X = Normalizer().fit_transform(X)
    >>> clf = DPSGDClassifier(epsilon=1.0, delta=1e-5, random_state=0).fit(X, y)
    >>> bool(clf.epsilon_ <= 1.0)
    True
    """

    def __init__(
        self,
        *,
        loss="log_loss",
        epsilon=1.0,
        delta=1e-5,
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
        noise="default",
        verbose=0,
        classes=None,
    ):
        self.loss = loss
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
        self.classes = classes

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X, y):
        """Fit the model with DP-SGD.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data. Rows should have a data-independent L2 bound
            (e.g. scaled to norm ≤ 1); clipping bounds each gradient anyway.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : DPSGDClassifier
        """
        X, classes, y_index = validate_linear_data(self, X, y)
        n_samples, n_features = X.shape
        check_delta_vs_n(self.delta, n_samples, type(self).__name__)
        plan = self.privacy_plan(n_samples, n_features)
        n_outputs = n_outputs_of(classes)
        loss = LinearLoss(self.loss, n_outputs)
        # noise="secure": the batch coins and the noise come from the OS CSPRNG.
        gens = spawn_generators(self.random_state, 4, noise=self.noise,
                                private_streams=(_SAMPLE, _NOISE))
        clip = float(self.max_grad_norm)
        oracle = LinearGradientOracle(X, loss.encode(y_index), loss, self.fit_intercept, clip)
        n_rows = n_features + int(self.fit_intercept)
        learning_rate = resolve_learning_rate(self, plan.noise_multiplier * clip,
                                              plan.schedule, n_rows, n_outputs)
        result = run_dp_sgd(
            np.zeros((n_rows, n_outputs), dtype=X.dtype), oracle, n_samples,
            engine_config(self, plan, clip, learning_rate),
            sample_rng=gens[_SAMPLE], noise_rng=gens[_NOISE], callback=epoch_printer(self, plan),
        )
        self._store_linear(result.theta, classes, X.dtype, plan, learning_rate)
        return self

    def privacy_plan(self, n_samples, n_features, *, feature_names=None):
        """What a fit on ``n_samples`` × ``n_features`` data spends and protects.

        Computed from public quantities only (the shape and the parameters);
        ``fit`` runs with the σ it holds and stores it as ``privacy_plan_``.

        Parameters
        ----------
        n_samples : int
            Number of training rows.
        n_features : int
            Number of input columns.
        feature_names : array-like of str or None, default=None
            Column names (unused: DP-SGD protects whole records).

        Returns
        -------
        plan : PrivacyPlan
        """
        check_budget_params(self)
        schedule = dpsgd_schedule(self, n_samples)
        sigma, event, spent, accountant = calibrate_dpsgd(self, schedule.sampling_rate,
                                                          schedule.steps)
        return record_plan(event, spent, float(self.delta), accountant,
                           noise_multiplier=sigma, schedule=schedule)

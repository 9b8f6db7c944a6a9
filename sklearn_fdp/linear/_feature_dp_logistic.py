"""FeatureDPLogisticRegression: logistic regression with feature DP (FDP Alg. 1)."""

import math
import sys
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from .._engine import EngineConfig, LinearLoss, run_dp_sgd
from .._engine._feature_dp import (
    PUBLIC_LOSSES,
    FeatureDPPrivateOracle,
    FeatureDPPublicOracle,
    column_subset_squared_norms,
    label_prior,
)
from .._engine._linear import squared_row_norms
from .._engine._statistic import minimise_label_free_objective, release_private_sum
from .._progress import progress_reporter
from .._outofcore import RowSource, is_row_source
from .._random import secure_if, spawn_generators
from .._validation import Interval, StrOptions, _fit_context, atomic_fit
from ..features import check_label_in_spec, resolve_feature_spec, spec_feature_names
from ._base import _NOISE, _SAMPLE, BaseDPLinearClassifier

METHODS = ("auto", "alg1", "dpsgd", "sufficient_statistic")
# method="sufficient_statistic": least ridge, in units of the released
# term's noise per coordinate (α σ C / n).
_STATISTIC_RIDGE = 0.3

# max_grad_norm="auto" for method="alg1". Rows of norm <= 1 give private
# remainders ∇ℓ − ∇ℓ_pub mostly well below DP-SGD's whole-gradient clip of 1.
# Chosen among {0.3, 0.5, 1} (10 epochs, other settings default) by the
# smallest worst-case loss in validation accuracy on two data sets, never on
# a test set: adult.data, protected attributes private, 5-fold CV at
# ε ∈ {0.01, ..., 1} — 0.5 within 0.2 points of the best everywhere (0.3 lost
# 0.3 at ε = 1 by clipping bias, 1 lost up to 1 point at small ε); and the
# Purchase-like data (validation split of the training part) at ε ∈ {1, 2,
# 4, 8} — 0.5 lost 5.5 points at ε = 1 and ≤ 0.4 elsewhere, 0.3 up to 6.9,
# 1 up to 11.6.
_AUTO_CLIP_ALG1 = 0.5
# Step size of the noise-free public pretraining when learning_rate="auto":
# the value the "auto" rule takes once noise is negligible.
_PRETRAIN_AUTO_LR = 4.0


# Public row norms up to 1 + this count as 1 in `public_scale`: rows scaled
# to norm 1 (e.g. by a Normalizer) round to 1 plus a few ulp, and must keep
# their fit bit for bit.
_PUBLIC_NORM_SLACK = 1e-6


def public_scale(X, public_mask):
    """What ``X`` is divided by before public steps: ``max_i ‖x_i,pub‖`` if above 1, else 1.

    The public gradient (``∇ℓ_pub`` of Algorithm 1, public pretraining) is
    not clipped, and the step size rules assume rows of norm at most 1;
    beyond that the public steps overshoot and swamp the clipped private
    remainder (issue 22 item 5: X * 1000 trained a chance-level model). The
    factor reads the public columns only (public by declaration), so the
    rescaling costs no privacy; it is 1, and nothing changes, when every
    public row has norm at most 1.
    """
    cols = np.flatnonzero(public_mask)
    if len(cols) == 0:
        return 1.0
    largest = math.sqrt(float(column_subset_squared_norms(X, cols).max()))
    return largest if largest > 1.0 + _PUBLIC_NORM_SLACK else 1.0


class _ScaledRowSource(RowSource):
    """An out-of-core :class:`RowSource` divided by ``factor``, row block by row block."""

    def __init__(self, source, factor):
        super().__init__(source, source.dtype)
        self.factor = self.dtype.type(factor)

    def _read_rows(self, idx):
        return self.data.gather(idx) / self.factor

    def _read_slice(self, start, stop):
        block = np.asarray(self.data._read_slice(start, stop), dtype=self.dtype)
        return block / self.factor

    def release(self):
        self.data.release()


def _divide(X, factor):
    """``X / factor`` in ``X``'s dtype and format (dense, CSR or out-of-core), a new object."""
    if is_row_source(X):
        return _ScaledRowSource(X, factor)
    factor = X.dtype.type(factor)
    if sp.issparse(X):
        out = X.copy()
        out.data /= factor
        return out
    return X / factor


def _auto_alpha(noise_std, batch_size, n_rows):
    """Default α: ``min(1, 0.05 / nu)`` with ``nu = σ C sqrt(d + 1) / B``.

    ``nu`` is the norm of the noise in one output column of one normalised
    private gradient (``d + 1`` rows with the intercept). On a validation
    split of adult.data (protected attributes private, label public; never
    adult.test) the best α over {0.01, 0.03, 0.1, 0.3, 1} was 0.1 at
    ε = 0.03 (nu ≈ 0.49), 0.3 at ε = 0.1 (nu ≈ 0.16) and 1 for ε ≥ 0.3
    (nu ≤ 0.06): about ``0.05 / nu``, capped at the unbiased 1. Measuring
    the noise per output column (not over all ``k`` columns) keeps that
    rule for many classes: on a validation split of the 100-class
    Purchase-like data it moved α from 0.06 / 0.2 to 0.55 / 1 at ε = 1 / 8
    and validation accuracy from 0.45 / 0.64 to 0.46 / 0.80.
    """
    nu = noise_std * math.sqrt(n_rows) / batch_size
    return float(min(1.0, 0.05 / nu)) if nu > 0 else 1.0


class FeatureDPLogisticRegression(BaseDPLinearClassifier):
    """Logistic regression with feature differential privacy (FDP Algorithm 1).

    Some columns of ``X`` (and optionally the label) are public: they may
    leak, while the *private* columns of every record are protected. The
    log loss is split as ``ℓ = (ℓ − ℓ_pub) + ℓ_pub`` where ``ℓ_pub`` sees only
    the public part of a record. Each step clips and noises the per-example
    gradients of ``ℓ − ℓ_pub`` on a Poisson batch, exactly as DP-SGD does, and
    adds the noise-free mean gradient of ``ℓ_pub`` on a second, independent
    uniform batch. The run is (ε, δ)-feature-DP (FDP paper, Thm. 5): replacing
    the private part of one record (or adding/removing a record whose public
    part is known) changes the model's distribution by at most (ε, δ), with ε
    accounted as for DP-SGD with the same noise, sampling rate and steps.

    Parameters
    ----------
    public_features : spec or None, default=None
        Columns that are public, as column indices, a boolean mask, column
        names or a callable ``name -> bool`` (see
        :func:`sklearn_fdp.features.resolve_feature_spec`; an original column
        name such as ``"sex"`` also selects its one-hot outputs
        ``"cat__sex_Male"``, ..., but not a different column ``"sex_ratio"``
        when the original column names are known, as inside
        :class:`~sklearn_fdp.pipeline.PrivatePipeline`). Give exactly one of
        ``public_features`` and ``private_features``.
    private_features : spec or None, default=None
        Columns to protect; every other column is public.
    label_public : bool, default=False
        Whether the label is public. If False (the default) the label is
        protected and ``ℓ_pub`` is the label-free loss whose gradient is
        ``x~_pub pᵀ`` with ``p = softmax(θᵀ x~_pub)``; with every feature
        public this is label DP (the paper's logistic-regression case study,
        where ``∇(ℓ − ℓ_pub) = −x~ e_yᵀ``). If True, ``ℓ_pub(θ; x, y) =
        ℓ(θ; x_pub, y)``.
    public_loss : {"mask", "gaussian_pad"}, default="mask"
        Public view ``x_pub`` of a record: private columns set to 0
        (``"mask"``) or replaced by fresh N(0, 1) draws at every step
        (``"gaussian_pad"``, the Purchase100 construction of §6.2).
    method : {"auto", "alg1", "dpsgd", "sufficient_statistic"}, default="auto"
        ``"alg1"``: FDP Algorithm 1 as above. ``"dpsgd"``: the paper's
        "FDP (DP-SGD)" (§6.3): ``public_epochs`` of public pretraining on
        ``ℓ_pub``, then plain DP-SGD on the full loss (``alpha`` and
        ``public_batch_size`` are then used by the pretraining only).
        ``"sufficient_statistic"`` (label DP only: every feature public, the
        label private): Algorithm 1's private gradient ``x~ (π − e_y)ᵀ``
        does not depend on θ, so its clipped sum over all records is
        released once with the Gaussian mechanism and the model minimises
        the label-free public loss plus the released linear term (L-BFGS;
        post-processing; ``steps_ = 1``, ``sampling_rate_ = 1``,
        ``n_iter_`` the L-BFGS iterations, ``learning_rate_`` NaN; the
        SGD settings are unused). ``"auto"``: ``"sufficient_statistic"`` in
        that case, ``"alg1"`` otherwise. ``method_`` records the choice.
    alpha : float or "auto", default="auto"
        Weight of the noisy private gradient: ``g = g_pub + alpha * g_priv``
        (post-processing; any value in (0, inf) keeps the guarantee). Below 1
        it trades bias (towards the public model) for less noise.
        ``"auto"``: ``min(1, 0.05 B / (σ C sqrt(d + 1)))`` — 1 when the noise
        of a step is small, smaller as it grows (a rule fitted on a
        validation split of adult.data; see ``_auto_alpha``).
    public_batch_size : int, "auto" or "full", default="auto"
        Size ``m'`` of the uniform public batch. ``"auto"``: the expected
        private batch size ``batch_size_``; ``"full"``: all ``n`` rows (the
        paper's ``m' = n`` setting of Thm. 6).
    public_epochs : float or "auto", default="auto"
        Public pretraining before the private run (free: Remark 2).
        ``"auto"``: start from the exact minimiser of the masked public loss
        (a non-private LogisticRegression on the public columns and the
        public label) when ``label_public=True``, from zero otherwise (the
        label-free ``ℓ_pub`` has no minimiser). A number: that many passes
        of noise-free SGD on ``ℓ_pub`` (needs ``label_public=True``; step
        size ``learning_rate``, or 4 when it is ``"auto"``).
    epsilon : float or None, default=1.0
        Privacy budget of one call to ``fit``, in (0, inf). The noise
        multiplier is calibrated so that the run spends at most this. May be
        None only when ``noise_multiplier`` is given.
    delta : float, default=1e-5
        δ of the guarantee, in (0, 1). Keep it well below ``1 / n_samples``
        (a warning is issued otherwise).
    max_grad_norm : float or "auto", default="auto"
        Clip norm ``C`` of each per-example private gradient, > 0. With rows
        of norm at most 1 and an intercept, a logistic gradient has norm at
        most ``sqrt(2)``. ``"auto"``: 0.5 for ``method="alg1"``, whose private
        part ``∇ℓ − ∇ℓ_pub`` is mostly much smaller than a whole gradient
        (chosen by validation on adult.data and the Purchase-like data; see
        ``_AUTO_CLIP_ALG1``), and 1 (DP-SGD's default) for ``"dpsgd"`` and
        ``"sufficient_statistic"``. ``max_grad_norm_`` records the value used.
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
        Heavy-ball momentum in [0, 1).
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
        Opacus's ``secure_mode``) — and, with ``public_loss="gaussian_pad"``,
        the padding of the private batch's ``ℓ_pub`` term, which enters the
        private sum; slower (user guide, "Secure noise"), and ``random_state``
        no longer reproduces the fit (it still seeds the public batches, their
        padding and the pretraining). The accounting, and so ``epsilon_``, is
        the same.
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
    feature_names_ : ndarray of str of shape (n_features_in_,) or None
        Column names the feature specs were resolved against:
        ``feature_names_in_``, else the ``feature_names`` passed to ``fit``
        (as :class:`~sklearn_fdp.pipeline.PrivatePipeline` does), else None.
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
    public_mask_ : ndarray of bool of shape (n_features_in_,)
        Which columns were treated as public.
    public_features_ : ndarray of int
        Indices of the public columns.
    private_features_ : ndarray of int
        Indices of the protected columns.
    label_public_ : bool
        Whether the label was treated as public.
    alpha_ : float
        α used (1 for ``method="dpsgd"``).
    method_ : str
        The method run (``"auto"`` resolved).
    max_grad_norm_ : float
        Clip norm used: ``max_grad_norm`` (``"auto"`` resolved), or for
        ``method_="sufficient_statistic"`` the smaller of it and the largest
        norm a record's private term can have (computed from the public
        features: ``max ‖x~‖`` times 1/2, or ``sqrt(1 − 1/K)`` for K classes).
    l2_regularization_ : float
        Ridge used: ``l2_regularization``, or for
        ``method_="sufficient_statistic"`` at least ``0.3 α σ C / n`` (the
        released term's noise per coordinate, scaled), which keeps the
        minimiser finite.
    public_batch_size_ : int
        Size of the uniform public batches used.
    public_scale_ : float
        ``max_i ‖x_i,pub‖``, the largest norm of a row's public columns, if
        it exceeds 1 (by more than 1e-6, rounding) and the fit takes public
        gradient steps (``method_="alg1"`` or ``public_epochs > 0``); else 1.
        Those steps are not clipped and the step-size rules assume rows of
        norm ≤ 1, so ``fit`` trains on ``X / public_scale_`` (every column)
        and divides the learned ``coef_`` by it; ``learning_rate_`` and
        ``max_grad_norm_`` apply to the rescaled problem. It reads the public
        columns only: no privacy cost. 1, and the fit unchanged, when public
        rows have norm ≤ 1.

    Notes
    -----
    Privacy: unit = the private columns of one record (and its label unless
    ``label_public``), feature DP relative to the public part Ψ(x) (FDP
    paper, Def. 5 for ``neighboring="replace"``, the simulation-based
    Def. 6 for ``"add_remove"``). Per-example clipping of ``∇ℓ − ∇ℓ_pub`` to
    ``max_grad_norm``; ε by dp-accounting for the self-composed
    Poisson-subsampled Gaussian (Thm. 5), identical to
    :class:`DPSGDClassifier`'s for the same (σ, q, T). The public batches,
    their Gaussian padding and the padding of the private batch's ``ℓ_pub``
    term use generators of their own, never the Poisson sampler's (Prop. 3:
    sharing its coins would void amplification by subsampling); the last
    is a private stream (secret like the noise: from the OS CSPRNG with
    ``noise="secure"``). Public
    pretraining reads only public data (Remark 2). NOT protected: the
    public columns, the label when ``label_public=True``, ``n``, the set of
    classes (``classes_``: with a protected label pass ``classes``, otherwise
    it is read from ``y`` without noise and a label held by a single record
    shows in it). Feature DP does not hide whether a record is in the data (its
    public part is assumed known); use :class:`DPSGDClassifier` for
    membership privacy. Declaring a column public that is not leaked
    anyway weakens the protection of the rest through correlations.

    See Also
    --------
    DPSGDClassifier : DP-SGD protecting whole records.

    References
    ----------
    Mahloujifar, Guo et al., "Machine Learning with Privacy for Protected
    Attributes": §5 (Algorithm 1, Thm. 5, Prop. 3, Remark 2, the label-DP
    logistic-regression case study) and §6.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.preprocessing import Normalizer
    >>> from sklearn_fdp import FeatureDPLogisticRegression
    >>> X, y = make_classification(n_samples=2000, n_features=6, random_state=0)
    >>> X = Normalizer().fit_transform(X)
    >>> clf = FeatureDPLogisticRegression(private_features=[0, 1], label_public=True,
    ...                                   epsilon=1.0, random_state=0).fit(X, y)
    >>> clf.private_features_.tolist(), bool(clf.epsilon_ <= 1.0)
    ([0, 1], True)
    """

    _parameter_constraints: dict = {
        **{k: v for k, v in BaseDPLinearClassifier._parameter_constraints.items()
           if k != "loss"},
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
        public_features=None,
        private_features=None,
        label_public=False,
        public_loss="mask",
        method="auto",
        alpha="auto",
        public_batch_size="auto",
        public_epochs="auto",
        epsilon=1.0,
        delta=1e-5,
        max_grad_norm="auto",
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
        self.public_features = public_features
        self.private_features = private_features
        self.label_public = label_public
        self.public_loss = public_loss
        self.method = method
        self.alpha = alpha
        self.public_batch_size = public_batch_size
        self.public_epochs = public_epochs
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

    # -- hooks of BaseDPLinearClassifier -------------------------------------

    def _loss_name(self):
        return "log_loss"

    def _check_params(self, X, y):
        super()._check_params(X, y)
        check_label_in_spec(self, X, y)
        if self.public_epochs != "auto" and self.public_epochs > 0 and not self.label_public:
            raise ValueError(
                f"public_epochs={self.public_epochs!r} of {type(self).__name__} needs "
                "label_public=True: with a private label the public loss is label-free "
                "(its gradient x pᵀ pushes every score down) and pretraining on it "
                "alone has no minimiser. Set public_epochs=0 or label_public=True."
            )

    def _setup_fit(self, X, batch_size):
        n_samples, n_features = X.shape
        name = type(self).__name__
        # fit stored its `feature_names` argument here; resolve it against X.
        self.feature_names_ = spec_feature_names(self, n_features, self.feature_names_)
        self.public_mask_ = resolve_feature_spec(
            self.public_features,
            self.private_features,
            n_features,
            self.feature_names_,
            name,
            label_public=self.label_public,
        )
        self.public_features_ = np.flatnonzero(self.public_mask_)
        self.private_features_ = np.flatnonzero(~self.public_mask_)
        self.label_public_ = bool(self.label_public)
        label_dp_only = not self.label_public and bool(self.public_mask_.all())
        if self.method == "auto":
            self.method_ = "sufficient_statistic" if label_dp_only else "alg1"
        elif self.method == "sufficient_statistic" and not label_dp_only:
            raise ValueError(
                f"method='sufficient_statistic' of {name} is for label DP: every feature "
                "public and label_public=False (only then is the private part of the "
                f"gradient free of θ). Got {len(self.private_features_)} private column(s) "
                f"and label_public={self.label_public!r}; use method='alg1' or 'auto'."
            )
        else:
            self.method_ = self.method
        if self.max_grad_norm != "auto":
            self.max_grad_norm_ = float(self.max_grad_norm)
        else:
            self.max_grad_norm_ = _AUTO_CLIP_ALG1 if self.method_ == "alg1" else 1.0
        self.l2_regularization_ = float(self.l2_regularization)
        if self.public_batch_size == "auto":
            self.public_batch_size_ = int(batch_size)
        elif self.public_batch_size == "full":
            self.public_batch_size_ = int(n_samples)
        elif self.public_batch_size > n_samples:
            raise ValueError(
                f"`public_batch_size` of {name} is {self.public_batch_size!r} but the "
                f"data have only {n_samples} rows. Use public_batch_size <= n_samples, "
                "'full' or 'auto'."
            )
        else:
            self.public_batch_size_ = int(self.public_batch_size)
        pretrains = self.public_epochs != "auto" and self.public_epochs > 0
        self.public_scale_ = (public_scale(X, self.public_mask_)
                              if self.method_ == "alg1" or pretrains else 1.0)

    def _engine_data(self, X):
        # Public steps on X / public_scale_ (a factor of the public columns:
        # free); coef_ is mapped back in _store_fit.
        return X if self.public_scale_ == 1.0 else _divide(X, self.public_scale_)

    def _store_fit(self, theta, classes, dtype, **kwargs):
        name = type(self).__name__
        # A check of the released (DP) parameters only: post-processing, free.
        if not np.all(np.isfinite(theta)):
            raise ValueError(
                f"Training of {name} diverged: the released weights are not finite. The "
                "public gradient (ℓ_pub of method='alg1', public pretraining) is not "
                f"clipped; learning_rate={self.learning_rate!r}. Lower learning_rate, or "
                "scale the columns to a data-independent range (e.g. "
                "sklearn_fdp.datasets.make_adult_preprocessor, or a FunctionTransformer "
                "with fixed bounds)."
            )
        if self.public_scale_ != 1.0:
            n_features = theta.shape[0] - int(self.fit_intercept)
            theta = theta.astype(np.float64)
            theta[:n_features] /= self.public_scale_  # shrinks: stays finite
        super()._store_fit(theta, classes, dtype, **kwargs)

    def _public_oracle(self, X, y_enc, loss, sample_rng, pad_rng):
        return FeatureDPPublicOracle(
            X, y_enc, loss, self.public_mask_, self.label_public, self.public_loss,
            self.fit_intercept, self.public_batch_size_, sample_rng, pad_rng,
        )

    def _make_oracles(self, X, y_enc, loss, public_rng):
        if self.method_ == "dpsgd":
            return self._make_private_oracle(X, y_enc, loss), None
        # Three independent children of the public stream: public batches,
        # their padding, and the padding of the private batch's ℓ_pub term.
        sample_rng, pub_pad_rng, priv_pad_rng = public_rng.spawn(3)
        # The private batch's padding enters the private sum: who knows it can
        # couple D and D' (one record removed) so that every later record's
        # padding shifts, and the sum moves by several C. It is a private
        # stream: from the OS CSPRNG in secure mode, like the noise and the
        # batch coins (issue 16 item 5). All three are still spawned, so the
        # public streams are the same in both modes.
        private = FeatureDPPrivateOracle(
            X, y_enc, loss, self.public_mask_, self.label_public, self.public_loss,
            self.fit_intercept, self.max_grad_norm_,
            pad_rng=secure_if(priv_pad_rng, self.noise),
        )
        return private, self._public_oracle(X, y_enc, loss, sample_rng, pub_pad_rng)

    def _engine_extra(self, noise_std, batch_size, n_rows):
        if self.method_ != "alg1":
            self.alpha_ = 1.0
            return {}
        self.alpha_ = (_auto_alpha(noise_std, batch_size, n_rows) if self.alpha == "auto"
                       else float(self.alpha))
        return {"alpha": self.alpha_}

    def _clip_norm(self):
        return self.max_grad_norm_

    def _fits_without_engine(self):
        return self.method_ == "sufficient_statistic"

    def _fit_without_engine(self, X, classes, y_index):
        """Label DP by one release of the θ-free private sum (``_engine/_statistic.py``)."""
        n_samples, n_features = X.shape
        n_outputs = 1 if len(classes) == 2 else len(classes)
        # The largest norm a record's term x~ (π − e_y)ᵀ can have, from the
        # public features and the (data-independent) worst label: clipping
        # above it only adds noise. Free: the features are public here.
        prior = label_prior(n_outputs)
        label_factor = 0.5 if n_outputs == 1 else math.sqrt(1.0 - prior)
        row_sq = float(squared_row_norms(X).max()) + float(self.fit_intercept)
        requested = self.max_grad_norm_  # resolved by _setup_fit ("auto": 1)
        self.max_grad_norm_ = float(min(requested, math.sqrt(row_sq) * label_factor))
        if self.max_grad_norm_ <= 0:  # all-zero rows and no intercept: nothing to learn
            self.max_grad_norm_ = requested
        # One Gaussian mechanism: a "DP-SGD run" of one step at sampling rate 1.
        sigma, event, spent, accountant = self._budget(n_samples, 1.0, 1)
        loss = LinearLoss("log_loss", n_outputs)
        gens = spawn_generators(self.random_state, 4, noise=self.noise,
                                private_streams=(_SAMPLE, _NOISE))
        oracle = FeatureDPPrivateOracle(
            X, loss.encode(y_index), loss, self.public_mask_, False, "mask",
            self.fit_intercept, self.max_grad_norm_,
        )
        theta0 = np.zeros((n_features + int(self.fit_intercept), n_outputs), dtype=np.float64)
        noise_std = sigma * self.max_grad_norm_
        released = release_private_sum(oracle, n_samples, theta0.astype(X.dtype), noise_std,
                                       gens[_NOISE])
        report = progress_reporter(1)
        if report is not None:
            report(1)
        self.alpha_ = 1.0 if self.alpha == "auto" else float(self.alpha)
        # A ridge of at least this keeps the released term's noise (std
        # α σ C / n per coordinate) from driving rare columns' weights to
        # infinity (validation split of adult.data: best near 0.3 x that).
        self.l2_regularization_ = max(float(self.l2_regularization),
                                      _STATISTIC_RIDGE * self.alpha_ * noise_std / n_samples)
        theta, n_iter = minimise_label_free_objective(
            X, released, n_outputs, fit_intercept=self.fit_intercept, alpha=self.alpha_,
            l2_regularization=self.l2_regularization_, theta0=theta0,
        )
        if self.verbose:
            print(f"[{type(self).__name__}] sufficient statistic released once "
                  f"(σ = {sigma:.4g}, clip {self.max_grad_norm_:.4g}, ε = {spent:.4g}, "
                  f"δ = {self.delta:g}); L-BFGS: {n_iter} iterations", file=sys.stdout,
                  flush=True)
        self._store_fit(theta, classes, X.dtype, n_iter=n_iter, steps=1, batch_size=n_samples,
                        learning_rate=float("nan"), sampling_rate=1.0, sigma=sigma,
                        event=event, spent=spent, accountant=accountant)
        return self

    def _initial_theta(self, X, y_enc, loss, rng, theta0):
        """Public pretraining (Remark 2): fit ``ℓ_pub`` only, without noise."""
        if self.public_epochs == "auto":
            return self._public_minimiser(X, y_enc, theta0) if self.label_public else theta0
        if self.public_epochs <= 0:
            return theta0
        n_samples = X.shape[0]
        sample_rng, pad_rng = rng.spawn(2)
        public = self._public_oracle(X, y_enc, loss, sample_rng, pad_rng)
        steps = max(1, math.ceil(self.public_epochs * n_samples / self.public_batch_size_))
        lr = _PRETRAIN_AUTO_LR if self.learning_rate == "auto" else float(self.learning_rate)
        config = EngineConfig(
            steps=steps,
            sampling_rate=1.0,  # the "private" part below is identically zero
            noise_multiplier=0.0,
            max_grad_norm=np.inf,
            learning_rate=lr,
            lr_schedule=self.lr_schedule,
            momentum=self.momentum,
            alpha=0.0,
            l2_regularization=self.l2_regularization,
        )
        result = run_dp_sgd(
            theta0,
            lambda idx, theta: np.zeros_like(theta),
            n_samples,
            config,
            sample_rng=rng,
            noise_rng=rng,
            public_oracle=public,
        )
        return result.theta

    def _public_minimiser(self, X, y_enc, theta0):
        """Minimiser of the masked public loss: logistic regression on the public columns.

        Uses the public columns and the (public) label only, so it is free
        (Remark 2). With ``public_loss="gaussian_pad"`` it is the minimiser
        of the masked loss, a close start for the padded one.
        """
        public_idx = np.flatnonzero(self.public_mask_)
        theta = theta0.copy()
        if len(public_idx) == 0:
            return theta
        model = LogisticRegression(fit_intercept=self.fit_intercept, max_iter=1000)
        model.fit(X[:, public_idx], y_enc)
        theta[public_idx] = model.coef_.T.astype(theta.dtype)
        if self.fit_intercept:
            theta[X.shape[1]] = model.intercept_.astype(theta.dtype)
        return theta

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X, y, feature_names=None):
        """Fit the model with FDP Algorithm 1 (or pretraining + DP-SGD).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data. Rows should have a data-independent L2 bound
            (e.g. scaled to norm ≤ 1); clipping bounds each gradient anyway.
            Public rows of larger norm make ``fit`` divide ``X`` by
            ``public_scale_``; the private columns' scale cannot be checked
            without spending budget, so scale them yourself.
        y : array-like of shape (n_samples,)
            Class labels.
        feature_names : sequence of str or None, default=None
            Names of X's columns, used only to resolve column names in
            ``public_features``/``private_features`` when X has none (e.g.
            the sparse output of a ColumnTransformer).
            :func:`sklearn_fdp.pipeline.make_private_pipeline` passes them;
            they are stored in ``feature_names_``, not in
            ``feature_names_in_``.

        Returns
        -------
        self : FeatureDPLogisticRegression

        Raises
        ------
        ValueError
            When the released weights are not finite (the training diverged,
            e.g. at a huge ``learning_rate``); an earlier fit is kept.
        """
        self.feature_names_ = feature_names  # validated against X in _setup_fit
        return self._fit_engine(X, y)

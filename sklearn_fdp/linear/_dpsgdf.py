"""DPSGDFClassifier: DP-SGD on privately centred features (DPSGD-F)."""

import math
from numbers import Real

import numpy as np
from scipy.stats import norm as _normal
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import accounting
from .._engine import LinearGradientOracle
from .._outofcore import (
    MappedRowSource,
    as_row_source,
    is_row_source,
    iter_row_blocks,
    map_rows,
    should_stream,
)
from .._mechanisms.gaussian_mean import (
    _row_norms,
    apply_row_factors,
    row_scale_factors,
    scale_rows,
)
from .._validation import Interval, StrOptions, _fit_context, atomic_fit
from .._random import secure_if
from ._base import BaseDPLinearClassifier

VARIANTS = ("practical", "analysed")

# -- the private preprocessing of variant="analysed" (Algorithm 2) -----------
#
# Everything below releases Gaussian-noised statistics of L2 sensitivity 1
# (histograms) or r (sums of vectors clipped to radius r) under add/remove,
# so every release is one ``accounting.gaussian_event(σ)`` and the whole fit
# is composed in one dp-accounting accountant with the DP-SGD steps.

# Most rounds of the coarse-to-fine mean (see _plan_mean_rounds).
_MAX_MEAN_ROUNDS = 6
# Probability that some empty bin of one histogram passes the threshold of
# _private_upper_quantile (a utility parameter; privacy does not depend on it).
_QUANTILE_FALSE_POSITIVE = 1e-3


def _geometric_edges(top, n_samples):
    """Upper bin edges ``top * 2**-j`` for ``j = J, ..., 1, 0`` (ascending).

    ``J = ceil(log2(n**2))``, so the finest edge is about ``top / n**2`` (the
    resolution of Lemma 4 of the DPSGD-F paper). Depends on public values only.
    """
    n_edges = max(1, math.ceil(2 * math.log2(max(n_samples, 2)))) + 1
    return top * 2.0 ** -np.arange(n_edges - 1, -1, -1, dtype=np.float64)


def _distance_histogram(dist, edges):
    """Counts of ``dist`` in the bins ``[0, e_0], (e_0, e_1], ..., (e_{J-1}, e_J]``.

    Every value lands in exactly one bin (the caller guarantees
    ``dist <= edges[-1]``; larger values are counted in the last bin), so
    adding or removing one row changes the count vector by one unit in one
    bin: L2 sensitivity 1 under add/remove (sqrt(2) under replace-one).
    """
    idx = np.minimum(np.searchsorted(edges, dist, side="left"), len(edges) - 1)
    return np.bincount(idx, minlength=len(edges)).astype(np.float64)


def _private_upper_quantile(dist, top, noise_multiplier, rng):
    """DP upper quantile of ``dist`` (all ``<= top``) from a Gaussian histogram.

    Mechanism: the histogram of ``dist`` over the geometric grid
    :func:`_geometric_edges` (ratio 2, from ``top / n**2`` to ``top``) plus
    independent ``N(0, noise_multiplier**2)`` noise per bin — one Gaussian
    release of L2 sensitivity 1, i.e. ``accounting.gaussian_event(σ)``.
    Post-processing: the threshold ``λ = z σ`` with
    ``z = Φ⁻¹(1 - β / n_bins)`` (``β = 1e-3``) and ``τ`` = upper edge of the
    highest bin whose noisy count exceeds ``λ`` (``top`` if none does).

    Utility, with probability ``>= 1 - 2β`` (union bound over the bins):
    no empty bin passes, so ``τ <= max(2 max_i dist_i, top / n**2)``; and
    every bin above ``τ`` holds fewer than ``λ + z σ = 2 z σ`` rows, so at
    most ``2 z σ`` rows per bin (``O(σ log n)`` in all) lie beyond ``τ`` —
    an ``O(log(n) sqrt(log 1/δ) / ε)``-th upper quantile, as Lemma 4 asks.

    Returns
    -------
    tau : float
    """
    n_samples = len(dist)
    edges = _geometric_edges(top, n_samples)
    noisy = _distance_histogram(dist, edges) + rng.normal(0.0, noise_multiplier, len(edges))
    z = float(_normal.isf(_QUANTILE_FALSE_POSITIVE / len(edges)))
    heavy = np.flatnonzero(noisy > z * noise_multiplier)
    return float(edges[heavy[-1]]) if heavy.size else float(top)


def _plan_mean_rounds(sigma_mean, n_samples, n_features):
    """Number of rounds ``K`` of the coarse-to-fine mean and the σ of each release.

    The ``2K - 1`` Gaussian releases (K means, K - 1 radius histograms) share
    the mean's budget equally: each has noise multiplier
    ``σ_k = σ_mean * sqrt(2K - 1)``, so together they are exactly one
    Gaussian mechanism with multiplier ``σ_mean`` (Gaussian composition) and
    cost exactly ``epsilon_mean`` at δ. Round 0 has error about
    ``e_0 = σ_k R sqrt(d) / n`` (R = ``feature_norm``); each later round,
    clipping at a radius at most twice the previous error (plus the data's
    spread), multiplies it by ``ρ = 2 σ_k sqrt(d) / n``. ``K`` (at most
    ``_MAX_MEAN_ROUNDS``) minimises the predicted final error
    ``max(e_0 ρ^(K-1), R / n**2)``, from public quantities only; the smallest
    such ``K`` wins ties. When ``ρ >= 1`` (few rows for the dimension, or a
    tiny budget) refinement cannot help and ``K = 1``: the plain Gaussian mean.
    """
    best = None
    floor = 1.0 / n_samples**2  # in units of R
    for rounds in range(1, _MAX_MEAN_ROUNDS + 1):
        sigma_k = sigma_mean * math.sqrt(2 * rounds - 1)
        ratio = sigma_k * math.sqrt(n_features) / n_samples
        predicted = max(ratio * (2 * ratio) ** (rounds - 1), floor)
        if best is None or predicted < best[0] * (1 - 1e-9):
            best = (predicted, rounds, sigma_k)
    return best[1], best[2]


# -- row blocks: every pass over X reads it in the blocks of iter_row_blocks, --
# the same in memory and out of core, so the sums are the same bit for bit.

def _block_sum(X, fn):
    """``Σ_blocks fn(block)`` over row blocks of ``X`` (blocks as float64), in order."""
    total = None
    for _, block in iter_row_blocks(X):
        part = fn(np.asarray(block, dtype=np.float64))
        total = part if total is None else total + part
    return total


def _block_rows(X, fn):
    """``fn(block)`` (one value per row) over row blocks of ``X``, as one float64 vector."""
    out = np.empty(X.shape[0], dtype=np.float64)
    for start, block in iter_row_blocks(X):
        out[start:start + len(block)] = fn(np.asarray(block, dtype=np.float64))
    return out


def _clipped_sum_around(X, centre, radius):
    """``Σ_i clip(x_i - centre, radius)``: what a later round of the mean releases.

    Each term has norm at most ``radius`` (L2 sensitivity ``radius`` under
    add/remove). ``X`` and ``centre`` are float64.
    """
    diff = X - centre
    dist = _row_norms(diff)  # np.linalg.norm's, except where squares would underflow
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(dist > radius, radius / dist, 1.0)
    return (diff * factor[:, None]).sum(axis=0)


def _coarse_to_fine_mean(X, feature_norm, rounds, sigma_k, rng):
    """Private mean whose error scales with the data's spread, not with ``R``.

    Round 0: ``μ_0 = sum_i x_i / n + N(0, (σ_k R / n)² I)`` (rows are already
    clipped to ``R = feature_norm``: sensitivity ``R``). Round ``k >= 1``:
    ``r_k`` = :func:`_private_upper_quantile` of ``||x_i - μ_{k-1}||``
    (``top = R + ||μ_{k-1}||``, which bounds every distance), then
    ``μ_k = μ_{k-1} + sum_i clip(x_i - μ_{k-1}, r_k) / n + N(0, (σ_k r_k / n)² I)``
    (sensitivity ``r_k``). Each release is ``gaussian_event(σ_k)``.

    Error: ``||μ_k - μ|| <= σ_k r_k (sqrt(d) + O(1)) / n + bias_k`` w.h.p.,
    where ``r_k <= 2 max_i ||x_i - μ_{k-1}|| <= 2 (||μ_{k-1} - μ|| + diam)``
    and the clipping bias ``bias_k`` is at most (rows beyond ``r_k``) times
    ``max_i ||x_i - μ_{k-1}||`` over ``n``, with ``O(σ_k log n)`` rows beyond.
    After ``K`` rounds the error is
    ``O(ρ^K R + σ_k sqrt(d) diam / n)`` with ``ρ = 2 σ_k sqrt(d) / n``:
    proportional to the diameter once ``ρ^K R`` is below it — the property
    of Lemma 3 (Huang, Liang & Yi 2021 reach it with a different, rotated
    grid construction; this simpler estimator pays a ``sqrt(2K - 1)`` factor
    in noise for the rounds).

    Returns
    -------
    mean : ndarray of shape (n_features,), float64
    radii : ndarray of shape (rounds,)
        ``r_0 = R`` and the private radii of the later rounds.
    noise_std : float
        Per-coordinate noise std of the last round, ``σ_k r_{K-1} / n``.
    """
    n_samples, n_features = X.shape
    # X (an ndarray or an out-of-core source) is read in row blocks, one pass
    # per statistic.
    radius = float(feature_norm)
    mean = (_block_sum(X, lambda b: b.sum(axis=0)) / n_samples
            + rng.normal(0.0, sigma_k * radius / n_samples, n_features))
    radii = [radius]
    for _ in range(1, rounds):
        dist = _block_rows(X, lambda b: np.linalg.norm(b - mean, axis=1))
        top = float(feature_norm) + float(np.linalg.norm(mean))
        radius = _private_upper_quantile(dist, top, sigma_k, rng)
        clipped_sum = _block_sum(X, lambda b: _clipped_sum_around(b, mean, radius))
        mean = mean + clipped_sum / n_samples + rng.normal(
            0.0, sigma_k * radius / n_samples, n_features)
        radii.append(radius)
    return mean, np.asarray(radii), sigma_k * radius / n_samples


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
    delta : float, default=1e-5
        δ of the whole fit, in (0, 1). Keep it well below ``1 / n_samples``.
    epsilon_mean : float, default=0.05
        ε_F: what the private mean alone costs at ``delta``, in (0, inf).
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
        Fit an intercept on the *centred* rows (Algorithm 3 does; in the
        analysed variant, the weight of the constant column τ). With
        False the model is ``w @ (x - mean_)`` (analysed: no τ column, rows
        clipped to τ), whose intercept in the input feature space,
        ``-mean_ @ w``, is still reported in ``intercept_``.
    accountant : {"auto", "pld", "rdp"}, default="auto"
        Accountant of the composed fit (the paper uses PLD).
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
    mean_radii_ : ndarray of shape (mean_rounds_,)
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
    delta_ : float
    noise_multiplier_ : float
        σ of the gradient steps.
    dp_event_ : dp_accounting.DpEvent
        ``ComposedDpEvent([GaussianDpEvent(σ_F), DP-SGD event])``; analysed:
        one ``GaussianDpEvent`` per release of the mean, one for the
        quantile, then the DP-SGD event.
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
        "epsilon_mean": [Interval(Real, 0, None, closed="neither")],
        "epsilon_quantile": [Interval(Real, 0, None, closed="neither")],
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
        epsilon_quantile=0.05,
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
        noise="default",
        verbose=0,
        classes=None,
    ):
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

    # -- hooks of BaseDPLinearClassifier -------------------------------------

    def _check_params(self, X, y):
        name = type(self).__name__
        super()._check_params(X, y)
        analysed = self.variant == "analysed"
        pre = self.epsilon_mean + (self.epsilon_quantile if analysed else 0.0)
        if self.epsilon is not None and pre >= self.epsilon:
            what = ("`epsilon_mean` + `epsilon_quantile`" if analysed else "`epsilon_mean`")
            raise ValueError(
                f"{what} of {name} is {pre!r} but the total `epsilon` is "
                f"{self.epsilon!r}: the preprocessing would leave nothing for the "
                "gradient steps. Use epsilon_mean well below epsilon (e.g. 0.05 * "
                "epsilon; analysed variant: e.g. epsilon / 3 for the mean and less "
                "for the quantile)."
            )

    # Centring destroys sparsity: dense input only.
    _accept_sparse = False

    def _row_scaling(self):
        return "clip" if self.variant == "analysed" else "normalize"

    def _streams_out_of_core(self):
        # The row scaling, centring and augmentation are row-wise: an
        # out-of-core X is scaled, centred and augmented batch by batch.
        return True

    def _validate_training_data(self, X, y):
        X, classes, y_index = super()._validate_training_data(X, y)
        if is_row_source(X):
            # Scaled per batch by per-row factors computed in one pass.
            factors = row_scale_factors(X, float(self.feature_norm), self._row_scaling())
            dtype = X.dtype
            X = MappedRowSource(X, lambda rows, idx: apply_row_factors(rows, factors[idx], dtype),
                                X.shape[1], dtype)
        else:
            X = scale_rows(X, float(self.feature_norm), self._row_scaling())
        return X, classes, y_index

    def _mean_noise_multiplier(self):
        """σ_F: analytic Gaussian noise multiplier of the mean for (epsilon_mean, delta)."""
        return accounting.gaussian_noise_multiplier(
            self.epsilon_mean, self.delta, neighboring=self.neighboring
        )

    def _quantile_noise_multiplier(self):
        """Analytic Gaussian noise multiplier of τ's histogram for (epsilon_quantile, delta)."""
        return accounting.gaussian_noise_multiplier(
            self.epsilon_quantile, self.delta, neighboring=self.neighboring
        )

    def _setup_fit(self, X, batch_size):
        if self.variant == "analysed":
            # Public plan of the coarse-to-fine mean (n and d are public).
            rounds, sigma_k = _plan_mean_rounds(self._mean_noise_multiplier(), *X.shape)
            self._mean_plan = (rounds, sigma_k)

    def _other_events(self):
        if self.variant == "practical":
            return (accounting.gaussian_event(self._mean_noise_multiplier()),)
        rounds, sigma_k = self._mean_plan
        return (*(accounting.gaussian_event(sigma_k) for _ in range(2 * rounds - 1)),
                accounting.gaussian_event(self._quantile_noise_multiplier()))

    def _make_private_oracle(self, X, y_enc, loss):
        if self.variant == "practical":
            return super()._make_private_oracle(X, y_enc, loss)
        # The constant column τ of the augmented rows is the intercept.
        return LinearGradientOracle(X, y_enc, loss, False, self.max_grad_norm)

    def _make_oracles(self, X, y_enc, loss, public_rng):
        # The preprocessing noise has its own child stream, independent of the
        # batches and the gradient noise. The fitted attributes are set in
        # ``fit`` once the engine has run (a failed fit leaves none).
        (mean_rng,) = public_rng.spawn(1)
        mean_rng = secure_if(mean_rng, self.noise)  # private noise: CSPRNG if secure
        if self.variant == "analysed":
            X_aug = self._analysed_preprocess(X, mean_rng)
            return super()._make_oracles(X_aug, y_enc, loss, public_rng)
        n_samples, n_features = X.shape
        noise_std = self._mean_noise_multiplier() * float(self.feature_norm) / n_samples
        # float64 sums of the rows, block by block (X may be out of core).
        true_mean = _block_sum(X, lambda b: b.sum(axis=0)) / n_samples
        self._private_mean = (true_mean + mean_rng.normal(0.0, noise_std, size=n_features),
                              noise_std)
        shift = self._private_mean[0].astype(X.dtype)
        X_centred = map_rows(X, lambda rows, idx: np.ascontiguousarray(rows - shift),
                              n_features, X.dtype)
        return super()._make_oracles(X_centred, y_enc, loss, public_rng)

    def _analysed_preprocess(self, X, rng):
        """Algorithm 2, steps 1-4: private mean, private τ, augment, clip, rescale."""
        rounds, sigma_k = self._mean_plan
        mean, radii, noise_std = _coarse_to_fine_mean(
            X, float(self.feature_norm), rounds, sigma_k, rng)
        dist = _block_rows(X, lambda b: np.linalg.norm(b - mean, axis=1))
        top = float(self.feature_norm) + float(np.linalg.norm(mean))
        tau = _private_upper_quantile(dist, top, self._quantile_noise_multiplier(), rng)
        self._private_mean = (mean, noise_std)
        self._analysed_state = (radii, tau)
        # The augmented rows (x - mean_, τ) / max(‖(x - mean_, τ)‖, sqrt(2) τ):
        # their per-row factors in one pass, then the rows themselves are
        # made row by row (all at once in memory, per batch out of core).
        factors = _block_rows(X, lambda b: self._augment_factors(self._centre_aug(b, mean, tau),
                                                                 tau))
        dtype = X.dtype

        def augment(rows, idx):
            Z = self._centre_aug(np.asarray(rows, dtype=np.float64), mean, tau)
            return np.ascontiguousarray(Z * factors[idx][:, None], dtype=dtype)

        return map_rows(X, augment, X.shape[1] + int(self.fit_intercept), dtype)

    def _centre_aug(self, X, mean, tau):
        """``(x - mean, τ)`` (``x - mean`` without the τ column), float64."""
        X = X - mean
        if self.fit_intercept:
            X = np.hstack([X, np.full((X.shape[0], 1), tau)])
        return X

    def _augment_factors(self, Z, tau):
        """Per-row factor ``1 / max(‖z‖, s)`` of the augmented rows ``Z`` (s: the norm bound)."""
        scale = self._augmented_scale(tau)
        norms = np.linalg.norm(Z, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(norms > scale, 1.0 / norms, 1.0 / scale)

    def _augmented_scale(self, tau):
        """Norm bound of the augmented rows: ``sqrt(2) τ`` (``τ`` without the τ column)."""
        return math.sqrt(2.0) * tau if self.fit_intercept else tau

    def _augment(self, X, tau=None, *, centred=False):
        """Internal representation of the analysed variant (for inspection and tests).

        ``Clip((x - mean_, τ), sqrt(2) τ) / (sqrt(2) τ)``: the rows DP-SGD
        trained on (without the τ column and with ``τ`` instead of
        ``sqrt(2) τ`` when ``fit_intercept=False``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input rows (clipped to ``feature_norm`` first, as in ``fit``).
        tau : float or None, default=None
            τ; ``quantile_`` when None.
        centred : bool, default=False
            If True, ``X`` is already clipped and centred (used by ``fit``).

        Returns
        -------
        Z : ndarray of shape (n_samples, n_features + fit_intercept)
            float64.
        """
        if not centred:
            check_is_fitted(self)
            if self.variant != "analysed":
                raise AttributeError(
                    f"_augment of {type(self).__name__} exists for "
                    "variant='analysed' only."
                )
            X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
            X = scale_rows(X, self.feature_norm_, "clip")
            X = np.asarray(X, dtype=np.float64) - self.mean_
            tau = self.quantile_ if tau is None else tau
        X = self._centre_aug(X, 0.0, tau)
        return X * self._augment_factors(X, tau)[:, None]

    # -- fit / predict -------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
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
            analysed = self.variant == "analysed"
            if analysed:
                (rounds, sigma_k), (radii, tau) = self._mean_plan, self._analysed_state
        finally:
            for attr in ("_private_mean", "_mean_plan", "_analysed_state"):
                self.__dict__.pop(attr, None)
        sigma_f = self._mean_noise_multiplier()
        self.mean_ = mean
        self.mean_noise_std_ = float(noise_std)
        self.mean_noise_multiplier_ = float(sigma_k if analysed else sigma_f)
        # Analysed: 2K - 1 Gaussians of multiplier σ_k compose exactly to one
        # Gaussian of multiplier σ_k / sqrt(2K - 1) = σ_F.
        self.epsilon_mean_ = accounting.gaussian_epsilon(
            sigma_f, self.delta, neighboring=self.neighboring
        )
        self.feature_norm_ = float(self.feature_norm)
        if analysed:
            sigma_q = self._quantile_noise_multiplier()
            self.mean_rounds_ = int(rounds)
            self.mean_radii_ = radii
            self.quantile_ = float(tau)
            self.quantile_noise_multiplier_ = float(sigma_q)
            self.epsilon_quantile_ = accounting.gaussian_epsilon(
                sigma_q, self.delta, neighboring=self.neighboring
            )
            # Revert (Lemma 5): on rows that feature clipping leaves alone,
            # v @ (x - mean_) / s + v_b τ / s = w @ x + b with w = v / s and
            # b = v_b τ / s - w @ mean_ (s = sqrt(2) τ, or τ without the τ column).
            scale = self._augmented_scale(tau)
            dtype = self.coef_.dtype
            coef = self.coef_.astype(np.float64) / scale
            intercept = self.intercept_.astype(np.float64) * (tau / scale)
            self.coef_ = np.ascontiguousarray(coef.astype(dtype))
            self.intercept_ = (intercept - coef @ mean).astype(dtype)
            return self
        shift = self.coef_.astype(np.float64) @ mean
        self.intercept_ = (self.intercept_ - shift).astype(self.coef_.dtype)
        return self

    def decision_function(self, X):
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
        # ``mean_`` is set last in ``fit``; validation alone (n_features_in_)
        # does not make the estimator fitted.
        return hasattr(self, "mean_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

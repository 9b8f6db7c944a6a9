"""FeatureDPLinearRegression: ridge regression with feature DP by sufficient statistics.

The estimator validates, plans (:meth:`FeatureDPLinearRegression.privacy_plan`:
the layout of the release and σ, from public quantities), releases the
protected blocks of the normal equations once
(:mod:`sklearn_fdp._mechanisms.linear_statistics`) and solves them
(post-processing).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from numbers import Real
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.validation import check_is_fitted, validate_data

from .._budget import calibrate_dpsgd
from .._distributed import check_partitioned, use_cluster
from .._docs import fill_doc
from .._mechanisms.linear_statistics import (
    SOLVERS,
    release_linear_statistics,
    solve_noisy_ridge,
    statistic_layout,
    target_map,
)
from .._outofcore import training_dtype
from .._plan import DPSGDSchedule, feature_plan
from .._random import NOISE_OPTIONS, spawn_generators
from .._validation import (
    DELTA_CONSTRAINT,
    NEIGHBORING_CONSTRAINT,
    Interval,
    StrOptions,
    _fit_context,
    atomic_fit,
    check_delta_vs_n,
    check_row_norms_finite,
    check_y_bounds,
    validate_numeric_data,
    warn_clipped_targets,
)
from .. import accounting
from ..exceptions import FdpWarning
from ..features import check_label_in_spec, resolve_feature_spec, spec_feature_names
from ._base import clip_to_y_bounds
from ._dpsgd_regressor import DPSGDRegressor

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from .._plan import PrivacyPlan
    from .._typing import ArrayLike, FeatureSpec, MatrixLike, RandomStateLike


def _check_row_norm_bounds(est, n_public, n_private):
    """``(B_P, B_Q)`` from ``row_norm_bounds`` (a number, a pair or a RowNormBounds)."""
    name = type(est).__name__
    value = 1.0 if est.row_norm_bounds is None else est.row_norm_bounds
    if hasattr(value, "public") and hasattr(value, "protected"):
        pair = (value.public, value.protected)
    elif isinstance(value, Real) and not isinstance(value, (bool, np.bool_)):
        pair = (value, value)
    else:
        try:
            pair = tuple(value)
        except TypeError:
            pair = ()
        if len(pair) != 2:
            raise ValueError(
                f"`row_norm_bounds` of {name} must be a number, a pair (public, protected) "
                f"or a RowNormBounds (sklearn_fdp.preprocessing.row_norm_bounds), got "
                f"{value!r}.")
    bounds = []
    for what, bound, count in (("public", pair[0], n_public), ("protected", pair[1], n_private)):
        try:
            bound = float(bound)
        except (TypeError, ValueError):
            bound = float("nan")
        ok = math.isfinite(bound) and (bound > 0 or (bound == 0 and count == 0))
        if not ok:
            raise ValueError(
                f"The {what} row-norm bound of {name} must be finite and > 0, got "
                f"{bound!r} (row_norm_bounds={value!r}). Declare the largest L2 norm a "
                f"row's {what} columns can have (row_norm_bounds(schema) gives it for a "
                "make_tabular_preprocessor; inf there means a passthrough column without "
                "bounds: declare its bounds).")
        bounds.append(bound)
    return bounds[0], bounds[1]


def check_budget_given(est):
    """Raise unless ``est`` has ``epsilon`` or ``noise_multiplier``."""
    if est.epsilon is None and est.noise_multiplier is None:
        raise ValueError(
            f"{type(est).__name__}: give `epsilon` (the budget; σ is calibrated to it) or "
            "`noise_multiplier` (ε is then computed); both are None.")


def calibrate_one_release(est, n_samples):
    """``(schedule, σ, event, ε, accountant)`` of one Gaussian release of a statistic.

    ``est`` has ``epsilon``, ``noise_multiplier``, ``delta``, ``accountant`` and
    ``neighboring``. A DP-SGD step at sampling rate 1; ``accountant="auto"``:
    its exact (ε, δ) curve in closed form, ``event`` None (no accountant to
    import; the DpEvent, whose classes take a cold process ~13 ms to load, is
    built when asked: :func:`one_release_event`).
    """
    check_budget_given(est)
    schedule = DPSGDSchedule(batch_size=n_samples, sampling_rate=1.0, steps=1)
    if est.accountant == "auto":
        sigma, spent = accounting.gaussian_sigma_and_epsilon(
            est.epsilon, est.delta, noise_multiplier=est.noise_multiplier,
            neighboring=est.neighboring)
        return schedule, sigma, None, spent, "analytic"
    sigma, event, spent, accountant = calibrate_dpsgd(est, 1.0, 1)
    return schedule, sigma, event, spent, accountant


def one_release_event(event, sigma, delta, neighboring):
    """``event``, or (None) the Gaussian release's DpEvent of noise multiplier σ."""
    if event is None:
        event = accounting.gaussian_release(None, delta, noise_multiplier=sigma,
                                            neighboring=neighboring)[1]
    return event


def column_names(columns, feature_names):
    """The names of ``columns`` (``"x<i>"`` without ``feature_names``)."""
    return ([f"x{int(i)}" for i in columns] if feature_names is None
            else [str(feature_names[int(i)]) for i in columns])


def _layout_details(layout, sigma):
    """The plan's per-block details of ``layout`` at noise multiplier ``sigma``."""
    details = dict(block_sizes=dict(layout.sizes),
                   block_sensitivities=dict(layout.sensitivities),
                   block_weights=dict(layout.weights),
                   block_noise_std={k: sigma / w for k, w in layout.weights.items()})
    if "Qr" in layout.weights:
        details["residual_bound"] = layout.residual_bound
    if layout.qp_basis is not None:
        details["qp_rank"] = int(layout.qp_basis.shape[1])
    return details


METHODS = ("auto", "sufficient_statistic", "dpsgd")

# method="auto" with a private target and private columns runs DP-SGD on the
# whole record when the declared target lies within [-_DPSGD_TARGET_SCALE,
# +_DPSGD_TARGET_SCALE]: the scale DPSGDRegressor without y_bounds is built for
# (its step size and max_grad_norm = 1 suit a target within about [-1, 1]).
_DPSGD_TARGET_SCALE = 1.0

_WHOLE_RECORD = ("DP-SGD on the whole record (DPSGDRegressor's fit without y_bounds; "
                 "record-level DP is feature DP for every public part)")


def resolve_method(est, public_mask, y_bounds):
    """``est.method`` with ``"auto"`` resolved (issue 32, "never dominated").

    ``"auto"``: ``"dpsgd"`` when the target is private, some column is
    private and the declared ``y_bounds`` lie within ``[-1, 1]``; else
    ``"sufficient_statistic"``. ``"dpsgd"`` is :class:`DPSGDRegressor`'s fit
    (without ``y_bounds``: the target as it is) on the whole record, which
    protects more than asked: record-level DP is feature DP for every public
    part. The rule uses public quantities only (the declared bounds, the
    label's status, the feature spec). Chosen on the development sets of
    ``benchmarks/_devsets.py`` (``benchmarks/results/defaults_suite_ybounds.md``,
    5 seeds, ε 0.03-3): on communities_crime (target in [0, 1]) DP-SGD without
    y_bounds was ahead of the sufficient statistic by 9-20 R² points at
    ε ≥ 0.3 and tied below; on student_performance (target in [0, 20]) it
    was behind by 576-1390 points at ε ≤ 0.3 (its residuals, far beyond its
    clip of 1, are all clipped) and tied or behind above. The sufficient
    statistic's noise grows with the declared width, DP-SGD's does not, but
    DP-SGD without y_bounds suits a target on the scale of its clip only.
    """
    name = type(est).__name__
    if est.method == "dpsgd" and est.label_public:
        raise ValueError(
            f"method='dpsgd' of {name} runs DP-SGD on the whole record, the target "
            "included, but label_public=True declares the target public. Use "
            "method='sufficient_statistic' (or 'auto') with a public target, or "
            "label_public=False.")
    if est.method != "auto":
        return est.method
    if est.label_public or bool(public_mask.all()):
        return "sufficient_statistic"
    lo, hi = y_bounds
    return ("dpsgd" if max(abs(float(lo)), abs(float(hi))) <= _DPSGD_TARGET_SCALE
            else "sufficient_statistic")


@fill_doc
class FeatureDPLinearRegression(RegressorMixin, BaseEstimator):
    """Ridge regression with feature differential privacy, by sufficient statistics.

    Some columns of ``X`` (and optionally the target) are public: they may
    leak, while the *private* columns of every record (and the target
    unless ``label_public``) are protected. The ridge solution needs only
    ``X~ᵀX~`` and ``X~ᵀy`` (``X~``: ``X`` and a column of ones for the
    intercept). The blocks of these that involve only public values are
    computed exactly; the others (protected × public, protected ×
    protected, protected × target, and public × target when the target is
    private) are released once with the Gaussian mechanism, after every
    row's public and protected parts are clipped to the declared
    ``row_norm_bounds`` and the target to ``y_bounds``. The noisy system is
    then made positive definite and solved (post-processing). The fit is
    (ε, δ)-feature-DP: replacing the protected values (and a private
    target) of one record, or adding/removing a record whose public part is
    known, changes the model's distribution by at most (ε, δ). One pass
    over the data; no SGD.

    Label-DP regression is the case where every feature is public
    (``private_features=[]``) and the target is private: only ``X~ᵀy`` is
    noised.

    Parameters
    ----------
    public_features : spec or None, default=None
        Columns that are public, as column indices, a boolean mask, column
        names or a callable ``name -> bool`` (as in
        :class:`FeatureDPLogisticRegression`; an original column name selects
        its one-hot outputs inside
        :func:`~sklearn_fdp.pipeline.make_private_pipeline`). Give exactly one
        of ``public_features`` and ``private_features``.
    private_features : spec or None, default=None
        Columns to protect; every other column is public. ``[]``: none
        (label-DP regression; needs ``label_public=False``).
    label_public : bool, default=False
        Whether the target is public. If False (the default) the target is
        protected: ``X~_Pᵀy`` is noised too.
    y_bounds : (float, float)
        Public range ``(lo, hi)`` of the target, ``lo < hi``, required:
        targets outside it are clipped to it (a :class:`FdpWarning` gives
        their number to the data holder; it is not stored in the model).
        Choose it from public knowledge, never from the training data. The
        noise of the target's blocks grows with ``hi − lo``.
    row_norm_bounds : float, (float, float), RowNormBounds or None, default=None
        Declared L2 bounds ``(B_P, B_Q)`` on a row's public and protected
        columns; each block of every row is clipped to its bound. None: the
        schema's bounds after a
        :func:`~sklearn_fdp.preprocessing.make_tabular_preprocessor` inside
        :func:`~sklearn_fdp.pipeline.make_private_pipeline` (the one
        declaration), else 1.0. A number bounds both blocks; a
        :class:`~sklearn_fdp.preprocessing.RowNormBounds` (from
        :func:`~sklearn_fdp.preprocessing.row_norm_bounds` of the schema of a
        :func:`~sklearn_fdp.preprocessing.make_tabular_preprocessor`) gives
        the tightest bounds of that preprocessor's output. Must be > 0
        (0 allowed for an empty block). ``fit`` warns (:class:`FdpWarning`)
        with the number of rows whose public block was clipped (computed
        from the public columns: free); protected blocks are clipped
        silently.
    alpha : float, default=1.0
        Ridge penalty ``α ‖w‖²`` (the intercept is not penalised), >= 0, as
        in :class:`sklearn.linear_model.Ridge`.
    solver : {"residual", "joint"}, default="residual"
        How the released system is solved (post-processing: no privacy
        cost). ``"residual"``: the exact public model first (public columns
        and intercept; with a private target from the noisy ``X~_Pᵀy``, its
        ridge raised by the noise's expected norm ``τ_b``), then the
        protected columns fitted to its residual, residualised on the
        public directions whose eigenvalue exceeds a share of the noise
        scale ``τ`` (``noise_scale_``; 0.5 τ with a public target, τ with a
        private one), with the eigenvalues below ``τ`` raised to it: as the
        noise grows, the model falls back to the public one. With a public
        target the protected columns' right-hand side is released directly
        as ``X_Qᵀ clip(r, ±R)``, ``r`` the public model's residuals and ``R``
        read off them (see Notes). ``"joint"``: the
        whole noisy system ``(X~ᵀX~ + α D) θ = X~ᵀy`` at once, its
        eigenvalues below ``τ`` raised to ``τ``. Both are ``Ridge(alpha)``
        on the clipped data when the noise is negligible. The rules were
        chosen on a validation split of adult.data (target hours-per-week,
        Adult's protected columns private, 40 seeds;
        ``benchmarks/results/fdp_linear_rules.md``; public-only Ridge 0.128,
        non-private Ridge 0.198): validation R² ``"residual"``, target
        public, 0.142 at ε = 0.01, 0.158 at ε = 0.03, 0.170 at ε = 0.1,
        0.179 at ε = 0.3, 0.191 at ε = 1; target private too, 0.090 at
        ε = 0.1 and 0.169 at ε = 1.
    method : {"auto", "sufficient_statistic", "dpsgd"}, default="auto"
        ``"sufficient_statistic"``: the release of the normal equations
        described above. ``"dpsgd"``: DP-SGD on the whole record, the fit of
        :class:`DPSGDRegressor` without ``y_bounds`` (the target, clipped to
        ``y_bounds``, as it is) with the same ``epsilon``, ``delta``,
        ``noise_multiplier``, ``accountant``, ``neighboring``,
        ``random_state``, ``noise`` and ``fit_intercept``: it protects every
        column and the target (record-level DP is feature DP for every
        public part), ignores ``alpha``, ``solver`` and ``row_norm_bounds``
        (its per-example gradients are clipped to norm 1), and ``predict``
        clips to ``y_bounds``; needs ``label_public=False``. ``"auto"``
        (issue 32: asking for less protection must not give a worse model
        than asking for more): ``"dpsgd"`` when the target is private, some
        column is private and ``y_bounds`` lies within [-1, 1] (the scale
        DP-SGD without ``y_bounds`` is built for), else
        ``"sufficient_statistic"``; a rule of public quantities chosen on
        the development sets (``benchmarks/results/defaults_suite_ybounds.md``).
        ``method_`` and ``privacy_plan_.details["method"]`` record the choice.
    [[fit_intercept]]
    [[epsilon]]
    [[delta]]
    noise_multiplier : float or None, default=None
        σ of the one release (noise std of the stacked weighted vector,
        whose add/remove sensitivity is 1). When given, ε is computed rather
        than targeted; if ``epsilon`` is also given, ``fit`` raises
        :class:`BudgetExceededError` when the release would spend more.
    [[accountant]]
    [[neighboring]]
    random_state : int, RandomState instance or None, default=None
        Seeds the noise; a fixed value reproduces ``coef_``.
    noise : {"default", "secure"}, default="default"
        Source of the Gaussian noise. ``"default"``: a NumPy PCG64 stream
        spawned from ``random_state`` (reproducible). ``"secure"``: the OS
        CSPRNG and the floating-point-hardened sampler of the user guide's
        "Secure noise"; ``random_state`` then no longer reproduces the fit.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
        0.0 when ``fit_intercept=False``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Defined when ``X`` has string column names.
    feature_names_ : ndarray of object or None
        The column names the feature spec was resolved with.
    [[epsilon_]]
    [[delta_]]
    [[noise_multiplier_]]
    [[accountant_]]
    [[dp_event_]]
    [[privacy_plan_]]
    public_mask_ : ndarray of bool of shape (``n_features_in_``,)
        Which columns were treated as public.
    [[public_features_]]
    [[private_features_]]
    [[label_public_]]
    row_norm_bounds_ : tuple of (float, float)
        ``(B_P, B_Q)`` used.
    y_bounds_ : tuple of (float, float)
        ``(lo, hi)`` used: the target was clipped to it, and ``predict``
        clips to it (post-processing, no privacy cost).
    block_noise_std_ : dict
        Noise std of the released entries of each noisy block: ``"QP"``
        (``X_QᵀX~_P``), ``"QQ"`` (``X_QᵀX_Q``: its diagonal; off-diagonal
        entries / √2), ``"Qy"`` (``X_Qᵀy``, private target), ``"Qr"``
        (``X_Qᵀr``, public target: ``r`` the public model's residuals,
        clipped to ±R, ``privacy_plan_.details["residual_bound"]``),
        ``"Py"`` (``X~_Pᵀy``, private target), the last
        three in units where the target is mapped to [-1, 1] (see Notes);
        only the blocks that were noised.
    noise_scale_ : float
        τ, the expected spectral norm of the noise in ``X~ᵀX~`` (public; see
        ``solver``).
    n_eigenvalues_raised_ : int
        How many eigenvalues the solver raised to its floor
        (post-processing of the release).
    method_ : str
        The method that ran (``"auto"`` resolved). For ``"dpsgd"``
        ``block_noise_std_`` is empty and ``noise_scale_`` and
        ``n_eigenvalues_raised_`` are 0; ``privacy_plan_`` holds DP-SGD's
        schedule and event.

    Notes
    -----
    Privacy: unit = the private columns of one record (and its target
    unless ``label_public``), feature DP relative to the public part Ψ(x)
    (FDP paper, Def. 5 for ``neighboring="replace"``, Def. 6 for
    ``"add_remove"``). One Gaussian release (``dp_event_`` is
    ``dpsgd_event(σ, 1, 1)``, one Gaussian of noise multiplier σ) of the
    stacked, weighted blocks. With ``accountant="auto"`` (the default) σ and
    ``epsilon_`` come from that Gaussian's exact (ε, δ) curve
    (:func:`~sklearn_fdp.accounting.gaussian_release`, Balle & Wang 2018,
    Thm. 8; ``accountant_`` is ``"analytic"``; ε rounded up, never below the
    exact one); ``"pld"`` or ``"rdp"`` ask dp-accounting's accountant
    instead (a slightly larger σ: their answers are upper bounds).
    ``dp_event_`` and ``privacy_plan_`` are built from the fit's σ when read
    (so that a fit loads nothing of dp-accounting). Block
    sensitivities (``B_Q``, ``B_P`` the
    row-norm bounds, ``P = sqrt(B_P² + 1)`` with the intercept, the target
    mapped to [-1, 1]): ``X_QᵀX~_P``: ``B_Q P``; ``X_QᵀX_Q`` (upper
    triangle, off-diagonal × √2): ``B_Q²``; ``X_Qᵀy``: ``B_Q``; ``X~_Pᵀy``:
    ``P``; with a public target, ``X_Qᵀ clip(r, ±R)`` in place of ``X_Qᵀy``:
    ``B_Q R`` (``r = y − X~_P β``, β the public ridge model; ``R`` twice the
    residuals' root mean square, raised so that at most about ``16 σ √d_Q``
    residuals are clipped, at most 2: functions of σ and of the public
    columns and target of every record, which the simulator of Def. 6 and
    the replacement of Def. 5 leave unchanged; as σ → 0 nothing is
    clipped); under
    replacement twice these, but ``√2 B_Q²`` for ``X_QᵀX_Q``.
    The block weights minimise the total noise variance of the released
    system (``w_k² ∝ sqrt(m_k) / c_k``), that of ``X_QᵀX~_P`` then halved
    (the residual solver uses it only through a few projections; chosen on
    a validation split of adult.data), and are scaled so that the stacked
    vector's sensitivity is 1 (add/remove) or 2 (replace; the accounting's
    convention). Positive definiteness: every matrix the solver inverts has
    its eigenvalues below its noise scale raised to it (a rule from σ and
    the shapes only; see ``solver``). ``yᵀy`` is not needed and not released. NOT
    protected: the public columns, the target when ``label_public=True``,
    ``n``, and the number of targets outside ``y_bounds`` (warned about to
    whoever runs ``fit``, not stored). Feature DP does not hide whether a
    record is in the data.

    See Also
    --------
    FeatureDPLogisticRegression : The classifier with the same feature specs.

    References
    ----------
    Mahloujifar, Guo et al., "Machine Learning with Privacy for Protected
    Attributes" (Def. 5/6). Sufficient-statistic perturbation for linear
    regression: Sheffet, "Differentially Private Ordinary Least Squares",
    ICML 2017 (arXiv:1507.02482); Wang, "Revisiting differentially private
    linear regression: optimal and adaptive prediction & estimation in
    unbounded domain", UAI 2018 (arXiv:1803.02596).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp import FeatureDPLinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 0.5, size=(5000, 4))
    >>> y = X @ [1.0, -2.0, 0.5, 3.0] + 0.1 * rng.standard_normal(5000)
    >>> reg = FeatureDPLinearRegression(private_features=[0, 1], y_bounds=(-3, 3),
    ...                                 epsilon=1.0, random_state=0).fit(X, y)
    >>> reg.private_features_.tolist(), bool(reg.epsilon_ <= 1.0)
    ([0, 1], True)
    """

    _parameter_constraints: dict = {
        "public_features": "no_validation",
        "private_features": "no_validation",
        "label_public": ["boolean"],
        "y_bounds": "no_validation",
        "row_norm_bounds": "no_validation",
        "alpha": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions(set(SOLVERS))],
        "method": [StrOptions(set(METHODS))],
        "fit_intercept": ["boolean"],
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": DELTA_CONSTRAINT,
        "noise_multiplier": [Interval(Real, 0, None, closed="neither"), None],
        "accountant": [StrOptions({*accounting.ACCOUNTANTS, "auto"})],
        "neighboring": NEIGHBORING_CONSTRAINT,
        "random_state": ["random_state"],
        "noise": [StrOptions(set(NOISE_OPTIONS))],
    }

    def __init__(
        self,
        *,
        public_features: FeatureSpec = None,
        private_features: FeatureSpec = None,
        label_public: bool = False,
        y_bounds: tuple[float, float] | None = None,
        row_norm_bounds: float | tuple[float, float] | None = None,
        alpha: float = 1.0,
        solver: Literal["joint", "residual"] = "residual",
        method: Literal["auto", "dpsgd", "sufficient_statistic"] = "auto",
        fit_intercept: bool = True,
        epsilon: float | None = 1.0,
        delta: float = 1e-5,
        noise_multiplier: float | None = None,
        accountant: Literal["auto", "pld", "rdp"] = "auto",
        neighboring: Literal["add_remove", "replace"] = "add_remove",
        random_state: RandomStateLike = None,
        noise: Literal["default", "secure"] = "default",
    ) -> None:
        self.public_features = public_features
        self.private_features = private_features
        self.label_public = label_public
        self.y_bounds = y_bounds
        self.row_norm_bounds = row_norm_bounds
        self.alpha = alpha
        self.solver = solver
        self.method = method
        self.fit_intercept = fit_intercept
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.neighboring = neighboring
        self.random_state = random_state
        self.noise = noise

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X: MatrixLike, y: ArrayLike, feature_names: ArrayLike | None = None) -> Self:
        """Release the protected blocks of the normal equations once and solve them.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; each row's public and protected columns are
            clipped to ``row_norm_bounds``.
        y : array-like of shape (n_samples,)
            Target values; clipped to ``y_bounds``.
        feature_names : sequence of str or None, default=None
            Names of X's columns, used only to resolve column names in
            ``public_features``/``private_features`` when X has none
            (:func:`sklearn_fdp.pipeline.make_private_pipeline` passes them).

        Returns
        -------
        self : FeatureDPLinearRegression
        """
        name = type(self).__name__
        check_label_in_spec(self, X, y)
        if use_cluster(X):  # summed on the workers; the values checked there, per partition
            X, y = check_partitioned(self, X, y)
        else:
            X, y = validate_numeric_data(self, X, y, accept_sparse="csr",
                                         dtype=[np.float64, np.float32], order="C",
                                         y_numeric=True)
            check_row_norms_finite(X, name)
        n_samples, n_features = X.shape
        check_delta_vs_n(self.delta, n_samples, name)
        names = spec_feature_names(self, n_features, feature_names)
        plan = self._plan_parts(n_samples, n_features, names)  # no DpEvent yet: see privacy_plan_
        if plan["details"]["method"] == "dpsgd":
            return self._fit_whole_record(X, y, names, plan)
        layout, y_bounds = self._layout(plan), plan["details"]["y_bounds"]
        (noise_rng,) = spawn_generators(self.random_state, 1, noise=self.noise)
        system, stats, layout = release_linear_statistics(X, y, layout, y_bounds,
                                                          plan["sigma"], noise_rng, self.alpha)
        plan = self._with_layout(plan, layout)  # the residual clip R of the public statistics
        if stats.n_public_clipped:
            # Read off the public columns only: free.
            warnings.warn(
                f"{stats.n_public_clipped} of {n_samples} rows of {name} have public columns "
                f"of L2 norm above the public row-norm bound {layout.public_bound!r} and were "
                "clipped to it, so the model sees other public values than predict does. "
                "Scale the columns to a data-independent range (e.g. "
                "sklearn_fdp.preprocessing.make_tabular_preprocessor) and pass its "
                "row_norm_bounds(schema), or declare a larger bound.", FdpWarning, stacklevel=2)
        if stats.n_clipped:
            warn_clipped_targets(self, stats.n_clipped, n_samples, self.y_bounds,
                                 not self.label_public, stacklevel=2)
        theta, n_raised = solve_noisy_ridge(system, self.alpha, self.fit_intercept, layout,
                                             self.solver)
        centre, half = target_map(y_bounds, self.fit_intercept)
        theta = theta * half
        self.coef_ = theta[:n_features].astype(training_dtype(X.dtype, name))
        self.intercept_ = float(theta[n_features] + centre) if self.fit_intercept else 0.0
        self.feature_names_ = names
        self.public_mask_ = plan["details"]["public_mask"]
        self.public_features_ = np.flatnonzero(self.public_mask_)
        self.private_features_ = np.flatnonzero(~self.public_mask_)
        self.label_public_ = bool(self.label_public)
        self.row_norm_bounds_ = (layout.public_bound, layout.private_bound)
        self.y_bounds_ = tuple(float(b) for b in y_bounds)
        self.block_noise_std_ = dict(plan["details"]["block_noise_std"])
        self.noise_scale_ = float(system.noise_scale)
        self.n_eigenvalues_raised_ = n_raised
        self.method_ = "sufficient_statistic"
        self.noise_multiplier_ = plan["sigma"]
        self.epsilon_ = plan["spent"]
        self.delta_ = float(self.delta)
        self.accountant_ = plan["accountant"]
        self._fitted_plan = plan  # privacy_plan_ and dp_event_ are built from it when asked
        return self

    def _whole_record_twin(self):
        """The :class:`DPSGDRegressor` that ``method="dpsgd"`` fits (whole records)."""
        return DPSGDRegressor(
            epsilon=self.epsilon, delta=self.delta, noise_multiplier=self.noise_multiplier,
            accountant=self.accountant, neighboring=self.neighboring,
            random_state=self.random_state, noise=self.noise, fit_intercept=self.fit_intercept)

    def _fit_whole_record(self, X, y, names, plan):
        """``method="dpsgd"``: DPSGDRegressor's fit on the whole record (target clipped to
        ``y_bounds``, used as it is), stored as this estimator's release."""
        name = type(self).__name__
        if use_cluster(X):
            raise ValueError(
                f"{name}(method={self.method!r}) resolved to DP-SGD on the whole record, "
                "which does not run on a dask cluster; pass method='sufficient_statistic' "
                "(the one release of the normal equations, summed on the workers).")
        lo, hi = plan["details"]["y_bounds"]
        n_outside = int(np.count_nonzero((y < lo) | (y > hi)))
        if n_outside:
            warn_clipped_targets(self, n_outside, X.shape[0], self.y_bounds, True,
                                 stacklevel=3)
        twin = self._whole_record_twin()
        with warnings.catch_warnings():
            # The twin's advice to give y_bounds: this estimator has them (the
            # target is clipped to them and predict clips to them).
            warnings.filterwarnings("ignore", message=".* without y_bounds trains on the target",
                                    category=FdpWarning)
            twin.fit(X, np.clip(y, lo, hi))
        self.coef_ = twin.coef_
        self.intercept_ = float(twin.intercept_[0]) if self.fit_intercept else 0.0
        self.feature_names_ = names
        self.public_mask_ = plan["details"]["public_mask"]
        self.public_features_ = np.flatnonzero(self.public_mask_)
        self.private_features_ = np.flatnonzero(~self.public_mask_)
        self.label_public_ = bool(self.label_public)
        self.row_norm_bounds_ = tuple(plan["details"]["row_norm_bounds"])
        self.y_bounds_ = (float(lo), float(hi))
        self.block_noise_std_ = {}
        self.noise_scale_ = 0.0
        self.n_eigenvalues_raised_ = 0
        self.method_ = "dpsgd"
        self.noise_multiplier_ = float(twin.noise_multiplier_)
        self.epsilon_ = float(twin.epsilon_)
        self.delta_ = float(self.delta)
        self.accountant_ = twin.accountant_
        self._fitted_plan = dict(plan, event=twin.dp_event_, sigma=self.noise_multiplier_,
                                 spent=self.epsilon_, accountant=self.accountant_,
                                 schedule=twin.privacy_plan_.schedule)
        return self

    @fill_doc
    def privacy_plan(self, n_samples: int, n_features: int, *,
                     feature_names: ArrayLike | None = None) -> PrivacyPlan:
        """What a fit on ``n_samples`` × ``n_features`` data spends and protects.

        Computed from public quantities only (the shape, the column names
        and the parameters). Its ``details`` hold the ``public_mask``, the
        checked ``y_bounds`` and ``row_norm_bounds``, and per released
        block its size, sensitivity, weight and noise std (``block_sizes``,
        ``block_sensitivities``, ``block_weights``, ``block_noise_std``).
        With a public target these are the layout before the data are read
        (the residual clip ``R = 2``, the whole ``X_QᵀX~_P``); a fit sets
        both from the public columns and target (σ and ε unchanged), and its
        ``privacy_plan_`` holds the released layout, with ``residual_bound``
        and, when ``X_QᵀX~_P`` was projected, ``qp_rank``.

        Parameters
        ----------
        [[plan_shape]]
        feature_names : array-like of str or None, default=None
            Column names, to resolve names in the feature specs and to name
            the protected columns (else ``"x<i>"``).

        Returns
        -------
        plan : PrivacyPlan
        """
        return self._assemble_plan(self._plan_parts(n_samples, n_features, feature_names))

    def _plan_parts(self, n_samples, n_features, feature_names):
        """Everything :meth:`privacy_plan` returns, as a dict, but the DpEvent of an
        analytic calibration (``event`` None: :meth:`_assemble_plan` builds it)."""
        name = type(self).__name__
        check_budget_given(self)
        y_bounds = check_y_bounds(self, required=True)
        public_mask = resolve_feature_spec(self.public_features, self.private_features,
                                           n_features, feature_names, name,
                                           label_public=self.label_public)
        n_private = int((~public_mask).sum())
        b_p, b_q = _check_row_norm_bounds(self, n_features - n_private, n_private)
        method = resolve_method(self, public_mask, y_bounds)
        private = np.flatnonzero(~public_mask)
        protected = column_names(private, feature_names)
        details = dict(method=method, public_mask=public_mask, y_bounds=y_bounds,
                       row_norm_bounds=(b_p, b_q))
        if method == "dpsgd":  # DPSGDRegressor's plan: one DP-SGD run over whole records
            whole = self._whole_record_twin().privacy_plan(n_samples, n_features)
            return dict(event=whole.dp_event, sigma=whole.noise_multiplier,
                        spent=whole.epsilon, delta=float(self.delta),
                        accountant=whole.accountant, neighboring=self.neighboring,
                        protected=protected, label_protected=True, protected_columns=private,
                        schedule=whole.schedule, details=dict(details, mechanism=_WHOLE_RECORD))
        layout = statistic_layout(public_mask, fit_intercept=self.fit_intercept,
                                  label_public=self.label_public, public_bound=b_p,
                                  private_bound=b_q, neighboring=self.neighboring)
        schedule, sigma, event, spent, accountant = calibrate_one_release(self, n_samples)
        details = dict(details, mechanism="sufficient statistics (one Gaussian release)",
                       **_layout_details(layout, sigma))
        return dict(event=event, sigma=sigma, spent=spent, delta=float(self.delta),
                    accountant=accountant, neighboring=self.neighboring, protected=protected,
                    label_protected=not self.label_public, protected_columns=private,
                    schedule=schedule, details=details)

    @staticmethod
    def _assemble_plan(parts):
        """The :class:`PrivacyPlan` of :meth:`_plan_parts`' dict (a new object; the
        dict is not changed)."""
        event = one_release_event(parts["event"], parts["sigma"], parts["delta"],
                                  parts["neighboring"])
        plan = feature_plan(event, parts["spent"], parts["delta"], parts["accountant"],
                            parts["protected"], parts["label_protected"],
                            protected_columns=parts["protected_columns"],
                            noise_multiplier=parts["sigma"], schedule=parts["schedule"],
                            details=parts["details"])
        if parts["details"].get("method") == "dpsgd":  # say which mechanism ran
            plan = dataclasses.replace(
                plan, description=f"{plan.description}; mechanism: {_WHOLE_RECORD}")
        return plan

    # The fit's plan and DpEvent are built on first access, not in fit: loading
    # dp-accounting's DpEvent classes was a third of a cold process's first fit
    # (issue 19). Each access builds them anew from the fit's public settings.
    @property
    def privacy_plan_(self):
        parts = self.__dict__.get("_fitted_plan")
        if parts is None:
            raise AttributeError(
                f"'{type(self).__name__}' object has no attribute 'privacy_plan_'")
        return self._assemble_plan(parts)

    @property
    def dp_event_(self):
        if "_fitted_plan" not in self.__dict__:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute 'dp_event_'")
        return self.privacy_plan_.dp_event

    @staticmethod
    def _with_layout(plan, layout):
        """``plan`` (a new dict) with the blocks' details of the layout a fit used."""
        details = dict(plan["details"], **_layout_details(layout, plan["sigma"]))
        return dict(plan, details=details)

    def _layout(self, plan):
        """The release's :class:`StatisticLayout` under ``plan`` (the dict of
        :meth:`_plan_parts`: public; as it computed it)."""
        b_p, b_q = plan["details"]["row_norm_bounds"]
        return statistic_layout(plan["details"]["public_mask"], fit_intercept=self.fit_intercept,
                                label_public=self.label_public, public_bound=b_p,
                                private_bound=b_q, neighboring=self.neighboring)

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Predict with the released linear model, clipped to ``y_bounds_``.

        The target never left ``y_bounds`` in training; clipping is
        post-processing (no privacy cost). ``X @ coef_ + intercept_`` is
        the unclipped model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", reset=False,
                          dtype=[np.float64, np.float32])
        y_pred = np.asarray(safe_sparse_dot(X, self.coef_.astype(X.dtype, copy=False))) \
            + self.intercept_
        return clip_to_y_bounds(y_pred, getattr(self, "y_bounds_", None))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # A private model is noisier than its non-private twin by design.
        tags.regressor_tags.poor_score = True
        # noise="secure" draws from the OS CSPRNG: random_state does not fix the fit.
        tags.non_deterministic = self.noise == "secure"
        return tags

"""FeatureDPPCA: principal components of a covariance released with feature DP.

The covariance of the rows needs ``X~ᵀX~`` only (``X~``: ``X`` with a public
column of ones, whose products give the column sums and ``n``). With the
columns split into public ``P`` and protected ``Q``, it is the regression
statistic of ``sklearn_fdp._mechanisms.linear_statistics`` without a
target: ``X~_PᵀX~_P`` (the public block, with the public sums and ``n``) is
computed exactly, and ``X_QᵀX~_P`` (with the protected sums) and ``X_QᵀX_Q``
are released once with the Gaussian mechanism, each row's public block
clipped to ``B_P`` and its protected block to ``B_Q`` (sensitivity 1 of the
weighted stacked vector under add/remove, 2 under replacement; the same
release, layout and sensitivity tests as ``FeatureDPLinearRegression``).
The mean, the covariance and its eigenvectors are post-processing.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from . import accounting
from ._distributed import check_partitioned, use_cluster
from ._mechanisms.gaussian_mean import row_scale_factors
from ._mechanisms.linear_statistics import release_linear_statistics, statistic_layout
from ._plan import feature_plan
from ._random import NOISE_OPTIONS, spawn_generators
from ._validation import (
    DELTA_CONSTRAINT,
    NEIGHBORING_CONSTRAINT,
    Interval,
    StrOptions,
    _fit_context,
    atomic_fit,
    check_delta_vs_n,
    check_row_norms_finite,
    validate_numeric_data,
)
from .features import resolve_feature_spec, spec_feature_names
from .linear._feature_dp_linear import (
    _check_row_norm_bounds,
    _layout_details,
    calibrate_one_release,
    check_budget_given,
    column_names,
    one_release_event,
)

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from ._plan import PrivacyPlan
    from ._typing import ArrayLike, FeatureSpec, MatrixLike, RandomStateLike

__all__ = ["FeatureDPPCA"]

#: The weight of the ``X_QᵀX~_P`` block relative to the variance-optimal split:
#: 1 (every entry of the covariance counts alike for its eigenvectors; the
#: regression's 0.5 was chosen for its solver, which reads that block only
#: through a few projections).
PCA_QP_WEIGHT = 1.0


class FeatureDPPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """PCA with feature differential privacy: one Gaussian release of the covariance.

    The public columns' block of the covariance (with their means) is exact;
    the blocks that touch a protected column (their means included) are
    released once with Gaussian noise, each row's public and protected parts
    clipped to the declared ``row_norm_bounds``. The components are the top
    eigenvectors of the released covariance (post-processing).

    Parameters
    ----------
    n_components : int or None, default=None
        Number of components kept (None: all ``n_features``).
    public_features, private_features : column spec, default=None
        Which columns are public and which are protected (indices, names or
        a boolean mask; exactly as :class:`FeatureDPLinearRegression`).
    row_norm_bounds : float or pair, default=1.0
        ``(B_P, B_Q)``: every row's public block is clipped to L2 norm
        ``B_P`` and its protected block to ``B_Q``, in ``fit`` and in
        ``transform`` alike. Declare them without reading the data.
    epsilon : float or None, default=1.0
        Budget of the one release; σ is calibrated to it.
    delta : float, default=1e-5
        δ of the guarantee, in (0, 1); keep it well below ``1 / n_samples``.
    noise_multiplier : float or None, default=None
        σ directly (``epsilon`` None): ε is then computed.
    accountant : {"auto", "pld", "rdp"}, default="auto"
        ``"auto"``: the Gaussian mechanism's exact (ε, δ) curve.
    neighboring : {"add_remove", "replace"}, default="add_remove"
        FDP Def. 6 (a record added or removed; its public part given) or
        Def. 5 (a record's protected values replaced).
    random_state : int, RandomState instance or None, default=None
        Seeds the noise.
    noise : {"default", "secure"}, default="default"
        Source of the noise (see :class:`PrivateMeanCenterer`).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Principal axes (unit rows), by decreasing released variance.
    explained_variance_ : ndarray of shape (n_components,)
        Eigenvalues of the released covariance (raised to 0 when the noise
        made them negative).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Those over the released covariance's trace (its negative
        eigenvalues counted as 0).
    mean_ : ndarray of shape (n_features,)
        The released mean of the clipped rows (public columns exact).
    covariance_ : ndarray of shape (n_features, n_features)
        The released covariance of the clipped rows (denominator ``n − 1``).
    n_components_ : int
    public_features_, private_features_ : ndarray of int
    row_norm_bounds_ : tuple (B_P, B_Q)
    noise_multiplier_, epsilon_, delta_, accountant_
    privacy_plan_ : PrivacyPlan
    dp_event_ : dp_accounting.DpEvent
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when ``X`` has string column names.

    Notes
    -----
    ``transform`` clips every row as ``fit`` did, subtracts ``mean_`` and
    projects on ``components_``. An output column whose component has a
    non-zero loading on a protected column reads protected values (every
    component does, in general): the pipeline tracer and
    :func:`~sklearn_fdp.privacy_report` treat those outputs as protected,
    so a later feature-DP step must declare them private.

    Given a dask array with a ``dask.distributed`` ``Client`` active, ``fit``
    sums the covariance where the partitions live (docs/scale.md).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp import FeatureDPPCA
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 4)) @ np.diag([0.4, 0.2, 0.1, 0.05])
    >>> pca = FeatureDPPCA(n_components=2, private_features=[0], epsilon=1.0,
    ...                    random_state=0).fit(X)
    >>> pca.transform(X).shape
    (20000, 2)
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "public_features": "no_validation",
        "private_features": "no_validation",
        "row_norm_bounds": "no_validation",
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
        n_components: int | None = None,
        *,
        public_features: FeatureSpec = None,
        private_features: FeatureSpec = None,
        row_norm_bounds: float | tuple[float, float] = 1.0,
        epsilon: float | None = 1.0,
        delta: float = 1e-5,
        noise_multiplier: float | None = None,
        accountant: Literal["auto", "pld", "rdp"] = "auto",
        neighboring: Literal["add_remove", "replace"] = "add_remove",
        random_state: RandomStateLike = None,
        noise: Literal["default", "secure"] = "default",
    ) -> None:
        self.n_components = n_components
        self.public_features = public_features
        self.private_features = private_features
        self.row_norm_bounds = row_norm_bounds
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.neighboring = neighboring
        self.random_state = random_state
        self.noise = noise

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X: MatrixLike, y: None = None, feature_names: ArrayLike | None = None) -> Self:
        """Release the covariance once and take its top eigenvectors.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training rows (a dask array is summed on the active cluster).
        y : None
            Ignored.
        feature_names : sequence of str or None, default=None
            Names of X's columns, to resolve names in the feature specs.

        Returns
        -------
        self : FeatureDPPCA
        """
        name = type(self).__name__
        if use_cluster(X):
            X, _ = check_partitioned(self, X)
        else:
            X = validate_numeric_data(self, X, accept_sparse="csr",
                                      dtype=[np.float64, np.float32], order="C")
            check_row_norms_finite(X, name)
        n_samples, n_features = X.shape
        if self.n_components is not None and self.n_components > n_features:
            raise ValueError(f"n_components={self.n_components} of {name} must be at most "
                             f"n_features={n_features}.")
        check_delta_vs_n(self.delta, n_samples, name)
        names = spec_feature_names(self, n_features, feature_names)
        plan = self.privacy_plan(n_samples, n_features, feature_names=names)
        layout = self._layout(plan.details)
        (noise_rng,) = spawn_generators(self.random_state, 1, noise=self.noise)
        system, _, _ = release_linear_statistics(X, None, layout, (-1.0, 1.0),
                                                 plan.noise_multiplier, noise_rng)
        G = system.G  # [X~ᵀX~]: the columns in order, the ones column last (n, sums)
        n = G[-1, -1]
        mean = G[:-1, -1] / n
        cov = (G[:-1, :-1] - n * np.outer(mean, mean)) / max(n - 1.0, 1.0)
        cov = (cov + cov.T) / 2.0
        lam, V = np.linalg.eigh(cov)
        lam, V = lam[::-1], V[:, ::-1]
        # Sign convention: the largest |loading| of every component positive.
        signs = np.sign(V[np.argmax(np.abs(V), axis=0), np.arange(V.shape[1])])
        V = V * np.where(signs == 0, 1.0, signs)
        k = n_features if self.n_components is None else int(self.n_components)
        lam = np.maximum(lam, 0.0)
        total = lam.sum()
        self.components_ = V[:, :k].T.copy()
        self.explained_variance_ = lam[:k].copy()
        self.explained_variance_ratio_ = (lam[:k] / total if total > 0
                                          else np.zeros(k))
        self.mean_ = mean
        self.covariance_ = cov
        self.n_components_ = k
        self.n_samples_ = int(n_samples)
        self.feature_names_ = names
        public_mask = plan.details["public_mask"]
        self.public_features_ = np.flatnonzero(public_mask)
        self.private_features_ = np.flatnonzero(~public_mask)
        self.row_norm_bounds_ = plan.details["row_norm_bounds"]
        self.noise_multiplier_ = plan.noise_multiplier
        self.epsilon_ = plan.epsilon
        self.delta_ = float(self.delta)
        self.accountant_ = plan.accountant
        self.privacy_plan_ = plan
        self.dp_event_ = plan.dp_event
        return self

    def _layout(self, details):
        b_p, b_q = details["row_norm_bounds"]
        return statistic_layout(details["public_mask"], fit_intercept=True, label_public=True,
                                public_bound=b_p, private_bound=b_q,
                                neighboring=self.neighboring, target=False,
                                qp_weight=PCA_QP_WEIGHT)

    def privacy_plan(self, n_samples: int, n_features: int, *,
                     feature_names: ArrayLike | None = None) -> PrivacyPlan:
        """What a fit on ``n_samples`` × ``n_features`` data spends and protects.

        From public quantities only: one Gaussian release (noise multiplier
        σ) of the covariance's protected blocks; ``details`` hold the
        ``public_mask``, the ``row_norm_bounds`` and per block its size,
        sensitivity, weight and noise std.

        Parameters
        ----------
        n_samples : int
        n_features : int
        feature_names : array-like of str or None, default=None

        Returns
        -------
        plan : PrivacyPlan
        """
        name = type(self).__name__
        check_budget_given(self)
        public_mask = resolve_feature_spec(self.public_features, self.private_features,
                                           n_features, feature_names, name, label_public=True)
        n_private = int((~public_mask).sum())
        b_p, b_q = _check_row_norm_bounds(self, n_features - n_private, n_private)
        details = dict(public_mask=public_mask, row_norm_bounds=(b_p, b_q))
        schedule, sigma, event, spent, accountant = calibrate_one_release(self, n_samples)
        details.update(_layout_details(self._layout(details), sigma))
        private = np.flatnonzero(~public_mask)
        return feature_plan(one_release_event(event, sigma, self.delta, self.neighboring),
                            spent, float(self.delta), accountant,
                            column_names(private, feature_names), False,
                            protected_columns=private, noise_multiplier=sigma,
                            schedule=schedule, details=details)

    def _clipped(self, X):
        """``X``'s rows with their public and protected blocks clipped as in ``fit``."""
        X = np.array(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
        b_p, b_q = self.row_norm_bounds_
        for cols, bound in ((self.public_features_, b_p), (self.private_features_, b_q)):
            if len(cols):
                block = X[:, cols]
                X[:, cols] = block * row_scale_factors(block, bound, "clip")[:, None]
        return X

    def transform(self, X: MatrixLike) -> np.ndarray:
        """Clip the rows as ``fit`` did, centre on ``mean_``, project on ``components_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components), float64
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", reset=False,
                          dtype=[np.float64, np.float32])
        return (self._clipped(X) - self.mean_) @ self.components_.T

    def inverse_transform(self, X: MatrixLike) -> np.ndarray:
        """Map components back to the (clipped) input space: ``X @ components_ + mean_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)
            Coordinates on the components (``transform``'s output).

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        return np.asarray(X, dtype=np.float64) @ self.components_ + self.mean_

    def __fdp_column_map__(self):
        """For each output column, the input columns it reads (non-zero loadings):
        the pipeline tracer's map (an output reading a protected column is protected)."""
        check_is_fitted(self)
        return [np.flatnonzero(row).tolist() for row in self.components_]

    @property
    def _n_features_out(self):
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.non_deterministic = self.noise == "secure"
        return tags

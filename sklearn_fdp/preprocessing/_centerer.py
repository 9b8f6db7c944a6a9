"""Private feature preprocessing: centring on a differentially private mean.

The row scaling and the Gaussian mean themselves live in
:mod:`sklearn_fdp._mechanisms.gaussian_mean` (shared with DPSGD-F).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import accounting
from .._distributed import check_partitioned, use_cluster
from .._docs import fill_doc
from .._mechanisms.gaussian_mean import gaussian_mean, scale_rows
from .._outofcore import as_row_source, should_stream, validate_row_source
from .._plan import record_plan
from .._random import NOISE_OPTIONS, spawn_generators
from .._validation import (
    DELTA_CONSTRAINT,
    Interval,
    StrOptions,
    _fit_context,
    atomic_fit,
    check_delta_vs_n,
    check_row_norms_finite,
    validate_numeric_data,
)

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from .._plan import PrivacyPlan
    from .._typing import ArrayLike, MatrixLike, RandomStateLike

__all__ = ["PrivateMeanCenterer"]

ROW_SCALINGS = ("normalize", "clip", "none")


@fill_doc
class PrivateMeanCenterer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Centre features on a differentially private estimate of their mean.

    ``fit`` scales every row to a fixed L2 bound ``norm_bound`` (a
    data-independent map), then releases the mean of the scaled rows plus
    Gaussian noise calibrated by the analytic Gaussian mechanism;
    ``transform`` applies the same row scaling and subtracts the released
    mean. ``fit`` is (ε, δ)-differentially private for whole records under
    the add/remove relation with the number of rows ``n`` treated as public;
    ``transform`` uses only the released mean (post-processing).

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy budget of one call to ``fit``. Must be in (0, inf).
    delta : float, default=1e-6
        δ of the guarantee, in (0, 1). Keep it well below ``1 / n_samples``
        (a :class:`~sklearn_fdp.exceptions.PrivacyLeakWarning` is issued
        otherwise).
    norm_bound : float, default=1.0
        L2 bound ``C`` of every (scaled) row, > 0; the sensitivity of the
        sum of the rows. Choose it without looking at the data.
    row_scaling : {"normalize", "clip", "none"}, default="normalize"
        ``"normalize"``: every non-zero row is scaled to norm exactly
        ``norm_bound`` (zero rows stay zero), as in the DPSGD-F paper (App.
        C). ``"clip"``: only rows of norm above ``norm_bound`` are scaled down
        to it. ``"none"``: for rows the user has already bounded, e.g.
        normalised upstream: ``transform`` does not rescale them, and ``fit``
        clips them to ``norm_bound`` silently before summing — a no-op when
        the bound holds, and what keeps the sensitivity at ``norm_bound``
        when it does not. ``fit`` neither raises nor warns on the norms
        (either would reveal one bit about the data outside the budget).
    random_state : int, RandomState instance or None, default=None
        Seeds the noise; a fixed value reproduces ``mean_``.
    noise : {"default", "secure"}, default="default"
        Source of the randomness privacy rests on: the Gaussian noise of the mean.
        ``"default"``: NumPy PCG64 streams spawned from ``random_state``
        (reproducible). ``"secure"``: fresh bits from the OS CSPRNG
        (``os.urandom``) and a Gaussian sampler hardened against floating-point
        attacks (four Box–Muller normals summed and halved, as in Opacus's
        ``secure_mode``); slower (user guide, "Secure noise"), and
        ``random_state`` no longer reproduces the fit. The accounting, and so
        ``epsilon_``, is the same.

    Attributes
    ----------
    mean_ : ndarray of shape (``n_features_in_``,)
        The released (noisy) mean of the scaled rows, float64.
    noise_std_ : float
        Standard deviation of the noise in each coordinate of ``mean_``:
        ``noise_multiplier_ * norm_bound / n_samples``.
    noise_multiplier_ : float
        σ of the analytic Gaussian mechanism for (``epsilon``, ``delta``):
        noise standard deviation of the sum divided by its sensitivity.
    epsilon_ : float
        ε spent by ``fit`` at ``delta_`` (the analytic Gaussian mechanism's
        exact ε, equal to ``epsilon`` up to calibration tolerance).
    [[delta_]]
    dp_event_ : dp_accounting.DpEvent
        ``GaussianDpEvent(noise_multiplier_)``, for re-accounting or for
        composing with the events of later steps of a pipeline.
    [[privacy_plan_]]
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Defined when ``X`` has string column names.

    Notes
    -----
    Privacy: unit = one record (row); neighbouring relation add/remove with
    ``n`` public: adding or removing a row changes the sum of the scaled rows
    by at most ``norm_bound`` in L2, and the mean is that sum divided by the
    public ``n``. (Under replace-one the sensitivity of the mean would be
    ``2 * norm_bound / n``; this transformer accounts add/remove only.)
    The noise is ``N(0, (σ norm_bound / n)²)`` per coordinate with
    ``σ = accounting.gaussian_noise_multiplier(epsilon, delta)``.

    ``transform`` scales the rows exactly as ``fit`` did, so training and
    test data see the same map ``x -> scale(x) - mean_`` (with
    ``row_scaling="none"``, ``x -> x - mean_``; ``mean_`` is then the noisy
    mean of the rows clipped to ``norm_bound``, equal in distribution to the
    plain noisy mean whenever the bound holds).
    ``inverse_transform`` adds ``mean_`` back but cannot undo the row
    scaling (the original norms are not kept).

    Before a feature-DP estimator (protected and public columns), the row
    scaling of ``"normalize"`` and ``"clip"`` is **not** private: it divides
    the public columns of a row by a norm that contains its protected
    columns, so the public columns the estimator uses without noise reveal
    them (``mean_``, the private release, is not the problem). Centre each
    block apart (one centerer for the public columns, one for the protected
    ones, in a :class:`~sklearn.compose.ColumnTransformer`; the two
    ``dp_event_`` compose to the same guarantee as one centerer of
    ``norm_bound`` ``sqrt(C_pub² + C_priv²)``), or use ``row_scaling="none"``
    on rows bounded upstream by data-independent constants.
    :class:`~sklearn_fdp.pipeline.PrivatePipeline` warns
    (:class:`~sklearn_fdp.exceptions.PrivacyLeakWarning`) and
    :func:`~sklearn_fdp.privacy_report` reports such a pipeline as not private.

    Used in a :class:`~sklearn.pipeline.Pipeline` before a private
    estimator, the pipeline spends the composition of both fits: at most
    ``epsilon + clf.epsilon`` at ``delta + clf.delta``, or less when their
    ``dp_event_`` are composed with :func:`sklearn_fdp.accounting.compose_events`
    and accounted together. :class:`~sklearn_fdp.DPSGDFClassifier` does this
    composition inside one fit.

    References
    ----------
    Balle & Wang, "Improving the Gaussian Mechanism for Differential
    Privacy: Analytical Calibration and Optimal Denoising", ICML 2018.
    DPSGD-F paper, Algorithm 3 and Appendix C.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp import PrivateMeanCenterer
    >>> X = np.random.default_rng(0).normal(size=(20000, 3)) + 5.0
    >>> centerer = PrivateMeanCenterer(epsilon=1.0, delta=1e-6, random_state=0).fit(X)
    >>> Xt = centerer.transform(X)
    >>> bool(np.all(np.abs(Xt.mean(axis=0)) < 0.01))
    True
    """

    _parameter_constraints: dict = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": DELTA_CONSTRAINT,
        "norm_bound": [Interval(Real, 0, None, closed="neither")],
        "row_scaling": [StrOptions(set(ROW_SCALINGS))],
        "random_state": ["random_state"],
        "noise": [StrOptions(set(NOISE_OPTIONS))],
    }

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-6,
        norm_bound: float = 1.0,
        row_scaling: Literal["clip", "none", "normalize"] = "normalize",
        random_state: RandomStateLike = None,
        noise: Literal["default", "secure"] = "default",
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.norm_bound = norm_bound
        self.row_scaling = row_scaling
        self.random_state = random_state
        self.noise = noise

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X: MatrixLike, y: None = None) -> Self:
        """Release the private mean of the scaled rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Dense training data.
        y : None
            Ignored.

        Returns
        -------
        self : PrivateMeanCenterer
        """
        name = type(self).__name__
        if use_cluster(X):
            # A dask array with a distributed Client: validated and summed on the
            # workers, partition by partition (sklearn_fdp._distributed).
            X, _ = check_partitioned(self, X)
        elif should_stream(X):
            # A large numpy.memmap / dask array: checked and summed in row
            # blocks (sklearn_fdp._outofcore), never read into memory whole.
            X, _ = validate_row_source(self, X, None)
        else:
            X = validate_numeric_data(self, X, dtype=[np.float64, np.float32], order="C")
            check_row_norms_finite(X, name)
        n_samples, n_features = X.shape
        check_delta_vs_n(self.delta, n_samples, name)
        plan = self.privacy_plan(n_samples, n_features)
        # "none": rows the user bounded; clipping them (a no-op when the bound
        # holds) keeps the sensitivity at norm_bound without any data-dependent
        # error or warning.
        scaling = "clip" if self.row_scaling == "none" else self.row_scaling
        (rng,) = spawn_generators(self.random_state, 1)
        (mean, noise_std), _ = gaussian_mean(X, float(self.norm_bound), plan.noise_multiplier,
                                             rng, row_scaling=scaling, noise=self.noise)
        self.mean_ = mean
        self.noise_std_ = noise_std
        self.noise_multiplier_ = plan.noise_multiplier
        self.dp_event_ = plan.dp_event
        self.epsilon_ = plan.epsilon
        self.delta_ = plan.delta
        self.privacy_plan_ = plan
        return self

    @fill_doc
    def privacy_plan(self, n_samples: int, n_features: int, *,
                     feature_names: ArrayLike | None = None) -> PrivacyPlan:
        """What a fit on ``n_samples`` × ``n_features`` data spends and protects.

        Computed from public quantities only (the parameters): one analytic
        Gaussian release of the mean, ``GaussianDpEvent(σ)`` with σ
        calibrated to (``epsilon``, ``delta``), protecting whole records.
        ``fit`` adds noise of multiplier ``noise_multiplier`` and stores the
        plan as ``privacy_plan_``.

        Parameters
        ----------
        [[plan_shape]]
        feature_names : array-like of str or None, default=None
            Column names (unused: the mean protects whole records).

        Returns
        -------
        plan : PrivacyPlan
            ``accountant`` is ``"analytic"``: ε is the analytic Gaussian
            mechanism's exact ε (Balle & Wang 2018).
        """
        sigma = accounting.gaussian_noise_multiplier(self.epsilon, self.delta)
        return record_plan(accounting.gaussian_event(sigma),
                           accounting.gaussian_epsilon(sigma, self.delta), float(self.delta),
                           "analytic", noise_multiplier=float(sigma))

    def transform(self, X: MatrixLike) -> np.ndarray:
        """Scale the rows as in ``fit``, then subtract ``mean_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data to centre (train or new data: the same map applies).

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_features)
            Same float dtype as ``X`` (float64 for other dtypes). An
            in-memory array even when ``X`` is a ``numpy.memmap`` or a dask
            array (as every scikit-learn transformer returns): it needs as
            much memory as ``X`` would. A large out-of-core ``X`` is read in
            row blocks, so nothing else of its size is allocated; to keep
            the centred data out of memory too, transform it block by block
            into a memmap of your own (``out[a:b] = centerer.transform(X[a:b])``),
            or let :class:`~sklearn_fdp.DPSGDFClassifier` centre each batch.
        """
        check_is_fitted(self)
        if should_stream(X):
            return self._map_out_of_core(X, self._centre_rows)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        Xs = self._scale_for_transform(X)
        Xs -= self.mean_.astype(Xs.dtype, copy=False)
        return Xs

    def _centre_rows(self, block):
        """``transform`` of a block of validated rows (row by row)."""
        Xs = self._scale_for_transform(block)
        Xs -= self.mean_.astype(Xs.dtype, copy=False)
        return Xs

    def _map_out_of_core(self, X, fn):
        """``fn`` of every row block of a large memmap or dask array, into one ndarray.

        The rows are read from the file in blocks (as in ``fit``), checked
        like ``validate_data`` checks them, and written into the output:
        the output is the only array of ``X``'s size.
        """
        from .._validation import _assert_all_finite, _check_feature_names, _check_n_features

        name = type(self).__name__
        _check_feature_names(self, X, reset=False)
        source = as_row_source(X, name)
        _check_n_features(self, X, reset=False)
        out = np.empty(source.shape, dtype=source.dtype)
        for start, block in source.iter_chunks():
            _assert_all_finite(block, allow_nan=False, input_name="X", estimator_name=name)
            out[start:start + len(block)] = fn(block)
        return out

    def _scale_for_transform(self, X):
        if self.row_scaling == "none":
            # The norm bound matters for the privacy of fit only; new data are
            # not checked (and not rescaled).
            return np.array(X, copy=True, order="C")
        return scale_rows(X, float(self.norm_bound), self.row_scaling)

    def inverse_transform(self, X: MatrixLike) -> np.ndarray:
        """Add ``mean_`` back. The row scaling of ``transform`` is not undone.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Centred data, as returned by :meth:`transform`.

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
            The scaled rows (not the original ones, unless
            ``row_scaling="none"``).
        """
        check_is_fitted(self)
        if should_stream(X):
            return self._map_out_of_core(X, lambda b: b + self.mean_.astype(b.dtype, copy=False))
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        return X + self.mean_.astype(X.dtype, copy=False)

    def __fdp_mixes_rows__(self):
        """Whether ``transform`` computes a column of a row from the other columns.

        True unless ``row_scaling="none"``: the row scaling divides every column
        by the row's norm, so under feature DP the public columns of the output
        depend on the protected ones (:func:`sklearn_fdp.pipeline.mixes_rows`;
        :class:`~sklearn_fdp.pipeline.PrivatePipeline` then warns).

        Returns
        -------
        bool
        """
        return self.row_scaling != "none"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        # noise="secure" draws from the OS CSPRNG: random_state does not fix mean_.
        tags.non_deterministic = self.noise == "secure"
        return tags

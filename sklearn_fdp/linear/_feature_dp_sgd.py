"""What FeatureDPLogisticRegression and FeatureDPSGDRegressor share: feature DP by SGD.

Both protect the declared private columns (and the label or target unless
``label_public``) with FDP Algorithm 1 or FDP (DP-SGD), so they plan alike (which
columns are public, the resolved ``method``, its clip, the public batch, σ for the
budget: :meth:`FeatureDPSGD.privacy_plan`), open a fit alike
(:meth:`FeatureDPSGD._plan_feature_fit`) and store the same feature split
(:meth:`FeatureDPSGD._store_feature_split`). What differs stays in their modules
and reaches this one through three class attributes and two hooks:

* ``_AUTO_CLIP`` (the clip of ``max_grad_norm="auto"`` per method) and
  ``_LABEL_FREE_PRETRAINING`` (why public pretraining needs a public label);
* ``_resolve_method(public_mask)`` (``"auto"`` resolved, the method's own checks)
  and ``_plan_schedule(method, sgd, n_samples)`` (the classifier's label statistic
  is one release at rate 1; by default, the DP-SGD schedule).

Their constructors stay apart (scikit-learn's convention spells each estimator's
parameters out in its ``__init__``), as do their losses and the runs per method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._budget import (
    calibrate_dpsgd,
    check_budget_params,
    dpsgd_schedule,
    resolve_public_batch_size,
)
from .._docs import fill_doc
from .._distributed._dpsgd import linear_oracle, refuse_cluster_pretraining
from .._mechanisms.fdp import rescaled_for_public_steps
from .._outofcore import is_dask_array
from .._plan import feature_plan
from .._random import spawn_generators
from .._validation import check_delta_vs_n
from ..features import resolve_feature_spec, spec_feature_names
from ._base import _INIT, _NOISE, _SAMPLE

if TYPE_CHECKING:  # annotations only
    from .._plan import PrivacyPlan
    from .._typing import ArrayLike


class FeatureDPSGD:
    """The plan, the opening and the stored feature split of a feature-DP SGD estimator."""

    _AUTO_CLIP: dict = {}
    _LABEL_FREE_PRETRAINING = ""

    @fill_doc
    def privacy_plan(self, n_samples: int, n_features: int, *,
                     feature_names: ArrayLike | None = None) -> PrivacyPlan:
        """What a fit on ``n_samples`` × ``n_features`` data spends and protects.

        Computed from public quantities only (the shape, the column names
        and the parameters); ``fit`` runs with the σ it holds and stores it
        as ``privacy_plan_``. It protects the private columns (and the
        label or target unless ``label_public``); its ``details`` hold the
        resolved ``method``, ``public_mask``, ``max_grad_norm`` (for
        ``"sufficient_statistic"`` the fit may clip lower, see
        ``max_grad_norm_``) and ``public_batch_size``.

        Parameters
        ----------
        [[plan_shape]]
        feature_names : array-like of str or None, default=None
            Column names, to resolve names in ``public_features`` /
            ``private_features`` and to name the protected columns (else
            ``"x<i>"``).

        Returns
        -------
        plan : PrivacyPlan
        """
        check_budget_params(self)
        name = type(self).__name__
        if self.public_epochs != "auto" and self.public_epochs > 0 and not self.label_public:
            raise ValueError(
                f"public_epochs={self.public_epochs!r} of {name} needs label_public=True: "
                + self._LABEL_FREE_PRETRAINING
                + " Set public_epochs=0 or label_public=True."
            )
        sgd = dpsgd_schedule(self, n_samples)  # checks batch_size for every method
        public_mask = resolve_feature_spec(self.public_features, self.private_features,
                                           n_features, feature_names, name,
                                           label_public=self.label_public)
        method = self._resolve_method(public_mask)
        details = dict(
            method=method, public_mask=public_mask,
            max_grad_norm=(self._AUTO_CLIP[method] if self.max_grad_norm == "auto"
                           else float(self.max_grad_norm)),
            public_batch_size=resolve_public_batch_size(self, sgd.batch_size, n_samples),
        )
        schedule = self._plan_schedule(method, sgd, n_samples)
        sigma, event, spent, accountant = calibrate_dpsgd(self, schedule.sampling_rate,
                                                          schedule.steps)
        private = np.flatnonzero(~public_mask)
        protected = ([f"x{int(i)}" for i in private] if feature_names is None
                     else [str(feature_names[int(i)]) for i in private])
        return feature_plan(event, spent, float(self.delta), accountant, protected,
                            not self.label_public, protected_columns=private,
                            noise_multiplier=sigma, schedule=schedule, details=details)

    def _plan_schedule(self, method, sgd, n_samples):
        return sgd

    def _plan_feature_fit(self, X, feature_names):
        """``(column names, plan, random streams)`` of a fit on the validated ``X``.

        ``noise="secure"``: the batch coins and the noise come from the OS CSPRNG
        (Algorithm 1's private padding too: ``alg1_oracles`` decides that).
        """
        n_samples, n_features = X.shape
        check_delta_vs_n(self.delta, n_samples, type(self).__name__)
        names = spec_feature_names(self, n_features, feature_names)
        plan = self.privacy_plan(n_samples, n_features, feature_names=names)
        gens = spawn_generators(self.random_state, 4, noise=self.noise,
                                private_streams=(_SAMPLE, _NOISE))
        return names, plan, gens

    def _store_feature_split(self, names, plan, run):
        """Store the resolved method, the columns' split and what the run resolved."""
        public_mask = plan.details["public_mask"]
        self.method_ = plan.details["method"]
        self.feature_names_ = names
        self.public_mask_ = public_mask
        self.public_features_ = np.flatnonzero(public_mask)
        self.private_features_ = np.flatnonzero(~public_mask)
        self.label_public_ = bool(self.label_public)
        self.public_batch_size_ = plan.details["public_batch_size"]
        self.public_scale_ = run.public_scale
        self.alpha_ = run.alpha
        self.max_grad_norm_ = run.max_grad_norm


def dpsgd_start(est, X, y, loss, plan, gens, pretrained):
    """``(X, public scale, private oracle, θ0)`` of FDP (DP-SGD), §6.3: public pretraining
    (``pretrained``, the estimator's), then DP-SGD on the whole loss from θ0.

    Only public SGD steps need the rescaling (the least-squares start reads the public
    columns as they are; the DP-SGD steps are clipped).
    """
    if is_dask_array(X):  # on a dask.distributed cluster: starts from zeros (no pretraining)
        refuse_cluster_pretraining(est)
    if est.public_epochs != "auto" and est.public_epochs > 0:
        X, scale = rescaled_for_public_steps(X, plan.details["public_mask"])
    else:
        scale = 1.0
    private = linear_oracle(est, X, y, loss, est.fit_intercept, plan.details["max_grad_norm"],
                            encoded=True)
    return X, scale, private, pretrained(est, X, y, loss, plan, gens[_INIT])

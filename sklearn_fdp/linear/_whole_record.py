"""What DPSGDClassifier and DPSGDRegressor share: DP-SGD that protects whole records.

Both plan alike (one DP-SGD run over every record, σ calibrated to the budget:
:meth:`WholeRecordDPSGD.privacy_plan`) and run alike (the linear per-example
gradient oracle handed to the engine: :func:`run_whole_record_dpsgd`). What
differs stays in their modules: the target (class labels, one output per class;
a real target mapped by ``y_bounds``, one output), the loss, the learning-rate
rule, and what the fit stores. Their constructors stay apart: scikit-learn's
convention wants each estimator's parameters spelled out in its ``__init__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._budget import calibrate_dpsgd, check_budget_params, dpsgd_schedule
from .._docs import fill_doc
from .._distributed._dpsgd import linear_oracle, weights_dtype
from .._engine import run_dp_sgd
from .._plan import record_plan
from .._random import spawn_generators
from .._validation import check_delta_vs_n
from ._base import _NOISE, _SAMPLE, engine_config, epoch_printer

if TYPE_CHECKING:  # annotations only
    from .._plan import PrivacyPlan
    from .._typing import ArrayLike


class WholeRecordDPSGD:
    """The privacy plan of a DP-SGD estimator that protects whole records."""

    @fill_doc
    def privacy_plan(self, n_samples: int, n_features: int, *,
                     feature_names: ArrayLike | None = None) -> PrivacyPlan:
        """What a fit on ``n_samples`` × ``n_features`` data spends and protects.

        Computed from public quantities only (the shape and the parameters);
        ``fit`` runs with the σ it holds and stores it as ``privacy_plan_``.

        Parameters
        ----------
        [[plan_shape]]
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


def plan_fit(est, X):
    """The plan of a fit on ``X`` (validated), after checking ``delta`` against its rows."""
    n_samples, n_features = X.shape
    check_delta_vs_n(est.delta, n_samples, type(est).__name__)
    return est.privacy_plan(n_samples, n_features)


def run_whole_record_dpsgd(est, X, target, loss, plan, n_outputs, learning_rate_of):
    """``(θ, learning rate)`` of DP-SGD on ``X`` with the encoded ``target`` and ``loss``.

    ``learning_rate_of(noise_std, n_rows)`` is the estimator's learning-rate
    rule (``noise_std`` = σ·C, ``n_rows`` = features plus the intercept).
    ``noise="secure"``: the batch coins and the noise come from the OS CSPRNG.
    """
    n_samples, n_features = X.shape
    gens = spawn_generators(est.random_state, 4, noise=est.noise,
                            private_streams=(_SAMPLE, _NOISE))
    clip = float(est.max_grad_norm)
    # On a dask.distributed cluster the clipped sums are computed by the workers.
    oracle = linear_oracle(est, X, target, loss, est.fit_intercept, clip)
    n_rows = n_features + int(est.fit_intercept)
    learning_rate = learning_rate_of(plan.noise_multiplier * clip, n_rows)
    result = run_dp_sgd(
        np.zeros((n_rows, n_outputs), dtype=weights_dtype(est, X)), oracle, n_samples,
        engine_config(est, plan, clip, learning_rate),
        sample_rng=gens[_SAMPLE], noise_rng=gens[_NOISE], callback=epoch_printer(est, plan),
    )
    return result.theta, learning_rate

"""Deliberately broken variants of the estimators, for the privacy audits to catch.

``tests/test_audit_canary.py`` checks that the audits flag them and
``benchmarks/bench_audit.py`` measures by how much; both use these classes.

* :class:`ZeroNoise` stands in for the engine's ``NoiseStream`` (patch
  ``sklearn_fdp._engine._loop.NoiseStream``): every draw is zero, so no noise
  is added while ε is still accounted as if it were.
* :class:`UnclippedDPSGD` and :class:`UnclippedFDP`: the per-example (or
  ∇ℓ − ∇ℓ_pub) gradients are never clipped, while ε is accounted with
  ``max_grad_norm``.
"""

from unittest import mock

import numpy as np

from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression
from sklearn_fdp._engine import LinearGradientOracle
from sklearn_fdp._mechanisms import fdp
from sklearn_fdp import _engine as engine_module  # linear_oracle imports the oracle from it per fit


class ZeroNoise:
    """Stand-in for the engine's NoiseStream: every draw is zero."""

    def __init__(self, rng, shape, dtype, *args, **kwargs):
        self.shape, self.dtype = shape, dtype

    def draw(self):
        return np.zeros(self.shape, self.dtype)

    def close(self):
        pass


def never_clips(oracle_class):
    """``oracle_class`` whose call never clips, while it declares its clip (the noise's scale)."""

    class Unclipped(oracle_class):
        def __call__(self, idx, theta):
            clip, self.max_grad_norm = self.max_grad_norm, np.inf
            try:
                return super().__call__(idx, theta)
            finally:
                self.max_grad_norm = clip

    return Unclipped


class UnclippedDPSGD(DPSGDClassifier):
    """DP-SGD whose oracle never clips (ε still accounted with max_grad_norm)."""

    def fit(self, X, y, **kwargs):
        with mock.patch.object(engine_module, "LinearGradientOracle",
                               never_clips(LinearGradientOracle)):
            return super().fit(X, y, **kwargs)


class UnclippedFDP(FeatureDPLogisticRegression):
    """FDP Algorithm 1 whose private oracle never clips ∇ℓ − ∇ℓ_pub."""

    def fit(self, X, y, **kwargs):
        with mock.patch.object(fdp, "FeatureDPPrivateOracle",
                               never_clips(fdp.FeatureDPPrivateOracle)):
            return super().fit(X, y, **kwargs)

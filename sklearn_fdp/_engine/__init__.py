"""The DP optimisation engine: samplers, gradient oracles and the one loop."""

from ._linear import (
    LOSSES,
    REGRESSION_LOSSES,
    LinearGradientOracle,
    LinearLoss,
    split_theta,
    squared_row_norms,
)
from ._config import LR_SCHEDULES, EngineConfig, EngineResult
from ._loop import run_dp_sgd
from ._samplers import PoissonSampler, UniformSampler

__all__ = [
    "LOSSES",
    "LR_SCHEDULES",
    "REGRESSION_LOSSES",
    "EngineConfig",
    "EngineResult",
    "LinearGradientOracle",
    "LinearLoss",
    "PoissonSampler",
    "UniformSampler",
    "run_dp_sgd",
    "split_theta",
    "squared_row_norms",
]

"""Odd but legal settings: every private estimator fits or fails fast (issue 20, item 7).

Each private estimator at its defaults (only the protected columns named, as
a user would) is fitted on 200-row data under one odd setting the parameter
constraints accept: δ >= 1/n, ``batch_size=1``, a single step, entries near
1e150 or 1e-150, ε = 1e6 or 1e-6, a tiny or huge clipping norm, 1 to 3 rows,
one feature, a constant feature. Each must either fit (a fitted model whose
``predict`` returns labels of ``y``, or finite values for a regressor) or
raise a ``ValueError`` (or its subclass ``BudgetExceededError``) whose
message names the offending value —
within :data:`CPU_TIMEOUT` seconds of CPU time (``ITIMER_PROF``, so that a
loaded test machine does not fail a fast fit) and :data:`WALL_TIMEOUT`
seconds of wall-clock time (``ITIMER_REAL``, for a fit that waits): a hang
fails the test instead of stalling the suite.

The issue reported hangs of 12-90 s for δ = 0.1, ``batch_size=1``, one
step, 1e150 entries and ε = 1e6; on this code the slowest settings take
about 5 s of CPU, all of it in the PLD calibration of σ (ε = 1e-6: its
discretisation is refined at each of about 36 evaluations; δ = 0.1 at
ε = 0.03; one step at sampling rate 1/200), every other one about a second.
"""

import signal
import warnings
from contextlib import contextmanager

import numpy as np
import pytest
from sklearn.base import clone, is_regressor
from threadpoolctl import threadpool_limits

from sklearn_fdp import (
    AdaMixClassifier,
    DPSGDClassifier,
    DPSGDFClassifier,
    DPSGDRegressor,
    FeatureDPLinearRegression,
    FeatureDPLogisticRegression,
    FeatureDPSGDRegressor,
    FeatureDPStackingClassifier,
    FeatureDPStackingRegressor,
    PrivateMeanCenterer,
)
from sklearn_fdp.exceptions import FdpWarning

from ._helpers import unit_rows

CPU_TIMEOUT = 20  # CPU seconds per fit; the slowest setting takes about 5 s
WALL_TIMEOUT = 120  # wall-clock seconds per fit, for a fit blocked without computing
N, D = 200, 4

ESTIMATORS = {
    "DPSGDClassifier": DPSGDClassifier(random_state=0),
    "FeatureDPLogisticRegression": FeatureDPLogisticRegression(private_features=[0],
                                                               random_state=0),
    "FeatureDPLinearRegression": FeatureDPLinearRegression(private_features=[0],
                                                           y_bounds=(0.0, 1.0), random_state=0),
    "DPSGDFClassifier": DPSGDFClassifier(random_state=0),
    "AdaMixClassifier": AdaMixClassifier(random_state=0),
    "PrivateMeanCenterer": PrivateMeanCenterer(random_state=0),
    # Regression on the 0/1 labels (its predictions are checked to be finite).
    "DPSGDRegressor": DPSGDRegressor(y_bounds=(0.0, 1.0), random_state=0),
    "FeatureDPSGDRegressor": FeatureDPSGDRegressor(private_features=[0], y_bounds=(0.0, 1.0),
                                                   random_state=0),
    "FeatureDPStackingClassifier": FeatureDPStackingClassifier(private_features=[0],
                                                               random_state=0),
    "FeatureDPStackingRegressor": FeatureDPStackingRegressor(private_features=[0],
                                                             y_bounds=(0.0, 1.0),
                                                             random_state=0),
}
try:  # MLPFeatureDP needs the optional torch extra
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - exercised without torch
    pass
else:
    from sklearn_fdp import MLPFeatureDP, MLPFeatureDPRegressor

    ESTIMATORS["MLPFeatureDP"] = MLPFeatureDP(hidden_layer_sizes=(8,), private_features=[0],
                                              device="cpu", random_state=0)
    # The data's target is 0/1: y_bounds=(0, 1) is its public range.
    ESTIMATORS["MLPFeatureDPRegressor"] = MLPFeatureDPRegressor(
        hidden_layer_sizes=(8,), private_features=[0], y_bounds=(0.0, 1.0), device="cpu",
        random_state=0)

# name -> (parameters, transformation of (X, y)); None: the data as they are.
SETTINGS = {
    "delta_above_1_over_n": ({"delta": 0.1}, None),
    "delta_above_1_over_n_small_eps": ({"delta": 0.1, "epsilon": 0.03}, None),
    "batch_size_1": ({"batch_size": 1}, None),
    "one_step": ({"epochs": 1e-3}, None),
    "batch_size_1_one_step": ({"batch_size": 1, "epochs": 1e-3}, None),
    "entries_1e150": ({}, lambda X, y: (X * 1e150, y)),
    "entries_1e-150": ({}, lambda X, y: (X * 1e-150, y)),
    "epsilon_1e6": ({"epsilon": 1e6}, None),
    "epsilon_1e-6": ({"epsilon": 1e-6}, None),
    "max_grad_norm_tiny": ({"max_grad_norm": 1e-12}, None),
    "max_grad_norm_huge": ({"max_grad_norm": 1e12}, None),
    "one_row": ({}, lambda X, y: (X[:1], y[:1])),
    "two_rows": ({}, lambda X, y: (X[:2], np.array([0, 1]))),
    "three_rows": ({}, lambda X, y: (X[:3], np.array([0, 1, 0]))),
    "one_feature": ({}, lambda X, y: (X[:, :1], y)),
    "constant_feature": ({}, lambda X, y: (np.column_stack([X[:, :1], np.full(len(X), 0.5),
                                                           X[:, 2:]]), y)),
}


@contextmanager
def time_limit(cpu_seconds, wall_seconds):
    """Fail (instead of hang) when the block runs longer than either limit.

    The block runs with one OpenMP/BLAS thread: ``ITIMER_PROF`` counts every
    thread of the process, and on a machine whose cores are busy the worker
    threads of an OpenMP pool (HistGradientBoosting's, in the stacking
    estimators) spin-wait at each barrier, so a 0.9 s fit was charged 20-50 s
    of CPU time here at load 10. The limit is on the fit's work, not on spinning.
    """
    def handler(signum, frame):
        raise TimeoutError(f"the fit ran longer than {cpu_seconds} s of CPU time or "
                           f"{wall_seconds} s of wall-clock time")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
    signal.setitimer(signal.ITIMER_REAL, wall_seconds)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, old in previous.items():
            signal.signal(sig, old)


@pytest.fixture(scope="module")
def data():
    return unit_rows(N, D)


def _applicable(est, params):
    """The setting's parameters that ``est`` has (AdaMix has no batch size or
    epochs, the centerer no gradients); None when none of them applies."""
    own = est.get_params()
    kept = {k: v for k, v in params.items() if k in own}
    if params and not kept or ("delta" in params and "delta" not in kept):
        return None
    return kept


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs POSIX interval timers")
@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_odd_setting_fits_or_fails_fast(name, setting, data):
    params, transform = SETTINGS[setting]
    est = clone(ESTIMATORS[name])
    kept = _applicable(est, params)
    if kept is None:
        pytest.skip(f"{name} has no parameter {sorted(params)}")
    est.set_params(**kept)
    X, y = data if transform is None else transform(*data)
    error = None
    with warnings.catch_warnings():
        # δ >= 1/n warns (PrivacyLeakWarning) and the fit goes on; any other
        # warning of the package is allowed here too: this test is about time.
        warnings.simplefilter("ignore", FdpWarning)
        with time_limit(CPU_TIMEOUT, WALL_TIMEOUT):
            try:
                if name == "PrivateMeanCenterer":
                    est.fit(X)
                else:
                    est.fit(X, y)
            except ValueError as exc:  # BudgetExceededError is a ValueError
                error = exc
    if error is not None:
        message = str(error)
        # A clear error names the estimator or the parameter and says what to do.
        assert len(message) > 40, message
        assert any(word in message for word in (name, "epsilon", "noise_multiplier", "class",
                                                "rows", "row", "Use", "Raise")), message
        return
    if name == "PrivateMeanCenterer":
        out = est.transform(X)
        assert out.shape == X.shape and np.isfinite(out).all()
    elif is_regressor(est):
        pred = est.predict(X)
        assert pred.shape == (len(X),) and np.isfinite(pred).all()
    else:
        pred = est.predict(X)
        assert pred.shape == (len(X),)
        if is_regressor(est):
            assert np.isfinite(pred).all()
        else:
            assert set(np.unique(pred)) <= set(np.unique(y))


SEARCH_SETTINGS = {
    "delta_above_1_over_n": ({"delta": 0.1}, {}, None),
    "epsilon_1e6": ({"epsilon": 1e6}, {}, None),
    "epsilon_1e-6": ({"epsilon": 1e-6}, {}, None),
    "batch_size_1": ({}, {"batch_size": 1}, None),
    "one_step": ({}, {"epochs": 1e-3}, None),
    "entries_1e150": ({}, {}, lambda X, y: (X * 1e150, y)),
    "three_rows": ({}, {}, lambda X, y: (X[:3], np.array([0, 1, 0]))),
}


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs POSIX interval timers")
@pytest.mark.parametrize("setting", list(SEARCH_SETTINGS))
def test_private_search_odd_setting_fits_or_fails_fast(setting, data):
    from sklearn_fdp.model_selection import PrivateRandomizedSearchCV

    search_params, est_params, transform = SEARCH_SETTINGS[setting]
    search = PrivateRandomizedSearchCV(
        DPSGDClassifier(random_state=0, **est_params), {"learning_rate": [0.1, 1.0]},
        n_iter=2, random_state=0, **{"epsilon": 1.0, **search_params})
    X, y = data if transform is None else transform(*data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FdpWarning)
        with time_limit(CPU_TIMEOUT, WALL_TIMEOUT):
            try:
                search.fit(X, y)
            except ValueError as exc:
                assert len(str(exc)) > 40 and any(
                    word in str(exc) for word in ("epsilon", "noise_multiplier", "rows", "class",
                                                  "Use", "Raise")), str(exc)
                return
    assert set(np.unique(search.predict(X))) <= set(np.unique(y))

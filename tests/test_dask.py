"""Hyperparameter sweeps on a Dask cluster through joblib's dask backend.

GridSearchCV and cross_val_score dispatch their fits with joblib; under
``joblib.parallel_backend("dask")`` the fits run on the workers of a
``distributed`` cluster. A fit with a fixed ``random_state`` depends on
nothing but its data and parameters, so the scores must be exactly those of
the local, sequential run. The cluster is a ``LocalCluster`` started here
(threads in this process: quick to start, and numba's compiled kernels are
shared); pointing the same code at a real cluster only changes the Client
(docs/scale.md).
"""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score

from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression

distributed = pytest.importorskip("distributed")
joblib = pytest.importorskip("joblib")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def _data(n=600, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


COMMON = dict(delta=1e-5, epochs=2, accountant="rdp", random_state=0)
CV = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)


def _comparable(cv_results):
    """cv_results_ without the wall-clock columns."""
    return {k: v for k, v in cv_results.items() if "time" not in k}


def _assert_same_results(local, remote):
    assert local.keys() == remote.keys()
    for key in local:
        a, b = local[key], remote[key]
        if key == "params":
            assert a == b
        else:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=key)


@pytest.mark.parametrize(
    "estimator, grid",
    [
        (DPSGDClassifier(**COMMON), {"epsilon": [0.5, 2.0], "max_grad_norm": [0.5, 1.0]}),
        (FeatureDPLogisticRegression(private_features=[0], **COMMON),
         {"epsilon": [0.5, 2.0], "alpha": ["auto", 0.5]}),
    ],
    ids=["DPSGDClassifier", "FeatureDPLogisticRegression"],
)
def test_grid_search_on_dask_matches_local_run(client, estimator, grid):
    X, y = _data()
    local = GridSearchCV(clone(estimator), grid, cv=CV, n_jobs=1).fit(X, y)
    with distributed.get_task_stream(client) as tasks:
        with joblib.parallel_backend("dask"):
            remote = GridSearchCV(clone(estimator), grid, cv=CV, n_jobs=-1).fit(X, y)
    assert len(tasks.data) > 0  # the fits ran on the cluster's workers
    _assert_same_results(_comparable(local.cv_results_), _comparable(remote.cv_results_))
    assert local.best_params_ == remote.best_params_
    np.testing.assert_array_equal(local.best_estimator_.coef_, remote.best_estimator_.coef_)
    assert local.best_estimator_.epsilon_ == remote.best_estimator_.epsilon_


def test_cross_val_score_on_dask_matches_local_run(client):
    X, y = _data(seed=1)
    est = FeatureDPLogisticRegression(private_features=[1, 2], epsilon=1.0, **COMMON)
    local = cross_val_score(est, X, y, cv=CV, n_jobs=1)
    with distributed.get_task_stream(client) as tasks:
        with joblib.parallel_backend("dask"):
            remote = cross_val_score(est, X, y, cv=CV, n_jobs=-1)
    assert len(tasks.data) > 0
    np.testing.assert_array_equal(local, remote)

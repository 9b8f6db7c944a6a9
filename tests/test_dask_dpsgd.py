"""DP-SGD fits on a dask.distributed cluster (sklearn_fdp/_distributed/_dpsgd.py).

One ``LocalCluster(processes=True, n_workers=2)`` started here, shared by the
module. Each step's Poisson batch is drawn in the fitting process by the
engine's sampler (the in-process draws), the clipped sums are computed on the
workers by the in-process oracles, added in partition order, and the engine
adds one Gaussian draw. These tests check

* that every estimator's cluster fit equals its in-process fit with the same
  ``random_state``, dense and CSR, up to the tolerance derived below;
* that the engine draws the noise exactly once per step, in the fitting
  process, and that a one-run canary audit of the cluster fit does not refute
  its ε;
* that a worker killed mid-fit makes the fit recompute (the same model);
* ``noise="secure"`` on the cluster.

CSR on the cluster is compared with the in-process fit of the same rows as a
dense array: in process, CSR data takes the lazy-noise loop (the same law,
other draws), while a cluster fit runs the eager loop, whose noise draws are
the dense fit's.

Tolerance. The two fits take the same steps with the same batches and the same
noise; only the clipped sum of each step is added in another order. A sum of
``m`` terms of norm at most ``C`` differs between two orders by at most
``2 (m − 1) m C u`` per entry (Higham 2002, §4.2; ``u = 2⁻⁵³``), so the step's
normalised gradient by ``δ = √p · 2 (m − 1) m C u / (q n)`` in L2 (``p``
entries). The iterate of heavy-ball SGD, ``v' = μ v + g(θ) + δ_t``,
``θ' = θ − η v'``, with ``g`` ``L``-Lipschitz, moves the error
``E = max(‖e_θ‖, ‖e_v‖)`` to at most ``(1 + η)(μ + L + λ) E + (1 + η) δ``
(weight decay ``λ``); the averaged tail is a convex combination of iterates.
``L``: clipping is a projection (1-Lipschitz), a per-example gradient of the
log or squared loss is ``‖x~‖²``-Lipschitz (Algorithm 1's ``∇ℓ − ∇ℓ_pub``
at most twice that), so ``L ≤ 2 m R² / (q n) + R²`` (``R = max ‖x~‖``; the
last term Algorithm 1's public mean). ``m`` is bounded by ``q n + 8 √(q n)``
(a Binomial tail far beyond any draw of these tests). Unrolled over the ``T``
steps this gives the bound of :func:`tolerance` (a few 1e-6 here, against
observed differences of 1e-15 and a noise of order 1).
"""

import concurrent.futures
import math
import os
import signal
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from sklearn.base import BaseEstimator  # noqa: E402

from sklearn_fdp import (  # noqa: E402
    DPSGDClassifier,
    DPSGDRegressor,
    FeatureDPLogisticRegression,
    FeatureDPSGDRegressor,
)
from sklearn_fdp._distributed._dpsgd import ClusterGradientOracle  # noqa: E402
from sklearn_fdp._engine import _noise  # noqa: E402
from sklearn_fdp.audit import canary_audit_one_run  # noqa: E402

from ._cluster import local_cluster  # noqa: E402

U = np.finfo(np.float64).eps / 2


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(__name__) as pair:  # this module's functions travel by value
        yield pair


N, D = 1200, 8


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.3, 0.3, size=(N, D))
    X[np.abs(X) < 0.12] = 0.0  # sparse enough for a meaningful CSR
    y = (X[:, 0] + X[:, 6] + 0.1 * rng.normal(size=N) > 0).astype(int)
    t = X[:, 0] - X[:, 6] + 0.1 * rng.normal(size=N)
    return X, y, t


COMMON = dict(epsilon=1.0, batch_size=200, epochs=1, random_state=0)
FDP = dict(private_features=[5, 6, 7], public_epochs=0)
CASES = {
    "dpsgd_classifier": (DPSGDClassifier, {}, "y"),
    "dpsgd_regressor": (DPSGDRegressor, dict(y_bounds=(-1, 1)), "t"),
    "fdp_logistic_alg1": (FeatureDPLogisticRegression, dict(method="alg1", **FDP), "y"),
    "fdp_logistic_alg1_label_public": (FeatureDPLogisticRegression,
                                       dict(method="alg1", label_public=True, **FDP), "y"),
    "fdp_logistic_dpsgd": (FeatureDPLogisticRegression, dict(method="dpsgd", **FDP), "y"),
    "fdp_regressor_alg1": (FeatureDPSGDRegressor, dict(method="alg1", y_bounds=(-1, 1), **FDP),
                           "t"),
    "fdp_regressor_dpsgd": (FeatureDPSGDRegressor,
                            dict(method="dpsgd", y_bounds=(-1, 1), **FDP), "t"),
}


def tolerance(est, X):
    """The bound of the module docstring for a fit ``est`` on ``X`` (L2 over the weights)."""
    n = X.shape[0]
    qn = est.sampling_rate_ * n
    m = qn + 8 * math.sqrt(qn)
    R2 = float(np.max(np.sum(np.asarray(X) ** 2, axis=1))) + 1.0
    C = float(getattr(est, "max_grad_norm_", est.max_grad_norm))
    p = (X.shape[1] + 1) * max(1, np.atleast_2d(est.coef_).shape[0])
    delta = math.sqrt(p) * 2 * (m - 1) * m * C * U / qn
    L = 2 * m * R2 / qn + R2
    eta = float(est.learning_rate_) * max(1.0, getattr(est, "alpha_", 1.0))
    growth = (1 + eta) * (est.momentum + L + est.l2_regularization)
    E = 0.0
    for _ in range(est.steps_):
        E = growth * E + (1 + eta) * delta
    return E


def _fit(cls, kw, X, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(**{**COMMON, **kw}).fit(X, target)


def _weights(est):
    return np.concatenate([np.ravel(est.coef_), np.ravel(est.intercept_)])


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("case", list(CASES))
def test_cluster_fit_equals_in_process_fit(cluster, case, sparse):
    cls, kw, which = CASES[case]
    X, y, t = _data()
    target = y if which == "y" else t
    A = sp.csr_matrix(X) if sparse else X
    Xd = da.from_array(A, chunks=(250, -1), asarray=False) if sparse else \
        da.from_array(X, chunks=(250, -1))  # 5 partitions, the last of 200 rows
    on_cluster = _fit(cls, kw, Xd, target)
    in_process = _fit(cls, kw, X, target)  # dense: the eager loop's noise (module docstring)
    assert on_cluster.steps_ == in_process.steps_ > 1
    gap = np.linalg.norm(_weights(on_cluster) - _weights(in_process))
    assert gap <= tolerance(in_process, X), (gap, tolerance(in_process, X))
    assert on_cluster.epsilon_ == in_process.epsilon_
    assert repr(on_cluster.dp_event_) == repr(in_process.dp_event_)


def test_one_noise_draw_per_step_in_the_fitting_process(cluster, monkeypatch):
    """The engine's noise stream is drawn once per step; the workers' sums come back noiseless."""
    X, y, _ = _data(1)
    draws, sums = [], []
    real_draw = _noise.NoiseStream.draw
    real_call = ClusterGradientOracle.__call__

    def counting_draw(self):
        draws.append(len(sums))
        return real_draw(self)

    def recording_call(self, idx, theta):
        out = real_call(self, idx, theta)
        sums.append(len(idx))
        return out

    monkeypatch.setattr(_noise.NoiseStream, "draw", counting_draw)
    monkeypatch.setattr(ClusterGradientOracle, "__call__", recording_call)
    est = _fit(DPSGDClassifier, {}, da.from_array(X, chunks=(300, -1)), y)
    assert len(sums) == len(draws) == est.steps_
    # Each draw comes right after its step's clipped sum (draw k sees k + 1 sums).
    assert draws == list(range(1, est.steps_ + 1))


class _OnCluster(BaseEstimator):
    """An estimator fitted on a dask array of ``X`` (for the audit, which passes numpy)."""

    def __init__(self, random_state=None):
        self.random_state = random_state

    def fit(self, X, y):
        self.est_ = DPSGDClassifier(epsilon=1.0, batch_size=256, epochs=2, max_grad_norm=1.0,
                                    random_state=self.random_state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.est_.fit(da.from_array(np.asarray(X), chunks=(400, -1)), y)
        self.epsilon_, self.delta_ = self.est_.epsilon_, self.est_.delta_
        self.classes_ = self.est_.classes_
        return self

    def decision_function(self, X):
        return self.est_.decision_function(X)


def test_canary_audit_of_the_cluster_fit(cluster):
    """A one-run audit (100 guesses) would refute ε = 1 if the cluster path skipped the noise."""
    X, y, _ = _data(2)
    result = canary_audit_one_run(_OnCluster(), X, y, n_canaries=200, random_state=0)
    assert result.n_guesses == 100
    assert not result.refutes_claim, result


def _slow_gather(part, local):
    from sklearn_fdp._distributed import _dpsgd

    time.sleep(0.05)
    return _dpsgd._Batch(part, local)


@pytest.mark.slow  # a worker restarts and compiles its kernels again (~15 s)
def test_worker_killed_mid_fit_recomputes_the_same_model(cluster, monkeypatch):
    cluster_, client = cluster
    X, y, _ = _data(3)
    Xd = da.from_array(X, chunks=(150, -1))  # 8 partitions
    kw = dict(epochs=2)
    before = set(client.scheduler_info()["workers"])
    expected = _weights(_fit(DPSGDClassifier, kw, Xd, y))
    from sklearn_fdp._distributed import _dpsgd

    monkeypatch.setattr(_dpsgd, "_gather_batch", _slow_gather)  # ~0.5 s a step or more
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(lambda: _weights(_fit(DPSGDClassifier, kw, Xd, y)))
        deadline = time.monotonic() + 60
        while not any(client.processing().values()):
            assert time.monotonic() < deadline, "the fit never reached the cluster"
            time.sleep(0.05)
        time.sleep(0.5)  # a few steps done
        nanny = next(iter(cluster_.workers.values()))
        os.kill(nanny.process.process.pid, signal.SIGKILL)
        weights = future.result(timeout=180)
    client.wait_for_workers(2, timeout=60)
    assert set(client.scheduler_info()["workers"]) != before  # a worker was replaced
    # The lost partitions were recomputed from the graph: the same partial sums.
    np.testing.assert_array_equal(weights, expected)


def test_a_step_missing_rows_raises(cluster, monkeypatch):
    """A partial sum over fewer rows than its batch part stops the fit (nothing released)."""
    from sklearn_fdp._distributed import _dpsgd

    def lossy(batch, theta, local_oracle):
        out, m = real(batch, theta, local_oracle)
        return out, max(0, m - 1)

    real = _dpsgd._partial_sum
    monkeypatch.setattr(_dpsgd, "_partial_sum", lossy)
    X, y, _ = _data(4)
    est = DPSGDClassifier(**COMMON)
    with pytest.raises(RuntimeError, match="lost or changed"):
        est.fit(da.from_array(X, chunks=(300, -1)), y)
    assert not hasattr(est, "coef_")


def test_secure_noise_on_the_cluster(cluster, monkeypatch):
    """noise="secure": CSPRNG batches and noise in the fitting process, sums on the workers."""
    from sklearn_fdp import _secure

    X, y, _ = _data(5)
    drawn = []
    real = _secure.SecureGenerator.standard_normal

    def counting(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        drawn.append(np.size(out))
        return out

    monkeypatch.setattr(_secure.SecureGenerator, "standard_normal", counting)
    est = _fit(DPSGDClassifier, dict(noise="secure"), da.from_array(X, chunks=(300, -1)), y)
    assert np.all(np.isfinite(_weights(est)))
    # One (d + 1)-vector of CSPRNG normals per step, drawn here.
    assert drawn == [D + 1] * est.steps_
    assert est.score(X, y) > 0.6


def test_dask_dataframe_through_the_schema_preprocessor(cluster):
    """A DataFrame's partitions mapped where they live, then Algorithm 1 on the workers."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")

    from sklearn_fdp.preprocessing import make_tabular_preprocessor, transform_partitions

    rng = np.random.default_rng(9)
    n = 1200
    df = pd.DataFrame({"a": rng.uniform(0, 10, n), "b": rng.uniform(-5, 5, n),
                       "g": rng.choice(list("xyz"), n)})
    df["label"] = (df["a"] / 10 - df["b"] / 5 + (df["g"] == "x") + rng.normal(0, 0.3, n)
                   > 0.6).astype(int)
    schema = {"numeric": {"a": [0, 10], "b": [-5, 5]},
              "categorical": {"g": ["x", "y", "z"]}, "protected": ["g"]}
    pre = make_tabular_preprocessor(schema).fit(df.drop(columns="label").head())
    names = pre.get_feature_names_out()
    private = [i for i, c in enumerate(names) if c.split("__")[-1].startswith("g_")]
    X, y = transform_partitions(pre, dd.from_pandas(df, npartitions=3), target="label")
    kw = dict(method="alg1", private_features=private, public_epochs=0)
    remote = _fit(FeatureDPLogisticRegression, kw, X, y)
    Xl = pre.transform(df.drop(columns="label"))
    local = _fit(FeatureDPLogisticRegression, kw, Xl, df["label"].to_numpy())
    gap = np.linalg.norm(_weights(remote) - _weights(local))
    assert gap <= tolerance(local, Xl), gap


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_public_rows_beyond_norm_one_are_rescaled_as_in_process(cluster, sparse):
    """Algorithm 1 divides X by the largest public row norm (a max over the partitions)."""
    X, y, _ = _data(6)
    X[:, :5] *= 4.0  # public rows of norm up to ~2.7
    A = sp.csr_matrix(X) if sparse else X
    Xd = da.from_array(A, chunks=(250, -1), asarray=False) if sparse else \
        da.from_array(X, chunks=(250, -1))
    kw = dict(method="alg1", **FDP)
    remote = _fit(FeatureDPLogisticRegression, kw, Xd, y)
    local = _fit(FeatureDPLogisticRegression, kw, X, y)
    assert remote.public_scale_ == local.public_scale_ > 1.0
    gap = np.linalg.norm(_weights(remote) - _weights(local))
    assert gap <= tolerance(local, X / local.public_scale_) * local.public_scale_, gap

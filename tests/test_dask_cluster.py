"""Sufficient-statistic fits on a dask.distributed cluster (sklearn_fdp._distributed).

One ``LocalCluster(processes=True, n_workers=2)`` started here, shared by the
module. Each fit sums its statistic on the workers, partition by partition,
and the fitting process adds the noise once; these tests check

* that the released statistic equals the in-memory one up to the order of the
  additions, with the tolerance derived below, and the model accordingly;
* that a distributed fit is the same bit for bit whatever the schedule (two
  fits, and a fit during which a worker is killed);
* the sensitivity of the released vector on the per-partition path
  (neighbours that differ in one row of one partition);
* that a statistic missing rows is never released;
* a dask DataFrame through the schema preprocessor, partition by partition.

Tolerance of a sum. Both the in-memory and the distributed sum add the same
``n`` float64 terms ``t_i`` (the clipped rows' products, computed by the same
per-chunk code), in different orders. Any order of recursive or pairwise
summation is within ``(n − 1) u Σ|t_i|`` of the exact sum (Higham 2002,
§4.2; ``u = 2⁻⁵³``), so the two differ by at most ``2 (n − 1) u Σ|t_i|``.
Every term of the weighted released vector has L2 norm at most 1 (its
sensitivity; a mean's at most its bound ``C``), so ``Σ|t_i| <= n`` per
entry: the bound ``2 (n − 1) n u`` used below.
"""

import concurrent.futures
import math
import os
import signal
import time
from unittest import mock

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from sklearn_fdp import (  # noqa: E402
    DPSGDFClassifier,
    FeatureDPLinearRegression,
    FeatureDPLogisticRegression,
    FeatureDPPCA,
    PrivateMeanCenterer,
)
from sklearn_fdp._mechanisms import label_statistic as lst  # noqa: E402
from sklearn_fdp._mechanisms import linear_statistics as ls  # noqa: E402

from ._cluster import local_cluster  # noqa: E402
from .sensitivity._harness import assert_sensitivity  # noqa: E402

U = np.finfo(np.float64).eps / 2


def sum_tolerance(n, term_bound=1.0):
    """Largest difference of two float64 sums of ``n`` terms of norm <= ``term_bound``."""
    return 2.0 * (n - 1) * U * n * term_bound


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(__name__) as pair:  # this module's functions travel by value
        yield pair


def _data(n=3000, d=6, seed=0, scale=0.35):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-scale, scale, size=(n, d))
    y = X @ np.linspace(-2, 2, d) + 0.1 * rng.standard_normal(n)
    return X, y


def _chunks(n, k=7):
    """Uneven row chunks (partitions of different sizes)."""
    edges = np.unique(np.r_[0, np.sort(np.random.default_rng(1).integers(1, n, k - 1)), n])
    return (tuple(np.diff(edges).tolist()), -1)


def capture_noised(module, name="add_gaussian_noise"):
    """Patch ``module.name`` (the call that adds the noise) to record its input."""
    seen = []
    real = getattr(module, name)

    def spy(vector, *args, **kwargs):
        seen.append(np.array(vector, copy=True))
        return real(vector, *args, **kwargs)

    return mock.patch.object(module, name, spy), seen


# -- each estimator: the distributed fit is the in-memory fit ----------------------------


def _spy_linear():
    """Record the pre-noise vector and the released system of FeatureDPLinearRegression."""
    import contextlib

    from sklearn_fdp.linear import _feature_dp_linear as fdl

    patch, seen = capture_noised(ls)
    systems = []
    real = fdl.solve_noisy_ridge

    def spy(system, *args, **kwargs):
        systems.append(system)
        return real(system, *args, **kwargs)

    stack = contextlib.ExitStack()
    stack.enter_context(patch)
    stack.enter_context(mock.patch.object(fdl, "solve_noisy_ridge", spy))
    return stack, seen, systems


def assert_same_linear_fit(local, remote, v, system, n):
    """The models of two released systems whose vectors differ by <= sum_tolerance(n).

    Each entry of the released ``G`` and ``b`` moves by at most ``e = sum_tolerance / w``
    (a block's entries are the vector's divided by its weight ``w``; the exact public
    block by ``sum_tolerance``), so ``‖ΔG‖₂ <= size e``; to first order the solve moves
    ``θ`` by ``κ (‖ΔG‖ / ‖G‖ + ‖Δb‖ / ‖b‖) ‖θ‖`` (κ: condition number of the
    regularised system), and the residual solver is a few such solves: 10 × that.
    """
    layout_w = min([1.0, *remote.privacy_plan_.details["block_weights"].values()])
    e = sum_tolerance(n) / layout_w
    G = system.G + local.alpha * np.eye(system.G.shape[0])
    size = G.shape[0]
    kappa = np.linalg.cond(G)
    rel = size * e / np.linalg.norm(G, 2) + size * e / max(np.linalg.norm(system.b), e)
    tol = 10 * kappa * rel * max(1.0, np.abs(local.coef_).max(), abs(local.intercept_))
    np.testing.assert_allclose(remote.coef_, local.coef_, rtol=0, atol=tol)
    assert abs(remote.intercept_ - local.intercept_) <= tol


@pytest.mark.parametrize("label_public", [False, True])
def test_linear_regression_on_cluster_equals_in_memory(cluster, label_public):
    from sklearn.base import clone

    X, y = _data()
    est = FeatureDPLinearRegression(private_features=[0, 1, 2], y_bounds=(-3, 3),
                                    label_public=label_public, epsilon=1.0, random_state=0)
    stack, seen, systems = _spy_linear()
    with stack:
        local = clone(est).fit(X, y)
        remote = clone(est).fit(da.from_array(X, chunks=_chunks(len(X))), da.from_array(y))
    # The released vector: the same noise (same random_state) on sums equal up to order.
    np.testing.assert_allclose(seen[1], seen[0], rtol=0, atol=sum_tolerance(len(X)))
    assert remote.privacy_plan_ == local.privacy_plan_
    assert_same_linear_fit(local, remote, seen[0], systems[0], len(X))


def test_mean_centerer_on_cluster_equals_in_memory(cluster):
    X, _ = _data(seed=2, scale=3.0)
    est = PrivateMeanCenterer(epsilon=1.0, norm_bound=1.0, random_state=0)
    local = est.fit(X).mean_.copy()
    remote = est.fit(da.from_array(X, chunks=_chunks(len(X)))).mean_
    # mean = Σ b(x_i) / n + noise: the sums of n rows of norm <= C = 1 differ by the bound.
    np.testing.assert_allclose(remote, local, rtol=0, atol=sum_tolerance(len(X)) / len(X))


@pytest.mark.parametrize("n_classes", [2, 3])
def test_label_statistic_logistic_on_cluster_equals_in_memory(cluster, n_classes):
    X, score = _data(seed=3)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    est = FeatureDPLogisticRegression(private_features=[], method="sufficient_statistic",
                                      epsilon=1.0, random_state=0)
    patch, seen = capture_noised(lst, "_add_noise")
    with patch:
        local = est.fit(X, y)
        coef, n_iter, lam = local.coef_.copy(), local.n_iter_, local.l2_regularization_
        remote = est.fit(da.from_array(X, chunks=_chunks(len(X))), da.from_array(y))
    s_local, s_remote = seen
    clip = local.max_grad_norm_
    np.testing.assert_allclose(s_remote, s_local, rtol=0, atol=sum_tolerance(len(X), clip))
    np.testing.assert_array_equal(remote.classes_, local.classes_)
    # L-BFGS stops at ‖∇Φ‖∞ <= gtol = 1e-8 on a λ-strongly convex Φ: each result is
    # within √p gtol / λ of the minimiser (p parameters), so within twice that of each other.
    assert n_iter < 500 and remote.n_iter_ < 500
    p = coef.size + local.intercept_.size
    np.testing.assert_allclose(remote.coef_, coef, rtol=0, atol=2 * math.sqrt(p) * 1e-8 / lam)


def test_pca_on_cluster_equals_in_memory(cluster):
    X, _ = _data(seed=4)
    X[:, 1] += 0.5 * X[:, 0]  # a clear spectrum
    est = FeatureDPPCA(n_components=3, private_features=[0, 4], epsilon=1.0, random_state=0)
    patch, seen = capture_noised(ls)
    with patch:
        local = est.fit(X)
        comp, cov, plan = local.components_.copy(), local.covariance_.copy(), local.privacy_plan_
        remote = est.fit(da.from_array(X, chunks=_chunks(len(X))))
    n = len(X)
    e = sum_tolerance(n)
    np.testing.assert_allclose(seen[1], seen[0], rtol=0, atol=e)
    assert remote.privacy_plan_ == plan
    # Every entry of G = X~ᵀX~ moves by at most e / w_min (the released blocks divided by
    # their weights; the public block is an exact sum: e too); the covariance
    # (G − n μμᵀ) / (n − 1) by at most e' = e / w_min (1 + 2 max|μ|) / (n − 1) (first order).
    w_min = min(1.0, min(plan.details["block_weights"].values()))
    e_cov = e / w_min * (1 + 2 * np.abs(local.mean_).max() + 1e-12) / (n - 1)
    np.testing.assert_allclose(remote.covariance_, cov, rtol=0, atol=e_cov)
    # Davis–Kahan: each kept axis moves by at most 2 √2 ‖ΔC‖₂ / gap (gap to its neighbours).
    lam = np.linalg.eigvalsh(cov)[::-1]
    gaps = np.minimum(np.abs(np.diff(np.r_[np.inf, lam]))[:3], np.abs(np.diff(lam))[:3])
    bound = 2 * math.sqrt(2) * X.shape[1] * e_cov / gaps
    for k in range(3):
        assert np.linalg.norm(remote.components_[k] - comp[k]) <= bound[k]


def _dpsgdf_data(n=3000, d=6, seed=8):
    rng = np.random.default_rng(seed)
    X = rng.normal(2.0, 1.0, size=(n, d))  # far from the origin: centring matters
    y = (X[:, 0] - X[:, 1] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return X, y


def test_dpsgdf_practical_on_cluster_equals_in_memory(cluster):
    """Algorithm 3's private mean summed on the workers, the noise added here once.

    The mean is ``Σ x_i C_F / ‖x_i‖ / n + noise`` with the same noise (same
    ``random_state``): the two sums of ``n`` rows of norm ``C_F`` differ by at
    most ``sum_tolerance(n, C_F)`` per entry.
    """
    X, y = _dpsgdf_data()
    est = DPSGDFClassifier(variant="practical", feature_norm=2.0, epsilon=2.0, epochs=2,
                           random_state=0)
    local = est.fit(X, y)
    mean, coef, plan = local.mean_.copy(), local.coef_.copy(), local.privacy_plan_
    remote = est.fit(da.from_array(X, chunks=_chunks(len(X))), da.from_array(y))
    np.testing.assert_allclose(remote.mean_, mean, rtol=0,
                               atol=sum_tolerance(len(X), 2.0) / len(X))
    assert remote.privacy_plan_ == plan
    # The DP-SGD steps then run on rows centred on means that differ at rounding level
    # (not a derived bound: the steps' sensitivity to the centre is not bounded here).
    np.testing.assert_allclose(remote.coef_, coef, rtol=1e-6, atol=1e-9)


def test_dpsgdf_analysed_on_cluster_equals_in_memory(cluster):
    """Algorithm 2: the coarse-to-fine mean's sums and the quantile's histograms on the workers.

    Round ``k``'s mean is ``μ_{k-1} + Σ clip(x_i − μ_{k-1}, r_k) / n + noise``; the
    map ``c ↦ c + Σ clip(x_i − c, r) / n`` is 2-Lipschitz in L2 and the two sums of ``n``
    terms of norm ``<= r_k <= 2R`` differ by at most ``sqrt(d) sum_tolerance(n, 2R)``, so
    after ``K`` rounds ``‖Δμ‖ <= (2^K − 1) sqrt(d) sum_tolerance(n, 2R) / n``. Each radius
    and τ is a bin edge ``top 2^-j`` with ``top = R + ‖μ‖`` (the same bins: the counts
    are exact), so they move by at most ``‖Δμ‖`` relative to ``top >= R``.
    """
    X, y = _dpsgdf_data(seed=9)
    R = 4.0
    est = DPSGDFClassifier(variant="analysed", feature_norm=R, epsilon=3.0, epochs=2,
                           random_state=1)
    local = est.fit(X, y)
    saved = {k: np.copy(getattr(local, k)) for k in ("mean_", "mean_radii_", "quantile_",
                                                      "coef_")}
    rounds = local.privacy_plan_.details["mean_rounds"]
    remote = est.fit(da.from_array(X, chunks=_chunks(len(X))), y)
    n, d = X.shape
    dmu = (2 ** rounds - 1) * math.sqrt(d) * sum_tolerance(n, 2 * R) / n
    assert np.linalg.norm(remote.mean_ - saved["mean_"]) <= dmu
    np.testing.assert_allclose(remote.mean_radii_, saved["mean_radii_"], rtol=dmu / R, atol=0)
    assert abs(remote.quantile_ - saved["quantile_"]) <= dmu / R * saved["quantile_"]
    np.testing.assert_allclose(remote.coef_, saved["coef_"], rtol=1e-6, atol=1e-9)


def test_dpsgdf_statistics_missing_rows_are_never_released(cluster):
    import dask

    from sklearn_fdp._mechanisms import dpsgdf as mech

    X, y = _dpsgdf_data(n=400, seed=10)
    short = da.from_delayed(dask.delayed(lambda: X[200:350])(), shape=(200, X.shape[1]),
                            dtype=X.dtype)
    Xd = da.concatenate([da.from_array(X[:200]), short])
    released = []
    real = mech._release_upper_quantile

    def spy(*args, **kwargs):
        released.append(args)
        return real(*args, **kwargs)

    for variant in ("practical", "analysed"):
        est = DPSGDFClassifier(variant=variant, random_state=0)
        with mock.patch.object(mech, "_release_upper_quantile", spy):
            with pytest.raises(RuntimeError, match="summed 350 rows, but X has 400"):
                est.fit(Xd, y)
        assert not hasattr(est, "coef_") and not released


# -- the same bits whatever the schedule; never a partial sum --------------------------


def test_distributed_fit_is_deterministic(cluster):
    X, y = _data(n=2000, seed=5)
    Xd = da.from_array(X, chunks=_chunks(len(X), 9))
    est = FeatureDPLinearRegression(private_features=[0, 1], y_bounds=(-3, 3), epsilon=1.0,
                                    random_state=0)
    first = est.fit(Xd, y).coef_.copy()
    np.testing.assert_array_equal(est.fit(Xd, y).coef_, first)


def _slow_block(block):
    time.sleep(0.25)
    return block


def test_worker_killed_mid_reduction_recomputes_the_same_statistic(cluster):
    cluster_, client = cluster
    X, y = _data(n=2400, seed=6)
    est = FeatureDPLinearRegression(private_features=[0, 1], y_bounds=(-3, 3), epsilon=1.0,
                                    random_state=0)
    fast = da.from_array(X, chunks=(200, -1))  # 12 partitions
    expected = est.fit(fast, y).coef_.copy()
    slow = fast.map_blocks(_slow_block, dtype=X.dtype)  # 12 × 0.25 s over 2 workers
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with distributed.Client(cluster_.scheduler_address, set_as_default=False) as probe:
            future = pool.submit(lambda: est.fit(slow, y).coef_.copy())
            deadline = time.monotonic() + 30
            while not any(probe.processing().values()):  # the partitions are being summed
                assert time.monotonic() < deadline, "the fit never reached the cluster"
                time.sleep(0.05)
            time.sleep(0.4)  # some partial sums done, others running
            nanny = next(iter(cluster_.workers.values()))
            os.kill(nanny.process.process.pid, signal.SIGKILL)
            coef = future.result(timeout=120)
    client.wait_for_workers(2, timeout=60)
    np.testing.assert_array_equal(coef, expected)


def test_a_statistic_missing_rows_is_never_released(cluster):
    import dask

    X, y = _data(n=400, seed=7)
    # A partition that claims 200 rows but yields 150 (a lost or truncated file).
    short = da.from_delayed(dask.delayed(lambda: X[200:350])(), shape=(200, X.shape[1]),
                            dtype=X.dtype)
    Xd = da.concatenate([da.from_array(X[:200]), short])
    est = FeatureDPLinearRegression(private_features=[0], y_bounds=(-3, 3), epsilon=1.0,
                                    random_state=0)
    with pytest.raises(RuntimeError, match="holds 150 rows, but its part of y 200"):
        est.fit(Xd, y)
    assert not hasattr(est, "coef_")
    for est in (FeatureDPPCA(private_features=[0], random_state=0),
                PrivateMeanCenterer(random_state=0)):
        with pytest.raises(RuntimeError, match="summed 350 rows, but X has 400"):
            est.fit(Xd)
        assert not hasattr(est, "dp_event_")


# -- the sensitivity harness on the per-partition path -----------------------------------


def _released(est, X, y):
    patch, seen = capture_noised(ls)
    with patch:
        est.fit(X, y)
    return seen[-1]


@pytest.mark.parametrize("label_public", [False, True])
@pytest.mark.parametrize("scale", [1e-8, 1.0, 1e8])
def test_sensitivity_on_the_partition_path(cluster, label_public, scale):
    """Neighbours differing in one row of one partition: the released vector moves by at
    most the sensitivity the accountant assumed (1 removing a record, 2 replacing its
    protected part), on adversarial scales and with targets far outside ``y_bounds``."""
    rng = np.random.default_rng(int(scale * 7) % 1000)
    n, d, row = 60, 5, 37
    X = rng.standard_normal((n, d)) * scale
    X[row] = 0.0
    X[row, 0] = scale * 1e3  # an extreme protected value in the chosen row
    y = rng.standard_normal(n) * 1e6
    chunks = ((20, 20, 20), (d,))
    est = FeatureDPLinearRegression(private_features=[0, 1], y_bounds=(-1, 1),
                                    method="sufficient_statistic",
                                    label_public=label_public, epsilon=None,
                                    noise_multiplier=1.0, delta=1e-3, random_state=0)
    import warnings

    from sklearn_fdp import FdpWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FdpWarning)
        base = _released(est, da.from_array(X, chunks=chunks), da.from_array(y, chunks=20))
        # Remove: the row's protected values zeroed under label_public (FDP Def. 6's
        # simulator), the row dropped from its partition otherwise.
        if label_public:
            X2, y2, c2 = X.copy(), y, chunks
            X2[row, :2] = 0.0
        else:
            X2, y2 = np.delete(X, row, axis=0), np.delete(y, row)
            c2 = ((20, 19, 20), (d,))
        removed = _released(est, da.from_array(X2, chunks=c2), da.from_array(y2, chunks=c2[0]))
        assert_sensitivity(base, removed, 1.0, n_terms=n, clip=1.0, dtype=np.float64,
                           what="remove, partition path")
        est.set_params(neighboring="replace")
        base = _released(est, da.from_array(X, chunks=chunks), da.from_array(y, chunks=20))
        X3, y3 = X.copy(), y.copy()
        X3[row, :2] = -X[row, :2] - scale
        if not label_public:
            y3[row] = -y[row]
        replaced = _released(est, da.from_array(X3, chunks=chunks),
                             da.from_array(y3, chunks=20))
        assert_sensitivity(base, replaced, 2.0, n_terms=n, clip=1.0, dtype=np.float64,
                           what="replace, partition path")


@pytest.mark.parametrize("scale", [1e-8, 1.0, 1e8])
def test_dpsgdf_sensitivity_on_the_partition_path(cluster, scale):
    """DPSGD-F's pre-noise releases on the workers: one row removed from one partition.

    The scaled mean's sum (rows scaled to ``C_F`` on the workers, summed there) moves
    by at most ``C_F``; the histogram of the distances to a released centre by at most
    1 (one count), as in memory.
    """
    from sklearn_fdp._distributed import check_partitioned
    from sklearn_fdp._mechanisms import dpsgdf as mech
    from sklearn_fdp._mechanisms.gaussian_mean import bounded_row_sum, scale_rows

    rng = np.random.default_rng(11)
    n, d, row, C = 60, 4, 27, 2.0
    X = rng.standard_normal((n, d)) * scale
    X[row] = scale * 1e3  # the adversarial row, in the middle partition
    chunks = ((20, 20, 20), (d,))
    X2, c2 = np.delete(X, row, axis=0), ((20, 19, 20), (d,))
    est = DPSGDFClassifier()
    centre = np.full(d, 0.5 * C)
    for variant in ("practical", "analysed"):
        scaling = {"practical": "normalize", "analysed": "clip"}[variant]
        sums, hists = [], []
        for data, ch in ((X, chunks), (X2, c2)):
            Xd, _ = check_partitioned(est, da.from_array(data, chunks=ch))
            source = scale_rows(Xd, C, scaling, "DPSGDFClassifier")
            sums.append(bounded_row_sum(source, C))
            edges = mech.geometric_edges(C + np.linalg.norm(centre), n)
            hists.append(mech.tree_reduce(mech.partition_distance_histogram, source, None,
                                          (centre, edges))[0])
        assert_sensitivity(sums[0], sums[1], C, n_terms=n, clip=C, dtype=np.float64,
                           what=f"{variant} mean, partition path")
        assert np.abs(hists[0] - hists[1]).sum() == 1.0  # one count in one bin


# -- a dask DataFrame through the schema preprocessor ----------------------------------


def test_dask_dataframe_through_the_schema_preprocessor(cluster):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    from sklearn.base import clone

    from sklearn_fdp.preprocessing import (
        make_tabular_preprocessor,
        row_norm_bounds,
        transform_partitions,
    )

    rng = np.random.default_rng(8)
    n = 1500
    df = pd.DataFrame({"a": rng.uniform(0, 10, n), "b": rng.uniform(-5, 5, n),
                       "c": rng.uniform(0, 100, n), "g": rng.choice(list("xyz"), n)})
    df["t"] = df["a"] * 0.3 - df["b"] + (df["g"] == "x") * 2 + rng.normal(0, 0.5, n)
    schema = {"numeric": {"a": [0, 10], "b": [-5, 5], "c": [0, 100]},
              "categorical": {"g": ["x", "y", "z"]}, "protected": ["c", "g"]}
    pre = make_tabular_preprocessor(schema).fit(df.drop(columns="t").head())
    names = pre.get_feature_names_out()
    protected = [i for i, c in enumerate(names) if c.split("__")[-1].startswith(("c", "g_"))]
    assert len(protected) == 4, names
    est = FeatureDPLinearRegression(private_features=protected,
                                    row_norm_bounds=row_norm_bounds(schema), y_bounds=(-15, 15),
                                    epsilon=1.0, random_state=0)
    stack, seen, systems = _spy_linear()
    ddf = dd.from_pandas(df, npartitions=4)
    X, y = transform_partitions(pre, ddf, target="t")
    assert X.chunks[0] == tuple(int(k) for k in ddf.map_partitions(len).compute())
    with stack:
        local = clone(est).fit(pre.transform(df.drop(columns="t")), df["t"].to_numpy())
        remote = clone(est).fit(X, y)
    assert remote.privacy_plan_ == local.privacy_plan_
    np.testing.assert_allclose(seen[1], seen[0], rtol=0, atol=sum_tolerance(n))
    assert_same_linear_fit(local, remote, seen[0], systems[0], n)

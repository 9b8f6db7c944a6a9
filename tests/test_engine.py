"""The DP optimisation engine: clipped sums, samplers, noise, loop options."""

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from sklearn_fdp._engine import (
    EngineConfig,
    LinearGradientOracle,
    LinearLoss,
    PoissonSampler,
    UniformSampler,
    run_dp_sgd,
)
from sklearn_fdp._engine._lazy import lazy_noise_applies, run_lazy_sparse
from sklearn_fdp._engine._noise import NoiseStream, NormalStream
from sklearn_fdp._random import spawn_generators

from ._reference import clipped_sum, per_example_gradients


def _problem(rng, n, d, n_classes, dtype, sparse):
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.5] = 0.0
    if n > 2:
        X[1] = 0.0  # an all-zero row
    X = X.astype(dtype)
    y = rng.integers(0, n_classes, size=n)
    return (sp.csr_matrix(X) if sparse else X), y


@pytest.mark.parametrize("loss", ["log_loss", "hinge"])
@pytest.mark.parametrize("n_classes", [2, 3, 100])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("shape", [(7, 5), (1, 4), (9, 1)])
def test_clipped_sum_matches_reference(loss, n_classes, dtype, sparse, fit_intercept, shape):
    rng = np.random.default_rng(0)
    n, d = shape
    X, y_index = _problem(rng, n, d, n_classes, dtype, sparse)
    k = 1 if n_classes == 2 else n_classes
    linear_loss = LinearLoss(loss, k)
    y = linear_loss.encode(y_index)
    theta = rng.normal(size=(d + int(fit_intercept), k)).astype(dtype)
    oracle = LinearGradientOracle(X, y, linear_loss, fit_intercept, max_grad_norm=0.7)
    idx = np.sort(rng.choice(n, size=max(1, n // 2), replace=False))
    got = oracle(idx, theta)
    grads = per_example_gradients(X[idx], y[idx], theta.astype(np.float64), loss, k, fit_intercept)
    want = clipped_sum(grads, 0.7)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert got.dtype == dtype


def test_empty_batch_gives_zero_gradient():
    X = np.ones((4, 3))
    loss = LinearLoss("log_loss", 1)
    oracle = LinearGradientOracle(X, loss.encode([0, 1, 0, 1]), loss, True, 1.0)
    theta = np.ones((4, 1))
    np.testing.assert_array_equal(oracle(np.array([], dtype=int), theta), 0.0)


def test_clipping_bounds_every_per_example_gradient():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 6)) * 100
    loss = LinearLoss("log_loss", 3)
    y = loss.encode(rng.integers(0, 3, 50))
    oracle = LinearGradientOracle(X, y, loss, True, max_grad_norm=0.5)
    theta = rng.normal(size=(7, 3))
    for i in range(50):
        assert np.linalg.norm(oracle(np.array([i]), theta)) <= 0.5 * (1 + 1e-12)


@pytest.mark.statistical
def test_poisson_sampler_is_poisson(global_seed):
    """Batch sizes are Binomial(n, q) (not fixed) and every record is equally likely."""
    n, q, trials = 200, 0.1, 4000
    sampler = PoissonSampler(n, q, np.random.default_rng(global_seed))
    counts = np.zeros(n)
    sizes = np.empty(trials)
    for t in range(trials):
        idx = sampler.sample()
        assert len(np.unique(idx)) == len(idx)
        counts[idx] += 1
        sizes[t] = len(idx)
    # Mean and variance of the size: Binomial(n, q). A fixed-size sampler has variance 0.
    se_mean = np.sqrt(n * q * (1 - q) / trials)
    assert abs(sizes.mean() - n * q) < 5 * se_mean
    var = n * q * (1 - q)
    # Var of the sample variance ≈ 2 var^2 / trials (near-normal sizes).
    assert abs(sizes.var() - var) < 5 * np.sqrt(2 * var**2 / trials)
    # Per-record inclusion counts are Binomial(trials, q): chi-square uniformity.
    _, p = stats.chisquare(counts)
    assert p > 1e-4


def test_uniform_sampler_sizes():
    s = UniformSampler(10, 4, np.random.default_rng(0))
    assert len(s.sample()) == 4
    assert len(UniformSampler(10, 40, np.random.default_rng(0)).sample()) == 10


def test_spawned_generators_are_independent_and_reproducible():
    a = [g.random(5) for g in spawn_generators(3, 3)]
    b = [g.random(5) for g in spawn_generators(3, 3)]
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[0], a[1]) and not np.allclose(a[1], a[2])


class _ZeroOracle:
    """A private oracle whose clipped sum is 0, clipping at ``max_grad_norm``."""

    def __init__(self, max_grad_norm):
        self.max_grad_norm = max_grad_norm

    def __call__(self, idx, theta):
        return np.zeros_like(theta)


def test_loop_refuses_noise_not_scaled_to_the_oracle_clip():
    """The clip the oracle applies and the clip that scales the noise must agree."""
    cfg = EngineConfig(steps=1, sampling_rate=0.5, noise_multiplier=1.0, max_grad_norm=1.0,
                       learning_rate=1.0)
    r1, r2 = spawn_generators(0, 2)
    for oracle in (_ZeroOracle(2.0), lambda i, t: np.zeros_like(t)):
        with pytest.raises(ValueError, match="noise would not match the sensitivity"):
            run_dp_sgd(np.zeros((2, 1)), oracle, 10, cfg, sample_rng=r1, noise_rng=r2)
    run_dp_sgd(np.zeros((2, 1)), _ZeroOracle(1.0), 10, cfg, sample_rng=r1, noise_rng=r2)


@pytest.mark.statistical
def test_noise_std_is_noise_multiplier_times_clip(global_seed):
    """With a zero gradient, one step moves θ by -lr σ C / (q n) · N(0, I).

    Power (issue 30): 20,000 draws, sample std within 5 SE (2.5 %) of the
    expected one; a 5 % error in the noise std is 10 SE away, detected with
    probability Φ(4.7) > 0.999998.
    """
    sigma, clip, n, q, lr = 1.7, 0.3, 1000, 0.05, 2.0
    shape = (20000, 1)
    cfg = EngineConfig(steps=1, sampling_rate=q, noise_multiplier=sigma, max_grad_norm=clip,
                       learning_rate=lr)
    rng_s, rng_n = spawn_generators(global_seed, 2)
    res = run_dp_sgd(np.zeros(shape), _ZeroOracle(clip), n, cfg,
                     sample_rng=rng_s, noise_rng=rng_n)
    expected = lr * sigma * clip / (q * n)
    values = res.theta.ravel()
    # Sample std of N iid normals: relative standard error 1/sqrt(2N).
    rel_se = 1 / np.sqrt(2 * values.size)
    assert abs(values.std() / expected - 1) < 5 * rel_se
    assert abs(values.mean()) < 5 * expected / np.sqrt(values.size)
    # And normal: Kolmogorov-Smirnov against N(0, expected^2).
    assert stats.kstest(values / expected, "norm").pvalue > 1e-4


def test_noise_mask_keeps_masked_entries_noise_free():
    cfg = EngineConfig(steps=3, sampling_rate=0.5, noise_multiplier=1.0, max_grad_norm=1.0,
                       learning_rate=1.0)
    mask = np.array([[1.0], [0.0]])
    r1, r2 = spawn_generators(0, 2)
    res = run_dp_sgd(np.zeros((2, 1)), _ZeroOracle(1.0), 10, cfg,
                     sample_rng=r1, noise_rng=r2, noise_mask=mask)
    assert res.theta[1, 0] == 0.0 and res.theta[0, 0] != 0.0


def test_noise_fn_replaces_default_noise_and_uses_noise_rng():
    cfg = EngineConfig(steps=2, sampling_rate=1.0, noise_multiplier=1.0, max_grad_norm=1.0,
                       learning_rate=1.0)
    seen = []

    def noise_fn(rng):
        seen.append(rng)
        return np.full((3, 1), 2.0)

    r1, r2 = spawn_generators(0, 2)
    res = run_dp_sgd(np.zeros((3, 1)), lambda i, t: np.zeros_like(t), 4, cfg,
                     sample_rng=r1, noise_rng=r2, noise_fn=noise_fn)
    # Two steps of -(0 + 2) / (q n) each; no isotropic noise on top.
    np.testing.assert_allclose(res.theta, -2 * 2.0 / 4)
    assert len(seen) == 2 and all(rng is r2 for rng in seen)


def test_divides_by_expected_not_realised_batch_size():
    """The step equals -lr * (sum of clipped grads) / (q n), whatever the batch size."""
    seen = []

    def oracle(idx, theta):
        seen.append(len(idx))
        return np.full_like(theta, float(len(idx)))

    cfg = EngineConfig(steps=1, sampling_rate=0.3, noise_multiplier=0.0, max_grad_norm=1.0,
                       learning_rate=1.0)
    r1, r2 = spawn_generators(5, 2)
    res = run_dp_sgd(np.zeros((1, 1)), oracle, 100, cfg, sample_rng=r1, noise_rng=r2)
    assert res.theta[0, 0] == pytest.approx(-seen[0] / 30.0)


def test_projection_and_averaging_and_schedule():
    cfg = EngineConfig(steps=10, sampling_rate=1.0, noise_multiplier=0.0, max_grad_norm=1.0,
                       learning_rate=1.0, max_weight_norm=0.5, average_start=5,
                       lr_schedule="linear", momentum=0.5)
    r1, r2 = spawn_generators(0, 2)
    res = run_dp_sgd(np.zeros((3, 1)), lambda i, t: -np.ones_like(t) * len(i), 4, cfg,
                     sample_rng=r1, noise_rng=r2)
    assert np.linalg.norm(res.theta) <= 0.5 + 1e-12
    assert cfg.step_size(0) == 1.0 and cfg.step_size(5) == pytest.approx(0.5)
    cos = EngineConfig(steps=4, sampling_rate=1.0, noise_multiplier=0.0, max_grad_norm=1.0,
                       learning_rate=1.0, lr_schedule="cosine")
    assert cos.step_size(2) == pytest.approx(0.5)


# -- lazy noise on CSR data ---------------------------------------------------


def _sparse_problem(k, n=40, d=6, empty_cols=0, seed=1, fit_intercept=True):
    """CSR data with dense-ish and rare columns, plus ``empty_cols`` never touched."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, : d // 2][rng.random((n, d // 2)) < 0.6] = 0.0
    X[:, d // 2:][rng.random((n, d - d // 2)) < 0.93] = 0.0
    X = sp.hstack([sp.csr_matrix(X), sp.csr_matrix((n, empty_cols))], format="csr")
    loss = LinearLoss("log_loss", k)
    y = loss.encode(rng.integers(0, max(k, 2), n))
    return LinearGradientOracle(X, y, loss, fit_intercept, 1.0), n


def _lazy_config(sigma, average_start, steps=30):
    return EngineConfig(steps=steps, sampling_rate=0.2, noise_multiplier=sigma,
                        max_grad_norm=1.0, learning_rate=0.5, lr_schedule="cosine",
                        average_start=average_start)


def test_lazy_noise_applies_only_where_exact():
    oracle, n = _sparse_problem(1)
    cfg = _lazy_config(1.0, None)
    free = dict(public_oracle=None, noise_mask=None, noise_fn=None, callback=None)
    assert lazy_noise_applies(oracle, cfg, **free)
    # σ = 0 (the non-private baseline) takes the sparse path too: nothing is pending.
    assert lazy_noise_applies(oracle, replace(cfg, noise_multiplier=0.0), **free)
    # Momentum and weight decay keep it lazy (the exact linear catch-up of
    # _kernels/_momentum.py); a projection is not linear.
    for change in (dict(momentum=0.9), dict(l2_regularization=0.1),
                   dict(momentum=0.9, l2_regularization=0.1, average_start=10)):
        assert lazy_noise_applies(oracle, replace(cfg, **change), **free)
    assert not lazy_noise_applies(oracle, replace(cfg, max_weight_norm=1.0), **free)
    for key, value in (("public_oracle", lambda th: th), ("noise_mask", np.ones(1)),
                       ("noise_fn", lambda r: 0.0), ("callback", lambda t, th: None)):
        assert not lazy_noise_applies(oracle, cfg, **{**free, key: value})
    dense = LinearGradientOracle(oracle.X.toarray(), oracle.y, oracle.loss, True, 1.0)
    assert not lazy_noise_applies(dense, cfg, **free)


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("average_start", [None, 12])
@pytest.mark.parametrize("clip", [1.0, np.inf])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("momentum,l2", [(0.0, 0.0), (0.9, 0.0), (0.9, 0.05), (0.0, 0.05)])
def test_lazy_without_noise_equals_eager(k, average_start, clip, fit_intercept, momentum, l2):
    # With σ = 0 the two loops do the same arithmetic on the same batches
    # (C = ∞ is the non-private baseline: σ C must not become NaN); with
    # momentum or weight decay the same maths in another order (the lazy
    # loop carries m v and applies the pending steps as matrix products).
    oracle, n = _sparse_problem(k, fit_intercept=fit_intercept)
    oracle.max_grad_norm = clip
    cfg = replace(_lazy_config(0.0, average_start), max_grad_norm=clip, momentum=momentum,
                  l2_regularization=l2)
    theta0 = np.zeros((oracle.n_features + int(fit_intercept), k))
    theta0[0] = 0.3  # a non-zero start: weight decay acts on it
    eager = run_dp_sgd(theta0, oracle, n, cfg, sample_rng=np.random.default_rng(5),
                       noise_rng=np.random.default_rng(6), callback=lambda t, th: None).theta
    lazy = run_lazy_sparse(theta0, oracle, n, cfg, sample_rng=np.random.default_rng(5),
                           noise_rng=np.random.default_rng(6), block_length=7).theta
    np.testing.assert_allclose(lazy, eager, rtol=1e-12, atol=1e-14)


@pytest.mark.statistical
@pytest.mark.parametrize("average_start", [None, 12])
def test_lazy_noise_of_untouched_coordinates_has_the_exact_variance(average_start):
    """Never-touched columns hold pure summed noise: check its variance in closed form.

    Final iterate: Var = Σ_u c_u²; tail average over s = t0..T-1 of θ(s+1):
    Var = Σ_u c_u² (T − max(u, t0))² / (T − t0)², with c_u = η_u σ C / (q n).
    Power (issue 30): 20,000 draws, a 5 % error in the std is detected with
    probability > 0.999998 (as in test_noise_std_is_noise_multiplier_times_clip).
    """
    oracle, n = _sparse_problem(1, empty_cols=500)
    cfg = _lazy_config(1.3, average_start)
    T = cfg.steps
    c2 = np.array([(cfg.step_size(u) * 1.3 / (0.2 * n)) ** 2 for u in range(T)])
    if average_start is None:
        var = c2.sum()
    else:
        u = np.arange(T)
        var = (c2 * (T - np.maximum(u, average_start)) ** 2).sum() / (T - average_start) ** 2
    _assert_empty_columns_are_normal(oracle, n, cfg, var, block_length=7)


def _momentum_variance(cfg, n, average_start):
    """The variance of an empty column's released value (final iterate, or the tail
    average from ``average_start``) under momentum and L2, from the eager recursion with
    per-step noise std c = 1.3 / (0.2 n)."""
    T = cfg.steps
    theta, _, A = _eager_linear_recursion(cfg, 1.3 / (0.2 * n), 0, T,
                                          tail_from=T if average_start is None else average_start)
    row = theta if average_start is None else A / (T - average_start)
    return (row[3:] ** 2).sum()


def _assert_empty_columns_are_normal(oracle, n, cfg, var, **lazy_kwargs):
    """The empty columns of 40 lazy fits (``run_lazy_sparse(..., **lazy_kwargs)``; 500
    columns: 20,000 independent draws) are N(0, var): std within 5 standard errors, mean
    within 5, and a KS test."""
    values = []
    for seed in range(40):
        theta = run_lazy_sparse(np.zeros((oracle.n_features + 1, 1)), oracle, n, cfg,
                                sample_rng=np.random.default_rng([seed, 0]),
                                noise_rng=np.random.default_rng([seed, 1]), **lazy_kwargs).theta
        values.append(theta[6:-1, 0])  # the empty columns
    values = np.concatenate(values)
    rel_se = 1 / np.sqrt(2 * values.size)  # of the sample std
    assert abs(values.std() / np.sqrt(var) - 1) < 5 * rel_se
    assert abs(values.mean()) < 5 * np.sqrt(var / values.size)
    assert stats.kstest(values / np.sqrt(var), "norm").pvalue > 1e-4


@pytest.mark.statistical
@pytest.mark.parametrize("k,average_start,momentum,l2", [
    (1, 12, 0.0, 0.0), (3, None, 0.0, 0.0),
    (1, 12, 0.9, 0.0), (1, None, 0.9, 0.0), (3, 12, 0.9, 0.02), (1, 12, 0.0, 0.05)])
def test_lazy_and_eager_noise_give_the_same_distribution(k, average_start, momentum, l2):
    """Eager vs lazy released models: same distribution (see :func:`_assert_lazy_matches_eager`).

    The gradient depends on θ, so this exercises the catch-up before each
    read. Power (issue 30): a 5 % error in the lazy path's noise std, or in
    the momentum recursion's covariance, is detected with probability
    >= 99 % (``benchmarks/bench_noise_power.py``, three of these six
    configurations at these seeds: z of the injected error 7.66-14.78 for
    the std and 10.28-14.44 for the momentum covariance, against the
    threshold 3.29; power 0.9996 or more even at z - 1). Before issue 30 (6
    columns at σ = 0.8, KS only) a 10 % std error was caught in 0 % of runs.
    """
    oracle, n = _sparse_problem(k, d=_POWER_D)
    cfg = replace(_lazy_config(_POWER_SIGMA, average_start), momentum=momentum,
                  l2_regularization=l2)
    _assert_lazy_matches_eager(oracle, n, cfg, k)


@pytest.mark.parametrize("average_start", [None, 12])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_lazy_chunking_changes_nothing(average_start, momentum, monkeypatch):
    # Steps go to the kernel in chunks of drawn-ahead batches; one step per
    # call must give the same model bit for bit (no normal is skipped while
    # the stream's first block lasts).
    from sklearn_fdp._engine import _lazy

    oracle, n = _sparse_problem(3)
    cfg = replace(_lazy_config(0.9, average_start), momentum=momentum)
    theta0 = np.zeros((oracle.n_features + 1, 3))

    def fit():
        return run_lazy_sparse(theta0, oracle, n, cfg, sample_rng=np.random.default_rng(8),
                               noise_rng=np.random.default_rng(9), block_length=7).theta

    chunked = fit()
    monkeypatch.setattr(_lazy, "MAX_CHUNK_STEPS", 1)
    np.testing.assert_array_equal(fit(), chunked)



def _tiny_normal_blocks(monkeypatch, size=40):
    """The lazy engine's normals in blocks of ``size``: the momentum kernel stops often."""
    from sklearn_fdp._engine import _lazy, _noise

    monkeypatch.setattr(_noise, "FIRST_BLOCK", size)
    real = _lazy.NormalStream
    monkeypatch.setattr(_lazy, "NormalStream",
                        lambda rng, **kw: real(rng, **{**kw, "block": size}))


@pytest.mark.parametrize("k,dim", [(1, 2), (1, 3), (3, 2), (3, 3)])
def test_momentum_kernel_resumes_where_it_stopped_bit_for_bit(k, dim):
    # lazy_momentum_steps stops before a row (or a step's intercept) that could
    # need more normals than it was handed. Handed the rest of the same
    # sequence, it must carry on exactly as an uninterrupted run: the tables
    # advanced once per step, the intercept's partial gradient sum kept.
    from sklearn_fdp._kernels._momentum import lazy_momentum_steps, reset_momentum_tables

    oracle, n = _sparse_problem(k, n=60)
    X, d, steps = oracle.X, oracle.n_features, 7
    rng = np.random.default_rng(3)
    batches = [np.flatnonzero(rng.random(n) < 0.3) for _ in range(steps)]
    batches[2] = batches[2][:0]  # an empty batch: only its intercept's normals
    rows = np.concatenate(batches).astype(np.intp)
    batch_ptr = np.concatenate([[0], np.cumsum([len(b) for b in batches])]).astype(np.intp)
    eta = np.linspace(0.5, 0.1, steps)  # a schedule: every lag's table changes each step
    normals = rng.standard_normal(20_000)

    def run(cuts):
        S = np.zeros((d, dim * k + 1))
        S[:, :k] = 0.1
        intercept, velocity, tail_sum = np.full(k, 0.2), np.zeros(k), np.zeros(k)
        Phi, Sig, F = (np.zeros((steps + 1, 3, 3)) for _ in range(3))
        rank = np.zeros(steps + 1, dtype=np.intp)
        reset_momentum_tables(dim, Phi, Sig, F, rank)
        at, g_b = np.zeros(3, dtype=np.int64), np.zeros(k)
        used, stops = 0, []
        for cut in [*cuts, normals.size]:
            used += lazy_momentum_steps(
                X.indptr, X.indices, X.data, rows, batch_ptr, oracle.y_kernel, S, k, dim,
                intercept, velocity, tail_sum, oracle.code, oracle.x_norm_sq, 1.0, 0, 0, eta,
                0.3 * n, 0.9, 0.01, 0.05, 1.5, False, Phi, Sig, F, rank,
                normals[used:max(cut, used)], 0, np.empty((n, k)), oracle.loss_param, at, g_b)
            if at[1] == steps:
                break
            stops.append((int(at[1]), int(at[2])))
        assert at[1] == steps
        return np.concatenate([S.ravel(), intercept, velocity, tail_sum]), used, stops

    whole, total, none = run([])
    assert none == [] and total > 20
    for cuts in ([total // 3, total // 2], list(range(0, total, 7)), [5, 5, total - 4]):
        got, used, stops = run(cuts)
        assert stops  # it did stop, mid-step too
        np.testing.assert_array_equal(got, whole)
        assert used == total
    assert any(row > 0 for _, row in run(list(range(0, total, 7)))[2])



def test_momentum_flush_resumes_where_it_stopped_bit_for_bit():
    # The flush of every coordinate runs through the blocks of normals as
    # drawn: it stops before a coordinate that might not have its normals and
    # carries on, handed the rest of the sequence, as if uninterrupted.
    from sklearn_fdp._kernels._momentum import (
        advance_momentum_tables,
        flush_momentum,
        reset_momentum_tables,
    )

    k, dim, d, lag_max = 2, 3, 50, 5
    rng = np.random.default_rng(4)
    Phi, Sig, F = (np.zeros((lag_max + 1, 3, 3)) for _ in range(3))
    rank = np.zeros(lag_max + 1, dtype=np.intp)
    reset_momentum_tables(dim, Phi, Sig, F, rank)
    for t in range(1, lag_max + 1):
        advance_momentum_tables(t, 0.3, False, 0.9, 0.01, 0.2, dim, Phi, Sig, F, rank)
    S0 = rng.normal(size=(d, dim * k + 1))
    S0[:, -1] = rng.integers(0, lag_max + 1, d)  # the step each coordinate is caught up to
    normals = rng.standard_normal(2000)

    def run(cuts):
        S, used, j, stops = S0.copy(), 0, 0, 0
        for cut in [*cuts, normals.size]:
            u, j = flush_momentum(S, k, dim, lag_max, Phi, F, rank,
                                  normals[used:max(cut, used)], j, dim * k)
            used += u
            if j == d:
                break
            stops += 1
        assert j == d
        return S, used, stops

    whole, total, none = run([])
    assert none == 0 and np.all(whole[:, -1] == lag_max)
    for cuts in ([total // 2], list(range(0, total, 5)), [3, 3, total - 1]):
        got, used, stops = run(cuts)
        assert stops > 0 and used == total
        np.testing.assert_array_equal(got, whole)

@pytest.mark.parametrize("average_start", [None, 12])
def test_lazy_momentum_stops_do_not_depend_on_the_chunking(average_start, monkeypatch):
    # With short blocks of normals the kernel stops many times a step; where
    # it stops depends on the blocks only, so one step per call changes
    # nothing, bit for bit.
    from sklearn_fdp._engine import _lazy

    _tiny_normal_blocks(monkeypatch)
    calls = []
    kernel = _lazy.lazy_momentum_steps
    monkeypatch.setattr(_lazy, "lazy_momentum_steps",
                        lambda *a: calls.append(1) or kernel(*a))
    oracle, n = _sparse_problem(3)
    cfg = replace(_lazy_config(0.9, average_start), momentum=0.9)
    theta0 = np.zeros((oracle.n_features + 1, 3))

    def fit():
        return run_lazy_sparse(theta0, oracle, n, cfg, sample_rng=np.random.default_rng(8),
                               noise_rng=np.random.default_rng(9), block_length=7).theta

    chunked = fit()
    assert len(calls) >= 10  # five blocks of steps (one call each), and at least 5 stops
    monkeypatch.setattr(_lazy, "MAX_CHUNK_STEPS", 1)
    np.testing.assert_array_equal(fit(), chunked)


@pytest.mark.statistical
@pytest.mark.parametrize("k,l2", [(1, 0.0), (3, 0.02)])
def test_lazy_momentum_with_stops_keeps_the_eager_distribution(k, l2, monkeypatch):
    """The KS comparison of the released model, eager vs lazy, with blocks of 40 normals.

    The momentum kernel then stops and resumes several times a step
    (skipping the short remainder of each block); 1,000 runs per side,
    Bonferroni over coordinates at a total level of 1e-3.
    """
    _tiny_normal_blocks(monkeypatch)
    oracle, n = _sparse_problem(k, d=_POWER_D)
    cfg = replace(_lazy_config(_POWER_SIGMA, 12), momentum=0.9, l2_regularization=l2)
    _assert_lazy_matches_eager(oracle, n, cfg, k)


# The distribution tests run on 40 sparse columns at σ = 2 (the noise is most of
# each coordinate's variance): the pooled variance test then has the power the
# issue-30 standard asks for with 1,000 runs per side (on 6 columns at σ = 0.8
# it needed about 9,000).
_POWER_D, _POWER_SIGMA, _POWER_RUNS = 40, 2.0, 1000
_Z_LEVEL = 3.29  # two-sided 1e-3


def lazy_vs_eager(oracle, n, cfg, k, *, lazy_cfg=None, runs=_POWER_RUNS):
    """``(smallest Bonferroni-scaled KS p-value, z of the pooled log-variance ratio)``.

    ``runs`` eager fits (a callback forces the eager loop) against ``runs``
    lazy ones (``lazy_cfg``, default ``cfg``), each from its own seeds. The
    KS tests compare each coordinate's law; the variance statistic
    ``T = Σ_j log(var_lazy_j / var_eager_j)`` over every coordinate is what a
    wrong noise scale moves (all coordinates the same way), standardised by
    its permutation standard deviation (the runs pooled and split again 300
    times at a fixed seed: valid whatever the coordinates' correlation).
    """
    lazy_cfg = cfg if lazy_cfg is None else lazy_cfg
    return compare_runs(released_models(oracle, n, cfg, k, eager=True, runs=runs),
                        released_models(oracle, n, lazy_cfg, k, eager=False, runs=runs))


def released_models(oracle, n, cfg, k, *, eager, runs=_POWER_RUNS):
    """``runs`` released models (rows), eager (a callback forces the eager loop) or lazy."""
    theta0 = np.zeros((oracle.n_features + 1, k))
    tags = (1, 2) if eager else (3, 4)
    extra = dict(callback=lambda t, th: None) if eager else {}
    return np.array([run_dp_sgd(theta0, oracle, n, cfg,
                                sample_rng=np.random.default_rng([s, tags[0]]),
                                noise_rng=np.random.default_rng([s, tags[1]]),
                                **extra).theta.ravel() for s in range(runs)])


def compare_runs(eager, lazy):
    """The two statistics of :func:`lazy_vs_eager` for given runs."""
    runs = len(eager)
    p_values = [stats.ks_2samp(eager[:, j], lazy[:, j]).pvalue for j in range(eager.shape[1])]

    def pooled(a, b):
        return np.sum(np.log(a.var(axis=0) / b.var(axis=0)))

    both = np.concatenate([eager, lazy])
    perm = np.random.default_rng(0)
    null = []
    for _ in range(300):
        order = perm.permutation(len(both))
        null.append(pooled(both[order[:runs]], both[order[runs:]]))
    return min(p_values) * len(p_values), pooled(lazy, eager) / np.std(null)


def _assert_lazy_matches_eager(oracle, n, cfg, k):
    """Two-sample KS per coordinate of the released model (Bonferroni over coordinates at
    a total level of 1e-3) and the pooled variance test at |z| < 3.29 (two-sided 1e-3);
    1,000 runs per side (:func:`lazy_vs_eager`)."""
    p_min, z = lazy_vs_eager(oracle, n, cfg, k)
    assert p_min > 1e-3
    assert abs(z) < _Z_LEVEL


@pytest.mark.statistical
@pytest.mark.parametrize("where", ["noise_std", "momentum_covariance"])
def test_lazy_vs_eager_comparison_detects_a_5_percent_error(where, monkeypatch):
    """Issue 30 item 3: the comparison above fails when the lazy path is 5 % off.

    ``noise_std``: the lazy run's noise multiplier x 1.05. ``momentum_covariance``:
    the catch-up of pending momentum noise (its tables, in every catch-up and
    flush) built with the per-step noise scale x 1.05, so the recursion's
    covariance x 1.1025 while touched coordinates keep their own noise. At
    these fixed seeds the pooled variance statistic is past the threshold;
    the power over seeds is in ``benchmarks/bench_noise_power.py``.
    """
    oracle, n = _sparse_problem(1, d=_POWER_D)
    cfg = replace(_lazy_config(_POWER_SIGMA, 12), momentum=0.9)
    lazy_cfg = cfg
    if where == "noise_std":
        lazy_cfg = replace(cfg, noise_multiplier=1.05 * cfg.noise_multiplier)
    else:
        scale_momentum_covariance(monkeypatch.setattr, 1.05)
    p_min, z = lazy_vs_eager(oracle, n, cfg, 1, lazy_cfg=lazy_cfg)
    assert z > _Z_LEVEL


def scale_momentum_covariance(setattr_, factor):
    """Make the lazy momentum catch-up's noise scale ``factor`` times too large.

    ``setattr_(module, name, value)`` installs the wrappers (``monkeypatch.setattr``
    in a test; the benchmark restores the originals itself).
    """
    from sklearn_fdp._engine import _lazy

    steps, tables = _lazy.lazy_momentum_steps, _lazy.advance_momentum_tables

    def wrong_steps(*args):
        args = list(args)
        args[21] *= factor  # c: the tables' per-step noise scale
        return steps(*args)

    def wrong_tables(lag, eta, same, m, lam, c, *rest):
        return tables(lag, eta, same, m, lam, factor * c, *rest)

    setattr_(_lazy, "lazy_momentum_steps", wrong_steps)
    setattr_(_lazy, "advance_momentum_tables", wrong_tables)


def _eager_linear_recursion(cfg, c, t_start, t_stop, tail_from):
    """The eager update of one untouched coordinate, steps ``t_start .. t_stop - 1``, symbolically.

    Rows: θ, v, A as coefficients over ``[θ(t_start), v(t_start), A(t_start), e_t_start, ..]``
    (``e_u`` the step's standard normal, ``c = σ C / (q n)``), following
    ``sgd_update``: ``g = c e + λ θ``, ``v = m v + g``, ``θ -= η_t v``, ``A += θ``
    from step ``tail_from`` on.
    """
    m, lam = cfg.momentum, cfg.l2_regularization
    n_e = t_stop - t_start
    theta, v, A = (np.zeros(3 + n_e) for _ in range(3))
    theta[0], v[1], A[2] = 1.0, 1.0, 1.0
    for u in range(t_start, t_stop):
        e = np.zeros(3 + n_e)
        e[3 + u - t_start] = 1.0
        v = m * v + c * e + lam * theta
        theta = theta - cfg.step_size(u) * v
        if u >= tail_from:
            A = A + theta
    return theta, v, A


@pytest.mark.parametrize("schedule", ["cosine", "constant"])
@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("l2", [0.0, 0.03])
def test_momentum_catch_up_tables_are_the_eager_recursion(schedule, dim, l2):
    """Φ_k, Σ_k (and F_k F_kᵀ = Σ_k) of every lag k equal the k-fold eager update.

    The lazy state carries p = m v; the recursion here is written in v (as
    the eager kernel), so the v(start) column maps to Φ[:, 1] m.
    """
    from sklearn_fdp._kernels._momentum import advance_momentum_tables, reset_momentum_tables

    cfg = replace(_lazy_config(1.0, None, steps=40), momentum=0.9, l2_regularization=l2,
                  lr_schedule=schedule, learning_rate=0.7)
    c, f, g = 0.37, 5, 17  # the block's first step, its end
    same = schedule == "constant"
    Phi, Sig, F = (np.zeros((g - f + 1, 3, 3)) for _ in range(3))
    rank = np.zeros(g - f + 1, dtype=np.intp)
    reset_momentum_tables(dim, Phi, Sig, F, rank)
    for t in range(f + 1, g + 1):
        advance_momentum_tables(t - f, cfg.step_size(t - 1), same, cfg.momentum, l2, c, dim,
                                Phi, Sig, F, rank)
    # The tables now are those of a catch-up to step g.
    for k in range(g - f + 1):
        rows = _eager_linear_recursion(cfg, c, g - k, g, tail_from=0 if dim == 3 else g)
        want_phi = np.array([[r[0], r[1] / cfg.momentum, r[2]] for r in rows])
        want_phi[1] *= cfg.momentum  # p = m v
        noise = np.array([r[3:] for r in rows])
        noise[1] *= cfg.momentum
        want_sig = noise @ noise.T
        np.testing.assert_allclose(Phi[k, :dim, :dim], want_phi[:dim, :dim], rtol=1e-12,
                                   atol=1e-13)
        np.testing.assert_allclose(Sig[k, :dim, :dim], want_sig[:dim, :dim], rtol=1e-11,
                                   atol=1e-13)
        r = rank[k]
        assert r == min(k, dim)  # k steps, k noises: rank k until the state's dimension
        assert not F[k, :, r:].any()
        np.testing.assert_allclose(F[k] @ F[k].T, Sig[k], rtol=1e-10, atol=1e-12)


@pytest.mark.statistical
@pytest.mark.parametrize("average_start", [None, 12])
def test_lazy_momentum_noise_of_untouched_coordinates_has_the_eager_variance(average_start):
    """Never-touched columns with momentum and weight decay: their released value is Gaussian
    with the variance of the eager recursion over the whole run (through block flushes and
    the start of averaging).

    Power (issue 30): 20,000 draws, a 5 % error in the std (the recursion's
    covariance x 1.1025) is detected with probability > 0.999998.
    """
    oracle, n = _sparse_problem(1, empty_cols=500)
    cfg = replace(_lazy_config(1.3, average_start), momentum=0.9, l2_regularization=0.02)
    _assert_empty_columns_are_normal(oracle, n, cfg, _momentum_variance(cfg, n, average_start),
                                     block_length=7)


@pytest.mark.statistical
@pytest.mark.parametrize("schedule, average_start", [("constant", None), ("constant", 250),
                                                     ("cosine", 250)])
def test_lazy_momentum_default_blocks_keep_the_eager_variance(schedule, average_start):
    """The default block length (issue 18: one block under a constant step size, so lags of
    hundreds of steps; a cost balance under a schedule): never-touched columns still get the
    variance of the eager recursion over the whole run.

    Power (issue 30): 12,000 draws (relative SE of the std 0.0065, tolerance
    5 SE = 0.032): a 5 % error in the std is detected with probability
    Φ(2.6) = 0.995 (too large) or Φ(2.9) = 0.998 (too small).
    """
    from sklearn_fdp._engine._lazy import MOMENTUM_MAX_BLOCK_CONSTANT, _momentum_block_length

    oracle, n = _sparse_problem(1, empty_cols=300)
    cfg = replace(_lazy_config(1.3, average_start, steps=400), momentum=0.9,
                  l2_regularization=0.01, lr_schedule=schedule, learning_rate=0.05)
    eta = np.array([cfg.step_size(t) for t in range(cfg.steps)])
    length = _momentum_block_length(eta, oracle.n_features, 1)
    assert (length == MOMENTUM_MAX_BLOCK_CONSTANT) == (schedule == "constant")
    var = _momentum_variance(cfg, n, average_start)
    _assert_empty_columns_are_normal(oracle, n, cfg, var)  # 300 columns: 12,000 draws


def test_normal_stream_fresh_skips_only_a_short_remainder():
    rng = np.random.default_rng(3)
    want = np.random.default_rng(3).standard_normal(3 * 64)
    with NormalStream(rng, block=64, background=False) as s:
        assert s.available() == 0
        s.advance(s.fresh(10).shape[0] - 3)  # 3 left of the first block: < 64 / 16
        assert s.available() == 3
        v = s.fresh(8)  # skips the 3, starts the second block without a copy
        np.testing.assert_array_equal(v, want[64:128])
        s.advance(40)  # 24 left: not short, so the next view joins them to block 3
        v = s.fresh(30)
        np.testing.assert_array_equal(v, want[104:192])


def _numpy_reference_run(theta0, oracle, n, cfg, sample_rng, noise_rng, public_oracle=None,
                         noise_fn=None):
    """The engine's eager update in plain numpy (what the fused kernel replaced)."""
    theta = np.array(theta0, copy=True)
    velocity = np.zeros_like(theta)
    sampler = PoissonSampler(n, cfg.sampling_rate, sample_rng)
    noise_std = cfg.noise_multiplier * cfg.max_grad_norm
    noise = (NoiseStream(noise_rng, theta.shape, theta.dtype, noise_std, None, cfg.steps)
             if noise_fn is None and noise_std > 0 else None)
    average, n_averaged, seen = None, 0, []
    for t in range(cfg.steps):
        grad = oracle(sampler.sample(), theta)
        if noise_fn is not None:
            grad += noise_fn(noise_rng)
        elif noise is not None:
            grad += noise.draw()
        grad /= cfg.sampling_rate * n
        if public_oracle is not None:
            grad *= cfg.alpha
            grad += public_oracle(theta)
        if cfg.l2_regularization:
            grad += cfg.l2_regularization * theta
        if cfg.momentum:
            velocity *= cfg.momentum
            velocity += grad
            grad = velocity
        theta -= cfg.step_size(t) * grad
        if cfg.max_weight_norm is not None:
            norm = np.linalg.norm(theta)
            if norm > cfg.max_weight_norm:
                theta *= cfg.max_weight_norm / norm
        if cfg.average_start is not None and t >= cfg.average_start:
            n_averaged += 1
            if average is None:
                average = theta.copy()
            else:
                average += (theta - average) / n_averaged
        seen.append(theta.copy())
    if noise is not None:
        noise.close()
    return (theta if average is None else average), seen


@pytest.fixture
def nep50():
    """NumPy's NEP 50 promotion for the numpy reference, on every supported NumPy.

    The fused kernel combines scalars with arrays as NumPy 2 does (NEP 50: a
    float64 scalar times a float32 array is float64, then stored as float32).
    NumPy 1.26 (the declared minimum) promotes by value by default, so its
    reference update would round differently in float32; its opt-in NEP 50
    mode gives the NumPy 2 semantics the kernel implements.
    """
    set_state = getattr(np, "_set_promotion_state", None)
    if set_state is None or np.lib.NumpyVersion(np.__version__) >= "2.0.0":
        yield
        return
    old = np._get_promotion_state()
    set_state("weak")
    try:
        yield
    finally:
        set_state(old)


@pytest.mark.parametrize("n_type", [int, np.int64])  # np.int64: a strong float64 normaliser
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("setting", [
    dict(momentum=0.9, average_start=10),
    dict(momentum=0.0, lr_schedule="cosine"),
    dict(momentum=0.5, average_start=0, noise_multiplier=0.0, lr_schedule="linear"),
    dict(momentum=0.9, lr_schedule="cosine", noise_multiplier=2.0, l2_regularization=0.01),
    dict(momentum=0.9, average_start=5, max_weight_norm=0.5, alpha=0.3, public=True),
    dict(momentum=0.0, average_start=5, noise_fn=True, l2_regularization=0.1),
])
def test_fused_update_is_the_numpy_update_bit_for_bit(dtype, setting, n_type, nep50):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 7)).astype(dtype)
    loss = LinearLoss("log_loss", 3)
    oracle = LinearGradientOracle(X, loss.encode(rng.integers(0, 3, 200)), loss, True, 1.0)
    setting = dict(setting)
    public = (lambda th: (0.1 * np.tanh(th)).astype(th.dtype)) if setting.pop("public", False) \
        else None
    noise_fn = (lambda r: r.normal(size=(8, 3))) if setting.pop("noise_fn", False) else None
    cfg = EngineConfig(**{**dict(steps=25, sampling_rate=0.1, noise_multiplier=1.0,
                                 max_grad_norm=1.0, learning_rate=0.3), **setting})
    theta0 = rng.normal(size=(8, 3)).astype(dtype)
    original = theta0.copy()
    seen = []
    fused = run_dp_sgd(theta0, oracle, n_type(200), cfg, sample_rng=np.random.default_rng(1),
                       noise_rng=np.random.default_rng(2), public_oracle=public,
                       noise_fn=noise_fn, callback=lambda t, th: seen.append(th.copy())).theta
    want, want_seen = _numpy_reference_run(theta0, oracle, n_type(200), cfg,
                                           np.random.default_rng(1), np.random.default_rng(2),
                                           public, noise_fn)
    assert fused.dtype == want.dtype == dtype
    np.testing.assert_array_equal(fused, want)
    np.testing.assert_array_equal(np.array(seen), np.array(want_seen))
    np.testing.assert_array_equal(theta0, original)  # never written


@pytest.mark.parametrize("n,size", [(32561, 256), (32561, 651), (32561, 652), (100_000, 300),
                                    (20_000, 399), (10_001, 1), (32561, 0), (500, 500),
                                    (10_000, 7_000), (3, 2), (1, 1)])
def test_compiled_choice_is_numpy_choice(n, size):
    # The Poisson sampler's compiled Floyd: numpy's picks, in numpy's order,
    # and the generator left in numpy's state (so every later draw agrees),
    # in both of numpy's regimes (Floyd, and the tail shuffle it defers to).
    from sklearn_fdp._engine._floyd import ChoiceWithoutReplacement

    for seed in range(30):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        want = a.choice(n, size, replace=False)
        got = ChoiceWithoutReplacement(b)(n, size)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert a.bit_generator.state == b.bit_generator.state


def test_compiled_choice_reuses_its_buffer_exactly():
    # The tail shuffle keeps arange(n) between calls and undoes its swaps:
    # a long run of calls on one instance (sizes and n changing, both
    # regimes interleaved) still gives numpy's picks, call after call.
    from sklearn_fdp._engine._floyd import ChoiceWithoutReplacement

    a, b = np.random.default_rng(3), np.random.default_rng(3)
    choice = ChoiceWithoutReplacement(b)
    sizes = np.random.default_rng(4).integers(0, 3000, size=200)
    for t, size in enumerate(sizes):
        n = 32561 if t < 120 else 20_011
        np.testing.assert_array_equal(choice(n, int(size)), a.choice(n, int(size), replace=False))
    assert a.bit_generator.state == b.bit_generator.state


def test_uniform_sampler_draws_what_numpy_would():
    rng, ref = np.random.default_rng(5), np.random.default_rng(5)
    sampler = UniformSampler(32561, 1444, rng)
    for _ in range(50):
        np.testing.assert_array_equal(sampler.sample(),
                                      np.sort(ref.choice(32561, 1444, replace=False)))
    assert rng.bit_generator.state == ref.bit_generator.state


def test_poisson_sampler_draws_what_numpy_would():
    rng, ref = np.random.default_rng(7), np.random.default_rng(7)
    sampler = PoissonSampler(32561, 256 / 32561, rng)
    for _ in range(50):
        want = np.sort(ref.choice(32561, ref.binomial(32561, 256 / 32561), replace=False))
        np.testing.assert_array_equal(sampler.sample(), want)


def test_noise_stream_background_draws_the_same_sequence():
    # Drawing one step ahead on a worker thread must not change a single bit,
    # nor leave the generator in another state.
    mask = np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 0.5]])
    results = []
    for background in (False, True):
        rng = np.random.default_rng(11)
        with NoiseStream(rng, (3, 2), np.float32, 0.7, mask, 5, background=background) as s:
            draws = [s.draw() for _ in range(5)]
            with pytest.raises(RuntimeError, match="exhausted"):
                s.draw()
        results.append((np.array(draws), rng.random()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[0][0].dtype == np.float32
    assert results[0][1] == results[1][1]
    assert np.all(results[0][0][:, 1] == 0)


def _count_noise_threads(monkeypatch):
    """Count the worker pools the noise streams start (a list that grows by one per pool)."""
    from sklearn_fdp._engine import _noise

    started = []
    real = _noise.ThreadPoolExecutor
    monkeypatch.setattr(_noise, "ThreadPoolExecutor",
                        lambda *a, **k: started.append(1) or real(*a, **k))
    monkeypatch.setattr(_noise.os, "cpu_count", lambda: 2)
    return started


def test_background_noise_gives_bit_identical_fits(monkeypatch):
    from sklearn_fdp import config_context
    from sklearn_fdp._engine import _noise

    started = _count_noise_threads(monkeypatch)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 40))
    loss = LinearLoss("log_loss", 5)
    y = loss.encode(rng.integers(0, 5, 300))
    oracle = LinearGradientOracle(X, y, loss, True, 1.0)
    cfg = EngineConfig(steps=20, sampling_rate=0.1, noise_multiplier=1.0, max_grad_norm=1.0,
                       learning_rate=0.1, momentum=0.9, average_start=10)
    thetas = []
    for threshold, prefetch in ((1, False), (10**9, True), (1, True)):  # only the last: a thread
        monkeypatch.setattr(_noise, "BACKGROUND_MIN_SIZE", threshold)
        with config_context(noise_prefetch=prefetch):
            thetas.append(run_dp_sgd(np.zeros((41, 5)), oracle, 300, cfg,
                                     sample_rng=np.random.default_rng(1),
                                     noise_rng=np.random.default_rng(2)).theta)
        assert len(started) == (threshold == 1 and prefetch)
    np.testing.assert_array_equal(thetas[0], thetas[1])
    np.testing.assert_array_equal(thetas[0], thetas[2])


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_lazy_noise_on_a_worker_thread_only_when_asked_and_bit_identical(monkeypatch, momentum):
    # The lazy CSR path draws its blocks of normals on the calling thread by
    # default; with noise_prefetch=True on a worker, the same numbers.
    from sklearn_fdp import config_context

    started = _count_noise_threads(monkeypatch)
    oracle, n = _sparse_problem(3)
    cfg = replace(_lazy_config(0.9, 12), momentum=momentum)
    theta0 = np.zeros((oracle.n_features + 1, 3))

    def fit():
        return run_lazy_sparse(theta0, oracle, n, cfg, sample_rng=np.random.default_rng(8),
                               noise_rng=np.random.default_rng(9), block_length=7).theta

    default = fit()
    assert started == []
    with config_context(noise_prefetch=True):
        prefetched = fit()
    assert started == [1]
    np.testing.assert_array_equal(default, prefetched)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("block_bytes", [16, 64, 1000, 8 << 20])
def test_column_subset_norms_blockwise_equal_the_whole_selection(monkeypatch, dtype, block_bytes):
    # FDP's public-column norms are computed block by block (no copy of
    # X[:, public]); they must be the whole selection's norms bit for bit,
    # including when the last block would hold a single row.
    from sklearn_fdp import _outofcore
    from sklearn_fdp._engine._linear import squared_row_norms

    monkeypatch.setattr(_outofcore, "_NORM_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(3)
    for n, d in [(1, 4), (2, 3), (7, 5), (1001, 37)]:
        X = rng.standard_normal((n, d)).astype(dtype)
        cols = np.flatnonzero(rng.random(d) < 0.7)
        got = _outofcore.column_subset_squared_norms(X, cols)
        want = squared_row_norms(X[:, cols])
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_wide_sparse_fit_off_the_lazy_path_warns_and_names_the_fix(monkeypatch):
    # 140,000 parameters on CSR: the defaults (momentum 0.9, averaging,
    # cosine schedule) and weight decay take the lazy path; a per-step
    # callback (verbose) rules it out, so every step draws a Gaussian per
    # coordinate.
    from sklearn_fdp import DPSGDClassifier
    from sklearn_fdp._engine import _lazy
    from sklearn_fdp.exceptions import PerformanceWarning

    rng = np.random.default_rng(0)
    X = sp.random(200, 140_000, density=2e-4, format="csr", random_state=0)
    y = rng.integers(0, 2, 200)
    common = dict(epsilon=1.0, epochs=1, random_state=0)
    with pytest.warns(PerformanceWarning, match=r"per-step callback.*verbose=0"):
        DPSGDClassifier(verbose=1, **common).fit(X, y)
    taken = []
    real = _lazy.run_lazy_sparse
    monkeypatch.setattr(_lazy, "run_lazy_sparse", lambda *a, **kw: taken.append(1) or real(*a, **kw))
    from sklearn_fdp._engine import _loop
    monkeypatch.setattr(_loop, "run_lazy_sparse", _lazy.run_lazy_sparse)
    DPSGDClassifier(**common).fit(X, y)  # lazy: no warning (errors would raise)
    DPSGDClassifier(l2_regularization=1e-3, **common).fit(X, y)
    assert len(taken) == 2
    DPSGDClassifier(verbose=1, **common).fit(X[:, :1000], y)  # small model: no warning


def test_ahead_sampler_announces_the_same_batches_before_use():
    """The engine's prefetch hook: each batch announced ``depth`` draws early, none extra."""
    from sklearn_fdp._engine._samplers import AheadSampler, PoissonSampler

    plain = PoissonSampler(500, 0.05, np.random.default_rng(3))
    expected = [plain.sample() for _ in range(6)]
    announced = []
    ahead = AheadSampler(PoissonSampler(500, 0.05, np.random.default_rng(3)), announced.append,
                         2, 6)
    got = []
    for t in range(6):
        assert len(announced) == min(6, t + 2)  # drawn two steps ahead, never past the last
        got.append(ahead.sample())
        assert got[-1] is announced[t]  # the very array announced: an oracle can match it
    assert len(announced) == 6
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_an_oracle_with_prefetch_is_told_every_batch_first():
    """run_dp_sgd hands a prefetching oracle each batch before asking for its sum."""
    X = np.random.default_rng(0).uniform(-0.3, 0.3, size=(300, 4))
    y = (X[:, 0] > 0).astype(float)
    inner = LinearGradientOracle(X, y, LinearLoss("log_loss", 1), True, 1.0)
    events = []

    class Prefetching:
        max_grad_norm = 1.0
        prefetch_depth = 2

        def prefetch(self, idx):
            events.append(("announce", idx))

        def __call__(self, idx, theta):
            assert any(kind == "announce" and a is idx for kind, a in events)
            events.append(("sum", idx))
            return inner(idx, theta)

    cfg = EngineConfig(steps=5, sampling_rate=0.1, noise_multiplier=1.0, max_grad_norm=1.0,
                       learning_rate=0.1)
    gens = [np.random.default_rng(s) for s in (1, 2, 1, 2)]
    a = run_dp_sgd(np.zeros((5, 1)), Prefetching(), 300, cfg, sample_rng=gens[0],
                   noise_rng=gens[1]).theta
    b = run_dp_sgd(np.zeros((5, 1)), inner, 300, cfg, sample_rng=gens[2], noise_rng=gens[3]).theta
    np.testing.assert_array_equal(a, b)  # the same batches and noise
    assert [k for k, _ in events].count("announce") == 5

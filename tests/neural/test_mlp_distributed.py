"""MLPFeatureDP on torch.distributed (issue 36): two gloo ranks on the CPU.

The ranks run in spawned processes (``tests/neural/_torch_dist_worker.py``)
that join a group through ``init_method=file://``; each module-scoped run
starts the two processes once.
"""

import multiprocessing
import os
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from scipy import stats  # noqa: E402

from sklearn_fdp import MLPFeatureDP  # noqa: E402
from sklearn_fdp._engine import PoissonSampler  # noqa: E402
from sklearn_fdp.neural import fit_distributed  # noqa: E402
from sklearn_fdp.neural._alg1 import Shard, rank_streams, spawn_streams  # noqa: E402

from ..sensitivity._harness import assert_sensitivity  # noqa: E402
from . import _torch_dist_worker as worker  # noqa: E402

WORLD = 2
# KS two-sample test level: a fixed-seed test whose p-value is below it fails.
ALPHA = 1e-3


def _launch(task, tmp_path, world=WORLD, timeout=240, backend="gloo"):
    """Run ``task`` on ``world`` ranks (gloo, or NCCL); the ranks' pickled outputs by rank."""
    ctx = multiprocessing.get_context("spawn")
    init_file = tmp_path / "init"
    procs = [ctx.Process(target=worker.run, args=(r, world, str(init_file), task,
                                                   str(tmp_path), backend))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
        if p.is_alive():
            p.kill()
            pytest.fail(f"rank process of task {task!r} did not finish in {timeout} s")
    outs = []
    for r in range(world):
        path = tmp_path / f"rank{r}.pkl"
        outs.append(pickle.loads(path.read_bytes()) if path.exists() else None)
    return outs, [p.exitcode for p in procs]


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    outs, codes = _launch("fits", tmp_path_factory.mktemp("fits"))
    assert codes == [0, 0]
    for out in outs:
        assert "error" not in out, out["error"]
    return outs


def _in_process_update_norms(seeds, **kw):
    X, y = worker.data()
    return np.array([worker.update_norm(s, MLPFeatureDP(random_state=s, **worker.params(**kw))
                                        .fit(X, y)) for s in seeds])


def test_ranks_end_with_the_same_weights(fits):
    np.testing.assert_array_equal(fits[0]["weights"], fits[1]["weights"])
    np.testing.assert_array_equal(fits[0]["secure_weights"], fits[1]["secure_weights"])


def test_regressor_ranks_agree(fits):
    np.testing.assert_array_equal(fits[0]["regressor"][0], fits[1]["regressor"][0])
    assert np.all(np.isfinite(fits[0]["regressor"][0]))


def test_a_bad_shard_raises_on_every_rank(fits):
    assert fits[1]["bad_shard"].startswith("ValueError") and "NaN" in fits[1]["bad_shard"]
    assert fits[0]["bad_shard"].startswith("RuntimeError")
    assert "failed on rank 1" in fits[0]["bad_shard"]


def test_one_noise_draw_per_step_on_rank_zero(fits):
    # Rank 0 draws the step's Gaussian once; rank 1 never draws (noise="secure" too).
    assert fits[0]["draws"] == fits[0]["steps"] == 3 * len(worker.FEW_SEEDS)
    assert fits[1]["draws"] == 0
    assert fits[0]["secure_draws"] == 3 and fits[1]["secure_draws"] == 0


def test_accounting_unchanged(fits):
    X, y = worker.data()
    ref = MLPFeatureDP(random_state=0, **worker.params()).fit(X, y)
    assert fits[0]["epsilon"] == fits[1]["epsilon"] == ref.epsilon_


def test_one_rank_group_is_the_in_process_fit_bit_for_bit(fits):
    distributed, in_process = fits[0]["solo"]
    np.testing.assert_array_equal(distributed, in_process)


@pytest.mark.slow
def test_equal_in_distribution_to_the_in_process_fit(tmp_path):
    """KS two-sample test of ``‖w_T − w_0‖``: distributed fits vs in-process fits of other seeds.

    The statistic moves with the noise and with the batches. Power: the
    same test, at the same sample sizes, tells the in-process fit from what
    the two plausible bugs of a distributed fit would give -- the noise
    added on both ranks (std × sqrt(2)) and coins at the wrong rate
    (batches twice as large) -- at the same level.
    """
    outs, codes = _launch("many_fits", tmp_path)
    assert codes == [0, 0] and "error" not in outs[0], outs[0]
    np.testing.assert_array_equal(outs[0]["update_norms"], outs[1]["update_norms"])
    n = len(worker.SEEDS)
    ref = _in_process_update_norms(range(n))
    assert stats.ks_2samp(outs[0]["update_norms"], ref).pvalue > ALPHA
    twice = _in_process_update_norms(range(n), noise_multiplier=np.sqrt(2.0))
    wide = _in_process_update_norms(range(n), batch_size=16)
    for mutant in (twice, wide):
        assert stats.ks_2samp(mutant, ref).pvalue < ALPHA


def test_sensitivity_of_the_all_reduced_sum(fits):
    outs = fits
    full, neighbour = outs[0]["sensitivity"]
    np.testing.assert_array_equal(full, outs[1]["sensitivity"][0])
    # Removing one row of rank 1's shard moves the released sum by at most C
    # (+ float32's rounding slack of a sum of N_ROWS terms).
    C = outs[0]["C"]
    diff = assert_sensitivity(full, neighbour, C, n_terms=worker.N_ROWS, clip=C,
                              dtype=np.float32, what="all-reduced clipped sum")
    assert diff > 0.5 * C  # the adversarial row was clipped: the bound is tight


def test_a_rank_that_dies_makes_the_fit_raise(tmp_path):
    outs, codes = _launch("dies", tmp_path)
    assert codes[1] == 3  # rank 1 left after two steps
    # torch's error (gloo: "Connection reset by peer"), never a fit on rank 0's rows alone.
    assert outs[0] is not None and outs[0]["raised"] is not None, outs[0]


def test_union_of_rank_batches_is_poisson():
    """The per-rank coins of a 2-rank fit give batches of Binomial(n, q) size, independent ranks."""
    n, q, draws = 41, 0.25, 4000
    base = spawn_streams(7, "default")
    shards = [Shard(0, 20), Shard(20, 21)]
    samplers = [PoissonSampler(s.size, q, rank_streams(spawn_streams(7, "default"), r, 2).sample)
                for r, s in enumerate(shards)]
    sizes = np.array([[len(s.sample()) for s in samplers] for _ in range(draws)])
    total = sizes.sum(1)
    # Mean and variance of the union's size against Binomial(41, 0.25), 4.5 standard errors.
    mean, var = n * q, n * q * (1 - q)
    assert abs(total.mean() - mean) < 4.5 * np.sqrt(var / draws)
    se_var = var * np.sqrt(2.0 / (draws - 1)) * 1.1  # kurtosis of a binomial is near normal
    assert abs(total.var(ddof=1) - var) < 4.5 * se_var
    # The ranks' coins are independent: correlation within 4.5 / sqrt(draws).
    assert abs(np.corrcoef(sizes.T)[0, 1]) < 4.5 / np.sqrt(draws)
    # And they are not the one-process stream's coins.
    assert base.sample is not samplers[0].rng


def test_fit_distributed_needs_a_process_group():
    X, y = worker.data()
    with pytest.raises(RuntimeError, match="init_process_group"):
        fit_distributed(MLPFeatureDP(**worker.params()), X, y)
    with pytest.raises(TypeError, match="MLPFeatureDP"):
        fit_distributed(object(), X, y)


@pytest.mark.skipif(not torch.cuda.is_available()
                    or not torch.distributed.is_nccl_available(),
                    reason="needs CUDA and NCCL")
def test_nccl_one_rank_on_the_gpu(tmp_path):
    outs, codes = _launch("cuda", tmp_path, world=1, backend="nccl")
    assert codes == [0] and "error" not in outs[0], outs[0]
    distributed, in_process, device = outs[0]["cuda"]
    assert outs[0]["backend"] == "nccl" and device == "cuda"
    # The same kernels on the same GPU; the all-reduce of one rank adds nothing.
    np.testing.assert_allclose(distributed, in_process, rtol=1e-5, atol=1e-6)

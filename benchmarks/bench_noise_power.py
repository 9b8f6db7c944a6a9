"""Power of the lazy-vs-eager noise comparison (issue 30 item 3).

Three of the test's six configurations are measured (see ``CONFIGS``); the
"correct" rows are the test's own outcome at its seeds.

``tests/test_engine.py`` compares the released models of the eager DP-SGD
loop and of the lazy sparse loop (1,000 runs each; per-coordinate KS and a
pooled log-variance statistic ``z`` standardised by its permutation standard
deviation, failing at ``|z| > 3.29``). Here, for each configuration the test
runs, the same statistic with the lazy path made 5 % wrong: its noise
multiplier x 1.05 ("noise std"), or, with momentum, the catch-up of pending
momentum noise built with the per-step noise scale x 1.05 (the momentum
recursion's covariance x 1.1025;
``tests/test_engine.py::scale_momentum_covariance``). ``z`` is approximately
normal with unit variance around its mean (the permutation standard
deviation), so the probability that the test
detects the error is ``Φ(z − 3.29) + Φ(−z − 3.29)``, evaluated at the
measured ``z`` (one draw of it: the estimate is itself ±1 in ``z``; the
column "power at z − 1" gives the conservative figure).

Run: ``python benchmarks/bench_noise_power.py`` (several minutes on a loaded
2-core machine); writes ``benchmarks/results/noise_power.json`` and
``noise_power.md``.

Results (in ``benchmarks/results/``): ``noise_power.json``, ``noise_power.md``.
Quoted in (the sections whose figures come from these files):

* docs/contributing.md § "The noise tests' power"
"""

import os
import pathlib
import sys
import time
from dataclasses import replace

from scipy import stats

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import library_fingerprint, table_head, write_results  # noqa: E402

from tests import test_engine as te  # noqa: E402

# (k, average_start, momentum, l2): three of the six configurations the test runs
# (plain, momentum, momentum + weight decay with k = 3 outputs): each costs about
# 2 minutes per 1,000 runs on the shared machine. The second is the configuration
# of test_lazy_vs_eager_comparison_detects_a_5_percent_error (same seeds).
CONFIGS = [(1, 12, 0.9, 0.0), (1, 12, 0.0, 0.0), (3, 12, 0.9, 0.02)]


def power(z):
    return float(stats.norm.cdf(abs(z) - te._Z_LEVEL) + stats.norm.cdf(-abs(z) - te._Z_LEVEL))


def main():
    from sklearn_fdp._engine import _lazy

    load_start, date = os.getloadavg()[0], time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = []
    for k, average_start, momentum, l2 in CONFIGS:
        oracle, n = te._sparse_problem(k, d=te._POWER_D)
        cfg = replace(te._lazy_config(te._POWER_SIGMA, average_start), momentum=momentum,
                      l2_regularization=l2)
        eager = te.released_models(oracle, n, cfg, k, eager=True)
        cases = {"correct": cfg, "noise std x 1.05": replace(
            cfg, noise_multiplier=1.05 * cfg.noise_multiplier)}
        if momentum:
            cases["momentum covariance x 1.05^2"] = "tables"
        for label, lazy_cfg in cases.items():
            real = _lazy.lazy_momentum_steps, _lazy.advance_momentum_tables
            if lazy_cfg == "tables":
                te.scale_momentum_covariance(setattr, 1.05)
                lazy_cfg = cfg
            try:
                lazy = te.released_models(oracle, n, lazy_cfg, k, eager=False)
            finally:
                _lazy.lazy_momentum_steps, _lazy.advance_momentum_tables = real
            p_min, z = te.compare_runs(eager, lazy)
            rows.append(dict(k=k, average_start=average_start, momentum=momentum, l2=l2,
                             case=label, ks_p_min_bonferroni=float(p_min), z=float(z),
                             power=power(z) if label != "correct" else None,
                             power_at_z_minus_1=(power(abs(z) - 1) if label != "correct"
                                                 else None)))
            print(rows[-1], flush=True)
    meta = dict(date=date, load_start=load_start, load_end=os.getloadavg()[0],
                runs_per_side=te._POWER_RUNS, columns=te._POWER_D, sigma=te._POWER_SIGMA,
                threshold=te._Z_LEVEL, machine="shared (six agents, 2 cores)",
                **library_fingerprint())
    lines = table_head(
        "Power of the lazy-vs-eager noise comparison (`benchmarks/bench_noise_power.py`)",
        meta, "shared machine; no timing is reported", "1,000 runs per side, 40 sparse "
        "columns, σ = 2; the test fails at |z| > 3.29 or a KS p < 1e-3 (Bonferroni).",
        ["k", "average_start", "momentum", "l2", "lazy path", "z", "KS p (Bonferroni)",
         "power", "power at z − 1"])
    fmt = "{:.4f}".format
    lines += [f"| {r['k']} | {r['average_start']} | {r['momentum']:g} | {r['l2']:g} | "
              f"{r['case']} | {r['z']:.2f} | {min(1.0, r['ks_p_min_bonferroni']):.3g} | "
              f"{'—' if r['power'] is None else fmt(r['power'])} | "
              f"{'—' if r['power'] is None else fmt(r['power_at_z_minus_1'])} |" for r in rows]
    write_results("noise_power", meta, rows, lines)  # noise_power.json, noise_power.md


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Peak memory and time of a fit at a million rows: FDP Algorithm 1 against DP-SGD and SGD.

Data: ``--rows`` x ``--features`` float64 (default 1,000,000 x 50 = 381 MiB),
rows i.i.d. Gaussian scaled to norm 1, binary labels from the sum of the first
5 columns plus noise; passed to ``fit`` as an ndarray (C order) or as a pandas
DataFrame (one float64 block, what ``pd.DataFrame(X)`` holds).

Estimators (one thread each: BLAS, numba and OpenMP pinned to 1), ε = 1,
δ = 1e-7 (< 1/n), ``random_state=0``, 10 epochs:

* ``FeatureDPLogisticRegression`` with the first 10 columns private and a
  public label (FDP Algorithm 1, public pretraining on the 40 public columns);
* ``FeatureDPLogisticRegression`` with the same columns private and a private
  label (``method="auto"``: DP-SGD on the whole record);
* ``DPSGDClassifier`` (defaults);
* scikit-learn's ``SGDClassifier(loss="log_loss", max_iter=10, tol=None)``.

Each (estimator, input) fit runs in a fresh process: it builds the data, fits
once on 2,000 rows (imports and numba compilation outside the measurement),
resets the peak-RSS mark (``/proc/self/clear_refs`` = 5), then fits on all
rows. Reported per fit: peak extra memory (``VmHWM`` after the fit minus
``VmRSS`` before it: what the fit added to the process at its peak, the input
not counted) in MiB and as a multiple of the input's size, and CPU time of
``fit`` (``time.process_time``) and wall time. The configurations run in
``--rounds`` interleaved rounds (default 3), the time ratios are the medians
of the ratios paired within a round (FDP Algorithm 1 / DPSGDClassifier, each
on the same input kind); memory is deterministic (the largest of the rounds
is reported). The machine is shared: the load average is recorded before and
after; CPU time is what survives the load, memory does not depend on it.

Run alone (about 5 minutes on 2 shared cores at load 10):
``PYTHONPATH=. python benchmarks/bench_memory.py`` (``--rows 200000`` for a
quick look; ``--rounds 1``).

Results (in ``benchmarks/results/``): ``memory.json``, ``memory.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Memory at a million rows"
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

from _common import ROOT, library_fingerprint, table_head, write_results

ESTIMATORS = ("FeatureDPLogisticRegression/alg1", "FeatureDPLogisticRegression/private_label",
              "DPSGDClassifier", "SGDClassifier")
KINDS = ("ndarray", "DataFrame")
SINGLE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "NUMBA_NUM_THREADS")


def _status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _estimator(name):
    from sklearn.linear_model import SGDClassifier

    from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression

    common = dict(epsilon=1.0, delta=1e-7, random_state=0)
    if name == "FeatureDPLogisticRegression/alg1":
        return FeatureDPLogisticRegression(private_features=list(range(10)), label_public=True,
                                           **common)
    if name == "FeatureDPLogisticRegression/private_label":
        return FeatureDPLogisticRegression(private_features=list(range(10)), **common)
    if name == "DPSGDClassifier":
        return DPSGDClassifier(**common)
    return SGDClassifier(loss="log_loss", max_iter=10, tol=None, random_state=0)


def child(name, kind, rows, features):
    """One fit in this (fresh) process; prints its measurements as JSON."""
    import time

    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, features))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, :5].sum(axis=1) + 0.3 * rng.standard_normal(rows) > 0).astype(int)
    input_bytes = X.nbytes
    if kind == "DataFrame":
        import pandas as pd

        X = pd.DataFrame(X, columns=[f"c{j}" for j in range(features)])
        warm = X.iloc[:2000]
    else:
        warm = X[:2000]
    _estimator(name).fit(warm, y[:2000])  # imports and compilation outside
    import gc

    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    before = _status_bytes("VmRSS:")
    est = _estimator(name)
    cpu, wall = time.process_time(), time.perf_counter()
    est.fit(X, y)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    extra = _status_bytes("VmHWM:") - before
    print(json.dumps(dict(estimator=name, input=kind, extra_mib=extra / 2**20,
                          extra_x_input=extra / input_bytes, input_mib=input_bytes / 2**20,
                          cpu_s=cpu, wall_s=wall)))


def _run(name, kind, rows, features):
    env = {**os.environ, **{v: "1" for v in SINGLE_THREAD},
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, __file__, "_child", name, kind, str(rows),
                          str(features)], env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{name} on {kind} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    runs = []
    for r in range(args.rounds):
        for kind in KINDS:
            for name in ESTIMATORS:
                res = _run(name, kind, args.rows, args.features)
                res["round"] = r
                runs.append(res)
                print(f"round {r} {kind:9s} {name:42s} +{res['extra_mib']:6.0f} MiB "
                      f"({res['extra_x_input']:.2f}x) cpu {res['cpu_s']:.2f} s", flush=True)
    load_end = os.getloadavg()[0]
    rows = []
    for kind in KINDS:
        for name in ESTIMATORS:
            mine = [x for x in runs if x["estimator"] == name and x["input"] == kind]
            ref = {x["round"]: x for x in runs
                   if x["estimator"] == "DPSGDClassifier" and x["input"] == kind}
            sgd = {x["round"]: x for x in runs
                   if x["estimator"] == "SGDClassifier" and x["input"] == kind}
            rows.append(dict(
                estimator=name, input=kind, input_mib=mine[0]["input_mib"],
                extra_mib=max(x["extra_mib"] for x in mine),
                extra_x_input=max(x["extra_x_input"] for x in mine),
                cpu_s=statistics.median(x["cpu_s"] for x in mine),
                cpu_vs_dpsgd=statistics.median(x["cpu_s"] / ref[x["round"]]["cpu_s"]
                                               for x in mine),
                wall_vs_dpsgd=statistics.median(x["wall_s"] / ref[x["round"]]["wall_s"]
                                                for x in mine),
                cpu_vs_sgd=statistics.median(x["cpu_s"] / sgd[x["round"]]["cpu_s"]
                                             for x in mine)))
    meta = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                load_start=load_start, load_end=load_end, rows=args.rows,
                features=args.features, rounds=args.rounds, machine=platform.machine(),
                python=platform.python_version(), threads_per_fit=1, **library_fingerprint())
    lines = table_head(
        f"Memory and time of a fit at {args.rows:,} rows x {args.features} (float64)", meta,
        "a machine shared with other jobs; memory does not depend on the load, CPU time "
        "little", "Peak extra memory: the fit's peak RSS above the process before it (the "
        "input not counted); time ratios: medians of ratios paired within a round, one "
        f"thread per fit, {args.rounds} rounds.",
        ["estimator", "input", "peak extra MiB", "x input", "fit CPU s", "CPU / DPSGD",
         "wall / DPSGD", "CPU / SGD"])
    for row in rows:
        lines.append(f"| {row['estimator']} | {row['input']} | {row['extra_mib']:.0f} | "
                     f"{row['extra_x_input']:.2f} | {row['cpu_s']:.2f} | "
                     f"{row['cpu_vs_dpsgd']:.2f} | {row['wall_vs_dpsgd']:.2f} | "
                     f"{row['cpu_vs_sgd']:.2f} |")
    write_results("memory", meta, dict(summary=rows, runs=runs), lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()

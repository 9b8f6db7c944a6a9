#!/usr/bin/env python
"""Speed and memory of a DP-SGD epoch for linear models, side by side in one run.

Problems (batch 256 throughout):

* (a) Adult, 32,561 x 105 after ``make_adult_preprocessor`` (dense, binary);
* (b) ``make_purchase_like``: dense 200,000 x 600, 100 classes (float64 and float32);
* (c) CSR 200,000 x 1,000,000, 40 non-zeros per row (one per field of 40
  one-hot fields of 25,000 values each, values Zipf-distributed within a
  field, rows scaled to norm 1), binary labels from a sparse logistic model.

Methods, per epoch (``ceil(n / 256)`` steps):

* ``engine_dp``: sklearn_fdp's engine (``run_dp_sgd`` with the linear oracle),
  σ = 1, C = 1, the DPSGDClassifier defaults for (a), (b) (momentum 0.9, tail
  averaging); for (c) momentum 0 (the setting that enables lazy noise);
* ``engine_nonprivate``: the same engine and configuration with clipping and
  noise off (C = ∞, σ = 0);
* ``estimator_dp``: ``DPSGDClassifier(noise_multiplier=1, epochs=1).fit``
  (validation, accounting and all; for information);
* ``sgdclassifier``: scikit-learn's ``SGDClassifier`` (log loss, one epoch,
  non-private; one-vs-rest over 100 classes on (b), so (b) is timed on its
  first 20,000 rows and scaled by 10);
* ``numpy_dp``: a plain vectorised numpy DP-SGD (gather, residuals,
  per-example norms ``‖x‖‖r‖``, clip, ``Xᵀ R``, dense noise, momentum step);
* ``opacus_hooks`` / ``opacus_ghost``: Opacus 1.6.0 on CPU (a, b), run in
  ``.venv-opacus`` by ``baselines/opacus_speed.py``.

Methods slower than a few seconds per epoch are timed on a fixed number of
steps (``steps_timed`` in the JSON) and scaled to an epoch. Every figure is
the median of ``--repeats`` (default 5) after one warm-up. Everything runs
single-threaded (BLAS, torch, numba), one method at a time.

Also: peak traced memory of ``DPSGDClassifier.fit`` on (b) and (c)
(``tracemalloc``: numpy and scipy allocations), the time of (b)'s matrix
products alone (the GEMM floor) with GFLOP/s, and the compile cache check
(two fresh processes each fitting a tiny model).

Writes ``benchmarks/results/epoch.json`` and ``epoch.md``. (The whole public ``fit``,
cold and warm, against scikit-learn is ``bench_speed.py``.)

Results (in ``benchmarks/results/``): ``epoch.json``, ``epoch.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Speed of a DP-SGD epoch, the training loop alone"
"""

from _common import one_thread  # benchmarks/ is on sys.path when run as a script

one_thread()  # before numpy is imported

import os  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from scipy.special import expit, softmax  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import SGDClassifier  # noqa: E402

import sklearn_fdp  # noqa: E402
from sklearn_fdp import DPSGDClassifier  # noqa: E402
from sklearn_fdp._engine import EngineConfig, LinearGradientOracle, LinearLoss, run_dp_sgd  # noqa: E402
from sklearn_fdp.datasets import load_adult, make_adult_preprocessor, make_purchase_like  # noqa: E402

from _common import OPACUS_PY, RESULTS, ROOT  # noqa: E402
BATCH = 256


# -- data ---------------------------------------------------------------------


def adult():
    X_train, y_train, _, _ = load_adult(return_X_y=True)
    X = make_adult_preprocessor(scale_rows="l2").fit_transform(X_train)
    X = np.ascontiguousarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    return X, np.asarray(y_train).astype(np.intp)


def purchase(n):
    X, y = make_purchase_like(n_samples=n, n_features=600, n_classes=100, random_state=0)
    return np.ascontiguousarray(X, dtype=np.float64), np.asarray(y, dtype=np.intp)


def click_log(n, n_fields=40, field_size=25_000, seed=0):
    """One-hot click-log stand-in: one value per field, Zipf within a field."""
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.3, size=(n, n_fields)) - 1, field_size - 1)
    perm = rng.permutation(field_size)  # popular values are not the low column ids
    cols = (perm[ranks] + field_size * np.arange(n_fields)).astype(np.int32)
    cols.sort(axis=1)
    data = np.full(n * n_fields, 1.0 / math.sqrt(n_fields))
    indptr = np.arange(0, n * n_fields + 1, n_fields, dtype=np.int32)
    X = sp.csr_matrix((data, cols.ravel(), indptr), shape=(n, n_fields * field_size))
    w = rng.normal(size=n_fields * field_size) * 3.0
    y = (rng.random(n) < expit(X @ w)).astype(np.intp)
    return X, y


# -- timing helpers -----------------------------------------------------------


def median_time(fn, repeats):
    fn()  # warm-up (compilation, caches)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), times


def interleaved(fns, repeats):
    """Median seconds of each callable, timed round-robin after one warm-up each.

    Every round runs every method once, so a change in the machine's load
    hits them alike; ``rounds`` keeps the per-round times, from which paired
    ratios are taken.
    """
    for fn in fns.values():
        fn()
    rounds = []
    for _ in range(repeats):
        times = {}
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name] = time.perf_counter() - t0
        rounds.append(times)
    return {name: float(np.median([r[name] for r in rounds])) for name in fns}, rounds


def paired_ratio(rounds, num, den, scale_num=1.0, scale_den=1.0):
    """Median over rounds of ``(num * scale_num) / (den * scale_den)``."""
    return float(np.median([r[num] * scale_num / (r[den] * scale_den) for r in rounds]))


def epoch_steps(n):
    return math.ceil(n / BATCH)


def engine_epoch(X, y, dp, momentum, steps=None):
    """A callable running one epoch (or ``steps`` steps) of the engine."""
    n = X.shape[0]
    k = len(np.unique(y))
    loss = LinearLoss("log_loss", 1 if k == 2 else k)
    y_enc = loss.encode(y)
    oracle = LinearGradientOracle(X, y_enc, loss, True, 1.0 if dp else np.inf)
    T = steps or epoch_steps(n)
    cfg = EngineConfig(steps=T, sampling_rate=BATCH / n, noise_multiplier=1.0 if dp else 0.0,
                       max_grad_norm=1.0 if dp else np.inf, learning_rate=0.1,
                       momentum=momentum, average_start=T // 2)
    theta0 = np.zeros((X.shape[1] + 1, loss.n_outputs), dtype=X.dtype)
    seed = [0]

    def run():
        seed[0] += 1
        run_dp_sgd(theta0, oracle, n, cfg, sample_rng=np.random.default_rng([seed[0], 0]),
                   noise_rng=np.random.default_rng([seed[0], 1]))
    return run, T


def estimator_fit(X, y, momentum):
    est = DPSGDClassifier(epsilon=None, noise_multiplier=1.0, delta=0.1 / X.shape[0], epochs=1,
                          batch_size=BATCH, momentum=momentum, learning_rate=0.1,
                          random_state=0)
    return lambda: est.fit(X, y)


def sgd_fit(X, y):
    est = SGDClassifier(loss="log_loss", max_iter=1, tol=None, learning_rate="constant",
                        eta0=0.01, shuffle=True, random_state=0)

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(X, y)
    return run


def numpy_dp(X, y, momentum, steps):
    """Plain vectorised numpy DP-SGD: the per-example-gradient baseline."""
    n, d = X.shape
    classes = np.unique(y)
    k = 1 if len(classes) == 2 else len(classes)
    dtype = X.dtype
    sparse = sp.issparse(X)
    x_norm_sq = (np.asarray(X.multiply(X).sum(1)).ravel() if sparse
                 else np.einsum("ij,ij->i", X, X)) + 1.0
    q, C, sigma, lr = BATCH / n, 1.0, 1.0, 0.1

    def run():
        rng = np.random.default_rng(1)
        W = np.zeros((d, k), dtype=dtype)
        b = np.zeros(k, dtype=dtype)
        vW, vb = np.zeros_like(W), np.zeros_like(b)
        for _ in range(steps):
            idx = np.flatnonzero(rng.random(n) < q)
            Xb = X[idx]
            Z = np.asarray(Xb @ W) + b
            if k == 1:
                R = expit(Z) - y[idx, None]
            else:
                R = softmax(Z, axis=1)
                R[np.arange(len(idx)), y[idx]] -= 1.0
            norms = np.sqrt(x_norm_sq[idx] * (R * R).sum(1))
            R *= np.minimum(1.0, C / np.maximum(norms, 1e-12))[:, None].astype(dtype)
            gW = np.asarray(Xb.T @ R) + sigma * C * rng.standard_normal((d, k), dtype=dtype)
            gb = R.sum(0) + sigma * C * rng.standard_normal(k, dtype=dtype)
            vW *= momentum
            vW += gW / (q * n)
            vb *= momentum
            vb += gb / (q * n)
            W -= lr * vW
            b -= lr * vb
    return run


def opacus(X, y, mode, steps, repeats):
    if not OPACUS_PY.exists():
        return None
    k = len(np.unique(y))
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "data.npz"
        np.savez(path, X=X.astype(np.float32), y=y, k=1 if k == 2 else k)
        out = subprocess.run(
            [str(OPACUS_PY), str(ROOT / "benchmarks" / "baselines" / "opacus_speed.py"),
             "--data", str(path), "--mode", mode, "--batch-size", str(BATCH),
             "--steps", str(steps), "--repeats", str(repeats), "--threads", "1"],
            capture_output=True, text=True, check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def peak_memory(fn):
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def gemm_floor(X, k, steps, repeats):
    """Time of an epoch's matrix products alone: Xb @ W and Xbᵀ @ Z on gathered batches."""
    n, d = X.shape
    rng = np.random.default_rng(0)
    batches = [X[np.sort(rng.choice(n, BATCH, replace=False))] for _ in range(8)]
    W = np.zeros((d, k), dtype=X.dtype)

    def run():
        for t in range(steps):
            Xb = batches[t % 8]
            Z = Xb @ W
            Xb.T @ Z
    secs, _ = median_time(run, repeats)
    flops = steps * 2 * (2.0 * BATCH * d * k)
    return secs, flops


def compile_cache_check():
    """Two fresh processes fit a tiny model; the second must load every kernel from disk."""
    code = (
        "import time; t0 = time.perf_counter()\n"
        "import numpy as np, scipy.sparse as sp\n"
        "from sklearn_fdp import DPSGDClassifier\n"
        "t1 = time.perf_counter()\n"
        "X = np.random.default_rng(0).normal(size=(200, 5)); y = (X[:, 0] > 0).astype(int)\n"
        "DPSGDClassifier(epsilon=None, noise_multiplier=1.0, epochs=1, random_state=0).fit(X, y)\n"
        "DPSGDClassifier(epsilon=None, noise_multiplier=1.0, epochs=1, momentum=0, "
        "random_state=0)"
        ".fit(sp.csr_matrix(X), y)\n"
        "print(t1 - t0, time.perf_counter() - t1)\n"
    )
    outputs = []
    with tempfile.TemporaryDirectory() as cache_dir:  # an empty cache: the first run compiles
        env = {**os.environ, "NUMBA_DEBUG_CACHE": "1", "NUMBA_CACHE_DIR": cache_dir}
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, env=env, cwd=ROOT)
            outputs.append(out.stdout.splitlines())
    runs = []
    for lines in outputs:
        imp, fit = map(float, lines[-1].split())
        runs.append(dict(import_seconds=imp, fit_seconds=fit,
                         kernels_compiled_and_saved=sum("data saved to" in ln for ln in lines),
                         kernels_loaded_from_cache=sum("data loaded from" in ln for ln in lines)))
    return runs


# -- the benchmark ------------------------------------------------------------


def bench_problem(name, X, y, *, momentum, repeats, slow_steps, opacus_steps, with_opacus,
                  sgd_rows=None):
    n = X.shape[0]
    T = epoch_steps(n)
    row = dict(problem=name, n=n, d=X.shape[1], classes=int(len(np.unique(y))),
               dtype=str(X.dtype), sparse=sp.issparse(X), batch_size=BATCH, steps_per_epoch=T,
               momentum=momentum)
    print(f"[{name}] engine, numpy, sklearn (interleaved)", flush=True)
    steps = min(T, slow_steps)
    sgd_X, sgd_y = (X, y) if sgd_rows is None or sgd_rows >= n else (X[:sgd_rows], y[:sgd_rows])
    fns = dict(engine_dp=engine_epoch(X, y, True, momentum)[0],
               engine_nonprivate=engine_epoch(X, y, False, momentum)[0],
               estimator_dp=estimator_fit(X, y, momentum),
               numpy_dp=numpy_dp(X, y, momentum, steps),
               sgdclassifier=sgd_fit(sgd_X, sgd_y))
    med, rounds = interleaved(fns, repeats)
    scale = dict(numpy_dp=T / steps, sgdclassifier=n / sgd_X.shape[0])
    for key, value in med.items():
        row[key] = value * scale.get(key, 1.0)
    row["rounds"] = rounds
    row["numpy_dp_steps_timed"] = steps
    if sgd_X.shape[0] < n:
        row["sgdclassifier_rows_timed"] = sgd_X.shape[0]
    row["paired"] = dict(
        dp_over_nonprivate=paired_ratio(rounds, "engine_dp", "engine_nonprivate"),
        dp_over_sgdclassifier=paired_ratio(rounds, "engine_dp", "sgdclassifier",
                                           scale_den=scale["sgdclassifier"]),
    )
    if with_opacus:
        for mode in ("ghost", "hooks"):
            print(f"[{name}] opacus {mode}", flush=True)
            res = opacus(X, y, mode, min(T, opacus_steps[mode]), repeats)
            if res is not None:
                row[f"opacus_{mode}"] = res["seconds_per_epoch"]
                row[f"opacus_{mode}_steps_timed"] = res["steps_timed"]
    return row


def ratios(row):
    # DP vs its non-private twin and vs SGDClassifier: paired within rounds.
    r = dict(row["paired"], numpy_dp_over_dp=row["numpy_dp"] / row["engine_dp"])
    for mode in ("ghost", "hooks"):
        if f"opacus_{mode}" in row:
            r[f"opacus_{mode}_over_dp"] = row[f"opacus_{mode}"] / row["engine_dp"]
    return r


def markdown(meta, rows, extra):
    out = ["# Speed of a DP-SGD epoch (linear models, batch 256)", "",
           f"Generated by `benchmarks/bench_epoch.py` on {meta['date']} "
           f"({meta['machine']}; single-threaded; median of {meta['repeats']} after a warm-up). "
           "Seconds per epoch. The engine (DP and non-private), `DPSGDClassifier.fit`, numpy "
           "DP-SGD and SGDClassifier are timed round-robin, and the DP / non-private and "
           "DP / SGDClassifier ratios are medians of per-round ratios, so that a change in the "
           "machine's load hits both sides alike. Load average during the run: "
           f"{meta.get('load', '?')}.", "",
           "| problem | engine DP | engine non-private | DP / non-private | DPSGDClassifier.fit "
           "| SGDClassifier | DP / SGDClassifier | numpy DP-SGD | Opacus ghost | Opacus hooks "
           "| Opacus ghost / DP | Opacus hooks / DP |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        r = row["ratios"]

        def f(key, fmt="{:.3g}"):
            return fmt.format(row[key]) if key in row else "—"

        def g(key, fmt="{:.2f}×"):
            return fmt.format(r[key]) if key in r else "—"
        out.append(f"| {row['problem']} | {f('engine_dp')} | {f('engine_nonprivate')} | "
                   f"{g('dp_over_nonprivate')} | {f('estimator_dp')} | {f('sgdclassifier')} | "
                   f"{g('dp_over_sgdclassifier')} | {f('numpy_dp')} | {f('opacus_ghost')} | "
                   f"{f('opacus_hooks')} | {g('opacus_ghost_over_dp', '{:.1f}×')} | "
                   f"{g('opacus_hooks_over_dp', '{:.1f}×')} |")
    partial = []
    for row in rows:
        parts = [f"{m} on {row[m + '_steps_timed']} steps" for m in ("numpy_dp", "opacus_ghost",
                                                                    "opacus_hooks")
                 if row.get(m + "_steps_timed", row["steps_per_epoch"]) < row["steps_per_epoch"]]
        if "sgdclassifier_rows_timed" in row:
            parts.append(f"SGDClassifier on {row['sgdclassifier_rows_timed']:,} rows")
        if parts:
            partial.append(f"{row['problem']}: " + ", ".join(parts))
    if partial:
        out += ["", "Timed on part of an epoch and scaled to a whole one (steady-state time "
                "per step × steps per epoch, or per row × rows): " + "; ".join(partial) + ".", ""]
    else:
        out.append("")
    if "gemm" in extra:
        for key, gm in extra["gemm"].items():
            out.append(f"- (b) {key}: the epoch's matrix products alone take {gm['seconds']:.3g} s "
                       f"({gm['gflops_floor']:.1f} GFLOP/s); the DP epoch takes "
                       f"{gm['dp_over_gemm']:.2f}× that ({gm['gflops_dp']:.1f} GFLOP/s achieved).")
    for key, mem in extra.get("memory", {}).items():
        out.append(f"- Peak traced memory of `DPSGDClassifier.fit` on {key}: "
                   f"{mem['peak_mb']:.0f} MB = {mem['ratio_to_input']:.2f}× the input "
                   f"({mem['input_mb']:.0f} MB).")
    if "compile_cache" in extra:
        c = extra["compile_cache"]
        out.append(f"- Compile cache: a fresh process importing sklearn_fdp and fitting two tiny "
                   f"models (dense, CSR) took {c[0]['fit_seconds']:.2f} s "
                   f"({c[0]['kernels_compiled_and_saved']} kernel signatures compiled and saved); "
                   f"a second process took {c[1]['fit_seconds']:.2f} s "
                   f"({c[1]['kernels_compiled_and_saved']} compiled, "
                   f"{c[1]['kernels_loaded_from_cache']} loaded from the disk cache).")
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small problems, for a smoke test")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--problems", default="a,b,c")
    p.add_argument("--no-opacus", action="store_true")
    args = p.parse_args(argv)
    n_big = 20_000 if args.quick else 200_000
    load_before = os.getloadavg()[0]
    wanted = set(args.problems.split(","))
    rows, extra = [], {}
    if "a" in wanted:
        X, y = adult()
        row = bench_problem("(a) Adult", X, y, momentum=0.9, repeats=args.repeats,
                            slow_steps=10**9, opacus_steps=dict(ghost=10**9, hooks=10**9),
                            with_opacus=not args.no_opacus)
        rows.append(row)
    if "b" in wanted:
        X64, y = purchase(n_big)
        extra["gemm"] = {}
        for dtype in (np.float64, np.float32):
            X = X64.astype(dtype)
            name = f"(b) purchase 200k×600×100 {np.dtype(dtype).name}"
            row = bench_problem(name, X, y, momentum=0.9, repeats=args.repeats, slow_steps=100,
                                opacus_steps=dict(ghost=200, hooks=40),
                                with_opacus=not args.no_opacus and dtype == np.float32,
                                sgd_rows=n_big // 10)
            rows.append(row)
            secs, flops = gemm_floor(X, 100, row["steps_per_epoch"], args.repeats)
            extra["gemm"][np.dtype(dtype).name] = dict(
                seconds=secs, flops=flops, gflops_floor=flops / secs / 1e9,
                gflops_dp=flops / row["engine_dp"] / 1e9, dp_over_gemm=row["engine_dp"] / secs)
        print("[b] memory", flush=True)
        extra.setdefault("memory", {})["(b) float64"] = _memory(X64, y, 0.9)
        del X64, X
    if "c" in wanted:
        X, y = click_log(n_big)
        row = bench_problem("(c) CSR 200k×1M, 40 nnz", X, y, momentum=0.0, repeats=args.repeats,
                            slow_steps=50, opacus_steps={}, with_opacus=False)
        rows.append(row)
        print("[c] memory", flush=True)
        extra.setdefault("memory", {})["(c)"] = _memory(X, y, 0.0)
    for row in rows:
        row["ratios"] = ratios(row)
    print("[compile cache]", flush=True)
    extra["compile_cache"] = compile_cache_check()
    meta = dict(load=" → ".join(f"{v:.1f}" for v in (load_before, os.getloadavg()[0])),
                date=time.strftime("%Y-%m-%d"), machine=f"{platform.machine()}, "
                f"{os.cpu_count()} cores, Python {platform.python_version()}",
                repeats=args.repeats, quick=args.quick, sklearn_fdp=sklearn_fdp.__version__,
                numpy=np.__version__)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "epoch_quick" if args.quick else "epoch"
    (RESULTS / f"{stem}.json").write_text(json.dumps(dict(meta=meta, rows=rows, **extra),
                                                      indent=1))
    md = markdown(meta, rows, extra)
    (RESULTS / f"{stem}.md").write_text(md)
    print(md)


def _memory(X, y, momentum):
    size = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) if sp.issparse(X) else X.nbytes
    peak = peak_memory(estimator_fit(X, y, momentum))
    return dict(peak_mb=peak / 2**20, input_mb=size / 2**20, ratio_to_input=peak / size)


if __name__ == "__main__":
    main()

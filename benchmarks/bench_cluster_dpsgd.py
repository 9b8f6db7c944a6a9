#!/usr/bin/env python
"""DP-SGD on a dask.distributed LocalCluster: throughput, overhead, memory and accuracy.

Data: a Criteo-shaped click log (``sklearn_fdp.datasets._criteo``: 13 count
features, public; 26 hashed categorical fields of 8,192 buckets each,
private; a planted logistic model; the label public), ``--rows`` rows
(default 10,000,000) in Parquet files of ``--rows-per-file`` rows (default
1,000,000; one dask partition each), written once into ``--folder`` (default
``/tmp/sklearn_fdp_criteo``; reused when present) and a test set of 200,000
rows from an independent block. Rows are CSR of 213,005 columns, about 34
non-zeros, norm at most 1, float32; each partition is read from its file and
turned into CSR rows by the worker that holds it.

Runs, each in a fresh driver process (the "fitting process"; BLAS and numba
single-threaded everywhere, the whole run under ``nice``):

* **throughput**: ``DPSGDClassifier`` (σ = 1, momentum 0.9, expected batch
  ``--batch`` = 65,536) for ``--steps`` steps (default 30) on the first
  ``--throughput-files`` files (default 2: 2,000,000 rows) on a
  ``LocalCluster(processes=True, threads_per_worker=1)`` of 1 and 2 workers,
  and in the fitting process on the same rows read into memory (the default
  lazy-noise loop, and the eager loop the cluster runs, forced by
  ``verbose=1``). The cluster's steps are timed inside the engine's oracle
  calls (wall, the driver's CPU, and every worker's CPU from
  ``getrusage`` before the first and after the last step); the in-process
  per-step cost is the difference between fits of ``2 × steps`` and
  ``steps`` steps (setup cancels). Also the driver's peak RSS (``VmHWM``).
* **accuracy**: on all ``--rows`` rows, 2 workers, ``--epochs`` epochs
  (default 0.5) of expected batch 65,536: ``FeatureDPLogisticRegression``
  (Algorithm 1, the 13 count columns public, label public, ``public_epochs=0``)
  and ``DPSGDClassifier`` at ε ∈ {0.1, 1} (δ = 1e-9), and the public-only model
  (scikit-learn ``LogisticRegression`` on the 13 count columns of the first
  2,000,000 rows: free, no noise). Test accuracy and log loss on the test set.

Writes ``benchmarks/results/cluster_dpsgd.json`` and ``cluster_dpsgd.md``,
with the load average before and after (the machine is shared).

Quoted in (the sections whose figures come from these files):

* docs/scale.md § "5. DP-SGD on a cluster"
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from _common import peak_rss_mib, run_result_child  # noqa: E402  (benchmarks/ is on sys.path)

N_BUCKETS = 8192
N_TEST = 200_000
TEST_BLOCK = 10**6
PUBLIC = list(range(13))


def _write(args):
    from sklearn_fdp.datasets._criteo import make_criteo_like, write_criteo_like_parquet

    folder = pathlib.Path(args.folder)
    files = sorted(folder.glob("part-*.parquet"))
    expected = -(-args.rows // args.rows_per_file)
    if len(files) != expected:
        write_criteo_like_parquet(folder, args.rows, rows_per_file=args.rows_per_file,
                                  n_buckets=N_BUCKETS, random_state=0)
    test = folder / "test.npz"
    if not test.exists():
        import scipy.sparse as sp

        X, y = make_criteo_like(N_TEST, n_buckets=N_BUCKETS, block_index=TEST_BLOCK)
        sp.save_npz(folder / "test_X.npz", X)
        np.savez(test, y=y)
    return sorted(folder.glob("part-*.parquet"))


def _read_part(path):
    import pyarrow.parquet as pq

    from sklearn_fdp.datasets._criteo import (
        CRITEO_CATEGORICAL_COLUMNS,
        CRITEO_COUNT_COLUMNS,
        criteo_like_rows,
    )

    table = pq.read_table(path)
    counts = np.column_stack([table.column(c).to_numpy() for c in CRITEO_COUNT_COLUMNS])
    buckets = np.column_stack([table.column(c).to_numpy() for c in CRITEO_CATEGORICAL_COLUMNS])
    return criteo_like_rows(counts, buckets, N_BUCKETS), table.column("label").to_numpy()


def _dask_arrays(files):
    import dask
    import dask.array as da
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    width = 13 + 26 * N_BUCKETS
    meta = sp.csr_matrix((0, width), dtype=np.float32)
    Xs, ys = [], []
    for f in files:
        n = pq.ParquetFile(f).metadata.num_rows  # the footer: no rows read here
        part = dask.delayed(_read_part, pure=True)(str(f))
        Xs.append(da.from_delayed(part[0], shape=(n, width), dtype=np.float32, meta=meta))
        ys.append(da.from_delayed(part[1], shape=(n,), dtype=np.int8))
    return da.concatenate(Xs), da.concatenate(ys)


def _in_memory(files):
    import scipy.sparse as sp

    parts = [_read_part(str(f)) for f in files]
    return sp.vstack([p[0] for p in parts], format="csr"), np.concatenate([p[1] for p in parts])


def _cluster(workers):
    import logging

    import distributed

    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=logging.CRITICAL)
    return cluster, distributed.Client(cluster)


def _worker_cpu(client):
    import resource

    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    return client.run(cpu)


def _throughput_kw(args, n):
    return dict(epsilon=None, noise_multiplier=1.0, batch_size=args.batch,
                epochs=args.steps * args.batch / n, random_state=0)


def _child_throughput(args):
    """One cluster fit of ``args.steps`` steps on ``args.workers`` workers, timed per step."""
    from sklearn_fdp import DPSGDClassifier

    files = sorted(pathlib.Path(args.folder).glob("part-*.parquet"))[:args.files]
    cluster, client = _cluster(args.workers)
    X, y = _dask_arrays(files)
    n = int(X.shape[0])
    # Warm-up: imports and compiled kernels on every worker, on a few rows.
    DPSGDClassifier(**{**_throughput_kw(args, n), "epochs": 2.0, "batch_size": 64}).fit(
        X[:2000], y[:2000])
    out = _timed_fit(client, DPSGDClassifier(**_throughput_kw(args, n)), X, y)
    client.close()
    cluster.close()
    return dict(workers=args.workers, rows=n, **out, driver_peak_rss_mib=peak_rss_mib())


def _timed_fit(client, est, X, y):
    """Fit ``est`` on the cluster, timing its steps inside the engine's oracle calls."""
    import warnings

    from sklearn_fdp._distributed._dpsgd import ClusterGradientOracle

    marks = {}
    real = ClusterGradientOracle.__call__

    def timed(self, idx, theta):
        if "t0" not in marks:
            marks["cpu_workers0"] = _worker_cpu(client)
            marks["t0"], marks["cpu0"] = time.perf_counter(), time.process_time()
            marks["rows"] = 0
        out = real(self, idx, theta)
        marks["rows"] += len(idx)
        marks["t1"], marks["cpu1"] = time.perf_counter(), time.process_time()
        return out

    ClusterGradientOracle.__call__ = timed
    try:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        fit_s = time.perf_counter() - t
    finally:
        ClusterGradientOracle.__call__ = real
    cpu_workers1 = _worker_cpu(client)
    steps = est.steps_
    wall = marks["t1"] - marks["t0"]
    worker_cpu = [cpu_workers1[w] - marks["cpu_workers0"][w] for w in marks["cpu_workers0"]]
    return dict(steps=steps, fit_s=fit_s, setup_s=fit_s - wall, step_wall_s=wall / steps,
                step_driver_cpu_s=(marks["cpu1"] - marks["cpu0"]) / steps,
                worker_cpu_s=worker_cpu, rows_sampled=marks["rows"])


def _child_roundtrip(args):
    """Per-step cost against the number of partitions: small dense batches, 2 workers."""
    import dask.array as da

    from sklearn_fdp import DPSGDClassifier

    rng = np.random.default_rng(0)
    n, d, batch, steps = 192_000, 16, 256, 30
    X = rng.uniform(-0.25, 0.25, size=(n, d))
    y = (X[:, 0] > 0).astype(int)
    cluster, client = _cluster(2)
    kw = dict(epsilon=None, noise_multiplier=1.0, batch_size=batch, random_state=0)
    DPSGDClassifier(**kw, epochs=steps * batch / n).fit(da.from_array(X[:4000], chunks=1000),
                                                         y[:4000])  # warm-up
    rows = []
    for parts in (2, 8, 32):
        Xd = da.from_array(X, chunks=(n // parts, d))
        out = _timed_fit(client, DPSGDClassifier(**kw, epochs=steps * batch / n), Xd, y)
        rows.append(dict(partitions=parts, **out))
    client.close()
    cluster.close()
    slope, intercept = np.polyfit([r["partitions"] for r in rows],
                                  [r["step_wall_s"] for r in rows], 1)
    return dict(rows=rows, n=n, d=d, batch=batch, per_partition_s=float(slope),
                fixed_s=float(intercept))


def _child_inprocess(args):
    """In-process fits of ``steps`` and ``2 × steps`` steps of the same rows (lazy, eager)."""
    import contextlib
    import io
    import warnings

    from sklearn_fdp import DPSGDClassifier

    files = sorted(pathlib.Path(args.folder).glob("part-*.parquet"))[:args.files]
    X, y = _in_memory(files)
    n = X.shape[0]
    out = dict(rows=n)
    for loop, verbose in (("lazy", 0), ("eager", 1)):
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")  # warm-up: the compiled kernels
            DPSGDClassifier(**{**_throughput_kw(args, n), "epochs": 2.0, "batch_size": 64},
                            verbose=verbose).fit(X[:2000], y[:2000])
        for mult in (1, 2):
            kw = _throughput_kw(args, n)
            kw["epochs"] *= mult
            t, c = time.perf_counter(), time.process_time()
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                est = DPSGDClassifier(**kw, verbose=verbose).fit(X, y)
            out[f"{loop}_{mult}"] = dict(steps=est.steps_, wall_s=time.perf_counter() - t,
                                        cpu_s=time.process_time() - c)
    for loop in ("lazy", "eager"):
        a, b = out[f"{loop}_1"], out[f"{loop}_2"]
        steps = b["steps"] - a["steps"]
        out[f"{loop}_step_wall_s"] = (b["wall_s"] - a["wall_s"]) / steps
        out[f"{loop}_step_cpu_s"] = (b["cpu_s"] - a["cpu_s"]) / steps
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def _child_accuracy(args):
    """Test accuracy of FDP (Alg. 1), DP-SGD and public-only at each ε, on the cluster."""
    import warnings

    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss

    from distributed import wait as distributed_wait

    from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression

    folder = pathlib.Path(args.folder)
    files = sorted(folder.glob("part-*.parquet"))[:args.files or None]
    Xt = sp.load_npz(folder / "test_X.npz")
    yt = np.load(folder / "test.npz")["y"]
    results = []
    Xp, yp = _in_memory(files[:2])
    t = time.perf_counter()
    public = LogisticRegression(max_iter=500).fit(Xp[:, PUBLIC].toarray(), yp)
    results.append(dict(method="public-only", epsilon=0.0, rows=int(Xp.shape[0]),
                        fit_s=time.perf_counter() - t,
                        accuracy=float(public.score(Xt[:, PUBLIC].toarray(), yt)),
                        log_loss=float(log_loss(yt, public.predict_proba(
                            Xt[:, PUBLIC].toarray())[:, 1]))))
    del Xp, yp
    cluster, client = _cluster(2)
    X, y = _dask_arrays(files)
    t = time.perf_counter()
    X, y = client.persist([X, y])  # read and built once, kept by the workers for every fit
    distributed_wait([X, y])
    load_s = time.perf_counter() - t
    common = dict(delta=1e-9, batch_size=args.batch, epochs=args.epochs, random_state=0)
    for eps in (0.1, 1.0):
        for method, make in (
            ("FDP (Alg. 1)", lambda e: FeatureDPLogisticRegression(
                method="alg1", public_features=PUBLIC, label_public=True, public_epochs=0,
                epsilon=e, **common)),
            ("DP-SGD", lambda e: DPSGDClassifier(epsilon=e, **common)),
        ):
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = make(eps).fit(X, y)
            proba = est.predict_proba(Xt)[:, 1]
            results.append(dict(method=method, epsilon=eps, rows=int(X.shape[0]),
                                steps=int(est.steps_), fit_s=time.perf_counter() - t,
                                accuracy=float(est.score(Xt, yt)),
                                log_loss=float(log_loss(yt, proba))))
            print(results[-1], file=sys.stderr, flush=True)
    client.close()
    cluster.close()
    return dict(results=results, majority=float(max(yt.mean(), 1 - yt.mean())),
                load_s=load_s, driver_peak_rss_mib=peak_rss_mib())


def _child(args, mode, **kw):
    cmd = ["nice", "-n", "10", sys.executable, __file__, "--child", mode,
           "--folder", str(args.folder), "--batch", str(args.batch), "--steps", str(args.steps),
           "--epochs", str(args.epochs)]
    for k, v in kw.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    return run_result_child(cmd)


def _accuracy_lines(res, acc, B):
    lines = [
        f"## Accuracy: {acc['results'][-1]['rows']:,} rows, 2 workers, {res['epochs']} "
        f"epoch(s) of expected batch {B:,}, δ = 1e-9",
        "",
        "| method | ε | steps | fit (s) | test accuracy | test log loss |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in acc["results"]:
        eps = "—" if r["epsilon"] == 0 else f"{r['epsilon']:g}"
        lines.append(f"| {r['method']} | {eps} | {r.get('steps', '—')} | {r['fit_s']:.0f} | "
                     f"{r['accuracy']:.4f} | {r['log_loss']:.4f} |")
    lines += [
        "",
        f"Majority class on the test set ({N_TEST:,} rows of an independent block): "
        f"{acc['majority']:.4f}. Public-only: scikit-learn `LogisticRegression` on "
        "the 13 count columns of the first 2,000,000 rows (no noise: public data). FDP: "
        "`FeatureDPLogisticRegression(method='alg1', public_features=0..12, "
        "label_public=True, public_epochs=0)` (no public pretraining: the cluster path does "
        "not pretrain). DP-SGD: `DPSGDClassifier` (the whole record private). The table was "
        f"read from Parquet and built into CSR partitions once ({acc['load_s']:.0f} s) and "
        "kept by the workers for the four private fits. Driver peak RSS of the accuracy "
        f"run: {acc['driver_peak_rss_mib']:,.0f} MiB.",
        "",
    ]
    return lines


def _markdown(res):
    th = res["throughput"]
    ip = res["inprocess"]
    B = res["batch"]
    lines = [
        "# DP-SGD on a dask.distributed LocalCluster (Criteo-shaped click log)",
        "",
        "Generated by `benchmarks/bench_cluster_dpsgd.py` (do not edit by hand).",
        "",
        f"Data: {res['rows']:,} Criteo-shaped rows (13 count features public, 26 hashed "
        f"fields of {N_BUCKETS:,} buckets private, label public; CSR, 213,005 columns, ~34 "
        f"non-zeros a row, float32) in {res['n_files']} Parquet files of "
        f"{res['rows_per_file']:,} rows ({res['bytes_on_disk'] / 2**30:.2f} GiB), one "
        "partition each, read and turned into CSR rows by the worker that holds it.",
        "",
        f"Machine: {res['machine']}, {res['cpu_count']} cores, **shared with other jobs** "
        "(five other agents): 1-minute load average before → after each phase: "
        + "; ".join(f"{name} {b[0]:.1f} → {a[0]:.1f}" for name, (b, a) in res["loads"].items())
        + ". Every process ran under `nice -n 10` with one thread. Wall times are inflated "
        "by the load; CPU times (`getrusage` of each worker, `process_time` of the driver) "
        "are what survives it.",
        "",
        f"## Throughput: DPSGDClassifier, expected batch {B:,}, σ = 1, "
        f"{th[0]['steps']} steps on {th[0]['rows']:,} rows",
        "",
        "| run | s / step (wall) | steps / s | rows / s (wall) | driver CPU s / step | "
        "worker CPU s / step (each) | rows / worker-CPU-s | driver peak RSS (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in th:
        per_worker = [c / r["steps"] for c in r["worker_cpu_s"]]
        rows_step = r["rows_sampled"] / r["steps"]
        lines.append(
            f"| cluster, {r['workers']} worker{'s' if r['workers'] > 1 else ''} | "
            f"{r['step_wall_s']:.3f} | {1 / r['step_wall_s']:.2f} | "
            f"{rows_step / r['step_wall_s']:,.0f} | {r['step_driver_cpu_s']:.3f} | "
            f"{' / '.join(f'{c:.3f}' for c in per_worker)} | "
            f"{rows_step / sum(per_worker):,.0f} | {r['driver_peak_rss_mib']:,.0f} |")
    for loop in ("lazy", "eager"):
        s = ip[f"{loop}_step_wall_s"]
        c = ip[f"{loop}_step_cpu_s"]
        lines.append(f"| in process, {loop} noise | {s:.3f} | {1 / s:.2f} | {B / s:,.0f} | "
                     f"{c:.3f} | — | {B / c:,.0f} | {ip['peak_rss_mib']:,.0f} |")
    lines += [
        "",
        "Cluster setup (reading the Parquet files, building and validating the CSR "
        "partitions on the workers), excluded above: "
        + ", ".join(f"{r['setup_s']:.1f} s ({r['workers']} worker"
                    f"{'s' if r['workers'] > 1 else ''})" for r in th) + ".",
        "",
        f"Per-step cost of the cluster round trip at 1 worker, against the in-process eager "
        f"loop (the same computation): {res['overhead_cpu_s']:.3f} CPU-s more per step "
        f"(driver and worker together); {res['overhead_s']:.3f} s of wall time (noisy under "
        "this load; the round-trip phase below measures the latency). A worker's CPU per "
        "sampled row "
        f"(1 worker) against the in-process fit's CPU per row: "
        f"{res['worker_vs_inprocess_lazy_cpu']:.2f}× the lazy-noise fit's, "
        f"{res['worker_vs_inprocess_eager_cpu']:.2f}× the eager fit's (the target: within "
        "1.5×; the in-process figures include the noise and the update, which on the "
        "cluster the driver does).",
        "",
    ]
    acc = res.get("accuracy")
    if acc:
        lines += _accuracy_lines(res, acc, B)
    else:
        lines += ["## Accuracy", "", "Not in this run (`--skip-accuracy`, or the phase was "
                  "stopped before it finished).", ""]
    rt = res.get("roundtrip")
    if rt:
        lines += [
            "## Round trip: the per-step cost against the number of partitions",
            "",
            f"`DPSGDClassifier` on {rt['n']:,} × {rt['d']} dense rows, expected batch "
            f"{rt['batch']}, σ = 1, 2 workers, {rt['rows'][0]['steps']} steps; the rows are "
            "few, so the step is almost all round trip (per partition with batch rows: one "
            "gather task, one sum task).",
            "",
            "| partitions | s / step (wall) | driver CPU s / step | worker CPU s / step (each) |",
            "|---:|---:|---:|---:|",
        ]
        for r in rt["rows"]:
            per_worker = " / ".join(f"{c / r['steps']:.4f}" for c in r["worker_cpu_s"])
            lines.append(f"| {r['partitions']} | {r['step_wall_s']:.4f} | "
                         f"{r['step_driver_cpu_s']:.4f} | {per_worker} |")
        lines += [
            "",
            f"Least-squares line through the wall times: {rt['fixed_s']:.4f} s + "
            f"{rt['per_partition_s']:.4f} s per partition.",
            "",
        ]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--rows-per-file", type=int, default=1_000_000)
    p.add_argument("--folder", default="/tmp/sklearn_fdp_criteo")
    p.add_argument("--batch", type=int, default=65_536)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--epochs", type=float, default=0.5)
    p.add_argument("--throughput-files", type=int, default=2)
    p.add_argument("--accuracy-files", type=int, default=0, help="0: every file")
    p.add_argument("--skip-accuracy", action="store_true")
    p.add_argument("--resume", action="store_true",
                   help="keep the phases already stored in the results file; run the others")
    p.add_argument("--render", action="store_true",
                   help="only write cluster_dpsgd.md again from the stored results")
    p.add_argument("--child")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--files", type=int, default=2)
    args = p.parse_args()
    if args.child:
        fn = {"throughput": _child_throughput, "inprocess": _child_inprocess,
              "accuracy": _child_accuracy, "roundtrip": _child_roundtrip}[args.child]
        print("RESULT " + json.dumps(fn(args)), flush=True)
        return
    out = HERE / "results"
    if args.render:
        (out / "cluster_dpsgd.md").write_text(
            _markdown(json.loads((out / "cluster_dpsgd.json").read_text())))
        return
    files = _write(args)
    path = out / "cluster_dpsgd.json"
    res = json.loads(path.read_text()) if args.resume and path.exists() else {}
    res.update(rows=args.rows, rows_per_file=args.rows_per_file, n_files=len(files),
               bytes_on_disk=sum(f.stat().st_size for f in files), batch=args.batch,
               steps=args.steps, epochs=args.epochs, machine=platform.platform(),
               cpu_count=os.cpu_count())
    res.setdefault("loads", {})

    def phase(name, run):
        """Run one phase unless stored (``--resume``); store it with its load average."""
        if name in res and args.resume:
            return
        before = list(os.getloadavg())
        res[name] = run()
        res["loads"][name] = [before, list(os.getloadavg())]
        path.write_text(json.dumps(res, indent=2) + "\n")  # kept if a later phase fails

    phase("throughput", lambda: [_child(args, "throughput", workers=w,
                                        files=args.throughput_files) for w in (1, 2)])
    phase("inprocess", lambda: _child(args, "inprocess", files=args.throughput_files))
    one = res["throughput"][0]
    res["overhead_s"] = one["step_wall_s"] - res["inprocess"]["eager_step_wall_s"]
    res["overhead_cpu_s"] = (one["step_driver_cpu_s"] + sum(one["worker_cpu_s"]) / one["steps"]
                             - res["inprocess"]["eager_step_cpu_s"])
    worker_cpu_per_row = sum(one["worker_cpu_s"]) / one["rows_sampled"]
    for loop in ("lazy", "eager"):
        res[f"worker_vs_inprocess_{loop}_cpu"] = worker_cpu_per_row / (
            res["inprocess"][f"{loop}_step_cpu_s"] / args.batch)
    if not args.skip_accuracy:
        phase("accuracy", lambda: _child(args, "accuracy", files=args.accuracy_files))
    phase("roundtrip", lambda: _child(args, "roundtrip"))
    (out / "cluster_dpsgd.json").write_text(json.dumps(res, indent=2) + "\n")
    (out / "cluster_dpsgd.md").write_text(_markdown(res))
    print(_markdown(res))


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""FeatureDPLinearRegression from Parquet partitions on a dask.distributed LocalCluster.

Data: ``--rows`` (default 20,000,000) x 100 float32 columns and a float32
target, written by a separate process in Parquet files of ``--rows-per-file``
rows (default 500,000: one dask partition each; uncompressed) in a fresh
folder under ``--tmpdir`` (deleted afterwards unless ``--keep``). Rows: every
entry N(0, 0.08²) (row norm about 0.8), the target ``x · w + N(0, 0.1²)``
for a fixed random ``w`` of norm 2. The first 10 columns are protected, the
target private; ``y_bounds = (-3, 3)``, ``row_norm_bounds = 1``, ε = 1,
δ = 1e-9, ``random_state=0``.

Each fit runs in a fresh driver process (the "fitting process"), which
starts a ``LocalCluster(processes=True, threads_per_worker=1)`` of 1 or 2
workers (BLAS single-threaded everywhere), builds a dask array of the
files (each partition read by the worker that sums it; the row counts come
from the Parquet footers) and fits. Reported per fit: the wall time of
``fit`` alone and rows/s, the driver's peak RSS (``VmHWM``; the workers'
memory is theirs), and, for the subset fits, R² on a held-out test set.

Runs: the whole table and its first ``--small-files`` files (default 1:
500,000 rows, 1/40 of the table; the driver's peak RSS must not grow with n),
each on 1 and 2 workers (``--full-workers``: the whole table's; on a loaded
machine ``--full-workers 2`` keeps the run short); and the first ``--subset-files`` files (default 2,
1,000,000 rows) fitted in memory (``pd.read_parquet`` into one float32 array, the same
estimator) against the cluster fit of the same files: same R² and the
largest coefficient difference.

Writes ``benchmarks/results/cluster_stats.json`` and ``cluster_stats.md``.
Run it under ``nice``; the machine's load average before and after is
recorded (on a shared machine other jobs take cores and inflate times).

Results (in ``benchmarks/results/``): ``cluster_stats.json``, ``cluster_stats.md``; the idle
rerun of the whole table: ``cluster_stats_idle.json``, ``.md`` (``--out``).
Quoted in (the sections whose figures come from these files):

* docs/scale.md § "Measured, and projected to 10⁹ rows"
"""

from _common import one_thread  # benchmarks/ is on sys.path when run as a script

one_thread()  # before numpy is imported

import os  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from _common import peak_rss_mib, run_result_child  # noqa: E402  (benchmarks/ is on sys.path)

D = 100
PRIVATE = list(range(10))
PARAMS = dict(private_features=PRIVATE, y_bounds=(-3.0, 3.0), row_norm_bounds=1.0,
              epsilon=1.0, delta=1e-9, random_state=0)


def _weights():
    w = np.random.default_rng(12345).standard_normal(D)
    return 2.0 * w / np.linalg.norm(w)


def _rows(rng, n):
    X = (rng.standard_normal((n, D)) * 0.08).astype(np.float32)
    y = (X.astype(np.float64) @ _weights() + 0.1 * rng.standard_normal(n)).astype(np.float32)
    return X, y


def _write(args):
    """Child process: write the Parquet files (and the test set as .npy)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = pathlib.Path(args.folder)
    names = [f"c{j}" for j in range(D)]
    n_files = -(-args.rows // args.rows_per_file)
    for i in range(n_files):
        n = min(args.rows_per_file, args.rows - i * args.rows_per_file)
        X, y = _rows(np.random.default_rng([7, i]), n)
        table = pa.table({**{c: X[:, j] for j, c in enumerate(names)}, "y": y})
        pq.write_table(table, folder / f"part-{i:05d}.parquet", compression="none")
    Xt, yt = _rows(np.random.default_rng([8, 0]), 200_000)
    np.save(folder / "test_X.npy", Xt)
    np.save(folder / "test_y.npy", yt)
    print("RESULT {}", flush=True)


def _read_part(path):
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    X = np.column_stack([table.column(f"c{j}").to_numpy() for j in range(D)])
    return X, table.column("y").to_numpy()


def _dask_arrays(files):
    import dask
    import dask.array as da
    import pyarrow.parquet as pq

    Xs, ys = [], []
    for f in files:
        n = pq.ParquetFile(f).metadata.num_rows  # the footer: no rows read here
        part = dask.delayed(_read_part, pure=True)(str(f))
        Xs.append(da.from_delayed(part[0], shape=(n, D), dtype=np.float32))
        ys.append(da.from_delayed(part[1], shape=(n,), dtype=np.float32))
    return da.concatenate(Xs), da.concatenate(ys)


def _r2(est, folder):
    Xt, yt = np.load(folder / "test_X.npy"), np.load(folder / "test_y.npy")
    pred = est.predict(Xt)
    return float(1.0 - np.sum((yt - pred) ** 2) / np.sum((yt - yt.mean()) ** 2))


def _fit(args):
    """Child process: one fit (cluster or in memory); prints one JSON line."""
    from sklearn_fdp import FeatureDPLinearRegression

    folder = pathlib.Path(args.folder)
    files = sorted(folder.glob("part-*.parquet"))[:args.files]
    est = FeatureDPLinearRegression(**PARAMS)
    out = dict(mode=args.mode, workers=args.workers, files=len(files))
    if args.mode == "memory":
        parts = [_read_part(f) for f in files]
        X = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        del parts
        t = time.perf_counter()
        est.fit(X, y)
        out["fit_s"] = time.perf_counter() - t
        out["rows"] = int(X.shape[0])
    else:
        import logging

        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                          dashboard_address=None, memory_limit="6GiB",
                          silence_logs=logging.ERROR) as cluster, Client(cluster):
            # Warm-up: every worker imports sklearn_fdp and compiles its kernels on a
            # tiny fit (not timed; a long-running cluster pays this once).
            import dask.array as da

            warm = np.random.default_rng(0).standard_normal((4 * args.workers, D)) * 0.05
            FeatureDPLinearRegression(**PARAMS).fit(
                da.from_array(warm, chunks=(4, D)), da.from_array(warm[:, 0], chunks=4))
            X, y = _dask_arrays(files)
            rss_before = peak_rss_mib()
            t = time.perf_counter()
            est.fit(X, y)
            out["fit_s"] = time.perf_counter() - t
            out["rows"] = int(X.shape[0])
            out["peak_rss_before_fit_mib"] = rss_before
    out["rows_per_s"] = out["rows"] / out["fit_s"]
    out["peak_rss_mib"] = peak_rss_mib()
    out["r2"] = _r2(est, folder)
    out["coef"] = est.coef_.astype(float).tolist()
    out["intercept"] = float(est.intercept_)
    print("RESULT " + json.dumps(out), flush=True)


def _child(args, **kw):
    cmd = [sys.executable, __file__, "--child", kw.pop("child"), "--folder", str(args.folder)]
    for k, v in kw.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    return run_result_child(cmd)


def _markdown(res):
    lines = [
        "# Sufficient-statistic fits on a dask.distributed LocalCluster",
        "",
        "Generated by `benchmarks/bench_cluster_stats.py` (do not edit by hand).",
        "",
        f"`FeatureDPLinearRegression` (10 of {D} columns protected, private target, ε = 1, "
        f"δ = 1e-9) from {res['rows']:,} × {D} float32 rows in {res['n_files']} Parquet "
        f"files of {res['rows_per_file']:,} rows ({res['bytes_on_disk'] / 2**30:.1f} GiB on "
        "disk), one dask partition per file, each read and summed by the worker that holds "
        "it; only the (d + 2)² sums come back. Each fit in a fresh driver process that "
        "starts a `LocalCluster(processes=True, threads_per_worker=1)`; fit time excludes "
        "the cluster's start and a warm-up fit of a few rows (imports and compiled kernels "
        "on each worker). Peak RSS: the driver's `VmHWM` (the fitting process).",
        "",
        f"Machine: {res['machine']}, shared with other jobs: load average "
        f"{res['loadavg_before'][0]:.2f} before, {res['loadavg_after'][0]:.2f} after "
        "(1-minute). Times on a shared machine are upper bounds; the ratios between rows "
        "of this table were measured in the same run.",
        "",
        "| rows | workers | fit (s) | rows/s | driver peak RSS (MiB) | R² (test) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res["cluster"]:
        lines.append(f"| {r['rows']:,} | {r['workers']} | {r['fit_s']:.1f} | "
                     f"{r['rows_per_s']:,.0f} | {r['peak_rss_mib']:.0f} | {r['r2']:.6f} |")
    m, c = res["subset_memory"], res["subset_cluster"]
    lines += [
        "",
        f"Same model as in memory, on the first {m['rows']:,} rows ({m['files']} files), "
        "held-out test set of 200,000 rows:",
        "",
        "| fit | fit (s) | peak RSS (MiB) | R² (test) |",
        "|---|---:|---:|---:|",
        f"| in memory (one float32 array) | {m['fit_s']:.1f} | {m['peak_rss_mib']:.0f} | "
        f"{m['r2']:.10f} |",
        f"| cluster, {c['workers']} workers | {c['fit_s']:.1f} | {c['peak_rss_mib']:.0f} | "
        f"{c['r2']:.10f} |",
        "",
        f"R² difference {abs(m['r2'] - c['r2']):.1e}; largest coefficient difference "
        f"{res['subset_max_coef_diff']:.1e} (the released sums differ only by the order "
        "of their additions; tests/test_dask_cluster.py derives the bound).",
        "",
    ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--rows-per-file", type=int, default=500_000)
    parser.add_argument("--small-files", type=int, default=1,
                        help="files of the smaller n (default 1: 500,000 rows)")
    parser.add_argument("--subset-files", type=int, default=2)
    parser.add_argument("--full-workers", type=lambda v: [int(w) for w in v.split(",")],
                        default=[1, 2], help="worker counts of the whole-table fits")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--data", default=None,
                        help="an existing folder written by this script (--keep) to reuse; "
                             "deleted at the end unless --keep")
    parser.add_argument("--out", default=str(HERE / "results" / "cluster_stats"))
    parser.add_argument("--child", choices=["write", "fit"], default=None)
    parser.add_argument("--folder", default=None)
    parser.add_argument("--mode", default="cluster")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--files", type=int, default=0)
    args = parser.parse_args()
    if args.child == "write":
        return _write(args)
    if args.child == "fit":
        return _fit(args)

    from _common import library_fingerprint, write_json_and_markdown

    load_before = os.getloadavg()
    if args.data:
        args.folder, write_s = pathlib.Path(args.data), None
    else:
        args.folder = pathlib.Path(tempfile.mkdtemp(prefix="fdp_cluster_", dir=args.tmpdir))
    try:
        if not args.data:
            t = time.perf_counter()
            _child(args, child="write", rows=args.rows, rows_per_file=args.rows_per_file)
            write_s = time.perf_counter() - t
        files = sorted(args.folder.glob("part-*.parquet"))
        import pyarrow.parquet as pq

        args.rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        args.rows_per_file = pq.ParquetFile(files[0]).metadata.num_rows
        n_files = len(files)
        small = args.small_files
        cluster = []
        runs = [(small, w) for w in (1, 2)] + [(n_files, w) for w in args.full_workers]
        for n, workers in runs:
            r = _child(args, child="fit", mode="cluster", workers=workers, files=n)
            print(f"{r['rows']:>11,} rows, {workers} worker(s): {r['fit_s']:.1f} s, "
                  f"peak RSS {r['peak_rss_mib']:.0f} MiB, R² {r['r2']:.6f}", flush=True)
            cluster.append(r)
        mem = _child(args, child="fit", mode="memory", workers=0, files=args.subset_files)
        sub = _child(args, child="fit", mode="cluster", workers=2, files=args.subset_files)
        res = dict(
            rows=args.rows, rows_per_file=args.rows_per_file, n_files=n_files,
            bytes_on_disk=sum(f.stat().st_size for f in files), write_s=write_s,
            cluster=[{k: v for k, v in r.items() if k != "coef"} for r in cluster],
            subset_memory={k: v for k, v in mem.items() if k != "coef"},
            subset_cluster={k: v for k, v in sub.items() if k != "coef"},
            subset_max_coef_diff=float(np.max(np.abs(np.subtract(mem["coef"], sub["coef"])))),
            loadavg_before=list(load_before), loadavg_after=list(os.getloadavg()),
            machine=f"{platform.machine()}, {os.cpu_count()} cores",
            python=platform.python_version(), **library_fingerprint(),
        )
    finally:
        if not args.keep:
            shutil.rmtree(args.folder, ignore_errors=True)
    write_json_and_markdown(args.out, res, _markdown(res))


if __name__ == "__main__":
    main()

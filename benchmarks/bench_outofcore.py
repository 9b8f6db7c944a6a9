#!/usr/bin/env python
"""Out-of-core fits: every estimator from a 4 GB ``numpy.memmap`` with peak RSS under 1 GB.

Data: ``--rows`` x ``--features`` float64 (default 5,000,000 x 100 = 4.0 GB),
rows i.i.d. Gaussian scaled to norm 1, binary labels from a fixed random
linear model with 10 % label noise. A separate process writes it in chunks
of 100,000 rows to ``X.npy`` in a fresh temporary folder (``--tmpdir``; the
labels to ``y.npy``, int8), so the generator's memory counts nowhere.

Each fit runs in a fresh process (``nice``-d by the caller), one at a time:

* ``memmap``: ``np.load(path, mmap_mode="r")`` handed to ``fit``: rows are
  checked in chunks and each Poisson batch is gathered from the map
  (sklearn_fdp._outofcore);
* ``in_memory``: ``np.load(path)`` (the whole array in RAM, load time
  reported separately), then the same ``fit`` with the same seed.

Estimators (every one that accepts a memmap), ε = 1, δ = 1e-7 (< 1/n),
``random_state=0``, BLAS, numba and torch single-threaded:

* ``DPSGDClassifier``; ``FeatureDPLogisticRegression`` (FDP Algorithm 1,
  the first 10 columns private); ``DPSGDFClassifier`` (practical variant,
  ``epsilon_mean=0.05``) and ``DPSGDFClassifier-analysed`` (analysed
  variant, ``epsilon_mean=0.2``, ``epsilon_quantile=0.1``); all with the RDP
  accountant and ``epochs=--epochs`` (default 0.2 of an epoch: 245 steps of
  expected batch 4,096 on 5M rows);
* ``PrivateMeanCenterer`` (``fit`` only: one private mean);
* ``AdaMixClassifier``: 20 public records (fixed random rows), σ = 12
  (a few full-batch steps, each a pass over the file), defaults otherwise;
* ``MLPFeatureDP``: one hidden layer of 16 units, the first 10 columns
  private (Algorithm 1), ``epochs=--epochs``, on the CPU.

In-memory comparison. ``DPSGDClassifier`` and
``FeatureDPLogisticRegression`` are also fitted from the 4 GB array in
memory (their model and time are compared on the big file). For the
others, the in-memory fits would need 4-10 GB each on a machine shared with
other jobs (AdaMix copies the private rows, the MLP makes a float32 torch
copy), so with ``--compare-rows N`` (default 1,000,000: 0.8 GB, above the
256 MiB streaming threshold) their memmap fit and their in-memory fit are
both run on a second file holding the first N rows of the same data, and
``coef_ identical`` refers to that file. ``--compare-rows 0`` compares every
estimator on the big file.

Per fit: wall time of ``fit`` alone, peak RSS (``VmHWM`` of
/proc/self/status; ``ru_maxrss`` agrees), RSS after the imports (the
interpreter, numpy, scipy, sklearn, numba: the floor of any fit), and whether
``coef_``/``intercept_`` are bit-identical across the two modes.

Page cache: the file has just been written, so both modes read it from the
page cache (warm). Pages in the page cache are not part of a process's RSS;
the memmap fit reads rows with ``pread`` and maps nothing. ``--cold`` adds a
DPSGDClassifier memmap fit after evicting the file from the page cache
(``posix_fadvise(POSIX_FADV_DONTNEED)``, this file only): its validation
pass reads the file from disk (sequentially), which puts it back in the
cache when memory allows, so the batches that follow are mostly warm.

Writes ``benchmarks/results/outofcore.json`` and ``outofcore.md`` and deletes
the data folder (unless ``--keep``).

Results (in ``benchmarks/results/``): ``outofcore.json``, ``outofcore.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Out-of-core fits"
"""

from _common import one_thread  # benchmarks/ is on sys.path when run as a script

one_thread()  # before numpy is imported

import os  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

RESULTS = HERE / "results"
GEN_CHUNK = 100_000
ESTIMATORS = ("DPSGDClassifier", "FeatureDPLogisticRegression", "PrivateMeanCenterer",
              "DPSGDFClassifier", "DPSGDFClassifier-analysed", "AdaMixClassifier",
              "MLPFeatureDP")
# Compared with the in-memory fit on the big file whatever --compare-rows says.
FULL_COMPARE = ("DPSGDClassifier", "FeatureDPLogisticRegression")
N_PUBLIC = 20  # AdaMix's public records


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


# -- child processes ----------------------------------------------------------

def generate(folder, n, d, seed):
    """Write X.npy (float64, rows of norm 1) and y.npy (int8) in chunks."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = np.lib.format.open_memmap(folder / "X.npy", mode="w+", dtype=np.float64, shape=(n, d))
    y = np.empty(n, dtype=np.int8)
    for start in range(0, n, GEN_CHUNK):
        stop = min(start + GEN_CHUNK, n)
        block = rng.normal(size=(stop - start, d))
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        label = block @ w > 0
        flip = rng.random(stop - start) < 0.1
        y[start:stop] = label ^ flip
        X[start:stop] = block
        X.flush()
        X._mmap.madvise(__import__("mmap").MADV_DONTNEED)  # keep this process small too
    del X
    np.save(folder / "y.npy", y)


def make_estimator(name, epochs):
    import sklearn_fdp as F

    common = dict(epsilon=1.0, delta=1e-7, epochs=epochs, accountant="rdp", random_state=0)
    if name == "DPSGDClassifier":
        return F.DPSGDClassifier(**common)
    if name == "FeatureDPLogisticRegression":
        # method="alg1" named: with a private label "auto" is DP-SGD since issue 32.
        return F.FeatureDPLogisticRegression(private_features=list(range(10)), method="alg1",
                                             **common)
    if name == "PrivateMeanCenterer":
        return F.PrivateMeanCenterer(epsilon=1.0, delta=1e-7, random_state=0)
    if name == "DPSGDFClassifier":
        return F.DPSGDFClassifier(epsilon_mean=0.05, **common)
    if name == "DPSGDFClassifier-analysed":
        return F.DPSGDFClassifier(variant="analysed", epsilon_mean=0.2, epsilon_quantile=0.1,
                                  **common)
    if name == "AdaMixClassifier":
        return F.AdaMixClassifier(epsilon=1.0, delta=1e-7, noise_multiplier=12.0,
                                  random_state=0)
    if name == "MLPFeatureDP":
        return F.MLPFeatureDP(hidden_layer_sizes=(16,), private_features=list(range(10)),
                              epsilon=1.0, delta=1e-7, epochs=epochs, device="cpu",
                              random_state=0)
    raise ValueError(name)


def fit_args(name, X, y):
    """``(args, kwargs)`` of ``fit`` for ``name``."""
    if name == "PrivateMeanCenterer":
        return (X,), {}
    if name == "AdaMixClassifier":
        mask = np.zeros(len(y), dtype=bool)
        mask[np.random.default_rng(1).choice(len(y), N_PUBLIC, replace=False)] = True
        return (X, y), {"public_mask": mask}
    return (X, y), {}


def model_vector(est):
    """Everything the fit released, as one float64 vector."""
    if hasattr(est, "module_"):
        return np.concatenate([p.detach().cpu().double().numpy().ravel()
                               for p in est.module_.parameters()])
    parts = [getattr(est, a) for a in ("coef_", "intercept_", "mean_") if hasattr(est, a)]
    return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])


def fit_child(folder, name, mode, epochs, cold, out, stem="X"):
    import sklearn_fdp  # noqa: F401  (imports counted in the floor)
    from sklearn_fdp import DPSGDClassifier

    if name == "MLPFeatureDP":
        import torch

        torch.set_num_threads(1)
    # Compile the kernels and import everything a fit touches on a tiny
    # problem, so the floor below includes them.
    rng = np.random.default_rng(0)
    Xs = rng.normal(size=(200, 3))
    DPSGDClassifier(epsilon=1.0, delta=1e-4, epochs=1, accountant="rdp",
                    random_state=0).fit(Xs, (Xs[:, 0] > 0).astype(int))
    Xs4, ys = np.hstack([Xs] * 4) / 4, (Xs[:, 0] > 0).astype(int)
    args, kwargs = fit_args(name, Xs4, ys)
    make_estimator(name, 1).set_params(delta=1e-4).fit(*args, **kwargs)
    y = np.load(folder / f"y{stem[1:]}.npy")
    floor_kib = _status_kib("VmRSS")

    load_s = 0.0
    if mode == "memmap":
        if cold:
            fd = os.open(folder / "X.npy", os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        X = np.load(folder / f"{stem}.npy", mmap_mode="r")
    else:
        t0 = time.perf_counter()
        X = np.load(folder / f"{stem}.npy")
        load_s = time.perf_counter() - t0
    est = make_estimator(name, epochs)
    args, kwargs = fit_args(name, X, y)
    t0 = time.perf_counter()
    est.fit(*args, **kwargs)
    fit_s = time.perf_counter() - t0
    peak_kib = _status_kib("VmHWM")
    maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    np.save(out.with_suffix(".coef.npy"), model_vector(est))
    result = dict(
        estimator=name,
        mode=mode + ("_cold" if cold else ""),
        file=stem,
        file_bytes=(folder / f"{stem}.npy").stat().st_size,
        fit_s=fit_s,
        load_s=load_s,
        peak_rss_mib=peak_kib / 1024,
        ru_maxrss_mib=maxrss_kib / 1024,
        floor_rss_mib=floor_kib / 1024,
        steps=int(getattr(est, "steps_", 0)),
        batch_size=int(getattr(est, "batch_size_", 0)),
        epsilon=float(est.epsilon_),
        train_accuracy_first_200k=(
            float(est.score(np.asarray(X[:200_000]), y[:200_000]))
            if hasattr(est, "score") else None),
    )
    out.write_text(json.dumps(result))


# -- driver -------------------------------------------------------------------

def _run(args, timeout):
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), *map(str, args)]
    subprocess.run(cmd, check=True, timeout=timeout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--epochs", type=float, default=0.2)
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS),
                        choices=ESTIMATORS)
    parser.add_argument("--compare-rows", type=int, default=1_000_000,
                        help="rows of the file on which the estimators other than "
                             f"{', '.join(FULL_COMPARE)} are compared with their in-memory "
                             "fit (0: the big file)")
    parser.add_argument("--cold", action="store_true",
                        help="also fit from the memmap after evicting the file from the cache")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--out", default="outofcore")
    args = parser.parse_args()

    from _common import library_fingerprint

    folder = pathlib.Path(tempfile.mkdtemp(prefix="sklearn_fdp_ooc_", dir=args.tmpdir))
    runs = []
    try:
        t0 = time.perf_counter()
        _run(["_generate", folder, args.rows, args.features, 0], timeout=1800)
        gen_s = time.perf_counter() - t0
        nbytes = (folder / "X.npy").stat().st_size
        print(f"wrote {nbytes / 1e9:.2f} GB in {gen_s:.0f} s", flush=True)
        compare_rows = args.compare_rows if 0 < args.compare_rows < args.rows else 0
        if compare_rows and any(n not in FULL_COMPARE for n in args.estimators):
            # The same generator, fewer rows: the first rows of X.npy.
            (folder / "small").mkdir()
            _run(["_generate", folder / "small", compare_rows, args.features, 0], timeout=1800)
            for f in ("X", "y"):
                (folder / "small" / f"{f}.npy").rename(folder / f"{f}_small.npy")
        for name in args.estimators:
            small = bool(compare_rows) and name not in FULL_COMPARE
            modes = [("memmap", 0, "X")]
            modes += ([("memmap", 0, "X_small"), ("in_memory", 0, "X_small")] if small
                      else [("in_memory", 0, "X")])
            if args.cold and name == ESTIMATORS[0]:
                modes.append(("memmap", 1, "X"))
            coefs = {}
            mine = []
            for mode, cold, stem in modes:
                out = folder / f"{name}_{mode}_{cold}_{stem}.json"
                _run(["_fit", folder, name, mode, args.epochs, cold, out, stem], timeout=3600)
                run = json.loads(out.read_text())
                coefs[(run["mode"], stem)] = np.load(out.with_suffix(".coef.npy"))
                runs.append(run)
                mine.append(run)
                print(json.dumps(run), flush=True)
            for run in mine:
                ref = coefs.get(("in_memory", run["file"]))
                run["identical_to_in_memory"] = (
                    None if ref is None
                    else bool(np.array_equal(coefs[(run["mode"], run["file"])], ref)))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)

    by = {(r["estimator"], r["mode"], r["file"]): r for r in runs}
    for r in runs:
        base = by.get((r["estimator"], "in_memory", r["file"]))
        r["fit_time_vs_in_memory"] = None if base is None else r["fit_s"] / base["fit_s"]
        r["file_over_peak_rss"] = r["file_bytes"] / (r["peak_rss_mib"] * 2**20)
    result = dict(
        data=dict(rows=args.rows, features=args.features, dtype="float64", bytes=nbytes,
                  generate_s=gen_s, compare_rows=compare_rows),
        epochs=args.epochs,
        runs=runs,
        machine=dict(platform=platform.platform(), python=platform.python_version(),
                     cpus=os.cpu_count(), numpy=np.__version__),
        library=library_fingerprint(),
        command=" ".join(sys.argv),
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{args.out}.md").write_text(markdown(result))
    print(markdown(result))


def markdown(result):
    data = result["data"]
    small = data.get("compare_rows")

    def fmt(value, spec):
        return "—" if value is None else format(value, spec)

    lines = [
        f"# Out-of-core fit: {data['rows']:,} x {data['features']} float64 "
        f"({data['bytes'] / 1e9:.2f} GB), {result['epochs']:g} epoch",
        "",
        "Written by `benchmarks/bench_outofcore.py`. Each fit in a fresh process; peak RSS is "
        "VmHWM (whole process); 'floor' is the RSS after imports and kernel compilation, "
        "before loading any data. Fit time excludes the in-memory load (shown apart). "
        "'file / peak' is the size of the file the fit read over its peak RSS. "
        "'model identical': every released array (coef_, intercept_, mean_, the network's "
        "weights) equal bit for bit to the in-memory fit of the same file.",
        "",
    ]
    if small:
        lines += [
            f"File `X`: the {data['rows']:,}-row file. File `X_small`: its first {small:,} rows "
            f"({small * data['features'] * 8 / 1e9:.2f} GB, still above the 256 MiB streaming "
            "threshold): the estimators other than DPSGDClassifier and "
            "FeatureDPLogisticRegression are compared with their in-memory fit on it, since "
            "their in-memory fits of the big file need 4-10 GB each on a machine shared with "
            "other jobs.",
            "",
        ]
    lines += [
        "| estimator | X as | file | steps | fit (s) | time vs in-memory | load (s) "
        "| peak RSS (MiB) | file / peak | floor (MiB) | model identical | train acc. (first 200k) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['estimator']} | {r['mode']} | {r['file']} | {r['steps'] or '—'} | "
            f"{r['fit_s']:.1f} | {fmt(r['fit_time_vs_in_memory'], '.2f')} | {r['load_s']:.1f} | "
            f"{r['peak_rss_mib']:.0f} | {r['file_over_peak_rss']:.1f} | "
            f"{r['floor_rss_mib']:.0f} | {fmt(r['identical_to_in_memory'], '')} | "
            f"{fmt(r['train_accuracy_first_200k'], '.4f')} |"
        )
    lines += ["", f"Machine: {result['machine']['platform']}, {result['machine']['cpus']} CPUs "
              "(shared with other jobs), BLAS/numba single-threaded. Library: "
              f"{result['library']['git_head'][:12]} "
              f"(sources {result['library']['sklearn_fdp_sources_sha256'][:12]}).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_generate":
        generate(pathlib.Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_fit":
        fit_child(pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]),
                  bool(int(sys.argv[6])), pathlib.Path(sys.argv[7]), sys.argv[8])
    else:
        main()

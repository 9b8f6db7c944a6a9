#!/usr/bin/env python
"""CPU time of calibrating σ, cold and warm, against the calibration before issue 18.

For every (ε, q, T) the demo (``examples/adult_demo.py``) and the benchmarks
use -- Adult (30,162 training rows), Purchase-like (20,000) and MNIST-8k
(8,000) at the default batch rule (``_budget._auto_batch_size``), epochs 1 to
50, ε from 0.01 to 8, δ = 1e-5, the accountant ``accountant="auto"`` picks
(PLD up to ε = 10, RDP above) -- it times
:func:`sklearn_fdp.accounting.calibrate_noise_multiplier`:

* **cold**: in-process caches cleared and an empty disk cache (a temporary
  ``SKLEARN_FDP_CACHE_DIR``), as in a fresh process (imports excluded);
* **warm**: in-process caches cleared again, the disk cache filled by the
  cold call (what a second script, or a search's worker process, pays: a
  read and the check of the reported ε);
* the ε the reporting rule verifies at the calibrated σ;
* ``old_calibrate``: the calibration and PLD rule as they were before issue
  18 (copied below: a refine-by-ten PLD rule, an RDP bracket, brentq), its σ
  and CPU time.

CPU time is ``time.process_time`` (this process, all threads). Writes
``benchmarks/results/calibration.json`` and ``calibration.md``. ``--quick``
runs a handful of rows.

``--compare REF`` (issue 33) times the package as of git commit ``REF``
against the working tree instead, row by row: two worker processes (one
imports ``REF``'s ``sklearn_fdp``, extracted with ``git archive``, the other
this tree's) take the rows in turn, the order alternating from row to row, so
both see the same load; each reports the σ and the cold and warm CPU time of
its calibration. Writes ``calibration_compare.json`` and ``.md``: the σ of
both (they must be equal) and the per-row ratio of CPU times.

Results (in ``benchmarks/results/``): ``calibration.json``, ``calibration.md``,
``calibration_compare.json``, ``calibration_compare.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Speed of the whole `fit`, warm and cold"
* docs/user_guide.md § "3. Accounting"
* docs/architecture.md § "The accounting package"
"""

import argparse
import json
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from _common import ROOT, library_fingerprint

sys.path.insert(0, str(ROOT))

if os.environ.get("BENCH_CALIBRATION_WORKER"):  # --compare's worker: the package on its path
    sys.path.remove(str(ROOT))
from sklearn_fdp import _budget, accounting  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DELTA = 1e-5
DATASETS = {"Adult": 30162, "Purchase-like": 20000, "MNIST-8k": 8000}
EPSILONS = [0.01, 0.03, 0.1, 0.3, 1.0, 2.0, 3.0, 4.0, 8.0]
EPOCHS = [1, 5, 10, 20, 50]


# -- the calibration before issue 18, for comparison -------------------------

def _old_pld_raw(event, delta, interval):
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    acc.compose(event)
    pld = acc._pld
    return float(acc.get_epsilon(delta)), max(pld._pmf_remove.size, pld._pmf_add.size)


def _old_pld_epsilon(event, delta):
    coarse, _ = _old_pld_raw(event, delta, 1e-2)
    if not math.isfinite(coarse):
        return coarse
    interval = 1e-4 * max(1.0, coarse / 30)
    eps, size = _old_pld_raw(event, delta, interval)
    while eps < 100 * interval and interval > 1e-12 and size * 10 <= 1_000_000:
        interval /= 10
        finer, size = _old_pld_raw(event, delta, interval)
        eps = min(eps, finer)
    return eps if eps > 0 else interval


def _old_epsilon(sigma, q, steps, accountant):
    """The old rule on the settings benchmarked here (add/remove, δ = 1e-5)."""
    event = accounting.dpsgd_event(sigma, q, steps)
    if accountant == "rdp":
        rdp, capped = accounting._rdp_raw(event, DELTA, "add_remove")
        if 0 < rdp < math.inf and not capped:
            return rdp
    return _old_pld_epsilon(event, DELTA)


def old_calibrate(epsilon, q, steps, accountant, tol=1e-4):
    """σ as ``calibrate_noise_multiplier`` computed it before issue 18."""
    from scipy import optimize

    cache = {}

    def eps(sigma):
        if sigma not in cache:
            cache[sigma] = _old_epsilon(sigma, q, steps, accountant)
        return cache[sigma]

    if accountant == "pld":
        hi = old_calibrate(epsilon, q, steps, "rdp", tol)
        while eps(hi) > epsilon:
            hi *= 1.25
        lo = 0.8 * hi
        while eps(lo) <= epsilon:
            hi, lo = lo, lo * 0.8
    else:
        lo, hi = 0.5, 1.0
        if eps(hi) > epsilon:
            while eps(hi) > epsilon:
                lo, hi = hi, hi * 2
        else:
            while eps(lo) <= epsilon:
                hi, lo = lo, lo / 2
    xtol = tol * lo
    root, result = optimize.brentq(lambda s: eps(s) - epsilon, lo, hi, xtol=xtol,
                                   full_output=True)
    if result.converged and eps(root) > epsilon and eps(root + xtol) <= epsilon:
        root += xtol
    if not result.converged or eps(root) > epsilon:
        while hi - lo > xtol:
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if eps(mid) <= epsilon else (mid, hi)
        root = hi
    return float(root)


# -- the benchmark -----------------------------------------------------------

def _settings(quick):
    rows = []
    for name, n in DATASETS.items():
        batch = _budget._auto_batch_size(n)
        for epochs in EPOCHS:
            steps = max(1, math.ceil(epochs * n / batch))
            for eps in EPSILONS:
                accountant = "pld" if eps <= _budget._AUTO_PLD_MAX_EPSILON else "rdp"
                rows.append(dict(data=name, n=n, batch=batch, q=batch / n, epochs=epochs,
                                 steps=steps, epsilon=eps, accountant=accountant))
    if quick:
        rows = [r for r in rows if r["data"] == "Adult" and r["epochs"] in (5, 20)
                and r["epsilon"] in (0.1, 1.0, 3.0)]
    return rows


def _cpu(fn):
    start = time.process_time()
    value = fn()
    return value, time.process_time() - start


def run(quick, skip_old):
    cache_dir = tempfile.mkdtemp(prefix="sklearn_fdp-bench-calibration-")
    os.environ["SKLEARN_FDP_CACHE_DIR"] = cache_dir
    # Warm-up: imports, dp-accounting's lazy modules.
    accounting.calibrate_noise_multiplier(1.0, DELTA, 0.05, 100, accountant="pld")
    accounting.calibrate_noise_multiplier(1.0, DELTA, 0.05, 100, accountant="rdp")
    out = []
    for row in _settings(quick):
        args = (row["epsilon"], DELTA, row["q"], row["steps"])
        acc = row["accountant"]
        accounting.clear_calibration_cache()  # in-process and disk
        sigma, cold = _cpu(lambda: accounting.calibrate_noise_multiplier(*args, accountant=acc))
        accounting.clear_calibration_cache(disk=False)
        again, warm = _cpu(lambda: accounting.calibrate_noise_multiplier(*args, accountant=acc))
        assert again == sigma
        verified, used = accounting.epsilon_and_accountant(
            accounting.dpsgd_event(sigma, row["q"], row["steps"]), DELTA, accountant=acc)
        assert verified <= row["epsilon"]
        row.update(sigma=sigma, cold_cpu_s=cold, warm_cpu_s=warm, verified_epsilon=verified,
                   verified_by=used)
        if not skip_old:
            old_sigma, old_cpu = _cpu(lambda: old_calibrate(row["epsilon"], row["q"],
                                                            row["steps"], acc))
            row.update(old_sigma=old_sigma, old_cpu_s=old_cpu,
                       sigma_change=sigma / old_sigma - 1)
        out.append(row)
        print(f"{row['data']:<14}{row['epochs']:>4}{row['steps']:>6}{row['epsilon']:>6g} {acc}"
              f"  σ {sigma:.5g}  cold {cold:.3f}s warm {warm:.3f}s  ε {verified:.6g}"
              + ("" if skip_old else f"  old σ {row['old_sigma']:.5g} {row['old_cpu_s']:.2f}s"),
              flush=True)
    accounting.clear_calibration_cache()
    os.rmdir(cache_dir)
    return out


# -- --compare REF: the package at REF against this tree, row by row ----------

def _worker():
    """Read rows (JSON lines) on stdin, calibrate each cold then warm, answer on stdout."""
    cache_dir = tempfile.mkdtemp(prefix="sklearn_fdp-bench-calibration-")
    os.environ["SKLEARN_FDP_CACHE_DIR"] = cache_dir
    accounting.calibrate_noise_multiplier(1.0, DELTA, 0.05, 100, accountant="pld")
    accounting.calibrate_noise_multiplier(1.0, DELTA, 0.05, 100, accountant="rdp")
    print(json.dumps({"ready": accounting.__file__}), flush=True)
    for line in sys.stdin:
        row = json.loads(line)
        args = (row["epsilon"], DELTA, row["q"], row["steps"])
        acc = row["accountant"]
        accounting.clear_calibration_cache()
        sigma, cold = _cpu(lambda: accounting.calibrate_noise_multiplier(*args, accountant=acc))
        accounting.clear_calibration_cache(disk=False)
        again, warm = _cpu(lambda: accounting.calibrate_noise_multiplier(*args, accountant=acc))
        eps = accounting.epsilon_of_event(accounting.dpsgd_event(sigma, row["q"], row["steps"]),
                                          DELTA, accountant=acc)
        print(json.dumps(dict(sigma=sigma, again=again, cold=cold, warm=warm, epsilon=eps)),
              flush=True)
    accounting.clear_calibration_cache()


def _start_worker(package_root):
    env = dict(os.environ, BENCH_CALIBRATION_WORKER="1", PYTHONPATH=str(package_root),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(pathlib.Path(__file__).resolve()), "--worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                            cwd=str(ROOT / "benchmarks"))
    ready = json.loads(proc.stdout.readline())["ready"]
    assert ready.startswith(str(package_root)), (ready, package_root)
    return proc


def _ask(proc, row):
    proc.stdin.write(json.dumps(row) + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def compare(ref, quick):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sklearn_fdp-bench-ref-"))
    archive = subprocess.run(["git", "archive", ref, "sklearn_fdp"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    workers = {"ref": _start_worker(tmp), "tree": _start_worker(ROOT)}
    out = []
    for i, row in enumerate(_settings(quick)):
        order = ("ref", "tree") if i % 2 == 0 else ("tree", "ref")
        got = {name: _ask(workers[name], row) for name in order}
        row = dict(row, ref_sigma=got["ref"]["sigma"], sigma=got["tree"]["sigma"],
                   ref_cold_cpu_s=got["ref"]["cold"], cold_cpu_s=got["tree"]["cold"],
                   ref_warm_cpu_s=got["ref"]["warm"], warm_cpu_s=got["tree"]["warm"],
                   ref_verified_epsilon=got["ref"]["epsilon"],
                   verified_epsilon=got["tree"]["epsilon"], first=order[0])
        row["cold_ratio"] = row["cold_cpu_s"] / row["ref_cold_cpu_s"]
        row["warm_ratio"] = row["warm_cpu_s"] / row["ref_warm_cpu_s"]
        out.append(row)
        print(f"{row['data']:<14}{row['epochs']:>4}{row['steps']:>6}{row['epsilon']:>6g} "
              f"σ {row['sigma']:.6g} (ref {row['ref_sigma']:.6g})  cold {row['cold_cpu_s']:.3f}s"
              f" / ref {row['ref_cold_cpu_s']:.3f}s", flush=True)
    for proc in workers.values():
        proc.stdin.close()
        proc.wait(timeout=60)
    return out


def _compare_markdown(rows, meta):
    def summary(key):
        values = sorted(r[key] for r in rows)
        n = len(values)
        return (f"median {statistics.median(values):.3f}, quartiles "
                f"[{values[n // 4]:.3f}, {values[(3 * n) // 4]:.3f}]")

    same = sum(r["sigma"] == r["ref_sigma"] for r in rows)
    same_eps = sum(r["verified_epsilon"] == r["ref_verified_epsilon"] for r in rows)
    lines = [
        "# Noise calibration: this tree against a git commit, row by row (issue 33)",
        "",
        f"`python benchmarks/bench_calibration.py --compare {meta['ref']}` on "
        f"{meta['machine']} ({meta['date']}; load average, 1 min, {meta['load_start']:.2f} at "
        f"the start, {meta['load_end']:.2f} at the end; a shared machine), Python "
        f"{meta['python']}, dp-accounting {meta['dp_accounting']}; δ = {DELTA:g}; the 135 "
        "settings of `calibration.md`. Two worker processes, one per version, take each row in "
        "turn (the order alternating); CPU seconds (`time.process_time`) of one cold and one "
        "warm `calibrate_noise_multiplier` call each. *ratio* = this tree / the commit.",
        "",
        f"σ identical (bit for bit) on {same}/{len(rows)} rows, the reported ε at it on "
        f"{same_eps}/{len(rows)}. Cold ratio: "
        f"{summary('cold_ratio')}. Warm ratio: {summary('warm_ratio')}. Cold median "
        f"{statistics.median(r['cold_cpu_s'] for r in rows):.3f} s (commit "
        f"{statistics.median(r['ref_cold_cpu_s'] for r in rows):.3f} s).",
        "",
        "| data | epochs | T | ε | acc. | σ | σ at the commit | cold s | commit cold s "
        "| cold ratio | warm ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['data']} | {r['epochs']} | {r['steps']} | {r['epsilon']:g} "
                     f"| {r['accountant']} | {r['sigma']!r} | {r['ref_sigma']!r} "
                     f"| {r['cold_cpu_s']:.3f} | {r['ref_cold_cpu_s']:.3f} "
                     f"| {r['cold_ratio']:.3f} | {r['warm_ratio']:.3f} |")
    return "\n".join(lines) + "\n"


def _markdown(rows, meta):
    cold = [r["cold_cpu_s"] for r in rows]
    warm = [r["warm_cpu_s"] for r in rows]
    lines = [
        "# Noise calibration: CPU time, cold and warm (issue 18)",
        "",
        f"`python benchmarks/bench_calibration.py` on {meta['machine']}"
        + (f" ({meta['date']}; load average, 1 min, {meta['load_start']:.2f} at the start, "
           f"{meta['load_end']:.2f} at the end)" if "date" in meta else "")
        + f", Python "
        f"{meta['python']}, dp-accounting {meta['dp_accounting']}; δ = {DELTA:g}; default batch "
        "rule; the accountant `accountant=\"auto\"` picks (PLD up to ε = 10, RDP above). CPU "
        "seconds (`time.process_time`) of one `calibrate_noise_multiplier` call: **cold** = "
        "empty in-process and disk caches (imports excluded), **warm** = in-process caches "
        "cleared, disk cache filled (read + check of the reported ε). *verified ε* is the "
        "reported ε at the calibrated σ (always ≤ ε). *old* = the calibration before "
        "issue 18 (PLD refined by tens, RDP bracket, brentq), copied into the script.",
        "",
        f"Cold: median {statistics.median(cold):.3f} s, max {max(cold):.3f} s, "
        f"{sum(c <= 0.1 for c in cold)}/{len(cold)} rows ≤ 0.1 s. "
        f"Warm: median {statistics.median(warm):.3f} s, max {max(warm):.3f} s.",
    ]
    if "old_cpu_s" in rows[0]:
        old = [r["old_cpu_s"] for r in rows]
        change = [abs(r["sigma_change"]) for r in rows]
        lines.append(
            f"Old: median {statistics.median(old):.3f} s, max {max(old):.3f} s. "
            f"|σ / old σ − 1|: median {statistics.median(change):.2e}, max {max(change):.2e}.")
    lines += ["", "| data | epochs | q | T | ε | acc. | σ | cold s | warm s | verified ε |"
              + (" old σ | old s |" if "old_cpu_s" in rows[0] else ""),
              "|---|---|---|---|---|---|---|---|---|---|"
              + ("---|---|" if "old_cpu_s" in rows[0] else "")]
    for r in rows:
        line = (f"| {r['data']} | {r['epochs']} | {r['q']:.4f} | {r['steps']} | {r['epsilon']:g} "
                f"| {r['accountant']} | {r['sigma']:.5g} | {r['cold_cpu_s']:.3f} "
                f"| {r['warm_cpu_s']:.3f} | {r['verified_epsilon']:.6g} |")
        if "old_cpu_s" in r:
            line += f" {r['old_sigma']:.5g} | {r['old_cpu_s']:.3f} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a handful of rows")
    parser.add_argument("--skip-old", action="store_true",
                        help="do not run the old calibration")
    parser.add_argument("--compare", metavar="REF",
                        help="time the package at git commit REF against this tree")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker()
        return
    import dp_accounting  # noqa: F401
    from importlib import metadata

    load_start, date = os.getloadavg()[0], time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.compare:
        rows = compare(args.compare, args.quick)
        meta = dict(date=date, load_start=load_start, load_end=os.getloadavg()[0],
                    machine=platform.machine() + " " + platform.processor(),
                    python=platform.python_version(), ref=args.compare,
                    dp_accounting=metadata.version("dp-accounting"), delta=DELTA,
                    quick=args.quick, **library_fingerprint())
        text = _compare_markdown(rows, meta)
        if args.quick:
            print(text)
            return
        (RESULTS / "calibration_compare.json").write_text(
            json.dumps(dict(meta=meta, rows=rows), indent=1) + "\n", encoding="utf-8")
        (RESULTS / "calibration_compare.md").write_text(text, encoding="utf-8")
        return
    rows = run(args.quick, args.skip_old)
    meta = dict(date=date, load_start=load_start, load_end=os.getloadavg()[0],
                machine=platform.machine() + " " + platform.processor(),
                python=platform.python_version(),
                dp_accounting=metadata.version("dp-accounting"), delta=DELTA,
                quick=args.quick, **library_fingerprint())
    if args.quick:
        print(_markdown(rows, meta))
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "calibration.json").write_text(
        json.dumps(dict(meta=meta, rows=rows), indent=1) + "\n", encoding="utf-8")
    (RESULTS / "calibration.md").write_text(_markdown(rows, meta), encoding="utf-8")


if __name__ == "__main__":
    main()

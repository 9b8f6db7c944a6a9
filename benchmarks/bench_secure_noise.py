#!/usr/bin/env python
"""Cost of ``noise="secure"`` (OS CSPRNG coins + hardened Gaussian sampler) against the default.

Two parts, every figure a ratio secure / default measured in the same run:

* the samplers alone: standard normals per second from NumPy's PCG64
  ``Generator.standard_normal`` and from
  :class:`sklearn_fdp._secure.SecureGenerator` (each normal the sum of four
  Box–Muller normals from ``os.urandom`` uniforms, halved), for one step of
  a 600 × 100 model (60,100 normals) and for 2**20 normals; and one Poisson
  batch (``PoissonSampler.sample``) of 50,000 and 200,000 records at an
  expected batch of 256 (binomial + choice vs one CSPRNG coin per record);
* whole fits, ``noise="default"`` vs ``noise="secure"``, same settings:
  ``DPSGDClassifier`` on Adult (adult.data after
  ``make_adult_preprocessor``, batch "auto", 5 epochs); ``DPSGDClassifier``
  on ``make_purchase_like`` 50,000 × 600, 100 classes (problem (b) of
  ``bench_epoch.py`` at a quarter of its rows), 1 epoch, batch 256, momentum
  0.9; ``DPSGDClassifier`` on the CSR click-log problem (c) of
  ``bench_epoch.py`` at 50,000 × 1,000,000 (40 non-zeros per row), 1 epoch,
  batch 256, momentum 0 (the lazy-noise path); ``MLPFeatureDP`` (600 → 100
  ReLU → 100, ``method="dp"``) on ``make_purchase_like`` 10,000 × 600,
  1 epoch, batch 256. All with a given σ = 1, C = 1 and the RDP accountant
  (the accounting, identical in both modes, would only dilute the ratio).

Timing: one warm-up of each variant, then ``--repeats`` (default 7) rounds;
each round runs both variants, in alternating order, and the reported ratio
is the median of the per-round ratios (paired, so that a change in the
machine's load hits both alike). Everything is single-threaded (BLAS,
numba, torch); the noise may still be drawn one step ahead on a second
thread, as in a normal fit. The OS randomness a secure fit reads is counted
in one extra fit.

Writes ``benchmarks/results/secure_noise.json`` and ``secure_noise.md``
(``--quick``: smaller problems, ``secure_noise_quick.*``).

Results (in ``benchmarks/results/``): ``secure_noise.json``, ``secure_noise.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Cost of `noise="secure"`"
* docs/user_guide.md § "11. Secure noise"
"""

from _common import one_thread  # benchmarks/ is on sys.path when run as a script

one_thread()  # before numpy is imported

import os  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import library_fingerprint  # noqa: E402
from bench_epoch import adult, click_log, purchase  # noqa: E402  (same problems)

import sklearn_fdp  # noqa: E402
from sklearn_fdp import DPSGDClassifier  # noqa: E402
from sklearn_fdp import _secure  # noqa: E402
from sklearn_fdp._engine import PoissonSampler  # noqa: E402
from sklearn_fdp._secure import SecureGenerator  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BATCH = 256
FIXED = dict(epsilon=None, noise_multiplier=1.0, max_grad_norm=1.0, accountant="rdp")


def paired(fns, repeats):
    """Time ``fns["default"]`` and ``fns["secure"]`` in alternating order; per-round seconds."""
    for fn in fns.values():
        fn()  # warm-up
    rounds = []
    for r in range(repeats):
        order = ("default", "secure") if r % 2 == 0 else ("secure", "default")
        times = {}
        for name in order:
            t0 = time.perf_counter()
            fns[name]()
            times[name] = time.perf_counter() - t0
        rounds.append(times)
    ratios = [t["secure"] / t["default"] for t in rounds]
    return dict(default=float(np.median([t["default"] for t in rounds])),
                secure=float(np.median([t["secure"] for t in rounds])),
                ratio=float(np.median(ratios)), ratio_min=float(min(ratios)),
                ratio_max=float(max(ratios)), rounds=rounds)


def _loop(fn, inner):
    def run():
        for _ in range(inner):
            fn()
    return run


def bench_samplers(repeats, quick):
    rows = []
    rng = np.random.default_rng(0)
    sec = SecureGenerator()
    for size in (60_100, 1 << 20):
        inner = max(1, (1 << 21) // size // (4 if quick else 1))
        res = paired(dict(default=_loop(lambda: rng.standard_normal(size), inner),
                          secure=_loop(lambda: sec.standard_normal(size), inner)), repeats)
        res.update(what=f"{size:,} standard normals", unit="normals/s",
                   default_rate=size * inner / res["default"],
                   secure_rate=size * inner / res["secure"])
        rows.append(res)
        print(f"[sampler] {res['what']}: ×{res['ratio']:.1f}", flush=True)
    for n in (50_000, 200_000):
        inner = 200 if not quick else 50
        d = PoissonSampler(n, BATCH / n, np.random.default_rng(0))
        s = PoissonSampler(n, BATCH / n, SecureGenerator())
        res = paired(dict(default=_loop(d.sample, inner), secure=_loop(s.sample, inner)),
                     repeats)
        res.update(what=f"Poisson batch of {n:,} records (q = 256 / n)", unit="batches/s",
                   default_rate=inner / res["default"], secure_rate=inner / res["secure"])
        rows.append(res)
        print(f"[sampler] {res['what']}: ×{res['ratio']:.1f}", flush=True)
    return rows


def _mlp_problem(n):
    from sklearn_fdp.datasets import make_purchase_like

    X, y = make_purchase_like(n_samples=n, n_features=600, n_classes=100, random_state=0)
    return np.ascontiguousarray(X, dtype=np.float32), np.asarray(y)


def _count_os_bytes(fit):
    """OS randomness (bytes) one secure fit reads."""
    real, total = _secure._urandom, [0]

    def counting(k):
        total[0] += k
        return real(k)

    _secure._urandom = counting
    try:
        fit()
    finally:
        _secure._urandom = real
    return total[0]


def bench_fits(repeats, quick):
    n_dense = 10_000 if quick else 50_000
    n_csr = 10_000 if quick else 50_000
    n_mlp = 2_000 if quick else 10_000
    problems = []

    X, y = adult()
    problems.append(("DPSGDClassifier, Adult 32,561 × 105 (batch auto, 5 epochs)", X, y,
                     lambda noise: DPSGDClassifier(epochs=5, noise=noise, random_state=0,
                                                   **FIXED)))
    X, y = purchase(n_dense)
    problems.append((f"DPSGDClassifier, purchase-like {n_dense:,} × 600, 100 classes "
                     "(1 epoch, batch 256, momentum 0.9)", X, y,
                     lambda noise: DPSGDClassifier(epochs=1, batch_size=BATCH, learning_rate=0.1,
                                                   noise=noise, random_state=0, **FIXED)))
    X, y = click_log(n_csr)
    problems.append((f"DPSGDClassifier, CSR {n_csr:,} × 1,000,000, 40 nnz (1 epoch, batch 256, "
                     "momentum 0: lazy noise)", X, y,
                     lambda noise: DPSGDClassifier(epochs=1, batch_size=BATCH, momentum=0.0,
                                                   learning_rate=0.1, noise=noise,
                                                   random_state=0, **FIXED)))
    try:
        import torch

        torch.set_num_threads(1)
        from sklearn_fdp import MLPFeatureDP

        X, y = _mlp_problem(n_mlp)
        problems.append((f"MLPFeatureDP, purchase-like {n_mlp:,} × 600 → 100 ReLU → 100 "
                         "(method='dp', 1 epoch, batch 256)", X, y,
                         lambda noise: MLPFeatureDP(hidden_layer_sizes=(100,), method="dp",
                                                    epochs=1, batch_size=BATCH,
                                                    learning_rate=0.1, device="cpu",
                                                    noise=noise, random_state=0, **FIXED)))
    except ImportError:
        print("[fits] torch missing: MLPFeatureDP skipped", flush=True)

    rows = []
    for name, X, y, make in problems:
        print(f"[fit] {name}", flush=True)
        fns = {noise: (lambda noise=noise: make(noise).fit(X, y)) for noise in ("default",
                                                                               "secure")}
        res = paired(fns, repeats)
        est = make("secure")
        res["os_bytes_per_fit"] = _count_os_bytes(lambda: est.fit(X, y))
        res.update(what=name, steps=int(est.steps_), n=int(X.shape[0]))
        rows.append(res)
        print(f"  default {res['default']:.3g} s, secure {res['secure']:.3g} s, "
              f"×{res['ratio']:.2f}", flush=True)
    return rows


def markdown(meta, samplers, fits):
    out = ["# Cost of `noise=\"secure\"`", "",
           f"Generated by `benchmarks/bench_secure_noise.py` on {meta['date']} ({meta['machine']}; "
           f"BLAS, numba and torch single-threaded; load average {meta['load']}). Each figure is "
           f"the median of {meta['repeats']} rounds after a warm-up; a round runs the default "
           "and the secure variant back to back (alternating which goes first), and the ratio "
           "is the median of the per-round ratios secure / default (range in brackets).", "",
           "## Samplers", "",
           "| what | default | secure | secure / default (time) |", "|---|---|---|---|"]
    for r in samplers:
        out.append(f"| {r['what']} | {r['default_rate']:.3g} {r['unit']} | "
                   f"{r['secure_rate']:.3g} {r['unit']} | {r['ratio']:.1f}× "
                   f"[{r['ratio_min']:.1f}–{r['ratio_max']:.1f}] |")
    out += ["", "## Whole fits", "",
            "| fit | steps | default (s) | secure (s) | secure / default | OS randomness per "
            "secure fit |", "|---|---|---|---|---|---|"]
    for r in fits:
        out.append(f"| {r['what']} | {r['steps']:,} | {r['default']:.3g} | {r['secure']:.3g} | "
                   f"{r['ratio']:.2f}× [{r['ratio_min']:.2f}–{r['ratio_max']:.2f}] | "
                   f"{r['os_bytes_per_fit'] / 2**20:.1f} MiB |")
    out += ["", "The secure sampler reads 32 bytes of OS randomness per normal (four 53-bit "
            "uniforms, in 64-bit words) and one byte per record per step for the Poisson "
            "coins (plus a byte for 1 record in 256, and so on); the kernel CSPRNG's "
            "throughput bounds it. The default PCG64 path is unchanged (same numbers as "
            "before this option existed).", ""]
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small problems, for a smoke test")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--parts", default="samplers,fits")
    args = p.parse_args(argv)
    parts = set(args.parts.split(","))
    warnings.simplefilter("ignore")  # δ vs n etc.: irrelevant to timing
    load_before = os.getloadavg()[0]
    samplers = bench_samplers(args.repeats, args.quick) if "samplers" in parts else []
    fits = bench_fits(args.repeats, args.quick) if "fits" in parts else []
    meta = dict(load=" → ".join(f"{v:.1f}" for v in (load_before, os.getloadavg()[0])),
                date=time.strftime("%Y-%m-%d"),
                machine=f"{platform.machine()}, {os.cpu_count()} cores, "
                f"Python {platform.python_version()}, numpy {np.__version__}",
                repeats=args.repeats, quick=args.quick, sklearn_fdp=sklearn_fdp.__version__,
                **library_fingerprint())
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "secure_noise_quick" if args.quick else "secure_noise"
    (RESULTS / f"{stem}.json").write_text(json.dumps(dict(meta=meta, samplers=samplers,
                                                          fits=fits), indent=1))
    md = markdown(meta, samplers, fits)
    (RESULTS / f"{stem}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

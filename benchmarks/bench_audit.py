"""Empirical privacy audits of the private estimators, and of deliberately broken ones.

For DPSGDClassifier and FeatureDPLogisticRegression at claimed ε ∈ {1, 4}
(δ = 1e-5), and for DPSGDFClassifier at its defaults, this runs

* the many-run canary audit (:func:`sklearn_fdp.audit.canary_audit`): 1,000
  training runs for the correct estimators, 2,000 for the broken variants
  (a quarter of them choose the threshold, the rest are counted), default
  "auto" canary (a record of norm 1000 in a column of its own);
* the one-run audit (:func:`sklearn_fdp.audit.canary_audit_one_run`,
  Steinke, Nasr & Jagielski 2023): 2,000 canaries, 500 "in" and 500 "out"
  guesses fixed in advance.

Broken variants (each still reports the claimed ε):

* ``noise off``: the engine's Gaussian noise replaced by zeros;
* ``clipping off``: the private gradient oracle does not clip, while ε is
  accounted with the claimed ``max_grad_norm``;
* ``shared coins`` (FeatureDPLogisticRegression only): the public batch is
  the private Poisson batch (the FDP paper's Prop. 3 warns this voids
  amplification by subsampling).

Data: a fixed synthetic binary problem, n = 1,000 rows of 10 features scaled
to unit norm; for feature DP, columns 0-7 and the label are public and
columns 8-9 (and the canary columns) private. Every estimator uses
``batch_size=100``, ``epochs=5`` (50 noisy steps), ``accountant="auto"``;
FeatureDPLogisticRegression uses ``public_epochs=0`` (its public
pretraining is identical in both worlds and only costs time). Each
estimator's audits get their own seed (0, 1, 2 in the order above): with a
shared seed, DP-SGD and FDP Algorithm 1 with a public label draw the same
noise and batches for the canary's coordinate, where their updates coincide,
and give identical scores.

Writes ``benchmarks/results/audit.json`` and ``benchmarks/results/audit.md``
(``--quick``: a smoke run with 100 runs and 200 canaries, written to
``audit_quick.*``). Run with ``nice -n 10``; about 10 minutes on a 2-core
machine.

Results (in ``benchmarks/results/``): ``audit.json``, ``audit.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Empirical privacy audits"
* docs/audits.md § "Results"
"""

import argparse
import contextlib
import json
import pathlib
import platform
import sys
import time
from unittest import mock

import numpy as np

from _common import library_fingerprint  # benchmarks/ is on sys.path when run as a script
import sklearn_fdp
import sklearn_fdp._engine._loop as engine_loop
from sklearn_fdp import DPSGDClassifier, DPSGDFClassifier, FeatureDPLogisticRegression
from sklearn_fdp._mechanisms import fdp
from sklearn_fdp.linear import _feature_dp_logistic as fdp_module
from sklearn_fdp.audit import canary_audit, canary_audit_one_run

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository root
from tests._broken import UnclippedDPSGD, UnclippedFDP, ZeroNoise  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
DELTA = 1e-5
N, D = 1000, 10
PUBLIC = list(range(8))
COMMON = dict(delta=DELTA, batch_size=100, epochs=5.0, accountant="auto")
CONFIDENCE = 0.95


def make_data():
    rng = np.random.default_rng(2026)
    X = rng.normal(size=(N, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.normal(size=D)
    y = (X @ w + 0.2 * rng.normal(size=N) > 0).astype(int)
    return X, y


# -- broken variants (noise off and clipping off come from tests/_broken.py) ----


def _shared_coin_oracles(*args, **kwargs):
    """Algorithm 1's oracles with the public batch taken to be the private Poisson batch."""
    private, public = fdp.alg1_oracles(*args, **kwargs)
    state = {"idx": np.arange(1)}

    class SharedCoinsOracle(type(private)):
        def __call__(self, idx, theta):
            state["idx"] = idx if len(idx) else np.arange(1)
            return super().__call__(idx, theta)

    class ReuseSampler:
        def sample(self):
            return state["idx"]

    private.__class__ = SharedCoinsOracle
    public.sampler = ReuseSampler()
    return private, public


class SharedCoinsFDP(FeatureDPLogisticRegression):
    """FDP Algorithm 1 whose public batch is the private Poisson batch (Prop. 3)."""

    def fit(self, X, y, **kwargs):
        with mock.patch.object(fdp_module, "alg1_oracles", _shared_coin_oracles):
            return super().fit(X, y, **kwargs)


def estimators(epsilon):
    """(name, relation, {variant: (estimator, patch)}) for one claimed ε."""
    fdp = dict(public_features=PUBLIC, label_public=True, public_epochs=0,
               epsilon=epsilon, **COMMON)
    dpsgd = dict(epsilon=epsilon, **COMMON)
    def noise_off():
        return mock.patch.object(engine_loop, "NoiseStream", ZeroNoise)

    none = contextlib.nullcontext
    return [
        ("DPSGDClassifier", "membership", {
            "correct": (DPSGDClassifier(**dpsgd), none),
            "noise off": (DPSGDClassifier(**dpsgd), noise_off),
            "clipping off": (UnclippedDPSGD(**dpsgd), none),
        }),
        ("FeatureDPLogisticRegression", "feature", {
            "correct": (FeatureDPLogisticRegression(**fdp), none),
            "noise off": (FeatureDPLogisticRegression(**fdp), noise_off),
            "clipping off": (UnclippedFDP(**fdp), none),
            "shared coins": (SharedCoinsFDP(**fdp), none),
        }),
        ("DPSGDFClassifier", "membership", {
            "correct": (DPSGDFClassifier(**dpsgd), none),
        }),
    ]


def run(quick):
    X, y = make_data()
    n_ok, n_broken, n_canaries, k = (100, 100, 200, 50) if quick else (1000, 2000, 2000, 500)
    rows, one_rows = [], []
    for epsilon in (1.0, 4.0):
        for seed, (name, relation, variants) in enumerate(estimators(epsilon)):
            for variant, (est, patch) in variants.items():
                if variant == "shared coins" and epsilon != 1.0:
                    continue
                n_runs = n_ok if variant in ("correct", "shared coins") else n_broken
                with patch():
                    t0 = time.perf_counter()
                    res = canary_audit(est, X, y, n_runs=n_runs, relation=relation,
                                       confidence=CONFIDENCE, random_state=seed)
                    t1 = time.perf_counter()
                    one = canary_audit_one_run(est, X, y, n_canaries=n_canaries, k_pos=k,
                                               k_neg=k, relation=relation,
                                               confidence=CONFIDENCE, random_state=seed)
                    t2 = time.perf_counter()
                rows.append(dict(
                    estimator=name, relation=relation, variant=variant, epsilon=epsilon,
                    claimed_epsilon=res.claimed_epsilon, delta=res.delta,
                    epsilon_lower_bound=res.epsilon_lower_bound, confidence=res.confidence,
                    n_runs=res.n_runs, n_calibration=res.n_calibration, n_in=res.n_in,
                    n_out=res.n_out, tpr=res.tpr, fpr=res.fpr,
                    tpr_interval=list(res.tpr_interval), fpr_interval=list(res.fpr_interval),
                    refutes_claim=bool(res.refutes_claim), seconds=round(t1 - t0, 1),
                ))
                one_rows.append(dict(
                    estimator=name, relation=relation, variant=variant, epsilon=epsilon,
                    claimed_epsilon=one.claimed_epsilon, delta=one.delta,
                    epsilon_lower_bound=one.epsilon_lower_bound, confidence=one.confidence,
                    n_canaries=one.n_canaries, n_included=one.n_included, k_pos=one.k_pos,
                    k_neg=one.k_neg, n_guesses=one.n_guesses, n_correct=one.n_correct,
                    refutes_claim=bool(one.refutes_claim), seconds=round(t2 - t1, 1),
                ))
                print(f"ε={epsilon:g} {name} [{variant}]: many-run {res.summary()} "
                      f"({t1 - t0:.0f} s) | one-run {one.summary()} ({t2 - t1:.0f} s)",
                      flush=True)
    return rows, one_rows


def _ci(interval):
    return f"[{interval[0]:.3f}, {interval[1]:.3f}]"


def write_markdown(path, rows, one_rows, meta):
    lines = [
        "# Empirical privacy audits",
        "",
        "Written by `benchmarks/bench_audit.py`. Lower bounds on ε at δ = 1e-5 that hold "
        f"with probability {CONFIDENCE:g}; a bound above the claimed ε refutes the claim. "
        "Synthetic data, n = 1,000, 10 features, 50 noisy steps (batch 100, 5 epochs); "
        "membership audits for DP-SGD and DPSGD-F, feature-DP audits (the canary's "
        "private column present vs 0, public part and label kept) for "
        "FeatureDPLogisticRegression.",
        "",
        "## Many runs (`canary_audit`)",
        "",
        "| estimator | variant | claimed ε | ε lower bound | runs (threshold) | TPR [95 % CI] "
        "| FPR [95 % CI] | refuted | time (s) |",
        "|---|---|---:|---:|---:|---|---|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['estimator']} | {r['variant']} | {r['claimed_epsilon']:.3f} | "
            f"{r['epsilon_lower_bound']:.3f} | {r['n_runs']} ({r['n_calibration']}) | "
            f"{r['tpr']:.3f} {_ci(r['tpr_interval'])} | {r['fpr']:.3f} {_ci(r['fpr_interval'])} | "
            f"{'yes' if r['refutes_claim'] else 'no'} | {r['seconds']:.0f} |"
        )
    lines += [
        "",
        "## One run (`canary_audit_one_run`, Steinke, Nasr & Jagielski 2023)",
        "",
        "| estimator | variant | claimed ε | ε lower bound | canaries (included) "
        "| correct / guesses | refuted | time (s) |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for r in one_rows:
        lines.append(
            f"| {r['estimator']} | {r['variant']} | {r['claimed_epsilon']:.3f} | "
            f"{r['epsilon_lower_bound']:.3f} | {r['n_canaries']} ({r['n_included']}) | "
            f"{r['n_correct']} / {r['n_guesses']} | {'yes' if r['refutes_claim'] else 'no'} | "
            f"{r['seconds']:.0f} |"
        )
    lines += [
        "",
        f"sklearn_fdp {meta['sklearn_fdp_version']}, git {meta['git_head'][:12]}, sources "
        f"sha256 {meta['sklearn_fdp_sources_sha256'][:12]}; {meta['platform']}; total "
        f"{meta['total_seconds']:.0f} s.",
        "",
    ]
    path.write_text("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run (audit_quick.*)")
    args = parser.parse_args()
    start = time.perf_counter()
    rows, one_rows = run(args.quick)
    meta = dict(
        sklearn_fdp_version=sklearn_fdp.__version__,
        python=platform.python_version(),
        platform=platform.platform(),
        n_samples=N, n_features=D, public_features=PUBLIC, settings=COMMON,
        confidence=CONFIDENCE, quick=args.quick,
        total_seconds=time.perf_counter() - start,
        **library_fingerprint(),
    )
    stem = "audit_quick" if args.quick else "audit"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(
        json.dumps(dict(meta=meta, many_runs=rows, one_run=one_rows), indent=2) + "\n")
    write_markdown(RESULTS / f"{stem}.md", rows, one_rows, meta)
    print(f"wrote {RESULTS / stem}.json and .md in {meta['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()

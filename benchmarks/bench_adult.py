"""Adult benchmark: DPSGDClassifier vs non-private, diffprivlib and Opacus.

Protocol (all methods):

* features: :func:`sklearn_fdp.datasets.make_adult_preprocessor` — fixed
  category lists, fixed numeric bounds, log1p for capital gain/loss, rows
  scaled to unit L2 norm. It learns nothing from the data.
* train on adult.data, test on adult.test; δ = 1e-5; 5 seeds per ε.
* hyperparameters are chosen on a fixed 80/20 split of adult.data
  (``fit_idx``/``val_idx``, seed 0), never on adult.test. For
  DPSGDClassifier two lines are reported: its *defaults* (fixed rules, no
  search at all) and a *validation-tuned* grid shaped like the Opacus one.
  Like every published DP benchmark here, the validation search itself is not
  accounted for (it is on adult.data); ``PrivateRandomizedSearchCV`` will
  account for it.
* diffprivlib and Opacus run in their own virtualenvs (diffprivlib needs
  scikit-learn 1.7; see ``benchmarks/baselines/setup_envs.sh``), reading the
  same arrays from an ``.npz`` file. They are skipped, and said to be, when
  their environment is missing.

Writes ``benchmarks/results/adult.json``, ``benchmarks/results/adult.md`` and
``docs/figures/bench_adult.png``.

Results (in ``benchmarks/results/``): ``adult.json``, ``adult.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "UCI Adult, linear models"
"""

import argparse
import hashlib
import itertools
import json
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np
from sklearn.linear_model import LogisticRegression

import sklearn_fdp
from sklearn_fdp import DPSGDClassifier
from sklearn_fdp.datasets import load_adult, make_adult_preprocessor

from _common import accuracy_rows, save_figure, summarise_accuracy  # benchmarks/ is on sys.path when run as a script

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
# name -> (venv, script, extra arguments, output stem)
BASELINES = {
    "diffprivlib LogisticRegression (C tuned on val)": (
        ROOT / ".venv-diffprivlib", "diffprivlib_logreg.py", [], "diffprivlib_logreg"),
    "diffprivlib LogisticRegression (default C=1)": (
        ROOT / ".venv-diffprivlib", "diffprivlib_logreg.py", ["--c-grid", "1.0"],
        "diffprivlib_default_C"),
    "Opacus DP-SGD (linear)": (ROOT / ".venv-opacus", "opacus_linear.py", [], "opacus_linear"),
}
# Validation grid for the tuned DPSGDClassifier line (same shape as Opacus's).
TUNED_GRID = {
    "batch_size": [256, 1024, 4096],
    "epochs": [5, 20],
    "learning_rate": ["auto", 0.5, 2.0],
}


def prepare(seed=0):
    X_train, y_train, X_test, y_test = load_adult(return_X_y=True)
    pre = make_adult_preprocessor(scale_rows="l2").fit(X_train)
    Xtr = np.ascontiguousarray(pre.transform(X_train), dtype=np.float64)
    Xte = np.ascontiguousarray(pre.transform(X_test), dtype=np.float64)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y_train))
    cut = int(0.8 * len(y_train))
    return dict(X_train=Xtr, y_train=np.asarray(y_train), X_test=Xte, y_test=np.asarray(y_test),
                fit_idx=np.sort(perm[:cut]), val_idx=np.sort(perm[cut:]))


def _val_score(make, data, seeds=(0, 1)):
    fi, vi = data["fit_idx"], data["val_idx"]
    X, y = data["X_train"], data["y_train"]
    return float(np.mean([make(s).fit(X[fi], y[fi]).score(X[vi], y[vi]) for s in seeds]))


def run_nonprivate(data):
    grid = [0.1, 1.0, 10.0]
    scores = {c: _val_score(lambda s, c=c: LogisticRegression(C=c, max_iter=2000), data, (0,))
              for c in grid}
    best = max(scores, key=scores.get)
    start = time.perf_counter()
    model = LogisticRegression(C=best, max_iter=2000).fit(data["X_train"], data["y_train"])
    return [dict(epsilon=None, seed=0, test_accuracy=model.score(data["X_test"], data["y_test"]),
                 fit_seconds=time.perf_counter() - start, hyperparameters=dict(C=best))]


def run_dpsgd(data, epsilons, delta, seeds, tuned):
    results, selection = [], {}
    for eps in epsilons:
        params = {}
        if tuned:
            scores = {}
            for combo in itertools.product(*TUNED_GRID.values()):
                kw = dict(zip(TUNED_GRID, combo))
                scores[combo] = _val_score(
                    lambda s, kw=kw: DPSGDClassifier(epsilon=eps, delta=delta, random_state=s,
                                                     **kw), data)
            best = max(scores, key=scores.get)
            params = dict(zip(TUNED_GRID, best))
            selection[str(eps)] = dict(chosen=params, val_accuracy=scores[best],
                                       grid=TUNED_GRID)
        for seed in seeds:
            clf = DPSGDClassifier(epsilon=eps, delta=delta, random_state=seed, **params)
            start = time.perf_counter()
            clf.fit(data["X_train"], data["y_train"])
            results.append(dict(
                epsilon=eps, seed=seed,
                test_accuracy=clf.score(data["X_test"], data["y_test"]),
                fit_seconds=time.perf_counter() - start,
                epsilon_spent=clf.epsilon_, noise_multiplier=clf.noise_multiplier_,
                steps=clf.steps_, batch_size=clf.batch_size_, learning_rate=clf.learning_rate_,
                hyperparameters=params or "defaults",
            ))
        print(f"  DPSGDClassifier{' (tuned)' if tuned else ''} ε={eps}: "
              f"{np.mean([r['test_accuracy'] for r in results if r['epsilon'] == eps]):.4f}",
              flush=True)
    return results, selection


def data_hash(data):
    """Content hash of the benchmark arrays (not of the compressed file)."""
    h = hashlib.sha256()
    for key in sorted(data):
        h.update(key.encode())
        h.update(np.ascontiguousarray(data[key]).tobytes())
    return h.hexdigest()


def run_baseline(name, data_path, epsilons, delta, seeds, reuse_hash=None):
    """Run a competitor in its own venv; with ``reuse_hash``, reuse its last output.

    Reuse is allowed only when the previous run used arrays with the same
    content hash and the same ε grid, δ and seeds: the competitors are seeded
    and do not depend on sklearn_fdp, so a rerun would reproduce them.
    """
    venv, script, extra, stem = BASELINES[name]
    out = RESULTS / f"adult_{stem}.json"
    if reuse_hash is not None and out.exists():
        previous = json.loads(out.read_text())
        done = {(r["epsilon"], r["seed"]) for r in previous["results"]}
        wanted = {(e, s) for e in epsilons for s in seeds}
        if previous.get("data_sha256") == reuse_hash and wanted <= done and \
                previous.get("delta") == delta:
            print(f"  {name}: reusing {out.name} (same arrays, grid and seeds)")
            return previous
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"  {name}: skipped ({venv.name} missing; run benchmarks/baselines/setup_envs.sh)")
        return None
    cmd = [str(python), str(HERE / "baselines" / script), "--data", str(data_path),
           "--epsilons", ",".join(map(str, epsilons)), "--delta", str(delta),
           "--seeds", ",".join(map(str, seeds)), "--out", str(out), *extra]
    print(f"  {name}: running {' '.join(cmd[1:2])} ...", flush=True)
    subprocess.run(cmd, check=True)
    result = json.loads(out.read_text())
    result["data_sha256"] = data_hash(dict(np.load(data_path)))
    out.write_text(json.dumps(result, indent=1))
    return result


def markdown(table, epsilons, delta, meta):
    cols = [str(e) for e in epsilons]
    out = [f"# Adult: test accuracy (mean ± std over seeds), δ = {delta:g}", "",
           f"Generated by `benchmarks/bench_adult.py` on {meta['date']} "
           f"({meta['machine']}). Features: `make_adult_preprocessor(scale_rows='l2')` "
           f"({meta['n_features']} columns, rows of unit norm). Hyperparameters chosen on an "
           "80/20 validation split of adult.data, never on adult.test.", "",
           "| model | " + " | ".join(f"ε = {c}" for c in cols) + " | no privacy |",
           "|---|" + "---|" * (len(cols) + 1)]
    out += accuracy_rows(table, cols, "inf")
    return "\n".join(out) + "\n"


def plot(lines, path):
    """ε vs test accuracy (mean ± std over seeds) from the per-run rows of ``lines``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sklearn_fdp.plotting import plot_privacy_utility

    runs = [dict(method=name, epsilon=r["epsilon"], seed=r["seed"], accuracy=r["test_accuracy"])
            for name, results in lines.items() for r in results if r["epsilon"] is not None]
    baselines = {name: [r["test_accuracy"] for r in results]
                 for name, results in lines.items()
                 if results and all(r["epsilon"] is None for r in results)}
    fig, ax = plt.subplots(figsize=(6.5, 4))
    plot_privacy_utility(runs, ax=ax, baselines=baselines, error="std",
                         styles={name: {"color": "k"} for name in baselines},
                         xlabel="ε (δ = 1e-5)", ylabel="test accuracy (adult.test)",
                         title="UCI Adult, linear models",
                         legend={"fontsize": 7, "loc": "lower right"})
    save_figure(fig, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", default="0.03,0.1,0.3,1,4")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--skip-baselines", action="store_true")
    parser.add_argument("--reuse-baselines", action="store_true",
                        help="reuse competitor results computed on identical arrays")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw docs/figures/bench_adult.png from results/adult.json")
    args = parser.parse_args(argv)
    figure = ROOT / "docs" / "figures" / "bench_adult.png"
    if args.plot_only:
        plot(json.loads((RESULTS / "adult.json").read_text())["results"], figure)
        return 0
    epsilons = [float(e) for e in args.epsilons.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]

    RESULTS.mkdir(parents=True, exist_ok=True)
    data = prepare()
    data_path = RESULTS / "adult_features.npz"
    np.savez_compressed(data_path, **data)

    lines = {}
    print("non-private LogisticRegression", flush=True)
    lines["LogisticRegression (non-private)"] = run_nonprivate(data)
    print("DPSGDClassifier", flush=True)
    lines["sklearn_fdp DPSGDClassifier (defaults)"], _ = run_dpsgd(
        data, epsilons, args.delta, seeds, tuned=False)
    lines["sklearn_fdp DPSGDClassifier (val-tuned)"], tuned_sel = run_dpsgd(
        data, epsilons, args.delta, seeds, tuned=True)
    baseline_meta = {}
    if not args.skip_baselines:
        for name in BASELINES:
            out = run_baseline(name, data_path, epsilons, args.delta, seeds,
                               data_hash(data) if args.reuse_baselines else None)
            if out is not None:
                lines[f"{name} {out.get('version', '')}".strip()] = out["results"]
                baseline_meta[name] = {k: v for k, v in out.items() if k != "results"}

    meta = dict(date=time.strftime("%Y-%m-%d"), machine=f"{platform.machine()}, "
                f"{platform.python_version()}", sklearn_fdp=sklearn_fdp.__version__,
                n_features=int(data["X_train"].shape[1]), delta=args.delta, seeds=seeds,
                data_sha256=data_hash(data))
    table = summarise_accuracy(lines, epsilons, "inf")
    (RESULTS / "adult.json").write_text(json.dumps(
        dict(meta=meta, table=table, results=lines, tuned_selection=tuned_sel,
             baselines=baseline_meta), indent=1, default=str))
    md = markdown(table, epsilons, args.delta, meta)
    (RESULTS / "adult.md").write_text(md)
    plot(lines, figure)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

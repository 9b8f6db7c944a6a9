"""Purchase-like benchmark: FDP Algorithm 1 vs DP-SGD on a linear softmax model.

Data: :func:`sklearn_fdp.datasets.make_purchase_like` with its fixed,
documented recipe (20,000 customers, 600 binary products, 100 classes from
k-means), seed 0; rows scaled to unit L2 norm (per row: free). A fixed 80/20
train/test split. Public: 100 randomly chosen products (seed 0) and the label
— the FDP paper's Purchase100 setting (§6.2) on a linear model; the other 500
products are private.

Every private model uses its *default* hyperparameters (fixed rules; nothing
is tuned, so nothing is tuned on the test set). δ = 1e-5, 3 seeds.

Writes ``benchmarks/results/fdp_purchase.json`` and ``.md``, and the figure
``docs/figures/bench_fdp_purchase.png`` (``--plot-only`` redraws it from the JSON).

Results (in ``benchmarks/results/``): ``fdp_purchase.json``, ``fdp_purchase.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Purchase-like, linear softmax"
"""

import argparse
import json
import pathlib
import platform
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import Normalizer

from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression
from sklearn_fdp.datasets import make_purchase_like

from _common import epsilon_ticks, save_figure  # benchmarks/ is on sys.path when run as a script

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
FIGURE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "figures" / \
    "bench_fdp_purchase.png"
EPSILONS = (1.0, 2.0, 4.0, 8.0)
SEEDS = (0, 1, 2)
DELTA = 1e-5
N_PUBLIC = 100


def plot(saved, path):
    """ε vs test accuracy (mean ± std over seeds) from the JSON's per-run rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sklearn_fdp.plotting import plot_privacy_utility

    runs = [dict(method=r["model"], epsilon=r["epsilon"], seed=r["seed"],
                 accuracy=r["test_accuracy"]) for r in saved["runs"]]
    baselines = {name: row["inf"] for name, row in saved["lines"].items() if "inf" in row}
    fig, ax = plt.subplots(figsize=(6.5, 4))
    plot_privacy_utility(runs, ax=ax, baselines=baselines, error="std",
                         xlabel="ε (δ = 1e-5)", ylabel="test accuracy",
                         title="Purchase-like (linear softmax), public: 100 products + label",
                         legend={"fontsize": 7, "loc": "lower right"})
    epsilon_ticks(ax, sorted({r["epsilon"] for r in runs}))
    save_figure(fig, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the figure from results/fdp_purchase.json")
    args = parser.parse_args(argv)
    if args.plot_only:
        plot(json.loads((RESULTS / "fdp_purchase.json").read_text()), FIGURE)
        return
    start_all = time.perf_counter()
    X, y = make_purchase_like(random_state=0)
    X = Normalizer().fit_transform(X)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)
    public = np.sort(np.random.default_rng(0).choice(X.shape[1], N_PUBLIC, replace=False))

    lines = {}
    lines["LogisticRegression (non-private)"] = {"inf": LogisticRegression(max_iter=300).fit(
        X_train, y_train).score(X_test, y_test)}
    lines["LogisticRegression (public features only)"] = {"inf": LogisticRegression(
        max_iter=300).fit(X_train[:, public], y_train).score(X_test[:, public], y_test)}
    runs = []
    makers = {
        "DPSGDClassifier": lambda eps, s: DPSGDClassifier(epsilon=eps, delta=DELTA,
                                                          random_state=s),
        "FeatureDPLogisticRegression (alg1)": lambda eps, s: FeatureDPLogisticRegression(
            public_features=public, label_public=True, epsilon=eps, delta=DELTA,
            random_state=s),
        "FeatureDPLogisticRegression (dpsgd)": lambda eps, s: FeatureDPLogisticRegression(
            public_features=public, label_public=True, method="dpsgd", epsilon=eps,
            delta=DELTA, random_state=s),
    }
    for name, make in makers.items():
        row = {}
        for eps in EPSILONS:
            accs = []
            for seed in SEEDS:
                clf = make(eps, seed)
                t0 = time.perf_counter()
                clf.fit(X_train, y_train)
                acc = clf.score(X_test, y_test)
                accs.append(acc)
                runs.append(dict(model=name, epsilon=eps, seed=seed, test_accuracy=acc,
                                 epsilon_spent=clf.epsilon_, fit_seconds=time.perf_counter() - t0,
                                 noise_multiplier=clf.noise_multiplier_))
            row[str(eps)] = (float(np.mean(accs)), float(np.std(accs)))
            print(f"{name} ε={eps}: {np.mean(accs):.4f} ± {np.std(accs):.4f}", flush=True)
        lines[name] = row

    md = ["# Purchase-like (linear softmax), test accuracy (mean ± std over "
          f"{len(SEEDS)} seeds), δ = {DELTA:g}", "",
          f"Generated by `benchmarks/bench_fdp_purchase.py` on {time.strftime('%Y-%m-%d')} "
          f"({platform.machine()}). 20,000 × 600, 100 classes; public: {N_PUBLIC} products "
          "and the label. Default hyperparameters for every private model.", "",
          "| model | " + " | ".join(f"ε = {e:g}" for e in EPSILONS) + " | no privacy |",
          "|---|" + "---|" * (len(EPSILONS) + 1)]
    for name, row in lines.items():
        cells = [f"{row[str(e)][0]:.4f} ± {row[str(e)][1]:.4f}" if str(e) in row else ""
                 for e in EPSILONS]
        cells.append(f"{row['inf']:.4f}" if "inf" in row else "")
        md.append(f"| {name} | " + " | ".join(cells) + " |")
    text = "\n".join(md) + "\n"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fdp_purchase.md").write_text(text)
    saved = dict(lines=lines, runs=runs, public_features=public.tolist(),
                 seconds=time.perf_counter() - start_all)
    (RESULTS / "fdp_purchase.json").write_text(json.dumps(saved, indent=1))
    plot(saved, FIGURE)
    print(text)


if __name__ == "__main__":
    main()

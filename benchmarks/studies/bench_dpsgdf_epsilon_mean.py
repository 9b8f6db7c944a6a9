"""DPSGDFClassifier's epsilon_mean="auto" at small ε (issue 20).

The private mean of DPSGD-F's practical variant costs ε_F = ``epsilon_mean``.
A fixed 0.05 (the default until issue 20) exceeded the whole budget at
ε ≤ 0.05. This benchmark compares ε_F as a fraction of ε — 5 % (the
``"auto"`` rule, capped at 0.05), 15 %, 30 % and 50 % — with every other
parameter the default, on validation data only: a stratified 70/30 split of
adult.data (seed 0; adult.test is never loaded), features of
``make_adult_preprocessor``, ε ∈ {0.03, 0.1, 0.3}, δ = 1e-5, seeds 0-2.

Writes ``benchmarks/results/dpsgdf_epsilon_mean.{json,md}``. Run from the
repository root with ``PYTHONPATH=.``.
"""

import pathlib
import sys
import time
import warnings

import numpy as np
from sklearn.model_selection import train_test_split

from sklearn_fdp import DPSGDFClassifier
from sklearn_fdp.datasets import load_adult, make_adult_preprocessor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the other studies
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/_common.py
from _common import run_meta, save_run, study_title  # noqa: E402

EPSILONS = (0.03, 0.1, 0.3)
FRACTIONS = (0.05, 0.15, 0.3, 0.5)
SEEDS = (0, 1, 2)
DELTA = 1e-5


def main():
    warnings.simplefilter("ignore")
    t0 = time.process_time()
    X, y, _, _ = load_adult(return_X_y=True)  # adult.data only
    Z = np.asarray(make_adult_preprocessor().fit(X).transform(X), dtype=np.float64)
    y = np.asarray(y)
    Xtr, Xva, ytr, yva = train_test_split(Z, y, test_size=0.3, random_state=0, stratify=y)
    runs = []
    for eps in EPSILONS:
        for frac in FRACTIONS:
            for seed in SEEDS:
                clf = DPSGDFClassifier(epsilon=eps, delta=DELTA, epsilon_mean=frac * eps,
                                       random_state=seed).fit(Xtr, ytr)
                runs.append(dict(epsilon=eps, fraction=frac, seed=seed,
                                 val_accuracy=float(clf.score(Xva, yva))))
            # "auto" is the 5 % rule below ε = 1.
            auto = DPSGDFClassifier(epsilon=eps, delta=DELTA, random_state=0)
            assert abs(auto.privacy_plan(*Xtr.shape).details["epsilon_mean"]
                       - 0.05 * eps) < 1e-6 * eps
    saved = dict(run_meta((time.process_time() - t0) / 60), epsilons=list(EPSILONS),
                 fractions=list(FRACTIONS), seeds=list(SEEDS), runs=runs)
    save_run("dpsgdf_epsilon_mean", saved, markdown)


def markdown(saved):
    runs = saved["runs"]
    out = [study_title("DPSGDFClassifier's epsilon_mean at small ε", __file__, saved), "",
           "Validation accuracy (70/30 split of adult.data; no test set), mean ± std over seeds "
           f"{saved['seeds']}, with epsilon_mean = fraction × ε and every other parameter the "
           "default. 5 % is `epsilon_mean=\"auto\"` below ε = 1.", "",
           "| ε | " + " | ".join(f"{100 * f:g} % of ε" for f in saved["fractions"]) + " |",
           "|---|" + "---|" * len(saved["fractions"])]
    for eps in saved["epsilons"]:
        cells = []
        for f in saved["fractions"]:
            a = [r["val_accuracy"] for r in runs if r["epsilon"] == eps and r["fraction"] == f]
            cells.append(f"{np.mean(a):.4f} ± {np.std(a, ddof=1):.4f}")
        out.append(f"| {eps:g} | " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()

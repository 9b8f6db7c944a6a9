"""FeatureDPLogisticRegression (Algorithm 1): the cap of learning_rate="auto" (issue 20).

The defaults benchmark's last failing check was FDP ≥ DP-SGD on Adult at
ε = 1 (test split: −0.13 ± 0.06 points). On validation data the candidates
the issue named — a clip rising with ε (``max_grad_norm`` 0.75 or 1, with
α = 1 or ``alpha="auto"``) and ``method="dpsgd"`` where the noise is small —
tied with the default 0.5 at ε = 1 and lost at ε ≤ 0.3 (5-fold CV of
adult.data; the figures are in the docstring of
``sklearn_fdp.linear._feature_dp_logistic._AUTO_LR_CAP_ALG1``). What did
move validation accuracy: FDP's step size. ``learning_rate="auto"`` is
``min(4 k^0.3, sqrt(k) 0.005 B^1.5 / (α σ C sqrt(d + 1)))``, tuned for
DP-SGD with clip 1; Algorithm 1 clips its private part at 0.5 and starts
from the public-only model, and on Adult it sat at the cap 4 at every ε.

This benchmark compares the cap ``f · 4 k^0.3`` for f ∈ {1 (until issue 20),
2, 4}, the rest of the rule unchanged (a function of public quantities
only: k, B, α, σ, C, d), on validation splits only — the scenarios of
``bench_fdp_alpha.py`` (a stratified 70/30 split of adult.data, adult.test
never loaded; Adult with its protected attributes private and with only
race and native-country private, on all training rows and on 750;
5,000 Purchase-like rows of data seed 1; 16,000 block-normalised
Purchase-like rows of data seed 1 in the defaults benchmark's setting), label
public, every other parameter the default. References per cell:
DPSGDClassifier (defaults) and sklearn's LogisticRegression on the public
columns. Adult: ε ∈ {0.01, 0.03, 0.1, 0.3, 1}, seeds 0-2; Purchase-like:
ε ∈ {0.03, 0.1, 1}, seeds 0-1 (its fits are the slow ones).

Writes ``benchmarks/results/fdp_lr.{json,md}`` (``--markdown``: the Markdown
again from the stored JSON).
"""

import json
import math
import pathlib
import sys
import time
import warnings

import numpy as np

from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the other studies
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/_common.py
from _common import RESULTS, points_interval, run_meta, save_run, study_title  # noqa: E402
from bench_fdp_alpha import public_only_score, rows_of, scenarios  # noqa: E402

DELTA = 1e-5
FACTORS = (1.0, 2.0, 4.0)
ADULT_EPSILONS, ADULT_SEEDS = (0.01, 0.03, 0.1, 0.3, 1.0), (0, 1, 2)
PURCHASE_EPSILONS, PURCHASE_SEEDS = (0.03, 0.1, 1.0), (0, 1)


def auto_rate(clf, factor):
    """The rule of ``learning_rate="auto"`` for ``clf``'s fit, with the cap times ``factor``."""
    k = clf.coef_.shape[0]
    d1 = clf.n_features_in_ + 1
    noise = clf.alpha_ * clf.noise_multiplier_ * clf.max_grad_norm_
    rate = math.sqrt(k) * 0.005 * clf.batch_size_ ** 1.5 / (noise * math.sqrt(d1))
    return float(min(factor * 4.0 * k ** 0.3, rate))


def main():
    warnings.simplefilter("ignore")
    t0 = time.process_time()
    runs = []
    for name, sc in scenarios().items():
        purchase = name.startswith("purchase")
        epsilons = PURCHASE_EPSILONS if purchase else ADULT_EPSILONS
        for seed in PURCHASE_SEEDS if purchase else ADULT_SEEDS:
            X, y = rows_of(sc, seed)
            names, base = public_only_score(sc, X, y)
            Xa = X.to_numpy() if names is not None else X
            Xva = sc["X_val"].to_numpy() if names is not None else sc["X_val"]
            for eps in epsilons:
                dpsgd = float(DPSGDClassifier(epsilon=eps, delta=DELTA, random_state=seed)
                              .fit(Xa, y).score(Xva, sc["y_val"]))
                est = FeatureDPLogisticRegression(**sc["spec"], label_public=True, epsilon=eps,
                                                  delta=DELTA, random_state=seed)
                default = est.fit(X, y)
                cell = dict(scenario=name, seed=seed, epsilon=eps, public_only=base,
                            dpsgd=dpsgd, alpha=float(default.alpha_), factors={})
                # The default fit is one of the candidates (cap × 4 since issue 20).
                assert default.learning_rate_ in [auto_rate(default, f) for f in FACTORS]
                for f in FACTORS:
                    lr = auto_rate(default, f)
                    if lr == default.learning_rate_:
                        acc = float(default.score(sc["X_val"], sc["y_val"]))
                    else:
                        acc = float(FeatureDPLogisticRegression(
                            **sc["spec"], label_public=True, epsilon=eps, delta=DELTA,
                            random_state=seed, learning_rate=lr).fit(X, y).score(
                                sc["X_val"], sc["y_val"]))
                    cell["factors"][str(f)] = dict(learning_rate=lr, val_accuracy=acc)
                    print(f"{name} seed {seed} ε={eps} cap×{f:g}: lr {lr:.3g} {acc:.4f} "
                          f"(DP-SGD {dpsgd:.4f}, public-only {base:.4f})", flush=True)
                runs.append(cell)
    saved = dict(run_meta((time.process_time() - t0) / 60), factors=list(FACTORS), runs=runs)
    save_run("fdp_lr", saved, markdown)


def _interval(d):
    mean, half = points_interval(d)
    return f"{mean:+.2f} ± {half:.2f}"


def markdown(saved):
    runs = saved["runs"]
    keys = [str(f) for f in saved["factors"]]
    cells = list(dict.fromkeys((r["scenario"], r["epsilon"]) for r in runs))
    out = [study_title("FeatureDPLogisticRegression's learning-rate cap", __file__, saved), "",
           "Validation accuracy (mean over seeds) of FeatureDPLogisticRegression "
           "(defaults, label public) with `learning_rate=\"auto\"`'s cap `f · 4 k^0.3`, "
           "and its paired difference from DPSGDClassifier (defaults) in points: mean ± "
           "half-width of the 95 % t-interval over seeds; validation splits only. Mean step "
           "size in brackets. Last columns: DP-SGD and the public-only LogisticRegression.",
           "", "| scenario | ε | " + " | ".join(f"cap × {k}" for k in keys)
           + " | DPSGDClassifier | public-only |", "|---|---|" + "---|" * (len(keys) + 2)]
    for sc, eps in cells:
        rel = [r for r in runs if r["scenario"] == sc and r["epsilon"] == eps]
        row = [sc, f"{eps:g}"]
        for k in keys:
            acc = [r["factors"][k]["val_accuracy"] for r in rel]
            lr = np.mean([r["factors"][k]["learning_rate"] for r in rel])
            d = [r["factors"][k]["val_accuracy"] - r["dpsgd"] for r in rel]
            row.append(f"{np.mean(acc):.4f}: {_interval(d)} (lr {lr:.3g})")
        row.append(f"{np.mean([r['dpsgd'] for r in rel]):.4f}")
        row.append(f"{np.mean([r['public_only'] for r in rel]):.4f}")
        out.append("| " + " | ".join(row) + " |")
    out += ["", "| cap | cells | mean gain over cap × 1 (points, over the cells) | worst cell |",
            "|---|---|---|---|"]
    for k in keys[1:]:
        for what, pick in (("Adult (2 classes)", lambda sc: sc.startswith("adult")),
                           ("Purchase-like (100 classes)", lambda sc: sc.startswith("purchase"))):
            gains = []
            for sc, eps in cells:
                if not pick(sc):
                    continue
                rel = [r for r in runs if r["scenario"] == sc and r["epsilon"] == eps]
                gains.append(100 * np.mean([r["factors"][k]["val_accuracy"]
                                            - r["factors"]["1.0"]["val_accuracy"] for r in rel]))
            out.append(f"| × {k} | {what} | {np.mean(gains):+.2f} | {min(gains):+.2f} |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    if sys.argv[1:] == ["--markdown"]:  # the Markdown again from the stored JSON
        (RESULTS / "fdp_lr.md").write_text(markdown(json.loads(
            (RESULTS / "fdp_lr.json").read_text())))
    else:
        main()

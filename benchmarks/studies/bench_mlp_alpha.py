"""MLPFeatureDP at small ε / small n: a rule for alpha="auto" (issue 20).

``MLPFeatureDP(method="alg1")`` adds α times the noisy private gradient to
the noise-free public one (``g = g_pub + α g̃_priv``). With α = 1 (the
default until issue 20) the noise made the defaults benchmark's FDP MLP
unstable at small ε and small n (Adult ε = 0.03: 0.8145 ± 0.0129; 750 rows of
Adult at ε = 0.1: 0.708 ± 0.076, below the public-only LogisticRegression).
This benchmark compares candidate rules for α, each a function of public
quantities only, through ``nu = σ C sqrt(d + 1) / B`` (the norm of the noise
in one hidden unit's incoming weights, ``d`` inputs and the bias, of one
averaged private gradient: the linear estimator's ``nu`` with a hidden unit
in place of an output column):

* ``1`` (the default until issue 20);
* ``min(1, c / nu)`` for c ∈ {0.05, 0.02, 0.01}.

Validation data only (no test set is read):

* ``adult``: a stratified 70/30 split of adult.data (seed 0; adult.test is
  never loaded), features of ``make_adult_preprocessor``, ``ADULT_PROTECTED``
  private, label public, all 22,792 training rows, ε ∈ {0.03, 0.1}
  (at ε = 1 every candidate gives α = 1 here: nu ≈ 0.019);
* ``adult 750``: 750 rows of that training part (a subsample per seed),
  ε ∈ {0.03, 0.1, 1};
* ``purchase``: ``make_purchase_like(random_state=1)`` (the benchmarks'
  test data use seed 0), split 80/20 (seed 0), 100 public products
  (``default_rng(1)``), raw 0/1 features as ``bench_defaults.py``'s MLPs
  see them, label public, ε ∈ {0.03, 0.1, 1}.

Seeds 0-2 (adult 750: 0-4); δ = 1e-5; every other parameter the default,
``device="cpu"``, one torch thread. References per cell: ``method="dp"``
(record-level DP, the defaults benchmark's "DP MLP") and, for the Adult
scenarios, sklearn's LogisticRegression on the public columns.

``--part adult`` / ``--part small`` run one half (two processes) and write
``results/mlp_alpha_<part>.json``; ``--report`` merges them into
``benchmarks/results/mlp_alpha.{json,md}``.
"""

import argparse
import json
import math
import pathlib
import sys
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from sklearn_fdp.datasets import (
    ADULT_PROTECTED,
    load_adult,
    make_adult_preprocessor,
    make_purchase_like,
)
from sklearn_fdp.features import resolve_feature_spec

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the other studies
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/_common.py
from _common import RESULTS, points_interval, run_meta, study_title  # noqa: E402

DELTA = 1e-5
# (public pretraining, rule for alpha): "500 steps" is the candidate
# public_epochs="auto" (500 noise-free steps on ℓ_pub before the noisy run).
CONFIGS = {
    "no pretraining, 1 (until issue 20)": (False, lambda nu: 1.0),
    "500 steps, 1": (True, lambda nu: 1.0),
    "500 steps, 0.2 / nu": (True, lambda nu: min(1.0, 0.2 / nu)),
    "500 steps, 0.1 / nu": (True, lambda nu: min(1.0, 0.1 / nu)),
    "500 steps, 0.05 / nu": (True, lambda nu: min(1.0, 0.05 / nu)),
    "500 steps, min(0.2 / nu, (0.35 / nu)^2)":
        (True, lambda nu: min(1.0, 0.2 / nu, (0.35 / nu) ** 2)),
    "500 steps, min(0.1 / nu, (0.35 / nu)^2) (default)":
        (True, lambda nu: min(1.0, 0.1 / nu, (0.35 / nu) ** 2)),
}
DEFAULT = "500 steps, min(0.1 / nu, (0.35 / nu)^2) (default)"
PRETRAIN_STEPS = 500
PARTS = ("adult", "adult 750", "purchase")
DP = "method='dp' (DP MLP)"
PUBLIC_LR = "public-only LogisticRegression"


def adult_split():
    X, y, _, _ = load_adult(return_X_y=True)  # adult.data only
    pre = make_adult_preprocessor().fit(X)
    cols = [str(c) for c in pre.get_feature_names_out()]
    Z = pd.DataFrame(pre.transform(X), columns=cols)
    Xtr, Xva, ytr, yva = train_test_split(Z, np.asarray(y), test_size=0.3, random_state=0,
                                          stratify=np.asarray(y))
    public_mask = resolve_feature_spec(None, list(ADULT_PROTECTED), len(cols),
                                       np.asarray(cols, dtype=object), "MLPFeatureDP",
                                       label_public=True)
    private = np.flatnonzero(~public_mask)
    return (Xtr.to_numpy(np.float32), ytr, Xva.to_numpy(np.float32), yva, cols, private)


def scenarios(part):
    if part == "purchase":
        P, py = make_purchase_like(random_state=1)
        Ptr, Pva, pytr, pyva = train_test_split(P, py, test_size=0.2, random_state=0)
        public = np.sort(np.random.default_rng(1).choice(P.shape[1], 100, replace=False))
        return dict(X=Ptr.astype(np.float32), y=pytr, X_val=Pva.astype(np.float32),
                    y_val=pyva, n=None, private=np.setdiff1d(np.arange(P.shape[1]), public),
                    epsilons=(0.03, 0.1, 1.0), seeds=(0, 1), lr=False)
    Xtr, ytr, Xva, yva, cols, private = adult_split()
    if part == "adult":
        return dict(X=Xtr, y=ytr, X_val=Xva, y_val=yva, n=None, private=private,
                    epsilons=(0.03, 0.1), seeds=(0, 1, 2), lr=True)
    return dict(X=Xtr, y=ytr, X_val=Xva, y_val=yva, n=750, private=private,
                epsilons=(0.03, 0.1, 1.0), seeds=(0, 1, 2, 3, 4), lr=True)


def rows_of(sc, seed):
    if sc["n"] is None:
        return sc["X"], sc["y"]
    rows = np.sort(np.random.default_rng(seed).permutation(len(sc["y"]))[:sc["n"]])
    return sc["X"][rows], sc["y"][rows]


def run_part(part, merge=False):
    import torch

    from sklearn_fdp.neural import MLPFeatureDP

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    t0 = time.process_time()
    path = RESULTS / f"mlp_alpha_{part.replace(' ', '_')}.json"
    before = json.loads(path.read_text()) if merge else None
    done = {(r["seed"], r["epsilon"]): r for r in before["runs"]} if merge else {}
    runs = []
    name, sc = part, scenarios(part)
    for seed in sc["seeds"]:
        X, y = rows_of(sc, seed)
        public = np.setdiff1d(np.arange(X.shape[1]), sc["private"])
        base = (LogisticRegression(max_iter=1000).fit(X[:, public], y)
                .score(sc["X_val"][:, public], sc["y_val"]) if sc["lr"] else None)
        for eps in sc["epsilons"]:
            common = dict(epsilon=eps, delta=DELTA, random_state=seed, device="cpu")
            old = done.get((seed, eps))
            dp_acc = (old["dp"] if old else float(
                MLPFeatureDP(method="dp", **common).fit(X, y).score(sc["X_val"], sc["y_val"])))
            est = MLPFeatureDP(private_features=sc["private"], label_public=True, **common)
            plan = est.privacy_plan(X.shape[0], X.shape[1])
            nu = (plan.noise_multiplier * est.max_grad_norm * math.sqrt(X.shape[1] + 1)
                  / plan.schedule.batch_size)
            pretrain = PRETRAIN_STEPS * plan.details["public_batch_size"] / X.shape[0]
            cell = dict(scenario=name, seed=seed, epsilon=eps, nu=nu, dp=dp_acc,
                        public_lr=base, configs=dict(old["configs"]) if old else {})
            for config, (pre, f) in CONFIGS.items():
                alpha = float(f(nu))
                # Two configs with the same pretraining and α are the same
                # (seeded, one-thread, bit-reproducible) fit: run it once.
                same = [v for k, v in cell["configs"].items()
                        if CONFIGS[k][0] == pre and v["alpha"] == alpha]
                if config in cell["configs"]:
                    continue
                if same:
                    acc = same[0]["val_accuracy"]
                else:
                    est.set_params(alpha=alpha, public_epochs=pretrain if pre else 0.0)
                    acc = float(est.fit(X, y).score(sc["X_val"], sc["y_val"]))
                cell["configs"][config] = dict(alpha=alpha, val_accuracy=acc)
                print(f"{name} seed {seed} ε={eps} nu={nu:.3f} {config}: α={alpha:.3f} "
                      f"{acc:.4f} (dp {dp_acc:.4f}, public LR {base})", flush=True)
            runs.append(cell)
    saved = dict(run_meta((time.process_time() - t0) / 60
                          + (before["cpu_minutes"] if merge else 0.0)),
                 configs=list(CONFIGS), runs=runs)
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(saved, indent=1))


def report():
    files = [RESULTS / f"mlp_alpha_{p.replace(' ', '_')}.json" for p in PARTS]
    parts = [json.loads(f.read_text()) for f in files]
    saved = dict(parts[0], runs=[r for p in parts for r in p["runs"]],
                 cpu_minutes=sum(p["cpu_minutes"] for p in parts))
    (RESULTS / "mlp_alpha.json").write_text(json.dumps(saved, indent=1))
    text = markdown(saved)
    (RESULTS / "mlp_alpha.md").write_text(text)
    for f in files:
        f.unlink()
    print(text)


def rewrite():
    """The Markdown again from ``results/mlp_alpha.json`` (after a change of the report only)."""
    text = markdown(json.loads((RESULTS / "mlp_alpha.json").read_text()))
    (RESULTS / "mlp_alpha.md").write_text(text)
    print(text)


def t_interval(d):
    mean, half = points_interval(d)
    return f"{mean:+.2f} ± {half:.2f}"


def markdown(saved):
    runs, rules = saved["runs"], saved["configs"]
    cells = list(dict.fromkeys((r["scenario"], r["epsilon"]) for r in runs))
    out = [study_title("MLPFeatureDP's alpha='auto'", __file__, saved), "",
           "Validation accuracy of `MLPFeatureDP` (FDP Algorithm 1, defaults but α) per rule "
           "for α, minus the DP MLP's (`method='dp'`, same seed), in points: mean ± half-width "
           "of the paired 95 % t-interval over seeds; validation splits only (no test set). "
           "Mean α in brackets. Last columns: the DP MLP's and the public-only "
           "LogisticRegression's accuracy (mean).", "",
           "\"(default)\" names the library's rule when this study ran. Since issue 20's third "
           "round it is the default for several classes only; with two classes "
           "`alpha=\"auto\"` is min(1, 0.2 / nu, (0.35 / nu)²) (the column "
           "\"500 steps, min(0.2 / nu, (0.35 / nu)^2)\" here; "
           "`benchmarks/results/defaults_rules.md`).", "",
           "| scenario | ε | nu | " + " | ".join(rules) + f" | {DP} | {PUBLIC_LR} |",
           "|---|---|---|" + "---|" * (len(rules) + 2)]
    for sc, eps in cells:
        rel = [r for r in runs if r["scenario"] == sc and r["epsilon"] == eps]
        row = [sc, f"{eps:g}", f"{np.mean([r['nu'] for r in rel]):.3f}"]
        for rule in rules:
            d = [r["configs"][rule]["val_accuracy"] - r["dp"] for r in rel]
            a = np.mean([r["configs"][rule]["alpha"] for r in rel])
            m = np.mean([r["configs"][rule]["val_accuracy"] for r in rel])
            row.append(f"{m:.4f}: {t_interval(d)} (α {a:.3f})")
        row.append(f"{np.mean([r['dp'] for r in rel]):.4f}")
        lr = [r["public_lr"] for r in rel if r["public_lr"] is not None]
        row.append(f"{np.mean(lr):.4f}" if lr else "–")
        out.append("| " + " | ".join(row) + " |")
    out += ["", "Per rule, over the cells: the mean difference from the DP MLP, and the "
            "largest shortfall from the best rule of the cell (points, means over seeds).", "",
            "| rule | mean minus DP MLP | worst shortfall from the cell's best |", "|---|---|---|"]
    means = {(sc, eps, rule): 100 * np.mean([r["configs"][rule]["val_accuracy"] for r in runs
                                            if r["scenario"] == sc and r["epsilon"] == eps])
             for sc, eps in cells for rule in rules}
    for rule in rules:
        diffs = [100 * np.mean([r["configs"][rule]["val_accuracy"] - r["dp"] for r in runs
                                if r["scenario"] == sc and r["epsilon"] == eps])
                 for sc, eps in cells]
        short = [means[(sc, eps, rule)] - max(means[(sc, eps, q)] for q in rules)
                 for sc, eps in cells]
        out.append(f"| {rule} | {np.mean(diffs):+.2f} | {min(short):+.2f} |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=PARTS)
    parser.add_argument("--merge", action="store_true",
                        help="run only the configs missing from the part's JSON")
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--markdown", action="store_true",
                        help="rewrite the Markdown from results/mlp_alpha.json")
    args = parser.parse_args()
    if args.markdown:
        rewrite()
    elif args.report:
        report()
    else:
        run_part(args.part, merge=args.merge)

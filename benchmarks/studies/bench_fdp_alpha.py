"""FDP at small ε: rules for FeatureDPLogisticRegression's alpha="auto" (issue 20).

FeatureDPLogisticRegression (``method="alg1"``, label public) starts from the
public-only model and adds α times the noisy private gradient. With too
large an α at small ε the noise pulls the fit *below* the public-only model it
started from. This benchmark compares candidate rules for α, each a function
of public quantities only, through ``nu = σ C sqrt(d + 1) / B`` (the noise
norm of one output column of one normalised private gradient):

* ``c / nu`` for c ∈ {0.05, 0.02, 0.01}, capped at 1 (0.05 was the default
  until issue 20; 0.02 the default for one merge);
* ``(0.05 / nu)²``, capped at 1 (shrinks faster as the noise grows);
* ``min(1, 0.02 / nu, (0.05 / nu)²)``: the default since (the squared term
  takes over once nu > 0.125). ``0.02 / nu`` alone passed this benchmark's
  first run but left the defaults benchmark's Purchase-like *test* split
  3.3 points below the public-only model at ε = 0.03; that prompted the
  ``purchase blocks`` scenario below, a validation split of the same setting.

Validation data only (no test set is read): a stratified 70/30 split of
adult.data (seed 0; adult.test is never loaded), features of
``make_adult_preprocessor``, label public, with

* ``prot``: the protected attributes (``ADULT_PROTECTED``) private: the
  private columns carry a lot of signal;
* ``weak``: only race and native-country private: they add almost nothing,
  so any noise they bring shows as a loss against the public-only model;

each on all 22,792 training rows and on 750 (a subsample per seed); and
``purchase``: ``make_purchase_like(n_samples=10000, random_state=1)`` (a
different seed from the benchmarks' data), every column divided by
sqrt(600), split 50/50, 100 random public products (``default_rng(1)``),
label public; and ``purchase blocks``: the setting of
``bench_defaults.py``'s Purchase-like data on other data —
``make_purchase_like(random_state=1)`` (20,000 rows; the benchmarks' test
data use seed 0), split 80/20 (seed 0) into 16,000 training and 4,000
validation rows, 100 public products (``default_rng(1)``), each row's public
and private blocks scaled to unit norm and divided by sqrt(2)
(``bench_defaults.block_unit_rows``), label public. ε ∈ {0.03, 0.1, 0.3, 1}, δ = 1e-5, seeds 0-2, every other
parameter the estimator's default. The reference is sklearn's
LogisticRegression (defaults) on the public columns: a (0, 0)-FDP model.

Writes ``benchmarks/results/fdp_alpha.{json,md}``.
"""

import math
import pathlib
import sys
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from sklearn_fdp import FeatureDPLogisticRegression
from sklearn_fdp.datasets import (
    ADULT_PROTECTED,
    load_adult,
    make_adult_preprocessor,
    make_purchase_like,
)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the other studies
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/_common.py
from _common import run_meta, save_run, study_title  # noqa: E402

EPSILONS = (0.03, 0.1, 0.3, 1.0)
SEEDS = (0, 1, 2)
DELTA = 1e-5
RULES = {
    "0.05 / nu (until issue 20)": lambda nu: min(1.0, 0.05 / nu),
    "0.02 / nu": lambda nu: min(1.0, 0.02 / nu),
    "0.01 / nu": lambda nu: min(1.0, 0.01 / nu),
    "(0.05 / nu)^2": lambda nu: min(1.0, (0.05 / nu) ** 2),
    "min(0.02 / nu, (0.05 / nu)^2) (default)": lambda nu: min(1.0, 0.02 / nu, (0.05 / nu) ** 2),
}
DEFAULT_RULE = "min(0.02 / nu, (0.05 / nu)^2) (default)"


def scenarios():
    X, y = load_adult(return_X_y=True, split="train")  # adult.data only
    pre = make_adult_preprocessor().fit(X)
    cols = [str(c) for c in pre.get_feature_names_out()]
    Z = pd.DataFrame(pre.transform(X), columns=cols)
    Xtr, Xva, ytr, yva = train_test_split(Z, np.asarray(y), test_size=0.3, random_state=0,
                                          stratify=np.asarray(y))
    out = {}
    for tag, private in (("prot", list(ADULT_PROTECTED)), ("weak", ["race", "native-country"])):
        for n in (None, 750):
            out[f"adult {tag} {n or 'all'}"] = dict(
                X=Xtr, y=ytr, X_val=Xva, y_val=yva, n=n,
                spec=dict(private_features=private))
    P, py = make_purchase_like(n_samples=10000, random_state=1)
    P = P / math.sqrt(P.shape[1])
    Ptr, Pva, pytr, pyva = train_test_split(P, py, test_size=0.5, random_state=0)
    public = np.sort(np.random.default_rng(1).choice(P.shape[1], 100, replace=False))
    out["purchase 5000"] = dict(X=Ptr, y=pytr, X_val=Pva, y_val=pyva, n=None,
                                spec=dict(public_features=public))
    from bench_defaults import block_unit_rows
    P, py = make_purchase_like(random_state=1)
    Ptr, Pva, pytr, pyva = train_test_split(P, py, test_size=0.2, random_state=0)
    public = np.sort(np.random.default_rng(1).choice(P.shape[1], 100, replace=False))
    out["purchase blocks 16000"] = dict(X=block_unit_rows(Ptr, public), y=pytr,
                                        X_val=block_unit_rows(Pva, public), y_val=pyva,
                                        n=None, spec=dict(public_features=public))
    return out


def rows_of(sc, seed):
    if sc["n"] is None:
        return sc["X"], sc["y"]
    rows = np.sort(np.random.default_rng(seed).permutation(len(sc["y"]))[:sc["n"]])
    X = sc["X"].iloc[rows].reset_index(drop=True) if hasattr(sc["X"], "iloc") else sc["X"][rows]
    return X, sc["y"][rows]


def public_only_score(sc, X, y):
    """``(feature names or None, validation accuracy)`` of scikit-learn's logistic
    regression on the public columns of scenario ``sc`` (the plan's public mask)."""
    names = np.asarray(X.columns, dtype=object) if hasattr(X, "columns") else None
    plan0 = FeatureDPLogisticRegression(**sc["spec"], label_public=True).privacy_plan(
        X.shape[0], X.shape[1], feature_names=names)
    public = plan0.details["public_mask"]
    take = (lambda M: M.iloc[:, public]) if names is not None else (lambda M: M[:, public])
    base = LogisticRegression(max_iter=2000).fit(take(X), y).score(take(sc["X_val"]),
                                                                  sc["y_val"])
    return names, base


def main():
    warnings.simplefilter("ignore")
    t0 = time.process_time()
    runs = []
    for name, sc in scenarios().items():
        for seed in SEEDS:
            X, y = rows_of(sc, seed)
            names, base = public_only_score(sc, X, y)
            for eps in EPSILONS:
                est = FeatureDPLogisticRegression(**sc["spec"], label_public=True, epsilon=eps,
                                                  delta=DELTA, random_state=seed)
                plan = est.privacy_plan(X.shape[0], X.shape[1], feature_names=names)
                nu = (plan.noise_multiplier * plan.details["max_grad_norm"]
                      * math.sqrt(X.shape[1] + 1) / plan.schedule.batch_size)
                for rule, f in RULES.items():
                    alpha = float(f(nu))
                    clf = est.set_params(alpha=alpha).fit(X, y)
                    acc = float(clf.score(sc["X_val"], sc["y_val"]))
                    runs.append(dict(scenario=name, seed=seed, epsilon=eps, rule=rule, nu=nu,
                                     alpha=alpha, val_accuracy=acc, public_only=base,
                                     diff_points=100 * (acc - base)))
                    print(f"{name} seed {seed} ε={eps} {rule}: α={alpha:.3f} "
                          f"{100 * (acc - base):+.2f}", flush=True)
                # The default reproduces its rule exactly.
                auto = est.set_params(alpha="auto").fit(X, y)
                assert auto.alpha_ == float(RULES[DEFAULT_RULE](nu)), (auto.alpha_, nu)
    saved = dict(run_meta((time.process_time() - t0) / 60), epsilons=list(EPSILONS),
                 seeds=list(SEEDS), rules=list(RULES), runs=runs)
    save_run("fdp_alpha", saved, markdown)


def markdown(saved):
    runs, rules, eps_list = saved["runs"], saved["rules"], saved["epsilons"]
    scen = list(dict.fromkeys(r["scenario"] for r in runs))

    def mean(sc, eps, rule, key="diff_points"):
        return float(np.mean([r[key] for r in runs if r["scenario"] == sc
                              and r["epsilon"] == eps and r["rule"] == rule]))

    out = [study_title("FeatureDPLogisticRegression's alpha='auto' at small ε", __file__, saved),
           "",
           "Validation accuracy minus the public-only LogisticRegression's, in points, mean "
           f"over seeds {saved['seeds']}; validation splits only (no test set). α in "
           "brackets (mean). Every other parameter is the default.", "",
           "| scenario | ε | " + " | ".join(rules) + " |", "|---|---|" + "---|" * len(rules)]
    for sc in scen:
        for eps in eps_list:
            cells = [f"{mean(sc, eps, r):+.2f} (α {mean(sc, eps, r, 'alpha'):.3f})"
                     for r in rules]
            out.append(f"| {sc} | {eps:g} | " + " | ".join(cells) + " |")
    out += ["", "| rule | mean over the cells | worst cell |", "|---|---|---|"]
    for r in rules:
        cells = [mean(sc, eps, r) for sc in scen for eps in eps_list]
        out.append(f"| {r} | {np.mean(cells):+.2f} | {min(cells):+.2f} |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Competitor baseline: diffprivlib 0.6.6 LogisticRegression (pure epsilon-DP).

Standalone: imports nothing from sklearn_fdp. Run it with the interpreter of
``.venv-diffprivlib`` (built by ``benchmarks/baselines/setup_envs.sh``), because
diffprivlib 0.6.6 needs scikit-learn 1.7.2:

    .venv-diffprivlib/bin/python benchmarks/baselines/diffprivlib_logreg.py \
        --data PATH.npz --epsilons 0.03,0.1,0.3,1,4 --delta 1e-5 \
        --seeds 0,1,2,3,4 --out PATH.json

Model: ``diffprivlib.models.LogisticRegression(epsilon=eps, data_norm=1.0, C=C,
max_iter=1000, random_state=seed, accountant=BudgetAccountant())``: objective
perturbation (Chaudhuri et al. 2011), binary, with intercept. It is pure epsilon-DP,
so ``--delta`` is NOT used (recorded as ``"delta_used": false`` in the JSON).
Rows are clipped by diffprivlib to L2 norm ``data_norm`` = 1.0 (the npz rows already
have norm <= 1).

Protocol (per epsilon):
  1. Hyperparameter selection on the training set only: for each C in C_GRID fit on
     X_train[fit_idx] and score on X_train[val_idx], averaged over the 2 selection seeds
     SELECTION_SEEDS (kept apart from the --seeds used for reporting). Best mean
     validation accuracy wins; ties go to the earlier grid entry. The test set is never
     used for selection. The selection itself is not privacy-accounted (as usual in
     DP benchmarks; it is the same for every method).
  2. With the chosen C, fit on the full X_train for every seed in --seeds and report
     accuracy on X_test, plus wall-clock fit seconds.

C grid: 1e-4 ... 10 (11 values, half-decade steps). diffprivlib's default C=1 is far from
optimal at small epsilon (on Adult at eps=1: C=1 gives ~0.79 test accuracy, C=0.1
~0.835), so the grid extends well below 1. max_iter=1000 (100 gives ConvergenceWarnings
for large C at large epsilon).
"""
import sys
import time
import warnings

import numpy as np

import diffprivlib
import sklearn
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import LogisticRegression

import _shared  # this folder

C_GRID = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0]
SELECTION_SEEDS = [1000, 1001]
MAX_ITER = 1000
DATA_NORM = 1.0


def load(path):
    return _shared.load_split(path, np.int64)


def fit_score(Xa, ya, Xb, yb, eps, C, seed):
    model = LogisticRegression(
        epsilon=eps,
        data_norm=DATA_NORM,
        C=C,
        max_iter=MAX_ITER,
        random_state=seed,
        accountant=BudgetAccountant(),  # fresh accountant: no global budget state
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        # diffprivlib passes `iprint` to L-BFGS-B: DeprecationWarning under scipy 1.17
        warnings.simplefilter("ignore", DeprecationWarning)
        model.fit(Xa, ya)
    secs = time.perf_counter() - t0
    acc = float(np.mean(model.predict(Xb) == yb))
    return acc, secs


def main(argv=None):
    p = _shared.baseline_parser(__doc__)
    p.add_argument("--c-grid", default=None, help="override the C grid (comma separated)")
    args = p.parse_args(argv)

    epsilons = _shared.parse_floats(args.epsilons)
    seeds = _shared.parse_ints(args.seeds)
    c_grid = _shared.parse_floats(args.c_grid) if args.c_grid else C_GRID
    X, y, Xte, yte, fit_idx, val_idx = load(args.data)
    Xf, yf, Xv, yv = X[fit_idx], y[fit_idx], X[val_idx], y[val_idx]
    print(f"[diffprivlib] n_train={len(y)} d={X.shape[1]} n_fit={len(fit_idx)} "
          f"n_val={len(val_idx)} n_test={len(yte)}", flush=True)

    t_start = time.perf_counter()
    results, selection = [], {}
    for eps in epsilons:
        grid_rows = []
        for C in c_grid:
            accs = [fit_score(Xf, yf, Xv, yv, eps, C, s)[0] for s in SELECTION_SEEDS]
            grid_rows.append({"hyperparameters": {"C": C}, "val_accuracy": float(np.mean(accs)),
                              "val_accuracies": accs})
        best = max(range(len(grid_rows)), key=lambda i: (grid_rows[i]["val_accuracy"], -i))
        chosen = dict(grid_rows[best]["hyperparameters"])
        selection[str(eps)] = {"grid": grid_rows, "chosen": chosen,
                               "val_accuracy": grid_rows[best]["val_accuracy"]}
        for seed in seeds:
            acc, secs = fit_score(X, y, Xte, yte, eps, chosen["C"], seed)
            results.append({"epsilon": eps, "seed": seed, "test_accuracy": acc,
                            "fit_seconds": secs,
                            "hyperparameters": dict(chosen, max_iter=MAX_ITER, data_norm=DATA_NORM)})
        accs = [r["test_accuracy"] for r in results if r["epsilon"] == eps]
        print(f"[diffprivlib] eps={eps:g} chosen C={chosen['C']:g} "
              f"val={grid_rows[best]['val_accuracy']:.4f} test={np.mean(accs):.4f}"
              f"±{np.std(accs):.4f} ({time.perf_counter() - t_start:.0f}s)", flush=True)

    out = {
        **_shared.result_head("diffprivlib.LogisticRegression", diffprivlib.__version__,
                      "pure epsilon-DP (objective perturbation); delta unused", args.delta,
                      False),
        "fixed_hyperparameters": {"max_iter": MAX_ITER, "data_norm": DATA_NORM, "fit_intercept": True},
        "selection_protocol": _shared.selection_protocol(SELECTION_SEEDS),
        **_shared.result_tail({"scikit-learn": sklearn.__version__, "numpy": np.__version__},
                      args.data, t_start, results, selection=selection),
    }
    return _shared.write_result(out, args.out, "diffprivlib")


if __name__ == "__main__":
    sys.exit(main())

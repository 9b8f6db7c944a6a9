#!/usr/bin/env python
"""Competitor baseline: diffprivlib 0.6.6 LinearRegression (pure epsilon-DP).

Standalone: imports nothing from sklearn_fdp. Run it with the interpreter of
``.venv-diffprivlib`` (built by ``benchmarks/baselines/setup_envs.sh``), because
diffprivlib 0.6.6 needs scikit-learn 1.7.2:

    .venv-diffprivlib/bin/python benchmarks/baselines/diffprivlib_linreg.py \
        --data PATH.npz --epsilons 0.01,0.03,0.1,0.3,1 --seeds 0,1,2,3,4 --out PATH.json

Model: ``diffprivlib.models.LinearRegression(epsilon=eps, bounds_X=(lo, hi),
bounds_y=(y_lo, y_hi), random_state=seed, accountant=BudgetAccountant())`` with its
defaults otherwise (``fit_intercept=True``). diffprivlib 0.6.6's LinearRegression has no
``data_norm`` and no regularisation parameter: its only privacy inputs are the per-column
bounds ``bounds_X`` and the target bounds ``bounds_y``; data outside them are clipped
(``clip_to_bounds``), and bounds it is not given are read from the data with a
``PrivacyLeakWarning`` (never the case here: both are passed, from the npz). The
mechanism is the functional mechanism of Zhang et al. (2012): with the intercept,
epsilon / (d + 1) goes to the private means of X and y (centring), the rest is split
evenly over the 1 + d + d (d + 1) / 2 coefficients of the quadratic objective, each
perturbed with Laplace noise; the noisy objective is minimised by scipy's BFGS. It is pure
epsilon-DP; ``--delta`` is not used (recorded as ``"delta_used": false``).

No hyper-parameter is tuned (LinearRegression has none besides the bounds).

Input: an ``.npz`` with float64 ``X_train, y_train, X_test, y_test`` and the declared
bounds ``bounds_X_low, bounds_X_high`` (one entry per column) and ``bounds_y`` (low, high).
Output JSON: ``results`` = one row per (epsilon, seed) with ``test_r2``, ``test_rmse``
and ``fit_seconds``; the environment's versions.
"""
import sys
import time
import warnings

import numpy as np

import diffprivlib
import sklearn
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import LinearRegression

from _shared import (  # this folder
    baseline_parser,
    parse_floats,
    parse_ints,
    result_head,
    result_tail,
    write_result,
)


def scores(y_true, y_pred):
    y_true = np.asarray(y_true, dtype=np.float64)
    y_pred = np.asarray(y_pred, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        resid = float(np.sum((y_true - y_pred) ** 2))
    total = float(np.sum((y_true - y_true.mean()) ** 2))
    return 1.0 - resid / total, float(np.sqrt(resid / len(y_true)))


def main(argv=None):
    p = baseline_parser(__doc__, epsilons="0.01,0.03,0.1,0.3,1")
    args = p.parse_args(argv)

    d = np.load(args.data)
    X, y = np.asarray(d["X_train"], np.float64), np.asarray(d["y_train"], np.float64)
    Xte, yte = np.asarray(d["X_test"], np.float64), np.asarray(d["y_test"], np.float64)
    bounds_X = (np.asarray(d["bounds_X_low"], np.float64),
                np.asarray(d["bounds_X_high"], np.float64))
    bounds_y = tuple(float(v) for v in d["bounds_y"])
    print(f"[diffprivlib] n_train={len(y)} d={X.shape[1]} n_test={len(yte)} "
          f"bounds_y={bounds_y}", flush=True)

    t_start = time.perf_counter()
    results = []
    for eps in parse_floats(args.epsilons):
        for seed in parse_ints(args.seeds):
            model = LinearRegression(epsilon=eps, bounds_X=bounds_X, bounds_y=bounds_y,
                                     random_state=seed, accountant=BudgetAccountant())
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model.fit(X, y)
            secs = time.perf_counter() - t0
            r2, rmse = scores(yte, model.predict(Xte))
            results.append(dict(epsilon=eps, seed=seed, test_r2=r2, test_rmse=rmse,
                                fit_seconds=secs,
                                warnings=sorted({f"{w.category.__name__}: {str(w.message)[:120]}"
                                                 for w in caught})))
        r2s = [r["test_r2"] for r in results if r["epsilon"] == eps]
        print(f"[diffprivlib] eps={eps:g} test R2 median {np.median(r2s):.4g} "
              f"(min {np.min(r2s):.4g}, max {np.max(r2s):.4g}) "
              f"({time.perf_counter() - t_start:.0f}s)", flush=True)

    out = {
        **result_head("diffprivlib.LinearRegression", diffprivlib.__version__,
                      "pure epsilon-DP (functional mechanism, Laplace); delta unused",
                      args.delta, False),
        "fixed_hyperparameters": {"fit_intercept": True, "bounds_y": list(bounds_y),
                                  "bounds_X": "per column, from the npz (declared schema bounds)"},
        **result_tail({"scikit-learn": sklearn.__version__, "numpy": np.__version__},
                      args.data, t_start, results),
    }
    return write_result(out, args.out, "diffprivlib")


if __name__ == "__main__":
    sys.exit(main())

"""Clip and method candidates for FeatureDPLogisticRegression at ε up to 3 (issue 20).

The defaults benchmark's FDP ≥ DP-SGD check failed on Adult at ε = 1 (test
split). The first candidates were rules from public quantities on the clip
(``max_grad_norm`` 0.75 or 1 instead of alg1's 0.5, with ``alpha="auto"``
or α = 1) and on the method (``"dpsgd"``: public pretraining, then DP-SGD).
This study compares them on validation data only: stratified 5-fold CV of
adult.data (folds shuffled with seed 0; adult.test is never loaded),
features of ``make_adult_preprocessor``, ``ADULT_PROTECTED`` private, label
public, seeds 0-1 per fold, ε ∈ {0.1, 0.3, 1, 3}, δ = 1e-5, every other
parameter the default; reference DPSGDClassifier (defaults). Prints
validation accuracy, log-loss and the paired difference from DP-SGD (mean ±
t-interval half-width over the 10 fold × seed pairs). Its one run (before
the learning-rate cap of ``bench_fdp_lr.py``) is stored verbatim in
``benchmarks/results/fdp_clip_cv.txt``: every candidate within 0.04 points
of the default at ε = 1 (log-loss best at 0.5) and 0.2-0.7 points below it
at ε ∈ {0.1, 0.3}; so the clip and method rules stayed.
"""

import math
import warnings

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold

from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression
from sklearn_fdp.datasets import ADULT_PROTECTED, load_adult, make_adult_preprocessor

EPSILONS = (0.1, 0.3, 1.0, 3.0)
CONFIGS = {"C.5": {}, "C.75": dict(max_grad_norm=0.75), "C1": dict(max_grad_norm=1.0),
           "C1a1": dict(max_grad_norm=1.0, alpha=1.0), "dpsgd": dict(method="dpsgd")}


def main():
    warnings.simplefilter("ignore")
    X, y, _, _ = load_adult(return_X_y=True)  # adult.data only
    pre = make_adult_preprocessor().fit(X)
    cols = [str(c) for c in pre.get_feature_names_out()]
    Z = pd.DataFrame(pre.transform(X), columns=cols)
    y = np.asarray(y)
    res = {}
    folds = StratifiedKFold(5, shuffle=True, random_state=0).split(Z, y)
    for fold, (tr, va) in enumerate(folds):
        Xt, yt, Xv, yv = Z.iloc[tr], y[tr], Z.iloc[va], y[va]
        npv = LogisticRegression(max_iter=1000).fit(Xt, yt)
        res.setdefault("nonpriv", []).append((npv.score(Xv, yv),
                                              log_loss(yv, npv.predict_proba(Xv))))
        for eps in EPSILONS:
            for seed in (0, 1):
                for k, kw in CONFIGS.items():
                    e = FeatureDPLogisticRegression(
                        private_features=list(ADULT_PROTECTED), label_public=True,
                        epsilon=eps, delta=1e-5, random_state=seed, **kw).fit(Xt, yt)
                    res.setdefault((eps, k), []).append(
                        (e.score(Xv, yv), log_loss(yv, e.predict_proba(Xv))))
                d = DPSGDClassifier(epsilon=eps, delta=1e-5, random_state=seed).fit(
                    Xt.to_numpy(), yt)
                res.setdefault((eps, "DPSGD"), []).append(
                    (d.score(Xv.to_numpy(), yv), log_loss(yv, d.predict_proba(Xv.to_numpy()))))
        print("fold", fold, flush=True)
    print("nonpriv", np.mean(res["nonpriv"], axis=0))
    for eps in EPSILONS:
        b = np.array(res[(eps, "DPSGD")])
        for k in list(CONFIGS) + ["DPSGD"]:
            a = np.array(res[(eps, k)])
            d = 100 * (a[:, 0] - b[:, 0])
            print(f"{eps} {k:6s} acc {a[:, 0].mean():.4f} logloss {a[:, 1].mean():.4f}  "
                  f"vs DPSGD {d.mean():+.2f} ± {2.26 * d.std(ddof=1) / math.sqrt(len(d)):.2f}")


if __name__ == "__main__":
    main()

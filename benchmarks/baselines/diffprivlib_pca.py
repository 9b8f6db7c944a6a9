#!/usr/bin/env python
"""Competitor baseline: diffprivlib 0.6.6 PCA (record-level pure epsilon-DP).

Standalone: imports nothing from sklearn_fdp. Run it with the interpreter of
``.venv-diffprivlib`` (``benchmarks/baselines/setup_envs.sh``):

    .venv-diffprivlib/bin/python benchmarks/baselines/diffprivlib_pca.py \
        --data PATH.npz --epsilons 0.1,1 --seeds 0,1,2 --out PATH.npz

Model: ``diffprivlib.models.PCA(n_components=k, epsilon=eps, data_norm=1,
centered=False, bounds=(lo, hi), random_state=seed, accountant=BudgetAccountant())``:
half of epsilon on the private mean (from the declared per-column bounds), half on the
covariance (Imtiaz & Sarwate 2016's mechanism, as diffprivlib implements it). Every
row must have L2 norm <= 1 (the caller scales the data so, without reading it).
Protects whole records (every column), pure epsilon-DP.

Input: an ``.npz`` with float64 ``X_train`` and ``bounds_low, bounds_high`` (one entry
per column) and ``k``. Output ``.npz``: ``components`` of shape (n_eps, n_seeds, k, d)
and ``mean`` of shape (n_eps, n_seeds, d), and the versions.
"""
import argparse
import json
import warnings

import numpy as np

import diffprivlib
import sklearn
from diffprivlib import BudgetAccountant
from diffprivlib.models import PCA


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--epsilons", required=True)
    parser.add_argument("--seeds", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    data = np.load(args.data)
    X, k = data["X_train"], int(data["k"])
    bounds = (data["bounds_low"], data["bounds_high"])
    epsilons = [float(e) for e in args.epsilons.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    comps = np.zeros((len(epsilons), len(seeds), k, X.shape[1]))
    means = np.zeros((len(epsilons), len(seeds), X.shape[1]))
    for i, eps in enumerate(epsilons):
        for j, seed in enumerate(seeds):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a PrivacyLeakWarning must not pass
                pca = PCA(n_components=k, epsilon=eps, data_norm=1.0, centered=False,
                          bounds=bounds, random_state=seed,
                          accountant=BudgetAccountant()).fit(X)
            comps[i, j], means[i, j] = pca.components_, pca.mean_
    np.savez(args.out, components=comps, mean=means, epsilons=epsilons, seeds=seeds,
             versions=json.dumps({"diffprivlib": diffprivlib.__version__,
                                  "scikit-learn": sklearn.__version__}))


if __name__ == "__main__":
    main()

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

Each fit gets a copy of ``X_train``: diffprivlib 0.6.6's ``PCA.fit`` subtracts its
noisy mean from the caller's array in place (under scikit-learn 1.7.2), so fits that
share one array see data shifted by every earlier fit's noisy mean. Runs before this
copy (the stored drug_consumption figures up to 2026-11-29, and the d = 99 runs that
did not finish) measured that drift, not diffprivlib's PCA.

Stalls. diffprivlib draws the k eigenvectors one at a time from a Bingham distribution
(``diffprivlib.mechanisms.Bingham``) by Kent, Ganeiber & Mardia's (2013) rejection
sampler with an angular-central-Gaussian envelope: each try draws a 4 × d multivariate
normal (an SVD of a d × d matrix) and is accepted with a probability that falls steeply
as the distribution concentrates (here: when the noisy mean is far from the data's, the
centred second-moment matrix gains a large rank-one term). Before each draw this script
computes diffprivlib's own envelope (its parameter ``b``), estimates the acceptance rate
(the mean acceptance probability of ``--draws`` envelope draws, from a generator apart
from the fit's, so the fit's draws are unchanged) and times one try; a draw whose
estimated acceptance rate is below ``--min-acceptance`` is not attempted, and that fit
is recorded as stalled (its expected time: one try's seconds / acceptance rate).

Input: an ``.npz`` with float64 ``X_train`` and ``bounds_low, bounds_high`` (one entry
per column) and ``k``. Output ``.npz``: ``components`` of shape (n_eps, n_seeds, k, d)
and ``mean`` of shape (n_eps, n_seeds, d) (zeros for a stalled fit), ``finished`` of
shape (n_eps, n_seeds), ``calls`` (JSON: one entry per Bingham draw) and the versions.
"""
import argparse
import json
import time
import warnings

import numpy as np

import diffprivlib
import diffprivlib.mechanisms.bingham as bingham
import sklearn
from diffprivlib import BudgetAccountant
from diffprivlib.models import PCA


_RANDOMISE = bingham.Bingham.randomise  # diffprivlib's own draw


class Stalled(Exception):
    """A Bingham draw whose expected number of tries is out of reach."""


def envelope(mech, value):
    """``(translated matrix, b, Ω, log of the normalising constant)``: the set-up of
    diffprivlib's ``Bingham.randomise`` (0.6.6), reproduced to measure its loop."""
    eigvals = np.linalg.eigh(value)[0]
    d = value.shape[0]
    translated = mech.epsilon * (eigvals.max() * np.eye(d) - value) / 4 / mech.sensitivity
    t_eig = np.linalg.eigvalsh(translated)
    left, right, mid = 1, d, (1 + d) / 2
    old = (right - left) * 2
    while right - left < old:
        old = right - left
        mid = (right + left) / 2
        f_mid = np.array([1 / (mid + 2 * e) for e in t_eig]).sum()
        if f_mid <= 1:
            right = mid
        if f_mid >= 1:
            left = mid
    omega = np.eye(d) + 2 * translated / mid
    return translated, mid, omega, -(d - mid) / 2 + (d / 2) * np.log(d / mid)


def acceptance_rate(translated, omega, log_norm_const, draws, rng):
    """Mean acceptance probability over ``draws`` envelope draws (the sum of four
    N(0, Ω⁻¹/4) draws is N(0, Ω⁻¹), then normalised), computed in logs."""
    d = omega.shape[0]
    z = rng.standard_normal((draws, d)) @ np.linalg.cholesky(np.linalg.inv(omega)).T
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    log_p = (-((u @ translated) * u).sum(axis=1) - log_norm_const
             - d / 2 * np.log(((u @ omega) * u).sum(axis=1)))
    return float(np.mean(np.minimum(np.exp(log_p), 1.0)))


def measured_randomise(calls, where, draws, min_acceptance):
    """``Bingham.randomise`` that first records the draw's acceptance rate and expected
    time in ``calls`` (tagged with ``where``), and raises Stalled below ``min_acceptance``."""
    def randomise(mech, value):
        translated, b, omega, log_norm = envelope(mech, value)
        acc = acceptance_rate(translated, omega, log_norm, draws,
                              np.random.default_rng([12345, len(calls)]))
        probe = np.random.default_rng(0)  # timing only: the fit's generator is untouched
        t0 = time.perf_counter()
        for _ in range(3):
            probe.multivariate_normal(np.zeros(len(omega)), np.linalg.inv(omega) / 4, size=4)
        per_try = (time.perf_counter() - t0) / 3
        calls.append(dict(where, draw=sum(c["seed"] == where["seed"] and
                                          c["epsilon"] == where["epsilon"] for c in calls) + 1,
                          d=len(omega), b=float(b), acceptance=acc, seconds_per_try=per_try,
                          expected_seconds=per_try / acc if acc > 0 else float("inf")))
        if acc < min_acceptance:
            raise Stalled
        return _RANDOMISE(mech, value)

    return randomise


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--epsilons", required=True)
    parser.add_argument("--seeds", required=True)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--min-acceptance", type=float, default=1e-4)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    data = np.load(args.data)
    X, k = data["X_train"], int(data["k"])
    bounds = (data["bounds_low"], data["bounds_high"])
    epsilons = [float(e) for e in args.epsilons.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    comps = np.zeros((len(epsilons), len(seeds), k, X.shape[1]))
    means = np.zeros((len(epsilons), len(seeds), X.shape[1]))
    finished = np.zeros((len(epsilons), len(seeds)), dtype=bool)
    calls = []
    for i, eps in enumerate(epsilons):
        for j, seed in enumerate(seeds):
            bingham.Bingham.randomise = measured_randomise(
                calls, dict(epsilon=eps, seed=seed), args.draws, args.min_acceptance)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # a PrivacyLeakWarning must not pass
                    # A copy: diffprivlib 0.6.6's fit subtracts its noisy mean from the
                    # caller's array in place, so reusing X would hand every later fit
                    # data shifted by the earlier fits' noisy means.
                    pca = PCA(n_components=k, epsilon=eps, data_norm=1.0, centered=False,
                              bounds=bounds, random_state=seed,
                              accountant=BudgetAccountant()).fit(X.copy())
            except Stalled:
                print(f"[diffprivlib] eps={eps:g} seed={seed}: stalled ({calls[-1]})",
                      flush=True)
                continue
            comps[i, j], means[i, j], finished[i, j] = pca.components_, pca.mean_, True
    np.savez(args.out, components=comps, mean=means, finished=finished,
             epsilons=epsilons, seeds=seeds, calls=json.dumps(calls),
             versions=json.dumps({"diffprivlib": diffprivlib.__version__,
                                  "scikit-learn": sklearn.__version__}))


if __name__ == "__main__":
    main()

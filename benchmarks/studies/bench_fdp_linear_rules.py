#!/usr/bin/env python
"""FeatureDPLinearRegression: the release and the solver's rules, on a validation split (issue 19).

FeatureDPLinearRegression (``solver="residual"``) releases the protected
blocks of the normal equations once and solves them; its constants are
rules from public quantities (σ, the shapes, the bounds). This study
compares, on validation data only:

* the release with a public target: ``X_Qᵀy`` (until issue 19) or the
  residual ``X_Qᵀ clip(y − X~_P β, ±2)`` of the public model β (since);
* ``QP_WEIGHT`` (the ``X_QᵀX~_P`` block's share of the budget) ∈ {0.25, 0.5, 1};
* the residual solver's rules: the ridge added to the protected step
  ``c · τ`` (τ the expected spectral norm of the noise of ``X~ᵀX~``) for c ∈
  {4, 2, 1, 0.5, 0.25}, or none with only the eigenvalue floor at τ, and the
  noise-dependent ``c = max(1, sqrt(κ / 0.08))``, ``κ = τ / (n B_Q²)``; the bias
  correction of the Schur complement (its noise adds ``s_QP² tr(Λ_k⁻¹)`` on
  average: added back to its diagonal); the keep threshold of the public
  directions ``KEEP · τ`` for KEEP ∈ {1, 0.5, 0.25}.

Data: adult.data only (adult.test is never loaded), split 70/30 (seed 0);
target hours-per-week clipped to (1, 99); features of
``make_tabular_preprocessor`` on ``adult_schema()`` without the target,
Adult's protected columns private, ``row_norm_bounds(schema)``; target public
(the feature-DP arm) and private. ε ∈ {0.01, 0.03, 0.1, 0.3, 1}, δ = 1e-5,
α = 1, σ from :func:`sklearn_fdp.accounting.gaussian_release`, noise seeds
0-39. The exact statistics are computed once by the library
(``sufficient_statistics``); each fit draws the release's noise afresh.

Writes ``benchmarks/results/fdp_linear_rules.{json,md}``; about six minutes on an idle
machine (``--report-only`` rewrites the report from the JSON).
"""

import contextlib
import json
import math
import pathlib
import platform
import sys
import time
from unittest import mock

import numpy as np
from scipy import stats as scipy_stats
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from sklearn_fdp import accounting  # noqa: E402
from sklearn_fdp._mechanisms import linear_statistics as ls  # noqa: E402
from sklearn_fdp.datasets import ADULT_PROTECTED, adult_schema, load_adult  # noqa: E402
from sklearn_fdp.features import resolve_feature_spec  # noqa: E402
from sklearn_fdp.preprocessing import make_tabular_preprocessor, row_norm_bounds  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE.parent / "results"
TARGET = "hours-per-week"
Y_BOUNDS = (1.0, 99.0)
DELTA = 1e-5


def data():
    """adult.data only (adult.test is never loaded): 70/30 split, seed 0."""
    X, _, _, _ = load_adult(return_X_y=True)
    y = np.clip(X[TARGET].to_numpy(dtype=np.float64), *Y_BOUNDS)
    schema = adult_schema()
    del schema["numeric"][TARGET]
    schema["drop"] = [TARGET]
    Xtr, Xva, ytr, yva = train_test_split(X, y, test_size=0.3, random_state=0)
    pre = make_tabular_preprocessor(schema).fit(Xtr)
    cols = np.asarray([str(c) for c in pre.get_feature_names_out()], dtype=object)
    Ztr = np.ascontiguousarray(pre.transform(Xtr), dtype=np.float64)
    Zva = np.ascontiguousarray(pre.transform(Xva), dtype=np.float64)
    mask = resolve_feature_spec(None, list(ADULT_PROTECTED), len(cols), cols, "study",
                                label_public=True)
    nb = row_norm_bounds(schema)
    nb_all = row_norm_bounds(dict(schema, protected=[]))
    return dict(Xtr=Ztr, Xva=Zva, ytr=ytr, yva=yva, mask=mask,
                bounds=(nb.public, nb.protected), bounds_all=(nb_all.public, nb_all.protected))




def layout_for(d, label_public, qp_weight, residual=True):
    """The library's layout at ``QP_WEIGHT = qp_weight``; ``residual=False``: the
    release before issue 19 with a public target (``X_Qᵀy`` in place of ``X_Qᵀ r``)."""
    saved = ls.QP_WEIGHT
    ls.QP_WEIGHT = qp_weight
    try:
        lay = ls.statistic_layout(d["mask"], fit_intercept=True, label_public=label_public,
                                  public_bound=d["bounds"][0], private_bound=d["bounds"][1],
                                  neighboring="add_remove")
        if label_public and not residual:
            with mock.patch.object(ls, "RESIDUAL_BOUND", 1.0):  # |y| <= 1: Qy's bound
                lay = ls.statistic_layout(d["mask"], fit_intercept=True, label_public=True,
                                          public_bound=d["bounds"][0],
                                          private_bound=d["bounds"][1],
                                          neighboring="add_remove")
        return lay
    finally:
        ls.QP_WEIGHT = saved


def noisy_system(stats, layout, sigma, rng, n_features, residual):
    """The release of ``release_linear_statistics`` from precomputed exact statistics."""
    if residual or "Qr" not in layout.weights:
        vec = ls.stacked_release(stats, layout)
    else:  # X_Qᵀy in the residual block's place (the old release; same sensitivity form)
        vec = ls.stacked_release(stats._replace(r_Q=stats.b_Q), layout)
    noisy = ls.add_gaussian_noise(vec, sigma, rng)
    blocks, offset = {}, 0
    for k, size in layout.sizes.items():
        blocks[k] = noisy[offset:offset + size] / layout.weights[k]
        offset += size
    d_q = len(layout.private_idx)
    d_p1 = len(layout.public_idx) + 1
    A_QP = blocks["QP"].reshape(d_q, d_p1)
    A_QQ = ls._untriu(blocks["QQ"], d_q)
    r_Q = None
    if "Qy" in blocks:
        b_Q = blocks["Qy"]
    elif residual:
        r_Q = blocks["Qr"]
        b_Q = r_Q + A_QP @ stats.beta
    else:
        b_Q = blocks["Qr"]
    b_P = blocks.get("Py", stats.b_P)
    pub = np.r_[layout.public_idx, [n_features]].astype(int)
    priv = layout.private_idx
    size = n_features + 1
    G = np.zeros((size, size))
    b = np.zeros(size)
    G[np.ix_(pub, pub)] = stats.G_PP
    G[np.ix_(priv, pub)] = A_QP
    G[np.ix_(pub, priv)] = A_QP.T
    G[np.ix_(priv, priv)] = A_QQ
    b[pub] = b_P
    b[priv] = b_Q
    stds = ls.noise_stds(layout, sigma)
    system = ls.NoisySystem(G, b, ls.noise_scale(layout, sigma), stds.get("Py", 0.0),
                            stats.beta if r_Q is not None else None, r_Q)
    return system, stds


# The previous round's noise-grown ridge of the protected step (c = max(1, sqrt(κ /
# 0.08))); the library dropped it in this round (see the verdict).
RIDGE_KAPPA = 0.08


def floored_solve(M, rhs, floor):
    """The library's floored solve (eigenvalues below ``floor`` raised to it), solution only."""
    return ls._floored_solve(M, rhs, floor)[0]


def residual_rule(system, layout, stds, alpha, *, c_ridge=1.0, bias=False, keep=1.0,
                  kappa_ridge=False, n=None):
    """The residual solver with its constants as parameters (``solve_noisy_ridge``'s
    rule at ``c_ridge=RIDGE, bias=False, keep=KEEP``, and ``kappa_ridge=True`` with a
    public target: ``c = max(c_ridge, sqrt(κ / RIDGE_KAPPA))``, ``κ = τ / (n B_Q²)``)."""
    G = system.G
    size = G.shape[0]
    pub = np.r_[layout.public_idx, [size - 1]].astype(int)
    priv = layout.private_idx
    d_pen = np.ones(len(pub))
    d_pen[-1] = 0.0
    tau = system.noise_scale
    tau_b = system.target_noise_std * math.sqrt(layout.sizes.get("Py", 0))
    G_pp = G[np.ix_(pub, pub)] + np.diag((alpha + tau_b) * d_pen)
    beta = floored_solve(G_pp, system.b[pub], tau_b)
    if system.r_Q is not None:
        beta = system.beta
    A = G[np.ix_(priv, pub)]
    lam, V = np.linalg.eigh(G_pp)
    kept = lam >= max(keep * tau, 1e-12 * max(1.0, float(np.abs(lam).max())))
    W = A @ V[:, kept]
    lam_k = lam[kept]
    C = G[np.ix_(priv, priv)] - (W / lam_k) @ W.T
    if bias:
        C = C + stds.get("QP", 0.0) ** 2 * float(np.sum(1.0 / lam_k)) * np.eye(len(priv))
    rhs = system.r_Q if system.r_Q is not None else system.b[priv] - A @ beta
    if kappa_ridge:
        kappa = tau / (n * layout.private_bound ** 2)
        c_ridge = max(c_ridge, math.sqrt(kappa / RIDGE_KAPPA))
    theta_q = floored_solve(C + (alpha + c_ridge * tau) * np.eye(len(priv)), rhs, tau)
    theta = np.zeros(size)
    theta[pub] = beta - V[:, kept] @ ((W.T @ theta_q) / lam_k)
    theta[priv] = theta_q
    return theta


def r2_of(theta, d):
    centre, half = ls.target_map(Y_BOUNDS, True)
    theta = theta * half
    return float(r2_score(d["yva"], d["Xva"] @ theta[:-1] + theta[-1] + centre))


RULES = {
    "ridge τ, keep τ (until issue 19)": dict(keep=1.0),
    "ridge τ, keep 0.5τ": dict(keep=0.5),
    "ridge max(1, √(κ/0.08)) τ, keep 0.5τ": dict(keep=0.5, kappa_ridge=True),
    "ridge 2τ, keep 0.5τ": dict(c_ridge=2.0, keep=0.5),
    "ridge 4τ, keep 0.5τ": dict(c_ridge=4.0, keep=0.5),
    "ridge τ, keep 0.25τ": dict(keep=0.25),
    "ridge 0.5τ, keep τ": dict(c_ridge=0.5),
    "ridge 0.25τ, keep τ": dict(c_ridge=0.25),
    "no ridge (floor τ only), keep τ": dict(c_ridge=0.0),
    "ridge 0.5τ, keep 0.5τ": dict(c_ridge=0.5, keep=0.5),
    "bias-corrected, ridge τ, keep τ": dict(bias=True),
    "bias-corrected, ridge τ, keep 0.5τ": dict(bias=True, keep=0.5),
    "bias-corrected, ridge 0.5τ, keep 0.5τ": dict(bias=True, c_ridge=0.5, keep=0.5),
}
LIBRARY_RULES = ("ridge max(1, √(κ/0.08)) τ, keep 0.5τ", "no ridge (floor τ only), keep τ")
RELEASES = {True: ("X_Qᵀ r (residual)", "X_Qᵀy (until issue 19)"), False: ("X_Qᵀy, X~_Pᵀy",)}
EPSILONS = [0.01, 0.03, 0.1, 0.3, 1.0]
# The small-ε fits have heavy tails (a few noise draws pull one fit far below
# the others): 5 seeds could not tell the rules apart there, 40 can.
SEEDS = list(range(40))
QP_WEIGHTS = [0.25, 0.5, 1.0]


# The earlier sections: the release as it was until this round (R = 2, Qr weight 1).
ROUND3 = dict(RESIDUAL_RMSE_MULTIPLE=math.inf, QR_WEIGHT=1.0)


def _patched(**constants):
    """Context manager: ``linear_statistics``' module constants set for a study arm."""
    return mock.patch.multiple(ls, **constants)


def study():
    with _patched(**ROUND3):
        return _study()


def _study():
    d = data()
    n_features = d["Xtr"].shape[1]
    pm = d["mask"]
    ref = dict(
        nonprivate=float(r2_score(d["yva"], Ridge().fit(d["Xtr"], d["ytr"]).predict(d["Xva"]))),
        public_only=float(r2_score(d["yva"], Ridge().fit(d["Xtr"][:, pm], d["ytr"]).predict(
            d["Xva"][:, pm]))))
    rows = []
    for label_public in (True, False):
        stats = ls.sufficient_statistics(d["Xtr"], d["ytr"], layout_for(d, label_public, 0.5),
                                         Y_BOUNDS, 1.0)
        for release in RELEASES[label_public]:
            residual = release.startswith("X_Qᵀ r")
            for w in QP_WEIGHTS:
                layout = layout_for(d, label_public, w, residual)
                for eps in EPSILONS:
                    sigma = accounting.gaussian_release(eps, DELTA)[0]
                    for seed in SEEDS:
                        system, stds = noisy_system(stats, layout, sigma,
                                                    np.random.default_rng(seed), n_features,
                                                    residual)
                        for name, kw in RULES.items():
                            if w != 0.5 and name not in LIBRARY_RULES:
                                continue  # the other weights: with the library's rules only
                            theta = residual_rule(system, layout, stds, 1.0,
                                                  n=d["Xtr"].shape[0], **kw)
                            rows.append(dict(target="public" if label_public else "private",
                                             release=release, qp_weight=w, epsilon=eps,
                                             seed=seed, rule=name, r2=r2_of(theta, d)))
    return rows, ref


# This round (issue 19, fourth session): the residual's clip R from the public
# statistics (RESIDUAL_RMSE_MULTIPLE, RESIDUAL_CLIP_RATE), the X_Qᵀ r block's weight
# (QR_WEIGHT), the X_QᵀX~_P block released only along the top public directions
# (projected_layout, QP_PROJECTED_WEIGHT), the protected step's floor (FLOOR) and
# ridge. Target public, KEEP 0.5 unless said. Each arm: (module constants, how it
# solves): "round 3" is that round's release and solver (residual_rule above), every
# other arm the library's own release_linear_statistics and solve_noisy_ridge with
# the constants set ("whole" = projected_layout switched off).
_LIB = dict(RESIDUAL_RMSE_MULTIPLE=2.0, RESIDUAL_CLIP_RATE=16.0, QR_WEIGHT=2.0,
            QP_PROJECTED_WEIGHT=1.0)
LIBRARY_ARM = "library: R rule, projected QP, Qr weight 2, floor 0.7τ"
CLIP_ARMS = {
    "round 3: R = 2, whole QP (weight 0.5), Qr weight 1, ridge max(1, √(κ/0.08)) τ":
        (ROUND3, dict(floor=1.0), "round 3"),
    "R rule, whole QP (weight 0.5), Qr weight 1, floor τ":
        (dict(_LIB, QR_WEIGHT=1.0), dict(floor=1.0), "whole"),
    "R rule, whole QP (weight 0.5), Qr weight 1.4, floor τ":
        (dict(_LIB, QR_WEIGHT=1.4), dict(floor=1.0), "whole"),
    "R rule, whole QP (weight 0.5), Qr weight 2, floor 0.7τ": (_LIB, dict(floor=0.7), "whole"),
    LIBRARY_ARM: (_LIB, dict(floor=0.7), "library"),
    "… projected QP weight 0.5": (dict(_LIB, QP_PROJECTED_WEIGHT=0.5), dict(floor=0.7),
                                  "library"),
    "… Qr weight 1.4, floor τ": (dict(_LIB, QR_WEIGHT=1.4), dict(floor=1.0), "library"),
    "… Qr weight 1.4": (dict(_LIB, QR_WEIGHT=1.4), dict(floor=0.7), "library"),
    "… Qr weight 3": (dict(_LIB, QR_WEIGHT=3.0), dict(floor=0.7), "library"),
    "… Qr weight 3, floor 0.5τ": (dict(_LIB, QR_WEIGHT=3.0), dict(floor=0.5), "library"),
    "… floor 0.5τ": (_LIB, dict(floor=0.5), "library"),
    "… floor τ": (_LIB, dict(floor=1.0), "library"),
    "… keep 0.35τ": (_LIB, dict(floor=0.7, keep=0.35), "library"),
    "… keep 0.7τ": (_LIB, dict(floor=0.7, keep=0.7), "library"),
    "… R from 1.5 rmse": (dict(_LIB, RESIDUAL_RMSE_MULTIPLE=1.5), dict(floor=0.7), "library"),
    "… R from 3 rmse": (dict(_LIB, RESIDUAL_RMSE_MULTIPLE=3.0), dict(floor=0.7), "library"),
    "… clip rate 4": (dict(_LIB, RESIDUAL_CLIP_RATE=4.0), dict(floor=0.7), "library"),
    "… no clip-count rule (R = 2 rmse at every σ)":
        (dict(_LIB, RESIDUAL_CLIP_RATE=math.inf), dict(floor=0.7), "library"),
}


def study_clip():
    """Rows of this round's arms (validation R² per ε and seed), and per arm and ε
    the clip R, the residuals clipped and the QP block's rank k."""
    d = data()
    n_features, n = d["Xtr"].shape[1], d["Xtr"].shape[0]
    priv = np.flatnonzero(~d["mask"])
    rows, clips = [], {}
    for name, (constants, solver, how) in CLIP_ARMS.items():
        patches = [_patched(**constants),
                   mock.patch.dict(ls.FLOOR, {True: solver["floor"]}),
                   mock.patch.dict(ls.KEEP, {True: solver.get("keep", 0.5)})]
        if how == "whole":
            patches.append(mock.patch.object(ls, "projected_layout", lambda lay, *a: lay))
        with contextlib.ExitStack() as stack:
            for patch in patches:
                stack.enter_context(patch)
            base = ls.statistic_layout(d["mask"], fit_intercept=True, label_public=True,
                                       public_bound=d["bounds"][0],
                                       private_bound=d["bounds"][1], neighboring="add_remove")
            for eps in EPSILONS:
                sigma = accounting.gaussian_release(eps, DELTA)[0]
                if how == "round 3":
                    stats = ls.sufficient_statistics(d["Xtr"], d["ytr"], base, Y_BOUNDS, 1.0,
                                                     noise_multiplier=sigma)
                    layout = ls.with_residual_bound(base, stats.residual_bound)
                for seed in SEEDS:
                    rng = np.random.default_rng(seed)
                    if how == "round 3":
                        system, stds = noisy_system(stats, layout, sigma, rng, n_features, True)
                        theta = residual_rule(system, layout, stds, 1.0, n=n, keep=0.5,
                                              kappa_ridge=True)
                    else:
                        system, stats, layout = ls.release_linear_statistics(
                            d["Xtr"], d["ytr"], base, Y_BOUNDS, sigma, rng, 1.0)
                        theta = ls.solve_noisy_ridge(system, 1.0, True, layout)[0]
                    rows.append(dict(target="public", release="X_Qᵀ r (residual)",
                                     qp_weight=0.5, epsilon=eps, seed=seed, rule=name,
                                     r2=r2_of(theta, d)))
                rank = (layout.sizes["QP"] // len(priv))
                clips.setdefault(name, {})[str(eps)] = dict(
                    R=stats.residual_bound, clipped=stats.n_residual_clipped, qp_rank=rank)
    return rows, clips


# The oracle: what the residual release could give if X~ᵀX~ were known exactly and the
# whole budget went to the d_Q numbers X_Qᵀ clip(r, ±R), with the clip R (a quantile of
# the public |r|) and a ridge λ on the protected step picked in hindsight on the
# validation rows (the best of the grids below). No mechanism has this information;
# it bounds what the residual release and a ridge solve can reach here.
ORACLE_QUANTILES = [0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0]
ORACLE_RIDGES = [1, 3, 10, 30, 60, 100, 200, 300, 600]


def oracle():
    """``{ε: dict(r2=(mean, half-width), quantile, ridge)}`` of the oracle above, on the
    validation split."""
    d = data()
    return oracle_bound(d["Xtr"], d["ytr"], d["Xva"], d["yva"], d["mask"], d["bounds"],
                        EPSILONS, SEEDS)


def oracle_bound(X, y, X_eval, y_eval, public_mask, bounds, epsilons, seeds, delta=DELTA,
                 y_bounds=Y_BOUNDS, alpha=1.0):
    """The oracle (see above) fitted on ``X, y``, scored (R²) on ``X_eval, y_eval``:
    ``{str(ε): dict(r2=(mean, half-width over seeds), quantile, ridge)}``, the best cell
    of :data:`ORACLE_QUANTILES` × :data:`ORACLE_RIDGES` at each ε. Uses the library's
    clipping, target map and public model; not a private estimator."""
    base = ls.statistic_layout(public_mask, fit_intercept=True, label_public=True,
                               public_bound=bounds[0], private_bound=bounds[1],
                               neighboring="add_remove")
    stats = ls.sufficient_statistics(X, y, base, y_bounds, alpha)
    n_features = X.shape[1]
    pub = np.r_[base.public_idx, [n_features]].astype(int)
    priv = base.private_idx

    def clipped(cols, bound):
        block = np.ascontiguousarray(X[:, cols], dtype=np.float64)
        return block * ls.row_scale_factors(block, bound, "clip")[:, None]

    Xq = clipped(priv, base.private_bound)
    Xp = np.c_[clipped(base.public_idx, base.public_bound), np.ones(X.shape[0])]
    centre, half = ls.target_map(y_bounds, True)
    yt = np.clip((np.clip(y, *y_bounds) - centre) / half, -1.0, 1.0)
    r = yt - Xp @ stats.beta
    lam, V = ls.public_eigenbasis(stats.G_PP, alpha, True)
    W = stats.A_QP @ V
    C = stats.A_QQ - (W / lam) @ W.T
    out = {}
    for eps in epsilons:
        sigma = accounting.gaussian_release(eps, delta)[0]
        best = None
        for q in ORACLE_QUANTILES:
            R = float(np.quantile(np.abs(r), q))
            rq = Xq.T @ np.clip(r, -R, R)
            s = sigma * base.private_bound * R  # the whole budget: sensitivity B_Q R
            for ridge in ORACLE_RIDGES:
                M = C + ridge * np.eye(len(priv))
                scores = []
                for seed in seeds:
                    noise = np.random.default_rng(seed).standard_normal(len(priv))
                    tq = np.linalg.solve(M, rq + s * noise)
                    theta = np.zeros(n_features + 1)
                    theta[pub] = stats.beta - V @ ((W.T @ tq) / lam)
                    theta[priv] = tq
                    theta = theta * half
                    pred = X_eval @ theta[:-1] + theta[-1] + centre
                    scores.append(float(r2_score(y_eval, pred)))
                m = _mean_ci(scores)
                if best is None or m[0] > best["r2"][0]:
                    best = dict(r2=m, quantile=q, ridge=ridge)
        out[str(eps)] = best
    return out


def _mean_ci(values):
    v = np.asarray(values, dtype=float)
    half = scipy_stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return float(v.mean()), float(half)


def table(rows, keep):
    """``{(target, release, qp_weight, rule): {ε: (mean, half-width)}}`` of the rows ``keep`` selects."""
    out = {}
    for r in rows:
        if keep(r):
            out.setdefault((r["target"], r["release"], r["qp_weight"], r["rule"]), {}).setdefault(
                r["epsilon"], []).append(r["r2"])
    return {k: {e: _mean_ci(v) for e, v in sorted(by.items())} for k, by in out.items()}


def markdown_clip(rows, clips, oracle_rows, ref):
    """This round's section: the arms of :data:`CLIP_ARMS`, the clip R and rank k they
    used, and the oracle."""
    eps_head = " | ".join(f"ε = {e:g}" for e in EPSILONS)
    lines = ["## Issue 19, fourth round: the residual's clip, the X_Qᵀ r weight, the projected "
             "X_QᵀX~_P, the floor (target public)", "",
             "R rule: R = min(2, max(2 rmse, the (k+1)-th largest |r|)), rmse the public "
             "model's root mean squared residual, k = ⌊16 σ √d_Q⌋ (at most about k residuals "
             "clipped; none as σ → 0). Projected QP: X_QᵀX~_P V_k is released for the top k "
             "eigenvectors V_k of the public X~_PᵀX~_P + α D, k the largest rank with λ_k ≥ "
             "KEEP τ(k) at the layout's own noise scale (the directions the solver keeps; the "
             "whole block as σ → 0). Floor: the protected step's eigenvalues below that share "
             "of τ are raised to it (no ridge beyond α). \"…\" = the library's arm with one "
             "change.", "", f"| arm | {eps_head} |", "|---|" + "---|" * len(EPSILONS)]
    for (_, _, _, name), by in table(rows, lambda r: True).items():
        lines.append(f"| {name} | " + " | ".join(f"{m:.4f} ± {h:.4f}" for m, h in by.values())
                     + " |")
    lines.extend(["", "R, the residuals clipped (of the training split's rows) and the rank "
                  "k of the released X_QᵀX~_P (83 public directions with the intercept's) "
                  "per arm:", "", f"| arm | {eps_head} |", "|---|" + "---|" * len(EPSILONS)])
    for name, by in clips.items():
        lines.append(f"| {name} | " + " | ".join(
            f"R {by[str(e)]['R']:.3f} ({by[str(e)]['clipped']}), k {by[str(e)]['qp_rank']}"
            for e in EPSILONS) + " |")
    lines.extend([
        "", "### The oracle: the best a residual release with a ridge solve could do here", "",
        "X~ᵀX~ known exactly (no mechanism has it) and the whole budget on the d_Q = 22 "
        "numbers X_Qᵀ clip(r, ±R) (noise std σ B_Q R), R a quantile of the public |r| and a "
        f"ridge on the protected step, both picked in hindsight on the validation rows (best "
        f"of quantiles {ORACLE_QUANTILES} × ridges {ORACLE_RIDGES}); same seeds. Against "
        f"1 % of non-private R² ({0.99 * ref['nonprivate']:.4f}) and 1 R² point "
        f"({ref['nonprivate'] - 0.01:.4f}):", "", f"| | {eps_head} |",
        "|---|" + "---|" * len(EPSILONS)])
    lines.append("| oracle R² | " + " | ".join(
        f"{oracle_rows[str(e)]['r2'][0]:.4f} ± {oracle_rows[str(e)]['r2'][1]:.4f}"
        for e in EPSILONS) + " |")
    lines.append("| its quantile, ridge | " + " | ".join(
        f"{oracle_rows[str(e)]['quantile']:g}, {oracle_rows[str(e)]['ridge']:g}"
        for e in EPSILONS) + " |")
    lib = table(rows, lambda r: r["rule"] == LIBRARY_ARM)
    (lib_by,) = lib.values()
    lines.append("| the library (this round) | " + " | ".join(
        f"{m:.4f}" for m, _ in lib_by.values()) + " |")
    (old_by,) = table(rows, lambda r: r["rule"].startswith("round 3")).values()
    gains = ", ".join(f"{100 * (lib_by[e][0] - old_by[e][0]):+.1f}" for e in EPSILONS)
    misses = [e for e in EPSILONS
              if oracle_rows[str(e)]["r2"][0] < 0.99 * ref["nonprivate"]]
    lines.extend([
        "", "Verdict of this round. The library's arm (`linear_statistics.py`: "
        "`RESIDUAL_RMSE_MULTIPLE` 2, `RESIDUAL_CLIP_RATE` 16, `QR_WEIGHT` 2, the projected "
        "X_QᵀX~_P with `QP_PROJECTED_WEIGHT` 1, `FLOOR` 0.7 with a public target, no ridge, "
        f"`KEEP` 0.5) moves validation R² by {gains} points at ε = "
        + ", ".join(f"{e:g}" for e in EPSILONS) + " against round 3. Its parts, each "
        "against the row above it in the table: the residual's clip from the public "
        "residuals with the floor in place of the noise-grown ridge; the X_Qᵀ r weight "
        "1.4, then 2 with the floor 0.7τ; the projection of X_QᵀX~_P (best or level at "
        "ε ≤ 0.3, level at 1). The one-change rows: the clip-count rule changes nothing "
        "measurable against 2 rmse at every σ (it is there for σ → 0, where nothing is "
        "clipped and the fit tends to Ridge); a Qr weight 3, a floor 0.5τ or a keep 0.35τ "
        "gain at some ε and lose at ε = 1; the floor τ gains at ε = 1 and loses below. "
        "The oracle (exact normal equations, the whole budget on X_Qᵀ r, R and the ridge in "
        "hindsight) stays below 1 % of the non-private R² at ε = "
        + (", ".join(f"{e:g}" for e in misses) or "none") + ": the sufficient-statistics "
        "release with a ridge solve cannot meet the issue's 1 % target there on this data.",
        ""])
    return lines


def markdown(rows, ref, meta):
    eps_head = " | ".join(f"ε = {e:g}" for e in EPSILONS)
    lines = [f"# FeatureDPLinearRegression: release and solver rules on a validation split "
             f"(generated by `benchmarks/studies/bench_fdp_linear_rules.py` on {meta['date']}, "
             f"{meta['runtime_seconds']:.0f} s)", "",
             "adult.data only (adult.test never read), split 70/30 (seed 0): "
             f"{meta['n_train']} training, {meta['n_validation']} validation rows; target "
             "hours-per-week clipped to (1, 99); Adult's protected columns private; "
             f"α = 1; δ = 1e-5; noise seeds {SEEDS}. Validation R², mean ± half-width of the "
             "95 % t-interval over the seeds. References: non-private Ridge "
             f"{ref['nonprivate']:.4f}, public-only Ridge {ref['public_only']:.4f} "
             f"(1 % of non-private: {0.99 * ref['nonprivate']:.4f}).", ""]

    def emit(title, keep, label):
        lines.extend([f"## {title}", "", f"| {label} | {eps_head} |",
                      "|---|" + "---|" * len(EPSILONS)])
        for key, by in table(rows, keep).items():
            name = {"rule": key[3], "release": key[1], "qp": f"{key[2]:g}"}[
                "rule" if label == "rule" else "release" if label == "release" else "qp"]
            cells = " | ".join(f"{m:.4f} ± {h:.4f}" for m, h in by.values())
            lines.append(f"| {name} | {cells} |")
        lines.append("")

    lib = LIBRARY_RULES[0]  # the library's rule with a public target
    old_rule = "ridge τ, keep τ (until issue 19)"
    lines.extend(["## Before and after issue 19 (QP_WEIGHT 0.5)", "",
                  f"| setting | {eps_head} |", "|---|" + "---|" * len(EPSILONS)])
    for label, target, release, rule in (
            ("target public, until issue 19: X_Qᵀy, ridge τ, keep τ", "public",
             RELEASES[True][1], old_rule),
            ("target public, issue 19's first rules: X_Qᵀ r, ridge τ, keep 0.5τ", "public",
             RELEASES[True][0], "ridge τ, keep 0.5τ"),
            ("target public, since: X_Qᵀ r, ridge max(1, √(κ/0.08)) τ, keep 0.5τ", "public",
             RELEASES[True][0], lib),
            ("target private, until issue 19: ridge τ, keep τ", "private", RELEASES[False][0],
             old_rule),
            ("target private, since: no ridge (floor τ), keep τ", "private",
             RELEASES[False][0], "no ridge (floor τ only), keep τ")):
        by = table(rows, lambda r, t=target, rel=release, ru=rule: (
            r["target"] == t and r["release"] == rel and r["qp_weight"] == 0.5
            and r["rule"] == ru))
        (cells,) = by.values()
        lines.append(f"| {label} | " + " | ".join(f"{m:.4f} ± {h:.4f}" for m, h in cells.values())
                     + " |")
    lines.append("")
    for target, release in (("public", RELEASES[True][0]), ("private", RELEASES[False][0])):
        emit(f"Solver rules, target {target} (release {release}, QP_WEIGHT 0.5)",
             lambda r, t=target, rel=release: (r["target"] == t and r["release"] == rel
                                               and r["qp_weight"] == 0.5), "rule")
    emit("Release with a public target (QP_WEIGHT 0.5; rule: the library's)",
         lambda r: r["target"] == "public" and r["qp_weight"] == 0.5 and r["rule"] == lib,
         "release")
    emit("QP_WEIGHT, target public (residual release; rule: the library's)",
         lambda r: (r["target"] == "public" and r["release"] == RELEASES[True][0]
                    and r["rule"] == lib), "qp")
    emit("QP_WEIGHT, target private (rule: no ridge, keep τ: the library's)",
         lambda r: r["target"] == "private" and r["rule"] == "no ridge (floor τ only), keep τ",
         "qp")
    lines.extend([
        "## Verdict", "",
        "Issue 19's third round (the sections before the fourth round; its public-target "
        "rules are superseded by the fourth round's verdict above, the private-target ones "
        "stand). The library's constants then (`linear_statistics.py`): with a public "
        "target the residual release (+0.7 to +1.7 R² points over X_Qᵀy at ε ≤ 0.3, level at "
        "ε = 1), `KEEP` 0.5 (+0.003 and +0.008 over 1 at ε = 0.3 and 1, level below) and "
        "`RIDGE` 1 (the ridge τ: best at ε ≥ 0.1 among c ∈ {0, 0.25, 0.5, 1, 2, 4}), grown to "
        "max(1, √(κ / 0.08)) with κ = τ / (n B_Q²) where the noise is large (`RIDGE_KAPPA`: "
        "c ≈ 1.7 at ε = 0.03 and 2.75 at ε = 0.01 on this split, where the ridges 2τ-4τ beat τ "
        "and τ fell below the public-only model at ε = 0.01; c = 1 at ε ≥ 0.1); with a "
        "private target `KEEP` 1 and `RIDGE` 0 (no ridge, the floor τ only: +0.004 to +0.009 "
        "over the ridge τ at ε ∈ [0.03, 1]); `QP_WEIGHT` 0.5 for both (unchanged: with a public "
        "target and the κ ridge 0.25 is level at ε ≤ 0.1 (within 0.0011) and worse by 0.002 "
        "and 0.007 at 0.3 and 1). The bias correction of the Schur complement "
        "changes nothing measurable with the library's keep threshold. No rule studied "
        "reaches 1 % of "
        "non-private R² (" + f"{0.99 * ref['nonprivate']:.4f}" + ") at ε ≤ 1: the best, "
        "target public, is about 0.188 at ε = 1.", ""])
    return "\n".join(lines)


def _rows_from_json(saved):
    """The per-seed rows of a stored run (``--report-only``)."""
    rows, clip_rows = [], []
    for res in saved["results"]:
        for eps, values in res["r2_by_seed"].items():
            rows += [dict(target=res["target"], release=res["release"],
                          qp_weight=res["qp_weight"], rule=res["rule"], epsilon=float(eps),
                          seed=seed, r2=v) for seed, v in zip(SEEDS, values)]
    for name, by in saved["this_round"]["r2_by_seed"].items():
        for eps, values in by.items():
            clip_rows += [dict(target="public", release="X_Qᵀ r (residual)", qp_weight=0.5,
                               epsilon=float(eps), seed=seed, rule=name, r2=v)
                          for seed, v in zip(SEEDS, values)]
    return rows, clip_rows


def main(argv=None):
    report_only = "--report-only" in (sys.argv[1:] if argv is None else argv)
    if report_only:  # rewrite the report from the stored JSON (no fit)
        saved = json.loads((RESULTS / "fdp_linear_rules.json").read_text())
        rows, clip_rows = _rows_from_json(saved)
        meta, ref = saved["meta"], saved["reference"]
        clips, oracle_rows = saved["this_round"]["clips"], saved["this_round"]["oracle"]
        for o in oracle_rows.values():
            o["r2"] = tuple(o["r2"])
    else:
        t0 = time.perf_counter()
        rows, ref = study()
        clip_rows, clips = study_clip()
        oracle_rows = oracle()
        d_meta = data()
        meta = dict(date=time.strftime("%Y-%m-%d"),
                    machine=f"{platform.machine()}, Python {platform.python_version()}",
                    n_train=int(d_meta["Xtr"].shape[0]),
                    n_validation=int(d_meta["Xva"].shape[0]), epsilons=EPSILONS, seeds=SEEDS,
                    delta=DELTA, qp_weights=QP_WEIGHTS, rules=RULES,
                    runtime_seconds=time.perf_counter() - t0)
        RESULTS.mkdir(parents=True, exist_ok=True)
        grouped = {}  # one entry per setting: the R² of every seed at every ε
        for r in rows:
            key = (r["target"], r["release"], r["qp_weight"], r["rule"])
            grouped.setdefault(key, {}).setdefault(str(r["epsilon"]), []).append(
                round(r["r2"], 6))
        results = [dict(target=k[0], release=k[1], qp_weight=k[2], rule=k[3], r2_by_seed=v)
                   for k, v in grouped.items()]
        clip_results = {}
        for r in clip_rows:
            clip_results.setdefault(r["rule"], {}).setdefault(str(r["epsilon"]), []).append(
                round(r["r2"], 6))
        (RESULTS / "fdp_linear_rules.json").write_text(json.dumps(
            dict(meta=meta, reference=ref, results=results,
                 this_round=dict(r2_by_seed=clip_results, clips=clips, oracle=oracle_rows)),
            indent=1, ensure_ascii=False))
    md = markdown(rows, ref, meta)
    verdict = md.index("## Verdict")
    md = (md[:verdict] + "\n".join(markdown_clip(clip_rows, clips, oracle_rows, ref)) + "\n"
          + md[verdict:])
    (RESULTS / "fdp_linear_rules.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

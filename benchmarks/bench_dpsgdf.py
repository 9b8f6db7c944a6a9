"""DPSGD-F benchmark: DPSGDClassifier vs DPSGDFClassifier (practical and analysed).

Three experiments, all deterministic given the seeds (every estimator gets an
explicit ``random_state``; the validation splits are fixed permutations):

A. The §4 counter-example of the DPSGD-F paper
   (:func:`sklearn_fdp.datasets.make_dpsgdf_counterexample`): n = 2,000 rows
   ``x = mu e1 ± e2`` with mu = 10,000, ε = 1 (so n < mu / ε), δ = 1e-5,
   hinge loss, seeds 0-19 (the seed shuffles the rows and seeds the fit), on
   both mirrored data sets D' ("plus") and D'' ("minus"). Accuracy is measured
   on the training rows (the data set *is* the population here: the paper's
   quantity is the empirical risk). Lines:

   * DPSGDClassifier on the rows divided by the public bound R = 10,001
     (norm ≤ 1): its defaults, and the best of a grid over learning rate
     and intercept (8 configurations) picked by the mean accuracy over the
     seeds and both data sets — an oracle choice, generous to DP-SGD.
   * DPSGDFClassifier ``variant="practical"``: its defaults (C_F = 1,
     ε_F = 0.05), and the best of a grid over C_F ∈ {1, R}, learning rate and
     ε_F ∈ {0.05, 0.3} (12 configurations), picked the same way.
   * DPSGDFClassifier ``variant="analysed"`` with one fixed configuration:
     ``feature_norm = R``, ``epsilon_mean = 0.3``, ``epsilon_quantile = 0.1``,
     everything else default. Its mean error ``||mean_ - mean||``, number of
     rounds and τ are recorded.

B. Linear classifiers on pixels: MNIST-8k
   (:func:`sklearn_fdp.datasets.load_mnist8k`: 8,000 train / 2,000 test) and
   sklearn's digits (fixed stratified 80/20 train/test split, seed 0). Rows
   are scaled to L2 norm C_F (DPSGD: ``x * C_F / ||x||`` by hand; DPSGD-F
   does it itself), softmax loss, ε ∈ {1, 2}, δ = 1e-5. A validation split
   (20 % of the training part, fixed permutation seed 0) selects, per method
   and ε, the configuration with the best validation accuracy averaged over
   seeds 0-2 (``SELECTION_SEEDS``) from a small grid in the spirit of App.
   C (C_F, batch size, learning rate, epochs; DPSGD-F also ε_F ∈ {0.02,
   0.05}); the selected configuration is then refitted on the whole training
   part with seeds 0-4 and scored on the test part (never used for
   selection). The selection itself is not privacy-accounted (as in the
   paper and every benchmark here).

C. Adult (:func:`sklearn_fdp.datasets.make_adult_preprocessor` features, rows
   of unit norm; train adult.data, test adult.test), ε ∈ {0.5, 1, 2, 4, 8},
   δ = 1e-5, seeds 0-2, every estimator at its defaults (no tuning):
   DPSGDClassifier, DPSGDFClassifier practical (C_F = 1, ε_F = 0.05) and
   analysed (C_F = 1, ε_mean = ε_quantile = 0.05). A diagnostic on a fixed
   80/20 validation split of adult.data (never adult.test) checks how the
   analysed variant's accuracy depends on ``epochs`` (its rows are divided
   by ``sqrt(2) τ``, which shrinks them and so the effective step size).

Writes ``benchmarks/results/dpsgdf.json``, ``benchmarks/results/dpsgdf.md``
and ``docs/figures/bench_dpsgdf.png`` (``--quick``: a smoke run with fewer
seeds and configurations, written to ``dpsgdf_quick.*`` beside them).

Results (in ``benchmarks/results/``): ``dpsgdf.json``, ``dpsgdf.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "DPSGD-F: private feature preprocessing"
"""

import argparse
import itertools
import json
import pathlib
import platform
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from _common import epsilon_ticks, library_fingerprint, save_figure  # benchmarks/ is on sys.path when run as a script
import sklearn_fdp
from sklearn_fdp import DPSGDClassifier, DPSGDFClassifier
from sklearn_fdp.datasets import (load_adult, load_mnist8k, make_adult_preprocessor,
                                  make_dpsgdf_counterexample)

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
FIGURE = ROOT / "docs" / "figures" / "bench_dpsgdf.png"
DELTA = 1e-5

# -- A. counter-example ------------------------------------------------------
CE_N, CE_MU, CE_EPS = 2000, 10000.0, 1.0
CE_R = 10001.0  # public norm bound, >= sqrt(mu**2 + 1)
CE_DPSGD_GRID = {"learning_rate": ["auto", 0.1, 10.0, 1000.0], "fit_intercept": [True, False]}
CE_PRACTICAL_GRID = {"feature_norm": [1.0, CE_R], "learning_rate": ["auto", 0.1, 10.0],
                     "epsilon_mean": [0.05, 0.3]}
CE_ANALYSED = dict(feature_norm=CE_R, epsilon_mean=0.3, epsilon_quantile=0.1)

# -- B. pixels: (C_F, batch_size, learning_rate, epochs), App. C values ------
PIXEL_GRIDS = {
    "MNIST-8k": [(1.0, 256, 0.5, 20), (1.0, 1024, 2.0, 20), (10.0, 512, 0.25, 20),
                 (10.0, 1024, 0.5, 20), (10.0, 2048, 0.5, 40), (100.0, 1024, 0.0625, 20)],
    "digits": [(1.0, 64, 0.5, 20), (1.0, 256, 2.0, 40), (10.0, 128, 0.25, 20),
               (10.0, 256, 0.5, 40), (100.0, 256, 0.0625, 40), (1.0, 128, 1.0, 80)],
}
EPSILON_F_GRID = [0.02, 0.05]
PIXEL_EPSILONS = [1.0, 2.0]
SELECTION_SEEDS = [0, 1, 2]
PAPER_MNIST = {"1.0": {"DPSGD": 87.4, "DPSGD-F": 92.0}, "2.0": {"DPSGD": 89.6, "DPSGD-F": 92.3},
               "non-private": 92.9, "n_train": 60000}

# -- C. Adult -------------------------------------------------------------
ADULT_EPSILONS = [0.5, 1.0, 2.0, 4.0, 8.0]
ADULT_DIAG_EPSILONS = [1.0, 8.0]
ADULT_DIAG_EPOCHS = [10.0, 20.0, 40.0]

ENV = {}


def _grid(grid):
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*grid.values())]


def _mean_std(values):
    return float(np.mean(values)), float(np.std(values))


# -- A ------------------------------------------------------------------------

def experiment_counterexample(seeds, quick):
    """Accuracy on D' and D'' per method/configuration, over ``seeds``."""
    data = {s: make_dpsgdf_counterexample(CE_N, CE_MU, random_state=s) for s in seeds}
    common = dict(loss="hinge", epsilon=CE_EPS, delta=DELTA)

    def run(make, scale):
        out = {"plus": [], "minus": []}
        extra = []
        for s in seeds:
            for v in ("plus", "minus"):
                X, y = data[s][v]
                clf = make(s).fit(X / scale, y)
                assert clf.epsilon_ <= CE_EPS
                out[v].append(float(clf.score(X / scale, y)))
                if isinstance(clf, DPSGDFClassifier) and clf.variant == "analysed":
                    extra.append(dict(seed=s, dataset=v, rounds=clf.mean_rounds_,
                                      radii=clf.mean_radii_.tolist(), tau=clf.quantile_,
                                      mean_error=float(np.linalg.norm(clf.mean_ - X.mean(0))),
                                      epsilon=clf.epsilon_))
                elif isinstance(clf, DPSGDFClassifier):
                    Xs = X / np.linalg.norm(X, axis=1, keepdims=True) * clf.feature_norm_
                    extra.append(dict(seed=s, dataset=v, feature_norm=clf.feature_norm_,
                                      mean_error=float(np.linalg.norm(clf.mean_ - Xs.mean(0))),
                                      spread=float(clf.feature_norm_ / np.sqrt(CE_MU**2 + 1)),
                                      epsilon=clf.epsilon_))
        return dict(accuracy=out, mean={v: float(np.mean(a)) for v, a in out.items()},
                    std={v: float(np.std(a)) for v, a in out.items()}, details=extra)

    lines, grids = {}, {}

    def best(name, configs, make_cfg, scale_of):
        results, chosen = [], None
        for cfg in configs:
            r = run(lambda s, cfg=cfg: make_cfg(cfg, s), scale_of(cfg))
            results.append(dict(config=cfg, mean=r["mean"], std=r["std"]))
            print(f"  [A] {name} {cfg}: D' {r['mean']['plus']:.3f} D'' {r['mean']['minus']:.3f}",
                  flush=True)
            score = (r["mean"]["plus"] + r["mean"]["minus"]) / 2
            if chosen is None or score > chosen[0]:  # first wins ties
                chosen = (score, dict(r, config=cfg))
        grids[name] = results
        return chosen[1]

    dpsgd_grid = _grid(CE_DPSGD_GRID)[: 2 if quick else None]
    prac_grid = _grid(CE_PRACTICAL_GRID)[: 2 if quick else None]
    lines["DPSGDClassifier (defaults)"] = run(
        lambda s: DPSGDClassifier(random_state=s, **common), CE_R)
    lines["DPSGDClassifier (best of grid, oracle)"] = best(
        "DPSGD", dpsgd_grid, lambda cfg, s: DPSGDClassifier(random_state=s, **common, **cfg),
        lambda cfg: CE_R)
    lines["DPSGD-F practical (defaults)"] = run(
        lambda s: DPSGDFClassifier(random_state=s, **common), 1.0)
    lines["DPSGD-F practical (best of grid, oracle)"] = best(
        "practical", prac_grid, lambda cfg, s: DPSGDFClassifier(random_state=s, **common, **cfg),
        lambda cfg: 1.0)
    lines["DPSGD-F analysed (fixed config)"] = run(
        lambda s: DPSGDFClassifier(variant="analysed", random_state=s, **common, **CE_ANALYSED),
        1.0)
    for name, r in lines.items():
        print(f"[A] {name}: D' {r['mean']['plus']:.3f} ± {r['std']['plus']:.3f}, "
              f"D'' {r['mean']['minus']:.3f} ± {r['std']['minus']:.3f}", flush=True)
    return lines, grids


# -- B ------------------------------------------------------------------------

def load_pixels(name):
    if name == "MNIST-8k":
        X, y, Xt, yt = load_mnist8k(return_X_y=True)
    else:
        d = load_digits()
        X, Xt, y, yt = train_test_split(d.data / 16.0, d.target, test_size=0.2,
                                        stratify=d.target, random_state=0)
    perm = np.random.default_rng(0).permutation(len(y))
    cut = int(0.8 * len(y))
    return dict(X=np.ascontiguousarray(X, dtype=np.float64), y=np.asarray(y),
                X_test=np.ascontiguousarray(Xt, dtype=np.float64), y_test=np.asarray(yt),
                fit_idx=np.sort(perm[:cut]), val_idx=np.sort(perm[cut:]))


def _unit(X, C):
    n = np.linalg.norm(X, axis=1, keepdims=True)
    return np.where(n > 0, X * C / np.where(n > 0, n, 1.0), 0.0)


def _make_pixel(method, eps, cfg, seed):
    C_F, batch, lr, epochs, eps_f = cfg
    kw = dict(epsilon=eps, delta=DELTA, batch_size=batch, learning_rate=lr, epochs=epochs,
              random_state=seed)
    if method == "DPSGD":
        return DPSGDClassifier(**kw)
    return DPSGDFClassifier(feature_norm=C_F, epsilon_mean=eps_f, **kw)


def _fit_score(method, eps, cfg, seed, X, y, Xe, ye):
    clf = _make_pixel(method, eps, cfg, seed)
    C_F = cfg[0]
    if method == "DPSGD":  # rows scaled to C_F by hand (DPSGD-F does it itself)
        X, Xe = _unit(X, C_F), _unit(Xe, C_F)
    clf.fit(X, y)
    assert clf.epsilon_ <= eps
    return float(clf.score(Xe, ye)), clf


def experiment_pixels(name, seeds, quick):
    selection_seeds = SELECTION_SEEDS[:1] if quick else SELECTION_SEEDS
    data = load_pixels(name)
    X, y, fi, vi = data["X"], data["y"], data["fit_idx"], data["val_idx"]
    grid = PIXEL_GRIDS[name][: 2 if quick else None]
    configs = {"DPSGD": [(*g, None) for g in grid],
               "DPSGD-F": [(*g, ef) for g in grid for ef in EPSILON_F_GRID[-1 if quick else 0:]]}
    out = dict(n_train=len(y), n_fit=len(fi), n_val=len(vi), n_test=len(data["y_test"]),
               n_features=X.shape[1], selection={}, results={})
    lr = LogisticRegression(max_iter=2000).fit(_unit(X, 1.0), y)
    out["non_private_logreg_test_accuracy"] = float(lr.score(_unit(data["X_test"], 1.0),
                                                             data["y_test"]))
    for eps in PIXEL_EPSILONS:
        for method, cfgs in configs.items():
            vals = []
            for cfg in cfgs:
                accs = [_fit_score(method, eps, cfg, s, X[fi], y[fi], X[vi], y[vi])[0]
                        for s in selection_seeds]
                vals.append(dict(config=cfg, val_accuracy=float(np.mean(accs)),
                                 val_accuracy_per_seed=accs))
                print(f"  [B] {name} ε={eps} {method} {cfg}: val {np.mean(accs):.4f}",
                      flush=True)
            chosen = max(vals, key=lambda v: v["val_accuracy"])  # first wins ties
            accs = [_fit_score(method, eps, chosen["config"], s, X, y, data["X_test"],
                               data["y_test"])[0] for s in seeds]
            out["selection"][f"{method} ε={eps}"] = dict(grid=vals, chosen=chosen)
            out["results"][f"{method} ε={eps}"] = dict(
                epsilon=eps, method=method, config=chosen["config"], test_accuracy=accs,
                mean=_mean_std(accs)[0], std=_mean_std(accs)[1])
            print(f"[B] {name} ε={eps} {method}: chosen {chosen['config']} -> test "
                  f"{np.mean(accs):.4f} ± {np.std(accs):.4f}", flush=True)
    return out


# -- C ------------------------------------------------------------------------

def experiment_adult(epsilons, seeds):
    X_train, y_train, X_test, y_test = load_adult(return_X_y=True)
    pre = make_adult_preprocessor(scale_rows="l2").fit(X_train)
    Xtr = np.ascontiguousarray(pre.transform(X_train), dtype=np.float64)
    Xte = np.ascontiguousarray(pre.transform(X_test), dtype=np.float64)
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    makers = {
        "DPSGDClassifier (defaults)": lambda e, s: DPSGDClassifier(
            epsilon=e, delta=DELTA, random_state=s),
        "DPSGD-F practical (C_F=1, ε_F=0.05)": lambda e, s: DPSGDFClassifier(
            epsilon=e, delta=DELTA, random_state=s),
        "DPSGD-F analysed (C_F=1, ε_mean=ε_quantile=0.05)": lambda e, s: DPSGDFClassifier(
            variant="analysed", epsilon=e, delta=DELTA, epsilon_mean=0.05,
            epsilon_quantile=0.05, random_state=s),
    }
    out = {}
    for name, make in makers.items():
        rows = {}
        for eps in epsilons:
            accs = []
            for s in seeds:
                clf = make(eps, s).fit(Xtr, y_train)
                assert clf.epsilon_ <= eps
                accs.append(float(clf.score(Xte, y_test)))
            rows[str(eps)] = dict(test_accuracy=accs, mean=float(np.mean(accs)),
                                  std=float(np.std(accs)))
            print(f"[C] Adult {name} ε={eps}: {np.mean(accs):.4f} ± {np.std(accs):.4f}",
                  flush=True)
        out[name] = rows
    lr = LogisticRegression(max_iter=2000).fit(Xtr, y_train)
    out["LogisticRegression (non-private)"] = {"const": dict(mean=float(lr.score(Xte, y_test)))}
    return out


def adult_validation_diagnostic(epsilons, seeds, epochs_grid):
    """Validation accuracy (80/20 split of adult.data) vs epochs, practical and analysed."""
    X_train, y_train, _, _ = load_adult(return_X_y=True)
    X = np.ascontiguousarray(
        make_adult_preprocessor(scale_rows="l2").fit_transform(X_train), dtype=np.float64)
    y = np.asarray(y_train)
    perm = np.random.default_rng(0).permutation(len(y))
    cut = int(0.8 * len(y))
    fi, vi = perm[:cut], perm[cut:]
    out = {}
    for variant in ("practical", "analysed"):
        for eps in epsilons:
            for epochs in epochs_grid:
                accs, taus = [], []
                for s in seeds:
                    clf = DPSGDFClassifier(variant=variant, epsilon=eps, delta=DELTA,
                                           epochs=epochs, random_state=s).fit(X[fi], y[fi])
                    accs.append(float(clf.score(X[vi], y[vi])))
                    taus.append(getattr(clf, "quantile_", None))
                key = f"{variant} ε={eps} epochs={epochs}"
                out[key] = dict(variant=variant, epsilon=eps, epochs=epochs,
                                val_accuracy=accs, mean=float(np.mean(accs)), tau=taus)
                print(f"[C'] Adult validation {key}: {np.mean(accs):.4f}", flush=True)
    return out


# -- output -------------------------------------------------------------------

def markdown(meta, ce, ce_grids, pixels, adult, adult_val):
    md = [f"# DPSGD-F (generated by `benchmarks/bench_dpsgdf.py` on {meta['date']}, "
          f"{meta['machine']}, {meta['runtime_seconds'] / 60:.1f} min"
          f"{', QUICK smoke run' if meta['quick'] else ''})", ""]
    md += ["## A. §4 counter-example (n = 2,000, μ = 10,000, ε = 1, δ = 1e-5, hinge loss)", "",
           f"Training accuracy (the data set is the population), mean ± std over seeds "
           f"{meta['ce_seeds'][0]}-{meta['ce_seeds'][-1]} ({len(meta['ce_seeds'])} seeds). "
           "Chance is 0.5. \"Oracle\" lines pick the grid point with the best mean accuracy "
           "over both data sets *after* seeing it (generous to the baseline).", "",
           "| method | D′ (plus) | D″ (minus) | configuration |", "|---|---|---|---|"]
    for name, r in ce.items():
        cfg = r.get("config", CE_ANALYSED if "analysed" in name else "defaults")
        md.append(f"| {name} | {r['mean']['plus']:.3f} ± {r['std']['plus']:.3f} | "
                  f"{r['mean']['minus']:.3f} ± {r['std']['minus']:.3f} | `{cfg}` |")
    md += ["", f"Oracle grids: DPSGDClassifier `{CE_DPSGD_GRID}` (rows divided by R = {CE_R:g}); "
           f"DPSGD-F practical `{CE_PRACTICAL_GRID}`; every other parameter at its default."]
    ana = ce["DPSGD-F analysed (fixed config)"]["details"]
    prac = ce["DPSGD-F practical (defaults)"]["details"]
    err = [d["mean_error"] for d in ana]
    md += ["", f"Analysed variant: {ana[0]['rounds']} rounds of the coarse-to-fine mean; "
           f"‖mean_ − mean‖ median {np.median(err):.3g} (max {np.max(err):.3g}) for a data "
           f"diameter of 2 and a norm bound R = {CE_R:g}; τ median "
           f"{np.median([d['tau'] for d in ana]):.3g}; ε_ max "
           f"{max(d['epsilon'] for d in ana):.4f}.",
           f"Practical variant (defaults, rows normalised to C_F = 1): ‖mean_ − mean‖ median "
           f"{np.median([d['mean_error'] for d in prac]):.3g}, while the label-carrying "
           f"spread of the normalised rows is {prac[0]['spread']:.3g}.", ""]
    md += ["## B. Linear classifier on pixels (ε ∈ {1, 2}, δ = 1e-5)", "",
           "Test accuracy of the configuration chosen on the validation split (best mean "
           f"validation accuracy over seeds {meta['selection_seeds']}), "
           f"refitted on the whole training part, mean ± std over seeds {meta['pixel_seeds']}.",
           "", "| data (n_train) | ε | DPSGD | DPSGD-F | DPSGD config (C_F, B, lr, epochs) | "
           "DPSGD-F config (…, ε_F) |", "|---|---|---|---|---|---|"]
    paired = []
    for name, res in pixels.items():
        for eps in PIXEL_EPSILONS:
            a, b = res["results"][f"DPSGD ε={eps}"], res["results"][f"DPSGD-F ε={eps}"]
            md.append(f"| {name} ({res['n_train']}) | {eps:g} | {a['mean']:.4f} ± {a['std']:.4f}"
                      f" | {b['mean']:.4f} ± {b['std']:.4f} | {tuple(a['config'][:4])} | "
                      f"{tuple(b['config'])} |")
        for eps in PIXEL_EPSILONS:
            a = res["results"][f"DPSGD ε={eps}"]["test_accuracy"]
            b = res["results"][f"DPSGD-F ε={eps}"]["test_accuracy"]
            diff = np.subtract(b, a)
            paired.append(f"{name} ε = {eps:g}: {np.mean(diff):+.4f} ± {np.std(diff):.4f}, "
                          f"DPSGD-F ahead on {int(np.sum(diff > 0))} of {len(diff)} seeds")
        md.append(f"| {name}: non-private LogisticRegression | – | "
                  f"{res['non_private_logreg_test_accuracy']:.4f} | | | |")
    p = PAPER_MNIST
    md += [f"| paper, MNIST (60,000 train; best of a larger grid) | 1 | "
           f"{p['1.0']['DPSGD'] / 100:.3f}"
           f" | {p['1.0']['DPSGD-F'] / 100:.3f} | | |",
           f"| paper, MNIST (60,000 train) | 2 | {p['2.0']['DPSGD'] / 100:.3f} | "
           f"{p['2.0']['DPSGD-F'] / 100:.3f} | | |",
           f"| paper, MNIST: non-private SGD | – | {p['non-private'] / 100:.3f} | | | |", "",
           "MNIST-8k trains on 8,000 images (6,400 during selection), 7.5× fewer than the "
           "paper's 60,000: at a fixed ε the noise per example is ~7.5× larger relative to "
           "the signal, so lower accuracies and smaller DPSGD-F gains are expected. The "
           "grids here are 6 (DPSGD) and 12 (DPSGD-F) points instead of App. C's thousands, "
           "and selection is on a validation split, not on the test set.", "",
           "Grids (C_F, batch size, learning rate, epochs), the same for both methods; "
           f"DPSGD-F also ε_F ∈ {EPSILON_F_GRID}:", ""] + [
           f"* {name}: {', '.join(str(g) for g in grid)}" for name, grid in PIXEL_GRIDS.items()
    ] + ["",
           "Per-seed difference DPSGD-F − DPSGD (both fitted with `random_state` = seed on "
           "the same split; mean ± std over seeds):", ""] + [f"* {line}" for line in paired] + [""]
    eps_cols = [k for k in next(iter(adult.values())) if k != "const"]
    md += ["## C. Adult (make_adult_preprocessor features, rows of unit norm; test = adult.test)",
           "", f"Every estimator at its defaults, mean ± std over seeds {meta['adult_seeds']}; "
           "δ = 1e-5.", "",
           "| method | " + " | ".join(f"ε = {e}" for e in eps_cols) + " |",
           "|---|" + "---|" * len(eps_cols)]
    for name, rows in adult.items():
        if "const" in rows:
            md.append(f"| {name} | " + " | ".join(f"{rows['const']['mean']:.4f}"
                                                 for _ in eps_cols) + " |")
            continue
        md.append(f"| {name} | " + " | ".join(f"{rows[e]['mean']:.4f} ± {rows[e]['std']:.4f}"
                                             for e in eps_cols) + " |")
    epochs = sorted({v["epochs"] for v in adult_val.values()})
    md += ["", "Validation diagnostic (80/20 split of adult.data, seed 0 permutation; adult.test "
           f"unused; seeds {meta['adult_seeds'][:3]}): validation accuracy against `epochs`, "
           "everything else at its defaults.", "",
           "| variant, ε | " + " | ".join(f"epochs = {e:g}" for e in epochs) + " |",
           "|---|" + "---|" * len(epochs)]
    for variant in ("practical", "analysed"):
        for eps in ADULT_DIAG_EPSILONS:
            row = [adult_val.get(f"{variant} ε={eps} epochs={e}") for e in epochs]
            md.append(f"| {variant}, ε = {eps:g} | " + " | ".join(
                f"{r['mean']:.4f}" if r else "" for r in row) + " |")
    taus = [t for v in adult_val.values() if v["variant"] == "analysed" for t in v["tau"]]
    md += ["", f"τ of the analysed variant on Adult (rows of unit norm): median "
           f"{np.median(taus):.3g}, so its rows are divided by √2 τ ≈ "
           f"{np.sqrt(2) * np.median(taus):.2g}.",
           ""]
    return "\n".join(md)


def plot(ce, pixels, adult, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sklearn_fdp.plotting import plot_privacy_utility

    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    ax = axes[0]
    names = list(ce)
    x = np.arange(len(names))
    for k, (v, label) in enumerate([("plus", "D' (plus)"), ("minus", "D'' (minus)")]):
        ax.bar(x + (k - 0.5) * 0.38, [ce[n]["mean"][v] for n in names], 0.38,
               yerr=[ce[n]["std"][v] for n in names], capsize=3, label=label)
    ax.axhline(0.5, color="k", ls=":", lw=1)
    ax.axhline(0.9, color="g", ls="--", lw=1)
    ax.set_xticks(x, [n.replace(" (", "\n(") for n in names], fontsize=6)
    ax.set_ylabel("training accuracy")
    ax.set_title("§4 counter-example (n=2000, μ=1e4, ε=1)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    labels, a_vals, b_vals, a_err, b_err = [], [], [], [], []
    for name, res in pixels.items():
        for eps in PIXEL_EPSILONS:
            a, b = res["results"][f"DPSGD ε={eps}"], res["results"][f"DPSGD-F ε={eps}"]
            labels.append(f"{name}\nε={eps:g}")
            a_vals.append(a["mean"]), b_vals.append(b["mean"])
            a_err.append(a["std"]), b_err.append(b["std"])
    x = np.arange(len(labels))
    ax.bar(x - 0.19, a_vals, 0.38, yerr=a_err, capsize=3, label="DPSGD")
    ax.bar(x + 0.19, b_vals, 0.38, yerr=b_err, capsize=3, label="DPSGD-F (practical)")
    ax.set_xticks(x, labels, fontsize=7)
    lo = min(a_vals + b_vals)
    ax.set_ylim(max(0.0, lo - 0.1), 1.0)
    ax.set_ylabel("test accuracy")
    ax.set_title("pixels, validation-selected config, 5 seeds", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[2]
    runs = [dict(method=name, epsilon=float(eps), seed=seed, accuracy=acc)
            for name, rows in adult.items() if "const" not in rows
            for eps, row in rows.items() for seed, acc in enumerate(row["test_accuracy"])]
    baselines = {name: rows["const"]["mean"] for name, rows in adult.items() if "const" in rows}
    plot_privacy_utility(runs, ax=ax, baselines=baselines, error="std",
                         styles={name: {"color": "k", "lw": 1} for name in baselines},
                         xlabel="ε (δ = 1e-5)", ylabel="test accuracy (adult.test)",
                         title="Adult, defaults", legend={"fontsize": 6, "loc": "lower right"})
    ax.title.set_fontsize(9)
    epsilon_ticks(ax, ADULT_EPSILONS)
    save_figure(fig, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 2 seeds, 2 grid points, 2 ε on Adult; writes "
                             "dpsgdf_quick.* and leaves the real results alone")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw docs/figures/bench_dpsgdf.png from results/dpsgdf.json")
    args = parser.parse_args(argv)
    if args.plot_only:
        saved = json.loads((RESULTS / "dpsgdf.json").read_text())
        plot(saved["counterexample"]["lines"], saved["pixels"], saved["adult"], FIGURE)
        return
    quick = args.quick
    ce_seeds = list(range(2 if quick else 20))
    pixel_seeds = list(range(2 if quick else 5))
    adult_seeds = list(range(1 if quick else 5))
    adult_eps = ADULT_EPSILONS[1:3] if quick else ADULT_EPSILONS
    t0 = time.perf_counter()
    fingerprint = library_fingerprint()

    ce, ce_grids = experiment_counterexample(ce_seeds, quick)
    pixels = {name: experiment_pixels(name, pixel_seeds, quick) for name in PIXEL_GRIDS}
    adult = experiment_adult(adult_eps, adult_seeds)
    adult_val = adult_validation_diagnostic(ADULT_DIAG_EPSILONS, adult_seeds[:3],
                                            ADULT_DIAG_EPOCHS[:2 if quick else None])
    runtime = time.perf_counter() - t0

    meta = dict(date=time.strftime("%Y-%m-%d"),
                machine=f"{platform.machine()}, Python {platform.python_version()}",
                sklearn_fdp=sklearn_fdp.__version__, delta=DELTA, quick=quick,
                ce_seeds=ce_seeds, pixel_seeds=pixel_seeds, adult_seeds=adult_seeds,
                selection_seeds=SELECTION_SEEDS[:1] if quick else SELECTION_SEEDS,
                adult_diagnostic=dict(epsilons=ADULT_DIAG_EPSILONS, epochs=ADULT_DIAG_EPOCHS),
                grids=dict(counterexample_dpsgd=CE_DPSGD_GRID,
                           counterexample_practical=CE_PRACTICAL_GRID,
                           counterexample_analysed=CE_ANALYSED,
                           pixels=PIXEL_GRIDS, epsilon_f=EPSILON_F_GRID),
                paper_mnist=PAPER_MNIST, runtime_seconds=runtime, library=fingerprint)
    stem = "dpsgdf_quick" if quick else "dpsgdf"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(dict(
        meta=meta, counterexample=dict(lines=ce, grids=ce_grids), pixels=pixels, adult=adult,
        adult_validation_diagnostic=adult_val),
        indent=1, default=str))
    (RESULTS / f"{stem}.md").write_text(markdown(meta, ce, ce_grids, pixels, adult, adult_val))
    plot(ce, pixels, adult, RESULTS / "bench_dpsgdf_quick.png" if quick else FIGURE)
    print(f"done in {runtime / 60:.1f} min -> {RESULTS / stem}.md", flush=True)


if __name__ == "__main__":
    main()

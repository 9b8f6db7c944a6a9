"""AdaMix benchmark: a few public records mixed with many private ones.

Data sets (rows scaled to unit L2 norm, a data-independent map):

* sklearn's digits: fixed stratified 75/25 train/test split (seed 0); 5
  public records per class drawn from the training part (50 public, ~1,300
  private), a fresh draw per seed.
* MNIST-8k (:func:`sklearn_fdp.datasets.load_mnist8k`, pixel features, its
  fixed 8,000/2,000 split); 5 public records per class (50 public, 7,950
  private).
* Adult (:func:`sklearn_fdp.datasets.make_adult_preprocessor` features;
  train adult.data, test adult.test); 1 % of the training rows public
  (325 public, 32,236 private).

ε ∈ {1, 3, 8}, δ = 1e-5, seeds 0-2 (the seed draws the public records and
seeds every fit). Lines:

* public-only: the publicly pretrained weights ``w_ref`` (200 full-batch GD
  steps on the public records; the same for every AdaMix line of a seed);
* NoisyGD (``projection=False, adaptive_clipping=False``), +projection
  (``adaptive_clipping=False``), +adaptive clipping (``projection=False``),
  AdaMix (both), all :class:`sklearn_fdp.AdaMixClassifier` with σ = 20 and
  the number of steps calibrated to ε, public + private rows;
* AdaMix (theory): ``variant="theory"`` (supplement Alg. 3) with
  ``max_grad_norm`` = the Lipschitz bound of the log loss on unit rows with an
  intercept (sqrt(2) binary, 2 softmax) and λ = 1e-2;
* DPSGDClassifier on the private rows only, at its defaults;
* non-private: :class:`~sklearn.linear_model.LogisticRegression` on all
  training rows (C ∈ {1, 10, 100, 1000} chosen on the validation split below).

Hyper-parameters: everything is at the estimators' defaults (fixed a priori,
the defaults themselves were chosen on validation splits of the training
parts of digits and MNIST-8k), except the private-phase learning rate of the
four AdaMix-family lines, which is chosen per (data set, line, ε) from
``{1, 4, 16} x`` the ``"auto"`` rate on a validation split carved from the
*training* part (20 %, fixed permutation, public records drawn from the
remaining 80 %, seed 0), then refitted on the whole training part. The test
parts are never used for any choice. The selection itself is not
privacy-accounted (as in the paper and every benchmark here).

Also reported: the ablation box of the supplement's Fig. 5 (relative test
error decrease of +projection, +adaptive clipping and AdaMix over NoisyGD,
over data sets, ε and seeds) and the per-instance ε (Prop. 14) of every
private training record for NoisyGD vs AdaMix at ε = 3, seed 0 (Fig. 14-18
style; ``store_iterates=True`` and ``per_instance_epsilon(X, y, public_mask)``).
The pDP numbers are ex-post figures computed from the private data: fine for a
benchmark on public data sets, not for release on real private data.

Run with ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
NUMBA_NUM_THREADS=1``. Writes ``benchmarks/results/adamix.{json,md}`` and
``docs/figures/bench_adamix{,_ablation,_pdp}.png`` (``--quick``: one seed,
ε = 3, digits and Adult only, written to ``adamix_quick.*`` beside them).

Results (in ``benchmarks/results/``): ``adamix.json``, ``adamix.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "AdaMix: a few public records, many private ones"
"""

import argparse
import json
import math
import pathlib
import platform
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import Normalizer

from _common import library_fingerprint  # benchmarks/ is on sys.path when run as a script
import sklearn_fdp
from sklearn_fdp import AdaMixClassifier, DPSGDClassifier
from sklearn_fdp._mechanisms.adamix import _AUTO_LR_FACTOR, _smoothness
from sklearn_fdp.datasets import load_adult, load_mnist8k, make_adult_preprocessor

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
FIGURES = ROOT / "docs" / "figures"
DELTA = 1e-5
EPSILONS = [1.0, 3.0, 8.0]
SEEDS = [0, 1, 2]
LR_MULTIPLIERS = [1.0, 4.0, 16.0]
PDP_EPSILON = 3.0
ABLATION = {
    "NoisyGD": dict(projection=False, adaptive_clipping=False),
    "+projection": dict(adaptive_clipping=False),
    "+adaptive clipping": dict(projection=False),
    "AdaMix": dict(),
}
LINES = ["public-only", *ABLATION, "AdaMix (theory)", "DPSGD (private rows)", "non-private"]
THEORY_LAMBDA = 1e-2


# -- data ----------------------------------------------------------------------


def load(name):
    """``(X_train, y_train, X_test, y_test, public_rule)`` with unit-norm rows."""
    if name == "digits":
        X, y = load_digits(return_X_y=True)
        X, Xt, y, yt = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
        norm = Normalizer()
        return norm.fit_transform(X), y, norm.transform(Xt), yt, ("per_class", 5)
    if name == "MNIST-8k":
        X, y, Xt, yt = load_mnist8k(return_X_y=True)
        norm = Normalizer()
        return norm.fit_transform(X), y, norm.transform(Xt), yt, ("per_class", 5)
    if name == "Adult":
        X, y, Xt, yt = load_adult(return_X_y=True)
        prep = make_adult_preprocessor(scale_rows="l2")
        return prep.fit_transform(X), np.asarray(y), prep.transform(Xt), np.asarray(yt), \
            ("fraction", 0.01)
    raise ValueError(name)


def public_mask(y, rule, seed):
    rng = np.random.default_rng(1000 + seed)
    mask = np.zeros(len(y), dtype=bool)
    kind, value = rule
    if kind == "per_class":
        for c in np.unique(y):
            mask[rng.choice(np.flatnonzero(y == c), value, replace=False)] = True
    else:
        mask[rng.choice(len(y), max(1, round(value * len(y))), replace=False)] = True
    return mask


def theory_lipschitz(n_classes):
    """Lipschitz bound of the log loss for rows of norm <= 1 plus an intercept."""
    return math.sqrt(2.0) * (1.0 if n_classes == 2 else math.sqrt(2.0))


def public_only_score(clf, X, y):
    scores = X @ clf.pretrained_coef_.T + clf.pretrained_intercept_
    pred = (scores[:, 0] > 0).astype(int) if scores.shape[1] == 1 else scores.argmax(axis=1)
    return float(np.mean(clf.classes_[pred] == y))


# -- one data set --------------------------------------------------------------


def auto_learning_rate(est, X_pub, n_outputs):
    """What ``learning_rate="auto"`` gives ``est`` on these public rows (``4 / β``)."""
    return _AUTO_LR_FACTOR / _smoothness(np.asarray(X_pub, dtype=np.float64), n_outputs,
                                         est.get_params())


def select_learning_rates(X, y, rule, epsilons):
    """Per (line, ε): the multiplier of the auto rate with the best validation accuracy."""
    Xa, Xv, ya, yv = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    mask = public_mask(ya, rule, 0)
    choice, table = {}, {}
    for eps in epsilons:
        for line, params in ABLATION.items():
            base = AdaMixClassifier(epsilon=eps, delta=DELTA, random_state=0, **params)
            auto = auto_learning_rate(base, Xa[mask], 1 if len(np.unique(y)) == 2
                                      else len(np.unique(y)))
            accs = []
            for mult in LR_MULTIPLIERS:
                clf = AdaMixClassifier(epsilon=eps, delta=DELTA, random_state=0,
                                       learning_rate=auto * mult, **params)
                accs.append(clf.fit(Xa, ya, public_mask=mask).score(Xv, yv))
            best = int(np.argmax(accs))
            choice[(line, eps)] = LR_MULTIPLIERS[best]
            table[f"{line} | {eps:g}"] = dict(zip(map(str, LR_MULTIPLIERS), accs))
    return choice, table


def run_dataset(name, epsilons, seeds):
    t0 = time.perf_counter()
    X, y, Xt, yt, rule = load(name)
    n_classes = len(np.unique(y))
    n_outputs = 1 if n_classes == 2 else n_classes
    lr_choice, lr_table = select_learning_rates(X, y, rule, epsilons)
    print(f"[{name}] learning rates chosen in {time.perf_counter() - t0:.0f} s", flush=True)
    acc = {line: {str(e): [] for e in epsilons} for line in LINES}
    pdp, info = {}, {}
    Xa, Xv, ya, yv = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    best_C = max([1.0, 10.0, 100.0, 1000.0], key=lambda C: LogisticRegression(
        C=C, max_iter=3000).fit(Xa, ya).score(Xv, yv))
    nonpriv_acc = float(LogisticRegression(C=best_C, max_iter=3000).fit(X, y).score(Xt, yt))
    for seed in seeds:
        mask = public_mask(y, rule, seed)
        for eps in epsilons:
            key = str(eps)
            for line, params in ABLATION.items():
                base = AdaMixClassifier(**params)
                lr = auto_learning_rate(base, X[mask], n_outputs) * lr_choice[(line, eps)]
                # The pDP report recomputes the per-record figures along the stored
                # trajectory (storing it changes nothing else in the fit).
                pdp_fit = (eps == PDP_EPSILON and seed == seeds[0]
                           and line in ("NoisyGD", "AdaMix"))
                clf = AdaMixClassifier(epsilon=eps, delta=DELTA, random_state=seed,
                                       learning_rate=lr, store_iterates=pdp_fit, **params)
                clf.fit(X, y, public_mask=mask)
                acc[line][key].append(float(clf.score(Xt, yt)))
                assert clf.epsilon_ <= eps
                if line == "AdaMix":
                    acc["public-only"][key].append(public_only_score(clf, Xt, yt))
                    info.setdefault(key, dict(steps=clf.steps_, epsilon_spent=clf.epsilon_,
                                              n_public=clf.n_public_,
                                              n_private=clf.n_private_,
                                              mean_subspace_dim=float(
                                                  np.mean(clf.subspace_dims_)),
                                              tau_first=float(clf.clip_thresholds_[0]),
                                              tau_last=float(clf.clip_thresholds_[-1])))
                if pdp_fit:
                    pdp[line] = np.round(clf.per_instance_epsilon(X, y, public_mask=mask),
                                         4).tolist()
                    del clf.iterates_
            theory = AdaMixClassifier(epsilon=eps, delta=DELTA, random_state=seed,
                                      variant="theory", l2_regularization=THEORY_LAMBDA,
                                      max_grad_norm=theory_lipschitz(n_classes))
            acc["AdaMix (theory)"][key].append(
                float(theory.fit(X, y, public_mask=mask).score(Xt, yt)))
            dpsgd = DPSGDClassifier(epsilon=eps, delta=DELTA, random_state=seed)
            acc["DPSGD (private rows)"][key].append(
                float(dpsgd.fit(X[~mask], y[~mask]).score(Xt, yt)))
            acc["non-private"][key].append(nonpriv_acc)
            print(f"[{name}] seed {seed} ε={eps:g}: " + ", ".join(
                f"{line} {acc[line][key][-1]:.3f}" for line in LINES), flush=True)
    return name, dict(accuracy=acc, lr_multiplier={f"{k[0]} | {k[1]:g}": v
                                                   for k, v in lr_choice.items()},
                      lr_validation=lr_table, pdp_epsilon3_seed0=pdp, fit_info=info,
                      n_train=len(y), n_test=len(yt), n_features=X.shape[1],
                      n_classes=n_classes, nonprivate_C=best_C,
                      seconds=time.perf_counter() - t0)


def reconstruction_diagnostic(name, seed=0):
    """How much of the private gradients the public subspaces keep (supplement Fig. 6).

    At the publicly pretrained weights ``w_ref`` (seed 0's public draw), the
    relative reconstruction error ``‖g_i − U Uᵀ g_i‖ / ‖g_i‖`` of every
    private per-example gradient, averaged (weighted by ``‖g_i‖²``, i.e. the
    share of the private gradients' energy lost), for the feature subspace
    (the default), the paper's gradient subspace, and a random subspace of the
    feature subspace's dimension.
    """
    from sklearn_fdp._engine import LinearLoss

    X, y, _, _, rule = load(name)
    mask = public_mask(y, rule, seed)
    clf = AdaMixClassifier(epsilon=1.0, delta=DELTA, random_state=seed)
    clf.fit(X, y, public_mask=mask)
    classes = list(clf.classes_)
    y_idx = np.array([classes.index(v) for v in y])
    n_out = clf.pretrained_coef_.shape[0]
    theta = np.vstack([clf.pretrained_coef_.T, clf.pretrained_intercept_[None, :]])
    Xt = np.hstack([X, np.ones((len(X), 1))])
    R = LinearLoss("log_loss", n_out).residual(Xt @ theta,
                                               y_idx if n_out > 1 else y_idx.astype(float))
    pub, priv = mask, ~mask
    rng = np.random.default_rng(0)
    # Feature subspace: V = basis of the public rows; ‖(V Vᵀ x) rᵀ‖ = ‖Vᵀ x‖ ‖r‖.
    _, sv, Vt = np.linalg.svd(Xt[pub], full_matrices=False)
    V = Vt[: int(np.sum(sv**2 > 1e-10 * sv[0] ** 2))].T
    gnorm2 = np.einsum("ij,ij->i", Xt[priv], Xt[priv]) * np.einsum("ij,ij->i", R[priv], R[priv])
    kept_feature = np.sum((Xt[priv] @ V) ** 2, axis=1) * np.einsum("ij,ij->i", R[priv], R[priv])
    # Gradient subspace via the public Gram matrix (rank <= n_public).
    Rp = R[pub]
    gram = (Xt[pub] @ Xt[pub].T) * (Rp @ Rp.T)
    ev, A = np.linalg.eigh(gram)
    keep = ev > 1e-10 * ev.max()
    A = A[:, keep] / np.sqrt(ev[keep])
    coords = ((Xt[pub] @ Xt[priv].T) * (Rp @ R[priv].T)).T @ A
    kept_gradient = np.sum(coords**2, axis=1)
    # Random subspace with as many dimensions as the feature subspace.
    D = Xt.shape[1] * n_out
    k = V.shape[1] * n_out
    Q, _ = np.linalg.qr(rng.standard_normal((D, min(k, D))))
    G = np.einsum("ia,ib->iab", Xt[priv], R[priv]).reshape(int(priv.sum()), -1) \
        if int(priv.sum()) * D <= 4e7 else None
    if G is None:  # large: subsample the records for the random baseline
        idx = rng.choice(int(priv.sum()), 4000, replace=False)
        G = np.einsum("ia,ib->iab", Xt[priv][idx], R[priv][idx]).reshape(len(idx), -1)
    kept_random = np.sum((G @ Q) ** 2, axis=1)
    total_random = np.sum(G**2, axis=1)
    return dict(
        dims=dict(full=D, feature=k, gradient=int(A.shape[1]), random=int(Q.shape[1])),
        energy_lost=dict(feature=float(1 - kept_feature.sum() / gnorm2.sum()),
                         gradient=float(1 - kept_gradient.sum() / gnorm2.sum()),
                         random=float(1 - kept_random.sum() / total_random.sum())),
    )


# -- summaries ------------------------------------------------------------------


def ablation_decrease(res):
    """Relative test error decrease over NoisyGD, per (data set, ε, seed)."""
    out = {line: [] for line in ["+projection", "+adaptive clipping", "AdaMix"]}
    for data in res.values():
        acc = data["accuracy"]
        for key, base in acc["NoisyGD"].items():
            for i, a0 in enumerate(base):
                err0 = 1.0 - a0
                for line in out:
                    out[line].append((err0 - (1.0 - acc[line][key][i])) / err0)
    return out


def checks(res):
    """The issue's claims, with the numbers (mean over seeds)."""
    rows = []
    for name, data in res.items():
        acc = data["accuracy"]
        for key in acc["AdaMix"]:
            m = {line: float(np.mean(acc[line][key])) for line in LINES}
            rows.append(dict(dataset=name, epsilon=key, adamix=m["AdaMix"],
                             ge_noisygd=m["AdaMix"] >= m["NoisyGD"],
                             ge_public=m["AdaMix"] >= m["public-only"],
                             ge_dpsgd=m["AdaMix"] >= m["DPSGD (private rows)"],
                             noisygd=m["NoisyGD"], public=m["public-only"],
                             dpsgd=m["DPSGD (private rows)"]))
    return rows


def markdown(meta, res, ablation, check_rows):
    lines = ["# AdaMix benchmark", "",
             f"Generated by `benchmarks/bench_adamix.py` on {meta['date']} ({meta['machine']}, "
             f"{meta['runtime_seconds'] / 60:.1f} min{', QUICK run' if meta['quick'] else ''}). "
             f"δ = {DELTA:g}, σ = 20, seeds {meta['seeds']}; test accuracy, mean ± std over "
             "seeds. Public records: 5 per class (digits, MNIST-8k), 1 % of rows (Adult). "
             "Learning rates of the four AdaMix-family lines chosen per (data set, line, ε) "
             "on a validation split of the training part; everything else at its defaults. "
             "The test split is never used for a choice.", ""]
    for name, data in res.items():
        eps_keys = list(data["accuracy"]["AdaMix"])
        lines += [f"## {name} (n_train = {data['n_train']}, d = {data['n_features']}, "
                  f"{data['n_classes']} classes)", "",
                  "| line | " + " | ".join(f"ε = {float(k):g}" for k in eps_keys) + " |",
                  "|---|" + "---|" * len(eps_keys)]
        for line in LINES:
            cells = []
            for k in eps_keys:
                v = data["accuracy"][line][k]
                cells.append(f"{np.mean(v):.3f} ± {np.std(v):.3f}")
            lines.append(f"| {line} | " + " | ".join(cells) + " |")
        info = data["fit_info"]
        lines += ["", "Steps T per ε: " + ", ".join(
            f"ε = {float(k):g}: T = {v['steps']} (ε spent {v['epsilon_spent']:.4f}, "
            f"mean noise dim {v['mean_subspace_dim']:.0f}, τ {v['tau_first']:.3f} → "
            f"{v['tau_last']:.3f})" for k, v in info.items()) + ".",
                  "", "Learning-rate multiplier chosen on validation: " + ", ".join(
                      f"{k}: ×{v:g}" for k, v in data["lr_multiplier"].items()) + ".", ""]
        if data["pdp_epsilon3_seed0"]:
            lines.append(f"Per-instance ε at ε = {PDP_EPSILON:g} (seed 0, "
                         "every private training record):")
            lines.append("")
            lines.append("| line | median | 10 % | 90 % | max | share ≥ 0.99 × max |")
            lines.append("|---|---|---|---|---|---|")
            for line, vals in data["pdp_epsilon3_seed0"].items():
                v = np.asarray(vals)
                lines.append(f"| {line} | {np.median(v):.3f} | {np.percentile(v, 10):.3f} | "
                             f"{np.percentile(v, 90):.3f} | {v.max():.3f} | "
                             f"{np.mean(v >= 0.99 * v.max()):.2f} |")
            lines.append("")
    recon = meta.get("reconstruction")
    if recon:
        lines += ["## Share of the private gradients lost by the projection", "",
                  "At the publicly pretrained weights (seed 0): 1 − Σ‖U Uᵀ g_i‖² / Σ‖g_i‖² "
                  "over the private records (supplement Fig. 6 in spirit).", "",
                  "| data set | full dim | feature subspace | gradient subspace (paper) | "
                  "random subspace, feature's dim |", "|---|---|---|---|---|"]
        for name, r in recon.items():
            d, e = r["dims"], r["energy_lost"]
            lines.append(f"| {name} | {d['full']} | {e['feature']:.3f} (dim {d['feature']}) | "
                         f"{e['gradient']:.3f} (dim {d['gradient']}) | "
                         f"{e['random']:.3f} (dim {d['random']}) |")
        lines.append("")
    lines += ["## Ablation: relative test-error decrease over NoisyGD", "",
              "Over data sets × ε × seeds (positive = better than NoisyGD).", "",
              "| component | median | mean | min | max |", "|---|---|---|---|---|"]
    for line, v in ablation.items():
        v = np.asarray(v)
        lines.append(f"| {line} | {np.median(v):+.3f} | {np.mean(v):+.3f} | {v.min():+.3f} | "
                     f"{v.max():+.3f} |")
    lines += ["", "## Claims of the issue (means over seeds)", "",
              "| data set | ε | AdaMix | NoisyGD | public-only | DPSGD | AdaMix ≥ NoisyGD | "
              "AdaMix ≥ public | AdaMix ≥ DPSGD |", "|---|---|---|---|---|---|---|---|---|"]
    for r in check_rows:
        lines.append(f"| {r['dataset']} | {float(r['epsilon']):g} | {r['adamix']:.3f} | "
                     f"{r['noisygd']:.3f} | {r['public']:.3f} | {r['dpsgd']:.3f} | "
                     f"{'yes' if r['ge_noisygd'] else '**no**'} | "
                     f"{'yes' if r['ge_public'] else '**no**'} | "
                     f"{'yes' if r['ge_dpsgd'] else '**no**'} |")
    lines.append("")
    return "\n".join(lines)


def plot(res, ablation, stem_suffix):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from sklearn_fdp.plotting import plot_privacy_utility

    FIGURES.mkdir(parents=True, exist_ok=True)
    styles = {"public-only": ("tab:gray", ":"), "NoisyGD": ("tab:blue", "-"),
              "+projection": ("tab:cyan", "--"), "+adaptive clipping": ("tab:green", "--"),
              "AdaMix": ("tab:red", "-"), "AdaMix (theory)": ("tab:pink", "-."),
              "DPSGD (private rows)": ("tab:orange", "-"), "non-private": ("k", ":")}
    fig, axes = plt.subplots(1, len(res), figsize=(4.6 * len(res), 3.8), squeeze=False)
    for i, (ax, (name, data)) in enumerate(zip(axes[0], res.items())):
        keys = list(data["accuracy"]["AdaMix"])
        eps = [float(k) for k in keys]
        runs = [dict(method=line, epsilon=float(k), seed=seed, accuracy=acc)
                for line in LINES for k in keys
                for seed, acc in enumerate(data["accuracy"][line][k])]
        last = i == len(res) - 1
        plot_privacy_utility(
            runs, ax=ax, error="std",
            styles={line: dict(color=c, linestyle=ls, ms=3, capsize=2)
                    for line, (c, ls) in styles.items()},
            xlabel="ε (δ = 1e-5)", ylabel="test accuracy" if i == 0 else "", title=name,
            legend={"fontsize": 7, "loc": "lower right"} if last else False)
        ax.set_xticks(eps, [f"{e:g}" for e in eps])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    fig.tight_layout()
    fig.savefig(FIGURES / f"bench_adamix{stem_suffix}.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 3.5))
    names = list(ablation)
    ax.boxplot([ablation[n] for n in names], tick_labels=names)
    ax.axhline(0.0, color="k", linewidth=0.8)
    ax.set_ylabel("relative test-error decrease\nover NoisyGD")
    ax.set_title("Ablation (data sets × ε × seeds)")
    fig.tight_layout()
    fig.savefig(FIGURES / f"bench_adamix_ablation{stem_suffix}.png", dpi=120)
    plt.close(fig)

    with_pdp = {n: d for n, d in res.items() if d["pdp_epsilon3_seed0"]}
    if with_pdp:
        fig, axes = plt.subplots(1, len(with_pdp), figsize=(4.4 * len(with_pdp), 3.4),
                                 squeeze=False)
        for ax, (name, data) in zip(axes[0], with_pdp.items()):
            top = max(max(v) for v in data["pdp_epsilon3_seed0"].values())
            bins = np.linspace(0.0, top * 1.001, 40)
            for line, color in [("NoisyGD", "tab:blue"), ("AdaMix", "tab:red")]:
                ax.hist(data["pdp_epsilon3_seed0"][line], bins=bins, alpha=0.55, color=color,
                        label=line)
            ax.axvline(PDP_EPSILON, color="k", linestyle="--", linewidth=1)
            ax.set_yscale("log")
            ax.set_xlabel(f"per-instance ε (run ε = {PDP_EPSILON:g})")
            ax.set_title(name)
        axes[0][0].set_ylabel("private records")
        axes[0][-1].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(FIGURES / f"bench_adamix_pdp{stem_suffix}.png", dpi=120)
        plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: seed 0, ε = 3, digits and Adult; writes adamix_quick.*")
    parser.add_argument("--jobs", type=int, default=2, help="data sets run in parallel")
    parser.add_argument("--render", action="store_true",
                        help="re-write the markdown and figures from the saved JSON only")
    parser.add_argument("--reconstruction", action="store_true",
                        help="add the subspace reconstruction diagnostic to the saved JSON "
                             "(then use --render)")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the figures from the saved JSON (markdown untouched)")
    args = parser.parse_args(argv)
    quick = args.quick
    if args.plot_only:
        saved = json.loads((RESULTS / f"adamix{'_quick' if quick else ''}.json").read_text())
        plot(saved["datasets"], saved["ablation"], "_quick" if quick else "")
        return
    if args.render or args.reconstruction:
        stem = "adamix_quick" if quick else "adamix"
        saved = json.loads((RESULTS / f"{stem}.json").read_text())
        if args.reconstruction:
            saved["meta"]["reconstruction"] = {
                n: reconstruction_diagnostic(n) for n in saved["datasets"]}
            (RESULTS / f"{stem}.json").write_text(json.dumps(saved, indent=1, default=str))
        (RESULTS / f"{stem}.md").write_text(markdown(saved["meta"], saved["datasets"],
                                                     saved["ablation"], saved["claims"]))
        plot(saved["datasets"], saved["ablation"], "_quick" if quick else "")
        return
    epsilons = [PDP_EPSILON] if quick else EPSILONS
    seeds = SEEDS[:1] if quick else SEEDS
    names = ["digits", "Adult"] if quick else ["MNIST-8k", "Adult", "digits"]
    t0 = time.perf_counter()
    fingerprint = library_fingerprint()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_dataset, n, epsilons, seeds) for n in names]
        done = dict(f.result() for f in futures)
    res = {n: done[n] for n in ["digits", "MNIST-8k", "Adult"] if n in done}
    ablation = ablation_decrease(res)
    check_rows = checks(res)
    runtime = time.perf_counter() - t0
    meta = dict(date=time.strftime("%Y-%m-%d"),
                machine=f"{platform.machine()}, Python {platform.python_version()}",
                sklearn_fdp=sklearn_fdp.__version__, delta=DELTA, quick=quick, seeds=seeds,
                epsilons=epsilons, lr_multipliers=LR_MULTIPLIERS, runtime_seconds=runtime,
                library=fingerprint)
    stem = "adamix_quick" if quick else "adamix"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(dict(
        meta=meta, datasets=res, ablation=ablation, claims=check_rows), indent=1, default=str))
    (RESULTS / f"{stem}.md").write_text(markdown(meta, res, ablation, check_rows))
    plot(res, ablation, "_quick" if quick else "")
    print(f"done in {runtime / 60:.1f} min -> {RESULTS / stem}.md", flush=True)


if __name__ == "__main__":
    main()

"""Issue 20, fourth round: the last NOT SHOWN check, FDP ≥ DP-SGD on Adult at ε = 1.

``benchmarks/results/defaults.md`` (2026-11-27, test split adult.test) left
one check NOT SHOWN: ``FeatureDPLogisticRegression`` defaults minus
``DPSGDClassifier`` defaults on all 32,561 rows of adult.data at ε = 1,
−0.03 ± 0.08 points (0.8463 vs 0.8466; non-private LogisticRegression
0.8480), while the validation split of ``bench_defaults_rules.py`` had
+0.29 ± 0.08. This study asks where FDP's distance to the non-private model
goes and whether a rule from public quantities closes it. Validation data
only: adult.test is never loaded.

Data: adult.data with ``make_adult_preprocessor``, ``ADULT_PROTECTED``
private, label public, δ = 1e-5, and

* ``adult 70/30``: the stratified 70/30 split of the earlier studies
  (``bench_fdp_alpha.scenarios()``, split seed 0, 22,792 training rows),
  training seeds 0-9;
* ``adult 90/10``: stratified 90/10 splits of adult.data, split seed = training
  seed = 0-9 (29,304 training rows: the regime of the full 32,561 rows, where
  ``learning_rate="auto"`` sits at its cap 16 as it does on all rows, while on
  22,792 rows it is 13.96 at ε = 1); each seed another split, so the intervals
  include the validation sample's variance;
* ``adult 750``: 750 rows of the 70/30 training part (another subsample per
  seed, seeds 0-9);
* ``purchase``: ``bench_fdp_alpha``'s ``purchase blocks 16000`` (data seed 1;
  the benchmarks' test data use seed 0), seeds 0-2.

``--part diagnosis`` (ε = 1, Adult): the non-private LogisticRegression; FDP
defaults; FDP without noise (ε = 1e4 with ``accountant="rdp"``: σ ≈ 0.08
instead of 2.9, at the default's own ``learning_rate_``); FDP at the step 16,
the cap the default reaches from about 26,000 rows on (13.96 on 22,792 rows:
the one setting that changes regime between the two n); that with the public
gradient on every row at every step (``public_batch_size="full"``); that with a
clip of 2 (no clipping bias either); DP-SGD defaults and without noise (same
step 4). Also the FDP−DP-SGD disagreement rate (share of validation rows the
two predict differently), from which the sampling standard deviation of their
accuracy difference on a test set of m rows is about ``sqrt(rate / m)``; and the
resolved public settings (batch, steps, σ, ν, α, step) at n = 750, 22,792,
29,304 and 32,561.

``--part splits`` (ε = 1): how much one validation (or test) sample moves the
check. 60 further stratified 90/10 splits of adult.data (split seed = training
seed = 10-69, disjoint from the seeds above), each with the non-private model,
FDP defaults, FDP with the public gradient on every row
(``public_batch_size="full"``), FDP with a clip of 1 at the step 16 (the cap)
or 8, with a clip of 1 or 2 at the step 16 and the public gradient on every row
(a larger clip removes the clipping bias the diagnosis found; the step is fixed
because the rule would halve it), and DP-SGD defaults: the distribution over
splits of FDP − DP-SGD, its standard deviation against the one predicted from
the disagreement rate on 3,257 validation rows, and how often a split shows
FDP below DP-SGD.

``--part candidates`` (ε ∈ {0.03, 0.1, 1}, every scenario): FDP defaults and
candidates that act on the noise-free part of Algorithm 1, all functions of
public quantities (B, n): a public batch ``min(n, 2 B)`` or ``min(n, 4 B)``
instead of ``B`` (``public_batch_size``; each step's ``∇ℓ_pub`` is noise-free
but sampled, and at ε = 1 its sampling noise cost about as much as the DP
noise in the diagnosis), ``lr_schedule="linear"`` (default cosine), and both;
a clip of 0.75 (default 0.5; the clipping bias was the rest of the distance to the
non-private model in the diagnosis), alone and with the public batch 4 B.
Adult cells also fit ``DPSGDClassifier`` defaults (the check's reference).

``--report`` writes ``benchmarks/results/defaults_rules2.{json,md}`` from the
parts' JSON files, keeping the stored ``conclusion`` (written by hand). Run
from the repository root with ``PYTHONPATH=.`` so that the checkout's
sklearn_fdp is measured.
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

from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression
from sklearn_fdp.datasets import ADULT_PROTECTED, load_adult, make_adult_preprocessor
from sklearn_fdp.linear._base import _auto_learning_rate
from sklearn_fdp.linear._feature_dp_logistic import _AUTO_LR_CAP_ALG1, _auto_alpha

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the other studies
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/_common.py
from _common import RESULTS, points_interval, run_meta, study_title  # noqa: E402
from bench_fdp_alpha import rows_of, scenarios  # noqa: E402

DELTA = 1e-5
EPSILONS = (0.03, 0.1, 1.0)
SEEDS = {"adult 70/30": range(10), "adult 90/10": range(10), "adult 750": range(10),
         "purchase": range(3)}
NOISE_FREE = dict(epsilon=1e4, accountant="rdp")
ADULT_TEST_ROWS = 16281  # the size of adult.test (public; its rows are never read)


def _adult_frame():
    X, y = load_adult(return_X_y=True, split="train")  # adult.data only
    pre = make_adult_preprocessor().fit(X)
    return (pd.DataFrame(pre.transform(X), columns=[str(c) for c in pre.get_feature_names_out()]),
            np.asarray(y))


def data(name, seed, _cache={}):
    """``(X, y, X_val, y_val, spec)`` of scenario ``name`` for ``seed``."""
    if "sc" not in _cache:
        _cache["sc"] = scenarios()
    sc = _cache["sc"]
    if name == "adult 90/10":
        if "adult" not in _cache:
            _cache["adult"] = _adult_frame()
        Z, y = _cache["adult"]
        X, Xv, yt, yv = train_test_split(Z, y, test_size=0.1, random_state=seed, stratify=y)
        return X, yt, Xv, yv, dict(private_features=list(ADULT_PROTECTED))
    key = {"adult 70/30": "adult prot all", "adult 750": "adult prot 750",
           "purchase": "purchase blocks 16000"}[name]
    X, y = rows_of(sc[key], seed)
    return X, y, sc[key]["X_val"], sc[key]["y_val"], sc[key]["spec"]


def _dense(X):
    return X.to_numpy() if hasattr(X, "to_numpy") else X


def candidates(n, batch_size):
    return {"default": {},
            "public batch 2B": dict(public_batch_size=min(n, 2 * batch_size)),
            "public batch 4B": dict(public_batch_size=min(n, 4 * batch_size)),
            "lr_schedule linear": dict(lr_schedule="linear"),
            "public batch 4B, linear": dict(public_batch_size=min(n, 4 * batch_size),
                                            lr_schedule="linear"),
            "clip 0.75": dict(max_grad_norm=0.75),
            "public batch 4B, clip 0.75": dict(public_batch_size=min(n, 4 * batch_size),
                                               max_grad_norm=0.75)}


def run_diagnosis():
    cells = []
    for name in ("adult 70/30", "adult 90/10"):
        for seed in SEEDS[name]:
            X, y, Xv, yv, spec = data(name, seed)
            base = dict(**spec, label_public=True, delta=DELTA, random_state=seed)
            fdp = FeatureDPLogisticRegression(**base, epsilon=1.0).fit(X, y)
            nf = dict(**base, **NOISE_FREE, learning_rate=fdp.learning_rate_)
            dpsgd = DPSGDClassifier(epsilon=1.0, delta=DELTA, random_state=seed).fit(_dense(X), y)
            fits = {
                "non-private LogisticRegression": LogisticRegression(max_iter=5000).fit(X, y),
                "FDP defaults": fdp,
                "FDP at the step 16 (the cap)": FeatureDPLogisticRegression(
                    **base, epsilon=1.0, learning_rate=16.0).fit(X, y),
                "FDP without noise": FeatureDPLogisticRegression(**nf).fit(X, y),
                "FDP without noise, public batch n": FeatureDPLogisticRegression(
                    **nf, public_batch_size="full").fit(X, y),
                "FDP without noise, public batch n, clip 2": FeatureDPLogisticRegression(
                    **nf, public_batch_size="full", max_grad_norm=2.0).fit(X, y),
                "DPSGDClassifier defaults": dpsgd,
                "DPSGDClassifier without noise": DPSGDClassifier(
                    **NOISE_FREE, delta=DELTA, learning_rate=dpsgd.learning_rate_,
                    random_state=seed).fit(_dense(X), y),
            }
            acc = {k: float(m.score(_dense(Xv) if isinstance(m, DPSGDClassifier) else Xv, yv))
                   for k, m in fits.items()}
            disagree = float(np.mean(fdp.predict(Xv) != dpsgd.predict(_dense(Xv))))
            cells.append(dict(scenario=name, seed=seed, n=int(X.shape[0]), accuracy=acc,
                              disagreement=disagree, fdp_learning_rate=fdp.learning_rate_))
            print(name, seed, acc, disagree, flush=True)
    X, y, *_ = data("adult 70/30", 0)
    names = np.asarray(X.columns, dtype=object)
    settings = []
    for n in (750, 22792, 29304, 32561):
        for eps in EPSILONS:
            plan = FeatureDPLogisticRegression(
                private_features=list(ADULT_PROTECTED), label_public=True, epsilon=eps,
                delta=DELTA).privacy_plan(n, X.shape[1], feature_names=names)
            sigma, batch = plan.noise_multiplier, plan.schedule.batch_size
            clip, rows = plan.details["max_grad_norm"], X.shape[1] + 1
            alpha = _auto_alpha(sigma * clip, batch, rows)
            dplan = DPSGDClassifier(epsilon=eps, delta=DELTA).privacy_plan(n, X.shape[1])
            settings.append(dict(
                n=n, epsilon=eps, batch_size=batch, steps=plan.schedule.steps, sigma=sigma,
                nu=sigma * clip * math.sqrt(rows) / batch, alpha=alpha,
                fdp_learning_rate=_auto_learning_rate(alpha * sigma * clip, batch, rows, 1,
                                                      cap_factor=_AUTO_LR_CAP_ALG1),
                dpsgd_learning_rate=_auto_learning_rate(
                    dplan.noise_multiplier * 1.0, dplan.schedule.batch_size, rows, 1,
                    steps=dplan.schedule.steps)))
    return dict(cells=cells, settings=settings)


def run_splits():
    cells = []
    for seed in range(10, 70):
        X, y, Xv, yv, spec = data("adult 90/10", seed)
        base = dict(**spec, label_public=True, delta=DELTA, epsilon=1.0, random_state=seed)
        fdp = FeatureDPLogisticRegression(**base).fit(X, y)
        dpsgd = DPSGDClassifier(epsilon=1.0, delta=DELTA, random_state=seed).fit(_dense(X), y)
        acc = {"non-private LogisticRegression": float(
                   LogisticRegression(max_iter=5000).fit(X, y).score(Xv, yv)),
               "FDP defaults": float(fdp.score(Xv, yv)),
               "FDP, public batch n": float(FeatureDPLogisticRegression(
                   **base, public_batch_size="full").fit(X, y).score(Xv, yv)),
               **{f"FDP, clip {c:g}, step {lr:g}" + (", public batch n" if full else ""):
                  float(FeatureDPLogisticRegression(
                      **base, max_grad_norm=c, learning_rate=lr,
                      **(dict(public_batch_size="full") if full else {})).fit(X, y)
                      .score(Xv, yv))
                  for c, lr, full in ((1.0, 16.0, False), (1.0, 8.0, False), (1.0, 16.0, True),
                                      (2.0, 16.0, True))},
               "DPSGDClassifier defaults": float(dpsgd.score(_dense(Xv), yv))}
        cells.append(dict(seed=seed, n_val=int(Xv.shape[0]), accuracy=acc, disagreement=float(
            np.mean(fdp.predict(Xv) != dpsgd.predict(_dense(Xv))))))
        print(seed, acc, flush=True)
    return dict(cells=cells)


def run_candidates():
    cells = []
    for name, seeds in SEEDS.items():
        for eps in EPSILONS:
            for seed in seeds:
                X, y, Xv, yv, spec = data(name, seed)
                base = dict(**spec, label_public=True, epsilon=eps, delta=DELTA,
                            random_state=seed)
                default = FeatureDPLogisticRegression(**base).fit(X, y)
                ref = (None if name == "purchase" else float(
                    DPSGDClassifier(epsilon=eps, delta=DELTA, random_state=seed)
                    .fit(_dense(X), y).score(_dense(Xv), yv)))
                cell = dict(scenario=name, epsilon=eps, seed=seed, reference=ref,
                            batch_size=int(default.batch_size_), candidates={})
                for cand, kw in candidates(X.shape[0], default.batch_size_).items():
                    clf = FeatureDPLogisticRegression(**base, **kw).fit(X, y) if kw else default
                    cell["candidates"][cand] = float(clf.score(Xv, yv))
                print(name, eps, seed, cell["candidates"], ref, flush=True)
                cells.append(cell)
    return dict(cells=cells)


def diagnosis_table(part):
    cells = part["cells"]
    out = ["## Diagnosis (ε = 1, validation accuracy)", "",
           "Mean over seeds, and the paired difference from FDP defaults (points, mean ± "
           "half-width of the 95 % t-interval over seeds).", "",
           "| fit | " + " | ".join(sorted({c["scenario"] for c in cells})) + " |",
           "|---|---|---|"]
    scen = sorted({c["scenario"] for c in cells})
    for fit in cells[0]["accuracy"]:
        row = []
        for sc in scen:
            rel = [c for c in cells if c["scenario"] == sc]
            acc = np.array([c["accuracy"][fit] for c in rel])
            m, h = points_interval(acc - np.array([c["accuracy"]["FDP defaults"] for c in rel]))
            row.append(f"{acc.mean():.4f}: {m:+.2f} ± {h:.2f}")
        out.append(f"| {fit} | " + " | ".join(row) + " |")
    row = []
    for sc in scen:
        rel = [c for c in cells if c["scenario"] == sc]
        m, h = points_interval([c["accuracy"]["FDP defaults"] - c["accuracy"]["DPSGDClassifier defaults"]
                          for c in rel])
        row.append(f"{m:+.2f} ± {h:.2f}")
    out.append("| FDP defaults − DPSGDClassifier defaults | " + " | ".join(row) + " |")
    row = []
    for sc in scen:
        rate = np.mean([c["disagreement"] for c in cells if c["scenario"] == sc])
        row.append(f"{100 * rate:.2f} % (sd on {ADULT_TEST_ROWS:,} rows: "
                   f"{100 * math.sqrt(rate / ADULT_TEST_ROWS):.2f})")
    out.append("| FDP/DP-SGD disagreement (sampling sd of their difference on a test set "
               "of adult.test's size, points) | " + " | ".join(row) + " |")
    out += ["", "Resolved public settings of the defaults (FeatureDPLogisticRegression, "
            "ADULT_PROTECTED private, label public; DPSGDClassifier has the same B, steps and "
            "σ, clip 1 and its own step rule).", "",
            "| n | ε | B | steps | σ | ν | α | FDP step | DP-SGD step |",
            "|---|---|---|---|---|---|---|---|---|"]
    for s in part["settings"]:
        out.append(f"| {s['n']:,} | {s['epsilon']:g} | {s['batch_size']} | {s['steps']} | "
                   f"{s['sigma']:.3g} | {s['nu']:.4f} | {s['alpha']:.3g} | "
                   f"{s['fdp_learning_rate']:.3g} | {s['dpsgd_learning_rate']:.3g} |")
    return out + [""]


def splits_table(part):
    cells = part["cells"]
    n_val = cells[0]["n_val"]
    fdp = np.array([c["accuracy"]["FDP defaults"] for c in cells])
    out = ["## One validation sample against another (ε = 1, adult 90/10, "
           f"{len(cells)} splits)", "",
           "Mean over splits (each its own split and seed) and the paired difference from FDP "
           "defaults (points, mean ± half-width of the 95 % t-interval over splits).", "",
           "| fit | accuracy | minus FDP defaults |", "|---|---|---|"]
    for fit in cells[0]["accuracy"]:
        acc = np.array([c["accuracy"][fit] for c in cells])
        m, h = points_interval(acc - fdp)
        out.append(f"| {fit} | {acc.mean():.4f} | {m:+.2f} ± {h:.2f} |")
    d = 100 * (fdp - np.array([c["accuracy"]["DPSGDClassifier defaults"] for c in cells]))
    rate = float(np.mean([c["disagreement"] for c in cells]))
    m, h = points_interval(d / 100)
    out += ["", f"FDP defaults − DPSGDClassifier defaults over the splits: {m:+.2f} ± {h:.2f}, "
            f"standard deviation {d.std(ddof=1):.2f} points (predicted from the disagreement "
            f"rate {100 * rate:.2f} % on {n_val:,} rows: {100 * math.sqrt(rate / n_val):.2f}; "
            f"on adult.test's {ADULT_TEST_ROWS:,} rows it would be "
            f"{100 * math.sqrt(rate / ADULT_TEST_ROWS):.2f}); {int((d < 0).sum())} of "
            f"{d.size} splits show FDP below DP-SGD.", ""]
    return out


def candidates_table(part):
    cells = part["cells"]
    cands = list(cells[0]["candidates"])
    order = list(SEEDS)
    keys = sorted({(c["scenario"], c["epsilon"]) for c in cells},
                  key=lambda k: (order.index(k[0]), k[1]))
    out = ["## Candidates (validation accuracy)", "",
           "Each cell: mean over seeds, and the paired difference from the default "
           "(points, mean ± half-width of the 95 % t-interval over seeds); the default's own "
           "cell gives its difference from DPSGDClassifier defaults (Adult) instead.", "",
           "| scenario | ε | seeds | " + " | ".join(cands) + " | DPSGDClassifier |",
           "|---|---|---|" + "---|" * (len(cands) + 1)]
    for sc, eps in keys:
        rel = [c for c in cells if c["scenario"] == sc and c["epsilon"] == eps]
        dflt = np.array([c["candidates"]["default"] for c in rel])
        refs = [c["reference"] for c in rel]
        row = []
        for cand in cands:
            acc = np.array([c["candidates"][cand] for c in rel])
            if cand == "default":
                if refs[0] is None:
                    row.append(f"{acc.mean():.4f}")
                    continue
                m, h = points_interval(acc - np.array(refs))
            else:
                m, h = points_interval(acc - dflt)
            row.append(f"{acc.mean():.4f}: {m:+.2f} ± {h:.2f}")
        ref = "—" if refs[0] is None else f"{np.mean(refs):.4f}"
        out.append(f"| {sc} | {eps:g} | {len(rel)} | " + " | ".join(row) + f" | {ref} |")
    out += ["", "Per candidate, over the cells: mean change from the default and the worst "
            "cell (points, means over seeds), and the cells whose interval lies below 0.", "",
            "| candidate | mean change | worst cell | cells below the default |",
            "|---|---|---|---|"]
    for cand in cands[1:]:
        deltas, below = [], 0
        for sc, eps in keys:
            rel = [c for c in cells if c["scenario"] == sc and c["epsilon"] == eps]
            m, h = points_interval([c["candidates"][cand] - c["candidates"]["default"] for c in rel])
            deltas.append(m)
            below += m + h < 0
        out.append(f"| {cand} | {np.mean(deltas):+.2f} | {min(deltas):+.2f} | {below} |")
    return out + [""]


def markdown(saved):
    out = [study_title("The last NOT SHOWN check: FDP ≥ DP-SGD on Adult at ε = 1", __file__,
                       saved), "",
           "Validation splits only (adult.data; adult.test never read). See the script's "
           "docstring for the data, the fits and the candidates.", ""]
    if saved.get("diagnosis"):
        out += diagnosis_table(saved["diagnosis"])
    if saved.get("splits"):
        out += splits_table(saved["splits"])
    if saved.get("candidates"):
        out += candidates_table(saved["candidates"])
    if saved.get("conclusion"):
        out += ["## Conclusion", "", saved["conclusion"], ""]
    return "\n".join(out)


PARTS = {"diagnosis": run_diagnosis, "splits": run_splits, "candidates": run_candidates}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=tuple(PARTS))
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    RESULTS.mkdir(exist_ok=True)
    if args.part:
        t0 = time.process_time()
        result = PARTS[args.part]()
        result["cpu_minutes"] = (time.process_time() - t0) / 60
        (RESULTS / f"defaults_rules2_{args.part}.json").write_text(json.dumps(result, indent=1))
    if args.report:
        parts = {p: json.loads((RESULTS / f"defaults_rules2_{p}.json").read_text())
                 for p in PARTS if (RESULTS / f"defaults_rules2_{p}.json").exists()}
        path = RESULTS / "defaults_rules2.json"
        old = json.loads(path.read_text()) if path.exists() else {}
        saved = dict(run_meta(sum(p["cpu_minutes"] for p in parts.values())),
                     conclusion=old.get("conclusion", ""), **parts)
        path.write_text(json.dumps(saved, indent=1))
        (RESULTS / "defaults_rules2.md").write_text(markdown(saved))
        print(markdown(saved))


if __name__ == "__main__":
    main()

"""Defaults suite beyond Adult (issue 32): every development set, every default.

Data: the seven development sets of ``../shared/data`` and Adult, with the
schemas of ``benchmarks/_devsets.py`` (numeric bounds and category lists from
each README, protected columns, target bounds). Every fit goes through the
library's own schema preprocessor as a user would write it: ONE declaration,

    make_private_pipeline(make_tabular_preprocessor(schema), Estimator(epsilon=...))

(the pipeline hands the schema's protected columns, row-norm bounds and target
bounds to the estimator; nothing else is set but ``epsilon``, ``delta`` and
``random_state``; ``label_public=True`` where a line says so).

Split of the sets (fixed in ``_devsets.py`` before any result): the rules are
CHOSEN on ``DEVELOPMENT`` (student_performance, heart_disease, heart_failure,
communities_crime) and only REPORTED on ``REPORT`` (diabetes130, nhanes,
drug_consumption, adult).

Per seed ``s``: a stratified 70/30 train/test split (random_state ``s``); on
the two large sets (diabetes130, adult) the training part is subsampled to
``MAX_TRAIN`` rows and the test part to ``MAX_TEST`` (seeded by ``s``) to keep
the cost in check on a shared machine. Every line of a seed sees the same
rows, so differences are paired.

Lines (classification, binary label):

* ``public_only``: scikit-learn ``LogisticRegression()`` (defaults, C = 1) on
  the public block of the same preprocessor output: a (0, 0)-FDP model.
* ``fdp_label_public``: ``FeatureDPLogisticRegression(label_public=True)``.
* ``fdp_label_private``: ``FeatureDPLogisticRegression()`` (the default: label
  private, ``method="auto"``).
* ``fdp_alg1_private`` / ``fdp_dpsgd_private``: the two methods ``"auto"``
  chooses between with a private label (the rule study; ``--study``).
* ``dpsgd``: ``DPSGDClassifier()`` (the whole record protected).

Regression (where the set has a target): ``ridge_public_only`` (scikit-learn
``Ridge()`` on the public block), ``fdplr_label_public``
(``FeatureDPLinearRegression(label_public=True)``), ``fdplr_private``
(``FeatureDPLinearRegression()``: target private), ``dpsgd_regressor``
(``DPSGDRegressor(y_bounds=<schema's target bounds>)``; a DP-SGD regressor
outside the pipeline's declaration hand-over for the target only, since it
has no protected columns to receive), ``dpsgd_regressor_default``
(``DPSGDRegressor()`` at its defaults: no ``y_bounds``, the target as it is).
``fdplr_private`` records ``method_``, the branch ``method="auto"`` took.

Per fit: test accuracy (points) or R², ``epsilon_``, whether the model
predicts a single class on the test rows (collapsed) and whether ``fit``
raised a :class:`~sklearn_fdp.exceptions.CollapseWarning`.

Intervals: paired 95 % t-intervals over seeds of the per-seed difference.

Writes ``benchmarks/results/defaults_suite.json`` and ``.md`` (``--out`` changes
the stem). Run from the repository root with ``PYTHONPATH=.``.

Results (in ``benchmarks/results/``): ``defaults_suite.json``, ``defaults_suite.md``;
``defaults_suite_study.{json,md}`` (``--out defaults_suite_study``);
``defaults_suite_ybounds.{json,md}`` (``--ybounds``); ``defaults_suite_sgd.{json,md}``
(``--ybounds --sgd``).
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Defaults beyond Adult: eight data sets"
* docs/user_guide.md § "5. Feature DP (preview)"
* docs/user_guide.md § "Never below the public-only model"
* docs/preprocessing.md § "One declaration: what the schema hands to the estimator"
* docs/regression_sgd.md § "Target bounds: `y_bounds`"
* docs/regression.md § "DPSGDRegressor and FeatureDPSGDRegressor"
"""

import argparse
import json
import math
import os
import pathlib
import platform
import sys
import time
import warnings

import numpy as np
from scipy import stats
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

import sklearn_fdp
from sklearn_fdp import (
    DPSGDClassifier,
    DPSGDRegressor,
    FeatureDPLinearRegression,
    FeatureDPLogisticRegression,
    FeatureDPSGDRegressor,
)
from sklearn_fdp.exceptions import CollapseWarning
from sklearn_fdp.pipeline import make_private_pipeline
from sklearn_fdp.preprocessing import make_tabular_preprocessor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import library_fingerprint  # noqa: E402
from _devsets import DEVELOPMENT, LOADERS, REPORT  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
EPSILONS = (0.03, 0.1, 0.3, 1.0, 3.0)
DELTA = 1e-5
SEEDS = tuple(range(5))
MAX_TRAIN, MAX_TEST = 10_000, 5_000
TARGET = -0.3  # points: the margin on the REPORT sets
CLS_LINES = ("public_only", "fdp_label_public", "fdp_label_private", "dpsgd")
STUDY_LINES = ("fdp_alg1_private", "fdp_dpsgd_private")
REG_LINES = ("ridge_public_only", "fdplr_label_public", "fdplr_private", "dpsgd_regressor",
             "dpsgd_regressor_default")


def _split(ds, seed, y):
    idx = np.arange(len(y))
    tr, te = train_test_split(idx, test_size=0.3, random_state=seed, stratify=ds.y)
    rng = np.random.default_rng(seed)
    if tr.size > MAX_TRAIN:
        tr = np.sort(rng.choice(tr, MAX_TRAIN, replace=False))
    if te.size > MAX_TEST:
        te = np.sort(rng.choice(te, MAX_TEST, replace=False))
    return tr, te


def _schema_without_target(schema):
    return {k: v for k, v in schema.items() if k != "target"}


def _public_block(ds, Xtr, Xte):
    pre = make_tabular_preprocessor(_schema_without_target(ds.schema)).fit(Xtr)
    names = [str(n) for n in pre.get_feature_names_out()]
    public = np.array([not n.startswith("protected_") for n in names])
    return pre.transform(Xtr)[:, public], pre.transform(Xte)[:, public]


def _fit(make, Xtr, ytr):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.process_time()
        model = make().fit(Xtr, ytr)
        cpu = time.process_time() - t0
    collapse_warned = any(issubclass(w.category, CollapseWarning) for w in caught)
    kinds = sorted({w.category.__name__ for w in caught})
    return model, cpu, collapse_warned, kinds


# The private lines: estimator factories (ε, δ, random_state set by _maker).
_LINES = {
    "fdp_label_public": lambda ds, kw: FeatureDPLogisticRegression(label_public=True, **kw),
    "fdp_label_private": lambda ds, kw: FeatureDPLogisticRegression(**kw),
    "fdp_alg1_private": lambda ds, kw: FeatureDPLogisticRegression(method="alg1", **kw),
    "fdp_dpsgd_private": lambda ds, kw: FeatureDPLogisticRegression(method="dpsgd", **kw),
    "dpsgd": lambda ds, kw: DPSGDClassifier(**kw),
    "fdplr_label_public": lambda ds, kw: FeatureDPLinearRegression(label_public=True, **kw),
    "fdplr_private": lambda ds, kw: FeatureDPLinearRegression(**kw),
    "dpsgd_regressor": lambda ds, kw: DPSGDRegressor(y_bounds=ds.reg_bounds, **kw),
    "dpsgd_regressor_default": lambda ds, kw: DPSGDRegressor(**kw),
}


def _maker(line, ds, eps, seed):
    """The one-declaration pipeline of a line: the schema preprocessor, then the estimator.

    ``dpsgd_regressor_default``: the schema without its target bounds (the pipeline would
    hand them to the estimator), so that DPSGDRegressor trains without ``y_bounds``."""
    est = _LINES[line](ds, dict(epsilon=eps, delta=DELTA, random_state=seed))
    schema = _schema_without_target(ds.schema) if line == "dpsgd_regressor_default" \
        else ds.schema
    return lambda: make_private_pipeline(make_tabular_preprocessor(schema), est)


def run_set(ds, cls_lines, reg_lines, epsilons, seeds, log):
    rows = []
    for seed in seeds:
        tr, te = _split(ds, seed, ds.y)
        Xtr, Xte = ds.X.iloc[tr], ds.X.iloc[te]
        ytr, yte = ds.y[tr], ds.y[te]
        Ptr, Pte = _public_block(ds, Xtr, Xte)
        base = dict(set=ds.name, seed=seed, n_train=int(tr.size), n_test=int(te.size))
        if "public_only" in cls_lines:
            lr = LogisticRegression(max_iter=1000).fit(Ptr, ytr)
            acc = 100 * float(np.mean(lr.predict(Pte) == yte))
            for eps in epsilons:  # a (0, 0)-FDP model: the same at every ε
                rows.append(dict(base, task="cls", line="public_only", eps=eps, score=acc,
                                 collapsed=bool(np.unique(lr.predict(Pte)).size == 1),
                                 collapse_warned=False, warnings=[], cpu=0.0))
        for eps in epsilons:
            for line in cls_lines:
                if line == "public_only":
                    continue
                model, cpu, warned, kinds = _fit(_maker(line, ds, eps, seed), Xtr, ytr)
                pred = model.predict(Xte)
                final = model[-1]
                rows.append(dict(base, task="cls", line=line, eps=eps,
                                 score=100 * float(np.mean(pred == yte)),
                                 collapsed=bool(np.unique(pred).size == 1),
                                 test_share=float(np.unique(pred, return_counts=True)[1].max()
                                                  / pred.size),
                                 collapse_warned=warned, warnings=kinds, cpu=cpu,
                                 epsilon_=float(final.epsilon_),
                                 method=getattr(final, "method_", None)))
        if ds.y_reg is not None and reg_lines:
            rtr, rte = ds.y_reg[tr], ds.y_reg[te]
            if "ridge_public_only" in reg_lines:
                r2 = float(r2_score(rte, Ridge().fit(Ptr, rtr).predict(Pte)))
                for eps in epsilons:
                    rows.append(dict(base, task="reg", line="ridge_public_only", eps=eps,
                                     score=r2, cpu=0.0, warnings=[]))
            for eps in epsilons:
                for line in reg_lines:
                    if line == "ridge_public_only":
                        continue
                    model, cpu, _, kinds = _fit(_maker(line, ds, eps, seed), Xtr, rtr)
                    rows.append(dict(base, task="reg", line=line, eps=eps, cpu=cpu,
                                     score=float(r2_score(rte, model.predict(Xte))),
                                     warnings=kinds, epsilon_=float(model[-1].epsilon_),
                                     method=getattr(model[-1], "method_", None)))
        log(f"{ds.name} seed {seed} done ({time.strftime('%H:%M:%S')}, "
            f"load {os.getloadavg()[0]:.1f})")
    return rows


def paired(rows, name, task, a, b, eps):
    pick = {(r["line"], r["seed"]): r["score"] for r in rows
            if r["set"] == name and r["task"] == task and r["eps"] == eps}
    seeds = sorted({s for (line, s) in pick if line == a} & {s for (line, s) in pick if line == b})
    if len(seeds) < 2:
        return None
    d = np.array([pick[(a, s)] - pick[(b, s)] for s in seeds])
    half = float(stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size))
    return dict(mean=float(d.mean()), low=float(d.mean() - half), high=float(d.mean() + half),
                n=int(d.size))


def _cell(iv, scale=1.0, digits=2):
    if iv is None:
        return "–"
    return (f"{iv['mean'] * scale:+.{digits}f} [{iv['low'] * scale:+.{digits}f}, "
            f"{iv['high'] * scale:+.{digits}f}]")


def _verdict(iv, threshold):
    if iv is None:
        return "–"
    if iv["low"] >= threshold:
        return "PASS"
    if iv["high"] < threshold:
        return "FAIL"
    return "NOT SHOWN"


COMPARISONS = (
    ("label-public FDP − public-only (points)", "cls", "fdp_label_public", "public_only"),
    ("label-private FDP (default) − DP-SGD (points)", "cls", "fdp_label_private", "dpsgd"),
    ("private-target FDP regression − DPSGDRegressor (R²)", "reg", "fdplr_private",
     "dpsgd_regressor"),
    ("private-target FDP regression − DPSGDRegressor without y_bounds (R²)", "reg",
     "fdplr_private", "dpsgd_regressor_default"),
    ("label-public FDP regression − public-only Ridge (R²)", "reg", "fdplr_label_public",
     "ridge_public_only"),
    ("rule study: alg1 − dpsgd, private label (points)", "cls", "fdp_alg1_private",
     "fdp_dpsgd_private"),
)


def _sets_and_eps(rows):
    """The sets of ``rows`` (development first) and their ε, sorted."""
    return ([s for s in (*DEVELOPMENT, *REPORT) if any(r["set"] == s for r in rows)],
            sorted({r["eps"] for r in rows}))


def _head(columns, eps_list):
    """A Markdown table header: ``columns``, then one column per ε."""
    return ["| " + " | ".join(columns) + " | " + " | ".join(f"ε = {e:g}" for e in eps_list)
            + " |", "|" + "---|" * (len(columns) + len(eps_list))]


def markdown(rows, meta):
    sets, eps_list = _sets_and_eps(rows)
    out = ["# Defaults suite beyond Adult (issue 32)", "",
           f"Generated by `benchmarks/bench_defaults_suite.py` on {meta['date']} "
           f"(sklearn_fdp {meta['version']}, {meta['fingerprint']['git_head'][:10]}); "
           f"{meta['seeds']} seeds, δ = {DELTA:g}; load average at start / end "
           f"{meta['load_start']} / {meta['load_end']} (a shared machine, 2 cores); "
           f"{meta['cpu_min']:.1f} CPU min of fits."
           + "".join(f" Lines rerun and merged on {m['date']} (`{' '.join(m['argv'])}`; load "
                     f"{m['load_start']} / {m['load_end']})." for m in meta.get("merged", [])),
           "",
           "Rules are CHOSEN on the development sets "
           f"({', '.join(DEVELOPMENT)}) and only REPORTED on "
           f"({', '.join(REPORT)}); the split was fixed in `benchmarks/_devsets.py` "
           "(committed before the suite's first run). Large sets subsampled to "
           f"{MAX_TRAIN:,} training / {MAX_TEST:,} test rows per seed.", "",
           "Cells: mean paired difference over seeds [95 % t-interval]. Verdict against "
           f"the issue's target ({TARGET:+} points; R² differences are scaled ×100 to "
           "points, and private-target FDP regression − DPSGDRegressor is held to 0): PASS when the interval lies above it, FAIL "
           "when below, NOT SHOWN when it straddles it.", ""]
    for title, task, a, b in COMPARISONS:
        if not any(r["line"] == a for r in rows) or not any(r["line"] == b for r in rows):
            continue
        scale = 100.0 if task == "reg" else 1.0
        unit = " (R² × 100)" if task == "reg" else ""
        out += [f"## {title}{unit}", "", *_head(("set", "group"), eps_list)]
        for s in sets:
            cells = []
            any_cell = False
            for e in eps_list:
                iv = paired(rows, s, task, a, b, e)
                if iv is not None:
                    any_cell = True
                    thr = 0.0 if a == "fdplr_private" else TARGET  # never dominated: >= 0
                    ivs = None if iv is None else {k: (v * scale if k != "n" else v)
                                                   for k, v in iv.items()}
                    cells.append(f"{_cell(ivs)} {_verdict(ivs, thr)}")
                else:
                    cells.append("–")
            if any_cell:
                group = "develop" if s in DEVELOPMENT else "report"
                out.append(f"| {s} | {group} | " + " | ".join(cells) + " |")
        out.append("")
    out += ["## Mean score per line", "", *_head(("set", "task", "line"), eps_list)]
    for s in sets:
        for task in ("cls", "reg"):
            for line in (*CLS_LINES, *STUDY_LINES, *REG_LINES):
                cells = []
                for e in eps_list:
                    v = [r["score"] for r in rows if r["set"] == s and r["task"] == task
                         and r["line"] == line and r["eps"] == e]
                    cells.append(f"{np.mean(v):.2f}" if v and task == "cls"
                                 else (f"{np.mean(v):.3f}" if v else "–"))
                if any(c != "–" for c in cells):
                    out.append(f"| {s} | {task} | {line} | " + " | ".join(cells) + " |")
    out += ["## Targets on the report sets", "",
            f"The issue's targets, on the REPORT sets only ({', '.join(REPORT)}): in every "
            f"(set, ε) cell label-public FDP ≥ public-only {TARGET:+} points and label-private "
            f"FDP ≥ DP-SGD {TARGET:+} points; private-target FDP regression ≥ DPSGDRegressor "
            "(with the schema's y_bounds, and at its defaults without) in R² × 100. Counted two ways: the mean paired difference, "
            "and the verdict of its 95 % interval.", "",
            "| comparison | cells | mean ≥ target | PASS | NOT SHOWN | FAIL |",
            "|---|---|---|---|---|---|"]
    for title, task, a, b in COMPARISONS[:4]:
        # Regression: R² × 100 against 0 (the default must be >= the whole-record model).
        scale, thr = (100.0, 0.0) if a == "fdplr_private" else (1.0, TARGET)
        ivs = [paired(rows, s_, task, a, b, e) for s_ in REPORT for e in eps_list]
        ivs = [{k: (v * scale if k != "n" else v) for k, v in iv.items()}
               for iv in ivs if iv is not None]
        if not ivs:
            continue
        verdicts = [_verdict(iv, thr) for iv in ivs]
        out.append(f"| {title}{' ×100, target ≥ 0' if task == 'reg' else ''} | {len(ivs)} | "
                   f"{sum(iv['mean'] >= thr for iv in ivs)} | "
                   f"{verdicts.count('PASS')} | {verdicts.count('NOT SHOWN')} | "
                   f"{verdicts.count('FAIL')} |")
    out.append("")
    fits = [r for r in rows if r["task"] == "cls" and r["line"] != "public_only"]
    collapsed = [r for r in fits if r["collapsed"]]
    silent = [r for r in collapsed if not r["collapse_warned"]]
    report_silent = [r for r in silent if r["set"] in REPORT]
    warned_ok = [r for r in fits if r["collapse_warned"] and not r["collapsed"]]
    out += ["", "## Collapsed fits (a single class predicted on the test rows)", "",
            f"{len(collapsed)} of {len(fits)} private classification fits collapsed; "
            f"{len(silent)} of them without a CollapseWarning at fit "
            f"({len(report_silent)} on the report sets). {len(warned_ok)} fits that did "
            "not collapse on the test rows were warned (one class on all of the declared "
            "domain, on ≥ 98 % of it, or on ≥ 98 % of the training rows' public parts)"
            + (f"; {sum(r['test_share'] >= 0.95 for r in warned_ok)} of them predicted one "
               "class on ≥ 95 % of their test rows" if all("test_share" in r for r in warned_ok)
               else "") + ".", "",
            "| set | line | ε | collapsed / fits | warned |", "|---|---|---|---|---|"]
    keys = sorted({(r["set"], r["line"], r["eps"]) for r in collapsed})
    for s, line, e in keys:
        grp = [r for r in fits if (r["set"], r["line"], r["eps"]) == (s, line, e)]
        col = [r for r in grp if r["collapsed"]]
        out.append(f"| {s} | {line} | {e:g} | {len(col)} / {len(grp)} | "
                   f"{sum(r['collapse_warned'] for r in col)} |")
    methods = sorted({(r["set"], r["eps"], r.get("method")) for r in rows
                      if r["line"] in ("fdp_label_private", "fdplr_private")
                      and r.get("method")})
    if methods:
        out += ["", "## What `method=\"auto\"` chose with a private label / target", "",
                "| set | ε | method |", "|---|---|---|"]
        out += [f"| {s} | {e:g} | {m} |" for s, e, m in methods]
    return "\n".join(out) + "\n"


def ybounds_study(sets, epsilons, seeds, log, with_sgd=False):
    """DPSGDRegressor with the schema's y_bounds vs without, on each regression target as it
    is and standardised (z-scored with the training rows' mean and sd: the study's own
    scaling, not a private preprocessing), plus FeatureDPLinearRegression (private target)
    against DPSGDRegressor without y_bounds. Rows of the same JSON/Markdown format."""
    from sklearn_fdp.pipeline import make_private_pipeline as mpp

    rows = []
    for name in sets:
        ds = LOADERS[name]()
        if ds.y_reg is None:
            continue
        schema = _schema_without_target(ds.schema)
        for seed in seeds:
            tr, te = _split(ds, seed, ds.y)
            Xtr, Xte = ds.X.iloc[tr], ds.X.iloc[te]
            raw_tr, raw_te = ds.y_reg[tr], ds.y_reg[te]
            mu, sd = raw_tr.mean(), raw_tr.std()
            targets = (("raw", raw_tr, raw_te, ds.reg_bounds),
                       ("z", (raw_tr - mu) / sd, (raw_te - mu) / sd, (-3.0, 3.0)))
            base = dict(set=name, seed=seed, task="reg", n_train=int(tr.size))
            for tname, ytr, yte, bounds in targets:
                for eps in epsilons:
                    kw = dict(epsilon=eps, delta=DELTA, random_state=seed)
                    lines = {f"dpsgd_regressor[{tname}, y_bounds]": DPSGDRegressor(
                                 y_bounds=bounds, **kw),
                             f"dpsgd_regressor[{tname}, none]": DPSGDRegressor(**kw)}
                    if tname == "raw":
                        lines["fdplr_private[raw]"] = FeatureDPLinearRegression(
                            y_bounds=bounds, **kw)
                    if tname == "raw" and with_sgd:  # the regression docs' recommendation
                        lines["fdplr_label_public[raw]"] = FeatureDPLinearRegression(
                            y_bounds=bounds, label_public=True, **kw)
                        lines["fdpsgd_label_public[raw]"] = FeatureDPSGDRegressor(
                            y_bounds=bounds, label_public=True, **kw)
                    for line, est in lines.items():
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            model = mpp(make_tabular_preprocessor(schema), est).fit(Xtr, ytr)
                        rows.append(dict(base, line=line, eps=eps,
                                         score=float(r2_score(yte, model.predict(Xte)))))
            log(f"y_bounds study: {name} seed {seed} done ({time.strftime('%H:%M:%S')}, "
                f"load {os.getloadavg()[0]:.1f})")
    return rows


_PAIR_YBOUNDS = ("fdplr_private[raw]", "dpsgd_regressor[raw, none]",
                 "FeatureDPLinearRegression (private target) − DPSGDRegressor without y_bounds")
_PAIR_SGD = ("fdplr_label_public[raw]", "fdpsgd_label_public[raw]",
             "FeatureDPLinearRegression − FeatureDPSGDRegressor, public target")


def ybounds_markdown(rows, meta, pair=_PAIR_YBOUNDS):
    sets, eps_list = _sets_and_eps(rows)
    sgd = pair is _PAIR_SGD
    title = ("FeatureDPLinearRegression vs FeatureDPSGDRegressor, public target" if sgd
             else "y_bounds advice and FDP regression vs DPSGDRegressor")
    out = [f"# {title} (issue 32)", "",
           f"Generated by `benchmarks/bench_defaults_suite.py --ybounds"
           f"{' --sgd' if sgd else ''}` on {meta['date']}; "
           f"{meta['seeds']} seeds, δ = {DELTA:g}; load average at start / end "
           f"{meta['load_start']} / {meta['load_end']} (a shared machine, 2 cores).", "",
           "Mean test R² per line. `raw`: the target in its units with the schema's "
           "`y_bounds`; `z`: standardised with the training rows' mean and sd, `y_bounds` "
           "(-3, 3). The advice of the regressors' warning and the regression docs' "
           f"recommendation were chosen on the development sets ({', '.join(DEVELOPMENT)}); "
           "the others only report them.", "",
           *_head(("set", "group", "line"), eps_list)]
    lines = sorted({r["line"] for r in rows})
    for s in sets:
        for line in lines:
            cells = []
            for e in eps_list:
                v = [r["score"] for r in rows if (r["set"], r["line"], r["eps"]) == (s, line, e)]
                cells.append(f"{np.mean(v):.3f}" if v else "–")
            group = "develop" if s in DEVELOPMENT else "report"
            out.append(f"| {s} | {group} | {line} | " + " | ".join(cells) + " |")
    a, b, title = pair
    out += ["", f"## {title} (R² × 100, paired 95 % interval)", "",
            *_head(("set", "group"), eps_list)]
    for s in sets:
        cells = []
        for e in eps_list:
            iv = paired(rows, s, "reg", a, b, e)
            cells.append(_cell(None if iv is None else
                               {k: (v * 100 if k != "n" else v) for k, v in iv.items()}))
        out.append(f"| {s} | {'develop' if s in DEVELOPMENT else 'report'} | "
                   + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", nargs="*", default=None)
    ap.add_argument("--seeds", type=int, default=len(SEEDS))
    ap.add_argument("--eps", type=float, nargs="*", default=list(EPSILONS))
    ap.add_argument("--study", action="store_true",
                    help="the rule study: add the alg1 / dpsgd label-private lines")
    ap.add_argument("--no-reg", action="store_true")
    ap.add_argument("--out", default="defaults_suite")
    ap.add_argument("--lines", nargs="*", default=None,
                    help="run only these lines (with --merge: replace their rows in --out's "
                         "stored JSON and rewrite its Markdown)")
    ap.add_argument("--merge", action="store_true")
    ap.add_argument("--from-json", action="store_true",
                    help="rewrite the Markdown of --out from its stored JSON (no fits)")
    ap.add_argument("--ybounds", action="store_true",
                    help="the y_bounds study (writes defaults_suite_ybounds.{json,md})")
    ap.add_argument("--sgd", action="store_true",
                    help="with --ybounds: FeatureDPSGDRegressor vs FeatureDPLinearRegression "
                         "with a public target too (writes defaults_suite_sgd.{json,md})")
    args = ap.parse_args(argv)
    sets = args.sets or [*DEVELOPMENT, *REPORT]
    if args.from_json:
        stored = json.loads((RESULTS / f"{args.out}.json").read_text())
        (RESULTS / f"{args.out}.md").write_text(markdown(stored["rows"], stored["meta"]))
        print(markdown(stored["rows"], stored["meta"]))
        return
    if args.ybounds:
        load_start = [round(x, 2) for x in os.getloadavg()]
        rows = ybounds_study(sets, args.eps, range(args.seeds), lambda m: print(m, flush=True),
                             with_sgd=args.sgd)
        if args.sgd:
            rows = [r for r in rows if "label_public" in r["line"]]
        meta = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    version=sklearn_fdp.__version__, fingerprint=library_fingerprint(),
                    seeds=args.seeds, load_start=load_start,
                    load_end=[round(x, 2) for x in os.getloadavg()], argv=sys.argv[1:])
        RESULTS.mkdir(exist_ok=True)
        stem = "defaults_suite_sgd" if args.sgd else "defaults_suite_ybounds"
        (RESULTS / f"{stem}.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
        pair = _PAIR_SGD if args.sgd else _PAIR_YBOUNDS
        (RESULTS / f"{stem}.md").write_text(ybounds_markdown(rows, meta, pair))
        print(ybounds_markdown(rows, meta, pair))
        return
    cls_lines = CLS_LINES + (STUDY_LINES if args.study else ())
    reg_lines = () if args.no_reg else REG_LINES
    if args.lines:
        cls_lines = tuple(line for line in cls_lines if line in args.lines)
        reg_lines = tuple(line for line in reg_lines if line in args.lines)
    load_start = [round(x, 2) for x in os.getloadavg()]
    rows = []
    for name in sets:
        ds = LOADERS[name]()
        rows += run_set(ds, cls_lines, reg_lines, args.eps, range(args.seeds),
                        lambda m: print(m, flush=True))
    meta = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                version=sklearn_fdp.__version__, fingerprint=library_fingerprint(),
                seeds=args.seeds, load_start=load_start,
                load_end=[round(x, 2) for x in os.getloadavg()],
                cpu_min=sum(r.get("cpu", 0.0) for r in rows) / 60,
                python=platform.python_version(), argv=sys.argv[1:])
    RESULTS.mkdir(exist_ok=True)
    if args.merge:  # the rerun lines replace theirs; the stored run's meta says so
        stored = json.loads((RESULTS / f"{args.out}.json").read_text())
        redone = {(r["set"], r["line"]) for r in rows}
        rows = [r for r in stored["rows"] if (r["set"], r["line"]) not in redone] + rows
        meta = dict(stored["meta"], merged=[*stored["meta"].get("merged", []), meta])
    (RESULTS / f"{args.out}.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    (RESULTS / f"{args.out}.md").write_text(markdown(rows, meta))
    print(markdown(rows, meta))


if __name__ == "__main__":
    main()

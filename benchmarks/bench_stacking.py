"""Feature DP on top of a public gradient-boosted model (issue 34).

Protocol:

* data: the seven development data sets of ``../shared/data`` (``INDEX.md``)
  and Adult, each as a binary task with its documented protected
  attributes private and every other column (and the label) public; see
  ``DATASETS`` below for the label, the protected columns and what is
  dropped. Encoding (the benchmark's, the same for every model): numeric
  columns min-max scaled with the training split's range (clipped to
  [0, 1] on the test split; missing values 0 plus an indicator column),
  text columns one-hot (the training split's 20 most frequent values, the
  rest and missing values in none). The category lists and ranges are
  read from the training data, not from the READMEs (a shortcut of this
  benchmark: it affects every model alike; a real deployment declares
  them). The protected block is divided by sqrt(#protected raw columns)
  and the public block by sqrt(#public raw columns), so each block of a
  row has L2 norm <= 1. diabetes130 is subsampled to 30,000 rows (seed 0)
  and counts rows, not patients, as records (its README: bound per
  person in a real deployment).
* splits: a stratified 70/30 split per seed (``train_test_split``,
  random_state = seed); Adult: adult.data / adult.test (the seed changes
  the models only). Seeds 0-4.
* models (at ε ∈ {0.03, 0.1, 0.3, 1}, δ = 1e-5, library defaults
  otherwise, no tuning):
  ``FeatureDPStackingClassifier`` (public model
  ``HistGradientBoostingClassifier(random_state=seed)``, its defaults);
  ``FeatureDPLogisticRegression(label_public=True)``; ``DPSGDClassifier``
  (whole records). Non-private references, once per seed: the public-only
  boosted model (the same HGB on the public columns: the stacked model's
  public part), a public-only ``LogisticRegression(max_iter=2000)`` and the
  boosted model on all columns. "The public columns carry non-linear
  signal" is read as: the public-only boosted model beats the public-only
  logistic regression (mean over seeds); the FDP LR target is checked there.
* the public model's fit is shared across ε within a seed: the public
  estimator is wrapped so that a fit on the same (X, y) bytes returns the
  stored fitted model (HGB is deterministic given its random_state, so the
  results are those of refitting). The public-only reference is that
  stored refit on all training rows.
* reported: test accuracy (points), mean over seeds, and paired
  differences (stacked − reference) with a 95 % t interval over the 5
  seeds.
* attribute inference (Adult, ``sex``): ``make_private_pipeline(
  make_adult_preprocessor(), FeatureDPStackingClassifier(private_features=
  ADULT_PROTECTED, epsilon=ε))`` fitted on a 3,000-row subsample of
  adult.data (seed 0); ``AttributeInferenceAttack(prior="conditional")``
  with a random half of adult.test as auxiliary data attacks those 3,000
  training records; the measured accuracy against Thm. 4's bound at ε.

Writes ``benchmarks/results/stacking.json`` and ``stacking.md``. Run with
``OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_stacking.py``.

Results (in ``benchmarks/results/``): ``stacking.json``, ``stacking.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Feature DP on top of a public boosted model"
* docs/user_guide.md § "Feature DP with any public model"
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import pathlib
import sys
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402
from sklearn.base import BaseEstimator, ClassifierMixin, clone  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import library_fingerprint  # noqa: E402

from sklearn_fdp import (  # noqa: E402
    DPSGDClassifier,
    FeatureDPLogisticRegression,
    FeatureDPStackingClassifier,
)
from sklearn_fdp.audit import AttributeInferenceAttack  # noqa: E402
from sklearn_fdp.datasets import ADULT_PROTECTED, load_adult, make_adult_preprocessor  # noqa: E402
from sklearn_fdp.pipeline import make_private_pipeline  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
if not DATA.exists():  # a worktree under /work/wt/<name>
    DATA = pathlib.Path("/work/shared/data")
EPSILONS = (0.03, 0.1, 0.3, 1.0)
DELTA = 1e-5
OUT = ROOT / "benchmarks" / "results"


# ---------------------------------------------------------------- data sets

def _csv(path, **kw):
    with gzip.open(DATA / path, "rt") as f:
        return pd.read_csv(io.StringIO(f.read()), **kw)


def _adult():
    X_train, y_train, X_test, y_test = load_adult(return_X_y=True)
    df = pd.concat([X_train, X_test], ignore_index=True)
    y = np.r_[np.asarray(y_train), np.asarray(y_test)]
    y = y.astype(int)  # load_adult: 1 = income > 50K
    split = np.r_[np.zeros(len(y_train), bool), np.ones(len(y_test), bool)]
    return df, y, list(ADULT_PROTECTED), split


def _diabetes():
    df = _csv("diabetes130/diabetic_data_noid.csv.gz", na_values="?", low_memory=False)
    df = df.iloc[np.sort(np.random.default_rng(0).permutation(len(df))[:30000])]
    y = (df.pop("readmitted") == "<30").to_numpy(int)
    df = df.drop(columns=["patient_idx"])
    for c in ("admission_type_id", "discharge_disposition_id", "admission_source_id"):
        df[c] = df[c].astype(str)
    return df, y, ["race", "gender", "age", "payer_code"], None


def _nhanes():
    df = _csv("nhanes/NHANES_noid.csv.gz")
    df = df[df["Diabetes"].notna()]
    y = (df.pop("Diabetes") == "Yes").to_numpy(int)
    df = df.drop(columns=["person_idx", "DiabetesAge"])
    prot = ["Gender", "Age", "AgeDecade", "AgeMonths", "Race1", "Race3", "MaritalStatus",
            "Education", "HHIncome", "HHIncomeMid", "Poverty", "SexOrientation", "PregnantNow"]
    return df, y, prot, None


def _communities():
    df = _csv("communities_crime/communities.data.gz", header=None, na_values="?")
    target = df.pop(df.columns[-1])
    y = (target > 0.25).to_numpy(int)  # a fixed threshold on the [0, 1] target
    df = df.drop(columns=[0, 1, 2, 3, 4])  # state, county, community, name, fold
    df.columns = [f"c{c}" for c in df.columns]
    # racepctblack, racePctWhite, racePctAsian, racePctHispanic, agePct12t21, agePct12t29,
    # agePct16t24, agePct65up (columns 7-14 of communities.names)
    return df, y, [f"c{c}" for c in range(7, 15)], None


def _drugs():
    df = _csv("drug_consumption/drug_consumption.data.gz", header=None)
    names = ["ID", "Age", "Gender", "Education", "Country", "Ethnicity", "Nscore", "Escore",
             "Oscore", "Ascore", "Cscore", "Impulsive", "SS", "Alcohol", "Amphet", "Amyl",
             "Benzos", "Caff", "Cannabis", "Choc", "Coke", "Crack", "Ecstasy", "Heroin",
             "Ketamine", "Legalh", "LSD", "Meth", "Mushrooms", "Nicotine", "Semer", "VSA"]
    df.columns = names
    y = (~df.pop("Cannabis").isin(["CL0", "CL1"])).to_numpy(int)  # user: CL2 or more
    df = df.drop(columns=["ID"])
    for c in names[13:]:
        if c in df:
            df[c] = df[c].str[2:].astype(float)  # CL0..CL6 -> 0..6 (ordinal)
    return df, y, ["Age", "Gender", "Education", "Country", "Ethnicity"], None


def _student():
    df = _csv("student_performance/student-por.csv.gz", sep=";")
    y = (df.pop("G3") >= 10).to_numpy(int)
    df = df.drop(columns=["G1", "G2"])  # the period grades nearly give G3 away
    return df, y, ["sex", "age"], None


def _heart_disease():
    cols = ["age", "sex", "cp", "trestbps", "chol", "fbs", "restecg", "thalach", "exang",
            "oldpeak", "slope", "ca", "thal", "num"]
    parts = []
    for site in ("cleveland", "hungarian", "switzerland", "va"):
        part = _csv(f"heart_disease/processed.{site}.data.gz", header=None, names=cols,
                    na_values="?")
        part["site"] = site
        parts.append(part)
    df = pd.concat(parts, ignore_index=True)
    y = (df.pop("num") > 0).to_numpy(int)
    for c in ("cp", "restecg", "slope", "thal"):
        df[c] = df[c].map(lambda v: "nan" if pd.isna(v) else str(int(v)))
    return df, y, ["sex", "age"], None


def _heart_failure():
    df = _csv("heart_failure/heart_failure_clinical_records_dataset.csv.gz")
    y = df.pop("DEATH_EVENT").to_numpy(int)
    df = df.drop(columns=["time"])  # censored follow-up: leaks the label
    return df, y, ["sex", "age"], None


DATASETS = {"adult": _adult, "diabetes130": _diabetes, "nhanes": _nhanes,
            "communities_crime": _communities, "drug_consumption": _drugs,
            "student_performance": _student, "heart_disease": _heart_disease,
            "heart_failure": _heart_failure}


def encode(train, test, protected):
    """Blocks scaled to norm <= 1; returns X_train, X_test, protected positions."""
    out_tr, out_te, is_prot = [], [], []
    n_raw = {True: 0, False: 0}
    blocks = []
    for c in train.columns:
        prot = c in protected
        n_raw[prot] += 1
        col_tr, col_te = train[c], test[c]
        if pd.api.types.is_numeric_dtype(col_tr):
            vals = col_tr.to_numpy(float)
            if np.isnan(vals).all():
                continue  # empty in this split
            lo, hi = np.nanmin(vals), np.nanmax(vals)
            span = hi - lo if hi > lo else 1.0
            a = np.clip((col_tr.to_numpy(float) - lo) / span, 0, 1)
            b = np.clip((col_te.to_numpy(float) - lo) / span, 0, 1)
            cols_tr, cols_te = [np.nan_to_num(a)], [np.nan_to_num(b)]
            if np.isnan(a).any():
                cols_tr.append(np.isnan(a).astype(float))
                cols_te.append(np.isnan(b).astype(float))
            # one raw column: keep its block norm <= 1 (value and indicator never both set)
        else:
            cats = col_tr.astype(str).value_counts().index[:20]
            cols_tr = [(col_tr.astype(str) == v).to_numpy(float) for v in cats]
            cols_te = [(col_te.astype(str) == v).to_numpy(float) for v in cats]
        blocks.append((prot, cols_tr, cols_te))
    for prot, cols_tr, cols_te in blocks:
        s = np.sqrt(max(n_raw[prot], 1))
        out_tr += [v / s for v in cols_tr]
        out_te += [v / s for v in cols_te]
        is_prot += [prot] * len(cols_tr)
    return (np.column_stack(out_tr), np.column_stack(out_te),
            np.flatnonzero(np.asarray(is_prot)))


# ---------------------------------------------------------------- cached public model

_CACHE = {}


class CachedHGB(ClassifierMixin, BaseEstimator):
    """HistGradientBoostingClassifier whose fit on bytes seen before is looked up.

    Deterministic given ``random_state``, so a stored fit is what a refit
    returns: the CPU saving of sharing the public model across ε.
    """

    def __init__(self, random_state=None):
        self.random_state = random_state

    def fit(self, X, y):
        key = hashlib.sha1(np.ascontiguousarray(X).tobytes() + np.asarray(y).tobytes()
                           + str(self.random_state).encode()).hexdigest()
        if key not in _CACHE:
            _CACHE[key] = HistGradientBoostingClassifier(random_state=self.random_state).fit(X, y)
        self.model_ = _CACHE[key]
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        return self.model_.predict_proba(X)

    def predict(self, X):
        return self.model_.predict(X)


def ci(diffs):
    d = np.asarray(diffs, float)
    m = float(d.mean())
    if len(d) < 2:
        return m, m, m
    h = float(stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)))
    return m, m - h, m + h


def run_dataset(name, seeds, log):
    df, y, protected, split = DATASETS[name]()
    rows = []
    for seed in seeds:
        if split is None:
            tr, te = train_test_split(np.arange(len(y)), test_size=0.3, stratify=y,
                                      random_state=seed)
        else:
            tr, te = np.flatnonzero(~split), np.flatnonzero(split)
        Xtr, Xte, prot = encode(df.iloc[tr], df.iloc[te], protected)
        ytr, yte = y[tr], y[te]
        pub = np.setdiff1d(np.arange(Xtr.shape[1]), prot)
        t0 = time.perf_counter()
        row = dict(seed=seed, n_train=len(tr), n_test=len(te), d=Xtr.shape[1],
                   d_protected=len(prot))
        hgb = CachedHGB(random_state=seed).fit(Xtr[:, pub], ytr)
        row["public_hgb"] = float((hgb.predict(Xte[:, pub]) == yte).mean())
        lin = LogisticRegression(max_iter=2000).fit(Xtr[:, pub], ytr)
        row["public_lr"] = float((lin.predict(Xte[:, pub]) == yte).mean())
        full = HistGradientBoostingClassifier(random_state=seed).fit(Xtr, ytr)
        row["all_columns_hgb"] = float((full.predict(Xte) == yte).mean())
        for eps in EPSILONS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                stack = FeatureDPStackingClassifier(
                    CachedHGB(random_state=seed), private_features=prot.tolist(),
                    epsilon=eps, delta=DELTA, random_state=seed).fit(Xtr, ytr)
                fdp = FeatureDPLogisticRegression(private_features=prot.tolist(),
                                                  label_public=True, epsilon=eps, delta=DELTA,
                                                  random_state=seed).fit(Xtr, ytr)
                sgd = DPSGDClassifier(epsilon=eps, delta=DELTA, random_state=seed).fit(Xtr, ytr)
            row[f"stacking@{eps}"] = float(stack.score(Xte, yte))
            row[f"fdp_lr@{eps}"] = float(fdp.score(Xte, yte))
            row[f"dpsgd@{eps}"] = float(sgd.score(Xte, yte))
            row[f"stacking_epsilon@{eps}"] = float(stack.epsilon_)
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        log(f"  {name} seed {seed}: public HGB {row['public_hgb']:.4f} all {row['all_columns_hgb']:.4f} "
            + " ".join(f"st@{e} {row[f'stacking@{e}']:.4f}/fdp {row[f'fdp_lr@{e}']:.4f}"
                       for e in EPSILONS) + f" ({row['seconds']:.0f}s)")
    return rows


def attack_run(epsilons, n_rows=3000):
    X_train, y_train, X_test, y_test = load_adult(return_X_y=True)
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    aux = np.sort(np.random.default_rng(0).permutation(len(y_test))[:len(y_test) // 2])
    rows = np.sort(np.random.default_rng(0).permutation(len(y_train))[:n_rows])
    X, y = X_train.iloc[rows].reset_index(drop=True), y_train[rows]
    out = []
    for eps in epsilons:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make_private_pipeline(
                make_adult_preprocessor().set_output(transform="pandas"),
                FeatureDPStackingClassifier(private_features=list(ADULT_PROTECTED),
                                            epsilon=eps, delta=DELTA, random_state=0)).fit(X, y)
            attack = AttributeInferenceAttack(model, "sex", ["Female", "Male"],
                                              prior="conditional")
            attack.fit(X_test.iloc[aux].reset_index(drop=True), y_test[aux])
            res = attack.evaluate(X, y)
        out.append(dict(epsilon=eps, spent=float(model[-1].epsilon_), **res.to_dict(),
                        bound=float(res.bound(eps, DELTA)),
                        accuracy_ci_upper_below_bound=bool(res.accuracy_ci[1]
                                                           <= res.bound(eps, DELTA))))
    return out


def fmt(m, lo, hi):
    return f"{m:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def write_md(result, path):
    lines = ["# Feature DP on top of a public boosted model (issue 34)", "",
             "Produced by `benchmarks/bench_stacking.py` (protocol in its docstring). "
             f"Seeds {result['seeds']}, δ = {DELTA:g}, test accuracy in points. Machine "
             f"shared with other jobs: load average {result['loadavg_start']} at the start, "
             f"{result['loadavg_end']} at the end.", ""]
    lines += ["## Accuracy (mean over seeds)", "",
              "| data set | n train | public-only HGB | public-only LR | HGB all columns | ε | "
              "stacked | FDP LR | DP-SGD |", "|---|---|---|---|---|---|---|---|---|"]
    for name, rows in result["datasets"].items():
        for eps in EPSILONS:
            mean = lambda k: 100 * np.mean([r[k] for r in rows])  # noqa: E731
            lines.append(f"| {name} | {rows[0]['n_train']} | {mean('public_hgb'):.2f} | "
                         f"{mean('public_lr'):.2f} | {mean('all_columns_hgb'):.2f} | {eps:g} | "
                         f"{mean(f'stacking@{eps}'):.2f} | {mean(f'fdp_lr@{eps}'):.2f} | "
                         f"{mean(f'dpsgd@{eps}'):.2f} |")
    lines += ["", "## Paired differences, stacked − reference (points, 95 % t interval "
              "over seeds)", "",
              "| data set | ε | − public-only HGB | − FDP LR | − DP-SGD | − HGB all columns | "
              "≥ public − 0.3 | ≥ FDP LR |", "|---|---|---|---|---|---|---|---|"]
    for name, stats_ in result["paired"].items():
        for eps in EPSILONS:
            s = stats_[str(eps)]
            lines.append(
                f"| {name} | {eps:g} | {fmt(*s['public_hgb'])} | {fmt(*s['fdp_lr'])} | "
                f"{fmt(*s['dpsgd'])} | {fmt(*s['all_columns_hgb'])} | "
                f"{'yes' if s['public_hgb'][0] >= -0.3 else 'NO'} | "
                f"{'yes' if s['fdp_lr'][0] >= 0 else 'no'} |")
    t = result["targets"]
    lines += ["", "## Targets", "",
              f"* ≥ public-only HGB − 0.3 points (mean paired difference): met in "
              f"{t['public_met']} of {t['cells']} cells; not met: {t['public_missed'] or 'none'}.",
              f"* ≥ FeatureDPLogisticRegression (mean paired difference ≥ 0) where the public "
              "columns carry non-linear signal (public-only HGB above public-only LR: "
              f"{', '.join(t['nonlinear']) or 'none'}): met in {t['fdp_met']} of "
              f"{t['fdp_cells']} cells; not met: {t['fdp_missed'] or 'none'}. Elsewhere see "
              "the '≥ FDP LR' column (not a target there).", ""]
    if result.get("attack"):
        lines += ["## Attribute inference on Adult's `sex` (3,000 training records)", "",
                  "| ε | ε spent | attack accuracy [95 % CI] | baseline | advantage [95 % CI] | "
                  "Thm. 4 bound | accuracy ≤ bound |", "|---|---|---|---|---|---|---|"]
        for a in result["attack"]:
            lines.append(
                f"| {a['epsilon']:g} | {a['spent']:.4f} | {a['accuracy']:.4f} "
                f"[{a['accuracy_ci'][0]:.4f}, {a['accuracy_ci'][1]:.4f}] | {a['baseline']:.4f} | "
                f"{a['advantage']:+.4f} [{a['advantage_ci'][0]:+.4f}, {a['advantage_ci'][1]:+.4f}]"
                f" | {a['bound']:.4f} | {'yes' if a['accuracy'] <= a['bound'] else 'NO'} |")
        lines.append("")
    path.write_text("\n".join(lines))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--no-attack", action="store_true")
    parser.add_argument("--out", default="stacking")
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    log = lambda m: print(m, flush=True)  # noqa: E731
    result = dict(seeds=seeds, epsilons=list(EPSILONS), delta=DELTA,
                  loadavg_start=[round(x, 2) for x in os.getloadavg()],
                  library=library_fingerprint(), datasets={}, paired={})
    for name in args.datasets:
        log(f"{name}:")
        result["datasets"][name] = run_dataset(name, seeds, log)
    cells, pub_miss, fdp_miss, nonlinear = 0, [], [], []
    for name, rows in result["datasets"].items():
        result["paired"][name] = {}
        if np.mean([r["public_hgb"] - r["public_lr"] for r in rows]) > 0:
            nonlinear.append(name)
        for eps in EPSILONS:
            st_ = np.array([r[f"stacking@{eps}"] for r in rows]) * 100
            s = {ref: ci(st_ - 100 * np.array([r[key] for r in rows]))
                 for ref, key in (("public_hgb", "public_hgb"), ("fdp_lr", f"fdp_lr@{eps}"),
                                  ("dpsgd", f"dpsgd@{eps}"),
                                  ("all_columns_hgb", "all_columns_hgb"))}
            result["paired"][name][str(eps)] = s
            cells += 1
            if s["public_hgb"][0] < -0.3:
                pub_miss.append(f"{name} ε={eps:g} ({s['public_hgb'][0]:+.2f})")
            if s["fdp_lr"][0] < 0 and name in nonlinear:
                fdp_miss.append(f"{name} ε={eps:g} ({s['fdp_lr'][0]:+.2f})")
    fdp_cells = len(nonlinear) * len(EPSILONS)
    result["targets"] = dict(cells=cells, public_met=cells - len(pub_miss),
                             public_missed=", ".join(pub_miss), nonlinear=nonlinear,
                             fdp_cells=fdp_cells, fdp_met=fdp_cells - len(fdp_miss),
                             fdp_missed=", ".join(fdp_miss))
    if not args.no_attack:
        log("attack:")
        result["attack"] = attack_run([0.1, 1.0])
        log(str(result["attack"]))
    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    OUT.mkdir(exist_ok=True)
    (OUT / f"{args.out}.json").write_text(json.dumps(result, indent=1, default=float))
    write_md(result, OUT / f"{args.out}.md")


if __name__ == "__main__":
    main()

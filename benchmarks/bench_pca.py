#!/usr/bin/env python
"""FeatureDPPCA against scikit-learn's PCA and diffprivlib's record-DP PCA.

Development data sets of ``../shared/data`` (``--data-dir``), each split once into
70 % train / 30 % test (``random_state=0``), columns scaled without reading the data:

* ``communities_crime``: the predictive columns without missing values (every one in
  [0, 1] by the data set's own normalisation), divided by √d so that every row has
  L2 norm <= 1; protected: the four ``racePct*`` columns; label
  ``ViolentCrimesPerPop > 0.2`` (a fixed threshold); k = 10 components.
* ``drug_consumption``: the 12 quantified columns (Age … SS), clipped to [-3.5, 3.5]
  (the documented quantifications lie inside) and divided by 3.5 √12; protected: Age,
  Gender, Ethnicity; label: cannabis used in the last decade (``CL2`` or more); k = 4.

Methods, at ε ∈ {0.1, 1} (δ = 1e-5 for FeatureDPPCA; diffprivlib is pure ε-DP):

* ``sklearn PCA``: non-private, the reference;
* ``FeatureDPPCA``: protects the protected columns only (feature DP, FDP Def. 6):
  ``row_norm_bounds = (‖public block‖ bound, ‖protected block‖ bound)`` from the scaling;
* ``diffprivlib PCA`` 0.6.6 (``benchmarks/baselines/diffprivlib_pca.py``, in its own
  environment): protects whole records (a stronger guarantee than feature DP: the
  comparison shows what protecting only the declared columns buys), ``data_norm=1``,
  the declared per-column bounds. Its eigenvector sampler (Bingham, by rejection) can
  stall: the baseline script estimates each draw's acceptance rate first and records a
  fit whose rate is below 1e-4 as stalled, with its expected time; an ε with a stalled
  fit is reported without a mean (the fits that finish would be a biased sample). The
  20 fits at d = 99 of an earlier run had not finished after 55 minutes because the
  baseline handed one array to every fit and diffprivlib's fit subtracts its noisy mean
  from it in place: the later fits saw data shifted by all earlier noisy means, whose
  Bingham draws have acceptance rates near 1e-16. Each fit now gets a copy.

Metrics on the test split, mean ± std over ``--seeds`` noise seeds: **variance
captured**, ``tr(Vᵀ C V) / (sum of the top-k eigenvalues of C)`` for the test
covariance ``C`` (1 for the optimal k axes); **downstream accuracy**: a pipeline
``projection → LogisticRegression`` (scikit-learn's, not private: the same
classifier for every method, so the column measures the components), trained on the
train split, scored on the test split; plus the classifier on all columns without a
projection.

Writes ``benchmarks/results/pca.json`` and ``pca.md``.

Results (in ``benchmarks/results/``): ``pca.json``, ``pca.md``.
Quoted in (the sections whose figures come from these files):

* docs/preprocessing.md § "Feature-DP PCA: `FeatureDPPCA`"
"""

import argparse
import gzip
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from sklearn.decomposition import PCA  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from sklearn_fdp import FeatureDPPCA  # noqa: E402

EPSILONS = (0.1, 1.0)


def _default_data_dir():
    for base in (ROOT.parent, ROOT.parents[1]):
        if (base / "shared" / "data").is_dir():
            return base / "shared" / "data"
    return ROOT.parent / "shared" / "data"


def _read_csv(path):
    with gzip.open(path, "rt") as f:
        return [line.rstrip("\r\n").split(",") for line in f if line.strip()]


def communities(data_dir):
    rows = _read_csv(data_dir / "communities_crime" / "communities.data.gz")
    names = [line.split()[1] for line in gzip.open(
        data_dir / "communities_crime" / "communities.names.gz", "rt")
        if line.startswith("@attribute")]
    table = np.array(rows, dtype=object)
    target = table[:, names.index("ViolentCrimesPerPop")].astype(float)
    cols = [j for j in range(5, len(names) - 1) if not np.any(table[:, j] == "?")]
    X = table[:, cols].astype(float) / np.sqrt(len(cols))
    col_names = [names[j] for j in cols]
    protected = [i for i, c in enumerate(col_names) if c.lower().startswith("racepct")]
    d, d_q = len(cols), len(protected)
    bounds = (np.sqrt((d - d_q) / d), np.sqrt(d_q / d))
    return dict(name="communities_crime", X=X, y=(target > 0.2).astype(int),
                protected=protected, k=10, row_norm_bounds=bounds,
                low=np.zeros(d), high=np.full(d, 1 / np.sqrt(d)))


def drugs(data_dir):
    table = np.array(_read_csv(data_dir / "drug_consumption" / "drug_consumption.data.gz"),
                     dtype=object)
    scale = 3.5 * np.sqrt(12)
    X = np.clip(table[:, 1:13].astype(float), -3.5, 3.5) / scale
    cannabis = table[:, 13 + 5]  # Alcohol, Amphet, Amyl, Benzos, Caff, Cannabis
    y = np.isin(cannabis, ["CL2", "CL3", "CL4", "CL5", "CL6"]).astype(int)
    protected = [0, 1, 4]  # Age, Gender, Ethnicity
    bounds = (np.sqrt(9) * 3.5 / scale, np.sqrt(3) * 3.5 / scale)
    return dict(name="drug_consumption", X=X, y=y, protected=protected, k=4,
                row_norm_bounds=bounds, low=np.full(12, -1 / np.sqrt(12)),
                high=np.full(12, 1 / np.sqrt(12)))


def variance_captured(V, C, k):
    top = np.sort(np.linalg.eigvalsh(C))[::-1][:k].sum()
    return float(np.trace(V @ C @ V.T) / top)


def downstream(V, mean, Xtr, ytr, Xte, yte):
    clf = LogisticRegression(max_iter=2000)
    if V is None:
        return float(clf.fit(Xtr, ytr).score(Xte, yte))
    return float(clf.fit((Xtr - mean) @ V.T, ytr).score((Xte - mean) @ V.T, yte))


def diffprivlib_components(ds, Xtr, seeds, python):
    with tempfile.TemporaryDirectory() as tmp:
        data, out = pathlib.Path(tmp) / "in.npz", pathlib.Path(tmp) / "out.npz"
        np.savez(data, X_train=Xtr, bounds_low=ds["low"], bounds_high=ds["high"], k=ds["k"])
        subprocess.run([python, str(HERE / "baselines" / "diffprivlib_pca.py"), "--data",
                        str(data), "--epsilons", ",".join(map(str, EPSILONS)), "--seeds",
                        ",".join(map(str, seeds)), "--out", str(out)], check=True)
        res = np.load(out)
        return (res["components"], res["mean"], res["finished"], json.loads(str(res["calls"])),
                json.loads(str(res["versions"])))


def run(ds, seeds, dpl_python, max_dpl_d):
    Xtr, Xte, ytr, yte = train_test_split(ds["X"], ds["y"], test_size=0.3, random_state=0,
                                          stratify=ds["y"])
    C = np.cov(Xte.T)
    k = ds["k"]
    ref = PCA(k).fit(Xtr)
    out = dict(name=ds["name"], n_train=len(Xtr), n_test=len(Xte), d=Xtr.shape[1], k=k,
               protected=len(ds["protected"]),
               all_columns_accuracy=downstream(None, None, Xtr, ytr, Xte, yte),
               sklearn=dict(variance=variance_captured(ref.components_, C, k),
                            accuracy=downstream(ref.components_, ref.mean_, Xtr, ytr, Xte,
                                                yte)),
               featuredppca={}, diffprivlib={})
    for eps in EPSILONS:
        rows = []
        for seed in seeds:
            p = FeatureDPPCA(k, private_features=ds["protected"], epsilon=eps, delta=1e-5,
                             row_norm_bounds=ds["row_norm_bounds"], random_state=seed).fit(Xtr)
            rows.append((variance_captured(p.components_, C, k),
                         downstream(p.components_, p.mean_, Xtr, ytr, Xte, yte)))
        out["featuredppca"][str(eps)] = _summary(rows)
    if dpl_python and ds["X"].shape[1] > max_dpl_d:
        out["diffprivlib_skipped"] = (f"d = {ds['X'].shape[1]} > --diffprivlib-max-d "
                                      f"{max_dpl_d}")
    elif dpl_python:
        comps, means, finished, calls, versions = diffprivlib_components(ds, Xtr, seeds,
                                                                         dpl_python)
        out["diffprivlib_versions"] = versions
        out["diffprivlib_stalled"] = {}
        for i, eps in enumerate(EPSILONS):
            if not finished[i].all():  # no mean over the seeds that happened to finish
                # A stalled fit ends at the draw it did not attempt: its last call.
                out["diffprivlib_stalled"][str(eps)] = [
                    [c for c in calls if c["epsilon"] == eps and c["seed"] == seeds[j]][-1]
                    for j in np.flatnonzero(~finished[i])]
                continue
            rows = [(variance_captured(comps[i, j], C, k),
                     downstream(comps[i, j], means[i, j], Xtr, ytr, Xte, yte))
                    for j in range(len(seeds))]
            out["diffprivlib"][str(eps)] = _summary(rows)
        out["diffprivlib_slowest_draw"] = max(calls, key=lambda c: c["expected_seconds"])
    return out


def _duration(seconds):
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def _summary(rows):
    a = np.array(rows)
    return dict(variance=float(a[:, 0].mean()), variance_std=float(a[:, 0].std(ddof=1)),
                accuracy=float(a[:, 1].mean()), accuracy_std=float(a[:, 1].std(ddof=1)))


def markdown(res):
    lines = ["# FeatureDPPCA against scikit-learn's PCA and diffprivlib's PCA", "",
             "Generated by `benchmarks/bench_pca.py` (do not edit by hand). Test-split "
             "variance captured (share of the optimal k axes' variance) and accuracy of "
             "`projection → LogisticRegression` (scikit-learn's, non-private, the same for "
             f"every method); mean ± std over {len(res['seeds'])} noise seeds. FeatureDPPCA "
             "protects the declared protected columns (feature DP, δ = 1e-5); diffprivlib "
             "protects whole records (pure ε-DP): a stronger guarantee.", "",
             f"Machine load average at the start: {res['loadavg'][0]:.2f}, at the end "
             f"{res['loadavg_end'][0]:.2f} (shared machine; only the stall estimates below "
             "involve time).", "",
             "A diffprivlib fit *stalls* when one of its k eigenvector draws (a Bingham "
             "distribution, sampled by rejection from an angular-central-Gaussian envelope) "
             "has an estimated acceptance rate below 1e-4: it would need on average "
             "1/rate tries of a d-dimensional multivariate normal each "
             "(`benchmarks/baselines/diffprivlib_pca.py` estimates the rate from 2,000 "
             "envelope draws and times a try). An ε at which any fit stalls gets no mean: "
             "the fits that finish are those whose noisy mean happened to land close to the "
             "data's, so a mean over them would flatter diffprivlib.", ""]
    for ds in res["datasets"]:
        lines += [f"## {ds['name']} ({ds['n_train']:,} train / {ds['n_test']:,} test rows, "
                  f"d = {ds['d']}, {ds['protected']} protected, k = {ds['k']})", "",
                  "| method | ε | variance captured | accuracy |", "|---|---:|---:|---:|",
                  f"| all columns, no projection | — | — | {ds['all_columns_accuracy']:.3f} |",
                  f"| sklearn PCA (non-private) | — | {ds['sklearn']['variance']:.3f} | "
                  f"{ds['sklearn']['accuracy']:.3f} |"]
        for method, label in (("featuredppca", "FeatureDPPCA (feature DP)"),
                              ("diffprivlib", "diffprivlib PCA (record DP)")):
            for eps, r in ds[method].items():
                lines.append(f"| {label} | {eps} | {r['variance']:.3f} ± "
                             f"{r['variance_std']:.3f} | {r['accuracy']:.3f} ± "
                             f"{r['accuracy_std']:.3f} |")
        for eps, stalls in ds.get("diffprivlib_stalled", {}).items():
            waits = ", ".join(f"seed {c['seed']}: {c['acceptance']:.1e} → "
                              f"{_duration(c['expected_seconds'])}" for c in stalls)
            lines.append(f"| diffprivlib PCA (record DP) | {eps} | not computable: "
                         f"{len(stalls)} of {len(res['seeds'])} fits stall (a Bingham draw's "
                         f"acceptance rate → its expected time: {waits}) | |")
        if ds.get("diffprivlib_skipped"):
            lines.append(f"| diffprivlib PCA | — | not run ({ds['diffprivlib_skipped']}) | |")
        elif not ds["diffprivlib"]:
            lines.append("| diffprivlib PCA | — | not run (no `.venv-diffprivlib`) | |")
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(_default_data_dir()))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--diffprivlib-python", default=str(ROOT / ".venv-diffprivlib" / "bin"
                                                            / "python"))
    parser.add_argument("--diffprivlib-max-d", type=int, default=1000,
                        help="skip diffprivlib on wider data (its sampler is slow in d)")
    parser.add_argument("--out", default=str(HERE / "results" / "pca"))
    args = parser.parse_args()
    from _common import library_fingerprint, write_json_and_markdown

    data_dir = pathlib.Path(args.data_dir)
    dpl = args.diffprivlib_python if os.path.exists(args.diffprivlib_python) else None
    seeds = list(range(args.seeds))
    res = dict(seeds=seeds, epsilons=list(EPSILONS), loadavg=list(os.getloadavg()),
               datasets=[run(ds(data_dir), seeds, dpl, args.diffprivlib_max_d)
                         for ds in (communities, drugs)],
               python=platform.python_version(), **library_fingerprint())
    res["loadavg_end"] = list(os.getloadavg())
    write_json_and_markdown(args.out, res, markdown(res))


if __name__ == "__main__":
    main()

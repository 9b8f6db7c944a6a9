#!/usr/bin/env python
"""Speed as users feel it: the whole public ``fit`` against scikit-learn, warm and cold.

Every timed run happens in a child process started with
``OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = MKL_NUM_THREADS = NUMBA_NUM_THREADS = 1``
(set before any import), so both sides use one BLAS / numba thread. CPU is the
child's process time (``resource.getrusage(RUSAGE_SELF)``, user + system, every
thread of the process: a noise thread, if any, is counted), wall is
``time.perf_counter``. Sections:

1. **Warm whole fit**, paired and interleaved: one child per case loads the data,
   fits every method once (numba kernels loaded, σ calibrated and kept in the
   process's cache), then runs ``--repeats`` rounds, each fitting every method
   once in turn (the order alternates between rounds). Ratios are medians of the
   per-round ratios, with a distribution-free ~90 % interval of that median
   (order statistics of the binomial; the full range when there are too few
   rounds for one). Cases: (a) Adult, default ``DPSGDClassifier(epsilon=1)`` vs
   ``SGDClassifier`` (log loss, ``max_iter`` = the same 10 epochs, ``tol=None``)
   and ``LogisticRegression``; (c) CSR 200,000 × 1,000,000, 40 non-zeros a row,
   default momentum (and ``momentum=0`` for reference) vs ``SGDClassifier``;
   (f) Adult as a DataFrame, ``FeatureDPLogisticRegression(method="alg1")`` with
   the protected columns of the other Adult benchmarks vs ``DPSGDClassifier``.
2. **(b) dense 200,000 × 600, 100 classes**, default learning rate, vs Opacus
   ghost clipping (``baselines/opacus_speed.py`` in ``.venv-opacus``, CPU, one
   torch thread): per epoch, from a ``DPSGDClassifier(epochs=--b-epochs)`` fit
   and from Opacus's steady-state CPU per step × steps of an epoch, Opacus at
   the DP fit's expected batch and at batch 256 (``bench_epoch.py``'s); DP and
   Opacus children alternate round by round.
3. **Cold whole fit**: fresh interpreters, alternately
   ``DPSGDClassifier(epsilon=1).fit`` and ``SGDClassifier.fit`` on Adult (read
   from an ``.npz`` by numpy in both), each with an empty calibration cache
   (``SKLEARN_FDP_CACHE_DIR`` = a new temporary folder) and a filled numba cache
   (one discarded warm-up process of each first). CPU of the whole process
   (``RUSAGE_CHILDREN`` in the parent: interpreter start, imports, everything)
   and wall, and the split measured inside the child: data load, imports,
   calibration (``privacy_plan``), fit. Also how many numba kernels a cold
   ``DPSGDClassifier`` fit loads (``NUMBA_DEBUG_CACHE``).
4. **GridSearchCV(n_jobs=2)**, 12 candidates, 5 folds, over ``DPSGDClassifier``
   vs over ``SGDClassifier`` on Adult: fresh processes (empty calibration
   cache), alternately; CPU summed over the parent and its loky workers (the
   executor is shut down, so the workers are reaped into ``RUSAGE_CHILDREN``).
   And the **per-worker overhead**: a fresh one-worker loky executor runs a
   trivial task, then imports and a tiny fit (σ given, so no calibration), with
   the worker's own CPU at each point.
5. **Calibration**: σ for every (ε, q, T) of the README demo and these
   benchmarks, each ``privacy_plan`` timed (CPU) in one process with an empty
   calibration cache, after a throwaway plan that pays the import of
   dp-accounting; with the PLD ε the calibrated σ verifies.

The machine's load average is recorded at start and end. ``--quick`` shrinks
the problems (CSR 20,000 × 100,000, (b) 20,000 rows) and the repeats, to check
that everything runs. Writes ``benchmarks/results/speed.json`` and ``speed.md``
(``speed_quick.*`` with ``--quick``; ``--out STEM`` for another name, e.g. with
``--sections``). The per-epoch figures of the training loop alone are
``bench_epoch.py``. A full run takes about 6-8 minutes on an idle 2-core machine.

Results (in ``benchmarks/results/``): ``speed.json``, ``speed.md``, ``speed_b.json``,
``speed_b.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Speed of the whole `fit`, warm and cold"
* docs/scale.md § "4. Wide sparse data and threads"
* docs/user_guide.md § "3. Accounting"
"""

from _common import one_thread  # benchmarks/ is on sys.path when run as a script

one_thread()  # before numpy is imported

import os  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from _common import (  # noqa: E402
    OPACUS_PY,
    RESULTS,
    ROOT,
    THREAD_VARS,
    child_env,
    cpu_seconds,
    run_child,
)
EPOCHS = 10  # DPSGDClassifier's default; SGDClassifier runs the same number
ADULT_PROTECTED_NAMES = ("sex", "race", "marital-status", "relationship", "capital-gain",
                         "capital-loss")  # sklearn_fdp.datasets.ADULT_PROTECTED


def self_child(spec, **env):
    return run_child([sys.executable, str(pathlib.Path(__file__).resolve()), "--child",
                      json.dumps(spec)], **env)


def median_interval(values, level=0.90):
    """Median and a distribution-free interval for it (order statistics, binomial)."""
    v = sorted(values)
    n = len(v)
    med = float(v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2]))
    # the largest j with P(Binomial(n, 1/2) < j) <= (1 - level) / 2: [v_j, v_{n-j+1}]
    cdf, j = 0.0, 0
    for i in range(n + 1):
        p = math.comb(n, i) / 2**n
        if cdf + p > (1 - level) / 2:
            break
        cdf += p
        j = i + 1
    lo, hi = (v[j - 1], v[n - j]) if j >= 1 else (v[0], v[-1])
    return dict(median=med, low=float(lo), high=float(hi), n=n,
                level=level if j >= 1 else None)


# -- data (written once by the parent, read by the children) --------------------


def write_data(folder, quick):
    from bench_epoch import click_log  # the per-epoch benchmark's problem (c), same data

    import numpy as np
    import scipy.sparse as sp

    from sklearn_fdp.datasets import load_adult, make_adult_preprocessor, make_purchase_like

    X_train, y_train, _, _ = load_adult(return_X_y=True)
    pre = make_adult_preprocessor().fit(X_train)
    X = pre.transform(X_train)
    X = np.ascontiguousarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    np.savez(folder / "adult.npz", X=X, y=np.asarray(y_train),
             columns=np.array([str(c) for c in pre.get_feature_names_out()]))
    n_c, field = (20_000, 2_500) if quick else (200_000, 25_000)
    Xc, yc = click_log(n_c, field_size=field)
    sp.save_npz(folder / "csr_X.npz", Xc)
    np.save(folder / "csr_y.npy", yc)
    n_b = 20_000 if quick else 200_000
    Xb, yb = make_purchase_like(n_samples=n_b, n_features=600, n_classes=100, random_state=0)
    np.save(folder / "purchase_X.npy", np.ascontiguousarray(Xb, dtype=np.float64))
    np.save(folder / "purchase_y.npy", np.asarray(yb, dtype=np.intp))
    return dict(adult=list(X.shape), csr=list(Xc.shape), csr_nnz=int(Xc.nnz),
                purchase=[n_b, 600, 100])


# -- children ---------------------------------------------------------------------


def _load(folder, name):
    import numpy as np
    import scipy.sparse as sp

    folder = pathlib.Path(folder)
    if name == "adult":
        d = np.load(folder / "adult.npz")
        return d["X"], d["y"], [str(c) for c in d["columns"]]
    if name == "csr":
        return sp.load_npz(folder / "csr_X.npz").tocsr(), np.load(folder / "csr_y.npy"), None
    return np.load(folder / "purchase_X.npy"), np.load(folder / "purchase_y.npy"), None


def _methods(case, X, y, columns):
    """name -> callable(seed) fitting one model, for a warm case."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression, SGDClassifier

    from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression

    def sgd(seed):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            SGDClassifier(loss="log_loss", max_iter=EPOCHS, tol=None, random_state=seed).fit(X, y)

    def dp(seed, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PerformanceWarning of momentum on wide CSR
            DPSGDClassifier(epsilon=1.0, random_state=seed, **kw).fit(X, y)

    if case == "adult":
        return dict(DPSGDClassifier=dp, SGDClassifier=sgd,
                    LogisticRegression=lambda s: LogisticRegression().fit(X, y))
    if case == "csr":
        return {"DPSGDClassifier": dp, "SGDClassifier": sgd,
                "DPSGDClassifier(momentum=0)": lambda s: dp(s, momentum=0.0)}
    if case == "fdp":
        import pandas as pd

        df = pd.DataFrame(X, columns=columns)

        def fdp(seed):
            FeatureDPLogisticRegression(private_features=list(ADULT_PROTECTED_NAMES),
                                        label_public=True, method="alg1", epsilon=1.0,
                                        random_state=seed).fit(df, y)

        def dp_df(seed):
            DPSGDClassifier(epsilon=1.0, random_state=seed).fit(df, y)
        return {"FeatureDPLogisticRegression(alg1)": fdp, "DPSGDClassifier": dp_df}
    raise ValueError(case)


def child_warm(spec):
    X, y, columns = _load(spec["data"], spec["data_name"])
    methods = _methods(spec["case"], X, y, columns)
    for fn in methods.values():  # warm-up: kernels loaded, σ calibrated and cached
        fn(0)
    names = list(methods)
    rounds = []
    for r in range(spec["repeats"]):
        order = names if r % 2 == 0 else names[::-1]
        cpu, wall = {}, {}
        for name in order:
            c0, w0 = cpu_seconds(), time.perf_counter()
            methods[name](r + 1)
            cpu[name], wall[name] = cpu_seconds() - c0, time.perf_counter() - w0
        rounds.append(dict(cpu=cpu, wall=wall))
    print(json.dumps(dict(rounds=rounds, methods=names)))


def child_purchase(spec):
    import numpy as np

    from sklearn_fdp import DPSGDClassifier

    X, y, _ = _load(spec["data"], "purchase")
    X = X.astype(spec["dtype"])
    est = DPSGDClassifier(epsilon=1.0, epochs=spec["epochs"], random_state=spec["seed"])
    est.privacy_plan(*X.shape)  # calibration out of the timed fit (as when warm)
    small = np.random.default_rng(0).choice(len(y), 2_000, replace=False)
    DPSGDClassifier(epsilon=None, noise_multiplier=1.0, epochs=0.2, random_state=0).fit(
        X[small], y[small])  # loads the kernels for this dtype
    c0, w0 = cpu_seconds(), time.perf_counter()
    est.fit(X, y)
    cpu, wall = cpu_seconds() - c0, time.perf_counter() - w0
    print(json.dumps(dict(cpu=cpu, wall=wall, epochs=spec["epochs"], steps=int(est.steps_),
                          batch_size=int(est.batch_size_),
                          learning_rate=float(est.learning_rate_))))


# the cold processes run this code (``python -c``), so that nothing else is imported
COLD_CODE = r"""
import time, resource, json
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
marks = [("start", cpu(), time.perf_counter())]
import numpy as np
d = np.load({data!r}); X, y = d["X"], d["y"]
marks.append(("data", cpu(), time.perf_counter()))
if {dp!r}:
    from sklearn_fdp import DPSGDClassifier
    marks.append(("imports", cpu(), time.perf_counter()))
    est = DPSGDClassifier(epsilon=1.0, random_state=0)
    est.privacy_plan(*X.shape)
    marks.append(("calibration", cpu(), time.perf_counter()))
    est.fit(X, y)
    marks.append(("fit", cpu(), time.perf_counter()))
else:
    import warnings
    from sklearn.linear_model import SGDClassifier
    marks.append(("imports", cpu(), time.perf_counter()))
    marks.append(("calibration", cpu(), time.perf_counter()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SGDClassifier(loss="log_loss", max_iter={epochs}, tol=None, random_state=0).fit(X, y)
    marks.append(("fit", cpu(), time.perf_counter()))
import sys
split = {{b[0]: dict(cpu=b[1] - a[1], wall=b[2] - a[2]) for a, b in zip(marks, marks[1:])}}
print(json.dumps(dict(split=split, cpu_at_start=marks[0][1],
                      modules=sorted({{m.split(".")[0] for m in sys.modules}}))))
"""


GRID_CODE = r"""
import time, resource, json, warnings
warnings.simplefilter("ignore")
def cpu(who):
    r = resource.getrusage(who); return r.ru_utime + r.ru_stime
import numpy as np
d = np.load({data!r}); X, y = d["X"], d["y"]
from sklearn.model_selection import GridSearchCV
from joblib.externals.loky import get_reusable_executor
if {dp!r}:
    from sklearn_fdp import DPSGDClassifier
    est = DPSGDClassifier(epsilon=1.0, random_state=0)
    grid = dict(learning_rate=["auto", 0.03, 0.3, 3.0], momentum=[0.0, 0.5, 0.9])
else:
    from sklearn.linear_model import SGDClassifier
    est = SGDClassifier(loss="log_loss", max_iter={epochs}, tol=None, learning_rate="constant",
                        random_state=0)
    grid = dict(eta0=[0.003, 0.01, 0.03, 0.1], alpha=[1e-5, 1e-4, 1e-3])
s0, c0, w0 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
search = GridSearchCV(est, grid, n_jobs=2, cv=5).fit(X, y)
get_reusable_executor().shutdown(wait=True)
wall = time.perf_counter() - w0
parent, workers = cpu(resource.RUSAGE_SELF) - s0, cpu(resource.RUSAGE_CHILDREN) - c0
print(json.dumps(dict(parent_cpu=parent, workers_cpu=workers, wall=wall,
                      candidates=len(search.cv_results_["params"]),
                      best_score=float(search.best_score_))))
"""


WORKER_CODE = r"""
import json, resource, time
from joblib.externals.loky import get_reusable_executor

def probe(what):
    import resource, time
    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
    out = dict(at_task=cpu())
    if what == "trivial":
        return out
    import numpy as np
    X = np.random.default_rng(0).normal(size=(500, 105)); y = (X[:, 0] > 0).astype(int)
    if what == "sklearn_fdp":
        from sklearn_fdp import DPSGDClassifier
        out["after_import"] = cpu()
        DPSGDClassifier(epsilon=None, noise_multiplier=1.0, epochs=1, random_state=0).fit(X, y)
    else:
        from sklearn.linear_model import SGDClassifier
        out["after_import"] = cpu()
        SGDClassifier(loss="log_loss", max_iter=1, tol=None, random_state=0).fit(X, y)
    out["after_first_fit"] = cpu()
    return out

res = {{}}
for what in ("trivial", "sklearn_fdp", "sklearn"):
    w0 = time.perf_counter()
    ex = get_reusable_executor(max_workers=1, kill_workers=True)
    res[what] = ex.submit(probe, what).result()
    res[what]["wall"] = time.perf_counter() - w0
    ex.shutdown(wait=True)
print(json.dumps(res))
"""


CALIBRATION_CODE = r"""
import json, re, resource, time, warnings
warnings.simplefilter("ignore")
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression
from sklearn_fdp import accounting
c0 = cpu()
DPSGDClassifier(epsilon=0.77, delta=1e-6).privacy_plan(1234, 5)   # throwaway: imports dp-accounting
first = cpu() - c0
rows = []
for label, kind, eps, n, d, names in {configs!r}:
    if kind == "dpsgd":
        est = DPSGDClassifier(epsilon=eps)
    else:
        est = FeatureDPLogisticRegression(private_features=names[1], label_public=True,
                                          method="alg1", epsilon=eps)
    c0, w0 = cpu(), time.perf_counter()
    plan = est.privacy_plan(n, d, feature_names=None if names is None else names[0])
    c, w = cpu() - c0, time.perf_counter() - w0
    pld = accounting.epsilon_of_event(plan.dp_event, plan.delta, accountant="pld")
    text = repr(plan.dp_event)
    q = re.search(r"sampling_probability=([0-9.e-]+)", text)
    T = re.search(r"count=([0-9]+)", text)
    rows.append(dict(label=label, estimator=kind, epsilon=eps, n=n, d=d, delta=plan.delta,
                     q=float(q.group(1)) if q else None, steps=int(T.group(1)) if T else None,
                     sigma=plan.noise_multiplier, cpu=c, wall=w, accountant=plan.accountant,
                     plan_epsilon=plan.epsilon, pld_epsilon=pld,
                     event=repr(plan.dp_event)[:300]))
print(json.dumps(dict(first_plan_cpu=first, rows=rows)))
"""


# -- sections ------------------------------------------------------------------------


def warm_case(case, data_name, folder, repeats):
    out, wall, cpu, _ = self_child(dict(kind="warm", case=case, data_name=data_name,
                                        data=str(folder), repeats=repeats))
    rounds, names = out["rounds"], out["methods"]
    base = names[1]  # the reference each case compares against (second method)
    res = dict(methods=names, reference=base, rounds=rounds, child_wall=wall, child_cpu=cpu,
               median_cpu={m: median_interval([r["cpu"][m] for r in rounds])["median"]
                           for m in names},
               median_wall={m: median_interval([r["wall"][m] for r in rounds])["median"]
                            for m in names}, ratios={})
    for m in names:
        for other in names:
            if m == other:
                continue
            res["ratios"][f"{m} / {other}"] = dict(
                cpu=median_interval([r["cpu"][m] / r["cpu"][other] for r in rounds]),
                wall=median_interval([r["wall"][m] / r["wall"][other] for r in rounds]))
    return res


def purchase_section(folder, repeats, epochs, n_rows, steps_256):
    """(b): DP fits (float64, float32 input) and Opacus ghost clipping, alternating children.

    Opacus runs twice a round: at the DP fit's own expected batch (the same work per
    epoch; timed on half an epoch, at least 10 steps) and at batch 256 as in
    ``bench_epoch.py`` (``steps_256`` steps).
    """
    import numpy as np

    res = dict(dp=[], opacus=[], epochs=epochs)
    npz = None
    if OPACUS_PY.exists():
        X = np.load(folder / "purchase_X.npy")
        y = np.load(folder / "purchase_y.npy")
        npz = folder / "purchase_opacus.npz"
        np.savez(npz, X=X.astype(np.float32), y=y, k=100)
        del X
    for r in range(repeats):
        for dtype in ("float64", "float32"):
            out, wall, cpu, _ = self_child(dict(kind="purchase", data=str(folder), dtype=dtype,
                                                epochs=epochs, seed=r))
            res["dp"].append(dict(dtype=dtype, round=r, **out))
        if npz is None:
            continue
        batch = res["dp"][0]["batch_size"]
        same_steps = max(10, math.ceil(n_rows / batch / 2))
        for label, bs, steps in (("same_batch", batch, same_steps), ("batch_256", 256, steps_256)):
            out, wall, cpu, _ = run_child(
                [str(OPACUS_PY), str(ROOT / "benchmarks" / "baselines" / "opacus_speed.py"),
                 "--data", str(npz), "--mode", "ghost", "--batch-size", str(bs),
                 "--steps", str(steps), "--repeats", "1", "--threads", "1"])
            res["opacus"].append(dict(round=r, setting=label, **out))
    res["dp_batch_size"] = res["dp"][0]["batch_size"]
    res["dp_steps_per_epoch"] = res["dp"][0]["steps"] / epochs
    res["n_rows"] = n_rows
    for dtype in ("float64", "float32"):
        rows = [row for row in res["dp"] if row["dtype"] == dtype]
        res[f"dp_{dtype}_cpu_per_epoch"] = median_interval([row["cpu"] / epochs for row in rows])
        res[f"dp_{dtype}_wall_per_epoch"] = median_interval([row["wall"] / epochs for row in rows])
        for label in ("same_batch", "batch_256"):
            ops = [o for o in res["opacus"] if o["setting"] == label]
            if ops:  # paired by round: per epoch = CPU per step × n / batch
                res[f"opacus_{label}_over_dp_{dtype}_cpu"] = median_interval([
                    o["cpu_seconds_per_epoch"] / (d["cpu"] / epochs) for o, d in zip(ops, rows)])
    for label in ("same_batch", "batch_256"):
        ops = [o for o in res["opacus"] if o["setting"] == label]
        if ops:
            res[f"opacus_{label}_cpu_per_epoch"] = median_interval(
                [o["cpu_seconds_per_epoch"] for o in ops])
            res[f"opacus_{label}_steps_timed"] = ops[0]["steps_timed"]
    return res


def cold_section(folder, repeats):
    adult = str(folder / "adult.npz")
    code = {dp: COLD_CODE.format(data=adult, dp=dp, epochs=EPOCHS) for dp in (True, False)}
    runs = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(-1, repeats):  # round -1: warm-up (fills the numba cache), discarded
            for dp in ((True, False) if r % 2 == 0 else (False, True)):
                cache = pathlib.Path(tmp) / f"cal{r}{dp}"
                cache.mkdir()
                out, wall, cpu, _ = run_child([sys.executable, "-c", code[dp]],
                                              SKLEARN_FDP_CACHE_DIR=cache)
                if r >= 0:
                    runs[dp].append(dict(process_cpu=cpu, process_wall=wall, **out))
        # which numba kernels a cold fit loads, and whether any compiles
        cache = pathlib.Path(tmp) / "cal_numba"
        cache.mkdir()
        done = subprocess.run([sys.executable, "-c", code[True]], capture_output=True, text=True,
                              cwd=ROOT, env=child_env(SKLEARN_FDP_CACHE_DIR=cache,
                                                      NUMBA_DEBUG_CACHE=1))
    lines = done.stdout.splitlines()
    loaded = sorted({ln.split("data loaded from")[-1].strip().strip("'\"") for ln in lines
                     if "data loaded from" in ln})
    saved = [ln for ln in lines if "data saved to" in ln]
    res = dict(dp=runs[True], sgd=runs[False],
               numba=dict(kernels_loaded=len(loaded), loaded=[pathlib.Path(p).name for p in loaded],
                          kernels_compiled=len(saved)))
    res["ratio_process_cpu"] = median_interval(
        [a["process_cpu"] / b["process_cpu"] for a, b in zip(runs[True], runs[False])])
    res["ratio_process_wall"] = median_interval(
        [a["process_wall"] / b["process_wall"] for a, b in zip(runs[True], runs[False])])
    res["ratio_cpu_without_data"] = median_interval(
        [(a["process_cpu"] - a["split"]["data"]["cpu"])
         / (b["process_cpu"] - b["split"]["data"]["cpu"])
         for a, b in zip(runs[True], runs[False])])
    for side in ("dp", "sgd"):
        res[f"{side}_median"] = {
            "process_cpu": median_interval([x["process_cpu"] for x in res[side]])["median"],
            "process_wall": median_interval([x["process_wall"] for x in res[side]])["median"],
            **{f"{k}_cpu": median_interval([x["split"][k]["cpu"] for x in res[side]])["median"]
               for k in ("data", "imports", "calibration", "fit")},
            "interpreter_cpu": median_interval([x["cpu_at_start"] for x in res[side]])["median"],
        }
    mods_dp = set(runs[True][0]["modules"]) if runs[True] else set()
    mods_sgd = set(runs[False][0]["modules"]) if runs[False] else set()
    res["modules_only_in_dp_process"] = sorted(mods_dp - mods_sgd)
    for run in runs[True] + runs[False]:
        run.pop("modules", None)
    return res


def grid_section(folder, repeats):
    adult = str(folder / "adult.npz")
    runs = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            for dp in ((True, False) if r % 2 == 0 else (False, True)):
                cache = pathlib.Path(tmp) / f"cal{r}{dp}"
                cache.mkdir()
                code = GRID_CODE.format(data=adult, dp=dp, epochs=EPOCHS)
                out, wall, cpu, _ = run_child([sys.executable, "-c", code],
                                              SKLEARN_FDP_CACHE_DIR=cache)
                out["search_cpu"] = out["parent_cpu"] + out["workers_cpu"]
                runs[dp].append(dict(process_cpu=cpu, process_wall=wall, **out))
        worker, _, _, _ = run_child([sys.executable, "-c", WORKER_CODE.format()],
                                    SKLEARN_FDP_CACHE_DIR=pathlib.Path(tmp) / "worker")
    return dict(
        dp=runs[True], sgd=runs[False], worker=worker,
        ratio_search_cpu=median_interval([a["search_cpu"] / b["search_cpu"]
                                          for a, b in zip(runs[True], runs[False])]),
        ratio_search_wall=median_interval([a["wall"] / b["wall"]
                                           for a, b in zip(runs[True], runs[False])]),
        ratio_process_cpu=median_interval([a["process_cpu"] / b["process_cpu"]
                                           for a, b in zip(runs[True], runs[False])]))


def run_calibration(folder, shapes):
    """σ of every (ε, q, T) of the README demo and these benchmarks, timed in one process."""
    import numpy as np

    n_a, d_a = shapes["adult"]
    columns = [str(c) for c in np.load(folder / "adult.npz")["columns"]]
    configs = [(f"Adult (demo) ε={eps}", "dpsgd", eps, n_a, d_a, None)
               for eps in (0.01, 0.03, 0.1, 0.3, 1.0)]
    configs.append(("Adult GridSearchCV fold ε=1", "dpsgd", 1.0, n_a - n_a // 5, d_a, None))
    n_c, d_c = shapes["csr"]
    configs.append((f"CSR {n_c:,}×{d_c:,} ε=1", "dpsgd", 1.0, n_c, d_c, None))
    n_b = shapes["purchase"][0]
    configs.append((f"purchase {n_b:,}×600 ε=1", "dpsgd", 1.0, n_b, 600, None))
    for eps in (0.01, 0.1, 1.0):
        configs.append((f"Adult FDP alg1 (demo) ε={eps}", "fdp", eps, n_a, d_a,
                        [columns, list(ADULT_PROTECTED_NAMES)]))
    with tempfile.TemporaryDirectory() as tmp:
        out, _, _, _ = run_child([sys.executable, "-c", CALIBRATION_CODE.format(configs=configs)],
                                 SKLEARN_FDP_CACHE_DIR=tmp)
    return out


# -- report ----------------------------------------------------------------------------


def fmt_iv(iv, unit="×"):
    if iv is None:
        return "—"
    lvl = "" if iv.get("level") else " (range)"
    return f"{iv['median']:.2f}{unit} [{iv['low']:.2f}, {iv['high']:.2f}]{lvl}"


def markdown(meta, res):
    out = ["# Speed of the whole public `fit`, warm and cold (`benchmarks/bench_speed.py`)", "",
           f"Run on {meta['date']} ({meta['machine']}; {meta['versions']}), "
           f"{'**quick mode, reduced sizes**; ' if meta['quick'] else ''}"
           f"every timed child with {', '.join(f'{v}=1' for v in THREAD_VARS)}. "
           f"Load average (1 min) {meta['load_start']:.2f} at the start, "
           f"{meta['load_end']:.2f} at the end; total run {meta['total_wall']:.0f} s wall. "
           "CPU = the process's user + system time (all threads). Ratios: median of per-round "
           "ratios [~90 % distribution-free interval of that median; \"(range)\" = min–max "
           "where the rounds are too few for one].", ""]
    if "warm" in res:
        out += ["## Warm whole fit (σ cached in the process, kernels loaded), paired rounds", "",
                "| case | method | CPU s (median) | wall s | ratio CPU | ratio wall |",
                "|---|---|---:|---:|---|---|"]
        for case, r in res["warm"].items():
            ref = r["reference"]
            for m in r["methods"]:
                key = f"{m} / {ref}"
                rat = r["ratios"].get(key)
                out.append(f"| {case} | `{m}` | {r['median_cpu'][m]:.3f} | "
                           f"{r['median_wall'][m]:.3f} | "
                           f"{fmt_iv(rat['cpu']) + ' vs ' + ref if rat else 'reference'} | "
                           f"{fmt_iv(rat['wall']) if rat else ''} |")
        out.append("")
    if "purchase" in res:
        p = res["purchase"]
        out += [f"## (b) dense {p['n_rows']:,} × 600, 100 classes, default learning rate, "
                "vs Opacus ghost clipping", "",
                f"`DPSGDClassifier(epsilon=1, epochs={p['epochs']})` (expected batch "
                f"{p['dp_batch_size']}, default `learning_rate=\"auto\"`): CPU per epoch of the "
                "whole fit (σ calibrated before). Opacus 1.6.0 ghost clipping (float32, one torch "
                "thread): CPU per step × steps of an epoch, at the same expected batch "
                f"({p.get('opacus_same_batch_steps_timed', '—')} steps timed) and at batch 256 "
                f"as in `bench_epoch.py` ({p.get('opacus_batch_256_steps_timed', '—')} steps).",
                "",
                "| input | DP CPU s / epoch | DP wall s / epoch | Opacus (same batch) / DP, CPU "
                "| Opacus (batch 256) / DP, CPU |", "|---|---:|---:|---|---|"]
        for dtype in ("float64", "float32"):
            cells = [fmt_iv(p.get(f"opacus_{label}_over_dp_{dtype}_cpu"))
                     for label in ("same_batch", "batch_256")]
            out.append(f"| {dtype} | {p[f'dp_{dtype}_cpu_per_epoch']['median']:.3f} | "
                       f"{p[f'dp_{dtype}_wall_per_epoch']['median']:.3f} | {cells[0]} | "
                       f"{cells[1]} |")
        ops = [f"{p[f'opacus_{label}_cpu_per_epoch']['median']:.3f} s ({name})"
               for label, name in (("same_batch", "same batch"), ("batch_256", "batch 256"))
               if f"opacus_{label}_cpu_per_epoch" in p]
        out += ["", "Opacus CPU per epoch: " + (", ".join(ops) or "not run (no .venv-opacus)")
                + ".", ""]
    if "cold" in res:
        c = res["cold"]
        out += ["## Cold whole fit: a fresh process, empty calibration cache, filled numba cache",
                "", "Adult; both processes read the same `.npz` with numpy. Process CPU / wall "
                "measured by the parent (interpreter start-up included); the split inside the "
                "child (medians).", "",
                "| process | process CPU s | process wall s | interpreter | data | imports | "
                "calibration | fit |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for side, label in (("dp", "`DPSGDClassifier(epsilon=1).fit`"),
                            ("sgd", f"`SGDClassifier(max_iter={EPOCHS}).fit`")):
            m = c[f"{side}_median"]
            out.append(f"| {label} | {m['process_cpu']:.3f} | {m['process_wall']:.3f} | "
                       f"{m['interpreter_cpu']:.3f} | {m['data_cpu']:.3f} | "
                       f"{m['imports_cpu']:.3f} | {m['calibration_cpu']:.3f} | "
                       f"{m['fit_cpu']:.3f} |")
        out += ["", f"- DP / SGD, process CPU: {fmt_iv(c['ratio_process_cpu'])}; wall: "
                f"{fmt_iv(c['ratio_process_wall'])}; CPU without the (shared) data load: "
                f"{fmt_iv(c['ratio_cpu_without_data'])}.",
                f"- numba: a cold DP fit loads {c['numba']['kernels_loaded']} kernel "
                f"signatures from the disk cache and compiles {c['numba']['kernels_compiled']} "
                f"({', '.join(f'`{k}`' for k in c['numba']['loaded'])}).",
                "- Top-level modules only the DP process loads: "
                + (", ".join(f"`{m}`" for m in c["modules_only_in_dp_process"]) or "none") + ".",
                ""]
    if "grid" in res:
        g = res["grid"]
        med = {side: median_interval([x["search_cpu"] for x in g[side]])["median"]
               for side in ("dp", "sgd")}
        wmed = {side: median_interval([x["wall"] for x in g[side]])["median"]
                for side in ("dp", "sgd")}
        out += ["## GridSearchCV(n_jobs=2), 12 candidates × 5 folds, Adult, fresh processes", "",
                "CPU of the search = the parent's + its loky workers' (reaped into "
                "`RUSAGE_CHILDREN` once the executor is shut down); empty calibration cache.", "",
                "| search over | search CPU s | search wall s |", "|---|---:|---:|",
                f"| `DPSGDClassifier(epsilon=1)` (learning_rate × momentum) | {med['dp']:.2f} | "
                f"{wmed['dp']:.2f} |",
                f"| `SGDClassifier` (eta0 × alpha) | {med['sgd']:.2f} | {wmed['sgd']:.2f} |", "",
                f"- DP / SGD search CPU: {fmt_iv(g['ratio_search_cpu'])}; wall: "
                f"{fmt_iv(g['ratio_search_wall'])}."]
        w = g["worker"]

        def extra(side, a, b):
            return w[side][b] - w[side][a]
        out.append(
            "- A fresh loky worker: CPU when a trivial task runs "
            f"{w['trivial']['at_task']:.2f} s; importing `DPSGDClassifier` "
            f"+{extra('sklearn_fdp', 'at_task', 'after_import'):.2f} s, its first tiny fit "
            f"(σ given) +{extra('sklearn_fdp', 'after_import', 'after_first_fit'):.2f} s; "
            f"importing `SGDClassifier` +{extra('sklearn', 'at_task', 'after_import'):.2f} s, "
            f"its first fit +{extra('sklearn', 'after_import', 'after_first_fit'):.2f} s.")
        out.append("")
    if "calibration" in res:
        cal = res["calibration"]
        out += ["## Calibration of σ (one process, empty calibration cache)", "",
                f"`privacy_plan` CPU per configuration, after a throwaway first plan "
                f"({cal['first_plan_cpu']:.2f} s CPU, importing dp-accounting). δ = the "
                "estimator default.", "",
                "| configuration | n | d | q | T | δ | σ | accountant | plan ε | PLD ε of σ | "
                "CPU s | wall s |", "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
        seen = {}
        for i, row in enumerate(cal["rows"], 1):
            key = (row["epsilon"], row["delta"], row["q"], row["steps"])
            timing = (f"{row['cpu']:.3f} | {row['wall']:.3f}" if key not in seen else
                      f"cached (= row {seen[key]}) | ")
            seen.setdefault(key, i)
            q = "—" if row["q"] is None else f"{row['q']:.4g}"
            out.append(f"| {i}. {row['label']} | {row['n']:,} | {row['d']:,} | {q} | "
                       f"{row['steps'] or '—'} | {row['delta']:.0e} | "
                       f"{row['sigma']:.4f} | {row['accountant']} | {row['plan_epsilon']:.4f} | "
                       f"{row['pld_epsilon']:.4f} | {timing} |")
        out.append("")
    out.append("The training loop alone, per epoch, against the engine's non-private twin, "
               "numpy DP-SGD and Opacus: `benchmarks/bench_epoch.py` "
               "(`benchmarks/results/epoch.md`).")
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="reduced sizes and repeats (smoke test)")
    p.add_argument("--repeats", type=int, default=None, help="rounds of the warm cases (5)")
    p.add_argument("--cold-repeats", type=int, default=None, help="cold process pairs (5)")
    p.add_argument("--grid-repeats", type=int, default=None, help="search pairs (3)")
    p.add_argument("--b-epochs", type=float, default=None, help="epochs of the (b) DP fit (1)")
    p.add_argument("--sections", default="warm,purchase,cold,grid,calibration")
    p.add_argument("--out", default=None,
                   help="results stem under benchmarks/results (speed; speed_quick with --quick)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        spec = json.loads(args.child)
        {"warm": child_warm, "purchase": child_purchase}[spec["kind"]](spec)
        return
    q = args.quick
    repeats = args.repeats or (3 if q else 5)
    cold_repeats = args.cold_repeats or (2 if q else 5)
    grid_repeats = args.grid_repeats or (1 if q else 3)
    b_epochs = args.b_epochs or (0.5 if q else 1.0)
    sections = set(args.sections.split(","))
    t_start, load_start = time.perf_counter(), os.getloadavg()[0]
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        print("[data]", flush=True)
        shapes = write_data(folder, q)
        res["shapes"] = shapes
        if "warm" in sections:
            res["warm"] = {}
            for case, data, label in (("adult", "adult", "(a) Adult"),
                                      ("csr", "csr", f"(c) CSR {shapes['csr'][0]:,}×"
                                                     f"{shapes['csr'][1]:,}, 40 nnz"),
                                      ("fdp", "adult", "(f) Adult, FDP alg1 vs DP-SGD")):
                print(f"[warm {case}]", flush=True)
                t0 = time.perf_counter()
                res["warm"][label] = warm_case(case, data, folder, repeats)
                print(f"  {time.perf_counter() - t0:.0f} s", flush=True)
        if "purchase" in sections:
            print("[purchase]", flush=True)
            t0 = time.perf_counter()
            res["purchase"] = purchase_section(folder, max(2, repeats // 2 + 1) if not q else 1,
                                               b_epochs, shapes["purchase"][0],
                                               40 if q else 200)
            print(f"  {time.perf_counter() - t0:.0f} s", flush=True)
        if "cold" in sections:
            print("[cold]", flush=True)
            t0 = time.perf_counter()
            res["cold"] = cold_section(folder, cold_repeats)
            print(f"  {time.perf_counter() - t0:.0f} s", flush=True)
        if "grid" in sections:
            print("[grid]", flush=True)
            t0 = time.perf_counter()
            res["grid"] = grid_section(folder, grid_repeats)
            print(f"  {time.perf_counter() - t0:.0f} s", flush=True)
        if "calibration" in sections:
            print("[calibration]", flush=True)
            res["calibration"] = run_calibration(folder, shapes)
    import numpy as np
    import scipy
    import sklearn

    import sklearn_fdp

    from importlib.metadata import PackageNotFoundError, version

    try:
        dpa = version("dp-accounting")
    except PackageNotFoundError:
        dpa = "absent"
    meta = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                machine=f"{platform.machine()}, {os.cpu_count()} cores, "
                        f"{platform.processor() or platform.platform()}",
                versions=f"Python {platform.python_version()}, sklearn_fdp "
                         f"{sklearn_fdp.__version__}, scikit-learn {sklearn.__version__}, numpy "
                         f"{np.__version__}, scipy {scipy.__version__}, dp-accounting {dpa}",
                quick=q, threads={v: "1" for v in THREAD_VARS}, repeats=repeats,
                cold_repeats=cold_repeats, grid_repeats=grid_repeats,
                load_start=load_start, load_end=os.getloadavg()[0],
                total_wall=time.perf_counter() - t_start)
    try:
        meta["git_head"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT,
                                          capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = args.out or ("speed_quick" if q else "speed")
    (RESULTS / f"{stem}.json").write_text(json.dumps(dict(meta=meta, **res), indent=1) + "\n")
    md = markdown(meta, res)
    (RESULTS / f"{stem}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

"""Fingerprints of every estimator's fit, for refactors that must not change results.

``python -m tests.regression.fingerprints --write`` records, for every
estimator × method/variant × input kind (dense, CSR where accepted, memmap
where accepted, and "stream": a memmap read batch by batch, the out-of-core
path, forced by setting ``STREAM_MIN_BYTES`` to 0), a SHA-256 of the fitted
arrays (``coef_``, ``intercept_``, ``mean_``, the MLP's weights), the arrays
themselves (``repr`` of each float, exact), ``epsilon_`` and
``repr(dp_event_)`` into ``fingerprints.json`` beside this file, with the
environment that decides their last bits (:func:`environment`): the library
versions, the BLAS library and the kernel it picked (threadpoolctl), its
thread count, the CPU the code paths of NumPy, numba (LLVM's host CPU) and
torch dispatch on.

``tests/regression/test_fingerprints.py`` compares a fresh run with the record
bit for bit where the whole environment matches, and elsewhere within the
float64 reassociation bound of :mod:`tests.regression.tolerance` (the same
arithmetic summed in another order: another BLAS kernel, another SIMD width,
another thread split).

Issue 17 ("one module per mechanism") requires bit-identical ``coef_``,
``epsilon_`` and ``dp_event_`` before and after the move: record first, move,
then run the test (on the machine and kernel that recorded, or the bit-for-bit
part skips).
"""

import hashlib
import json
import math
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
RECORD = HERE / "fingerprints.json"
ARRAY_ATTRS = ("coef_", "intercept_", "mean_", "scale_")


def _cpu():
    """The CPU model and the SIMD features NumPy dispatches on (BLAS and
    NumPy's kernels pick code paths by them, and the last bits follow)."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as features
    enabled = ",".join(sorted(k for k, v in features.items() if v))
    return f"{model} [{hashlib.sha256(enabled.encode()).hexdigest()[:12]}]"


def _blas():
    """Each BLAS NumPy/SciPy loaded, the kernel it picked and its thread count
    (OpenBLAS picks its kernel at load time by the CPU, or by
    ``OPENBLAS_CORETYPE``; another kernel sums in another order)."""
    from threadpoolctl import threadpool_info

    keys = ("internal_api", "version", "architecture", "threading_layer", "num_threads")
    return sorted((";".join(f"{k}={info.get(k)}" for k in keys)
                   for info in threadpool_info() if info.get("user_api") == "blas"))


def _numba_cpu():
    """The CPU LLVM compiles numba's kernels for (its vector width decides the
    order of vectorised sums)."""
    try:
        import llvmlite.binding as llvm

        return llvm.get_host_cpu_name()
    except Exception:  # pragma: no cover - llvmlite always ships with numba
        return "unknown"


def environment():
    """Everything the last bits of a fit depend on, as a flat dict of strings."""
    out = versions()
    out["blas"] = _blas()
    out["numba_cpu"] = _numba_cpu()
    try:
        import torch

        out["torch_cpu"] = f"{torch.backends.cpu.get_cpu_capability()};threads={torch.get_num_threads()}"
    except ImportError:
        pass
    return out


def versions():
    import numba
    import scipy
    import sklearn

    out = {"python": platform.python_version(), "machine": platform.machine(),
           "numpy": np.__version__, "scipy": scipy.__version__, "numba": numba.__version__,
           "scikit-learn": sklearn.__version__, "cpu": _cpu()}
    try:
        import torch

        out["torch"] = torch.__version__
    except ImportError:
        pass
    return out


N_ROWS = 240


def _data(kind, n=N_ROWS, d=8, k=2, seed=0):
    """Rows of norm <= 1 and labels (``k`` classes; ``k=0``: a real target)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    w = rng.standard_normal((d, max(k, 1)))
    if k == 0:
        y = X @ w[:, 0] + 0.3 * rng.standard_normal(n)
    elif k > 2:
        y = np.argmax(X @ w + 0.3 * rng.standard_normal((n, k)), axis=1)
    else:
        y = (X @ w[:, 0] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    if kind == "csr":
        X = X * (rng.random((n, d)) < 0.5)
        return sp.csr_matrix(X), y
    return X, y


def _cases():
    from sklearn_fdp import (AdaMixClassifier, DPSGDClassifier, DPSGDFClassifier,
                             FeatureDPLogisticRegression, PrivateMeanCenterer)

    common = dict(epsilon=2.0, delta=1e-5, random_state=0)
    yield "DPSGDClassifier", lambda: DPSGDClassifier(epochs=2, **common), ("dense", "csr", "memmap", "stream")
    yield "DPSGDClassifier/hinge/multi", lambda: DPSGDClassifier(loss="hinge", epochs=2, **common), \
        ("dense", "csr")
    yield "DPSGDClassifier/lazy", lambda: DPSGDClassifier(epochs=2, momentum=0.0, **common), ("csr",)
    for method in ("alg1", "dpsgd"):
        for pl in ("mask", "gaussian_pad"):
            for label_public in (True, False):
                yield (f"FeatureDPLogisticRegression/{method}/{pl}/label_public={label_public}",
                       lambda m=method, p=pl, lp=label_public: FeatureDPLogisticRegression(
                           private_features=[0, 1], method=m, public_loss=p, label_public=lp,
                           epochs=2, **common),
                       ("dense", "csr", "memmap", "stream"))
    yield ("FeatureDPLogisticRegression/sufficient_statistic",
           lambda: FeatureDPLogisticRegression(private_features=[], label_public=False, **common),
           ("dense", "csr", "memmap", "stream"))
    for variant in ("practical", "analysed"):
        yield (f"DPSGDFClassifier/{variant}",
               lambda v=variant: DPSGDFClassifier(variant=v, epochs=2, **common), ("dense", "memmap", "stream"))
    yield "PrivateMeanCenterer", lambda: PrivateMeanCenterer(epsilon=1.0, random_state=0), \
        ("dense", "memmap")
    for variant in ("practical", "theory"):
        yield (f"AdaMixClassifier/{variant}",
               lambda v=variant: AdaMixClassifier(variant=v, epsilon=4.0, delta=1e-5,
                                                  random_state=0), ("dense", "stream"))
    # Regressors (issue 19): a real target, bounds declared wide enough.
    from sklearn_fdp import DPSGDRegressor, FeatureDPLinearRegression, FeatureDPSGDRegressor

    reg = dict(y_bounds=(-6.0, 6.0), **common)  # wider than any target here
    for loss in ("squared_error", "huber", "epsilon_insensitive"):
        yield (f"DPSGDRegressor/{loss}",
               lambda lo=loss: DPSGDRegressor(loss=lo, epochs=2, **reg),
               ("dense", "csr", "memmap") if loss == "squared_error" else ("dense", "csr"))
    for method in ("alg1", "dpsgd"):
        for label_public in (True, False):
            yield (f"FeatureDPSGDRegressor/{method}/label_public={label_public}",
                   lambda m=method, lp=label_public: FeatureDPSGDRegressor(
                       private_features=[0, 1], method=m, label_public=lp, epochs=2, **reg),
                   ("dense", "csr"))
    for solver in ("residual", "joint"):
        for label_public in (True, False):
            yield (f"FeatureDPLinearRegression/{solver}/label_public={label_public}",
                   lambda so=solver, lp=label_public: FeatureDPLinearRegression(
                       private_features=[0, 1], solver=so, label_public=lp,
                       row_norm_bounds=1.5, **reg),
                   ("dense", "csr"))
    yield ("FeatureDPLinearRegression/label_dp",
           lambda: FeatureDPLinearRegression(private_features=[], label_public=False,
                                             row_norm_bounds=1.5, **reg),
           ("dense", "csr"))
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    from sklearn_fdp import MLPFeatureDP, MLPFeatureDPRegressor

    for method in ("alg1", "dpsgd", "dp"):
        for per_example in ("outer", "vmap"):
            yield (f"MLPFeatureDP/{method}/{per_example}",
                   lambda m=method, pe=per_example: MLPFeatureDP(
                       hidden_layer_sizes=(8,), private_features=[0, 1], method=m,
                       per_example=pe, epochs=1, device="cpu", **common),
                   ("dense", "memmap", "stream") if per_example == "outer" else ("dense",))
    for method in ("alg1", "dp"):
        yield (f"MLPFeatureDPRegressor/{method}",
               lambda m=method: MLPFeatureDPRegressor(
                   hidden_layer_sizes=(8,), private_features=[0, 1], method=m, epochs=1,
                   device="cpu", **reg), ("dense",))


def _is_regressor(name):
    return name.split("/")[0] in ("DPSGDRegressor", "FeatureDPSGDRegressor",
                                  "FeatureDPLinearRegression", "MLPFeatureDPRegressor")


def _arrays(est):
    """The fitted arrays, by name, in the order they are hashed."""
    out = {}
    for name in ARRAY_ATTRS:
        value = getattr(est, name, None)
        if isinstance(value, np.ndarray):
            out[name] = np.ascontiguousarray(value)
    module = getattr(est, "module_", None)
    if module is not None:
        for pname, p in module.state_dict().items():
            out[pname] = p.detach().cpu().numpy()
    return out


def _digest(arrays):
    h = hashlib.sha256()
    for name, value in arrays.items():
        h.update(name.encode())
        h.update(value.tobytes())
    return h.hexdigest()


def _fit(est, X, y, name):
    if name.startswith("AdaMix"):
        mask = np.zeros(len(y), dtype=bool)
        mask[:24] = True
        return est.fit(X, y, public_mask=mask)
    if name == "PrivateMeanCenterer":
        return est.fit(X)
    return est.fit(X, y)


def _width(est, X):
    """The longest dot product inside the fit: the columns, or the widest layer."""
    sizes = [X.shape[1]] + list(getattr(est, "hidden_layer_sizes", ()) or ())
    return int(max(sizes))


# What the bits depend on beyond the order of sums: a library version (another
# algorithm or random stream) or another CPU (NumPy's SIMD exp/log paths, used
# by the accountant, round differently) -- no reassociation bound covers these.
NOT_REASSOCIATION = ("python", "machine", "numpy", "scipy", "numba", "scikit-learn", "torch", "cpu")


def kappa():
    """The condition number of the record data's Gram matrix (see tolerance.py)."""
    X, _ = _data("dense")
    return float(np.linalg.cond(X.T @ X))


def check(record, now, env_now, only=None):
    """Compare a fresh run with the record.

    Returns ``(mode, problems)``: ``mode`` is ``"bit"`` (the whole environment
    matches: every hash equal), ``"tolerance"`` (only the BLAS kernel, its
    threads or the numba/torch CPU target differ: every array within
    :func:`tolerance.array_tolerance`, ``epsilon_`` and ``dp_event_`` equal)
    or ``"skip"`` (a library version or the CPU differs: ``problems`` says
    which); ``problems`` lists what differs beyond what the mode allows.
    """
    from . import tolerance as tol

    env_rec = record["environment"]
    differ = sorted(k for k in set(env_rec) | set(env_now) if env_rec.get(k) != env_now.get(k))
    hard = [k for k in differ if k in NOT_REASSOCIATION]
    if hard:
        return "skip", [f"{k}: recorded {env_rec.get(k)!r}, running {env_now.get(k)!r}" for k in hard]
    fits = record["fits"] if only is None else {k: record["fits"][k] for k in only}
    problems = []
    if set(now) != set(fits):
        problems.append(f"cases differ: {sorted(set(now) ^ set(fits))}")
    mode = "tolerance" if differ else "bit"
    k = kappa()
    for key in sorted(set(now) & set(fits)):
        rec, new = fits[key], now[key]
        for field in ("epsilon_", "dp_event_"):  # the accountant sums no BLAS products
            if rec[field] != new[field]:
                problems.append(f"{key}: {field} {rec[field]} -> {new[field]}")
        if mode == "bit":
            if rec["arrays"] != new["arrays"]:
                problems.append(f"{key}: arrays changed")
            continue
        steps = tol.noisy_steps(rec["dp_event_"])
        if set(rec["values"]) != set(new["values"]):
            problems.append(f"{key}: arrays {sorted(rec['values'])} -> {sorted(new['values'])}")
            continue
        for name, values in rec["values"].items():
            a = np.array(values, dtype=float)
            b = np.array(new["values"][name], dtype=float)
            bound = tol.array_tolerance(a, rec["dtypes"][name], n_rows=N_ROWS,
                                        width=rec["width"], steps=steps, kappa=k)
            if a.shape != b.shape or not np.all(np.abs(a - b) <= bound):
                worst = float(np.max(np.abs(a - b))) if a.shape == b.shape else math.inf
                problems.append(f"{key}: {name} moved {worst:.3g} > bound {bound:.3g}")
    return mode, problems


def compute(only=None):
    """Fit every case (or those whose key ``name[kind]`` is in ``only``)."""
    from sklearn_fdp import _outofcore

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, kinds in _cases():
            k = 3 if "multi" in name else (0 if _is_regressor(name) else 2)
            for kind in kinds:
                if only is not None and f"{name}[{kind}]" not in only:
                    continue
                X, y = _data("csr" if kind == "csr" else "dense", k=k)
                if kind in ("memmap", "stream"):
                    path = Path(tmp) / f"X{len(out)}.npy"
                    np.save(path, X)
                    X = np.load(path, mmap_mode="r")
                saved = _outofcore.STREAM_MIN_BYTES
                if kind == "stream":
                    _outofcore.STREAM_MIN_BYTES = 0
                try:
                    est = _fit(make(), X, y, name)
                finally:
                    _outofcore.STREAM_MIN_BYTES = saved
                arrays = _arrays(est)
                out[f"{name}[{kind}]"] = {
                    "arrays": _digest(arrays),
                    "dtypes": {k: str(v.dtype) for k, v in arrays.items()},
                    "width": _width(est, X),
                    "values": {k: [repr(float(x)) for x in v.ravel()] for k, v in arrays.items()},
                    "epsilon_": repr(float(getattr(est, "epsilon_", float("nan")))),
                    "dp_event_": repr(getattr(est, "dp_event_", None)),
                }
    return out


def main(argv=None):
    """``--write``: record; ``--out PATH``: write a fresh run there;
    ``--check [KEY ...]``: compare (all, or the given ``name[kind]`` keys)
    with the record and print ``{"mode", "problems", "environment"}`` as JSON
    (the subprocess test runs this under several OpenBLAS kernels)."""
    argv = sys.argv[1:] if argv is None else argv
    if "--check" in argv:
        only = argv[argv.index("--check") + 1:] or None
        record = json.loads(RECORD.read_text())
        env = environment()
        mode, problems = check(record, compute(only), env, only)
        print(json.dumps({"mode": mode, "problems": problems, "environment": env}))
        return
    result = {"environment": environment(), "fits": compute()}
    if "--out" in argv:
        Path(argv[argv.index("--out") + 1]).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    elif "--write" in argv:
        RECORD.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(result['fits'])} fingerprints to {RECORD}")
    else:
        print(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

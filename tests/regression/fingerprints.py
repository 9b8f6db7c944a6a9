"""Bit-level fingerprints of every estimator's fit, for refactors that must not change results.

``python -m tests.regression.fingerprints --write`` records, for every
estimator × method/variant × input kind (dense, CSR where accepted, memmap
where accepted, and "stream": a memmap read batch by batch, the out-of-core
path, forced by setting ``STREAM_MIN_BYTES`` to 0), a SHA-256 of the fitted arrays (``coef_``, ``intercept_``,
``mean_``, the MLP's weights), ``epsilon_`` and ``repr(dp_event_)`` into
``fingerprints.json`` beside this file, with the library versions they were
recorded under. ``tests/regression/test_fingerprints.py`` compares a fresh
run with the record when the versions match (floating-point results depend
on NumPy/SciPy/numba/scikit-learn/torch builds, so elsewhere it skips).

Issue 17 ("one module per mechanism") requires bit-identical ``coef_``,
``epsilon_`` and ``dp_event_`` before and after the move: record first, move,
then run the test.
"""

import hashlib
import json
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


def _data(kind, n=240, d=8, k=2, seed=0):
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


def _digest(est):
    h = hashlib.sha256()
    for name in ARRAY_ATTRS:
        value = getattr(est, name, None)
        if isinstance(value, np.ndarray):
            h.update(name.encode())
            h.update(np.ascontiguousarray(value).tobytes())
    module = getattr(est, "module_", None)
    if module is not None:
        for pname, p in module.state_dict().items():
            h.update(pname.encode())
            h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()


def _fit(est, X, y, name):
    if name.startswith("AdaMix"):
        mask = np.zeros(len(y), dtype=bool)
        mask[:24] = True
        return est.fit(X, y, public_mask=mask)
    if name == "PrivateMeanCenterer":
        return est.fit(X)
    return est.fit(X, y)


def compute():
    from sklearn_fdp import _outofcore

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, kinds in _cases():
            k = 3 if "multi" in name else (0 if _is_regressor(name) else 2)
            for kind in kinds:
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
                out[f"{name}[{kind}]"] = {
                    "arrays": _digest(est),
                    "epsilon_": repr(float(getattr(est, "epsilon_", float("nan")))),
                    "dp_event_": repr(getattr(est, "dp_event_", None)),
                }
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    result = {"versions": versions(), "fits": compute()}
    if "--write" in argv:
        RECORD.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(result['fits'])} fingerprints to {RECORD}")
    else:
        print(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

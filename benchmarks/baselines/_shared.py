"""What the baseline scripts share. Standard library only: each script runs in its own
virtualenv (``setup_envs.sh``) and imports nothing from sklearn_fdp; run as a script, its
folder is on ``sys.path``, so ``from _shared import ...`` finds this file."""

import argparse
import json
import platform
import time


def baseline_parser(doc, epsilons="0.03,0.1,0.3,1,4"):
    """The command line every baseline takes (README, "Running"): ``--data``,
    ``--epsilons``, ``--delta``, ``--seeds``, ``--out``; a script adds its own options."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--epsilons", default=epsilons)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--out", required=True)
    return p


def parse_floats(s):
    """``"0.1,1"`` -> ``[0.1, 1.0]``."""
    return [float(v) for v in s.split(",") if v.strip()]


def parse_ints(s):
    """``"0,1"`` -> ``[0, 1]``."""
    return [int(v) for v in s.split(",") if v.strip()]


def load_split(path, y_dtype):
    """``X, y, X_test, y_test, fit_idx, val_idx`` from the input ``.npz`` (README,
    "Input"): float64 features, labels as ``y_dtype``; overlapping indices raise."""
    import numpy as np

    d = np.load(path)
    X = np.asarray(d["X_train"], dtype=np.float64)
    y = np.asarray(d["y_train"]).astype(y_dtype)
    Xte = np.asarray(d["X_test"], dtype=np.float64)
    yte = np.asarray(d["y_test"]).astype(y_dtype)
    fit_idx = np.asarray(d["fit_idx"], dtype=np.int64)
    val_idx = np.asarray(d["val_idx"], dtype=np.int64)
    if np.intersect1d(fit_idx, val_idx).size:
        raise ValueError("fit_idx and val_idx overlap")
    return X, y, Xte, yte, fit_idx, val_idx


def selection_protocol(seeds):
    """The ``selection_protocol`` entry of a result: grid points fitted on ``fit_idx`` and
    scored on ``val_idx`` of the training set, over ``seeds``."""
    return {"fit": "X_train[fit_idx]", "score": "X_train[val_idx]", "seeds": seeds,
            "criterion": "mean validation accuracy"}


def result_head(method, version, privacy, delta, delta_used):
    """The first entries of a result: what ran and under which guarantee."""
    return {"method": method, "version": version, "privacy": privacy, "delta": delta,
            "delta_used": delta_used}


def result_tail(versions, data, t_start, results, **extra):
    """The last entries of a result: environment (``versions``: library -> version), the
    data file, the seconds since ``t_start``, the per-fit rows and ``extra``."""
    return {"environment": {"python": platform.python_version(), **versions}, "data": data,
            "total_seconds": time.perf_counter() - t_start, "results": results, **extra}


def write_result(out, path, tag):
    """Write ``out`` as JSON to ``path``, say so with ``[tag]``; the exit status 0."""
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"[{tag}] wrote {path} in {out['total_seconds']:.0f}s", flush=True)
    return 0


def make_private(engine, mode, criterion, **kwargs):
    """Opacus's ``engine.make_private`` at σ = 1, C = 1 with ``grad_sample_mode=mode``;
    returns ``(model, optimizer, criterion, data_loader)`` (ghost clipping wraps the
    criterion too)."""
    kwargs.update(noise_multiplier=1.0, max_grad_norm=1.0, grad_sample_mode=mode)
    if mode == "ghost":
        return engine.make_private(criterion=criterion, **kwargs)
    model, optimizer, loader = engine.make_private(**kwargs)
    return model, optimizer, criterion, loader

"""Every estimator's fit matches the recorded fingerprints (see fingerprints.py):
bit for bit where the environment that decides the bits matches the record's,
within the reassociation bound of tolerance.py where only the BLAS kernel (or
its threads, or the numba/torch CPU target) differs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from . import tolerance as tol
from .fingerprints import RECORD, check, compute, environment

ROOT = Path(__file__).resolve().parents[2]


def _record():
    if not RECORD.exists():
        pytest.skip("no fingerprints recorded (python -m tests.regression.fingerprints --write)")
    return json.loads(RECORD.read_text())


@pytest.mark.slow
def test_fits_match_the_record():
    record = _record()
    mode, problems = check(record, compute(), environment())
    if mode == "skip":
        pytest.skip(f"fingerprints recorded elsewhere: {problems}")
    assert not problems, f"{len(problems)} fits changed ({mode} comparison): {problems}"


# One dense fit per family whose arithmetic goes through NumPy's BLAS, small
# enough to run four times in subprocesses.
SUBSET = ["DPSGDClassifier[dense]", "DPSGDRegressor/huber[dense]",
          "FeatureDPLogisticRegression/alg1/mask/label_public=True[dense]",
          "FeatureDPLogisticRegression/sufficient_statistic[dense]",
          "FeatureDPLinearRegression/residual/label_public=True[dense]",
          "FeatureDPSGDRegressor/dpsgd/label_public=False[dense]",
          "DPSGDFClassifier/practical[dense]", "AdaMixClassifier/practical[dense]"]


def _kernels():
    """OpenBLAS kernels this CPU can run (unset: the one OpenBLAS picks)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as f
    except ImportError:  # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as f
    if not f.get("SSE3"):
        return [None]  # not x86-64: OpenBLAS's x86 coretypes do not apply
    out = [None, "Prescott"]
    if f.get("AVX"):
        out.append("Sandybridge")
    if f.get("AVX2") and f.get("FMA3"):
        out.append("Haswell")
    if f.get("AVX512F") and f.get("AVX512BW"):
        out.append("SkylakeX")
    return out


def test_the_check_holds_under_every_openblas_kernel():
    # Each run either matches bit for bit (the recorded kernel) or within the
    # derived bound (another kernel); at least one run takes the tolerance
    # path wherever two kernels differ, so that path is exercised here.
    record = _record()
    if not all(info.startswith("internal_api=openblas") for info in environment()["blas"]):
        pytest.skip("NumPy's BLAS is not OpenBLAS: OPENBLAS_CORETYPE does not apply")
    modes = {}
    for kernel in _kernels():
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
        if kernel:
            env["OPENBLAS_CORETYPE"] = kernel
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        proc = subprocess.run([sys.executable, "-m", "tests.regression.fingerprints", "--check", *SUBSET],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if out["mode"] == "skip":
            pytest.skip(f"fingerprints recorded elsewhere: {out['problems']}")
        assert not out["problems"], (kernel, out["mode"], out["problems"])
        modes[kernel] = (out["mode"], tuple(out["environment"]["blas"]))
    kinds = {blas for _, blas in modes.values()}
    if len(kinds) > 1:
        assert "tolerance" in {m for m, _ in modes.values()}, modes
    # The bit path is taken exactly where the kernel is the recorded one.
    for kernel, (mode, blas) in modes.items():
        assert (mode == "bit") == (blas == tuple(record["environment"]["blas"])), (kernel, mode)


def test_the_tolerance_path_rejects_a_real_change():
    # A check that cannot fail proves nothing: a one-ulp move passes, a move
    # at the scale of a changed noise draw (1e-6) fails, and a changed epsilon_
    # fails, all on the tolerance path (a different BLAS kernel claimed).
    record = _record()
    key = "DPSGDClassifier[dense]"
    fit = record["fits"][key]
    env = dict(record["environment"], blas=["internal_api=openblas;architecture=Other"])

    def moved(delta, field=None):
        new = json.loads(json.dumps(fit))
        if field:
            new[field] = "2.5"
            return new
        values = np.array(new["values"]["coef_"], dtype=float)
        values[0] = values[0] + delta if delta else np.nextafter(values[0], np.inf)
        new["values"]["coef_"] = [repr(float(v)) for v in values]
        return new

    assert check(record, {key: moved(0.0)}, env, only=[key]) == ("tolerance", [])
    mode, problems = check(record, {key: moved(1e-6)}, env, only=[key])
    assert mode == "tolerance" and len(problems) == 1 and "coef_ moved" in problems[0]
    _, problems = check(record, {key: moved(0.0, field="epsilon_")}, env, only=[key])
    assert problems and "epsilon_" in problems[0]
    # A library version differing is not reassociation: skip, naming it.
    mode, problems = check(record, {}, dict(record["environment"], numpy="0.0"), only=[key])
    assert mode == "skip" and "numpy" in problems[0]


def test_the_bound_is_the_reassociation_bound():
    # gamma_N = N u / (1 - N u); two orders of a float64 sum of 248 terms differ
    # by at most 2 gamma_248 of the terms' absolute sum.
    u = 2.0 ** -53
    assert tol.gamma(248) == pytest.approx(248 * u / (1 - 248 * u), rel=1e-15)
    assert tol.gamma(10, "float32") == pytest.approx(10 * 2.0 ** -24 / (1 - 10 * 2.0 ** -24))
    assert tol.noisy_steps("SelfComposedDpEvent(event=GaussianDpEvent(noise_multiplier=2.0), count=4)") == 4
    assert tol.noisy_steps("GaussianDpEvent(noise_multiplier=2.0)") == 1
    rng = np.random.default_rng(0)
    terms = rng.standard_normal(248)
    forward = sum(terms.tolist())
    backward = sum(terms[::-1].tolist())
    assert abs(forward - backward) <= 2 * tol.gamma(248) * np.abs(terms).sum()

"""`import sklearn_fdp` is light: heavy dependencies load on first use (issue 21)."""

import json
import subprocess
import sys

import pytest

# Dependencies `import sklearn_fdp` must not load: they cost seconds together,
# and the command line's --version/--help need none of them.
HEAVY = ("pandas", "dp_accounting", "torch", "matplotlib", "skops", "dask")


def _loaded_after(code):
    """Top-level modules of HEAVY (and sklearn) in sys.modules after running ``code``."""
    probe = (f"{code}\nimport json, sys\n"
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_import_loads_no_heavy_dependency():
    loaded = _loaded_after("import sklearn_fdp")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert "sklearn" not in loaded  # scikit-learn itself loads pandas when installed


def test_estimators_do_not_load_accounting_until_used():
    loaded = _loaded_after("from sklearn_fdp import FeatureDPLogisticRegression, "
                           "DPSGDClassifier, privacy_report")
    assert not loaded & {"dp_accounting", "torch", "matplotlib", "skops", "dask"}


def test_dpsgd_import_and_fit_load_only_dpsgd_modules():
    """`from sklearn_fdp import DPSGDClassifier` and a fit (what every GridSearchCV worker
    does) import DP-SGD's modules only: not the other estimators, their mechanisms, torch
    or the feature specs (issue 18, cold start)."""
    code = ("import numpy as np\nfrom sklearn_fdp import DPSGDClassifier\n"
            "X = np.random.default_rng(0).normal(size=(60, 3)); y = (X[:, 0] > 0).astype(int)\n"
            "DPSGDClassifier(epsilon=None, noise_multiplier=1.0, epochs=1, random_state=0)"
            ".fit(X, y)\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    unwanted = {"sklearn_fdp.linear._adamix", "sklearn_fdp.linear._dpsgdf",
                "sklearn_fdp.linear._feature_dp_logistic", "sklearn_fdp._mechanisms.adamix",
                "sklearn_fdp._mechanisms.dpsgdf", "sklearn_fdp._mechanisms.fdp",
                "sklearn_fdp.features", "sklearn_fdp.neural", "torch", "matplotlib"}
    assert "sklearn_fdp.linear._dpsgd" in loaded  # the probe did import the estimator
    assert not loaded & unwanted, sorted(loaded & unwanted)


def test_linear_names_resolve_lazily():
    from sklearn_fdp import linear

    for name in linear.__all__:
        cls = getattr(linear, name)
        assert cls.__name__ == name and name in dir(linear)
        assert cls.__module__.startswith("sklearn_fdp.linear._")
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        linear.Nope  # noqa: B018


def test_cli_version_loads_no_heavy_dependency():
    loaded = _loaded_after("import sys\nsys.argv = ['sklearn-fdp', '--version']\n"
                           "from sklearn_fdp.cli import main\nmain()")
    assert not loaded & (set(HEAVY) | {"sklearn", "scipy"})


def test_public_names_resolve():
    import sklearn_fdp

    for name in sklearn_fdp.__all__:
        assert getattr(sklearn_fdp, name) is not None, name
    assert set(sklearn_fdp.__all__) <= set(dir(sklearn_fdp))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sklearn_fdp.nope  # noqa: B018
    assert sklearn_fdp.accounting.DpEvent.__module__.startswith("dp_accounting")


def test_docs_quote_the_startup_benchmark():
    """The start-up table of docs/cli.md is benchmarks/results/startup.json's medians."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    rows = json.loads((root / "benchmarks" / "results" / "startup.json").read_text())["commands"]
    ref = json.loads((root / "benchmarks" / "results" / "startup.json").read_text())["compare"]
    doc = (root / "docs" / "cli.md").read_text()
    for name in ("sklearn-fdp --version", "sklearn-fdp --help", "python -c 'import sklearn_fdp'"):
        now = f"{rows[name]['median_s']:.3f} s"
        old = rows.get(f"{name} [{ref['ref']}]")
        cells = f"| `{name}` | {now} | " + (f"{old['median_s']:.3f} s |" if old else "|")
        assert cells in doc, cells

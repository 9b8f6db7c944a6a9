"""The declared dependency bounds and what CI tests agree."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lower_bounds():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    bounds = {}
    for dep in deps:
        name, version = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", dep.replace(" ", "")).groups()
        bounds[name.lower()] = version
    return bounds


def _pins():
    pins = {}
    for line in (ROOT / ".ci" / "minimum-versions.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = version
    return pins


def test_ci_tests_exactly_the_declared_minimum_versions():
    # Every runtime dependency has a lower bound, and CI's second job pins
    # each one to exactly that bound.
    assert _lower_bounds() == _pins()


def _extras():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_the_test_extra_holds_every_optional_dependency():
    # `make test` (CI) installs [test] alone: the suite imports torch, skops,
    # dask and matplotlib, so each extra a user can ask for is in it, with the
    # same version range; torch is pinned there to a version inside [torch]'s
    # range (the one tests/regression's fingerprints were recorded with).
    from packaging.requirements import Requirement

    extras = _extras()
    test = set(extras["test"])
    for name in ("cli", "dask", "plot"):
        missing = set(extras[name]) - test
        assert not missing, f"[{name}] requirements missing from [test]: {sorted(missing)}"
    (user_torch,) = map(Requirement, extras["torch"])
    (test_torch,) = [Requirement(r) for r in test if Requirement(r).name == "torch"]
    (pin,) = test_torch.specifier
    assert pin.operator == "==" and user_torch.specifier.contains(pin.version), (
        f"[test] pins {test_torch}, outside [torch]'s {user_torch}")
    assert any(req.startswith("pytest-xdist") for req in test)  # make test-fast -n auto


def test_torch_is_a_range_not_a_pin():
    # An exact pin clashes with any torch a user already has (issue 21).
    (torch,) = _extras()["torch"]
    assert re.fullmatch(r"torch>=[0-9.]+,<[0-9.]+", torch.replace(" ", "")), torch


def test_the_demo_installs_no_test_dependencies():
    # `make demo` installs the runtime dependencies and matplotlib for its
    # figure, not torch/dask/hypothesis.
    makefile = (ROOT / "Makefile").read_text()
    installs = re.findall(r'pip install --quiet -e "\.\[(\w+)\]"', makefile)
    assert installs == ["plot", "test", "docs"]  # docs: `make docs`, its own .venv-docs
    assert set(_extras()["plot"]) == {"matplotlib>=3.7"}


def test_the_docs_toolchain_is_not_part_of_the_test_extra():
    # The docs site has its own extra and CI job (.ci/run docs): the test jobs
    # do not install Sphinx's themes and gallery.
    from packaging.requirements import Requirement

    extras = _extras()
    docs = {Requirement(r).name for r in extras["docs"]}
    test = {Requirement(r).name for r in extras["test"]}
    assert {"sphinx", "myst-parser", "sphinx-gallery", "pydata-sphinx-theme"} <= docs
    assert not docs & test - {"numpydoc", "matplotlib"}, sorted(docs & test)
    for req in map(Requirement, extras["docs"]):
        assert any(s.operator == ">=" for s in req.specifier), f"{req}: no lower bound"


def test_the_package_ships_py_typed_and_the_bundled_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "py.typed" in data["package-data"]["sklearn_fdp"]
    assert (ROOT / "sklearn_fdp" / "py.typed").is_file()
    assert "data/*.gz" in data["package-data"]["sklearn_fdp.datasets"]
    # The example schema of docs/cli.md is in the wheel (it was not, issue 31);
    # docs/examples/adult_schema.json is a link to the packaged file.
    assert "data/*.json" in data["package-data"]["sklearn_fdp.datasets"]
    packaged = ROOT / "sklearn_fdp" / "datasets" / "data" / "adult_schema.json"
    assert packaged.is_file()
    assert (ROOT / "docs" / "examples" / "adult_schema.json").resolve() == packaged.resolve()
    assert "sklearn_fdp/datasets/data/adult_schema.json" in (ROOT / ".ci" / "run").read_text()

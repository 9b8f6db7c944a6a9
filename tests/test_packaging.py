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

"""Shared fixtures.

``SKLEARN_FDP_SEED`` picks the seed of seeded tests (default 42); set it to
``all`` to run them for seeds 0-99.
"""

import os

import numpy as np
import pytest


def _seeds():
    value = os.environ.get("SKLEARN_FDP_SEED", "42")
    if value == "all":
        return list(range(100))
    return [int(value)]


def pytest_generate_tests(metafunc):
    if "global_seed" in metafunc.fixturenames:
        metafunc.parametrize("global_seed", _seeds())


@pytest.fixture
def rng(global_seed):
    return np.random.default_rng(global_seed)

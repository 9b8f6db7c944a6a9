"""Shared fixtures.

``SKLEARN_FDP_SEED`` picks the seed of seeded tests (default 42); set it to
``all`` to run them for seeds 0-99.
"""

import atexit
import os
import shutil
import tempfile

import numpy as np
import pytest

# Calibrated noise multipliers are cached on disk (issue 18). The suite uses a
# fresh directory of its own, never the user's ~/.cache, removed at exit; the
# processes it starts inherit it.
_CACHE_DIR = tempfile.mkdtemp(prefix="sklearn_fdp-test-cache-")
os.environ["SKLEARN_FDP_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)


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


@pytest.fixture
def torch_one_thread():
    """torch on one thread for a test (the MLP tests use it for every test): tiny models pay
    more for thread start-up than they save, and CPU results are then bit-reproducible
    whatever the machine's core count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

"""Every estimator's fit is bit-identical to the recorded fingerprints (see fingerprints.py)."""

import json

import pytest

from .fingerprints import RECORD, compute, versions


@pytest.mark.slow
def test_fits_are_bit_identical_to_the_record():
    if not RECORD.exists():
        pytest.skip("no fingerprints recorded (python -m tests.regression.fingerprints --write)")
    record = json.loads(RECORD.read_text())
    if record["versions"] != versions():
        pytest.skip(f"fingerprints recorded under {record['versions']}, running {versions()}")
    now = compute()
    assert set(now) == set(record["fits"])
    changed = {k: (record["fits"][k], v) for k, v in now.items() if v != record["fits"][k]}
    assert not changed, f"{len(changed)} fits changed: {sorted(changed)}"

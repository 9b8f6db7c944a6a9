"""Every benchmark and example script compiles under the supported Python.

The scripts are not run by the tests (they take minutes), so a syntax
error in one would otherwise surface only when someone reruns it (as an
f-string nesting its own quotes did: valid from Python 3.12, a SyntaxError
on 3.11). One cross-script contract is checked as well (bench_mlp.py reads
bench_fdp.prepare()'s split).
"""

import pathlib
import py_compile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for folder in ("benchmarks", "examples") for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=[str(p.relative_to(ROOT)) for p in SCRIPTS])
def test_script_compiles(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "out.pyc"), doraise=True)


def test_bench_fdp_prepare_serves_its_folds_and_bench_mlps_split(monkeypatch):
    # bench_mlp.py selects on bench_fdp.prepare()'s fit_idx/val_idx; bench_fdp
    # itself on the stratified folds. Dropping either breaks a script that
    # only fails minutes into a rerun.
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import numpy as np
    from bench_fdp import N_FOLDS, prepare

    data = prepare(subsample=500)
    n = len(data["y_train"])
    assert len(data["folds"]) == N_FOLDS
    held_out = np.sort(np.concatenate([val for _, val in data["folds"]]))
    np.testing.assert_array_equal(held_out, np.arange(n))
    assert len(data["fit_idx"]) + len(data["val_idx"]) == n
    assert not set(data["fit_idx"]) & set(data["val_idx"])

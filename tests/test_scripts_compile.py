"""Every benchmark and example script compiles under the supported Python.

The scripts are not imported by the tests (they run for minutes), so a
syntax error in one would otherwise surface only when someone reruns it
(as an f-string nesting its own quotes did: valid from Python 3.12, a
SyntaxError on 3.11).
"""

import pathlib
import py_compile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for folder in ("benchmarks", "examples") for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=[str(p.relative_to(ROOT)) for p in SCRIPTS])
def test_script_compiles(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "out.pyc"), doraise=True)

"""sklearn_fdp.show_versions(): what a bug report needs, without importing anything."""

import sys

import sklearn_fdp
from sklearn_fdp import _show_versions

from ._helpers import run_python


def test_show_versions_prints_the_library_python_and_every_dependency(capsys):
    sklearn_fdp.show_versions()
    out = capsys.readouterr().out
    assert f"sklearn_fdp:   {sklearn_fdp.__version__}" in out
    assert sys.version.split()[0] in out
    for name in ("numpy", "scipy", "scikit-learn", "numba", "dp-accounting", "pandas",
                 "torch", "skops", "dask", "platform"):
        assert f"  {name}:" in out


def test_a_missing_optional_dependency_is_reported_not_raised(monkeypatch, capsys):
    monkeypatch.setattr(_show_versions, "_DEPENDENCIES",
                        (("numpy", "required"), ("no-such-dist-xyz", "optional: test")))
    sklearn_fdp.show_versions()
    out = capsys.readouterr().out
    assert "no-such-dist-xyz: not installed  (optional: test)" in out


def test_show_versions_imports_no_optional_dependency():
    # In a fresh interpreter: versions come from metadata, so torch, dask and
    # skops are not loaded by asking for their versions.
    code = (
        "import sys, sklearn_fdp\n"
        "heavy = ('torch', 'dask', 'distributed', 'skops', 'matplotlib')\n"
        "before = {m for m in heavy if m in sys.modules}\n"
        "sklearn_fdp.show_versions()\n"
        "print('NEWLY', sorted({m for m in heavy if m in sys.modules} - before))\n"
    )
    out = run_python(code)
    assert "NEWLY []" in out

"""What the docs name exists: repository paths, public names, and the sections benchmarks cite.

A rename (a module split into a package, a benchmark moved into ``benchmarks/studies/``, a
function renamed) leaves every page that names the old one pointing nowhere, and nothing else
fails. These checks read README.md, ``docs/**/*.md`` and the ``README.md`` files of
``benchmarks/`` (CHANGELOG.md is history: it names what existed then):

* a code span that is a path under a folder of the repository (```sklearn_fdp/_budget.py```,
  ```benchmarks/studies/bench_fdp_alpha.py```) names a file or folder that exists;
* a code span that is a dotted name under ``sklearn_fdp``
  (```sklearn_fdp.accounting.gaussian_release```) imports, attribute by attribute;
* every section a benchmark's docstring says quotes it (its "Quoted in" list) is a heading of
  that page.
"""

import ast
import importlib
import pathlib
import re

import pytest

from .test_docs_links import _links

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"),
                *(ROOT / "benchmarks").rglob("README.md")])
PAGES = [p for p in PAGES if "_build" not in p.parts]

_FOLDERS = ("sklearn_fdp", "benchmarks", "tests", "examples", "docs", ".ci")
_PATH = re.compile(r"(?:%s)/[\w./-]*" % "|".join(re.escape(f) for f in _FOLDERS))
_DOTTED = re.compile(r"sklearn_fdp(?:\.\w+)+")
# Named on purpose although they do not exist in the repository.
# Written by `make docs`, ignored by git:
_BUILT = ("docs/generated", "docs/_build", "docs/auto_examples", "docs/api_reference.rst")
_GONE_ON_PURPOSE = {
    # docs/cli.md: old model files refer to it; loading one is refused, and the page says why.
    "sklearn_fdp.cli._scale_columns",
    # docs/architecture.md: what model files written before issue 33's moves name.
    "sklearn_fdp._tabular", "sklearn_fdp._bounded", "sklearn_fdp._preprocessing",
    "sklearn_fdp.neural._mlp.MLPFeatureDP",
}


def _spans(text):
    """Code spans outside fenced blocks (a transcript's paths are the user's, not ours)."""
    return [span.strip() for span in _links(text)[1]]


def missing_paths(text):
    """Repository paths named in ``text``'s code spans that do not exist."""
    missing = []
    for span in _spans(text):
        if (not _PATH.fullmatch(span) or any(c in span for c in "*<{")
                or span.startswith(_BUILT)):
            continue
        if not (ROOT / span.rstrip("/")).exists():
            missing.append(span)
    return missing


def _resolves(dotted):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        # A module from another checkout (an editable install's fallback) is not this tree's.
        if not str(getattr(obj, "__file__", ROOT)).startswith(str(ROOT)):
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def missing_names(text):
    """Dotted ``sklearn_fdp`` names in ``text``'s code spans that do not import."""
    missing = []
    for span in _spans(text):
        name = span.removesuffix("()")
        if _DOTTED.fullmatch(name) and name not in _GONE_ON_PURPOSE and not _resolves(name):
            missing.append(span)
    return missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_paths_exist(page):
    assert missing_paths(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_public_names_import(page):
    assert missing_names(page.read_text(encoding="utf-8")) == []


def _quoted_in(script):
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    _, _, tail = doc.partition("Quoted in")
    return re.findall(r"^\* (\S+) § \"(.+)\"$", tail, re.MULTILINE)


BENCHMARKS = sorted(p for p in (ROOT / "benchmarks").glob("*.py")
                    if p.name != "claims.py" and not p.name.startswith("_"))


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.name)
def test_each_benchmark_names_the_sections_quoting_it(script):
    quoted = _quoted_in(script)
    assert quoted, f"{script.name}'s docstring lists no 'Quoted in' section"
    for page, heading in quoted:
        text = (ROOT / page).read_text(encoding="utf-8")
        headings = [line.lstrip("#").strip() for line in text.splitlines()
                    if line.startswith("#")]
        assert any(h.startswith(heading) for h in headings), (script.name, page, heading)


def test_the_checks_catch_a_renamed_path_and_name():
    text = ("See `sklearn_fdp/_budget.py`, `sklearn_fdp/gone.py`, `sklearn_fdp.accounting`"
            " and `sklearn_fdp.accounting.no_such_function()`.\n"
            "```\n`sklearn_fdp/in_a_transcript.py`\n```\n")
    assert missing_paths(text) == ["sklearn_fdp/gone.py"]
    assert missing_names(text) == ["sklearn_fdp.accounting.no_such_function()"]
